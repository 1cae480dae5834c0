"""The C tables as Python sees them: the op table (csrc/ops.h) and the GLU and unary op tables
(csrc/glu.h). _enums.py builds pyggml.Op, GluOp and UnaryOp from them, so an op, a GLU op or a
unary op is defined once, in C."""

cdef extern from "ops.h" nogil:
    enum:
        PG_OP_COUNT
        PG_OPF_NO_COMPUTE
        PG_OPF_ROWS

    ctypedef struct pg_op_info:
        const char * name
        int flags

    const pg_op_info pg_op_table[]

cdef extern from "glu.h" nogil:
    enum:
        PG_GLU_MAX
        PG_UNARY_MAX

    ctypedef struct pg_glu_row:
        const char * name

    ctypedef struct pg_unary_row:
        const char * name

    const pg_glu_row pg_glu_ops[]
    const pg_unary_row pg_unary_ops[]


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
