/* IM2COL (ggml_im2col) and CONCAT (ggml_concat).
 *
 *   im2col(a, b)   a: the kernel (only its shape is read), b: the input, F32
 *     2-D: a [KW, KH, IC, OC], b [IW, IH, IC, N]  ->  dst [IC*KH*KW, OW, OH, N]
 *     1-D: a [K, IC, OC],      b [IL, IC, N]      ->  dst [IC*K, OL, N, 1]
 *     dst[iic*KH*KW + ikh*KW + ikw, ow, oh, n] = b[ow*s0 + ikw*d0 - p0, oh*s1 + ikh*d1 - p1, iic, n],
 *     0 where that falls outside b (the zero padding); dst F32, or F16 (each value rounded once)
 *     op_params: s0, s1, p0, p1, d0, d1, is_2D (ggml's order)
 *   concat(a, b, dim)   a and b of one type, equal but in dim  ->  dst: a, then b along dim
 *     op_params[0]: dim
 *
 * Both read their sources through the strides (any layout); dst is new and contiguous. Threads
 * take contiguous ranges of dst rows.
 */
#pragma once
#include "types.h"

static inline void pg_compute_im2col(const pg_params * p, pg_tensor * dst) {
    const pg_tensor * a = dst->src[0], * b = dst->src[1];
    const int32_t s0 = dst->op_params[0], s1 = dst->op_params[1], p0 = dst->op_params[2], p1 = dst->op_params[3];
    const int32_t d0 = dst->op_params[4], d1 = dst->op_params[5];
    const bool is_2d = dst->op_params[6] == 1;
    const int64_t kw = a->ne[0], kh = is_2d ? a->ne[1] : 1, ic = is_2d ? a->ne[2] : a->ne[1];
    const int64_t iw = b->ne[0], ih = is_2d ? b->ne[1] : 1;
    /* strides of b's channel and image dims (1-D: the channel is dim 1, the batch dim 2) */
    const size_t nb_c = is_2d ? b->nb[2] : b->nb[1], nb_n = is_2d ? b->nb[3] : b->nb[2];
    const bool f16 = dst->type == PG_TYPE_F16;
    int64_t r0, r1;
    pg_split_rows(pg_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t ow, i2, i3;
        pg_unravel_row(dst, ir, &ow, &i2, &i3);
        const int64_t oh = is_2d ? i2 : 0, n = is_2d ? i3 : i2;
        char * y = pg_row(dst, ow, i2, i3);
        for (int64_t c = 0; c < ic; c++) {
            const char * plane = (const char *) b->data + c * nb_c + n * nb_n;
            for (int64_t ky = 0; ky < kh; ky++) {
                const int64_t yy = oh * s1 + ky * d1 - p1;
                for (int64_t kx = 0; kx < kw; kx++) {
                    const int64_t xx = ow * s0 + kx * d0 - p0;
                    const float v = yy < 0 || yy >= ih || xx < 0 || xx >= iw ? 0.0f :
                        *(const float *) (plane + yy * b->nb[1] * is_2d + xx * b->nb[0]);
                    const int64_t j = (c * kh + ky) * kw + kx;
                    if (f16) ((pg_fp16_t *) y)[j] = pg_fp32_to_fp16(v);
                    else ((float *) y)[j] = v;
                }
            }
        }
    }
}

static inline void pg_compute_concat(const pg_params * p, pg_tensor * dst) {
    const pg_tensor * a = dst->src[0], * b = dst->src[1];
    const int dim = dst->op_params[0];
    const size_t es = pg_traits[dst->type].size;
    int64_t r0, r1;
    pg_split_rows(pg_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i[4] = {0};
        pg_unravel_row(dst, ir, &i[1], &i[2], &i[3]);
        char * y = pg_row(dst, i[1], i[2], i[3]);
        /* the source of this row (dim > 0), or of its two parts (dim 0: a's elements, then b's) */
        const pg_tensor * s = a;
        if (dim > 0 && i[dim] >= a->ne[dim]) {
            s = b;
            i[dim] -= a->ne[dim];
        }
        for (int part = 0; part < (dim == 0 ? 2 : 1); part++, s = b) {
            const char * x = pg_row(s, i[1], i[2], i[3]);
            const int64_t n = dim == 0 ? s->ne[0] : dst->ne[0];
            if (s->nb[0] == es) {
                memcpy(y, x, (size_t) n * es);
            } else {
                for (int64_t j = 0; j < n; j++) memcpy(y + j * es, x + j * s->nb[0], es);
            }
            y += (size_t) n * es;
        }
    }
}
