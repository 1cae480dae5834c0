"""Enums with ggml's values. Type, Op (pyggml's own numbering), GluOp and UnaryOp are built from the C
tables (csrc/types.h, ops.h, ops/glu.h, read through _tables), so each is defined once; _enums.pyi
declares their members for type checkers, and tests/core/test_tables.py checks the two agree."""
from enum import IntEnum

from pyggml import _tables

_TYPES = _tables.types()

Type = IntEnum("Type", [(row[0].upper(), i) for i, row in sorted(_TYPES.items())], module=__name__)
Op = IntEnum("Op", [(name, i) for i, (name, _) in enumerate(_tables.ops())], module=__name__)
UnaryOp = IntEnum("UnaryOp", sorted(_tables.unary_ops().items(), key=lambda kv: kv[1]), module=__name__)
GluOp = IntEnum("GluOp", sorted(_tables.glu_ops().items(), key=lambda kv: kv[1]), module=__name__)


class RopeType(IntEnum):
    NORMAL = 0
    NEOX = 2
    MROPE = 8
    VISION = 24
    IMROPE = 40


class SortOrder(IntEnum):
    """ggml_sort_order (argsort)"""
    ASC = 0
    DESC = 1


class Prec(IntEnum):
    DEFAULT = 0
    F32 = 10


# type groups, from the kind of each type table row (float types: those with row conversions)
FLOAT_TYPES = frozenset(Type(i) for i, r in _TYPES.items() if r[3] == "float" and "to_float" in r[4])
QUANT_TYPES = frozenset(Type(i) for i, r in _TYPES.items() if r[3] == "quant")
INT_TYPES = frozenset(Type(i) for i, r in _TYPES.items() if r[3] == "int")


def kernel_types(*kernels):
    """The types whose type-table rows have all of `kernels` ("to_float", "vec_dot", ...)."""
    return frozenset(Type(i) for i, r in _TYPES.items() if r[4].issuperset(kernels))

