/* Row sums of the norms (in double) and the scaled multiply of rms_norm * weight.
 * RVV: arch/riscv/norm-rvv.c. */
#pragma once
#include "vec/cvt.h"

/* Row reductions in double, as ggml's norms (which add every term to a double): f32 values v,
 * squared in f32 where the op squares, widened and added to double lanes. The lane order differs
 * from ggml's sequential sum only by double rounding, far below what the f32 results can show.
 * Every primitive below shares one loop (pg_norm_acc), so the same values give the same sum bit for
 * bit whether they arrive from a tensor, from x + r or from x - mean.
 *
 * pg_f64acc_add (arch/<arch>/<isa>.h) widens with the ISA's f32 -> f64 conversion. pg_f64acc_add_sq adds v*v; on x86 it
 * skips the conversion, which is what bounds the loop (vcvtps2pd is cross-lane, and double-pumped
 * on Zen 4): the bits of a square q >= 0 moved up by 29 within a
 * 64-bit lane are those of the double q * 2^-896 (the f32 exponent lands in the double's, the
 * mantissa on top of the double's; f32 subnormals become double subnormals with the same factor).
 * The move is an unsigned 32 x 32 -> 64-bit multiply by 2^29 (vpmuludq reads the even element, the
 * low half of each lane, and ignores the other), the odd element first shifted down by 32: one
 * shift per vector instead of two, which were the bottleneck (docs/bench/norm.md). The sums are exact in scaled form
 * (every term a multiple of 2^-1045), and PG_SQ_SCALE undoes the factor. Inf or NaN squares turn
 * into finite garbage, so a scaled sum >= 2^128 (which only huge or non-finite values give) is redone
 * by a scalar loop. */
#ifndef PG_SQ_SCALE
#define PG_SQ_SCALE 1.0
#endif

/* what pg_norm_acc does with each element (compile-time flags: every caller passes constants) */
enum {
    PG_NA_SQUARES = 1,    /* add v*v (pg_f64acc_add_sq, undone by PG_SQ_SCALE), else v */
    PG_NA_ADD_R = 2,      /* v = x + r, else v = x */
    PG_NA_SUB_MEAN = 4,   /* v = x - mean */
    PG_NA_STORE = 8,      /* y = v */
};

/* The shared loop: v is x[i], x[i] + r[i] or x[i] - mean, stored to y[i] where the primitive writes
 * one, and v or v*v added in double. Two accumulators hide the add latency. A squares sum that comes
 * out >= 2^128 after PG_SQ_SCALE (see above) is redone by the scalar loop over the values, read back
 * from y where they were stored or from x. */
#if PG_HAVE_F32V
PG_ALWAYS_INLINE pg_f32v pg_norm_val(const int mode, const float * x, const float * r, pg_f32v vm, int64_t i) {
    pg_f32v v = PG_F32V_LOAD(x + i);
    if (mode & PG_NA_ADD_R) v = PG_F32V_ADD(v, PG_F32V_LOAD(r + i));
    if (mode & PG_NA_SUB_MEAN) v = PG_F32V_SUB(v, vm);
    return v;
}

PG_ALWAYS_INLINE pg_f64acc pg_norm_add(const int mode, pg_f64acc a, pg_f32v v) {
    return mode & PG_NA_SQUARES ? pg_f64acc_add_sq(a, v) : pg_f64acc_add(a, v);
}
#endif

PG_ALWAYS_INLINE double pg_norm_acc(const int mode, int64_t n, float * y, const float * x, const float * r,
                                    float mean) {
    double sum = 0.0;
    int64_t i = 0;
#if PG_HAVE_F32V
    const pg_f32v vm = PG_F32V_SET1(mean);
    pg_f64acc a0 = pg_f64acc_zero(), a1 = pg_f64acc_zero();
    for (; i + 2 * PG_F32_EPR <= n; i += 2 * PG_F32_EPR) {
        const pg_f32v v0 = pg_norm_val(mode, x, r, vm, i), v1 = pg_norm_val(mode, x, r, vm, i + PG_F32_EPR);
        if (mode & PG_NA_STORE) {
            PG_F32V_STORE(y + i, v0);
            PG_F32V_STORE(y + i + PG_F32_EPR, v1);
        }
        a0 = pg_norm_add(mode, a0, v0);
        a1 = pg_norm_add(mode, a1, v1);
    }
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) {
        const pg_f32v v0 = pg_norm_val(mode, x, r, vm, i);
        if (mode & PG_NA_STORE) PG_F32V_STORE(y + i, v0);
        a0 = pg_norm_add(mode, a0, v0);
    }
    const double scale = mode & PG_NA_SQUARES ? PG_SQ_SCALE : 1.0;
    sum = pg_f64acc_reduce(a0, a1) * scale;
    if (scale != 1.0 && !(sum < 0x1p128)) {
        sum = 0.0;
        for (int64_t k = 0; k < i; k++) {
            const float v = mode & PG_NA_STORE ? y[k] : x[k];
            sum += (double) (v * v);
        }
    }
#endif
    for (; i < n; i++) {
        const float v = mode & PG_NA_ADD_R ? x[i] + r[i] : mode & PG_NA_SUB_MEAN ? x[i] - mean : x[i];
        if (mode & PG_NA_STORE) y[i] = v;
        sum += (double) (mode & PG_NA_SQUARES ? v * v : v);
    }
    return sum;
}

/* Σ x in double (ggml_vec_sum_f32's accuracy) */
static inline double pg_vec_sum_f64_f32(int64_t n, const float * x) {
    PG_RVV_RETURN(pg_rvv_sum_f64_f32(n, x))
    return pg_norm_acc(0, n, NULL, x, NULL, 0.0f);
}

/* Σ x*x: each square rounded to f32, added in double (rms_norm) */
static inline double pg_vec_sumsq_f32(int64_t n, const float * x) {
    PG_RVV_RETURN(pg_rvv_sumsq_f32(n, x))
    return pg_norm_acc(PG_NA_SQUARES, n, NULL, x, NULL, 0.0f);
}

/* y = x + r (f32, as ADD) and Σ y*y as pg_vec_sumsq_f32(y): the residual add fused into rms_norm */
static inline double pg_vec_add_sumsq_f32(int64_t n, float * y, const float * x, const float * r) {
    PG_RVV_RETURN(pg_rvv_add_sumsq_f32(n, y, x, r))
    return pg_norm_acc(PG_NA_SQUARES | PG_NA_ADD_R | PG_NA_STORE, n, y, x, r, 0.0f);
}

/* y = x - mean and Σ y*y (ggml_vec_cvar_f32 before its division by n) */
static inline double pg_vec_cvar_f32(int64_t n, float * y, const float * x, float mean) {
    PG_RVV_RETURN(pg_rvv_cvar_f32(n, y, x, mean))
    return pg_norm_acc(PG_NA_SQUARES | PG_NA_SUB_MEAN | PG_NA_STORE, n, y, x, NULL, mean);
}

/* y = (x*s)*w with both products rounded, as scale then mul (rms_norm * weight, fused) */
static inline void pg_vec_scale_mul_f32(int64_t n, float * y, const float * x, float s, const float * w) {
    PG_RVV_DO(pg_rvv_scale_mul_f32(n, y, x, s, w))
    int64_t i = 0;
#if PG_HAVE_F32V
    const pg_f32v vs = PG_F32V_SET1(s);
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR)
        PG_F32V_STORE(y + i, PG_F32V_MUL(PG_F32V_MUL(PG_F32V_LOAD(x + i), vs), PG_F32V_LOAD(w + i)));
#endif
    for (; i < n; i++) y[i] = (x[i] * s) * w[i];
}
