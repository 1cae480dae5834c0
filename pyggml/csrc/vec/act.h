/* Activations of rows (the unary and GLU ops): y = act(x) and y = act(x) * g. RVV: arch/riscv/act-rvv.c.
 *
 * The sigmoid-gated activations share one form, x / (1 + exp(-z)), so one SIMD exp serves them:
 *   silu(x)       = x / (1 + exp(-x))
 *   gelu(x)       = 0.5x(1 + tanh(z)), z = sqrt(2/pi)(x + 0.044715x^3)   ==   x / (1 + exp(-2z))
 *   gelu_quick(x) = x / (1 + exp(-1.702x))
 *   relu(x)       = x > 0 ? x : 0
 *   gelu_erf(x)   = 0.5x(1 + erf(x/sqrt(2)))
 *   tanh(x)       = sign(x) (1 - e) / (1 + e), e = exp(-2|x|), for |x| >= PG_TANH_POLY_MAX; below it
 *                   x (1 + x^2 P(x^2)), where 1 - e would cancel
 * gelu is computed by its formula in f32; ggml's CPU reads it from an fp16 table instead
 * (GGML_GELU_FP16), which is less accurate; gelu_erf uses erfc(-x/sqrt(2)) for 1 + erf(x/sqrt(2)),
 * which keeps its relative accuracy for negative x where ggml's 1 + erff(...) cancels. Scalar paths
 * use libm (expf, erfcf). */
#pragma once
#include "vec/exp.h"

#define PG_GELU_COEF_A     0.044715f
#define PG_SQRT_2_OVER_PI  0.79788456080286535587989211986876f
#define PG_GELU_QUICK_COEF 1.702f
#define PG_SQRT_2_INV      0.70710678118654752440084436210484f
#define PG_TANH_POLY_MAX   0.625f

/* x / (1 + exp(-z)) with pg_f32v_sigmul's clamps (below): -z at most 88, x at least -88, NaN kept */
static inline float pg_sigmul_f32(float x, float z) {
    return (x < -PG_EXP_HI_1 ? -PG_EXP_HI_1 : x) / (1.0f + expf(fminf(-z, PG_EXP_HI_1)));
}
static inline float pg_silu_f32(float x) { return pg_sigmul_f32(x, x); }
static inline float pg_gelu_f32(float x) {
    return pg_sigmul_f32(x, 2.0f * PG_SQRT_2_OVER_PI * x * (1.0f + PG_GELU_COEF_A * x * x));
}
static inline float pg_gelu_quick_f32(float x) { return pg_sigmul_f32(x, PG_GELU_QUICK_COEF * x); }
static inline float pg_relu_f32(float x) { return x > 0.0f ? x : 0.0f; }
static inline float pg_gelu_erf_f32(float x) { return 0.5f * x * erfcf(-x * PG_SQRT_2_INV); }
static inline float pg_tanh_f32(float x) { return tanhf(x); }

/* erfc(t) = s*exp(-t^2 + P(s)), s = 1/(1 + t/2), for t >= 0: P's coefficients, highest power first
 * (Numerical Recipes' erfcc, relative error < 1.2e-7), for the SIMD and RVV gelu_erf */
static const float pg_erfc_c[10] = {0.17087277f, -0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f,
                                    -0.18628806f, 0.09678418f, 0.37409196f, 1.00002368f, -1.26551223f};

/* (tanh(x) - x) / x^3 = P(x^2) on |x| < PG_TANH_POLY_MAX: P's coefficients, highest power first (a
 * least-squares fit of the relative error; the f32 result is within 1.1e-7 of tanh), for the SIMD and
 * RVV tanh */
static const float pg_tanh_c[5] = {-0.0057188915f, 0.020653063f, -0.05374464f, 0.13331513f, -0.33333287f};

#if PG_HAVE_F32V
/* x / (1 + exp(-z)), with -z clamped into [PG_EXP_LO, 88] so that the exp needs no range selects
 * (vec/exp.h's pg_f32v_exp_in_range: 2/3 of pg_f32v_exp's instructions; swiglu's rows at 1 thread
 * are bound by them on AVX2). Below the range exp(-z) < 2^-126 leaves 1 + exp(-z) = 1, as before.
 * Above it 1 + exp(-z) stays at e^88 instead of inf: the result is at most |x| * 6e-39 instead of
 * 0. x below -88 is raised to -88 (NaN kept): there -z > 88 for silu, gelu and gelu_quick alike,
 * so the result stays within 6e-37 of the limit 0, and x = -inf gives that instead of NaN. */
static inline pg_f32v pg_f32v_sigmul(pg_f32v x, pg_f32v z) {
    const pg_f32v w = PG_F32V_MIN(PG_F32V_MAX(PG_F32V_SET1(PG_EXP_LO), PG_F32V_SUB(PG_F32V_ZERO(), z)),
                                  PG_F32V_SET1(PG_EXP_HI_1));
    const pg_f32v xc = PG_F32V_MAX(PG_F32V_SET1(-PG_EXP_HI_1), x);
    return PG_F32V_DIV(xc, PG_F32V_ADD(PG_F32V_SET1(1.0f), pg_f32v_exp_in_range(w)));
}
static inline pg_f32v pg_f32v_silu(pg_f32v x) { return pg_f32v_sigmul(x, x); }
static inline pg_f32v pg_f32v_gelu(pg_f32v x) {
    const pg_f32v p = PG_F32V_FMA(PG_F32V_MUL(x, x), PG_F32V_SET1(PG_GELU_COEF_A), PG_F32V_SET1(1.0f));
    return pg_f32v_sigmul(x, PG_F32V_MUL(PG_F32V_MUL(x, PG_F32V_SET1(2.0f * PG_SQRT_2_OVER_PI)), p));
}
static inline pg_f32v pg_f32v_gelu_quick(pg_f32v x) {
    return pg_f32v_sigmul(x, PG_F32V_MUL(x, PG_F32V_SET1(PG_GELU_QUICK_COEF)));
}
static inline pg_f32v pg_f32v_relu(pg_f32v x) { return PG_F32V_MAX(x, PG_F32V_ZERO()); }
/* 1 + erf(u) = erfc(-u) with u = x/sqrt(2); erfc(t) for t = |u| by the fit above, and
 * erfc(-t) = 2 - erfc(t): no cancellation on either side. */
static inline pg_f32v pg_f32v_gelu_erf(pg_f32v x) {
    const pg_f32v u = PG_F32V_MUL(x, PG_F32V_SET1(PG_SQRT_2_INV));
    const pg_f32v t = PG_F32V_MAX(u, PG_F32V_SUB(PG_F32V_ZERO(), u));
    const pg_f32v s = PG_F32V_DIV(PG_F32V_SET1(1.0f), PG_F32V_FMA(t, PG_F32V_SET1(0.5f), PG_F32V_SET1(1.0f)));
    pg_f32v q = PG_F32V_SET1(pg_erfc_c[0]);
    for (int k = 1; k < 10; k++) q = PG_F32V_FMA(q, s, PG_F32V_SET1(pg_erfc_c[k]));
    const pg_f32v e = PG_F32V_MUL(s, pg_f32v_exp(PG_F32V_SUB(q, PG_F32V_MUL(t, t))));   /* erfc(t) */
    const pg_f32v h = PG_F32V_MUL(e, PG_F32V_SET1(0.5f));
    return PG_F32V_MUL(x, PG_F32V_SEL_LT(x, PG_F32V_ZERO(), h, PG_F32V_SUB(PG_F32V_SET1(1.0f), h)));
}
/* the two forms of the comment above, one chosen per lane; the exp's argument -2|x| is at most 0
 * and raised to PG_EXP_LO (below it e < 2^-126 and the quotient is 1 either way) */
static inline pg_f32v pg_f32v_tanh(pg_f32v x) {
    const pg_f32v t = PG_F32V_MAX(x, PG_F32V_SUB(PG_F32V_ZERO(), x));
    const pg_f32v e = pg_f32v_exp_in_range(PG_F32V_MAX(PG_F32V_MUL(t, PG_F32V_SET1(-2.0f)), PG_F32V_SET1(PG_EXP_LO)));
    const pg_f32v q = PG_F32V_DIV(PG_F32V_SUB(PG_F32V_SET1(1.0f), e), PG_F32V_ADD(PG_F32V_SET1(1.0f), e));
    const pg_f32v s = PG_F32V_MUL(x, x);
    pg_f32v p = PG_F32V_SET1(pg_tanh_c[0]);
    for (int k = 1; k < 5; k++) p = PG_F32V_FMA(p, s, PG_F32V_SET1(pg_tanh_c[k]));
    const pg_f32v small = PG_F32V_MUL(x, PG_F32V_FMA(s, p, PG_F32V_SET1(1.0f)));   /* x (1 + s p): keeps -0 */
    const pg_f32v big = PG_F32V_SEL_LT(x, PG_F32V_ZERO(), PG_F32V_SUB(PG_F32V_ZERO(), q), q);
    return PG_F32V_KEEP_NAN(x, PG_F32V_SEL_LT(t, PG_F32V_SET1(PG_TANH_POLY_MAX), small, big));
}
/* The GLU rows prefetch their two inputs PG_GLU_AHEAD floats (64 vectors) ahead: a large GLU
 * (swiglu [2x11008, 512], 67 MB a call) streams from DRAM, and the long exp chain of each vector
 * fills the out-of-order window, so the misses the hardware prefetcher leaves are not overlapped
 * (docs/bench/journal.md). */
#define PG_GLU_AHEAD (64 * PG_F32_EPR)
#endif

/* the activations by id, a compile-time constant wherever it is passed (the switches fold away) */
enum { PG_ACT_SILU, PG_ACT_GELU, PG_ACT_GELU_ERF, PG_ACT_GELU_QUICK, PG_ACT_TANH, PG_ACT_RELU };
PG_ALWAYS_INLINE float pg_act_1(const int act, float x) {
    switch (act) {
    case PG_ACT_SILU: return pg_silu_f32(x);
    case PG_ACT_GELU: return pg_gelu_f32(x);
    case PG_ACT_GELU_ERF: return pg_gelu_erf_f32(x);
    case PG_ACT_GELU_QUICK: return pg_gelu_quick_f32(x);
    case PG_ACT_TANH: return pg_tanh_f32(x);
    default: return pg_relu_f32(x);
    }
}
#if PG_HAVE_F32V
PG_ALWAYS_INLINE pg_f32v pg_act_v(const int act, pg_f32v x) {
    switch (act) {
    case PG_ACT_SILU: return pg_f32v_silu(x);
    case PG_ACT_GELU: return pg_f32v_gelu(x);
    case PG_ACT_GELU_ERF: return pg_f32v_gelu_erf(x);
    case PG_ACT_GELU_QUICK: return pg_f32v_gelu_quick(x);
    case PG_ACT_TANH: return pg_f32v_tanh(x);
    default: return pg_f32v_relu(x);
    }
}
#endif
/* y = act(x), or with glu y = act(x) * g in one pass (y may alias x or g; the GLU rows prefetch) */
PG_ALWAYS_INLINE void pg_act_rows(const int act, const int glu, int64_t n, float * y, const float * x,
                                  const float * g) {
    int64_t i = 0;
#if PG_HAVE_F32V
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) {
        if (glu) {
            __builtin_prefetch(x + i + PG_GLU_AHEAD);
            __builtin_prefetch(g + i + PG_GLU_AHEAD);
            PG_F32V_STORE(y + i, PG_F32V_MUL(pg_act_v(act, PG_F32V_LOAD(x + i)), PG_F32V_LOAD(g + i)));
        } else {
            PG_F32V_STORE(y + i, pg_act_v(act, PG_F32V_LOAD(x + i)));
        }
    }
#endif
    for (; i < n; i++) y[i] = glu ? pg_act_1(act, x[i]) * g[i] : pg_act_1(act, x[i]);
}

/* pg_vec_<act>_f32(n, y, x): y = act(x) (in place when y == x) */
static inline void pg_vec_silu_f32(int64_t n, float * y, const float * x) {
    PG_RVV_DO(pg_rvv_silu_f32(n, y, x))
    pg_act_rows(PG_ACT_SILU, 0, n, y, x, NULL);
}
static inline void pg_vec_gelu_f32(int64_t n, float * y, const float * x) {
    PG_RVV_DO(pg_rvv_gelu_f32(n, y, x))
    pg_act_rows(PG_ACT_GELU, 0, n, y, x, NULL);
}
static inline void pg_vec_gelu_erf_f32(int64_t n, float * y, const float * x) {
    PG_RVV_DO(pg_rvv_gelu_erf_f32(n, y, x))
    pg_act_rows(PG_ACT_GELU_ERF, 0, n, y, x, NULL);
}
static inline void pg_vec_gelu_quick_f32(int64_t n, float * y, const float * x) {
    PG_RVV_DO(pg_rvv_gelu_quick_f32(n, y, x))
    pg_act_rows(PG_ACT_GELU_QUICK, 0, n, y, x, NULL);
}
static inline void pg_vec_tanh_f32(int64_t n, float * y, const float * x) {
    PG_RVV_DO(pg_rvv_tanh_f32(n, y, x))
    pg_act_rows(PG_ACT_TANH, 0, n, y, x, NULL);
}
/* pg_vec_<act>_glu_f32(n, y, x, g): y = act(x) * g, one pass (y may alias x or g) */
static inline void pg_vec_relu_glu_f32(int64_t n, float * y, const float * x, const float * g) {
    PG_RVV_DO(pg_rvv_relu_glu_f32(n, y, x, g))
    pg_act_rows(PG_ACT_RELU, 1, n, y, x, g);
}
static inline void pg_vec_gelu_glu_f32(int64_t n, float * y, const float * x, const float * g) {
    PG_RVV_DO(pg_rvv_gelu_glu_f32(n, y, x, g))
    pg_act_rows(PG_ACT_GELU, 1, n, y, x, g);
}
static inline void pg_vec_silu_glu_f32(int64_t n, float * y, const float * x, const float * g) {
    PG_RVV_DO(pg_rvv_silu_glu_f32(n, y, x, g))
    pg_act_rows(PG_ACT_SILU, 1, n, y, x, g);
}
static inline void pg_vec_gelu_erf_glu_f32(int64_t n, float * y, const float * x, const float * g) {
    PG_RVV_DO(pg_rvv_gelu_erf_glu_f32(n, y, x, g))
    pg_act_rows(PG_ACT_GELU_ERF, 1, n, y, x, g);
}
static inline void pg_vec_gelu_quick_glu_f32(int64_t n, float * y, const float * x, const float * g) {
    PG_RVV_DO(pg_rvv_gelu_quick_glu_f32(n, y, x, g))
    pg_act_rows(PG_ACT_GELU_QUICK, 1, n, y, x, g);
}

/* gpt-oss's clamped SwiGLU (ggml's GLU op SWIGLU_OAI): with xc = min(x, limit) and gc = g clamped to
 * [-limit, limit], y = xc / (1 + exp(-alpha*xc)) * (gc + 1), as ggml's loop; NaN in x or g is kept
 * (the min and the clamp keep their operand when it is NaN, as std::min and std::clamp do). The
 * sigmoid is pg_sigmul_f32's (ggml's scalar loop calls expf the same way) */
static inline float pg_swiglu_oai_f32(float x, float g, float alpha, float limit) {
    const float xc = limit < x ? limit : x;
    const float gc = g < -limit ? -limit : limit < g ? limit : g;
    return pg_sigmul_f32(xc, alpha * xc) * (gc + 1.0f);
}
static inline void pg_vec_swiglu_oai_f32(int64_t n, float * y, const float * x, const float * g, float alpha, float limit) {
    int64_t i = 0;
#if PG_HAVE_F32V
    const pg_f32v va = PG_F32V_SET1(alpha), vl = PG_F32V_SET1(limit), vnl = PG_F32V_SET1(-limit);
    const pg_f32v one = PG_F32V_SET1(1.0f);
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) {
        __builtin_prefetch(x + i + PG_GLU_AHEAD);
        __builtin_prefetch(g + i + PG_GLU_AHEAD);
        const pg_f32v xv = PG_F32V_LOAD(x + i), gv = PG_F32V_LOAD(g + i);
        const pg_f32v xc = PG_F32V_SEL_LT(vl, xv, vl, xv);
        const pg_f32v gc = PG_F32V_SEL_LT(gv, vnl, vnl, PG_F32V_SEL_LT(vl, gv, vl, gv));
        PG_F32V_STORE(y + i, PG_F32V_MUL(pg_f32v_sigmul(xc, PG_F32V_MUL(va, xc)), PG_F32V_ADD(gc, one)));
    }
#endif
    for (; i < n; i++) y[i] = pg_swiglu_oai_f32(x[i], g[i], alpha, limit);
}
