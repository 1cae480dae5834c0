/* The GEMM micro-kernel of mul_mat's tiled path. RVV: arch/riscv/gemm-rvv.c. */
#pragma once
#include "vec/cvt.h"

/* GEMM micro-kernel: a tile of mr rows of a times one panel of nr columns of b,
 *   c[r*nr + j] = sum_k a[r*lda + k] * b[k*nr + j]      (k < n; c overwritten, mr*nr floats)
 * a: mr f32 rows of stride lda; b: the panel packed k-major, nr floats per k.
 * The accumulators (mr x nr/EPR registers) stay in registers for the whole of k: each step loads
 * nr/EPR vectors of b and broadcasts one value per row of a. mr fills the register file: 12 x 2
 * accumulators with 32 registers (AVX-512, NEON), 6 x 2 with 16 (AVX2), 4 x 4 scalars otherwise.
 * riscv64 with V: 12 rows x one e32 m2 register group (2*VLEN/32 columns, at most PG_MM_NR_MAX),
 * known only at run time, so callers take (mr, nr) from pg_vec_gemm_shape() (arch/riscv/gemm-rvv.c). */
typedef struct pg_gemm_shape { int mr, nr; } pg_gemm_shape;
#define PG_MM_NR_MAX 32        /* the widest panel of any micro-kernel */

#if PG_HAVE_F32V
#define PG_MM_NV 2
#define PG_MM_MR (PG_F32V_NREGS >= 32 ? 12 : 6)   /* MR x 2 accumulators, 2 panel vectors, 1 broadcast */
#define PG_MM_NR (PG_MM_NV * PG_F32_EPR)

static inline void pg_vec_gemm_tile_f32(int64_t n, const float * a, int64_t lda, const float * b, float * c) {
    pg_f32v acc[PG_MM_MR][PG_MM_NV];
#pragma GCC unroll 16
    for (int r = 0; r < PG_MM_MR; r++) {
        acc[r][0] = PG_F32V_ZERO();
        acc[r][1] = PG_F32V_ZERO();
    }
    for (int64_t k = 0; k < n; k++) {
        const pg_f32v b0 = PG_F32V_LOAD(b + k * PG_MM_NR);
        const pg_f32v b1 = PG_F32V_LOAD(b + k * PG_MM_NR + PG_F32_EPR);
#pragma GCC unroll 16
        for (int r = 0; r < PG_MM_MR; r++) {
            const pg_f32v ar = PG_F32V_SET1(a[r * lda + k]);
            acc[r][0] = PG_F32V_FMA(ar, b0, acc[r][0]);
            acc[r][1] = PG_F32V_FMA(ar, b1, acc[r][1]);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < PG_MM_MR; r++) {
        PG_F32V_STORE(c + r * PG_MM_NR, acc[r][0]);
        PG_F32V_STORE(c + r * PG_MM_NR + PG_F32_EPR, acc[r][1]);
    }
}
#else
#define PG_MM_MR 4
#define PG_MM_NR 4

static inline void pg_vec_gemm_tile_f32(int64_t n, const float * a, int64_t lda, const float * b, float * c) {
    PG_RVV_DO(pg_rvv_gemm_tile_f32(n, a, lda, b, c))
    float acc[PG_MM_MR][PG_MM_NR] = {{0.0f}};
    for (int64_t k = 0; k < n; k++) {
        for (int r = 0; r < PG_MM_MR; r++) {
            const float ar = a[r * lda + k];
            for (int j = 0; j < PG_MM_NR; j++) acc[r][j] += ar * b[k * PG_MM_NR + j];
        }
    }
    for (int r = 0; r < PG_MM_MR; r++)
        for (int j = 0; j < PG_MM_NR; j++) c[r * PG_MM_NR + j] = acc[r][j];
}
#endif
_Static_assert(PG_MM_NR <= PG_MM_NR_MAX, "GEMM panel width");

/* (rows, columns) of the tile pg_vec_gemm_tile_f32 computes on this CPU */
static inline pg_gemm_shape pg_vec_gemm_shape(void) {
    PG_RVV_RETURN(((pg_gemm_shape) {PG_RVV_MM_MR, pg_rvv_gemm_nr()}))
    return (pg_gemm_shape) {PG_MM_MR, PG_MM_NR};
}
