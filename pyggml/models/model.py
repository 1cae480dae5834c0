"""Model: weights, a reusable KV cache and the graphs of each batch shape; eval, generate, reset."""
import contextlib
import time
import warnings

import numpy as np

from pyggml._enums import Type
from pyggml._graph import default_threads
from pyggml._tensor import Context
from pyggml.kvcache import KVCache
from pyggml.models.arch import architecture
from pyggml.models.sampling import Sampler

_MAX_GRAPHS = 8
IMAGE_PAD = "<|image_pad|>"


def stop_ids(model, stop):
    """The set of ids that end a generation: stop, by default the end-of-sequence id (if any)."""
    if stop is None:
        eos = model.hparams.eos_id
        stop = () if eos is None else (eos,)
    return frozenset(int(s) for s in stop)


def generation(model, prompt, n_predict, stop, prefill, decode):
    """The generation loop of Model.stream (and pyggml.distributed's Pipeline): the prompt's ids
    (model.tokenize of a text), the stop set (default: the end-of-sequence id), then prefill(ids)
    -> the first id and decode(id) -> the next, yielded as they come; model.timings afterwards."""
    ids = model.tokenize(prompt) if isinstance(prompt, str) else list(prompt)
    if not ids:
        raise ValueError(f"{type(model).__name__}.generate: the prompt is empty")
    stop = stop_ids(model, stop)
    model.timings = {"prefill_tokens": len(ids), "prefill_s": 0.0, "decode_tokens": 0, "decode_s": 0.0}
    if n_predict <= 0:
        return
    t0 = time.perf_counter()
    tok = prefill(ids)
    model.timings["prefill_s"] = time.perf_counter() - t0
    for i in range(n_predict):
        yield tok
        if tok in stop or i + 1 == n_predict:
            break
        t0 = time.perf_counter()
        tok = decode(tok)
        model.timings["decode_s"] += time.perf_counter() - t0
        model.timings["decode_tokens"] += 1


class Model:
    """A decoder of the registered architecture `arch` (pyggml.models.register) over weights
    `tensors` (GGUF names -> pyggml.Tensor) with `hparams`, that architecture's HParams
    (pyggml.models.read_hparams of a GGUF). pyggml.models.load builds one from a GGUF. Tensors the
    architecture's graph never reads (not in its tensor table) give a warning naming them: the file
    is likely a variant the architecture does not run, and its results would be wrong.

    n_ctx: KV cache cells; kv_type: cache type; flash_attn: attention with flash_attn_ext (False:
    mul_mat + soft_max_ext with V stored transposed, llama.cpp's form without flash attention);
    layers: (l0, l1) to run only layers [l0, l1) (input hidden states when l0 > 0, output hidden
    states when l1 < n_layer); n_batch: most tokens per graph (longer inputs run in chunks); kv_pad:
    the cell multiple the attended cache is padded to (llama.cpp: 256); keep: names of intermediates
    ("ffn_out-3", "l_out-0", ...) marked as graph outputs, readable after each step through
    last_graph.get_tensor(name).numpy(); tokenizer: a pyggml.tokenizer.Tokenizer, None, or a
    function returning one (or None), called on first use of `tokenizer`: building one from a
    large vocabulary takes seconds that a run from token ids need not pay; vision: a
    pyggml.models.vision.VisionEncoder whose embeddings eval_multimodal places at the image tokens
    (M-RoPE models only); repack: give each weight matrix the graph multiplies by its repacked copy
    (Tensor.repack: where the CPU's kernels have one, decode reads one stream per matrix and runs
    faster, for memory the size of those matrices; repacked_bytes says how much), False to read the
    weights in place (zero-copy)."""

    def __init__(self, arch, hparams, tensors, *, n_ctx=512, n_threads=None, kv_type=Type.F16, flash_attn=True,
                 layers=None, n_batch=512, kv_pad=256, keep=(), tokenizer=None, source="", vision=None, repack=True):
        self.source = str(source)
        self.graph_class = architecture(arch, self.source)
        self.arch = arch
        want = self.graph_class.hparams_class
        if not isinstance(hparams, want):
            raise TypeError(f"pyggml.models: {self.source or arch}: hparams must be a {want.__name__} "
                            f"(pyggml.models.read_hparams reads them from a GGUF), got {type(hparams).__name__}")
        self.hparams = hparams
        n_layer = hparams.n_layer
        l0, l1 = (0, n_layer) if layers is None else (int(layers[0]), int(layers[1]))
        if not 0 <= l0 < l1 <= n_layer:
            raise ValueError(f"pyggml.models: layers must be a range (l0, l1) with 0 <= l0 < l1 <= n_layer = {n_layer}, "
                             f"got {layers}")
        if int(n_ctx) <= 0 or int(n_batch) <= 0:
            raise ValueError(f"pyggml.models: n_ctx and n_batch must be > 0, got {n_ctx}, {n_batch}")
        self.l0, self.l1, self.has_head = l0, l1, l1 == n_layer
        self.n_vocab, self.n_ctx, self.n_batch = hparams.n_vocab, int(n_ctx), int(n_batch)
        self.pos_rows = 4 if hparams.rope.multi else 1       # M-RoPE: rows t, h, w, e
        self.n_threads = default_threads() if n_threads is None else int(n_threads)
        self.flash_attn = bool(flash_attn)
        self.keep = tuple(keep)
        self._tokenizer = tokenizer
        self.tensors = tensors
        self._check_weights()
        self._warn_unread()
        if self.has_head:
            out = self.weight("output.weight", required=False)
            self.output_weight = self.weight("token_embd.weight") if out is None else out
        self.repacked_bytes = self._repack() if repack else 0
        self.ctx = Context(f"pyggml.models {self.arch}")
        hp = self.hparams
        self.cache = KVCache(self.ctx, l1 - l0, self.n_ctx, hp.head_dim, hp.n_head_kv, type=kv_type,
                             v_trans=not self.flash_attn, head_dim_v=hp.head_dim_v, pad=kv_pad, n_swa=hp.n_swa)
        self.vision = None
        self.image_token_id = None
        if vision is not None:
            self._attach_vision(vision)
        self._graphs = {}
        self._hooks = {}
        self.n_graph_builds = 0
        self.last_graph = None
        self.n_past = 0
        self.timings = {}

    @property
    def tokenizer(self):
        """The model's Tokenizer, or None (built on first use when the model was given a function)."""
        if callable(self._tokenizer):
            self._tokenizer = self._tokenizer()
        return self._tokenizer

    @tokenizer.setter
    def tokenizer(self, tok):
        self._tokenizer = tok

    def _attach_vision(self, vision):
        where = f"{self.source or self.arch} with {vision.source or 'the vision encoder'}"
        if self.pos_rows != 4:
            raise ValueError(f"pyggml.models: {where}: images need an M-RoPE text model (qwen2vl), got {self.arch}")
        if vision.projection_dim != self.hparams.n_embd:
            raise ValueError(f"pyggml.models: {where}: the mmproj does not match the text model: its "
                             f"projection_dim is {vision.projection_dim}, the model's n_embd is {self.hparams.n_embd}")
        if self.l0 != 0 or not self.has_head:
            raise ValueError(f"pyggml.models: {where}: images need the whole model (layers from 0 to n_layer)")
        self.vision = vision

    # ---- weights ----

    def weight(self, name, required=True):
        """The weight tensor `name` (GGUF naming); KeyError naming the model file when required and absent."""
        t = self.tensors.get(name)
        if t is None and required:
            raise KeyError(f"pyggml.models: {self.source or self.arch}: tensor {name!r} is missing "
                           f"(architecture {self.arch})")
        return t

    def _expected(self):
        """The architecture's tensor table for this layer range: name -> (ne, required)."""
        out = {}
        for name, (dims, required) in self.hparams.tensor_table().items():
            il = int(name.split(".")[1]) if name.startswith("blk.") else None
            if il is None and name != "token_embd.weight" and not self.has_head:
                continue
            if il is not None and not self.l0 <= il < self.l1:
                continue
            if name == "token_embd.weight" and self.l0 > 0 and not (self.has_head and "output.weight" not in self.tensors):
                continue
            out[name] = (tuple(v for v, _ in dims), required)
        return out

    def _check_weights(self):
        where = self.source or self.arch
        for name, (shape, required) in self._expected().items():
            t = self.tensors.get(name)
            if t is None:
                if required:
                    raise KeyError(f"pyggml.models: {where}: tensor {name!r} is missing (architecture {self.arch})")
                continue
            if t.ne != shape + (1,) * (4 - len(shape)):
                raise ValueError(f"pyggml.models: {where}: tensor {name!r} has ne={t.ne[:max(len(shape), 2)]}, "
                                 f"expected {shape} from the hyper-parameters")
            if len(shape) == 1 and t.type != Type.F32:
                raise TypeError(f"pyggml.models: {where}: tensor {name!r} must be F32, got {t.type.name}")

    def _repack(self):
        """Tensor.repack() of every weight matrix the graph multiplies by (the embedding table only
        when it is also the LM head; the experts' stacks); the bytes of their copies."""
        embd = self.tensors.get("token_embd.weight")
        head = self.output_weight if self.has_head else None
        total = 0
        for name, (shape, _) in self._expected().items():
            t = self.tensors.get(name)
            if t is not None and (len(shape) == 2 or "_exps." in name) and (t is not embd or head is embd):
                total += t.repack(n_threads=self.n_threads)
        return total

    def _warn_unread(self):
        table = self.hparams.tensor_table()
        unread = [name for name in self.tensors if name not in table]
        if unread:
            more = f" and {len(unread) - 8} more" if len(unread) > 8 else ""
            warnings.warn(f"pyggml.models: {self.source or self.arch}: the {self.arch} graph never reads "
                          f"{len(unread)} of the file's tensors ({', '.join(unread[:8])}{more}): the file is likely "
                          f"a variant this architecture does not run, and its results would be wrong",
                          stacklevel=3)

    @property
    def weight_bytes(self):
        """Bytes of the weights this model reads per decoded token (the embedding table only
        when it is also the LM head)."""
        embd = self.tensors.get("token_embd.weight")
        used = {id(t): t for t in (self.tensors.get(n) for n in self._expected()) if t is not None}
        if embd is not None and not (self.has_head and self.output_weight is embd):
            used.pop(id(embd), None)
        return sum(t.nbytes for t in used.values())

    def expert_read_bytes(self, chosen):
        """Bytes of the weights a step reads when it chose the experts `chosen` ({layer: expert ids}),
        as {"dense", "experts", "total"}: dense, every weight of weight_bytes but the experts'
        (blk.N.*_exps.*); experts, for each layer the share of each of its expert tensors (its bytes
        over its last dim, n_expert) times the distinct experts chosen there (mul_mat_id and add_id
        read a chosen expert once per step, the others not at all); total, their sum."""
        total, experts = self.weight_bytes, 0
        for name, (shape, _) in self._expected().items():
            t = self.tensors.get(name)
            if t is None or "_exps." not in name:
                continue
            il = int(name.split(".")[1])
            ids = {int(e) for e in chosen.get(il, ())}
            total -= t.nbytes
            experts += t.nbytes // shape[-1] * len(ids)
        return {"dense": total, "experts": experts, "total": total + experts}

    def step_read_bytes(self):
        """expert_read_bytes of the last step (a decode step: one token's experts), its experts read
        from the step's router choices, the intermediates ffn_moe_topk-<il>: the model must keep them
        (load it with keep=[f"ffn_moe_topk-{il}" for il in range(n_layer)])."""
        if self.last_graph is None:
            raise ValueError("pyggml.models: step_read_bytes: no step has run yet")
        missing = [il for il in range(self.l0, self.l1) if f"ffn_moe_topk-{il}" not in self.keep]
        if missing:
            raise ValueError(f"pyggml.models: step_read_bytes: the model does not keep ffn_moe_topk-{missing[0]} (load "
                             f"it with keep=[f'ffn_moe_topk-{{il}}' for il in range(n_layer)]; a model without "
                             f"experts has none)")
        return self.expert_read_bytes({il: self.last_graph.get_tensor(f"ffn_moe_topk-{il}").numpy().ravel()
                                       for il in range(self.l0, self.l1)})

    # ---- graphs ----

    def graph_for(self, n_tokens, n_out, embd=False):
        """The graph (the architecture's Decoder) for n_tokens new tokens (n_out rows out; embd: the input
        is embeddings, not ids) at the current cache fill, built on first use and reused while the padded
        n_kv stays the same."""
        key = (n_tokens, self.cache.n_kv_for(n_tokens), n_out, bool(embd))
        sg = self._graphs.get(key)
        if sg is None:
            # graphs of another n_kv return only after a reset; drop them (and the oldest beyond the cap)
            self._graphs = {k: g for k, g in self._graphs.items() if k[1] == key[1]}
            while len(self._graphs) >= _MAX_GRAPHS:
                self._graphs.pop(next(iter(self._graphs)))
            sg = self.graph_class(self, *key)
            for name, fn in self._hooks.items():
                sg.graph.set_hook(name, fn)
            self._graphs[key] = sg
            self.n_graph_builds += 1
        return sg

    def add_hook(self, name, fn):
        """Call fn(tensor) in every step as soon as the intermediate `name` ("l_out-3",
        "attn_norm-0", ...; the Decoder's names) is computed; fn may rewrite tensor.numpy() in place
        and the rest of the step reads what it wrote (CGraph.set_hook). Graphs are not rebuilt."""
        for sg in self._graphs.values():
            sg.graph.set_hook(name, fn)
        self._hooks[name] = fn

    def remove_hook(self, name):
        """Remove the hook on `name`; steps run as without it."""
        if self._hooks.pop(name, None) is not None:
            for sg in self._graphs.values():
                sg.graph.remove_hook(name)

    @contextlib.contextmanager
    def hooks(self, hooks):
        """with model.hooks({name: fn, ...}): add_hook each for the block, remove_hook after it."""
        try:
            for name, fn in hooks.items():
                self.add_hook(name, fn)
            yield self
        finally:
            for name in hooks:
                self.remove_hook(name)

    def _inputs(self, tokens):
        a = tokens if isinstance(tokens, np.ndarray) else None
        if self.l0 == 0 and not (a is not None and a.ndim == 2 and np.issubdtype(a.dtype, np.floating)):
            ids = np.asarray(tokens, dtype=np.int64).reshape(-1)
            if len(ids) and (ids.min() < 0 or ids.max() >= self.n_vocab):
                bad = ids[(ids < 0) | (ids >= self.n_vocab)][0]
                raise ValueError(f"Model.eval: token id {bad} is out of range [0, {self.n_vocab})")
            return ids.astype(np.int32)
        x = np.asarray(tokens, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self.hparams.n_embd:
            what = f"layers start at {self.l0}: the input must be hidden states" if self.l0 else "embeddings must be"
            raise ValueError(f"Model.eval: {what} [n_tokens, {self.hparams.n_embd}], got shape {x.shape}")
        return x

    def _positions(self, positions, n):
        rows = self.pos_rows
        if positions is None:
            return np.broadcast_to(np.arange(self.n_past, self.n_past + n, dtype=np.int32), (rows, n))
        p = np.asarray(positions, dtype=np.int32)
        if p.size == rows * n:
            return p.reshape(rows, n)
        if rows == 4 and p.size == n:        # text positions for M-RoPE: all four rows equal
            return np.broadcast_to(p.reshape(1, n), (4, n))
        want = f"[{n}] or [4, {n}] (M-RoPE)" if rows == 4 else f"[{n}]"
        raise ValueError(f"Model.eval: positions must have shape {want}, got {p.shape}")

    def _step(self, x, pos, n_out):
        """Run one graph over the tokens x at positions pos [rows, n]; returns the output view
        (overwritten by the next step)."""
        n = len(x)
        c = self.cache
        if c.n_used + n > c.n_ctx:
            raise ValueError(f"Model.eval: {n} tokens do not fit in the context: {c.n_used} of n_ctx={c.n_ctx} "
                             f"cells are used; call reset() or load with a larger n_ctx")
        sg = self.graph_for(n, n_out, self.l0 == 0 and x.ndim == 2)
        cells = c.alloc(pos[0], pos[1:3].T if self.pos_rows == 4 else None)
        try:
            sg.feed(x, pos, cells)
            sg.graph.compute(self.n_threads)
        except BaseException:
            c.n_used -= n
            c.cell_pos[cells] = -1
            raise
        self.n_past = max(self.n_past, int(pos.max()) + 1)     # M-RoPE: an image's last row or column
        self.last_graph = sg.graph
        return sg.output()

    # ---- public ----

    def eval(self, tokens, logits="all", positions=None, progress=None):
        """Append tokens (ids; input embeddings [n, n_embd] float32, e.g. an image's; hidden states
        [n, n_embd] when the layers start after 0) to the KV cache and return float32 logits [n, n_vocab] (logits="last": [1, n_vocab]) or, when the layers
        end before the last, the hidden states [n, n_embd]. positions: default n_past, n_past + 1, ...;
        M-RoPE models take [4, n] (rows t, h, w, e) or [n] (text: all rows equal). progress: called
        with the number of tokens of each chunk of n_batch once it has run."""
        if logits not in ("all", "last"):
            raise ValueError(f"Model.eval: logits must be 'all' or 'last', got {logits!r}")
        x = self._inputs(tokens)
        n = len(x)
        if n == 0:
            raise ValueError("Model.eval: no tokens")
        pos = self._positions(positions, n)
        last_only = logits == "last" and self.has_head
        outs = []
        for s in range(0, n, self.n_batch):
            e = min(n, s + self.n_batch)
            out = self._step(x[s:e], pos[:, s:e], 1 if last_only else e - s)
            if not last_only or e == n:
                outs.append(out.copy())
            if progress is not None:
                progress(e - s)
        return outs[0] if len(outs) == 1 else np.concatenate(outs)

    def image_token(self):
        """The id marking an image in a prompt: image_token_id when set, else the vocabulary's
        <|image_pad|> (Qwen2-VL)."""
        if self.image_token_id is not None:
            return int(self.image_token_id)
        tokens = getattr(self.tokenizer, "tokens", None) or []
        if IMAGE_PAD in tokens:
            return tokens.index(IMAGE_PAD)
        raise ValueError(f"Model.eval_multimodal: {self.source or self.arch}: the vocabulary has no {IMAGE_PAD!r} "
                         f"token; pass image_token=ID")

    def eval_multimodal(self, prompt, images, logits="all", image_token=None, progress=None):
        """Append a prompt with images to the context, as llama.cpp's mtmd does: the text before,
        between and after the images as tokens, each image as the vision encoder's embeddings at
        M-RoPE positions (t, h, w) = (p, p + row, p + column), the text after it from p + max(rows,
        columns) on (Qwen2-VL's get_rope_index). prompt: ids or text; each run of image_token (default
        the vocabulary's <|image_pad|>) is one image: one token (expanded to the image's n_tokens) or
        already n_tokens long. images: paths, PIL images, RGB arrays or vision.Image, in prompt order.
        Returns the logits of every prompt position [n, n_vocab] (logits="last": [1, n_vocab]).
        ValueError: no mmproj, no or too many image tokens, an image that does not fit the context
        (nothing is appended then)."""
        if self.vision is None:
            raise ValueError("Model.eval_multimodal: the model has no vision encoder (load(path, mmproj=...))")
        if logits not in ("all", "last"):
            raise ValueError(f"Model.eval_multimodal: logits must be 'all' or 'last', got {logits!r}")
        from pyggml.models.vision import Image
        ids = np.asarray(self.tokenize(prompt) if isinstance(prompt, str) else prompt, dtype=np.int64).reshape(-1)
        tok = self.image_token() if image_token is None else int(image_token)
        is_img = np.concatenate([[False], ids == tok, [False]])
        starts, ends = np.flatnonzero(~is_img[:-1] & is_img[1:]), np.flatnonzero(is_img[:-1] & ~is_img[1:])
        images = list(images)
        if len(starts) == 0:
            raise ValueError(f"Model.eval_multimodal: the prompt has no image token ({tok}) for {len(images)} images")
        if len(starts) != len(images):
            raise ValueError(f"Model.eval_multimodal: the prompt has {len(starts)} image token runs, "
                             f"for {len(images)} images")
        images = [im if isinstance(im, Image) else self.vision.preprocess(im) for im in images]
        chunks, at = [], 0
        for s, e, im in zip(starts, ends, images):
            if e - s not in (1, im.n_tokens):
                raise ValueError(f"Model.eval_multimodal: an image of {im.n_tokens} tokens ({im}) is marked by "
                                 f"{e - s} image tokens; use one, or exactly {im.n_tokens}")
            chunks += [ids[at:s], im]
            at = e
        chunks.append(ids[at:])
        chunks = [c for c in chunks if isinstance(c, Image) or len(c)]
        n = sum(c.n_tokens if isinstance(c, Image) else len(c) for c in chunks)
        if self.cache.n_used + n > self.n_ctx:
            raise ValueError(f"Model.eval_multimodal: the prompt and its images are {n} tokens, which do not fit in "
                             f"the context: {self.cache.n_used} of n_ctx={self.n_ctx} cells are used")
        outs = []
        for c in chunks:
            last = logits == "last" and c is not chunks[-1]
            if isinstance(c, Image):
                out = self.eval(self.vision.encode(c), "last" if last else logits, c.decoder_positions(self.n_past),
                                progress)
            else:
                out = self.eval(c, "last" if last else logits, np.arange(self.n_past, self.n_past + len(c)), progress)
            if logits == "all" or c is chunks[-1]:
                outs.append(out)
        return np.concatenate(outs) if len(outs) > 1 else outs[0]

    def reset(self):
        """Forget the context: the KV cache is emptied and positions start again at 0."""
        self.cache.clear()
        self.n_past = 0

    def truncate(self, n):
        """Keep the first n tokens of a text context (positions 0 .. n-1) and forget the rest."""
        c = self.cache
        if not 0 <= n <= c.n_used or self.pos_rows == 4:
            raise ValueError(f"Model.truncate: n must be in [0, {c.n_used}] for a text context, got {n}")
        c.seq_rm(-1, int(n))
        self.n_past = int(n)

    # ---- text in, text out (pyggml.models.chat) ----

    def apply_chat_template(self, messages, add_generation_prompt=True, tools=None, **extra):
        """The prompt text of OpenAI-style messages through the file's chat template (see chat)."""
        from pyggml.models import chat
        return chat.apply_chat_template(self, messages, add_generation_prompt, tools, **extra)

    def create_chat_completion(self, messages, **options):
        """llama-cpp-python's create_chat_completion: an OpenAI-style dict, or chunks with stream=True.
        Structured output: response_format={"type": "json_object"} or {"type": "json_schema",
        "json_schema": {"schema": {...}}}, or grammar= GBNF/Lark text (pyggml[grammar]; see chat)."""
        from pyggml.models import chat
        return chat.create_chat_completion(self, messages, **options)

    def create_completion(self, prompt, **options):
        """llama-cpp-python's create_completion: an OpenAI-style dict, or chunks with stream=True;
        grammar= GBNF/Lark text constrains the text (pyggml[grammar])."""
        from pyggml.models import chat
        return chat.create_completion(self, prompt, **options)

    def tokenize(self, text, add_bos=True):
        if self.tokenizer is None:
            raise RuntimeError(f"Model.tokenize: {self.source or self.arch} has no tokenizer (install the "
                               "optional tokenizer dependency, or pass token ids)")
        return self.tokenizer.encode(text, add_bos=add_bos)

    def stream(self, prompt, n_predict, temperature=0.0, top_k=0, top_p=1.0, seed=None, stop=None, progress=None,
               images=None, draft=None, draft_max=8, lookup=False, **sampling):
        """Generate up to n_predict ids after prompt (ids, or text when the model has a tokenizer),
        yielding each as it is sampled. The prompt is appended to the current context. Stops after
        an id in `stop` (default: the end-of-sequence id; () never stops). timings afterwards:
        prefill/decode tokens and seconds. progress: passed to eval for the prompt. images: the
        prompt's images (eval_multimodal prefills it). sampling: Sampler's other keyword options
        (min_p, repeat_penalty, ...). Speculative decoding (pyggml.models.speculative): draft,
        another Model with the same vocabulary, or lookup (True, n_max or (n_min, n_max): n-grams of
        the context) propose up to draft_max ids that one step of this model verifies; timings then
        also count draft_tokens, accepted_tokens and verify_steps."""
        if not self.has_head or self.l0 != 0:
            raise ValueError("Model.generate: needs the whole model (layers from 0 to n_layer)")
        if sampling.get("dry_multiplier") and "tokenizer" not in sampling:
            sampling["tokenizer"] = self.tokenizer          # DRY's sequence breakers are text
        sample = Sampler(temperature, top_k, top_p, seed, **sampling)
        x, pos = np.zeros(1, np.int32), np.zeros((self.pos_rows, 1), np.int32)

        def decode(tok):
            x[0], pos[:] = tok, self.n_past
            return sample(self._step(x, pos, 1)[0])

        def prefill(ids):
            used = self.cache.n_used
            if images is None:
                logits = self.eval(ids, logits="last", progress=progress)
            else:
                logits = self.eval_multimodal(ids, images, logits="last", progress=progress)
            self.timings["prefill_tokens"] = self.cache.n_used - used      # with the images' tokens
            return sample(logits[0])

        if draft is not None or (lookup is not None and lookup is not False):
            from pyggml.models.speculative import Speculative
            if draft is not None and images is not None:
                raise ValueError("Model.generate: a draft model cannot read the images; use lookup or no draft")
            spec = Speculative(self, sample, n_predict, stop_ids(self, stop), draft, draft_max, lookup)
            prefill, decode = spec.prefill(prefill), spec.decode
        yield from generation(self, prompt, n_predict, stop, prefill, decode)

    def generate(self, prompt, n_predict, temperature=0.0, top_k=0, top_p=1.0, seed=None, stop=None, images=None,
                 draft=None, draft_max=8, lookup=False, **sampling):
        """The ids stream() yields, as a list (the new ids only)."""
        return list(self.stream(prompt, n_predict, temperature, top_k, top_p, seed, stop, images=images,
                                draft=draft, draft_max=draft_max, lookup=lookup, **sampling))

    def generate_batch(self, prompts, n_predict, temperature=0.0, top_k=0, top_p=1.0, seed=None, stop=None,
                       n_seq=None, options=None, **sampling):
        """The new ids of each prompt, generated together (pyggml.models.batch.generate_batch): each
        list is what the prompt alone gives. sampling: Sampler's other options for all; options: one
        dict of them per prompt. Clears the context."""
        from pyggml.models.batch import generate_batch
        return generate_batch(self, prompts, n_predict, temperature, top_k, top_p, seed, stop, n_seq,
                              options=options, **sampling)

    def agenerate(self, prompt, n_predict, n_seq=4, **options):
        """An async iterator of the new ids of one request (`async for tok in model.agenerate(...)`),
        options as BatchEngine.submit. Concurrent calls are batched by one BatchEngine of n_seq
        sequences run in a background thread, started on the first call; from then on the KV cache
        belongs to it (do not call eval or generate)."""
        from pyggml.models import batch
        if getattr(self, "_engine_thread", None) is None:
            self._engine_thread = batch.EngineThread(batch.BatchEngine(self, n_seq))
        return batch.agenerate(self._engine_thread.engine, prompt, n_predict, **options)

    def __repr__(self):
        hp = self.hparams
        layers = "" if (self.l0, self.l1) == (0, hp.n_layer) else f", layers=[{self.l0}, {self.l1})"
        if self.repacked_bytes:
            layers += f", repacked={self.repacked_bytes / 2**20:.1f} MiB"
        return (f"Model({self.arch}, n_layer={hp.n_layer}, n_embd={hp.n_embd}, n_vocab={self.n_vocab}, "
                f"n_ctx={self.n_ctx}, kv={self.cache.type.name}, flash_attn={self.flash_attn}{layers})")
