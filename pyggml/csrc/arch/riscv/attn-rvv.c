/* RVV 1.0 kernels of vec/attn.h (attention micro-kernels): compiled with V, chosen at run time (arch/riscv/rvv.h).
 * Every loop is strip-mined with vsetvl, so any VLEN works and there is no scalar tail; LMUL is chosen
 * per kernel from the registers it keeps live. Accumulators that outlive a shorter last strip use the
 * _tu (tail undisturbed) intrinsics, or the lanes past vl would be clobbered (qemu's
 * rvv_ta_all_1s=true fills them with NaN bits, so tests catch it). */
#include "vec/attn.h"
#include "arch/riscv/dot-rvv.h"
#include "arch/riscv/exp-rvv.h"

/* K rows of type tk (PG_ROW_*, a compile-time constant) against nr query rows, four at a time */
PG_ALWAYS_INLINE void pg_rvv_attn_dot(const int tk, int nr, int64_t n, const float * q, int64_t ldq, const void * k,
                                      float * s, int64_t lds) {
    for (; nr > 0; nr -= 4, q += 4 * ldq, s += 4 * lds) {
        const float * const y[4] = {q, q + ldq, q + 2 * ldq, q + 3 * ldq};
        switch (nr) {
        case 1: pg_rvv_dot_rows(tk, 1, n, k, y, s, lds); break;
        case 2: pg_rvv_dot_rows(tk, 2, n, k, y, s, lds); break;
        case 3: pg_rvv_dot_rows(tk, 3, n, k, y, s, lds); break;
        default: pg_rvv_dot_rows(tk, 4, n, k, y, s, lds); break;
        }
    }
}
void pg_rvv_attn_dot_f32(int nr, int64_t n, const float * q, int64_t ldq, const float * k, float * s, int64_t lds) {
    pg_rvv_attn_dot(PG_ROW_F32, nr, n, q, ldq, k, s, lds);
}
void pg_rvv_attn_dot_f16(int nr, int64_t n, const float * q, int64_t ldq, const pg_fp16_t * k, float * s, int64_t lds) {
    pg_rvv_attn_dot(PG_ROW_F16, nr, n, q, ldq, k, s, lds);
}
void pg_rvv_attn_dot_bf16(int nr, int64_t n, const float * q, int64_t ldq, const pg_bf16_t * k, float * s, int64_t lds) {
    pg_rvv_attn_dot(PG_ROW_BF16, nr, n, q, ldq, k, s, lds);
}

/* online softmax, row by row: x += mv and the max (e32 m8, _tu), then exp and sum (exp_sum) */
void pg_rvv_attn_softmax_rows_f32(int nr, int64_t n, float * x, int64_t ldx, const float * mv, int64_t ldm,
                                  float * run_max, float * run_sum, float * f) {
    const size_t vlmax = __riscv_vsetvlmax_e32m8();
    const vfloat32m1_t ninf = __riscv_vfmv_s_f_f32m1(-INFINITY, 1);
    for (int r = 0; r < nr; r++, x += ldx, mv = mv ? mv + ldm : NULL) {
        vfloat32m8_t vm = __riscv_vfmv_v_f_f32m8(-INFINITY, vlmax);
        for (size_t vl, i = 0; i < (size_t) n; i += vl) {
            vl = __riscv_vsetvl_e32m8((size_t) n - i);
            vfloat32m8_t v = __riscv_vle32_v_f32m8(x + i, vl);
            if (mv) {
                v = __riscv_vfadd_vv_f32m8(v, __riscv_vle32_v_f32m8(mv + i, vl), vl);
                __riscv_vse32_v_f32m8(x + i, v, vl);
            }
            vm = __riscv_vfmax_vv_f32m8_tu(vm, vm, v, vl);
        }
        const float bmax = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredmax_vs_f32m8_f32m1(vm, ninf, vlmax));
        float m = PG_MAX(run_max[r], bmax);
        f[r] = m > run_max[r] ? pg_expf(run_max[r] - m) : 1.0f;
        run_max[r] = m;
        if (m == -INFINITY) m = INFINITY;    /* fully masked so far: exp(-inf - inf) = 0 */
        run_sum[r] = run_sum[r] * f[r] + (float) pg_rvv_exp_sum(n, x, x, m);
    }
}

/* y = slope*m, and the range [lo, hi) of lanes that are not -inf: the first from vfirst, the last
 * as the largest lane index under the live mask (e32 m4) */
void pg_rvv_attn_mask_f16(int64_t n, const pg_fp16_t * m, float slope, float * y, int64_t * lo, int64_t * hi) {
    int64_t l = n, h = 0;
    const vuint32m1_t zero = __riscv_vmv_s_x_u32m1(0, 1);
    for (size_t vl, i = 0; i < (size_t) n; i += vl) {
        vl = __riscv_vsetvl_e32m4((size_t) n - i);
        const vfloat32m4_t v = __riscv_vfmul_vf_f32m4(pg_rvv_load_f16(m + i, vl), slope, vl);
        __riscv_vse32_v_f32m4(y + i, v, vl);
        const vbool8_t live = __riscv_vmfne_vf_f32m4_b8(v, -INFINITY, vl);
        const long first = __riscv_vfirst_m_b8(live, vl);
        if (first >= 0) {
            if (l == n) l = (int64_t) i + first;
            const vuint32m1_t last = __riscv_vredmaxu_vs_u32m4_u32m1_m(live, __riscv_vid_v_u32m4(vl), zero, vl);
            h = (int64_t) i + __riscv_vmv_x_s_u32m1_u32(last) + 1;
        }
    }
    *lo = l;
    *hi = h;
}

/* V accumulation: per strip of d (e32 m4), up to four rows' accumulators loaded (and scaled by f)
 * once, then every key's V strip (widened once) feeds all of them */
PG_ALWAYS_INLINE void pg_rvv_attn_acc_rb(const int tv, const int nr, int64_t n, float * acc, int64_t lda, int64_t nk,
                                         const float * p, int64_t ldp, const void * v, size_t nbv, const float * f) {
    for (size_t vl, d = 0; d < (size_t) n; d += vl) {
        vl = __riscv_vsetvl_e32m4((size_t) n - d);
        vfloat32m4_t c0 = __riscv_vle32_v_f32m4(acc + d, vl), c1 = c0, c2 = c0, c3 = c0;
        if (nr > 1) c1 = __riscv_vle32_v_f32m4(acc + lda + d, vl);
        if (nr > 2) c2 = __riscv_vle32_v_f32m4(acc + 2 * lda + d, vl);
        if (nr > 3) c3 = __riscv_vle32_v_f32m4(acc + 3 * lda + d, vl);
        if (f) {
            c0 = __riscv_vfmul_vf_f32m4(c0, f[0], vl);
            if (nr > 1) c1 = __riscv_vfmul_vf_f32m4(c1, f[1], vl);
            if (nr > 2) c2 = __riscv_vfmul_vf_f32m4(c2, f[2], vl);
            if (nr > 3) c3 = __riscv_vfmul_vf_f32m4(c3, f[3], vl);
        }
        for (int64_t j = 0; j < nk; j++) {
            const vfloat32m4_t vv = pg_rvv_load_row(tv, (const char *) v + j * nbv, d, vl);
            c0 = __riscv_vfmacc_vf_f32m4(c0, p[j], vv, vl);
            if (nr > 1) c1 = __riscv_vfmacc_vf_f32m4(c1, p[ldp + j], vv, vl);
            if (nr > 2) c2 = __riscv_vfmacc_vf_f32m4(c2, p[2 * ldp + j], vv, vl);
            if (nr > 3) c3 = __riscv_vfmacc_vf_f32m4(c3, p[3 * ldp + j], vv, vl);
        }
        __riscv_vse32_v_f32m4(acc + d, c0, vl);
        if (nr > 1) __riscv_vse32_v_f32m4(acc + lda + d, c1, vl);
        if (nr > 2) __riscv_vse32_v_f32m4(acc + 2 * lda + d, c2, vl);
        if (nr > 3) __riscv_vse32_v_f32m4(acc + 3 * lda + d, c3, vl);
    }
}
/* V rows of type tv (PG_ROW_*, a compile-time constant), four accumulator rows at a time */
PG_ALWAYS_INLINE void pg_rvv_attn_acc(const int tv, int nr, int64_t n, float * acc, int64_t lda, int64_t nk,
                                      const float * p, int64_t ldp, const void * v, size_t nbv, const float * f) {
    for (; nr > 0; nr -= 4, acc += 4 * lda, p += 4 * ldp, f = f ? f + 4 : NULL) {
        switch (nr) {
        case 1: pg_rvv_attn_acc_rb(tv, 1, n, acc, lda, nk, p, ldp, v, nbv, f); break;
        case 2: pg_rvv_attn_acc_rb(tv, 2, n, acc, lda, nk, p, ldp, v, nbv, f); break;
        case 3: pg_rvv_attn_acc_rb(tv, 3, n, acc, lda, nk, p, ldp, v, nbv, f); break;
        default: pg_rvv_attn_acc_rb(tv, 4, n, acc, lda, nk, p, ldp, v, nbv, f); break;
        }
    }
}
void pg_rvv_attn_acc_f32(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p, int64_t ldp,
                         const float * v, size_t nbv, const float * f) {
    pg_rvv_attn_acc(PG_ROW_F32, nr, n, acc, lda, nk, p, ldp, v, nbv, f);
}
void pg_rvv_attn_acc_f16(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p, int64_t ldp,
                         const pg_fp16_t * v, size_t nbv, const float * f) {
    pg_rvv_attn_acc(PG_ROW_F16, nr, n, acc, lda, nk, p, ldp, v, nbv, f);
}
void pg_rvv_attn_acc_bf16(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p, int64_t ldp,
                          const pg_bf16_t * v, size_t nbv, const float * f) {
    pg_rvv_attn_acc(PG_ROW_BF16, nr, n, acc, lda, nk, p, ldp, v, nbv, f);
}

/* tiled QK^T: per strip of keys (e32 m4), up to four rows' accumulators over d, each K strip
 * loaded once for all of them */
PG_ALWAYS_INLINE void pg_rvv_attn_gemm_qk_rb(const int nr, int64_t nc, int64_t dk,
        const float * q, int64_t ldq, const float * kt, int64_t ldk, float * s, int64_t lds) {
    for (size_t vl, c = 0; c < (size_t) nc; c += vl) {
        vl = __riscv_vsetvl_e32m4((size_t) nc - c);
        vfloat32m4_t a0 = __riscv_vfmv_v_f_f32m4(0.0f, vl), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t d = 0; d < dk; d++) {
            const vfloat32m4_t kv = __riscv_vle32_v_f32m4(kt + d * ldk + c, vl);
            a0 = __riscv_vfmacc_vf_f32m4(a0, q[d], kv, vl);
            if (nr > 1) a1 = __riscv_vfmacc_vf_f32m4(a1, q[ldq + d], kv, vl);
            if (nr > 2) a2 = __riscv_vfmacc_vf_f32m4(a2, q[2 * ldq + d], kv, vl);
            if (nr > 3) a3 = __riscv_vfmacc_vf_f32m4(a3, q[3 * ldq + d], kv, vl);
        }
        __riscv_vse32_v_f32m4(s + c, a0, vl);
        if (nr > 1) __riscv_vse32_v_f32m4(s + lds + c, a1, vl);
        if (nr > 2) __riscv_vse32_v_f32m4(s + 2 * lds + c, a2, vl);
        if (nr > 3) __riscv_vse32_v_f32m4(s + 3 * lds + c, a3, vl);
    }
}

void pg_rvv_attn_gemm_qk_f32(int nr, int64_t nc, int64_t dk, const float * q, int64_t ldq,
                             const float * kt, int64_t ldk, float * s, int64_t lds) {
    for (; nr > 0; nr -= 4, q += 4 * ldq, s += 4 * lds) {
        switch (nr) {
        case 1: pg_rvv_attn_gemm_qk_rb(1, nc, dk, q, ldq, kt, ldk, s, lds); break;
        case 2: pg_rvv_attn_gemm_qk_rb(2, nc, dk, q, ldq, kt, ldk, s, lds); break;
        case 3: pg_rvv_attn_gemm_qk_rb(3, nc, dk, q, ldq, kt, ldk, s, lds); break;
        default: pg_rvv_attn_gemm_qk_rb(4, nc, dk, q, ldq, kt, ldk, s, lds); break;
        }
    }
}

/* transpose: each row of x loaded contiguously and stored down a column of y with a strided store
 * (e32 m8) */
void pg_rvv_attn_transpose_f32(int64_t nr, int64_t nc, const float * x, int64_t ldx, float * y, int64_t ldy) {
    const ptrdiff_t stride = (ptrdiff_t) (ldy * (int64_t) sizeof(float));
    for (int64_t r = 0; r < nr; r++) {
        for (size_t vl, c = 0; c < (size_t) nc; c += vl) {
            vl = __riscv_vsetvl_e32m8((size_t) nc - c);
            __riscv_vsse32_v_f32m8(y + c * ldy + r, stride, __riscv_vle32_v_f32m8(x + r * ldx + c, vl), vl);
        }
    }
}
