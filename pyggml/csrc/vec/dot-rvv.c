/* RVV 1.0 kernels of vec/dot.h (dot products): compiled with V, chosen at run time (isa/rvv.h).
 * Every loop is strip-mined with vsetvl, so any VLEN works and there is no scalar tail; LMUL is chosen
 * per kernel from the registers it keeps live. Accumulators that outlive a shorter last strip use the
 * _tu (tail undisturbed) intrinsics, or the lanes past vl would be clobbered (qemu's
 * rvv_ta_all_1s=true fills them with NaN bits, so tests catch it). */
#include "vec/dot.h"
#include "vec/dot-rvv.h"

/* dot products: e32 m4 operands, one m4 accumulator kept with _tu across strips */
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

void pg_rvv_dot4_f32(int64_t n, const float * x, const float * const * y, float * s) { pg_rvv_dot_rows_f32(4, n, x, y, s, 1); }
void pg_rvv_dot4_f16_f32(int64_t n, const pg_fp16_t * x, const float * const * y, float * s) { pg_rvv_dot_rows_f16(4, n, x, y, s, 1); }
void pg_rvv_dot4_bf16_f32(int64_t n, const pg_bf16_t * x, const float * const * y, float * s) { pg_rvv_dot_rows_bf16(4, n, x, y, s, 1); }
PG_RVV_DOT(pg_rvv_dot_bf16_f32, pg_bf16_t, float, pg_rvv_load_bf16, pg_rvv_load_f32)
