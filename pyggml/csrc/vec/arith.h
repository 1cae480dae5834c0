/* Elementwise rows: z = x + y, z = x * y, z = x / y, y += x*v, y = x*v, and the maximum of a row.
 * RVV: arch/riscv/arith-rvv.c. */
#pragma once
#include "vec/cvt.h"

/* z = x op y, op (PG_BIN_*) a compile-time constant wherever it is passed */
enum { PG_BIN_ADD, PG_BIN_MUL, PG_BIN_DIV };
PG_ALWAYS_INLINE void pg_binary_rows(const int op, int64_t n, float * z, const float * x, const float * y) {
    int64_t i = 0;
#if PG_HAVE_F32V
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) {
        const pg_f32v a = PG_F32V_LOAD(x + i), b = PG_F32V_LOAD(y + i);
        PG_F32V_STORE(z + i, op == PG_BIN_ADD   ? PG_F32V_ADD(a, b)
                             : op == PG_BIN_MUL ? PG_F32V_MUL(a, b)
                                                : PG_F32V_DIV(a, b));
    }
#endif
    for (; i < n; i++) z[i] = op == PG_BIN_ADD ? x[i] + y[i] : op == PG_BIN_MUL ? x[i] * y[i] : x[i] / y[i];
}
static inline void pg_vec_add_f32(int64_t n, float * z, const float * x, const float * y) {
    PG_RVV_DO(pg_rvv_add_f32(n, z, x, y))
    pg_binary_rows(PG_BIN_ADD, n, z, x, y);
}
static inline void pg_vec_mul_f32(int64_t n, float * z, const float * x, const float * y) {
    PG_RVV_DO(pg_rvv_mul_f32(n, z, x, y))
    pg_binary_rows(PG_BIN_MUL, n, z, x, y);
}
static inline void pg_vec_div_f32(int64_t n, float * z, const float * x, const float * y) {
    PG_RVV_DO(pg_rvv_div_f32(n, z, x, y))
    pg_binary_rows(PG_BIN_DIV, n, z, x, y);
}

/* y += x*v */
static inline void pg_vec_mad_f32(int64_t n, float * y, const float * x, float v) {
    PG_RVV_DO(pg_rvv_mad_f32(n, y, x, v))
    int64_t i = 0;
#if PG_HAVE_F32V
    const pg_f32v vv = PG_F32V_SET1(v);
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR)
        PG_F32V_STORE(y + i, PG_F32V_FMA(PG_F32V_LOAD(x + i), vv, PG_F32V_LOAD(y + i)));
#endif
    for (; i < n; i++) y[i] = fmaf(x[i], v, y[i]);
}

/* y = x*v (in place when y == x) */
static inline void pg_vec_scale_f32(int64_t n, float * y, const float * x, float v) {
    PG_RVV_DO(pg_rvv_scale_f32(n, y, x, v))
    int64_t i = 0;
#if PG_HAVE_F32V
    const pg_f32v vv = PG_F32V_SET1(v);
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) PG_F32V_STORE(y + i, PG_F32V_MUL(PG_F32V_LOAD(x + i), vv));
#endif
    for (; i < n; i++) y[i] = x[i] * v;
}

static inline float pg_vec_max_f32(int64_t n, const float * x) {
    PG_RVV_RETURN(pg_rvv_max_f32(n, x))
    float m = -INFINITY;
    int64_t i = 0;
#if PG_HAVE_F32V
    if (n >= PG_F32_EPR) {
        /* four chains: one max's latency per vector would bound the loads at half the rate */
        pg_f32v m0 = PG_F32V_SET1(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
        for (; i + 4 * PG_F32_EPR <= n; i += 4 * PG_F32_EPR) {
            m0 = PG_F32V_MAX(m0, PG_F32V_LOAD(x + i));
            m1 = PG_F32V_MAX(m1, PG_F32V_LOAD(x + i + PG_F32_EPR));
            m2 = PG_F32V_MAX(m2, PG_F32V_LOAD(x + i + 2 * PG_F32_EPR));
            m3 = PG_F32V_MAX(m3, PG_F32V_LOAD(x + i + 3 * PG_F32_EPR));
        }
        for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) m0 = PG_F32V_MAX(m0, PG_F32V_LOAD(x + i));
        m = PG_F32V_REDUCE_MAX(PG_F32V_MAX(PG_F32V_MAX(m0, m1), PG_F32V_MAX(m2, m3)));
    }
#endif
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}
