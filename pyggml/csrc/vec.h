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
typedef struct pg_block_q4_0 { pg_fp16_t d; uint8_t qs[PG_QK4_0 / 2]; } pg_block_q4_0;   /* 18 bytes */
_Static_assert(sizeof(pg_block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(pg_block_q4_0) == 18, "q4_0 block");

/* ---- scalar element conversions ---- */
static inline uint32_t pg_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float pg_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float pg_fp16_to_fp32(pg_fp16_t h) {
#if (defined(PG_SIMD_AVX512) || defined(PG_SIMD_AVX2)) && defined(__F16C__)
    return _cvtsh_ss(h);  /* one instruction (block scales in quantized dots); the same exact widening */
#else
    const uint32_t sign = (uint32_t) (h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
    if (exp == 0) {  /* zero or subnormal: man * 2^-24, exact in f32 */
        const float f = (float) man * 0x1p-24f;
        return pg_bits_f32(pg_f32_bits(f) | sign);
    }
    if (exp == 31) return pg_bits_f32(sign | 0x7f800000u | (man << 13));
    return pg_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
#endif
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

/* The sigmoid-gated activations share one form, x / (1 + exp(-z)), so one SIMD exp serves them:
 *   silu(x)       = x / (1 + exp(-x))
 *   gelu(x)       = 0.5x(1 + tanh(z)), z = sqrt(2/pi)(x + 0.044715x^3)   ==   x / (1 + exp(-2z))
 *   gelu_quick(x) = x / (1 + exp(-1.702x))
 *   relu(x)       = x > 0 ? x : 0
 *   gelu_erf(x)   = 0.5x(1 + erf(x/sqrt(2)))
 * gelu is computed by its formula in f32; ggml's CPU reads it from an fp16 table instead
 * (GGML_GELU_FP16), which is less accurate; gelu_erf uses erfc(-x/sqrt(2)) for 1 + erf(x/sqrt(2)),
 * which keeps its relative accuracy for negative x where ggml's 1 + erff(...) cancels. Scalar paths
 * use libm (expf, erfcf). */
#define PG_GELU_COEF_A     0.044715f
#define PG_SQRT_2_OVER_PI  0.79788456080286535587989211986876f
#define PG_GELU_QUICK_COEF 1.702f
#define PG_SQRT_2_INV      0.70710678118654752440084436210484f

static inline float pg_silu_f32(float x) { return x / (1.0f + expf(-x)); }
static inline float pg_gelu_f32(float x) {
    return x / (1.0f + expf(-2.0f * PG_SQRT_2_OVER_PI * x * (1.0f + PG_GELU_COEF_A * x * x)));
}
static inline float pg_gelu_quick_f32(float x) { return x / (1.0f + expf(-PG_GELU_QUICK_COEF * x)); }
static inline float pg_relu_f32(float x) { return x > 0.0f ? x : 0.0f; }
static inline float pg_gelu_erf_f32(float x) { return 0.5f * x * erfcf(-x * PG_SQRT_2_INV); }

#if PG_HAVE_F32V
/* x / (1 + exp(-z)); exp overflow gives x/inf = 0, the right limit */
static inline pg_f32v pg_f32v_sigmul(pg_f32v x, pg_f32v z) {
    return PG_F32V_DIV(x, PG_F32V_ADD(PG_F32V_SET1(1.0f), pg_f32v_exp(PG_F32V_SUB(PG_F32V_ZERO(), z))));
}
static inline pg_f32v pg_f32v_silu(pg_f32v x) { return pg_f32v_sigmul(x, x); }
static inline pg_f32v pg_f32v_gelu(pg_f32v x) {
    const pg_f32v p = PG_F32V_FMA(PG_F32V_MUL(x, x), PG_F32V_SET1(PG_GELU_COEF_A), PG_F32V_SET1(1.0f));
    return pg_f32v_sigmul(x, PG_F32V_MUL(PG_F32V_MUL(x, PG_F32V_SET1(2.0f * PG_SQRT_2_OVER_PI)), p));
}
static inline pg_f32v pg_f32v_gelu_quick(pg_f32v x) {
    return pg_f32v_sigmul(x, PG_F32V_MUL(x, PG_F32V_SET1(PG_GELU_QUICK_COEF)));
}
static inline pg_f32v pg_f32v_relu(pg_f32v x) { return PG_F32V_MAX(x, PG_F32V_ZERO()); }
/* 1 + erf(u) = erfc(-u) with u = x/sqrt(2); erfc(t) for t = |u| by the Chebyshev fit
 * erfc(t) = s*exp(-t^2 + P(s)), s = 1/(1 + t/2) (Numerical Recipes' erfcc, relative error < 1.2e-7
 * for all t >= 0), and erfc(-t) = 2 - erfc(t): no cancellation on either side. */
static inline pg_f32v pg_f32v_gelu_erf(pg_f32v x) {
    static const float c[10] = {0.17087277f, -0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f,
                                -0.18628806f, 0.09678418f, 0.37409196f, 1.00002368f, -1.26551223f};
    const pg_f32v u = PG_F32V_MUL(x, PG_F32V_SET1(PG_SQRT_2_INV));
    const pg_f32v t = PG_F32V_MAX(u, PG_F32V_SUB(PG_F32V_ZERO(), u));
    const pg_f32v s = PG_F32V_DIV(PG_F32V_SET1(1.0f), PG_F32V_FMA(t, PG_F32V_SET1(0.5f), PG_F32V_SET1(1.0f)));
    pg_f32v q = PG_F32V_SET1(c[0]);
    for (int k = 1; k < 10; k++) q = PG_F32V_FMA(q, s, PG_F32V_SET1(c[k]));
    const pg_f32v e = PG_F32V_MUL(s, pg_f32v_exp(PG_F32V_SUB(q, PG_F32V_MUL(t, t))));   /* erfc(t) */
    const pg_f32v h = PG_F32V_MUL(e, PG_F32V_SET1(0.5f));
    return PG_F32V_MUL(x, PG_F32V_SEL_LT(x, PG_F32V_ZERO(), h, PG_F32V_SUB(PG_F32V_SET1(1.0f), h)));
}
#define PG_VEC_ACT_SIMD(STORE_EXPR) for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) STORE_EXPR;
#else
#define PG_VEC_ACT_SIMD(STORE_EXPR)
#endif

/* pg_vec_<act>_f32(n, y, x): y = act(x) (in place when y == x) */
#define PG_VEC_ACT(ACT)                                                                          \
static inline void pg_vec_##ACT##_f32(int64_t n, float * y, const float * x) {                  \
    PG_RVV_DO(pg_rvv_##ACT##_f32(n, y, x))                                                       \
    int64_t i = 0;                                                                               \
    PG_VEC_ACT_SIMD(PG_F32V_STORE(y + i, pg_f32v_##ACT(PG_F32V_LOAD(x + i))))                    \
    for (; i < n; i++) y[i] = pg_##ACT##_f32(x[i]);                                              \
}
/* pg_vec_<act>_glu_f32(n, y, x, g): y = act(x) * g, one pass (y may alias x or g) */
#define PG_VEC_GLU(ACT)                                                                          \
static inline void pg_vec_##ACT##_glu_f32(int64_t n, float * y, const float * x, const float * g) { \
    PG_RVV_DO(pg_rvv_##ACT##_glu_f32(n, y, x, g))                                                \
    int64_t i = 0;                                                                               \
    PG_VEC_ACT_SIMD(PG_F32V_STORE(y + i, PG_F32V_MUL(pg_f32v_##ACT(PG_F32V_LOAD(x + i)), PG_F32V_LOAD(g + i)))) \
    for (; i < n; i++) y[i] = pg_##ACT##_f32(x[i]) * g[i];                                       \
}
PG_VEC_ACT(silu)
PG_VEC_ACT(gelu)
PG_VEC_ACT(gelu_erf)
PG_VEC_GLU(relu)
PG_VEC_GLU(gelu)
PG_VEC_GLU(silu)
PG_VEC_GLU(gelu_erf)
PG_VEC_GLU(gelu_quick)

/* ==================================================================================== *
 * ---- matmul primitives ----
 * ==================================================================================== */

/* mixed: bf16 row times f32 row (bf16 activations widened once, which is exact) */
static inline float pg_vec_dot_bf16_f32(int64_t n, const pg_bf16_t * x, const float * y) {
    PG_RVV_RETURN(pg_rvv_dot_bf16_f32(n, x, y))
    PG_DOT_BODY(PG_F32V_LOAD_BF16, PG_F32V_LOAD)
}

/* s[c] = dot(x, y[c]) for c < 4: one weight row against four f32 activation rows, the row loaded
 * (and widened) once for all four */
#if PG_HAVE_F32V
#define PG_DOT4_SIMD(LOADX)                                                                  \
    {                                                                                        \
        pg_f32v a0 = PG_F32V_ZERO(), a1 = PG_F32V_ZERO(), a2 = PG_F32V_ZERO(), a3 = PG_F32V_ZERO(); \
        for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) {                                       \
            const pg_f32v xv = LOADX(x + i);                                                 \
            a0 = PG_F32V_FMA(xv, PG_F32V_LOAD(y[0] + i), a0);                                \
            a1 = PG_F32V_FMA(xv, PG_F32V_LOAD(y[1] + i), a1);                                \
            a2 = PG_F32V_FMA(xv, PG_F32V_LOAD(y[2] + i), a2);                                \
            a3 = PG_F32V_FMA(xv, PG_F32V_LOAD(y[3] + i), a3);                                \
        }                                                                                    \
        s[0] = PG_F32V_REDUCE(a0); s[1] = PG_F32V_REDUCE(a1);                                \
        s[2] = PG_F32V_REDUCE(a2); s[3] = PG_F32V_REDUCE(a3);                                \
    }
#else
#define PG_DOT4_SIMD(LOADX)
#endif

#define PG_DOT4_BODY(LOADX)                                                                  \
    int64_t i = 0;                                                                           \
    s[0] = s[1] = s[2] = s[3] = 0.0f;                                                        \
    PG_DOT4_SIMD(LOADX)                                                                      \
    for (; i < n; i++) {                                                                     \
        const float xs = LOADX##_S(x + i);                                                   \
        for (int c = 0; c < 4; c++) s[c] += xs * y[c][i];                                    \
    }

static inline void pg_vec_dot4_f32(int64_t n, const float * x, const float * const * y, float * s) {
    PG_RVV_DO(pg_rvv_dot4_f32(n, x, y, s))
    PG_DOT4_BODY(PG_F32V_LOAD)
}
static inline void pg_vec_dot4_f16_f32(int64_t n, const pg_fp16_t * x, const float * const * y, float * s) {
    PG_RVV_DO(pg_rvv_dot4_f16_f32(n, x, y, s))
    PG_DOT4_BODY(PG_F32V_LOAD_F16)
}
static inline void pg_vec_dot4_bf16_f32(int64_t n, const pg_bf16_t * x, const float * const * y, float * s) {
    PG_RVV_DO(pg_rvv_dot4_bf16_f32(n, x, y, s))
    PG_DOT4_BODY(PG_F32V_LOAD_BF16)
}

/* GEMM micro-kernel: a tile of mr rows of a times one panel of nr columns of b,
 *   c[r*nr + j] = sum_k a[r*lda + k] * b[k*nr + j]      (k < n; c overwritten, mr*nr floats)
 * a: mr f32 rows of stride lda; b: the panel packed k-major, nr floats per k.
 * The accumulators (mr x nr/EPR registers) stay in registers for the whole of k: each step loads
 * nr/EPR vectors of b and broadcasts one value per row of a. mr fills the register file: 12 x 2
 * accumulators with 32 registers (AVX-512, NEON), 6 x 2 with 16 (AVX2), 4 x 4 scalars otherwise.
 * riscv64 with V: 12 rows x one e32 m2 register group (2*VLEN/32 columns, at most PG_MM_NR_MAX),
 * known only at run time, so callers take (mr, nr) from pg_vec_gemm_shape() (rvv.c). */
typedef struct pg_gemm_shape { int mr, nr; } pg_gemm_shape;
#define PG_MM_NR_MAX 32        /* the widest panel of any micro-kernel */

#if PG_HAVE_F32V
#define PG_MM_NV 2
#if defined(PG_SIMD_AVX2)
#define PG_MM_MR 6
#else
#define PG_MM_MR 12
#endif
#define PG_MM_NR (PG_MM_NV * PG_F32_EPR)

static inline void pg_vec_gemm_tile_f32(int64_t n, const float * a, int64_t lda, const float * b, float * c) {
    pg_f32v acc[PG_MM_MR][PG_MM_NV];
#pragma GCC unroll 16
    for (int r = 0; r < PG_MM_MR; r++) {
        acc[r][0] = PG_F32V_ZERO();
        acc[r][1] = PG_F32V_ZERO();
    }
    for (int64_t k = 0; k < n; k++) {
        const pg_f32v b0 = PG_F32V_LOAD(b + k * PG_MM_NR);
        const pg_f32v b1 = PG_F32V_LOAD(b + k * PG_MM_NR + PG_F32_EPR);
#pragma GCC unroll 16
        for (int r = 0; r < PG_MM_MR; r++) {
            const pg_f32v ar = PG_F32V_SET1(a[r * lda + k]);
            acc[r][0] = PG_F32V_FMA(ar, b0, acc[r][0]);
            acc[r][1] = PG_F32V_FMA(ar, b1, acc[r][1]);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < PG_MM_MR; r++) {
        PG_F32V_STORE(c + r * PG_MM_NR, acc[r][0]);
        PG_F32V_STORE(c + r * PG_MM_NR + PG_F32_EPR, acc[r][1]);
    }
}
#else
#define PG_MM_MR 4
#define PG_MM_NR 4

static inline void pg_vec_gemm_tile_f32(int64_t n, const float * a, int64_t lda, const float * b, float * c) {
    PG_RVV_DO(pg_rvv_gemm_tile_f32(n, a, lda, b, c))
    float acc[PG_MM_MR][PG_MM_NR] = {{0.0f}};
    for (int64_t k = 0; k < n; k++) {
        for (int r = 0; r < PG_MM_MR; r++) {
            const float ar = a[r * lda + k];
            for (int j = 0; j < PG_MM_NR; j++) acc[r][j] += ar * b[k * PG_MM_NR + j];
        }
    }
    for (int r = 0; r < PG_MM_MR; r++)
        for (int j = 0; j < PG_MM_NR; j++) c[r * PG_MM_NR + j] = acc[r][j];
}
#endif
_Static_assert(PG_MM_NR <= PG_MM_NR_MAX, "GEMM panel width");

/* (rows, columns) of the tile pg_vec_gemm_tile_f32 computes on this CPU */
static inline pg_gemm_shape pg_vec_gemm_shape(void) {
    PG_RVV_RETURN(((pg_gemm_shape) {PG_RVV_MM_MR, pg_rvv_gemm_nr()}))
    return (pg_gemm_shape) {PG_MM_MR, PG_MM_NR};
}

/* ==================================================================================== *
 * ---- norm primitives ----
 * ==================================================================================== */

/* Row reductions in double, as ggml's norms (which add every term to a double): f32 values v,
 * squared in f32 where the op squares, widened and added to double lanes. The lane order differs
 * from ggml's sequential sum only by double rounding, far below what the f32 results can show.
 * Every primitive below shares one loop (PG_NORM_ACC), so the same values give the same sum bit for
 * bit whether they arrive from a tensor, from x + r or from x - mean.
 *
 * pg_f64acc_add widens with the ISA's f32 -> f64 conversion. pg_f64acc_add_sq adds v*v; on x86 it
 * skips the conversion, which is what bounds the loop (Zen 4: ~3.4 cycles per 16 floats with
 * vcvtps2pd, cross-lane and double-pumped): the bits of a square q >= 0 moved up by 29 within a
 * 64-bit lane are those of the double q * 2^-896 (the f32 exponent lands in the double's, the
 * mantissa on top of the double's; f32 subnormals become double subnormals with the same factor).
 * The move is an unsigned 32 x 32 -> 64-bit multiply by 2^29 (vpmuludq reads the even element, the
 * low half of each lane, and ignores the other), the odd element first shifted down by 32: one
 * shift per vector instead of two, which were the bottleneck (Zen 4 sum of 4096 squares: 143 ->
 * 108 us per 512 rows with AVX-512, 210 -> 124 us with AVX2). The sums are exact in scaled form
 * (every term a multiple of 2^-1045), and PG_SQ_SCALE undoes the factor. Inf or NaN squares turn
 * into finite garbage, so a scaled sum >= 2^128 (which only huge or non-finite values give) is redone
 * by a scalar loop. */
#if defined(PG_SIMD_AVX512)
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
#elif defined(PG_SIMD_AVX2)
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
#elif defined(PG_SIMD_NEON)
typedef struct { float64x2_t lo, hi; } pg_f64acc;
static inline pg_f64acc pg_f64acc_zero(void) { pg_f64acc a = { vdupq_n_f64(0.0), vdupq_n_f64(0.0) }; return a; }
static inline pg_f64acc pg_f64acc_add(pg_f64acc a, float32x4_t v) {
    a.lo = vaddq_f64(a.lo, vcvt_f64_f32(vget_low_f32(v)));
    a.hi = vaddq_f64(a.hi, vcvt_high_f64_f32(v));
    return a;
}
static inline double pg_f64acc_reduce(pg_f64acc a, pg_f64acc b) {
    return vaddvq_f64(vaddq_f64(vaddq_f64(a.lo, b.lo), vaddq_f64(a.hi, b.hi)));
}
#endif
#if defined(PG_SIMD_NEON)
#define pg_f64acc_add_sq(a, v) pg_f64acc_add(a, PG_F32V_MUL(v, v))
#endif
#ifndef PG_SQ_SCALE
#define PG_SQ_SCALE 1.0
#endif

/* The shared loop: for each i, v = VAL(i) (an f32 vector), KEEP(i, v) stores it where the
 * primitive writes one, ADD(acc, v) adds v (pg_f64acc_add) or v*v (pg_f64acc_add_sq, then SCALE is
 * PG_SQ_SCALE). SVAL/SKEEP/SSQ are the scalar forms for the tail (the whole row in the scalar
 * build); SREDO(i) gives value i again for the redo of a squares sum that came out >= 2^128 (see
 * above), read back from where KEEP stored it or from the input. Two accumulators hide the add
 * latency. */
#if PG_HAVE_F32V
#define PG_NORM_ACC_SIMD(VAL, KEEP, ADD, SCALE, SREDO)                                       \
    {                                                                                        \
        pg_f64acc a0 = pg_f64acc_zero(), a1 = pg_f64acc_zero();                              \
        for (; i + 2 * PG_F32_EPR <= n; i += 2 * PG_F32_EPR) {                               \
            const pg_f32v v0 = VAL(i), v1 = VAL(i + PG_F32_EPR);                             \
            KEEP(i, v0); KEEP(i + PG_F32_EPR, v1);                                           \
            a0 = ADD(a0, v0);                                                                \
            a1 = ADD(a1, v1);                                                                \
        }                                                                                    \
        for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) {                                       \
            const pg_f32v v0 = VAL(i);                                                       \
            KEEP(i, v0);                                                                     \
            a0 = ADD(a0, v0);                                                                \
        }                                                                                    \
        sum = pg_f64acc_reduce(a0, a1) * (SCALE);                                            \
        if ((SCALE) != 1.0 && !(sum < 0x1p128)) {                                            \
            sum = 0.0;                                                                       \
            for (int64_t k = 0; k < i; k++) { const float v = SREDO(k); sum += (double) (v * v); } \
        }                                                                                    \
    }
#else
#define PG_NORM_ACC_SIMD(VAL, KEEP, ADD, SCALE, SREDO)
#endif
#define PG_NORM_ACC(VAL, KEEP, ADD, SCALE, SREDO, SVAL, SKEEP, SSQ)                          \
    double sum = 0.0;                                                                        \
    int64_t i = 0;                                                                           \
    PG_NORM_ACC_SIMD(VAL, KEEP, ADD, SCALE, SREDO)                                           \
    for (; i < n; i++) {                                                                     \
        const float v = SVAL(i);                                                             \
        SKEEP(i, v);                                                                         \
        sum += (double) SSQ(v);                                                              \
    }                                                                                        \
    return sum;

#define PG_NA_ADD(a, v)      pg_f64acc_add(a, v)
#define PG_NA_ADD_SQ(a, v)   pg_f64acc_add_sq(a, v)
#define PG_NA_SSQ(v)         ((v) * (v))
#define PG_NA_ID(v)          (v)
#define PG_NA_NONE(i, v)     ((void) 0)
#define PG_NA_X(i)           PG_F32V_LOAD(x + (i))
#define PG_NA_SX(i)          x[i]
#define PG_NA_SY(i)          y[i]
#define PG_NA_XR(i)          PG_F32V_ADD(PG_F32V_LOAD(x + (i)), PG_F32V_LOAD(r + (i)))
#define PG_NA_SXR(i)         (x[i] + r[i])
#define PG_NA_XM(i)          PG_F32V_SUB(PG_F32V_LOAD(x + (i)), vm)
#define PG_NA_SXM(i)         (x[i] - mean)
#define PG_NA_KEEP(i, v)     PG_F32V_STORE(y + (i), v)
#define PG_NA_SKEEP(i, v)    (y[i] = (v))

/* Σ x in double (ggml_vec_sum_f32's accuracy) */
static inline double pg_vec_sum_f64_f32(int64_t n, const float * x) {
    PG_RVV_RETURN(pg_rvv_sum_f32(n, x))
    PG_NORM_ACC(PG_NA_X, PG_NA_NONE, PG_NA_ADD, 1.0, PG_NA_SX, PG_NA_SX, PG_NA_NONE, PG_NA_ID)
}

/* Σ x*x: each square rounded to f32, added in double (rms_norm) */
static inline double pg_vec_sumsq_f32(int64_t n, const float * x) {
    PG_RVV_RETURN(pg_rvv_sumsq_f32(n, x))
    PG_NORM_ACC(PG_NA_X, PG_NA_NONE, PG_NA_ADD_SQ, PG_SQ_SCALE, PG_NA_SX, PG_NA_SX, PG_NA_NONE, PG_NA_SSQ)
}

/* y = x + r (f32, as ADD) and Σ y*y as pg_vec_sumsq_f32(y): the residual add fused into rms_norm */
static inline double pg_vec_add_sumsq_f32(int64_t n, float * y, const float * x, const float * r) {
    PG_RVV_RETURN(pg_rvv_add_sumsq_f32(n, y, x, r))
    PG_NORM_ACC(PG_NA_XR, PG_NA_KEEP, PG_NA_ADD_SQ, PG_SQ_SCALE, PG_NA_SY, PG_NA_SXR, PG_NA_SKEEP, PG_NA_SSQ)
}

/* y = x - mean and Σ y*y (ggml_vec_cvar_f32 before its division by n) */
static inline double pg_vec_cvar_f32(int64_t n, float * y, const float * x, float mean) {
    PG_RVV_RETURN(pg_rvv_cvar_f32(n, y, x, mean))
#if PG_HAVE_F32V
    const pg_f32v vm = PG_F32V_SET1(mean);
#endif
    PG_NORM_ACC(PG_NA_XM, PG_NA_KEEP, PG_NA_ADD_SQ, PG_SQ_SCALE, PG_NA_SY, PG_NA_SXM, PG_NA_SKEEP, PG_NA_SSQ)
}

/* y = (x*s)*w with both products rounded, as scale then mul (rms_norm * weight, fused) */
static inline void pg_vec_scale_mul_f32(int64_t n, float * y, const float * x, float s, const float * w) {
    PG_RVV_DO(pg_rvv_scale_mul_f32(n, y, x, s, w))
    int64_t i = 0;
#if PG_HAVE_F32V
    const pg_f32v vs = PG_F32V_SET1(s);
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR)
        PG_F32V_STORE(y + i, PG_F32V_MUL(PG_F32V_MUL(PG_F32V_LOAD(x + i), vs), PG_F32V_LOAD(w + i)));
#endif
    for (; i < n; i++) y[i] = (x[i] * s) * w[i];
}

/* ==================================================================================== *
 * ---- rope primitives ----
 * ==================================================================================== */

/* sin and cos: x = j*pi/2 + r with |r| <= pi/4 (pi/2 in three f32 parts, FMA steps; a second
 * step corrects j where x*2/pi rounded to the wrong integer, so the absolute error of r stays near
 * 1e-7 for |x| up to 2^23), Cephes' minimax polynomials on r, then the quadrant j mod 4 swaps and
 * negates. Absolute error below 1e-7 (libm's sinf/cosf: below 6e-8), i.e. ~1.5 ulp away from zeros. */
#define PG_SINCOS_2_PI 0.636619747f
#define PG_SINCOS_P1 1.57079637050628662f
#define PG_SINCOS_P2 -4.37113882867379e-08f
#define PG_SINCOS_P3 -1.71512451000588e-15f
#define PG_SIN_S1 -1.6666654611e-1f
#define PG_SIN_S2 8.3321608736e-3f
#define PG_SIN_S3 -1.9515295891e-4f
#define PG_COS_C1 4.166664568298827e-2f
#define PG_COS_C2 -1.388731625493765e-3f
#define PG_COS_C3 2.443315711809948e-5f

static inline void pg_sincosf(float x, float * s, float * c) {
    float j = nearbyintf(x * PG_SINCOS_2_PI);
    float r = fmaf(-j, PG_SINCOS_P1, x);
    r = fmaf(-j, PG_SINCOS_P2, r);
    r = fmaf(-j, PG_SINCOS_P3, r);
    const float j2 = nearbyintf(r * PG_SINCOS_2_PI);
    r = fmaf(-j2, PG_SINCOS_P2, fmaf(-j2, PG_SINCOS_P1, r));
    j += j2;
    const float z = r * r;
    const float sp = fmaf(r * z, fmaf(fmaf(PG_SIN_S3, z, PG_SIN_S2), z, PG_SIN_S1), r);
    const float cp = fmaf(z * z, fmaf(fmaf(PG_COS_C3, z, PG_COS_C2), z, PG_COS_C1), fmaf(-0.5f, z, 1.0f));
    const int q = (int) (int64_t) j & 3;
    const float ss = q & 1 ? cp : sp, cc = q & 1 ? sp : cp;
    *s = q & 2 ? -ss : ss;
    *c = (q + 1) & 2 ? -cc : cc;
}

#if PG_HAVE_F32V
/* quadrant fix-up: j (integral) mod 4 picks (sin, cos) from (sp, cp): 0 (sp, cp), 1 (cp, -sp),
 * 2 (-sp, -cp), 3 (-cp, sp); bit 0 swaps, bit 1 of j (of j+1 for cos) negates */
#if defined(PG_SIMD_AVX512)
static inline void pg_f32v_quadrant(pg_f32v j, pg_f32v sp, pg_f32v cp, pg_f32v * s, pg_f32v * c) {
    const __m512i q = _mm512_cvtps_epi32(j), two = _mm512_set1_epi32(2);
    const __mmask16 swap = _mm512_test_epi32_mask(q, _mm512_set1_epi32(1));
    const __m512i sn = _mm512_slli_epi32(_mm512_and_si512(q, two), 30);
    const __m512i cn = _mm512_slli_epi32(_mm512_and_si512(_mm512_add_epi32(q, _mm512_set1_epi32(1)), two), 30);
    *s = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_mask_blend_ps(swap, sp, cp)), sn));
    *c = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_mask_blend_ps(swap, cp, sp)), cn));
}
#elif defined(PG_SIMD_AVX2)
static inline void pg_f32v_quadrant(pg_f32v j, pg_f32v sp, pg_f32v cp, pg_f32v * s, pg_f32v * c) {
    const __m256i q = _mm256_cvtps_epi32(j), one = _mm256_set1_epi32(1), two = _mm256_set1_epi32(2);
    const __m256 swap = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(q, one), one));
    const __m256 sn = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(q, two), 30));
    const __m256 cn = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(_mm256_add_epi32(q, one), two), 30));
    *s = _mm256_xor_ps(_mm256_blendv_ps(sp, cp, swap), sn);
    *c = _mm256_xor_ps(_mm256_blendv_ps(cp, sp, swap), cn);
}
#elif defined(PG_SIMD_NEON)
static inline void pg_f32v_quadrant(pg_f32v j, pg_f32v sp, pg_f32v cp, pg_f32v * s, pg_f32v * c) {
    const int32x4_t q = vcvtnq_s32_f32(j), one = vdupq_n_s32(1), two = vdupq_n_s32(2);
    const uint32x4_t swap = vceqq_s32(vandq_s32(q, one), one);
    const uint32x4_t sn = vshlq_n_u32(vreinterpretq_u32_s32(vandq_s32(q, two)), 30);
    const uint32x4_t cn = vshlq_n_u32(vreinterpretq_u32_s32(vandq_s32(vaddq_s32(q, one), two)), 30);
    *s = vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(vbslq_f32(swap, cp, sp)), sn));
    *c = vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(vbslq_f32(swap, sp, cp)), cn));
}
#endif
#endif

/* c[i] = cos(x[i])*scale, s[i] = sin(x[i])*scale; c == x (in place) is allowed */
static inline void pg_vec_sincos_f32(int64_t n, const float * x, float * c, float * s, float scale) {
    PG_RVV_DO(pg_rvv_sincos_f32(n, x, c, s, scale))
    int64_t i = 0;
#if PG_HAVE_F32V
    const pg_f32v vscale = PG_F32V_SET1(scale);
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) {
        const pg_f32v vx = PG_F32V_LOAD(x + i);
        pg_f32v j = PG_F32V_ROUND(PG_F32V_MUL(vx, PG_F32V_SET1(PG_SINCOS_2_PI)));
        pg_f32v r = PG_F32V_FMA(j, PG_F32V_SET1(-PG_SINCOS_P1), vx);
        r = PG_F32V_FMA(j, PG_F32V_SET1(-PG_SINCOS_P2), r);
        r = PG_F32V_FMA(j, PG_F32V_SET1(-PG_SINCOS_P3), r);
        const pg_f32v j2 = PG_F32V_ROUND(PG_F32V_MUL(r, PG_F32V_SET1(PG_SINCOS_2_PI)));
        r = PG_F32V_FMA(j2, PG_F32V_SET1(-PG_SINCOS_P1), r);
        r = PG_F32V_FMA(j2, PG_F32V_SET1(-PG_SINCOS_P2), r);
        j = PG_F32V_ADD(j, j2);
        const pg_f32v z = PG_F32V_MUL(r, r);
        pg_f32v ps = PG_F32V_FMA(PG_F32V_SET1(PG_SIN_S3), z, PG_F32V_SET1(PG_SIN_S2));
        ps = PG_F32V_FMA(ps, z, PG_F32V_SET1(PG_SIN_S1));
        const pg_f32v sp = PG_F32V_FMA(PG_F32V_MUL(r, z), ps, r);
        pg_f32v pc = PG_F32V_FMA(PG_F32V_SET1(PG_COS_C3), z, PG_F32V_SET1(PG_COS_C2));
        pc = PG_F32V_FMA(pc, z, PG_F32V_SET1(PG_COS_C1));
        const pg_f32v cp = PG_F32V_FMA(PG_F32V_MUL(z, z), pc, PG_F32V_FMA(PG_F32V_SET1(-0.5f), z, PG_F32V_SET1(1.0f)));
        pg_f32v vs, vc;
        pg_f32v_quadrant(j, sp, cp, &vs, &vc);
        PG_F32V_STORE(c + i, PG_F32V_MUL(vc, vscale));
        PG_F32V_STORE(s + i, PG_F32V_MUL(vs, vscale));
    }
#endif
    for (; i < n; i++) {
        float si, ci;
        pg_sincosf(x[i], &si, &ci);
        c[i] = ci * scale;
        s[i] = si * scale;
    }
}

/* Rotation of pairs (x0, x1) by per-pair (c, s):  y0 = x0*c - x1*s,  y1 = x0*s + x1*c.
 * Both allow y == x (each vector of pairs is loaded before it is stored). */

/* half-split pairs (NEOX, the multi modes, VISION): pair k is (x0[k], x1[k]), k < n; all contiguous */
static inline void pg_vec_rope_half_f32(int64_t n, float * y0, float * y1, const float * x0, const float * x1,
                                        const float * c, const float * s) {
    PG_RVV_DO(pg_rvv_rope_half_f32(n, y0, y1, x0, x1, c, s))
    int64_t k = 0;
#if PG_HAVE_F32V
    for (; k + PG_F32_EPR <= n; k += PG_F32_EPR) {
        const pg_f32v a = PG_F32V_LOAD(x0 + k), b = PG_F32V_LOAD(x1 + k);
        const pg_f32v vc = PG_F32V_LOAD(c + k), vs = PG_F32V_LOAD(s + k);
        PG_F32V_STORE(y0 + k, PG_F32V_SUB(PG_F32V_MUL(a, vc), PG_F32V_MUL(b, vs)));
        PG_F32V_STORE(y1 + k, PG_F32V_FMA(a, vs, PG_F32V_MUL(b, vc)));
    }
#endif
    for (; k < n; k++) {
        const float a = x0[k], b = x1[k];
        y0[k] = a * c[k] - b * s[k];
        y1[k] = a * s[k] + b * c[k];
    }
}

/* PG_ROPE_LOAD2(p, e, o): 2*EPR floats at p split into the even (e) and odd (o) elements;
 * PG_ROPE_STORE2(p, e, o) interleaves them back */
#if defined(PG_SIMD_AVX512)
#define PG_ROPE_LOAD2(p, e, o) do {                                                                      \
        const __m512 lo_ = _mm512_loadu_ps(p), hi_ = _mm512_loadu_ps((p) + 16);                           \
        const __m512i ie_ = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);   \
        e = _mm512_permutex2var_ps(lo_, ie_, hi_);                                                        \
        o = _mm512_permutex2var_ps(lo_, _mm512_add_epi32(ie_, _mm512_set1_epi32(1)), hi_);                \
    } while (0)
#define PG_ROPE_STORE2(p, e, o) do {                                                                     \
        const __m512i il_ = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);     \
        _mm512_storeu_ps(p, _mm512_permutex2var_ps(e, il_, o));                                           \
        _mm512_storeu_ps((p) + 16, _mm512_permutex2var_ps(e, _mm512_add_epi32(il_, _mm512_set1_epi32(8)), o)); \
    } while (0)
#elif defined(PG_SIMD_AVX2)
#define PG_ROPE_LOAD2(p, e, o) do {                                                                      \
        const __m256 lo_ = _mm256_loadu_ps(p), hi_ = _mm256_loadu_ps((p) + 8);                            \
        /* shuffle gives [a0 a2 b0 b2 | a4 a6 b4 b6]; the 64-bit permute puts the a's first */            \
        e = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo_, hi_, 0x88)), 0xD8)); \
        o = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo_, hi_, 0xDD)), 0xD8)); \
    } while (0)
#define PG_ROPE_STORE2(p, e, o) do {                                                                     \
        const __m256 l_ = _mm256_unpacklo_ps(e, o), h_ = _mm256_unpackhi_ps(e, o);                        \
        _mm256_storeu_ps(p, _mm256_permute2f128_ps(l_, h_, 0x20));                                        \
        _mm256_storeu_ps((p) + 8, _mm256_permute2f128_ps(l_, h_, 0x31));                                  \
    } while (0)
#elif defined(PG_SIMD_NEON)
#define PG_ROPE_LOAD2(p, e, o) do { const float32x4x2_t v_ = vld2q_f32(p); e = v_.val[0]; o = v_.val[1]; } while (0)
#define PG_ROPE_STORE2(p, e, o) do { float32x4x2_t v_; v_.val[0] = e; v_.val[1] = o; vst2q_f32(p, v_); } while (0)
#endif

/* adjacent pairs (NORMAL): pair k is (x[2k], x[2k+1]), k < n; deinterleaved into registers, rotated,
 * interleaved back */
static inline void pg_vec_rope_adj_f32(int64_t n, float * y, const float * x, const float * c, const float * s) {
    PG_RVV_DO(pg_rvv_rope_adj_f32(n, y, x, c, s))
    int64_t k = 0;
#if PG_HAVE_F32V
    for (; k + PG_F32_EPR <= n; k += PG_F32_EPR) {
        pg_f32v a, b;
        PG_ROPE_LOAD2(x + 2 * k, a, b);
        const pg_f32v vc = PG_F32V_LOAD(c + k), vs = PG_F32V_LOAD(s + k);
        const pg_f32v r0 = PG_F32V_SUB(PG_F32V_MUL(a, vc), PG_F32V_MUL(b, vs));
        const pg_f32v r1 = PG_F32V_FMA(a, vs, PG_F32V_MUL(b, vc));
        PG_ROPE_STORE2(y + 2 * k, r0, r1);
    }
#endif
    for (; k < n; k++) {
        const float a = x[2 * k], b = x[2 * k + 1];
        y[2 * k] = a * c[k] - b * s[k];
        y[2 * k + 1] = a * s[k] + b * c[k];
    }
}

/* ==================================================================================== *
 * ---- attention primitives ----
 * ==================================================================================== */

/* Flash attention works on blocks: a few query rows (the query heads sharing one KV head, or the
 * rows of a Q tile) against a few keys. Every K and V element loaded feeds all those rows
 * (register blocking: up to PG_ATTN_RB rows x 2 or 4 vectors of accumulators). f32 throughout. */
#define PG_ATTN_RB 4

#define PG_ATTN_ALWAYS_INLINE static inline __attribute__((always_inline))

/* PG_ATTN_KEEP(v): keep a loaded vector in its register. Without it GCC folds the load of a K or V
 * vector into every FMA that uses it (one load per FMA instead of one per PG_ATTN_RB FMAs), which
 * makes the micro-GEMMs load-bound (about 80% of the FMA peak instead of 98% on Zen 4). */
#if defined(PG_SIMD_AVX512)
#define PG_ATTN_KEEP(v) __asm__("" : "+v"(v))
#elif defined(PG_SIMD_AVX2)
#define PG_ATTN_KEEP(v) __asm__("" : "+x"(v))
#else
#define PG_ATTN_KEEP(v) ((void) 0)
#endif

/* attention dot: s[r*lds] = dot(q + r*ldq, k) for r < nr, the K row of type T read once per PG_ATTN_RB
 * query rows. Two accumulator chains per row hide the FMA latency when nr is small. */
#if PG_HAVE_F32V
#define PG_ATTN_DOT_SIMD(LOADK)                                                                   \
    pg_f32v a0[PG_ATTN_RB], a1[PG_ATTN_RB];                                                       \
    for (int r = 0; r < nr; r++) { a0[r] = PG_F32V_ZERO(); a1[r] = PG_F32V_ZERO(); }              \
    for (; i + 2 * PG_F32_EPR <= n; i += 2 * PG_F32_EPR) {                                        \
        const pg_f32v k0 = LOADK(k + i), k1 = LOADK(k + i + PG_F32_EPR);                           \
        for (int r = 0; r < nr; r++) {                                                            \
            a0[r] = PG_F32V_FMA(k0, PG_F32V_LOAD(q + r * ldq + i), a0[r]);                        \
            a1[r] = PG_F32V_FMA(k1, PG_F32V_LOAD(q + r * ldq + i + PG_F32_EPR), a1[r]);           \
        }                                                                                         \
    }                                                                                             \
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) {                                                \
        const pg_f32v k0 = LOADK(k + i);                                                          \
        for (int r = 0; r < nr; r++) a0[r] = PG_F32V_FMA(k0, PG_F32V_LOAD(q + r * ldq + i), a0[r]); \
    }                                                                                             \
    for (int r = 0; r < nr; r++) sum[r] = PG_F32V_REDUCE(PG_F32V_ADD(a0[r], a1[r]));
#else
#define PG_ATTN_DOT_SIMD(LOADK)
#endif

#define PG_ATTN_DOT(NAME, T, LOADK, RVV)                                                          \
PG_ATTN_ALWAYS_INLINE void NAME##_rb(int nr, int64_t n, const float * q, int64_t ldq,             \
                                     const T * k, float * s, int64_t lds) {                       \
    float sum[PG_ATTN_RB] = {0.0f, 0.0f, 0.0f, 0.0f};                                             \
    int64_t i = 0;                                                                                \
    PG_ATTN_DOT_SIMD(LOADK)                                                                       \
    for (; i < n; i++) {                                                                          \
        const float kf = LOADK##_S(k + i);                                                        \
        for (int r = 0; r < nr; r++) sum[r] += kf * q[r * ldq + i];                               \
    }                                                                                             \
    for (int r = 0; r < nr; r++) s[r * lds] = sum[r];                                             \
}                                                                                                 \
static inline void NAME(int nr, int64_t n, const float * q, int64_t ldq, const T * k, float * s, int64_t lds) { \
    PG_RVV_DO(RVV(nr, n, q, ldq, k, s, lds))                                                      \
    for (; nr >= PG_ATTN_RB; nr -= PG_ATTN_RB, q += PG_ATTN_RB * ldq, s += PG_ATTN_RB * lds)     \
        NAME##_rb(PG_ATTN_RB, n, q, ldq, k, s, lds);                                              \
    switch (nr) {                                                                                 \
    case 3: NAME##_rb(3, n, q, ldq, k, s, lds); break;                                            \
    case 2: NAME##_rb(2, n, q, ldq, k, s, lds); break;                                            \
    case 1: NAME##_rb(1, n, q, ldq, k, s, lds); break;                                            \
    default: break;                                                                               \
    }                                                                                             \
}

PG_ATTN_DOT(pg_vec_attn_dot_f32, float, PG_F32V_LOAD, pg_rvv_attn_dot_f32)
PG_ATTN_DOT(pg_vec_attn_dot_f16, pg_fp16_t, PG_F32V_LOAD_F16, pg_rvv_attn_dot_f16)
PG_ATTN_DOT(pg_vec_attn_dot_bf16, pg_bf16_t, PG_F32V_LOAD_BF16, pg_rvv_attn_dot_bf16)

/* pg_f32v_exp with the same value for every input, 13 instructions instead of 24 on AVX-512: the
 * 2^k scaling, the zero below PG_EXP_LO and the NaN pass-through come from one zero-masked
 * vscalefps instead of the generic selects (used by the softmax of the tiled path). */
#if defined(PG_SIMD_AVX512)
static inline __m512 pg_attn_exp(__m512 x) {
    /* x above 100 (and +inf) is clamped so that k stays finite; vscalefps gives inf above PG_EXP_HI.
     * -inf gives k = -inf and a NaN r, but its lane is zeroed like every lane below PG_EXP_LO. */
    const __m512 xc = _mm512_min_ps(_mm512_set1_ps(100.0f), x);
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(k, _mm512_set1_ps(-6.93145752e-1f), xc);
    r = _mm512_fmadd_ps(k, _mm512_set1_ps(-1.42860677e-6f), r);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(PG_EXP_C7), r, _mm512_set1_ps(PG_EXP_C6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PG_EXP_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PG_EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PG_EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    /* lanes with x < PG_EXP_LO (ordered) are 0; NaN lanes stay NaN through p */
    return _mm512_maskz_scalef_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(PG_EXP_LO), _CMP_NLT_UQ), p, k);
}
#elif PG_HAVE_F32V
#define pg_attn_exp(x) pg_f32v_exp(x)
#endif

/* online softmax over blocks of n scores of nr <= PG_ATTN_RB query rows (row r at x + r*ldx) with
 * running max M[r] and sum S[r]: x += mv (slope*mask, row r at mv + r*ldm; mv may be NULL),
 * m = max(M[r], max x), x <- exp(x - m) (0 for -inf), S[r] = S[r] * exp(M[r] - m) + sum, M[r] = m.
 * f[r] gets the factor exp(M_old - m) the row's accumulator must be scaled by (1: nothing to do).
 * A row the block leaves fully masked (m == -inf) becomes zeros and changes nothing. The rows are
 * interleaved so that their reductions and exps overlap. */
PG_ATTN_ALWAYS_INLINE void pg_vec_attn_softmax_rb(int nr, int64_t n, float * x, int64_t ldx, const float * mv,
                                                  int64_t ldm, float * M, float * S, float * f) {
    float mx[PG_ATTN_RB], m[PG_ATTN_RB], sum[PG_ATTN_RB];
    int64_t i = 0;
    for (int r = 0; r < nr; r++) { mx[r] = -INFINITY; sum[r] = 0.0f; }
#if PG_HAVE_F32V
    if (n >= PG_F32_EPR) {
        pg_f32v vm[PG_ATTN_RB];
        for (int r = 0; r < nr; r++) vm[r] = PG_F32V_SET1(-INFINITY);
        for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) {
            for (int r = 0; r < nr; r++) {
                pg_f32v v = PG_F32V_LOAD(x + r * ldx + i);
                if (mv) {
                    v = PG_F32V_ADD(v, PG_F32V_LOAD(mv + r * ldm + i));
                    PG_F32V_STORE(x + r * ldx + i, v);
                }
                vm[r] = PG_F32V_MAX(vm[r], v);
            }
        }
        for (int r = 0; r < nr; r++) mx[r] = PG_F32V_REDUCE_MAX(vm[r]);
    }
#endif
    for (int64_t j = i; j < n; j++) {
        for (int r = 0; r < nr; r++) {
            if (mv) x[r * ldx + j] += mv[r * ldm + j];
            mx[r] = x[r * ldx + j] > mx[r] ? x[r * ldx + j] : mx[r];
        }
    }
    for (int r = 0; r < nr; r++) {
        m[r] = PG_MAX(M[r], mx[r]);
        f[r] = m[r] > M[r] ? pg_expf(M[r] - m[r]) : 1.0f;
        M[r] = m[r];
        if (m[r] == -INFINITY) m[r] = INFINITY;    /* fully masked so far: exp(-inf - inf) = 0 */
    }
#if PG_HAVE_F32V
    if (n >= PG_F32_EPR) {
        pg_f32v va[PG_ATTN_RB], vmr[PG_ATTN_RB];
        for (int r = 0; r < nr; r++) { va[r] = PG_F32V_ZERO(); vmr[r] = PG_F32V_SET1(m[r]); }
        for (int64_t j = 0; j < i; j += PG_F32_EPR) {
            for (int r = 0; r < nr; r++) {
                const pg_f32v e = pg_attn_exp(PG_F32V_SUB(PG_F32V_LOAD(x + r * ldx + j), vmr[r]));
                PG_F32V_STORE(x + r * ldx + j, e);
                va[r] = PG_F32V_ADD(va[r], e);
            }
        }
        for (int r = 0; r < nr; r++) sum[r] = PG_F32V_REDUCE(va[r]);
    }
#endif
    for (int64_t j = i; j < n; j++) {
        for (int r = 0; r < nr; r++) {
            x[r * ldx + j] = pg_expf(x[r * ldx + j] - m[r]);
            sum[r] += x[r * ldx + j];
        }
    }
    for (int r = 0; r < nr; r++) S[r] = S[r] * f[r] + sum[r];
}

static inline void pg_vec_attn_softmax_rows_f32(int nr, int64_t n, float * x, int64_t ldx, const float * mv,
                                                int64_t ldm, float * M, float * S, float * f) {
    PG_RVV_DO(pg_rvv_attn_softmax_rows_f32(nr, n, x, ldx, mv, ldm, M, S, f))
    switch (nr) {
    case 4: pg_vec_attn_softmax_rb(4, n, x, ldx, mv, ldm, M, S, f); break;
    case 3: pg_vec_attn_softmax_rb(3, n, x, ldx, mv, ldm, M, S, f); break;
    case 2: pg_vec_attn_softmax_rb(2, n, x, ldx, mv, ldm, M, S, f); break;
    default: pg_vec_attn_softmax_rb(1, n, x, ldx, mv, ldm, M, S, f); break;
    }
}

/* one row: returns the accumulator factor */
static inline float pg_vec_attn_softmax_f32(int64_t n, float * x, const float * mv, float * M, float * S) {
    float f;
    pg_vec_attn_softmax_rows_f32(1, n, x, 0, mv, 0, M, S, &f);
    return f;
}

/* one query row of a mask tile: y[j] = slope * m[j] for j < n (slope > 0), and the range of keys
 * that can get weight: *lo = the first j whose value is not -inf, *hi = one past the last one
 * (*lo >= *hi when every key is masked). */
#if defined(PG_SIMD_AVX512)
#define PG_ATTN_LIVE_BITS(v) ((uint32_t) _mm512_cmp_ps_mask(v, _mm512_set1_ps(-INFINITY), _CMP_NEQ_UQ))
#elif defined(PG_SIMD_AVX2)
#define PG_ATTN_LIVE_BITS(v) ((uint32_t) _mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_set1_ps(-INFINITY), _CMP_NEQ_UQ)))
#elif defined(PG_SIMD_NEON)
static inline uint32_t pg_neon_live_bits(float32x4_t v) {
    static const uint32_t w[4] = {1, 2, 4, 8};
    const uint32x4_t ne = vmvnq_u32(vceqq_f32(v, vdupq_n_f32(-INFINITY)));
    return vaddvq_u32(vandq_u32(ne, vld1q_u32(w)));
}
#define PG_ATTN_LIVE_BITS(v) pg_neon_live_bits(v)
#endif

static inline void pg_vec_attn_mask_f16(int64_t n, const pg_fp16_t * m, float slope, float * y, int64_t * lo, int64_t * hi) {
    PG_RVV_DO(pg_rvv_attn_mask_f16(n, m, slope, y, lo, hi))
    int64_t l = n, h = 0, i = 0;
#if PG_HAVE_F32V
    const pg_f32v vs = PG_F32V_SET1(slope);
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) {
        const pg_f32v v = PG_F32V_MUL(PG_F32V_LOAD_F16(m + i), vs);
        PG_F32V_STORE(y + i, v);
        const uint32_t bits = PG_ATTN_LIVE_BITS(v);
        if (bits) {
            if (l == n) l = i + __builtin_ctz(bits);
            h = i + 32 - __builtin_clz(bits);
        }
    }
#endif
    for (; i < n; i++) {
        y[i] = slope * pg_fp16_to_fp32(m[i]);
        if (y[i] != -INFINITY) {
            if (l == n) l = i;
            h = i + 1;
        }
    }
    *lo = l;
    *hi = h;
}

/* V accumulation: acc[r*lda + d] = f[r] * acc[r*lda + d] + sum_{j<nk} p[r*ldp + j] * v_j[d] for
 * r < nr, d < n, where v_j = v + j*nbv bytes is a row of type T and f (the online-softmax rescale
 * of each row) may be NULL (1). Each V vector is loaded once per PG_ATTN_RB rows and the
 * accumulators stay in registers over the nk keys. */
#if PG_HAVE_F32V
#define PG_ATTN_ACC_SIMD(T, LOADV, NV)                                                            \
    for (; d + NV * PG_F32_EPR <= n; d += NV * PG_F32_EPR) {                                      \
        pg_f32v c[PG_ATTN_RB][NV];                                                                \
        for (int r = 0; r < nr; r++) {                                                            \
            const pg_f32v fr = PG_F32V_SET1(f ? f[r] : 1.0f);                                     \
            for (int u = 0; u < NV; u++)                                                          \
                c[r][u] = PG_F32V_MUL(PG_F32V_LOAD(acc + r * lda + d + u * PG_F32_EPR), fr);      \
        }                                                                                         \
        for (int64_t j = 0; j < nk; j++) {                                                        \
            const T * vj = (const T *) ((const char *) v + j * nbv) + d;                          \
            pg_f32v vv[NV];                                                                       \
            for (int u = 0; u < NV; u++) { vv[u] = LOADV(vj + u * PG_F32_EPR); PG_ATTN_KEEP(vv[u]); } \
            for (int r = 0; r < nr; r++) {                                                        \
                const pg_f32v pb = PG_F32V_SET1(p[r * ldp + j]);                                  \
                for (int u = 0; u < NV; u++) c[r][u] = PG_F32V_FMA(vv[u], pb, c[r][u]);           \
            }                                                                                     \
        }                                                                                         \
        for (int r = 0; r < nr; r++)                                                              \
            for (int u = 0; u < NV; u++) PG_F32V_STORE(acc + r * lda + d + u * PG_F32_EPR, c[r][u]); \
    }
#else
#define PG_ATTN_ACC_SIMD(T, LOADV, NV)
#endif

#define PG_ATTN_ACC(NAME, T, LOADV, RVV)                                                          \
PG_ATTN_ALWAYS_INLINE void NAME##_rb(int nr, int64_t n, float * acc, int64_t lda, int64_t nk,     \
                                     const float * p, int64_t ldp, const T * v, size_t nbv,      \
                                     const float * f) {                                          \
    int64_t d = 0;                                                                                \
    PG_ATTN_ACC_SIMD(T, LOADV, 4)                                                                 \
    PG_ATTN_ACC_SIMD(T, LOADV, 1)                                                                 \
    for (; d < n; d++) {                                                                          \
        for (int r = 0; r < nr; r++) {                                                            \
            float c = f ? f[r] * acc[r * lda + d] : acc[r * lda + d];                             \
            for (int64_t j = 0; j < nk; j++)                                                      \
                c += p[r * ldp + j] * LOADV##_S((const T *) ((const char *) v + j * nbv) + d);    \
            acc[r * lda + d] = c;                                                                 \
        }                                                                                         \
    }                                                                                             \
}                                                                                                 \
static inline void NAME(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p, \
                        int64_t ldp, const T * v, size_t nbv, const float * f) {                  \
    PG_RVV_DO(RVV(nr, n, acc, lda, nk, p, ldp, v, nbv, f))                                        \
    for (; nr >= PG_ATTN_RB; nr -= PG_ATTN_RB, acc += PG_ATTN_RB * lda, p += PG_ATTN_RB * ldp,   \
                             f = f ? f + PG_ATTN_RB : NULL)                                       \
        NAME##_rb(PG_ATTN_RB, n, acc, lda, nk, p, ldp, v, nbv, f);                                \
    switch (nr) {                                                                                 \
    case 3: NAME##_rb(3, n, acc, lda, nk, p, ldp, v, nbv, f); break;                              \
    case 2: NAME##_rb(2, n, acc, lda, nk, p, ldp, v, nbv, f); break;                              \
    case 1: NAME##_rb(1, n, acc, lda, nk, p, ldp, v, nbv, f); break;                              \
    default: break;                                                                               \
    }                                                                                             \
}

PG_ATTN_ACC(pg_vec_attn_acc_f32, float, PG_F32V_LOAD, pg_rvv_attn_acc_f32)
PG_ATTN_ACC(pg_vec_attn_acc_f16, pg_fp16_t, PG_F32V_LOAD_F16, pg_rvv_attn_acc_f16)
PG_ATTN_ACC(pg_vec_attn_acc_bf16, pg_bf16_t, PG_F32V_LOAD_BF16, pg_rvv_attn_acc_bf16)

/* tiled micro-GEMM: s[r*lds + c] = sum_{d<dk} q[r*ldq + d] * kt[d*ldk + c] for r < nr, c < nc, with K
 * stored transposed (key index fastest) so that one vector holds PG_F32_EPR keys. Blocks of
 * PG_ATTN_RB rows x 4, 2, 1 vectors of keys: each K vector loaded feeds PG_ATTN_RB FMAs. */
#if PG_HAVE_F32V
#define PG_ATTN_QK_SIMD(NV)                                                                       \
    for (; c + NV * PG_F32_EPR <= nc; c += NV * PG_F32_EPR) {                                     \
        pg_f32v a[PG_ATTN_RB][NV];                                                                \
        for (int r = 0; r < nr; r++)                                                              \
            for (int u = 0; u < NV; u++) a[r][u] = PG_F32V_ZERO();                                \
        for (int64_t d = 0; d < dk; d++) {                                                        \
            pg_f32v kv[NV];                                                                       \
            for (int u = 0; u < NV; u++) {                                                        \
                kv[u] = PG_F32V_LOAD(kt + d * ldk + c + u * PG_F32_EPR);                          \
                PG_ATTN_KEEP(kv[u]);                                                              \
            }                                                                                     \
            for (int r = 0; r < nr; r++) {                                                        \
                const pg_f32v qb = PG_F32V_SET1(q[r * ldq + d]);                                  \
                for (int u = 0; u < NV; u++) a[r][u] = PG_F32V_FMA(qb, kv[u], a[r][u]);           \
            }                                                                                     \
        }                                                                                         \
        for (int r = 0; r < nr; r++)                                                              \
            for (int u = 0; u < NV; u++) PG_F32V_STORE(s + r * lds + c + u * PG_F32_EPR, a[r][u]); \
    }
#else
#define PG_ATTN_QK_SIMD(NV)
#endif

PG_ATTN_ALWAYS_INLINE void pg_vec_attn_gemm_qk_rb(int nr, int64_t nc, int64_t dk, const float * q, int64_t ldq,
                                                  const float * kt, int64_t ldk, float * s, int64_t lds) {
    int64_t c = 0;
    PG_ATTN_QK_SIMD(4)
    PG_ATTN_QK_SIMD(2)
    PG_ATTN_QK_SIMD(1)
    for (; c < nc; c++) {
        for (int r = 0; r < nr; r++) {
            float a = 0.0f;
            for (int64_t d = 0; d < dk; d++) a += q[r * ldq + d] * kt[d * ldk + c];
            s[r * lds + c] = a;
        }
    }
}

static inline void pg_vec_attn_gemm_qk_f32(int nr, int64_t nc, int64_t dk, const float * q, int64_t ldq,
                                           const float * kt, int64_t ldk, float * s, int64_t lds) {
    PG_RVV_DO(pg_rvv_attn_gemm_qk_f32(nr, nc, dk, q, ldq, kt, ldk, s, lds))
    for (; nr >= PG_ATTN_RB; nr -= PG_ATTN_RB, q += PG_ATTN_RB * ldq, s += PG_ATTN_RB * lds)
        pg_vec_attn_gemm_qk_rb(PG_ATTN_RB, nc, dk, q, ldq, kt, ldk, s, lds);
    switch (nr) {
    case 3: pg_vec_attn_gemm_qk_rb(3, nc, dk, q, ldq, kt, ldk, s, lds); break;
    case 2: pg_vec_attn_gemm_qk_rb(2, nc, dk, q, ldq, kt, ldk, s, lds); break;
    case 1: pg_vec_attn_gemm_qk_rb(1, nc, dk, q, ldq, kt, ldk, s, lds); break;
    default: break;
    }
}

/* transpose: y[c*ldy + r] = x[r*ldx + c] for r < nr, c < nc (the K tile, key index made fastest).
 * Square blocks of PG_F32_EPR x PG_F32_EPR go through registers; the edges are copied one by one. */
#if defined(PG_SIMD_AVX512)
static inline void pg_attn_transpose_block(const float * x, int64_t ldx, float * y, int64_t ldy) {
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
#elif defined(PG_SIMD_AVX2)
static inline void pg_attn_transpose_block(const float * x, int64_t ldx, float * y, int64_t ldy) {
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
#elif defined(PG_SIMD_NEON)
static inline void pg_attn_transpose_block(const float * x, int64_t ldx, float * y, int64_t ldy) {
    const float32x4x2_t p01 = vtrnq_f32(vld1q_f32(x), vld1q_f32(x + ldx));
    const float32x4x2_t p23 = vtrnq_f32(vld1q_f32(x + 2 * ldx), vld1q_f32(x + 3 * ldx));
    vst1q_f32(y, vcombine_f32(vget_low_f32(p01.val[0]), vget_low_f32(p23.val[0])));
    vst1q_f32(y + ldy, vcombine_f32(vget_low_f32(p01.val[1]), vget_low_f32(p23.val[1])));
    vst1q_f32(y + 2 * ldy, vcombine_f32(vget_high_f32(p01.val[0]), vget_high_f32(p23.val[0])));
    vst1q_f32(y + 3 * ldy, vcombine_f32(vget_high_f32(p01.val[1]), vget_high_f32(p23.val[1])));
}
#endif

static inline void pg_vec_attn_transpose_f32(int64_t nr, int64_t nc, const float * x, int64_t ldx, float * y, int64_t ldy) {
    PG_RVV_DO(pg_rvv_attn_transpose_f32(nr, nc, x, ldx, y, ldy))
    int64_t r0 = 0, c0 = 0;
#if PG_HAVE_F32V
    for (; r0 + PG_F32_EPR <= nr; r0 += PG_F32_EPR)
        for (int64_t c = 0; c + PG_F32_EPR <= nc; c += PG_F32_EPR)
            pg_attn_transpose_block(x + r0 * ldx + c, ldx, y + c * ldy + r0, ldy);
    c0 = nc / PG_F32_EPR * PG_F32_EPR;
#endif
    /* the rows below the last whole block (all columns), then the right edge of the blocked rows */
    for (int64_t r = r0; r < nr; r++)
        for (int64_t c = 0; c < nc; c++) y[c * ldy + r] = x[r * ldx + c];
    for (int64_t r = 0; r < r0; r++)
        for (int64_t c = c0; c < nc; c++) y[c * ldy + r] = x[r * ldx + c];
}

/* ==================================================================================== *
 * ---- set_rows primitives ----
 * ==================================================================================== */

/* Q8_0 quantisation of n floats (n a multiple of 32), ggml's CPU quantiser: per block amax = max|x|,
 * d = amax/127 stored as fp16, q = round-half-even(x * (amax ? 127/amax : 0)). The vector bodies do
 * the same two f32 operations per element (one multiply, one rounding), so every path gives the same
 * bytes as the scalar loop. */
static inline void pg_vec_quantize_q8_0(int64_t n, const float * x, pg_block_q8_0 * y) {
    PG_RVV_DO(pg_rvv_quantize_q8_0(n, x, y))
    for (int64_t ib = 0; ib < n / PG_QK8_0; ib++) {
        const float * xb = x + ib * PG_QK8_0;
        int8_t * q = y[ib].qs;
#if defined(PG_SIMD_AVX512)
        const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const __m512 vid = _mm512_set1_ps(id);
        _mm_storeu_si128((__m128i *) q, _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, vid))));
        _mm_storeu_si128((__m128i *) (q + 16), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, vid))));
#elif defined(PG_SIMD_AVX2)
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
#elif defined(PG_SIMD_NEON)
        float32x4_t v[8], m = vdupq_n_f32(0.0f);
        for (int k = 0; k < 8; k++) {
            v[k] = vld1q_f32(xb + 4 * k);
            m = vmaxq_f32(m, vabsq_f32(v[k]));
        }
        const float amax = vmaxvq_f32(m);
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (int k = 0; k < 8; k += 2) {
            const int16x8_t h = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(v[k], id))),
                                             vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(v[k + 1], id))));
            vst1_s8(q + 4 * k, vqmovn_s16(h));
        }
#else
        float amax = 0.0f;
        for (int j = 0; j < PG_QK8_0; j++) amax = PG_MAX(amax, fabsf(xb[j]));
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (int j = 0; j < PG_QK8_0; j++) q[j] = (int8_t) nearbyintf(xb[j] * id);
#endif
        y[ib].d = pg_fp32_to_fp16(amax / 127.0f);
    }
}
