/* RMS_NORM, NORM: normalise every row (dim 0) of a; F32, rows packed, any stride in dims 1-3.
 *
 *   rms_norm  y = x * scale,        scale = 1.0f / sqrtf((float) (Σ x*x / n) + eps)
 *   norm      y = (x - mean) * scale, mean = (float) Σ x / (float) n,
 *                                     scale = 1.0f / sqrtf((float) (Σ (x-mean)² / n) + eps)
 *
 * As ggml: each square is an f32 product, the sums are taken in double, every other step is the f32
 * operation written above, so results are ggml's bit for bit up to the order of the double sums.
 * No affine part (ggml_norm has none either); eps >= 0, and a zero row with eps = 0 gives NaN.
 *
 * Fused rms_norm (the fusion table, graph.h), one kernel with optional ends:
 *
 *   [add]  h = a + b        a, b, h F32 [n, ...]; b's rows repeat over a's (b.ne0 == n)
 *   norm   t = rms_norm(h)  (h = norm.src[0] when there is no add)
 *   [mul]  y = t * w        w F32, w.ne0 == n, w's rows repeat over t's; t is never written
 *
 * Per row: pass 1 reads a and b (or x) once, writes h, sums the squares; pass 2 re-reads h from
 * cache and writes y. The roundings are those of the separate nodes (h rounded, x*scale rounded,
 * then *w), so fused and unfused results are identical.
 *
 * SUM_ROWS (ggml_sum_rows): y[0, i1, i2, i3] = (float) Σ_k x[k, i1, i2, i3], the sum taken in double as
 * ggml_vec_sum_f32 (bit for bit ggml's up to the order of the double sum); x F32 with packed rows, y
 * F32 [1, ne1, ne2, ne3].
 *
 * Threads: contiguous blocks of rows (pg_split_rows). One row is never split: the sum would need a
 * barrier, which costs more than a row of 4096 takes, and the plan gives a norm min(nth, rows) tasks,
 * so a one-row graph runs on one thread.
 */
#pragma once
#include "types.h"
#include "core/barrier.h"

/* row (i1, i2, i3) of t, with t's rows repeated over a larger tensor's (ggml_can_repeat) */
static inline float * pg_norm_row_rep(const pg_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
    return (float *) pg_row(t, i1 % t->ne[1], i2 % t->ne[2], i3 % t->ne[3]);
}

/* add or mul may be NULL; norm is the RMS_NORM node (its data is not touched when mul is given) */
static inline void pg_compute_rms_norm_fused(const pg_params * p, const pg_tensor * add,
                                             const pg_tensor * norm, const pg_tensor * mul) {
    const pg_tensor * x = norm->src[0];
    const pg_tensor * out = mul ? mul : norm;
    const pg_tensor * w = mul ? mul->src[mul->src[0] == norm ? 1 : 0] : NULL;
    const float eps = pg_op_param_f32(norm, 0);
    const int64_t n = norm->ne[0];
    int64_t r0, r1;
    pg_split_rows(pg_nrows(norm), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        pg_unravel_row(norm, ir, &i1, &i2, &i3);
        const float * xr = (const float *) pg_row(x, i1, i2, i3);
        double sum;
        if (add) {
            float * h = (float *) pg_row(add, i1, i2, i3);
            sum = pg_vec_add_sumsq_f32(n, h, (const float *) pg_row(add->src[0], i1, i2, i3),
                                       pg_norm_row_rep(add->src[1], i1, i2, i3));
            xr = h;
        } else {
            sum = pg_vec_sumsq_f32(n, xr);
        }
        const float mean = (float) (sum / (double) n);
        const float scale = 1.0f / sqrtf(mean + eps);
        float * y = (float *) pg_row(out, i1, i2, i3);
        if (w) pg_vec_scale_mul_f32(n, y, xr, scale, pg_norm_row_rep(w, i1, i2, i3));
        else pg_vec_scale_f32(n, y, xr, scale);
    }
}

static inline void pg_compute_rms_norm(const pg_params * p, pg_tensor * dst) {
    pg_compute_rms_norm_fused(p, NULL, dst, NULL);
}

/* the fused groups (graph.h's fusion table), nodes in graph order */
static inline void pg_compute_add_rms_norm_mul(const pg_params * p, pg_tensor * const * g) {
    pg_compute_rms_norm_fused(p, g[0], g[1], g[2]);
}
static inline void pg_compute_rms_norm_mul(const pg_params * p, pg_tensor * const * g) {
    pg_compute_rms_norm_fused(p, NULL, g[0], g[1]);
}
static inline void pg_compute_add_rms_norm(const pg_params * p, pg_tensor * const * g) {
    pg_compute_rms_norm_fused(p, g[0], g[1], NULL);
}

static inline void pg_compute_norm(const pg_params * p, pg_tensor * dst) {
    const pg_tensor * x = dst->src[0];
    const float eps = pg_op_param_f32(dst, 0);
    const int64_t n = dst->ne[0];
    int64_t r0, r1;
    pg_split_rows(pg_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        pg_unravel_row(dst, ir, &i1, &i2, &i3);
        const float * xr = (const float *) pg_row(x, i1, i2, i3);
        float * y = (float *) pg_row(dst, i1, i2, i3);
        const float mean = (float) pg_vec_sum_f64_f32(n, xr) / (float) n;
        const float var = (float) (pg_vec_cvar_f32(n, y, xr, mean) / (double) n);
        pg_vec_scale_f32(n, y, y, 1.0f / sqrtf(var + eps));
    }
}

static inline void pg_compute_sum_rows(const pg_params * p, pg_tensor * dst) {
    const pg_tensor * a = dst->src[0];
    int64_t r0, r1;
    pg_split_rows(pg_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        pg_unravel_row(dst, ir, &i1, &i2, &i3);
        *(float *) pg_row(dst, i1, i2, i3) = (float) pg_vec_sum_f64_f32(a->ne[0], (const float *) pg_row(a, i1, i2, i3));
    }
}
