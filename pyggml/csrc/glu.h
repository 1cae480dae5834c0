/* GLU (ggml_glu, ggml_glu_split) and the unary activations SILU, GELU, GELU_ERF.
 *
 *   glu(a, op, swapped)   a [2n (+1), R, ...] -> [n, R, ...]    y = act(x) * g
 *                         x = a[0:n], g = a[n:2n] of each row (x and g exchanged when swapped;
 *                         an odd last element is ignored, as ggml's ne0/2)
 *   glu_split(a, b, op)   a, b [n, R, ...] -> [n, R, ...]      y = act(a) * b
 *   unary(a, op)          a [n, R, ...] -> same shape           y = act(a)
 *
 *   op_params[0]  GLU: REGLU (relu), GEGLU (gelu, tanh form), SWIGLU (silu), GEGLU_ERF, GEGLU_QUICK
 *                 UNARY: SILU, GELU, GELU_ERF;   GLU op_params[1]: swapped
 *
 * F32 and F16 (result type = input type). F16 rows are widened into the thread's scratch, computed
 * in f32 and rounded once. Rows must be packed in dim 0; dims 1..3 may have any strides. Rows are
 * split contiguously across threads.
 */
#pragma once
#include "convert.h"
#include "barrier.h"

typedef void (*pg_vec_glu_fn)(int64_t n, float * y, const float * x, const float * g);
typedef void (*pg_vec_act_fn)(int64_t n, float * y, const float * x);

static inline pg_vec_glu_fn pg_glu_fn(int32_t op) {
    switch (op) {
        case PG_GLU_REGLU:       return pg_vec_relu_glu_f32;
        case PG_GLU_GEGLU:       return pg_vec_gelu_glu_f32;
        case PG_GLU_SWIGLU:      return pg_vec_silu_glu_f32;
        case PG_GLU_GEGLU_ERF:   return pg_vec_gelu_erf_glu_f32;
        default:                 return pg_vec_gelu_quick_glu_f32;   /* PG_GLU_GEGLU_QUICK */
    }
}

static inline pg_vec_act_fn pg_unary_fn(int32_t op) {
    switch (op) {
        case PG_UNARY_SILU:      return pg_vec_silu_f32;
        case PG_UNARY_GELU:      return pg_vec_gelu_f32;
        default:                 return pg_vec_gelu_erf_f32;          /* PG_UNARY_GELU_ERF */
    }
}

/* F16: x and g rows widened (the result overwrites x) */
static inline size_t pg_glu_scratch(const pg_tensor * dst, int n_rows) {
    return dst->type == PG_TYPE_F32 ? 0 : (size_t) n_rows * dst->ne[0] * sizeof(float);
}

static inline size_t pg_work_glu(const pg_tensor * dst, int nth) { return pg_per_thread(pg_glu_scratch(dst, 2), nth); }
static inline size_t pg_work_unary(const pg_tensor * dst, int nth) { return pg_per_thread(pg_glu_scratch(dst, 1), nth); }

static inline void pg_compute_glu(const pg_params * p, pg_tensor * dst) {
    const pg_tensor * a = dst->src[0];
    const pg_tensor * b = dst->src[1];
    const pg_vec_glu_fn fn = pg_glu_fn(dst->op_params[0]);
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
        if (f32) {
            fn(nc, (float *) y, (const float *) x, (const float *) g);
        } else {
            tr->to_float(x, xs, nc);
            tr->to_float(g, gs, nc);
            fn(nc, xs, xs, gs);
            tr->from_float(xs, y, nc);
        }
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
