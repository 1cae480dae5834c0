/* RVV 1.0 kernels of vec/dot.h (dot products): compiled with V, chosen at run time (isa/rvv.h).
 * Every loop is strip-mined with vsetvl, so any VLEN works and there is no scalar tail; LMUL is chosen
 * per kernel from the registers it keeps live. Accumulators that outlive a shorter last strip use the
 * _tu (tail undisturbed) intrinsics, or the lanes past vl would be clobbered (qemu's
 * rvv_ta_all_1s=true fills them with NaN bits, so tests catch it). */
#include "vec/dot.h"
#include "quants-legacy.h"
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

/* ---- the integer dots of quants-legacy.h's 32-element block types (its vec_dot_n) ----
 * A weight block is decoded into int8 registers once and dotted with the block of each of the nc
 * activation rows. Each block's integer sum is exact: int8 lanes widened to i16 products (at most
 * two added, below 2^15), summed into i32 by the widening reduction. The f32 steps are the scalar
 * pg_qdot_body's (quants-legacy.h) in its order (per column: even and odd blocks in two chains,
 * the m*s terms in a third, then (even + odd) + m*s), so every column is the scalar kernel's result
 * bit for bit. Nibble types use e8 m1 at vl = 16 (a half-block per register at any VLEN >= 128): low
 * nibbles are elements 0..15, high ones 16..31; Q8_0 one e8 m2 register at vl = 32. */

#define PG_RVV_I8(v) __riscv_vreinterpret_v_u8m1_i8m1(v)

/* lo . y[0..15] + hi . y[16..31] */
PG_ALWAYS_INLINE int32_t pg_rvv_qsum_halves(vint8m1_t lo, vint8m1_t hi, const int8_t * y, size_t vl) {
    vint16m2_t p = __riscv_vwmul_vv_i16m2(lo, __riscv_vle8_v_i8m1(y, vl), vl);
    p = __riscv_vwmacc_vv_i16m2(p, hi, __riscv_vle8_v_i8m1(y + PG_QK / 2, vl), vl);
    return __riscv_vmv_x_s_i32m1_i32(__riscv_vwredsum_vs_i16m2_i32m1(p, __riscv_vmv_s_x_i32m1(0, 1), vl));
}

/* the decoded block xb as int8 registers: lo/hi for the nibble types (codes minus OFF, plus 16
 * where the element's bit of qh is set, qh read as a 32-bit mask register, or IQ4_NL's table
 * through vrgather), q for Q8_0 */
#define PG_RVV_DEC_NIB(xb, BIT4, OFF, LUT)                                                       \
    const size_t vl = __riscv_vsetvl_e8m1(PG_QK / 2);                                            \
    const vuint8m1_t raw_ = __riscv_vle8_v_u8m1((xb)->qs, vl);                                   \
    vuint8m1_t ulo_ = __riscv_vand_vx_u8m1(raw_, 0x0f, vl), uhi_ = __riscv_vsrl_vx_u8m1(raw_, 4, vl); \
    BIT4(xb)                                                                                     \
    vint8m1_t lo = __riscv_vsub_vx_i8m1(PG_RVV_I8(ulo_), (int8_t) (OFF), vl);                    \
    vint8m1_t hi = __riscv_vsub_vx_i8m1(PG_RVV_I8(uhi_), (int8_t) (OFF), vl);                    \
    if (LUT) {                                                                                   \
        const vint8m1_t t_ = __riscv_vle8_v_i8m1(pg_iq4nl_values, vl);                           \
        lo = __riscv_vrgather_vv_i8m1(t_, ulo_, vl);                                             \
        hi = __riscv_vrgather_vv_i8m1(t_, uhi_, vl);                                             \
    }
#define PG_RVV_SUM_NIB(yb) pg_rvv_qsum_halves(lo, hi, (yb)->qs, vl)

#define PG_RVV_DEC_Q8_0(xb)                                                                      \
    const size_t vl = __riscv_vsetvl_e8m2(PG_QK);                                                \
    const vint8m2_t q = __riscv_vle8_v_i8m2((xb)->qs, vl);
/* one product per lane, |p| <= 2^14 */
#define PG_RVV_SUM_Q8_0(yb)                                                                      \
    __riscv_vmv_x_s_i32m1_i32(__riscv_vwredsum_vs_i16m4_i32m1(                                   \
        __riscv_vwmul_vv_i16m4(q, __riscv_vle8_v_i8m2((yb)->qs, vl), vl), __riscv_vmv_s_x_i32m1(0, 1), vl))

#define PG_RVV_BIT4_NONE(xb)
#define PG_RVV_BIT4(xb)                                                                          \
    ulo_ = __riscv_vor_vx_u8m1_mu(__riscv_vlm_v_b8((xb)->qh, vl), ulo_, ulo_, 0x10, vl);         \
    uhi_ = __riscv_vor_vx_u8m1_mu(__riscv_vlm_v_b8((xb)->qh + 2, vl), uhi_, uhi_, 0x10, vl);
#define PG_RVV_DEC_Q4_0(xb) PG_RVV_DEC_NIB(xb, PG_RVV_BIT4_NONE, 8, 0)
#define PG_RVV_DEC_Q4_1(xb) PG_RVV_DEC_NIB(xb, PG_RVV_BIT4_NONE, 0, 0)
#define PG_RVV_DEC_Q5_0(xb) PG_RVV_DEC_NIB(xb, PG_RVV_BIT4, 16, 0)
#define PG_RVV_DEC_Q5_1(xb) PG_RVV_DEC_NIB(xb, PG_RVV_BIT4, 0, 0)
#define PG_RVV_DEC_IQ4_NL(xb) PG_RVV_DEC_NIB(xb, PG_RVV_BIT4_NONE, 0, 1)

/* the m*s term of the types with a minimum (Q4_1, Q5_1; pg_qdot_step's summ) */
#define PG_RVV_QMIN_NONE(acc, xb, yb) ((void) 0)
#define PG_RVV_QMIN(acc, xb, yb) ((acc) += pg_fp16_to_fp32((xb)->m) * pg_fp16_to_fp32((yb)->s))

/* block IB into the chains ACC of the nc columns: pg_qdot_step's f32 operations */
#define PG_RVV_QSTEP(ACC, IB, DEC, SUM, MIN)                                                     \
    do {                                                                                         \
        DEC(x + (IB))                                                                            \
        const float dx = pg_fp16_to_fp32(x[IB].d);                                               \
        for (int c = 0; c < nc; c++) {                                                           \
            const TY_ * y = (const TY_ *) ((const char *) vy + (size_t) c * by) + (IB);          \
            const float scale = dx * pg_fp16_to_fp32(y->d);                                      \
            ACC[c] = ACC[c] + (float) SUM(y) * scale;                                            \
            MIN(summ[c], x + (IB), y);                                                           \
        }                                                                                        \
    } while (0)

#define PG_RVV_QDOT(NAME, TX, TY, DEC, SUM, MIN)                                                 \
void NAME(int64_t n, const void * vx, const void * vy, size_t by, int nc, float * s) {           \
    typedef TY TY_;                                                                              \
    const TX * x = (const TX *) vx;                                                              \
    const int64_t nb = n / PG_QK;                                                                \
    float acc0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc1[4] = {0.0f, 0.0f, 0.0f, 0.0f};               \
    float summ[4] = {0.0f, 0.0f, 0.0f, 0.0f};                                                    \
    int64_t ib = 0;                                                                              \
    for (; ib + 1 < nb; ib += 2) {                                                               \
        PG_RVV_QSTEP(acc0, ib, DEC, SUM, MIN);                                                   \
        PG_RVV_QSTEP(acc1, ib + 1, DEC, SUM, MIN);                                               \
    }                                                                                            \
    if (ib < nb) PG_RVV_QSTEP(acc0, ib, DEC, SUM, MIN);                                          \
    for (int c = 0; c < nc; c++) s[c] = (acc0[c] + acc1[c]) + summ[c];                           \
}
PG_RVV_QDOT(pg_rvv_dot_n_q8_0, pg_block_q8_0, pg_block_q8_0, PG_RVV_DEC_Q8_0, PG_RVV_SUM_Q8_0, PG_RVV_QMIN_NONE)
PG_RVV_QDOT(pg_rvv_dot_n_q4_0, pg_block_q4_0, pg_block_q8_0, PG_RVV_DEC_Q4_0, PG_RVV_SUM_NIB, PG_RVV_QMIN_NONE)
PG_RVV_QDOT(pg_rvv_dot_n_q4_1, pg_block_q4_1, pg_block_q8_1, PG_RVV_DEC_Q4_1, PG_RVV_SUM_NIB, PG_RVV_QMIN)
PG_RVV_QDOT(pg_rvv_dot_n_q5_0, pg_block_q5_0, pg_block_q8_0, PG_RVV_DEC_Q5_0, PG_RVV_SUM_NIB, PG_RVV_QMIN_NONE)
PG_RVV_QDOT(pg_rvv_dot_n_q5_1, pg_block_q5_1, pg_block_q8_1, PG_RVV_DEC_Q5_1, PG_RVV_SUM_NIB, PG_RVV_QMIN)
PG_RVV_QDOT(pg_rvv_dot_n_iq4_nl, pg_block_iq4_nl, pg_block_q8_0, PG_RVV_DEC_IQ4_NL, PG_RVV_SUM_NIB, PG_RVV_QMIN_NONE)

void pg_rvv_dot4_f32(int64_t n, const float * x, const float * const * y, float * s) { pg_rvv_dot_rows_f32(4, n, x, y, s, 1); }
void pg_rvv_dot4_f16_f32(int64_t n, const pg_fp16_t * x, const float * const * y, float * s) { pg_rvv_dot_rows_f16(4, n, x, y, s, 1); }
void pg_rvv_dot4_bf16_f32(int64_t n, const pg_bf16_t * x, const float * const * y, float * s) { pg_rvv_dot_rows_bf16(4, n, x, y, s, 1); }
PG_RVV_DOT(pg_rvv_dot_bf16_f32, pg_bf16_t, float, pg_rvv_load_bf16, pg_rvv_load_f32)
