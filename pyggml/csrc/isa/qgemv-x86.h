/* The one-column GEMV of the 32-element block types dotted against Q8_0 (Q8_0, Q4_0, Q5_0, IQ4_NL)
 * on AVX-512 with VNNI and GFNI: their vec_dot_rows (mul_mat's GEMV, a thread's nr rows in one call). Each (row, column) pair gets exactly
 * the integers and f32 steps of the one-row, one-column tile of isa/qgemm-x86.h (so the GEMV keeps the
 * bits of the GEMM): per step of two blocks 16 int32 lanes (the even block in the low 8, the odd one
 * in the high 8, lane j the exact sum of elements 4j..4j+3 of x times y), converted to f32 and added
 * times d_x*d_y into 16 f32 lanes, the two halves and then the 8 lanes summed at the end (pg_qt_sum);
 * an odd last block pairs with itself, its twin's d zero.
 *
 * What differs is the work per step, which bounds the GEMV at one thread (the weights are read once):
 *  - the column is prepared once per call, not once per row: its int8 blocks of each step in one
 *    register, the offset correction -off*sum(y) per lane (the dot's starting value) and d_y of both
 *    blocks as f32, kept on the stack (rows of up to PG_QGV_STEPS steps; longer ones take the tile
 *    row by row);
 *  - rows i and i + nr/2 go side by side (two read streams, the column's loads shared): the four
 *    fp16 d_x of a step gathered in one 64-bit word, converted and multiplied by d_y in one xmm, then
 *    spread to each row's 16 lanes by one permute;
 *  - the nibbles of Q4_0, Q5_0 and IQ4_NL are split by one affine byte transform (GFNI) of the two
 *    blocks' bytes placed in the four 128-bit lanes by a broadcast load and a masked one; IQ4_NL's
 *    table lookup gives its values xor 0x80 directly.
 * The codes enter dpbusd's unsigned side as in the tile: Q4_0's nibbles are q + 8 (correction
 * -8*sum(y)), Q5_0's codes q + 16, Q8_0's and IQ4_NL's values xor 0x80 are q + 128 (correction
 * -128*sum(y)).
 */
#pragma once

#define PG_QGV_STEPS 256           /* steps of two blocks per prepared column: 16K elements, 36 KB */

/* the column's step k: y its int8 lanes, c the correction, d (d_y0, d_y1, d_y0, d_y1) */
typedef struct { __m512i y[PG_QGV_STEPS], c[PG_QGV_STEPS]; __m128 d[PG_QGV_STEPS]; } pg_qgv_col;

static inline void pg_qgv_column(const pg_block_q8_0 * y, int64_t nb, int off, pg_qgv_col * col) {
    for (int64_t k = 0; 2 * k < nb; k++) {
        const int two = 2 * k + 1 < nb;
        const pg_block_q8_0 * b0 = y + 2 * k, * b1 = two ? b0 + 1 : b0;
        col->y[k] = pg_qt_load(b0->qs, b1->qs);
        col->c[k] = pg_qt_neg(pg_qt_dot(pg_qt_zero_i(), pg_qt_set1_u8(off), col->y[k]));
        const uint64_t h0 = b0->d, h1 = two ? b1->d : 0;
        col->d[k] = _mm_cvtph_ps(_mm_cvtsi64_si128((long long) (h0 | h1 << 16 | h0 << 32 | h1 << 48)));
    }
}

/* the fp16 d at the start of blocks a0, a1 (row 0) and b0, b1 (row 1) as four f32; !two: a1 and b1's 0 */
static inline __m128 pg_qgv_dx(const void * a0, const void * a1, const void * b0, const void * b1, int two) {
    uint16_t h[4] = {0, 0, 0, 0};
    memcpy(&h[0], a0, 2);
    memcpy(&h[2], b0, 2);
    if (two) {
        memcpy(&h[1], a1, 2);
        memcpy(&h[3], b1, 2);
    }
    uint64_t v;
    memcpy(&v, h, sizeof(v));
    return _mm_cvtph_ps(_mm_cvtsi64_si128((long long) v));
}

/* the unsigned lanes of blocks b0, b1 */
static inline __m512i pg_qgv_u_q8_0(const pg_block_q8_0 * b0, const pg_block_q8_0 * b1) {
    return pg_qt_xor80(pg_qt_load(b0->qs, b1->qs));
}
/* the 16 code bytes q0, q1 of two blocks in 128-bit lanes: low nibbles of q0, high of q0, low of q1,
 * high of q1 (pg_qt_nibbles' lanes) */
static inline __m512i pg_qgv_nibbles(const uint8_t * q0, const uint8_t * q1) {
    const __m512i z = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *) q0)),
                                                  0xff00, _mm_loadu_si128((const __m128i *) q1));
    /* bit i of a result byte is the parity of (matrix byte 7 - i) & the source byte */
    const __m512i m = _mm512_setr_epi64(0x0102040800000000, 0x0102040800000000, 0x1020408000000000, 0x1020408000000000,
                                        0x0102040800000000, 0x0102040800000000, 0x1020408000000000, 0x1020408000000000);
    return _mm512_gf2p8affine_epi64_epi8(z, m, 0);
}
static inline __m512i pg_qgv_u_q4_0(const pg_block_q4_0 * b0, const pg_block_q4_0 * b1) {
    return pg_qgv_nibbles(b0->qs, b1->qs);
}
static inline __m512i pg_qgv_u_q5_0(const pg_block_q5_0 * b0, const pg_block_q5_0 * b1) {
    return pg_qt_add_bit4(pg_qgv_nibbles(b0->qs, b1->qs), b0->qh, b1->qh);
}
/* the table's values xor 0x80 (q + 128) looked up */
static inline __m512i pg_qgv_u_iq4_nl(const pg_block_iq4_nl * b0, const pg_block_iq4_nl * b1) {
    const __m512i lut = _mm512_broadcast_i32x4(_mm_xor_si128(_mm_loadu_si128((const __m128i *) pg_iq4nl_values),
                                                             _mm_set1_epi8((char) 0x80)));
    return _mm512_shuffle_epi8(lut, pg_qgv_nibbles(b0->qs, b1->qs));
}

/* NAME##_rows: s[r] = x_r . y for r < nr, x_r = vx + r*bx (rows of TX), y a Q8_0 row; U: the unsigned
 * lanes of two blocks, OFF: what they add to the codes */
#define PG_QGV(NAME, TX, U, OFF)                                                                       \
static inline __attribute__((always_inline)) void NAME##_gv_step(const TX * const * x, int64_t k, const int two, \
                                                                 const int R, const pg_qgv_col * col,  \
                                                                 __m512 * acc) {                       \
    const TX * a0 = x[0] + 2 * k, * a1 = two ? a0 + 1 : a0;                                            \
    const TX * b0 = x[R - 1] + 2 * k, * b1 = two ? b0 + 1 : b0;                                        \
    const __m512 dd = _mm512_castps128_ps512(_mm_mul_ps(pg_qgv_dx(a0, a1, b0, b1, two), col->d[k]));   \
    const __m512i lo = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);              \
    const __m512i hi = _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);              \
    const __m512i p0 = _mm512_dpbusd_epi32(col->c[k], U(a0, a1), col->y[k]);                           \
    acc[0] = _mm512_fmadd_ps(_mm512_permutexvar_ps(lo, dd), _mm512_cvtepi32_ps(p0), acc[0]);           \
    if (R == 2) {                                                                                      \
        const __m512i p1 = _mm512_dpbusd_epi32(col->c[k], U(b0, b1), col->y[k]);                       \
        acc[1] = _mm512_fmadd_ps(_mm512_permutexvar_ps(hi, dd), _mm512_cvtepi32_ps(p1), acc[1]);       \
    }                                                                                                  \
}                                                                                                      \
static inline __attribute__((always_inline)) void NAME##_gv_body(int64_t nb, const char * x0, const char * x1, \
                                                                 const int R, const pg_qgv_col * col,  \
                                                                 float * s0, float * s1) {             \
    const TX * x[2] = {(const TX *) x0, (const TX *) x1};                                              \
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};                                         \
    int64_t k = 0;                                                                                     \
    for (; 2 * k + 1 < nb; k++) NAME##_gv_step(x, k, 1, R, col, acc);                                  \
    if (2 * k < nb) NAME##_gv_step(x, k, 0, R, col, acc);                                              \
    *s0 = pg_qt_sum(acc[0]);                                                                           \
    if (R == 2) *s1 = pg_qt_sum(acc[1]);                                                               \
}                                                                                                      \
static inline void NAME##_rows(int64_t n, const void * vx, size_t bx, int64_t nr, const void * vy, float * s) { \
    const int64_t nb = n / PG_QK, h = nr / 2;                                                          \
    const char * x = (const char *) vx;                                                                \
    if ((nb + 1) / 2 > PG_QGV_STEPS) {                                                                 \
        for (int64_t r = 0; r < nr; r++) NAME##_tile(n, x + (size_t) r * bx, bx, 1, vy, 0, 1, s + r, 1); \
        return;                                                                                        \
    }                                                                                                  \
    pg_qgv_col col;                                                                                    \
    pg_qgv_column((const pg_block_q8_0 *) vy, nb, OFF, &col);                                          \
    for (int64_t i = 0; i < h; i++)                                                                    \
        NAME##_gv_body(nb, x + (size_t) i * bx, x + (size_t) (i + h) * bx, 2, &col, s + i, s + i + h); \
    if (nr & 1) NAME##_gv_body(nb, x + (size_t) (2 * h) * bx, NULL, 1, &col, s + 2 * h, NULL);         \
}

PG_QGV(pg_vec_dot_q8_0, pg_block_q8_0, pg_qgv_u_q8_0, 0x80)
PG_QGV(pg_vec_dot_q4_0, pg_block_q4_0, pg_qgv_u_q4_0, 8)
PG_QGV(pg_vec_dot_q5_0, pg_block_q5_0, pg_qgv_u_q5_0, 16)
PG_QGV(pg_vec_dot_iq4_nl, pg_block_iq4_nl, pg_qgv_u_iq4_nl, 0x80)
