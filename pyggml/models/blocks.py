"""What the decoder architectures share: typed hyper-parameters read from a GGUF, the tensor table, RoPE
with its scaling, and Decoder, the graph of one batch shape whose layer is built from public blocks.

An architecture (pyggml/models/llama.py, qwen2.py, ...) is a Decoder subclass with its HParams subclass
(`hparams_class`), registered by name (pyggml.models.register). Its variant overrides what differs, one
block at a time, as llama.cpp's llm_graph_context does (build_norm, build_qkv, build_attn, build_ffn):

    build_layer(x, il)          the whole pre-norm layer, from the blocks below
      build_norm(x, prefix)     RMSNorm times `prefix`.weight (+ `prefix`.bias when present)
      build_qkv(h, il)          Q, K, V as [head_dim, n_head(_kv), n_tokens] (build_qk_norm: per-head
                                RMSNorms of Q and K, for the variants that have them)
      build_rope(t, il)         RoPE with the file's scaling; rope_factors(il) gives rope_ext's c
      build_attn(q, k, v, il)   K/V into the cache, attention (flash_attn_ext, or mul_mat + soft_max_ext
                                over a transposed V), the output projection; is_swa(il) picks the
                                sliding-window mask, attn_softcap(il) caps the logits (Gemma 2),
                                attn_sinks(il) adds a logit per head to the softmax (gpt-oss)
      build_ffn(h, il)          gate/up/down with the GLU `ffn_glu` (SwiGLU; GluOp.GEGLU: GELU-tanh)
    build_output(x)             the output norm and the LM head

A Decoder is built once per (n_tokens, n_kv, n_out, embd) and run many times: feed() rewrites its input
tensors in place. It covers the model's layer range [l0, l1): its input is token ids (l0 == 0: the
embedding is looked up in the graph) or a hidden state [n_embd, n_tokens] F32 (after layer l0 - 1, or
input embeddings such as an image's when embd is set), its output the logits (l1 == n_layer) or the
hidden state after layer l1 - 1. n_kv cells of the KV cache are attended (KVCache.n_kv_for) and n_out
rows reach the LM head (as llama.cpp, the rows nobody reads leave the last layer after its attention).
Tensors carry llama.cpp's callback names (cb: "attn_norm-3", "Qcur-3", "kqv_out-3", "ffn_out-3",
"l_out-3", "result_norm", "result_output"; inputs "inp_tokens", "inp_embd", "inp_pos", "inp_out_ids"),
so CGraph.get_tensor and Model(keep=...) find them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import ClassVar, NamedTuple

import numpy as np

from pyggml import _ops as op
from pyggml._enums import GluOp, Prec, RopeType, Type
from pyggml._graph import CGraph, set_input, set_output
from pyggml.gguf import GGUFError

__all__ = ["Decoder", "HParams", "Keys", "Rope", "TensorSpec"]

_REQUIRED = object()
_INT_MAX = 2**31 - 1


class Keys:
    """Typed reads of a GGUF's metadata for an architecture, each a GGUFError naming the file, the key,
    what was expected and what came. A key without a dot-prefix of its own ("block_count",
    "attention.head_count") is the architecture's ("{arch}.block_count"); "general." and "tokenizer."
    keys are read as written. n_blocks: 1 + the largest N of the file's blk.N.* tensors."""

    def __init__(self, f, arch=None):
        self.file, self.path = f, f.path
        self.arch = arch or f.arch
        self.n_blocks = 1 + max((int(n.split(".")[1]) for n in f.tensors
                                 if n.startswith("blk.") and n.split(".")[1].isdigit()), default=-1)

    def name(self, key):
        return key if key.startswith(("general.", "tokenizer.")) else f"{self.arch}.{key}"

    def has(self, key):
        return self.name(key) in self.file.metadata

    def error(self, key, expected, got):
        raise GGUFError(f"{self.path}: {self.name(key)}: expected {expected}, got {got!r}")

    def raw(self, key, default=_REQUIRED):
        k = self.name(key)
        if k in self.file.metadata:
            return self.file.metadata[k]
        if default is _REQUIRED:
            raise GGUFError(f"{self.path}: the metadata has no {k!r}, which a {self.arch} model requires")
        return default

    def int(self, key, default=_REQUIRED, lo=1, hi=_INT_MAX):
        """An integer in [lo, hi] (default: a positive count that fits an int32)."""
        v = self.raw(key, default)
        if v is None and default is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
            self.error(key, f"an integer in [{lo}, {hi}]", v)
        return int(v)

    def float(self, key, default=_REQUIRED, lo=0.0, lo_open=False):
        """A finite number >= lo (> lo when lo_open)."""
        v = self.raw(key, default)
        if (isinstance(v, bool) or not isinstance(v, (int, float, np.number)) or not math.isfinite(v)
                or v < lo or (lo_open and v == lo)):
            self.error(key, f"a finite number {'>' if lo_open else '>='} {lo:g}", v)
        return float(v)

    def str(self, key, default=_REQUIRED, choices=None):
        v = self.raw(key, default)
        if not isinstance(v, str) or (choices is not None and v not in choices):
            self.error(key, f"one of {', '.join(choices)}" if choices else "a string", v)
        return v


@dataclass(frozen=True)
class Rope:
    """RoPE as the graph applies it (rope_ext's arguments), from the GGUF as llama.cpp reads it:
    rope.dimension_count (n_dims, default head_dim), rope.freq_base (10000), rope.scaling.type (none,
    linear (the default), yarn; the architecture lists what it runs), rope.scaling.factor (or
    rope.scale_linear; freq_scale = 1 / factor, 1 when absent, 0 or the type is none),
    rope.scaling.original_context_length (n_ctx_orig, default the training context) and, for yarn,
    rope.scaling.yarn_ext_factor (default 1), yarn_beta_fast / yarn_beta_slow (32, 1) and the attention
    scale: 1 + 0.1 ln(factor) (llama.cpp's get_mscale, which ggml's rope applies itself when ext_factor
    is not 0), or rope.scaling.yarn_attn_factor when the file has it (HF's attention_factor, which
    llama.cpp ignores), times rope.scaling.attn_factor (default 1). sections: M-RoPE's 4 sections."""
    mode: RopeType
    n_dims: int
    freq_base: float = 10000.0
    freq_scale: float = 1.0
    n_ctx_orig: int = 0
    scaling: str = "linear"
    ext_factor: float = 0.0
    attn_factor: float = 1.0
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    sections: tuple | None = None

    @property
    def multi(self):
        """Positions have 4 rows (M-RoPE) and rope_multi takes `sections`."""
        return bool(self.mode & RopeType.MROPE)

    def args(self):
        """rope_ext's keyword arguments (besides a, b, c)."""
        return {"n_dims": self.n_dims, "mode": self.mode, "n_ctx_orig": self.n_ctx_orig,
                "freq_base": self.freq_base, "freq_scale": self.freq_scale, "ext_factor": self.ext_factor,
                "attn_factor": self.attn_factor, "beta_fast": self.beta_fast, "beta_slow": self.beta_slow}

    @classmethod
    def read(cls, r, mode, head_dim, n_ctx_train, scalings=("none", "linear", "yarn")):
        n_dims = r.int("rope.dimension_count", head_dim, hi=head_dim)
        if n_dims % 2:
            r.error("rope.dimension_count", f"an even number <= head_dim {head_dim}", n_dims)
        scaling = r.str("rope.scaling.type", "linear", choices=scalings)
        factor = r.float("rope.scaling.factor", r.raw("rope.scale_linear", 0.0))
        freq_scale = 1.0 if factor == 0 or scaling == "none" else 1.0 / factor
        ext_factor, attn_factor = 0.0, 1.0
        if scaling == "yarn":
            ext_factor = r.float("rope.scaling.yarn_ext_factor", 1.0)
        if ext_factor != 0:
            ggml_mscale = 1.0 + 0.1 * math.log(1.0 / freq_scale)        # what ggml's rope multiplies by
            if r.has("rope.scaling.yarn_attn_factor"):
                mscale = r.float("rope.scaling.yarn_attn_factor", lo_open=True)
            else:
                mscale = ggml_mscale if freq_scale < 1 else 1.0
            attn_factor = mscale / ggml_mscale
        attn_factor *= r.float("rope.scaling.attn_factor", 1.0, lo_open=True)
        return cls(mode=RopeType(mode), n_dims=n_dims, freq_base=r.float("rope.freq_base", 10000.0, lo_open=True),
                   freq_scale=freq_scale, scaling=scaling,
                   n_ctx_orig=r.int("rope.scaling.original_context_length", n_ctx_train),
                   ext_factor=ext_factor, attn_factor=attn_factor,
                   beta_fast=r.float("rope.scaling.yarn_beta_fast", 32.0),
                   beta_slow=r.float("rope.scaling.yarn_beta_slow", 1.0))


class TensorSpec(NamedTuple):
    """One tensor of an architecture: dims ((size, label), ...) in ggml order (ne[0] first), and
    whether a file must have it."""
    dims: tuple
    required: bool = True

    @property
    def shape(self):
        return tuple(v for v, _ in self.dims)


@dataclass(frozen=True)
class HParams:
    """The hyper-parameters of a pre-norm decoder, read from a GGUF (from_gguf) with llama.cpp's
    defaults: n_vocab ({arch}.vocab_size, else the token list's length, else token_embd's rows),
    n_embd, n_layer (block_count), n_head, n_head_kv (default n_head), head_dim / head_dim_v
    (attention.key_length / value_length, default n_embd / n_head), n_ff, n_ctx_train, rms_eps, rope
    (Rope), bos_id, eos_id, n_swa (the sliding window of the layers that have one, 0: none; the KV
    cache then fills a second mask). An architecture subclasses it: class attributes rope_type (llama.cpp's
    llama_model_rope_type), rope_scalings (the rope.scaling.type values it runs), qkv_bias (True:
    Q/K/V biases required, False: optional); read() for its own keys, check() for their relations,
    layer_tensors() for its tensors."""
    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    head_dim_v: int
    n_ff: int
    n_ctx_train: int
    rms_eps: float
    rope: Rope
    bos_id: int | None = None
    eos_id: int | None = None
    n_swa: int = 0

    rope_type: ClassVar[RopeType] = RopeType.NORMAL
    rope_scalings: ClassVar[tuple] = ("none", "linear", "yarn")
    qkv_bias: ClassVar[bool] = False

    @classmethod
    def from_gguf(cls, f):
        """The hyper-parameters of GGUFFile f, validated (values, their relations, every tensor's shape)
        before anything is sized from them; GGUFError naming the file, the key, expected and actual."""
        r = Keys(f)
        hp = cls(**cls.read(r))
        hp.check(r)
        hp.check_tensors(f.tensors, f"{f.path}: ", r.arch)
        return hp

    @classmethod
    def read(cls, r):
        """The constructor's arguments from Keys r (a subclass adds its own to the dict)."""
        n_embd, n_head = r.int("embedding_length"), r.int("attention.head_count")
        n_head_kv = r.int("attention.head_count_kv", n_head, hi=n_head)
        head_dims = []
        for key in ("attention.key_length", "attention.value_length"):
            if not r.has(key) and n_embd % n_head:
                r.error("attention.head_count", f"a divisor of the embedding length {n_embd} (no {r.name(key)})",
                        n_head)
            head_dims.append(r.int(key, n_embd // n_head))
        tokens = r.raw("tokenizer.ggml.tokens", None)
        n_vocab = r.int("vocab_size", None)
        if n_vocab is None:
            n_vocab = len(tokens) if tokens else cls._vocab_from_embedding(r)
        n_ctx_train = r.int("context_length")
        bos = r.int("tokenizer.ggml.bos_token_id", None, lo=0)
        eos = r.int("tokenizer.ggml.eos_token_id", None, lo=0)
        n_layer = r.int("block_count")
        if n_layer > r.n_blocks:         # before anything loops over or allocates the layers
            r.error("block_count", f"at most the {r.n_blocks} blocks the file has tensors for (blk.N.*)", n_layer)
        return {"n_vocab": n_vocab, "n_embd": n_embd, "n_layer": n_layer,
                "n_head": n_head, "n_head_kv": n_head_kv, "head_dim": head_dims[0], "head_dim_v": head_dims[1],
                "n_ff": r.int("feed_forward_length"), "n_ctx_train": n_ctx_train,
                "rms_eps": r.float("attention.layer_norm_rms_epsilon"),
                "rope": Rope.read(r, cls.rope_type, head_dims[0], n_ctx_train, cls.rope_scalings),
                "bos_id": bos, "eos_id": eos}

    @staticmethod
    def _vocab_from_embedding(r):
        t = r.file.tensors.get("token_embd.weight")
        if t is None:
            raise GGUFError(f"{r.path}: no {r.name('vocab_size')}, no tokenizer.ggml.tokens and no "
                            f"token_embd.weight to take the vocabulary size from")
        return t.ne[1]

    def check(self, r):
        """Relations between the values (after read; r for the error messages)."""
        if self.n_head % self.n_head_kv:
            r.error("attention.head_count_kv", f"a divisor of the head count {self.n_head}", self.n_head_kv)

    def check_tensors(self, tensors, where="", arch="this"):
        """Every tensor of the table against `tensors` (name -> Tensor): GGUFError for a missing
        required one or a shape the hyper-parameters do not give (where: the message's prefix)."""
        for name, spec in self.tensor_table().items():
            t = tensors.get(name)
            if t is None:
                if spec.required:
                    raise GGUFError(f"{where}tensor {name!r} is missing; a {arch} model needs it")
                continue
            if t.ne != spec.shape + (1,) * (4 - len(spec.dims)):
                want = ", ".join(f"{label}={v}" for v, label in spec.dims)
                raise GGUFError(f"{where}tensor {name!r} has ne={t.ne[:len(spec.dims)]} but the metadata "
                                f"gives [{want}]")

    def tensor_table(self):
        """name -> TensorSpec of every tensor the graph may read, as llama.cpp creates them."""
        E, V = (self.n_embd, "n_embd"), (self.n_vocab, "n_vocab")
        out = {"token_embd.weight": TensorSpec((E, V)), "output_norm.weight": TensorSpec((E,)),
               "output.weight": TensorSpec((E, V), False)}
        for il in range(self.n_layer):
            out.update(self.layer_tensors(il))
        return out

    def layer_tensors(self, il):
        """The tensors of layer il: llama.cpp's llama/qwen2 layer (optional output and FFN biases)."""
        E, F = (self.n_embd, "n_embd"), (self.n_ff, "n_ff")
        q = (self.n_head * self.head_dim, "n_head*head_dim")
        k = (self.n_head_kv * self.head_dim, "n_head_kv*head_dim")
        v = (self.n_head_kv * self.head_dim_v, "n_head_kv*head_dim_v")
        o = (self.n_head * self.head_dim_v, "n_head*head_dim_v")
        p, T = f"blk.{il}.", TensorSpec
        return {
            p + "attn_norm.weight": T((E,)),
            p + "attn_q.weight": T((E, q)), p + "attn_k.weight": T((E, k)), p + "attn_v.weight": T((E, v)),
            p + "attn_output.weight": T((o, E)),
            p + "attn_q.bias": T((q,), self.qkv_bias), p + "attn_k.bias": T((k,), self.qkv_bias),
            p + "attn_v.bias": T((v,), self.qkv_bias), p + "attn_output.bias": T((E,), False),
            p + "ffn_norm.weight": T((E,)),
            p + "ffn_gate.weight": T((E, F)), p + "ffn_up.weight": T((E, F)), p + "ffn_down.weight": T((F, E)),
            p + "ffn_gate.bias": T((F,), False), p + "ffn_up.bias": T((F,), False), p + "ffn_down.bias": T((E,), False),
        }

    def qk_norm_tensors(self, il):
        """The per-head RMSNorm weights of Q and K of layer il ([head_dim] each), for the architectures
        whose build_qkv ends with Decoder.build_qk_norm (qwen3, qwen3moe, gemma3)."""
        norm = TensorSpec(((self.head_dim, "head_dim"),))
        return {f"blk.{il}.attn_q_norm.weight": norm, f"blk.{il}.attn_k_norm.weight": norm}

    def as_dict(self):
        """The fields as a flat dict (rope's as rope_*), e.g. for printing."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "rope"}
        out.update({f"rope_{f.name}": getattr(self.rope, f.name) for f in fields(self.rope)})
        return out


class Decoder:
    """The graph of one batch shape of a pre-norm decoder (see the module docstring). feed() writes
    the inputs; compute via `graph`; output() reads the result."""
    hparams_class = HParams
    ffn_glu = GluOp.SWIGLU       # the FFN's gate activation (GluOp.GEGLU: GELU-tanh)
    nodes_per_layer = 64         # graph size per layer (an upper bound of the nodes one layer adds)

    def __init__(self, model, n_tokens, n_kv, n_out, embd=False):
        m = self.model = model
        self.hp = hp = model.hparams
        self.named = {}
        self.key = (n_tokens, n_kv, n_out, embd)
        self.n_tokens, self.n_kv, self.n_out = n_tokens, n_kv, n_out
        ctx = m.ctx
        if m.l0 == 0 and not embd:
            self.inp = self.cb(set_input(ctx.new_tensor(Type.I32, (n_tokens,))), "inp_tokens")
            x = self.cb(op.get_rows(m.weight("token_embd.weight"), self.inp), "inp_embd")
        else:
            self.inp = x = self.cb(set_input(ctx.new_tensor(Type.F32, (hp.n_embd, n_tokens))), "inp_embd")
        self.pos = self.cb(set_input(ctx.new_tensor(Type.I32, (n_tokens * m.pos_rows,))), "inp_pos")
        self.kv = m.cache.batch(n_tokens, n_kv)
        self.out_ids = None
        if m.has_head and n_out < n_tokens:
            ids = np.arange(n_tokens - n_out, n_tokens, dtype=np.int32)
            self.out_ids = self.cb(set_input(ctx.from_numpy(ids)), "inp_out_ids")
        for il in range(m.l0, m.l1):
            x = self.build_layer(x, il)
        if m.has_head:
            x = self.build_output(x)
        self.out = x
        for name in m.keep:
            if name not in self.named:
                raise ValueError(f"pyggml.models: keep: no tensor {name!r} in the graph (names such as "
                                 f"'ffn_out-0', 'l_out-0', 'result_norm')")
            set_output(self.named[name])
        self.graph = CGraph(size=self.nodes_per_layer * (m.l1 - m.l0) + 64)
        self.graph.build_forward_expand(x)
        self._inp_np, self._pos_np = self.inp.numpy(), self.pos.numpy()
        self._out_np, self._out_ptr = None, 0

    # ---- helpers ----

    def cb(self, t, name, il=None):
        """Name t as llama.cpp's graph callback does ("name-il", or "name" without a layer) and
        remember it for keep; returns t."""
        t.name = name if il is None else f"{name}-{il}"
        self.named[t.name] = t
        return t

    def weight(self, name, required=True):
        """The model's weight `name` (GGUF naming); None when absent and not required."""
        return self.model.weight(name, required)

    def mm(self, x, prefix):
        """x times `prefix`.weight, plus `prefix`.bias when the file has it."""
        y = op.mul_mat(self.weight(prefix + ".weight"), x)
        b = self.weight(prefix + ".bias", required=False)
        return y if b is None else op.add(y, b)

    def out_rows(self, il, *ts):
        """ts with only the rows that reach the LM head when il is the last layer (llama.cpp's
        inp_out_ids), else unchanged."""
        if il != self.hp.n_layer - 1 or self.out_ids is None:
            return ts
        return tuple(op.get_rows(t, self.out_ids) for t in ts)

    # ---- blocks ----

    def build_norm(self, x, prefix, eps=None):
        """RMSNorm of x's rows (ne[0]) times `prefix`.weight, plus `prefix`.bias when present. x may be
        [head_dim, n_head, n] with a [head_dim] weight (a per-head norm)."""
        y = op.mul(op.rms_norm(x, self.hp.rms_eps if eps is None else eps), self.weight(prefix + ".weight"))
        b = self.weight(prefix + ".bias", required=False)
        return y if b is None else op.add(y, b)

    def build_qkv(self, h, il):
        """The Q, K, V projections of the normed input h, shaped [head_dim(_v), n_head(_kv), n_tokens]."""
        hp, n, p = self.hp, self.n_tokens, f"blk.{il}."
        q = op.reshape_3d(self.mm(h, p + "attn_q"), hp.head_dim, hp.n_head, n)
        k = op.reshape_3d(self.mm(h, p + "attn_k"), hp.head_dim, hp.n_head_kv, n)
        v = op.reshape_3d(self.mm(h, p + "attn_v"), hp.head_dim_v, hp.n_head_kv, n)
        return q, k, self.cb(v, "Vcur", il)

    def build_qk_norm(self, q, k, v, il):
        """q and k with an RMSNorm of each head (attn_q_norm / attn_k_norm, [head_dim]; llama.cpp's
        "Qcur_normed", "Kcur_normed"), v unchanged: what qwen3, qwen3moe and gemma3 do before RoPE."""
        q = self.cb(self.build_norm(q, f"blk.{il}.attn_q_norm"), "Qcur_normed", il)
        k = self.cb(self.build_norm(k, f"blk.{il}.attn_k_norm"), "Kcur_normed", il)
        return q, k, v

    def rope_factors(self, il):
        """rope_ext's frequency factors (c) for layer il: None (Llama 3's rope_freqs and LongRoPE's
        long/short factors are what a variant returns here)."""

    def build_rope(self, t, il):
        """RoPE of t [head_dim, n_heads, n_tokens] at the step's positions, with the file's scaling."""
        return op.rope_ext(t, self.pos, self.rope_factors(il), **self.hp.rope.args())

    def attn_scale(self, il):
        """The scale of QK^T: 1 / sqrt(head_dim)."""
        return 1.0 / math.sqrt(self.hp.head_dim)

    def is_swa(self, il):
        """Layer il attends through the sliding window (hp.n_swa) instead of the whole context."""
        return False

    def attn_softcap(self, il):
        """The attention logits' soft cap c (c tanh(x / c) before the softmax; 0: none)."""
        return 0.0

    def attn_sinks(self, il):
        """Layer il's attention sinks: an F32 [n_head] tensor of one logit per head that joins each
        softmax's denominator (gpt-oss), or None."""

    def build_attn(self, q, k, v, il):
        """Write k, v into the cache and attend q over the step's n_kv cells (flash_attn_ext, or
        mul_mat + soft_max_ext with V transposed); returns the output projection of the heads
        ("kqv_out" before it, "attn_out" after)."""
        hp, n = self.hp, self.n_tokens
        li = il - self.model.l0          # the cache holds the range's layers only
        self.kv.cpy_k(li, k)
        self.kv.cpy_v(li, v)
        q = op.permute(q, 0, 2, 1, 3)                                   # [hd, n, nh]
        kk, vv = self.kv.get_k(li), self.kv.get_v(li)
        scale, cap, mask = self.attn_scale(il), self.attn_softcap(il), self.kv.get_mask(self.is_swa(il))
        sinks = self.attn_sinks(il)
        if self.model.flash_attn:
            a = op.flash_attn_ext_set_prec(op.flash_attn_ext(q, kk, vv, mask, scale, 0.0, cap), Prec.F32)
            if sinks is not None:
                op.flash_attn_ext_add_sinks(a, sinks)
            a = op.reshape_2d(a, hp.head_dim_v * hp.n_head, n)          # [hdv, nh, n] -> rows of n_embd
        else:
            kq = op.mul_mat(kk, q)
            if cap:                      # as llama.cpp: capped before the softmax's scale
                kq = op.scale(op.tanh(op.scale(kq, 1.0 / cap)), cap)
            kq = op.soft_max_ext(kq, mask, scale, 0.0)
            if sinks is not None:
                op.soft_max_add_sinks(kq, sinks)
            kq = self.cb(kq, "kq_soft_max", il)
            a = op.permute(op.mul_mat(vv, kq), 0, 2, 1, 3)              # [hdv, n, nh] -> [hdv, nh, n]
            a = op.reshape_2d(op.cont(a), hp.head_dim_v * hp.n_head, n)
        a = self.cb(a, "kqv_out", il)
        return self.cb(self.mm(a, f"blk.{il}.attn_output"), "attn_out", il)

    def build_ffn(self, h, il):
        """down(glu(gate(h), up(h))) with the GLU ffn_glu."""
        p = f"blk.{il}."
        return self.mm(op.glu_split(self.mm(h, p + "ffn_gate"), self.mm(h, p + "ffn_up"), self.ffn_glu),
                       p + "ffn_down")

    def build_layer(self, x, il):
        """One pre-norm layer: x + attn(norm(x)), then + ffn(norm(.))."""
        h = self.cb(self.build_norm(x, f"blk.{il}.attn_norm"), "attn_norm", il)
        q, k, v = self.build_qkv(h, il)
        q, k = self.cb(self.build_rope(q, il), "Qcur", il), self.cb(self.build_rope(k, il), "Kcur", il)
        a, x = self.out_rows(il, self.build_attn(q, k, v, il), x)
        x = self.cb(op.add(a, x), "ffn_inp", il)
        h = self.cb(self.build_norm(x, f"blk.{il}.ffn_norm"), "ffn_norm", il)
        f = self.cb(self.build_ffn(h, il), "ffn_out", il)
        return self.cb(op.add(f, x), "l_out", il)

    def build_output(self, x):
        """The output norm and the LM head (token_embd when the file has no output.weight)."""
        x = self.cb(self.build_norm(x, "output_norm"), "result_norm")
        return self.cb(op.mul_mat(self.model.output_weight, x), "result_output")

    # ---- running ----

    def output(self):
        """The output's numpy view after a compute (overwritten by the next), made once per
        placement of the graph's memory: a decode step does not pay for a new view."""
        ptr = self.out.data_ptr
        if self._out_np is None or ptr != self._out_ptr:
            self._out_np, self._out_ptr = self.out.numpy(), ptr
        return self._out_np

    def feed(self, inputs, positions, cells):
        """Write the token ids (or hidden rows [n_tokens, n_embd]), the positions ([rows, n_tokens])
        and the KV cells of this step into the input tensors."""
        self._inp_np[...] = inputs
        self._pos_np[:] = positions.reshape(-1)
        self.kv.fill(cells)
