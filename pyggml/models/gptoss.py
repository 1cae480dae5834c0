"""gpt-oss (llama.cpp's src/models/openai-moe.cpp, LLM_ARCH_OPENAI_MOE): OpenAI's gpt-oss.

A pre-norm decoder whose FFN is a mixture of experts. Attention: Q/K/V with optional biases, the output
projection with a required bias, RoPE NEOX (YaRN in the released models: rope.scaling.*), queries scaled
by 1/sqrt(head_dim), and one learned sink logit per head (blk.N.attn_sinks, [n_head]) that joins every
softmax's denominator but weights no value. Layers alternate between a sliding window of
attention.sliding_window positions (the even layers; attention.sliding_window_pattern overrides the period
or lists the layers) and the whole context; the windowed layers use rope.freq_base_swa when the file has
it. The FFN norm is blk.N.post_attention_norm (as llama.cpp names it). The MoE: router logits =
ffn_gate_inp (+ its bias); the expert_used_count experts of largest logit (argsort_top_k); their weights
the softmax of those logits only (llama.cpp's SOFTMAX_WEIGHT gating); each expert's gate and up
projections with per-expert biases (add_id), the clamped SwiGLU swiglu_oai (alpha 1.702, limit 7, the
constants llama.cpp uses), the down projection with its bias; the weighted expert outputs summed. Expert
weights may be of any type mul_mat_id takes (MXFP4 in the released files).
"""
import dataclasses
from dataclasses import dataclass

from pyggml import _ops as op
from pyggml._enums import RopeType, Type
from pyggml.gguf import GGUFError
from pyggml.models.blocks import Decoder, HParams, Rope, TensorSpec
from pyggml.models.gemma2 import swa_layers

SWIGLU_ALPHA, SWIGLU_LIMIT = 1.702, 7.0        # llama.cpp's LLM_FFN_SWIGLU_OAI_MOE constants


@dataclass(frozen=True)
class GptOssHParams(HParams):
    """HParams plus the experts (n_expert, n_expert_used, n_ff_exp), the sliding-window layers and
    their RoPE."""
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    swa_layers: tuple = ()
    rope_swa: Rope = None

    rope_type = RopeType.NEOX
    n_expert_max = 512          # llama.cpp's LLAMA_MAX_EXPERTS

    @classmethod
    def read(cls, r):
        d = super().read(r)
        d["n_expert"] = r.int("expert_count", hi=cls.n_expert_max)
        d["n_expert_used"] = r.int("expert_used_count", hi=d["n_expert"])
        d["n_ff_exp"] = r.int("expert_feed_forward_length")
        d["n_swa"] = r.int("attention.sliding_window")
        d["swa_layers"] = swa_layers(r, d["n_layer"], 2)
        d["rope_swa"] = dataclasses.replace(d["rope"], freq_base=r.float("rope.freq_base_swa", d["rope"].freq_base,
                                                                           lo_open=True))
        return d

    def check(self, r):
        super().check(r)
        if self.head_dim_v != self.head_dim:
            r.error("attention.value_length", f"the key length {self.head_dim}", self.head_dim_v)
        if self.rope.n_dims != self.head_dim:           # llama.cpp sizes the heads by n_rot
            r.error("rope.dimension_count", f"the head dimension {self.head_dim}", self.rope.n_dims)

    def layer_tensors(self, il):
        E, FE, X = (self.n_embd, "n_embd"), (self.n_ff_exp, "n_ff_exp"), (self.n_expert, "n_expert")
        q = (self.n_head * self.head_dim, "n_head*head_dim")
        kv = (self.n_head_kv * self.head_dim, "n_head_kv*head_dim")
        p, T = f"blk.{il}.", TensorSpec
        return {
            p + "attn_norm.weight": T((E,)), p + "post_attention_norm.weight": T((E,)),
            p + "attn_q.weight": T((E, q)), p + "attn_k.weight": T((E, kv)), p + "attn_v.weight": T((E, kv)),
            p + "attn_q.bias": T((q,), False), p + "attn_k.bias": T((kv,), False), p + "attn_v.bias": T((kv,), False),
            p + "attn_output.weight": T((q, E)), p + "attn_output.bias": T((E,)),
            p + "attn_sinks.weight": T(((self.n_head, "n_head"),)),
            p + "ffn_gate_inp.weight": T((E, X)), p + "ffn_gate_inp.bias": T((X,)),
            p + "ffn_gate_exps.weight": T((E, FE, X)), p + "ffn_up_exps.weight": T((E, FE, X)),
            p + "ffn_down_exps.weight": T((FE, E, X)),
            p + "ffn_gate_exps.bias": T((FE, X)), p + "ffn_up_exps.bias": T((FE, X)),
            p + "ffn_down_exps.bias": T((E, X)),
        }

    def check_tensors(self, tensors, where="", arch="this"):
        """The table's shapes, and F32 for the sinks and the experts' biases (what soft_max/flash
        attention's sinks and add_id take; llama.cpp's converter writes them so)."""
        super().check_tensors(tensors, where, arch)
        for name, t in tensors.items():
            if name.endswith(("attn_sinks.weight", "_exps.bias")) and t.type != Type.F32:
                raise GGUFError(f"{where}tensor {name!r} has type {t.type.name}; a {arch} model needs F32")

    def tensor_table(self):
        table = super().tensor_table()
        table["output.weight"] = table["output.weight"]._replace(required=True)    # llama.cpp requires it
        return table


class GptOss(Decoder):
    hparams_class = GptOssHParams

    @property
    def nodes_per_layer(self):
        return 64 + 2 * self.hp.n_expert_used           # one view and one add per used expert

    def is_swa(self, il):
        return self.hp.swa_layers[il]

    def attn_sinks(self, il):
        return self.weight(f"blk.{il}.attn_sinks.weight")

    def build_rope(self, t, il):
        rope = self.hp.rope_swa if self.is_swa(il) else self.hp.rope
        return op.rope_ext(t, self.pos, self.rope_factors(il), **rope.args())

    def build_ffn(self, h, il):
        """The mixture of experts over the normed rows h [n_embd, n] (n: n_out in the last layer)."""
        hp, n, p = self.hp, h.ne[1], f"blk.{il}."
        k = hp.n_expert_used
        logits = self.cb(self.mm(h, p + "ffn_gate_inp"), "ffn_moe_logits", il)        # [n_expert, n]
        chosen = self.cb(op.argsort_top_k(logits, k), "ffn_moe_topk", il)              # [k, n]
        w = op.get_rows(op.reshape_3d(logits, 1, hp.n_expert, n), chosen)              # [1, k, n]
        w = op.reshape_3d(op.soft_max_ext(op.reshape_2d(w, k, n)), 1, k, n)
        w = self.cb(w, "ffn_moe_weights_softmax", il)
        x = op.reshape_3d(h, hp.n_embd, 1, n)

        def experts(t, name):
            y = op.mul_mat_id(self.weight(p + name + ".weight"), t, chosen)
            return op.add_id(y, self.weight(p + name + ".bias"), chosen)

        up, gate = experts(x, "ffn_up_exps"), experts(x, "ffn_gate_exps")
        act = self.cb(op.swiglu_oai(gate, up, SWIGLU_ALPHA, SWIGLU_LIMIT), "ffn_moe_swiglu_oai", il)
        y = self.cb(op.mul(experts(act, "ffn_down_exps"), w), "ffn_moe_weighted", il)   # [n_embd, k, n]
        out = None
        for i in range(k):               # the experts' rows summed in llama.cpp's order
            v = op.view_2d(y, hp.n_embd, n, y.nb[2], i * y.nb[1])
            out = v if out is None else op.add(out, v)
        return op.cont(out) if k == 1 else out

    def build_layer(self, x, il):
        p = f"blk.{il}."
        h = self.cb(self.build_norm(x, p + "attn_norm"), "attn_norm", il)
        q, k, v = self.build_qkv(h, il)
        q, k = self.cb(self.build_rope(q, il), "Qcur", il), self.cb(self.build_rope(k, il), "Kcur", il)
        a, x = self.out_rows(il, self.build_attn(q, k, v, il), x)
        x = self.cb(op.add(a, x), "ffn_inp", il)
        h = self.cb(self.build_norm(x, p + "post_attention_norm"), "attn_post_norm", il)
        f = self.cb(self.build_ffn(h, il), "ffn_moe_out", il)
        return self.cb(op.add(f, x), "l_out", il)
