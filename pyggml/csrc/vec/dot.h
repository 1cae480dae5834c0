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
        for (int c = 0; c < 4; c++) s[c] += xs * y[c][i];
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
