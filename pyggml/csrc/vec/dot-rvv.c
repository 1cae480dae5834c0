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

/* ---- the integer dots of quants-legacy.h's 32-element block types ----
 * Each block's integer sum is exact: int8 lanes widened to i16 products (at most two added, which
 * stays below 2^15), summed into i32 by the widening reduction. The f32 steps are the scalar
 * PG_QDOT's, in its order (even and odd blocks in two chains, the m*s terms in a third, then
 * (even + odd) + m*s), so the result is the scalar kernel's bit for bit. Nibble types use e8 m1 at
 * vl = 16 (one half-block per register at any VLEN >= 128): the low nibbles are elements 0..15,
 * the high ones 16..31. */

/* lo . y[0..15] + hi . y[16..31] */
PG_ALWAYS_INLINE int32_t pg_rvv_qsum_halves(vint8m1_t lo, vint8m1_t hi, const int8_t * y, size_t vl) {
    vint16m2_t p = __riscv_vwmul_vv_i16m2(lo, __riscv_vle8_v_i8m1(y, vl), vl);
    p = __riscv_vwmacc_vv_i16m2(p, hi, __riscv_vle8_v_i8m1(y + PG_QK / 2, vl), vl);
    return __riscv_vmv_x_s_i32m1_i32(__riscv_vwredsum_vs_i16m2_i32m1(p, __riscv_vmv_s_x_i32m1(0, 1), vl));
}

/* the nibbles of a block's 16 bytes (lo: elements 0..15), each plus 16 where its bit of qh is set
 * (qh as a 32-bit mask register: element e is bit e) when qh is given */
#define PG_RVV_NIBBLES(QS, QH, LO, HI, VL)                                                       \
    const vuint8m1_t raw_ = __riscv_vle8_v_u8m1(QS, VL);                                         \
    vuint8m1_t LO = __riscv_vand_vx_u8m1(raw_, 0x0f, VL), HI = __riscv_vsrl_vx_u8m1(raw_, 4, VL); \
    if (QH) {                                                                                    \
        LO = __riscv_vor_vx_u8m1_mu(__riscv_vlm_v_b8(QH, VL), LO, LO, 0x10, VL);                 \
        HI = __riscv_vor_vx_u8m1_mu(__riscv_vlm_v_b8((QH) + 2, VL), HI, HI, 0x10, VL);           \
    }

#define PG_RVV_I8(v) __riscv_vreinterpret_v_u8m1_i8m1(v)

/* a nibble type's block: codes minus OFF (Q4_0: 8, Q5_0: 16), or through the IQ4_NL table */
PG_ALWAYS_INLINE int32_t pg_rvv_qsum_nibbles(const uint8_t * qs, const uint8_t * qh, int off, int lut,
                                             const int8_t * y) {
    const size_t vl = __riscv_vsetvl_e8m1(PG_QK / 2);
    PG_RVV_NIBBLES(qs, qh, lo, hi, vl)
    if (lut) {
        const vint8m1_t t = __riscv_vle8_v_i8m1(pg_iq4nl_values, vl);
        return pg_rvv_qsum_halves(__riscv_vrgather_vv_i8m1(t, lo, vl), __riscv_vrgather_vv_i8m1(t, hi, vl), y, vl);
    }
    return pg_rvv_qsum_halves(__riscv_vsub_vx_i8m1(PG_RVV_I8(lo), (int8_t) off, vl),
                              __riscv_vsub_vx_i8m1(PG_RVV_I8(hi), (int8_t) off, vl), y, vl);
}

/* Q8_0's 32 bytes in one e8 m2 register (32 lanes at VLEN >= 128); one product each, |p| <= 2^14 */
PG_ALWAYS_INLINE int32_t pg_rvv_qsum_q8_0(const pg_block_q8_0 * x, const pg_block_q8_0 * y) {
    const size_t vl = __riscv_vsetvl_e8m2(PG_QK);
    const vint16m4_t p = __riscv_vwmul_vv_i16m4(__riscv_vle8_v_i8m2(x->qs, vl), __riscv_vle8_v_i8m2(y->qs, vl), vl);
    return __riscv_vmv_x_s_i32m1_i32(__riscv_vwredsum_vs_i16m4_i32m1(p, __riscv_vmv_s_x_i32m1(0, 1), vl));
}

#define PG_RVV_QSUM_Q8_0(xb, yb) pg_rvv_qsum_q8_0(xb, yb)
#define PG_RVV_QSUM_Q4_0(xb, yb) pg_rvv_qsum_nibbles((xb)->qs, NULL, 8, 0, (yb)->qs)
#define PG_RVV_QSUM_Q4_1(xb, yb) pg_rvv_qsum_nibbles((xb)->qs, NULL, 0, 0, (yb)->qs)
#define PG_RVV_QSUM_Q5_0(xb, yb) pg_rvv_qsum_nibbles((xb)->qs, (xb)->qh, 16, 0, (yb)->qs)
#define PG_RVV_QSUM_Q5_1(xb, yb) pg_rvv_qsum_nibbles((xb)->qs, (xb)->qh, 0, 0, (yb)->qs)
#define PG_RVV_QSUM_IQ4_NL(xb, yb) pg_rvv_qsum_nibbles((xb)->qs, NULL, 0, 1, (yb)->qs)

/* block IB into the chain ACC: PG_QDOT_STEP's f32 operations */
#define PG_RVV_QSTEP(ACC, IB, QSUM, MIN)                                                         \
    do {                                                                                         \
        const float scale_ = pg_fp16_to_fp32(x[IB].d) * pg_fp16_to_fp32(y[IB].d);               \
        ACC = ACC + (float) QSUM(x + (IB), y + (IB)) * scale_;                                   \
        MIN(summ, x + (IB), y + (IB));                                                           \
    } while (0)

#define PG_RVV_QDOT(NAME, TX, TY, QSUM, MIN)                                                     \
float NAME(int64_t n, const TX * x, const TY * y) {                                              \
    const int64_t nb = n / PG_QK;                                                                \
    float acc0 = 0.0f, acc1 = 0.0f, summ = 0.0f;                                                 \
    int64_t ib = 0;                                                                              \
    for (; ib + 1 < nb; ib += 2) {                                                               \
        PG_RVV_QSTEP(acc0, ib, QSUM, MIN);                                                       \
        PG_RVV_QSTEP(acc1, ib + 1, QSUM, MIN);                                                   \
    }                                                                                            \
    if (ib < nb) PG_RVV_QSTEP(acc0, ib, QSUM, MIN);                                              \
    return (acc0 + acc1) + summ;                                                                 \
}
PG_RVV_QDOT(pg_rvv_dot_q8_0_q8_0, pg_block_q8_0, pg_block_q8_0, PG_RVV_QSUM_Q8_0, PG_QMIN_NONE)
PG_RVV_QDOT(pg_rvv_dot_q4_0_q8_0, pg_block_q4_0, pg_block_q8_0, PG_RVV_QSUM_Q4_0, PG_QMIN_NONE)
PG_RVV_QDOT(pg_rvv_dot_q4_1_q8_1, pg_block_q4_1, pg_block_q8_1, PG_RVV_QSUM_Q4_1, PG_QMIN)
PG_RVV_QDOT(pg_rvv_dot_q5_0_q8_0, pg_block_q5_0, pg_block_q8_0, PG_RVV_QSUM_Q5_0, PG_QMIN_NONE)
PG_RVV_QDOT(pg_rvv_dot_q5_1_q8_1, pg_block_q5_1, pg_block_q8_1, PG_RVV_QSUM_Q5_1, PG_QMIN)
PG_RVV_QDOT(pg_rvv_dot_iq4_nl_q8_0, pg_block_iq4_nl, pg_block_q8_0, PG_RVV_QSUM_IQ4_NL, PG_QMIN_NONE)

void pg_rvv_dot4_f32(int64_t n, const float * x, const float * const * y, float * s) { pg_rvv_dot_rows_f32(4, n, x, y, s, 1); }
void pg_rvv_dot4_f16_f32(int64_t n, const pg_fp16_t * x, const float * const * y, float * s) { pg_rvv_dot_rows_f16(4, n, x, y, s, 1); }
void pg_rvv_dot4_bf16_f32(int64_t n, const pg_bf16_t * x, const float * const * y, float * s) { pg_rvv_dot_rows_bf16(4, n, x, y, s, 1); }
PG_RVV_DOT(pg_rvv_dot_bf16_f32, pg_bf16_t, float, pg_rvv_load_bf16, pg_rvv_load_f32)
