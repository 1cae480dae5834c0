/* What the RVV dot products share with the attention kernels (arch/riscv/dot-rvv.c, arch/riscv/attn-rvv.c). */
#pragma once
#include "vec/cvt.h"
#include "arch/riscv/rvv-mappings.h"

/* elements i.. of a row of type t (PG_ROW_*, a compile-time constant) as f32, e32 m4 */
PG_ALWAYS_INLINE vfloat32m4_t pg_rvv_load_row(const int t, const void * p, size_t i, size_t vl) {
    switch (t) {
    case PG_ROW_F16: return pg_rvv_load_f16((const pg_fp16_t *) p + i, vl);
    case PG_ROW_BF16: return pg_rvv_load_bf16((const pg_bf16_t *) p + i, vl);
    default: return pg_rvv_load_f32((const float *) p + i, vl);
    }
}

/* several f32 rows against one row x of type tx (e32 m4 operands, up to four accumulators with _tu):
 * s[r*lds] = dot(x, y[r]) for r < nr; matmul's dot4 and the attention dot. RVV types cannot form
 * arrays, so the four accumulators are named and nr (a constant after inlining) masks the unused. */
PG_ALWAYS_INLINE void pg_rvv_dot_rows(const int tx, const int nr, int64_t n, const void * x, const float * const * y,
                                      float * s, int64_t lds) {
    const size_t vlmax = __riscv_vsetvlmax_e32m4();
    vfloat32m4_t a0 = __riscv_vfmv_v_f_f32m4(0.0f, vlmax), a1 = a0, a2 = a0, a3 = a0;
    for (size_t vl, i = 0; i < (size_t) n; i += vl) {
        vl = __riscv_vsetvl_e32m4((size_t) n - i);
        const vfloat32m4_t xv = pg_rvv_load_row(tx, x, i, vl);
        a0 = __riscv_vfmacc_vv_f32m4_tu(a0, xv, __riscv_vle32_v_f32m4(y[0] + i, vl), vl);
        if (nr > 1) a1 = __riscv_vfmacc_vv_f32m4_tu(a1, xv, __riscv_vle32_v_f32m4(y[1] + i, vl), vl);
        if (nr > 2) a2 = __riscv_vfmacc_vv_f32m4_tu(a2, xv, __riscv_vle32_v_f32m4(y[2] + i, vl), vl);
        if (nr > 3) a3 = __riscv_vfmacc_vv_f32m4_tu(a3, xv, __riscv_vle32_v_f32m4(y[3] + i, vl), vl);
    }
    s[0] = pg_rvv_reduce_f32m4(a0, vlmax);
    if (nr > 1) s[lds] = pg_rvv_reduce_f32m4(a1, vlmax);
    if (nr > 2) s[2 * lds] = pg_rvv_reduce_f32m4(a2, vlmax);
    if (nr > 3) s[3 * lds] = pg_rvv_reduce_f32m4(a3, vlmax);
}
