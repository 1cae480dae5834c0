/* The vocabulary of arch/simd-mappings.h on AArch64 NEON: 4 f32 lanes. */
#pragma once
#include <arm_neon.h>
#include <math.h>
#include <stdint.h>

#define PG_SIMD_NAME "neon"
#define PG_HAVE_F32V 1
#define PG_F32_EPR 4
#define PG_F32V_NREGS 32
typedef float32x4_t pg_f32v;
#define PG_F32V_LOAD(p)          vld1q_f32(p)
#define PG_F32V_STORE(p, v)      vst1q_f32(p, v)
#define PG_F32V_LOAD_F16(p)      vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *) (p))))
#define PG_F32V_STORE_F16(p, v)  vst1_u16((uint16_t *) (p), vreinterpret_u16_f16(vcvt_f16_f32(v)))
#define PG_F32V_LOAD_BF16(p)     vreinterpretq_f32_u32(vshlq_n_u32(vmovl_u16(vld1_u16((const uint16_t *) (p))), 16))
#define PG_F32V_SET1(x)          vdupq_n_f32(x)
#define PG_F32V_ZERO()           vdupq_n_f32(0.0f)
#define PG_F32V_ADD(a, b)        vaddq_f32(a, b)
#define PG_F32V_SUB(a, b)        vsubq_f32(a, b)
#define PG_F32V_MUL(a, b)        vmulq_f32(a, b)
#define PG_F32V_DIV(a, b)        vdivq_f32(a, b)
#define PG_F32V_FMA(a, b, c)     vfmaq_f32(c, a, b)
#define PG_F32V_MAX(a, b)        vmaxq_f32(a, b)
#define PG_F32V_MIN(a, b)        vminq_f32(a, b)
#define PG_F32V_REDUCE(v)        vaddvq_f32(v)
#define PG_F32V_REDUCE_MAX(v)    vmaxvq_f32(v)
#define PG_F32V_ROUND(v)         vrndnq_f32(v)
#define PG_F32V_SEL_LT(a, b, t, f) vbslq_f32(vcltq_f32(a, b), t, f)
#define PG_F32V_KEEP_NAN(x, r)   vbslq_f32(vceqq_f32(x, x), r, x)
#define PG_F32V_KEEP(v)          ((void) 0)

static inline pg_f32v pg_f32v_mul_pow2(pg_f32v p, pg_f32v k) {
    const int32x4_t ki = vcvtnq_s32_f32(k), k1 = vshrq_n_s32(ki, 1), k2 = vsubq_s32(ki, k1);
    const int32x4_t b = vdupq_n_s32(127);
    return vmulq_f32(vmulq_f32(p, vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k1, b), 23))),
                     vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k2, b), 23)));
}

static inline pg_f32v pg_f32v_mul_pow2_1(pg_f32v p, pg_f32v k) {
    return vmulq_f32(p, vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(k), vdupq_n_s32(127)), 23)));
}

static inline void pg_f32v_quadrant(pg_f32v j, pg_f32v sp, pg_f32v cp, pg_f32v * s, pg_f32v * c) {
    const int32x4_t q = vcvtnq_s32_f32(j), one = vdupq_n_s32(1), two = vdupq_n_s32(2);
    const uint32x4_t swap = vceqq_s32(vandq_s32(q, one), one);
    const uint32x4_t sn = vshlq_n_u32(vreinterpretq_u32_s32(vandq_s32(q, two)), 30);
    const uint32x4_t cn = vshlq_n_u32(vreinterpretq_u32_s32(vandq_s32(vaddq_s32(q, one), two)), 30);
    *s = vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(vbslq_f32(swap, cp, sp)), sn));
    *c = vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(vbslq_f32(swap, sp, cp)), cn));
}

static inline void pg_f32v_load_even_odd(const float * p, pg_f32v * e, pg_f32v * o) {
    const float32x4x2_t v = vld2q_f32(p);
    *e = v.val[0];
    *o = v.val[1];
}

static inline void pg_f32v_store_interleaved(float * p, pg_f32v e, pg_f32v o) {
    float32x4x2_t v;
    v.val[0] = e;
    v.val[1] = o;
    vst2q_f32(p, v);
}

static inline void pg_f32v_transpose(const float * x, int64_t ldx, float * y, int64_t ldy) {
    const float32x4x2_t p01 = vtrnq_f32(vld1q_f32(x), vld1q_f32(x + ldx));
    const float32x4x2_t p23 = vtrnq_f32(vld1q_f32(x + 2 * ldx), vld1q_f32(x + 3 * ldx));
    vst1q_f32(y, vcombine_f32(vget_low_f32(p01.val[0]), vget_low_f32(p23.val[0])));
    vst1q_f32(y + ldy, vcombine_f32(vget_low_f32(p01.val[1]), vget_low_f32(p23.val[1])));
    vst1q_f32(y + 2 * ldy, vcombine_f32(vget_high_f32(p01.val[0]), vget_high_f32(p23.val[0])));
    vst1q_f32(y + 3 * ldy, vcombine_f32(vget_high_f32(p01.val[1]), vget_high_f32(p23.val[1])));
}

static inline uint32_t pg_f32v_live_bits(pg_f32v v) {
    static const uint32_t w[4] = {1, 2, 4, 8};
    const uint32x4_t ne = vmvnq_u32(vceqq_f32(v, vdupq_n_f32(-INFINITY)));
    return vaddvq_u32(vandq_u32(ne, vld1q_u32(w)));
}

/* f64 accumulation: the squares are rounded to f32 and widened (no scaling: PG_SQ_SCALE is 1) */
typedef struct { float64x2_t lo, hi; } pg_f64acc;
static inline pg_f64acc pg_f64acc_zero(void) { pg_f64acc a = { vdupq_n_f64(0.0), vdupq_n_f64(0.0) }; return a; }
static inline pg_f64acc pg_f64acc_add(pg_f64acc a, float32x4_t v) {
    a.lo = vaddq_f64(a.lo, vcvt_f64_f32(vget_low_f32(v)));
    a.hi = vaddq_f64(a.hi, vcvt_high_f64_f32(v));
    return a;
}
static inline pg_f64acc pg_f64acc_add_sq(pg_f64acc a, float32x4_t v) { return pg_f64acc_add(a, vmulq_f32(v, v)); }
static inline double pg_f64acc_reduce(pg_f64acc a, pg_f64acc b) {
    return vaddvq_f64(vaddq_f64(vaddq_f64(a.lo, b.lo), vaddq_f64(a.hi, b.hi)));
}

/* quantized blocks: 32 int8 lanes of a decoded block in two registers; 4 f32 lanes of
 * scale * (int8 dot) accumulated over the blocks */
#define PG_HAVE_QDOT 1
typedef int8x16x2_t pg_q8x32;
static inline pg_q8x32 pg_q8x32_load(const int8_t * q) { pg_q8x32 r = {{vld1q_s8(q), vld1q_s8(q + 16)}}; return r; }
static inline void pg_q8x32_store(pg_q8x32 q, int8_t * y) {
    vst1q_s8(y, q.val[0]);
    vst1q_s8(y + 16, q.val[1]);
}
static inline pg_q8x32 pg_q8x32_nibbles(const uint8_t * qs) {
    const uint8x16_t b = vld1q_u8(qs);
    pg_q8x32 r = {{vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0x0f))), vreinterpretq_s8_u8(vshrq_n_u8(b, 4))}};
    return r;
}
static inline pg_q8x32 pg_q8x32_bit4(const uint8_t * qh) {
    static const uint8_t bits[8] = {1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t bit = vcombine_u8(vld1_u8(bits), vld1_u8(bits));
    uint8x16_t h[2];
    for (int k = 0; k < 2; k++) {
        const uint8x16_t b = vcombine_u8(vdup_n_u8(qh[2 * k]), vdup_n_u8(qh[2 * k + 1]));
        h[k] = vandq_u8(vtstq_u8(b, bit), vdupq_n_u8(0x10));
    }
    pg_q8x32 r = {{vreinterpretq_s8_u8(h[0]), vreinterpretq_s8_u8(h[1])}};
    return r;
}
static inline pg_q8x32 pg_q8x32_or(pg_q8x32 a, pg_q8x32 b) {
    pg_q8x32 r = {{vorrq_s8(a.val[0], b.val[0]), vorrq_s8(a.val[1], b.val[1])}};
    return r;
}
static inline pg_q8x32 pg_q8x32_sub(pg_q8x32 a, int8_t c) {
    pg_q8x32 r = {{vsubq_s8(a.val[0], vdupq_n_s8(c)), vsubq_s8(a.val[1], vdupq_n_s8(c))}};
    return r;
}
static inline pg_q8x32 pg_q8x32_lut16(pg_q8x32 a, const int8_t * table) {
    const int8x16_t t = vld1q_s8(table);
    pg_q8x32 r = {{vqtbl1q_s8(t, vreinterpretq_u8_s8(a.val[0])), vqtbl1q_s8(t, vreinterpretq_u8_s8(a.val[1]))}};
    return r;
}

/* acc plus the 16 products a[i] * b[i], four to an int32 lane: vdotq where the target has the
 * dotprod extension, widening multiplies otherwise (which lane holds which product differs between
 * the two; the lanes' sum does not). Also the K-quants' dots (arch/arm/kquants-neon.h). */
static inline int32x4_t pg_neon_dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, a, b);
#else
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
#endif
}

typedef float32x4_t pg_qacc;
static inline pg_qacc pg_qacc_zero(void) { return vdupq_n_f32(0.0f); }
/* signed products throughout (uns is for x86's unsigned-by-signed instructions) */
static inline pg_qacc pg_qacc_add(pg_qacc acc, pg_q8x32 x, const int8_t * y, int uns, float scale) {
    (void) uns;
    const int32x4_t p = pg_neon_dot16(pg_neon_dot16(vdupq_n_s32(0), x.val[0], vld1q_s8(y)), x.val[1], vld1q_s8(y + 16));
    return vmlaq_n_f32(acc, vcvtq_f32_s32(p), scale);
}
static inline pg_qacc pg_qacc_merge(pg_qacc a, pg_qacc b) { return vaddq_f32(a, b); }
static inline float pg_qacc_sum(pg_qacc acc) { return vaddvq_f32(acc); }

#define PG_HAVE_Q8_QUANT 1
static inline float pg_quantize_block_q8(const float * xb, int8_t * q) {
    float32x4_t v[8], m = vdupq_n_f32(0.0f);
    for (int k = 0; k < 8; k++) {
        v[k] = vld1q_f32(xb + 4 * k);
        m = vmaxq_f32(m, vabsq_f32(v[k]));
    }
    const float amax = vmaxvq_f32(m);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int k = 0; k < 8; k += 2) {
        const int16x8_t h = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(v[k], id))),
                                         vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(v[k + 1], id))));
        vst1_s8(q + 4 * k, vqmovn_s16(h));
    }
    return amax;
}
