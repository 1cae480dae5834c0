"""Qwen2-VL's vision side: the mmproj GGUF (checked against the layout llama.cpp's converter writes),
the image preprocessing (against transformers' image processor), the vision encoder and a prompt with
images through the M-RoPE decoder (against transformers' Qwen2VLForConditionalGeneration)."""
import numpy as np
import pytest
import reference as ref

pytest.importorskip("gguf")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("PIL", reason="transformers' Qwen2-VL image processor needs Pillow (requirements-dev.txt)")

from hf_models import IMAGE_PROCESSOR, VISION, converted_mm, image_processor, qwen2vl_vision_model

import pyggml as gg
import pyggml.gguf as G

# what llama.cpp's converter names each tensor of a vision block (TensorNameMap, MODEL_ARCH.MMPROJ)
BLOCK = {"attn.proj": "attn_out", "mlp.fc1": "ffn_up", "mlp.fc2": "ffn_down", "norm1": "ln1", "norm2": "ln2"}
TOP = {"visual.merger.ln_q": "v.post_ln", "visual.merger.mlp.0": "mm.0", "visual.merger.mlp.2": "mm.2"}


@pytest.fixture(scope="module")
def hf():
    return qwen2vl_vision_model(0)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("vision")
    return {t: converted_mm(t, d) for t in ("f32", "f16", "q8_0")}


def expected_mmproj(model):
    """name -> float32 array of what llama.cpp's converter stores, in its order: the checkpoint's
    visual.* tensors sorted by name, QKV split in three, the Conv3D kernel split per temporal step."""
    sd = {k.replace("model.visual.", "visual."): v.detach().float().numpy()
          for k, v in model.state_dict().items() if ".visual." in k}
    out = {}
    for name in sorted(sd):
        w, (stem, suffix) = sd[name], name.rsplit(".", 1)
        if stem == "visual.patch_embed.proj":
            out["v.patch_embd.weight"], out["v.patch_embd.weight.1"] = w[:, :, 0], w[:, :, 1]
        elif stem in TOP:
            out[f"{TOP[stem]}.{suffix}"] = w
        else:
            _, _, i, part = stem.split(".", 3)
            if part == "attn.qkv":
                for j, x in enumerate("qkv"):
                    out[f"v.blk.{i}.attn_{x}.{suffix}"] = np.split(w, 3)[j]
            else:
                out[f"v.blk.{i}.{BLOCK[part]}.{suffix}"] = w
    return out


def expected_type(name, shape, outtype):
    if name.startswith("v.patch_embd"):
        return gg.Type.F16 if outtype == "f16" else gg.Type.F32
    if len(shape) == 1:
        return gg.Type.F32
    return {"f32": gg.Type.F32, "f16": gg.Type.F16, "q8_0": gg.Type.Q8_0}[outtype]


@pytest.mark.parametrize("outtype", ["f32", "f16", "q8_0"])
def test_mmproj_layout_as_llama_cpp(hf, files, outtype):
    f = G.load(files[outtype][1])
    want = expected_mmproj(hf)
    assert list(f.tensors) == list(want)
    for name, w in want.items():
        t = f.tensors[name]
        assert t.ne[:w.ndim] == w.shape[::-1], name
        assert t.type == expected_type(name, w.shape, outtype), name
        if t.type in (gg.Type.F32, gg.Type.F16):
            tol = 0 if t.type == gg.Type.F32 else 1e-3
            np.testing.assert_allclose(t.numpy().astype(np.float32).reshape(w.shape), w, rtol=tol, atol=tol)
    meta = {k: v for k, v in f.metadata.items() if not k.startswith("general.") or k in ("general.architecture",
                                                                                             "general.type",
                                                                                             "general.file_type")}
    proc = image_processor()
    f32 = {k: np.float32(meta.pop(k)).tolist() for k in ("clip.vision.image_mean", "clip.vision.image_std",
                                                           "clip.vision.attention.layer_norm_epsilon")}
    assert f32 == {"clip.vision.image_mean": np.float32(proc.image_mean).tolist(),
                   "clip.vision.image_std": np.float32(proc.image_std).tolist(),
                   "clip.vision.attention.layer_norm_epsilon": np.float32(1e-6).tolist()}
    assert meta == {
        "general.architecture": "clip", "general.type": "mmproj", "general.file_type": {"f32": 0, "f16": 1, "q8_0": 7}[outtype],
        "clip.has_vision_encoder": True, "clip.vision.projection_dim": 64, "clip.vision.image_size": 560,
        "clip.vision.patch_size": VISION["patch_size"], "clip.vision.embedding_length": VISION["embed_dim"],
        "clip.vision.feed_forward_length": VISION["hidden_size"],   # llama.cpp's rename, not the MLP width
        "clip.vision.block_count": VISION["depth"], "clip.vision.attention.head_count": VISION["num_heads"],
        "clip.projector_type": "qwen2vl_merger"}
    assert f.types["clip.vision.image_size"] == G._gguf().GGUFValueType.UINT32
    assert list(f.metadata)[-1] == "general.quantization_version"


def test_convert_command_writes_the_mmproj(hf, tmp_path, capsys):
    import argparse

    import pyggml.convert as C
    hf.save_pretrained(tmp_path / "hf")
    image_processor().save_pretrained(tmp_path / "hf")
    args = C.add_arguments(argparse.ArgumentParser()).parse_args([str(tmp_path / "hf"), "--outtype", "f16", "--mmproj"])
    assert C.main(args) == 0
    path = tmp_path / "hf" / "mmproj-model-f16.gguf"
    assert capsys.readouterr().out.strip().endswith(f"and {path}")
    f = G.load(path)
    assert f.metadata["clip.projector_type"] == "qwen2vl_merger" and list(f.tensors) == list(expected_mmproj(hf))
    assert G.load(tmp_path / "hf" / "model-f16.gguf").arch == "qwen2vl"


def test_mmproj_of_one_block(tmp_path):
    """llama.cpp's converter cannot name mm.2 below 3 blocks; pyggml's can."""
    from hf_models import hf_model

    import pyggml.convert as C
    model = hf_model("qwen2vl")                 # a vision tower of one block
    C.convert_hf(model, tmp_path / "t.gguf", outtype="f32", mmproj=tmp_path / "m.gguf")
    f = G.load(tmp_path / "m.gguf")
    assert f.metadata["clip.vision.block_count"] == 1
    assert list(f.tensors) == list(expected_mmproj(model)) and "mm.2.weight" in f.tensors


def test_mmproj_of_a_text_model_is_refused(tmp_path):
    from hf_models import hf_model

    import pyggml.convert as C
    with pytest.raises(ValueError, match="mmproj: architecture 'Qwen2ForCausalLM'.*no vision tower"):
        C.convert_hf(hf_model("qwen2"), tmp_path / "t.gguf", outtype="f32", mmproj=tmp_path / "m.gguf")
    assert not (tmp_path / "m.gguf").exists()


# ---- preprocessing ----

def rgb(rng, h, w):
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


@pytest.mark.parametrize("size", [(56, 84), (84, 56), (100, 70), (300, 200), (20, 30), (29, 57)])
def test_preprocess_as_transformers(files, rng, size):
    from pyggml.models import vision
    if size[0] % 28 or size[1] % 28:
        pytest.importorskip("PIL")            # resizing is Pillow's bicubic, as transformers' processor
    enc = vision.load(files["f32"][1], **IMAGE_PROCESSOR)
    img = rgb(rng, *size)
    want = image_processor()(images=[img], return_tensors="np")
    got = enc.preprocess(img)
    assert (1, *got.grid) == tuple(want["image_grid_thw"][0])
    assert got.n_tokens == got.grid[0] * got.grid[1] // 4
    assert got.pixel_values.dtype == np.float32
    np.testing.assert_allclose(got.pixel_values, want["pixel_values"], rtol=0, atol=2e-6)


def test_smart_resize_as_transformers():
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize as hf_resize

    from pyggml.models.vision import smart_resize
    for h, w in [(56, 84), (1000, 37), (5, 5), (4000, 3000), (333, 777), (28, 5600)]:
        for limits in (IMAGE_PROCESSOR, {}):
            rh, rw = smart_resize(h, w, 28, **limits)
            assert (rh, rw) == hf_resize(h, w, 28, **limits)
            assert rh % 28 == 0 and rw % 28 == 0
    assert smart_resize(4000, 3000, 28, **IMAGE_PROCESSOR) == (112, 84)    # within max_pixels
    assert smart_resize(5, 5, 28, **IMAGE_PROCESSOR) == (56, 56)           # up to min_pixels
    with pytest.raises(ValueError, match="aspect ratio must be at most 200"):
        smart_resize(10, 2010)
    with pytest.raises(ValueError, match="empty"):
        smart_resize(0, 28)


def test_image_inputs(files, rng, tmp_path):
    from pyggml.models import vision
    enc = vision.load(files["f32"][1], **IMAGE_PROCESSOR)
    img = rgb(rng, 56, 84)
    ref = enc.preprocess(img).pixel_values
    np.testing.assert_array_equal(enc.preprocess(img.astype(np.float32) / 255).pixel_values, ref)
    np.testing.assert_array_equal(enc.preprocess(np.concatenate([img, img[:, :, :1]], axis=2)).pixel_values, ref)
    gray = img[:, :, 0]
    np.testing.assert_array_equal(enc.preprocess(gray).pixel_values, enc.preprocess(np.stack([gray] * 3, 2)).pixel_values)
    PIL = pytest.importorskip("PIL.Image")
    PIL.fromarray(img).save(tmp_path / "x.png")
    np.testing.assert_array_equal(enc.preprocess(tmp_path / "x.png").pixel_values, ref)
    np.testing.assert_array_equal(enc.preprocess(PIL.fromarray(img)).pixel_values, ref)
    with pytest.raises(ValueError, match=r"preprocess: an image array must be .* got shape \(4, 5, 6\)"):
        enc.preprocess(np.zeros((4, 5, 6), np.uint8))
    with pytest.raises(TypeError, match="uint8 or float"):
        enc.preprocess(np.zeros((56, 56, 3), np.int32))


# ---- the vision encoder ----

def hf_image_embeddings(hf, img):
    r = image_processor()(images=[img], return_tensors="pt")
    with torch.no_grad():
        return hf.model.visual(r["pixel_values"], grid_thw=r["image_grid_thw"]).pooler_output.numpy()


def rel_err(got, want):
    """Largest error of a row over that row's largest magnitude."""
    return float((np.abs(got - want).max(axis=-1) / np.abs(want).max(axis=-1)).max())


@pytest.mark.parametrize("outtype,bound", [("f32", 1e-5), ("f16", 5e-3)])
@pytest.mark.parametrize("size", [(56, 84), (112, 56)])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_encoder_as_transformers(hf, files, rng, outtype, bound, size, n_threads):
    from pyggml.models import vision
    enc = vision.load(files[outtype][1], n_threads=n_threads, **IMAGE_PROCESSOR)
    img = rgb(rng, *size)
    got = enc.encode(img)
    want = hf_image_embeddings(hf, img)
    assert got.shape == want.shape == (size[0] * size[1] // 28 ** 2, 64)
    assert rel_err(got, want) < bound
    np.testing.assert_array_equal(enc.encode(enc.preprocess(img)), got)     # the graph reused


def test_encoder_positions_matter(files, rng):
    """A transposed image is not the transposed embedding: the (h, w) RoPE and the merge order see it."""
    from pyggml.models import vision
    enc = vision.load(files["f32"][1], **IMAGE_PROCESSOR)
    img = rgb(rng, 56, 56)
    a, b = enc.encode(img), enc.encode(img.transpose(1, 0, 2).copy())
    assert not np.allclose(a, b[[0, 2, 1, 3]], atol=1e-3)


def test_patch_embedding_as_llama_cpp_conv_2d(files, rng):
    """llama.cpp's form of the patch embedding, two conv_2d over the image (stride = kernel = 14),
    against the mul_mat over the flattened patches: the same sums, with conv_2d's fp16 operands."""
    from pyggml.models import vision
    enc = vision.load(files["f32"][1], **IMAGE_PROCESSOR)
    img = rgb(rng, 56, 84)
    x = enc.normalized(img)                                     # [3, 56, 84]
    ctx = gg.Context()
    t = ctx.from_numpy(x)                                       # ne (84, 56, 3)
    y = gg.add(*(gg.conv_2d(enc.weight(n), t, 14, 14) for n in ("v.patch_embd.weight", "v.patch_embd.weight.1")))
    g = gg.CGraph()
    g.build_forward_expand(y)
    g.compute(2)
    conv = y.to_numpy().reshape(32, 4, 6)                       # per channel: patch rows and columns
    im = enc.preprocess(img)
    w = sum(enc.weight(n).numpy().reshape(32, -1) for n in ("v.patch_embd.weight", "v.patch_embd.weight.1"))
    frame = im.pixel_values.reshape(-1, 3, 2, 196)[:, :, 0].reshape(-1, 588)   # both temporal steps are equal
    want = (frame.astype(np.float64) @ w.T.astype(np.float64))                 # [n_patches, E], merge order
    h, wi = im.patch_positions()
    got = conv[:, h, wi].T
    assert ref.nmse(got, want) < 1e-6


# ---- a prompt with images ----

IMAGE_ID = 120          # hf_models' image_token_id; 122/123 vision start/end


def hf_logits(hf, ids, imgs):
    ids_t = torch.tensor([ids])
    kw = {}
    if imgs:
        r = image_processor()(images=imgs, return_tensors="pt")
        kw = {"pixel_values": r["pixel_values"], "image_grid_thw": r["image_grid_thw"]}
    with torch.no_grad():
        return hf(input_ids=ids_t, mm_token_type_ids=(ids_t == IMAGE_ID).int(), **kw).logits[0].numpy()


def load_mm(files, outtype, **kw):
    from pyggml import models
    text, mmproj = files[outtype]
    m = models.load(text, mmproj=mmproj, **kw)
    m.vision.min_pixels, m.vision.max_pixels = IMAGE_PROCESSOR["min_pixels"], IMAGE_PROCESSOR["max_pixels"]
    m.image_token_id = IMAGE_ID
    return m


def expanded(prompt, images):
    """The prompt with each image token repeated to the image's token count, as HF's processor does."""
    it, out = iter(images), []
    for t in prompt:
        out += [t] * (n_tokens(next(it)) if t == IMAGE_ID else 1)
    return out


def n_tokens(img):
    from pyggml.models.vision import smart_resize
    h, w = smart_resize(img.shape[0], img.shape[1], 28, **IMAGE_PROCESSOR)
    return h * w // 28 ** 2


CASES = {  # name: (outtype, kv type, flash_attn, bound)
    "f32": ("f32", gg.Type.F32, True, 1e-4), "f32-no-fa": ("f32", gg.Type.F32, False, 1e-4),
    "f16": ("f16", gg.Type.F16, True, 1e-2)}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("size", [(56, 84), (84, 84)])
def test_prompt_with_an_image_as_transformers(hf, files, rng, case, size):
    outtype, kv, fa, bound = CASES[case]
    m = load_mm(files, outtype, kv_type=kv, flash_attn=fa, n_threads=2)
    img = rgb(rng, *size)
    prompt = [5, 9, 122, IMAGE_ID, 123, 17, 33, 40]
    logits = [m.eval_multimodal(prompt, [img])]
    gen = []
    for _ in range(4):                      # greedy decode steps
        gen.append(int(logits[-1][-1].argmax()))
        logits.append(m.eval([gen[-1]]))
    got = np.concatenate(logits)
    want = hf_logits(hf, expanded(prompt, [img]) + gen, [img])
    assert got.shape == want.shape
    assert rel_err(got, want) < bound
    rows, cols = size[0] // 28, size[1] // 28
    assert m.n_past == 3 + max(rows, cols) + 4 + 4          # the text after the image from p + max(rows, cols)


def test_two_images_and_expanded_tokens(hf, files, rng):
    m = load_mm(files, "f32", kv_type=gg.Type.F32, n_threads=2)
    a, b = rgb(rng, 56, 84), rgb(rng, 84, 56)
    prompt = [5, 122, IMAGE_ID, 123, 9, 122, IMAGE_ID, 123, 17]
    want = hf_logits(hf, expanded(prompt, [a, b]), [a, b])
    assert rel_err(m.eval_multimodal(prompt, [a, b]), want) < 1e-4
    m.reset()       # the same with the image tokens already expanded, and logits="last"
    got = m.eval_multimodal(expanded(prompt, [a, b]), [a, b], logits="last")
    assert got.shape == (1, want.shape[1]) and rel_err(got, want[-1:]) < 1e-4


def test_generate_with_images(files, rng):
    m = load_mm(files, "f32", kv_type=gg.Type.F32)
    img = rgb(rng, 56, 84)
    prompt = [5, 122, IMAGE_ID, 123, 9]
    ids = m.generate(prompt, 5, images=[img], stop=())
    assert m.timings["prefill_tokens"] == len(prompt) - 1 + 6
    m.reset()
    logits = m.eval_multimodal(prompt, [img], logits="last")
    assert ids[0] == int(logits[0].argmax())


# ---- errors ----

def test_prompt_errors(files, rng):
    m = load_mm(files, "f32", n_ctx=16)
    img = rgb(rng, 56, 84)
    with pytest.raises(ValueError, match=r"eval_multimodal: the prompt has no image token \(120\)"):
        m.eval_multimodal([5, 9, 17], [img])
    with pytest.raises(ValueError, match="2 image token runs, for 1 images"):
        m.eval_multimodal([5, IMAGE_ID, 9, IMAGE_ID], [img])
    with pytest.raises(ValueError, match="marked by 2 image tokens; use one, or exactly 6"):
        m.eval_multimodal([5, IMAGE_ID, IMAGE_ID, 9], [img])
    with pytest.raises(ValueError, match=r"are 18 tokens, which do not fit in the context: 0 of n_ctx=16"):
        m.eval_multimodal([5, IMAGE_ID, 9], [rgb(rng, 112, 112)])         # 16 image tokens
    assert m.cache.n_used == 0 and m.n_past == 0
    with pytest.raises(ValueError, match="aspect ratio must be at most 200"):
        m.eval_multimodal([5, IMAGE_ID], [np.zeros((2, 500, 3), np.uint8)])
    with pytest.raises(ValueError, match=r"logits must be 'all' or 'last'"):
        m.eval_multimodal([5, IMAGE_ID], [img], logits="first")
    m.image_token_id = None
    with pytest.raises(ValueError, match=r"no '<\|image_pad\|>' token; pass image_token=ID"):
        m.eval_multimodal([5, IMAGE_ID], [img])
    from pyggml import models
    with pytest.raises(ValueError, match=r"no vision encoder \(load\(path, mmproj=...\)\)"):
        models.load(files["f32"][0]).eval_multimodal([5, IMAGE_ID], [img])


def test_mmproj_must_match_the_text_model(files, tmp_path):
    from hf_models import converted, hf_model

    from pyggml import models
    from pyggml.convert import convert_hf
    wide = tmp_path / "wide.gguf"       # a qwen2vl text model of another width (128, head_dim 16 as the sections)
    convert_hf(hf_model("qwen2vl", hidden_size=128, num_attention_heads=8, num_key_value_heads=4), wide, "f32")
    with pytest.raises(ValueError, match="mmproj does not match the text model: its projection_dim is 64, the "
                                         "model's n_embd is 128"):
        models.load(wide, mmproj=files["f32"][1])
    with pytest.raises(ValueError, match="images need an M-RoPE text model"):
        models.load(converted("qwen2", "f32", tmp_path), mmproj=files["f32"][1])
    with pytest.raises(ValueError, match="general.architecture must be 'clip'"):
        models.load(files["f32"][0], mmproj=files["f32"][0])
    with pytest.raises(ValueError, match="images need the whole model"):
        models.load(files["f32"][0], mmproj=files["f32"][1], layers=(0, 1))


@pytest.mark.subprocess
def test_run_with_an_image(files, rng, tmp_path):
    import subprocess
    import sys
    PIL = pytest.importorskip("PIL.Image")
    img = rgb(rng, 56, 84)                  # within the default pixel limits as within IMAGE_PROCESSOR's
    PIL.fromarray(img).save(tmp_path / "img.png")
    text, mmproj = files["f32"]
    args = ["run", text, "--mmproj", mmproj, "--image", tmp_path / "img.png", "--image-token", IMAGE_ID,
            "--tokens", "5,122,120,123,9", "-n", 5, "-t", 1, "--ctx", 64, "--ignore-eos", "--kv-type", "f32"]
    p = subprocess.run([sys.executable, "-m", "pyggml", *map(str, args)], capture_output=True, text=True,
                       cwd=tmp_path, check=False, timeout=300)
    assert p.returncode == 0, p.stderr
    m = load_mm(files, "f32", kv_type=gg.Type.F32, n_ctx=64)
    assert p.stdout.split() == [str(t) for t in m.generate([5, 122, IMAGE_ID, 123, 9], 5, images=[img], stop=())]
    assert "prefill: 10 tokens in" in p.stderr
    p = subprocess.run([sys.executable, "-m", "pyggml", *map(str, args[:2] + args[4:])], capture_output=True,
                       text=True, cwd=tmp_path, check=False, timeout=300)
    assert p.returncode == 2 and "--image needs --mmproj" in p.stderr
