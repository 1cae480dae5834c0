/* What the AVX-512 and AVX2 mappings share: 256-bit integer dots of quantized blocks, the 256-bit
 * horizontal sum and max, the F16C scalar conversion. Included by isa/avx512.h and isa/avx2.h. */
#pragma once
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

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

#if defined(__F16C__)
#define PG_HAVE_FP16_SCALAR 1
/* one instruction (block scales in quantized dots); the same exact widening */
static inline float pg_fp16_to_fp32_1(uint16_t h) { return _cvtsh_ss(h); }
#endif

/* quantized blocks: 8 f32 lanes of d * (int8 dot) accumulated over the blocks */
#define PG_HAVE_Q8_DOT 1
#define PG_HAVE_Q4_DOT 1
typedef __m256 pg_qacc;
static inline pg_qacc pg_qacc_zero(void) { return _mm256_setzero_ps(); }

/* |x| (unsigned) times sign(x)*y (signed): maddubs needs one unsigned operand */
static inline pg_qacc pg_qacc_i8(pg_qacc acc, __m256i qx, __m256i qy, float d) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(qx, qx), _mm256_sign_epi8(qy, qx));
    const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
    return _mm256_fmadd_ps(_mm256_set1_ps(d), p, acc);
}

/* 32 int8 x 32 int8 */
static inline pg_qacc pg_qacc_q8(pg_qacc acc, const int8_t * qx, const int8_t * qy, float d) {
    return pg_qacc_i8(acc, _mm256_loadu_si256((const __m256i *) qx), _mm256_loadu_si256((const __m256i *) qy), d);
}

/* 32 4-bit values (16 bytes: elements 0..15 in the low nibbles, 16..31 in the high ones, offset 8)
 * x 32 int8 */
static inline pg_qacc pg_qacc_q4(pg_qacc acc, const uint8_t * qx, const int8_t * qy, float d) {
    const __m128i b = _mm_loadu_si128((const __m128i *) qx);
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
    const __m256i q = _mm256_sub_epi8(_mm256_and_si256(both, _mm256_set1_epi8(0x0f)), _mm256_set1_epi8(8));
    return pg_qacc_i8(acc, q, _mm256_loadu_si256((const __m256i *) qy), d);
}

static inline float pg_qacc_reduce(pg_qacc acc) { return pg_avx2_hsum(acc); }
