/* The named dot products of quants-legacy.h's 32-element block types against their vec_dot_type
 * (Q8_0, or Q8_1 for the types with a minimum), each the reference pg_qdot_n of quants-legacy.h or an
 * ISA's kernel with its bits: RVV (arch/riscv/dot-rvv.c) when the CPU has V, on x86 the register tiles
 * of arch/x86/qgemm-x86.h and the one-column GEMV of arch/x86/qgemv-x86.h.
 */
#pragma once
#include "types/quants-legacy.h"

/* the named vec_dot_n of each type; on riscv64 with V arch/riscv/dot-rvv.c's multi-column kernel (the same
 * f32 steps as the body) where it has one */
static inline void pg_vec_dot_q8_0_n(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    PG_RVV_DO(pg_rvv_dot_n_q8_0(n, x, y, by, nc, s))
    pg_qdot_n(PG_TYPE_Q8_0, n, x, y, by, nc, s);
}
static inline void pg_vec_dot_q4_0_n(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    PG_RVV_DO(pg_rvv_dot_n_q4_0(n, x, y, by, nc, s))
    pg_qdot_n(PG_TYPE_Q4_0, n, x, y, by, nc, s);
}
static inline void pg_vec_dot_q4_1_n(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    PG_RVV_DO(pg_rvv_dot_n_q4_1(n, x, y, by, nc, s))
    pg_qdot_n(PG_TYPE_Q4_1, n, x, y, by, nc, s);
}
static inline void pg_vec_dot_q5_0_n(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    PG_RVV_DO(pg_rvv_dot_n_q5_0(n, x, y, by, nc, s))
    pg_qdot_n(PG_TYPE_Q5_0, n, x, y, by, nc, s);
}
static inline void pg_vec_dot_q5_1_n(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    PG_RVV_DO(pg_rvv_dot_n_q5_1(n, x, y, by, nc, s))
    pg_qdot_n(PG_TYPE_Q5_1, n, x, y, by, nc, s);
}
static inline void pg_vec_dot_iq4_nl_n(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    PG_RVV_DO(pg_rvv_dot_n_iq4_nl(n, x, y, by, nc, s))
    pg_qdot_n(PG_TYPE_IQ4_NL, n, x, y, by, nc, s);
}
/* MXFP4 against Q8_0 as ggml_vec_dot_mxfp4_q8_0: integer sums of the code points, times e8m0_half * d_y
 * (on riscv64 with V IQ4_NL's kernel with MXFP4's table and scale) */
static inline void pg_vec_dot_mxfp4_n(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    PG_RVV_DO(pg_rvv_dot_n_mxfp4(n, x, y, by, nc, s))
    pg_qdot_n(PG_TYPE_MXFP4, n, x, y, by, nc, s);
}

/* vec_dot_tile (mul_mat's GEMV and GEMM): PG_QGEMM_MR weight rows x 4 columns in registers on x86 (up to
 * PG_QGEMM_NC columns per call, 4 at a time);
 * elsewhere none, and mul_mat takes vec_dot_n row by row. vec_dot_rows (the one-column GEMV, the
 * tile's bits): AVX2 (arch/x86/qgemm-x86.h, qpanel-avx2.h) and AVX-512 with VNNI and GFNI
 * (arch/x86/qgemv-x86.h, qgemm-x86.h) */
#if defined(PG_SIMD_AVX512) || defined(PG_SIMD_AVX2)
#include "arch/x86/qgemm-x86.h"
#define PG_QTILE_FN(NAME) pg_vec_dot_##NAME##_tile
#else
#define PG_QGEMM_MR 1
#define PG_QGEMM_NC 4
#define PG_QTILE_FN(NAME) NULL
#endif
#if defined(PG_X86_GEMV)
#include "arch/x86/qgemv-x86.h"
#endif
#if defined(PG_SIMD_AVX2) || defined(PG_X86_GEMV)
#define PG_QROWS_FN(NAME) pg_vec_dot_##NAME##_rows
#else
#define PG_QROWS_FN(NAME) NULL
#endif

/* one column (test_vec.py calls these two by name; Q8_0 and Q4_0 through arch/riscv/dot-rvv.c when it runs) */
static inline float pg_vec_dot_q8_0_q8_0(int64_t n, const pg_block_q8_0 * x, const pg_block_q8_0 * y) {
    float s;
    pg_vec_dot_q8_0_n(n, x, y, 0, 1, &s);
    return s;
}
static inline float pg_vec_dot_q4_0_q8_0(int64_t n, const pg_block_q4_0 * x, const pg_block_q8_0 * y) {
    float s;
    pg_vec_dot_q4_0_n(n, x, y, 0, 1, &s);
    return s;
}
static inline float pg_type_dot_q4_1(int64_t n, const void * x, const void * y) {
    float s;
    pg_vec_dot_q4_1_n(n, x, y, 0, 1, &s);
    return s;
}
static inline float pg_type_dot_q5_0(int64_t n, const void * x, const void * y) {
    float s;
    pg_vec_dot_q5_0_n(n, x, y, 0, 1, &s);
    return s;
}
static inline float pg_type_dot_q5_1(int64_t n, const void * x, const void * y) {
    float s;
    pg_vec_dot_q5_1_n(n, x, y, 0, 1, &s);
    return s;
}
static inline float pg_type_dot_iq4_nl(int64_t n, const void * x, const void * y) {
    float s;
    pg_vec_dot_iq4_nl_n(n, x, y, 0, 1, &s);
    return s;
}
static inline float pg_type_dot_mxfp4(int64_t n, const void * x, const void * y) {
    float s;
    pg_vec_dot_mxfp4_n(n, x, y, 0, 1, &s);
    return s;
}
