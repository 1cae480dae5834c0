/* The dot products of quants-k.h's types (Q2_K..Q6_K, IQ4_XS) against Q8_K, the vec_dot_type of all
 * of them, and the Q8_K quantiser of the activations: the scalar loops, and which ISA's kernels
 * (arch/) run them.
 *
 * NEON (arch/arm/kquants-neon.h): the scalar loops below, with each super-block's integer sums from vdotq
 * (the dotprod extension) or vmull_s8, so a row's f32 steps and bits are the scalar build's; and the
 * Q8_K quantiser vectorised to the same bytes.
 *
 * The dot products are exact integer sums per super-block (maddubs/madd on 512-bit registers with
 * AVX-512, 256-bit with AVX2, a scalar loop elsewhere; the same integers either way) combined in f32
 * as d_x*d_y*sum - dmin_x*d_y*sum_min (the SIMD paths in 8 vector lanes, summed at the end, as ggml).
 * The unsigned-times-signed multiply needs q >= 0: the signed types (Q3_K, Q6_K) dot q + offset and
 * take offset*scale*bsums back off, which is exact. The x86 kernels are in arch/x86/kquants-x86.h (the ISA
 * layer: no intrinsics here; with AVX-512 also the Q8_K quantiser, the same bytes), the RVV ones (chosen at run time, the scalar loops' f32 steps) in
 * arch/riscv/quant-k-rvv.c; NEON builds run the scalar loops with NEON integer sums (above).
 *
 * vec_dot_n (several activation columns): on x86 the kernels take up to four columns, decoding each
 * weight register once for all of them, and vec_dot is the same kernel for one column, so every
 * column of a product has vec_dot's bits whatever N is; elsewhere vec_dot per column. IQ4_XS is
 * dotted against Q8_K here too.
 *
 * vec_dot_tile (mul_mat's GEMM, AVX-512 only): arch/x86/kgemm-x86.h's register tiles of two weight rows
 * x four columns, each (row, column) pair with the integers and f32 steps of the one-row kernels
 * above, so the GEMM's columns keep vec_dot's bits too.
 */
#pragma once
#include "types/quants-k.h"

#if defined(PG_SIMD_NEON)
#include "arch/arm/kquants-neon.h"    /* the NEON integer sums of the dots' scalar loops, the Q8_K quantiser */
#endif

/* ---- Q8_K: the activations' quantiser (ggml's rounding, so no contraction: PG_KQ_EXACT) ---- */

#if defined(__clang__)
#  pragma STDC FP_CONTRACT OFF
#endif
#if defined(PG_SIMD_AVX512)
static inline void pg_kq_x86_quantize_q8_K(const float * x, pg_block_q8_K * y);   /* arch/x86/kquants-x86.h */
#endif

static inline PG_KQ_EXACT void pg_row_q8_K_from_f32(const float * x, void * vy, int64_t n) {
    pg_block_q8_K * y = (pg_block_q8_K *) vy;
    for (int64_t ib = 0; ib < n / PG_QK_K; ib++, x += PG_QK_K) {
#if defined(PG_SIMD_NEON)
        pg_kq_neon_quantize_q8_K(x, &y[ib]);
#elif defined(PG_SIMD_AVX512)
        pg_kq_x86_quantize_q8_K(x, &y[ib]);
#else
        float max = 0.0f, amax = 0.0f;
        for (int e = 0; e < PG_QK_K; e++) {
            if (fabsf(x[e]) > amax) { amax = fabsf(x[e]); max = x[e]; }
        }
        if (!amax) {
            memset(&y[ib], 0, sizeof(y[ib]));
            continue;
        }
        const float iscale = -127.0f / max;
        for (int e = 0; e < PG_QK_K; e++) y[ib].qs[e] = (int8_t) PG_MIN(127, pg_kq_nearest_int(iscale * x[e]));
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += y[ib].qs[16 * g + l];
            y[ib].bsums[g] = (int16_t) s;
        }
        y[ib].d = 1 / iscale;
#endif
    }
}

#if defined(__clang__)
#  pragma STDC FP_CONTRACT ON
#endif

/* ---- dot products against Q8_K ---- */

#if defined(PG_SIMD_AVX512) || defined(PG_SIMD_AVX2)
#include "arch/x86/kquants-x86.h"     /* the AVX2/AVX-512 halves of the dots below */
#endif
/* vec_dot_rows (mul_mat's one-column GEMV: nr rows bx bytes apart against one Q8_K row, each sum
 * the bits of vec_dot_tile's, or vec_dot_n's where there is no tile): PG_KROWS_FN(T) is type T's kernel PG_KROWS_<T> on AVX-512 with VNNI and
 * GFNI (Q6_K and IQ4_XS in arch/x86/kgemv-x86.h, Q2_K and Q3_K in arch/x86/kgemv2-x86.h, whose
 * one-row bodies are also the vec_dot of each of them and of Q4_K; Q4_K's and Q5_K's rows are
 * arch/x86/kgemm-x86.h's panels there), on AVX2 the vec_dot_n bodies
 * in a loop over the rows (below), NULL on other builds (the GEMV then takes vec_dot_tile /
 * vec_dot_n row by row) */
#if defined(PG_X86_GEMV)
#include "arch/x86/kgemv-x86.h"
#include "arch/x86/kgemv2-x86.h"
#define PG_KROWS_q6_K pg_vec_dot_q6_K_q8_K_rows
#define PG_KROWS_iq4_xs pg_vec_dot_iq4_xs_q8_K_rows
#define PG_KROWS_q2_K pg_vec_dot_q2_K_q8_K_rows
#define PG_KROWS_q3_K pg_vec_dot_q3_K_q8_K_rows
#define PG_KROWS_FN(T) PG_KROWS_##T
#elif defined(PG_SIMD_AVX2) && !defined(PG_SIMD_AVX512)
/* AVX2: the K-quant rows (but Q4_K's, Q5_K's and Q6_K's: the panels, arch/x86/qpanel-avx2.h) by each type's
 * vec_dot_n body (nc = 1, so the same bits), called in one
 * loop: per row through vec_dot_n the indirect call, the column switch, the body's constants and the
 * result copy cost more than the super-block loop gained from anything else tried (docs/bench/journal.md) */
PG_ALWAYS_INLINE void pg_kq_avx2_rows(const int t, int64_t n, const void * x, size_t bx, int64_t nr, const void * y,
                                     float * s) {
    for (int64_t r = 0; r < nr; r++) pg_kq_x86_body(t, n / PG_QK_K, (const char *) x + (size_t) r * bx, y, 0, 1, s + r);
}
static inline void pg_kq_avx2_q2_K_rows(int64_t n, const void * x, size_t bx, int64_t nr, const void * y, float * s) {
    pg_kq_avx2_rows(PG_TYPE_Q2_K, n, x, bx, nr, y, s);
}
static inline void pg_kq_avx2_q3_K_rows(int64_t n, const void * x, size_t bx, int64_t nr, const void * y, float * s) {
    pg_kq_avx2_rows(PG_TYPE_Q3_K, n, x, bx, nr, y, s);
}
static inline void pg_kq_avx2_iq4_xs_rows(int64_t n, const void * x, size_t bx, int64_t nr, const void * y, float * s) {
    pg_kq_avx2_rows(PG_TYPE_IQ4_XS, n, x, bx, nr, y, s);
}
#define PG_KROWS_FN(T) pg_kq_avx2_##T##_rows
#else
#define PG_KROWS_FN(T) NULL
#endif

/* the integer sums of one super-block (the scalar and NEON paths; x86 has its own rows).
 * Q2_K/Q3_K: element 128h + 32j + l has bits 2j of qs[32h + l]; Q3_K's hmask[l] bit 4h + j adds 4 (the
 * value q + 4 >= 0; the caller takes 4 * scale * bsums back off). sc: 16 scales as int8 */
static inline __attribute__((always_inline)) int32_t pg_kq_dot_2bit(const uint8_t * qs, const uint8_t * hm,
                                                                    const int8_t * sc, const int8_t * y) {
#if defined(PG_SIMD_NEON)
    return pg_kq_neon_dot_2bit(qs, hm, sc, y);
#else
    int32_t sum = 0;
    for (int g = 0; g < 16; g++) {
        int32_t s = 0;
        for (int l = 0; l < 16; l++) {
            const int e = 16 * g + l;
            int q = (qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3;
            if (hm) q += ((hm[e % 32] >> (e / 32)) & 1) << 2;
            s += q * y[e];
        }
        sum += sc[g] * s;
    }
    return sum;
#endif
}

/* Q4_K (qh NULL) and Q5_K: element 64c + l is the low nibble of qs[32c + l], 64c + 32 + l the high
 * one, plus 16 where qh[l] bit 2c (2c + 1) is set; the 8 scales sm of 32 elements each */
static inline __attribute__((always_inline)) int32_t pg_kq_k4_sumi(const uint8_t * qs, const uint8_t * qh,
                                                                   const uint8_t * sm, const int8_t * y) {
#if defined(PG_SIMD_NEON)
    return pg_kq_neon_k4_sumi(qs, qh, sm, y);
#else
    int32_t sumi = 0;
    for (int j = 0; j < 8; j++) {
        int32_t s = 0;
        for (int l = 0; l < 32; l++) {
            int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xf;
            if (qh) q += ((qh[l] >> j) & 1) << 4;
            s += q * y[32 * j + l];
        }
        sumi += sm[j] * s;
    }
    return sumi;
#endif
}

/* Q6_K: the scaled dot of the signed values q - 32 */
static inline __attribute__((always_inline)) int32_t pg_kq_q6_sumi(const pg_block_q6_K * x, const int8_t * y) {
#if defined(PG_SIMD_NEON)
    return pg_kq_neon_q6_sumi(x, y);
#else
    int32_t sumi = 0;
    for (int g = 0; g < 16; g++) {
        int32_t s = 0;
        for (int l = 0; l < 16; l++) s += (pg_kq_q6(x, 16 * g + l) - 32) * y[16 * g + l];
        sumi += x->scales[g] * s;
    }
    return sumi;
#endif
}

static inline float pg_vec_dot_q2_K_q8_K(int64_t n, const void * vx, const void * vy) {
    const pg_block_q2_K * x = (const pg_block_q2_K *) vx;
    const pg_block_q8_K * y = (const pg_block_q8_K *) vy;
    const int64_t nb = n / PG_QK_K;
#if defined(PG_X86_GEMV)
    return pg_kgemv_dot(PG_TYPE_Q2_K, n, x, y);
#elif defined(PG_SIMD_AVX512) || defined(PG_SIMD_AVX2)
    return pg_kq_x86_dot(PG_TYPE_Q2_K, nb, x, y);
#else
    PG_RVV_RETURN(pg_rvv_dot_q2_K_q8_K(nb, x, y))
    return pg_kq_q2_K_blocks(nb, x, y, pg_kq_dot_2bit);
#endif
}

static inline float pg_vec_dot_q3_K_q8_K(int64_t n, const void * vx, const void * vy) {
    const pg_block_q3_K * x = (const pg_block_q3_K *) vx;
    const pg_block_q8_K * y = (const pg_block_q8_K *) vy;
    const int64_t nb = n / PG_QK_K;
#if defined(PG_X86_GEMV)
    return pg_kgemv_dot(PG_TYPE_Q3_K, n, x, y);
#elif defined(PG_SIMD_AVX512) || defined(PG_SIMD_AVX2)
    return pg_kq_x86_dot(PG_TYPE_Q3_K, nb, x, y);
#else
    PG_RVV_RETURN(pg_rvv_dot_q3_K_q8_K(nb, x, y))
    return pg_kq_q3_K_blocks(nb, x, y, pg_kq_dot_2bit);
#endif
}


/* Q4_K (qh NULL) and Q5_K rows: 8 scales and 8 mins of 32 elements each per super-block */
static inline __attribute__((always_inline)) float pg_kq_dot_k4(int64_t nb, const void * vx, size_t bx,
                                                                const pg_block_q8_K * y, bool q5) {
    const char * xb = (const char *) vx;
    /* the fields of block ib: Q4_K is {d, dmin, scales, qs}, Q5_K has qh before qs */
    const size_t off_qs = q5 ? offsetof(pg_block_q5_K, qs) : offsetof(pg_block_q4_K, qs);
#if defined(PG_SIMD_AVX512) || defined(PG_SIMD_AVX2)
    return pg_kq_x86_dot_k4(nb, xb, bx, off_qs, y, q5);
#else
    PG_RVV_RETURN(pg_rvv_dot_k4(nb, xb, bx, off_qs, y, q5))
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < nb; ib++, xb += bx) {
        const pg_block_q4_K * b = (const pg_block_q4_K *) xb;
        const uint8_t * qs = (const uint8_t *) xb + off_qs;
        const uint8_t * qh = q5 ? ((const pg_block_q5_K *) xb)->qh : NULL;
        uint8_t sm[16];
        pg_kq_unpack_k4(b->scales, sm);
        int32_t summ = 0;
        for (int j = 0; j < 8; j++) summ += sm[8 + j] * (y[ib].bsums[2 * j] + y[ib].bsums[2 * j + 1]);
        const int32_t sumi = pg_kq_k4_sumi(qs, qh, sm, y[ib].qs);
        sumf += pg_fp16_to_fp32(b->d) * y[ib].d * (float) sumi - pg_fp16_to_fp32(b->dmin) * y[ib].d * (float) summ;
    }
    return sumf;
#endif
}

static inline float pg_vec_dot_q4_K_q8_K(int64_t n, const void * x, const void * y) {
#if defined(PG_X86_GEMV)
    return pg_kgemv_dot(PG_TYPE_Q4_K, n, x, y);
#else
    return pg_kq_dot_k4(n / PG_QK_K, x, sizeof(pg_block_q4_K), (const pg_block_q8_K *) y, false);
#endif
}

static inline float pg_vec_dot_q5_K_q8_K(int64_t n, const void * x, const void * y) {
    return pg_kq_dot_k4(n / PG_QK_K, x, sizeof(pg_block_q5_K), (const pg_block_q8_K *) y, true);
}


/* Q6_K: x86 dots the 6-bit values q (0..63) and takes 32 * sum(scale * bsums) off for the -32, the
 * others dot q - 32 */
static inline float pg_vec_dot_q6_K_q8_K(int64_t n, const void * vx, const void * vy) {
    const pg_block_q6_K * x = (const pg_block_q6_K *) vx;
    const pg_block_q8_K * y = (const pg_block_q8_K *) vy;
    const int64_t nb = n / PG_QK_K;
#if defined(PG_X86_GEMV)
    return pg_kgemv_dot(PG_TYPE_Q6_K, n, x, y);
#elif defined(PG_SIMD_AVX512) || defined(PG_SIMD_AVX2)
    return pg_kq_x86_dot(PG_TYPE_Q6_K, nb, x, y);
#else
    PG_RVV_RETURN(pg_rvv_dot_q6_K_q8_K(nb, x, y))
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < nb; ib++) {
        const int32_t sumi = pg_kq_q6_sumi(&x[ib], y[ib].qs);
        sumf += pg_fp16_to_fp32(x[ib].d) * y[ib].d * (float) sumi;
    }
    return sumf;
#endif
}


/* ---- several columns: vec_dot_n (types.h's pg_vec_dot_n_fn) ---- */

/* vec_dot_n of K-quant type t (a compile-time constant; dot is its vec_dot): on x86 each weight
 * super-block is decoded once for all nc columns, by the same body as the one column above (so every
 * column has vec_dot's bits); elsewhere vec_dot per column */
PG_ALWAYS_INLINE void pg_kq_dot_n(const int t, float (*dot)(int64_t, const void *, const void *), int64_t n,
                                  const void * x, const void * y, size_t by, int nc, float * s) {
#if defined(PG_SIMD_AVX512) || defined(PG_SIMD_AVX2)
    (void) dot;
    pg_kq_x86_n(t, n / PG_QK_K, x, y, by, nc, s);
#else
    (void) t;
    for (int c = 0; c < nc; c++) s[c] = dot(n, x, (const char *) y + (size_t) c * by);
#endif
}
static inline void pg_vec_dot_q2_K_q8_K_n(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    pg_kq_dot_n(PG_TYPE_Q2_K, pg_vec_dot_q2_K_q8_K, n, x, y, by, nc, s);
}
static inline void pg_vec_dot_q3_K_q8_K_n(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    pg_kq_dot_n(PG_TYPE_Q3_K, pg_vec_dot_q3_K_q8_K, n, x, y, by, nc, s);
}
static inline void pg_vec_dot_q4_K_q8_K_n(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    pg_kq_dot_n(PG_TYPE_Q4_K, pg_vec_dot_q4_K_q8_K, n, x, y, by, nc, s);
}
static inline void pg_vec_dot_q5_K_q8_K_n(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    pg_kq_dot_n(PG_TYPE_Q5_K, pg_vec_dot_q5_K_q8_K, n, x, y, by, nc, s);
}
static inline void pg_vec_dot_q6_K_q8_K_n(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    pg_kq_dot_n(PG_TYPE_Q6_K, pg_vec_dot_q6_K_q8_K, n, x, y, by, nc, s);
}

/* IQ4_XS against Q8_K: on x86 arch/x86/kquants-x86.h's kernel (an integer sum per super-block, as
 * ggml's AVX2 one); elsewhere each block of 32 looked up in the IQ4_NL table (pg_q8x32_lut16: tbl
 * on NEON), its int8 dot with the activations scaled by d_x*d_y*(ls - 32) into f32 as ggml's
 * generic ggml_vec_dot_iq4_xs_q8_K does, in arch/'s pg_qacc vocabulary; even and odd blocks in
 * separate accumulators */
#if defined(PG_SIMD_AVX512) || defined(PG_SIMD_AVX2)
static inline void pg_vec_dot_iq4_xs_q8_K_n(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    pg_kq_x86_n(PG_TYPE_IQ4_XS, n / PG_QK_K, x, y, by, nc, s);
}
static inline float pg_vec_dot_iq4_xs_q8_K(int64_t n, const void * x, const void * y) {
#if defined(PG_X86_GEMV)
    return pg_kgemv_dot(PG_TYPE_IQ4_XS, n, x, y);
#else
    return pg_kq_x86_dot(PG_TYPE_IQ4_XS, n / PG_QK_K, x, y);
#endif
}
#else
static inline __attribute__((always_inline)) void pg_kq_iq4_xs_body(int64_t n, const void * vx, const void * vy,
                                                                    size_t by, const int nc, float * s) {
    const pg_block_iq4_xs * x = (const pg_block_iq4_xs *) vx;
    pg_qacc acc0[4], acc1[4];
    for (int c = 0; c < nc; c++) acc0[c] = acc1[c] = pg_qacc_zero();
    for (int64_t ibl = 0; ibl < n / PG_QK_K; ibl++) {
        const float dx = pg_fp16_to_fp32(x[ibl].d);
        float dxy[4];
        for (int c = 0; c < nc; c++) dxy[c] = dx * ((const pg_block_q8_K *) ((const char *) vy + (size_t) c * by) + ibl)->d;
        for (int ib = 0; ib < PG_QK_K / PG_QK; ib += 2) {
            const pg_q8x32 q0 = pg_q8x32_lut16(pg_q8x32_nibbles(x[ibl].qs + ib * (PG_QK / 2)), pg_iq4nl_values);
            const pg_q8x32 q1 = pg_q8x32_lut16(pg_q8x32_nibbles(x[ibl].qs + (ib + 1) * (PG_QK / 2)), pg_iq4nl_values);
            const float l0 = (float) pg_kq_iq4_xs_scale(&x[ibl], ib), l1 = (float) pg_kq_iq4_xs_scale(&x[ibl], ib + 1);
            for (int c = 0; c < nc; c++) {
                const int8_t * yq = ((const pg_block_q8_K *) ((const char *) vy + (size_t) c * by) + ibl)->qs + ib * PG_QK;
                acc0[c] = pg_qacc_add(acc0[c], q0, yq, 0, dxy[c] * l0);
                acc1[c] = pg_qacc_add(acc1[c], q1, yq + PG_QK, 0, dxy[c] * l1);
            }
        }
    }
    for (int c = 0; c < nc; c++) s[c] = pg_qacc_sum(pg_qacc_merge(acc0[c], acc1[c]));
}
static inline void pg_vec_dot_iq4_xs_q8_K_n(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    switch (nc) {
    case 1: pg_kq_iq4_xs_body(n, x, y, by, 1, s); break;
    case 2: pg_kq_iq4_xs_body(n, x, y, by, 2, s); break;
    case 3: pg_kq_iq4_xs_body(n, x, y, by, 3, s); break;
    default: pg_kq_iq4_xs_body(n, x, y, by, 4, s); break;
    }
}
static inline float pg_vec_dot_iq4_xs_q8_K(int64_t n, const void * x, const void * y) {
    float s;
    pg_kq_iq4_xs_body(n, x, y, 0, 1, &s);
    return s;
}
#endif

/* vec_dot_tile (mul_mat's GEMM): with AVX-512 arch/x86/kgemm-x86.h's tiles of two weight rows x four
 * (Q3_K, IQ4_XS: eight) columns, a pair's bits those of vec_dot_n; on AVX2 Q4_K's and Q6_K's panels
 * (arch/x86/qpanel-avx2.h); elsewhere none (mul_mat takes vec_dot_n row by row: without VNNI a tile of
 * the same form does the same maddubs + madd + add per pair, and 16 registers do not hold its
 * accumulators; docs/bench/journal.md) */
#if defined(PG_SIMD_AVX512)
#include "arch/x86/kgemm-x86.h"
/* each type's vec_dot_tile (types.h's pg_vec_dot_tile_fn) and its tile_nc */
enum {
    pg_vec_dot_q2_K_q8_K_tile_nc = 4, pg_vec_dot_q3_K_q8_K_tile_nc = PG_KGEMM_NC, pg_vec_dot_q4_K_q8_K_tile_nc = 4,
    pg_vec_dot_q5_K_q8_K_tile_nc = 4, pg_vec_dot_q6_K_q8_K_tile_nc = 4, pg_vec_dot_iq4_xs_q8_K_tile_nc = PG_KGEMM_NC,
};
static inline void pg_vec_dot_q2_K_q8_K_tile(int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by,
                                             int nc, float * s, size_t lds) {
    pg_kgemm_tile(PG_KGEMM_Q2_K, sizeof(pg_block_q2_K), pg_vec_dot_q2_K_q8_K_tile_nc, pg_vec_dot_q2_K_q8_K_n,
                  n, x, bx, mr, y, by, nc, s, lds);
}
static inline void pg_vec_dot_q3_K_q8_K_tile(int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by,
                                             int nc, float * s, size_t lds) {
    pg_kgemm_tile(PG_KGEMM_Q3_K, sizeof(pg_block_q3_K), pg_vec_dot_q3_K_q8_K_tile_nc, pg_vec_dot_q3_K_q8_K_n,
                  n, x, bx, mr, y, by, nc, s, lds);
}
static inline void pg_vec_dot_q4_K_q8_K_tile(int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by,
                                             int nc, float * s, size_t lds) {
    pg_kgemm_tile(PG_KGEMM_Q4_K, sizeof(pg_block_q4_K), pg_vec_dot_q4_K_q8_K_tile_nc, pg_vec_dot_q4_K_q8_K_n,
                  n, x, bx, mr, y, by, nc, s, lds);
}
static inline void pg_vec_dot_q5_K_q8_K_tile(int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by,
                                             int nc, float * s, size_t lds) {
    pg_kgemm_tile(PG_KGEMM_Q5_K, sizeof(pg_block_q5_K), pg_vec_dot_q5_K_q8_K_tile_nc, pg_vec_dot_q5_K_q8_K_n,
                  n, x, bx, mr, y, by, nc, s, lds);
}
static inline void pg_vec_dot_q6_K_q8_K_tile(int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by,
                                             int nc, float * s, size_t lds) {
    pg_kgemm_tile(PG_KGEMM_Q6_K, sizeof(pg_block_q6_K), pg_vec_dot_q6_K_q8_K_tile_nc, pg_vec_dot_q6_K_q8_K_n,
                  n, x, bx, mr, y, by, nc, s, lds);
}
static inline void pg_vec_dot_iq4_xs_q8_K_tile(int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by,
                                               int nc, float * s, size_t lds) {
    pg_kgemm_tile(PG_KGEMM_IQ4_XS, sizeof(pg_block_iq4_xs), pg_vec_dot_iq4_xs_q8_K_tile_nc, pg_vec_dot_iq4_xs_q8_K_n,
                  n, x, bx, mr, y, by, nc, s, lds);
}
#define PG_KTILE_FN(T) pg_vec_dot_##T##_q8_K_tile
#define PG_KTILE_NC(T) pg_vec_dot_##T##_q8_K_tile_nc
#else
#define PG_KTILE_FN(T) NULL
#define PG_KTILE_NC(T) 0
#endif
