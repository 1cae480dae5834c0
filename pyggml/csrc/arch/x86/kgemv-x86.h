/* The one-row bodies of Q4_K, Q6_K and IQ4_XS against Q8_K on AVX-512 with VNNI and GFNI: dot-k.h's
 * vec_dot of those types, and the vec_dot_rows of Q6_K and IQ4_XS (Q4_K's and Q5_K's are the panels
 * of arch/x86/kgemm-x86.h): mul_mat's GEMV, a thread's whole row range in one call, row i and row
 * i + h of it dotted together, two read streams, the activation loads shared (pg_kgemv_rows and
 * the named entry points at the end of arch/x86/kgemv2-x86.h). Each (row, column) pair gets exactly
 * the integers and f32 steps of arch/x86/kquants-x86.h's kernels (so the GEMV keeps the bits of the
 * multi-column and tile paths): per super-block 8 int32 lanes, lane j the sum over the groups of
 * scale * (elements 4j..4j+3 of the group) * y, then acc += d_x*d_y * lane (Q4_K: and the 4 min
 * lanes += dmin_x*d_y * mins . bsum pairs), summed at the end; except Q6_K, whose tile is the
 * panels' (arch/x86/kgemm-x86.h): its lanes' exact total (the offset term among them), then one fma
 * per super-block. What differs is the instruction count per super-block, which bounds the
 * one-column GEMV at one thread (the weights are read once and the kernel issues ~45 vector
 * instructions per 144-210 bytes): the Q4_K and IQ4_XS scales unpacked in one register, nibbles and
 * Q6_K's high bit pairs moved into place by one affine byte transform (GFNI) of a broadcast load,
 * VNNI's dpbusd/dpwssd in place of madd + add, d and dmin converted and scaled together.
 */
#pragma once
#include "arch/x86/kquants-x86.h"

/* pg_kq_unpack_k4 of the block at b (d, dmin, then the 12 scale bytes): bytes 0-7 the scales, 8-15
 * the mins */
static inline __m128i pg_kgemv_k4_scales(const void * b) {
    const __m128i v = _mm_loadu_si128((const __m128i *) b);
    const __m128i a = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(3, 2, 3, 1)), _mm_setr_epi32(0, 0, 0, 4));
    const __m128i c = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 2, 1, 1)), 2),
                                    _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm_ternarylogic_epi32(a, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f), c, 0xea);
}

/* 32 bytes at p: their low nibbles in the lower 256 bits, their high nibbles in the upper */
static inline __m512i pg_kgemv_nibbles(const uint8_t * p) {
    const __m512i z = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) p));
    /* bit i of a result byte is the parity of (matrix byte 7 - i) & the source byte */
    const __m512i m = _mm512_setr_epi64(0x0102040800000000, 0x0102040800000000, 0x0102040800000000, 0x0102040800000000,
                                        0x1020408000000000, 0x1020408000000000, 0x1020408000000000, 0x1020408000000000);
    return _mm512_gf2p8affine_epi64_epi8(z, m, 0);
}

/* raw[0] | raw[1] << 16: two registers of 4-element sums (each |lane| < 2^15, so its low int16 is the
 * value) paired in the int16 halves of the lanes for one dpwssd */
static inline __m512i pg_kgemv_pair(__m512i lo, __m512i hi) {
    return _mm512_ternarylogic_epi32(lo, _mm512_set1_epi32(0xffff), _mm512_slli_epi32(hi, 16), 0xea);
}

/* a super-block's f32 step: acc += d_x*d_y * the 8 folded int32 lanes of sumi */
static inline __m256 pg_kgemv_step(__m256 acc, pg_fp16_t dx, float dy, __m512i sumi) {
    return _mm256_fmadd_ps(_mm256_set1_ps(pg_fp16_to_fp32(dx) * dy), _mm256_cvtepi32_ps(pg_kq_fold(sumi)), acc);
}

/* R rows of Q4_K (x + r * bx) against one Q8_K row: s[r] (Q4_K's vec_dot; its GEMV and Q5_K's are the
 * panels of arch/x86/kgemm-x86.h) */
static inline __attribute__((always_inline)) void pg_kgemv_k4_body(int64_t nb, const char * x, size_t bx,
                                                                 const pg_block_q8_K * y, const int R, float * s) {
    const size_t bsz = sizeof(pg_block_q4_K);
    const size_t oqs = offsetof(pg_block_q4_K, qs);
    __m256 acc[2];
    __m128 accm[2];
    for (int r = 0; r < R; r++) {
        acc[r] = _mm256_setzero_ps();
        accm[r] = _mm_setzero_ps();
    }
    /* int16 lanes of the pshufb controls: a scale byte zero-extended; the mins of bytes 8-15 */
    const __m128i mctl = _mm_setr_epi8(8, -1, 9, -1, 10, -1, 11, -1, 12, -1, 13, -1, 14, -1, 15, -1);
    /* R == 2: both rows' accumulators in one register, mctl for each 128-bit half, the lanes of f to
     * broadcast (row 0's d, dmin in f lanes 0, 1; row 1's in 2, 3) */
    __m512 acc2 = _mm512_setzero_ps();
    __m256 accm2 = _mm256_setzero_ps();
    const __m256i mctl2 = _mm256_broadcastsi128_si256(mctl);
    const __m256i im2 = _mm256_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3);
    const __m512i id2 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
    for (int64_t ib = 0; ib < nb; ib++, x += bsz) {
        __m128i sm[2];
        __m512i sumi[2];
        for (int r = 0; r < R; r++) sm[r] = pg_kgemv_k4_scales(x + (size_t) r * bx);
        /* chunk k (sub-blocks 2k | 2k + 1): its 16 int32 lanes of q . y (4 elements each, |sum| < 2^15),
         * chunks 2t and 2t + 1 then paired in the int16 halves of one register and scaled by one dpwssd:
         * lanes 0-7 by (s[4t], s[4t + 2]), lanes 8-15 by (s[4t + 1], s[4t + 3]) */
        __m512i raw[2][4];
        for (int k = 0; k < 4; k++) {
            const __m512i yv = _mm512_loadu_si512((const void *) (y[ib].qs + 64 * k));
            for (int r = 0; r < R; r++) {
                const __m512i q = pg_kgemv_nibbles((const uint8_t *) x + (size_t) r * bx + oqs + 32 * k);
                raw[r][k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, yv);
            }
        }
        for (int r = 0; r < R; r++) {
            const __m512i sv = _mm512_broadcast_i32x4(sm[r]);
            for (int t = 0; t < 2; t++) {
                const __m512i ctl = pg_kq_join(_mm256_set1_epi32((int) (0x80008000u | (4 * t + 2) << 16 | (4 * t))),
                                               _mm256_set1_epi32((int) (0x80008000u | (4 * t + 3) << 16 | (4 * t + 1))));
                const __m512i pair = pg_kgemv_pair(raw[r][2 * t], raw[r][2 * t + 1]);
                const __m512i sc = _mm512_shuffle_epi8(sv, ctl);
                sumi[r] = t ? _mm512_dpwssd_epi32(sumi[r], pair, sc) : _mm512_madd_epi16(pair, sc);
            }
        }
        const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *) y[ib].bsums),
                                          _mm_loadu_si128((const __m128i *) (y[ib].bsums + 8)));
        if (R == 2) {
            /* the two rows' f32 steps side by side, lane for lane the operations of the R == 1 branch
             * (so the same bits): row 0 in the lower half of acc2/accm2, row 1 in the upper, one
             * convert and one fma each instead of two */
            int32_t d0, d1;
            memcpy(&d0, x, sizeof(d0));
            memcpy(&d1, x + bx, sizeof(d1));
            /* d_x * d_y, dmin_x * d_y of row 0, then of row 1 */
            const __m128 f = _mm_mul_ps(_mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128(d0), d1, 1)),
                                        _mm_set1_ps(y[ib].d));
            const __m256i m = _mm256_madd_epi16(
                _mm256_shuffle_epi8(_mm256_inserti128_si256(_mm256_castsi128_si256(sm[0]), sm[1], 1), mctl2),
                _mm256_broadcastsi128_si256(bs));
            accm2 = _mm256_fmadd_ps(_mm256_permutexvar_ps(im2, _mm256_castps128_ps256(f)), _mm256_cvtepi32_ps(m), accm2);
            /* pg_kq_fold of row 0 | of row 1 */
            const __m512i fo = _mm512_add_epi32(_mm512_shuffle_i64x2(sumi[0], sumi[1], 0x44),
                                                _mm512_shuffle_i64x2(sumi[0], sumi[1], 0xee));
            acc2 = _mm512_fmadd_ps(_mm512_permutexvar_ps(id2, _mm512_castps128_ps512(f)), _mm512_cvtepi32_ps(fo), acc2);
            continue;
        }
        for (int r = 0; r < R; r++) {
            int32_t dd;
            memcpy(&dd, x + (size_t) r * bx, sizeof(dd));
            /* d_x * d_y, dmin_x * d_y */
            const __m128 f = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(dd)), _mm_set1_ps(y[ib].d));
            const __m128i m = _mm_madd_epi16(_mm_shuffle_epi8(sm[r], mctl), bs);
            accm[r] = _mm_fmadd_ps(_mm_permute_ps(f, 0x55), _mm_cvtepi32_ps(m), accm[r]);
            acc[r] = _mm256_fmadd_ps(_mm256_broadcastss_ps(f), _mm256_cvtepi32_ps(pg_kq_fold(sumi[r])), acc[r]);
        }
    }
    if (R == 2) {
        acc[0] = _mm512_castps512_ps256(acc2);
        acc[1] = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc2), 1));
        accm[0] = _mm256_castps256_ps128(accm2);
        accm[1] = _mm256_extractf128_ps(accm2, 1);
    }
    for (int r = 0; r < R; r++) s[r] = pg_kq_hsum_ps(acc[r]) - pg_kq_hsum_ps4(accm[r]);
}

/* R rows of Q6_K against one Q8_K row: s[r]. The values q (0..63) are dotted as pg_kq_q6_block
 * does, the 32 * sum(scale * bsums) of the -32 offset starting the lower 8 int32 lanes; the two high
 * bits of each q moved from qh to bits 4-5 by one affine byte transform per register. The f32 steps
 * are the panels' (arch/x86/kgemm-x86.h pg_k6p_*, Q6_K's vec_dot_tile here), not
 * arch/x86/kquants-x86.h's: per super-block the lanes' exact total sumi, then acc = fma(d_x*d_y,
 * sumi, acc) */
static inline __attribute__((always_inline)) void pg_kgemv_q6_K_body(int64_t nb, const char * x, size_t bx,
                                                                   const pg_block_q8_K * y, const int R, float * s) {
    float acc[2] = {0.0f, 0.0f};
    const __m512i m4 = _mm512_set1_epi8(0xf);
    /* quarters 0 | 1 and 2 | 3 of a half: qh bits 2j, 2j + 1 to bits 4, 5 (matrix bytes 3 and 2) */
    const __m512i h01 = _mm512_setr_epi64(0x01020000, 0x01020000, 0x01020000, 0x01020000, 0x04080000, 0x04080000, 0x04080000, 0x04080000);
    const __m512i h23 = _mm512_setr_epi64(0x10200000, 0x10200000, 0x10200000, 0x10200000, 0x40800000, 0x40800000, 0x40800000, 0x40800000);
    for (int64_t ib = 0; ib < nb; ib++, x += sizeof(pg_block_q6_K)) {
        const __m256i nbs = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_loadu_si256((const __m256i *) y[ib].bsums));
        __m512i sc16[2], sumi[2];
        for (int r = 0; r < R; r++) {
            const pg_block_q6_K * b = (const pg_block_q6_K *) (x + (size_t) r * bx);
            const __m256i s = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) b->scales));
            sc16[r] = _mm512_castsi256_si512(s);
            sumi[r] = _mm512_zextsi256_si512(_mm256_madd_epi16(_mm256_slli_epi16(s, 5), nbs));
        }
        for (int h = 0; h < 2; h++) {
            const __m512i ya = _mm512_loadu_si512((const void *) (y[ib].qs + 128 * h));
            const __m512i yb = _mm512_loadu_si512((const void *) (y[ib].qs + 128 * h + 64));
            for (int r = 0; r < R; r++) {
                const pg_block_q6_K * b = (const pg_block_q6_K *) (x + (size_t) r * bx);
                const __m512i ql = _mm512_loadu_si512((const void *) (b->ql + 64 * h));
                const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) (b->qh + 32 * h)));
                const __m512i va = _mm512_ternarylogic_epi32(ql, m4, _mm512_gf2p8affine_epi64_epi8(qh, h01, 0), 0xea);
                const __m512i vb = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), m4,
                                                             _mm512_gf2p8affine_epi64_epi8(qh, h23, 0), 0xea);
                sumi[r] = _mm512_dpwssd_epi32(sumi[r], _mm512_maddubs_epi16(va, ya), pg_kq_scales4(sc16[r], 8 * h));
                sumi[r] = _mm512_dpwssd_epi32(sumi[r], _mm512_maddubs_epi16(vb, yb), pg_kq_scales4(sc16[r], 8 * h + 4));
            }
        }
        for (int r = 0; r < R; r++)
            acc[r] = __builtin_fmaf(pg_fp16_to_fp32(((const pg_block_q6_K *) (x + (size_t) r * bx))->d) * y[ib].d,
                                    (float) _mm512_reduce_add_epi32(sumi[r]), acc[r]);
    }
    for (int r = 0; r < R; r++) s[r] = acc[r];
}

/* R rows of IQ4_XS against one Q8_K row: s[r]. As pg_kq_x86_iq4_xs_body: |value| (a table of
 * pg_iq4nl_values' magnitudes) times y negated where the value is negative (codes 0-7), the blocks'
 * scales (ls - 32) on the int16 pairs; the 8 scales of a super-block taken from scales_l/scales_h by
 * two multishifts (bit 32 + 4 ib: the low 4 bits, bit 16 + 2 ib: the high 2, moved to bits 4-5) */
static inline __attribute__((always_inline)) void pg_kgemv_iq4_xs_body(int64_t nb, const char * x, size_t bx,
                                                                     const pg_block_q8_K * y, const int R, float * s) {
    __m256 acc[2];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    const __m512i lut = _mm512_broadcast_i32x4(_mm_abs_epi8(_mm_loadu_si128((const __m128i *) pg_iq4nl_values)));
    const __m512i nib = _mm512_setr_epi64(0x0102040800000000, 0x0102040800000000, 0x1020408000000000, 0x1020408000000000,
                                          0x0102040800000000, 0x0102040800000000, 0x1020408000000000, 0x1020408000000000);
    const __m128i lo = _mm_set1_epi64x(0x3c3834302c282420), hi = _mm_set1_epi64x(0x1a18161412100e0c);
    for (int64_t ib = 0; ib < nb; ib++, x += sizeof(pg_block_iq4_xs)) {
        __m512i sc16[2], sumi[2];
        for (int r = 0; r < R; r++) {
            const __m128i v = _mm_loadl_epi64((const __m128i *) (x + (size_t) r * bx));
            const __m128i ls = _mm_ternarylogic_epi32(_mm_multishift_epi64_epi8(lo, v), _mm_set1_epi8(0xf),
                                                      _mm_and_si128(_mm_multishift_epi64_epi8(hi, v), _mm_set1_epi8(0x30)), 0xea);
            sc16[r] = _mm512_broadcast_i32x4(_mm_sub_epi16(_mm_cvtepu8_epi16(ls), _mm_set1_epi16(32)));
            sumi[r] = _mm512_setzero_si512();
        }
        for (int k = 0; k < 4; k++) {
            const __m512i yv = _mm512_loadu_si512((const void *) (y[ib].qs + 64 * k));
            /* int16 lanes: scale 2k in the lower 256 bits, 2k + 1 in the upper */
            const __m512i ctl = pg_kq_join(_mm256_set1_epi16((short) ((4 * k + 1) << 8 | (4 * k))),
                                           _mm256_set1_epi16((short) ((4 * k + 3) << 8 | (4 * k + 2))));
            for (int r = 0; r < R; r++) {
                const pg_block_iq4_xs * b = (const pg_block_iq4_xs *) (x + (size_t) r * bx);
                const __m512i q = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *) (b->qs + 32 * k)));
                /* bytes 0-15 | 0-15 | 16-31 | 16-31: their low, high, low, high nibbles (the elements in order) */
                const __m512i c = _mm512_gf2p8affine_epi64_epi8(_mm512_shuffle_i64x2(q, q, 0x50), nib, 0);
                const __m512i ys = _mm512_mask_sub_epi8(yv, _mm512_testn_epi8_mask(c, _mm512_set1_epi8(8)), _mm512_setzero_si512(), yv);
                sumi[r] = _mm512_dpwssd_epi32(sumi[r], _mm512_maddubs_epi16(_mm512_shuffle_epi8(lut, c), ys),
                                              _mm512_shuffle_epi8(sc16[r], ctl));
            }
        }
        for (int r = 0; r < R; r++)
            acc[r] = pg_kgemv_step(acc[r], ((const pg_block_iq4_xs *) (x + (size_t) r * bx))->d, y[ib].d, sumi[r]);
    }
    for (int r = 0; r < R; r++) s[r] = pg_kq_hsum_ps(acc[r]);
}
