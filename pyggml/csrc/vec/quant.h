/* Quantized blocks (ggml's layouts) and the Q8_0 quantiser of rows. RVV: arch/riscv/quant-rvv.c. */
#pragma once
#include "vec/cvt.h"

#define PG_QK8_0 32
#define PG_QK4_0 32
typedef struct pg_block_q8_0 { pg_fp16_t d; int8_t qs[PG_QK8_0]; } pg_block_q8_0;   /* 34 bytes */
typedef struct pg_block_q4_0 { pg_fp16_t d; uint8_t qs[PG_QK4_0 / 2]; } pg_block_q4_0;   /* 18 bytes */
_Static_assert(sizeof(pg_block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(pg_block_q4_0) == 18, "q4_0 block");

/* Q8_0 quantisation of n floats (n a multiple of 32), ggml's CPU quantiser: per block amax = max|x|,
 * d = amax/127 stored as fp16, q = round-half-even(x * (amax ? 127/amax : 0)). The ISA's block
 * quantiser (pg_quantize_block_q8) does the same two f32 operations per element (one multiply, one
 * rounding), so every path gives the same bytes as the scalar loop. */
static inline void pg_vec_quantize_q8_0(int64_t n, const float * x, pg_block_q8_0 * y) {
    PG_RVV_DO(pg_rvv_quantize_q8_0(n, x, y))
    for (int64_t ib = 0; ib < n / PG_QK8_0; ib++) {
        const float * xb = x + ib * PG_QK8_0;
        int8_t * q = y[ib].qs;
#if PG_HAVE_Q8_QUANT
        const float amax = pg_quantize_block_q8(xb, q);
#else
        float amax = 0.0f;
        for (int j = 0; j < PG_QK8_0; j++) amax = PG_MAX(amax, fabsf(xb[j]));
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (int j = 0; j < PG_QK8_0; j++) q[j] = (int8_t) nearbyintf(xb[j] * id);
#endif
        y[ib].d = pg_fp32_to_fp16(amax / 127.0f);
    }
}
