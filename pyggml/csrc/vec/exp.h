/* exp and the softmax sums: x = k*ln2 + r, |r| <= ln2/2, a degree-7 polynomial in r, 2^k put in the
 * exponent. Relative error below 2e-7 over the f32 range; x < PG_EXP_LO gives 0, x > PG_EXP_HI
 * gives inf, NaN stays NaN. One algorithm with one set of constants for the scalar pg_expf, the
 * lanes of pg_f32v_exp and pg_f32v_exp_attn, and the RVV lanes (arch/riscv/exp-rvv.h). RVV: arch/riscv/exp-rvv.c. */
#pragma once
#include "vec/cvt.h"

#define PG_EXP_HI 88.72283935546875f
#define PG_EXP_LO -87.33654022216797f
#define PG_EXP_HI_1 88.0f                       /* the top of pg_f32v_exp_in_range's range */
#define PG_EXP_LOG2E 1.44269504088896341f       /* k = round(x * log2(e)) */
#define PG_EXP_LN2_HI 6.93145752e-1f            /* ln 2 in two parts: r = x - k*HI - k*LO */
#define PG_EXP_LN2_LO 1.42860677e-6f
#define PG_EXP_C7 1.98412698e-4f                /* p(r) = 1 + r + r^2/2 + C3 r^3 + ... + C7 r^7 */
#define PG_EXP_C6 1.38888889e-3f
#define PG_EXP_C5 8.33333333e-3f
#define PG_EXP_C4 4.16666667e-2f
#define PG_EXP_C3 1.66666667e-1f

static inline float pg_expf(float x) {
    if (!(x > PG_EXP_LO)) return x != x ? x : 0.0f;
    if (x > PG_EXP_HI) return INFINITY;
    const float k = nearbyintf(x * PG_EXP_LOG2E);
    const float r = fmaf(k, -PG_EXP_LN2_LO, fmaf(k, -PG_EXP_LN2_HI, x));
    float p = fmaf(PG_EXP_C7, r, PG_EXP_C6);
    p = fmaf(p, r, PG_EXP_C5); p = fmaf(p, r, PG_EXP_C4); p = fmaf(p, r, PG_EXP_C3);
    p = fmaf(p, r, 0.5f); p = fmaf(p, r, 1.0f); p = fmaf(p, r, 1.0f);
    /* 2^k in two steps so k = 128 or -126.. stays representable */
    const int ki = (int) k;
    const float s1 = pg_bits_f32((uint32_t) (127 + ki / 2) << 23);
    const float s2 = pg_bits_f32((uint32_t) (127 + ki - ki / 2) << 23);
    return p * s1 * s2;
}

#if PG_HAVE_F32V
/* lane-wise, for xc already clamped: k = round(xc * log2 e), and p(r) with r = xc - k ln2 */
static inline pg_f32v pg_f32v_exp_k(pg_f32v xc) { return PG_F32V_ROUND(PG_F32V_MUL(xc, PG_F32V_SET1(PG_EXP_LOG2E))); }

static inline pg_f32v pg_f32v_exp_poly(pg_f32v xc, pg_f32v k) {
    pg_f32v r = PG_F32V_FMA(k, PG_F32V_SET1(-PG_EXP_LN2_HI), xc);
    r = PG_F32V_FMA(k, PG_F32V_SET1(-PG_EXP_LN2_LO), r);
    pg_f32v p = PG_F32V_FMA(PG_F32V_SET1(PG_EXP_C7), r, PG_F32V_SET1(PG_EXP_C6));
    p = PG_F32V_FMA(p, r, PG_F32V_SET1(PG_EXP_C5));
    p = PG_F32V_FMA(p, r, PG_F32V_SET1(PG_EXP_C4));
    p = PG_F32V_FMA(p, r, PG_F32V_SET1(PG_EXP_C3));
    p = PG_F32V_FMA(p, r, PG_F32V_SET1(0.5f));
    p = PG_F32V_FMA(p, r, PG_F32V_SET1(1.0f));
    return PG_F32V_FMA(p, r, PG_F32V_SET1(1.0f));
}

/* pg_expf lane-wise */
static inline pg_f32v pg_f32v_exp(pg_f32v x) {
    const pg_f32v xc = PG_F32V_MAX(PG_F32V_SET1(PG_EXP_LO), x), k = pg_f32v_exp_k(xc);
    pg_f32v y = pg_f32v_mul_pow2(pg_f32v_exp_poly(xc, k), k);
    y = PG_F32V_SEL_LT(x, PG_F32V_SET1(PG_EXP_LO), PG_F32V_ZERO(), y);
    y = PG_F32V_SEL_LT(PG_F32V_SET1(PG_EXP_HI), x, PG_F32V_SET1(INFINITY), y);
    return PG_F32V_KEEP_NAN(x, y);
}

/* exp(w) for w already in [PG_EXP_LO, PG_EXP_HI_1]: k <= 127, so 2^k is one exponent step and no
 * lane needs exp's range selects (vec/act.h's sigmoid clamps its argument into this range) */
static inline pg_f32v pg_f32v_exp_in_range(pg_f32v w) {
    const pg_f32v k = pg_f32v_exp_k(w);
    return pg_f32v_mul_pow2_1(pg_f32v_exp_poly(w, k), k);
}

/* pg_f32v_exp with the same value for every input; where the ISA has a scaling instruction
 * (PG_HAVE_F32V_SCALEF: AVX-512's vscalefps, 13 instructions instead of 24) the 2^k, the zero below
 * PG_EXP_LO and the NaN pass-through are one zero-masked scaling instead of the generic selects.
 * x above 100 (and +inf) is clamped so that k stays finite, and the scaling gives inf above
 * PG_EXP_HI; -inf gives k = -inf and a NaN r, but its lane is zeroed like every lane below
 * PG_EXP_LO. Used by the softmax of the attention tiles. */
static inline pg_f32v pg_f32v_exp_attn(pg_f32v x) {
#if PG_HAVE_F32V_SCALEF
    const pg_f32v xc = PG_F32V_MIN(PG_F32V_SET1(100.0f), x), k = pg_f32v_exp_k(xc);
    return pg_f32v_scalef_ge(x, PG_EXP_LO, pg_f32v_exp_poly(xc, k), k);
#else
    return pg_f32v_exp(x);
#endif
}
#endif

/* y[i] = exp(x[i] - m); returns the sum of y in double (the softmax denominator) */
static inline double pg_vec_exp_sum_f32(int64_t n, float * y, const float * x, float m) {
    PG_RVV_RETURN(pg_rvv_exp_sum_f32(n, y, x, m))
    int64_t i = 0;
    double sum = 0.0;
#if PG_HAVE_F32V
    const pg_f32v vm = PG_F32V_SET1(m);
    pg_f32v acc = PG_F32V_ZERO();
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) {
        const pg_f32v e = pg_f32v_exp(PG_F32V_SUB(PG_F32V_LOAD(x + i), vm));
        PG_F32V_STORE(y + i, e);
        acc = PG_F32V_ADD(acc, e);
    }
    sum = (double) PG_F32V_REDUCE(acc);
#endif
    for (; i < n; i++) { y[i] = pg_expf(x[i] - m); sum += (double) y[i]; }
    return sum;
}
