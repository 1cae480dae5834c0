/* The one-column GEMV of Q4_K against Q8_K on AVX-512: the vec_dot of quants-k.h and a two-row
 * vec_dot2, included after isa/kquants-x86.h. Each (row, column) pair gets exactly the integers and
 * f32 steps of that file's pg_kq_x86_k4_body (so the GEMV keeps the bits of every other path): per
 * super-block 8 int32 lanes, lane j the sum over the 8 sub-blocks of scale * (elements 4j..4j+3 of
 * the sub-block) * y, then acc += d_x*d_y * lane and the 4 min lanes accm += dmin_x*d_y * (mins .
 * bsum pairs), summed at the end. What differs is the instruction count per super-block (the integer
 * kernel, not the read, bounded the GEMV): the scales unpacked in one register, the nibbles of 32 bytes
 * split into both halves of a register by one affine byte transform (GFNI) of a broadcast load, VNNI's
 * dpwssd in place of madd + add, d and dmin converted and scaled together.
 */
#pragma once

/* pg_kq_unpack_k4 of the block at b (d, dmin, then the 12 scale bytes): bytes 0-7 the scales, 8-15
 * the mins */
static inline __m128i pg_kgv_k4_scales(const void * b) {
    const __m128i v = _mm_loadu_si128((const __m128i *) b);
    const __m128i a = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(3, 2, 3, 1)), _mm_setr_epi32(0, 0, 0, 4));
    const __m128i c = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 2, 1, 1)), 2),
                                    _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm_ternarylogic_epi32(a, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f), c, 0xea);
}

/* 32 bytes at p: their low nibbles in the lower 256 bits, their high nibbles in the upper */
static inline __m512i pg_kgv_nibbles(const uint8_t * p) {
    const __m512i z = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) p));
#if defined(__GFNI__)
    /* bit i of a result byte is the parity of (matrix byte 7 - i) & the source byte */
    const __m512i m = _mm512_setr_epi64(0x0102040800000000, 0x0102040800000000, 0x0102040800000000, 0x0102040800000000,
                                        0x1020408000000000, 0x1020408000000000, 0x1020408000000000, 0x1020408000000000);
    return _mm512_gf2p8affine_epi64_epi8(z, m, 0);
#else
    return _mm512_and_si512(_mm512_mask_srli_epi16(z, 0xffff0000u, z, 4), _mm512_set1_epi8(0xf));
#endif
}

/* R rows of Q4_K (x + r * bx) against one Q8_K row: s[r] */
static inline __attribute__((always_inline)) void pg_kgv_q4_K_body(int64_t nb, const char * x, size_t bx,
                                                                   const pg_block_q8_K * y, const int R, float * s) {
    __m256 acc[2];
    __m128 accm[2];
    for (int r = 0; r < R; r++) {
        acc[r] = _mm256_setzero_ps();
        accm[r] = _mm_setzero_ps();
    }
    /* int16 lanes of the pshufb controls: a scale byte zero-extended; the mins of bytes 8-15 */
    const __m128i mctl = _mm_setr_epi8(8, -1, 9, -1, 10, -1, 11, -1, 12, -1, 13, -1, 14, -1, 15, -1);
    for (int64_t ib = 0; ib < nb; ib++, x += sizeof(pg_block_q4_K)) {
        __m128i sm[2];
        __m512i sumi[2];
        for (int r = 0; r < R; r++) sm[r] = pg_kgv_k4_scales(x + (size_t) r * bx);
        for (int k = 0; k < 4; k++) {
            const __m512i ctl = pg_kq_join(_mm256_set1_epi16((short) (0xff00 | (2 * k))), _mm256_set1_epi16((short) (0xff00 | (2 * k + 1))));
            const __m512i yv = _mm512_loadu_si512((const void *) (y[ib].qs + 64 * k));
            for (int r = 0; r < R; r++) {
                const pg_block_q4_K * b = (const pg_block_q4_K *) (x + (size_t) r * bx);
                const __m512i p = _mm512_maddubs_epi16(pg_kgv_nibbles(b->qs + 32 * k), yv);
                const __m512i sc = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(sm[r]), ctl);
                sumi[r] = k ? _mm512_dpwssd_epi32(sumi[r], p, sc) : _mm512_madd_epi16(p, sc);
            }
        }
        const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *) y[ib].bsums),
                                          _mm_loadu_si128((const __m128i *) (y[ib].bsums + 8)));
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
    for (int r = 0; r < R; r++) s[r] = pg_kq_hsum_ps(acc[r]) - pg_kq_hsum_ps4(accm[r]);
}
