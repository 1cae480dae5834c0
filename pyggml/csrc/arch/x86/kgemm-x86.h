/* The register-tiled products of quants-k.h's types (Q2_K..Q6_K, IQ4_XS) against Q8_K on AVX-512:
 * the ISA half of their vec_dot_tile, included after arch/x86/kquants-x86.h. PG_KGEMM_MR weight rows x up to
 * PG_KGEMM_NC activation rows per pass, each weight register decoded once for the pass's columns and
 * each activation register loaded once for its rows; a super-block is 4 chunks of 64 activations.
 * Eight columns per pass rather than four halve the per-row work (the scales' unpacking, the codes'
 * decoding) per product but spill a few accumulators, which pays only where the row work is largest:
 * Q3_K and IQ4_XS take eight, the other types four (the type table's tile_nc; docs/bench/journal.md).
 *
 * A (row, column) pair gets exactly the integers and f32 steps of arch/x86/kquants-x86.h's one-row kernels
 * (so the GEMM has the GEMV's bits): per super-block its 16 int32 lanes of scale * q * y (the same
 * products in the same lanes; VNNI's dpwssd is madd + add in one instruction, exact either way), folded
 * to 8, then the 8 f32 lanes += d_x*d_y * sum (and the type's min or offset term, as that kernel has
 * it). The f32 steps of two columns share one register (lanes 0-7 and 8-15), Q4_K/Q5_K's 4 min lanes
 * of four columns one register: lane for lane the one-row kernel's operations, fewer instructions.
 * A last odd row and one row alone (mr = 1, the GEMV) run the one-row kernel itself.
 * Q4_K, Q5_K and Q6_K with VNNI and GFNI take panels of 16 rows instead (pg_kp_*, at the end).
 */
#pragma once
#include "arch/x86/kquants-x86.h"
#include "arch/x86/qgemm-x86.h"     /* the panels of 16 rows the K-quants share with Q4_0 (pg_qp_*, pg_x16_*) */

#define PG_KGEMM_MR 2              /* rows per pass: 2 x 8 int32 sums + 2 x 4 f32 accumulators + codes */
#define PG_KGEMM_NC 8              /* columns per pass, at most */

static inline __m512i pg_kgemm_dot16(__m512i acc, __m512i p, __m512i sc) {
#if defined(__AVX512VNNI__)
    return _mm512_dpwssd_epi32(acc, p, sc);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p, sc));
#endif
}
/* [fold(a) | fold(b)]: pg_kq_fold of two columns' sums, side by side */
static inline __m512i pg_kgemm_fold2(__m512i a, __m512i b) {
    return _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, 0x44), _mm512_shuffle_i64x2(a, b, 0xee));
}
/* 8 f32 lanes of a two-column accumulator: column h */
static inline __m256 pg_kgemm_half(__m512 v, int h) {
    return h ? _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)) : _mm512_castps512_ps256(v);
}

/* Q4_K/Q5_K's min lanes: values 0-3 of column c (pg_kq_k4_body's 4-lane accumulator) are lanes
 * 8(c/2) + 2(c%2) + {0, 1, 4, 5} of the tile's (the layout of _mm256_hadd_epi16 on two columns) */
static inline __m128 pg_kgemm_mins(__m512 acc, int c) {
    const int b = 8 * (c / 2) + 2 * (c % 2);
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(b, b + 1, b + 4, b + 5, 0, 0, 0, 0, 0, 0, 0, 0,
                                                                          0, 0, 0, 0), acc));
}

/* the column-pair index of column c, and the column that fills an odd count's last pair */
#define PG_KGEMM_PAIRS(NC) (((NC) + 1) / 2)
#define PG_KGEMM_TWIN(c, NC) ((c) + 1 < (NC) ? (c) + 1 : (c))

enum { PG_KGEMM_Q2_K, PG_KGEMM_Q3_K, PG_KGEMM_Q4_K, PG_KGEMM_Q5_K, PG_KGEMM_Q6_K, PG_KGEMM_IQ4_XS };

/* one weight row's super-block: its codes, the int16 scales of pg_kq_scales4 (sv; Q4_K/Q5_K: the 8
 * scales in every 128-bit lane), the int16 factors of the bsums term (sb: Q2_K's mins and the
 * signed types' scales in both 256-bit halves, Q4_K/Q5_K's mins in every 128-bit lane), d and dmin */
typedef struct { const void * b; __m512i sv, sb; float dx, dmx; } pg_kgemm_row;
/* chunk t (activations 64t..64t+63) of a row: unsigned codes, int16 scales, the lanes to negate y in */
typedef struct { __m512i u, sc; __mmask64 neg; } pg_kgemm_chunk;

static inline __attribute__((always_inline)) pg_kgemm_row pg_kgemm_prep(const void * b, const int T) {
    pg_kgemm_row w;
    w.b = b;
    w.dmx = 0.0f;
    if (T == PG_KGEMM_Q2_K) {
        const pg_block_q2_K * x = (const pg_block_q2_K *) b;
        const __m128i raw = _mm_loadu_si128((const __m128i *) x->scales);
        w.sv = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_and_si128(raw, _mm_set1_epi8(0xf))));
        w.sb = _mm512_broadcast_i64x4(_mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0xf))));
        w.dx = pg_fp16_to_fp32(x->d);
        w.dmx = pg_fp16_to_fp32(x->dmin);
    } else if (T == PG_KGEMM_Q3_K) {
        const pg_block_q3_K * x = (const pg_block_q3_K *) b;
        uint8_t raw[16];
        pg_kq_unpack_q3(x->scales, raw);
        const __m256i s16 = _mm256_cvtepi8_epi16(_mm_sub_epi8(_mm_loadu_si128((const __m128i *) raw), _mm_set1_epi8(32)));
        w.sv = _mm512_castsi256_si512(s16);
        w.sb = _mm512_broadcast_i64x4(s16);
        w.dx = pg_fp16_to_fp32(x->d);
    } else if (T == PG_KGEMM_Q4_K || T == PG_KGEMM_Q5_K) {
        const pg_block_q4_K * x = (const pg_block_q4_K *) b;      /* d, dmin, scales are common */
        uint8_t sm[16];
        pg_kq_unpack_k4(x->scales, sm);
        w.sv = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *) sm)));
        const __m128i m8 = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *) (sm + 8)));
        w.sb = _mm512_broadcast_i64x4(_mm256_set_m128i(_mm_unpackhi_epi64(m8, m8), _mm_unpacklo_epi64(m8, m8)));
        w.dx = pg_fp16_to_fp32(x->d);
        w.dmx = pg_fp16_to_fp32(x->dmin);
    } else if (T == PG_KGEMM_Q6_K) {
        const pg_block_q6_K * x = (const pg_block_q6_K *) b;
        const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) x->scales));
        w.sv = _mm512_castsi256_si512(s16);
        w.sb = _mm512_broadcast_i64x4(s16);
        w.dx = pg_fp16_to_fp32(x->d);
    } else {
        w.sv = w.sb = _mm512_setzero_si512();
        w.dx = pg_fp16_to_fp32(((const pg_block_iq4_xs *) b)->d);
    }
    return w;
}

/* 256 bits at p in both halves, the upper one shifted right by sh more than the lower (16-bit lanes) */
static inline __m512i pg_kgemm_halves(const void * p, int s0, int sh) {
    const __m512i z = _mm512_srli_epi16(_mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) p)), s0);
    return _mm512_mask_srli_epi16(z, 0xffff0000u, z, sh);
}

/* chunk t of a row in the lane order of arch/x86/kquants-x86.h's AVX-512 kernels */
static inline __attribute__((always_inline)) pg_kgemm_chunk pg_kgemm_decode(const pg_kgemm_row * w, int t,
                                                                              const int T) {
    const __m512i m1 = _mm512_set1_epi8(1), m3 = _mm512_set1_epi8(3), m4 = _mm512_set1_epi8(0xf);
    pg_kgemm_chunk v;
    v.neg = 0;
    if (T == PG_KGEMM_Q2_K || T == PG_KGEMM_Q3_K) {
        /* fields 2k and 2k + 1 of half h (t = 2h + k); Q3_K's high bits from hmask */
        const int h = t / 2, k = t % 2;
        const uint8_t * qs = T == PG_KGEMM_Q2_K ? ((const pg_block_q2_K *) w->b)->qs
                                                : ((const pg_block_q3_K *) w->b)->qs;
        v.u = _mm512_and_si512(pg_kgemm_halves(qs + 32 * h, 4 * k, 2), m3);
        if (T == PG_KGEMM_Q3_K) {
            const __m512i hh = pg_kgemm_halves(((const pg_block_q3_K *) w->b)->hmask, 4 * h + 2 * k, 1);
            v.u = _mm512_or_si512(v.u, _mm512_slli_epi16(_mm512_and_si512(hh, m1), 2));
        }
        v.sc = pg_kq_scales4(w->sv, 4 * t);
    } else if (T == PG_KGEMM_Q4_K || T == PG_KGEMM_Q5_K) {
        const size_t off = T == PG_KGEMM_Q4_K ? offsetof(pg_block_q4_K, qs) : offsetof(pg_block_q5_K, qs);
        v.u = _mm512_and_si512(pg_kgemm_halves((const uint8_t *) w->b + off + 32 * t, 0, 4), m4);
        if (T == PG_KGEMM_Q5_K) {
            const __m512i hh = pg_kgemm_halves(((const pg_block_q5_K *) w->b)->qh, 2 * t, 1);
            v.u = _mm512_or_si512(v.u, _mm512_slli_epi16(_mm512_and_si512(hh, m1), 4));
        }
        const __m512i ctl = pg_kq_join(_mm256_set1_epi16((short) ((4 * t + 1) << 8 | (4 * t))),
                                       _mm256_set1_epi16((short) ((4 * t + 3) << 8 | (4 * t + 2))));
        v.sc = _mm512_shuffle_epi8(w->sv, ctl);
    } else if (T == PG_KGEMM_Q6_K) {
        /* quarter j of half h (t = 2h + j): low nibbles (j = 0) or high ones of ql[64h..], qh pairs */
        const pg_block_q6_K * x = (const pg_block_q6_K *) w->b;
        const int h = t / 2, j = t % 2;
        const __m512i ql = _mm512_loadu_si512((const void *) (x->ql + 64 * h));
        const __m512i hj = pg_kgemm_halves(x->qh + 32 * h, 4 * j, 2);
        v.u = _mm512_or_si512(_mm512_and_si512(j ? _mm512_srli_epi16(ql, 4) : ql, m4),
                              _mm512_slli_epi16(_mm512_and_si512(hj, m3), 4));
        v.sc = pg_kq_scales4(w->sv, 4 * t);
    } else {
        /* blocks 2t and 2t + 1: |IQ4_NL value| and the lanes whose value is negative */
        const pg_block_iq4_xs * x = (const pg_block_iq4_xs *) w->b;
        const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *) pg_iq4nl_values));
        const __m256i b = _mm256_loadu_si256((const __m256i *) (x->qs + 32 * t));
        const __m512i n = pg_kq_join(b, _mm256_srli_epi16(b, 4));
        const __m512i q = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_shuffle_i64x2(n, n, 0xd8), m4));
        v.u = _mm512_abs_epi8(q);
        v.neg = _mm512_movepi8_mask(q);
        v.sc = pg_kq_join(_mm256_set1_epi16((short) pg_kq_iq4_xs_scale(x, 2 * t)),
                          _mm256_set1_epi16((short) pg_kq_iq4_xs_scale(x, 2 * t + 1)));
    }
    return v;
}

/* MR rows of type T (blocks bx bytes, rows bx_row apart from xb) x nc <= NC columns: s[c*lds + r]
 * (columns nc..NC-1, if any, compute the last column again and are not stored) */
static inline __attribute__((always_inline)) void pg_kgemm_body(int64_t nb, const char * xb, size_t bx_row, size_t bx,
                                                             const void * vy, size_t by, const int MR, const int NC,
                                                             int nc, float * s, size_t lds, const int T) {
    /* acc: lanes 0-7 and 8-15 the 8 f32 lanes of two columns; accm: Q2_K's min lanes in the same
     * form, Q4_K/Q5_K's 4 min lanes of each column c in a 128-bit lane of accm[r][c / 4] */
    __m512 acc[PG_KGEMM_MR][PG_KGEMM_NC / 2], accm[PG_KGEMM_MR][PG_KGEMM_NC / 2];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < MR; r++)
        _Pragma("GCC unroll 4")
        for (int p = 0; p < PG_KGEMM_NC / 2; p++) acc[r][p] = accm[r][p] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const pg_block_q8_K * y[PG_KGEMM_NC];
        _Pragma("GCC unroll 8")
        for (int c = 0; c < PG_KGEMM_NC; c++) y[c] = pg_kq_col(vy, by, PG_MIN(c, nc - 1), ib);
        pg_kgemm_row w[PG_KGEMM_MR];
        __m512i sumi[PG_KGEMM_MR][PG_KGEMM_NC];
        _Pragma("GCC unroll 4")
        for (int r = 0; r < MR; r++) {
            w[r] = pg_kgemm_prep(xb + (size_t) r * bx_row + (size_t) ib * bx, T);
            _Pragma("GCC unroll 8")
            for (int c = 0; c < NC; c++) sumi[r][c] = _mm512_setzero_si512();
        }
        _Pragma("GCC unroll 4")
        for (int t = 0; t < 4; t++) {
            pg_kgemm_chunk v[PG_KGEMM_MR];
            _Pragma("GCC unroll 4")
            for (int r = 0; r < MR; r++) v[r] = pg_kgemm_decode(&w[r], t, T);
            _Pragma("GCC unroll 8")
            for (int c = 0; c < NC; c++) {
                const __m512i yv = _mm512_loadu_si512((const void *) (y[c]->qs + 64 * t));
                _Pragma("GCC unroll 4")
                for (int r = 0; r < MR; r++) {
                    const __m512i ys =
                        T == PG_KGEMM_IQ4_XS ? _mm512_mask_sub_epi8(yv, v[r].neg, _mm512_setzero_si512(), yv) : yv;
                    sumi[r][c] = pg_kgemm_dot16(sumi[r][c], _mm512_maddubs_epi16(v[r].u, ys), v[r].sc);
                }
            }
        }
        /* the columns' d_y in the eight lanes of dy, then spread (permutexvar) as each sum needs */
        const __m512 dy = _mm512_castps256_ps512(_mm256_setr_ps(y[0]->d, y[1]->d, y[2]->d, y[3]->d,
                                                                y[4]->d, y[5]->d, y[6]->d, y[7]->d));
        _Pragma("GCC unroll 2")
        for (int g = 0; g < (NC + 3) / 4 && (T == PG_KGEMM_Q4_K || T == PG_KGEMM_Q5_K); g++) {
            /* columns 4g..4g+3: the bsums added in pairs (sub-blocks of 32), two columns per 256
             * bits: value i of column c (of 4 per column, pg_kq_k4_body's min lanes) in the lanes
             * of pg_kgemm_mins */
            const pg_block_q8_K * const * yg = y + 4 * g;
            const __m256i h01 = _mm256_hadd_epi16(_mm256_loadu_si256((const __m256i *) yg[0]->bsums),
                                                  _mm256_loadu_si256((const __m256i *) yg[1]->bsums));
            const __m256i h23 = _mm256_hadd_epi16(_mm256_loadu_si256((const __m256i *) yg[2]->bsums),
                                                  _mm256_loadu_si256((const __m256i *) yg[3]->bsums));
            const __m512i bs4 = pg_kq_join(h01, h23);
            const __m512 dy4 = _mm512_permutexvar_ps(_mm512_add_epi32(_mm512_set1_epi32(4 * g),
                                                                   _mm512_setr_epi32(0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3)), dy);
            _Pragma("GCC unroll 4")
            for (int r = 0; r < MR; r++) {
                const __m512 m = _mm512_cvtepi32_ps(_mm512_madd_epi16(w[r].sb, bs4));
                accm[r][g] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(w[r].dmx), dy4), m, accm[r][g]);
            }
        }
        _Pragma("GCC unroll 4")
        for (int p = 0; p < PG_KGEMM_PAIRS(NC); p++) {
            const int c0 = 2 * p, c1 = PG_KGEMM_TWIN(2 * p, NC);
            const __m512 dy2 = _mm512_permutexvar_ps(pg_kq_join(_mm256_set1_epi32(c0), _mm256_set1_epi32(c1)), dy);
            __m512i bs2 = _mm512_setzero_si512();
            if (T == PG_KGEMM_Q2_K || T == PG_KGEMM_Q3_K || T == PG_KGEMM_Q6_K) {
                bs2 = pg_kq_join(_mm256_loadu_si256((const __m256i *) y[c0]->bsums),
                                 _mm256_loadu_si256((const __m256i *) y[c1]->bsums));
            }
            _Pragma("GCC unroll 4")
            for (int r = 0; r < MR; r++) {
                __m512i f = pg_kgemm_fold2(sumi[r][c0], sumi[r][c1]);
                /* the signed types dotted q + 2^shift: 2^shift * sum(scale * bsums) off */
                if (T == PG_KGEMM_Q3_K) f = _mm512_sub_epi32(f, _mm512_slli_epi32(_mm512_madd_epi16(w[r].sb, bs2), 2));
                if (T == PG_KGEMM_Q6_K) f = _mm512_sub_epi32(f, _mm512_slli_epi32(_mm512_madd_epi16(w[r].sb, bs2), 5));
                acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(w[r].dx), dy2), _mm512_cvtepi32_ps(f), acc[r][p]);
                if (T == PG_KGEMM_Q2_K) {
                    const __m512 m = _mm512_cvtepi32_ps(_mm512_madd_epi16(w[r].sb, bs2));
                    accm[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(w[r].dmx), dy2), m, accm[r][p]);
                }
            }
        }
    }
    _Pragma("GCC unroll 4")
    for (int r = 0; r < MR; r++) {
        _Pragma("GCC unroll 8")
        for (int c = 0; c < NC; c++) {
            float v = pg_kq_hsum_ps(pg_kgemm_half(acc[r][c / 2], c % 2));
            if (T == PG_KGEMM_Q2_K) v -= pg_kq_hsum_ps(pg_kgemm_half(accm[r][c / 2], c % 2));
            if (T == PG_KGEMM_Q4_K || T == PG_KGEMM_Q5_K) v -= pg_kq_hsum_ps4(pg_kgemm_mins(accm[r][c / 4], c % 4));
            if (c < nc) s[(size_t) c * lds + r] = v;
        }
    }
}

/* vec_dot_tile of kind T (PG_KGEMM_*) over blocks of size bytes, taking up to ncmax columns (the type's
 * tile_nc): rows in passes of PG_KGEMM_MR, a last odd row and the GEMV through the one-row kernel
 * one_row (the type's vec_dot_n, four columns a call); T, size, ncmax and one_row are constants in
 * every caller */
PG_ALWAYS_INLINE void pg_kgemm_tile(const int T, const size_t size, const int ncmax,
                                 void (*one_row)(int64_t, const void *, const void *, size_t, int, float *), int64_t n,
                                 const void * x, size_t bx, int mr, const void * y, size_t by, int nc, float * s,
                                 size_t lds) {
    const int64_t nb = n / PG_QK_K;
    int r = 0;
    for (; r + PG_KGEMM_MR <= mr; r += PG_KGEMM_MR) {
        const char * xr = (const char *) x + (size_t) r * bx;
        if (ncmax > 4 && nc > 4) {
            pg_kgemm_body(nb, xr, bx, size, y, by, PG_KGEMM_MR, PG_KGEMM_NC, nc, s + r, lds, T);
            continue;
        }
        switch (nc) {
        case 1: pg_kgemm_body(nb, xr, bx, size, y, by, PG_KGEMM_MR, 1, 1, s + r, lds, T); break;
        case 2: pg_kgemm_body(nb, xr, bx, size, y, by, PG_KGEMM_MR, 2, 2, s + r, lds, T); break;
        case 3: pg_kgemm_body(nb, xr, bx, size, y, by, PG_KGEMM_MR, 3, 3, s + r, lds, T); break;
        default: pg_kgemm_body(nb, xr, bx, size, y, by, PG_KGEMM_MR, 4, 4, s + r, lds, T); break;
        }
    }
    for (; r < mr; r++) {
        for (int c0 = 0; c0 < nc; c0 += 4) {
            float s4[4];
            const int n4 = PG_MIN(4, nc - c0);
            one_row(n, (const char *) x + (size_t) r * bx, (const char *) y + (size_t) c0 * by, by, n4, s4);
            for (int c = 0; c < n4; c++) s[(size_t) (c0 + c) * lds + r] = s4[c];
        }
    }
}

#if defined(PG_X86_GEMV)
/* Q4_K and Q5_K on AVX-512 with VNNI and GFNI: weight rows in panels of 16, one lane per row, as Q4_0's
 * (arch/x86/qgemm-x86.h, pg_qp_*), and its own arithmetic. Per (row, column) and super-block the exact
 * integers sumi = sum_j scale_j * sum_{i in sub-block j} q_i y_i and summ = sum_j min_j * (sum of y
 * over sub-block j, from Q8_K's bsums), then acc = fma(d_x*d_y, sumi, acc) and acc = fma(-dmin_x*d_y,
 * summ, acc), super-block by super-block from 0 (vec_dot_tile and vec_dot_rows alike, so a GEMM
 * column equals the GEMV's bit for bit).
 *
 * A panel's super-block is made from the rows as stored: the first 16 bytes of each (d, dmin and the
 * 12 scale bytes) transposed to dword vectors, where the 6-bit scales and mins unpack for all 16 rows
 * at once; the 128 code bytes transposed likewise, 32 vectors whose nibbles (one affine byte
 * transform; Q5_K: with bit j of its 32 high-bit bytes, transposed likewise, as their bit 4) are
 * dpbusd'd against a column's dword broadcasts, 8 per sub-block, each sub-block's sum then times its
 * scales (vpmulld). The mins enter as int16 pairs against the column's sub-block sums
 * in pairs (dpwssd). */
#define PG_K4P_KB 8                   /* super-blocks per pass of the tile */
#define PG_K4P_GEMV_KB 64             /* of the GEMV: rows of 16K elements prepared at once */

/* super-block of a panel: q[8t + g] lane r = dword g of row r's codes 32t..32t+31; qh[g] (Q5_K) lane
 * r = dword g of its high-bit bytes; sc[j] lane r = row r's scale of sub-block j; mn[k] lane r = its
 * mins (0, 2), (1, 3), (4, 6), (5, 7) as int16 pairs for k = 0..3; d, dm: d_x and dmin_x */
typedef struct { __m512i q[32], qh[8], sc[8], mn[4]; __m512 d, dm; } pg_k4p_blk;

/* the scales, mins and d of super-block b of the panel p of Q4_K (q5 = 0) or Q5_K (all of w but q) */
PG_ALWAYS_INLINE void pg_k4p_head(const pg_x16_src * p, int64_t b, pg_k4p_blk * w, const int q5) {
    __m512i h[4];
    pg_x16_dw(p, q5 ? PG_TYPE_Q5_K : PG_TYPE_Q4_K, b, 0, h);   /* {d, dmin}, then the scale bytes 0-3, 4-7, 8-11 */
    /* pg_kq_unpack_k4 on the 16 rows' words */
    const __m512i lo6 = _mm512_set1_epi32(0x3f3f3f3f), lo4 = _mm512_set1_epi32(0x0f0f0f0f);
    const __m512i lo2 = _mm512_set1_epi32(0x03030303), b16 = _mm512_set1_epi32(0x00ff00ff);
    const __m512i s03 = _mm512_and_si512(h[1], lo6), m03 = _mm512_and_si512(h[2], lo6);
    const __m512i s47 = _mm512_or_si512(_mm512_and_si512(h[3], lo4),
                                        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h[1], 6), lo2), 4));
    const __m512i m47 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(h[3], 4), lo4),
                                        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h[2], 6), lo2), 4));
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        w->sc[j] = _mm512_and_si512(_mm512_srli_epi32(s03, 8 * j), _mm512_set1_epi32(0xff));
        w->sc[4 + j] = _mm512_and_si512(_mm512_srli_epi32(s47, 8 * j), _mm512_set1_epi32(0xff));
    }
    w->mn[0] = _mm512_and_si512(m03, b16);
    w->mn[1] = _mm512_and_si512(_mm512_srli_epi32(m03, 8), b16);
    w->mn[2] = _mm512_and_si512(m47, b16);
    w->mn[3] = _mm512_and_si512(_mm512_srli_epi32(m47, 8), b16);
    w->d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h[0]));
    w->dm = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h[0], 16)));
}
/* the block size of Q4_K (q5 = 0) or Q5_K, and where its codes start */
#define PG_K4P_BSIZE(q5) ((q5) ? sizeof(pg_block_q5_K) : sizeof(pg_block_q4_K))
#define PG_K4P_QS(q5) ((q5) ? offsetof(pg_block_q5_K, qs) : offsetof(pg_block_q4_K, qs))
/* q[8h..8h+7] of that super-block: its codes 32h..32h+31 */
PG_ALWAYS_INLINE void pg_k4p_codes(const pg_x16_src * p, int64_t b, int h, __m512i * q, const int q5) {
    pg_x16_dw32(p, q5 ? PG_TYPE_Q5_K : PG_TYPE_Q4_K, b, PG_K4P_QS(q5) + 32 * h, q);
}
/* Q5_K's high-bit bytes of that super-block: qh */
PG_ALWAYS_INLINE void pg_k4p_high(const pg_x16_src * p, int64_t b, __m512i * qh) {
    pg_x16_dw32(p, PG_TYPE_Q5_K, b, offsetof(pg_block_q5_K, qh), qh);
}
/* the whole super-block (Q5_K's high bits too; its head is laid out as Q4_K's) */
PG_ALWAYS_INLINE void pg_k4p_block(const pg_x16_src * p, int64_t b, pg_k4p_blk * w, const int q5) {
    pg_k4p_head(p, b, w, q5);
    if (q5) pg_k4p_high(p, b, w->qh);
#pragma GCC unroll 4
    for (int h = 0; h < 4; h++) pg_k4p_codes(p, b, h, w->q + 8 * h, q5);
}
/* sub-block j's codes u[0..7] from its chunk's q[0..7] (the low nibbles for even j, the high for odd),
 * Q5_K's bit j of qh[0..7] as their bit 4 */
PG_ALWAYS_INLINE void pg_k4p_u(const __m512i * q, const __m512i * qh, int j, const int q5, __m512i * u) {
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        u[g] = pg_x16_nibbles(q[g], j % 2);
        if (q5) {
            const __m512i b = j < 4 ? _mm512_slli_epi32(qh[g], 4 - j) : _mm512_srli_epi32(qh[g], j - 4);
            u[g] = _mm512_ternarylogic_epi32(u[g], b, _mm512_set1_epi32(0x10101010), 0xf8);   /* u | (b & 0x10) */
        }
    }
}
/* sub-block j's exact sum times its scales: its codes u[0..7] (the nibbles of half j % 2 of its
 * chunk's q) against the column's 32 values yq; split: two dpbusd chains (for one column: more in
 * flight) */
PG_ALWAYS_INLINE __m512i pg_k4p_sub(const __m512i * u, const int8_t * yq, __m512i sc, const int split) {
    __m512i s[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        int32_t a;
        memcpy(&a, yq + 4 * g, 4);
        const int i = split ? g % 2 : 0;
        s[i] = _mm512_dpbusd_epi32(s[i], u[g], _mm512_set1_epi32(a));
    }
    return _mm512_mullo_epi32(split ? _mm512_add_epi32(s[0], s[1]) : s[0], sc);
}
/* acc + the super-block's f32 steps: sumi, then the mins against the column's sub-block sums cb */
PG_ALWAYS_INLINE __m512 pg_k4p_acc(const pg_k4p_blk * w, __m512i sumi, pg_kp_col cb, __m512 acc) {
    __m512i m = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) m = _mm512_dpwssd_epi32(m, w->mn[i], _mm512_set1_epi32(cb.c[i]));
    const __m512 dy = _mm512_set1_ps(cb.d);
    acc = _mm512_fmadd_ps(_mm512_mul_ps(w->d, dy), _mm512_cvtepi32_ps(sumi), acc);
    return _mm512_fnmadd_ps(_mm512_mul_ps(w->dm, dy), _mm512_cvtepi32_ps(m), acc);
}
/* NC (a constant, <= PG_QP_NCR) columns y[c] (Q8_K rows from super-block b0 on, their col[c*cs + k])
 * against kb super-blocks of a panel w, into acc[c] */
PG_ALWAYS_INLINE void pg_k4p_run(const pg_k4p_blk * w, int kb, const char * const * y, const pg_kp_col * col,
                                 const int cs, const int NC, __m512 * acc, const int q5) {
    for (int k = 0; k < kb; k++) {
        __m512i sumi[PG_QP_NCR];
#pragma GCC unroll 8
        for (int c = 0; c < NC; c++) sumi[c] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            /* the nibbles made once for the NC columns (the compiler keeps them in registers) */
            __m512i u[8];
            pg_k4p_u(w[k].q + 8 * (j / 2), w[k].qh, j, q5, u);
#pragma GCC unroll 8
            for (int c = 0; c < NC; c++)
                sumi[c] = _mm512_add_epi32(sumi[c], pg_k4p_sub(u, ((const pg_block_q8_K *) y[c])[k].qs + 32 * j,
                                                               w[k].sc[j], NC < 4));
        }
#pragma GCC unroll 8
        for (int c = 0; c < NC; c++) acc[c] = pg_k4p_acc(&w[k], sumi[c], col[c * cs + k], acc[c]);
    }
}
/* Q6_K on AVX-512 with VNNI and GFNI: panels of 16 rows too. Per (row, column) and super-block the
 * exact integer sumi = sum_j scale_j * (sum_{i in sub-block j} u_i y_i - 32 * bsum_j), u = q + 32 the
 * stored 6-bit value (0..63, dpbusd's unsigned operand) and bsum_j Q8_K's sum of y over sub-block j
 * (16 elements), then acc = fma(d_x*d_y, sumi, acc), super-block by super-block from 0: the
 * arithmetic of the one-row GEMV (arch/x86/kgemv-x86.h pg_kgemv_q6_K_body), so a GEMM column equals
 * it bit for bit. A super-block of a panel is decoded once for all the columns (pg_kp_tile: once
 * per pass of PG_K6P_KB; pg_kp_cols: made and used at once): its 128 low-nibble bytes and 64 high-bit bytes transposed to dword vectors, element
 * dword i (elements 4i..4i+3) made from a nibble (one affine byte transform) and two bits of qh
 * moved to bits 4-5; each sub-block's 4 dpbusd start from the column's -32 * bsum_j and are then
 * times the rows' scales (vpmulld). */
#define PG_K6P_KB 4                   /* super-blocks per pass */

/* super-block of a panel: u[i] lane r = dword i of row r's values u (elements 4i..4i+3); sc[j] lane
 * r = its scale of sub-block j; d: d_x */
typedef struct { __m512i u[64], sc[16]; __m512 d; } pg_k6p_blk;

/* super-block b of the panel p */
PG_ALWAYS_INLINE void pg_k6p_block(const pg_x16_src * p, int64_t b, pg_k6p_blk * w) {
    const int t = PG_TYPE_Q6_K;
    /* element 128h + 32q + l: the low (q < 2) or high nibble of ql[64h + 32(q % 2) + l], bits 2q, 2q + 1
     * of qh[32h + l] */
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        __m512i ql[16], qh[8];
        pg_x16_dw32(p, t, b, offsetof(pg_block_q6_K, ql) + 64 * h, ql);
        pg_x16_dw32(p, t, b, offsetof(pg_block_q6_K, ql) + 64 * h + 32, ql + 8);
        pg_x16_dw32(p, t, b, offsetof(pg_block_q6_K, qh) + 32 * h, qh);
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++)
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                const __m512i b = q < 3 ? _mm512_slli_epi32(qh[g], 4 - 2 * q) : _mm512_srli_epi32(qh[g], 2);
                w->u[32 * h + 8 * q + g] = _mm512_ternarylogic_epi32(pg_x16_nibbles(ql[8 * (q % 2) + g], q / 2), b,
                                                                     _mm512_set1_epi8(0x30), 0xf8);   /* a | (b & 0x30) */
            }
    }
    __m512i sc[4];
    pg_x16_dw(p, t, b, offsetof(pg_block_q6_K, scales), sc);
#pragma GCC unroll 4
    for (int a = 0; a < 4; a++)
#pragma GCC unroll 4
        for (int b = 0; b < 4; b++) w->sc[4 * a + b] = _mm512_srai_epi32(_mm512_slli_epi32(sc[a], 24 - 8 * b), 24);
    w->d = _mm512_cvtph_ps(pg_x16_hw(p, t, b, offsetof(pg_block_q6_K, d)));
}
/* NC (a constant, <= PG_QP_NCR) columns y[c] (Q8_K rows from super-block b0 on, their col[c*cs + k])
 * against kb super-blocks of a panel w, into acc[c] */
PG_ALWAYS_INLINE void pg_k6p_run(const pg_k6p_blk * w, int kb, const char * const * y, const pg_kp_col * col,
                                 const int cs, const int NC, __m512 * acc) {
    for (int k = 0; k < kb; k++) {
        __m512i sumi[PG_QP_NCR];
#pragma GCC unroll 8
        for (int c = 0; c < NC; c++) sumi[c] = _mm512_setzero_si512();
        for (int j = 0; j < 16; j++) {
#pragma GCC unroll 8
            for (int c = 0; c < NC; c++) {
                const int8_t * yq = ((const pg_block_q8_K *) y[c])[k].qs + 16 * j;
                __m512i t = _mm512_set1_epi32(col[c * cs + k].c[j]);
#pragma GCC unroll 4
                for (int g = 0; g < 4; g++) {
                    int32_t a;
                    memcpy(&a, yq + 4 * g, 4);
                    t = _mm512_dpbusd_epi32(t, w[k].u[4 * j + g], _mm512_set1_epi32(a));
                }
                sumi[c] = _mm512_add_epi32(sumi[c], _mm512_mullo_epi32(t, w[k].sc[j]));
            }
        }
#pragma GCC unroll 8
        for (int c = 0; c < NC; c++)
            acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(w[k].d, _mm512_set1_ps(col[c * cs + k].d)), _mm512_cvtepi32_ps(sumi[c]),
                                     acc[c]);
    }
}
/* The skeletons the three share, over t = PG_TYPE_Q4_K, _Q5_K or _Q6_K (a constant in every caller) */
#define PG_KP_FEW 8                   /* columns run as the GEMV (pg_kp_cols) */
PG_ALWAYS_INLINE int pg_kp_kb(const int t) { return t == PG_TYPE_Q6_K ? PG_K6P_KB : PG_K4P_KB; }
/* a pass's super-blocks of one panel, made once for all the columns */
typedef union { pg_k4p_blk k4[PG_K4P_KB]; pg_k6p_blk k6[PG_K6P_KB]; } pg_kp_pass;
/* NC (a constant, <= PG_QP_NCR) columns against kb super-blocks of a pass w, into acc[c] */
PG_ALWAYS_INLINE void pg_kp_run(const int t, const pg_kp_pass * w, int kb, const char * const * y, const pg_kp_col * col,
                                const int cs, const int NC, __m512 * acc) {
    if (t == PG_TYPE_Q6_K) pg_k6p_run(w->k6, kb, y, col, cs, NC, acc);
    else pg_k4p_run(w->k4, kb, y, col, cs, NC, acc, t == PG_TYPE_Q5_K);
}
/* nc (a constant, <= PG_KP_FEW) columns y[c] against super-block b of the panel xr, made and used at
 * once, into acc[c] (col[c*cs]: the column's super-block b) */
PG_ALWAYS_INLINE void pg_kp_step(const int t, const pg_x16_src * xr, int64_t b, const pg_block_q8_K * const * y,
                                 const pg_kp_col * col, const int cs, const int nc, __m512 * acc) {
    if (t == PG_TYPE_Q6_K) {
        pg_k6p_blk w;
        pg_k6p_block(xr, b, &w);
        const char * yc[PG_KP_FEW];
        for (int c = 0; c < nc; c++) yc[c] = (const char *) (y[c] + b);
        pg_k6p_run(&w, 1, yc, col, cs, nc, acc);
        return;
    }
    const int q5 = t == PG_TYPE_Q5_K;
    pg_k4p_blk w;
    pg_k4p_head(xr, b, &w, q5);
    if (q5) pg_k4p_high(xr, b, w.qh);
    __m512i sumi[PG_KP_FEW];
    for (int c = 0; c < nc; c++) sumi[c] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        __m512i codes[8], u[8];
        pg_k4p_codes(xr, b, q, codes, q5);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            pg_k4p_u(codes, w.qh, 2 * q + h, q5, u);
            for (int c = 0; c < nc; c++)
                sumi[c] = _mm512_add_epi32(sumi[c], pg_k4p_sub(u, y[c][b].qs + 64 * q + 32 * h, w.sc[2 * q + h], nc < 4));
        }
    }
    for (int c = 0; c < nc; c++) acc[c] = pg_k4p_acc(&w, sumi[c], col[c * cs], acc[c]);
}
/* nc (a constant, <= PG_KP_FEW) columns y_c = vy + c*by against nr rows, s[c*lds + r]: the tile's
 * sums, a panel's super-block made and used at once (the one-column GEMV of Q4_K/Q5_K and the tile's
 * few columns); the columns prepared once per PG_K4P_GEMV_KB super-blocks for up to PG_QP_GEMV_MR
 * rows; the next panel prefetched up to row nahead, and the rows or (pk) repacked panels, as
 * pg_qp_cols */
PG_ALWAYS_INLINE void pg_kp_cols(const int t, const int nc, int64_t n, const void * vx, size_t bx, int64_t nr,
                                 int64_t nahead, const void * vy, size_t by, float * s, size_t lds, const int pk) {
    const int64_t nb = n / PG_QK_K;
    pg_kp_col col[PG_KP_FEW * PG_K4P_GEMV_KB];
    __m512 acc[PG_QP_GEMV_MR / PG_QP_R][PG_KP_FEW];
    const pg_block_q8_K * y[PG_KP_FEW];
    for (int c = 0; c < nc; c++) y[c] = (const pg_block_q8_K *) ((const char *) vy + (size_t) c * by);
    for (int64_t i0 = 0; i0 < nr; i0 += PG_QP_GEMV_MR) {
        const char * x = (const char *) vx + (size_t) (pk ? i0 / PG_QP_R : i0) * bx;
        const int mr = (int) PG_MIN(PG_QP_GEMV_MR, nr - i0), np = (mr + PG_QP_R - 1) / PG_QP_R;
        for (int p = 0; p < np; p++)
            for (int c = 0; c < nc; c++) acc[p][c] = _mm512_setzero_ps();
        for (int64_t b0 = 0; b0 < nb; b0 += PG_K4P_GEMV_KB) {
            const int kb = (int) PG_MIN(PG_K4P_GEMV_KB, nb - b0);
            for (int c = 0; c < nc; c++) pg_kp_column(t, (const char *) y[c], b0, kb, col + c * PG_K4P_GEMV_KB);
            for (int p = 0; p < np; p++) {
                const pg_x16_src xr = pg_x16_panel(x, bx, p, mr, pk);
                pg_x16_ahead ahead = pg_x16_ahead_of(t, x, bx, p, i0, nahead, b0, kb, 1, pk);
                __m512 a[PG_KP_FEW];
                for (int c = 0; c < nc; c++) a[c] = acc[p][c];
                for (int k = 0; k < kb; k++) {
                    pg_x16_ahead_step(&ahead);
                    pg_kp_step(t, &xr, b0 + k, y, col + k, PG_K4P_GEMV_KB, nc, a);
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
/* The tile's many columns of Q4_K and Q5_K on AMX (arch/x86/amx.h): per panel, group of up to 16
 * columns and sub-block j, the sub-block's exact sums from one tdpbssd (A: the columns' 32 Q8_K values
 * read in place, rows by apart; B: the panel's codes of the sub-block, pg_k4p_u's dword g of the 16
 * rows in B row g; C row c: column c's 16 row sums), then times the rows' scales into sumi (vpmulld)
 * and each super-block's f32 steps as pg_k4p_acc: the same integers and steps as pg_kp_cols, so the
 * same bits. Sub-block steps run four in flight across super-blocks, as pg_qp_amx_group's blocks.
 * Columns in whole groups of 16 only: a group costs the same however few of its columns are used, and
 * up to 15 run faster in the vector panels. */
#define PG_KP_AMX_KB 4                /* super-blocks per pass: their B tiles (8 per super-block) 16 KB */
/* the A operand of sub-block step s (super-block s / 8, sub-block s % 8) from y (Q8_K blocks) */
PG_ALWAYS_INLINE const char * pg_kp_amx_a(const char * y, int s) {
    return y + (size_t) (s / 8) * sizeof(pg_block_q8_K) + offsetof(pg_block_q8_K, qs) + 32 * (s % 8);
}
/* acc[c] (in memory) += kb super-blocks of the columns of a group (Q8_K rows from y, by apart; their
 * col[c*PG_KP_AMX_KB + k]) against a panel's: B tiles wq[8k + j], heads w[k] */
PG_ALWAYS_INLINE void pg_kp_amx_group(const int8_t * wq, const pg_k4p_blk * w, int kb, const char * y, size_t by,
                                      const pg_kp_col * col, int32_t (*cs)[16], __m512 * acc) {
    const int ns = 8 * kb;
#pragma GCC unroll 3
    for (int s = 0; s < 3; s++) pg_amx_block_dp(s, pg_kp_amx_a(y, s), by, wq + s * PG_QP_AMX_B);
    for (int k = 0; k < kb; k++) {
        __m512i sumi[PG_QP_R];
#pragma GCC unroll 16
        for (int c = 0; c < PG_QP_R; c++) sumi[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const int s = 8 * k + j;
            if (s + 3 < ns) pg_amx_block_dp(j + 3, pg_kp_amx_a(y, s + 3), by, wq + (s + 3) * PG_QP_AMX_B);
            pg_amx_block_store(j, cs);
#pragma GCC unroll 16
            for (int c = 0; c < PG_QP_R; c++)
                sumi[c] = _mm512_add_epi32(sumi[c], _mm512_mullo_epi32(_mm512_load_si512((const __m512i *) cs[c]), w[k].sc[j]));
        }
#pragma GCC unroll 16
        for (int c = 0; c < PG_QP_R; c++) acc[c] = pg_k4p_acc(&w[k], sumi[c], col[c * PG_KP_AMX_KB + k], acc[c]);
    }
}
/* pg_kp_tile's GEMM of Q4_K and Q5_K, whole groups of 16 columns (nc a multiple of 16), on AMX */
PG_ALWAYS_INLINE void pg_kp_amx_tile(const int t, int64_t n, const void * vx, size_t bx, int mr, const void * vy,
                                     size_t by, int nc, float * s, size_t lds, const int pk) {
    const int q5 = t == PG_TYPE_Q5_K;
    const char * x = (const char *) vx;
    const int64_t nb = n / PG_QK_K;
    const int np = (mr + PG_QP_R - 1) / PG_QP_R;
    _Alignas(64) int8_t wq[PG_KP_AMX_KB * 8 * PG_QP_AMX_B];
    _Alignas(64) int32_t cs[16][16];                /* a sub-block's sums */
    pg_k4p_blk w[PG_KP_AMX_KB];
    pg_kp_col col[PG_QP_NC * PG_KP_AMX_KB];
    __m512 acc[PG_QP_MR / PG_QP_R][PG_QP_NC];
    pg_amx_cfg found;
    pg_amx_tile_begin(acc, np, nc, &found);
    for (int64_t b0 = 0; b0 < nb; b0 += PG_KP_AMX_KB) {
        const int kb = (int) PG_MIN(PG_KP_AMX_KB, nb - b0);
        for (int c = 0; c < nc; c++) pg_kp_column(t, (const char *) vy + (size_t) c * by, b0, kb, col + c * PG_KP_AMX_KB);
        for (int p = 0; p < np; p++) {
            const pg_x16_src xr = pg_x16_panel(x, bx, p, mr, pk);
            for (int k = 0; k < kb; k++) {
                pg_k4p_block(&xr, b0 + k, &w[k], q5);
                for (int j = 0; j < 8; j++) {
                    __m512i u[8];
                    pg_k4p_u(w[k].q + 8 * (j / 2), w[k].qh, j, q5, u);
#pragma GCC unroll 8
                    for (int g = 0; g < 8; g++)
                        _mm512_store_si512((__m512i *) (wq + (8 * k + j) * PG_QP_AMX_B + 64 * g), u[g]);
                }
            }
            for (int c0 = 0; c0 < nc; c0 += PG_QP_R) {
                const char * y = (const char *) vy + (size_t) c0 * by + (size_t) b0 * sizeof(pg_block_q8_K);
                pg_kp_amx_group(wq, w, kb, y, by, col + c0 * PG_KP_AMX_KB, cs, acc[p] + c0);
            }
        }
    }
    pg_amx_tile_end(&found, acc, mr, nc, s, lds);
}
#endif
/* vec_dot_tile of type t: s[c*lds + r] = x_r . y_c for r < mr (<= PG_QP_MR), c < nc (<= PG_QP_NC);
 * pk: repacked panels (pg_qp_cols) */
PG_ALWAYS_INLINE void pg_kp_tile(const int t, int64_t n, const void * vx, size_t bx, int mr, const void * vy, size_t by,
                                 int nc, float * s, size_t lds, const int pk) {
#if defined(PG_X86_AMX)
    /* Q4_K and Q5_K: whole groups of 16 columns on AMX where the CPU has it, the rest below */
    if (t != PG_TYPE_Q6_K && nc >= PG_QP_R && pg_amx_ready()) {
        const int done = nc - nc % PG_QP_R;
        pg_kp_amx_tile(t, n, vx, bx, mr, vy, by, done, s, lds, pk);
        vy = (const char *) vy + (size_t) done * by;
        s += (size_t) done * lds;
        nc -= done;
    }
#endif
    /* few columns as the GEMV (pg_qp_tile's reasons) */
    const int64_t nahead = mr + PG_X16_AHEAD * PG_QP_R;
    switch (nc) {
    case 1: pg_kp_cols(t, 1, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 2: pg_kp_cols(t, 2, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 3: pg_kp_cols(t, 3, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 4: pg_kp_cols(t, 4, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 5: pg_kp_cols(t, 5, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 6: pg_kp_cols(t, 6, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 7: pg_kp_cols(t, 7, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 8: pg_kp_cols(t, 8, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 0: return;
    default: break;
    }
    const char * x = (const char *) vx;
    const int64_t nb = n / PG_QK_K;
    const int np = (mr + PG_QP_R - 1) / PG_QP_R, KB = pg_kp_kb(t);
    pg_kp_col col[PG_QP_NC * PG_K4P_KB];
    pg_kp_pass w;
    __m512 acc[PG_QP_MR / PG_QP_R][PG_QP_NC];
    for (int p = 0; p < np; p++)
        for (int c = 0; c < nc; c++) acc[p][c] = _mm512_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += KB) {
        const int kb = (int) PG_MIN(KB, nb - b0);
        const char * y[PG_QP_NC];
        for (int c = 0; c < nc; c++) {
            y[c] = (const char *) vy + (size_t) c * by + (size_t) b0 * sizeof(pg_block_q8_K);
            pg_kp_column(t, (const char *) vy + (size_t) c * by, b0, kb, col + c * KB);
        }
        for (int p = 0; p < np; p++) {
            const pg_x16_src xr = pg_x16_panel(x, bx, p, mr, pk);
            for (int k = 0; k < kb; k++) {
                if (t == PG_TYPE_Q6_K) pg_k6p_block(&xr, b0 + k, &w.k6[k]);
                else pg_k4p_block(&xr, b0 + k, &w.k4[k], t == PG_TYPE_Q5_K);
            }
            for (int c0 = 0; c0 < nc; c0 += PG_QP_NCR) {
                const char * const * yc = y + c0;
                const pg_kp_col * cc = col + c0 * KB;
                __m512 * ac = acc[p] + c0;
                switch (PG_MIN(PG_QP_NCR, nc - c0)) {
                case 1: pg_kp_run(t, &w, kb, yc, cc, KB, 1, ac); break;
                case 2: pg_kp_run(t, &w, kb, yc, cc, KB, 2, ac); break;
                case 3: pg_kp_run(t, &w, kb, yc, cc, KB, 3, ac); break;
                case 4: pg_kp_run(t, &w, kb, yc, cc, KB, 4, ac); break;
                case 5: pg_kp_run(t, &w, kb, yc, cc, KB, 5, ac); break;
                case 6: pg_kp_run(t, &w, kb, yc, cc, KB, 6, ac); break;
                case 7: pg_kp_run(t, &w, kb, yc, cc, KB, 7, ac); break;
                default: pg_kp_run(t, &w, kb, yc, cc, KB, 8, ac); break;
                }
            }
        }
    }
    pg_qp_store(acc, mr, nc, s, lds);
}
/* the table's entries: vec_dot_tile of Q4_K, Q5_K and Q6_K, vec_dot_rows (the one-column GEMV) of
 * Q4_K and Q5_K (Q6_K's is the row-pair kernel of arch/x86/kgemv-x86.h, with these f32 steps) */
static inline void pg_vec_dot_q4_K_q8_K_ptile(int64_t n, const void * vx, size_t bx, int mr, const void * vy,
                                              size_t by, int nc, float * s, size_t lds) {
    pg_kp_tile(PG_TYPE_Q4_K, n, vx, bx, mr, vy, by, nc, s, lds, 0);
}
static inline void pg_vec_dot_q5_K_q8_K_ptile(int64_t n, const void * vx, size_t bx, int mr, const void * vy,
                                              size_t by, int nc, float * s, size_t lds) {
    pg_kp_tile(PG_TYPE_Q5_K, n, vx, bx, mr, vy, by, nc, s, lds, 0);
}
static inline void pg_vec_dot_q6_K_q8_K_ptile(int64_t n, const void * vx, size_t bx, int mr, const void * vy,
                                              size_t by, int nc, float * s, size_t lds) {
    pg_kp_tile(PG_TYPE_Q6_K, n, vx, bx, mr, vy, by, nc, s, lds, 0);
}
static inline void pg_vec_dot_q4_K_q8_K_prows(int64_t n, const void * vx, size_t bx, int64_t nr, const void * vy,
                                              float * s) {
    pg_kp_cols(PG_TYPE_Q4_K, 1, n, vx, bx, nr, nr, vy, 0, s, 0, 0);
}
static inline void pg_vec_dot_q5_K_q8_K_prows(int64_t n, const void * vx, size_t bx, int64_t nr, const void * vy,
                                              float * s) {
    pg_kp_cols(PG_TYPE_Q5_K, 1, n, vx, bx, nr, nr, vy, 0, s, 0, 0);
}
#define PG_Q4_K_TILE pg_vec_dot_q4_K_q8_K_ptile
#define PG_Q4_K_ROWS pg_vec_dot_q4_K_q8_K_prows
#define PG_Q4_K_TILE_NC PG_QP_NC
#define PG_Q4_K_TILE_MR PG_QP_MR
#define PG_Q5_K_TILE pg_vec_dot_q5_K_q8_K_ptile
#define PG_Q5_K_ROWS pg_vec_dot_q5_K_q8_K_prows
#define PG_Q5_K_TILE_NC PG_QP_NC
#define PG_Q5_K_TILE_MR PG_QP_MR
#define PG_Q6_K_TILE pg_vec_dot_q6_K_q8_K_ptile
#define PG_Q6_K_TILE_NC PG_QP_NC
#define PG_Q6_K_TILE_MR PG_QP_MR

/* the panels at this level (panels.h's pg_panel_*): not Q6_K, whose one-column GEMV, the row pairs
 * of arch/x86/kgemv-x86.h, decodes more bytes per instruction than its panels even from repacked
 * ones, and reads the rows */
PG_ALWAYS_INLINE bool pg_panel_has(const int t) { return t != PG_TYPE_Q6_K; }
PG_ALWAYS_INLINE void pg_panel_pack(const int t, int64_t n, int64_t nr, const char * x, size_t bx, char * dst) {
    pg_x16_pack(t, n, nr, x, bx, dst);
}
PG_ALWAYS_INLINE void pg_panel_rows(const int t, int64_t n, const void * x, size_t bx, int64_t nr, const void * y,
                                    float * s) {
    if (pg_x16_blck(t) == PG_QK_K) pg_kp_cols(t, 1, n, x, bx, nr, nr, y, 0, s, 0, 1);
    else pg_qp_cols(t, 1, n, x, bx, nr, nr, y, 0, s, 0, 1);
}
PG_ALWAYS_INLINE void pg_panel_tile(const int t, int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by,
                                    int nc, float * s, size_t lds) {
    if (pg_x16_blck(t) == PG_QK_K) pg_kp_tile(t, n, x, bx, mr, y, by, nc, s, lds, 1);
    else pg_qp_tile(t, n, x, bx, mr, y, by, nc, s, lds, 1);
}
#endif
