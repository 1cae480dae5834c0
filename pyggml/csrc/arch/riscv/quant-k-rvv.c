/* RVV 1.0 kernels of dot-k.h's dot products against Q8_K: compiled with V, chosen at run time
 * (arch/riscv/rvv.h).
 *
 * Every super-block is walked in groups of 16 elements (Q4_K/Q5_K: 32, one per scale), one e8 m1
 * (m2) register at vl = 16 (32), which any VLEN >= 128 holds: the group's codes as int8 (Q6_K's
 * with its -32; Q3_K's + 4 as the scalar loop's, which takes 4 * scale * bsums back off), the
 * widening product with Q8_K's int8 into i16 (|q*y| <= 32*128), then a widening multiply-add by
 * the group's scale into one i32 accumulator, reduced once per super-block. vl never changes, so no
 * lane past it is ever read and no tail policy is needed. The integer sums are exact and equal to
 * the scalar loops'; the f32 combination per super-block is the scalar one (Q2_K/Q3_K share
 * quants-k.h's block loops), so the result is the scalar kernel's bit for bit. */
#include "types/quants-k.h"
#include "arch/riscv/rvv-mappings.h"

#define PG_RVV_KVL 16
#define PG_RVV_U2I(v) __riscv_vreinterpret_v_u8m1_i8m1(v)

/* acc += sc * (q . y[0..15]) lane by lane */
PG_ALWAYS_INLINE vint32m4_t pg_rvv_kq_group(vint32m4_t acc, vint8m1_t q, const int8_t * y, int sc, size_t vl) {
    const vint16m2_t p = __riscv_vwmul_vv_i16m2(q, __riscv_vle8_v_i8m1(y, vl), vl);
    return __riscv_vwmacc_vx_i32m4(acc, (int16_t) sc, p, vl);
}

PG_ALWAYS_INLINE int32_t pg_rvv_kq_sum(vint32m4_t acc, size_t vl) {
    return __riscv_vmv_x_s_i32m1_i32(__riscv_vredsum_vs_i32m4_i32m1(acc, __riscv_vmv_s_x_i32m1(0, 1), vl));
}

/* pg_kq_dot_2bit's sum: Q2_K (hm NULL, q in 0..3) and Q3_K (q + 4 * its hmask bit, 0..7):
 * element 128h + 32j + 16k + l has bits 2j of qs[32h + 16k + l], group 8h + 2j + k; sc: the 16 scales */
PG_ALWAYS_INLINE int32_t pg_rvv_kq_2bit(const uint8_t * qs, const uint8_t * hm, const int8_t * sc, const int8_t * y) {
    const size_t vl = __riscv_vsetvl_e8m1(PG_RVV_KVL);
    vint32m4_t acc = __riscv_vmv_v_x_i32m4(0, vl);
    for (int h = 0; h < 2; h++) {
        for (int k = 0; k < 2; k++) {
            const vuint8m1_t b = __riscv_vle8_v_u8m1(qs + 32 * h + 16 * k, vl);
            for (int j = 0; j < 4; j++) {
                vuint8m1_t q = __riscv_vand_vx_u8m1(__riscv_vsrl_vx_u8m1(b, 2 * j, vl), 3, vl);
                if (hm) {
                    const vuint8m1_t hb = __riscv_vle8_v_u8m1(hm + 16 * k, vl);
                    const vuint8m1_t hi = __riscv_vand_vx_u8m1(__riscv_vsrl_vx_u8m1(hb, 4 * h + j, vl), 1, vl);
                    q = __riscv_vor_vv_u8m1(q, __riscv_vsll_vx_u8m1(hi, 2, vl), vl);
                }
                const int g = 8 * h + 2 * j + k;
                acc = pg_rvv_kq_group(acc, PG_RVV_U2I(q), y + 128 * h + 32 * j + 16 * k, sc[g], vl);
            }
        }
    }
    return pg_rvv_kq_sum(acc, vl);
}

float pg_rvv_dot_q2_K_q8_K(int64_t nb, const pg_block_q2_K * x, const pg_block_q8_K * y) {
    return pg_kq_q2_K_blocks(nb, x, y, pg_rvv_kq_2bit);
}

float pg_rvv_dot_q3_K_q8_K(int64_t nb, const pg_block_q3_K * x, const pg_block_q8_K * y) {
    return pg_kq_q3_K_blocks(nb, x, y, pg_rvv_kq_2bit);
}

/* Q4_K (q5 false) and Q5_K, blocks bx bytes apart with qs at off_qs (dot-k.h's pg_kq_dot_k4):
 * scale j covers the 32 elements 32j..32j + 31, so these take a whole group per e8 m2 register at
 * vl = 32 (an i16 m4 product, an i32 m8 accumulator): element 64c + l is the low nibble of
 * qs[32c + l], 64c + 32 + l its high nibble, plus 16 where qh[l] bit 2c (2c + 1) is set */
float pg_rvv_dot_k4(int64_t nb, const char * xb, size_t bx, size_t off_qs, const pg_block_q8_K * y, bool q5) {
    const size_t vl = __riscv_vsetvl_e8m2(2 * PG_RVV_KVL);
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < nb; ib++, xb += bx) {
        const pg_block_q4_K * b = (const pg_block_q4_K *) xb;
        const uint8_t * qs = (const uint8_t *) xb + off_qs;
        const int8_t * yq = y[ib].qs;
        uint8_t sm[16];
        pg_kq_unpack_k4(b->scales, sm);
        int32_t summ = 0;
        for (int j = 0; j < 8; j++) summ += sm[8 + j] * (y[ib].bsums[2 * j] + y[ib].bsums[2 * j + 1]);
        /* (for Q4_K 32 bytes of its qs, in the block and unused) */
        const vuint8m2_t qh = __riscv_vle8_v_u8m2(((const pg_block_q5_K *) xb)->qh, vl);
        vint32m8_t acc = __riscv_vmv_v_x_i32m8(0, vl);
        for (int c = 0; c < 4; c++) {
            const vuint8m2_t raw = __riscv_vle8_v_u8m2(qs + 32 * c, vl);
            vuint8m2_t lo = __riscv_vand_vx_u8m2(raw, 0x0f, vl), hi = __riscv_vsrl_vx_u8m2(raw, 4, vl);
            if (q5) {
                lo = __riscv_vor_vv_u8m2(lo, __riscv_vsll_vx_u8m2(__riscv_vand_vx_u8m2(
                         __riscv_vsrl_vx_u8m2(qh, 2 * c, vl), 1, vl), 4, vl), vl);
                hi = __riscv_vor_vv_u8m2(hi, __riscv_vsll_vx_u8m2(__riscv_vand_vx_u8m2(
                         __riscv_vsrl_vx_u8m2(qh, 2 * c + 1, vl), 1, vl), 4, vl), vl);
            }
            const vint16m4_t plo = __riscv_vwmul_vv_i16m4(__riscv_vreinterpret_v_u8m2_i8m2(lo),
                                                          __riscv_vle8_v_i8m2(yq + 64 * c, vl), vl);
            const vint16m4_t phi = __riscv_vwmul_vv_i16m4(__riscv_vreinterpret_v_u8m2_i8m2(hi),
                                                          __riscv_vle8_v_i8m2(yq + 64 * c + 32, vl), vl);
            acc = __riscv_vwmacc_vx_i32m8(acc, sm[2 * c], plo, vl);
            acc = __riscv_vwmacc_vx_i32m8(acc, sm[2 * c + 1], phi, vl);
        }
        const int32_t sumi = __riscv_vmv_x_s_i32m1_i32(__riscv_vredsum_vs_i32m8_i32m1(acc, __riscv_vmv_s_x_i32m1(0, 1), vl));
        sumf += pg_fp16_to_fp32(b->d) * y[ib].d * (float) sumi - pg_fp16_to_fp32(b->dmin) * y[ib].d * (float) summ;
    }
    return sumf;
}

/* Q6_K: element 128h + 32j + 16k + l is nibble j / 2 of ql[64h + 32(j % 2) + 16k + l] with bits 2j
 * of qh[32h + 16k + l] above it, minus 32; group 8h + 2j + k */
float pg_rvv_dot_q6_K_q8_K(int64_t nb, const pg_block_q6_K * x, const pg_block_q8_K * y) {
    const size_t vl = __riscv_vsetvl_e8m1(PG_RVV_KVL);
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < nb; ib++) {
        vint32m4_t acc = __riscv_vmv_v_x_i32m4(0, vl);
        for (int h = 0; h < 2; h++) {
            for (int k = 0; k < 2; k++) {
                const vuint8m1_t l0 = __riscv_vle8_v_u8m1(x[ib].ql + 64 * h + 16 * k, vl);
                const vuint8m1_t l1 = __riscv_vle8_v_u8m1(x[ib].ql + 64 * h + 32 + 16 * k, vl);
                const vuint8m1_t qh = __riscv_vle8_v_u8m1(x[ib].qh + 32 * h + 16 * k, vl);
                for (int j = 0; j < 4; j++) {
                    const vuint8m1_t l = j % 2 ? l1 : l0;
                    const vuint8m1_t lo = j / 2 ? __riscv_vsrl_vx_u8m1(l, 4, vl) : __riscv_vand_vx_u8m1(l, 0x0f, vl);
                    const vuint8m1_t hi = __riscv_vsll_vx_u8m1(__riscv_vand_vx_u8m1(__riscv_vsrl_vx_u8m1(qh, 2 * j, vl), 3, vl), 4, vl);
                    const vint8m1_t q = __riscv_vsub_vx_i8m1(PG_RVV_U2I(__riscv_vor_vv_u8m1(lo, hi, vl)), 32, vl);
                    const int g = 8 * h + 2 * j + k;
                    acc = pg_rvv_kq_group(acc, q, y[ib].qs + 128 * h + 32 * j + 16 * k, x[ib].scales[g], vl);
                }
            }
        }
        const int32_t sumi = pg_rvv_kq_sum(acc, vl);
        sumf += pg_fp16_to_fp32(x[ib].d) * y[ib].d * (float) sumi;
    }
    return sumf;
}
