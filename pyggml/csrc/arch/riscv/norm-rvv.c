/* RVV 1.0 kernels of vec/norm.h (the norms' sums): compiled with V, chosen at run time (arch/riscv/rvv.h).
 * Every loop is strip-mined with vsetvl, so any VLEN works and there is no scalar tail; LMUL is chosen
 * per kernel from the registers it keeps live. Accumulators that outlive a shorter last strip use the
 * _tu (tail undisturbed) intrinsics, or the lanes past vl would be clobbered (qemu's
 * rvv_ta_all_1s=true fills them with NaN bits, so tests catch it). */
#include "vec/norm.h"
#include "arch/riscv/rvv-mappings.h"

/* sums in double: f32 values v widened into f64 lanes as they are added (e32 m4 -> e64 m8, the
 * accumulator kept with _tu). op (a constant in each caller) says what v is and what is added: x
 * itself (SUM, SUMSQ), x + r or x - mean stored to y (ADD_SUMSQ, CVAR); v, or v*v rounded to f32 (the
 * three SQ ops). One loop for all, so the same values give the same sum bit for bit whichever
 * primitive sees them. */
enum { PG_RVV_SUM, PG_RVV_SUMSQ, PG_RVV_ADD_SUMSQ, PG_RVV_CVAR };
static inline __attribute__((always_inline)) double pg_rvv_sum64(const int op, int64_t n, float * y, const float * x,
                                                                 const float * r, float mean) {
    const size_t vlmax = __riscv_vsetvlmax_e64m8();
    vfloat64m8_t acc = __riscv_vfmv_v_f_f64m8(0.0, vlmax);
    for (size_t vl, i = 0; i < (size_t) n; i += vl) {
        vl = __riscv_vsetvl_e32m4((size_t) n - i);
        vfloat32m4_t v = __riscv_vle32_v_f32m4(x + i, vl);
        if (op == PG_RVV_ADD_SUMSQ) v = __riscv_vfadd_vv_f32m4(v, __riscv_vle32_v_f32m4(r + i, vl), vl);
        if (op == PG_RVV_CVAR) v = __riscv_vfsub_vf_f32m4(v, mean, vl);
        if (op == PG_RVV_ADD_SUMSQ || op == PG_RVV_CVAR) __riscv_vse32_v_f32m4(y + i, v, vl);
        const vfloat32m4_t sq = op == PG_RVV_SUM ? v : __riscv_vfmul_vv_f32m4(v, v, vl);
        acc = __riscv_vfwadd_wv_f64m8_tu(acc, acc, sq, vl);
    }
    const vfloat64m1_t zero = __riscv_vfmv_s_f_f64m1(0.0, 1);
    return __riscv_vfmv_f_s_f64m1_f64(__riscv_vfredusum_vs_f64m8_f64m1(acc, zero, vlmax));
}

double pg_rvv_sum_f64_f32(int64_t n, const float * x) { return pg_rvv_sum64(PG_RVV_SUM, n, NULL, x, NULL, 0.0f); }
double pg_rvv_sumsq_f32(int64_t n, const float * x) { return pg_rvv_sum64(PG_RVV_SUMSQ, n, NULL, x, NULL, 0.0f); }
double pg_rvv_add_sumsq_f32(int64_t n, float * y, const float * x, const float * r) {
    return pg_rvv_sum64(PG_RVV_ADD_SUMSQ, n, y, x, r, 0.0f);
}
double pg_rvv_cvar_f32(int64_t n, float * y, const float * x, float mean) {
    return pg_rvv_sum64(PG_RVV_CVAR, n, y, x, NULL, mean);
}

/* y = (x*s)*w, both products rounded (streaming, e32 m8) */
void pg_rvv_scale_mul_f32(int64_t n, float * y, const float * x, float s, const float * w) {
    for (size_t vl; n > 0; n -= vl, x += vl, y += vl, w += vl) {
        vl = __riscv_vsetvl_e32m8(n);
        const vfloat32m8_t xs = __riscv_vfmul_vf_f32m8(__riscv_vle32_v_f32m8(x, vl), s, vl);
        __riscv_vse32_v_f32m8(y, __riscv_vfmul_vv_f32m8(xs, __riscv_vle32_v_f32m8(w, vl), vl), vl);
    }
}
