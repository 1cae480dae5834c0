"""qwen3moe (llama.cpp's src/models/qwen3moe.cpp): Qwen3's mixture-of-experts models (Qwen3-30B-A3B, 235B-A22B).

qwen3's layer (per-head Q/K RMSNorms, RoPE NEOX) with its FFN replaced by llama.cpp's build_moe_ffn: a
router (blk.N.ffn_gate_inp, [n_embd, expert_count], F32 in converted files) whose softmax picks the
expert_used_count most probable experts of each token (argsort_top_k: ties to the lower index); the
chosen probabilities renormalised to sum 1; each chosen expert's SwiGLU FFN (ffn_gate_exps /
ffn_up_exps [n_embd, n_ff_exp, n_expert], ffn_down_exps [n_ff_exp, n_embd, n_expert], through
mul_mat_id, which reads only the experts the batch picked) weighted by its probability; the weighted
outputs summed in expert-rank order as llama.cpp adds them. n_ff_exp is expert_feed_forward_length
(default feed_forward_length / expert_used_count, as llama.cpp).

Where pyggml differs: llama.cpp's qwen3moe always renormalises (HF's norm_topk_prob true, what the
released models set); pyggml reads expert_weights_norm (default true), which pyggml's converter
writes as false for a model with norm_topk_prob false, so such a model runs as transformers runs it.
llama.cpp clamps the sum of the chosen probabilities to >= 2^-14 before dividing; with softmax
gating the sum is at least expert_used_count / expert_count >= 2^-10 (at most 1024 experts, llama.cpp's
LLAMA_MAX_EXPERTS), so the clamp never acts and pyggml leaves it out.
"""
from dataclasses import dataclass

from pyggml import _ops as op
from pyggml.models.blocks import TensorSpec
from pyggml.models.qwen3 import Qwen3, Qwen3HParams

MAX_EXPERTS = 1024          # llama.cpp's LLAMA_MAX_EXPERTS


@dataclass(frozen=True)
class Qwen3MoeHParams(Qwen3HParams):
    """Qwen3HParams plus the experts: n_expert (expert_count, 1..1024), n_expert_used
    (expert_used_count, 1..n_expert), n_ff_exp (expert_feed_forward_length) and expert_weights_norm."""
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    expert_weights_norm: bool = True

    @classmethod
    def read(cls, r):
        d = super().read(r)
        d["n_expert"] = n_expert = r.int("expert_count", hi=MAX_EXPERTS)
        d["n_expert_used"] = n_used = r.int("expert_used_count", hi=n_expert)
        n_ff_exp = r.int("expert_feed_forward_length", None)
        if n_ff_exp is None:
            n_ff_exp = d["n_ff"] // n_used
            if n_ff_exp == 0:
                r.error("feed_forward_length", f"at least expert_used_count = {n_used} (no "
                        f"{r.name('expert_feed_forward_length')}: the experts' width is their quotient)", d["n_ff"])
        d["n_ff_exp"] = n_ff_exp
        norm = r.raw("expert_weights_norm", True)
        if not isinstance(norm, bool):
            r.error("expert_weights_norm", "a bool", norm)
        d["expert_weights_norm"] = norm
        return d

    def layer_tensors(self, il):
        """qwen3's layer without the dense FFN, with the router and the three expert tensors."""
        p = f"blk.{il}."
        out = {name: spec for name, spec in super().layer_tensors(il).items()
               if not name.startswith((p + "ffn_gate.", p + "ffn_up.", p + "ffn_down."))}
        E, F, X = (self.n_embd, "n_embd"), (self.n_ff_exp, "n_ff_exp"), (self.n_expert, "n_expert")
        out.update({p + "ffn_gate_inp.weight": TensorSpec((E, X)),
                    p + "ffn_gate_exps.weight": TensorSpec((E, F, X)),
                    p + "ffn_up_exps.weight": TensorSpec((E, F, X)),
                    p + "ffn_down_exps.weight": TensorSpec((F, E, X))})
        return out


class Qwen3Moe(Qwen3):
    hparams_class = Qwen3MoeHParams

    @property
    def nodes_per_layer(self):
        return 64 + 2 * self.hp.n_expert_used          # + a view and an add per chosen expert

    def build_ffn(self, h, il):
        """The experts' FFN of h [n_embd, n] (llama.cpp's build_moe_ffn with softmax gating, SwiGLU,
        the chosen weights renormalised when expert_weights_norm, no scale)."""
        hp, p, n = self.hp, f"blk.{il}.", h.ne[1]
        k = hp.n_expert_used
        logits = self.cb(op.mul_mat(self.weight(p + "ffn_gate_inp.weight"), h), "ffn_moe_logits", il)
        probs = self.cb(op.soft_max_ext(logits), "ffn_moe_probs", il)                   # [n_expert, n]
        chosen = self.cb(op.argsort_top_k(probs, k), "ffn_moe_topk", il)               # [k, n] I32
        w = self.cb(op.get_rows(op.reshape_3d(probs, 1, hp.n_expert, n), chosen), "ffn_moe_weights", il)
        if hp.expert_weights_norm:
            w = op.reshape_2d(w, k, n)
            total = self.cb(op.sum_rows(w), "ffn_moe_weights_sum", il)
            w = self.cb(op.div(w, total), "ffn_moe_weights_norm", il)
            w = op.reshape_3d(w, 1, k, n)
        x = op.reshape_3d(h, hp.n_embd, 1, n)
        up = self.cb(op.mul_mat_id(self.weight(p + "ffn_up_exps.weight"), x, chosen), "ffn_moe_up", il)
        gate = self.cb(op.mul_mat_id(self.weight(p + "ffn_gate_exps.weight"), x, chosen), "ffn_moe_gate", il)
        act = self.cb(op.glu_split(gate, up, self.ffn_glu), "ffn_moe_swiglu", il)      # [n_ff_exp, k, n]
        down = self.cb(op.mul_mat_id(self.weight(p + "ffn_down_exps.weight"), act, chosen), "ffn_moe_down", il)
        down = self.cb(op.mul(down, w), "ffn_moe_weighted", il)                        # [n_embd, k, n]
        out = op.view_2d(down, hp.n_embd, n, down.nb[2], 0)
        for i in range(1, k):
            out = op.add(out, op.view_2d(down, hp.n_embd, n, down.nb[2], i * down.nb[1]))
        if k == 1:
            out = op.cont(out)                         # a view of the weighted rows: made contiguous
        return self.cb(out, "ffn_moe_out", il)
