/* RVV 1.0 kernels of vec/dot.h (dot products): compiled with V, chosen at run time (arch/riscv/rvv.h).
 * Every loop is strip-mined with vsetvl, so any VLEN works and there is no scalar tail; LMUL is chosen
 * per kernel from the registers it keeps live. Accumulators that outlive a shorter last strip use the
 * _tu (tail undisturbed) intrinsics, or the lanes past vl would be clobbered (qemu's
 * rvv_ta_all_1s=true fills them with NaN bits, so tests catch it). */
#include "vec/dot.h"
#include "types/quants-legacy.h"
#include "arch/riscv/dot-rvv.h"

/* dot products of rows of types tx, ty (PG_ROW_*, compile-time constants): e32 m4 operands, one m4
 * accumulator kept with _tu across strips */
PG_ALWAYS_INLINE float pg_rvv_dot(const int tx, const int ty, int64_t n, const void * x, const void * y) {
    const size_t vlmax = __riscv_vsetvlmax_e32m4();
    vfloat32m4_t acc = __riscv_vfmv_v_f_f32m4(0.0f, vlmax);
    for (size_t vl; n > 0; n -= vl, x = pg_row_at(tx, x, vl), y = pg_row_at(ty, y, vl)) {
        vl = __riscv_vsetvl_e32m4(n);
        acc = __riscv_vfmacc_vv_f32m4_tu(acc, pg_rvv_load_row(tx, x, 0, vl), pg_rvv_load_row(ty, y, 0, vl), vl);
    }
    const vfloat32m1_t zero = __riscv_vfmv_s_f_f32m1(0.0f, 1);
    return __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32m4_f32m1(acc, zero, vlmax));
}
float pg_rvv_dot_f32(int64_t n, const float * x, const float * y) { return pg_rvv_dot(PG_ROW_F32, PG_ROW_F32, n, x, y); }
float pg_rvv_dot_f16(int64_t n, const pg_fp16_t * x, const pg_fp16_t * y) {
    return pg_rvv_dot(PG_ROW_F16, PG_ROW_F16, n, x, y);
}
float pg_rvv_dot_bf16(int64_t n, const pg_bf16_t * x, const pg_bf16_t * y) {
    return pg_rvv_dot(PG_ROW_BF16, PG_ROW_BF16, n, x, y);
}
float pg_rvv_dot_f16_f32(int64_t n, const pg_fp16_t * x, const float * y) {
    return pg_rvv_dot(PG_ROW_F16, PG_ROW_F32, n, x, y);
}

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

/* block ib of x (type t: quants-legacy.h's pg_qblock_* describe it; a compile-time constant) into
 * the chains acc of the nc columns y_c = vy + c*by, pg_qdot_step's f32 operations. The block is
 * decoded once into int8 registers: Q8_0 into one e8 m2 register q; the nibble types into lo/hi
 * (codes minus the type's offset, plus 16 where the element's bit of qh is set, qh read as a 32-bit
 * mask register, or IQ4_NL's or MXFP4's table through vrgather). The block's scale is pg_qblock_d's: the
 * fp16 d, or MXFP4's E8M0 byte as ggml_e8m0_to_fp32_half */
PG_ALWAYS_INLINE void pg_rvv_qstep(const int t, const char * x, int64_t ib, const void * vy, size_t by, int nc,
                                   float * acc, float * summ) {
    const int min = pg_qblock_min(t);
    const char * xb = x + ib * pg_qblock_size(t);
    if (t == PG_TYPE_Q8_0) {
        const size_t vl = __riscv_vsetvl_e8m2(PG_QK);
        const vint8m2_t q = __riscv_vle8_v_i8m2(((const pg_block_q8_0 *) xb)->qs, vl);
        const float dx = pg_fp16_to_fp32(((const pg_block_q8_0 *) xb)->d);
        for (int c = 0; c < nc; c++) {
            const pg_block_q8_0 * y = (const pg_block_q8_0 *) ((const char *) vy + (size_t) c * by) + ib;
            const float scale = dx * pg_fp16_to_fp32(y->d);
            /* one product per lane, |p| <= 2^14 */
            const int32_t sum = __riscv_vmv_x_s_i32m1_i32(__riscv_vwredsum_vs_i16m4_i32m1(
                __riscv_vwmul_vv_i16m4(q, __riscv_vle8_v_i8m2(y->qs, vl), vl), __riscv_vmv_s_x_i32m1(0, 1), vl));
            acc[c] = acc[c] + (float) sum * scale;
        }
        return;
    }
    const uint8_t * qs = t == PG_TYPE_Q4_0    ? ((const pg_block_q4_0 *) xb)->qs
                         : t == PG_TYPE_Q4_1  ? ((const pg_block_q4_1 *) xb)->qs
                         : t == PG_TYPE_Q5_0  ? ((const pg_block_q5_0 *) xb)->qs
                         : t == PG_TYPE_Q5_1  ? ((const pg_block_q5_1 *) xb)->qs
                         : t == PG_TYPE_MXFP4 ? ((const pg_block_mxfp4 *) xb)->qs
                                              : ((const pg_block_iq4_nl *) xb)->qs;
    const int off = t == PG_TYPE_Q4_0 ? 8 : t == PG_TYPE_Q5_0 ? 16 : 0;
    const size_t vl = __riscv_vsetvl_e8m1(PG_QK / 2);
    const vuint8m1_t raw = __riscv_vle8_v_u8m1(qs, vl);
    vuint8m1_t ulo = __riscv_vand_vx_u8m1(raw, 0x0f, vl), uhi = __riscv_vsrl_vx_u8m1(raw, 4, vl);
    if (t == PG_TYPE_Q5_0 || t == PG_TYPE_Q5_1) {
        const uint8_t * qh = t == PG_TYPE_Q5_0 ? ((const pg_block_q5_0 *) xb)->qh : ((const pg_block_q5_1 *) xb)->qh;
        ulo = __riscv_vor_vx_u8m1_mu(__riscv_vlm_v_b8(qh, vl), ulo, ulo, 0x10, vl);
        uhi = __riscv_vor_vx_u8m1_mu(__riscv_vlm_v_b8(qh + 2, vl), uhi, uhi, 0x10, vl);
    }
    vint8m1_t lo = __riscv_vsub_vx_i8m1(PG_RVV_I8(ulo), (int8_t) off, vl);
    vint8m1_t hi = __riscv_vsub_vx_i8m1(PG_RVV_I8(uhi), (int8_t) off, vl);
    if (t == PG_TYPE_IQ4_NL || t == PG_TYPE_MXFP4) {
        const vint8m1_t tab = __riscv_vle8_v_i8m1(t == PG_TYPE_IQ4_NL ? pg_iq4nl_values : pg_mxfp4_values, vl);
        lo = __riscv_vrgather_vv_i8m1(tab, ulo, vl);
        hi = __riscv_vrgather_vv_i8m1(tab, uhi, vl);
    }
    const float dx = pg_qblock_d(t, xb);
    for (int c = 0; c < nc; c++) {
        const char * yc = (const char *) vy + (size_t) c * by;
        if (min) {
            const pg_block_q8_1 * y = (const pg_block_q8_1 *) yc + ib;
            const float scale = dx * pg_fp16_to_fp32(y->d);
            acc[c] = acc[c] + (float) pg_rvv_qsum_halves(lo, hi, y->qs, vl) * scale;
            summ[c] += pg_fp16_to_fp32(((const pg_fp16_t *) xb)[1]) * pg_fp16_to_fp32(y->s);
        } else {
            const pg_block_q8_0 * y = (const pg_block_q8_0 *) yc + ib;
            const float scale = dx * pg_fp16_to_fp32(y->d);
            acc[c] = acc[c] + (float) pg_rvv_qsum_halves(lo, hi, y->qs, vl) * scale;
        }
    }
}
/* vec_dot_n of type t: even and odd blocks in two chains, the m*s terms in a third */
PG_ALWAYS_INLINE void pg_rvv_qdot_n(const int t, int64_t n, const void * vx, const void * vy, size_t by, int nc,
                                    float * s) {
    const char * x = (const char *) vx;
    const int64_t nb = n / PG_QK;
    float acc0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float summ[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int64_t ib = 0;
    for (; ib + 1 < nb; ib += 2) {
        pg_rvv_qstep(t, x, ib, vy, by, nc, acc0, summ);
        pg_rvv_qstep(t, x, ib + 1, vy, by, nc, acc1, summ);
    }
    if (ib < nb) pg_rvv_qstep(t, x, ib, vy, by, nc, acc0, summ);
    for (int c = 0; c < nc; c++) s[c] = (acc0[c] + acc1[c]) + summ[c];
}
void pg_rvv_dot_n_q8_0(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    pg_rvv_qdot_n(PG_TYPE_Q8_0, n, x, y, by, nc, s);
}
void pg_rvv_dot_n_q4_0(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    pg_rvv_qdot_n(PG_TYPE_Q4_0, n, x, y, by, nc, s);
}
void pg_rvv_dot_n_q4_1(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    pg_rvv_qdot_n(PG_TYPE_Q4_1, n, x, y, by, nc, s);
}
void pg_rvv_dot_n_q5_0(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    pg_rvv_qdot_n(PG_TYPE_Q5_0, n, x, y, by, nc, s);
}
void pg_rvv_dot_n_q5_1(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    pg_rvv_qdot_n(PG_TYPE_Q5_1, n, x, y, by, nc, s);
}
void pg_rvv_dot_n_iq4_nl(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    pg_rvv_qdot_n(PG_TYPE_IQ4_NL, n, x, y, by, nc, s);
}
void pg_rvv_dot_n_mxfp4(int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    pg_rvv_qdot_n(PG_TYPE_MXFP4, n, x, y, by, nc, s);
}

void pg_rvv_dot4_f32(int64_t n, const float * x, const float * const * y, float * s) { pg_rvv_dot_rows(PG_ROW_F32, 4, n, x, y, s, 1); }
void pg_rvv_dot4_f16_f32(int64_t n, const pg_fp16_t * x, const float * const * y, float * s) { pg_rvv_dot_rows(PG_ROW_F16, 4, n, x, y, s, 1); }
void pg_rvv_dot4_bf16_f32(int64_t n, const pg_bf16_t * x, const float * const * y, float * s) { pg_rvv_dot_rows(PG_ROW_BF16, 4, n, x, y, s, 1); }
float pg_rvv_dot_bf16_f32(int64_t n, const pg_bf16_t * x, const float * y) {
    return pg_rvv_dot(PG_ROW_BF16, PG_ROW_F32, n, x, y);
}
