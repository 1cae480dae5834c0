/* The only file that includes intrinsics headers (besides rvv.c, the RVV translation unit). It picks one ISA at compile time from the
 * compiler's macros and maps a small f32 vector vocabulary onto it:
 *
 *   pg_f32v                      one register of PG_F32_EPR floats
 *   PG_F32V_LOAD(p) / STORE(p,v) unaligned load/store of f32
 *   PG_F32V_LOAD_F16(p)          PG_F32_EPR fp16 values widened to f32 (exact)
 *   PG_F32V_STORE_F16(p, v)      narrowed to fp16 with round-to-nearest-even
 *   PG_F32V_LOAD_BF16(p)         bf16 widened (shift left by 16)
 *   PG_F32V_SET1, ZERO, ADD, SUB, MUL, DIV, FMA(a, b, c) = a*b + c, MAX, REDUCE (horizontal sum), REDUCE_MAX
 *
 * PG_HAVE_F32V is 0 for the scalar build (-Dsimd=none, or an ISA without a mapping): every row
 * primitive in vec.h then runs its scalar loop only. PG_SIMD_NAME is the ISA compiled; vec.h's
 * pg_simd_name() is what runs (build_info() reports it).
 *
 * riscv64 (PG_SIMD_RVV, meson defines PYGGML_RVV) is different: this file is compiled without V,
 * PG_HAVE_F32V is 0, and vec.h's primitives hand over to the RVV kernels of rvv.c when the CPU has V
 * at run time (rvv.h).
 */
#pragma once

#if defined(PYGGML_SIMD_NONE)
#  define PG_SIMD_SCALAR 1
#elif defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__FMA__)
#  define PG_SIMD_AVX512 1
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#  define PG_SIMD_AVX2 1
#elif defined(__ARM_NEON) && defined(__aarch64__)
#  define PG_SIMD_NEON 1
#elif defined(PYGGML_RVV)
#  define PG_SIMD_RVV 1
#else
#  define PG_SIMD_SCALAR 1
#endif

#if !defined(PG_SIMD_RVV)
#  define PG_RVV_RETURN(call)
#  define PG_RVV_DO(call)
#endif

#if defined(PG_SIMD_AVX512) || defined(PG_SIMD_AVX2)
#  include <immintrin.h>
#elif defined(PG_SIMD_NEON)
#  include <arm_neon.h>
#elif defined(PG_SIMD_RVV)
#  include "rvv.h"
#endif

#if defined(PG_SIMD_AVX512)
#define PG_SIMD_NAME "avx512"
#define PG_HAVE_F32V 1
#define PG_F32_EPR 16
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
#define PG_F32V_REDUCE(v)        _mm512_reduce_add_ps(v)
#define PG_F32V_REDUCE_MAX(v)    _mm512_reduce_max_ps(v)

#elif defined(PG_SIMD_AVX2)
#define PG_SIMD_NAME "avx2"
#define PG_HAVE_F32V 1
#define PG_F32_EPR 8
typedef __m256 pg_f32v;
static inline float pg_avx2_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float pg_avx2_hmax(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
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
#define PG_F32V_REDUCE(v)        pg_avx2_hsum(v)
#define PG_F32V_REDUCE_MAX(v)    pg_avx2_hmax(v)

#elif defined(PG_SIMD_NEON)
#define PG_SIMD_NAME "neon"
#define PG_HAVE_F32V 1
#define PG_F32_EPR 4
typedef float32x4_t pg_f32v;
#define PG_F32V_LOAD(p)          vld1q_f32(p)
#define PG_F32V_STORE(p, v)      vst1q_f32(p, v)
#define PG_F32V_LOAD_F16(p)      vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *) (p))))
#define PG_F32V_STORE_F16(p, v)  vst1_u16((uint16_t *) (p), vreinterpret_u16_f16(vcvt_f16_f32(v)))
#define PG_F32V_LOAD_BF16(p)     vreinterpretq_f32_u32(vshlq_n_u32(vmovl_u16(vld1_u16((const uint16_t *) (p))), 16))
#define PG_F32V_SET1(x)          vdupq_n_f32(x)
#define PG_F32V_ZERO()           vdupq_n_f32(0.0f)
#define PG_F32V_ADD(a, b)        vaddq_f32(a, b)
#define PG_F32V_SUB(a, b)        vsubq_f32(a, b)
#define PG_F32V_MUL(a, b)        vmulq_f32(a, b)
#define PG_F32V_DIV(a, b)        vdivq_f32(a, b)
#define PG_F32V_FMA(a, b, c)     vfmaq_f32(c, a, b)
#define PG_F32V_MAX(a, b)        vmaxq_f32(a, b)
#define PG_F32V_REDUCE(v)        vaddvq_f32(v)
#define PG_F32V_REDUCE_MAX(v)    vmaxvq_f32(v)

#elif defined(PG_SIMD_RVV)
#define PG_SIMD_NAME "rvv"
#define PG_HAVE_F32V 0
#define PG_F32_EPR 1

#else
#define PG_SIMD_NAME "scalar"
#define PG_HAVE_F32V 0
#define PG_F32_EPR 1
#endif

/* what runs: the compiled ISA, or "scalar" on a riscv64 CPU without V; the vector register width
 * in bits the kernels use (VLEN as read at run time for RVV), 0 for scalar */
static inline const char * pg_simd_name(void) {
#if defined(PG_SIMD_RVV)
    return pg_rvv_on() ? PG_SIMD_NAME : "scalar";
#else
    return PG_SIMD_NAME;
#endif
}

static inline int pg_simd_vlen(void) {
#if defined(PG_SIMD_RVV)
    return pg_rvv_on() ? pg_rvv_vlen() : 0;
#else
    return PG_HAVE_F32V ? 32 * PG_F32_EPR : 0;
#endif
}
