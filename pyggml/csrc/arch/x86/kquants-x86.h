/* The K-quant dot products of dot-k.h on x86 (AVX2, and AVX-512 where the ISA layer picked it):
 * the ISA half of dot-k.h, over quants-k.h's blocks and scale unpacking. Per
 * super-block the exact integer sum of scale * q * y in 8 int32 lanes (maddubs/madd; AVX-512 takes
 * 64 activations per instruction), then f32 accumulators of 8 lanes summed once at the end of the row.
 * Each kernel takes nc <= 4 activation columns (vy + c * by): the weight registers are decoded once and
 * multiplied with every column, each column keeping its own accumulators (so its bits do not depend
 * on nc); pg_kq_x86_<type>_n specialises the body per nc, pg_kq_x86_dot_<type> is nc = 1.
 */
#pragma once
#include "types/quants-k.h"

static inline float pg_kq_hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
static inline float pg_kq_hsum_ps4(__m128 s) {
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
/* s holds 8 int16 scales in both 128-bit lanes: [s[2j] x 8 | s[2j+1] x 8], the weights of the two
 * 16-groups of one 32-byte register */
static inline __m256i pg_kq_pair(__m256i s, int j) {
    const short lo = (short) ((4 * j + 1) << 8 | (4 * j)), hi = (short) ((4 * j + 3) << 8 | (4 * j + 2));
    return _mm256_shuffle_epi8(s, _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo)));
}
/* s as in pg_kq_pair: s[k] in every int16 */
static inline __m256i pg_kq_one(__m256i s, int k) {
    return _mm256_shuffle_epi8(s, _mm256_set1_epi16((short) ((2 * k + 1) << 8 | (2 * k))));
}
#if defined(PG_SIMD_AVX512)
/* s: 16 int16 scales in the lower 256 bits; int16 i of the result is s[base + i / 8], the scales of
 * the four 16-groups of one 64-byte register */
static inline __m512i pg_kq_scales4(__m512i s, int base) {
    static const int16_t lane_of[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                        2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    const __m512i idx = _mm512_add_epi16(_mm512_loadu_si512((const void *) lane_of), _mm512_set1_epi16((short) base));
    return _mm512_permutexvar_epi16(idx, s);
}
/* the upper 256 bits added onto the lower */
static inline __m256i pg_kq_fold(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}
/* [lo | hi] */
static inline __m512i pg_kq_join(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
#endif
#if defined(PG_SIMD_AVX512)
/* dot-k.h's Q8_K quantiser for one super-block, 16 lanes at a time with its float steps: the
 * largest |x| (max_ps passes a NaN over, as the scalar comparison does), the first element with it,
 * iscale = -127/max, q = min(127, nearest_int(iscale * x)) by the same product and 1.5 * 2^23
 * addition (explicitly rounded intrinsics: never contracted to an fma), the low byte kept */
static inline void pg_kq_x86_quantize_q8_K(const float * x, pg_block_q8_K * y) {
    const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    __m512 m = _mm512_setzero_ps();
    for (int e = 0; e < PG_QK_K; e += 16) m = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(x + e), sign), m);
    const float amax = _mm512_reduce_max_ps(m);
    if (!amax) {
        memset(y, 0, sizeof(*y));
        return;
    }
    int first = 0;
    for (int e = 0; e < PG_QK_K; e += 16) {
        const __mmask16 k = _mm512_cmp_ps_mask(_mm512_and_ps(_mm512_loadu_ps(x + e), sign), _mm512_set1_ps(amax), _CMP_EQ_OQ);
        if (k) {
            first = e + __builtin_ctz(k);
            break;
        }
    }
    const float iscale = -127.0f / x[first];
    const __m512 vs = _mm512_set1_ps(iscale), magic = _mm512_set1_ps(12582912.0f);
    const __m512i mant = _mm512_set1_epi32(0x007fffff), half = _mm512_set1_epi32(0x00400000), top = _mm512_set1_epi32(127);
    for (int g = 0; g < PG_QK_K / 16; g++) {
        const int r = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
        const __m512 v = _mm512_add_round_ps(_mm512_mul_round_ps(vs, _mm512_loadu_ps(x + 16 * g), r), magic, r);
        const __m512i l = _mm512_min_epi32(_mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(v), mant), half), top);
        const __m128i q = _mm512_cvtepi32_epi8(l);
        _mm_storeu_si128((__m128i *) (y->qs + 16 * g), q);
        y->bsums[g] = (int16_t) _mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(q));
    }
    y->d = 1 / iscale;
}
#endif

/* 16 int8 (or uint8 when zext) values as int16, both lanes: element 8h..8h+7 of each half h */
static inline __m256i pg_kq_bcast8(const void * p, bool zext) {
    int64_t v;
    memcpy(&v, p, sizeof(v));
    const __m128i b = _mm_set1_epi64x(v);
    return zext ? _mm256_cvtepu8_epi16(b) : _mm256_cvtepi8_epi16(b);
}

#if !defined(PG_SIMD_AVX512)
/* two consecutive fp16 (d, dmin) as the two low f32 lanes, one conversion */
static inline __m128 pg_kq_avx2_fp16x2(const pg_fp16_t * p) {
    int32_t v;
    memcpy(&v, p, sizeof(v));
    return _mm_cvtph_ps(_mm_cvtsi32_si128(v));
}

/* pg_kq_avx2_pick's shuffle controls for k = 0, 2, .., 14: int16 lanes 0x8000 | k, then 0x8000 | (k + 1).
 * A table in memory: built from set1/set_m128i, gcc composed all eight in registers at every call
 * and then spilled most of them to the stack */
static const int16_t pg_kq_avx2_pick_ctl[8][16] __attribute__((aligned(32))) = {
#define PG_KQ_PICK8(v) v, v, v, v, v, v, v, v
#define PG_KQ_PICK_ROW(k) {PG_KQ_PICK8((int16_t) (0x8000 | (k))), PG_KQ_PICK8((int16_t) (0x8001 | (k)))}
    PG_KQ_PICK_ROW(0), PG_KQ_PICK_ROW(2), PG_KQ_PICK_ROW(4), PG_KQ_PICK_ROW(6),
    PG_KQ_PICK_ROW(8), PG_KQ_PICK_ROW(10), PG_KQ_PICK_ROW(12), PG_KQ_PICK_ROW(14)
#undef PG_KQ_PICK_ROW
#undef PG_KQ_PICK8
};
/* Q2_K's scales: int16 i of the result is byte k (i < 8) or k + 1 (i >= 8) of b (k even), whose two
 * lanes both hold the 16 scale bytes (zero-extended; one shuffle, no widening or lane permutes) */
static inline __m256i pg_kq_avx2_pick(__m256i b, int k) {
    return _mm256_shuffle_epi8(b, _mm256_load_si256((const __m256i *) pg_kq_avx2_pick_ctl[k / 2]));
}

/* pg_kq_dot_2bit_simd on AVX2: each field shifted out of the loaded qs (bits 2j), hm's bit 4h + j
 * shifted straight to bit 2 (both byte-local in a 16-bit shift). sv: Q3_K (high) its 16 scales
 * widened to int16; Q2_K its 16 scale bytes (0..15) in both lanes, picked by pg_kq_avx2_pick */
static inline __attribute__((always_inline)) void pg_kq_avx2_2bit(const uint8_t * qs, const uint8_t * hm, const bool high,
                                                                  const __m256i sv, const int8_t * const * y,
                                                                  const int nc, __m256i * out) {
    const __m256i m3 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(4);
    const __m256i hb = high ? _mm256_loadu_si256((const __m256i *) hm) : _mm256_setzero_si256();
    for (int c = 0; c < nc; c++) out[c] = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i s = !high ? sv : h ? _mm256_permute4x64_epi64(sv, 0xee) : _mm256_permute4x64_epi64(sv, 0x44);
        const __m256i q = _mm256_loadu_si256((const __m256i *) (qs + 32 * h));
        for (int j = 0; j < 4; j++) {
            __m256i v = _mm256_and_si256(j ? _mm256_srli_epi16(q, 2 * j) : q, m3);
            if (high) {
                const int b = 4 * h + j;
                const __m256i t = b > 2 ? _mm256_srli_epi16(hb, b - 2) : b < 2 ? _mm256_slli_epi16(hb, 2 - b) : hb;
                v = _mm256_or_si256(v, _mm256_and_si256(t, m4));
            }
            const __m256i sc = high ? pg_kq_pair(s, j) : pg_kq_avx2_pick(s, 8 * h + 2 * j);
            for (int c = 0; c < nc; c++) {
                const __m256i p = _mm256_maddubs_epi16(v, _mm256_loadu_si256((const __m256i *) (y[c] + 128 * h + 32 * j)));
                out[c] = _mm256_add_epi32(out[c], _mm256_madd_epi16(p, sc));
            }
        }
    }
}
#endif

/* the same as 8 int32 lanes (their sum is the scalar's) for each of nc columns: out[c] for the 256
 * activations y[c]; sc16 the scales as int8. Each weight register is decoded once for all columns */
static inline __attribute__((always_inline)) void pg_kq_dot_2bit_simd(const uint8_t * qs, const uint8_t * hm,
                                                                      const int8_t * sc16, const int8_t * const * y,
                                                                      const int nc, __m256i * out) {
#if defined(PG_SIMD_AVX512)
    /* fields j = 0, 1 (and 2, 3) of a half in one register, against 64 contiguous activations */
    const __m512i m3 = _mm512_set1_epi8(3), m1 = _mm512_set1_epi8(1);
    const __m256i hb = hm ? _mm256_loadu_si256((const __m256i *) hm) : _mm256_setzero_si256();
    const __m512i s = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) sc16)));
    __m512i acc[4];
    for (int c = 0; c < nc; c++) acc[c] = _mm512_setzero_si512();
    for (int h = 0; h < 2; h++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *) (qs + 32 * h));
        for (int k = 0; k < 2; k++) {
            __m512i v = _mm512_and_si512(pg_kq_join(_mm256_srli_epi16(q, 4 * k), _mm256_srli_epi16(q, 4 * k + 2)), m3);
            if (hm) {
                const __m512i hh = pg_kq_join(_mm256_srli_epi16(hb, 4 * h + 2 * k), _mm256_srli_epi16(hb, 4 * h + 2 * k + 1));
                v = _mm512_or_si512(v, _mm512_slli_epi16(_mm512_and_si512(hh, m1), 2));
            }
            const __m512i sc = pg_kq_scales4(s, 8 * h + 4 * k);
            for (int c = 0; c < nc; c++) {
                const __m512i p = _mm512_maddubs_epi16(v, _mm512_loadu_si512((const void *) (y[c] + 128 * h + 64 * k)));
                acc[c] = _mm512_add_epi32(acc[c], _mm512_madd_epi16(p, sc));
            }
        }
    }
    for (int c = 0; c < nc; c++) out[c] = pg_kq_fold(acc[c]);
#else
    /* Q3_K's (Q2_K's AVX2 body calls pg_kq_avx2_2bit itself) */
    pg_kq_avx2_2bit(qs, hm, true, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) sc16)), y, nc, out);
#endif
}

/* the scaled integer dots of one Q4_K (qh NULL) or Q5_K block with nc columns, 8 int32 lanes each;
 * sm: the 8 scales */
static inline __attribute__((always_inline)) void pg_kq_k4_block(const uint8_t * qs, const uint8_t * qh,
                                                                 const uint8_t * sm, const int8_t * const * y,
                                                                 const int nc, __m256i * out) {
    __m256i hb = qh ? _mm256_loadu_si256((const __m256i *) qh) : _mm256_setzero_si256();
#if defined(PG_SIMD_AVX512)
    /* one 64-element chunk per register: its low nibbles (scale 2c) in the lower half, its high
     * nibbles (scale 2c + 1) in the upper one, against 64 contiguous activations */
    const __m512i m4 = _mm512_set1_epi8(0xf), m1 = _mm512_set1_epi8(1);
    const __m512i s = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *) sm)));
    __m512i sumi[4];
    for (int c = 0; c < nc; c++) sumi[c] = _mm512_setzero_si512();
    for (int k = 0; k < 4; k++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *) (qs + 32 * k));
        __m512i v = _mm512_and_si512(pg_kq_join(q, _mm256_srli_epi16(q, 4)), m4);
        if (qh) {
            const __m512i h = pg_kq_join(hb, _mm256_srli_epi16(hb, 1));
            v = _mm512_or_si512(v, _mm512_slli_epi16(_mm512_and_si512(h, m1), 4));
            hb = _mm256_srli_epi16(hb, 2);
        }
        const __m512i ctl = pg_kq_join(_mm256_set1_epi16((short) ((4 * k + 1) << 8 | (4 * k))),
                                       _mm256_set1_epi16((short) ((4 * k + 3) << 8 | (4 * k + 2))));
        const __m512i sc = _mm512_shuffle_epi8(s, ctl);
        for (int c = 0; c < nc; c++) {
            const __m512i p = _mm512_maddubs_epi16(v, _mm512_loadu_si512((const void *) (y[c] + 64 * k)));
            sumi[c] = _mm512_add_epi32(sumi[c], _mm512_madd_epi16(p, sc));
        }
    }
    for (int c = 0; c < nc; c++) out[c] = pg_kq_fold(sumi[c]);
#else
    const __m256i m4 = _mm256_set1_epi8(0xf), m1 = _mm256_set1_epi8(1);
    const __m256i s = pg_kq_bcast8(sm, true);     /* the 8 scales as int16 in both lanes */
    for (int c = 0; c < nc; c++) out[c] = _mm256_setzero_si256();
    for (int k = 0; k < 4; k++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *) (qs + 32 * k));
        __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        if (qh) {
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hb, m1), 4));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 1), m1), 4));
            hb = _mm256_srli_epi16(hb, 2);
        }
        const __m256i sl = pg_kq_one(s, 2 * k), sh = pg_kq_one(s, 2 * k + 1);
        for (int c = 0; c < nc; c++) {
            const __m256i pl = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *) (y[c] + 64 * k)));
            const __m256i ph = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *) (y[c] + 64 * k + 32)));
            out[c] = _mm256_add_epi32(out[c], _mm256_add_epi32(_mm256_madd_epi16(pl, sl), _mm256_madd_epi16(ph, sh)));
        }
    }
#endif
}

/* the scaled dots of one Q6_K block's 6-bit values (0..63) with nc columns, 8 int32 lanes each */
static inline __attribute__((always_inline)) void pg_kq_q6_block(const pg_block_q6_K * x, const int8_t * const * y,
                                                                 const int nc, __m256i * out) {
#if defined(PG_SIMD_AVX512)
    /* quarters j = 0, 1 (and 2, 3) of a half in one register: bytes ql[0..63] of the half give the
     * low nibbles of quarters 0 and 1, their high nibbles quarters 2 and 3 */
    const __m512i m4 = _mm512_set1_epi8(0xf), m3 = _mm512_set1_epi8(3);
    const __m512i s = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) x->scales)));
    __m512i sumi[4];
    for (int c = 0; c < nc; c++) sumi[c] = _mm512_setzero_si512();
    for (int h = 0; h < 2; h++) {
        const __m512i ql = _mm512_loadu_si512((const void *) (x->ql + 64 * h));
        const __m256i hb = _mm256_loadu_si256((const __m256i *) (x->qh + 32 * h));
        const __m512i hh = pg_kq_join(hb, _mm256_srli_epi16(hb, 2));
        const __m512i va = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_slli_epi16(_mm512_and_si512(hh, m3), 4));
        const __m512i vb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                           _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hh, 4), m3), 4));
        const __m512i sa = pg_kq_scales4(s, 8 * h), sb = pg_kq_scales4(s, 8 * h + 4);
        for (int c = 0; c < nc; c++) {
            const __m512i pa = _mm512_maddubs_epi16(va, _mm512_loadu_si512((const void *) (y[c] + 128 * h)));
            const __m512i pb = _mm512_maddubs_epi16(vb, _mm512_loadu_si512((const void *) (y[c] + 128 * h + 64)));
            sumi[c] = _mm512_add_epi32(sumi[c], _mm512_madd_epi16(pa, sa));
            sumi[c] = _mm512_add_epi32(sumi[c], _mm512_madd_epi16(pb, sb));
        }
    }
    for (int c = 0; c < nc; c++) out[c] = pg_kq_fold(sumi[c]);
#else
    /* qh's bits 2j, 2j + 1 shifted straight to bits 4-5; the scales widened once (as the row body
     * does for its offset term: the same value) */
    const __m256i m4 = _mm256_set1_epi8(0xf), m30 = _mm256_set1_epi8(0x30);
    const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) x->scales));
    for (int c = 0; c < nc; c++) out[c] = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        /* each branch a literal immediate: a build that does not unroll the loop (the sanitizers) would
         * otherwise pass permute4x64 a variable */
        const __m256i s = h ? _mm256_permute4x64_epi64(s16, 0xee) : _mm256_permute4x64_epi64(s16, 0x44);
        const __m256i a = _mm256_loadu_si256((const __m256i *) (x->ql + 64 * h));
        const __m256i b = _mm256_loadu_si256((const __m256i *) (x->ql + 64 * h + 32));
        const __m256i hb = _mm256_loadu_si256((const __m256i *) (x->qh + 32 * h));
        const __m256i low[4] = {_mm256_and_si256(a, m4), _mm256_and_si256(b, m4),
                                _mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(_mm256_srli_epi16(b, 4), m4)};
        const __m256i high[4] = {_mm256_slli_epi16(hb, 4), _mm256_slli_epi16(hb, 2), hb, _mm256_srli_epi16(hb, 2)};
        for (int j = 0; j < 4; j++) {
            const __m256i v = _mm256_or_si256(low[j], _mm256_and_si256(high[j], m30));
            const __m256i sc = pg_kq_pair(s, j);
            for (int c = 0; c < nc; c++) {
                const __m256i p = _mm256_maddubs_epi16(v, _mm256_loadu_si256((const __m256i *) (y[c] + 128 * h + 32 * j)));
                out[c] = _mm256_add_epi32(out[c], _mm256_madd_epi16(p, sc));
            }
        }
    }
#endif
}

/* ---- the rows: nb super-blocks of x against nb of Q8_K in each of nc columns (vy + c * by) ---- */

/* block ib of column c */
static inline const pg_block_q8_K * pg_kq_col(const void * vy, size_t by, int c, int64_t ib) {
    return (const pg_block_q8_K *) ((const char *) vy + (size_t) c * by) + ib;
}

static inline __attribute__((always_inline)) void pg_kq_x86_q2_K_body(int64_t nb, const void * vx, const void * vy,
                                                                      size_t by, const int nc, float * s) {
    const pg_block_q2_K * x = (const pg_block_q2_K *) vx;
    __m256 acc[4], accm[4];
    for (int c = 0; c < nc; c++) acc[c] = accm[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const __m128i raw = _mm_loadu_si128((const __m128i *) x[ib].scales);
        const int8_t * yq[4];
        __m256i sumi[4];
        for (int c = 0; c < nc; c++) yq[c] = pg_kq_col(vy, by, c, ib)->qs;
#if defined(PG_SIMD_AVX512)
        int8_t sc[16];
        _mm_storeu_si128((__m128i *) sc, _mm_and_si128(raw, _mm_set1_epi8(0xf)));
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0xf)));
        pg_kq_dot_2bit_simd(x[ib].qs, NULL, sc, yq, nc, sumi);
#else
        /* the scale bytes in both lanes (a broadcast load) for pg_kq_avx2_pick; the mins widened
         * from memory, the high nibble then shifted down within its int16 */
        const __m256i sb = _mm256_and_si256(_mm256_broadcastsi128_si256(raw), _mm256_set1_epi8(0xf));
        const __m256i mins = _mm256_srli_epi16(_mm256_cvtepu8_epi16(raw), 4);
        pg_kq_avx2_2bit(x[ib].qs, NULL, false, sb, yq, nc, sumi);
#endif
#if defined(PG_SIMD_AVX512)
        const float dx = pg_fp16_to_fp32(x[ib].d), dmx = pg_fp16_to_fp32(x[ib].dmin);
        for (int c = 0; c < nc; c++) {
            const pg_block_q8_K * y = pg_kq_col(vy, by, c, ib);
            const __m256i summ = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *) y->bsums));
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * y->d), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
            accm[c] = _mm256_fmadd_ps(_mm256_set1_ps(dmx * y->d), _mm256_cvtepi32_ps(summ), accm[c]);
        }
#else
        const __m128 dd = pg_kq_avx2_fp16x2(&x[ib].d);
        for (int c = 0; c < nc; c++) {
            const pg_block_q8_K * y = pg_kq_col(vy, by, c, ib);
            const __m256i summ = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *) y->bsums));
            const __m128 f = _mm_mul_ps(dd, _mm_set1_ps(y->d));
            acc[c] = _mm256_fmadd_ps(_mm256_broadcastss_ps(f), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
            accm[c] = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(f)), _mm256_cvtepi32_ps(summ), accm[c]);
        }
#endif
    }
    for (int c = 0; c < nc; c++) s[c] = pg_kq_hsum_ps(acc[c]) - pg_kq_hsum_ps(accm[c]);
}

/* the signed types (Q3_K, Q6_K) dotted q + 2^shift: acc[c] += dx * d_y * (sumi[c] - 2^shift *
 * sum(scale * bsums)) for block ib of each column; sc16 the 16 scales as int16 */
static inline __attribute__((always_inline)) void pg_kq_x86_offset_cols(__m256 * acc, const __m256i * sumi, __m256i sc16,
                                                                        int shift, float dx, const void * vy, size_t by,
                                                                        int64_t ib, const int nc) {
    for (int c = 0; c < nc; c++) {
        const pg_block_q8_K * y = pg_kq_col(vy, by, c, ib);
        const __m256i off = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *) y->bsums));
        const __m256i v = _mm256_sub_epi32(sumi[c], _mm256_sll_epi32(off, _mm_cvtsi32_si128(shift)));
        acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * y->d), _mm256_cvtepi32_ps(v), acc[c]);
    }
}

#if !defined(PG_SIMD_AVX512)
/* pg_kq_unpack_q3 in one register (a scalar unpack stored and reloaded as a vector stalls the
 * load): words w0, w1, w0 >> 4, w1 >> 4 give the low 4 bits, w2 >> 0, 2, 4, 6 the top 2 */
static inline __m128i pg_kq_avx2_q3_scales(const uint8_t * s) {
    int32_t w2;
    memcpy(&w2, s + 8, sizeof(w2));
    const __m128i lo = _mm_shuffle_epi32(_mm_loadl_epi64((const __m128i *) s), _MM_SHUFFLE(1, 0, 1, 0));
    const __m128i l4 = _mm_and_si128(_mm_srlv_epi32(lo, _mm_setr_epi32(0, 0, 4, 4)), _mm_set1_epi8(0xf));
    const __m128i h2 = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(w2), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
    return _mm_or_si128(l4, _mm_slli_epi32(h2, 4));
}
#endif

static inline __attribute__((always_inline)) void pg_kq_x86_q3_K_body(int64_t nb, const void * vx, const void * vy,
                                                                      size_t by, const int nc, float * s) {
    const pg_block_q3_K * x = (const pg_block_q3_K *) vx;
    __m256 acc[4];
    for (int c = 0; c < nc; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        int8_t sc[16];
#if defined(PG_SIMD_AVX512)
        uint8_t raw[16];
        pg_kq_unpack_q3(x[ib].scales, raw);
        const __m128i sc8 = _mm_sub_epi8(_mm_loadu_si128((const __m128i *) raw), _mm_set1_epi8(32));
#else
        const __m128i sc8 = _mm_sub_epi8(pg_kq_avx2_q3_scales(x[ib].scales), _mm_set1_epi8(32));
#endif
        _mm_storeu_si128((__m128i *) sc, sc8);
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        const int8_t * yq[4];
        __m256i sumi[4];
        for (int c = 0; c < nc; c++) yq[c] = pg_kq_col(vy, by, c, ib)->qs;
        pg_kq_dot_2bit_simd(x[ib].qs, x[ib].hmask, sc, yq, nc, sumi);
        pg_kq_x86_offset_cols(acc, sumi, sc16, 2, pg_fp16_to_fp32(x[ib].d), vy, by, ib, nc);   /* took q + 4 */
    }
    for (int c = 0; c < nc; c++) s[c] = pg_kq_hsum_ps(acc[c]);
}

#if !defined(PG_SIMD_AVX512)
/* pg_kq_unpack_k4 on 64-bit words, out[0] the 8 scales, out[1] the 8 mins: the vector pipes bound
 * the AVX2 GEMV, so the unpack stays in the integer ones and enters them as two 64-bit moves.
 * a = w0 | w1 << 32 gives scales 0-3 | mins 0-3 (6 bits) and, >> 2, their top 2 bits (as bits
 * 4-5) for scales 4-7 | mins 4-7, whose low 4 bits are w2 | (w2 >> 4) << 32 */
static inline void pg_kq_avx2_k4_words(const uint8_t * q, uint64_t * out) {
    uint64_t a;
    uint32_t w2;
    memcpy(&a, q, sizeof(a));
    memcpy(&w2, q + 8, sizeof(w2));
    const uint64_t lo = a & 0x3f3f3f3f3f3f3f3fu;
    const uint64_t hi = ((a >> 2) & 0x3030303030303030u) | ((w2 | (uint64_t) (w2 >> 4) << 32) & 0x0f0f0f0f0f0f0f0fu);
    out[0] = (lo & 0xffffffffu) | hi << 32;
    out[1] = lo >> 32 | (hi & 0xffffffff00000000u);
}
#endif

/* Q4_K (q5 false) and Q5_K blocks of bx bytes; off_qs: where qs starts in a block */
static inline __attribute__((always_inline)) void pg_kq_x86_k4_body(int64_t nb, const char * xb, size_t bx, size_t off_qs,
                                                                    const void * vy, size_t by, const int nc, float * s,
                                                                    bool q5) {
    __m256 acc[4];
    __m128 accm[4];
    for (int c = 0; c < nc; c++) {
        acc[c] = _mm256_setzero_ps();
        accm[c] = _mm_setzero_ps();
    }
    for (int64_t ib = 0; ib < nb; ib++, xb += bx) {
        const pg_block_q4_K * b = (const pg_block_q4_K *) xb;        /* d, dmin, scales are common */
        const uint8_t * qs = (const uint8_t *) xb + off_qs;
        uint8_t sm[16];
#if defined(PG_SIMD_AVX512)
        pg_kq_unpack_k4(b->scales, sm);
        const __m128i mins = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *) (sm + 8)));
#else
        uint64_t sw[2];
        pg_kq_avx2_k4_words(b->scales, sw);
        memcpy(sm, sw, sizeof(sw));
        const __m128i mins = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((int64_t) sw[1]));
#endif
        const uint8_t * qh = q5 ? ((const pg_block_q5_K *) xb)->qh : NULL;
        const int8_t * yq[4];
        __m256i sumi[4];
        for (int c = 0; c < nc; c++) yq[c] = pg_kq_col(vy, by, c, ib)->qs;
        pg_kq_k4_block(qs, qh, sm, yq, nc, sumi);
#if defined(PG_SIMD_AVX512)
        const float dx = pg_fp16_to_fp32(b->d), dmx = pg_fp16_to_fp32(b->dmin);
#else
        const __m128 dd = pg_kq_avx2_fp16x2(&b->d);
#endif
        for (int c = 0; c < nc; c++) {
            const pg_block_q8_K * y = pg_kq_col(vy, by, c, ib);
            const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *) y->bsums),
                                              _mm_loadu_si128((const __m128i *) (y->bsums + 8)));
#if defined(PG_SIMD_AVX512)
            accm[c] = _mm_fmadd_ps(_mm_set1_ps(dmx * y->d), _mm_cvtepi32_ps(_mm_madd_epi16(mins, bs)), accm[c]);
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * y->d), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
#else
            const __m128 f = _mm_mul_ps(dd, _mm_set1_ps(y->d));
            accm[c] = _mm_fmadd_ps(_mm_permute_ps(f, 0x55), _mm_cvtepi32_ps(_mm_madd_epi16(mins, bs)), accm[c]);
            acc[c] = _mm256_fmadd_ps(_mm256_broadcastss_ps(f), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
#endif
        }
    }
    for (int c = 0; c < nc; c++) s[c] = pg_kq_hsum_ps(acc[c]) - pg_kq_hsum_ps4(accm[c]);
}
static inline __attribute__((always_inline)) void pg_kq_x86_q4_K_body(int64_t nb, const void * vx, const void * vy,
                                                                      size_t by, const int nc, float * s) {
    pg_kq_x86_k4_body(nb, (const char *) vx, sizeof(pg_block_q4_K), offsetof(pg_block_q4_K, qs), vy, by, nc, s, false);
}
static inline __attribute__((always_inline)) void pg_kq_x86_q5_K_body(int64_t nb, const void * vx, const void * vy,
                                                                      size_t by, const int nc, float * s) {
    pg_kq_x86_k4_body(nb, (const char *) vx, sizeof(pg_block_q5_K), offsetof(pg_block_q5_K, qs), vy, by, nc, s, true);
}

static inline __attribute__((always_inline)) void pg_kq_x86_q6_K_body(int64_t nb, const void * vx, const void * vy,
                                                                      size_t by, const int nc, float * s) {
    const pg_block_q6_K * x = (const pg_block_q6_K *) vx;
    __m256 acc[4];
    for (int c = 0; c < nc; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) x[ib].scales));
        const int8_t * yq[4];
        __m256i sumi[4];
        for (int c = 0; c < nc; c++) yq[c] = pg_kq_col(vy, by, c, ib)->qs;
        pg_kq_q6_block(&x[ib], yq, nc, sumi);
        pg_kq_x86_offset_cols(acc, sumi, sc16, 5, pg_fp16_to_fp32(x[ib].d), vy, by, ib, nc);   /* took q, not q - 32 */
    }
    for (int c = 0; c < nc; c++) s[c] = pg_kq_hsum_ps(acc[c]);
}

static inline float pg_kq_x86_dot_k4(int64_t nb, const char * xb, size_t bx, size_t off_qs, const pg_block_q8_K * y,
                                     bool q5) {
    float s;
    pg_kq_x86_k4_body(nb, xb, bx, off_qs, y, 0, 1, &s, q5);
    return s;
}

/* IQ4_XS rows against Q8_K: the codes looked up in the IQ4_NL table with pshufb, multiplied as
 * |q| (unsigned) by y with q's sign (maddubs: |q|, |y| <= 127, no saturation), the pairs weighted by
 * the block scale (madd), the exact integer sum of a super-block then scaled in f32 per column */
static inline __attribute__((always_inline)) void pg_kq_x86_iq4_xs_body(int64_t nb, const void * vx, const void * vy,
                                                                        size_t by, const int nc, float * s) {
    const pg_block_iq4_xs * x = (const pg_block_iq4_xs *) vx;
    __m256 acc[4];
    for (int c = 0; c < nc; c++) acc[c] = _mm256_setzero_ps();
#if defined(PG_SIMD_AVX512)
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *) pg_iq4nl_values));
    const __m512i m4 = _mm512_set1_epi8(0xf);
#else
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) pg_iq4nl_values));
    const __m256i m4 = _mm256_set1_epi8(0xf);
#endif
    for (int64_t ibl = 0; ibl < nb; ibl++) {
        const int8_t * yq[4];
        for (int c = 0; c < nc; c++) yq[c] = pg_kq_col(vy, by, c, ibl)->qs;
#if defined(PG_SIMD_AVX512)
        /* blocks 2k and 2k + 1 (bytes 32k..32k+31) in one register: 128-bit lanes lo, hi nibbles of
         * the first 16 bytes, then of the next 16 (the elements in order) */
        __m512i sumi[4];
        for (int c = 0; c < nc; c++) sumi[c] = _mm512_setzero_si512();
        for (int k = 0; k < 4; k++) {
            const __m256i b = _mm256_loadu_si256((const __m256i *) (x[ibl].qs + 32 * k));
            const __m512i t = pg_kq_join(b, _mm256_srli_epi16(b, 4));
            const __m512i q = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_shuffle_i64x2(t, t, 0xd8), m4));
            const __m512i a = _mm512_abs_epi8(q);
            const __mmask64 neg = _mm512_movepi8_mask(q);
            const __m512i sc = pg_kq_join(_mm256_set1_epi16((short) pg_kq_iq4_xs_scale(&x[ibl], 2 * k)),
                                          _mm256_set1_epi16((short) pg_kq_iq4_xs_scale(&x[ibl], 2 * k + 1)));
            for (int c = 0; c < nc; c++) {
                const __m512i yv = _mm512_loadu_si512((const void *) (yq[c] + 64 * k));
                const __m512i ys = _mm512_mask_sub_epi8(yv, neg, _mm512_setzero_si512(), yv);
                sumi[c] = _mm512_add_epi32(sumi[c], _mm512_madd_epi16(_mm512_maddubs_epi16(a, ys), sc));
            }
        }
        __m256i folded[4];
        for (int c = 0; c < nc; c++) folded[c] = pg_kq_fold(sumi[c]);
#else
        __m256i folded[4];
        for (int c = 0; c < nc; c++) folded[c] = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const __m128i b = _mm_loadu_si128((const __m128i *) (x[ibl].qs + 16 * ib));
            const __m256i q = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), m4));
            const __m256i a = _mm256_sign_epi8(q, q);
            const __m256i sc = _mm256_set1_epi16((short) pg_kq_iq4_xs_scale(&x[ibl], ib));
            for (int c = 0; c < nc; c++) {
                const __m256i ys = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *) (yq[c] + 32 * ib)), q);
                folded[c] = _mm256_add_epi32(folded[c], _mm256_madd_epi16(_mm256_maddubs_epi16(a, ys), sc));
            }
        }
#endif
        const float dx = pg_fp16_to_fp32(x[ibl].d);
        for (int c = 0; c < nc; c++) {
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * pg_kq_col(vy, by, c, ibl)->d), _mm256_cvtepi32_ps(folded[c]), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) s[c] = pg_kq_hsum_ps(acc[c]);
}

/* the one-row body of K-quant type t (PG_TYPE_Q2_K, _Q3_K, _Q4_K, _Q5_K, _Q6_K or _IQ4_XS, a
 * compile-time constant in every caller, so the switch folds away) */
PG_ALWAYS_INLINE void pg_kq_x86_body(const int t, int64_t nb, const void * x, const void * y, size_t by, const int nc,
                                     float * s) {
    switch (t) {
    case PG_TYPE_Q2_K: pg_kq_x86_q2_K_body(nb, x, y, by, nc, s); break;
    case PG_TYPE_Q3_K: pg_kq_x86_q3_K_body(nb, x, y, by, nc, s); break;
    case PG_TYPE_Q4_K: pg_kq_x86_q4_K_body(nb, x, y, by, nc, s); break;
    case PG_TYPE_Q5_K: pg_kq_x86_q5_K_body(nb, x, y, by, nc, s); break;
    case PG_TYPE_Q6_K: pg_kq_x86_q6_K_body(nb, x, y, by, nc, s); break;
    default: pg_kq_x86_iq4_xs_body(nb, x, y, by, nc, s); break;
    }
}
/* vec_dot_n of type t: the body compiled for each column count (the loops over c unrolled) */
PG_ALWAYS_INLINE void pg_kq_x86_n(const int t, int64_t nb, const void * x, const void * y, size_t by, int nc,
                                  float * s) {
    switch (nc) {
    case 1: pg_kq_x86_body(t, nb, x, y, by, 1, s); break;
    case 2: pg_kq_x86_body(t, nb, x, y, by, 2, s); break;
    case 3: pg_kq_x86_body(t, nb, x, y, by, 3, s); break;
    default: pg_kq_x86_body(t, nb, x, y, by, 4, s); break;
    }
}
/* one column (dot-k.h's vec_dot): the same body, so vec_dot_n gives each column vec_dot's bits */
PG_ALWAYS_INLINE float pg_kq_x86_dot(const int t, int64_t nb, const void * x, const void * y) {
    float s;
    pg_kq_x86_body(t, nb, x, y, 0, 1, &s);
    return s;
}
