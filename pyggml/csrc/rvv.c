/* RVV 1.0 kernels of vec.h's row primitives: the only translation unit built with V (rvv.h says how
 * they are chosen at run time). Every loop is strip-mined with vsetvl, so any VLEN works and there
 * is no scalar tail; LMUL is chosen per kernel from the registers it keeps live. Accumulators that
 * outlive a shorter last strip use the _tu (tail undisturbed) intrinsics, or the lanes past vl would
 * be clobbered (qemu's rvv_ta_all_1s=true fills them with NaN bits, so tests catch it).
 */
#include "vec.h"
#include <riscv_vector.h>

int pg_rvv_vlen(void) { return (int) (__riscv_vlenb() * 8); }

/* ---- f16/bf16 lanes widened to f32 (e16 m2 -> e32 m4) ---- */
static inline vfloat32m4_t pg_rvv_load_bf16(const pg_bf16_t * p, size_t vl) {
    const vuint32m4_t u = __riscv_vzext_vf2_u32m4(__riscv_vle16_v_u16m2(p, vl), vl);
    return __riscv_vreinterpret_v_u32m4_f32m4(__riscv_vsll_vx_u32m4(u, 16, vl));
}

#if defined(__riscv_zvfhmin)
static inline vfloat32m4_t pg_rvv_load_f16(const pg_fp16_t * p, size_t vl) {
    return __riscv_vfwcvt_f_f_v_f32m4(__riscv_vle16_v_f16m2((const _Float16 *) p, vl), vl);
}
#else
/* without zvfhmin, exact integer widening: the magnitude bits moved to f32's place and scaled by
 * 2^112 (rebiases normals, normalises subnormals); exponent 31 (inf, NaN) becomes 255; the sign back */
static inline vfloat32m4_t pg_rvv_load_f16(const pg_fp16_t * p, size_t vl) {
    const vuint32m4_t h = __riscv_vzext_vf2_u32m4(__riscv_vle16_v_u16m2(p, vl), vl);
    const vuint32m4_t mag = __riscv_vsll_vx_u32m4(__riscv_vand_vx_u32m4(h, 0x7fffu, vl), 13, vl);
    vuint32m4_t u = __riscv_vreinterpret_v_f32m4_u32m4(
        __riscv_vfmul_vf_f32m4(__riscv_vreinterpret_v_u32m4_f32m4(mag), 0x1p112f, vl));
    u = __riscv_vor_vx_u32m4_mu(__riscv_vmsgeu_vx_u32m4_b8(mag, 0x0f800000u, vl), u, mag, 0x7f800000u, vl);
    const vuint32m4_t sign = __riscv_vsll_vx_u32m4(__riscv_vand_vx_u32m4(h, 0x8000u, vl), 16, vl);
    return __riscv_vreinterpret_v_u32m4_f32m4(__riscv_vor_vv_u32m4(u, sign, vl));
}
#endif

static inline vfloat32m4_t pg_rvv_load_f32(const float * p, size_t vl) { return __riscv_vle32_v_f32m4(p, vl); }

/* ---- conversions ---- */
void pg_rvv_cvt_f16_f32(int64_t n, const pg_fp16_t * x, float * y) {
    for (size_t vl; n > 0; n -= vl, x += vl, y += vl) {
        vl = __riscv_vsetvl_e32m4(n);
        __riscv_vse32_v_f32m4(y, pg_rvv_load_f16(x, vl), vl);
    }
}

void pg_rvv_cvt_bf16_f32(int64_t n, const pg_bf16_t * x, float * y) {
    for (size_t vl; n > 0; n -= vl, x += vl, y += vl) {
        vl = __riscv_vsetvl_e32m4(n);
        __riscv_vse32_v_f32m4(y, pg_rvv_load_bf16(x, vl), vl);
    }
}

/* narrowing with round-to-nearest-even (frm's default): vfncvt with zvfhmin, else scalar */
void pg_rvv_cvt_f32_f16(int64_t n, const float * x, pg_fp16_t * y) {
#if defined(__riscv_zvfhmin)
    for (size_t vl; n > 0; n -= vl, x += vl, y += vl) {
        vl = __riscv_vsetvl_e32m8(n);
        const vfloat16m4_t h = __riscv_vfncvt_f_f_w_f16m4(__riscv_vle32_v_f32m8(x, vl), vl);
        __riscv_vse16_v_f16m4((_Float16 *) y, h, vl);
    }
#else
    for (int64_t i = 0; i < n; i++) y[i] = pg_fp32_to_fp16(x[i]);
#endif
}

/* pg_fp32_to_bf16 lane-wise: u + 0x7fff + lsb, upper half; NaN lanes keep a quiet NaN */
void pg_rvv_cvt_f32_bf16(int64_t n, const float * x, pg_bf16_t * y) {
    for (size_t vl; n > 0; n -= vl, x += vl, y += vl) {
        vl = __riscv_vsetvl_e32m8(n);
        const vuint32m8_t u = __riscv_vle32_v_u32m8((const uint32_t *) x, vl);
        const vuint32m8_t lsb = __riscv_vand_vx_u32m8(__riscv_vsrl_vx_u32m8(u, 16, vl), 1, vl);
        vuint32m8_t r = __riscv_vadd_vv_u32m8(__riscv_vadd_vx_u32m8(u, 0x7fffu, vl), lsb, vl);
        r = __riscv_vsrl_vx_u32m8(r, 16, vl);
        const vbool4_t nan = __riscv_vmsgtu_vx_u32m8_b4(__riscv_vand_vx_u32m8(u, 0x7fffffffu, vl), 0x7f800000u, vl);
        r = __riscv_vor_vx_u32m8_mu(nan, r, __riscv_vsrl_vx_u32m8(u, 16, vl), 0x40u, vl);
        __riscv_vse16_v_u16m4(y, __riscv_vnsrl_wx_u16m4(r, 0, vl), vl);
    }
}

/* ---- dot products: e32 m4 operands, one m4 accumulator kept with _tu across strips ---- */
#define PG_RVV_DOT(NAME, TX, TY, LOADX, LOADY)                                                   \
float NAME(int64_t n, const TX * x, const TY * y) {                                             \
    const size_t vlmax = __riscv_vsetvlmax_e32m4();                                              \
    vfloat32m4_t acc = __riscv_vfmv_v_f_f32m4(0.0f, vlmax);                                      \
    for (size_t vl; n > 0; n -= vl, x += vl, y += vl) {                                          \
        vl = __riscv_vsetvl_e32m4(n);                                                            \
        acc = __riscv_vfmacc_vv_f32m4_tu(acc, LOADX(x, vl), LOADY(y, vl), vl);                   \
    }                                                                                            \
    const vfloat32m1_t zero = __riscv_vfmv_s_f_f32m1(0.0f, 1);                                   \
    return __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32m4_f32m1(acc, zero, vlmax));       \
}
PG_RVV_DOT(pg_rvv_dot_f32, float, float, pg_rvv_load_f32, pg_rvv_load_f32)
PG_RVV_DOT(pg_rvv_dot_f16, pg_fp16_t, pg_fp16_t, pg_rvv_load_f16, pg_rvv_load_f16)
PG_RVV_DOT(pg_rvv_dot_bf16, pg_bf16_t, pg_bf16_t, pg_rvv_load_bf16, pg_rvv_load_bf16)
PG_RVV_DOT(pg_rvv_dot_f16_f32, pg_fp16_t, float, pg_rvv_load_f16, pg_rvv_load_f32)

/* one 32-byte block per strip (e8 m2 holds 32 lanes at the minimum VLEN of 128): exact int8
 * products widened to i16, summed into i32 by the widening reduction, then scaled like the scalar
 * loop, so the result is the scalar one bit for bit */
float pg_rvv_dot_q8_0_q8_0(int64_t n, const pg_block_q8_0 * x, const pg_block_q8_0 * y) {
    const int64_t nb = n / PG_QK8_0;
    const size_t vl = __riscv_vsetvl_e8m2(PG_QK8_0);
    const vint32m1_t zero = __riscv_vmv_s_x_i32m1(0, 1);
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < nb; ib++) {
        const vint16m4_t p = __riscv_vwmul_vv_i16m4(__riscv_vle8_v_i8m2(x[ib].qs, vl), __riscv_vle8_v_i8m2(y[ib].qs, vl), vl);
        const int32_t s = __riscv_vmv_x_s_i32m1_i32(__riscv_vwredsum_vs_i16m4_i32m1(p, zero, vl));
        sumf += (float) s * (pg_fp16_to_fp32(x[ib].d) * pg_fp16_to_fp32(y[ib].d));
    }
    return sumf;
}

/* ---- elementwise: streaming, e32 m8 ---- */
void pg_rvv_add_f32(int64_t n, float * z, const float * x, const float * y) {
    for (size_t vl; n > 0; n -= vl, x += vl, y += vl, z += vl) {
        vl = __riscv_vsetvl_e32m8(n);
        __riscv_vse32_v_f32m8(z, __riscv_vfadd_vv_f32m8(__riscv_vle32_v_f32m8(x, vl), __riscv_vle32_v_f32m8(y, vl), vl), vl);
    }
}

void pg_rvv_mul_f32(int64_t n, float * z, const float * x, const float * y) {
    for (size_t vl; n > 0; n -= vl, x += vl, y += vl, z += vl) {
        vl = __riscv_vsetvl_e32m8(n);
        __riscv_vse32_v_f32m8(z, __riscv_vfmul_vv_f32m8(__riscv_vle32_v_f32m8(x, vl), __riscv_vle32_v_f32m8(y, vl), vl), vl);
    }
}

void pg_rvv_mad_f32(int64_t n, float * y, const float * x, float v) {
    for (size_t vl; n > 0; n -= vl, x += vl, y += vl) {
        vl = __riscv_vsetvl_e32m8(n);
        __riscv_vse32_v_f32m8(y, __riscv_vfmacc_vf_f32m8(__riscv_vle32_v_f32m8(y, vl), v, __riscv_vle32_v_f32m8(x, vl), vl), vl);
    }
}

void pg_rvv_scale_f32(int64_t n, float * y, const float * x, float v) {
    for (size_t vl; n > 0; n -= vl, x += vl, y += vl) {
        vl = __riscv_vsetvl_e32m8(n);
        __riscv_vse32_v_f32m8(y, __riscv_vfmul_vf_f32m8(__riscv_vle32_v_f32m8(x, vl), v, vl), vl);
    }
}

/* ---- reductions ---- */
/* vfmax ignores a NaN operand like the scalar loop's comparison does */
float pg_rvv_max_f32(int64_t n, const float * x) {
    const size_t vlmax = __riscv_vsetvlmax_e32m8();
    vfloat32m8_t m = __riscv_vfmv_v_f_f32m8(-INFINITY, vlmax);
    for (size_t vl; n > 0; n -= vl, x += vl) {
        vl = __riscv_vsetvl_e32m8(n);
        m = __riscv_vfmax_vv_f32m8_tu(m, m, __riscv_vle32_v_f32m8(x, vl), vl);
    }
    const vfloat32m1_t init = __riscv_vfmv_s_f_f32m1(-INFINITY, 1);
    return __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredmax_vs_f32m8_f32m1(m, init, vlmax));
}

/* ---- sums in double (vec.h's norm section): f32 values v widened into f64 lanes as they are
 * added (e32 m4 -> e64 m8, the accumulator kept with _tu); VAL is the strip's f32 vector, KEEP
 * stores it where the primitive writes one, SQ is what gets added (v, or v*v rounded to f32). One
 * loop for all, so the same values give the same sum bit for bit whichever primitive sees them. */
#define PG_RVV_SUM64(VAL, KEEP, SQ)                                                              \
    const size_t vlmax = __riscv_vsetvlmax_e64m8();                                              \
    vfloat64m8_t acc = __riscv_vfmv_v_f_f64m8(0.0, vlmax);                                       \
    for (size_t vl, i = 0; i < (size_t) n; i += vl) {                                            \
        vl = __riscv_vsetvl_e32m4((size_t) n - i);                                               \
        const vfloat32m4_t v = VAL;                                                              \
        KEEP;                                                                                    \
        acc = __riscv_vfwadd_wv_f64m8_tu(acc, acc, SQ, vl);                                      \
    }                                                                                            \
    const vfloat64m1_t zero = __riscv_vfmv_s_f_f64m1(0.0, 1);                                    \
    return __riscv_vfmv_f_s_f64m1_f64(__riscv_vfredusum_vs_f64m8_f64m1(acc, zero, vlmax));

#define PG_RVV_X        __riscv_vle32_v_f32m4(x + i, vl)
#define PG_RVV_SQ       __riscv_vfmul_vv_f32m4(v, v, vl)
#define PG_RVV_STORE_Y  __riscv_vse32_v_f32m4(y + i, v, vl)

double pg_rvv_sum_f32(int64_t n, const float * x) { PG_RVV_SUM64(PG_RVV_X, (void) 0, v) }
double pg_rvv_sumsq_f32(int64_t n, const float * x) { PG_RVV_SUM64(PG_RVV_X, (void) 0, PG_RVV_SQ) }
double pg_rvv_add_sumsq_f32(int64_t n, float * y, const float * x, const float * r) {
    PG_RVV_SUM64(__riscv_vfadd_vv_f32m4(PG_RVV_X, __riscv_vle32_v_f32m4(r + i, vl), vl), PG_RVV_STORE_Y, PG_RVV_SQ)
}
double pg_rvv_cvar_f32(int64_t n, float * y, const float * x, float mean) {
    PG_RVV_SUM64(__riscv_vfsub_vf_f32m4(PG_RVV_X, mean, vl), PG_RVV_STORE_Y, PG_RVV_SQ)
}

/* y = (x*s)*w, both products rounded (streaming, e32 m8) */
void pg_rvv_scale_mul_f32(int64_t n, float * y, const float * x, float s, const float * w) {
    for (size_t vl; n > 0; n -= vl, x += vl, y += vl, w += vl) {
        vl = __riscv_vsetvl_e32m8(n);
        const vfloat32m8_t xs = __riscv_vfmul_vf_f32m8(__riscv_vle32_v_f32m8(x, vl), s, vl);
        __riscv_vse32_v_f32m8(y, __riscv_vfmul_vv_f32m8(xs, __riscv_vle32_v_f32m8(w, vl), vl), vl);
    }
}

/* ---- exp: pg_expf's algorithm lane-wise (e32 m2: about ten live temporaries) ----
 * k = round(x*log2 e) in frm's round-to-nearest-even, r = x - k*ln2 in two parts, the degree-7
 * Horner polynomial, 2^k applied as two halves; x < lo gives 0, x > hi inf, NaN stays */
static inline vfloat32m2_t pg_rvv_exp_f32m2(vfloat32m2_t x, size_t vl) {
    const vfloat32m2_t xc = __riscv_vfmax_vf_f32m2(x, PG_EXP_LO, vl);
    const vint32m2_t ki = __riscv_vfcvt_x_f_v_i32m2(__riscv_vfmul_vf_f32m2(xc, 1.44269504088896341f, vl), vl);
    const vfloat32m2_t k = __riscv_vfcvt_f_x_v_f32m2(ki, vl);
    vfloat32m2_t r = __riscv_vfnmsac_vf_f32m2(xc, 6.93145752e-1f, k, vl);     /* xc - k*c1 */
    r = __riscv_vfnmsac_vf_f32m2(r, 1.42860677e-6f, k, vl);
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

double pg_rvv_exp_sum_f32(int64_t n, float * y, const float * x, float m) {
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

/* ---- activations (e32 m2: the exp inside keeps about ten temporaries live) ----
 * the formulas of vec.h's activation section, lane-wise; x / (1 + exp(-z)) serves the sigmoid ones */
static inline vfloat32m2_t pg_rvv_sigmul(vfloat32m2_t x, vfloat32m2_t z, size_t vl) {
    const vfloat32m2_t e = pg_rvv_exp_f32m2(__riscv_vfneg_v_f32m2(z, vl), vl);
    return __riscv_vfdiv_vv_f32m2(x, __riscv_vfadd_vf_f32m2(e, 1.0f, vl), vl);
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
    static const float c[10] = {0.17087277f, -0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f,
                                -0.18628806f, 0.09678418f, 0.37409196f, 1.00002368f, -1.26551223f};
    const vfloat32m2_t t = __riscv_vfabs_v_f32m2(__riscv_vfmul_vf_f32m2(x, PG_SQRT_2_INV, vl), vl);
    const vfloat32m2_t s = __riscv_vfrdiv_vf_f32m2(
        __riscv_vfmadd_vf_f32m2(t, 0.5f, __riscv_vfmv_v_f_f32m2(1.0f, vl), vl), 1.0f, vl);   /* 1/(t/2 + 1) */
    vfloat32m2_t q = __riscv_vfmv_v_f_f32m2(c[0], vl);
    for (int k = 1; k < 10; k++) q = __riscv_vfmadd_vv_f32m2(q, s, __riscv_vfmv_v_f_f32m2(c[k], vl), vl);
    const vfloat32m2_t e = __riscv_vfmul_vv_f32m2(s, pg_rvv_exp_f32m2(__riscv_vfnmsac_vv_f32m2(q, t, t, vl), vl), vl);
    const vfloat32m2_t h = __riscv_vfmul_vf_f32m2(e, 0.5f, vl);
    const vfloat32m2_t g = __riscv_vmerge_vvm_f32m2(__riscv_vfrsub_vf_f32m2(h, 1.0f, vl), h,
                                                    __riscv_vmflt_vf_f32m2_b16(x, 0.0f, vl), vl);
    return __riscv_vfmul_vv_f32m2(x, g, vl);
}

#define PG_RVV_ACT(ACT)                                                                          \
void pg_rvv_##ACT##_f32(int64_t n, float * y, const float * x) {                                \
    for (size_t vl; n > 0; n -= vl, x += vl, y += vl) {                                          \
        vl = __riscv_vsetvl_e32m2(n);                                                            \
        __riscv_vse32_v_f32m2(y, pg_rvv_##ACT(__riscv_vle32_v_f32m2(x, vl), vl), vl);            \
    }                                                                                            \
}
#define PG_RVV_GLU(ACT)                                                                          \
void pg_rvv_##ACT##_glu_f32(int64_t n, float * y, const float * x, const float * g) {           \
    for (size_t vl; n > 0; n -= vl, x += vl, y += vl, g += vl) {                                 \
        vl = __riscv_vsetvl_e32m2(n);                                                            \
        const vfloat32m2_t a = pg_rvv_##ACT(__riscv_vle32_v_f32m2(x, vl), vl);                   \
        __riscv_vse32_v_f32m2(y, __riscv_vfmul_vv_f32m2(a, __riscv_vle32_v_f32m2(g, vl), vl), vl); \
    }                                                                                            \
}
PG_RVV_ACT(silu)
PG_RVV_ACT(gelu)
PG_RVV_ACT(gelu_erf)
PG_RVV_GLU(relu)
PG_RVV_GLU(gelu)
PG_RVV_GLU(silu)
PG_RVV_GLU(gelu_erf)
PG_RVV_GLU(gelu_quick)

/* ---- rope ---- */
/* pg_sincosf lane-wise (e32 m2): two-step reduction by pi/2, the polynomials, the quadrant q = j mod 4
 * (bit 0 swaps sin and cos, bit 1 of q, of q+1 for cos, flips the sign) */
void pg_rvv_sincos_f32(int64_t n, const float * x, float * c, float * s, float scale) {
    for (size_t vl; n > 0; n -= vl, x += vl, c += vl, s += vl) {
        vl = __riscv_vsetvl_e32m2(n);
        const vfloat32m2_t vx = __riscv_vle32_v_f32m2(x, vl);
        const vint32m2_t j1 = __riscv_vfcvt_x_f_v_i32m2(__riscv_vfmul_vf_f32m2(vx, PG_SINCOS_2_PI, vl), vl);
        vfloat32m2_t j = __riscv_vfcvt_f_x_v_f32m2(j1, vl);
        vfloat32m2_t r = __riscv_vfnmsac_vf_f32m2(vx, PG_SINCOS_P1, j, vl);    /* r - P*j */
        r = __riscv_vfnmsac_vf_f32m2(r, PG_SINCOS_P2, j, vl);
        r = __riscv_vfnmsac_vf_f32m2(r, PG_SINCOS_P3, j, vl);
        const vint32m2_t j2 = __riscv_vfcvt_x_f_v_i32m2(__riscv_vfmul_vf_f32m2(r, PG_SINCOS_2_PI, vl), vl);
        j = __riscv_vfcvt_f_x_v_f32m2(j2, vl);
        r = __riscv_vfnmsac_vf_f32m2(r, PG_SINCOS_P1, j, vl);
        r = __riscv_vfnmsac_vf_f32m2(r, PG_SINCOS_P2, j, vl);
        const vint32m2_t q = __riscv_vadd_vv_i32m2(j1, j2, vl);
        const vfloat32m2_t z = __riscv_vfmul_vv_f32m2(r, r, vl);
        vfloat32m2_t ps = __riscv_vfmacc_vf_f32m2(__riscv_vfmv_v_f_f32m2(PG_SIN_S2, vl), PG_SIN_S3, z, vl);
        ps = __riscv_vfmadd_vv_f32m2(ps, z, __riscv_vfmv_v_f_f32m2(PG_SIN_S1, vl), vl);
        const vfloat32m2_t sp = __riscv_vfmacc_vv_f32m2(r, __riscv_vfmul_vv_f32m2(r, z, vl), ps, vl);
        vfloat32m2_t pc = __riscv_vfmacc_vf_f32m2(__riscv_vfmv_v_f_f32m2(PG_COS_C2, vl), PG_COS_C3, z, vl);
        pc = __riscv_vfmadd_vv_f32m2(pc, z, __riscv_vfmv_v_f_f32m2(PG_COS_C1, vl), vl);
        const vfloat32m2_t c0 = __riscv_vfnmsac_vf_f32m2(__riscv_vfmv_v_f_f32m2(1.0f, vl), 0.5f, z, vl);
        const vfloat32m2_t cp = __riscv_vfmacc_vv_f32m2(c0, __riscv_vfmul_vv_f32m2(z, z, vl), pc, vl);
        const vbool16_t swap = __riscv_vmsne_vx_i32m2_b16(__riscv_vand_vx_i32m2(q, 1, vl), 0, vl);
        const vuint32m2_t ss = __riscv_vreinterpret_v_f32m2_u32m2(__riscv_vmerge_vvm_f32m2(sp, cp, swap, vl));
        const vuint32m2_t cc = __riscv_vreinterpret_v_f32m2_u32m2(__riscv_vmerge_vvm_f32m2(cp, sp, swap, vl));
        const vuint32m2_t qu = __riscv_vreinterpret_v_i32m2_u32m2(q);
        const vuint32m2_t sn = __riscv_vsll_vx_u32m2(__riscv_vand_vx_u32m2(qu, 2, vl), 30, vl);
        const vuint32m2_t cn = __riscv_vsll_vx_u32m2(__riscv_vand_vx_u32m2(__riscv_vadd_vx_u32m2(qu, 1, vl), 2, vl), 30, vl);
        const vfloat32m2_t vs = __riscv_vreinterpret_v_u32m2_f32m2(__riscv_vxor_vv_u32m2(ss, sn, vl));
        const vfloat32m2_t vc = __riscv_vreinterpret_v_u32m2_f32m2(__riscv_vxor_vv_u32m2(cc, cn, vl));
        __riscv_vse32_v_f32m2(c, __riscv_vfmul_vf_f32m2(vc, scale, vl), vl);
        __riscv_vse32_v_f32m2(s, __riscv_vfmul_vf_f32m2(vs, scale, vl), vl);
    }
}

/* y0 = a*c - b*s, y1 = a*s + b*c with vec.h's rounding (products rounded, then the sub; one FMA) */
#define PG_RVV_ROTATE(M, a, b, vc, vs, r0, r1, vl)                                               \
    const vfloat32##M##_t r0 = __riscv_vfsub_vv_f32##M(__riscv_vfmul_vv_f32##M(a, vc, vl),        \
                                                       __riscv_vfmul_vv_f32##M(b, vs, vl), vl);   \
    const vfloat32##M##_t r1 = __riscv_vfmacc_vv_f32##M(__riscv_vfmul_vv_f32##M(b, vc, vl), a, vs, vl)

/* half-split pairs: four contiguous streams (e32 m4) */
void pg_rvv_rope_half_f32(int64_t n, float * y0, float * y1, const float * x0, const float * x1,
                          const float * c, const float * s) {
    for (size_t vl; n > 0; n -= vl, y0 += vl, y1 += vl, x0 += vl, x1 += vl, c += vl, s += vl) {
        vl = __riscv_vsetvl_e32m4(n);
        const vfloat32m4_t a = __riscv_vle32_v_f32m4(x0, vl), b = __riscv_vle32_v_f32m4(x1, vl);
        const vfloat32m4_t vc = __riscv_vle32_v_f32m4(c, vl), vs = __riscv_vle32_v_f32m4(s, vl);
        PG_RVV_ROTATE(m4, a, b, vc, vs, r0, r1, vl);
        __riscv_vse32_v_f32m4(y0, r0, vl);
        __riscv_vse32_v_f32m4(y1, r1, vl);
    }
}

/* adjacent pairs: a two-field segment load splits even and odd elements, a segment store
 * interleaves the results (e32 m2: the tuples take twice the registers) */
void pg_rvv_rope_adj_f32(int64_t n, float * y, const float * x, const float * c, const float * s) {
    for (size_t vl; n > 0; n -= vl, y += 2 * vl, x += 2 * vl, c += vl, s += vl) {
        vl = __riscv_vsetvl_e32m2(n);
        vfloat32m2x2_t t = __riscv_vlseg2e32_v_f32m2x2(x, vl);
        const vfloat32m2_t a = __riscv_vget_v_f32m2x2_f32m2(t, 0), b = __riscv_vget_v_f32m2x2_f32m2(t, 1);
        const vfloat32m2_t vc = __riscv_vle32_v_f32m2(c, vl), vs = __riscv_vle32_v_f32m2(s, vl);
        PG_RVV_ROTATE(m2, a, b, vc, vs, r0, r1, vl);
        t = __riscv_vset_v_f32m2_f32m2x2(t, 0, r0);
        t = __riscv_vset_v_f32m2_f32m2x2(t, 1, r1);
        __riscv_vsseg2e32_v_f32m2x2(y, t, vl);
    }
}

/* ---- several f32 rows against one row x (e32 m4 operands, up to four accumulators with _tu):
 * s[r*lds] = dot(x, y[r]) for r < nr; matmul's dot4 and the attention dot. RVV types cannot form
 * arrays, so the four accumulators are named and nr (a constant after inlining) masks the unused. */
#define PG_RVV_DOT_ROWS(NAME, TX, LOADX)                                                         \
static inline __attribute__((always_inline)) void NAME(const int nr, int64_t n, const TX * x,    \
                                                       const float * const * y, float * s, int64_t lds) { \
    const size_t vlmax = __riscv_vsetvlmax_e32m4();                                              \
    vfloat32m4_t a0 = __riscv_vfmv_v_f_f32m4(0.0f, vlmax), a1 = a0, a2 = a0, a3 = a0;           \
    for (size_t vl, i = 0; i < (size_t) n; i += vl) {                                            \
        vl = __riscv_vsetvl_e32m4((size_t) n - i);                                               \
        const vfloat32m4_t xv = LOADX(x + i, vl);                                                \
        a0 = __riscv_vfmacc_vv_f32m4_tu(a0, xv, __riscv_vle32_v_f32m4(y[0] + i, vl), vl);        \
        if (nr > 1) a1 = __riscv_vfmacc_vv_f32m4_tu(a1, xv, __riscv_vle32_v_f32m4(y[1] + i, vl), vl); \
        if (nr > 2) a2 = __riscv_vfmacc_vv_f32m4_tu(a2, xv, __riscv_vle32_v_f32m4(y[2] + i, vl), vl); \
        if (nr > 3) a3 = __riscv_vfmacc_vv_f32m4_tu(a3, xv, __riscv_vle32_v_f32m4(y[3] + i, vl), vl); \
    }                                                                                            \
    s[0] = pg_rvv_reduce_f32m4(a0, vlmax);                                                       \
    if (nr > 1) s[lds] = pg_rvv_reduce_f32m4(a1, vlmax);                                         \
    if (nr > 2) s[2 * lds] = pg_rvv_reduce_f32m4(a2, vlmax);                                     \
    if (nr > 3) s[3 * lds] = pg_rvv_reduce_f32m4(a3, vlmax);                                     \
}
static inline float pg_rvv_reduce_f32m4(vfloat32m4_t a, size_t vlmax) {
    const vfloat32m1_t zero = __riscv_vfmv_s_f_f32m1(0.0f, 1);
    return __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32m4_f32m1(a, zero, vlmax));
}
PG_RVV_DOT_ROWS(pg_rvv_dot_rows_f32, float, pg_rvv_load_f32)
PG_RVV_DOT_ROWS(pg_rvv_dot_rows_f16, pg_fp16_t, pg_rvv_load_f16)
PG_RVV_DOT_ROWS(pg_rvv_dot_rows_bf16, pg_bf16_t, pg_rvv_load_bf16)

void pg_rvv_dot4_f32(int64_t n, const float * x, const float * const * y, float * s) { pg_rvv_dot_rows_f32(4, n, x, y, s, 1); }
void pg_rvv_dot4_f16_f32(int64_t n, const pg_fp16_t * x, const float * const * y, float * s) { pg_rvv_dot_rows_f16(4, n, x, y, s, 1); }
void pg_rvv_dot4_bf16_f32(int64_t n, const pg_bf16_t * x, const float * const * y, float * s) { pg_rvv_dot_rows_bf16(4, n, x, y, s, 1); }
PG_RVV_DOT(pg_rvv_dot_bf16_f32, pg_bf16_t, float, pg_rvv_load_bf16, pg_rvv_load_f32)

/* GEMM micro-kernel: PG_RVV_MM_MR rows x one e32 m2 register group of columns (8 at VLEN 128, 16
 * at 256; capped at PG_MM_NR_MAX for wide machines, which then leave part of the group unused).
 * 12 m2 accumulators (24 registers) and the panel row (2) fit the 32 vector registers. vl is the
 * same for every instruction (the panel's zero padding makes every tile full), so no tail policy
 * matters: each accumulator lane is written only under that vl and stored under it. */
int pg_rvv_gemm_nr(void) { return (int) PG_MIN(__riscv_vsetvlmax_e32m2(), (size_t) PG_MM_NR_MAX); }

#define PG_RVV_MM_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
_Static_assert(PG_RVV_MM_MR == 12, "PG_RVV_MM_ROWS lists PG_RVV_MM_MR rows");

void pg_rvv_gemm_tile_f32(int64_t n, const float * a, int64_t lda, const float * b, float * c) {
    const size_t vl = __riscv_vsetvl_e32m2((size_t) pg_rvv_gemm_nr());
#define PG_RVV_MM_ZERO(r) vfloat32m2_t c##r = __riscv_vfmv_v_f_f32m2(0.0f, vl);
#define PG_RVV_MM_FMA(r) c##r = __riscv_vfmacc_vf_f32m2(c##r, a[(r) * lda + k], bv, vl);
#define PG_RVV_MM_STORE(r) __riscv_vse32_v_f32m2(c + (r) * vl, c##r, vl);
    PG_RVV_MM_ROWS(PG_RVV_MM_ZERO)
    for (int64_t k = 0; k < n; k++, b += vl) {
        const vfloat32m2_t bv = __riscv_vle32_v_f32m2(b, vl);
        PG_RVV_MM_ROWS(PG_RVV_MM_FMA)
    }
    PG_RVV_MM_ROWS(PG_RVV_MM_STORE)
#undef PG_RVV_MM_ZERO
#undef PG_RVV_MM_FMA
#undef PG_RVV_MM_STORE
}

/* q4_0 x q8_0: one block per step (e8 m1 holds its 16 bytes at VLEN >= 128): low nibbles times
 * y's first 16 values plus high nibbles times the last 16, exact in i16, summed into i32 */
float pg_rvv_dot_q4_0_q8_0(int64_t n, const pg_block_q4_0 * x, const pg_block_q8_0 * y) {
    const int64_t nb = n / PG_QK4_0;
    const size_t vl = __riscv_vsetvl_e8m1(PG_QK4_0 / 2);
    const vint32m1_t zero = __riscv_vmv_s_x_i32m1(0, 1);
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < nb; ib++) {
        const vuint8m1_t b = __riscv_vle8_v_u8m1(x[ib].qs, vl);
        const vint8m1_t lo = __riscv_vsub_vx_i8m1(__riscv_vreinterpret_v_u8m1_i8m1(__riscv_vand_vx_u8m1(b, 0x0f, vl)), 8, vl);
        const vint8m1_t hi = __riscv_vsub_vx_i8m1(__riscv_vreinterpret_v_u8m1_i8m1(__riscv_vsrl_vx_u8m1(b, 4, vl)), 8, vl);
        vint16m2_t p = __riscv_vwmul_vv_i16m2(lo, __riscv_vle8_v_i8m1(y[ib].qs, vl), vl);
        p = __riscv_vwmacc_vv_i16m2(p, hi, __riscv_vle8_v_i8m1(y[ib].qs + PG_QK4_0 / 2, vl), vl);
        const int32_t s = __riscv_vmv_x_s_i32m1_i32(__riscv_vwredsum_vs_i16m2_i32m1(p, zero, vl));
        sumf += (float) s * (pg_fp16_to_fp32(x[ib].d) * pg_fp16_to_fp32(y[ib].d));
    }
    return sumf;
}

/* Q8_0 quantiser, one block per step (e32 m8 holds 32 lanes at VLEN >= 128): the scalar loop's
 * operations (max |x|, one multiply by 127/amax, vfcvt in frm's round-to-nearest-even), so the
 * bytes are the scalar ones; |q| <= 127, so the narrowing is exact */
void pg_rvv_quantize_q8_0(int64_t n, const float * x, pg_block_q8_0 * y) {
    const size_t vl = __riscv_vsetvl_e32m8(PG_QK8_0);
    const vfloat32m1_t zero = __riscv_vfmv_s_f_f32m1(0.0f, 1);
    for (int64_t ib = 0; ib < n / PG_QK8_0; ib++, x += PG_QK8_0) {
        const vfloat32m8_t v = __riscv_vle32_v_f32m8(x, vl);
        const float amax = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredmax_vs_f32m8_f32m1(__riscv_vfabs_v_f32m8(v, vl), zero, vl));
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const vint32m8_t q = __riscv_vfcvt_x_f_v_i32m8(__riscv_vfmul_vf_f32m8(v, id, vl), vl);
        __riscv_vse8_v_i8m2(y[ib].qs, __riscv_vncvt_x_x_w_i8m2(__riscv_vncvt_x_x_w_i16m4(q, vl), vl), vl);
        y[ib].d = pg_fp32_to_fp16(amax / 127.0f);
    }
}

/* ---- attention ---- */
#define PG_RVV_ATTN_DOT(NAME, T, ROWS)                                                           \
void NAME(int nr, int64_t n, const float * q, int64_t ldq, const T * k, float * s, int64_t lds) { \
    for (; nr > 0; nr -= 4, q += 4 * ldq, s += 4 * lds) {                                        \
        const float * const y[4] = {q, q + ldq, q + 2 * ldq, q + 3 * ldq};                       \
        switch (nr) {                                                                            \
        case 1: ROWS(1, n, k, y, s, lds); break;                                                 \
        case 2: ROWS(2, n, k, y, s, lds); break;                                                 \
        case 3: ROWS(3, n, k, y, s, lds); break;                                                 \
        default: ROWS(4, n, k, y, s, lds); break;                                                \
        }                                                                                        \
    }                                                                                            \
}
PG_RVV_ATTN_DOT(pg_rvv_attn_dot_f32, float, pg_rvv_dot_rows_f32)
PG_RVV_ATTN_DOT(pg_rvv_attn_dot_f16, pg_fp16_t, pg_rvv_dot_rows_f16)
PG_RVV_ATTN_DOT(pg_rvv_attn_dot_bf16, pg_bf16_t, pg_rvv_dot_rows_bf16)

/* online softmax, row by row: x += mv and the max (e32 m8, _tu), then exp and sum (exp_sum) */
void pg_rvv_attn_softmax_rows_f32(int nr, int64_t n, float * x, int64_t ldx, const float * mv, int64_t ldm,
                                  float * M, float * S, float * f) {
    const size_t vlmax = __riscv_vsetvlmax_e32m8();
    const vfloat32m1_t ninf = __riscv_vfmv_s_f_f32m1(-INFINITY, 1);
    for (int r = 0; r < nr; r++, x += ldx, mv = mv ? mv + ldm : NULL) {
        vfloat32m8_t vm = __riscv_vfmv_v_f_f32m8(-INFINITY, vlmax);
        for (size_t vl, i = 0; i < (size_t) n; i += vl) {
            vl = __riscv_vsetvl_e32m8((size_t) n - i);
            vfloat32m8_t v = __riscv_vle32_v_f32m8(x + i, vl);
            if (mv) {
                v = __riscv_vfadd_vv_f32m8(v, __riscv_vle32_v_f32m8(mv + i, vl), vl);
                __riscv_vse32_v_f32m8(x + i, v, vl);
            }
            vm = __riscv_vfmax_vv_f32m8_tu(vm, vm, v, vl);
        }
        const float mx = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredmax_vs_f32m8_f32m1(vm, ninf, vlmax));
        float m = PG_MAX(M[r], mx);
        f[r] = m > M[r] ? pg_expf(M[r] - m) : 1.0f;
        M[r] = m;
        if (m == -INFINITY) m = INFINITY;    /* fully masked so far: exp(-inf - inf) = 0 */
        S[r] = S[r] * f[r] + (float) pg_rvv_exp_sum_f32(n, x, x, m);
    }
}

/* y = slope*m, and the range [lo, hi) of lanes that are not -inf: the first from vfirst, the last
 * as the largest lane index under the live mask (e32 m4) */
void pg_rvv_attn_mask_f16(int64_t n, const pg_fp16_t * m, float slope, float * y, int64_t * lo, int64_t * hi) {
    int64_t l = n, h = 0;
    const vuint32m1_t zero = __riscv_vmv_s_x_u32m1(0, 1);
    for (size_t vl, i = 0; i < (size_t) n; i += vl) {
        vl = __riscv_vsetvl_e32m4((size_t) n - i);
        const vfloat32m4_t v = __riscv_vfmul_vf_f32m4(pg_rvv_load_f16(m + i, vl), slope, vl);
        __riscv_vse32_v_f32m4(y + i, v, vl);
        const vbool8_t live = __riscv_vmfne_vf_f32m4_b8(v, -INFINITY, vl);
        const long first = __riscv_vfirst_m_b8(live, vl);
        if (first >= 0) {
            if (l == n) l = (int64_t) i + first;
            const vuint32m1_t last = __riscv_vredmaxu_vs_u32m4_u32m1_m(live, __riscv_vid_v_u32m4(vl), zero, vl);
            h = (int64_t) i + __riscv_vmv_x_s_u32m1_u32(last) + 1;
        }
    }
    *lo = l;
    *hi = h;
}

/* V accumulation: per strip of d (e32 m4), up to four rows' accumulators loaded (and scaled by f)
 * once, then every key's V strip (widened once) feeds all of them */
#define PG_RVV_ATTN_ACC(NAME, T, LOADV)                                                          \
static inline __attribute__((always_inline)) void NAME##_rb(const int nr, int64_t n, float * acc, int64_t lda, \
        int64_t nk, const float * p, int64_t ldp, const T * v, size_t nbv, const float * f) {    \
    for (size_t vl, d = 0; d < (size_t) n; d += vl) {                                            \
        vl = __riscv_vsetvl_e32m4((size_t) n - d);                                               \
        vfloat32m4_t c0 = __riscv_vle32_v_f32m4(acc + d, vl), c1 = c0, c2 = c0, c3 = c0;          \
        if (nr > 1) c1 = __riscv_vle32_v_f32m4(acc + lda + d, vl);                               \
        if (nr > 2) c2 = __riscv_vle32_v_f32m4(acc + 2 * lda + d, vl);                           \
        if (nr > 3) c3 = __riscv_vle32_v_f32m4(acc + 3 * lda + d, vl);                           \
        if (f) {                                                                                 \
            c0 = __riscv_vfmul_vf_f32m4(c0, f[0], vl);                                           \
            if (nr > 1) c1 = __riscv_vfmul_vf_f32m4(c1, f[1], vl);                               \
            if (nr > 2) c2 = __riscv_vfmul_vf_f32m4(c2, f[2], vl);                               \
            if (nr > 3) c3 = __riscv_vfmul_vf_f32m4(c3, f[3], vl);                               \
        }                                                                                        \
        for (int64_t j = 0; j < nk; j++) {                                                       \
            const vfloat32m4_t vv = LOADV((const T *) ((const char *) v + j * nbv) + d, vl);      \
            c0 = __riscv_vfmacc_vf_f32m4(c0, p[j], vv, vl);                                      \
            if (nr > 1) c1 = __riscv_vfmacc_vf_f32m4(c1, p[ldp + j], vv, vl);                    \
            if (nr > 2) c2 = __riscv_vfmacc_vf_f32m4(c2, p[2 * ldp + j], vv, vl);                \
            if (nr > 3) c3 = __riscv_vfmacc_vf_f32m4(c3, p[3 * ldp + j], vv, vl);                \
        }                                                                                        \
        __riscv_vse32_v_f32m4(acc + d, c0, vl);                                                  \
        if (nr > 1) __riscv_vse32_v_f32m4(acc + lda + d, c1, vl);                                \
        if (nr > 2) __riscv_vse32_v_f32m4(acc + 2 * lda + d, c2, vl);                            \
        if (nr > 3) __riscv_vse32_v_f32m4(acc + 3 * lda + d, c3, vl);                            \
    }                                                                                            \
}                                                                                                \
void NAME(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p, int64_t ldp, \
          const T * v, size_t nbv, const float * f) {                                            \
    for (; nr > 0; nr -= 4, acc += 4 * lda, p += 4 * ldp, f = f ? f + 4 : NULL) {                \
        switch (nr) {                                                                            \
        case 1: NAME##_rb(1, n, acc, lda, nk, p, ldp, v, nbv, f); break;                         \
        case 2: NAME##_rb(2, n, acc, lda, nk, p, ldp, v, nbv, f); break;                         \
        case 3: NAME##_rb(3, n, acc, lda, nk, p, ldp, v, nbv, f); break;                         \
        default: NAME##_rb(4, n, acc, lda, nk, p, ldp, v, nbv, f); break;                        \
        }                                                                                        \
    }                                                                                            \
}
PG_RVV_ATTN_ACC(pg_rvv_attn_acc_f32, float, pg_rvv_load_f32)
PG_RVV_ATTN_ACC(pg_rvv_attn_acc_f16, pg_fp16_t, pg_rvv_load_f16)
PG_RVV_ATTN_ACC(pg_rvv_attn_acc_bf16, pg_bf16_t, pg_rvv_load_bf16)

/* tiled QK^T: per strip of keys (e32 m4), up to four rows' accumulators over d, each K strip
 * loaded once for all of them */
static inline __attribute__((always_inline)) void pg_rvv_attn_gemm_qk_rb(const int nr, int64_t nc, int64_t dk,
        const float * q, int64_t ldq, const float * kt, int64_t ldk, float * s, int64_t lds) {
    for (size_t vl, c = 0; c < (size_t) nc; c += vl) {
        vl = __riscv_vsetvl_e32m4((size_t) nc - c);
        vfloat32m4_t a0 = __riscv_vfmv_v_f_f32m4(0.0f, vl), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t d = 0; d < dk; d++) {
            const vfloat32m4_t kv = __riscv_vle32_v_f32m4(kt + d * ldk + c, vl);
            a0 = __riscv_vfmacc_vf_f32m4(a0, q[d], kv, vl);
            if (nr > 1) a1 = __riscv_vfmacc_vf_f32m4(a1, q[ldq + d], kv, vl);
            if (nr > 2) a2 = __riscv_vfmacc_vf_f32m4(a2, q[2 * ldq + d], kv, vl);
            if (nr > 3) a3 = __riscv_vfmacc_vf_f32m4(a3, q[3 * ldq + d], kv, vl);
        }
        __riscv_vse32_v_f32m4(s + c, a0, vl);
        if (nr > 1) __riscv_vse32_v_f32m4(s + lds + c, a1, vl);
        if (nr > 2) __riscv_vse32_v_f32m4(s + 2 * lds + c, a2, vl);
        if (nr > 3) __riscv_vse32_v_f32m4(s + 3 * lds + c, a3, vl);
    }
}

void pg_rvv_attn_gemm_qk_f32(int nr, int64_t nc, int64_t dk, const float * q, int64_t ldq,
                             const float * kt, int64_t ldk, float * s, int64_t lds) {
    for (; nr > 0; nr -= 4, q += 4 * ldq, s += 4 * lds) {
        switch (nr) {
        case 1: pg_rvv_attn_gemm_qk_rb(1, nc, dk, q, ldq, kt, ldk, s, lds); break;
        case 2: pg_rvv_attn_gemm_qk_rb(2, nc, dk, q, ldq, kt, ldk, s, lds); break;
        case 3: pg_rvv_attn_gemm_qk_rb(3, nc, dk, q, ldq, kt, ldk, s, lds); break;
        default: pg_rvv_attn_gemm_qk_rb(4, nc, dk, q, ldq, kt, ldk, s, lds); break;
        }
    }
}

/* transpose: each row of x loaded contiguously and stored down a column of y with a strided store
 * (e32 m8) */
void pg_rvv_attn_transpose_f32(int64_t nr, int64_t nc, const float * x, int64_t ldx, float * y, int64_t ldy) {
    const ptrdiff_t stride = (ptrdiff_t) (ldy * (int64_t) sizeof(float));
    for (int64_t r = 0; r < nr; r++) {
        for (size_t vl, c = 0; c < (size_t) nc; c += vl) {
            vl = __riscv_vsetvl_e32m8((size_t) nc - c);
            __riscv_vsse32_v_f32m8(y + c * ldy + r, stride, __riscv_vle32_v_f32m8(x + r * ldx + c, vl), vl);
        }
    }
}
