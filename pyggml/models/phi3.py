"""phi3 (llama.cpp's src/models/phi3.cpp): Phi-3, Phi-3.5 and Phi-4 (mini) dense text models.

llama's pre-norm layer with RoPE NEOX (over rope.dimension_count dimensions: Phi-4-mini rotates part of
each head), a fused Q/K/V projection (attn_qkv: Q, K, V rows in that order; separate attn_q/k/v are
read when the file has them instead) and a fused gate/up projection (ffn_up [n_embd, 2 n_ff]: SwiGLU
of its first half times its second). Queries are scaled by 1/sqrt(head_dim) before attention. LongRoPE
files carry rope_factors_long / rope_factors_short ([n_rot/2], RoPE's frequency factors) and
rope.scaling.attn_factor (RoPE's magnitude scale): as llama.cpp, the long factors when the model's
context (n_ctx) exceeds rope.scaling.original_context_length, else the short ones. As llama.cpp, the
sliding window a file may carry (attention.sliding_window, Phi-3-mini's 2047) is not applied: every
layer attends the whole context.
"""
import math
from dataclasses import dataclass

from pyggml import _ops as op
from pyggml._enums import RopeType
from pyggml.gguf import GGUFError
from pyggml.models.blocks import Decoder, HParams, TensorSpec


@dataclass(frozen=True)
class Phi3HParams(HParams):
    rope_type = RopeType.NEOX
    rope_scalings = ("none", "linear", "yarn", "longrope")

    def check(self, r):
        super().check(r)
        if self.head_dim_v != self.head_dim:            # llama.cpp's graph asserts it
            r.error("attention.value_length", f"the key length {self.head_dim}", self.head_dim_v)

    def tensor_table(self):
        f = TensorSpec(((self.rope.n_dims // 2, "rope_dim/2"),), False)
        return {**super().tensor_table(), "rope_factors_long.weight": f, "rope_factors_short.weight": f}

    def layer_tensors(self, il):
        E, F = (self.n_embd, "n_embd"), (self.n_ff, "n_ff")
        q = (self.n_head * self.head_dim, "n_head*head_dim")
        kv = (self.n_head_kv * self.head_dim, "n_head_kv*head_dim")
        qkv = (self.n_head * self.head_dim + 2 * self.n_head_kv * self.head_dim, "(n_head+2*n_head_kv)*head_dim")
        p, T = f"blk.{il}.", TensorSpec
        return {p + "attn_norm.weight": T((E,)),
                p + "attn_qkv.weight": T((E, qkv), False), p + "attn_qkv.bias": T((qkv,), False),
                p + "attn_q.weight": T((E, q), False), p + "attn_k.weight": T((E, kv), False),
                p + "attn_v.weight": T((E, kv), False),
                p + "attn_output.weight": T((q, E)), p + "attn_output.bias": T((E,), False),
                p + "ffn_norm.weight": T((E,)),
                p + "ffn_up.weight": T((E, (2 * self.n_ff, "2*n_ff"))), p + "ffn_down.weight": T((F, E))}

    def check_tensors(self, tensors, where="", arch="this"):
        super().check_tensors(tensors, where, arch)
        for il in range(self.n_layer):
            p = f"blk.{il}."
            if p + "attn_qkv.weight" not in tensors and not all(p + f"attn_{x}.weight" in tensors for x in "qkv"):
                raise GGUFError(f"{where}layer {il} has neither {p}attn_qkv.weight nor {p}attn_q/k/v.weight; a "
                                f"{arch} model needs one of them")


class Phi3(Decoder):
    hparams_class = Phi3HParams

    def rope_factors(self, il):
        m = self.model
        name = "rope_factors_long.weight" if m.n_ctx > self.hp.rope.n_ctx_orig else "rope_factors_short.weight"
        return self.weight(name, required=False)

    def attn_scale(self, il):
        return 1.0                   # the queries carry 1/sqrt(head_dim)

    def build_qkv(self, h, il):
        hp, n, p = self.hp, self.n_tokens, f"blk.{il}."
        if self.weight(p + "attn_qkv.weight", required=False) is None:
            return super().build_qkv(h, il)
        qkv = self.cb(self.mm(h, p + "attn_qkv"), "wqkv", il)                # [(nh + 2 nkv) hd, n]
        d, row, es = hp.head_dim, qkv.nb[1], qkv.nb[0]           # views of each token's row, as llama.cpp
        q = op.view_3d(qkv, d, hp.n_head, n, d * es, row, 0)
        k = op.view_3d(qkv, d, hp.n_head_kv, n, d * es, row, hp.n_head * d * es)
        v = op.view_3d(qkv, d, hp.n_head_kv, n, d * es, row, (hp.n_head + hp.n_head_kv) * d * es)
        return q, k, self.cb(op.cont(v), "Vcur", il)

    def build_layer(self, x, il):
        q_scale = 1.0 / math.sqrt(self.hp.head_dim)
        h = self.cb(self.build_norm(x, f"blk.{il}.attn_norm"), "attn_norm", il)
        q, k, v = self.build_qkv(h, il)
        q, k = self.cb(self.build_rope(q, il), "Qcur", il), self.cb(self.build_rope(k, il), "Kcur", il)
        a, x = self.out_rows(il, self.build_attn(op.scale(q, q_scale), k, v, il), x)
        x = self.cb(op.add(a, x), "ffn_inp", il)
        h = self.cb(self.build_norm(x, f"blk.{il}.ffn_norm"), "ffn_norm", il)
        f = self.cb(self.build_ffn(h, il), "ffn_out", il)
        return self.cb(op.add(x, f), "l_out", il)

    def build_ffn(self, h, il):
        """down(silu(gate) * up), gate and up the two halves of the fused ffn_up."""
        p = f"blk.{il}."
        return self.mm(op.swiglu(self.mm(h, p + "ffn_up")), p + "ffn_down")
