"""qwen2vl (llama.cpp's src/models/qwen2vl.cpp): the text decoder of Qwen2-VL and Qwen2.5-VL.

qwen2's layer with M-RoPE: each head's rotated pairs are split into rope.dimension_sections (t, h, w,
e) and section s turns with position row s; a step's positions are 4 rows (text tokens: all equal to
the token position; an image's from pyggml.models.vision). The vision tower is a separate mmproj file.
"""
from dataclasses import dataclass, replace

from pyggml._enums import RopeType
from pyggml._ops import rope_multi
from pyggml.models.qwen2 import Qwen2, Qwen2HParams


@dataclass(frozen=True)
class Qwen2VLHParams(Qwen2HParams):
    rope_type = RopeType.MROPE

    @classmethod
    def read(cls, r):
        out = super().read(r)
        sections = r.raw("rope.dimension_sections")
        if (not isinstance(sections, list) or not 1 <= len(sections) <= 4
                or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in sections)):
            r.error("rope.dimension_sections", "1 to 4 integers >= 0", sections)
        sections = tuple(sections) + (0,) * (4 - len(sections))
        if 2 * sum(sections) > out["rope"].n_dims:
            r.error("rope.dimension_sections", f"sections of at most rope.dimension_count / 2 = "
                    f"{out['rope'].n_dims // 2} pairs in all", list(sections))
        out["rope"] = replace(out["rope"], sections=sections)
        return out


class Qwen2VL(Qwen2):
    hparams_class = Qwen2VLHParams

    def build_rope(self, t, il):
        return rope_multi(t, self.pos, self.rope_factors(il), sections=list(self.hp.rope.sections),
                          **self.hp.rope.args())
