/* RVV 1.0 kernels of vec/quant.h (the Q8_0 quantiser): compiled with V, chosen at run time (arch/riscv/rvv.h).
 * Every loop is strip-mined with vsetvl, so any VLEN works and there is no scalar tail; LMUL is chosen
 * per kernel from the registers it keeps live. Accumulators that outlive a shorter last strip use the
 * _tu (tail undisturbed) intrinsics, or the lanes past vl would be clobbered (qemu's
 * rvv_ta_all_1s=true fills them with NaN bits, so tests catch it). */
#include "vec/quant.h"
#include "arch/riscv/rvv-mappings.h"

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
