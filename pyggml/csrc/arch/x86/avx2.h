/* The vocabulary of arch/simd-mappings.h on AVX2 with FMA and F16C: 8 f32 lanes. */
#pragma once
#include "arch/x86/x86.h"

#define PG_SIMD_NAME "avx2"
#define PG_HAVE_F32V 1
#define PG_F32_EPR 8
#define PG_F32V_NREGS 16
/* the one-column F16/BF16 GEMV dots its fp16 activation in place at every K (matmul.h): on AVX2
 * an f32 copy of it does not pay for itself at any K (docs/bench/journal.md) */
#define PG_GEMV_WIDEN_MAX 0
typedef __m256 pg_f32v;
#define PG_F32V_LOAD(p)          _mm256_loadu_ps(p)
#define PG_F32V_STORE(p, v)      _mm256_storeu_ps(p, v)
#define PG_F32V_LOAD_F16(p)      _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (p)))
#define PG_F32V_STORE_F16(p, v)  _mm_storeu_si128((__m128i *) (p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT))
#define PG_F32V_LOAD_BF16(p)     _mm256_castsi256_ps(_mm256_slli_epi32( \
                                     _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *) (p))), 16))
#define PG_F32V_SET1(x)          _mm256_set1_ps(x)
#define PG_F32V_ZERO()           _mm256_setzero_ps()
#define PG_F32V_ADD(a, b)        _mm256_add_ps(a, b)
#define PG_F32V_SUB(a, b)        _mm256_sub_ps(a, b)
#define PG_F32V_MUL(a, b)        _mm256_mul_ps(a, b)
#define PG_F32V_DIV(a, b)        _mm256_div_ps(a, b)
#define PG_F32V_FMA(a, b, c)     _mm256_fmadd_ps(a, b, c)
#define PG_F32V_MAX(a, b)        _mm256_max_ps(a, b)
#define PG_F32V_MIN(a, b)        _mm256_min_ps(a, b)
#define PG_F32V_REDUCE(v)        pg_avx2_hsum(v)
#define PG_F32V_REDUCE_MAX(v)    pg_avx2_hmax(v)
#define PG_F32V_ROUND(v)         _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define PG_F32V_SEL_LT(a, b, t, f) _mm256_blendv_ps(f, t, _mm256_cmp_ps(a, b, _CMP_LT_OQ))
#define PG_F32V_KEEP_NAN(x, r)   _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q))
/* see arch/x86/avx512.h */
#define PG_F32V_KEEP(v)          __asm__("" : "+x"(v))

static inline pg_f32v pg_f32v_mul_pow2(pg_f32v p, pg_f32v k) {
    const __m256i ki = _mm256_cvtps_epi32(k), k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
    const __m256i b = _mm256_set1_epi32(127);
    return _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, b), 23))),
                         _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, b), 23)));
}

static inline pg_f32v pg_f32v_mul_pow2_1(pg_f32v p, pg_f32v k) {
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline void pg_f32v_quadrant(pg_f32v j, pg_f32v sp, pg_f32v cp, pg_f32v * s, pg_f32v * c) {
    const __m256i q = _mm256_cvtps_epi32(j), one = _mm256_set1_epi32(1), two = _mm256_set1_epi32(2);
    const __m256 swap = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(q, one), one));
    const __m256 sn = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(q, two), 30));
    const __m256 cn = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(_mm256_add_epi32(q, one), two), 30));
    *s = _mm256_xor_ps(_mm256_blendv_ps(sp, cp, swap), sn);
    *c = _mm256_xor_ps(_mm256_blendv_ps(cp, sp, swap), cn);
}

static inline void pg_f32v_load_even_odd(const float * p, pg_f32v * e, pg_f32v * o) {
    const __m256 lo = _mm256_loadu_ps(p), hi = _mm256_loadu_ps(p + 8);
    /* shuffle gives [a0 a2 b0 b2 | a4 a6 b4 b6]; the 64-bit permute puts the a's first */
    *e = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
    *o = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8));
}

static inline void pg_f32v_store_interleaved(float * p, pg_f32v e, pg_f32v o) {
    const __m256 l = _mm256_unpacklo_ps(e, o), h = _mm256_unpackhi_ps(e, o);
    _mm256_storeu_ps(p, _mm256_permute2f128_ps(l, h, 0x20));
    _mm256_storeu_ps(p + 8, _mm256_permute2f128_ps(l, h, 0x31));
}

static inline void pg_f32v_transpose(const float * x, int64_t ldx, float * y, int64_t ldy) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(x + i * ldx);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int k = 0; k < 4; k++) {
        _mm256_storeu_ps(y + k * ldy, _mm256_permute2f128_ps(r[k], r[4 + k], 0x20));
        _mm256_storeu_ps(y + (4 + k) * ldy, _mm256_permute2f128_ps(r[k], r[4 + k], 0x31));
    }
}

static inline uint32_t pg_f32v_live_bits(pg_f32v v) {
    return (uint32_t) _mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_set1_ps(-INFINITY), _CMP_NEQ_UQ));
}

typedef struct { __m256d lo, hi; } pg_f64acc;
static inline pg_f64acc pg_f64acc_zero(void) { pg_f64acc a = { _mm256_setzero_pd(), _mm256_setzero_pd() }; return a; }
static inline pg_f64acc pg_f64acc_add(pg_f64acc a, __m256 v) {
    a.lo = _mm256_add_pd(a.lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    a.hi = _mm256_add_pd(a.hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    return a;
}
static inline pg_f64acc pg_f64acc_add_sq(pg_f64acc a, __m256 v) {
    const __m256i q = _mm256_castps_si256(_mm256_mul_ps(v, v)), up = _mm256_set1_epi64x(1 << 29);
    a.lo = _mm256_add_pd(a.lo, _mm256_castsi256_pd(_mm256_mul_epu32(q, up)));
    a.hi = _mm256_add_pd(a.hi, _mm256_castsi256_pd(_mm256_mul_epu32(_mm256_srli_epi64(q, 32), up)));
    return a;
}
#define PG_SQ_SCALE 0x1p896
static inline double pg_f64acc_reduce(pg_f64acc a, pg_f64acc b) {
    const __m256d s = _mm256_add_pd(_mm256_add_pd(a.lo, b.lo), _mm256_add_pd(a.hi, b.hi));
    const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

#define PG_HAVE_Q8_QUANT 1
static inline float pg_quantize_block_q8(const float * xb, int8_t * q) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4], m = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(xb + 8 * k);
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[k]));
    }
    const float amax = pg_avx2_hmax(m);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i i[4];
    for (int k = 0; k < 4; k++) i[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], vid));
    /* the packs work per 128-bit lane: dwords come out in the order 0 4 1 5 2 6 3 7 */
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
    _mm256_storeu_si256((__m256i *) q, _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    return amax;
}
