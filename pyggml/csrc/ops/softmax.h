/* SOFT_MAX (ggml_soft_max_ext, ggml_soft_max_add_sinks), over dim 0 of each row:
 *
 *   w = a * scale + slope_h * mask[:, i1, i2 % M2, i3 % M3]      (mask optional, F16 or F32)
 *   y = exp(w - m) / (sum_j exp(w_j - m) + exp(sink_h - m))      m = max(max_j w_j, sink_h)
 *
 *   a, dst  F32 [n, R, H, S]        rows packed in dim 0 (dims 1..3 may be strided)
 *   mask    [n, >= R, M2, M3]       H % M2 == 0, S % M3 == 0; row i1 of a uses mask row i1
 *                                   (no modulo in dim 1, extra rows unused)
 *   sinks   src[2], F32 [H]         optional: one logit per head, in the max and the denominator only
 *   op_params  [0] scale, [1] max_bias
 *
 * ALiBi (max_bias > 0): n2 = 2^floor(log2 H), m0 = 2^(-max_bias/n2), m1 = 2^(-max_bias/(2*n2)),
 * slope_h = m0^(h+1) for h < n2, else m1^(2*(h-n2)+1); slope 1 when max_bias == 0.
 * The sum is taken in double; y = e * (1/sum). A row that is all -inf (and no sink) gives NaN, as
 * in ggml (flash attention gives 0 there instead).
 * Rows are split contiguously over threads. w is built in the dst row itself; an F16 mask row is
 * widened into the thread's scratch (n floats).
 */
#pragma once
#include "types.h"
#include "core/barrier.h"

static inline size_t pg_soft_max_scratch(const pg_tensor * dst) {
    const pg_tensor * mask = dst->src[1];
    return mask && mask->type == PG_TYPE_F16 ? (size_t) dst->ne[0] * sizeof(float) : 0;
}

static inline bool pg_plan_soft_max(const pg_tensor * dst, pg_plan * pl) {
    pl->work = pg_per_thread(pg_soft_max_scratch(dst), pl->nth);
    return true;
}

/* ALiBi slopes of n_head heads (soft_max_ext and flash_attn_ext): the formula above, with
 * n2 = the largest power of two <= n_head */
typedef struct pg_alibi {
    float max_bias, m0, m1;
    int64_t n2;
} pg_alibi;

static inline pg_alibi pg_alibi_init(float max_bias, int64_t n_head) {
    pg_alibi a = {max_bias, 1.0f, 1.0f, 1};
    while (a.n2 * 2 <= n_head) a.n2 *= 2;
    a.m0 = powf(2.0f, -max_bias / (float) a.n2);
    a.m1 = powf(2.0f, -(max_bias / 2.0f) / (float) a.n2);
    return a;
}

static inline float pg_alibi_slope(const pg_alibi * a, int64_t h) {
    if (a->max_bias <= 0.0f) return 1.0f;
    return h < a->n2 ? powf(a->m0, (float) (h + 1)) : powf(a->m1, (float) (2 * (h - a->n2) + 1));
}

static inline void pg_compute_soft_max(const pg_params * p, pg_tensor * dst) {
    const pg_tensor * a = dst->src[0];
    const pg_tensor * mask = dst->src[1];
    const pg_tensor * sinks = dst->src[2];
    const float scale = pg_op_param_f32(dst, 0), max_bias = pg_op_param_f32(dst, 1);
    const int64_t n = dst->ne[0];
    const pg_alibi alibi = pg_alibi_init(max_bias, dst->ne[2]);
    float * ms = (float *) pg_scratch(p, pg_soft_max_scratch(dst));
    int64_t r0, r1;
    pg_split_rows(pg_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        pg_unravel_row(dst, ir, &i1, &i2, &i3);
        float * y = (float *) pg_row(dst, i1, i2, i3);
        pg_vec_scale_f32(n, y, (const float *) pg_row(a, i1, i2, i3), scale);
        if (mask) {
            const char * mrow = pg_row(mask, i1, i2 % mask->ne[2], i3 % mask->ne[3]);
            const float * m = (const float *) mrow;
            if (mask->type == PG_TYPE_F16) {
                pg_vec_cvt_f16_f32(n, (const pg_fp16_t *) mrow, ms);
                m = ms;
            }
            pg_vec_mad_f32(n, y, m, pg_alibi_slope(&alibi, i2));
        }
        float mx = pg_vec_max_f32(n, y);
        const float sink = sinks ? ((const float *) sinks->data)[i2] : -INFINITY;
        mx = PG_MAX(mx, sink);
        double sum = pg_vec_exp_sum_f32(n, y, y, mx);
        if (sinks) sum += (double) expf(sink - mx);
        pg_vec_scale_f32(n, y, y, (float) (1.0 / sum));
    }
}
