/* RVV 1.0 kernels of vec/rope.h (sin/cos and rotations): compiled with V, chosen at run time (arch/riscv/rvv.h).
 * Every loop is strip-mined with vsetvl, so any VLEN works and there is no scalar tail; LMUL is chosen
 * per kernel from the registers it keeps live. Accumulators that outlive a shorter last strip use the
 * _tu (tail undisturbed) intrinsics, or the lanes past vl would be clobbered (qemu's
 * rvv_ta_all_1s=true fills them with NaN bits, so tests catch it). */
#include "vec/rope.h"
#include "arch/riscv/rvv-mappings.h"

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

/* y0 = a*c - b*s, y1 = a*s + b*c with vec/rope.h's rounding (products rounded, then the sub; one FMA) */
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
