/* The register-tiled integer products of the 32-element block types (quants-legacy.h) on x86, the
 * ISA half of their vec_dot_tile: PG_QGEMM_MR weight rows x up to 4 activation rows (Q8_0/Q8_1) per call,
 * each weight block decoded once for the tile's columns and each activation block loaded once for its
 * rows, the accumulators of every (row, column) pair in registers for the whole row. mul_mat's GEMV
 * and GEMM (matmul.h) both run on it, so a column's result does not depend on N. On AVX2 a call takes
 * up to PG_QGEMM_NC (64) columns, 4 at a time in registers: with more than 4 its weight rows are decoded
 * once into a stack buffer (pg_qgemm_tile_pre) that each group of 4 reads back, the same lanes as the
 * body's own decode; the dearer a type's decode, the more this saves (docs/bench/journal.md).
 *
 * Per block and pair the int8 products are summed exactly in 8 int32 lanes (AVX-512 VNNI dpbusd, else
 * maddubs + madd), converted to f32 and added times d_x*d_y into 8 f32 lanes, as ggml's vec_dot does.
 * With AVX-512 one zmm holds two blocks (the even one in the low 256 bits, the odd one in the high),
 * the even and odd accumulators of the one-column kernel (pg_qdot_body) side by side: the sums are
 * vec_dot_n's bit for bit (Q4_1/Q5_1 add their m*s terms in vector lanes, not in vec_dot_n's order).
 * AVX2 steps two blocks too, one ymm each; hadd folds each block's 8 int32 lanes to 4 and puts both
 * blocks in one 8-lane f32 accumulator, so a step costs one conversion and one FMA per (row, column)
 * (a one-block step would wait on one FMA chain per row, two FMAs a block for Q4_1/Q5_1), and
 * Q4_1/Q5_1 add m*s off that chain. Without VNNI the 4- and 5-bit types fold maddubs'
 * int16 pair sums of both blocks into hadd's lanes before their one madd. Each (row, column) has one
 * accumulator whatever the tile, so a GEMM column equals the GEMV's bit for bit on every x86 build.
 *
 * The products are unsigned x signed with the weights the unsigned side, so the activations need no
 * per-pair sign transfer: Q4_1/Q5_1 codes are >= 0; Q4_0/Q5_0 codes are q + 8 / q + 16, and with VNNI
 * Q8_0/IQ4_NL/MXFP4 values are taken xor 0x80 (q + 128), so x.y = u.y - off*sum(y), the correction
 * (lane by lane, exact) made once per activation block and the dot's starting value. maddubs would
 * saturate on q + 128, so without VNNI those types multiply |x| by sign(x)*y, as the one-column
 * kernel does. MXFP4's E8M0 scales, which fp16 cannot hold, enter as f32 (pg_qgemm_scales_f32).
 *
 * Q8_0, Q4_0, IQ4_NL and MXFP4 with VNNI and GFNI (PG_X86_GEMV) have a tile of their own instead:
 * panels of 16 rows, one lane per row, with exact per-block sums (pg_qp_*, at the end of this file);
 * so have they on AVX2 (qpanel-avx2.h), with the same bits.
 */
#pragma once
#include "arch/x86/panels.h"
#include "arch/x86/amx.h"

#if defined(PG_SIMD_AVX512)
#define PG_QGEMM_MR 4                 /* weight rows per tile: 16 accumulators + 4 rows' codes and scales */
#define PG_QGEMM_NC 4                 /* the most columns a call takes (types.h's tile_nc) */
typedef __m512i pg_qgemm_i;
typedef __m512 pg_qgemm_f;
#if defined(__AVX512VNNI__)
#define PG_QGEMM_VNNI 1
static inline pg_qgemm_i pg_qgemm_dot(pg_qgemm_i acc, pg_qgemm_i u, pg_qgemm_i s) {
    return _mm512_dpbusd_epi32(acc, u, s);
}
#else
#define PG_QGEMM_VNNI 0
static inline pg_qgemm_i pg_qgemm_dot(pg_qgemm_i acc, pg_qgemm_i u, pg_qgemm_i s) {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
}
static inline pg_qgemm_i pg_qgemm_ubs16(pg_qgemm_i u, pg_qgemm_i s) { return _mm512_maddubs_epi16(u, s); }
static inline pg_qgemm_i pg_qgemm_sub16(pg_qgemm_i a, pg_qgemm_i b) { return _mm512_sub_epi16(a, b); }
/* int16 pair sums to f32 lanes */
static inline __m512 pg_qgemm_cvt16(pg_qgemm_i p) {
    return _mm512_cvtepi32_ps(_mm512_madd_epi16(p, _mm512_set1_epi16(1)));
}
#endif
static inline pg_qgemm_i pg_qgemm_zero_i(void) { return _mm512_setzero_si512(); }
static inline pg_qgemm_i pg_qgemm_neg(pg_qgemm_i v) { return _mm512_sub_epi32(_mm512_setzero_si512(), v); }
static inline pg_qgemm_i pg_qgemm_set1_u8(int c) { return _mm512_set1_epi8((char) c); }
static inline pg_qgemm_i pg_qgemm_xor80(pg_qgemm_i v) { return _mm512_xor_si512(v, _mm512_set1_epi8((char) 0x80)); }
static inline pg_qgemm_i pg_qgemm_abs8(pg_qgemm_i x) { return _mm512_abs_epi8(x); }
/* y negated where x < 0 (where x = 0 the other factor, |x|, is 0) */
static inline pg_qgemm_i pg_qgemm_sign8(pg_qgemm_i y, pg_qgemm_i x) {
    return _mm512_mask_sub_epi8(y, _mm512_movepi8_mask(x), _mm512_setzero_si512(), y);
}
static inline pg_qgemm_i pg_qgemm_load(const int8_t * q0, const int8_t * q1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *) q0)),
                              _mm256_loadu_si256((const __m256i *) q1), 1);
}
/* two blocks' 16 bytes: [lo nibbles of q0 | hi nibbles of q0 | lo of q1 | hi of q1] */
static inline pg_qgemm_i pg_qgemm_nibbles(const uint8_t * q0, const uint8_t * q1) {
    const __m256i b = _mm256_set_m128i(_mm_loadu_si128((const __m128i *) q1), _mm_loadu_si128((const __m128i *) q0));
    const __m512i z = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), _mm512_castsi256_si512(b));
    return _mm512_and_si512(_mm512_mask_srli_epi16(z, 0xff00ff00u, z, 4), _mm512_set1_epi8(0x0f));
}
/* + 0x10 in lane e of block k where bit e of the little-endian word at hk is set */
static inline pg_qgemm_i pg_qgemm_add_bit4(pg_qgemm_i v, const uint8_t * h0, const uint8_t * h1) {
    uint32_t a, b;
    memcpy(&a, h0, 4);
    memcpy(&b, h1, 4);
    return _mm512_mask_add_epi8(v, _cvtu64_mask64((uint64_t) b << 32 | a), v, _mm512_set1_epi8(0x10));
}
static inline pg_qgemm_i pg_qgemm_lut16(pg_qgemm_i v, const int8_t * table) {
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *) table)), v);
}
/* the fp16 scales of two blocks, each in its block's 8 lanes */
static inline pg_qgemm_f pg_qgemm_scales(pg_fp16_t h0, pg_fp16_t h1) {
    return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16((short) h1), _mm_set1_epi16((short) h0)));
}
/* two blocks' f32 scales, each in its block's 8 lanes (MXFP4's E8M0 scales, which fp16 cannot hold) */
static inline pg_qgemm_f pg_qgemm_scales_f32(float d0, float d1) {
    return _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(d0), _mm512_set1_ps(d1));
}
/* the same in the first lane of each block only (a term added once per block) */
static inline pg_qgemm_f pg_qgemm_scales1(pg_fp16_t h0, pg_fp16_t h1) {
    return _mm512_cvtph_ps(_mm256_setr_epi32(h0, 0, 0, 0, h1, 0, 0, 0));
}
static inline pg_qgemm_f pg_qgemm_zero_f(void) { return _mm512_setzero_ps(); }
static inline pg_qgemm_f pg_qgemm_mul(pg_qgemm_f a, pg_qgemm_f b) { return _mm512_mul_ps(a, b); }
static inline pg_qgemm_f pg_qgemm_fma(pg_qgemm_f a, pg_qgemm_f b, pg_qgemm_f c) { return _mm512_fmadd_ps(a, b, c); }
static inline pg_qgemm_f pg_qgemm_cvt(pg_qgemm_i p) { return _mm512_cvtepi32_ps(p); }
/* Q4_1/Q5_1 and Q8_1: the scales d (in every lane of a block) and m or s (in its first lane) of two
 * blocks that start with the fp16 pair {d, m} ({d, s}); the twin's zero when !two */
static inline void pg_qgemm_scales_dm(pg_qgemm_f * d, pg_qgemm_f * m, const void * b0, const void * b1, int two) {
    const pg_fp16_t * h0 = (const pg_fp16_t *) b0, * h1 = (const pg_fp16_t *) b1;
    *d = pg_qgemm_scales(h0[0], two ? h1[0] : 0);
    *m = pg_qgemm_scales1(h0[1], two ? h1[1] : 0);
}
/* acc + d_x*d_y * v, then + m*s */
static inline pg_qgemm_f pg_qgemm_acc_dm(pg_qgemm_f acc, pg_qgemm_f xd, pg_qgemm_f xm, pg_qgemm_f yd, pg_qgemm_f ys,
                                         pg_qgemm_f v) {
    return _mm512_fmadd_ps(xm, ys, _mm512_fmadd_ps(_mm512_mul_ps(xd, yd), v, acc));
}
/* even + odd accumulator, then the 8 lanes: pg_qdot_body's pg_qacc_sum(pg_qacc_merge(acc0, acc1)) */
static inline float pg_qgemm_sum(pg_qgemm_f acc) {
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
    return pg_avx2_hsum(_mm256_add_ps(_mm512_castps512_ps256(acc), hi));
}
#else
#define PG_QGEMM_MR 2                 /* 8 accumulators + 2 rows' codes and scales (some in L1) */
#define PG_QGEMM_NC 64                /* the most columns a call takes (types.h's tile_nc): a chunk's */
/* a step's even and odd block, one ymm each; pg_qgemm_cvt sums each block's 8 int32 lanes to 4 and
 * puts the two blocks side by side in one f32 vector (lanes 0, 1, 4, 5 the even block, 2, 3, 6, 7
 * the odd one), so a step costs one conversion and one FMA per accumulator, as with AVX-512 */
typedef struct { __m256i e, o; } pg_qgemm_i;
typedef __m256 pg_qgemm_f;
static inline __m256i pg_qgemm_dot1(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(acc, u, s);
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}
static inline pg_qgemm_i pg_qgemm_two(__m256i e, __m256i o) { pg_qgemm_i v = {e, o}; return v; }
static inline pg_qgemm_i pg_qgemm_dot(pg_qgemm_i acc, pg_qgemm_i u, pg_qgemm_i s) {
    return pg_qgemm_two(pg_qgemm_dot1(acc.e, u.e, s.e), pg_qgemm_dot1(acc.o, u.o, s.o));
}
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
#define PG_QGEMM_VNNI 1
#else
#define PG_QGEMM_VNNI 0
static inline pg_qgemm_i pg_qgemm_ubs16(pg_qgemm_i u, pg_qgemm_i s) {
    return pg_qgemm_two(_mm256_maddubs_epi16(u.e, s.e), _mm256_maddubs_epi16(u.o, s.o));
}
static inline pg_qgemm_i pg_qgemm_sub16(pg_qgemm_i a, pg_qgemm_i b) {
    return pg_qgemm_two(_mm256_sub_epi16(a.e, b.e), _mm256_sub_epi16(a.o, b.o));
}
#endif
static inline pg_qgemm_i pg_qgemm_zero_i(void) { return pg_qgemm_two(_mm256_setzero_si256(), _mm256_setzero_si256()); }
static inline pg_qgemm_i pg_qgemm_neg(pg_qgemm_i v) {
    return pg_qgemm_two(_mm256_sub_epi32(_mm256_setzero_si256(), v.e), _mm256_sub_epi32(_mm256_setzero_si256(), v.o));
}
static inline pg_qgemm_i pg_qgemm_set1_u8(int c) {
    return pg_qgemm_two(_mm256_set1_epi8((char) c), _mm256_set1_epi8((char) c));
}
static inline pg_qgemm_i pg_qgemm_xor80(pg_qgemm_i v) {
    const __m256i k = _mm256_set1_epi8((char) 0x80);
    return pg_qgemm_two(_mm256_xor_si256(v.e, k), _mm256_xor_si256(v.o, k));
}
static inline pg_qgemm_i pg_qgemm_abs8(pg_qgemm_i x) {
    return pg_qgemm_two(_mm256_sign_epi8(x.e, x.e), _mm256_sign_epi8(x.o, x.o));
}
static inline pg_qgemm_i pg_qgemm_sign8(pg_qgemm_i y, pg_qgemm_i x) {
    return pg_qgemm_two(_mm256_sign_epi8(y.e, x.e), _mm256_sign_epi8(y.o, x.o));
}
static inline pg_qgemm_i pg_qgemm_load(const int8_t * q0, const int8_t * q1) {
    return pg_qgemm_two(pg_q8x32_load(q0), pg_q8x32_load(q1));
}
/* pg_q8x32_nibbles with the 16 bytes loaded into both halves and the high one shifted by 4
 * (vpsrlvq): one vector op fewer than a shift and an insert */
static inline __m256i pg_qgemm_nibbles1(const uint8_t * q) {
    const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) q));
    return _mm256_and_si256(_mm256_srlv_epi64(b, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0x0f));
}
static inline pg_qgemm_i pg_qgemm_nibbles(const uint8_t * q0, const uint8_t * q1) {
    return pg_qgemm_two(pg_qgemm_nibbles1(q0), pg_qgemm_nibbles1(q1));
}
static inline pg_qgemm_i pg_qgemm_add_bit4(pg_qgemm_i v, const uint8_t * h0, const uint8_t * h1) {
    return pg_qgemm_two(_mm256_or_si256(v.e, pg_q8x32_bit4(h0)), _mm256_or_si256(v.o, pg_q8x32_bit4(h1)));
}
static inline pg_qgemm_i pg_qgemm_lut16(pg_qgemm_i v, const int8_t * table) {
    return pg_qgemm_two(pg_q8x32_lut16(v.e, table), pg_q8x32_lut16(v.o, table));
}
/* fp16 lanes h0 h0 h1 h1 (twice): the two blocks' scales in their f32 lanes */
static inline pg_qgemm_f pg_qgemm_scales(pg_fp16_t h0, pg_fp16_t h1) {
    return _mm256_cvtph_ps(_mm_blend_epi16(_mm_set1_epi16((short) h0), _mm_set1_epi16((short) h1), 0xcc));
}
/* two blocks' f32 scales in their lanes (MXFP4's E8M0 scales, which fp16 cannot hold) */
static inline pg_qgemm_f pg_qgemm_scales_f32(float d0, float d1) {
    return _mm256_blend_ps(_mm256_set1_ps(d0), _mm256_set1_ps(d1), 0xcc);
}
static inline pg_qgemm_f pg_qgemm_zero_f(void) { return _mm256_setzero_ps(); }
static inline pg_qgemm_f pg_qgemm_mul(pg_qgemm_f a, pg_qgemm_f b) { return _mm256_mul_ps(a, b); }
static inline pg_qgemm_f pg_qgemm_fma(pg_qgemm_f a, pg_qgemm_f b, pg_qgemm_f c) { return _mm256_fmadd_ps(a, b, c); }
static inline pg_qgemm_f pg_qgemm_cvt(pg_qgemm_i p) {
    return _mm256_cvtepi32_ps(_mm256_hadd_epi32(p.e, p.o));
}
#if !PG_QGEMM_VNNI
/* int16 pair sums (|.| <= 2*31*128, so two still fit) added in hadd's lane order, int32 lanes 0, 2
 * of e, 0, 2 of o (4, 6 of e, 4, 6 of o) plus lanes 1, 3 (5, 7), then one madd: one shuffle pair and
 * madd fewer than two madds and hadd, the same int32 sums */
static inline pg_qgemm_f pg_qgemm_cvt16(pg_qgemm_i p) {
    const __m256 e = _mm256_castsi256_ps(p.e), o = _mm256_castsi256_ps(p.o);
    const __m256i s = _mm256_add_epi16(_mm256_castps_si256(_mm256_shuffle_ps(e, o, _MM_SHUFFLE(2, 0, 2, 0))),
                                       _mm256_castps_si256(_mm256_shuffle_ps(e, o, _MM_SHUFFLE(3, 1, 3, 1))));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(s, _mm256_set1_epi16(1)));
}
#endif
/* Q4_1/Q5_1 and Q8_1: the fp16 pairs {d, m} ({d, s}) two blocks start with, as f32 d0 m0 d1 m1 in
 * lanes 0..3 of d (m unused): one conversion per row and step, and per pair one product of both */
static inline void pg_qgemm_scales_dm(pg_qgemm_f * d, pg_qgemm_f * m, const void * b0, const void * b1, int two) {
    uint32_t h0, h1 = 0;
    memcpy(&h0, b0, 4);
    if (two) memcpy(&h1, b1, 4);
    *d = _mm256_castps128_ps256(_mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128((int) h0), (int) h1, 1)));
    *m = _mm256_setzero_ps();
}
/* acc + (d_x*d_y * v + m*s): d_x*d_y spread to the blocks' lanes, m*s in lanes 1 (even block) and 3
 * (odd), off the accumulator's chain */
static inline pg_qgemm_f pg_qgemm_acc_dm(pg_qgemm_f acc, pg_qgemm_f xd, pg_qgemm_f xm, pg_qgemm_f yd, pg_qgemm_f ys,
                                         pg_qgemm_f v) {
    (void) xm;
    (void) ys;
    const __m128 p = _mm_mul_ps(_mm256_castps256_ps128(xd), _mm256_castps256_ps128(yd));
    const __m256 dd = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(p), _mm256_setr_epi32(0, 0, 2, 2, 0, 0, 2, 2));
    const __m256 ms = _mm256_set_m128(_mm_setzero_ps(), _mm_blend_ps(_mm_setzero_ps(), p, 0xa));
    return _mm256_add_ps(acc, _mm256_fmadd_ps(dd, v, ms));
}
static inline float pg_qgemm_sum(pg_qgemm_f acc) { return pg_avx2_hsum(acc); }
#endif

/* how a type's decoded lanes enter the unsigned side: codes >= 0 as they are (Q4_1, Q5_1), codes
 * q + off (Q4_0, Q5_0), signed values (Q8_0, IQ4_NL, MXFP4) */
enum { PG_QGEMM_UNS, PG_QGEMM_OFF, PG_QGEMM_SIGNED };
/* calls of more than 4 columns with rows of up to this many steps decode the weights once */
#define PG_QGEMM_PRE_STEPS 128

/* one step (two blocks) of a weight row: unsigned lanes u, the signed values s (sign trick
 * only), d_x (and m) per block */
typedef struct { pg_qgemm_i u, s; pg_qgemm_f d, m; } pg_qgemm_w;
/* of an activation row: its int8 y, the correction -off*sum(y) per lane, d_y (and s) per block */
typedef struct { pg_qgemm_i y, c; pg_qgemm_f d, s; } pg_qgemm_y;

static inline __attribute__((always_inline)) pg_qgemm_w pg_qgemm_weights(pg_qgemm_i q, int mode) {
    pg_qgemm_w w;
    w.s = q;
    if (mode != PG_QGEMM_SIGNED) w.u = q;
    else w.u = PG_QGEMM_VNNI ? pg_qgemm_xor80(q) : pg_qgemm_abs8(q);
    return w;
}
static inline __attribute__((always_inline)) pg_qgemm_i pg_qgemm_correction(pg_qgemm_i y, int mode, int off) {
    if (mode == PG_QGEMM_UNS || (mode == PG_QGEMM_SIGNED && !PG_QGEMM_VNNI)) return pg_qgemm_zero_i();
#if PG_QGEMM_VNNI
    return pg_qgemm_neg(pg_qgemm_dot(pg_qgemm_zero_i(), pg_qgemm_set1_u8(mode == PG_QGEMM_SIGNED ? 0x80 : off), y));
#else
    return pg_qgemm_ubs16(pg_qgemm_set1_u8(off), y);
#endif
}
/* the f32 lanes of x . y; without VNNI the unsigned types stay in maddubs' int16 pair sums (the
 * offset's share taken off there: |u.y| <= 2*31*128, exact) until pg_qgemm_cvt16 widens them */
static inline __attribute__((always_inline)) pg_qgemm_f pg_qgemm_pair(const pg_qgemm_w * w, const pg_qgemm_y * a,
                                                                      int mode) {
#if !PG_QGEMM_VNNI
    if (mode == PG_QGEMM_SIGNED)
        return pg_qgemm_cvt(pg_qgemm_dot(pg_qgemm_zero_i(), w->u, pg_qgemm_sign8(a->y, w->s)));
    const pg_qgemm_i p = pg_qgemm_ubs16(w->u, a->y);
    return pg_qgemm_cvt16(mode == PG_QGEMM_OFF ? pg_qgemm_sub16(p, a->c) : p);
#else
    return pg_qgemm_cvt(pg_qgemm_dot(a->c, w->u, a->y));
#endif
}

/* How a weight type's lanes enter the tile's unsigned side (mode, off: the enum above), t its pyggml.h
 * type id (PG_TYPE_Q8_0, _Q4_0, _Q4_1, _Q5_0, _Q5_1, _IQ4_NL or _MXFP4), a compile-time constant in every
 * caller, so the switches fold away where the tile is inlined; the rest of its description (block
 * bytes, whether it has a minimum and so Q8_1 activations) is quants-legacy.h's pg_qblock_* */
typedef struct { int mode, off; } pg_qgemm_desc;
PG_ALWAYS_INLINE pg_qgemm_desc pg_qgemm_desc_of(const int t) {
    switch (t) {
    case PG_TYPE_Q4_0: return (pg_qgemm_desc) {PG_QGEMM_OFF, 8};
    case PG_TYPE_Q5_0: return (pg_qgemm_desc) {PG_QGEMM_OFF, 16};
    case PG_TYPE_Q4_1: case PG_TYPE_Q5_1: return (pg_qgemm_desc) {PG_QGEMM_UNS, 0};
    default: return (pg_qgemm_desc) {PG_QGEMM_SIGNED, 0};     /* Q8_0, IQ4_NL, MXFP4 */
    }
}
/* the lanes of blocks b0 and b1 of type t (b1 unused with one block per vector) */
PG_ALWAYS_INLINE pg_qgemm_i pg_qgemm_decode(const int t, const void * b0, const void * b1) {
    switch (t) {
    case PG_TYPE_Q4_0: return pg_qgemm_nibbles(((const pg_block_q4_0 *) b0)->qs, ((const pg_block_q4_0 *) b1)->qs);
    case PG_TYPE_Q4_1: return pg_qgemm_nibbles(((const pg_block_q4_1 *) b0)->qs, ((const pg_block_q4_1 *) b1)->qs);
    case PG_TYPE_Q5_0: {
        const pg_block_q5_0 * x0 = (const pg_block_q5_0 *) b0, * x1 = (const pg_block_q5_0 *) b1;
        return pg_qgemm_add_bit4(pg_qgemm_nibbles(x0->qs, x1->qs), x0->qh, x1->qh);
    }
    case PG_TYPE_Q5_1: {
        const pg_block_q5_1 * x0 = (const pg_block_q5_1 *) b0, * x1 = (const pg_block_q5_1 *) b1;
        return pg_qgemm_add_bit4(pg_qgemm_nibbles(x0->qs, x1->qs), x0->qh, x1->qh);
    }
    case PG_TYPE_IQ4_NL:
        return pg_qgemm_lut16(pg_qgemm_nibbles(((const pg_block_iq4_nl *) b0)->qs, ((const pg_block_iq4_nl *) b1)->qs),
                           pg_iq4nl_values);
    case PG_TYPE_MXFP4:
        return pg_qgemm_lut16(pg_qgemm_nibbles(((const pg_block_mxfp4 *) b0)->qs, ((const pg_block_mxfp4 *) b1)->qs),
                           pg_mxfp4_values);
    default: return pg_qgemm_load(((const pg_block_q8_0 *) b0)->qs, ((const pg_block_q8_0 *) b1)->qs);
    }
}
/* the activation blocks (Q8_1 when min, else Q8_0): their bytes and their int8 values */
PG_ALWAYS_INLINE int pg_qgemm_act_size(const int min) { return min ? sizeof(pg_block_q8_1) : sizeof(pg_block_q8_0); }
PG_ALWAYS_INLINE const int8_t * pg_qgemm_act_qs(const int min, const char * b) {
    return min ? ((const pg_block_q8_1 *) b)->qs : ((const pg_block_q8_0 *) b)->qs;
}
/* the scales of blocks b0, b1 (weights or activations) in their lanes: d, and with min m (s) as
 * pg_qgemm_scales_dm; the twin's zero when !two */
PG_ALWAYS_INLINE void pg_qgemm_block_scales(const int min, const void * b0, const void * b1, const int two,
                                            pg_qgemm_f * d, pg_qgemm_f * m) {
    if (min) pg_qgemm_scales_dm(d, m, b0, b1, two);
    else *d = pg_qgemm_scales(*(const pg_fp16_t *) b0, two ? *(const pg_fp16_t *) b1 : 0);
}

/* one step of a weight row x of type t decoded: its blocks ib and i1 (i1 = ib for an odd last block) */
PG_ALWAYS_INLINE pg_qgemm_w pg_qgemm_tile_w(const int t, const char * x, int64_t ib, int64_t i1, const int two) {
    const char * b0 = x + ib * pg_qblock_size(t), * b1 = x + i1 * pg_qblock_size(t);
    pg_qgemm_w w = pg_qgemm_weights(pg_qgemm_decode(t, b0, b1), pg_qgemm_desc_of(t).mode);
    if (t == PG_TYPE_MXFP4) w.d = pg_qgemm_scales_f32(pg_qblock_d(t, b0), two ? pg_qblock_d(t, b1) : 0.0f);
    else pg_qgemm_block_scales(pg_qblock_min(t), b0, b1, two, &w.d, &w.m);
    return w;
}
/* step ib (blocks ib and ib + 1, or ib alone when !two) of MR weight rows x[r] against nc activation
 * rows y[c] into acc; yd: the column's d_y per step, made once (the one-column GEMV), else NULL; wp:
 * the step's MR rows decoded beforehand (pg_qgemm_tile_pre), else NULL */
PG_ALWAYS_INLINE void pg_qgemm_tile_step(const int t, const char * const * x, const char * const * y, int64_t ib,
                                         const int two, const int MR, const int nc, pg_qgemm_f acc[PG_QGEMM_MR][4],
                                         const pg_qgemm_f * yd, const pg_qgemm_w * wp) {
    const pg_qgemm_desc td = pg_qgemm_desc_of(t);
    const int min = pg_qblock_min(t), ys = pg_qgemm_act_size(min);
    const int64_t i1 = two ? ib + 1 : ib;
    pg_qgemm_w w[PG_QGEMM_MR];
#pragma GCC unroll 4
    for (int r = 0; r < MR; r++) w[r] = wp ? wp[r] : pg_qgemm_tile_w(t, x[r], ib, i1, two);
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++) {
        const char * b0 = y[c] + ib * ys, * b1 = y[c] + i1 * ys;
        pg_qgemm_y a;
        a.y = pg_qgemm_load(pg_qgemm_act_qs(min, b0), pg_qgemm_act_qs(min, b1));
        a.c = pg_qgemm_correction(a.y, td.mode, td.off);
        if (yd) a.d = yd[ib / 2], a.s = pg_qgemm_zero_f();
        else pg_qgemm_block_scales(min, b0, b1, two, &a.d, &a.s);
#pragma GCC unroll 4
        for (int r = 0; r < MR; r++) {
            const pg_qgemm_f p = pg_qgemm_pair(&w[r], &a, td.mode);
            if (min) acc[r][c] = pg_qgemm_acc_dm(acc[r][c], w[r].d, w[r].m, a.d, a.s, p);
            else acc[r][c] = pg_qgemm_fma(pg_qgemm_mul(w[r].d, a.d), p, acc[r][c]);
        }
    }
}
/* the decoded weights of a tile's PG_QGEMM_MR rows (pg_qgemm_tile_w, as a step makes them), step by step,
 * for calls of more than 4 columns: decoded once, read back by each group of 4 */
PG_ALWAYS_INLINE void pg_qgemm_tile_pre(const int t, int64_t n, const void * vx, size_t bx, int mr, pg_qgemm_w * wp) {
    const char * x[PG_QGEMM_MR];
    for (int r = 0; r < PG_QGEMM_MR; r++) x[r] = (const char *) vx + (size_t) PG_MIN(r, mr - 1) * bx;
    const int64_t nb = n / PG_QK;
    for (int64_t ib = 0; ib < nb; ib += 2, wp += PG_QGEMM_MR) {
        const int two = ib + 1 < nb;
        const int64_t i1 = two ? ib + 1 : ib;
#pragma GCC unroll 4
        for (int r = 0; r < PG_QGEMM_MR; r++) wp[r] = pg_qgemm_tile_w(t, x[r], ib, i1, two);
    }
}
/* s[c*lds + r] = x_r . y_c for r < mr, c < nc (a constant, <= 4), in MR (a constant) rows */
PG_ALWAYS_INLINE void pg_qgemm_tile_body(const int t, int64_t n, const void * vx, size_t bx, int mr, const int MR,
                                         const void * vy, size_t by, const int nc, float * s, size_t lds,
                                         const pg_qgemm_f * yd, const pg_qgemm_w * wpre) {
    const char * x[PG_QGEMM_MR];
    const char * y[4];
#pragma GCC unroll 4
    for (int r = 0; r < MR; r++) x[r] = (const char *) vx + (size_t) PG_MIN(r, mr - 1) * bx;
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++) y[c] = (const char *) vy + (size_t) c * by;
    pg_qgemm_f acc[PG_QGEMM_MR][4];
#pragma GCC unroll 4
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
        for (int c = 0; c < nc; c++) acc[r][c] = pg_qgemm_zero_f();
    const int64_t nb = n / PG_QK;
    int64_t ib = 0;
    for (; ib + 1 < nb; ib += 2) pg_qgemm_tile_step(t, x, y, ib, 1, MR, nc, acc, yd, wpre ? wpre + ib / 2 * MR : NULL);
    if (ib < nb) pg_qgemm_tile_step(t, x, y, ib, 0, MR, nc, acc, yd, wpre ? wpre + ib / 2 * MR : NULL);
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++)
#pragma GCC unroll 4
        for (int r = 0; r < mr; r++) s[(size_t) c * lds + r] = pg_qgemm_sum(acc[r][c]);
}
/* the body for nc = 1..4 columns (a constant in each case) and MR rows */
PG_ALWAYS_INLINE void pg_qgemm_tile_cols(const int t, int64_t n, const void * x, size_t bx, int mr, const int MR,
                                         const void * y, size_t by, int nc, float * s, size_t lds,
                                         const pg_qgemm_w * wpre) {
    switch (nc) {
    case 1: pg_qgemm_tile_body(t, n, x, bx, mr, MR, y, by, 1, s, lds, NULL, wpre); break;
    case 2: pg_qgemm_tile_body(t, n, x, bx, mr, MR, y, by, 2, s, lds, NULL, wpre); break;
    case 3: pg_qgemm_tile_body(t, n, x, bx, mr, MR, y, by, 3, s, lds, NULL, wpre); break;
    default: pg_qgemm_tile_body(t, n, x, bx, mr, MR, y, by, 4, s, lds, NULL, wpre); break;
    }
}
/* vec_dot_tile of type t: s[c*lds + r] = x_r . y_c for r < mr (<= PG_QGEMM_MR), c < nc (<= PG_QGEMM_NC);
 * x_r = x + r*bx (rows of t), y_c = y + c*by (Q8_0 or Q8_1 rows). One row (mr = 1) has a loop of
 * its own; other tiles take PG_QGEMM_MR rows, the missing ones repeating the last (computed, not
 * stored). An odd last block pairs with itself, its twin's scales zero */
PG_ALWAYS_INLINE void pg_qgemm_tile(const int t, int64_t n, const void * x, size_t bx, int mr, const void * y,
                                    size_t by, int nc, float * s, size_t lds) {
    const int64_t nstep = (n / PG_QK + 1) / 2;
    if (mr > 1 && nc > 4 && nstep <= PG_QGEMM_PRE_STEPS) {
        pg_qgemm_w wpre[PG_QGEMM_PRE_STEPS * PG_QGEMM_MR];
        pg_qgemm_tile_pre(t, n, x, bx, mr, wpre);
        for (int c0 = 0; c0 < nc; c0 += 4)
            pg_qgemm_tile_cols(t, n, x, bx, mr, PG_QGEMM_MR, (const char *) y + (size_t) c0 * by, by, PG_MIN(4,
                                                                                                             nc - c0),
                            s + (size_t) c0 * lds, lds, wpre);
        return;
    }
    for (int c0 = 0; c0 < nc; c0 += 4) {
        const void * yc = (const char *) y + (size_t) c0 * by;
        float * sc = s + (size_t) c0 * lds;
        if (mr == 1) pg_qgemm_tile_cols(t, n, x, bx, mr, 1, yc, by, PG_MIN(4, nc - c0), sc, lds, NULL);
        else pg_qgemm_tile_cols(t, n, x, bx, mr, PG_QGEMM_MR, yc, by, PG_MIN(4, nc - c0), sc, lds, NULL);
    }
}

#if defined(PG_SIMD_AVX2)
#include "arch/x86/qpanel-avx2.h"   /* Q8_0's, Q4_0's, IQ4_NL's and MXFP4's panels at this level */
#endif
#if !defined(PG_SIMD_AVX512)
/* vec_dot_rows of type t on AVX2 (mul_mat's one-column GEMV): s[r] = x_r . y for r < nr, x_r = vx +
 * r*bx; the column's d_y (and s) vectors converted once for all rows (up to PG_QGEMM_ROWS_STEPS steps: a
 * row of 32K elements; longer rows take the one-row tile), then each row as the
 * one-row tile with them, so the sums are the tile's bit for bit. Each row's step spent about one
 * vector op in seven building d_y (two broadcasts, a blend and a conversion), the same for every
 * row. AVX-512: arch/x86/qgemv-x86.h */
#define PG_QGEMM_ROWS_STEPS 512
PG_ALWAYS_INLINE void pg_qgemm_rows(const int t, int64_t n, const void * vx, size_t bx, int64_t nr, const void * vy,
                                    float * s) {
    const int min = pg_qblock_min(t), ys = pg_qgemm_act_size(min);
    const int64_t nb = n / PG_QK, nstep = (nb + 1) / 2;
    if (nstep > PG_QGEMM_ROWS_STEPS) {
        for (int64_t r = 0; r < nr; r++)
            pg_qgemm_tile(t, n, (const char *) vx + (size_t) r * bx, bx, 1, vy, 0, 1, s + r, 1);
        return;
    }
    pg_qgemm_f yd[PG_QGEMM_ROWS_STEPS];
    for (int64_t k = 0; k < nstep; k++) {
        const int two = 2 * k + 1 < nb;
        const char * b0 = (const char *) vy + 2 * k * ys, * b1 = two ? b0 + ys : b0;
        pg_qgemm_f m;
        pg_qgemm_block_scales(min, b0, b1, two, &yd[k], &m);
        (void) m;
    }
    for (int64_t r = 0; r < nr; r++)
        pg_qgemm_tile_body(t, n, (const char *) vx + (size_t) r * bx, bx, 1, 1, vy, 0, 1, s + r, 1, yd, NULL);
}
static inline void pg_vec_dot_q4_1_rows(int64_t n, const void * x, size_t bx, int64_t nr, const void * y, float * s) {
    pg_qgemm_rows(PG_TYPE_Q4_1, n, x, bx, nr, y, s);
}
static inline void pg_vec_dot_q5_0_rows(int64_t n, const void * x, size_t bx, int64_t nr, const void * y, float * s) {
    pg_qgemm_rows(PG_TYPE_Q5_0, n, x, bx, nr, y, s);
}
static inline void pg_vec_dot_q5_1_rows(int64_t n, const void * x, size_t bx, int64_t nr, const void * y, float * s) {
    pg_qgemm_rows(PG_TYPE_Q5_1, n, x, bx, nr, y, s);
}
#endif

#if defined(PG_X86_GEMV)
/* Q8_0, Q4_0, IQ4_NL and MXFP4 on AVX-512 with VNNI and GFNI: weight rows in panels of 16, one 32-bit
 * lane per row, and another arithmetic than the other types' tiles. Per (row, column) and block b the
 * exact integer sum_b = sum_j x_j y_j, then acc = fma(d_x*d_y, (float) sum_b, acc) in block order from
 * 0 (vec_dot_tile and vec_dot_rows both run it, so a GEMM column equals the GEMV's bit for bit).
 *
 * A panel's block is made from the rows as they are stored (no repacked copy): the code bytes of each
 * row as dwords, transposed so that vector g holds dword g of every row (lane r: row r), and the rows'
 * 16 scales d_x as f32. For the 4-bit types (16 bytes, four dwords) one affine byte transform (GFNI)
 * then gives the low nibbles (elements 4g..4g+3) or the high ones (16+4g..) of all 16 rows, which
 * IQ4_NL and MXFP4 look up in their tables xor 0x80; Q8_0's eight dwords (elements 4g..4g+3) are taken
 * xor 0x80 once per panel block. So dpbusd's unsigned operand is the value + off (off: 8 for Q4_0's
 * codes, 128 for the others), and a column's 8 dword broadcasts of y, dpbusd'd against them in one
 * chain that starts at -off*sum(y), leave each lane its row's exact block sum: about 11 vector
 * operations per 16 rows, column and block.
 *
 * A call takes up to PG_QP_MR rows and PG_QP_NC columns. Up to PG_QP_FEW columns run as the GEMV
 * (pg_qp_cols): each panel's blocks made and used in registers, the next panel prefetched. More
 * columns run against blocks made once per pass of PG_QP_KB for all of them (PG_QP_NCR at a time in
 * registers), the columns' d_y and -off*sum(y) made once for all panels, the accumulators kept
 * between passes. */
#define PG_QP_NCR 8                  /* columns in registers */

/* block b of a panel: q[g] lane r = dword g of row r's codes (the 4-bit types: g < 4; Q8_0: g < 8,
 * xor 0x80); d lane r = row r's d_x */
typedef struct { __m512i q[8]; __m512 d; } pg_qp_blk;

/* the 16 bytes at p[r] + off of 16 rows as four dword vectors: out[g] lane r = dword g of row r */
PG_ALWAYS_INLINE void pg_x16_dwords(const char * const * p, size_t off, __m512i * out) {
    __m512i z[4];
    /* z[a] lane L: the bytes of row 4L + a */
#pragma GCC unroll 4
    for (int a = 0; a < 4; a++) {
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *) (p[a] + off)));
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *) (p[4 + a] + off)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *) (p[8 + a] + off)), 2);
        z[a] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *) (p[12 + a] + off)), 3);
    }
    /* a 4 x 4 dword transpose in each 128-bit lane */
    const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
    out[0] = _mm512_unpacklo_epi64(t0, t2);
    out[1] = _mm512_unpackhi_epi64(t0, t2);
    out[2] = _mm512_unpacklo_epi64(t1, t3);
    out[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* block b's bytes [o, o + 16) of the 16 rows of type t as four dword vectors (out[g] lane r: dword g
 * of row r's); o - pg_x16_hb(t) a multiple of 4 */
PG_ALWAYS_INLINE void pg_x16_dw(const pg_x16_src * s, const int t, int64_t b, size_t o, __m512i * out) {
    if (!s->pk) {
        pg_x16_dwords(s->r, (size_t) b * pg_x16_bsize(t) + o, out);
        return;
    }
    const char * q = s->pk + (size_t) b * pg_x16_pbsize(t) + pg_x16_heads(t) + 16 * (o - pg_x16_hb(t));
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) out[g] = _mm512_loadu_si512((const void *) (q + 64 * g));
}
/* the same for the 32 bytes [o, o + 32): eight dword vectors */
PG_ALWAYS_INLINE void pg_x16_dw32(const pg_x16_src * s, const int t, int64_t b, size_t o, __m512i * out) {
    pg_x16_dw(s, t, b, o, out);
    pg_x16_dw(s, t, b, o + 16, out + 4);
}
/* the 16-bit words at byte o of block b of the 16 rows (lane r: row r's): o = 0 (the head) or o -
 * pg_x16_hb(t) even */
PG_ALWAYS_INLINE __m256i pg_x16_hw(const pg_x16_src * s, const int t, int64_t b, size_t o) {
    if (!s->pk) return pg_x16_words(s->r, (size_t) b * pg_x16_bsize(t) + o);
    const char * q = s->pk + (size_t) b * pg_x16_pbsize(t);
    if (o < pg_x16_hb(t)) return _mm256_loadu_si256((const __m256i *) q);
    const size_t i = o - pg_x16_hb(t);
    __m512i v = _mm512_loadu_si512((const void *) (q + pg_x16_heads(t) + 16 * (i & ~(size_t) 3)));
    if (i & 2) v = _mm512_srli_epi32(v, 16);
    return _mm512_cvtepi32_epi16(v);
}
/* rows [0, nr) of n elements of type t (x + r*bx) repacked into dst, panel p at dst + p * the bytes of
 * a panel, through the accessors that read the rows (so the copy is, by construction, what they
 * read from it) */
PG_ALWAYS_INLINE void pg_x16_pack(const int t, int64_t n, int64_t nr, const char * x, size_t bx, char * dst) {
    const int64_t nb = n / pg_x16_blck(t), np = (nr + PG_QP_R - 1) / PG_QP_R;
    const size_t hb = pg_x16_hb(t), rest = pg_x16_bsize(t) - hb;      /* rest: a multiple of 16 here */
    for (int64_t p = 0; p < np; p++) {
        const pg_x16_src src = pg_x16_panel(x, bx, (int) p, (int) nr, 0);
        for (int64_t b = 0; b < nb; b++) {
            char * q = dst + (size_t) (p * nb + b) * pg_x16_pbsize(t);
            if (hb) {
                __m256i h = pg_x16_hw(&src, t, b, 0);
                if (hb == 1) h = _mm256_and_si256(h, _mm256_set1_epi16(0xff));
                _mm256_storeu_si256((__m256i *) q, h);
            }
            for (size_t o = 0; o < rest; o += 16) {
                __m512i v[4];
                pg_x16_dw(&src, t, b, hb + o, v);
                char * out = q + pg_x16_heads(t) + 16 * o;      /* dword vector o / 4 of the rest */
                for (int g = 0; g < 4; g++) _mm512_storeu_si512((void *) (out + 64 * g), v[g]);
            }
        }
    }
}
/* block b of the panel s of type t */
PG_ALWAYS_INLINE pg_qp_blk pg_qp_block(const pg_x16_src * s, int64_t b, const int t) {
    pg_qp_blk w;
    if (t == PG_TYPE_Q8_0) {
        pg_x16_dw32(s, t, b, pg_qp_qs(t), w.q);
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) w.q[g] = _mm512_xor_si512(w.q[g], _mm512_set1_epi8((char) 0x80));
    } else {
        pg_x16_dw(s, t, b, pg_qp_qs(t), w.q);
    }
    /* the blocks' first two bytes: the fp16 d_x; MXFP4: its E8M0 exponent, then a code byte (0 in a
     * repacked copy) */
    const __m256i hv = pg_x16_hw(s, t, b, 0);
    if (t == PG_TYPE_MXFP4) {
        /* as ggml_e8m0_to_fp32_half: 2^(e-128), for e < 2 the subnormal 0x00200000 << e */
        const __m512i e = _mm512_and_si512(_mm512_cvtepu16_epi32(hv), _mm512_set1_epi32(0xff));
        const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
        const __m512i nrm = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
        w.d = _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)), nrm, sub));
    } else {
        w.d = _mm512_cvtph_ps(hv);
    }
    return w;
}
/* a tile's sums of its panels (acc[p][c], lane r: row 16p + r) to s[c*lds + r], r < mr, c < nc */
PG_ALWAYS_INLINE void pg_qp_store(__m512 (*acc)[PG_QP_NC], int mr, int nc, float * s, size_t lds) {
    for (int p = 0; p < (mr + PG_QP_R - 1) / PG_QP_R; p++) {
        const __mmask16 m = (__mmask16) ((1u << PG_MIN(PG_QP_R, mr - p * PG_QP_R)) - 1);
        for (int c = 0; c < nc; c++) _mm512_mask_storeu_ps(s + (size_t) c * lds + p * PG_QP_R, m, acc[p][c]);
    }
}
/* the low (hi = 0) or high nibbles of every byte: one affine byte transform */
PG_ALWAYS_INLINE __m512i pg_x16_nibbles(__m512i v, const int hi) {
    return _mm512_gf2p8affine_epi64_epi8(v, _mm512_set1_epi64(hi ? 0x1020408000000000 : 0x0102040800000000), 0);
}
/* a panel block's dpbusd operands: lo[g] for the column's elements 4g..4g+3, hi[g] for 16+4g..
 * (the 4-bit types: from the codes' low and high nibbles) */
PG_ALWAYS_INLINE void pg_qp_operands(const pg_qp_blk * w, const int t, __m512i * lo, __m512i * hi) {
    const int8_t * table = t == PG_TYPE_IQ4_NL ? pg_iq4nl_values : pg_mxfp4_values;
    const __m512i lut = _mm512_broadcast_i32x4(_mm_xor_si128(_mm_loadu_si128((const __m128i *) table),
                                                             _mm_set1_epi8((char) 0x80)));
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        if (t == PG_TYPE_Q8_0) {
            lo[g] = w->q[g];
            hi[g] = w->q[4 + g];
        } else {
            lo[g] = pg_x16_nibbles(w->q[g], 0);
            hi[g] = pg_x16_nibbles(w->q[g], 1);
            if (t != PG_TYPE_Q4_0) {
                lo[g] = _mm512_shuffle_epi8(lut, lo[g]);
                hi[g] = _mm512_shuffle_epi8(lut, hi[g]);
            }
        }
    }
}
/* acc + d_x*d_y * (exact block sums) of a panel's block (nibbles lo, hi, scales d) and a column's
 * block (codes q, cb); split: the sums in two dpbusd chains (for few columns: more in flight; the
 * integer sums are exact either way) */
PG_ALWAYS_INLINE __m512 pg_qp_dot(const __m512i * lo, const __m512i * hi, __m512 d, const int8_t * q, pg_qp_col cb,
                                   __m512 acc, const int split) {
    __m512i s = _mm512_set1_epi32(cb.c), t = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        int32_t a, b;
        memcpy(&a, q + 4 * g, 4);
        memcpy(&b, q + 16 + 4 * g, 4);
        s = _mm512_dpbusd_epi32(s, lo[g], _mm512_set1_epi32(a));
        if (split)
            t = _mm512_dpbusd_epi32(t, hi[g], _mm512_set1_epi32(b));
        else
            s = _mm512_dpbusd_epi32(s, hi[g], _mm512_set1_epi32(b));
    }
    if (split)
        s = _mm512_add_epi32(s, t);
    return _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(cb.d)), _mm512_cvtepi32_ps(s), acc);
}
/* NC (a constant, <= PG_QP_NCR) columns y[c] (Q8_0 rows from block b0 on, their blocks' col[c*PG_QP_KB
 * + k]) against kb blocks of a panel w, into acc[c] */
PG_ALWAYS_INLINE void pg_qp_run(const pg_qp_blk * w, int kb, const char * const * y, const pg_qp_col * col,
                                const int NC, __m512 * acc, const int t) {
    for (int k = 0; k < kb; k++) {
        __m512i lo[4], hi[4];
        pg_qp_operands(&w[k], t, lo, hi);
#pragma GCC unroll 8
        for (int c = 0; c < NC; c++)
            acc[c] = pg_qp_dot(lo, hi, w[k].d, ((const pg_block_q8_0 *) y[c])[k].qs, col[c * PG_QP_KB + k], acc[c],
                                NC < 4);
    }
}
/* pg_qp_run for nc (<= PG_QP_NCR) columns, a constant in each case */
PG_ALWAYS_INLINE void pg_qp_run_n(const pg_qp_blk * w, int kb, const char * const * y, const pg_qp_col * col, int nc,
                                  __m512 * acc, const int t) {
    switch (nc) {
    case 1: pg_qp_run(w, kb, y, col, 1, acc, t); break;
    case 2: pg_qp_run(w, kb, y, col, 2, acc, t); break;
    case 3: pg_qp_run(w, kb, y, col, 3, acc, t); break;
    case 4: pg_qp_run(w, kb, y, col, 4, acc, t); break;
    case 5: pg_qp_run(w, kb, y, col, 5, acc, t); break;
    case 6: pg_qp_run(w, kb, y, col, 6, acc, t); break;
    case 7: pg_qp_run(w, kb, y, col, 7, acc, t); break;
    default: pg_qp_run(w, kb, y, col, 8, acc, t); break;
    }
}
/* nc (a constant, <= PG_QP_FEW) columns y_c = vy + c*by against nr rows, s[c*lds + r]: the tile's sums,
 * each panel's blocks made and used in registers (the one-column GEMV and the tile's few columns); the
 * columns' d_y and -off*sum(y) made once per PG_QP_GEMV_KB blocks for up to PG_QP_GEMV_MR rows, whose
 * accumulators wait on the stack between passes. The next panel is prefetched while one runs, up
 * to row nahead (past nr when the caller's next rows follow: a prefetch reads nothing). The rows: vx +
 * r*bx, or (pk, a constant) repacked panels from vx, bx bytes apart (the same for every caller below) */
#define PG_QP_FEW 16
PG_ALWAYS_INLINE void pg_qp_cols(const int t, const int nc, int64_t n, const void * vx, size_t bx, int64_t nr,
                                 int64_t nahead, const void * vy, size_t by, float * s, size_t lds, const int pk) {
    const int64_t nb = n / PG_QK8_0;
    pg_qp_col col[PG_QP_FEW][PG_QP_GEMV_KB];
    __m512 acc[PG_QP_GEMV_MR / PG_QP_R][PG_QP_FEW];
    for (int64_t i0 = 0; i0 < nr; i0 += PG_QP_GEMV_MR) {
        const char * x = (const char *) vx + (size_t) (pk ? i0 / PG_QP_R : i0) * bx;
        const int mr = (int) PG_MIN(PG_QP_GEMV_MR, nr - i0), np = (mr + PG_QP_R - 1) / PG_QP_R;
        for (int p = 0; p < np; p++)
            for (int c = 0; c < nc; c++) acc[p][c] = _mm512_setzero_ps();
        for (int64_t b0 = 0; b0 < nb; b0 += PG_QP_GEMV_KB) {
            const int kb = (int) PG_MIN(PG_QP_GEMV_KB, nb - b0);
            const pg_block_q8_0 * yb[PG_QP_FEW];
            for (int c = 0; c < nc; c++) {
                yb[c] = (const pg_block_q8_0 *) ((const char *) vy + (size_t) c * by) + b0;
                pg_qp_column((const char *) vy + (size_t) c * by, b0, kb, pg_qp_off(t), col[c]);
            }
            for (int p = 0; p < np; p++) {
                const pg_x16_src xr = pg_x16_panel(x, bx, p, mr, pk);
                pg_x16_ahead ahead = pg_x16_ahead_of(t, x, bx, p, i0, nahead, b0, kb, 1, pk);
                __m512 a[PG_QP_FEW];
                for (int c = 0; c < nc; c++) a[c] = acc[p][c];
                for (int k = 0; k < kb; k++) {
                    pg_x16_ahead_step(&ahead);
                    const pg_qp_blk w = pg_qp_block(&xr, b0 + k, t);
                    __m512i lo[4], hi[4];
                    pg_qp_operands(&w, t, lo, hi);
                    for (int c = 0; c < nc; c++) a[c] = pg_qp_dot(lo, hi, w.d, yb[c][k].qs, col[c][k], a[c], 1);
                }
                for (int c = 0; c < nc; c++) acc[p][c] = a[c];
            }
        }
        for (int p = 0; p < np; p++) {
            const __mmask16 m = (__mmask16) ((1u << PG_MIN(PG_QP_R, mr - p * PG_QP_R)) - 1);
            for (int c = 0; c < nc; c++) _mm512_mask_storeu_ps(s + (size_t) c * lds + i0 + p * PG_QP_R, m, acc[p][c]);
        }
    }
}
#if defined(PG_X86_AMX)
/* The tile's many columns on AMX (arch/x86/amx.h): per panel of 16 rows and group of up to 16
 * columns, each block's exact sums from one tdpbssd, A = the columns' Q8_0 codes of the block read
 * in place (rows by apart), B = the panel's block as signed values (pg_qp_operands' bytes less off):
 * B row g is dword g of the 16 rows, and C row c holds column c's 16 row sums, the lanes of the
 * vector kernels' accumulator. Then the same fma(d_x*d_y, (float) sum, acc) per block, in block order,
 * so the bits are pg_qp_cols'. */
#define PG_QP_AMX_B 512               /* bytes of one B tile: 8 rows x 64 */
/* an AMX tile call's start: the accumulators of np panels x nc columns zeroed, the tile configuration
 * found kept in *found and the blocks' one loaded */
PG_ALWAYS_INLINE void pg_amx_tile_begin(__m512 (*acc)[PG_QP_NC], int np, int nc, pg_amx_cfg * found) {
    for (int p = 0; p < np; p++)
        for (int c = 0; c < nc; c++) acc[p][c] = _mm512_setzero_ps();
    pg_amx_save(found);
    pg_amx_config_blocks();
}
/* its end: the configuration found put back, the sums stored */
PG_ALWAYS_INLINE void pg_amx_tile_end(const pg_amx_cfg * found, __m512 (*acc)[PG_QP_NC], int mr, int nc, float * s,
                                      size_t lds) {
    pg_amx_restore(found);
    pg_qp_store(acc, mr, nc, s, lds);
}
/* kb blocks from b0 of the panel xr as B tiles wq[k] and scales wd[k] */
PG_ALWAYS_INLINE void pg_qp_amx_panel(const pg_x16_src * xr, int64_t b0, int kb, const int t, int8_t * wq, __m512 * wd) {
    const __m512i off = _mm512_set1_epi8((char) pg_qp_off(t));
    for (int k = 0; k < kb; k++) {
        const pg_qp_blk w = pg_qp_block(xr, b0 + k, t);
        __m512i lo[4], hi[4];
        pg_qp_operands(&w, t, lo, hi);
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            _mm512_store_si512((__m512i *) (wq + k * PG_QP_AMX_B + 64 * g), _mm512_sub_epi8(lo[g], off));
            _mm512_store_si512((__m512i *) (wq + k * PG_QP_AMX_B + 64 * (4 + g)), _mm512_sub_epi8(hi[g], off));
        }
        wd[k] = w.d;
    }
}
/* a[c] = fma(d_x*d_y, (float) sum, a[c]) over the 16 columns of a group, for one block: its sums
 * cs (row c: column c's, lane r: row r's), d_x wd, the columns' d_y at yd[c*PG_QP_KB] */
PG_ALWAYS_INLINE void pg_qp_amx_scale(const int32_t (*cs)[16], __m512 wd, const float * yd, __m512 * a) {
#pragma GCC unroll 16
    for (int c = 0; c < PG_QP_R; c++) {
        const __m512 dd = _mm512_mul_ps(wd, _mm512_set1_ps(yd[c * PG_QP_KB]));
        a[c] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(_mm512_load_si512((const __m512i *) cs[c])), a[c]);
    }
}
/* acc[c] += the kb blocks of column c (Q8_0 blocks from y + c*by; d_y yd[c*PG_QP_KB + k]) against a
 * panel's. A tile product takes several times as long to finish as to start, so the products of
 * the three blocks after the one being stored and scaled are in flight (four C tiles, block k's in
 * slot k % 4). */
PG_ALWAYS_INLINE void pg_qp_amx_group(const int8_t * wq, const __m512 * wd, int kb, const char * y, size_t by,
                                      const float * yd, int32_t (*cs)[16], __m512 * acc) {
    __m512 a[PG_QP_R];
#pragma GCC unroll 16
    for (int c = 0; c < PG_QP_R; c++) a[c] = acc[c];
    const char * yq = y + offsetof(pg_block_q8_0, qs);
    for (int k = 0; k < PG_MIN(3, kb); k++) pg_amx_block_dp(k, yq + (size_t) k * sizeof(pg_block_q8_0), by, wq + k * PG_QP_AMX_B);
    for (int k0 = 0; k0 < kb; k0 += 4) {
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const int k = k0 + j;
            if (k >= kb) break;
            if (k + 3 < kb)
                pg_amx_block_dp(j + 3, yq + (size_t) (k + 3) * sizeof(pg_block_q8_0), by, wq + (k + 3) * PG_QP_AMX_B);
            pg_amx_block_store(j, cs);
            pg_qp_amx_scale(cs, wd[k], yd + k, a);
        }
    }
#pragma GCC unroll 16
    for (int c = 0; c < PG_QP_R; c++) acc[c] = a[c];
}
/* pg_qp_tile's GEMM of whole groups of 16 columns (nc a multiple of 16) on AMX */
PG_ALWAYS_INLINE void pg_qp_amx_tile(const int t, int64_t n, const void * vx, size_t bx, int mr, const void * vy,
                                     size_t by, int nc, float * s, size_t lds, const int pk) {
    const char * x = (const char *) vx;
    const int64_t nb = n / PG_QK8_0;
    const int np = (mr + PG_QP_R - 1) / PG_QP_R;
    _Alignas(64) int8_t wq[PG_QP_KB * PG_QP_AMX_B];
    _Alignas(64) int32_t cs[16][16];                /* a block's sums */
    __m512 wd[PG_QP_KB];
    float yd[PG_QP_NC * PG_QP_KB];                  /* the columns' d_y per block */
    __m512 acc[PG_QP_MR / PG_QP_R][PG_QP_NC];
    pg_amx_cfg found;
    pg_amx_tile_begin(acc, np, nc, &found);
    for (int64_t b0 = 0; b0 < nb; b0 += PG_QP_KB) {
        const int kb = (int) PG_MIN(PG_QP_KB, nb - b0);
        for (int c = 0; c < nc; c++) {
            const pg_block_q8_0 * yb = (const pg_block_q8_0 *) ((const char *) vy + (size_t) c * by) + b0;
            for (int k = 0; k < kb; k++) yd[c * PG_QP_KB + k] = pg_fp16_to_fp32(yb[k].d);
        }
        for (int p = 0; p < np; p++) {
            const pg_x16_src xr = pg_x16_panel(x, bx, p, mr, pk);
            pg_qp_amx_panel(&xr, b0, kb, t, wq, wd);
            for (int c0 = 0; c0 < nc; c0 += PG_QP_R) {
                const char * y = (const char *) vy + (size_t) c0 * by + (size_t) b0 * sizeof(pg_block_q8_0);
                pg_qp_amx_group(wq, wd, kb, y, by, yd + c0 * PG_QP_KB, cs, acc[p] + c0);
            }
        }
    }
    pg_amx_tile_end(&found, acc, mr, nc, s, lds);
}
#endif
/* vec_dot_tile of type t: s[c*lds + r] = x_r . y_c for r < mr (<= PG_QP_MR), c < nc (<= PG_QP_NC);
 * pk: repacked panels (pg_qp_cols) */
PG_ALWAYS_INLINE void pg_qp_tile(const int t, int64_t n, const void * vx, size_t bx, int mr, const void * vy,
                                 size_t by, int nc, float * s, size_t lds, const int pk) {
#if defined(PG_X86_AMX)
    /* many columns: their whole groups of 16 on AMX where the CPU has it (a group costs the same
     * there however few of its columns are used), the rest as few columns */
    if (nc > PG_QP_FEW && pg_amx_ready()) {
        const int done = nc - nc % PG_QP_R;
        pg_qp_amx_tile(t, n, vx, bx, mr, vy, by, done, s, lds, pk);
        vy = (const char *) vy + (size_t) done * by;
        s += (size_t) done * lds;
        nc -= done;
    }
#endif
    /* few columns: the panels' blocks in registers, as the GEMV; the two panels after the tile's are
     * prefetched, the caller's next rows */
    const int64_t nahead = mr + PG_X16_AHEAD * PG_QP_R;
    switch (nc) {
    case 1: pg_qp_cols(t, 1, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 2: pg_qp_cols(t, 2, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 3: pg_qp_cols(t, 3, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 4: pg_qp_cols(t, 4, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 5: pg_qp_cols(t, 5, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 6: pg_qp_cols(t, 6, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 7: pg_qp_cols(t, 7, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 8: pg_qp_cols(t, 8, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 9: pg_qp_cols(t, 9, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 10: pg_qp_cols(t, 10, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 11: pg_qp_cols(t, 11, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 12: pg_qp_cols(t, 12, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 13: pg_qp_cols(t, 13, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 14: pg_qp_cols(t, 14, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 15: pg_qp_cols(t, 15, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 16: pg_qp_cols(t, 16, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 0: return;
    default: break;
    }
    const char * x = (const char *) vx;
    const int64_t nb = n / PG_QK8_0;
    const int np = (mr + PG_QP_R - 1) / PG_QP_R;
    pg_qp_col col[PG_QP_NC * PG_QP_KB];
    pg_qp_blk w[PG_QP_KB];
    __m512 acc[PG_QP_MR / PG_QP_R][PG_QP_NC];
    for (int p = 0; p < np; p++)
        for (int c = 0; c < nc; c++) acc[p][c] = _mm512_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += PG_QP_KB) {
        const int kb = (int) PG_MIN(PG_QP_KB, nb - b0);
        const char * y[PG_QP_NC];
        for (int c = 0; c < nc; c++) {
            y[c] = (const char *) vy + (size_t) c * by + (size_t) b0 * sizeof(pg_block_q8_0);
            pg_qp_column((const char *) vy + (size_t) c * by, b0, kb, pg_qp_off(t), col + c * PG_QP_KB);
        }
        for (int p = 0; p < np; p++) {
            const pg_x16_src xr = pg_x16_panel(x, bx, p, mr, pk);
            for (int k = 0; k < kb; k++) w[k] = pg_qp_block(&xr, b0 + k, t);
            for (int c0 = 0; c0 < nc; c0 += PG_QP_NCR)
                pg_qp_run_n(w, kb, y + c0, col + c0 * PG_QP_KB, PG_MIN(PG_QP_NCR, nc - c0), acc[p] + c0, t);
        }
    }
    pg_qp_store(acc, mr, nc, s, lds);
}
#endif

#if defined(PG_X86_GEMV) || defined(PG_SIMD_AVX2)
/* the four panel types' one-column GEMV (vec_dot_rows) and tile sizes: the panels of this level,
 * with the same bits at both */
PG_ALWAYS_INLINE void pg_panel_gemv(const int t, int64_t n, const void * vx, size_t bx, int64_t nr, const void * y,
                                    float * s) {
#if defined(PG_X86_GEMV)
    pg_qp_cols(t, 1, n, vx, bx, nr, nr, y, 0, s, 0, 0);
#else
    pg_q2_cols(t, 1, n, vx, bx, nr, nr, y, 0, s, 0, 0);
#endif
}
static inline void pg_vec_dot_q8_0_rows(int64_t n, const void * vx, size_t bx, int64_t nr, const void * y, float * s) {
    pg_panel_gemv(PG_TYPE_Q8_0, n, vx, bx, nr, y, s);
}
static inline void pg_vec_dot_q4_0_rows(int64_t n, const void * vx, size_t bx, int64_t nr, const void * y, float * s) {
    pg_panel_gemv(PG_TYPE_Q4_0, n, vx, bx, nr, y, s);
}
static inline void pg_vec_dot_iq4_nl_rows(int64_t n, const void * vx, size_t bx, int64_t nr, const void * y, float * s) {
    pg_panel_gemv(PG_TYPE_IQ4_NL, n, vx, bx, nr, y, s);
}
static inline void pg_vec_dot_mxfp4_rows(int64_t n, const void * vx, size_t bx, int64_t nr, const void * y, float * s) {
    pg_panel_gemv(PG_TYPE_MXFP4, n, vx, bx, nr, y, s);
}
#define PG_Q4_0_TILE_MR PG_QP_MR
#define PG_Q4_0_TILE_NC PG_QP_NC
#define PG_Q8_0_TILE_MR PG_QP_MR
#define PG_Q8_0_TILE_NC PG_QP_NC
#define PG_IQ4_NL_TILE_MR PG_QP_MR
#define PG_IQ4_NL_TILE_NC PG_QP_NC
#define PG_MXFP4_TILE_MR PG_QP_MR
#define PG_MXFP4_TILE_NC PG_QP_NC
#endif

/* the named entry points (types.h's vec_dot_tile), one per type: the panels where they run (above),
 * else the register tiles */
PG_ALWAYS_INLINE void pg_qtile_of(const int t, int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by,
                                  int nc, float * s, size_t lds) {
#if defined(PG_X86_GEMV) || defined(PG_SIMD_AVX2)
    if (t == PG_TYPE_Q8_0 || t == PG_TYPE_Q4_0 || t == PG_TYPE_IQ4_NL || t == PG_TYPE_MXFP4) {
#if defined(PG_X86_GEMV)
        pg_qp_tile(t, n, x, bx, mr, y, by, nc, s, lds, 0);
#else
        pg_p2_tile(t, n, x, bx, mr, y, by, nc, s, lds, 0);
#endif
        return;
    }
#endif
    pg_qgemm_tile(t, n, x, bx, mr, y, by, nc, s, lds);
}
static inline void pg_vec_dot_q8_0_tile(int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by,
                                        int nc, float * s, size_t lds) {
    pg_qtile_of(PG_TYPE_Q8_0, n, x, bx, mr, y, by, nc, s, lds);
}
static inline void pg_vec_dot_q4_0_tile(int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by,
                                        int nc, float * s, size_t lds) {
    pg_qtile_of(PG_TYPE_Q4_0, n, x, bx, mr, y, by, nc, s, lds);
}
static inline void pg_vec_dot_q4_1_tile(int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by,
                                        int nc, float * s, size_t lds) {
    pg_qtile_of(PG_TYPE_Q4_1, n, x, bx, mr, y, by, nc, s, lds);
}
static inline void pg_vec_dot_q5_0_tile(int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by,
                                        int nc, float * s, size_t lds) {
    pg_qtile_of(PG_TYPE_Q5_0, n, x, bx, mr, y, by, nc, s, lds);
}
static inline void pg_vec_dot_q5_1_tile(int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by,
                                        int nc, float * s, size_t lds) {
    pg_qtile_of(PG_TYPE_Q5_1, n, x, bx, mr, y, by, nc, s, lds);
}
static inline void pg_vec_dot_iq4_nl_tile(int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by,
                                          int nc, float * s, size_t lds) {
    pg_qtile_of(PG_TYPE_IQ4_NL, n, x, bx, mr, y, by, nc, s, lds);
}
static inline void pg_vec_dot_mxfp4_tile(int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by,
                                         int nc, float * s, size_t lds) {
    pg_qtile_of(PG_TYPE_MXFP4, n, x, bx, mr, y, by, nc, s, lds);
}
