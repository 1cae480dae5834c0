/* Q8_0, Q4_0, IQ4_NL and MXFP4 (pg_q2_*) and Q4_K, Q5_K and Q6_K (pg_k2_*, below) on AVX2: the panels of 16
 * weight rows (panels.h) with the AVX-512 panels' arithmetic, so the same bits at both levels. Per
 * (row, column) and block b the exact integer sum_b = sum_j x_j y_j, then acc = fma(d_x*d_y, (float)
 * sum_b, acc) in block order from 0;
 * vec_dot_tile and vec_dot_rows both run it, so a GEMM column equals the GEMV's bit for bit.
 *
 * A panel is two halves of 8 rows, one 32-bit lane per row: vector g of a half holds dword g of its
 * rows' codes (made from the rows, pg_x8_dwords, or read from the repacked copy). Operand j holds
 * elements 4j..4j+3 of each row (the 4-bit types: the low nibbles of dword j, or for j >= 4 the high
 * ones of dword j - 4) and meets a broadcast dword j of the column's int8 values in maddubs, whose
 * int16 pair sums must not saturate:
 * - Q4_0: the codes (0..15, the values + 8) are the unsigned side; a block's 16 products per int16
 *   lane stay below 2^15 (16 * 15 * 128), so they add in int16 and one madd takes them to int32,
 *   starting from -8*sum(y): about 21 vector operations per 8 rows, column and block.
 * - Q8_0, IQ4_NL (its table), MXFP4 (its table): signed values; |v| is the unsigned side and y takes
 *   v's sign (at most 2 * 128 * 127 per pair), each operand's pairs to int32 at once: about 36.
 *
 * Up to PG_Q2_FEW columns run each panel's blocks in registers, the next panel prefetched (the
 * GEMV); more take blocks decoded once per pass of PG_QP_KB into a stack buffer, PG_Q2_NCR columns
 * at a time. */
#pragma once
#include "arch/x86/panels.h"

#define PG_Q2_H 8                    /* rows per half panel */
#define PG_Q2_FEW 2                  /* columns whose blocks are decoded in registers */
#define PG_Q2_NCR 4                  /* columns in registers from the decoded buffer */

/* a half panel's block: u[j] the unsigned operand of elements 4j..4j+3 (lane r: row r), v[j] their
 * signed values (the signed types), d the rows' scales */
typedef struct { __m256i u[8], v[8]; __m256 d; } pg_q2_blk;
/* how far the unsigned operand lies above the value: Q4_0's codes, else |v| against y signed as v */
PG_ALWAYS_INLINE int pg_q2_off(const int t) { return t == PG_TYPE_Q4_0 ? 8 : 0; }

/* the 16 bytes at p[r] + off of 8 rows as four dword vectors: out[g] lane r = dword g of row r */
PG_ALWAYS_INLINE void pg_x8_dwords(const char * const * p, size_t off, __m256i * out) {
    __m256i z[4];
    /* z[a]: row a's bytes in the low 128-bit lane, row 4 + a's in the high one */
#pragma GCC unroll 4
    for (int a = 0; a < 4; a++)
        z[a] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *) (p[a] + off))),
                                       _mm_loadu_si128((const __m128i *) (p[4 + a] + off)), 1);
    const __m256i t0 = _mm256_unpacklo_epi32(z[0], z[1]), t1 = _mm256_unpackhi_epi32(z[0], z[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(z[2], z[3]), t3 = _mm256_unpackhi_epi32(z[2], z[3]);
    out[0] = _mm256_unpacklo_epi64(t0, t2);
    out[1] = _mm256_unpackhi_epi64(t0, t2);
    out[2] = _mm256_unpacklo_epi64(t1, t3);
    out[3] = _mm256_unpackhi_epi64(t1, t3);
}
/* half h (rows 8h..8h+7) of block b of type t of the panel s: its code dwords q[g] (g < 8 for Q8_0,
 * else 4) and its rows' heads (the fp16 d, MXFP4's E8M0 exponent in the low byte) */
PG_ALWAYS_INLINE void pg_q2_raw(const pg_x16_src * s, const int t, int64_t b, int h, __m256i * q, __m128i * d) {
    const int nq = t == PG_TYPE_Q8_0 ? 8 : 4;
    if (s->pk) {
        const char * k = s->pk + (size_t) b * pg_x16_pbsize(t);
        *d = _mm_loadu_si128((const __m128i *) (k + 2 * PG_Q2_H * h));
        for (int g = 0; g < nq; g++)
            q[g] = _mm256_loadu_si256((const __m256i *) (k + pg_x16_heads(t) + 4 * PG_QP_R * g + 4 * PG_Q2_H * h));
        return;
    }
    const char * const * p = s->r + PG_Q2_H * h;
    const size_t o = (size_t) b * pg_qp_bsize(t);
    for (int g = 0; g < nq; g += 4) pg_x8_dwords(p, o + pg_qp_qs(t) + 4 * g, q + g);
    uint16_t e[PG_Q2_H];
    for (int i = 0; i < PG_Q2_H; i++) memcpy(&e[i], p[i] + o, 2);
    *d = _mm_loadu_si128((const __m128i *) e);
}
/* half h of block b of the panel s, decoded into *w */
PG_ALWAYS_INLINE void pg_q2_block(const pg_x16_src * s, const int t, int64_t b, int h, pg_q2_blk * w) {
    __m256i q[8];
    __m128i hd;
    pg_q2_raw(s, t, b, h, q, &hd);
    if (t == PG_TYPE_MXFP4) {
        /* as ggml_e8m0_to_fp32_half: 2^(e-128), for e < 2 the subnormal 0x00200000 << e */
        const __m256i e = _mm256_and_si256(_mm256_cvtepu16_epi32(hd), _mm256_set1_epi32(0xff));
        const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
        const __m256i nrm = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
        w->d = _mm256_castsi256_ps(_mm256_blendv_epi8(nrm, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e)));
    } else {
        w->d = _mm256_cvtph_ps(hd);
    }
    if (t == PG_TYPE_Q8_0) {
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            w->v[j] = q[j];
            w->u[j] = _mm256_abs_epi8(q[j]);
        }
        return;
    }
    const __m256i m = _mm256_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        w->u[g] = _mm256_and_si256(q[g], m);
        w->u[4 + g] = _mm256_and_si256(_mm256_srli_epi16(q[g], 4), m);
    }
    if (t == PG_TYPE_Q4_0) return;
    const __m256i lut = _mm256_broadcastsi128_si256(
        _mm_loadu_si128((const __m128i *) (t == PG_TYPE_IQ4_NL ? pg_iq4nl_values : pg_mxfp4_values)));
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        w->v[j] = _mm256_shuffle_epi8(lut, w->u[j]);
        w->u[j] = _mm256_abs_epi8(w->v[j]);
    }
}
/* acc + d_x*d_y * (the exact block sums) of a half panel's block w and a column's block (codes q, cb) */
PG_ALWAYS_INLINE __m256 pg_q2_dot(const int t, const pg_q2_blk * w, const int8_t * q, pg_qp_col cb, __m256 acc) {
    const __m256i one = _mm256_set1_epi16(1);
    __m256i i = _mm256_set1_epi32(cb.c);
    if (t == PG_TYPE_Q4_0) {
        __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            int32_t a;
            memcpy(&a, q + 4 * j, 4);
            s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w->u[j], _mm256_set1_epi32(a)));
        }
        i = _mm256_add_epi32(i, _mm256_madd_epi16(s, one));
    } else {
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            int32_t a;
            memcpy(&a, q + 4 * j, 4);
            const __m256i y = _mm256_sign_epi8(_mm256_set1_epi32(a), w->v[j]);
            i = _mm256_add_epi32(i, _mm256_madd_epi16(_mm256_maddubs_epi16(w->u[j], y), one));
        }
    }
    return _mm256_fmadd_ps(_mm256_mul_ps(w->d, _mm256_set1_ps(cb.d)), _mm256_cvtepi32_ps(i), acc);
}
/* the sums of a half panel (lane r: row r) to s[r], r < n */
PG_ALWAYS_INLINE void pg_q2_store(__m256 v, int n, float * s) {
    if (n >= PG_Q2_H) {
        _mm256_storeu_ps(s, v);
        return;
    }
    float t[PG_Q2_H];
    _mm256_storeu_ps(t, v);
    memcpy(s, t, (size_t) PG_MAX(n, 0) * sizeof(float));
}
/* nc (a constant, <= PG_Q2_FEW) columns y_c = vy + c*by against nr rows, s[c*lds + r]: each half
 * panel's blocks made and used in registers, as pg_qp_cols (the columns' d_y and -8*sum(y) made once
 * per PG_QP_GEMV_KB blocks for up to PG_QP_GEMV_MR rows, the next panel prefetched up to row
 * nahead); pk (a constant): the rows are repacked panels from vx, bx bytes apart */
PG_ALWAYS_INLINE void pg_q2_cols(const int t, const int nc, int64_t n, const void * vx, size_t bx, int64_t nr,
                                 int64_t nahead, const void * vy, size_t by, float * s, size_t lds, const int pk) {
    const int64_t nb = n / PG_QK8_0;
    pg_qp_col col[PG_Q2_FEW][PG_QP_GEMV_KB];
    __m256 acc[2 * PG_QP_GEMV_MR / PG_QP_R][PG_Q2_FEW];
    for (int64_t i0 = 0; i0 < nr; i0 += PG_QP_GEMV_MR) {
        const char * x = (const char *) vx + (size_t) (pk ? i0 / PG_QP_R : i0) * bx;
        const int mr = (int) PG_MIN(PG_QP_GEMV_MR, nr - i0), np = (mr + PG_QP_R - 1) / PG_QP_R;
        for (int p = 0; p < 2 * np; p++)
            for (int c = 0; c < nc; c++) acc[p][c] = _mm256_setzero_ps();
        for (int64_t b0 = 0; b0 < nb; b0 += PG_QP_GEMV_KB) {
            const int kb = (int) PG_MIN(PG_QP_GEMV_KB, nb - b0);
            const pg_block_q8_0 * yb[PG_Q2_FEW];
            for (int c = 0; c < nc; c++) {
                yb[c] = (const pg_block_q8_0 *) ((const char *) vy + (size_t) c * by) + b0;
                pg_qp_column((const char *) vy + (size_t) c * by, b0, kb, pg_q2_off(t), col[c]);
            }
            for (int p = 0; p < np; p++) {
                const pg_x16_src xr = pg_x16_panel(x, bx, p, mr, pk);
                pg_x16_ahead ahead = pg_x16_ahead_of(t, x, bx, p, i0, nahead, b0, kb, 1, pk);
                __m256 a[2][PG_Q2_FEW];
                for (int h = 0; h < 2; h++)
                    for (int c = 0; c < nc; c++) a[h][c] = acc[2 * p + h][c];
                for (int k = 0; k < kb; k++) {
                    pg_x16_ahead_step(&ahead);
#pragma GCC unroll 2
                    for (int h = 0; h < 2; h++) {
                        pg_q2_blk w;
                        pg_q2_block(&xr, t, b0 + k, h, &w);
                        for (int c = 0; c < nc; c++) a[h][c] = pg_q2_dot(t, &w, yb[c][k].qs, col[c][k], a[h][c]);
                    }
                }
                for (int h = 0; h < 2; h++)
                    for (int c = 0; c < nc; c++) acc[2 * p + h][c] = a[h][c];
            }
        }
        for (int p = 0; p < 2 * np; p++)
            for (int c = 0; c < nc; c++) pg_q2_store(acc[p][c], mr - PG_Q2_H * p, s + (size_t) c * lds + i0 + PG_Q2_H * p);
    }
}
/* NC (a constant, <= PG_Q2_NCR) columns y[c] (Q8_0 rows from block b0 on, their blocks' col[c*PG_QP_KB
 * + k]) against kb decoded blocks w[k] of a half panel, into acc[c] */
PG_ALWAYS_INLINE void pg_q2_run(const int t, const pg_q2_blk * w, int kb, const char * const * y, const pg_qp_col * col,
                                const int NC, __m256 * acc) {
    __m256 a[PG_Q2_NCR];
    for (int c = 0; c < NC; c++) a[c] = acc[c];
    for (int k = 0; k < kb; k++)
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++)
            a[c] = pg_q2_dot(t, &w[k], ((const pg_block_q8_0 *) y[c])[k].qs, col[c * PG_QP_KB + k], a[c]);
    for (int c = 0; c < NC; c++) acc[c] = a[c];
}
/* rows [0, nr) of n elements of type t (x + r*bx) repacked into dst in panels.h's layout, through the
 * reader that takes them from the rows (so the copy is what it reads from either) */
PG_ALWAYS_INLINE void pg_q2_pack(const int t, int64_t n, int64_t nr, const char * x, size_t bx, char * dst) {
    const int64_t nb = n / PG_QK8_0, np = (nr + PG_QP_R - 1) / PG_QP_R;
    const int nq = t == PG_TYPE_Q8_0 ? 8 : 4;
    for (int64_t p = 0; p < np; p++) {
        const pg_x16_src src = pg_x16_panel(x, bx, (int) p, (int) nr, 0);
        for (int64_t b = 0; b < nb; b++) {
            char * k = dst + (size_t) (p * nb + b) * pg_x16_pbsize(t);
            for (int h = 0; h < 2; h++) {
                __m256i q[8];
                __m128i d;
                pg_q2_raw(&src, t, b, h, q, &d);
                if (t == PG_TYPE_MXFP4) d = _mm_and_si128(d, _mm_set1_epi16(0xff));   /* the exponent alone */
                _mm_storeu_si128((__m128i *) (k + 2 * PG_Q2_H * h), d);
                for (int g = 0; g < nq; g++)
                    _mm256_storeu_si256((__m256i *) (k + pg_x16_heads(t) + 4 * PG_QP_R * g + 4 * PG_Q2_H * h), q[g]);
            }
        }
    }
}
/* Q4_K, Q5_K and Q6_K on AVX2: the AVX-512 K-quant panels' arithmetic (kgemm-x86.h) on halves of 8
 * rows, so their bits. Q4_K and Q5_K:
 * Per (row, column) and super-block the exact integers sumi = sum_j scale_j * (sub-block j's sum of
 * q y) and summ = sum_j min_j * (the column's sum over sub-block j), then acc = fma(d_x*d_y, sumi,
 * acc) and acc = fnmadd(dmin_x*d_y, summ, acc). A sub-block's codes (0..15) meet the column's dword
 * broadcasts in 8 maddubs summed in int16 (16 products per lane: < 2^15), and one madd against the
 * row's scale in both int16 halves of its lane makes scale * sum in int32; the mins are int16 pairs
 * madd'ed against the column's sub-block sums, paired alike (pg_kp_column). Q5_K's codes (0..31, the
 * nibble and bit 4 from its high-bit bytes) sum in two int16 groups of 4 maddubs (4 * 2 * 31 * 128 <
 * 2^15), each madd'ed against the scale. Q6_K: sumi =
 * sum_j scale_j * (sub-block j's sum of u y - 32 * its sum of y), u = q + 32 (0..63), then acc =
 * fma(d_x*d_y, sumi, acc); two maddubs of a 16-element sub-block sum in int16 (2 * 2 * 63 * 128 <
 * 2^15), each pair madd'ed against the scale, and the -32 terms as int16 pairs of scales against the
 * column's paired sums (pg_k2_column). */
#define PG_K2_KB 4                   /* super-blocks per pass of the tile */

/* a half panel's super-block: u[i] lane r = the codes (Q6_K: values + 32) of elements 4i..4i+3 of
 * row r; sc[j] its scale of sub-block j in both int16 halves; mn[i] Q4_K/Q5_K: its mins (0, 2),
 * (1, 3), (4, 6), (5, 7) as int16 pairs, Q6_K: its scales (2i, 2i + 1); d, dm its d and dmin */
typedef struct { __m256i u[64], sc[16], mn[8]; __m256 d, dm; } pg_k2_blk;

/* dwords [i0, i0 + 4n) of super-block b of type t of half h of the panel s: out[i] lane r = dword
 * i0 + i of row r's block */
PG_ALWAYS_INLINE void pg_k2_dw(const pg_x16_src * s, const int t, int64_t b, int h, int i0, const int n,
                               __m256i * out) {
    if (s->pk) {
        const char * k = s->pk + (size_t) b * pg_x16_pbsize(t) + 4 * PG_QP_R * i0 + 4 * PG_Q2_H * h;
        for (int i = 0; i < 4 * n; i++) out[i] = _mm256_loadu_si256((const __m256i *) (k + 4 * PG_QP_R * i));
        return;
    }
    const size_t o = (size_t) b * pg_x16_bsize(t) + 4 * (size_t) i0;
    for (int m = 0; m < n; m++) pg_x8_dwords(s->r + PG_Q2_H * h, o + 16 * m, out + 4 * m);
}
/* the 16-bit words at the low (hi = 0) or high half of each dword lane, as 8 f32 (fp16) */
PG_ALWAYS_INLINE __m256 pg_k2_half(__m256i v, const int hi) {
    const __m256i w = hi ? _mm256_srli_epi32(v, 16) : _mm256_and_si256(v, _mm256_set1_epi32(0xffff));
    return _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(w, w), 0x08)));
}
/* scale byte j (0..3) of each dword lane of v in both int16 halves of the lane */
PG_ALWAYS_INLINE __m256i pg_k2_spread(__m256i v, const int j) {
    const char z = -128, e = (char) j;
    return _mm256_shuffle_epi8(v, _mm256_setr_epi8(e, z, e, z, 4 + e, z, 4 + e, z, 8 + e, z, 8 + e, z, 12 + e, z, 12 + e, z,
                                                   e, z, e, z, 4 + e, z, 4 + e, z, 8 + e, z, 8 + e, z, 12 + e, z, 12 + e, z));
}
/* the head of half h of Q4_K or Q5_K (t) super-block b of the panel s: its dwords hd ({d, dmin}, then
 * the scale bytes 0-3, 4-7, 8-11) and the 6-bit scales of sub-blocks 0-3 (sm[0]) and 4-7 (sm[1]) and
 * mins of 0-3 (sm[2]) and 4-7 (sm[3]), a byte each in every dword lane */
PG_ALWAYS_INLINE void pg_k2_bytes(const pg_x16_src * s, const int t, int64_t b, int h, __m256i * hd, __m256i * sm) {
    pg_k2_dw(s, t, b, h, 0, 1, hd);
    const __m256i lo6 = _mm256_set1_epi32(0x3f3f3f3f), lo4 = _mm256_set1_epi32(0x0f0f0f0f);
    const __m256i lo2 = _mm256_set1_epi32(0x03030303);
    sm[0] = _mm256_and_si256(hd[1], lo6);
    sm[1] = _mm256_or_si256(_mm256_and_si256(hd[3], lo4), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(hd[1], 6), lo2), 4));
    sm[2] = _mm256_and_si256(hd[2], lo6);
    sm[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(hd[3], 4), lo4),
                            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(hd[2], 6), lo2), 4));
}
/* *w's mins, d and dmin from pg_k2_bytes' hd and sm */
PG_ALWAYS_INLINE void pg_k2_mins(const __m256i * hd, const __m256i * sm, pg_k2_blk * w) {
    const __m256i b16 = _mm256_set1_epi32(0x00ff00ff);
    w->mn[0] = _mm256_and_si256(sm[2], b16);
    w->mn[1] = _mm256_and_si256(_mm256_srli_epi32(sm[2], 8), b16);
    w->mn[2] = _mm256_and_si256(sm[3], b16);
    w->mn[3] = _mm256_and_si256(_mm256_srli_epi32(sm[3], 8), b16);
    w->d = pg_k2_half(hd[0], 0);
    w->dm = pg_k2_half(hd[0], 1);
}
/* the scales, mins, d and dmin of half h of super-block b of the Q4_K or Q5_K (t) panel s (all of *w
 * but u) */
PG_ALWAYS_INLINE void pg_k2_head(const pg_x16_src * s, const int t, int64_t b, int h, pg_k2_blk * w) {
    __m256i hd[4], sm[4];
    pg_k2_bytes(s, t, b, h, hd, sm);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) w->sc[j] = pg_k2_spread(sm[j / 4], j % 4);
    pg_k2_mins(hd, sm, w);
}
/* the 16-bit lanes of v shifted left by k (right by -k): for -3 <= k <= 4, bit 4 of each byte is then
 * bit 4 - k of the same byte */
PG_ALWAYS_INLINE __m256i pg_k2_shift(__m256i v, const int k) {
    return k > 0 ? _mm256_slli_epi16(v, k) : k < 0 ? _mm256_srli_epi16(v, -k) : v;
}
/* the codes of one dword of elements of sub-blocks 2c (*lo) and 2c + 1 (*hi) of type t (Q4_K, Q5_K)
 * from chunk c's code dword q and Q5_K's high-bit dword qh: bits 2c and 2c + 1 of its byte l are bit
 * 4 of the codes of element l of the two sub-blocks */
PG_ALWAYS_INLINE void pg_k2_code(const int t, __m256i q, __m256i qh, int c, __m256i * lo, __m256i * hi) {
    const __m256i m = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
    *lo = _mm256_and_si256(q, m);
    *hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m);
    if (t != PG_TYPE_Q5_K) return;
    *lo = _mm256_or_si256(*lo, _mm256_and_si256(pg_k2_shift(qh, 4 - 2 * c), b4));
    *hi = _mm256_or_si256(*hi, _mm256_and_si256(pg_k2_shift(qh, 3 - 2 * c), b4));
}
/* the codes of sub-blocks 2c and 2c + 1 (u[0..7] and u[8..15]) of type t from chunk c's dwords q and
 * Q5_K's high-bit dwords qh (pg_k2_code's) */
PG_ALWAYS_INLINE void pg_k2_codes(const int t, const __m256i * q, const __m256i * qh, int c, __m256i * u) {
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) pg_k2_code(t, q[g], t == PG_TYPE_Q5_K ? qh[g] : q[g], c, u + g, u + 8 + g);
}
/* the first dword of the codes of a Q4_K or Q5_K super-block (after its head, and Q5_K's 8 dwords of
 * high bits) */
PG_ALWAYS_INLINE int pg_k2_qs(const int t) { return t == PG_TYPE_Q5_K ? 12 : 4; }
/* the values + 32 of elements 128a + 32q + 4g.. (u[g], g < 8) of a half panel's Q6_K super-block, from
 * its dwords lo[8] (bytes 64a + 32(q % 2)..) and qh[8] (bytes 128 + 32a..): the low (q < 2) or high
 * nibble of lo's byte l, bits 2q, 2q + 1 of qh[32a + l] */
PG_ALWAYS_INLINE void pg_k62_group(const __m256i * ql, const __m256i * qh, int q, __m256i * u) {
    const __m256i m = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x30);
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        const __m256i lo = ql[g];
        const __m256i nib = _mm256_and_si256(q < 2 ? lo : _mm256_srli_epi16(lo, 4), m);
        const __m256i hb = q < 3 ? _mm256_slli_epi32(qh[g], 4 - 2 * q) : _mm256_srli_epi32(qh[g], 2);
        u[g] = _mm256_or_si256(nib, _mm256_and_si256(hb, m2));
    }
}
/* This level's repacked Q6_K (pg_k2_pack) holds a row's 256 values + 32 in dwords 0..47 of its
 * super-block as three bytes per four values: for a < 2, c < 3 and l < 32, byte 96a + 32c + l is
 * value 128a + 32c + l in its low 6 bits and bits 2c, 2c + 1 of value 128a + 96 + l in its top two
 * (pg_k62_pkbyte); dwords 48..51 and 52 hold the scales and d as from the rows. Four values come
 * from three such bytes in 11 operations, from ql and qh in 17. */
/* value + 32 of element 128a + 32q + l of a Q6_K block: the low (q < 2) or high nibble of
 * ql[64a + 32(q % 2) + l], bits 2q, 2q + 1 of qh[32a + l] */
PG_ALWAYS_INLINE int pg_k62_u(const pg_block_q6_K * x, int a, int q, int l) {
    return (x->ql[64 * a + 32 * (q % 2) + l] >> 4 * (q / 2) & 15) | (x->qh[32 * a + l] >> 2 * q & 3) << 4;
}
PG_ALWAYS_INLINE uint8_t pg_k62_pkbyte(const pg_block_q6_K * x, int a, int c, int l) {
    return (uint8_t) (pg_k62_u(x, a, c, l) | (pg_k62_u(x, a, 3, l) >> 2 * c & 3) << 6);
}
/* the values + 32 of elements 128a + 32q + 4g.. (u[q], q < 4) of half h of super-block b of the
 * repacked Q6_K panel s (s->pk) */
PG_ALWAYS_INLINE void pg_k62_pkgroup(const pg_x16_src * s, int64_t b, int h, int a, int g, __m256i * u) {
    const char * k = s->pk + (size_t) b * pg_x16_pbsize(PG_TYPE_Q6_K) + 4 * PG_Q2_H * h;
    __m256i v[3];
#pragma GCC unroll 3
    for (int c = 0; c < 3; c++) {
        v[c] = _mm256_loadu_si256((const __m256i *) (k + 4 * PG_QP_R * (24 * a + 8 * c + g)));
        u[c] = _mm256_and_si256(v[c], _mm256_set1_epi8(0x3f));
    }
    /* the top two bits of each byte to bits 0-1, 2-3, 4-5: shifts of the 16-bit lanes, masked per byte */
    u[3] = _mm256_or_si256(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v[0], 6), _mm256_set1_epi8(0x03)),
                                           _mm256_and_si256(_mm256_srli_epi16(v[1], 4), _mm256_set1_epi8(0x0c))),
                           _mm256_and_si256(_mm256_srli_epi16(v[2], 2), _mm256_set1_epi8(0x30)));
}
/* the signed bytes e and f of each dword lane of v as the int16 pair (byte e, byte f): pshufb puts
 * them in the halves' high bytes (within each 128-bit lane: dword L's bytes are 4L..4L+3), the shift
 * brings them down with their sign */
PG_ALWAYS_INLINE __m256i pg_k62_pair(__m256i v, int e, int f) {
    const __m256i idx = _mm256_setr_epi8(-128, (char) e, -128, (char) f, -128, (char) (4 + e), -128, (char) (4 + f),
                                         -128, (char) (8 + e), -128, (char) (8 + f), -128, (char) (12 + e), -128, (char) (12 + f),
                                         -128, (char) e, -128, (char) f, -128, (char) (4 + e), -128, (char) (4 + f),
                                         -128, (char) (8 + e), -128, (char) (8 + f), -128, (char) (12 + e), -128, (char) (12 + f));
    return _mm256_srai_epi16(_mm256_shuffle_epi8(v, idx), 8);
}
/* the scales (and their pairs) and d of half h of Q6_K super-block b of the panel s (all of *w but u) */
PG_ALWAYS_INLINE void pg_k62_head(const pg_x16_src * s, int64_t b, int h, pg_k2_blk * w) {
    const int t = PG_TYPE_Q6_K;
    __m256i sc[4];
    pg_k2_dw(s, t, b, h, 48, 1, sc);
    /* scale bytes e and f of each dword lane to the high bytes of its two int16 halves, then shifted
     * down with their sign: the pair (scale e, scale f) */
#pragma GCC unroll 4
    for (int a = 0; a < 4; a++)
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) w->sc[4 * a + c] = pg_k62_pair(sc[a], c, c);
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) w->mn[i] = pg_k62_pair(sc[i / 2], 2 * (i % 2), 2 * (i % 2) + 1);   /* (scale 2i, 2i + 1) */
    /* d: the block's last two bytes (a repacked copy pads them to a dword) */
    if (s->pk) {
        const char * k = s->pk + (size_t) b * pg_x16_pbsize(t) + 4 * PG_QP_R * 52 + 4 * PG_Q2_H * h;
        w->d = pg_k2_half(_mm256_loadu_si256((const __m256i *) k), 0);
    } else {
        uint16_t e[PG_Q2_H];
        for (int i = 0; i < PG_Q2_H; i++)
            memcpy(&e[i], s->r[PG_Q2_H * h + i] + (size_t) b * pg_x16_bsize(t) + offsetof(pg_block_q6_K, d), 2);
        w->d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) e));
    }
}
/* half h of Q6_K super-block b of the panel s, decoded into *w */
PG_ALWAYS_INLINE void pg_k62_block(const pg_x16_src * s, int64_t b, int h, pg_k2_blk * w) {
    pg_k62_head(s, b, h, w);
    if (s->pk) {
        for (int a = 0; a < 2; a++)
            for (int g = 0; g < 8; g++) {
                __m256i u[4];
                pg_k62_pkgroup(s, b, h, a, g, u);
                for (int q = 0; q < 4; q++) w->u[32 * a + 8 * q + g] = u[q];
            }
        return;
    }
#pragma GCC unroll 2
    for (int a = 0; a < 2; a++) {
        __m256i ql[16], qh[8];
        pg_k2_dw(s, PG_TYPE_Q6_K, b, h, 16 * a, 4, ql);
        pg_k2_dw(s, PG_TYPE_Q6_K, b, h, 32 + 8 * a, 2, qh);
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) pg_k62_group(ql + 8 * (q % 2), qh, q, w->u + 32 * a + 8 * q);
    }
}
/* half h of super-block b of type t of the panel s, decoded into *w */
PG_ALWAYS_INLINE void pg_k2_block(const pg_x16_src * s, const int t, int64_t b, int h, pg_k2_blk * w) {
    if (t == PG_TYPE_Q6_K) {
        pg_k62_block(s, b, h, w);
        return;
    }
    pg_k2_head(s, t, b, h, w);
    __m256i qh[8];
    if (t == PG_TYPE_Q5_K) pg_k2_dw(s, t, b, h, 4, 2, qh);
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        __m256i q[8];
        pg_k2_dw(s, t, b, h, pg_k2_qs(t) + 8 * c, 2, q);   /* codes 32c..32c+31: sub-blocks 2c (low nibbles), 2c + 1 */
        pg_k2_codes(t, q, qh, c, w->u + 16 * c);
    }
}
/* a sub-block's codes u[0..7] of type t (Q4_K, Q5_K) against the column's 32 values yq, times the
 * scales sc: exact, int32 */
PG_ALWAYS_INLINE __m256i pg_k2_sub(const int t, const __m256i * u, const int8_t * yq, __m256i sc) {
    __m256i s[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        int32_t a;
        memcpy(&a, yq + 4 * g, 4);
        const int i = t == PG_TYPE_Q5_K ? g / 4 : 0;
        s[i] = _mm256_add_epi16(s[i], _mm256_maddubs_epi16(u[g], _mm256_set1_epi32(a)));
    }
    const __m256i r = _mm256_madd_epi16(s[0], sc);
    return t == PG_TYPE_Q5_K ? _mm256_add_epi32(r, _mm256_madd_epi16(s[1], sc)) : r;
}
/* acc + the super-block's f32 steps: sumi, then the mins against the column's sub-block sums cb */
PG_ALWAYS_INLINE __m256 pg_k2_acc(const pg_k2_blk * w, __m256i sumi, const pg_kp_col * cb, __m256 acc) {
    __m256i summ = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) summ = _mm256_add_epi32(summ, _mm256_madd_epi16(w->mn[i], _mm256_set1_epi32(cb->c[i])));
    const __m256 dy = _mm256_set1_ps(cb->d);
    acc = _mm256_fmadd_ps(_mm256_mul_ps(w->d, dy), _mm256_cvtepi32_ps(sumi), acc);
    return _mm256_fnmadd_ps(_mm256_mul_ps(w->dm, dy), _mm256_cvtepi32_ps(summ), acc);
}
/* a 16-element sub-block's values + 32, u[0..3], against the column's 16 values yq, times the scales
 * sc: exact, int32 (two int16 pair sums of at most 2 * 2 * 63 * 128 each) */
PG_ALWAYS_INLINE __m256i pg_k62_sub(const __m256i * u, const int8_t * yq, __m256i sc) {
    __m256i p[4];
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        int32_t a;
        memcpy(&a, yq + 4 * g, 4);
        p[g] = _mm256_maddubs_epi16(u[g], _mm256_set1_epi32(a));
    }
    return _mm256_add_epi32(_mm256_madd_epi16(_mm256_add_epi16(p[0], p[1]), sc),
                            _mm256_madd_epi16(_mm256_add_epi16(p[2], p[3]), sc));
}
/* acc + the super-block's f32 step: sumi less 32 * (the scales against the column's sub-block sums) */
PG_ALWAYS_INLINE __m256 pg_k62_acc(const pg_k2_blk * w, __m256i sumi, const pg_kp_col * cb, __m256 acc) {
    __m256i corr = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) corr = _mm256_add_epi32(corr, _mm256_madd_epi16(w->mn[i], _mm256_set1_epi32(cb->c[i])));
    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(corr, 5));
    return _mm256_fmadd_ps(_mm256_mul_ps(w->d, _mm256_set1_ps(cb->d)), _mm256_cvtepi32_ps(sumi), acc);
}
/* acc + a half panel's decoded Q6_K super-block w against a column's (values yq, cb: pg_k2_column's) */
PG_ALWAYS_INLINE __m256 pg_k62_dot(const pg_k2_blk * w, const int8_t * yq, const pg_kp_col * cb, __m256 acc) {
    __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) sumi = _mm256_add_epi32(sumi, pg_k62_sub(w->u + 4 * j, yq + 16 * j, w->sc[j]));
    return pg_k62_acc(w, sumi, cb, acc);
}
/* acc + a half panel's decoded super-block w of type t against a column's (values yq, cb) */
PG_ALWAYS_INLINE __m256 pg_k2_dot(const int t, const pg_k2_blk * w, const int8_t * yq, const pg_kp_col * cb, __m256 acc) {
    if (t == PG_TYPE_Q6_K) return pg_k62_dot(w, yq, cb, acc);
    __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) sumi = _mm256_add_epi32(sumi, pg_k2_sub(t, w->u + 8 * j, yq + 32 * j, w->sc[j]));
    return pg_k2_acc(w, sumi, cb, acc);
}
/* acc[c] + half h of Q4_K or Q5_K (t) super-block b of the panel s against nc (a constant, <=
 * PG_Q2_FEW) columns' super-blocks (values yq[c], sums cb[c]): pg_k2_head's and pg_k2_dot's integers,
 * so their bits, with each dword vector of codes split and met by the columns as it is loaded; few
 * vectors live at once, so the sums stay in registers. The prefetch takes a step per 64 elements. */
PG_ALWAYS_INLINE void pg_k2_half_gemv(const pg_x16_src * s, const int t, int64_t b, int h, const int nc,
                                      const int8_t * const * yq, const pg_kp_col * const * cb, pg_x16_ahead * ahead,
                                      __m256 * acc) {
    __m256i hd[4], sm[4], qh[8];
    pg_k2_bytes(s, t, b, h, hd, sm);
    if (t == PG_TYPE_Q5_K) pg_k2_dw(s, t, b, h, 4, 2, qh);
    __m256i sumi[PG_Q2_FEW];
    for (int c = 0; c < nc; c++) sumi[c] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int t4 = 0; t4 < 4; t4++) {
        pg_x16_ahead_step(ahead);
        const __m256i sc0 = pg_k2_spread(sm[t4 / 2], 2 * (t4 % 2)), sc1 = pg_k2_spread(sm[t4 / 2], 2 * (t4 % 2) + 1);
        /* int16 sums of sub-blocks 2t4 (lo) and 2t4 + 1 (hi): Q4_K's 8 products in [0], Q5_K's 4 in each */
        __m256i lo[2][PG_Q2_FEW], hi[2][PG_Q2_FEW];
        for (int i = 0; i < 2; i++)
            for (int c = 0; c < nc; c++) lo[i][c] = hi[i][c] = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int g4 = 0; g4 < 2; g4++) {
            __m256i q[4];
            pg_k2_dw(s, t, b, h, pg_k2_qs(t) + 8 * t4 + 4 * g4, 1, q);
            const int i = t == PG_TYPE_Q5_K ? g4 : 0;
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++) {
                __m256i ul, uh;
                pg_k2_code(t, q[g], t == PG_TYPE_Q5_K ? qh[4 * g4 + g] : q[g], t4, &ul, &uh);
                for (int c = 0; c < nc; c++) {
                    int32_t al, ah;
                    memcpy(&al, yq[c] + 64 * t4 + 4 * (4 * g4 + g), 4);
                    memcpy(&ah, yq[c] + 64 * t4 + 32 + 4 * (4 * g4 + g), 4);
                    lo[i][c] = _mm256_add_epi16(lo[i][c], _mm256_maddubs_epi16(ul, _mm256_set1_epi32(al)));
                    hi[i][c] = _mm256_add_epi16(hi[i][c], _mm256_maddubs_epi16(uh, _mm256_set1_epi32(ah)));
                }
            }
        }
        for (int c = 0; c < nc; c++) {
            __m256i r = _mm256_add_epi32(_mm256_madd_epi16(lo[0][c], sc0), _mm256_madd_epi16(hi[0][c], sc1));
            if (t == PG_TYPE_Q5_K)
                r = _mm256_add_epi32(r, _mm256_add_epi32(_mm256_madd_epi16(lo[1][c], sc0), _mm256_madd_epi16(hi[1][c], sc1)));
            sumi[c] = _mm256_add_epi32(sumi[c], r);
        }
    }
    pg_k2_blk w;   /* its mins, d and dmin: pg_k2_acc's operands */
    pg_k2_mins(hd, sm, &w);
    for (int c = 0; c < nc; c++) acc[c] = pg_k2_acc(&w, sumi[c], cb[c], acc[c]);
}
/* acc[c] + half h of Q6_K super-block b of the panel s against nc (a constant, <= PG_Q2_FEW) columns'
 * super-blocks (values yq[c], sums cb[c]): pg_k62_dot's integers, so its bits. Repacked (s->pk):
 * four values from each three bytes (pg_k62_pkgroup), met by the columns at once; rows: each group
 * of 32 values made (the rows gathered, transposed, once per 128 values) and used at once. The
 * prefetch takes a step per 64 elements. */
PG_ALWAYS_INLINE void pg_k62_half_gemv(const pg_x16_src * s, int64_t b, int h, const int nc,
                                       const int8_t * const * yq, const pg_kp_col * const * cb, pg_x16_ahead * ahead,
                                       __m256 * acc) {
    pg_k2_blk w;
    pg_k62_head(s, b, h, &w);
    __m256i sumi[PG_Q2_FEW];
    for (int c = 0; c < nc; c++) sumi[c] = _mm256_setzero_si256();
    for (int a = 0; a < 2; a++) {
        if (s->pk) {
#pragma GCC unroll 2
            for (int g4 = 0; g4 < 2; g4++) {
                pg_x16_ahead_step(ahead);
#pragma GCC unroll 2
                for (int pr = 0; pr < 2; pr++) {
                    __m256i pq[PG_Q2_FEW][4];   /* sub-block 8a + 2q + g4's two products, int16 */
#pragma GCC unroll 2
                    for (int gg = 0; gg < 2; gg++) {
                        const int g = 4 * g4 + 2 * pr + gg;
                        __m256i u[4];
                        pg_k62_pkgroup(s, b, h, a, g, u);
                        for (int c = 0; c < nc; c++)
#pragma GCC unroll 4
                            for (int q = 0; q < 4; q++) {
                                int32_t y4;
                                memcpy(&y4, yq[c] + 128 * a + 32 * q + 4 * g, 4);
                                const __m256i m = _mm256_maddubs_epi16(u[q], _mm256_set1_epi32(y4));
                                pq[c][q] = gg ? _mm256_add_epi16(pq[c][q], m) : m;
                            }
                    }
                    for (int c = 0; c < nc; c++)
                        for (int q = 0; q < 4; q++)
                            sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(pq[c][q], w.sc[8 * a + 2 * q + g4]));
                }
            }
            continue;
        }
        __m256i ql[16], qh[8];
        pg_k2_dw(s, PG_TYPE_Q6_K, b, h, 16 * a, 4, ql);
        pg_k2_dw(s, PG_TYPE_Q6_K, b, h, 32 + 8 * a, 2, qh);
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            __m256i u[8];
            if (q % 2 == 0) pg_x16_ahead_step(ahead);
            pg_k62_group(ql + 8 * (q % 2), qh, q, u);
            const int j = 8 * a + 2 * q;        /* the group's sub-blocks j, j + 1 */
            for (int c = 0; c < nc; c++) {
                sumi[c] = _mm256_add_epi32(sumi[c], pg_k62_sub(u, yq[c] + 16 * j, w.sc[j]));
                sumi[c] = _mm256_add_epi32(sumi[c], pg_k62_sub(u + 4, yq[c] + 16 * j + 16, w.sc[j + 1]));
            }
        }
    }
    for (int c = 0; c < nc; c++) acc[c] = pg_k62_acc(&w, sumi[c], cb[c], acc[c]);
}
/* nc (a constant, <= PG_Q2_FEW) columns y_c = vy + c*by (Q8_K rows) against nr rows, s[c*lds + r]: a
 * half panel's super-block made and used at once (pg_k2_half_gemv, pg_k62_half_gemv); the columns
 * prepared once per PG_K2_GEMV_KB super-blocks for up to PG_QP_GEMV_MR rows, the next panel
 * prefetched up to row nahead, the rows or (pk) repacked panels (as pg_q2_cols). The prefetch takes
 * PG_K2_AHEAD_STEPS steps a super-block, one per 64 elements of a half panel, not one: a panel's
 * super-block spans 36 (Q4_K) to 53 (Q6_K) cache lines, and
 * their prefetches issued at once held up the loads behind them while the weights came from DRAM
 * (docs/bench/journal.md). */
#define PG_K2_GEMV_KB 64
#define PG_K2_AHEAD_STEPS 8
/* super-blocks [b0, b0 + kb) of a Q8_K column y for type t: pg_kp_column's, Q6_K: c[i] = its sums of y
 * over sub-blocks 2i and 2i + 1 as an int16 pair */
static inline void pg_k2_column(const int t, const char * y, int64_t b0, int kb, pg_kp_col * out) {
    if (t != PG_TYPE_Q6_K) {
        pg_kp_column(t, y, b0, kb, out);
        return;
    }
    const pg_block_q8_K * yb = (const pg_block_q8_K *) y + b0;
    for (int k = 0; k < kb; k++) {
        out[k].d = yb[k].d;
        for (int i = 0; i < 8; i++)
            out[k].c[i] = (int32_t) ((uint32_t) (uint16_t) yb[k].bsums[2 * i] | (uint32_t) (uint16_t) yb[k].bsums[2 * i + 1] << 16);
    }
}
PG_ALWAYS_INLINE void pg_k2_cols(const int t, const int nc, int64_t n, const void * vx, size_t bx, int64_t nr,
                                 int64_t nahead, const void * vy, size_t by, float * s, size_t lds, const int pk) {
    const int64_t nb = n / PG_QK_K;
    pg_kp_col col[PG_Q2_FEW][PG_K2_GEMV_KB];
    __m256 acc[2 * PG_QP_GEMV_MR / PG_QP_R][PG_Q2_FEW];
    for (int64_t i0 = 0; i0 < nr; i0 += PG_QP_GEMV_MR) {
        const char * x = (const char *) vx + (size_t) (pk ? i0 / PG_QP_R : i0) * bx;
        const int mr = (int) PG_MIN(PG_QP_GEMV_MR, nr - i0), np = (mr + PG_QP_R - 1) / PG_QP_R;
        for (int p = 0; p < 2 * np; p++)
            for (int c = 0; c < nc; c++) acc[p][c] = _mm256_setzero_ps();
        for (int64_t b0 = 0; b0 < nb; b0 += PG_K2_GEMV_KB) {
            const int kb = (int) PG_MIN(PG_K2_GEMV_KB, nb - b0);
            const pg_block_q8_K * yb[PG_Q2_FEW];
            for (int c = 0; c < nc; c++) {
                yb[c] = (const pg_block_q8_K *) ((const char *) vy + (size_t) c * by) + b0;
                pg_k2_column(t, (const char *) vy + (size_t) c * by, b0, kb, col[c]);
            }
            for (int p = 0; p < np; p++) {
                const pg_x16_src xr = pg_x16_panel(x, bx, p, mr, pk);
                pg_x16_ahead ahead = pg_x16_ahead_of(t, x, bx, p, i0, nahead, b0, kb, PG_K2_AHEAD_STEPS, pk);
                __m256 a[2][PG_Q2_FEW];
                for (int h = 0; h < 2; h++)
                    for (int c = 0; c < nc; c++) a[h][c] = acc[2 * p + h][c];
                for (int k = 0; k < kb; k++) {
                    for (int h = 0; h < 2; h++) {
                        const int8_t * yq[PG_Q2_FEW];
                        const pg_kp_col * cb[PG_Q2_FEW];
                        for (int c = 0; c < nc; c++) {
                            yq[c] = yb[c][k].qs;
                            cb[c] = &col[c][k];
                        }
                        if (t == PG_TYPE_Q6_K) pg_k62_half_gemv(&xr, b0 + k, h, nc, yq, cb, &ahead, a[h]);
                        else pg_k2_half_gemv(&xr, t, b0 + k, h, nc, yq, cb, &ahead, a[h]);
                    }
                }
                for (int h = 0; h < 2; h++)
                    for (int c = 0; c < nc; c++) acc[2 * p + h][c] = a[h][c];
            }
        }
        for (int p = 0; p < 2 * np; p++)
            for (int c = 0; c < nc; c++) pg_q2_store(acc[p][c], mr - PG_Q2_H * p, s + (size_t) c * lds + i0 + PG_Q2_H * p);
    }
}
/* NC (a constant, <= PG_Q2_NCR) columns y[c] (Q8_K rows from super-block b0 on, their col[c*PG_K2_KB + k])
 * against kb decoded super-blocks w[k] of a half panel, into acc[c] */
PG_ALWAYS_INLINE void pg_k2_run(const int t, const pg_k2_blk * w, int kb, const char * const * y, const pg_kp_col * col,
                                const int NC, __m256 * acc) {
    __m256 a[PG_Q2_NCR];
    for (int c = 0; c < NC; c++) a[c] = acc[c];
    for (int k = 0; k < kb; k++)
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++)
            a[c] = pg_k2_dot(t, &w[k], ((const pg_block_q8_K *) y[c])[k].qs, &col[c * PG_K2_KB + k], a[c]);
    for (int c = 0; c < NC; c++) acc[c] = a[c];
}
/* the panel types' two families at this level: 32-element blocks (pg_q2_*, t = Q8_0, Q4_0, IQ4_NL,
 * MXFP4) and super-blocks (pg_k2_*, Q4_K, Q5_K, Q6_K); the tile's decoded blocks and columns of either */
PG_ALWAYS_INLINE int pg_p2_k(const int t) { return pg_x16_blck(t) == PG_QK_K; }
typedef union { pg_q2_blk q[PG_QP_KB]; pg_k2_blk k[PG_K2_KB]; } pg_p2_blkbuf;
typedef union { pg_qp_col q[PG_QP_NC * PG_QP_KB]; pg_kp_col k[PG_QP_NC * PG_K2_KB]; } pg_p2_colbuf;
PG_ALWAYS_INLINE void pg_p2_cols(const int t, const int nc, int64_t n, const void * vx, size_t bx, int64_t nr,
                                 int64_t nahead, const void * vy, size_t by, float * s, size_t lds, const int pk) {
    if (pg_p2_k(t)) pg_k2_cols(t, nc, n, vx, bx, nr, nahead, vy, by, s, lds, pk);
    else pg_q2_cols(t, nc, n, vx, bx, nr, nahead, vy, by, s, lds, pk);
}
/* NC (a constant, <= PG_Q2_NCR) columns against kb decoded blocks: pg_q2_run or pg_k2_run, the
 * blocks of columns c0 on from col */
PG_ALWAYS_INLINE void pg_p2_run(const int t, const pg_p2_blkbuf * w, int kb, const char * const * y, const pg_p2_colbuf * col,
                                int c0, const int NC, __m256 * acc) {
    if (pg_p2_k(t)) pg_k2_run(t, w->k, kb, y, col->k + c0 * PG_K2_KB, NC, acc);
    else pg_q2_run(t, w->q, kb, y, col->q + c0 * PG_QP_KB, NC, acc);
}
/* vec_dot_tile of type t: s[c*lds + r] = x_r . y_c for r < mr (<= PG_QP_MR), c < nc (<= PG_QP_NC); pk:
 * repacked panels. Up to PG_Q2_FEW columns as the GEMV; more against a pass of blocks decoded once
 * per half panel, PG_Q2_NCR columns at a time, the same pass of the next panel prefetched a block
 * per block decoded (the caller's next rows past mr) */
PG_ALWAYS_INLINE void pg_p2_tile(const int t, int64_t n, const void * vx, size_t bx, int mr, const void * vy, size_t by,
                                 int nc, float * s, size_t lds, const int pk) {
    const int64_t nahead = mr + PG_X16_AHEAD * PG_QP_R;
    switch (nc) {
    case 1: pg_p2_cols(t, 1, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 2: pg_p2_cols(t, 2, n, vx, bx, mr, nahead, vy, by, s, lds, pk); return;
    case 0: return;
    default: break;
    }
    const int K = pg_p2_k(t), KB = K ? PG_K2_KB : PG_QP_KB;
    const size_t ybs = K ? sizeof(pg_block_q8_K) : sizeof(pg_block_q8_0);
    const int64_t nb = n / pg_x16_blck(t);
    const int np = (mr + PG_QP_R - 1) / PG_QP_R;
    pg_p2_colbuf col;
    pg_p2_blkbuf w;
    __m256 acc[2 * PG_QP_MR / PG_QP_R][PG_QP_NC];
    for (int p = 0; p < 2 * np; p++)
        for (int c = 0; c < nc; c++) acc[p][c] = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += KB) {
        const int kb = (int) PG_MIN(KB, nb - b0);
        const char * y[PG_QP_NC];
        for (int c = 0; c < nc; c++) {
            const char * yc = (const char *) vy + (size_t) c * by;
            y[c] = yc + (size_t) b0 * ybs;
            if (K) pg_k2_column(t, yc, b0, kb, col.k + c * KB);
            else pg_qp_column(yc, b0, kb, pg_q2_off(t), col.q + c * KB);
        }
        for (int p = 0; p < np; p++) {
            const pg_x16_src xr = pg_x16_panel((const char *) vx, bx, p, mr, pk);
            /* two steps a block: one per half panel's decode of it */
            pg_x16_ahead ahead = pg_x16_ahead_of(t, (const char *) vx, bx, p, 0, nahead, b0, kb, 2, pk);
            for (int h = 0; h < 2; h++) {
                for (int k = 0; k < kb; k++) {
                    pg_x16_ahead_step(&ahead);
                    if (K) pg_k2_block(&xr, t, b0 + k, h, &w.k[k]);
                    else pg_q2_block(&xr, t, b0 + k, h, &w.q[k]);
                }
                for (int c0 = 0; c0 < nc; c0 += PG_Q2_NCR) {
                    __m256 * a = acc[2 * p + h] + c0;
                    switch (PG_MIN(PG_Q2_NCR, nc - c0)) {
                    case 1: pg_p2_run(t, &w, kb, y + c0, &col, c0, 1, a); break;
                    case 2: pg_p2_run(t, &w, kb, y + c0, &col, c0, 2, a); break;
                    case 3: pg_p2_run(t, &w, kb, y + c0, &col, c0, 3, a); break;
                    default: pg_p2_run(t, &w, kb, y + c0, &col, c0, 4, a); break;
                    }
                }
            }
        }
    }
    for (int p = 0; p < 2 * np; p++)
        for (int c = 0; c < nc; c++) pg_q2_store(acc[p][c], mr - PG_Q2_H * p, s + (size_t) c * lds + PG_Q2_H * p);
}
/* rows [0, nr) of n elements of type t (Q4_K, Q5_K, Q6_K) repacked into dst in panels.h's layout, through
 * pg_k2_dw's rows; Q6_K's values as three bytes per four (pg_k62_pkbyte), its last two bytes (d)
 * padded to a dword */
PG_ALWAYS_INLINE void pg_k2_pack(const int t, int64_t n, int64_t nr, const char * x, size_t bx, char * dst) {
    const int64_t nb = n / PG_QK_K, np = (nr + PG_QP_R - 1) / PG_QP_R;
    const int nd = (int) (pg_x16_bsize(t) / 16 * 4);           /* whole groups of 4 dwords: Q4_K 36, Q5_K 44, Q6_K 52 */
    const int d0 = t == PG_TYPE_Q6_K ? 48 : 0;                  /* Q6_K's values: pg_k62_pkbyte's */
    for (int64_t p = 0; p < np; p++) {
        const pg_x16_src src = pg_x16_panel(x, bx, (int) p, (int) nr, 0);
        for (int64_t b = 0; b < nb; b++) {
            char * k = dst + (size_t) (p * nb + b) * pg_x16_pbsize(t);
            for (int h = 0; h < 2; h++)
                for (int i0 = d0; i0 < nd; i0 += 4) {
                    __m256i q[4];
                    pg_k2_dw(&src, t, b, h, i0, 1, q);
                    for (int i = 0; i < 4; i++)
                        _mm256_storeu_si256((__m256i *) (k + 4 * PG_QP_R * (i0 + i) + 4 * PG_Q2_H * h), q[i]);
                }
            if (t == PG_TYPE_Q6_K)
                for (int r = 0; r < PG_QP_R; r++) {
                    const pg_block_q6_K * xb = (const pg_block_q6_K *) src.r[r] + b;
                    for (int a = 0; a < 2; a++)
                        for (int c = 0; c < 3; c++)
                            for (int l = 0; l < 32; l++) {
                                const int o = 96 * a + 32 * c + l;    /* byte o: dword o / 4, byte o % 4 */
                                k[4 * PG_QP_R * (o / 4) + 4 * r + o % 4] = (char) pg_k62_pkbyte(xb, a, c, l);
                            }
                    uint32_t d = 0;
                    memcpy(&d, src.r[r] + (size_t) b * pg_x16_bsize(t) + offsetof(pg_block_q6_K, d), 2);
                    memcpy(k + 4 * PG_QP_R * nd + 4 * r, &d, 4);
                }
        }
    }
}
static inline void pg_vec_dot_q4_K_q8_K_ptile(int64_t n, const void * vx, size_t bx, int mr, const void * vy,
                                              size_t by, int nc, float * s, size_t lds) {
    pg_p2_tile(PG_TYPE_Q4_K, n, vx, bx, mr, vy, by, nc, s, lds, 0);
}
static inline void pg_vec_dot_q5_K_q8_K_ptile(int64_t n, const void * vx, size_t bx, int mr, const void * vy,
                                              size_t by, int nc, float * s, size_t lds) {
    pg_p2_tile(PG_TYPE_Q5_K, n, vx, bx, mr, vy, by, nc, s, lds, 0);
}
static inline void pg_vec_dot_q6_K_q8_K_ptile(int64_t n, const void * vx, size_t bx, int mr, const void * vy,
                                              size_t by, int nc, float * s, size_t lds) {
    pg_p2_tile(PG_TYPE_Q6_K, n, vx, bx, mr, vy, by, nc, s, lds, 0);
}
static inline void pg_vec_dot_q4_K_q8_K_prows(int64_t n, const void * vx, size_t bx, int64_t nr, const void * vy,
                                              float * s) {
    pg_k2_cols(PG_TYPE_Q4_K, 1, n, vx, bx, nr, nr, vy, 0, s, 0, 0);
}
static inline void pg_vec_dot_q5_K_q8_K_prows(int64_t n, const void * vx, size_t bx, int64_t nr, const void * vy,
                                              float * s) {
    pg_k2_cols(PG_TYPE_Q5_K, 1, n, vx, bx, nr, nr, vy, 0, s, 0, 0);
}
static inline void pg_vec_dot_q6_K_q8_K_prows(int64_t n, const void * vx, size_t bx, int64_t nr, const void * vy,
                                              float * s) {
    pg_k2_cols(PG_TYPE_Q6_K, 1, n, vx, bx, nr, nr, vy, 0, s, 0, 0);
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
#define PG_Q6_K_ROWS pg_vec_dot_q6_K_q8_K_prows
#define PG_Q6_K_TILE_NC PG_QP_NC
#define PG_Q6_K_TILE_MR PG_QP_MR

/* the panels at this level (panels.h's pg_panel_*): all seven types */
PG_ALWAYS_INLINE bool pg_panel_has(const int t) { (void) t; return true; }
PG_ALWAYS_INLINE void pg_panel_pack(const int t, int64_t n, int64_t nr, const char * x, size_t bx, char * dst) {
    if (pg_p2_k(t)) pg_k2_pack(t, n, nr, x, bx, dst);
    else pg_q2_pack(t, n, nr, x, bx, dst);
}
PG_ALWAYS_INLINE void pg_panel_rows(const int t, int64_t n, const void * x, size_t bx, int64_t nr, const void * y,
                                    float * s) {
    pg_p2_cols(t, 1, n, x, bx, nr, nr, y, 0, s, 0, 1);
}
PG_ALWAYS_INLINE void pg_panel_tile(const int t, int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by,
                                    int nc, float * s, size_t lds) {
    pg_p2_tile(t, n, x, bx, mr, y, by, nc, s, lds, 1);
}
