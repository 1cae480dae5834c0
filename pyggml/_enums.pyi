"""Members of the enums _enums.py builds from the C tables (tests/core/test_tables.py checks they agree)."""
from enum import IntEnum

class Type(IntEnum):
    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q8_1 = 9
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    Q8_K = 15
    IQ4_NL = 20
    IQ4_XS = 23
    I8 = 24
    I16 = 25
    I32 = 26
    I64 = 27
    F64 = 28
    BF16 = 30
    MXFP4 = 39

class Op(IntEnum):
    NONE = 0
    DUP = 1
    ADD = 2
    MUL = 3
    SCALE = 4
    CPY = 5
    CONT = 6
    RESHAPE = 7
    VIEW = 8
    PERMUTE = 9
    TRANSPOSE = 10
    GET_ROWS = 11
    SET_ROWS = 12
    SOFT_MAX = 13
    ROPE = 14
    MUL_MAT = 15
    NORM = 16
    RMS_NORM = 17
    GLU = 18
    UNARY = 19
    FLASH_ATTN_EXT = 20
    IM2COL = 21
    CONCAT = 22
    SUM_ROWS = 23
    DIV = 24
    ARGSORT = 25
    TOP_K = 26
    ADD_ID = 27
    MUL_MAT_ID = 28

class UnaryOp(IntEnum):
    TANH = 4
    GELU = 8
    GELU_QUICK = 9
    SILU = 10
    GELU_ERF = 14

class GluOp(IntEnum):
    REGLU = 0
    GEGLU = 1
    SWIGLU = 2
    SWIGLU_OAI = 3
    GEGLU_ERF = 4
    GEGLU_QUICK = 5

class RopeType(IntEnum):
    NORMAL = 0
    NEOX = 2
    MROPE = 8
    VISION = 24
    IMROPE = 40

class SortOrder(IntEnum):
    ASC = 0
    DESC = 1

class Prec(IntEnum):
    DEFAULT = 0
    F32 = 10

FLOAT_TYPES: frozenset[Type]
QUANT_TYPES: frozenset[Type]
INT_TYPES: frozenset[Type]

def kernel_types(*kernels: str) -> frozenset[Type]: ...
