/* Row conversions f32 <-> every tensor type, bit-exact with ggml's CPU backend (the type table,
 * types.h, holds them as each type's to_float and from_float):
 *   F16, BF16   round-to-nearest-even (vec/cvt.h)
 *   Q8_0        the CPU quantiser: d = amax/127, id = amax ? 127/amax : 0, q = rint(x*id) (ties even)
 *   Q4_0        the reference quantiser: m = the element of largest |x| (first wins), d = m/-8,
 *               id = d ? 1/d : 0, q = min(15, (int8)(x*id + 8.5))
 * A row of a block type holds n/32 blocks; n must be a multiple of 32.
 */
#pragma once
#include "vec/vec.h"

/* ggml's quantisers and dequantisers run unfused (ggml-base is built without FMA): a function marked
 * PG_NO_CONTRACT keeps GCC from fusing a multiply and an add into one FMA (one rounding where ggml
 * has two); clang contracts within one expression only, so such code keeps them in two statements */
#if defined(__GNUC__) && !defined(__clang__)
#define PG_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define PG_NO_CONTRACT
#endif

typedef void (*pg_to_float_fn)(const void * x, float * y, int64_t n);
typedef void (*pg_from_float_fn)(const float * x, void * y, int64_t n);

static inline void pg_row_f32_to_f32(const void * x, float * y, int64_t n) { memcpy(y, x, n * sizeof(float)); }
static inline void pg_row_f32_from_f32(const float * x, void * y, int64_t n) { memcpy(y, x, n * sizeof(float)); }
static inline void pg_row_f16_to_f32(const void * x, float * y, int64_t n) { pg_vec_cvt_f16_f32(n, (const pg_fp16_t *) x, y); }
static inline void pg_row_f16_from_f32(const float * x, void * y, int64_t n) { pg_vec_cvt_f32_f16(n, x, (pg_fp16_t *) y); }
static inline void pg_row_bf16_to_f32(const void * x, float * y, int64_t n) { pg_vec_cvt_bf16_f32(n, (const pg_bf16_t *) x, y); }
static inline void pg_row_bf16_from_f32(const float * x, void * y, int64_t n) { pg_vec_cvt_f32_bf16(n, x, (pg_bf16_t *) y); }

static inline void pg_row_q8_0_to_f32(const void * vx, float * y, int64_t n) {
    const pg_block_q8_0 * x = (const pg_block_q8_0 *) vx;
    for (int64_t ib = 0; ib < n / PG_QK8_0; ib++) {
        const float d = pg_fp16_to_fp32(x[ib].d);
        for (int j = 0; j < PG_QK8_0; j++) y[ib * PG_QK8_0 + j] = x[ib].qs[j] * d;
    }
}

static inline void pg_row_q8_0_from_f32(const float * x, void * vy, int64_t n) {
    pg_vec_quantize_q8_0(n, x, (pg_block_q8_0 *) vy);
}

static inline void pg_row_q4_0_to_f32(const void * vx, float * y, int64_t n) {
    const pg_block_q4_0 * x = (const pg_block_q4_0 *) vx;
    for (int64_t ib = 0; ib < n / PG_QK4_0; ib++) {
        const float d = pg_fp16_to_fp32(x[ib].d);
        for (int j = 0; j < PG_QK4_0 / 2; j++) {
            y[ib * PG_QK4_0 + j] = ((x[ib].qs[j] & 0x0f) - 8) * d;
            y[ib * PG_QK4_0 + j + PG_QK4_0 / 2] = ((x[ib].qs[j] >> 4) - 8) * d;
        }
    }
}

/* the reference quantiser of Q4_0 (nlev = 8) and Q5_0 (nlev = 16) on one block of 32: m = the
 * element of largest |x| (first wins), d = m/-nlev, id = d ? 1/d : 0, code = min(2*nlev - 1,
 * (int8)(x*id + nlev + 0.5)); returns d */
static PG_NO_CONTRACT float pg_quantize_absmax_block(const float * xb, int nlev, uint8_t * code) {
    float amax = 0.0f, m = 0.0f;
    for (int j = 0; j < 32; j++) {
        if (fabsf(xb[j]) > amax) { amax = fabsf(xb[j]); m = xb[j]; }
    }
    const float d = m / (float) -nlev;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const float off = (float) nlev + 0.5f;
    for (int j = 0; j < 32; j++) {
        const float v = xb[j] * id;
        code[j] = (uint8_t) PG_MIN(2 * nlev - 1, (int8_t) (v + off));
    }
    return d;
}

static inline void pg_row_q4_0_from_f32(const float * x, void * vy, int64_t n) {
    pg_block_q4_0 * y = (pg_block_q4_0 *) vy;
    for (int64_t ib = 0; ib < n / PG_QK4_0; ib++) {
        uint8_t code[PG_QK4_0];
        y[ib].d = pg_fp32_to_fp16(pg_quantize_absmax_block(x + ib * PG_QK4_0, 8, code));
        for (int j = 0; j < PG_QK4_0 / 2; j++) y[ib].qs[j] = code[j] | (uint8_t) (code[j + PG_QK4_0 / 2] << 4);
    }
}

static inline void pg_row_i32_to_f32(const void * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = (float) ((const int32_t *) x)[i];
}
static inline void pg_row_i32_from_f32(const float * x, void * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) ((int32_t *) y)[i] = (int32_t) x[i];
}
