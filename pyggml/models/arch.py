"""The architectures pyggml runs and what sets them apart, as llama.cpp's src/models/*.cpp build them.

Every one is a pre-norm decoder: token embedding (get_rows), per layer RMSNorm -> Q/K/V projections
-> RoPE -> causal attention over the KV cache -> output projection -> residual -> RMSNorm -> SwiGLU
FFN (silu(gate) * up -> down) -> residual, then the output RMSNorm and the LM head (the token
embedding when output.weight is absent). They differ in the RoPE mode and the attention biases:

| arch      | RoPE mode                     | positions         | Q/K/V biases |
|-----------|-------------------------------|-------------------|--------------|
| `llama`   | NORMAL (pairs (2i, 2i+1))     | n_tokens          | optional     |
| `qwen2`   | NEOX (pairs (i, i + n_rot/2)) | n_tokens          | required     |
| `qwen2vl` | MROPE (sections t, h, w, e)   | 4 * n_tokens      | required     |

(the modes come from pyggml.gguf.ARCHITECTURES, the tensors and which are required from
pyggml.gguf.expected_tensors)

llama's NORMAL mode holds because the converter permutes the rows of Q and K (HF's rotate_half pairs
(i, i + d/2), which the permutation turns into adjacent pairs); qwen2 keeps HF's layout and uses
NEOX. qwen2vl's M-RoPE splits each head's pairs into the GGUF's rope.dimension_sections and turns
section s with position row s; text tokens have all four rows equal to the token position.
"""
from dataclasses import dataclass

from pyggml._enums import RopeType
from pyggml.gguf import ARCHITECTURES


@dataclass(frozen=True)
class Arch:
    name: str
    rope_mode: RopeType     # pyggml.gguf.ARCHITECTURES, llama.cpp's llama_model_rope_type

    @property
    def multi_rope(self):
        """Positions have 4 rows and rope_multi takes the GGUF's sections."""
        return bool(self.rope_mode & RopeType.MROPE)


ARCHS = {name: Arch(name, RopeType(mode)) for name, mode in ARCHITECTURES.items()}


def get_arch(name, source=""):
    """The Arch of `name`; ValueError naming the source file and listing the supported ones."""
    if name not in ARCHS:
        where = f"{source}: " if source else ""
        raise ValueError(f"pyggml.models: {where}unsupported architecture {name!r}; supported: {', '.join(ARCHS)}")
    return ARCHS[name]
