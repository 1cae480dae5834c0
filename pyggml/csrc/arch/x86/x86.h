/* What the AVX-512 and AVX2 mappings share: 256-bit integer dots of quantized blocks, the 256-bit
 * horizontal sum and max, the F16C scalar conversion. Included by arch/x86/avx512.h and arch/x86/avx2.h. */
#pragma once
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

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

/* quantized blocks: 32 int8 lanes of a decoded block in one 256-bit register; 8 f32 lanes of
 * scale * (int8 dot) accumulated over the blocks */
#define PG_HAVE_QDOT 1
typedef __m256i pg_q8x32;
static inline pg_q8x32 pg_q8x32_load(const int8_t * q) { return _mm256_loadu_si256((const __m256i *) q); }
static inline void pg_q8x32_store(pg_q8x32 q, int8_t * y) { _mm256_storeu_si256((__m256i *) y, q); }
/* 16 bytes: elements 0..15 the low nibbles, 16..31 the high ones */
static inline pg_q8x32 pg_q8x32_nibbles(const uint8_t * qs) {
    const __m128i b = _mm_loadu_si128((const __m128i *) qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0f));
}
/* 0x10 in lane e where bit e of the little-endian word at qh is set */
static inline pg_q8x32 pg_q8x32_bit4(const uint8_t * qh) {
    int32_t h;
    memcpy(&h, qh, 4);
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((int64_t) 0x8040201008040201ULL);
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(h), spread), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(0x10));
}
static inline pg_q8x32 pg_q8x32_or(pg_q8x32 a, pg_q8x32 b) { return _mm256_or_si256(a, b); }
static inline pg_q8x32 pg_q8x32_sub(pg_q8x32 a, int8_t c) { return _mm256_sub_epi8(a, _mm256_set1_epi8(c)); }
/* each lane (0..15) replaced by table[lane] */
static inline pg_q8x32 pg_q8x32_lut16(pg_q8x32 a, const int8_t * table) {
    const __m128i t = _mm_loadu_si128((const __m128i *) table);
    return _mm256_shuffle_epi8(_mm256_set_m128i(t, t), a);
}

/* 8 int32 partial sums of u (unsigned lanes) times s (signed) */
static inline __m256i pg_x86_dot_us(__m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

typedef __m256 pg_qacc;
static inline pg_qacc pg_qacc_zero(void) { return _mm256_setzero_ps(); }
/* acc += scale * (x . y); x's lanes non-negative when uns, else |x| (unsigned) times sign(x)*y
 * (signed): the unsigned-by-signed products need one unsigned operand */
static inline pg_qacc pg_qacc_add(pg_qacc acc, pg_q8x32 x, const int8_t * y, int uns, float scale) {
    const __m256i qy = _mm256_loadu_si256((const __m256i *) y);
    const __m256i p = uns ? pg_x86_dot_us(x, qy) : pg_x86_dot_us(_mm256_sign_epi8(x, x), _mm256_sign_epi8(qy, x));
    return _mm256_fmadd_ps(_mm256_set1_ps(scale), _mm256_cvtepi32_ps(p), acc);
}
static inline pg_qacc pg_qacc_merge(pg_qacc a, pg_qacc b) { return _mm256_add_ps(a, b); }
static inline float pg_qacc_sum(pg_qacc acc) { return pg_avx2_hsum(acc); }
