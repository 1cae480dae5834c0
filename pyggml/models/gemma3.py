"""gemma3 (llama.cpp's src/models/gemma3.cpp): the Gemma 3 text decoder.

Gemma 2's layer (embedding scaled by sqrt(n_embd), norms before and after attention and FFN, GELU-tanh
GLU, queries scaled by 1/sqrt(head_dim), or 1/sqrt(n_embd/n_head) for the 27B layer count 62) with
an RMSNorm of each head of Q and K before RoPE (attn_q_norm / attn_k_norm, [head_dim]) and without the
attention soft-cap. With attention.sliding_window > 0, five layers in six attend a sliding window
(attention.sliding_window_pattern overrides the period or lists the layers) with RoPE base
rope.freq_base_swa (default 10000), the others the whole context with rope.freq_base; without it
every layer is global. The output logits are soft-capped only when final_logit_softcapping is set.
The LM head is output.weight when the file has it, else the embedding.
"""
import dataclasses
from dataclasses import dataclass

from pyggml.models.gemma2 import Gemma2, Gemma2HParams, swa_layers


@dataclass(frozen=True)
class Gemma3HParams(Gemma2HParams):
    n_layer_27b = 62

    @classmethod
    def read(cls, r):
        d = super(Gemma2HParams, cls).read(r)
        d["n_swa"] = r.int("attention.sliding_window", 0, lo=0)
        d["swa_layers"] = swa_layers(r, d["n_layer"], 6) if d["n_swa"] else (False,) * d["n_layer"]
        d["rope_swa"] = dataclasses.replace(d["rope"], freq_base=r.float("rope.freq_base_swa", 10000.0, lo_open=True),
                                            freq_scale=1.0)
        d["final_softcap"] = r.float("final_logit_softcapping", 0.0)
        d["q_scale"] = cls.query_scale(d)
        return d

    def tensor_table(self):
        return super(Gemma2HParams, self).tensor_table()       # output.weight optional, as the base table

    def layer_tensors(self, il):
        return {**super().layer_tensors(il), **self.qk_norm_tensors(il)}


class Gemma3(Gemma2):
    hparams_class = Gemma3HParams

    def build_qkv(self, h, il):
        return self.build_qk_norm(*super().build_qkv(h, il), il)

    def output_weight(self):
        return self.model.output_weight
