"""Qwen2-VL's vision side: image preprocessing and the vision encoder of an mmproj GGUF.

    enc = pyggml.models.vision.load("mmproj.gguf")          # VisionEncoder (projector qwen2vl_merger)
    img = enc.preprocess(image)                             # Image: pixel patches and the patch grid
    embd = enc.encode(img)                                  # float32 [n_tokens, n_embd of the text model]

Preprocessing is Qwen2VLImageProcessor's: the image is resized (bicubic, with Pillow) to a size whose
sides are multiples of patch_size * merge_size (28) and whose area is within [min_pixels, max_pixels]
(smart_resize), rescaled to [0, 1], normalised with the file's image_mean / image_std, duplicated over
the two temporal steps and cut into patches ordered by 2x2 merge window (row-major windows, row-major
patches inside each), each flattened as (channel, time, y, x): pixel_values [n_patches, 3 * 2 * 14 * 14].

The encoder is llama.cpp's clip graph for PROJECTOR_TYPE_QWEN2VL (tools/mtmd/models/qwen2vl.cpp):
the patch embedding (one kernel per temporal step, summed), per block LayerNorm -> Q/K/V with biases
-> RoPE VISION over the patch's (h, w) position (rope_multi, n_dims = head_dim / 2, four sections of
head_dim / 4, positions h | w | h | w) -> full attention (mul_mat, soft_max_ext) -> output projection
-> residual -> LayerNorm -> MLP with quick GELU -> residual; then v.post_ln, the 2x2 merge (four
consecutive patches become one row of 4 * n_embd) and the merger MLP mm.0 -> GELU -> mm.2. Where it
differs from llama.cpp: the patch embedding is a mul_mat over the flattened patches (llama.cpp's two
conv_2d over the image give the same sums), the merger's GELU is the erf form transformers uses
(llama.cpp: ggml_gelu, the tanh approximation). llama.cpp's conv_2d rounds the image and the kernel
to fp16 even in an F32 file (its im2col is F16); the mul_mat form keeps F32 files exact.
"""
import math
import os

import numpy as np

from pyggml import _ops as op
from pyggml._enums import RopeType, Type
from pyggml._graph import CGraph, default_threads, set_input
from pyggml._tensor import Context

__all__ = ["Image", "VisionEncoder", "load", "load_image", "patchify", "smart_resize"]

PROJECTORS = ("qwen2vl_merger",)
# Qwen2VLImageProcessor's defaults
MIN_PIXELS, MAX_PIXELS = 56 * 56, 28 * 28 * 1280
_MAX_RATIO = 200


def smart_resize(height, width, factor=28, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS):
    """The size (height, width) Qwen2-VL resizes an image to: both multiples of factor, the area
    within [min_pixels, max_pixels], the aspect ratio kept as well as that allows. ValueError for an
    aspect ratio over 200 (as transformers) or an empty image."""
    if height <= 0 or width <= 0:
        raise ValueError(f"smart_resize: the image is empty ({height} x {width})")
    if max(height, width) / min(height, width) > _MAX_RATIO:
        raise ValueError(f"smart_resize: the aspect ratio must be at most {_MAX_RATIO}, got {height} x {width}")
    h = round(height / factor) * factor
    w = round(width / factor) * factor
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


def load_image(path):
    """An image file as uint8 RGB [height, width, 3] (needs Pillow)."""
    try:
        from PIL import Image as PILImage
    except ImportError as e:
        raise ImportError("load_image: reading image files needs Pillow (pip install pyggml[vision])") from e
    with PILImage.open(path) as im:
        return np.asarray(im.convert("RGB"))


def _rgb(image):
    """uint8 [H, W, 3] from a path, a PIL image or an array ([H, W], [H, W, 3|4]; uint8, or floats in [0, 1])."""
    if isinstance(image, (str, os.PathLike)):
        return load_image(image)
    if hasattr(image, "convert") and hasattr(image, "size"):         # a PIL image
        return np.asarray(image.convert("RGB"))
    a = np.asarray(image)
    if a.ndim == 2:
        a = np.repeat(a[:, :, None], 3, axis=2)
    if a.ndim != 3 or a.shape[2] not in (3, 4):
        raise ValueError(f"preprocess: an image array must be [height, width], [height, width, 3] or "
                         f"[height, width, 4], got shape {a.shape}")
    a = a[:, :, :3]
    if a.dtype != np.uint8:
        if not np.issubdtype(a.dtype, np.floating):
            raise TypeError(f"preprocess: an image array must be uint8 or float in [0, 1], got {a.dtype}")
        a = np.clip(np.rint(a * 255.0), 0, 255).astype(np.uint8)
    return a


def _resize(rgb, height, width):
    if rgb.shape[:2] == (height, width):
        return rgb
    try:
        from PIL import Image as PILImage
    except ImportError as e:
        raise ImportError(f"preprocess: resizing {rgb.shape[0]} x {rgb.shape[1]} to {height} x {width} needs "
                          f"Pillow (pip install pyggml[vision]); or pass an image of that size") from e
    return np.asarray(PILImage.fromarray(rgb).resize((width, height), PILImage.Resampling.BICUBIC))


def patchify(pixels, patch_size=14, merge_size=2, temporal_patch_size=2):
    """[C, H, W] float32 -> [n_patches, C * T * P * P], patches ordered by merge window (as
    Qwen2VLImageProcessor), each repeated over the T temporal steps; and the grid (gh, gw) in patches."""
    c, h, w = pixels.shape
    gh, gw, m, p = h // patch_size, w // patch_size, merge_size, patch_size
    x = pixels.reshape(c, gh // m, m, p, gw // m, m, p).transpose(1, 4, 2, 5, 0, 3, 6)   # wy wx my mx c y x
    x = np.broadcast_to(x[:, :, :, :, :, None], (*x.shape[:5], temporal_patch_size, p, p))
    return np.ascontiguousarray(x.reshape(gh * gw, c * temporal_patch_size * p * p), dtype=np.float32), (gh, gw)


class Image:
    """A preprocessed image: pixel_values [n_patches, C * T * P * P] float32, grid (gh, gw) in patches
    (image_grid_thw = (1, gh, gw)), n_tokens = gh * gw / merge^2 and the (h, w) of each token."""

    def __init__(self, pixel_values, grid, merge_size):
        self.pixel_values = pixel_values
        self.grid = tuple(grid)
        self.merge_size = merge_size
        self.n_tokens = self.grid[0] * self.grid[1] // merge_size ** 2

    @property
    def token_grid(self):
        """(rows, columns) of the image's tokens after the merge."""
        return self.grid[0] // self.merge_size, self.grid[1] // self.merge_size

    def patch_positions(self):
        """(h, w) of each patch, in the patches' order: [2, n_patches] int32."""
        gh, gw = self.grid
        m = self.merge_size
        h = np.arange(gh).reshape(gh // m, 1, m, 1)
        w = np.arange(gw).reshape(1, gw // m, 1, m)
        return np.stack([np.broadcast_to(h, (gh // m, gw // m, m, m)).reshape(-1),
                         np.broadcast_to(w, (gh // m, gw // m, m, m)).reshape(-1)]).astype(np.int32)

    def decoder_positions(self, start):
        """M-RoPE positions [4, n_tokens] (t, h, w, e) of the image's tokens starting at position
        start, as Qwen2-VL's get_rope_index and llama.cpp's mtmd: t = start, h = start + row,
        w = start + column, e = 0."""
        rows, cols = self.token_grid
        pos = np.zeros((4, rows * cols), np.int32)
        pos[0] = start
        pos[1] = start + np.repeat(np.arange(rows), cols)
        pos[2] = start + np.tile(np.arange(cols), rows)
        return pos

    @property
    def n_positions(self):
        """Positions the image takes in the decoder: the next token is at start + max(rows, columns)."""
        return max(self.token_grid)

    def __repr__(self):
        return f"Image(grid={self.grid}, n_tokens={self.n_tokens})"


def _f32(v):
    return np.asarray(v, dtype=np.float32)


class VisionEncoder:
    """The vision tower of an mmproj GGUF (clip.projector_type "qwen2vl_merger"): metadata from the
    file, weights mapped from it. preprocess(image) -> Image, encode(Image) -> embeddings for the
    text model. min_pixels / max_pixels bound the resized image (Qwen2VLImageProcessor's defaults)."""

    def __init__(self, metadata, tensors, *, source="", n_threads=None, min_pixels=MIN_PIXELS,
                 max_pixels=MAX_PIXELS):
        self.source = str(source)
        where = self.source or "mmproj"
        md = metadata

        def key(name):
            if name not in md:
                raise ValueError(f"pyggml.models.vision: {where}: key {name!r} is missing")
            return md[name]

        if md.get("general.architecture") != "clip":
            raise ValueError(f"pyggml.models.vision: {where}: general.architecture must be 'clip' (an mmproj "
                             f"file), got {md.get('general.architecture')!r}")
        proj = key("clip.projector_type")
        if proj not in PROJECTORS:
            raise ValueError(f"pyggml.models.vision: {where}: projector type {proj!r} is not supported; "
                             f"supported: {', '.join(PROJECTORS)}")
        if not md.get("clip.has_vision_encoder", False):
            raise ValueError(f"pyggml.models.vision: {where}: the file has no vision encoder")
        self.projector = proj
        self.n_embd = int(key("clip.vision.embedding_length"))
        self.n_head = int(key("clip.vision.attention.head_count"))
        self.n_layer = int(key("clip.vision.block_count"))
        self.patch_size = int(key("clip.vision.patch_size"))
        self.projection_dim = int(key("clip.vision.projection_dim"))
        self.eps = float(key("clip.vision.attention.layer_norm_epsilon"))
        self.mean, self.std = _f32(key("clip.vision.image_mean")), _f32(key("clip.vision.image_std"))
        self.merge_size = int(md.get("clip.vision.spatial_merge_size", 2))
        self.temporal_patch_size = 2
        self.min_pixels, self.max_pixels = int(min_pixels), int(max_pixels)
        self.n_threads = default_threads() if n_threads is None else int(n_threads)
        if self.n_embd % self.n_head or (self.n_embd // self.n_head) % 4:
            raise ValueError(f"pyggml.models.vision: {where}: head_dim = {self.n_embd} / {self.n_head} must be a "
                             f"multiple of 4 (two (h, w) RoPE sections per half)")
        self.head_dim = self.n_embd // self.n_head
        self.tensors = tensors
        self._check_weights(where)
        self.ctx = Context("pyggml.models.vision")
        self._graphs = {}

    def _check_weights(self, where):
        e, p, m2 = self.n_embd, self.patch_size, self.merge_size ** 2
        ff = self.tensors.get("v.blk.0.ffn_up.weight")
        if ff is None:
            raise KeyError(f"pyggml.models.vision: {where}: tensor 'v.blk.0.ffn_up.weight' is missing")
        self.n_ff = ff.ne[1]
        want = {"v.patch_embd.weight": (p, p, 3, e), "v.patch_embd.weight.1": (p, p, 3, e),
                "v.post_ln.weight": (e,), "v.post_ln.bias": (e,),
                "mm.0.weight": (e * m2, e * m2), "mm.0.bias": (e * m2,),
                "mm.2.weight": (e * m2, self.projection_dim), "mm.2.bias": (self.projection_dim,)}
        for il in range(self.n_layer):
            b = f"v.blk.{il}."
            want.update({b + "ln1.weight": (e,), b + "ln1.bias": (e,), b + "ln2.weight": (e,), b + "ln2.bias": (e,),
                         b + "attn_out.weight": (e, e), b + "attn_out.bias": (e,),
                         b + "ffn_up.weight": (e, self.n_ff), b + "ffn_up.bias": (self.n_ff,),
                         b + "ffn_down.weight": (self.n_ff, e), b + "ffn_down.bias": (e,)})
            for x in "qkv":
                want.update({f"{b}attn_{x}.weight": (e, e), f"{b}attn_{x}.bias": (e,)})
        for name, shape in want.items():
            t = self.tensors.get(name)
            if t is None:
                raise KeyError(f"pyggml.models.vision: {where}: tensor {name!r} is missing")
            if t.ne != shape + (1,) * (4 - len(shape)):
                raise ValueError(f"pyggml.models.vision: {where}: tensor {name!r} has ne={t.ne[:len(shape)]}, "
                                 f"expected {shape}")
            if len(shape) == 1 and t.type != Type.F32:
                raise TypeError(f"pyggml.models.vision: {where}: tensor {name!r} must be F32, got {t.type.name}")

    # ---- preprocessing ----

    def preprocess(self, image):
        """An Image from a path, a PIL image or an RGB array (uint8, or floats in [0, 1]), as
        Qwen2VLImageProcessor makes pixel_values and image_grid_thw."""
        pixels, grid = patchify(self.normalized(image), self.patch_size, self.merge_size, self.temporal_patch_size)
        return Image(pixels, grid, self.merge_size)

    def normalized(self, image):
        """The resized, rescaled and normalised image before patchify: float32 [3, height, width]."""
        rgb = _rgb(image)
        factor = self.patch_size * self.merge_size
        h, w = smart_resize(rgb.shape[0], rgb.shape[1], factor, self.min_pixels, self.max_pixels)
        x = _resize(rgb, h, w).astype(np.float32) * np.float32(1 / 255)
        return ((x - self.mean) / self.std).transpose(2, 0, 1)

    # ---- the graph ----

    def weight(self, name):
        return self.tensors[name]

    def _norm(self, x, name):
        return op.add(op.mul(op.norm(x, self.eps), self.weight(name + ".weight")), self.weight(name + ".bias"))

    def _linear(self, x, name):
        return op.add(op.mul_mat(self.weight(name + ".weight"), x), self.weight(name + ".bias"))

    def _build(self, grid):
        """Graph of one patch grid: inputs pixel_values [C*T*P*P, n] and positions [4 * n]."""
        ctx, e, hd, nh = self.ctx, self.n_embd, self.head_dim, self.n_head
        n = grid[0] * grid[1]
        p2, t = self.patch_size ** 2, self.temporal_patch_size
        inp = set_input(ctx.new_tensor(Type.F32, (3 * t * p2, n)))
        pos = set_input(ctx.new_tensor(Type.I32, (4 * n,)))
        x = None
        for step, name in enumerate(("v.patch_embd.weight", "v.patch_embd.weight.1")):
            # the pixels of one temporal step: [P*P, C, n] out of (c, t, y, x) rows
            frame = op.view_3d(inp, p2, 3, n, t * p2 * 4, inp.nb[1], step * p2 * 4)
            frame = op.reshape_2d(op.cont(frame), 3 * p2, n)
            y = op.mul_mat(op.reshape_2d(self.weight(name), 3 * p2, e), frame)
            x = y if x is None else op.add(x, y)
        scale = 1.0 / math.sqrt(hd)
        rope = {"n_dims": hd // 2, "sections": [hd // 4] * 4, "mode": RopeType.VISION, "n_ctx_orig": 32768,
                "freq_base": 10000.0}
        for il in range(self.n_layer):
            b = f"v.blk.{il}."
            h = self._norm(x, b + "ln1")
            q = op.rope_multi(op.reshape_3d(self._linear(h, b + "attn_q"), hd, nh, n), pos, None, **rope)
            k = op.rope_multi(op.reshape_3d(self._linear(h, b + "attn_k"), hd, nh, n), pos, None, **rope)
            v = op.reshape_3d(self._linear(h, b + "attn_v"), hd, nh, n)
            kq = op.mul_mat(op.permute(k, 0, 2, 1, 3), op.permute(q, 0, 2, 1, 3))      # [n_k, n_q, nh]
            kq = op.soft_max_ext(kq, None, scale, 0.0)
            vt = op.cont(op.permute(v, 1, 2, 0, 3))                                      # [n_k, hd, nh]
            a = op.permute(op.mul_mat(vt, kq), 0, 2, 1, 3)                               # [hd, nh, n_q]
            a = self._linear(op.reshape_2d(op.cont(a), e, n), b + "attn_out")
            x = op.add(a, x)
            h = self._linear(self._norm(x, b + "ln2"), b + "ffn_up")
            h = op.gelu_quick(h)
            x = op.add(self._linear(h, b + "ffn_down"), x)
        x = self._norm(x, "v.post_ln")
        x = op.reshape_2d(x, e * self.merge_size ** 2, n // self.merge_size ** 2)
        x = self._linear(op.gelu_erf(self._linear(x, "mm.0")), "mm.2")
        g = CGraph(size=32 * self.n_layer + 64)
        g.build_forward_expand(x)
        return g, inp, pos, x

    def encode(self, image):
        """The image's embeddings for the text model: float32 [n_tokens, projection_dim] (a copy).
        image: an Image (preprocess) or anything preprocess takes."""
        if not isinstance(image, Image):
            image = self.preprocess(image)
        built = self._graphs.get(image.grid)
        if built is None:
            if len(self._graphs) >= 4:
                self._graphs.pop(next(iter(self._graphs)))
            built = self._graphs[image.grid] = self._build(image.grid)
        g, inp, pos, out = built
        inp.numpy()[...] = image.pixel_values
        hw = image.patch_positions()
        pos.numpy()[:] = np.concatenate([hw[0], hw[1], hw[0], hw[1]])
        g.compute(self.n_threads)
        return out.numpy().copy()

    def __repr__(self):
        return (f"VisionEncoder({self.projector}, n_layer={self.n_layer}, n_embd={self.n_embd}, "
                f"projection_dim={self.projection_dim})")


def load(path, **options):
    """The VisionEncoder of the mmproj GGUF at path (memory-mapped). options: n_threads, min_pixels,
    max_pixels."""
    from pyggml import gguf
    f = gguf.load(path)
    enc = VisionEncoder(f.metadata, f.tensors, source=f.path, **options)
    enc.gguf = f
    return enc
