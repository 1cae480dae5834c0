"""gemma2 (llama.cpp's src/models/gemma2.cpp): Gemma 2.

A pre-norm decoder with a norm after each block as well: x + post_norm(attn(norm(x))), then
+ post_norm(ffn(norm(.))). The token embeddings are scaled by sqrt(n_embd); RoPE NEOX; the FFN is a
GELU-tanh GLU; the LM head is the embedding. Queries are scaled by 1/sqrt(head_dim) before attention
(1/sqrt(n_embd/n_head) for the 27B layer count, 46: llama.cpp's rule, which gives HF's
query_pre_attn_scalar of the released models; the GGUF has no key for it). The attention logits are
soft-capped (attn_logit_softcapping, default 50: c tanh(x / c)) and so are the output logits
(final_logit_softcapping, default 30). Layers alternate between a sliding window of
attention.sliding_window positions (default 4096; the even layers) and the whole context
(attention.sliding_window_pattern: a period n, layer il windowed when il % n < n - 1, or one bool per
layer); the windowed layers use rope.freq_base_swa when the file has it.
"""
import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from pyggml import _ops as op
from pyggml._enums import GluOp, RopeType, Type
from pyggml.models.blocks import Decoder, HParams, Rope, TensorSpec


def swa_layers(r, n_layer, n_pattern):
    """Which layers use the sliding window, as llama.cpp's load_swa_pattern: the file's
    attention.sliding_window_pattern (a bool per layer, or a period), else the period n_pattern."""
    key = "attention.sliding_window_pattern"
    v = r.raw(key, None)
    if isinstance(v, list):
        if len(v) != n_layer or not all(isinstance(b, (bool, np.bool_, int, np.integer)) and b in (0, 1) for b in v):
            r.error(key, f"{n_layer} booleans (one per layer) or a period", v)
        return tuple(bool(b) for b in v)
    if v is not None:
        n_pattern = r.int(key, lo=0)
    return tuple(n_pattern == 0 or il % n_pattern < n_pattern - 1 for il in range(n_layer))


@dataclass(frozen=True)
class Gemma2HParams(HParams):
    """HParams plus the sliding-window layers, their RoPE, the soft caps and the query scale."""
    swa_layers: tuple = ()
    rope_swa: Rope = None
    attn_softcap: float = 0.0
    final_softcap: float = 0.0
    q_scale: float = 1.0

    rope_type = RopeType.NEOX
    n_layer_27b = 46           # llama.cpp's LLM_TYPE_27B: queries scaled by 1/sqrt(n_embd / n_head)

    @classmethod
    def read(cls, r):
        d = super().read(r)
        d["n_swa"] = r.int("attention.sliding_window", 4096)
        d["swa_layers"] = swa_layers(r, d["n_layer"], 2)
        d["rope_swa"] = dataclasses.replace(d["rope"], freq_base=r.float("rope.freq_base_swa", d["rope"].freq_base,
                                                                           lo_open=True))
        d["attn_softcap"] = r.float("attn_logit_softcapping", 50.0, lo_open=True)
        d["final_softcap"] = r.float("final_logit_softcapping", 30.0, lo_open=True)
        d["q_scale"] = cls.query_scale(d)
        return d

    @classmethod
    def query_scale(cls, d):
        if d["n_layer"] == cls.n_layer_27b:
            return 1.0 / math.sqrt(d["n_embd"] // d["n_head"])
        return 1.0 / math.sqrt(d["head_dim"])

    def check(self, r):
        super().check(r)
        if self.head_dim_v != self.head_dim:
            r.error("attention.value_length", f"the key length {self.head_dim}", self.head_dim_v)

    def tensor_table(self):
        table = super().tensor_table()
        del table["output.weight"]           # llama.cpp's gemma2 reads the embedding as the LM head
        return table

    def layer_tensors(self, il):
        E, F = (self.n_embd, "n_embd"), (self.n_ff, "n_ff")
        q, kv = (self.n_head * self.head_dim, "n_head*head_dim"), (self.n_head_kv * self.head_dim, "n_head_kv*head_dim")
        p, T = f"blk.{il}.", TensorSpec
        return {p + "attn_norm.weight": T((E,)), p + "attn_q.weight": T((E, q)), p + "attn_k.weight": T((E, kv)),
                p + "attn_v.weight": T((E, kv)), p + "attn_output.weight": T((q, E)),
                p + "post_attention_norm.weight": T((E,)), p + "ffn_norm.weight": T((E,)),
                p + "ffn_gate.weight": T((E, F)), p + "ffn_up.weight": T((E, F)), p + "ffn_down.weight": T((F, E)),
                p + "post_ffw_norm.weight": T((E,))}


class Gemma2(Decoder):
    hparams_class = Gemma2HParams
    ffn_glu = GluOp.GEGLU

    def is_swa(self, il):
        return self.hp.n_swa > 0 and self.hp.swa_layers[il]

    def attn_softcap(self, il):
        return self.hp.attn_softcap

    def attn_scale(self, il):
        return 1.0                   # the queries carry the scale (q_scale)

    def build_rope(self, t, il):
        rope = self.hp.rope_swa if self.is_swa(il) else self.hp.rope
        return op.rope_ext(t, self.pos, self.rope_factors(il), **rope.args())

    def build_layer(self, x, il):
        p, hp = f"blk.{il}.", self.hp
        if il == 0 and self.inp.type == Type.I32:           # token ids (not embeddings): scaled by sqrt(n_embd)
            x = self.cb(op.scale(x, math.sqrt(hp.n_embd)), "inp_scaled")
        h = self.cb(self.build_norm(x, p + "attn_norm"), "attn_norm", il)
        q, k, v = self.build_qkv(h, il)
        q, k = self.cb(self.build_rope(q, il), "Qcur", il), self.cb(self.build_rope(k, il), "Kcur", il)
        q = op.scale(q, hp.q_scale)
        a, x = self.out_rows(il, self.build_attn(q, k, v, il), x)
        a = self.cb(self.build_norm(a, p + "post_attention_norm"), "attn_post_norm", il)
        x = self.cb(op.add(a, x), "sa_out", il)
        h = self.cb(self.build_norm(x, p + "ffn_norm"), "ffn_norm", il)
        f = self.cb(self.build_ffn(h, il), "ffn_out", il)
        f = self.cb(self.build_norm(f, p + "post_ffw_norm"), "ffn_post_norm", il)
        return self.cb(op.add(f, x), "l_out", il)

    def build_output(self, x):
        x = self.cb(self.build_norm(x, "output_norm"), "result_norm")
        y = op.mul_mat(self.output_weight(), x)
        c = self.hp.final_softcap
        if c:
            y = op.scale(op.tanh(op.scale(y, 1.0 / c)), c)
        return self.cb(y, "result_output")

    def output_weight(self):
        return self.weight("token_embd.weight")
