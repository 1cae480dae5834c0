"""qwen2 (llama.cpp's src/models/qwen2.cpp): Qwen1.5, Qwen2 and Qwen2.5 text models.

llama's layer with RoPE NEOX (pairs (i, i + n_rot/2): HF's layout, unpermuted) and required Q/K/V
biases. Long-context files (Qwen2.5 with rope_scaling yarn) carry rope.scaling.type yarn.
"""
from dataclasses import dataclass

from pyggml._enums import RopeType
from pyggml.models.blocks import Decoder, HParams


@dataclass(frozen=True)
class Qwen2HParams(HParams):
    rope_type = RopeType.NEOX
    qkv_bias = True


class Qwen2(Decoder):
    hparams_class = Qwen2HParams
