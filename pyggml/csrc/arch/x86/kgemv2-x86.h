/* The one-column GEMV of Q2_K and Q3_K against Q8_K on AVX-512 with VNNI and GFNI: their vec_dot_rows
 * (mul_mat's GEMV, rows i and i + h of a thread's range dotted together, the activation loads shared;
 * pg_kgemv_rows, at the end of this file). Each (row, column) pair gets exactly the integers and f32 steps of
 * arch/x86/kquants-x86.h's bodies: per super-block 8 int32 lanes, lane j the sum over the 16-groups of
 * scale * (elements 4j..4j+3 of each 32-element field) * y, Q3_K's values taken as q + 4 and its
 * 4 * scale * bsums taken off lane for lane, then acc += d_x*d_y * lane (Q2_K: and the min lanes +=
 * dmin_x*d_y * mins . bsums), summed at the end of the row. Per 64 elements (two 32-element fields,
 * the lower and upper 256 bits of a register) the 2-bit fields are moved to bits 0-1 by one affine
 * byte transform (GFNI) of the broadcast qs and Q3_K's hmask bits to bit 2 by another; one dpbusd sums
 * each 4 codes * y (|sum| < 2^15), two such registers are paired in the int16 halves of the lanes and
 * scaled by one dpwssd.
 */
#pragma once
#include "arch/x86/kgemv-x86.h"

/* the affine matrix that moves source bits s, s + 1 of a byte to bits 0, 1 (bit i of a result byte
 * is the parity of matrix byte 7 - i & the source byte) */
#define PG_KGEMV2_FIELD(s) ((long long) (0x0102ull << (s) << 48))
/* the one that moves source bit s to bit 2 */
#define PG_KGEMV2_HBIT(s) ((long long) (0x01ull << (s) << 40))

/* the int16 scale pairs of a pair of registers (h, 0) | (h, 1): int32 lane L holds the scales of
 * groups 8h + L/4 (register (h, 0)) and 8h + 4 + L/4 (register (h, 1)), as 16-bit indices */
static inline __m512i pg_kgemv2_pair_idx(int h) {
    return _mm512_add_epi16(_mm512_set_epi16(7, 3, 7, 3, 7, 3, 7, 3, 6, 2, 6, 2, 6, 2, 6, 2,
                                             5, 1, 5, 1, 5, 1, 5, 1, 4, 0, 4, 0, 4, 0, 4, 0),
                            _mm512_set1_epi16((short) (8 * h)));
}

/* 32 qs bytes at p broadcast, fields 2k | 2k + 1 of them (bits 4k, 4k + 1 | 4k + 2, 4k + 3) moved
 * to bits 0-1, g (0..3) in bits 2-3 (the transform's constant): the codes of register (h, k) of a
 * half's qs (g 0), or Q2_K's indices into its product table (g 2h + k) */
static inline __m512i pg_kgemv2_codes(const uint8_t * p, int k, int g) {
    const long long f0 = PG_KGEMV2_FIELD(4 * k), f1 = PG_KGEMV2_FIELD(4 * k + 2);
    const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) p));
    const __m512i a = _mm512_setr_epi64(f0, f0, f0, f0, f1, f1, f1, f1);
    switch (g) {
    case 0: return _mm512_gf2p8affine_epi64_epi8(q, a, 0);
    case 1: return _mm512_gf2p8affine_epi64_epi8(q, a, 4);
    case 2: return _mm512_gf2p8affine_epi64_epi8(q, a, 8);
    default: return _mm512_gf2p8affine_epi64_epi8(q, a, 12);
    }
}

/* R rows of Q3_K (x + r * bx) against one Q8_K row: s[r]. The 16 scales unpacked in one register
 * from two broadcast loads (w0 | w1 and w2); the lower 8 int32 lanes start at -4 * (scale . bsums)
 * of their group pair (pg_kq_x86_offset_cols' term, lane for lane) */
static inline __attribute__((always_inline)) void pg_kgemv_q3_K_body(int64_t nb, const char * x, size_t bx,
                                                                   const pg_block_q8_K * y, const int R, float * s) {
    __m256 acc[2];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    /* register (h, k): fields 2k | 2k + 1 of half h, hmask bit 4h + 2k | 4h + 2k + 1 */
    __m512i ah[2][2];
    for (int k = 0; k < 2; k++) {
        for (int h = 0; h < 2; h++) {
            const long long b0 = PG_KGEMV2_HBIT(4 * h + 2 * k), b1 = PG_KGEMV2_HBIT(4 * h + 2 * k + 1);
            ah[h][k] = _mm512_setr_epi64(b0, b0, b0, b0, b1, b1, b1, b1);
        }
    }
    const __m512i idx[2] = {pg_kgemv2_pair_idx(0), pg_kgemv2_pair_idx(1)};
    /* pg_kq_unpack_q3: words w0, w1, w0 >> 4, w1 >> 4 give the low 4 bits; w2 << 4, << 2, >> 0, >> 2
     * (a rotate: the bits wrapped round are masked off) bits 4-5 */
    const __m128i lsh = _mm_setr_epi32(0, 0, 4, 4), hrot = _mm_setr_epi32(4, 2, 0, 30);
    for (int64_t ib = 0; ib < nb; ib++, x += sizeof(pg_block_q3_K)) {
        const __m256i nbs = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_loadu_si256((const __m256i *) y[ib].bsums));
        __m512i sc16[2], sumi[2], hm[2];
        for (int r = 0; r < R; r++) {
            const pg_block_q3_K * b = (const pg_block_q3_K *) (x + (size_t) r * bx);
            int64_t w01;
            int32_t w2;
            memcpy(&w01, b->scales, sizeof(w01));
            memcpy(&w2, b->scales + 8, sizeof(w2));
            const __m128i lo = _mm_srlv_epi32(_mm_set1_epi64x(w01), lsh);
            const __m128i hi = _mm_and_si128(_mm_rolv_epi32(_mm_set1_epi32(w2), hrot), _mm_set1_epi8(0x30));
            const __m128i sc8 = _mm_sub_epi8(_mm_ternarylogic_epi32(lo, hi, _mm_set1_epi8(0xf), 0xec), _mm_set1_epi8(32));
            const __m256i s = _mm256_cvtepi8_epi16(sc8);
            sc16[r] = _mm512_castsi256_si512(s);
            sumi[r] = _mm512_zextsi256_si512(_mm256_madd_epi16(_mm256_slli_epi16(s, 2), nbs));
            hm[r] = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) b->hmask));
        }
        for (int h = 0; h < 2; h++) {
            __m512i raw[2][2];
            for (int k = 0; k < 2; k++) {
                const __m512i yv = _mm512_loadu_si512((const void *) (y[ib].qs + 128 * h + 64 * k));
                for (int r = 0; r < R; r++) {
                    const pg_block_q3_K * b = (const pg_block_q3_K *) (x + (size_t) r * bx);
                    const __m512i v = _mm512_or_si512(pg_kgemv2_codes(b->qs + 32 * h, k, 0),
                                                      _mm512_gf2p8affine_epi64_epi8(hm[r], ah[h][k], 0));
                    raw[r][k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v, yv);
                }
            }
            for (int r = 0; r < R; r++)
                sumi[r] = _mm512_dpwssd_epi32(sumi[r], pg_kgemv_pair(raw[r][0], raw[r][1]),
                                              _mm512_permutexvar_epi16(idx[h], sc16[r]));
        }
        for (int r = 0; r < R; r++)
            acc[r] = pg_kgemv_step(acc[r], ((const pg_block_q3_K *) (x + (size_t) r * bx))->d, y[ib].d, sumi[r]);
    }
    for (int r = 0; r < R; r++) s[r] = pg_kq_hsum_ps(acc[r]);
}

/* R rows of Q2_K against one Q8_K row: s[r]. Its codes (0..3) times scales (0..15) fit a byte:
 * per super-block one product table per row, 128-bit lane m holding c * scale of groups m, 4 + m,
 * 8 + m, 12 + m (c 0..3) at bytes 4j + c, from which pshufb takes each element's scaled code (group
 * 8h + 4k + m for register (h, k)'s lane m: index 4 (2h + k) + code), dotted with y by one dpbusd
 * (the lanes' integers those of the one-row body: scale * the 4 codes * y); the mins (high nibbles) widened to int16 */
static inline __attribute__((always_inline)) void pg_kgemv_q2_K_body(int64_t nb, const char * x, size_t bx,
                                                                   const pg_block_q8_K * y, const int R, float * s) {
    __m256 acc[2], accm[2];
    for (int r = 0; r < R; r++) acc[r] = accm[r] = _mm256_setzero_ps();
    /* int16 w of lane m: scale 4 (w / 2) + m zero-extended, then multiplied by c | (c + 1) << 8,
     * c = 2 (w % 2) */
    const __m512i ctl = _mm512_add_epi16(_mm512_set4_epi32(0x800c800c, 0x80088008, 0x80048004, (int) 0x80008000),
                                         _mm512_setr_epi32(0, 0, 0, 0, 0x00010001, 0x00010001, 0x00010001, 0x00010001,
                                                           0x00020002, 0x00020002, 0x00020002, 0x00020002,
                                                           0x00030003, 0x00030003, 0x00030003, 0x00030003));
    const __m512i mul = _mm512_set1_epi32(0x03020100);
    for (int64_t ib = 0; ib < nb; ib++, x += sizeof(pg_block_q2_K)) {
        const __m256i bs = _mm256_loadu_si256((const __m256i *) y[ib].bsums);
        __m512i tab[2], sumi[2];
        __m256i summ[2];
        for (int r = 0; r < R; r++) {
            const pg_block_q2_K * b = (const pg_block_q2_K *) (x + (size_t) r * bx);
            const __m128i raw = _mm_loadu_si128((const __m128i *) b->scales);
            const __m512i sv = _mm512_broadcast_i32x4(_mm_and_si128(raw, _mm_set1_epi8(0xf)));
            tab[r] = _mm512_mullo_epi16(_mm512_shuffle_epi8(sv, ctl), mul);
            summ[r] = _mm256_madd_epi16(_mm256_srli_epi16(_mm256_cvtepu8_epi16(raw), 4), bs);
            sumi[r] = _mm512_setzero_si512();
        }
        for (int h = 0; h < 2; h++) {
            for (int k = 0; k < 2; k++) {
                const __m512i yv = _mm512_loadu_si512((const void *) (y[ib].qs + 128 * h + 64 * k));
                for (int r = 0; r < R; r++) {
                    const pg_block_q2_K * b = (const pg_block_q2_K *) (x + (size_t) r * bx);
                    const __m512i v = _mm512_shuffle_epi8(tab[r], pg_kgemv2_codes(b->qs + 32 * h, k, 2 * h + k));
                    sumi[r] = _mm512_dpbusd_epi32(sumi[r], v, yv);
                }
            }
        }
        for (int r = 0; r < R; r++) {
            const pg_block_q2_K * b = (const pg_block_q2_K *) (x + (size_t) r * bx);
            int32_t dd;
            memcpy(&dd, &b->d, sizeof(dd));
            /* d_x * d_y, dmin_x * d_y */
            const __m128 f = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(dd)), _mm_set1_ps(y[ib].d));
            acc[r] = _mm256_fmadd_ps(_mm256_broadcastss_ps(f), _mm256_cvtepi32_ps(pg_kq_fold(sumi[r])), acc[r]);
            accm[r] = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(f)), _mm256_cvtepi32_ps(summ[r]), accm[r]);
        }
    }
    for (int r = 0; r < R; r++) s[r] = pg_kq_hsum_ps(acc[r]) - pg_kq_hsum_ps(accm[r]);
}
#undef PG_KGEMV2_FIELD
#undef PG_KGEMV2_HBIT

/* the one-row body (R rows, 1 or 2) of type t (PG_TYPE_Q2_K, _Q3_K, _Q4_K, _Q6_K or _IQ4_XS, a
 * compile-time constant in every caller) of this file and arch/x86/kgemv-x86.h */
PG_ALWAYS_INLINE void pg_kgemv_body(const int t, int64_t nb, const char * x, size_t bx, const pg_block_q8_K * y,
                                  const int R, float * s) {
    switch (t) {
    case PG_TYPE_Q2_K: pg_kgemv_q2_K_body(nb, x, bx, y, R, s); break;
    case PG_TYPE_Q3_K: pg_kgemv_q3_K_body(nb, x, bx, y, R, s); break;
    case PG_TYPE_Q4_K: pg_kgemv_k4_body(nb, x, bx, y, R, s); break;
    case PG_TYPE_Q6_K: pg_kgemv_q6_K_body(nb, x, bx, y, R, s); break;
    default: pg_kgemv_iq4_xs_body(nb, x, bx, y, R, s); break;
    }
}
/* vec_dot of type t (dot-k.h's, one row) */
PG_ALWAYS_INLINE float pg_kgemv_dot(const int t, int64_t n, const void * x, const void * y) {
    float s;
    pg_kgemv_body(t, n / PG_QK_K, (const char *) x, 0, (const pg_block_q8_K *) y, 1, &s);
    return s;
}
/* vec_dot_rows of type t (mul_mat's one-column GEMV over a thread's nr rows): row i and row i + nr/2
 * per body call, two read streams sharing the activation loads, an odd last row alone (each sum the
 * bits of the one-row body). Each call prefetches both streams' rows PG_KGEMV_AHEAD bytes ahead (at
 * least the next ones): the hardware prefetcher alone leaves misses the bodies do not overlap. */
#define PG_KGEMV_AHEAD 4096
PG_ALWAYS_INLINE void pg_kgemv_rows(const int t, int64_t n, const void * vx, size_t bx, int64_t nr, const void * vy,
                                  float * s) {
    const char * x = (const char *) vx;
    const pg_block_q8_K * y = (const pg_block_q8_K *) vy;
    const int64_t nb = n / PG_QK_K, h = nr / 2;
    const int64_t ahead = PG_MAX(1, PG_KGEMV_AHEAD / (int64_t) bx);
    for (int64_t i = 0; i < h; i++) {
        float s2[2];
        if (i + ahead < h)
            for (size_t o = 0; o < bx; o += PG_CACHE_LINE) {
                __builtin_prefetch(x + (size_t) (i + ahead) * bx + o);
                __builtin_prefetch(x + (size_t) (i + ahead + h) * bx + o);
            }
        pg_kgemv_body(t, nb, x + (size_t) i * bx, (size_t) h * bx, y, 2, s2);
        s[i] = s2[0];
        s[i + h] = s2[1];
    }
    if (nr & 1) pg_kgemv_body(t, nb, x + (size_t) (2 * h) * bx, 0, y, 1, s + 2 * h);
}
static inline void pg_vec_dot_q2_K_q8_K_rows(int64_t n, const void * x, size_t bx, int64_t nr, const void * y,
                                             float * s) {
    pg_kgemv_rows(PG_TYPE_Q2_K, n, x, bx, nr, y, s);
}
static inline void pg_vec_dot_q3_K_q8_K_rows(int64_t n, const void * x, size_t bx, int64_t nr, const void * y,
                                             float * s) {
    pg_kgemv_rows(PG_TYPE_Q3_K, n, x, bx, nr, y, s);
}
static inline void pg_vec_dot_q6_K_q8_K_rows(int64_t n, const void * x, size_t bx, int64_t nr, const void * y,
                                             float * s) {
    pg_kgemv_rows(PG_TYPE_Q6_K, n, x, bx, nr, y, s);
}
static inline void pg_vec_dot_iq4_xs_q8_K_rows(int64_t n, const void * x, size_t bx, int64_t nr, const void * y,
                                               float * s) {
    pg_kgemv_rows(PG_TYPE_IQ4_XS, n, x, bx, nr, y, s);
}
