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

/* f32 lanes widened into f64 lanes as they are added (e32 m4 -> e64 m8): wide accumulation */
double pg_rvv_sum_f32(int64_t n, const float * x) {
    const size_t vlmax = __riscv_vsetvlmax_e64m8();
    vfloat64m8_t acc = __riscv_vfmv_v_f_f64m8(0.0, vlmax);
    for (size_t vl; n > 0; n -= vl, x += vl) {
        vl = __riscv_vsetvl_e32m4(n);
        acc = __riscv_vfwadd_wv_f64m8_tu(acc, acc, __riscv_vle32_v_f32m4(x, vl), vl);
    }
    const vfloat64m1_t zero = __riscv_vfmv_s_f_f64m1(0.0, 1);
    return __riscv_vfmv_f_s_f64m1_f64(__riscv_vfredusum_vs_f64m8_f64m1(acc, zero, vlmax));
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
