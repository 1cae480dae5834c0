/* The one-column GEMV of Q5_0, Q4_1 and Q5_1 on AVX-512 with VNNI and GFNI: their vec_dot_rows
 * (mul_mat's GEMV, a thread's nr rows against one Q8_0 or Q8_1 row in one call; Q8_0, Q4_0, IQ4_NL
 * and MXFP4 run the panels of arch/x86/qgemm-x86.h there). Each (row, column)
 * pair gets exactly the integers and f32 steps of the one-row, one-column tile of arch/x86/qgemm-x86.h (so
 * the GEMV keeps the bits of the GEMM): per step of two blocks 16 int32 lanes (the even block in the low 8, the odd one
 * in the high 8, lane j the exact sum of elements 4j..4j+3 of x times y), converted to f32 and added
 * times d_x*d_y into 16 f32 lanes, the two halves and then the 8 lanes summed at the end (pg_qgemm_sum);
 * an odd last block pairs with itself, its twin's d zero.
 *
 * What differs is the work per step, which bounds the GEMV at one thread (the weights are read once):
 *  - the column is prepared once per call, not once per row: its int8 blocks of each step in one
 *    register, the offset correction -off*sum(y) per lane (the dot's starting value; Q8_1: s_y in
 *    lanes 0 and 8, the terms Q4_1/Q5_1 add times m_x) and d_y of both blocks as f32, kept on the
 *    stack (rows of up to PG_QGEMV_STEPS steps; longer ones take the tile row by row);
 *  - rows i and i + nr/2 go side by side (two read streams, the column's loads shared): the four
 *    fp16 d_x of a step gathered in one 64-bit word, converted and multiplied by d_y in one xmm, then
 *    spread to each row's 16 lanes by one permute (Q4_1/Q5_1: their {d, m} pairs in one ymm, m_x
 *    times 1);
 *  - the nibbles are split by one affine byte transform (GFNI) of the two blocks' bytes placed in
 *    the four 128-bit lanes by a broadcast load and a masked one.
 * The codes enter dpbusd's unsigned side as in the tile: Q5_0's codes are q + 16 (correction
 * -16*sum(y)), Q4_1/Q5_1's codes are >= 0 (none).
 */
#pragma once
#include "arch/x86/qgemm-x86.h"

#define PG_QGEMV_STEPS 256           /* steps of two blocks per prepared column: 16K elements, 40 KB */

/* the column's step k: y its int8 lanes; Q8_0: c the correction, d (d_y0, d_y1, d_y0, d_y1) in the
 * low four lanes; Q8_1: s (s_y0 in lane 0, s_y1 in lane 8, the rest 0: pg_qgemm_scales1), d (d_y0, 1,
 * d_y1, 1) twice */
typedef struct {
    __m512i y[PG_QGEMV_STEPS];
    union { __m512i c[PG_QGEMV_STEPS]; __m512 s[PG_QGEMV_STEPS]; };
    __m256 d[PG_QGEMV_STEPS];
} pg_qgemv_col;

/* a Q8_0 (min 0: correction for codes q + off) or Q8_1 (min 1) row of nb blocks */
static inline void pg_qgemv_column(const void * vy, int64_t nb, int off, const int min, pg_qgemv_col * col) {
    const size_t by = min ? sizeof(pg_block_q8_1) : sizeof(pg_block_q8_0), qs = min ? 4 : 2;
    for (int64_t k = 0; 2 * k < nb; k++) {
        const int two = 2 * k + 1 < nb;
        const char * b0 = (const char *) vy + (size_t) (2 * k) * by, * b1 = two ? b0 + by : b0;
        col->y[k] = pg_qgemm_load((const int8_t *) (b0 + qs), (const int8_t *) (b1 + qs));
        pg_fp16_t h0[2], h1[2] = {0, 0};
        memcpy(h0, b0, sizeof(h0));
        if (two) memcpy(h1, b1, sizeof(h1));
        if (min) {
            col->s[k] = pg_qgemm_scales1(h0[1], h1[1]);
            const short one = 0x3c00;      /* fp16 1.0 */
            col->d[k] = _mm256_cvtph_ps(_mm_setr_epi16((short) h0[0], one, (short) h1[0], one, (short) h0[0], one,
                                                       (short) h1[0], one));
        } else {
            col->c[k] = pg_qgemm_neg(pg_qgemm_dot(pg_qgemm_zero_i(), pg_qgemm_set1_u8(off), col->y[k]));
            col->d[k] = _mm256_castps128_ps256(_mm_cvtph_ps(_mm_setr_epi16((short) h0[0], (short) h1[0], (short) h0[0],
                                                                           (short) h1[0], 0, 0, 0, 0)));
        }
    }
}

/* the first sz bytes (2: the fp16 d; 4: Q4_1/Q5_1's {d, m}) of blocks a0, a1 (row 0) and b0, b1
 * (row 1), in that order; !two: a1's and b1's zero */
static inline __m128i pg_qgemv_heads(const void * a0, const void * a1, const void * b0, const void * b1, int two,
                                     const size_t sz) {
    uint32_t w[4] = {0, 0, 0, 0};
    memcpy(&w[0], a0, sz);
    memcpy(&w[2], b0, sz);
    if (two) {
        memcpy(&w[1], a1, sz);
        memcpy(&w[3], b1, sz);
    }
    const uint64_t lo = (uint64_t) w[1] << (8 * sz) | w[0], hi = (uint64_t) w[3] << (8 * sz) | w[2];
    if (sz == 2) return _mm_cvtsi64_si128((long long) (hi << 32 | lo));
    return _mm_set_epi64x((long long) hi, (long long) lo);
}

/* the f32 scales d_x of blocks a0, a1 (row 0) and b0, b1 (row 1) of a type without m, in that order;
 * !two: a1's and b1's zero */
PG_ALWAYS_INLINE __m128 pg_qgemv_scales(const void * a0, const void * a1, const void * b0, const void * b1, int two) {
    return _mm_cvtph_ps(pg_qgemv_heads(a0, a1, b0, b1, two, 2));
}

/* the 16 code bytes q0, q1 of two blocks in 128-bit lanes: low nibbles of q0, high of q0, low of q1,
 * high of q1 (pg_qgemm_nibbles' lanes) */
static inline __m512i pg_qgemv_nibbles(const uint8_t * q0, const uint8_t * q1) {
    const __m512i z = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *) q0)),
                                                  0xff00, _mm_loadu_si128((const __m128i *) q1));
    /* bit i of a result byte is the parity of (matrix byte 7 - i) & the source byte */
    const __m512i m = _mm512_setr_epi64(0x0102040800000000, 0x0102040800000000, 0x1020408000000000, 0x1020408000000000,
                                        0x0102040800000000, 0x0102040800000000, 0x1020408000000000, 0x1020408000000000);
    return _mm512_gf2p8affine_epi64_epi8(z, m, 0);
}
/* the unsigned lanes of blocks b0, b1 of type t (as pg_qgemm_desc_of: a compile-time constant): the
 * codes */
PG_ALWAYS_INLINE __m512i pg_qgemv_u(const int t, const void * b0, const void * b1) {
    switch (t) {
    case PG_TYPE_Q4_1: return pg_qgemv_nibbles(((const pg_block_q4_1 *) b0)->qs, ((const pg_block_q4_1 *) b1)->qs);
    case PG_TYPE_Q5_0: {
        const pg_block_q5_0 * x0 = (const pg_block_q5_0 *) b0, * x1 = (const pg_block_q5_0 *) b1;
        return pg_qgemm_add_bit4(pg_qgemv_nibbles(x0->qs, x1->qs), x0->qh, x1->qh);
    }
    default: {                        /* Q5_1 */
        const pg_block_q5_1 * x0 = (const pg_block_q5_1 *) b0, * x1 = (const pg_block_q5_1 *) b1;
        return pg_qgemm_add_bit4(pg_qgemv_nibbles(x0->qs, x1->qs), x0->qh, x1->qh);
    }
    }
}

/* step k (blocks 2k and 2k + 1, or 2k alone when !two) of R (1 or 2) rows x[r] of type t against the
 * prepared column into acc[r]; with min (Q4_1, Q5_1, against Q8_1) the tile's m*s added by a second
 * FMA into lanes 0 and 8 */
PG_ALWAYS_INLINE void pg_qgemv_step(const int t, const char * const * x, int64_t k, const int two, const int R,
                                    const pg_qgemv_col * col, __m512 * acc) {
    const int min = pg_qblock_min(t), size = pg_qblock_size(t);
    const char * a[2][2];
    for (int r = 0; r < R; r++) a[r][0] = x[r] + 2 * k * size, a[r][1] = two ? a[r][0] + size : a[r][0];
    const char * const * b = a[R - 1];
    /* d_x*d_y of row r's blocks in lanes 2r, 2r + 1 (min: 4r, 4r + 2, m_x in 4r + 1, 4r + 3) */
    const __m512 dd = min ? _mm512_castps256_ps512(_mm256_mul_ps(_mm256_cvtph_ps(pg_qgemv_heads(a[0][0], a[0][1],
                                                                                                b[0], b[1], two, 4)),
                                                                 col->d[k]))
                          : _mm512_castps128_ps512(_mm_mul_ps(pg_qgemv_scales(a[0][0], a[0][1], b[0], b[1], two),
                                                              _mm256_castps256_ps128(col->d[k])));
    for (int r = 0; r < R; r++) {
        const int l0 = min ? 4 * r : 2 * r, l1 = min ? 4 * r + 2 : 2 * r + 1;
        const __m512i p = _mm512_dpbusd_epi32(min ? _mm512_setzero_si512() : col->c[k], pg_qgemv_u(t, a[r][0], a[r][1]),
                                              col->y[k]);
        const __m512i ix = _mm512_setr_epi32(l0, l0, l0, l0, l0, l0, l0, l0, l1, l1, l1, l1, l1, l1, l1, l1);
        acc[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(ix, dd), _mm512_cvtepi32_ps(p), acc[r]);
        if (min) {
            const __m512i im = _mm512_add_epi32(ix, _mm512_set1_epi32(1));
            acc[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(im, dd), col->s[k], acc[r]);
        }
    }
}
/* *s0 = x0 . y and, when R = 2, *s1 = x1 . y: rows x0, x1 of nb blocks of type t */
PG_ALWAYS_INLINE void pg_qgemv_body(const int t, int64_t nb, const char * x0, const char * x1, const int R,
                                    const pg_qgemv_col * col, float * s0, float * s1) {
    const char * x[2] = {x0, x1};
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    int64_t k = 0;
    for (; 2 * k + 1 < nb; k++) pg_qgemv_step(t, x, k, 1, R, col, acc);
    if (2 * k < nb) pg_qgemv_step(t, x, k, 0, R, col, acc);
    *s0 = pg_qgemm_sum(acc[0]);
    if (R == 2) *s1 = pg_qgemm_sum(acc[1]);
}
/* vec_dot_rows of type t: s[r] = x_r . y for r < nr, x_r = vx + r*bx, y a Q8_0 row (Q8_1 for the
 * types with m); rows longer than the prepared column take the one-row tile. The
 * column's correction is for codes q + off (Q5_0's 16) */
PG_ALWAYS_INLINE void pg_qgemv_rows(const int t, int64_t n, const void * vx, size_t bx, int64_t nr, const void * vy,
                                    float * s) {
    const pg_qgemm_desc td = pg_qgemm_desc_of(t);
    const int64_t nb = n / PG_QK, h = nr / 2;
    const char * x = (const char *) vx;
    if ((nb + 1) / 2 > PG_QGEMV_STEPS) {
        for (int64_t r = 0; r < nr; r++) pg_qgemm_tile(t, n, x + (size_t) r * bx, bx, 1, vy, 0, 1, s + r, 1);
        return;
    }
    pg_qgemv_col col;
    pg_qgemv_column(vy, nb, td.off, pg_qblock_min(t), &col);
    for (int64_t i = 0; i < h; i++)
        pg_qgemv_body(t, nb, x + (size_t) i * bx, x + (size_t) (i + h) * bx, 2, &col, s + i, s + i + h);
    if (nr & 1) pg_qgemv_body(t, nb, x + (size_t) (2 * h) * bx, NULL, 1, &col, s + 2 * h, NULL);
}

/* the named entry points (types.h's vec_dot_rows), one per type */
static inline void pg_vec_dot_q5_0_rows(int64_t n, const void * x, size_t bx, int64_t nr, const void * y, float * s) {
    pg_qgemv_rows(PG_TYPE_Q5_0, n, x, bx, nr, y, s);
}
static inline void pg_vec_dot_q4_1_rows(int64_t n, const void * x, size_t bx, int64_t nr, const void * y, float * s) {
    pg_qgemv_rows(PG_TYPE_Q4_1, n, x, bx, nr, y, s);
}
static inline void pg_vec_dot_q5_1_rows(int64_t n, const void * x, size_t bx, int64_t nr, const void * y, float * s) {
    pg_qgemv_rows(PG_TYPE_Q5_1, n, x, bx, nr, y, s);
}
