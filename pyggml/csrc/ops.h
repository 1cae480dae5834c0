/* The op table: every op pyggml has, once. One row per op, in the order of the op ids:
 *
 *   OP(NAME, flags, kernel, plan)   an op that runs: pg_compute_<kernel> and pg_plan_<plan>
 *   LEAF(NAME)                      a leaf or a view: no kernel, nothing to run
 *
 *   NAME      PG_OP_<NAME> here, pyggml.Op.<NAME> in Python (built from this table by _enums.py)
 *   flags     PG_OPF_ROWS  the kernel splits whole rows: more threads than rows would only wait,
 *                          so the node gets min(nth, rows) tasks (the plan's thread clamp)
 *             PG_OPF_INDICES  src[1] holds indices the kernel checks: the node runs while it has
 *                          indices, even when it copies no element (a bad index still raises)
 *   kernel    void pg_compute_<kernel>(const pg_params * p, pg_tensor * dst)   (pyggml.h)
 *   plan      bool pg_plan_<plan>(const pg_tensor * dst, pg_plan * pl)
 *
 * The ids are pyggml's own numbering (not part of the API). This header only names the functions;
 * graph.h, which includes the op headers, expands the table into the kernel table the executor
 * dispatches through, so a row whose functions do not exist fails the build. Adding an op: a builder
 * in _ops.pyx, pg_compute_/pg_plan_ in its op-family header (included by graph.h), a row here.
 */
#pragma once
#include "core/pyggml.h"

enum { PG_OPF_NO_COMPUTE = 1, PG_OPF_ROWS = 2, PG_OPF_INDICES = 4 };

#define PG_OPS(OP, LEAF)                                             \
    LEAF(NONE)                                                       \
    OP(DUP,            0,           dup,            dup)             \
    OP(ADD,            PG_OPF_ROWS, add,            binary)          \
    OP(MUL,            PG_OPF_ROWS, mul,            binary)          \
    OP(SCALE,          PG_OPF_ROWS, scale,          no_scratch)      \
    OP(CPY,            0,           dup,            dup)             \
    OP(CONT,           0,           dup,            dup)             \
    LEAF(RESHAPE)                                                    \
    LEAF(VIEW)                                                       \
    LEAF(PERMUTE)                                                    \
    LEAF(TRANSPOSE)                                                  \
    OP(GET_ROWS,       PG_OPF_INDICES, get_rows,    no_scratch)      \
    OP(SET_ROWS,       PG_OPF_INDICES, set_rows,    set_rows)        \
    OP(SOFT_MAX,       PG_OPF_ROWS, soft_max,       soft_max)        \
    OP(ROPE,           PG_OPF_ROWS, rope,           rope)            \
    OP(MUL_MAT,        0,           mul_mat,        mul_mat)         \
    OP(NORM,           PG_OPF_ROWS, norm,           no_scratch)      \
    OP(RMS_NORM,       PG_OPF_ROWS, rms_norm,       no_scratch)      \
    OP(GLU,            PG_OPF_ROWS, glu,            glu)             \
    OP(UNARY,          PG_OPF_ROWS, unary,          unary)           \
    OP(FLASH_ATTN_EXT, 0,           flash_attn_ext, flash_attn_ext)  \
    OP(IM2COL,         PG_OPF_ROWS, im2col,         no_scratch)      \
    OP(CONCAT,         PG_OPF_ROWS, concat,         no_scratch)      \
    OP(SUM_ROWS,       PG_OPF_ROWS, sum_rows,       no_scratch)      \
    OP(DIV,            PG_OPF_ROWS, div,            binary)          \
    OP(ARGSORT,        PG_OPF_ROWS, argsort,        sort)            \
    OP(TOP_K,          PG_OPF_ROWS, top_k,          sort)            \
    OP(ADD_ID,         PG_OPF_ROWS, add_id,         no_scratch)      \
    OP(MUL_MAT_ID,     0,           mul_mat_id,     mul_mat_id)

#define PG_OP_ID(name, ...) PG_OP_##name,
enum pg_op { PG_OPS(PG_OP_ID, PG_OP_ID) PG_OP_COUNT };
#undef PG_OP_ID

/* what Python and the plan read without the kernels: the name and the flags of each op */
typedef struct pg_op_info {
    const char * name;
    int flags;
} pg_op_info;

#define PG_OP_INFO(name, flags, ...) {#name, flags},
#define PG_LEAF_INFO(name) {#name, PG_OPF_NO_COMPUTE},
static const pg_op_info pg_op_table[] = { PG_OPS(PG_OP_INFO, PG_LEAF_INFO) };
#undef PG_OP_INFO
#undef PG_LEAF_INFO
_Static_assert(sizeof(pg_op_table) / sizeof(pg_op_table[0]) == PG_OP_COUNT, "one op table row per op id");

/* whether op has a row (ids come from the builders; a node past the table is a plan error) */
static inline bool pg_op_known(int32_t op) { return op >= 0 && op < PG_OP_COUNT; }

/* number of tasks node t gets with nth threads (the plan's thread clamp) */
static inline int pg_op_tasks(const pg_tensor * t, int nth) {
    if (!pg_op_known(t->op) || !(pg_op_table[t->op].flags & PG_OPF_ROWS)) return nth;
    const int64_t nr = t->ne[1] * t->ne[2] * t->ne[3];
    return (int) PG_MIN((int64_t) nth, PG_MAX((int64_t) 1, nr));
}
