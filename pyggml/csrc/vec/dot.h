/* Dot products of rows: f32/f16/bf16 pairs and mixed (f16 or bf16 times f32), one row against four
 * (pg_vec_dot4_*, matmul's GEMV). f32 lanes, four registers in flight to hide the FMA latency.
 * The quantized blocks' integer dots are quants-legacy.h's. RVV: arch/riscv/dot-rvv.c (with the integer
 * dots of quants-legacy.h's 32-element block types, which it calls). */
#pragma once
#include "vec/quant.h"

/* How far ahead of its loads the dot prefetches x, the weight row of matmul's vec_dot: a GEMV
 * streams its weights from DRAM, and the hardware prefetcher alone leaves misses that the loop does
 * not overlap; each cache line is prefetched 16 KB ahead (the next rows, for a GEMV's consecutive
 * rows), the best of the distances tried (docs/bench/journal.md). A prefetch past the end of the
 * matrix is a hint: it cannot fault. */
#define PG_DOT_AHEAD 16384

/* dot(x, y) over n elements of rows of types tx, ty (PG_ROW_*, compile-time constants): four
 * accumulators over blocks of four vectors, one vector at a time after them, the scalar rest. */
PG_ALWAYS_INLINE float pg_dot_kernel(int64_t n, const void * x, const int tx, const void * y, const int ty) {
    int64_t i = 0;
    float sumf = 0.0f;
#if PG_HAVE_F32V
    /* bytes of x one block of four vectors reads */
    const int xblock = 4 * PG_F32_EPR * (tx == PG_ROW_F32 ? 4 : 2);
    pg_f32v a0 = PG_F32V_ZERO(), a1 = PG_F32V_ZERO(), a2 = PG_F32V_ZERO(), a3 = PG_F32V_ZERO();
    for (; i + 4 * PG_F32_EPR <= n; i += 4 * PG_F32_EPR) {
        const char * xa = (const char *) x + (size_t) i * (xblock / (4 * PG_F32_EPR)) + PG_DOT_AHEAD;
        for (int b = 0; b < xblock; b += PG_CACHE_LINE) __builtin_prefetch(xa + b);
        a0 = PG_F32V_FMA(pg_row_load_v(tx, x, i), pg_row_load_v(ty, y, i), a0);
        a1 = PG_F32V_FMA(pg_row_load_v(tx, x, i + PG_F32_EPR), pg_row_load_v(ty, y, i + PG_F32_EPR), a1);
        a2 = PG_F32V_FMA(pg_row_load_v(tx, x, i + 2 * PG_F32_EPR), pg_row_load_v(ty, y, i + 2 * PG_F32_EPR), a2);
        a3 = PG_F32V_FMA(pg_row_load_v(tx, x, i + 3 * PG_F32_EPR), pg_row_load_v(ty, y, i + 3 * PG_F32_EPR), a3);
    }
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) a0 = PG_F32V_FMA(pg_row_load_v(tx, x, i), pg_row_load_v(ty, y, i), a0);
    sumf = PG_F32V_REDUCE(PG_F32V_ADD(PG_F32V_ADD(a0, a1), PG_F32V_ADD(a2, a3)));
#endif
    for (; i < n; i++) sumf += pg_row_load_1(tx, x, i) * pg_row_load_1(ty, y, i);
    return sumf;
}

static inline float pg_vec_dot_f32(int64_t n, const float * x, const float * y) {
    PG_RVV_RETURN(pg_rvv_dot_f32(n, x, y))
    return pg_dot_kernel(n, x, PG_ROW_F32, y, PG_ROW_F32);
}
static inline float pg_vec_dot_f16(int64_t n, const pg_fp16_t * x, const pg_fp16_t * y) {
    PG_RVV_RETURN(pg_rvv_dot_f16(n, x, y))
    return pg_dot_kernel(n, x, PG_ROW_F16, y, PG_ROW_F16);
}
static inline float pg_vec_dot_bf16(int64_t n, const pg_bf16_t * x, const pg_bf16_t * y) {
    PG_RVV_RETURN(pg_rvv_dot_bf16(n, x, y))
    return pg_dot_kernel(n, x, PG_ROW_BF16, y, PG_ROW_BF16);
}
/* mixed: an f16 or bf16 row times an f32 row (the activation kept in f32; bf16 widening is exact) */
static inline float pg_vec_dot_f16_f32(int64_t n, const pg_fp16_t * x, const float * y) {
    PG_RVV_RETURN(pg_rvv_dot_f16_f32(n, x, y))
    return pg_dot_kernel(n, x, PG_ROW_F16, y, PG_ROW_F32);
}
static inline float pg_vec_dot_bf16_f32(int64_t n, const pg_bf16_t * x, const float * y) {
    PG_RVV_RETURN(pg_rvv_dot_bf16_f32(n, x, y))
    return pg_dot_kernel(n, x, PG_ROW_BF16, y, PG_ROW_F32);
}

/* s[r] = dot(x + r * bx, y) for r < 2: two weight rows of type tx against one activation row of type
 * ty (compile-time constants), each with pg_dot_kernel's four accumulators and order, so each sum is
 * bit for bit the one-row kernel's. mul_mat's GEMV hands it rows far apart (two halves of a thread's
 * range): two independent read streams keep more cache misses in flight than one, and the
 * activation is loaded once for both. */
PG_ALWAYS_INLINE void pg_dot2_kernel(int64_t n, const void * x, size_t bx, const int tx, const void * y, const int ty,
                                     float * s) {
    const char * x1 = (const char *) x + bx;
    int64_t i = 0;
    float s0 = 0.0f, s1 = 0.0f;
#if PG_HAVE_F32V
    pg_f32v a0 = PG_F32V_ZERO(), a1 = PG_F32V_ZERO(), a2 = PG_F32V_ZERO(), a3 = PG_F32V_ZERO();
    pg_f32v b0 = PG_F32V_ZERO(), b1 = PG_F32V_ZERO(), b2 = PG_F32V_ZERO(), b3 = PG_F32V_ZERO();
    for (; i + 4 * PG_F32_EPR <= n; i += 4 * PG_F32_EPR) {
        const pg_f32v y0 = pg_row_load_v(ty, y, i), y1 = pg_row_load_v(ty, y, i + PG_F32_EPR);
        const pg_f32v y2 = pg_row_load_v(ty, y, i + 2 * PG_F32_EPR), y3 = pg_row_load_v(ty, y, i + 3 * PG_F32_EPR);
        a0 = PG_F32V_FMA(pg_row_load_v(tx, x, i), y0, a0);
        a1 = PG_F32V_FMA(pg_row_load_v(tx, x, i + PG_F32_EPR), y1, a1);
        a2 = PG_F32V_FMA(pg_row_load_v(tx, x, i + 2 * PG_F32_EPR), y2, a2);
        a3 = PG_F32V_FMA(pg_row_load_v(tx, x, i + 3 * PG_F32_EPR), y3, a3);
        b0 = PG_F32V_FMA(pg_row_load_v(tx, x1, i), y0, b0);
        b1 = PG_F32V_FMA(pg_row_load_v(tx, x1, i + PG_F32_EPR), y1, b1);
        b2 = PG_F32V_FMA(pg_row_load_v(tx, x1, i + 2 * PG_F32_EPR), y2, b2);
        b3 = PG_F32V_FMA(pg_row_load_v(tx, x1, i + 3 * PG_F32_EPR), y3, b3);
    }
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) {
        const pg_f32v yv = pg_row_load_v(ty, y, i);
        a0 = PG_F32V_FMA(pg_row_load_v(tx, x, i), yv, a0);
        b0 = PG_F32V_FMA(pg_row_load_v(tx, x1, i), yv, b0);
    }
    s0 = PG_F32V_REDUCE(PG_F32V_ADD(PG_F32V_ADD(a0, a1), PG_F32V_ADD(a2, a3)));
    s1 = PG_F32V_REDUCE(PG_F32V_ADD(PG_F32V_ADD(b0, b1), PG_F32V_ADD(b2, b3)));
#endif
    /* the rest one row at a time, each loop the one-row kernel's statement: two sums in one loop
     * may be paired into a vector by the compiler and rounded apart from it (an fma or not) */
    for (int64_t k = i; k < n; k++) s0 += pg_row_load_1(tx, x, k) * pg_row_load_1(ty, y, k);
    for (int64_t k = i; k < n; k++) s1 += pg_row_load_1(tx, x1, k) * pg_row_load_1(ty, y, k);
    s[0] = s0;
    s[1] = s1;
}

/* the row pairs mul_mat's GEMV dots (RVV: its one-row kernels, twice) */
static inline void pg_vec_dot2_f32(int64_t n, const float * x, size_t bx, const float * y, float * s) {
    PG_RVV_DO((s[0] = pg_rvv_dot_f32(n, x, y), s[1] = pg_rvv_dot_f32(n, (const float *) ((const char *) x + bx), y)))
    pg_dot2_kernel(n, x, bx, PG_ROW_F32, y, PG_ROW_F32, s);
}
static inline void pg_vec_dot2_f16(int64_t n, const pg_fp16_t * x, size_t bx, const pg_fp16_t * y, float * s) {
    PG_RVV_DO((s[0] = pg_rvv_dot_f16(n, x, y), s[1] = pg_rvv_dot_f16(n, (const pg_fp16_t *) ((const char *) x + bx), y)))
    pg_dot2_kernel(n, x, bx, PG_ROW_F16, y, PG_ROW_F16, s);
}
static inline void pg_vec_dot2_bf16(int64_t n, const pg_bf16_t * x, size_t bx, const pg_bf16_t * y, float * s) {
    PG_RVV_DO((s[0] = pg_rvv_dot_bf16(n, x, y), s[1] = pg_rvv_dot_bf16(n, (const pg_bf16_t *) ((const char *) x + bx), y)))
    pg_dot2_kernel(n, x, bx, PG_ROW_BF16, y, PG_ROW_BF16, s);
}
static inline void pg_vec_dot2_f16_f32(int64_t n, const pg_fp16_t * x, size_t bx, const float * y, float * s) {
    PG_RVV_DO((s[0] = pg_rvv_dot_f16_f32(n, x, y),
               s[1] = pg_rvv_dot_f16_f32(n, (const pg_fp16_t *) ((const char *) x + bx), y)))
    pg_dot2_kernel(n, x, bx, PG_ROW_F16, y, PG_ROW_F32, s);
}
static inline void pg_vec_dot2_bf16_f32(int64_t n, const pg_bf16_t * x, size_t bx, const float * y, float * s) {
    PG_RVV_DO((s[0] = pg_rvv_dot_bf16_f32(n, x, y),
               s[1] = pg_rvv_dot_bf16_f32(n, (const pg_bf16_t *) ((const char *) x + bx), y)))
    pg_dot2_kernel(n, x, bx, PG_ROW_BF16, y, PG_ROW_F32, s);
}

/* t + x*y, one step of the scalar rest of pg_dot4_kernel and pg_dot_tile_kernel, which promise each
 * other's bits: fused with a vector ISA (which has FMA), not left to the compiler, whose choice to
 * contract (or to pair the sums into vectors unfused) varies with the code around the loop */
PG_ALWAYS_INLINE float pg_dot_madd1(float t, float x, float y) {
#if PG_HAVE_F32V
    return fmaf(x, y, t);
#else
    return t + x * y;
#endif
}

/* s[c] = dot(x, y[c]) for c < 4: one weight row of type tx (PG_ROW_*, a compile-time constant)
 * against four f32 activation rows, the row loaded (and widened) once for all four */
PG_ALWAYS_INLINE void pg_dot4_kernel(int64_t n, const void * x, const int tx, const float * const * y, float * s) {
    int64_t i = 0;
    s[0] = s[1] = s[2] = s[3] = 0.0f;
#if PG_HAVE_F32V
    pg_f32v a0 = PG_F32V_ZERO(), a1 = PG_F32V_ZERO(), a2 = PG_F32V_ZERO(), a3 = PG_F32V_ZERO();
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) {
        const pg_f32v xv = pg_row_load_v(tx, x, i);
        a0 = PG_F32V_FMA(xv, PG_F32V_LOAD(y[0] + i), a0);
        a1 = PG_F32V_FMA(xv, PG_F32V_LOAD(y[1] + i), a1);
        a2 = PG_F32V_FMA(xv, PG_F32V_LOAD(y[2] + i), a2);
        a3 = PG_F32V_FMA(xv, PG_F32V_LOAD(y[3] + i), a3);
    }
    s[0] = PG_F32V_REDUCE(a0); s[1] = PG_F32V_REDUCE(a1);
    s[2] = PG_F32V_REDUCE(a2); s[3] = PG_F32V_REDUCE(a3);
#endif
    for (; i < n; i++) {
        const float xs = pg_row_load_1(tx, x, i);
        for (int c = 0; c < 4; c++) s[c] = pg_dot_madd1(s[c], xs, y[c][i]);
    }
}

static inline void pg_vec_dot4_f32(int64_t n, const float * x, const float * const * y, float * s) {
    PG_RVV_DO(pg_rvv_dot4_f32(n, x, y, s))
    pg_dot4_kernel(n, x, PG_ROW_F32, y, s);
}
static inline void pg_vec_dot4_f16_f32(int64_t n, const pg_fp16_t * x, const float * const * y, float * s) {
    PG_RVV_DO(pg_rvv_dot4_f16_f32(n, x, y, s))
    pg_dot4_kernel(n, x, PG_ROW_F16, y, s);
}
static inline void pg_vec_dot4_bf16_f32(int64_t n, const pg_bf16_t * x, const float * const * y, float * s) {
    PG_RVV_DO(pg_rvv_dot4_bf16_f32(n, x, y, s))
    pg_dot4_kernel(n, x, PG_ROW_BF16, y, s);
}

/* The few-column product of float weights (matmul.h, from 2 columns to a GEMM panel): a tile of
 * PG_DOT_TILE_MR weight rows x up to PG_DOT_TILE_NC f32 activation rows, every sum in a register
 * of its own, so each weight vector is loaded (and widened) once for the tile's columns and each
 * activation vector once for its rows. 32 registers: 4 x 6 accumulators, the 4 weight vectors and
 * one activation vector; 16: 4 x 3, the 3 activation vectors and one weight vector. More columns
 * (up to PG_DOT_TILE_NMAX) take several such groups over the same rows. */
#define PG_DOT_TILE_MR 4
#if PG_HAVE_F32V
#  define PG_DOT_TILE_NC (PG_F32V_NREGS >= 32 ? 6 : 3)
#else
#  define PG_DOT_TILE_NC 4
#endif
#define PG_DOT_TILE_NMAX 32
#define PG_DOT_TILE_NG ((PG_DOT_TILE_NMAX + PG_DOT_TILE_NC - 1) / PG_DOT_TILE_NC)
/* Up to PG_DOT_TILE_KC_N columns in several groups, the groups take turns over pieces of
 * PG_DOT_TILE_KC elements of the rows: the first group reads a piece from memory and the others
 * from L1, so the reads of weights streamed from DRAM overlap the other groups' arithmetic (whole
 * rows per group leave memory idle while the later groups compute from cache). More columns are
 * bound by the arithmetic, and there whole rows per group run faster: each piece costs a reload of
 * the group's accumulators. PG_DOT_TILE_KC is a multiple of every vector width: a sum's order is
 * a single pass's. */
#define PG_DOT_TILE_KC 256
#define PG_DOT_TILE_KC_N 8

/* acc[r*PG_DOT_TILE_NC + c] += the products of x + r*bx and y[c] over the whole vectors of
 * elements [i0, i1), r < mr, c < nc (compile-time constants, at most PG_DOT_TILE_MR x
 * PG_DOT_TILE_NC), one FMA per vector into one accumulator per sum, in element order. pf: prefetch
 * the rows PG_DOT_AHEAD ahead (the first pass over a tile of streamed weights) into L2, not L1:
 * mul_mat hands the tile rows far apart, and PG_DOT_TILE_MR streams that far ahead would overflow
 * L1 (in L1 it reads 20-30% slower from DRAM). */
#if PG_HAVE_F32V
PG_ALWAYS_INLINE void pg_dot_tile_run(const char * const * xr, const int tx, const int mr, const float * const * y,
                                      const int nc, int64_t i0, int64_t i1, pg_f32v * acc, bool pf) {
    const int esz = tx == PG_ROW_F32 ? 4 : 2;
    pg_f32v a[PG_DOT_TILE_MR][PG_DOT_TILE_NC];
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < nc; c++) a[r][c] = acc[r * PG_DOT_TILE_NC + c];
    for (int64_t i = i0; i < i1; i += PG_F32_EPR) {
        if (pf && (i * esz) % PG_CACHE_LINE == 0)
            for (int r = 0; r < mr; r++) __builtin_prefetch(xr[r] + i * esz + PG_DOT_AHEAD, 0, 2);
        /* the operand of fewer registers is loaded first and kept, the other one vector at a time */
        if (mr <= nc) {
            pg_f32v xv[PG_DOT_TILE_MR];
            for (int r = 0; r < mr; r++) xv[r] = pg_row_load_v(tx, xr[r], i);
            for (int c = 0; c < nc; c++) {
                const pg_f32v yv = PG_F32V_LOAD(y[c] + i);
                for (int r = 0; r < mr; r++) a[r][c] = PG_F32V_FMA(xv[r], yv, a[r][c]);
            }
        } else {
            pg_f32v yv[PG_DOT_TILE_NC];
            for (int c = 0; c < nc; c++) yv[c] = PG_F32V_LOAD(y[c] + i);
            for (int r = 0; r < mr; r++) {
                const pg_f32v xv = pg_row_load_v(tx, xr[r], i);
                for (int c = 0; c < nc; c++) a[r][c] = PG_F32V_FMA(xv, yv[c], a[r][c]);
            }
        }
    }
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < nc; c++) acc[r * PG_DOT_TILE_NC + c] = a[r][c];
}

/* pg_dot_tile_run with nc (1 <= nc <= PG_DOT_TILE_NC) made a constant */
PG_ALWAYS_INLINE void pg_dot_tile_run_nc(const char * const * xr, const int tx, const int mr, const float * const * y,
                                         int nc, int64_t i0, int64_t i1, pg_f32v * acc, bool pf) {
    if (nc == 1) pg_dot_tile_run(xr, tx, mr, y, 1, i0, i1, acc, pf);
    else if (nc == 2) pg_dot_tile_run(xr, tx, mr, y, 2, i0, i1, acc, pf);
    else if (nc == 3) pg_dot_tile_run(xr, tx, mr, y, 3, i0, i1, acc, pf);
    else if (PG_DOT_TILE_NC >= 4 && nc == 4) pg_dot_tile_run(xr, tx, mr, y, 4, i0, i1, acc, pf);
    else if (PG_DOT_TILE_NC >= 5 && nc == 5) pg_dot_tile_run(xr, tx, mr, y, 5, i0, i1, acc, pf);
    else if (PG_DOT_TILE_NC >= 6 && nc == 6) pg_dot_tile_run(xr, tx, mr, y, 6, i0, i1, acc, pf);
}
#endif

/* s[c*lds + r] = dot(x + r*bx, y[c]) for r < mr (a constant, <= PG_DOT_TILE_MR), c < nc (<=
 * PG_DOT_TILE_NMAX): the columns in groups of balanced sizes (16 are 5 + 5 + 6, not 6 + 6 + 4),
 * up to PG_DOT_TILE_KC_N columns taking turns over pieces of the rows. Each sum in
 * pg_dot4_kernel's order (one accumulator of whole vectors, reduced, then the scalar rest), so a
 * column's bits do not depend on its neighbours, its group or how many columns a call takes. */
PG_ALWAYS_INLINE void pg_dot_tile_kernel(int64_t n, const void * x, size_t bx, const int tx, const int mr,
                                         const float * const * y, int nc, float * s, size_t lds, bool pf) {
    const char * xr[PG_DOT_TILE_MR];
    for (int r = 0; r < mr; r++) xr[r] = (const char *) x + r * bx;
    const int ng = (nc + PG_DOT_TILE_NC - 1) / PG_DOT_TILE_NC;
    int64_t nv = 0;
#if PG_HAVE_F32V
    nv = n / PG_F32_EPR * PG_F32_EPR;
    pg_f32v acc[PG_DOT_TILE_NG][PG_DOT_TILE_MR * PG_DOT_TILE_NC];
    for (int g = 0; g < ng; g++)
        for (int k = 0; k < PG_DOT_TILE_MR * PG_DOT_TILE_NC; k++) acc[g][k] = PG_F32V_ZERO();
    const int64_t kc = ng > 1 && nc <= PG_DOT_TILE_KC_N ? PG_DOT_TILE_KC : PG_MAX(nv, 1);
    for (int64_t i0 = 0; i0 < nv; i0 += kc)
        for (int g = 0; g < ng; g++) {
            const int c0 = g * nc / ng, c1 = (g + 1) * nc / ng;
            pg_dot_tile_run_nc(xr, tx, mr, y + c0, c1 - c0, i0, PG_MIN(nv, i0 + kc), acc[g], pf && g == 0);
        }
#else
    (void) pf;
#endif
    /* the reduction, then the rest, each sum its own chain in element order, as pg_dot4_kernel's */
    float t[PG_DOT_TILE_NMAX][PG_DOT_TILE_MR];
    for (int g = 0; g < ng; g++)
        for (int c = g * nc / ng; c < (g + 1) * nc / ng; c++)
            for (int r = 0; r < mr; r++) {
#if PG_HAVE_F32V
                t[c][r] = PG_F32V_REDUCE(acc[g][r * PG_DOT_TILE_NC + c - g * nc / ng]);
#else
                t[c][r] = 0.0f;
#endif
            }
    for (int64_t i = nv; i < n; i++)
        for (int r = 0; r < mr; r++) {
            const float xs = pg_row_load_1(tx, xr[r], i);
            for (int c = 0; c < nc; c++) t[c][r] = pg_dot_madd1(t[c][r], xs, y[c][i]);
        }
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < mr; r++) s[c * lds + r] = t[c][r];
}

/* s[c*lds + r] = dot(x + r*bx, y[c]) for r < mr <= PG_DOT_TILE_MR, c < nc <= PG_DOT_TILE_NMAX:
 * a whole tile in one kernel, fewer rows one at a time (the sums are the same either way).
 * RVV: its dot4 per row, the columns in fours (a short group repeats its last column: each
 * column has its own accumulator, so the bits are those of the column in any group). */
PG_ALWAYS_INLINE void pg_dot_tile(int64_t n, const void * x, size_t bx, const int tx, int mr,
                                  const float * const * y, int nc, float * s, size_t lds, bool pf) {
#if defined(PG_SIMD_RVV)
    if (pg_rvv_on()) {
        for (int r = 0; r < mr; r++) {
            const void * xr = (const char *) x + r * bx;
            for (int c = 0; c < nc; c += 4) {
                const float * y4[4];
                float s4[4];
                for (int u = 0; u < 4; u++) y4[u] = y[PG_MIN(c + u, nc - 1)];
                if (tx == PG_ROW_F16) pg_rvv_dot4_f16_f32(n, (const pg_fp16_t *) xr, y4, s4);
                else if (tx == PG_ROW_BF16) pg_rvv_dot4_bf16_f32(n, (const pg_bf16_t *) xr, y4, s4);
                else pg_rvv_dot4_f32(n, (const float *) xr, y4, s4);
                for (int u = 0; u < 4 && c + u < nc; u++) s[(size_t) (c + u) * lds + r] = s4[u];
            }
        }
        return;
    }
#endif
    if (mr == PG_DOT_TILE_MR) {
        pg_dot_tile_kernel(n, x, bx, tx, PG_DOT_TILE_MR, y, nc, s, lds, pf);
        return;
    }
    for (int r = 0; r < mr; r++) pg_dot_tile_kernel(n, (const char *) x + r * bx, bx, tx, 1, y, nc, s + r, lds, pf);
}

static inline void pg_vec_dot_tile_f32(int64_t n, const float * x, size_t bx, int mr, const float * const * y, int nc,
                                       float * s, size_t lds, bool pf) {
    pg_dot_tile(n, x, bx, PG_ROW_F32, mr, y, nc, s, lds, pf);
}
static inline void pg_vec_dot_tile_f16_f32(int64_t n, const pg_fp16_t * x, size_t bx, int mr, const float * const * y,
                                           int nc, float * s, size_t lds, bool pf) {
    pg_dot_tile(n, x, bx, PG_ROW_F16, mr, y, nc, s, lds, pf);
}
static inline void pg_vec_dot_tile_bf16_f32(int64_t n, const pg_bf16_t * x, size_t bx, int mr, const float * const * y,
                                            int nc, float * s, size_t lds, bool pf) {
    pg_dot_tile(n, x, bx, PG_ROW_BF16, mr, y, nc, s, lds, pf);
}
