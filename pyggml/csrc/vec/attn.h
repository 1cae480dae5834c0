/* Attention micro-kernels (flash_attn_ext). RVV: arch/riscv/attn-rvv.c.
 *
 * Flash attention works on blocks: a few query rows (the query heads sharing one KV head, or the
 * rows of a Q tile) against a few keys. Every K and V element loaded feeds all those rows
 * (register blocking: up to PG_ATTN_RB rows x 2 or 4 vectors of accumulators). f32 throughout. The
 * K and V vectors loaded stay in their registers (PG_F32V_KEEP). */
#pragma once
#include "vec/exp.h"

#define PG_ATTN_RB 4

/* attention dot: s[r*lds] = dot(q + r*ldq, k) for r < nr, the K row of type tk (PG_ROW_*, a
 * compile-time constant, as nr in pg_attn_dot_rb) read once per PG_ATTN_RB query rows. Two
 * accumulator chains per row hide the FMA latency when nr is small. */
PG_ALWAYS_INLINE void pg_attn_dot_rb(const int tk, const int nr, int64_t n, const float * q, int64_t ldq,
                                     const void * k, float * s, int64_t lds) {
    float sum[PG_ATTN_RB] = {0.0f, 0.0f, 0.0f, 0.0f};
    int64_t i = 0;
#if PG_HAVE_F32V
    pg_f32v a0[PG_ATTN_RB], a1[PG_ATTN_RB];
    for (int r = 0; r < nr; r++) { a0[r] = PG_F32V_ZERO(); a1[r] = PG_F32V_ZERO(); }
    for (; i + 2 * PG_F32_EPR <= n; i += 2 * PG_F32_EPR) {
        const pg_f32v k0 = pg_row_load_v(tk, k, i), k1 = pg_row_load_v(tk, k, i + PG_F32_EPR);
        for (int r = 0; r < nr; r++) {
            a0[r] = PG_F32V_FMA(k0, PG_F32V_LOAD(q + r * ldq + i), a0[r]);
            a1[r] = PG_F32V_FMA(k1, PG_F32V_LOAD(q + r * ldq + i + PG_F32_EPR), a1[r]);
        }
    }
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) {
        const pg_f32v k0 = pg_row_load_v(tk, k, i);
        for (int r = 0; r < nr; r++) a0[r] = PG_F32V_FMA(k0, PG_F32V_LOAD(q + r * ldq + i), a0[r]);
    }
    for (int r = 0; r < nr; r++) sum[r] = PG_F32V_REDUCE(PG_F32V_ADD(a0[r], a1[r]));
#endif
    for (; i < n; i++) {
        const float kf = pg_row_load_1(tk, k, i);
        for (int r = 0; r < nr; r++) sum[r] += kf * q[r * ldq + i];
    }
    for (int r = 0; r < nr; r++) s[r * lds] = sum[r];
}

/* any nr: blocks of PG_ATTN_RB rows, then the rest with nr a constant again */
PG_ALWAYS_INLINE void pg_attn_dot_rows(const int tk, int nr, int64_t n, const float * q, int64_t ldq,
                                       const void * k, float * s, int64_t lds) {
    for (; nr >= PG_ATTN_RB; nr -= PG_ATTN_RB, q += PG_ATTN_RB * ldq, s += PG_ATTN_RB * lds)
        pg_attn_dot_rb(tk, PG_ATTN_RB, n, q, ldq, k, s, lds);
    switch (nr) {
    case 3: pg_attn_dot_rb(tk, 3, n, q, ldq, k, s, lds); break;
    case 2: pg_attn_dot_rb(tk, 2, n, q, ldq, k, s, lds); break;
    case 1: pg_attn_dot_rb(tk, 1, n, q, ldq, k, s, lds); break;
    default: break;
    }
}

static inline void pg_vec_attn_dot_f32(int nr, int64_t n, const float * q, int64_t ldq, const float * k, float * s,
                                       int64_t lds) {
    PG_RVV_DO(pg_rvv_attn_dot_f32(nr, n, q, ldq, k, s, lds))
    pg_attn_dot_rows(PG_ROW_F32, nr, n, q, ldq, k, s, lds);
}
static inline void pg_vec_attn_dot_f16(int nr, int64_t n, const float * q, int64_t ldq, const pg_fp16_t * k,
                                       float * s, int64_t lds) {
    PG_RVV_DO(pg_rvv_attn_dot_f16(nr, n, q, ldq, k, s, lds))
    pg_attn_dot_rows(PG_ROW_F16, nr, n, q, ldq, k, s, lds);
}
static inline void pg_vec_attn_dot_bf16(int nr, int64_t n, const float * q, int64_t ldq, const pg_bf16_t * k,
                                        float * s, int64_t lds) {
    PG_RVV_DO(pg_rvv_attn_dot_bf16(nr, n, q, ldq, k, s, lds))
    pg_attn_dot_rows(PG_ROW_BF16, nr, n, q, ldq, k, s, lds);
}

/* online softmax over blocks of n scores of nr <= PG_ATTN_RB query rows (row r at x + r*ldx) with
 * the running max run_max[r] and softmax sum run_sum[r]: x += mv (slope*mask, row r at mv + r*ldm;
 * mv may be NULL), m = max(run_max[r], max x), x <- exp(x - m) (0 for -inf),
 * run_sum[r] = run_sum[r] * exp(run_max[r] - m) + sum x, run_max[r] = m. f[r] gets the factor
 * exp(old run_max[r] - m) the row's accumulator must be scaled by (1: nothing to do). A row the
 * block leaves fully masked (m == -inf) becomes zeros and changes nothing. The rows are
 * interleaved so that their reductions and exps overlap. */
PG_ALWAYS_INLINE void pg_vec_attn_softmax_rb(int nr, int64_t n, float * x, int64_t ldx, const float * mv,
                                                  int64_t ldm, float * run_max, float * run_sum, float * f) {
    float bmax[PG_ATTN_RB], m[PG_ATTN_RB], bsum[PG_ATTN_RB];
    int64_t i = 0;
    for (int r = 0; r < nr; r++) { bmax[r] = -INFINITY; bsum[r] = 0.0f; }
#if PG_HAVE_F32V
    if (n >= PG_F32_EPR) {
        pg_f32v vm[PG_ATTN_RB];
        for (int r = 0; r < nr; r++) vm[r] = PG_F32V_SET1(-INFINITY);
        for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) {
            for (int r = 0; r < nr; r++) {
                pg_f32v v = PG_F32V_LOAD(x + r * ldx + i);
                if (mv) {
                    v = PG_F32V_ADD(v, PG_F32V_LOAD(mv + r * ldm + i));
                    PG_F32V_STORE(x + r * ldx + i, v);
                }
                vm[r] = PG_F32V_MAX(vm[r], v);
            }
        }
        for (int r = 0; r < nr; r++) bmax[r] = PG_F32V_REDUCE_MAX(vm[r]);
    }
#endif
    for (int64_t j = i; j < n; j++) {
        for (int r = 0; r < nr; r++) {
            if (mv) x[r * ldx + j] += mv[r * ldm + j];
            bmax[r] = x[r * ldx + j] > bmax[r] ? x[r * ldx + j] : bmax[r];
        }
    }
    for (int r = 0; r < nr; r++) {
        m[r] = PG_MAX(run_max[r], bmax[r]);
        f[r] = m[r] > run_max[r] ? pg_expf(run_max[r] - m[r]) : 1.0f;
        run_max[r] = m[r];
        if (m[r] == -INFINITY) m[r] = INFINITY;    /* fully masked so far: exp(-inf - inf) = 0 */
    }
#if PG_HAVE_F32V
    if (n >= PG_F32_EPR) {
        pg_f32v va[PG_ATTN_RB], vmr[PG_ATTN_RB];
        for (int r = 0; r < nr; r++) { va[r] = PG_F32V_ZERO(); vmr[r] = PG_F32V_SET1(m[r]); }
        for (int64_t j = 0; j < i; j += PG_F32_EPR) {
            for (int r = 0; r < nr; r++) {
                const pg_f32v e = pg_f32v_exp_attn(PG_F32V_SUB(PG_F32V_LOAD(x + r * ldx + j), vmr[r]));
                PG_F32V_STORE(x + r * ldx + j, e);
                va[r] = PG_F32V_ADD(va[r], e);
            }
        }
        for (int r = 0; r < nr; r++) bsum[r] = PG_F32V_REDUCE(va[r]);
    }
#endif
    for (int64_t j = i; j < n; j++) {
        for (int r = 0; r < nr; r++) {
            x[r * ldx + j] = pg_expf(x[r * ldx + j] - m[r]);
            bsum[r] += x[r * ldx + j];
        }
    }
    for (int r = 0; r < nr; r++) run_sum[r] = run_sum[r] * f[r] + bsum[r];
}

static inline void pg_vec_attn_softmax_rows_f32(int nr, int64_t n, float * x, int64_t ldx, const float * mv,
                                                int64_t ldm, float * run_max, float * run_sum, float * f) {
    PG_RVV_DO(pg_rvv_attn_softmax_rows_f32(nr, n, x, ldx, mv, ldm, run_max, run_sum, f))
    switch (nr) {
    case 4: pg_vec_attn_softmax_rb(4, n, x, ldx, mv, ldm, run_max, run_sum, f); break;
    case 3: pg_vec_attn_softmax_rb(3, n, x, ldx, mv, ldm, run_max, run_sum, f); break;
    case 2: pg_vec_attn_softmax_rb(2, n, x, ldx, mv, ldm, run_max, run_sum, f); break;
    default: pg_vec_attn_softmax_rb(1, n, x, ldx, mv, ldm, run_max, run_sum, f); break;
    }
}

/* one row: returns the accumulator factor */
static inline float pg_vec_attn_softmax_f32(int64_t n, float * x, const float * mv, float * run_max, float * run_sum) {
    float f;
    pg_vec_attn_softmax_rows_f32(1, n, x, 0, mv, 0, run_max, run_sum, &f);
    return f;
}

/* one query row of a mask tile: y[j] = slope * m[j] for j < n (slope > 0), and the range of keys
 * that can get weight: *lo = the first j whose value is not -inf, *hi = one past the last one
 * (*lo >= *hi when every key is masked). */
static inline void pg_vec_attn_mask_f16(int64_t n, const pg_fp16_t * m, float slope, float * y, int64_t * lo, int64_t * hi) {
    PG_RVV_DO(pg_rvv_attn_mask_f16(n, m, slope, y, lo, hi))
    int64_t l = n, h = 0, i = 0;
#if PG_HAVE_F32V
    const pg_f32v vs = PG_F32V_SET1(slope);
    for (; i + PG_F32_EPR <= n; i += PG_F32_EPR) {
        const pg_f32v v = PG_F32V_MUL(PG_F32V_LOAD_F16(m + i), vs);
        PG_F32V_STORE(y + i, v);
        const uint32_t bits = pg_f32v_live_bits(v);
        if (bits) {
            if (l == n) l = i + __builtin_ctz(bits);
            h = i + 32 - __builtin_clz(bits);
        }
    }
#endif
    for (; i < n; i++) {
        y[i] = slope * pg_fp16_to_fp32(m[i]);
        if (y[i] != -INFINITY) {
            if (l == n) l = i;
            h = i + 1;
        }
    }
    *lo = l;
    *hi = h;
}

/* V accumulation: acc[r*lda + d] = f[r] * acc[r*lda + d] + sum_{j<nk} p[r*ldp + j] * v_j[d] for
 * r < nr, d < n, where v_j = v + j*nbv bytes is a row of type tv (PG_ROW_*) and f (the online-softmax
 * rescale of each row) may be NULL (1). Each V vector is loaded once per PG_ATTN_RB rows and the
 * accumulators stay in registers over the nk keys. */
#if PG_HAVE_F32V
/* the columns from d on in blocks of nv <= 4 vectors (tv, nr, nv compile-time constants); returns
 * the first column left */
PG_ALWAYS_INLINE int64_t pg_attn_acc_vecs(const int tv, const int nv, const int nr, int64_t d, int64_t n,
                                          float * acc, int64_t lda, int64_t nk, const float * p, int64_t ldp,
                                          const void * v, size_t nbv, const float * f) {
    for (; d + nv * PG_F32_EPR <= n; d += nv * PG_F32_EPR) {
        pg_f32v c[PG_ATTN_RB][4];
        for (int r = 0; r < nr; r++) {
            const pg_f32v fr = PG_F32V_SET1(f ? f[r] : 1.0f);
            for (int u = 0; u < nv; u++)
                c[r][u] = PG_F32V_MUL(PG_F32V_LOAD(acc + r * lda + d + u * PG_F32_EPR), fr);
        }
        for (int64_t j = 0; j < nk; j++) {
            const void * vj = pg_row_at(tv, (const char *) v + j * nbv, d);
            pg_f32v vv[4];
            for (int u = 0; u < nv; u++) { vv[u] = pg_row_load_v(tv, vj, u * PG_F32_EPR); PG_F32V_KEEP(vv[u]); }
            for (int r = 0; r < nr; r++) {
                const pg_f32v pb = PG_F32V_SET1(p[r * ldp + j]);
                for (int u = 0; u < nv; u++) c[r][u] = PG_F32V_FMA(vv[u], pb, c[r][u]);
            }
        }
        for (int r = 0; r < nr; r++)
            for (int u = 0; u < nv; u++) PG_F32V_STORE(acc + r * lda + d + u * PG_F32_EPR, c[r][u]);
    }
    return d;
}
#endif

PG_ALWAYS_INLINE void pg_attn_acc_rb(const int tv, const int nr, int64_t n, float * acc, int64_t lda, int64_t nk,
                                     const float * p, int64_t ldp, const void * v, size_t nbv, const float * f) {
    int64_t d = 0;
#if PG_HAVE_F32V
    d = pg_attn_acc_vecs(tv, 4, nr, d, n, acc, lda, nk, p, ldp, v, nbv, f);
    d = pg_attn_acc_vecs(tv, 1, nr, d, n, acc, lda, nk, p, ldp, v, nbv, f);
#endif
    for (; d < n; d++) {
        for (int r = 0; r < nr; r++) {
            float c = f ? f[r] * acc[r * lda + d] : acc[r * lda + d];
            for (int64_t j = 0; j < nk; j++) c += p[r * ldp + j] * pg_row_load_1(tv, (const char *) v + j * nbv, d);
            acc[r * lda + d] = c;
        }
    }
}

PG_ALWAYS_INLINE void pg_attn_acc_rows(const int tv, int nr, int64_t n, float * acc, int64_t lda, int64_t nk,
                                       const float * p, int64_t ldp, const void * v, size_t nbv, const float * f) {
    for (; nr >= PG_ATTN_RB; nr -= PG_ATTN_RB, acc += PG_ATTN_RB * lda, p += PG_ATTN_RB * ldp,
                             f = f ? f + PG_ATTN_RB : NULL)
        pg_attn_acc_rb(tv, PG_ATTN_RB, n, acc, lda, nk, p, ldp, v, nbv, f);
    switch (nr) {
    case 3: pg_attn_acc_rb(tv, 3, n, acc, lda, nk, p, ldp, v, nbv, f); break;
    case 2: pg_attn_acc_rb(tv, 2, n, acc, lda, nk, p, ldp, v, nbv, f); break;
    case 1: pg_attn_acc_rb(tv, 1, n, acc, lda, nk, p, ldp, v, nbv, f); break;
    default: break;
    }
}

static inline void pg_vec_attn_acc_f32(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p,
                                       int64_t ldp, const float * v, size_t nbv, const float * f) {
    PG_RVV_DO(pg_rvv_attn_acc_f32(nr, n, acc, lda, nk, p, ldp, v, nbv, f))
    pg_attn_acc_rows(PG_ROW_F32, nr, n, acc, lda, nk, p, ldp, v, nbv, f);
}
static inline void pg_vec_attn_acc_f16(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p,
                                       int64_t ldp, const pg_fp16_t * v, size_t nbv, const float * f) {
    PG_RVV_DO(pg_rvv_attn_acc_f16(nr, n, acc, lda, nk, p, ldp, v, nbv, f))
    pg_attn_acc_rows(PG_ROW_F16, nr, n, acc, lda, nk, p, ldp, v, nbv, f);
}
static inline void pg_vec_attn_acc_bf16(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p,
                                        int64_t ldp, const pg_bf16_t * v, size_t nbv, const float * f) {
    PG_RVV_DO(pg_rvv_attn_acc_bf16(nr, n, acc, lda, nk, p, ldp, v, nbv, f))
    pg_attn_acc_rows(PG_ROW_BF16, nr, n, acc, lda, nk, p, ldp, v, nbv, f);
}

/* tiled micro-GEMM: s[r*lds + c] = sum_{d<dk} q[r*ldq + d] * kt[d*ldk + c] for r < nr, c < nc, with K
 * stored transposed (key index fastest) so that one vector holds PG_F32_EPR keys. Blocks of
 * PG_ATTN_RB rows x 4, 2, 1 vectors of keys: each K vector loaded feeds PG_ATTN_RB FMAs. */
#if PG_HAVE_F32V
/* the key columns from c on in blocks of nv <= 4 vectors (nr, nv compile-time constants); returns
 * the first column left */
PG_ALWAYS_INLINE int64_t pg_attn_qk_vecs(const int nv, const int nr, int64_t c, int64_t nc, int64_t dk,
                                         const float * q, int64_t ldq, const float * kt, int64_t ldk,
                                         float * s, int64_t lds) {
    for (; c + nv * PG_F32_EPR <= nc; c += nv * PG_F32_EPR) {
        pg_f32v a[PG_ATTN_RB][4];
        for (int r = 0; r < nr; r++)
            for (int u = 0; u < nv; u++) a[r][u] = PG_F32V_ZERO();
        for (int64_t d = 0; d < dk; d++) {
            pg_f32v kv[4];
            for (int u = 0; u < nv; u++) {
                kv[u] = PG_F32V_LOAD(kt + d * ldk + c + u * PG_F32_EPR);
                PG_F32V_KEEP(kv[u]);
            }
            for (int r = 0; r < nr; r++) {
                const pg_f32v qb = PG_F32V_SET1(q[r * ldq + d]);
                for (int u = 0; u < nv; u++) a[r][u] = PG_F32V_FMA(qb, kv[u], a[r][u]);
            }
        }
        for (int r = 0; r < nr; r++)
            for (int u = 0; u < nv; u++) PG_F32V_STORE(s + r * lds + c + u * PG_F32_EPR, a[r][u]);
    }
    return c;
}
#endif

PG_ALWAYS_INLINE void pg_vec_attn_gemm_qk_rb(int nr, int64_t nc, int64_t dk, const float * q, int64_t ldq,
                                                  const float * kt, int64_t ldk, float * s, int64_t lds) {
    int64_t c = 0;
#if PG_HAVE_F32V
    c = pg_attn_qk_vecs(4, nr, c, nc, dk, q, ldq, kt, ldk, s, lds);
    c = pg_attn_qk_vecs(2, nr, c, nc, dk, q, ldq, kt, ldk, s, lds);
    c = pg_attn_qk_vecs(1, nr, c, nc, dk, q, ldq, kt, ldk, s, lds);
#endif
    for (; c < nc; c++) {
        for (int r = 0; r < nr; r++) {
            float a = 0.0f;
            for (int64_t d = 0; d < dk; d++) a += q[r * ldq + d] * kt[d * ldk + c];
            s[r * lds + c] = a;
        }
    }
}

static inline void pg_vec_attn_gemm_qk_f32(int nr, int64_t nc, int64_t dk, const float * q, int64_t ldq,
                                           const float * kt, int64_t ldk, float * s, int64_t lds) {
    PG_RVV_DO(pg_rvv_attn_gemm_qk_f32(nr, nc, dk, q, ldq, kt, ldk, s, lds))
    for (; nr >= PG_ATTN_RB; nr -= PG_ATTN_RB, q += PG_ATTN_RB * ldq, s += PG_ATTN_RB * lds)
        pg_vec_attn_gemm_qk_rb(PG_ATTN_RB, nc, dk, q, ldq, kt, ldk, s, lds);
    switch (nr) {
    case 3: pg_vec_attn_gemm_qk_rb(3, nc, dk, q, ldq, kt, ldk, s, lds); break;
    case 2: pg_vec_attn_gemm_qk_rb(2, nc, dk, q, ldq, kt, ldk, s, lds); break;
    case 1: pg_vec_attn_gemm_qk_rb(1, nc, dk, q, ldq, kt, ldk, s, lds); break;
    default: break;
    }
}

/* transpose: y[c*ldy + r] = x[r*ldx + c] for r < nr, c < nc (the K tile, key index made fastest).
 * Square blocks of PG_F32_EPR x PG_F32_EPR go through registers; the edges are copied one by one. */
static inline void pg_vec_attn_transpose_f32(int64_t nr, int64_t nc, const float * x, int64_t ldx, float * y, int64_t ldy) {
    PG_RVV_DO(pg_rvv_attn_transpose_f32(nr, nc, x, ldx, y, ldy))
    int64_t r0 = 0, c0 = 0;
#if PG_HAVE_F32V
    for (; r0 + PG_F32_EPR <= nr; r0 += PG_F32_EPR)
        for (int64_t c = 0; c + PG_F32_EPR <= nc; c += PG_F32_EPR)
            pg_f32v_transpose(x + r0 * ldx + c, ldx, y + c * ldy + r0, ldy);
    c0 = nc / PG_F32_EPR * PG_F32_EPR;
#endif
    /* the rows below the last whole block (all columns), then the right edge of the blocked rows */
    for (int64_t r = r0; r < nr; r++)
        for (int64_t c = 0; c < nc; c++) y[c * ldy + r] = x[r * ldx + c];
    for (int64_t r = 0; r < r0; r++)
        for (int64_t c = c0; c < nc; c++) y[c * ldy + r] = x[r * ldx + c];
}
