/* RoPE rows: sin and cos of the angles, and the rotation of pairs (half-split and adjacent).
 * RVV: arch/riscv/rope-rvv.c. */
#pragma once
#include "vec/cvt.h"

/* sin and cos: x = j*pi/2 + r with |r| <= pi/4 (pi/2 in three f32 parts, FMA steps; a second
 * step corrects j where x*2/pi rounded to the wrong integer, so the absolute error of r stays near
 * 1e-7 for |x| up to 2^23), Cephes' minimax polynomials on r, then the quadrant j mod 4 swaps and
 * negates. Absolute error below 1e-7 (libm's sinf/cosf: below 6e-8), i.e. ~1.5 ulp away from zeros. */
#define PG_SINCOS_2_PI 0.636619747f
#define PG_SINCOS_P1 1.57079637050628662f
#define PG_SINCOS_P2 -4.37113882867379e-08f
#define PG_SINCOS_P3 -1.71512451000588e-15f
#define PG_SIN_S1 -1.6666654611e-1f
#define PG_SIN_S2 8.3321608736e-3f
#define PG_SIN_S3 -1.9515295891e-4f
#define PG_COS_C1 4.166664568298827e-2f
#define PG_COS_C2 -1.388731625493765e-3f
#define PG_COS_C3 2.443315711809948e-5f

static inline void pg_sincosf(float x, float * s, float * c) {
    float j = nearbyintf(x * PG_SINCOS_2_PI);
    float r = fmaf(-j, PG_SINCOS_P1, x);
    r = fmaf(-j, PG_SINCOS_P2, r);
    r = fmaf(-j, PG_SINCOS_P3, r);
    const float j2 = nearbyintf(r * PG_SINCOS_2_PI);
    r = fmaf(-j2, PG_SINCOS_P2, fmaf(-j2, PG_SINCOS_P1, r));
    j += j2;
    const float z = r * r;
    const float sp = fmaf(r * z, fmaf(fmaf(PG_SIN_S3, z, PG_SIN_S2), z, PG_SIN_S1), r);
    const float cp = fmaf(z * z, fmaf(fmaf(PG_COS_C3, z, PG_COS_C2), z, PG_COS_C1), fmaf(-0.5f, z, 1.0f));
    const int q = (int) (int64_t) j & 3;
    const float ss = q & 1 ? cp : sp, cc = q & 1 ? sp : cp;
    *s = q & 2 ? -ss : ss;
    *c = (q + 1) & 2 ? -cc : cc;
}

/* c[i] = cos(x[i])*scale, s[i] = sin(x[i])*scale; c == x (in place) is allowed */
static inline void pg_vec_sincos_f32(int64_t n, const float * x, float * c, float * s, float scale) {
    PG_RVV_DO(pg_rvv_sincos_f32(n, x, c, s, scale))
    int64_t i = 0;
#if PG_HAVE_F32V
    const pg_f32v vscale = PG_F32V_SET1(scale);
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) {
        const pg_f32v vx = PG_F32V_LOAD(x + i);
        pg_f32v j = PG_F32V_ROUND(PG_F32V_MUL(vx, PG_F32V_SET1(PG_SINCOS_2_PI)));
        pg_f32v r = PG_F32V_FMA(j, PG_F32V_SET1(-PG_SINCOS_P1), vx);
        r = PG_F32V_FMA(j, PG_F32V_SET1(-PG_SINCOS_P2), r);
        r = PG_F32V_FMA(j, PG_F32V_SET1(-PG_SINCOS_P3), r);
        const pg_f32v j2 = PG_F32V_ROUND(PG_F32V_MUL(r, PG_F32V_SET1(PG_SINCOS_2_PI)));
        r = PG_F32V_FMA(j2, PG_F32V_SET1(-PG_SINCOS_P1), r);
        r = PG_F32V_FMA(j2, PG_F32V_SET1(-PG_SINCOS_P2), r);
        j = PG_F32V_ADD(j, j2);
        const pg_f32v z = PG_F32V_MUL(r, r);
        pg_f32v ps = PG_F32V_FMA(PG_F32V_SET1(PG_SIN_S3), z, PG_F32V_SET1(PG_SIN_S2));
        ps = PG_F32V_FMA(ps, z, PG_F32V_SET1(PG_SIN_S1));
        const pg_f32v sp = PG_F32V_FMA(PG_F32V_MUL(r, z), ps, r);
        pg_f32v pc = PG_F32V_FMA(PG_F32V_SET1(PG_COS_C3), z, PG_F32V_SET1(PG_COS_C2));
        pc = PG_F32V_FMA(pc, z, PG_F32V_SET1(PG_COS_C1));
        const pg_f32v cp = PG_F32V_FMA(PG_F32V_MUL(z, z), pc, PG_F32V_FMA(PG_F32V_SET1(-0.5f), z, PG_F32V_SET1(1.0f)));
        pg_f32v vs, vc;
        pg_f32v_quadrant(j, sp, cp, &vs, &vc);   /* j mod 4 swaps and negates */
        PG_F32V_STORE(c + i, PG_F32V_MUL(vc, vscale));
        PG_F32V_STORE(s + i, PG_F32V_MUL(vs, vscale));
    }
#endif
    for (; i < n; i++) {
        float si, ci;
        pg_sincosf(x[i], &si, &ci);
        c[i] = ci * scale;
        s[i] = si * scale;
    }
}

/* Rotation of pairs (x0, x1) by per-pair (c, s):  y0 = x0*c - x1*s,  y1 = x0*s + x1*c.
 * Both allow y == x (each vector of pairs is loaded before it is stored). */

/* half-split pairs (NEOX, the multi modes, VISION): pair k is (x0[k], x1[k]), k < n; all contiguous */
static inline void pg_vec_rope_half_f32(int64_t n, float * y0, float * y1, const float * x0, const float * x1,
                                        const float * c, const float * s) {
    PG_RVV_DO(pg_rvv_rope_half_f32(n, y0, y1, x0, x1, c, s))
    int64_t k = 0;
#if PG_HAVE_F32V
    for (; k + PG_F32_EPR <= n; k += PG_F32_EPR) {
        const pg_f32v a = PG_F32V_LOAD(x0 + k), b = PG_F32V_LOAD(x1 + k);
        const pg_f32v vc = PG_F32V_LOAD(c + k), vs = PG_F32V_LOAD(s + k);
        PG_F32V_STORE(y0 + k, PG_F32V_SUB(PG_F32V_MUL(a, vc), PG_F32V_MUL(b, vs)));
        PG_F32V_STORE(y1 + k, PG_F32V_FMA(a, vs, PG_F32V_MUL(b, vc)));
    }
#endif
    for (; k < n; k++) {
        const float a = x0[k], b = x1[k];
        y0[k] = a * c[k] - b * s[k];
        y1[k] = a * s[k] + b * c[k];
    }
}

/* adjacent pairs (NORMAL): pair k is (x[2k], x[2k+1]), k < n; deinterleaved into registers, rotated,
 * interleaved back */
static inline void pg_vec_rope_adj_f32(int64_t n, float * y, const float * x, const float * c, const float * s) {
    PG_RVV_DO(pg_rvv_rope_adj_f32(n, y, x, c, s))
    int64_t k = 0;
#if PG_HAVE_F32V
    for (; k + PG_F32_EPR <= n; k += PG_F32_EPR) {
        pg_f32v a, b;
        pg_f32v_load_even_odd(x + 2 * k, &a, &b);
        const pg_f32v vc = PG_F32V_LOAD(c + k), vs = PG_F32V_LOAD(s + k);
        const pg_f32v r0 = PG_F32V_SUB(PG_F32V_MUL(a, vc), PG_F32V_MUL(b, vs));
        const pg_f32v r1 = PG_F32V_FMA(a, vs, PG_F32V_MUL(b, vc));
        pg_f32v_store_interleaved(y + 2 * k, r0, r1);
    }
#endif
    for (; k < n; k++) {
        const float a = x[2 * k], b = x[2 * k + 1];
        y[2 * k] = a * c[k] - b * s[k];
        y[2 * k + 1] = a * s[k] + b * c[k];
    }
}
