/* RVV 1.0 kernels of vec/arith.h (elementwise rows and the maximum): compiled with V, chosen at run time (arch/riscv/rvv.h).
 * Every loop is strip-mined with vsetvl, so any VLEN works and there is no scalar tail; LMUL is chosen
 * per kernel from the registers it keeps live. Accumulators that outlive a shorter last strip use the
 * _tu (tail undisturbed) intrinsics, or the lanes past vl would be clobbered (qemu's
 * rvv_ta_all_1s=true fills them with NaN bits, so tests catch it). */
#include "vec/arith.h"
#include "arch/riscv/rvv-mappings.h"

/* streaming, e32 m8 */
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

void pg_rvv_div_f32(int64_t n, float * z, const float * x, const float * y) {
    for (size_t vl; n > 0; n -= vl, x += vl, y += vl, z += vl) {
        vl = __riscv_vsetvl_e32m8(n);
        __riscv_vse32_v_f32m8(z, __riscv_vfdiv_vv_f32m8(__riscv_vle32_v_f32m8(x, vl), __riscv_vle32_v_f32m8(y, vl), vl), vl);
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
