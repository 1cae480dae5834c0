"""The C tables as Python sees them: the op table (csrc/ops.h), the GLU and unary op tables
(csrc/ops/glu.h), the type table (csrc/types.h) and flash_attn_ext's op_params slots and paths
(csrc/ops/flash-attn.h). _enums.py builds pyggml.Op, GluOp, UnaryOp and Type
from them, so each is defined once, in C; the builders take the types an op supports from the type
table's kernels. type_size, blck_size and row_size are ggml_type_size, ggml_blck_size and
ggml_row_size."""
from libc.stdint cimport int64_t

from pyggml._typedefs cimport (PG_KIND_FLOAT, PG_KIND_INT, PG_KIND_QUANT, PG_TYPE_COUNT, pg_row_size, pg_traits,
                               pg_type_traits)

cdef extern from "ops.h" nogil:
    enum:
        PG_OP_COUNT
        PG_OPF_NO_COMPUTE
        PG_OPF_ROWS

    ctypedef struct pg_op_info:
        const char * name
        int flags

    const pg_op_info pg_op_table[]

cdef extern from "ops/glu.h" nogil:
    enum:
        PG_GLU_MAX
        PG_UNARY_MAX

    ctypedef struct pg_glu_row:
        const char * name

    ctypedef struct pg_unary_row:
        const char * name

    const pg_glu_row pg_glu_ops[]
    const pg_unary_row pg_unary_ops[]

cdef extern from "ops/flash-attn.h" nogil:
    enum pg_fa_param:
        PG_FA_PARAM_SCALE
        PG_FA_PARAM_MAX_BIAS
        PG_FA_PARAM_SOFTCAP
        PG_FA_PARAM_PREC
        PG_FA_PARAM_PATH
        PG_FA_PARAM_TAKEN

    enum pg_fa_path:
        PG_FA_PATH_AUTO
        PG_FA_PATH_ONE_CHUNK
        PG_FA_PATH_TILED
        PG_FA_PATH_SPLIT

    int PG_FA_SPLIT_MAX_N


def ops():
    """(name, flags) of every op, in the order of the op ids; flags as OPF_NO_COMPUTE | OPF_ROWS."""
    return tuple((pg_op_table[i].name.decode(), pg_op_table[i].flags) for i in range(PG_OP_COUNT))


OPF_NO_COMPUTE = PG_OPF_NO_COMPUTE
OPF_ROWS = PG_OPF_ROWS


def glu_ops():
    """{name: ggml value} of the GLU ops with a kernel."""
    return {pg_glu_ops[i].name.decode(): i for i in range(PG_GLU_MAX) if pg_glu_ops[i].name != NULL}


def unary_ops():
    """{name: ggml value} of the unary ops with a kernel."""
    return {pg_unary_ops[i].name.decode(): i for i in range(PG_UNARY_MAX) if pg_unary_ops[i].name != NULL}


# flash_attn_ext's op_params slots and its attention paths (csrc/ops/flash-attn.h's pg_fa_param and
# pg_fa_path): FA_PATHS[i] names path i
FA_PARAMS = {"scale": PG_FA_PARAM_SCALE, "max_bias": PG_FA_PARAM_MAX_BIAS, "logit_softcap": PG_FA_PARAM_SOFTCAP,
             "prec": PG_FA_PARAM_PREC, "path": PG_FA_PARAM_PATH, "taken": PG_FA_PARAM_TAKEN}
_paths = {PG_FA_PATH_AUTO: "auto", PG_FA_PATH_ONE_CHUNK: "one_chunk", PG_FA_PATH_TILED: "tiled",
          PG_FA_PATH_SPLIT: "split"}
FA_PATHS = tuple(_paths[i] for i in range(len(_paths)))
del _paths
FA_SPLIT_MAX_N = PG_FA_SPLIT_MAX_N      # the most query rows the split path takes


KINDS = {PG_KIND_FLOAT: "float", PG_KIND_QUANT: "quant", PG_KIND_INT: "int"}


def types():
    """{ggml type id: (name, blck, size, kind, kernels)} of every row of the type table; kind is
    "float", "quant" or "int", kernels the names of the row kernels it has (to_float, from_float,
    vec_dot, vec_dot_rows, dot_tile_f32, attn_dot, attn_acc)."""
    cdef const pg_type_traits * tr
    rows = {}
    for i in range(PG_TYPE_COUNT):
        tr = &pg_traits[i]
        if tr.name == NULL:
            continue
        have = {"to_float": tr.to_float != NULL, "from_float": tr.from_float != NULL, "vec_dot": tr.vec_dot != NULL,
                "vec_dot_rows": tr.vec_dot_rows != NULL, "dot_tile_f32": tr.dot_tile_f32 != NULL,
                "attn_dot": tr.attn_dot != NULL, "attn_acc": tr.attn_acc != NULL}
        rows[i] = (tr.name.decode(), tr.blck, tr.size, KINDS[tr.kind], frozenset(k for k, v in have.items() if v))
    return rows


cdef int _type_id(str fn, type) except -1:
    try:
        t = int(type)
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: type must be a pyggml.Type, got {type!r}") from None
    if not 0 <= t < PG_TYPE_COUNT or pg_traits[t].name == NULL:
        raise ValueError(f"{fn}: {type!r} is not a type pyggml has")
    return t


def type_size(type):
    """Bytes of one block of `type` (ggml_type_size): 4 for F32, 34 for Q8_0."""
    return pg_traits[_type_id("type_size", type)].size


def blck_size(type):
    """Elements per block of `type` (ggml_blck_size): 1 for F32, 32 for Q8_0."""
    return pg_traits[_type_id("blck_size", type)].blck


def row_size(type, ne):
    """Bytes of a packed row of ne elements of `type` (ggml_row_size); ne must be a multiple of the
    block size."""
    cdef int t = _type_id("row_size", type)
    cdef int64_t n = int(ne)
    if n < 0 or n % pg_traits[t].blck:
        raise ValueError(f"row_size: ne must be >= 0 and a multiple of the {pg_traits[t].name.decode().upper()} "
                         f"block size {pg_traits[t].blck}, got {ne}")
    return pg_row_size(t, n)
