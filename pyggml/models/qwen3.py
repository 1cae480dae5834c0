"""qwen3 (llama.cpp's src/models/qwen3.cpp): Qwen3 dense text models.

qwen2's layer (RoPE NEOX) without the Q/K/V biases and with an RMSNorm of each head of Q and K
(blk.N.attn_q_norm / attn_k_norm, [head_dim]) before RoPE. The head dimension is its own key
(attention.key_length: 128 where n_embd / n_head is not).
"""
from dataclasses import dataclass

from pyggml._enums import RopeType
from pyggml.models.blocks import Decoder, HParams


@dataclass(frozen=True)
class Qwen3HParams(HParams):
    rope_type = RopeType.NEOX

    def check(self, r):
        super().check(r)
        if self.head_dim_v != self.head_dim:            # llama.cpp's graph asserts both
            r.error("attention.value_length", f"the key length {self.head_dim}", self.head_dim_v)
        if self.rope.n_dims != self.head_dim:
            r.error("rope.dimension_count", f"the head dimension {self.head_dim}", self.rope.n_dims)

    def layer_tensors(self, il):
        return {**super().layer_tensors(il), **self.qk_norm_tensors(il)}


class Qwen3(Decoder):
    hparams_class = Qwen3HParams

    def build_qkv(self, h, il):
        return self.build_qk_norm(*super().build_qkv(h, il), il)
