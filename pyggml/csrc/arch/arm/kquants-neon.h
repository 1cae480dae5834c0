/* The K-quant dot products of dot-k.h on AArch64 NEON, and its Q8_K quantiser: the ISA half of
 * dot-k.h, over quants-k.h's blocks. Each dot kernel is the exact integer sum over
 * one super-block, scale * q * y by groups, that dot-k.h's scalar loop computes; dot-k.h
 * combines it in f32 the same way either way, so a NEON row's result is the scalar build's bit for
 * bit. Per 16 activations one pg_neon_dot16 (vdotq with the dotprod extension, widening multiplies
 * without), each group's dot scaled by a multiply-accumulate on its four int32 lanes, one horizontal
 * add per super-block.
 */
#pragma once
#include "types/quants-k.h"

/* one block of pg_row_q8_K_from_f32, the same bytes: the first element of the largest magnitude
 * (NaN never is one) sets the scale, and the rounding is nearest_int's magic-number addition, so
 * the infinite products of a subnormal block's scale wrap as they do there */
static inline void pg_kq_neon_quantize_q8_K(const float * x, pg_block_q8_K * y) {
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int e = 0; e < PG_QK_K; e += 4) m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + e)));
    const float amax = vmaxvq_f32(m);
    if (!amax) {
        memset(y, 0, sizeof(*y));
        return;
    }
    int first = 0;
    while (fabsf(x[first]) != amax) first++;
    const float iscale = -127.0f / x[first];
    const float32x4_t magic = vdupq_n_f32(12582912.0f);
    const int32x4_t mant = vdupq_n_s32(0x007fffff), half = vdupq_n_s32(0x00400000), top = vdupq_n_s32(127);
    for (int g = 0; g < PG_QK_K / 16; g++) {
        int16x4_t q16[4];
        for (int k = 0; k < 4; k++) {
            const float32x4_t v = vaddq_f32(vmulq_n_f32(vld1q_f32(x + 16 * g + 4 * k), iscale), magic);
            const int32x4_t l = vsubq_s32(vandq_s32(vreinterpretq_s32_f32(v), mant), half);
            q16[k] = vmovn_s32(vminq_s32(l, top));     /* the (int8_t) cast keeps the low byte */
        }
        const int8x16_t q = vcombine_s8(vmovn_s16(vcombine_s16(q16[0], q16[1])), vmovn_s16(vcombine_s16(q16[2], q16[3])));
        vst1q_s8(y->qs + 16 * g, q);
        y->bsums[g] = vaddlvq_s8(q);
    }
    y->d = 1 / iscale;
}

/* the dot of one 16-group: v (16 int8 lanes of x) against the 16 activations at y, times scale */
static inline __attribute__((always_inline)) int32x4_t pg_kq_neon_group(int32x4_t acc, uint8x16_t v,
                                                                        const int8_t * y, int32_t scale) {
    return vmlaq_n_s32(acc, pg_neon_dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(v), vld1q_s8(y)), scale);
}

/* the dot of a 32-group, v0 and v1 against the 32 activations at y (one scale: no multiply between) */
static inline __attribute__((always_inline)) int32x4_t pg_kq_neon_dot32(uint8x16_t v0, uint8x16_t v1, const int8_t * y) {
    const int32x4_t d = pg_neon_dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(v0), vld1q_s8(y));
    return pg_neon_dot16(d, vreinterpretq_s8_u8(v1), vld1q_s8(y + 16));
}

/* Q2_K (hm NULL) and Q3_K: pg_kq_dot_2bit's sum, the values q (+ 4 where Q3_K's hmask bit is set)
 * against y with the 16 scales sc */
static inline int32_t pg_kq_neon_dot_2bit(const uint8_t * qs, const uint8_t * hm, const int8_t * sc, const int8_t * y) {
    const uint8x16_t m3 = vdupq_n_u8(3), m1 = vdupq_n_u8(1);
    /* hmask bit 4h + j of byte l: shifted right once per field, across both halves */
    uint8x16_t h0 = hm ? vld1q_u8(hm) : vdupq_n_u8(0), h1 = hm ? vld1q_u8(hm + 16) : vdupq_n_u8(0);
    int32x4_t acc = vdupq_n_s32(0);
    for (int h = 0; h < 2; h++) {
        uint8x16_t q0 = vld1q_u8(qs + 32 * h), q1 = vld1q_u8(qs + 32 * h + 16);
        for (int j = 0; j < 4; j++) {
            uint8x16_t v0 = vandq_u8(q0, m3), v1 = vandq_u8(q1, m3);
            if (hm) {
                v0 = vorrq_u8(v0, vshlq_n_u8(vandq_u8(h0, m1), 2));
                v1 = vorrq_u8(v1, vshlq_n_u8(vandq_u8(h1, m1), 2));
                h0 = vshrq_n_u8(h0, 1);
                h1 = vshrq_n_u8(h1, 1);
            }
            const int8_t * yj = y + 128 * h + 32 * j;
            acc = pg_kq_neon_group(acc, v0, yj, sc[8 * h + 2 * j]);
            acc = pg_kq_neon_group(acc, v1, yj + 16, sc[8 * h + 2 * j + 1]);
            q0 = vshrq_n_u8(q0, 2);
            q1 = vshrq_n_u8(q1, 2);
        }
    }
    return vaddvq_s32(acc);
}

/* Q4_K (qh NULL) and Q5_K: pg_kq_k4_sumi's sum, chunk c's low nibbles (+ 16 where qh bit 2c is set)
 * with scale sm[2c], its high nibbles (qh bit 2c + 1) with sm[2c + 1] */
static inline int32_t pg_kq_neon_k4_sumi(const uint8_t * qs, const uint8_t * qh, const uint8_t * sm, const int8_t * y) {
    const uint8x16_t m4 = vdupq_n_u8(0xf), m1 = vdupq_n_u8(1), m2 = vdupq_n_u8(2);
    uint8x16_t h0 = qh ? vld1q_u8(qh) : vdupq_n_u8(0), h1 = qh ? vld1q_u8(qh + 16) : vdupq_n_u8(0);
    int32x4_t acc = vdupq_n_s32(0);
    for (int c = 0; c < 4; c++) {
        const uint8x16_t a = vld1q_u8(qs + 32 * c), b = vld1q_u8(qs + 32 * c + 16);
        uint8x16_t lo0 = vandq_u8(a, m4), lo1 = vandq_u8(b, m4), hi0 = vshrq_n_u8(a, 4), hi1 = vshrq_n_u8(b, 4);
        if (qh) {
            lo0 = vorrq_u8(lo0, vshlq_n_u8(vandq_u8(h0, m1), 4));
            lo1 = vorrq_u8(lo1, vshlq_n_u8(vandq_u8(h1, m1), 4));
            hi0 = vorrq_u8(hi0, vshlq_n_u8(vandq_u8(h0, m2), 3));
            hi1 = vorrq_u8(hi1, vshlq_n_u8(vandq_u8(h1, m2), 3));
            h0 = vshrq_n_u8(h0, 2);
            h1 = vshrq_n_u8(h1, 2);
        }
        acc = vmlaq_n_s32(acc, pg_kq_neon_dot32(lo0, lo1, y + 64 * c), sm[2 * c]);
        acc = vmlaq_n_s32(acc, pg_kq_neon_dot32(hi0, hi1, y + 64 * c + 32), sm[2 * c + 1]);
    }
    return vaddvq_s32(acc);
}

/* Q6_K: pg_kq_q6_sumi's sum; the signed values q - 32 (-32..31) dotted directly (vdotq and vmull
 * multiply signed by signed, no offset to take back). Quarter j of half h: nibble j / 2 of ql bytes
 * 64h + 32(j % 2) .., bits 2j of qh bytes 32h .. */
static inline int32_t pg_kq_neon_q6_sumi(const pg_block_q6_K * x, const int8_t * y) {
    const uint8x16_t m4 = vdupq_n_u8(0xf), m3 = vdupq_n_u8(3), c32 = vdupq_n_u8(32);
    int32x4_t acc = vdupq_n_s32(0);
    for (int h = 0; h < 2; h++) {
        const uint8_t * ql = x->ql + 64 * h;
        const uint8x16_t l[4] = {vld1q_u8(ql), vld1q_u8(ql + 16), vld1q_u8(ql + 32), vld1q_u8(ql + 48)};
        uint8x16_t h0 = vld1q_u8(x->qh + 32 * h), h1 = vld1q_u8(x->qh + 32 * h + 16);
        for (int j = 0; j < 4; j++) {
            const uint8x16_t a = l[2 * (j % 2)], b = l[2 * (j % 2) + 1];
            const uint8x16_t n0 = j < 2 ? vandq_u8(a, m4) : vshrq_n_u8(a, 4);
            const uint8x16_t n1 = j < 2 ? vandq_u8(b, m4) : vshrq_n_u8(b, 4);
            const uint8x16_t v0 = vsubq_u8(vorrq_u8(n0, vshlq_n_u8(vandq_u8(h0, m3), 4)), c32);
            const uint8x16_t v1 = vsubq_u8(vorrq_u8(n1, vshlq_n_u8(vandq_u8(h1, m3), 4)), c32);
            const int8_t * yj = y + 128 * h + 32 * j;
            acc = pg_kq_neon_group(acc, v0, yj, x->scales[8 * h + 2 * j]);
            acc = pg_kq_neon_group(acc, v1, yj + 16, x->scales[8 * h + 2 * j + 1]);
            h0 = vshrq_n_u8(h0, 2);
            h1 = vshrq_n_u8(h1, 2);
        }
    }
    return vaddvq_s32(acc);
}
