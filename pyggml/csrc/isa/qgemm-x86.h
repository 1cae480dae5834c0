/* The register-tiled integer products of the 32-element block types (quants-legacy.h) on x86, the
 * ISA half of their vec_dot_tile: PG_QT_MR weight rows x up to 4 activation rows (Q8_0/Q8_1) per call,
 * each weight block decoded once for the tile's columns and each activation block loaded once for its
 * rows, the accumulators of every (row, column) pair in registers for the whole row. mul_mat's GEMV
 * and GEMM (matmul.h) both run on it, so a column's result does not depend on N.
 *
 * Per block and pair the int8 products are summed exactly in 8 int32 lanes (AVX-512 VNNI dpbusd, else
 * maddubs + madd), converted to f32 and added times d_x*d_y into 8 f32 lanes, as ggml's vec_dot does.
 * With AVX-512 one zmm holds two blocks (the even one in the low 256 bits, the odd one in the high),
 * the even and odd accumulators of the one-column kernel (PG_QDOT) side by side: the sums are
 * vec_dot_n's bit for bit (Q4_1/Q5_1 add their m*s terms in vector lanes, not in vec_dot_n's order).
 *
 * The products are unsigned x signed with the weights the unsigned side, so the activations need no
 * per-pair sign transfer: Q4_1/Q5_1 codes are >= 0; Q4_0/Q5_0 codes are q + 8 / q + 16, and with VNNI
 * Q8_0/IQ4_NL values are taken xor 0x80 (q + 128), so x.y = u.y - off*sum(y), the correction (lane by
 * lane, exact) made once per activation block and the dot's starting value. maddubs would saturate
 * on q + 128, so without VNNI those two types multiply |x| by sign(x)*y, as the one-column kernel does.
 */
#pragma once

#if defined(PG_SIMD_AVX512)
#define PG_QT_MR 4                 /* weight rows per tile: 16 accumulators + 4 rows' codes and scales */
#define PG_QT_BPV 2                /* blocks per vector */
typedef __m512i pg_qt_i;
typedef __m512 pg_qt_f;
#if defined(__AVX512VNNI__)
#define PG_QT_VNNI 1
static inline pg_qt_i pg_qt_dot(pg_qt_i acc, pg_qt_i u, pg_qt_i s) { return _mm512_dpbusd_epi32(acc, u, s); }
#else
#define PG_QT_VNNI 0
static inline pg_qt_i pg_qt_dot(pg_qt_i acc, pg_qt_i u, pg_qt_i s) {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
}
#endif
static inline pg_qt_i pg_qt_zero_i(void) { return _mm512_setzero_si512(); }
static inline pg_qt_i pg_qt_neg(pg_qt_i v) { return _mm512_sub_epi32(_mm512_setzero_si512(), v); }
static inline pg_qt_i pg_qt_set1_u8(int c) { return _mm512_set1_epi8((char) c); }
static inline pg_qt_i pg_qt_xor80(pg_qt_i v) { return _mm512_xor_si512(v, _mm512_set1_epi8((char) 0x80)); }
static inline pg_qt_i pg_qt_abs8(pg_qt_i x) { return _mm512_abs_epi8(x); }
/* y negated where x < 0 (where x = 0 the other factor, |x|, is 0) */
static inline pg_qt_i pg_qt_sign8(pg_qt_i y, pg_qt_i x) {
    return _mm512_mask_sub_epi8(y, _mm512_movepi8_mask(x), _mm512_setzero_si512(), y);
}
static inline pg_qt_i pg_qt_load(const int8_t * q0, const int8_t * q1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *) q0)),
                              _mm256_loadu_si256((const __m256i *) q1), 1);
}
/* two blocks' 16 bytes: [lo nibbles of q0 | hi nibbles of q0 | lo of q1 | hi of q1] */
static inline pg_qt_i pg_qt_nibbles(const uint8_t * q0, const uint8_t * q1) {
    const __m256i b = _mm256_set_m128i(_mm_loadu_si128((const __m128i *) q1), _mm_loadu_si128((const __m128i *) q0));
    const __m512i z = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), _mm512_castsi256_si512(b));
    return _mm512_and_si512(_mm512_mask_srli_epi16(z, 0xff00ff00u, z, 4), _mm512_set1_epi8(0x0f));
}
/* + 0x10 in lane e of block k where bit e of the little-endian word at hk is set */
static inline pg_qt_i pg_qt_add_bit4(pg_qt_i v, const uint8_t * h0, const uint8_t * h1) {
    uint32_t a, b;
    memcpy(&a, h0, 4);
    memcpy(&b, h1, 4);
    return _mm512_mask_add_epi8(v, _cvtu64_mask64((uint64_t) b << 32 | a), v, _mm512_set1_epi8(0x10));
}
static inline pg_qt_i pg_qt_lut16(pg_qt_i v, const int8_t * table) {
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *) table)), v);
}
/* the fp16 scales of two blocks, each in its block's 8 lanes */
static inline pg_qt_f pg_qt_scales(pg_fp16_t h0, pg_fp16_t h1) {
    return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16((short) h1), _mm_set1_epi16((short) h0)));
}
/* the same in the first lane of each block only (a term added once per block) */
static inline pg_qt_f pg_qt_scales1(pg_fp16_t h0, pg_fp16_t h1) {
    return _mm512_cvtph_ps(_mm256_setr_epi32(h0, 0, 0, 0, h1, 0, 0, 0));
}
static inline pg_qt_f pg_qt_zero_f(void) { return _mm512_setzero_ps(); }
static inline pg_qt_f pg_qt_mul(pg_qt_f a, pg_qt_f b) { return _mm512_mul_ps(a, b); }
static inline pg_qt_f pg_qt_fma(pg_qt_f a, pg_qt_f b, pg_qt_f c) { return _mm512_fmadd_ps(a, b, c); }
static inline pg_qt_f pg_qt_cvt(pg_qt_i p) { return _mm512_cvtepi32_ps(p); }
/* even + odd accumulator, then the 8 lanes: PG_QDOT's pg_qacc_sum(pg_qacc_merge(acc0, acc1)) */
static inline float pg_qt_sum(pg_qt_f acc) {
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
    return pg_avx2_hsum(_mm256_add_ps(_mm512_castps512_ps256(acc), hi));
}
#else
#define PG_QT_MR 2                 /* 16 registers: 8 accumulators + 2 rows' codes and scales */
#define PG_QT_BPV 1
typedef __m256i pg_qt_i;
typedef __m256 pg_qt_f;
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
#define PG_QT_VNNI 1
static inline pg_qt_i pg_qt_dot(pg_qt_i acc, pg_qt_i u, pg_qt_i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#endif
}
#else
#define PG_QT_VNNI 0
static inline pg_qt_i pg_qt_dot(pg_qt_i acc, pg_qt_i u, pg_qt_i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}
#endif
static inline pg_qt_i pg_qt_zero_i(void) { return _mm256_setzero_si256(); }
static inline pg_qt_i pg_qt_neg(pg_qt_i v) { return _mm256_sub_epi32(_mm256_setzero_si256(), v); }
static inline pg_qt_i pg_qt_set1_u8(int c) { return _mm256_set1_epi8((char) c); }
static inline pg_qt_i pg_qt_xor80(pg_qt_i v) { return _mm256_xor_si256(v, _mm256_set1_epi8((char) 0x80)); }
static inline pg_qt_i pg_qt_abs8(pg_qt_i x) { return _mm256_sign_epi8(x, x); }
static inline pg_qt_i pg_qt_sign8(pg_qt_i y, pg_qt_i x) { return _mm256_sign_epi8(y, x); }
static inline pg_qt_i pg_qt_load(const int8_t * q0, const int8_t * q1) { (void) q1; return pg_q8x32_load(q0); }
static inline pg_qt_i pg_qt_nibbles(const uint8_t * q0, const uint8_t * q1) { (void) q1; return pg_q8x32_nibbles(q0); }
static inline pg_qt_i pg_qt_add_bit4(pg_qt_i v, const uint8_t * h0, const uint8_t * h1) {
    (void) h1;
    return _mm256_or_si256(v, pg_q8x32_bit4(h0));
}
static inline pg_qt_i pg_qt_lut16(pg_qt_i v, const int8_t * table) { return pg_q8x32_lut16(v, table); }
static inline pg_qt_f pg_qt_scales(pg_fp16_t h0, pg_fp16_t h1) { (void) h1; return _mm256_set1_ps(pg_fp16_to_fp32(h0)); }
static inline pg_qt_f pg_qt_scales1(pg_fp16_t h0, pg_fp16_t h1) {
    (void) h1;
    return _mm256_cvtph_ps(_mm_cvtsi32_si128(h0));
}
static inline pg_qt_f pg_qt_zero_f(void) { return _mm256_setzero_ps(); }
static inline pg_qt_f pg_qt_mul(pg_qt_f a, pg_qt_f b) { return _mm256_mul_ps(a, b); }
static inline pg_qt_f pg_qt_fma(pg_qt_f a, pg_qt_f b, pg_qt_f c) { return _mm256_fmadd_ps(a, b, c); }
static inline pg_qt_f pg_qt_cvt(pg_qt_i p) { return _mm256_cvtepi32_ps(p); }
static inline float pg_qt_sum(pg_qt_f acc) { return pg_avx2_hsum(acc); }
#endif

/* how a type's decoded lanes enter the unsigned side: codes >= 0 as they are (Q4_1, Q5_1), codes
 * q + off (Q4_0, Q5_0), signed values (Q8_0, IQ4_NL) */
enum { PG_QT_UNS, PG_QT_OFF, PG_QT_SIGNED };

/* one step (PG_QT_BPV blocks) of a weight row: unsigned lanes u, the signed values s (sign trick
 * only), d_x (and m) per block */
typedef struct { pg_qt_i u, s; pg_qt_f d, m; } pg_qt_w;
/* of an activation row: its int8 y, the correction -off*sum(y) per lane, d_y (and s) per block */
typedef struct { pg_qt_i y, c; pg_qt_f d, s; } pg_qt_y;

static inline __attribute__((always_inline)) pg_qt_w pg_qt_weights(pg_qt_i q, int mode) {
    pg_qt_w w;
    w.s = q;
    if (mode != PG_QT_SIGNED) w.u = q;
    else w.u = PG_QT_VNNI ? pg_qt_xor80(q) : pg_qt_abs8(q);
    return w;
}
static inline __attribute__((always_inline)) pg_qt_i pg_qt_correction(pg_qt_i y, int mode, int off) {
    if (mode == PG_QT_UNS || (mode == PG_QT_SIGNED && !PG_QT_VNNI)) return pg_qt_zero_i();
    return pg_qt_neg(pg_qt_dot(pg_qt_zero_i(), pg_qt_set1_u8(mode == PG_QT_SIGNED ? 0x80 : off), y));
}
/* the 8 (16) int32 lanes of x . y */
static inline __attribute__((always_inline)) pg_qt_i pg_qt_pair(const pg_qt_w * w, const pg_qt_y * a, int mode) {
    if (mode == PG_QT_SIGNED && !PG_QT_VNNI) return pg_qt_dot(pg_qt_zero_i(), w->u, pg_qt_sign8(a->y, w->s));
    return pg_qt_dot(a->c, w->u, a->y);
}

/* the body instantiated for nc = 1..4 columns and MR rows */
#define PG_QT_COLS(NAME, n, x, bx, mr, MR, y, by, nc, s, lds)                                          \
    do {                                                                                               \
        switch (nc) {                                                                                  \
        case 1: NAME##_tile_body(n, x, bx, mr, MR, y, by, 1, s, lds); break;                           \
        case 2: NAME##_tile_body(n, x, bx, mr, MR, y, by, 2, s, lds); break;                           \
        case 3: NAME##_tile_body(n, x, bx, mr, MR, y, by, 3, s, lds); break;                           \
        default: NAME##_tile_body(n, x, bx, mr, MR, y, by, 4, s, lds); break;                          \
        }                                                                                              \
    } while (0)

/* NAME##_tile: s[c*lds + r] = x_r . y_c for r < mr (<= PG_QT_MR), c < nc (<= 4); x_r = vx + r*bx (rows
 * of TX), y_c = vy + c*by (rows of TY). DECODE(b0, b1): the lanes of blocks b0 and b1 (b1 unused with
 * one block per vector); MODE, OFF: as the enum above; MIN: PG_QT_MIN for the types with m (Q4_1,
 * Q5_1), else PG_QT_NOMIN. One row (mr = 1) has a loop of its own; other tiles take PG_QT_MR rows,
 * the missing ones repeating the last (computed, not stored). An odd last block pairs with itself,
 * its twin's scales zero */
#define PG_QTILE(NAME, TX, TY, DECODE, MODE, OFF, MIN)                                                 \
static inline __attribute__((always_inline)) void NAME##_tile_body(int64_t n, const void * vx, size_t bx, int mr, \
                                                                   const int MR, const void * vy, size_t by, \
                                                                   const int nc, float * s, size_t lds) { \
    const TX * x[PG_QT_MR];                                                                            \
    const TY * y[4];                                                                                   \
    _Pragma("GCC unroll 4")                                                                            \
    for (int r = 0; r < MR; r++) x[r] = (const TX *) ((const char *) vx + (size_t) PG_MIN(r, mr - 1) * bx); \
    _Pragma("GCC unroll 4")                                                                            \
    for (int c = 0; c < nc; c++) y[c] = (const TY *) ((const char *) vy + (size_t) c * by);            \
    pg_qt_f acc[PG_QT_MR][4];                                                                          \
    _Pragma("GCC unroll 4")                                                                            \
    for (int r = 0; r < MR; r++)                                                                       \
        _Pragma("GCC unroll 4")                                                                        \
        for (int c = 0; c < nc; c++) acc[r][c] = pg_qt_zero_f();                                       \
    const int64_t nb = n / PG_QK;                                                                      \
    for (int64_t ib = 0; ib < nb; ib += PG_QT_BPV) {                                                   \
        const int two = ib + 1 < nb;                                                                   \
        const int64_t i1 = PG_QT_BPV == 2 && two ? ib + 1 : ib;                                        \
        pg_qt_w w[PG_QT_MR];                                                                           \
        _Pragma("GCC unroll 4")                                                                        \
        for (int r = 0; r < MR; r++) {                                                                 \
            const TX * b0 = x[r] + ib, * b1 = x[r] + i1;                                               \
            w[r] = pg_qt_weights(DECODE(b0, b1), MODE);                                                \
            w[r].d = pg_qt_scales(b0->d, two ? b1->d : 0);                                             \
            MIN(w[r].m = pg_qt_scales1(b0->m, two ? b1->m : 0));                                       \
        }                                                                                              \
        _Pragma("GCC unroll 4")                                                                        \
        for (int c = 0; c < nc; c++) {                                                                 \
            const TY * b0 = y[c] + ib, * b1 = y[c] + i1;                                               \
            pg_qt_y a;                                                                                 \
            a.y = pg_qt_load(b0->qs, b1->qs);                                                          \
            a.c = pg_qt_correction(a.y, MODE, OFF);                                                    \
            a.d = pg_qt_scales(b0->d, two ? b1->d : 0);                                                \
            MIN(a.s = pg_qt_scales1(b0->s, two ? b1->s : 0));                                          \
            _Pragma("GCC unroll 4")                                                                    \
            for (int r = 0; r < MR; r++) {                                                             \
                const pg_qt_i p = pg_qt_pair(&w[r], &a, MODE);                                         \
                acc[r][c] = pg_qt_fma(pg_qt_mul(w[r].d, a.d), pg_qt_cvt(p), acc[r][c]);                \
                MIN(acc[r][c] = pg_qt_fma(w[r].m, a.s, acc[r][c]));                                    \
            }                                                                                          \
        }                                                                                              \
    }                                                                                                  \
    _Pragma("GCC unroll 4")                                                                            \
    for (int c = 0; c < nc; c++)                                                                       \
        _Pragma("GCC unroll 4")                                                                        \
        for (int r = 0; r < mr; r++) s[(size_t) c * lds + r] = pg_qt_sum(acc[r][c]);                   \
}                                                                                                      \
static inline void NAME##_tile(int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by, int nc, \
                               float * s, size_t lds) {                                                \
    if (mr == 1) PG_QT_COLS(NAME, n, x, bx, mr, 1, y, by, nc, s, lds);                                 \
    else PG_QT_COLS(NAME, n, x, bx, mr, PG_QT_MR, y, by, nc, s, lds);                                  \
}

#define PG_QT_MIN(stmt) stmt
#define PG_QT_NOMIN(stmt)
#define PG_QT_DEC_Q8_0(b0, b1) pg_qt_load((b0)->qs, (b1)->qs)
#define PG_QT_DEC_Q4(b0, b1) pg_qt_nibbles((b0)->qs, (b1)->qs)
#define PG_QT_DEC_Q5(b0, b1) pg_qt_add_bit4(pg_qt_nibbles((b0)->qs, (b1)->qs), (b0)->qh, (b1)->qh)
#define PG_QT_DEC_IQ4_NL(b0, b1) pg_qt_lut16(pg_qt_nibbles((b0)->qs, (b1)->qs), pg_iq4nl_values)

PG_QTILE(pg_vec_dot_q8_0, pg_block_q8_0, pg_block_q8_0, PG_QT_DEC_Q8_0, PG_QT_SIGNED, 0, PG_QT_NOMIN)
PG_QTILE(pg_vec_dot_q4_0, pg_block_q4_0, pg_block_q8_0, PG_QT_DEC_Q4, PG_QT_OFF, 8, PG_QT_NOMIN)
PG_QTILE(pg_vec_dot_q4_1, pg_block_q4_1, pg_block_q8_1, PG_QT_DEC_Q4, PG_QT_UNS, 0, PG_QT_MIN)
PG_QTILE(pg_vec_dot_q5_0, pg_block_q5_0, pg_block_q8_0, PG_QT_DEC_Q5, PG_QT_OFF, 16, PG_QT_NOMIN)
PG_QTILE(pg_vec_dot_q5_1, pg_block_q5_1, pg_block_q8_1, PG_QT_DEC_Q5, PG_QT_UNS, 0, PG_QT_MIN)
PG_QTILE(pg_vec_dot_iq4_nl, pg_block_iq4_nl, pg_block_q8_0, PG_QT_DEC_IQ4_NL, PG_QT_SIGNED, 0, PG_QT_NOMIN)
