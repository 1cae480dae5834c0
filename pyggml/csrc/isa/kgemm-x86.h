/* The register-tiled K-quant products on AVX-512 (the ISA half of quants-k.h's vec_dot_tile, included
 * after isa/kquants-x86.h): PG_KG_MR weight rows x up to 4 Q8_K activation rows per pass, each weight
 * register decoded once for the tile's columns and each activation register loaded once for its rows.
 *
 * A (row, column) pair gets exactly the integers and f32 steps of isa/kquants-x86.h's one-row kernels
 * (so the GEMM has the GEMV's bits): per super-block its 16 int32 lanes of scale * q * y (the same
 * products in the same lanes; VNNI's dpwssd is madd + add in one instruction, exact either way), folded
 * to 8, then the 8 f32 lanes += d_x*d_y * sum. The f32 steps of two columns share one register (lanes
 * 0-7 and 8-15), Q4_K/Q5_K's 4 min lanes of four columns one register: lane for lane the one-row
 * kernel's operations, fewer instructions. One row (mr = 1, the GEMV) runs the one-row kernel itself.
 */
#pragma once

#define PG_KG_MR 2                 /* rows per pass: 2 x 4 int32 sums + 2 x 2 f32 accumulators + codes */

static inline __m512i pg_kg_dot16(__m512i acc, __m512i p, __m512i sc) {
#if defined(__AVX512VNNI__)
    return _mm512_dpwssd_epi32(acc, p, sc);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p, sc));
#endif
}
/* [fold(a) | fold(b)]: pg_kq_fold of two columns' sums, side by side */
static inline __m512i pg_kg_fold2(__m512i a, __m512i b) {
    return _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, 0x44), _mm512_shuffle_i64x2(a, b, 0xee));
}
/* f32 lanes 0-7 = a, 8-15 = b */
static inline __m512 pg_kg_set2(float a, float b) {
    return _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(a), _mm512_set1_ps(b));
}
/* 8 f32 lanes of a two-column accumulator: column h */
static inline __m256 pg_kg_half(__m512 v, int h) {
    return h ? _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)) : _mm512_castps512_ps256(v);
}

/* the column-pair index of column c, and the column that fills an odd count's last pair */
#define PG_KG_PAIRS(NC) (((NC) + 1) / 2)
#define PG_KG_TWIN(c, NC) ((c) + 1 < (NC) ? (c) + 1 : (c))

/* Q4_K (q5 false) and Q5_K: MR rows of bx-byte blocks from xb (rows bx_row apart) x NC columns */
static inline __attribute__((always_inline)) void pg_kg_k4_body(int64_t nb, const char * xb, size_t bx_row, size_t bx,
                                                                size_t off_qs, const void * vy, size_t by,
                                                                const int MR, const int NC, float * s, size_t lds,
                                                                bool q5) {
    const __m512i m4 = _mm512_set1_epi8(0xf), m1 = _mm512_set1_epi8(1);
    __m512 acc[PG_KG_MR][2], accm[PG_KG_MR];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < MR; r++) {
        accm[r] = _mm512_setzero_ps();
        _Pragma("GCC unroll 2")
        for (int p = 0; p < PG_KG_PAIRS(NC); p++) acc[r][p] = _mm512_setzero_ps();
    }
    for (int64_t ib = 0; ib < nb; ib++) {
        const int8_t * yq[4];
        float dy[4];
        _Pragma("GCC unroll 4")
        for (int c = 0; c < NC; c++) {
            const pg_block_q8_K * y = pg_kq_col(vy, by, c, ib);
            yq[c] = y->qs;
            dy[c] = y->d;
        }
        const uint8_t * qs[PG_KG_MR], * qh[PG_KG_MR];
        __m512i sv[PG_KG_MR], mins[PG_KG_MR], sumi[PG_KG_MR][4];
        float dx[PG_KG_MR], dmx[PG_KG_MR];
        _Pragma("GCC unroll 4")
        for (int r = 0; r < MR; r++) {
            const char * b = xb + (size_t) r * bx_row + (size_t) ib * bx;
            const pg_block_q4_K * k = (const pg_block_q4_K *) b;
            uint8_t sm[16];
            pg_kq_unpack_k4(k->scales, sm);
            sv[r] = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *) sm)));
            mins[r] = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *) (sm + 8))));
            qs[r] = (const uint8_t *) b + off_qs;
            qh[r] = q5 ? ((const pg_block_q5_K *) b)->qh : NULL;
            dx[r] = pg_fp16_to_fp32(k->d);
            dmx[r] = pg_fp16_to_fp32(k->dmin);
            _Pragma("GCC unroll 4")
            for (int c = 0; c < NC; c++) sumi[r][c] = _mm512_setzero_si512();
        }
        _Pragma("GCC unroll 4")
        for (int k = 0; k < 4; k++) {
            const __m512i ctl = pg_kq_join(_mm256_set1_epi16((short) ((4 * k + 1) << 8 | (4 * k))),
                                           _mm256_set1_epi16((short) ((4 * k + 3) << 8 | (4 * k + 2))));
            __m512i v[PG_KG_MR], sc[PG_KG_MR];
            _Pragma("GCC unroll 4")
            for (int r = 0; r < MR; r++) {
                /* chunk k's low nibbles (scale 2k) in the lower half, its high nibbles in the upper */
                const __m512i z = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) (qs[r] + 32 * k)));
                v[r] = _mm512_and_si512(_mm512_mask_srli_epi16(z, 0xffff0000u, z, 4), m4);
                if (q5) {
                    const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) qh[r]));
                    const __m512i hk = _mm512_mask_srli_epi16(_mm512_srli_epi16(h, 2 * k), 0xffff0000u,
                                                              _mm512_srli_epi16(h, 2 * k), 1);
                    v[r] = _mm512_or_si512(v[r], _mm512_slli_epi16(_mm512_and_si512(hk, m1), 4));
                }
                sc[r] = _mm512_shuffle_epi8(sv[r], ctl);
            }
            _Pragma("GCC unroll 4")
            for (int c = 0; c < NC; c++) {
                const __m512i yv = _mm512_loadu_si512((const void *) (yq[c] + 64 * k));
                _Pragma("GCC unroll 4")
                for (int r = 0; r < MR; r++) sumi[r][c] = pg_kg_dot16(sumi[r][c], _mm512_maddubs_epi16(v[r], yv), sc[r]);
            }
        }
        /* the mins: the four columns' hadd'ed bsums in the four 128-bit lanes */
        __m128i bs[4];
        _Pragma("GCC unroll 4")
        for (int c = 0; c < 4; c++) {
            const pg_block_q8_K * y = pg_kq_col(vy, by, PG_MIN(c, NC - 1), ib);
            bs[c] = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *) y->bsums), _mm_loadu_si128((const __m128i *) (y->bsums + 8)));
        }
        const __m512i bs4 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(bs[1], bs[0])),
                                               _mm256_set_m128i(bs[3], bs[2]), 1);
        const __m512 dy4 = _mm512_setr_ps(dy[0], dy[0], dy[0], dy[0], dy[PG_MIN(1, NC - 1)], dy[PG_MIN(1, NC - 1)],
                                          dy[PG_MIN(1, NC - 1)], dy[PG_MIN(1, NC - 1)], dy[PG_MIN(2, NC - 1)],
                                          dy[PG_MIN(2, NC - 1)], dy[PG_MIN(2, NC - 1)], dy[PG_MIN(2, NC - 1)],
                                          dy[NC - 1], dy[NC - 1], dy[NC - 1], dy[NC - 1]);
        _Pragma("GCC unroll 4")
        for (int r = 0; r < MR; r++) {
            const __m512 m = _mm512_cvtepi32_ps(_mm512_madd_epi16(mins[r], bs4));
            accm[r] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(dmx[r]), dy4), m, accm[r]);
            _Pragma("GCC unroll 2")
            for (int p = 0; p < PG_KG_PAIRS(NC); p++) {
                const int c0 = 2 * p, c1 = PG_KG_TWIN(2 * p, NC);
                const __m512 f = _mm512_cvtepi32_ps(pg_kg_fold2(sumi[r][c0], sumi[r][c1]));
                acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(dx[r]), pg_kg_set2(dy[c0], dy[c1])), f, acc[r][p]);
            }
        }
    }
    _Pragma("GCC unroll 4")
    for (int r = 0; r < MR; r++) {
        _Pragma("GCC unroll 4")
        for (int c = 0; c < NC; c++) {
            const __m128 m = _mm512_extractf32x4_ps(accm[r], c);
            s[(size_t) c * lds + r] = pg_kq_hsum_ps(pg_kg_half(acc[r][c / 2], c % 2)) - pg_kq_hsum_ps4(m);
        }
    }
}

/* Q6_K: MR rows (bx_row bytes apart) x NC columns; the 6-bit values q dotted, 32 * sum(scale * bsums)
 * taken off, as pg_kq_x86_q6_K_body */
static inline __attribute__((always_inline)) void pg_kg_q6_K_body(int64_t nb, const char * xb, size_t bx_row,
                                                                  const void * vy, size_t by, const int MR, const int NC,
                                                                  float * s, size_t lds) {
    const __m512i m4 = _mm512_set1_epi8(0xf), m3 = _mm512_set1_epi8(3);
    __m512 acc[PG_KG_MR][2];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < MR; r++)
        _Pragma("GCC unroll 2")
        for (int p = 0; p < PG_KG_PAIRS(NC); p++) acc[r][p] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const int8_t * yq[4];
        _Pragma("GCC unroll 4")
        for (int c = 0; c < NC; c++) yq[c] = pg_kq_col(vy, by, c, ib)->qs;
        const pg_block_q6_K * x[PG_KG_MR];
        __m512i sv[PG_KG_MR], sumi[PG_KG_MR][4];
        _Pragma("GCC unroll 4")
        for (int r = 0; r < MR; r++) {
            x[r] = (const pg_block_q6_K *) (xb + (size_t) r * bx_row) + ib;
            sv[r] = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) x[r]->scales)));
            _Pragma("GCC unroll 4")
            for (int c = 0; c < NC; c++) sumi[r][c] = _mm512_setzero_si512();
        }
        _Pragma("GCC unroll 2")
        for (int h = 0; h < 2; h++) {
            __m512i va[PG_KG_MR], vb[PG_KG_MR], sa[PG_KG_MR], sb[PG_KG_MR];
            _Pragma("GCC unroll 4")
            for (int r = 0; r < MR; r++) {
                const __m512i ql = _mm512_loadu_si512((const void *) (x[r]->ql + 64 * h));
                const __m512i hh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) (x[r]->qh + 32 * h)));
                const __m512i hj = _mm512_mask_srli_epi16(hh, 0xffff0000u, hh, 2);
                va[r] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_slli_epi16(_mm512_and_si512(hj, m3), 4));
                vb[r] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                        _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hj, 4), m3), 4));
                sa[r] = pg_kq_scales4(sv[r], 8 * h);
                sb[r] = pg_kq_scales4(sv[r], 8 * h + 4);
            }
            _Pragma("GCC unroll 4")
            for (int c = 0; c < NC; c++) {
                const __m512i ya = _mm512_loadu_si512((const void *) (yq[c] + 128 * h));
                const __m512i yb = _mm512_loadu_si512((const void *) (yq[c] + 128 * h + 64));
                _Pragma("GCC unroll 4")
                for (int r = 0; r < MR; r++) {
                    sumi[r][c] = pg_kg_dot16(sumi[r][c], _mm512_maddubs_epi16(va[r], ya), sa[r]);
                    sumi[r][c] = pg_kg_dot16(sumi[r][c], _mm512_maddubs_epi16(vb[r], yb), sb[r]);
                }
            }
        }
        _Pragma("GCC unroll 2")
        for (int p = 0; p < PG_KG_PAIRS(NC); p++) {
            const int c0 = 2 * p, c1 = PG_KG_TWIN(2 * p, NC);
            const pg_block_q8_K * y0 = pg_kq_col(vy, by, c0, ib), * y1 = pg_kq_col(vy, by, c1, ib);
            const __m512i bs2 = pg_kq_join(_mm256_loadu_si256((const __m256i *) y0->bsums),
                                           _mm256_loadu_si256((const __m256i *) y1->bsums));
            const __m512 dy2 = pg_kg_set2(y0->d, y1->d);
            _Pragma("GCC unroll 4")
            for (int r = 0; r < MR; r++) {
                const __m512i sc2 = _mm512_broadcast_i64x4(_mm512_castsi512_si256(sv[r]));
                const __m512i off = _mm512_slli_epi32(_mm512_madd_epi16(sc2, bs2), 5);
                const __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(pg_kg_fold2(sumi[r][c0], sumi[r][c1]), off));
                const __m512 d = _mm512_mul_ps(_mm512_set1_ps(pg_fp16_to_fp32(x[r]->d)), dy2);
                acc[r][p] = _mm512_fmadd_ps(d, f, acc[r][p]);
            }
        }
    }
    _Pragma("GCC unroll 4")
    for (int r = 0; r < MR; r++)
        _Pragma("GCC unroll 4")
        for (int c = 0; c < NC; c++) s[(size_t) c * lds + r] = pg_kq_hsum_ps(pg_kg_half(acc[r][c / 2], c % 2));
}

/* NAME(nb, x, bx, ..., MR, NC, s, lds) for NC = nc (1..4) */
#define PG_KG_COLS(CALL, nc)                                                                           \
    do {                                                                                               \
        switch (nc) {                                                                                  \
        case 1: CALL(1); break;                                                                        \
        case 2: CALL(2); break;                                                                        \
        case 3: CALL(3); break;                                                                        \
        default: CALL(4); break;                                                                       \
        }                                                                                              \
    } while (0)

/* vec_dot_tile (types.h's pg_vec_dot_tile_fn): rows in passes of PG_KG_MR, a last odd row and the
 * GEMV through the one-row kernel (pg_kq_x86_<T>_n) */
#define PG_KG_TILE(T, BODY2)                                                                           \
static inline void pg_vec_dot_##T##_q8_K_tile(int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by, \
                                              int nc, float * s, size_t lds) {                         \
    const int64_t nb = n / PG_QK_K;                                                                    \
    int r = 0;                                                                                         \
    for (; r + PG_KG_MR <= mr; r += PG_KG_MR) {                                                        \
        const char * xr = (const char *) x + (size_t) r * bx;                                          \
        float * sr = s + r;                                                                            \
        PG_KG_COLS(BODY2, nc);                                                                         \
    }                                                                                                  \
    for (; r < mr; r++) {                                                                              \
        float s4[4];                                                                                   \
        pg_kq_x86_##T##_n(nb, (const char *) x + (size_t) r * bx, y, by, nc, s4);                      \
        for (int c = 0; c < nc; c++) s[(size_t) c * lds + r] = s4[c];                                  \
    }                                                                                                  \
}
#define PG_KG_Q4_K(NC) pg_kg_k4_body(nb, xr, bx, sizeof(pg_block_q4_K), offsetof(pg_block_q4_K, qs), y, by, \
                                     PG_KG_MR, NC, sr, lds, false)
#define PG_KG_Q5_K(NC) pg_kg_k4_body(nb, xr, bx, sizeof(pg_block_q5_K), offsetof(pg_block_q5_K, qs), y, by, \
                                     PG_KG_MR, NC, sr, lds, true)
#define PG_KG_Q6_K(NC) pg_kg_q6_K_body(nb, xr, bx, y, by, PG_KG_MR, NC, sr, lds)
PG_KG_TILE(q4_K, PG_KG_Q4_K)
PG_KG_TILE(q5_K, PG_KG_Q5_K)
PG_KG_TILE(q6_K, PG_KG_Q6_K)
