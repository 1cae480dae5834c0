"""Enums with ggml's values. Op (pyggml's own numbering), GluOp and UnaryOp are built from the C
tables (csrc/ops.h, csrc/glu.h: _tables), so each is defined once; _enums.pyi declares their members
for type checkers, and tests/test_tables.py checks the two agree."""
from enum import IntEnum

from pyggml import _tables


class Type(IntEnum):
    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q8_0 = 8
    I8 = 24
    I16 = 25
    I32 = 26
    I64 = 27
    F64 = 28
    BF16 = 30


Op = IntEnum("Op", [(name, i) for i, (name, _) in enumerate(_tables.ops())], module=__name__)
UnaryOp = IntEnum("UnaryOp", sorted(_tables.unary_ops().items(), key=lambda kv: kv[1]), module=__name__)
GluOp = IntEnum("GluOp", sorted(_tables.glu_ops().items(), key=lambda kv: kv[1]), module=__name__)


class RopeType(IntEnum):
    NORMAL = 0
    NEOX = 2
    MROPE = 8
    VISION = 24
    IMROPE = 40


class Prec(IntEnum):
    DEFAULT = 0
    F32 = 10


# type groups
FLOAT_TYPES = frozenset({Type.F32, Type.F16, Type.BF16})
QUANT_TYPES = frozenset({Type.Q8_0, Type.Q4_0})
INT_TYPES = frozenset({Type.I8, Type.I16, Type.I32, Type.I64})

# (block size, bytes per block) as ggml's type traits
TYPE_TRAITS = {
    Type.F32: (1, 4), Type.F16: (1, 2), Type.BF16: (1, 2), Type.Q8_0: (32, 34), Type.Q4_0: (32, 18),
    Type.I8: (1, 1), Type.I16: (1, 2), Type.I32: (1, 4), Type.I64: (1, 8), Type.F64: (1, 8),
}
