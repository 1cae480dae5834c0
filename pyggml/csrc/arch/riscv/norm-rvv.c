/* RVV 1.0 kernels of vec/norm.h (the norms' sums): compiled with V, chosen at run time (arch/riscv/rvv.h).
 * Every loop is strip-mined with vsetvl, so any VLEN works and there is no scalar tail; LMUL is chosen
 * per kernel from the registers it keeps live. Accumulators that outlive a shorter last strip use the
 * _tu (tail undisturbed) intrinsics, or the lanes past vl would be clobbered (qemu's
 * rvv_ta_all_1s=true fills them with NaN bits, so tests catch it). */
#include "vec/norm.h"
#include "arch/riscv/rvv-mappings.h"

/* sums in double: f32 values v widened into f64 lanes as they are
 * added (e32 m4 -> e64 m8, the accumulator kept with _tu); VAL is the strip's f32 vector, KEEP
 * stores it where the primitive writes one, SQ is what gets added (v, or v*v rounded to f32). One
 * loop for all, so the same values give the same sum bit for bit whichever primitive sees them. */
#define PG_RVV_SUM64(VAL, KEEP, SQ)                                                              \
    const size_t vlmax = __riscv_vsetvlmax_e64m8();                                              \
    vfloat64m8_t acc = __riscv_vfmv_v_f_f64m8(0.0, vlmax);                                       \
    for (size_t vl, i = 0; i < (size_t) n; i += vl) {                                            \
        vl = __riscv_vsetvl_e32m4((size_t) n - i);                                               \
        const vfloat32m4_t v = VAL;                                                              \
        KEEP;                                                                                    \
        acc = __riscv_vfwadd_wv_f64m8_tu(acc, acc, SQ, vl);                                      \
    }                                                                                            \
    const vfloat64m1_t zero = __riscv_vfmv_s_f_f64m1(0.0, 1);                                    \
    return __riscv_vfmv_f_s_f64m1_f64(__riscv_vfredusum_vs_f64m8_f64m1(acc, zero, vlmax));

#define PG_RVV_X        __riscv_vle32_v_f32m4(x + i, vl)
#define PG_RVV_SQ       __riscv_vfmul_vv_f32m4(v, v, vl)
#define PG_RVV_STORE_Y  __riscv_vse32_v_f32m4(y + i, v, vl)

double pg_rvv_sum_f64_f32(int64_t n, const float * x) { PG_RVV_SUM64(PG_RVV_X, (void) 0, v) }
double pg_rvv_sumsq_f32(int64_t n, const float * x) { PG_RVV_SUM64(PG_RVV_X, (void) 0, PG_RVV_SQ) }
double pg_rvv_add_sumsq_f32(int64_t n, float * y, const float * x, const float * r) {
    PG_RVV_SUM64(__riscv_vfadd_vv_f32m4(PG_RVV_X, __riscv_vle32_v_f32m4(r + i, vl), vl), PG_RVV_STORE_Y, PG_RVV_SQ)
}
double pg_rvv_cvar_f32(int64_t n, float * y, const float * x, float mean) {
    PG_RVV_SUM64(__riscv_vfsub_vf_f32m4(PG_RVV_X, mean, vl), PG_RVV_STORE_Y, PG_RVV_SQ)
}

/* y = (x*s)*w, both products rounded (streaming, e32 m8) */
void pg_rvv_scale_mul_f32(int64_t n, float * y, const float * x, float s, const float * w) {
    for (size_t vl; n > 0; n -= vl, x += vl, y += vl, w += vl) {
        vl = __riscv_vsetvl_e32m8(n);
        const vfloat32m8_t xs = __riscv_vfmul_vf_f32m8(__riscv_vle32_v_f32m8(x, vl), s, vl);
        __riscv_vse32_v_f32m8(y, __riscv_vfmul_vv_f32m8(xs, __riscv_vle32_v_f32m8(w, vl), vl), vl);
    }
}
