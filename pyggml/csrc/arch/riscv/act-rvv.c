/* RVV 1.0 kernels of vec/act.h (activations): compiled with V, chosen at run time (arch/riscv/rvv.h).
 * Every loop is strip-mined with vsetvl, so any VLEN works and there is no scalar tail; LMUL is chosen
 * per kernel from the registers it keeps live. Accumulators that outlive a shorter last strip use the
 * _tu (tail undisturbed) intrinsics, or the lanes past vl would be clobbered (qemu's
 * rvv_ta_all_1s=true fills them with NaN bits, so tests catch it). */
#include "vec/act.h"
#include "arch/riscv/exp-rvv.h"

/* e32 m2 (the exp inside keeps about ten temporaries live): the formulas of vec/act.h lane-wise; x / (1 + exp(-z)) serves the sigmoid ones */
static inline vfloat32m2_t pg_rvv_sigmul(vfloat32m2_t x, vfloat32m2_t z, size_t vl) {
    /* pg_f32v_sigmul's clamps: -z at most 88, x at least -88 (a merge, so NaN lanes keep x) */
    const vfloat32m2_t e = pg_rvv_exp_f32m2(__riscv_vfmin_vf_f32m2(__riscv_vfneg_v_f32m2(z, vl), PG_EXP_HI_1, vl), vl);
    const vfloat32m2_t xc = __riscv_vfmerge_vfm_f32m2(x, -PG_EXP_HI_1, __riscv_vmflt_vf_f32m2_b16(x, -PG_EXP_HI_1, vl), vl);
    return __riscv_vfdiv_vv_f32m2(xc, __riscv_vfadd_vf_f32m2(e, 1.0f, vl), vl);
}
static inline vfloat32m2_t pg_rvv_silu(vfloat32m2_t x, size_t vl) { return pg_rvv_sigmul(x, x, vl); }
static inline vfloat32m2_t pg_rvv_gelu(vfloat32m2_t x, size_t vl) {
    const vfloat32m2_t p = __riscv_vfmadd_vf_f32m2(__riscv_vfmul_vv_f32m2(x, x, vl), PG_GELU_COEF_A,
                                                   __riscv_vfmv_v_f_f32m2(1.0f, vl), vl);   /* x*x*A + 1 */
    return pg_rvv_sigmul(x, __riscv_vfmul_vv_f32m2(__riscv_vfmul_vf_f32m2(x, 2.0f * PG_SQRT_2_OVER_PI, vl), p, vl), vl);
}
static inline vfloat32m2_t pg_rvv_gelu_quick(vfloat32m2_t x, size_t vl) {
    return pg_rvv_sigmul(x, __riscv_vfmul_vf_f32m2(x, PG_GELU_QUICK_COEF, vl), vl);
}
static inline vfloat32m2_t pg_rvv_relu(vfloat32m2_t x, size_t vl) { return __riscv_vfmax_vf_f32m2(x, 0.0f, vl); }
/* pg_f32v_gelu_erf's Chebyshev fit of erfc(|u|), u = x/sqrt(2), and erfc(-t) = 2 - erfc(t) */
static inline vfloat32m2_t pg_rvv_gelu_erf(vfloat32m2_t x, size_t vl) {
    const vfloat32m2_t t = __riscv_vfabs_v_f32m2(__riscv_vfmul_vf_f32m2(x, PG_SQRT_2_INV, vl), vl);
    const vfloat32m2_t s = __riscv_vfrdiv_vf_f32m2(
        __riscv_vfmadd_vf_f32m2(t, 0.5f, __riscv_vfmv_v_f_f32m2(1.0f, vl), vl), 1.0f, vl);   /* 1/(t/2 + 1) */
    vfloat32m2_t q = __riscv_vfmv_v_f_f32m2(pg_erfc_c[0], vl);
    for (int k = 1; k < 10; k++) q = __riscv_vfmadd_vv_f32m2(q, s, __riscv_vfmv_v_f_f32m2(pg_erfc_c[k], vl), vl);
    const vfloat32m2_t e = __riscv_vfmul_vv_f32m2(s, pg_rvv_exp_f32m2(__riscv_vfnmsac_vv_f32m2(q, t, t, vl), vl), vl);
    const vfloat32m2_t h = __riscv_vfmul_vf_f32m2(e, 0.5f, vl);
    const vfloat32m2_t g = __riscv_vmerge_vvm_f32m2(__riscv_vfrsub_vf_f32m2(h, 1.0f, vl), h,
                                                    __riscv_vmflt_vf_f32m2_b16(x, 0.0f, vl), vl);
    return __riscv_vfmul_vv_f32m2(x, g, vl);
}
/* pg_f32v_tanh's two forms: (1 - e)/(1 + e) with e = exp(-2|x|) and its sign put back, and the
 * polynomial below PG_TANH_POLY_MAX (the exp's NaN pass-through keeps NaN lanes NaN) */
static inline vfloat32m2_t pg_rvv_tanh(vfloat32m2_t x, size_t vl) {
    const vfloat32m2_t t = __riscv_vfabs_v_f32m2(x, vl);
    const vfloat32m2_t e = pg_rvv_exp_f32m2(__riscv_vfmul_vf_f32m2(t, -2.0f, vl), vl);
    const vfloat32m2_t q = __riscv_vfdiv_vv_f32m2(__riscv_vfrsub_vf_f32m2(e, 1.0f, vl), __riscv_vfadd_vf_f32m2(e, 1.0f, vl), vl);
    const vfloat32m2_t s = __riscv_vfmul_vv_f32m2(x, x, vl);
    vfloat32m2_t p = __riscv_vfmv_v_f_f32m2(pg_tanh_c[0], vl);
    for (int k = 1; k < 5; k++) p = __riscv_vfmadd_vv_f32m2(p, s, __riscv_vfmv_v_f_f32m2(pg_tanh_c[k], vl), vl);
    const vfloat32m2_t small = __riscv_vfmul_vv_f32m2(x, __riscv_vfmadd_vv_f32m2(p, s, __riscv_vfmv_v_f_f32m2(1.0f, vl), vl), vl);
    const vfloat32m2_t big = __riscv_vfsgnj_vv_f32m2(q, x, vl);
    return __riscv_vmerge_vvm_f32m2(big, small, __riscv_vmflt_vf_f32m2_b16(t, PG_TANH_POLY_MAX, vl), vl);
}

/* the activation act (vec/act.h's PG_ACT_*, a compile-time constant) lane-wise */
PG_ALWAYS_INLINE vfloat32m2_t pg_rvv_act(const int act, vfloat32m2_t x, size_t vl) {
    switch (act) {
    case PG_ACT_SILU: return pg_rvv_silu(x, vl);
    case PG_ACT_GELU: return pg_rvv_gelu(x, vl);
    case PG_ACT_GELU_ERF: return pg_rvv_gelu_erf(x, vl);
    case PG_ACT_GELU_QUICK: return pg_rvv_gelu_quick(x, vl);
    case PG_ACT_TANH: return pg_rvv_tanh(x, vl);
    default: return pg_rvv_relu(x, vl);
    }
}
/* y = act(x), or with glu y = act(x) * g (vec/act.h's pg_act_rows) */
PG_ALWAYS_INLINE void pg_rvv_act_rows(const int act, const int glu, int64_t n, float * y, const float * x,
                                      const float * g) {
    for (size_t vl; n > 0; n -= vl, x += vl, y += vl, g = glu ? g + vl : g) {
        vl = __riscv_vsetvl_e32m2(n);
        const vfloat32m2_t a = pg_rvv_act(act, __riscv_vle32_v_f32m2(x, vl), vl);
        __riscv_vse32_v_f32m2(y, glu ? __riscv_vfmul_vv_f32m2(a, __riscv_vle32_v_f32m2(g, vl), vl) : a, vl);
    }
}
void pg_rvv_silu_f32(int64_t n, float * y, const float * x) { pg_rvv_act_rows(PG_ACT_SILU, 0, n, y, x, NULL); }
void pg_rvv_gelu_f32(int64_t n, float * y, const float * x) { pg_rvv_act_rows(PG_ACT_GELU, 0, n, y, x, NULL); }
void pg_rvv_gelu_erf_f32(int64_t n, float * y, const float * x) { pg_rvv_act_rows(PG_ACT_GELU_ERF, 0, n, y, x, NULL); }
void pg_rvv_gelu_quick_f32(int64_t n, float * y, const float * x) { pg_rvv_act_rows(PG_ACT_GELU_QUICK, 0, n, y, x, NULL); }
void pg_rvv_tanh_f32(int64_t n, float * y, const float * x) { pg_rvv_act_rows(PG_ACT_TANH, 0, n, y, x, NULL); }
void pg_rvv_relu_glu_f32(int64_t n, float * y, const float * x, const float * g) {
    pg_rvv_act_rows(PG_ACT_RELU, 1, n, y, x, g);
}
void pg_rvv_gelu_glu_f32(int64_t n, float * y, const float * x, const float * g) {
    pg_rvv_act_rows(PG_ACT_GELU, 1, n, y, x, g);
}
void pg_rvv_silu_glu_f32(int64_t n, float * y, const float * x, const float * g) {
    pg_rvv_act_rows(PG_ACT_SILU, 1, n, y, x, g);
}
void pg_rvv_gelu_erf_glu_f32(int64_t n, float * y, const float * x, const float * g) {
    pg_rvv_act_rows(PG_ACT_GELU_ERF, 1, n, y, x, g);
}
void pg_rvv_gelu_quick_glu_f32(int64_t n, float * y, const float * x, const float * g) {
    pg_rvv_act_rows(PG_ACT_GELU_QUICK, 1, n, y, x, g);
}
