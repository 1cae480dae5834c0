/* Conversions between f32 and fp16/bf16: one element (pg_fp16_to_fp32, ...) and rows
 * (pg_vec_cvt_<from>_<to>), bit-exact round-to-nearest-even (ggml's CPU rounding) on every path.
 * RVV: arch/riscv/cvt-rvv.c. Every row primitive of vec/ has the same form: PG_RVV_DO/PG_RVV_RETURN
 * (riscv64 with V hands the row to pg_rvv_<name>), a SIMD body over PG_F32_EPR-wide registers in the
 * vocabulary of arch/simd-mappings.h, and a scalar loop for the leftovers, which is the whole row in
 * the scalar build.
 */
#pragma once
#include "core/pyggml.h"
#include "arch/simd-mappings.h"

static inline uint32_t pg_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float pg_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float pg_fp16_to_fp32(pg_fp16_t h) {
#if PG_HAVE_FP16_SCALAR
    return pg_fp16_to_fp32_1(h);   /* one instruction (block scales in quantized dots) */
#else
    const uint32_t sign = (uint32_t) (h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
    if (exp == 0) {  /* zero or subnormal: man * 2^-24, exact in f32 */
        const float f = (float) man * 0x1p-24f;
        return pg_bits_f32(pg_f32_bits(f) | sign);
    }
    if (exp == 31) return pg_bits_f32(sign | 0x7f800000u | (man << 13));
    return pg_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
#endif
}

static inline pg_fp16_t pg_fp32_to_fp16(float f) {
    uint32_t u = pg_f32_bits(f);
    const uint16_t sign = (uint16_t) ((u >> 16) & 0x8000u);
    u &= 0x7fffffffu;
    if (u > 0x7f800000u) return sign | 0x7e00u;            /* NaN -> quiet NaN */
    if (u >= 0x477ff000u) return sign | 0x7c00u;           /* >= 65520 rounds to inf */
    if (u < 0x38800000u) {                                 /* below 2^-14: subnormal half */
        return sign | (uint16_t) lrintf(pg_bits_f32(u) * 0x1p24f);
    }
    u += 0xc8000fffu + ((u >> 13) & 1u);                   /* rebias exponent, round half to even */
    return sign | (uint16_t) (u >> 13);
}

static inline float pg_bf16_to_fp32(pg_bf16_t h) { return pg_bits_f32((uint32_t) h << 16); }

static inline pg_bf16_t pg_fp32_to_bf16(float f) {
    const uint32_t u = pg_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (pg_bf16_t) ((u >> 16) | 0x40u);
    return (pg_bf16_t) ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* Element i of a row of f32, f16 or bf16, widened to f32: a vector (pg_row_load_v) or one element
 * (pg_row_load_1). The kernels written once for every row type (vec/dot.h, vec/attn.h) take the
 * type as a compile-time constant; after inlining the switch folds to the one load. */
enum { PG_ROW_F32, PG_ROW_F16, PG_ROW_BF16 };

/* p advanced by i elements */
PG_ALWAYS_INLINE const void * pg_row_at(const int type, const void * p, int64_t i) {
    return (const char *) p + i * (type == PG_ROW_F32 ? 4 : 2);
}

#if PG_HAVE_F32V
PG_ALWAYS_INLINE pg_f32v pg_row_load_v(const int type, const void * p, int64_t i) {
    switch (type) {
    case PG_ROW_F16: return PG_F32V_LOAD_F16((const pg_fp16_t *) p + i);
    case PG_ROW_BF16: return PG_F32V_LOAD_BF16((const pg_bf16_t *) p + i);
    default: return PG_F32V_LOAD((const float *) p + i);
    }
}
#endif

PG_ALWAYS_INLINE float pg_row_load_1(const int type, const void * p, int64_t i) {
    switch (type) {
    case PG_ROW_F16: return pg_fp16_to_fp32(((const pg_fp16_t *) p)[i]);
    case PG_ROW_BF16: return pg_bf16_to_fp32(((const pg_bf16_t *) p)[i]);
    default: return ((const float *) p)[i];
    }
}

/* ---- rows ---- */
static inline void pg_vec_cvt_f16_f32(int64_t n, const pg_fp16_t * x, float * y) {
    PG_RVV_DO(pg_rvv_cvt_f16_f32(n, x, y))
    int64_t i = 0;
#if PG_HAVE_F32V
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) PG_F32V_STORE(y + i, PG_F32V_LOAD_F16(x + i));
#endif
    for (; i < n; i++) y[i] = pg_fp16_to_fp32(x[i]);
}

static inline void pg_vec_cvt_f32_f16(int64_t n, const float * x, pg_fp16_t * y) {
    PG_RVV_DO(pg_rvv_cvt_f32_f16(n, x, y))
    int64_t i = 0;
#if PG_HAVE_F32V
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) PG_F32V_STORE_F16(y + i, PG_F32V_LOAD(x + i));
#endif
    for (; i < n; i++) y[i] = pg_fp32_to_fp16(x[i]);
}

static inline void pg_vec_cvt_bf16_f32(int64_t n, const pg_bf16_t * x, float * y) {
    PG_RVV_DO(pg_rvv_cvt_bf16_f32(n, x, y))
    int64_t i = 0;
#if PG_HAVE_F32V
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) PG_F32V_STORE(y + i, PG_F32V_LOAD_BF16(x + i));
#endif
    for (; i < n; i++) y[i] = pg_bf16_to_fp32(x[i]);
}

/* integer-only rounding: the loop vectorises, and no ISA's bf16 instruction keeps denormals */
static inline void pg_vec_cvt_f32_bf16(int64_t n, const float * x, pg_bf16_t * y) {
    PG_RVV_DO(pg_rvv_cvt_f32_bf16(n, x, y))
    for (int64_t i = 0; i < n; i++) y[i] = pg_fp32_to_bf16(x[i]);
}
