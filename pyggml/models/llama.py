"""llama (llama.cpp's src/models/llama.cpp): Llama 1-3, Mistral and their fine-tunes.

The base pre-norm decoder as it is: RoPE NORMAL (pairs (2i, 2i+1): the converter permutes HF's Q/K rows
for it), optional Q/K/V/output and FFN biases, tied embeddings when output.weight is absent, GQA. Llama 3
files with rope_scaling "llama3" carry rope_freqs.weight, the per-frequency divisors the converter
computed, which RoPE reads as its frequency factors.
"""
from dataclasses import dataclass

from pyggml._enums import RopeType
from pyggml.models.blocks import Decoder, HParams, TensorSpec


@dataclass(frozen=True)
class LlamaHParams(HParams):
    rope_type = RopeType.NORMAL

    def check(self, r):
        super().check(r)
        if self.rope.n_dims != self.head_dim:       # llama.cpp: "invalid n_rot"
            r.error("rope.dimension_count", f"the head dimension {self.head_dim}", self.rope.n_dims)

    def tensor_table(self):
        return {**super().tensor_table(),
                "rope_freqs.weight": TensorSpec(((self.rope.n_dims // 2, "rope_dim/2"),), False)}


class Llama(Decoder):
    hparams_class = LlamaHParams

    def rope_factors(self, il):
        return self.weight("rope_freqs.weight", required=False)
