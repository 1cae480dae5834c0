/* Dot products of rows: f32/f16/bf16 pairs and mixed (f16 or bf16 times f32), one row against four
 * (pg_vec_dot4_*, matmul's GEMV). f32 lanes, four registers in flight to hide the FMA latency.
 * The quantized blocks' integer dots are quants-legacy.h's. RVV: vec/dot-rvv.c (with the integer
 * dots of quants-legacy.h's 32-element block types, which it calls). */
#pragma once
#include "vec/quant.h"

#define PG_DOT_BODY(LOADX, LOADY)                                                            \
    int64_t i = 0;                                                                           \
    float sumf = 0.0f;                                                                       \
    PG_DOT_SIMD(LOADX, LOADY)                                                                \
    for (; i < n; i++) sumf += LOADX##_S(x + i) * LOADY##_S(y + i);                          \
    return sumf;

#if PG_HAVE_F32V
#define PG_DOT_SIMD(LOADX, LOADY)                                                            \
    {                                                                                        \
        pg_f32v a0 = PG_F32V_ZERO(), a1 = PG_F32V_ZERO(), a2 = PG_F32V_ZERO(), a3 = PG_F32V_ZERO(); \
        for (; i + 4 * PG_F32_EPR <= n; i += 4 * PG_F32_EPR) {                               \
            a0 = PG_F32V_FMA(LOADX(x + i), LOADY(y + i), a0);                                \
            a1 = PG_F32V_FMA(LOADX(x + i + PG_F32_EPR), LOADY(y + i + PG_F32_EPR), a1);      \
            a2 = PG_F32V_FMA(LOADX(x + i + 2 * PG_F32_EPR), LOADY(y + i + 2 * PG_F32_EPR), a2); \
            a3 = PG_F32V_FMA(LOADX(x + i + 3 * PG_F32_EPR), LOADY(y + i + 3 * PG_F32_EPR), a3); \
        }                                                                                    \
        for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) a0 = PG_F32V_FMA(LOADX(x + i), LOADY(y + i), a0); \
        sumf = PG_F32V_REDUCE(PG_F32V_ADD(PG_F32V_ADD(a0, a1), PG_F32V_ADD(a2, a3)));        \
    }
#else
#define PG_DOT_SIMD(LOADX, LOADY)
#endif

static inline float pg_vec_dot_f32(int64_t n, const float * x, const float * y) {
    PG_RVV_RETURN(pg_rvv_dot_f32(n, x, y))
    PG_DOT_BODY(PG_F32V_LOAD, PG_F32V_LOAD)
}
static inline float pg_vec_dot_f16(int64_t n, const pg_fp16_t * x, const pg_fp16_t * y) {
    PG_RVV_RETURN(pg_rvv_dot_f16(n, x, y))
    PG_DOT_BODY(PG_F32V_LOAD_F16, PG_F32V_LOAD_F16)
}
static inline float pg_vec_dot_bf16(int64_t n, const pg_bf16_t * x, const pg_bf16_t * y) {
    PG_RVV_RETURN(pg_rvv_dot_bf16(n, x, y))
    PG_DOT_BODY(PG_F32V_LOAD_BF16, PG_F32V_LOAD_BF16)
}
/* mixed: an f16 or bf16 row times an f32 row (the activation kept in f32; bf16 widening is exact) */
static inline float pg_vec_dot_f16_f32(int64_t n, const pg_fp16_t * x, const float * y) {
    PG_RVV_RETURN(pg_rvv_dot_f16_f32(n, x, y))
    PG_DOT_BODY(PG_F32V_LOAD_F16, PG_F32V_LOAD)
}
static inline float pg_vec_dot_bf16_f32(int64_t n, const pg_bf16_t * x, const float * y) {
    PG_RVV_RETURN(pg_rvv_dot_bf16_f32(n, x, y))
    PG_DOT_BODY(PG_F32V_LOAD_BF16, PG_F32V_LOAD)
}

/* s[c] = dot(x, y[c]) for c < 4: one weight row against four f32 activation rows, the row loaded
 * (and widened) once for all four */
#if PG_HAVE_F32V
#define PG_DOT4_SIMD(LOADX)                                                                  \
    {                                                                                        \
        pg_f32v a0 = PG_F32V_ZERO(), a1 = PG_F32V_ZERO(), a2 = PG_F32V_ZERO(), a3 = PG_F32V_ZERO(); \
        for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) {                                       \
            const pg_f32v xv = LOADX(x + i);                                                 \
            a0 = PG_F32V_FMA(xv, PG_F32V_LOAD(y[0] + i), a0);                                \
            a1 = PG_F32V_FMA(xv, PG_F32V_LOAD(y[1] + i), a1);                                \
            a2 = PG_F32V_FMA(xv, PG_F32V_LOAD(y[2] + i), a2);                                \
            a3 = PG_F32V_FMA(xv, PG_F32V_LOAD(y[3] + i), a3);                                \
        }                                                                                    \
        s[0] = PG_F32V_REDUCE(a0); s[1] = PG_F32V_REDUCE(a1);                                \
        s[2] = PG_F32V_REDUCE(a2); s[3] = PG_F32V_REDUCE(a3);                                \
    }
#else
#define PG_DOT4_SIMD(LOADX)
#endif

#define PG_DOT4_BODY(LOADX)                                                                  \
    int64_t i = 0;                                                                           \
    s[0] = s[1] = s[2] = s[3] = 0.0f;                                                        \
    PG_DOT4_SIMD(LOADX)                                                                      \
    for (; i < n; i++) {                                                                     \
        const float xs = LOADX##_S(x + i);                                                   \
        for (int c = 0; c < 4; c++) s[c] += xs * y[c][i];                                    \
    }

static inline void pg_vec_dot4_f32(int64_t n, const float * x, const float * const * y, float * s) {
    PG_RVV_DO(pg_rvv_dot4_f32(n, x, y, s))
    PG_DOT4_BODY(PG_F32V_LOAD)
}
static inline void pg_vec_dot4_f16_f32(int64_t n, const pg_fp16_t * x, const float * const * y, float * s) {
    PG_RVV_DO(pg_rvv_dot4_f16_f32(n, x, y, s))
    PG_DOT4_BODY(PG_F32V_LOAD_F16)
}
static inline void pg_vec_dot4_bf16_f32(int64_t n, const pg_bf16_t * x, const float * const * y, float * s) {
    PG_RVV_DO(pg_rvv_dot4_bf16_f32(n, x, y, s))
    PG_DOT4_BODY(PG_F32V_LOAD_BF16)
}
