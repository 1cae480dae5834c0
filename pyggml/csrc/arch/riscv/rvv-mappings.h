/* What the RVV translation units (arch/riscv/<family>-rvv.c, compiled with V) share: f16/bf16/f32 lanes
 * widened into e32 m4 registers and the horizontal sum. Included by those files only (arch/riscv/rvv.h says
 * why nothing else sees V). */
#pragma once
#include <riscv_vector.h>
#include "vec/cvt.h"

/* ---- f16/bf16 lanes widened to f32 (e16 m2 -> e32 m4) ---- */
static inline vfloat32m4_t pg_rvv_load_bf16(const pg_bf16_t * p, size_t vl) {
    const vuint32m4_t u = __riscv_vzext_vf2_u32m4(__riscv_vle16_v_u16m2(p, vl), vl);
    return __riscv_vreinterpret_v_u32m4_f32m4(__riscv_vsll_vx_u32m4(u, 16, vl));
}

#if defined(__riscv_zvfhmin)
static inline vfloat32m4_t pg_rvv_load_f16(const pg_fp16_t * p, size_t vl) {
    return __riscv_vfwcvt_f_f_v_f32m4(__riscv_vle16_v_f16m2((const _Float16 *) p, vl), vl);
}
#else
/* without zvfhmin, exact integer widening: the magnitude bits moved to f32's place and scaled by
 * 2^112 (rebiases normals, normalises subnormals); exponent 31 (inf, NaN) becomes 255; the sign back */
static inline vfloat32m4_t pg_rvv_load_f16(const pg_fp16_t * p, size_t vl) {
    const vuint32m4_t h = __riscv_vzext_vf2_u32m4(__riscv_vle16_v_u16m2(p, vl), vl);
    const vuint32m4_t mag = __riscv_vsll_vx_u32m4(__riscv_vand_vx_u32m4(h, 0x7fffu, vl), 13, vl);
    vuint32m4_t u = __riscv_vreinterpret_v_f32m4_u32m4(
        __riscv_vfmul_vf_f32m4(__riscv_vreinterpret_v_u32m4_f32m4(mag), 0x1p112f, vl));
    u = __riscv_vor_vx_u32m4_mu(__riscv_vmsgeu_vx_u32m4_b8(mag, 0x0f800000u, vl), u, mag, 0x7f800000u, vl);
    const vuint32m4_t sign = __riscv_vsll_vx_u32m4(__riscv_vand_vx_u32m4(h, 0x8000u, vl), 16, vl);
    return __riscv_vreinterpret_v_u32m4_f32m4(__riscv_vor_vv_u32m4(u, sign, vl));
}
#endif

static inline vfloat32m4_t pg_rvv_load_f32(const float * p, size_t vl) { return __riscv_vle32_v_f32m4(p, vl); }

static inline float pg_rvv_reduce_f32m4(vfloat32m4_t a, size_t vlmax) {
    const vfloat32m1_t zero = __riscv_vfmv_s_f_f32m1(0.0f, 1);
    return __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32m4_f32m1(a, zero, vlmax));
}
