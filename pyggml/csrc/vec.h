/* Row primitives: pg_vec_<op>_<type>(n, ...). Each has a SIMD body over PG_F32_EPR-wide registers
 * (simd-mappings.h) and a scalar loop for the leftovers, which is the whole row in the scalar build.
 * On riscv64 a primitive opens with PG_RVV_RETURN/PG_RVV_DO(pg_rvv_<name>(...)): the RVV kernel of
 * rvv.c when the CPU has V, else the scalar loop (rvv.h); other ISAs compile those lines away.
 * Element conversions f32 <-> fp16/bf16 are bit-exact round-to-nearest-even (ggml's CPU rounding).
 */
#pragma once
#include "pyggml.h"
#include "simd-mappings.h"

/* ---- quantized blocks (ggml's layouts) ---- */
#define PG_QK8_0 32
#define PG_QK4_0 32
typedef struct pg_block_q8_0 { pg_fp16_t d; int8_t qs[PG_QK8_0]; } pg_block_q8_0;   /* 34 bytes */
typedef struct { pg_fp16_t d; uint8_t qs[PG_QK4_0 / 2]; } pg_block_q4_0;   /* 18 bytes */
_Static_assert(sizeof(pg_block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(pg_block_q4_0) == 18, "q4_0 block");

/* ---- scalar element conversions ---- */
static inline uint32_t pg_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float pg_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float pg_fp16_to_fp32(pg_fp16_t h) {
    const uint32_t sign = (uint32_t) (h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
    if (exp == 0) {  /* zero or subnormal: man * 2^-24, exact in f32 */
        const float f = (float) man * 0x1p-24f;
        return pg_bits_f32(pg_f32_bits(f) | sign);
    }
    if (exp == 31) return pg_bits_f32(sign | 0x7f800000u | (man << 13));
    return pg_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

static inline pg_fp16_t pg_fp32_to_fp16(float f) {
    uint32_t u = pg_f32_bits(f);
    const uint16_t sign = (uint16_t) ((u >> 16) & 0x8000u);
    u &= 0x7fffffffu;
    if (u > 0x7f800000u) return sign | 0x7e00u;            /* NaN -> quiet NaN */
    if (u >= 0x477ff000u) return sign | 0x7c00u;           /* >= 65520 rounds to inf */
    if (u < 0x38800000u) {                                 /* below 2^-14: subnormal half */
        return sign | (uint16_t) lrintf(pg_bits_f32(u) * 0x1p24f);
    }
    u += 0xc8000fffu + ((u >> 13) & 1u);                   /* rebias exponent, round half to even */
    return sign | (uint16_t) (u >> 13);
}

static inline float pg_bf16_to_fp32(pg_bf16_t h) { return pg_bits_f32((uint32_t) h << 16); }

static inline pg_bf16_t pg_fp32_to_bf16(float f) {
    const uint32_t u = pg_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (pg_bf16_t) ((u >> 16) | 0x40u);
    return (pg_bf16_t) ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* ---- row conversions ---- */
static inline void pg_vec_cvt_f16_f32(int64_t n, const pg_fp16_t * x, float * y) {
    PG_RVV_DO(pg_rvv_cvt_f16_f32(n, x, y))
    int64_t i = 0;
#if PG_HAVE_F32V
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) PG_F32V_STORE(y + i, PG_F32V_LOAD_F16(x + i));
#endif
    for (; i < n; i++) y[i] = pg_fp16_to_fp32(x[i]);
}

static inline void pg_vec_cvt_f32_f16(int64_t n, const float * x, pg_fp16_t * y) {
    PG_RVV_DO(pg_rvv_cvt_f32_f16(n, x, y))
    int64_t i = 0;
#if PG_HAVE_F32V
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) PG_F32V_STORE_F16(y + i, PG_F32V_LOAD(x + i));
#endif
    for (; i < n; i++) y[i] = pg_fp32_to_fp16(x[i]);
}

static inline void pg_vec_cvt_bf16_f32(int64_t n, const pg_bf16_t * x, float * y) {
    PG_RVV_DO(pg_rvv_cvt_bf16_f32(n, x, y))
    int64_t i = 0;
#if PG_HAVE_F32V
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) PG_F32V_STORE(y + i, PG_F32V_LOAD_BF16(x + i));
#endif
    for (; i < n; i++) y[i] = pg_bf16_to_fp32(x[i]);
}

/* integer-only rounding: the loop vectorises, and no ISA's bf16 instruction keeps denormals */
static inline void pg_vec_cvt_f32_bf16(int64_t n, const float * x, pg_bf16_t * y) {
    PG_RVV_DO(pg_rvv_cvt_f32_bf16(n, x, y))
    for (int64_t i = 0; i < n; i++) y[i] = pg_fp32_to_bf16(x[i]);
}

/* ---- dot products; f32 lanes, four registers in flight to hide FMA latency ---- */
#define PG_DOT_BODY(LOADX, LOADY)                                                            \
    int64_t i = 0;                                                                           \
    float sumf = 0.0f;                                                                       \
    PG_DOT_SIMD(LOADX, LOADY)                                                                \
    for (; i < n; i++) sumf += LOADX##_S(x + i) * LOADY##_S(y + i);                          \
    return sumf;

#if PG_HAVE_F32V
#define PG_DOT_SIMD(LOADX, LOADY)                                                            \
    {                                                                                        \
        pg_f32v a0 = PG_F32V_ZERO(), a1 = PG_F32V_ZERO(), a2 = PG_F32V_ZERO(), a3 = PG_F32V_ZERO(); \
        for (; i + 4 * PG_F32_EPR <= n; i += 4 * PG_F32_EPR) {                               \
            a0 = PG_F32V_FMA(LOADX(x + i), LOADY(y + i), a0);                                \
            a1 = PG_F32V_FMA(LOADX(x + i + PG_F32_EPR), LOADY(y + i + PG_F32_EPR), a1);      \
            a2 = PG_F32V_FMA(LOADX(x + i + 2 * PG_F32_EPR), LOADY(y + i + 2 * PG_F32_EPR), a2); \
            a3 = PG_F32V_FMA(LOADX(x + i + 3 * PG_F32_EPR), LOADY(y + i + 3 * PG_F32_EPR), a3); \
        }                                                                                    \
        for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) a0 = PG_F32V_FMA(LOADX(x + i), LOADY(y + i), a0); \
        sumf = PG_F32V_REDUCE(PG_F32V_ADD(PG_F32V_ADD(a0, a1), PG_F32V_ADD(a2, a3)));        \
    }
#else
#define PG_DOT_SIMD(LOADX, LOADY)
#endif

#define PG_F32V_LOAD_S(p)      (*(p))
#define PG_F32V_LOAD_F16_S(p)  pg_fp16_to_fp32(*(p))
#define PG_F32V_LOAD_BF16_S(p) pg_bf16_to_fp32(*(p))

static inline float pg_vec_dot_f32(int64_t n, const float * x, const float * y) {
    PG_RVV_RETURN(pg_rvv_dot_f32(n, x, y))
    PG_DOT_BODY(PG_F32V_LOAD, PG_F32V_LOAD)
}
static inline float pg_vec_dot_f16(int64_t n, const pg_fp16_t * x, const pg_fp16_t * y) {
    PG_RVV_RETURN(pg_rvv_dot_f16(n, x, y))
    PG_DOT_BODY(PG_F32V_LOAD_F16, PG_F32V_LOAD_F16)
}
static inline float pg_vec_dot_bf16(int64_t n, const pg_bf16_t * x, const pg_bf16_t * y) {
    PG_RVV_RETURN(pg_rvv_dot_bf16(n, x, y))
    PG_DOT_BODY(PG_F32V_LOAD_BF16, PG_F32V_LOAD_BF16)
}
/* mixed: f16 row times f32 row (attention and conversions that keep the activation in f32) */
static inline float pg_vec_dot_f16_f32(int64_t n, const pg_fp16_t * x, const float * y) {
    PG_RVV_RETURN(pg_rvv_dot_f16_f32(n, x, y))
    PG_DOT_BODY(PG_F32V_LOAD_F16, PG_F32V_LOAD)
}

/* n is a multiple of 32; sum over blocks of d_x*d_y*sum(qx*qy) */
static inline float pg_vec_dot_q8_0_q8_0(int64_t n, const pg_block_q8_0 * x, const pg_block_q8_0 * y) {
    PG_RVV_RETURN(pg_rvv_dot_q8_0_q8_0(n, x, y))
    const int64_t nb = n / PG_QK8_0;
    int64_t ib = 0;
    float sumf = 0.0f;
#if defined(PG_SIMD_AVX512) || defined(PG_SIMD_AVX2)
    __m256 acc = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    for (; ib < nb; ib++) {
        const __m256i qx = _mm256_loadu_si256((const __m256i *) x[ib].qs);
        const __m256i qy = _mm256_loadu_si256((const __m256i *) y[ib].qs);
        /* |x| (unsigned) times sign(x)*y (signed): maddubs needs one unsigned operand */
        const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(qx, qx), _mm256_sign_epi8(qy, qx));
        const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
        const __m256 d = _mm256_set1_ps(pg_fp16_to_fp32(x[ib].d) * pg_fp16_to_fp32(y[ib].d));
        acc = _mm256_fmadd_ps(d, p, acc);
    }
    {
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        sumf = _mm_cvtss_f32(s);
    }
#elif defined(PG_SIMD_NEON)
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (; ib < nb; ib++) {
        int32x4_t s = vdupq_n_s32(0);
        for (int j = 0; j < PG_QK8_0; j += 16) {
            const int8x16_t a = vld1q_s8(x[ib].qs + j), b = vld1q_s8(y[ib].qs + j);
            s = vpadalq_s16(s, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
            s = vpadalq_s16(s, vmull_s8(vget_high_s8(a), vget_high_s8(b)));
        }
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(s), pg_fp16_to_fp32(x[ib].d) * pg_fp16_to_fp32(y[ib].d));
    }
    sumf = vaddvq_f32(acc);
#endif
    for (; ib < nb; ib++) {
        int32_t s = 0;
        for (int j = 0; j < PG_QK8_0; j++) s += (int32_t) x[ib].qs[j] * y[ib].qs[j];
        sumf += (float) s * (pg_fp16_to_fp32(x[ib].d) * pg_fp16_to_fp32(y[ib].d));
    }
    return sumf;
}

static inline float pg_vec_dot_q4_0_q8_0(int64_t n, const pg_block_q4_0 * x, const pg_block_q8_0 * y) {
    const int64_t nb = n / PG_QK4_0;
    int64_t ib = 0;
    float sumf = 0.0f;
#if defined(PG_SIMD_AVX512) || defined(PG_SIMD_AVX2)
    __m256 acc = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i lo_mask = _mm256_set1_epi8(0x0f), eight = _mm256_set1_epi8(8);
    for (; ib < nb; ib++) {
        const __m128i b = _mm_loadu_si128((const __m128i *) x[ib].qs);
        /* elements 0..15 are the low nibbles, 16..31 the high ones */
        const __m256i both = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
        const __m256i qx = _mm256_sub_epi8(_mm256_and_si256(both, lo_mask), eight);
        const __m256i qy = _mm256_loadu_si256((const __m256i *) y[ib].qs);
        const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(qx, qx), _mm256_sign_epi8(qy, qx));
        const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
        const __m256 d = _mm256_set1_ps(pg_fp16_to_fp32(x[ib].d) * pg_fp16_to_fp32(y[ib].d));
        acc = _mm256_fmadd_ps(d, p, acc);
    }
    {
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        sumf = _mm_cvtss_f32(s);
    }
#endif
    for (; ib < nb; ib++) {
        int32_t s = 0;
        for (int j = 0; j < PG_QK4_0 / 2; j++) {
            s += ((int32_t) (x[ib].qs[j] & 0x0f) - 8) * y[ib].qs[j];
            s += ((int32_t) (x[ib].qs[j] >> 4) - 8) * y[ib].qs[j + PG_QK4_0 / 2];
        }
        sumf += (float) s * (pg_fp16_to_fp32(x[ib].d) * pg_fp16_to_fp32(y[ib].d));
    }
    return sumf;
}

/* ---- elementwise ---- */
#define PG_VEC_BINARY(NAME, VOP, SOP, RVV)                                                   \
static inline void NAME(int64_t n, float * z, const float * x, const float * y) {            \
    PG_RVV_DO(RVV(n, z, x, y))                                                               \
    int64_t i = 0;                                                                           \
    PG_VEC_BINARY_SIMD(VOP)                                                                  \
    for (; i < n; i++) z[i] = x[i] SOP y[i];                                                 \
}
#if PG_HAVE_F32V
#define PG_VEC_BINARY_SIMD(VOP) \
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) PG_F32V_STORE(z + i, VOP(PG_F32V_LOAD(x + i), PG_F32V_LOAD(y + i)));
#else
#define PG_VEC_BINARY_SIMD(VOP)
#endif
PG_VEC_BINARY(pg_vec_add_f32, PG_F32V_ADD, +, pg_rvv_add_f32)
PG_VEC_BINARY(pg_vec_mul_f32, PG_F32V_MUL, *, pg_rvv_mul_f32)

/* y += x*v */
static inline void pg_vec_mad_f32(int64_t n, float * y, const float * x, float v) {
    PG_RVV_DO(pg_rvv_mad_f32(n, y, x, v))
    int64_t i = 0;
#if PG_HAVE_F32V
    const pg_f32v vv = PG_F32V_SET1(v);
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR)
        PG_F32V_STORE(y + i, PG_F32V_FMA(PG_F32V_LOAD(x + i), vv, PG_F32V_LOAD(y + i)));
#endif
    for (; i < n; i++) y[i] = fmaf(x[i], v, y[i]);
}

/* y = x*v (in place when y == x) */
static inline void pg_vec_scale_f32(int64_t n, float * y, const float * x, float v) {
    PG_RVV_DO(pg_rvv_scale_f32(n, y, x, v))
    int64_t i = 0;
#if PG_HAVE_F32V
    const pg_f32v vv = PG_F32V_SET1(v);
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) PG_F32V_STORE(y + i, PG_F32V_MUL(PG_F32V_LOAD(x + i), vv));
#endif
    for (; i < n; i++) y[i] = x[i] * v;
}

static inline float pg_vec_max_f32(int64_t n, const float * x) {
    PG_RVV_RETURN(pg_rvv_max_f32(n, x))
    float m = -INFINITY;
    int64_t i = 0;
#if PG_HAVE_F32V
    if (n >= PG_F32_EPR) {
        pg_f32v vm = PG_F32V_SET1(-INFINITY);
        for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) vm = PG_F32V_MAX(vm, PG_F32V_LOAD(x + i));
        m = PG_F32V_REDUCE_MAX(vm);
    }
#endif
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* sum of f32 values: f32 lanes, the lane totals and the tail added in double */
static inline double pg_vec_sum_f32(int64_t n, const float * x) {
    PG_RVV_RETURN(pg_rvv_sum_f32(n, x))
    double s = 0.0;
    int64_t i = 0;
#if PG_HAVE_F32V
    pg_f32v a = PG_F32V_ZERO();
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) a = PG_F32V_ADD(a, PG_F32V_LOAD(x + i));
    s = (double) PG_F32V_REDUCE(a);
#endif
    for (; i < n; i++) s += (double) x[i];
    return s;
}

/* ---- exp: x = k*ln2 + r, |r| <= ln2/2, degree-7 polynomial, 2^k put in the exponent ----
 * relative error below 2e-7 over the f32 range; x < -87.33 gives 0, x > 88.72 gives inf, NaN stays. */
#define PG_EXP_HI 88.72283935546875f
#define PG_EXP_LO -87.33654022216797f
#define PG_EXP_C7 1.98412698e-4f
#define PG_EXP_C6 1.38888889e-3f
#define PG_EXP_C5 8.33333333e-3f
#define PG_EXP_C4 4.16666667e-2f
#define PG_EXP_C3 1.66666667e-1f

static inline float pg_expf(float x) {
    if (!(x > PG_EXP_LO)) return x != x ? x : 0.0f;
    if (x > PG_EXP_HI) return INFINITY;
    const float k = nearbyintf(x * 1.44269504088896341f);
    const float r = fmaf(k, -1.42860677e-6f, fmaf(k, -6.93145752e-1f, x));
    float p = fmaf(PG_EXP_C7, r, PG_EXP_C6);
    p = fmaf(p, r, PG_EXP_C5); p = fmaf(p, r, PG_EXP_C4); p = fmaf(p, r, PG_EXP_C3);
    p = fmaf(p, r, 0.5f); p = fmaf(p, r, 1.0f); p = fmaf(p, r, 1.0f);
    /* 2^k in two steps so k = 128 or -126.. stays representable */
    const int ki = (int) k;
    const float s1 = pg_bits_f32((uint32_t) (127 + ki / 2) << 23);
    const float s2 = pg_bits_f32((uint32_t) (127 + ki - ki / 2) << 23);
    return p * s1 * s2;
}

#if PG_HAVE_F32V
/* 2^k for integral k in [-126, 128] held in a float vector, applied as two halves */
static inline pg_f32v pg_f32v_mul_pow2(pg_f32v p, pg_f32v k) {
#if defined(PG_SIMD_AVX512)
    const __m512i ki = _mm512_cvtps_epi32(k), k1 = _mm512_srai_epi32(ki, 1), k2 = _mm512_sub_epi32(ki, k1);
    const __m512i b = _mm512_set1_epi32(127);
    return _mm512_mul_ps(_mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k1, b), 23))),
                         _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k2, b), 23)));
#elif defined(PG_SIMD_AVX2)
    const __m256i ki = _mm256_cvtps_epi32(k), k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
    const __m256i b = _mm256_set1_epi32(127);
    return _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, b), 23))),
                         _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, b), 23)));
#elif defined(PG_SIMD_NEON)
    const int32x4_t ki = vcvtnq_s32_f32(k), k1 = vshrq_n_s32(ki, 1), k2 = vsubq_s32(ki, k1);
    const int32x4_t b = vdupq_n_s32(127);
    return vmulq_f32(vmulq_f32(p, vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k1, b), 23))),
                     vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k2, b), 23)));
#endif
}

/* lanes where a < b take t, others f; NaN lanes of x keep x */
#if defined(PG_SIMD_AVX512)
#define PG_F32V_ROUND(v)          _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define PG_F32V_SEL_LT(a, b, t, f) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), f, t)
#define PG_F32V_KEEP_NAN(x, r)    _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), r, x)
#elif defined(PG_SIMD_AVX2)
#define PG_F32V_ROUND(v)          _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define PG_F32V_SEL_LT(a, b, t, f) _mm256_blendv_ps(f, t, _mm256_cmp_ps(a, b, _CMP_LT_OQ))
#define PG_F32V_KEEP_NAN(x, r)    _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q))
#elif defined(PG_SIMD_NEON)
#define PG_F32V_ROUND(v)          vrndnq_f32(v)
#define PG_F32V_SEL_LT(a, b, t, f) vbslq_f32(vcltq_f32(a, b), t, f)
#define PG_F32V_KEEP_NAN(x, r)    vbslq_f32(vceqq_f32(x, x), r, x)
#endif

/* the same algorithm as pg_expf, lane-wise */
static inline pg_f32v pg_f32v_exp(pg_f32v x) {
    const pg_f32v xc = PG_F32V_MAX(PG_F32V_SET1(PG_EXP_LO), x);
    const pg_f32v k = PG_F32V_ROUND(PG_F32V_MUL(xc, PG_F32V_SET1(1.44269504088896341f)));
    pg_f32v r = PG_F32V_FMA(k, PG_F32V_SET1(-6.93145752e-1f), xc);
    r = PG_F32V_FMA(k, PG_F32V_SET1(-1.42860677e-6f), r);
    pg_f32v p = PG_F32V_FMA(PG_F32V_SET1(PG_EXP_C7), r, PG_F32V_SET1(PG_EXP_C6));
    p = PG_F32V_FMA(p, r, PG_F32V_SET1(PG_EXP_C5));
    p = PG_F32V_FMA(p, r, PG_F32V_SET1(PG_EXP_C4));
    p = PG_F32V_FMA(p, r, PG_F32V_SET1(PG_EXP_C3));
    p = PG_F32V_FMA(p, r, PG_F32V_SET1(0.5f));
    p = PG_F32V_FMA(p, r, PG_F32V_SET1(1.0f));
    p = PG_F32V_FMA(p, r, PG_F32V_SET1(1.0f));
    pg_f32v y = pg_f32v_mul_pow2(p, k);
    y = PG_F32V_SEL_LT(x, PG_F32V_SET1(PG_EXP_LO), PG_F32V_ZERO(), y);
    y = PG_F32V_SEL_LT(PG_F32V_SET1(PG_EXP_HI), x, PG_F32V_SET1(INFINITY), y);
    return PG_F32V_KEEP_NAN(x, y);
}
#endif

/* y[i] = exp(x[i] - m); returns the sum of y in double (the softmax denominator) */
static inline double pg_vec_exp_sum_f32(int64_t n, float * y, const float * x, float m) {
    PG_RVV_RETURN(pg_rvv_exp_sum_f32(n, y, x, m))
    int64_t i = 0;
    double sum = 0.0;
#if PG_HAVE_F32V
    const pg_f32v vm = PG_F32V_SET1(m);
    pg_f32v acc = PG_F32V_ZERO();
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) {
        const pg_f32v e = pg_f32v_exp(PG_F32V_SUB(PG_F32V_LOAD(x + i), vm));
        PG_F32V_STORE(y + i, e);
        acc = PG_F32V_ADD(acc, e);
    }
    sum = (double) PG_F32V_REDUCE(acc);
#endif
    for (; i < n; i++) { y[i] = pg_expf(x[i] - m); sum += (double) y[i]; }
    return sum;
}

/* ==================================================================================== *
 * ---- activations (GLU, unary, softmax) primitives ----
 * ==================================================================================== */

/* ==================================================================================== *
 * ---- matmul primitives ----
 * ==================================================================================== */

/* ==================================================================================== *
 * ---- norm primitives ----
 * ==================================================================================== */

/* ==================================================================================== *
 * ---- rope primitives ----
 * ==================================================================================== */

/* ==================================================================================== *
 * ---- attention primitives ----
 * ==================================================================================== */

/* ==================================================================================== *
 * ---- set_rows primitives ----
 * ==================================================================================== */
