/* The vocabulary of arch/simd-mappings.h on AVX-512 (F, BW, VL) with FMA: 16 f32 lanes. */
#pragma once
#include "arch/x86/x86.h"

#define PG_SIMD_NAME "avx512"
#define PG_HAVE_F32V 1
#define PG_F32_EPR 16
#define PG_F32V_NREGS 32
typedef __m512 pg_f32v;
#define PG_F32V_LOAD(p)          _mm512_loadu_ps(p)
#define PG_F32V_STORE(p, v)      _mm512_storeu_ps(p, v)
#define PG_F32V_LOAD_F16(p)      _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) (p)))
#define PG_F32V_STORE_F16(p, v)  _mm256_storeu_si256((__m256i *) (p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT))
#define PG_F32V_LOAD_BF16(p)     _mm512_castsi512_ps(_mm512_slli_epi32( \
                                     _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *) (p))), 16))
#define PG_F32V_SET1(x)          _mm512_set1_ps(x)
#define PG_F32V_ZERO()           _mm512_setzero_ps()
#define PG_F32V_ADD(a, b)        _mm512_add_ps(a, b)
#define PG_F32V_SUB(a, b)        _mm512_sub_ps(a, b)
#define PG_F32V_MUL(a, b)        _mm512_mul_ps(a, b)
#define PG_F32V_DIV(a, b)        _mm512_div_ps(a, b)
#define PG_F32V_FMA(a, b, c)     _mm512_fmadd_ps(a, b, c)
#define PG_F32V_MAX(a, b)        _mm512_max_ps(a, b)
#define PG_F32V_MIN(a, b)        _mm512_min_ps(a, b)
#define PG_F32V_REDUCE(v)        _mm512_reduce_add_ps(v)
#define PG_F32V_REDUCE_MAX(v)    _mm512_reduce_max_ps(v)
#define PG_F32V_ROUND(v)         _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define PG_F32V_SEL_LT(a, b, t, f) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), f, t)
#define PG_F32V_KEEP_NAN(x, r)   _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), r, x)
/* without it GCC folds the load of a K or V vector into every FMA that uses it (one load per FMA
 * instead of one per row block), which makes the attention micro-GEMMs load-bound instead of
 * FMA-bound */
#define PG_F32V_KEEP(v)          __asm__("" : "+v"(v))

static inline pg_f32v pg_f32v_mul_pow2(pg_f32v p, pg_f32v k) {
    const __m512i ki = _mm512_cvtps_epi32(k), k1 = _mm512_srai_epi32(ki, 1), k2 = _mm512_sub_epi32(ki, k1);
    const __m512i b = _mm512_set1_epi32(127);
    return _mm512_mul_ps(_mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k1, b), 23))),
                         _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k2, b), 23)));
}

static inline pg_f32v pg_f32v_mul_pow2_1(pg_f32v p, pg_f32v k) { return _mm512_scalef_ps(p, k); }

/* vscalefps with the lanes below lo (ordered) zeroed: exp's 2^k, its zero below the range and its
 * NaN pass-through (through p) in one instruction */
#define PG_HAVE_F32V_SCALEF 1
static inline pg_f32v pg_f32v_scalef_ge(pg_f32v x, float lo, pg_f32v p, pg_f32v k) {
    return _mm512_maskz_scalef_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(lo), _CMP_NLT_UQ), p, k);
}

/* j (integral) mod 4 picks (sin, cos) from (sp, cp): 0 (sp, cp), 1 (cp, -sp), 2 (-sp, -cp),
 * 3 (-cp, sp); bit 0 swaps, bit 1 of j (of j+1 for cos) negates */
static inline void pg_f32v_quadrant(pg_f32v j, pg_f32v sp, pg_f32v cp, pg_f32v * s, pg_f32v * c) {
    const __m512i q = _mm512_cvtps_epi32(j), two = _mm512_set1_epi32(2);
    const __mmask16 swap = _mm512_test_epi32_mask(q, _mm512_set1_epi32(1));
    const __m512i sn = _mm512_slli_epi32(_mm512_and_si512(q, two), 30);
    const __m512i cn = _mm512_slli_epi32(_mm512_and_si512(_mm512_add_epi32(q, _mm512_set1_epi32(1)), two), 30);
    *s = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_mask_blend_ps(swap, sp, cp)), sn));
    *c = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_mask_blend_ps(swap, cp, sp)), cn));
}

static inline void pg_f32v_load_even_odd(const float * p, pg_f32v * e, pg_f32v * o) {
    const __m512 lo = _mm512_loadu_ps(p), hi = _mm512_loadu_ps(p + 16);
    const __m512i ie = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    *e = _mm512_permutex2var_ps(lo, ie, hi);
    *o = _mm512_permutex2var_ps(lo, _mm512_add_epi32(ie, _mm512_set1_epi32(1)), hi);
}

static inline void pg_f32v_store_interleaved(float * p, pg_f32v e, pg_f32v o) {
    const __m512i il = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    _mm512_storeu_ps(p, _mm512_permutex2var_ps(e, il, o));
    _mm512_storeu_ps(p + 16, _mm512_permutex2var_ps(e, _mm512_add_epi32(il, _mm512_set1_epi32(8)), o));
}

static inline void pg_f32v_transpose(const float * x, int64_t ldx, float * y, int64_t ldy) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(x + i * ldx);
    /* within each 128-bit lane: pairs of rows interleaved, then quads: r[4i+k] lane L = column 4L+k
     * of rows 4i..4i+3 */
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    }
    /* gather lane L of r[k], r[4+k], r[8+k], r[12+k] into column 4L+k */
    for (int k = 0; k < 4; k++) {
        const __m512 a02 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88), a13 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xdd);
        const __m512 b02 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88), b13 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xdd);
        _mm512_storeu_ps(y + k * ldy, _mm512_shuffle_f32x4(a02, b02, 0x88));
        _mm512_storeu_ps(y + (8 + k) * ldy, _mm512_shuffle_f32x4(a02, b02, 0xdd));
        _mm512_storeu_ps(y + (4 + k) * ldy, _mm512_shuffle_f32x4(a13, b13, 0x88));
        _mm512_storeu_ps(y + (12 + k) * ldy, _mm512_shuffle_f32x4(a13, b13, 0xdd));
    }
}

static inline uint32_t pg_f32v_live_bits(pg_f32v v) {
    return (uint32_t) _mm512_cmp_ps_mask(v, _mm512_set1_ps(-INFINITY), _CMP_NEQ_UQ);
}

/* f64 accumulation: 16 f32 lanes widened into two vectors of 8 doubles; squares moved into a double
 * of the same bits (pg_f64acc_add_sq, vec/norm.h) */
typedef struct { __m512d lo, hi; } pg_f64acc;
static inline pg_f64acc pg_f64acc_zero(void) { pg_f64acc a = { _mm512_setzero_pd(), _mm512_setzero_pd() }; return a; }
static inline pg_f64acc pg_f64acc_add(pg_f64acc a, __m512 v) {
    const __m256 hi = _mm256_castsi256_ps(_mm512_extracti64x4_epi64(_mm512_castps_si512(v), 1));
    a.lo = _mm512_add_pd(a.lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    a.hi = _mm512_add_pd(a.hi, _mm512_cvtps_pd(hi));
    return a;
}
static inline pg_f64acc pg_f64acc_add_sq(pg_f64acc a, __m512 v) {
    const __m512i q = _mm512_castps_si512(_mm512_mul_ps(v, v)), up = _mm512_set1_epi64(1 << 29);
    a.lo = _mm512_add_pd(a.lo, _mm512_castsi512_pd(_mm512_mul_epu32(q, up)));
    a.hi = _mm512_add_pd(a.hi, _mm512_castsi512_pd(_mm512_mul_epu32(_mm512_srli_epi64(q, 32), up)));
    return a;
}
#define PG_SQ_SCALE 0x1p896
static inline double pg_f64acc_reduce(pg_f64acc a, pg_f64acc b) {
    return _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(a.lo, b.lo), _mm512_add_pd(a.hi, b.hi)));
}

/* Q8_0 quantisation of one block of 32: amax = max |x|, q = round-half-even(x * (amax ? 127/amax : 0)) */
#define PG_HAVE_Q8_QUANT 1
static inline float pg_quantize_block_q8(const float * xb, int8_t * q) {
    const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m512 vid = _mm512_set1_ps(id);
    _mm_storeu_si128((__m128i *) q, _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, vid))));
    _mm_storeu_si128((__m128i *) (q + 16), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, vid))));
    return amax;
}
