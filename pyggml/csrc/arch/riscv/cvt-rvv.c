/* RVV 1.0 kernels of vec/cvt.h (f32 <-> fp16/bf16 rows): compiled with V, chosen at run time (arch/riscv/rvv.h).
 * Every loop is strip-mined with vsetvl, so any VLEN works and there is no scalar tail; LMUL is chosen
 * per kernel from the registers it keeps live. Accumulators that outlive a shorter last strip use the
 * _tu (tail undisturbed) intrinsics, or the lanes past vl would be clobbered (qemu's
 * rvv_ta_all_1s=true fills them with NaN bits, so tests catch it). */
#include "vec/cvt.h"
#include "arch/riscv/rvv-mappings.h"

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
