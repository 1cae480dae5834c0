/* The lane exp of the RVV kernels and the softmax sum (arch/riscv/exp-rvv.c, act-rvv.c, attn-rvv.c), with
 * vec/exp.h's constants. */
#pragma once
#include "vec/exp.h"
#include "arch/riscv/rvv-mappings.h"

/* pg_expf's algorithm lane-wise (e32 m2: about ten live temporaries): k = round(x*log2 e) in frm's round-to-nearest-even, r = x - k*ln2 in two parts, the degree-7
 * Horner polynomial, 2^k applied as two halves; x < lo gives 0, x > hi inf, NaN stays */
static inline vfloat32m2_t pg_rvv_exp_f32m2(vfloat32m2_t x, size_t vl) {
    const vfloat32m2_t xc = __riscv_vfmax_vf_f32m2(x, PG_EXP_LO, vl);
    const vint32m2_t ki = __riscv_vfcvt_x_f_v_i32m2(__riscv_vfmul_vf_f32m2(xc, PG_EXP_LOG2E, vl), vl);
    const vfloat32m2_t k = __riscv_vfcvt_f_x_v_f32m2(ki, vl);
    vfloat32m2_t r = __riscv_vfnmsac_vf_f32m2(xc, PG_EXP_LN2_HI, k, vl);     /* xc - k*c1 */
    r = __riscv_vfnmsac_vf_f32m2(r, PG_EXP_LN2_LO, k, vl);
    vfloat32m2_t p = __riscv_vfmacc_vf_f32m2(__riscv_vfmv_v_f_f32m2(PG_EXP_C6, vl), PG_EXP_C7, r, vl);
    p = __riscv_vfmadd_vv_f32m2(p, r, __riscv_vfmv_v_f_f32m2(PG_EXP_C5, vl), vl);   /* p*r + c */
    p = __riscv_vfmadd_vv_f32m2(p, r, __riscv_vfmv_v_f_f32m2(PG_EXP_C4, vl), vl);
    p = __riscv_vfmadd_vv_f32m2(p, r, __riscv_vfmv_v_f_f32m2(PG_EXP_C3, vl), vl);
    p = __riscv_vfmadd_vv_f32m2(p, r, __riscv_vfmv_v_f_f32m2(0.5f, vl), vl);
    p = __riscv_vfmadd_vv_f32m2(p, r, __riscv_vfmv_v_f_f32m2(1.0f, vl), vl);
    p = __riscv_vfmadd_vv_f32m2(p, r, __riscv_vfmv_v_f_f32m2(1.0f, vl), vl);
    const vint32m2_t k1 = __riscv_vsra_vx_i32m2(ki, 1, vl), k2 = __riscv_vsub_vv_i32m2(ki, k1, vl);
    const vfloat32m2_t s1 = __riscv_vreinterpret_v_i32m2_f32m2(__riscv_vsll_vx_i32m2(__riscv_vadd_vx_i32m2(k1, 127, vl), 23, vl));
    const vfloat32m2_t s2 = __riscv_vreinterpret_v_i32m2_f32m2(__riscv_vsll_vx_i32m2(__riscv_vadd_vx_i32m2(k2, 127, vl), 23, vl));
    vfloat32m2_t y = __riscv_vfmul_vv_f32m2(__riscv_vfmul_vv_f32m2(p, s1, vl), s2, vl);
    y = __riscv_vfmerge_vfm_f32m2(y, 0.0f, __riscv_vmflt_vf_f32m2_b16(x, PG_EXP_LO, vl), vl);
    y = __riscv_vfmerge_vfm_f32m2(y, INFINITY, __riscv_vmfgt_vf_f32m2_b16(x, PG_EXP_HI, vl), vl);
    return __riscv_vmerge_vvm_f32m2(y, x, __riscv_vmfne_vv_f32m2_b16(x, x, vl), vl);
}

/* y = exp(x - m), the sum in double (e32 m2 -> e64 m4): pg_rvv_exp_sum_f32, and the attention softmax */
static inline double pg_rvv_exp_sum(int64_t n, float * y, const float * x, float m) {
    const size_t vlmax = __riscv_vsetvlmax_e64m4();
    vfloat64m4_t acc = __riscv_vfmv_v_f_f64m4(0.0, vlmax);
    for (size_t vl; n > 0; n -= vl, x += vl, y += vl) {
        vl = __riscv_vsetvl_e32m2(n);
        const vfloat32m2_t e = pg_rvv_exp_f32m2(__riscv_vfsub_vf_f32m2(__riscv_vle32_v_f32m2(x, vl), m, vl), vl);
        __riscv_vse32_v_f32m2(y, e, vl);
        acc = __riscv_vfwadd_wv_f64m4_tu(acc, acc, e, vl);
    }
    const vfloat64m1_t zero = __riscv_vfmv_s_f_f64m1(0.0, 1);
    return __riscv_vfmv_f_s_f64m1_f64(__riscv_vfredusum_vs_f64m4_f64m1(acc, zero, vlmax));
}
