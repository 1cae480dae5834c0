/* ADD, MUL, DIV: dst = a op b with b repeated over a (ggml_can_repeat: a.ne[i] % b.ne[i] == 0).
 *   a, dst [ne0, ne1, ne2, ne3]   b [ne0 / r0, ne1 / r1, ne2 / r2, ne3 / r3]
 * Rows are split contiguously across threads. F32 rows go straight to the vector primitives;
 * F16/BF16 rows are widened into the thread's scratch (2 * ne0 floats), combined, narrowed once.
 * SCALE: dst = a*s + b, F32.
 * ADD_ID (ggml_add_id): dst[:, i1, i2, i3] = a[:, i1, i2, i3] + b[:, ids[i1, i2]], all F32 with
 *   packed rows; b [ne0, n_b] holds one row per id (gpt-oss's per-expert biases), ids I32
 *   [ne1, ne2]. An id outside [0, n_b) is data: reported (pg_report_error) and its row left unwritten.
 */
#pragma once
#include "types.h"
#include "core/barrier.h"

typedef void (*pg_vec_binary_fn)(int64_t n, float * z, const float * x, const float * y);

static inline size_t pg_binary_scratch(const pg_tensor * dst) {
    const bool f32 = dst->src[0]->type == PG_TYPE_F32 && dst->src[1]->type == PG_TYPE_F32;
    return f32 ? 0 : 2 * (size_t) dst->ne[0] * sizeof(float);
}

static inline bool pg_plan_binary(const pg_tensor * dst, pg_plan * pl) {
    pl->work = pg_per_thread(pg_binary_scratch(dst), pl->nth);
    return true;
}

static inline void pg_compute_binary(const pg_params * p, pg_tensor * dst, pg_vec_binary_fn op) {
    const pg_tensor * a = dst->src[0];
    const pg_tensor * b = dst->src[1];
    const int64_t ne0 = dst->ne[0], nb0 = b->ne[0];
    const bool f32 = a->type == PG_TYPE_F32 && b->type == PG_TYPE_F32;
    float * xs = f32 ? NULL : (float *) pg_scratch(p, pg_binary_scratch(dst));
    float * ys = f32 ? NULL : xs + ne0;
    int64_t r0, r1;
    pg_split_rows(pg_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        pg_unravel_row(dst, ir, &i1, &i2, &i3);
        const char * xa = pg_row(a, i1, i2, i3);
        const char * xb = pg_row(b, i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
        char * xd = pg_row(dst, i1, i2, i3);
        if (f32) {
            for (int64_t j = 0; j < ne0; j += nb0)
                op(nb0, (float *) xd + j, (const float *) xa + j, (const float *) xb);
        } else {
            pg_traits[a->type].to_float(xa, xs, ne0);
            pg_traits[b->type].to_float(xb, ys, nb0);
            for (int64_t j = 0; j < ne0; j += nb0) op(nb0, xs + j, xs + j, ys);
            pg_traits[dst->type].from_float(xs, xd, ne0);
        }
    }
}

static inline void pg_compute_add(const pg_params * p, pg_tensor * dst) { pg_compute_binary(p, dst, pg_vec_add_f32); }
static inline void pg_compute_mul(const pg_params * p, pg_tensor * dst) { pg_compute_binary(p, dst, pg_vec_mul_f32); }
static inline void pg_compute_div(const pg_params * p, pg_tensor * dst) { pg_compute_binary(p, dst, pg_vec_div_f32); }

static inline void pg_compute_add_id(const pg_params * p, pg_tensor * dst) {
    const pg_tensor * a = dst->src[0];
    const pg_tensor * b = dst->src[1];
    const pg_tensor * ids = dst->src[2];
    int64_t r0, r1;
    pg_split_rows(pg_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        pg_unravel_row(dst, ir, &i1, &i2, &i3);
        const int32_t id = *(const int32_t *) ((const char *) ids->data + i1 * ids->nb[0] + i2 * ids->nb[1]);
        if (id < 0 || id >= b->ne[1]) {
            pg_report_error(p, dst, i1 + i2 * ids->ne[0], id);
            continue;
        }
        pg_vec_add_f32(dst->ne[0], (float *) pg_row(dst, i1, i2, i3), (const float *) pg_row(a, i1, i2, i3),
                       (const float *) ((const char *) b->data + id * b->nb[1]));
    }
}

static inline void pg_compute_scale(const pg_params * p, pg_tensor * dst) {
    const pg_tensor * a = dst->src[0];
    const float s = pg_op_param_f32(dst, 0), b = pg_op_param_f32(dst, 1);
    int64_t r0, r1;
    pg_split_rows(pg_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        pg_unravel_row(dst, ir, &i1, &i2, &i3);
        float * y = (float *) pg_row(dst, i1, i2, i3);
        const float * x = (const float *) pg_row(a, i1, i2, i3);
        pg_vec_scale_f32(dst->ne[0], y, x, s);
        if (b != 0.0f) for (int64_t j = 0; j < dst->ne[0]; j++) y[j] += b;
    }
}
