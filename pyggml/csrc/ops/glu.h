/* GLU (ggml_glu, ggml_glu_split) and the unary activations TANH, SILU, GELU, GELU_QUICK, GELU_ERF.
 *
 *   glu(a, op, swapped)   a [2n (+1), R, ...] -> [n, R, ...]    y = act(x) * g
 *                         x = a[0:n], g = a[n:2n] of each row (x and g exchanged when swapped;
 *                         an odd last element is ignored, as ggml's ne0/2)
 *   glu_split(a, b, op)   a, b [n, R, ...] -> [n, R, ...]      y = act(a) * b
 *   unary(a, op)          a [n, R, ...] -> same shape           y = act(a)
 *
 *   op_params[0]  GLU: REGLU (relu), GEGLU (gelu, tanh form), SWIGLU (silu), GEGLU_ERF, GEGLU_QUICK,
 *                 SWIGLU_OAI (gpt-oss: y = sigmoid(alpha*xc)*xc * (gc + 1), xc = min(x, limit),
 *                 gc = clamp(g, -limit, limit); alpha and limit f32 in op_params[2], [3] as ggml packs them)
 *                 UNARY: TANH, SILU, GELU, GELU_QUICK, GELU_ERF;   GLU op_params[1]: swapped
 *
 * F32 and F16 (result type = input type). F16 rows are widened into the thread's scratch, computed
 * in f32 and rounded once. Rows must be packed in dim 0; dims 1..3 may have any strides. Rows are
 * split contiguously across threads.
 */
#pragma once
#include "types.h"
#include "core/barrier.h"

typedef void (*pg_vec_glu_fn)(int64_t n, float * y, const float * x, const float * g);
/* a GLU with two f32 parameters (op_params[2], [3]) */
typedef void (*pg_vec_glu_p_fn)(int64_t n, float * y, const float * x, const float * g, float p0, float p1);
typedef void (*pg_vec_act_fn)(int64_t n, float * y, const float * x);

/* The GLU and unary ops, indexed by ggml's values (op_params[0]); pyggml.GluOp and pyggml.UnaryOp
 * are built from these tables. An index without a row is no op: the plan refuses the node. */
#define PG_GLU_MAX 8
#define PG_UNARY_MAX 16

typedef struct pg_glu_row { const char * name; pg_vec_glu_fn fn; pg_vec_glu_p_fn fn_p; } pg_glu_row;
typedef struct pg_unary_row { const char * name; pg_vec_act_fn fn; } pg_unary_row;

static const pg_glu_row pg_glu_ops[PG_GLU_MAX] = {
    [0] = {"REGLU", pg_vec_relu_glu_f32},
    [1] = {"GEGLU", pg_vec_gelu_glu_f32},
    [2] = {"SWIGLU", pg_vec_silu_glu_f32},
    [3] = {"SWIGLU_OAI", NULL, pg_vec_swiglu_oai_f32},
    [4] = {"GEGLU_ERF", pg_vec_gelu_erf_glu_f32},
    [5] = {"GEGLU_QUICK", pg_vec_gelu_quick_glu_f32},
};

static const pg_unary_row pg_unary_ops[PG_UNARY_MAX] = {
    [4] = {"TANH", pg_vec_tanh_f32},
    [8] = {"GELU", pg_vec_gelu_f32},
    [9] = {"GELU_QUICK", pg_vec_gelu_quick_f32},
    [10] = {"SILU", pg_vec_silu_f32},
    [14] = {"GELU_ERF", pg_vec_gelu_erf_f32},
};

/* the row of op_params[0], or NULL when it names no op */
static inline const pg_glu_row * pg_glu_row_of(int32_t op) {
    return op >= 0 && op < PG_GLU_MAX && pg_glu_ops[op].name ? &pg_glu_ops[op] : NULL;
}
static inline pg_vec_act_fn pg_unary_fn(int32_t op) { return op >= 0 && op < PG_UNARY_MAX ? pg_unary_ops[op].fn : NULL; }

/* F16: x and g rows widened (the result overwrites x) */
static inline size_t pg_glu_scratch(const pg_tensor * dst, int n_rows) {
    return dst->type == PG_TYPE_F32 ? 0 : (size_t) n_rows * dst->ne[0] * sizeof(float);
}

static inline bool pg_plan_glu(const pg_tensor * dst, pg_plan * pl) {
    if (!pg_glu_row_of(dst->op_params[0])) return pg_plan_fail(pl, "op_params[0] = %d is not a GLU op", dst->op_params[0]);
    pl->work = pg_per_thread(pg_glu_scratch(dst, 2), pl->nth);
    return true;
}

static inline bool pg_plan_unary(const pg_tensor * dst, pg_plan * pl) {
    if (!pg_unary_fn(dst->op_params[0])) return pg_plan_fail(pl, "op_params[0] = %d is not a unary op", dst->op_params[0]);
    pl->work = pg_per_thread(pg_glu_scratch(dst, 1), pl->nth);
    return true;
}

static inline void pg_compute_glu(const pg_params * p, pg_tensor * dst) {
    const pg_tensor * a = dst->src[0];
    const pg_tensor * b = dst->src[1];
    const pg_glu_row * op = pg_glu_row_of(dst->op_params[0]);
    const float p0 = pg_op_param_f32(dst, 2), p1 = pg_op_param_f32(dst, 3);
    const int64_t nc = dst->ne[0];
    const bool f32 = dst->type == PG_TYPE_F32;
    const pg_type_traits * tr = &pg_traits[dst->type];
    /* byte offsets of x and g inside a's row (single-tensor form) */
    const size_t half = (size_t) nc * tr->size;
    const size_t xoff = !b && dst->op_params[1] ? half : 0, goff = !b && !dst->op_params[1] ? half : 0;
    float * xs = (float *) pg_scratch(p, pg_glu_scratch(dst, 2));
    float * gs = f32 ? NULL : xs + nc;
    int64_t r0, r1;
    pg_split_rows(pg_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        pg_unravel_row(dst, ir, &i1, &i2, &i3);
        const char * x = pg_row(a, i1, i2, i3) + xoff;
        const char * g = (b ? pg_row(b, i1, i2, i3) : pg_row(a, i1, i2, i3)) + goff;
        char * y = pg_row(dst, i1, i2, i3);
        float * yf = f32 ? (float *) y : xs;
        const float * xf = (const float *) x, * gf = (const float *) g;
        if (!f32) {
            tr->to_float(x, xs, nc);
            tr->to_float(g, gs, nc);
            xf = xs;
            gf = gs;
        }
        if (op->fn) op->fn(nc, yf, xf, gf);
        else op->fn_p(nc, yf, xf, gf, p0, p1);
        if (!f32) tr->from_float(xs, y, nc);
    }
}

static inline void pg_compute_unary(const pg_params * p, pg_tensor * dst) {
    const pg_tensor * a = dst->src[0];
    const pg_vec_act_fn fn = pg_unary_fn(dst->op_params[0]);
    const int64_t n = dst->ne[0];
    const bool f32 = dst->type == PG_TYPE_F32;
    const pg_type_traits * tr = &pg_traits[dst->type];
    float * xs = (float *) pg_scratch(p, pg_glu_scratch(dst, 1));
    int64_t r0, r1;
    pg_split_rows(pg_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        pg_unravel_row(dst, ir, &i1, &i2, &i3);
        const char * x = pg_row(a, i1, i2, i3);
        char * y = pg_row(dst, i1, i2, i3);
        if (f32) {
            fn(n, (float *) y, (const float *) x);
        } else {
            tr->to_float(x, xs, n);
            fn(n, xs, xs);
            tr->from_float(xs, y, n);
        }
    }
}
