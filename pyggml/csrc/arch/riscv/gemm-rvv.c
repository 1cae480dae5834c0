/* RVV 1.0 kernels of vec/gemm.h (the GEMM micro-kernel): compiled with V, chosen at run time (arch/riscv/rvv.h).
 * Every loop is strip-mined with vsetvl, so any VLEN works and there is no scalar tail; LMUL is chosen
 * per kernel from the registers it keeps live. Accumulators that outlive a shorter last strip use the
 * _tu (tail undisturbed) intrinsics, or the lanes past vl would be clobbered (qemu's
 * rvv_ta_all_1s=true fills them with NaN bits, so tests catch it). */
#include "vec/gemm.h"
#include "arch/riscv/rvv-mappings.h"

int pg_rvv_vlen(void) { return (int) (__riscv_vlenb() * 8); }

/* GEMM micro-kernel: PG_RVV_MM_MR rows x one e32 m2 register group of columns (8 at VLEN 128, 16
 * at 256; capped at PG_MM_NR_MAX for wide machines, which then leave part of the group unused).
 * 12 m2 accumulators (24 registers) and the panel row (2) fit the 32 vector registers. vl is the
 * same for every instruction (the panel's zero padding makes every tile full), so no tail policy
 * matters: each accumulator lane is written only under that vl and stored under it. */
int pg_rvv_gemm_nr(void) { return (int) PG_MIN(__riscv_vsetvlmax_e32m2(), (size_t) PG_MM_NR_MAX); }

#define PG_RVV_MM_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
_Static_assert(PG_RVV_MM_MR == 12, "PG_RVV_MM_ROWS lists PG_RVV_MM_MR rows");

void pg_rvv_gemm_tile_f32(int64_t n, const float * a, int64_t lda, const float * b, float * c) {
    const size_t vl = __riscv_vsetvl_e32m2((size_t) pg_rvv_gemm_nr());
#define PG_RVV_MM_ZERO(r) vfloat32m2_t c##r = __riscv_vfmv_v_f_f32m2(0.0f, vl);
#define PG_RVV_MM_FMA(r) c##r = __riscv_vfmacc_vf_f32m2(c##r, a[(r) * lda + k], bv, vl);
#define PG_RVV_MM_STORE(r) __riscv_vse32_v_f32m2(c + (r) * vl, c##r, vl);
    PG_RVV_MM_ROWS(PG_RVV_MM_ZERO)
    for (int64_t k = 0; k < n; k++, b += vl) {
        const vfloat32m2_t bv = __riscv_vle32_v_f32m2(b, vl);
        PG_RVV_MM_ROWS(PG_RVV_MM_FMA)
    }
    PG_RVV_MM_ROWS(PG_RVV_MM_STORE)
#undef PG_RVV_MM_ZERO
#undef PG_RVV_MM_FMA
#undef PG_RVV_MM_STORE
}
