/* RVV 1.0 on riscv64: how the kernels get compiled and chosen.
 *
 * A riscv64 build (-Dsimd=native, meson defines PYGGML_RVV) compiles only the RVV translation units
 * with V: arch/riscv/<family>-rvv.c, one per family header, built with -march=<rvv_march> from the
 * cross file (default rv64gcv) into one static library. Everything else, the Cython modules and the
 * op headers included there, is built for the base ISA (rv64gc), so clang cannot auto-vectorise a
 * single instruction of the import path with V and the module loads on any riscv64 CPU. The row
 * primitives (vec/<family>.h) start with PG_RVV_RETURN/PG_RVV_DO: when the CPU reports V at run time
 * (getauxval(AT_HWCAP) bit 'V' - 'A' = 21) they call pg_rvv_<name> of arch/riscv/<family>-rvv.c with the
 * same arguments, otherwise they run their scalar loop. Op headers never see the switch.
 *
 *   module TUs (rv64gc)                       arch/riscv/dot-rvv.c (rv64gcv)
 *   pg_vec_dot_f32(n, x, y) --pg_rvv_on()--> pg_rvv_dot_f32(n, x, y)   strip-mined vsetvl
 *                           \--otherwise---> scalar loop
 *
 * This header is included by both sides and holds no vector code itself; arch/riscv/rvv-mappings.h holds
 * what the RVV translation units share.
 */
#pragma once
#include <sys/auxv.h>
#include "core/pyggml.h"

/* 1 when this CPU runs RVV; read once per translation unit (all threads read the same value) */
static inline int pg_rvv_on(void) {
    static int on = -1;
    int v = __atomic_load_n(&on, __ATOMIC_RELAXED);
    if (v < 0) {
        v = (int) ((getauxval(AT_HWCAP) >> ('V' - 'A')) & 1);
        __atomic_store_n(&on, v, __ATOMIC_RELAXED);
    }
    return v;
}

#define PG_RVV_RETURN(call) if (pg_rvv_on()) return call;
#define PG_RVV_DO(call) if (pg_rvv_on()) { call; return; }

/* ---- arch/riscv/<family>-rvv.c: call only when pg_rvv_on(); each does what pg_vec_<name> does ---- */
struct pg_block_q8_0;
struct pg_block_q2_K;
struct pg_block_q3_K;
struct pg_block_q6_K;
struct pg_block_q8_K;
int pg_rvv_vlen(void);   /* VLEN in bits (gemm-rvv.c) */
/* cvt-rvv.c */
void pg_rvv_cvt_f16_f32(int64_t n, const pg_fp16_t * x, float * y);
void pg_rvv_cvt_f32_f16(int64_t n, const float * x, pg_fp16_t * y);
void pg_rvv_cvt_bf16_f32(int64_t n, const pg_bf16_t * x, float * y);
void pg_rvv_cvt_f32_bf16(int64_t n, const float * x, pg_bf16_t * y);
/* dot-rvv.c */
float pg_rvv_dot_f32(int64_t n, const float * x, const float * y);
float pg_rvv_dot_f16(int64_t n, const pg_fp16_t * x, const pg_fp16_t * y);
float pg_rvv_dot_bf16(int64_t n, const pg_bf16_t * x, const pg_bf16_t * y);
float pg_rvv_dot_f16_f32(int64_t n, const pg_fp16_t * x, const float * y);
float pg_rvv_dot_bf16_f32(int64_t n, const pg_bf16_t * x, const float * y);
/* dot-legacy.h's vec_dot_n: s[c] = x . (y + c*by) for c < nc <= 4 */
void pg_rvv_dot_n_q8_0(int64_t n, const void * x, const void * y, size_t by, int nc, float * s);
void pg_rvv_dot_n_q4_0(int64_t n, const void * x, const void * y, size_t by, int nc, float * s);
void pg_rvv_dot_n_q4_1(int64_t n, const void * x, const void * y, size_t by, int nc, float * s);
void pg_rvv_dot_n_q5_0(int64_t n, const void * x, const void * y, size_t by, int nc, float * s);
void pg_rvv_dot_n_q5_1(int64_t n, const void * x, const void * y, size_t by, int nc, float * s);
void pg_rvv_dot_n_iq4_nl(int64_t n, const void * x, const void * y, size_t by, int nc, float * s);
void pg_rvv_dot_n_mxfp4(int64_t n, const void * x, const void * y, size_t by, int nc, float * s);
void pg_rvv_dot4_f32(int64_t n, const float * x, const float * const * y, float * s);
void pg_rvv_dot4_f16_f32(int64_t n, const pg_fp16_t * x, const float * const * y, float * s);
void pg_rvv_dot4_bf16_f32(int64_t n, const pg_bf16_t * x, const float * const * y, float * s);
/* quant-k-rvv.c: dot-k.h's dots of nb super-blocks (pg_rvv_dot_k4: Q4_K, or Q5_K when q5) */
float pg_rvv_dot_q2_K_q8_K(int64_t nb, const struct pg_block_q2_K * x, const struct pg_block_q8_K * y);
float pg_rvv_dot_q3_K_q8_K(int64_t nb, const struct pg_block_q3_K * x, const struct pg_block_q8_K * y);
float pg_rvv_dot_k4(int64_t nb, const char * xb, size_t bx, size_t off_qs, const struct pg_block_q8_K * y, bool q5);
float pg_rvv_dot_q6_K_q8_K(int64_t nb, const struct pg_block_q6_K * x, const struct pg_block_q8_K * y);
/* arith-rvv.c */
void pg_rvv_add_f32(int64_t n, float * z, const float * x, const float * y);
void pg_rvv_mul_f32(int64_t n, float * z, const float * x, const float * y);
void pg_rvv_div_f32(int64_t n, float * z, const float * x, const float * y);
void pg_rvv_mad_f32(int64_t n, float * y, const float * x, float v);
void pg_rvv_scale_f32(int64_t n, float * y, const float * x, float v);
float pg_rvv_max_f32(int64_t n, const float * x);
/* exp-rvv.c */
double pg_rvv_exp_sum_f32(int64_t n, float * y, const float * x, float m);
/* quant-rvv.c */
void pg_rvv_quantize_q8_0(int64_t n, const float * x, struct pg_block_q8_0 * y);
/* act-rvv.c: y = act(x), y = act(x) * g */
void pg_rvv_silu_f32(int64_t n, float * y, const float * x);
void pg_rvv_gelu_f32(int64_t n, float * y, const float * x);
void pg_rvv_gelu_erf_f32(int64_t n, float * y, const float * x);
void pg_rvv_gelu_quick_f32(int64_t n, float * y, const float * x);
void pg_rvv_tanh_f32(int64_t n, float * y, const float * x);
void pg_rvv_relu_glu_f32(int64_t n, float * y, const float * x, const float * g);
void pg_rvv_gelu_glu_f32(int64_t n, float * y, const float * x, const float * g);
void pg_rvv_silu_glu_f32(int64_t n, float * y, const float * x, const float * g);
void pg_rvv_gelu_erf_glu_f32(int64_t n, float * y, const float * x, const float * g);
void pg_rvv_gelu_quick_glu_f32(int64_t n, float * y, const float * x, const float * g);
/* gemm-rvv.c (pg_vec_gemm_tile_f32): PG_RVV_MM_MR rows x pg_rvv_gemm_nr() columns */
#define PG_RVV_MM_MR 12
int pg_rvv_gemm_nr(void);
void pg_rvv_gemm_tile_f32(int64_t n, const float * a, int64_t lda, const float * b, float * c);
/* norm-rvv.c */
double pg_rvv_sum_f64_f32(int64_t n, const float * x);
double pg_rvv_sumsq_f32(int64_t n, const float * x);
double pg_rvv_add_sumsq_f32(int64_t n, float * y, const float * x, const float * r);
double pg_rvv_cvar_f32(int64_t n, float * y, const float * x, float mean);
void pg_rvv_scale_mul_f32(int64_t n, float * y, const float * x, float s, const float * w);
/* rope-rvv.c */
void pg_rvv_sincos_f32(int64_t n, const float * x, float * c, float * s, float scale);
void pg_rvv_rope_half_f32(int64_t n, float * y0, float * y1, const float * x0, const float * x1,
                          const float * c, const float * s);
void pg_rvv_rope_adj_f32(int64_t n, float * y, const float * x, const float * c, const float * s);
/* attn-rvv.c */
void pg_rvv_attn_dot_f32(int nr, int64_t n, const float * q, int64_t ldq, const float * k, float * s, int64_t lds);
void pg_rvv_attn_dot_f16(int nr, int64_t n, const float * q, int64_t ldq, const pg_fp16_t * k, float * s, int64_t lds);
void pg_rvv_attn_dot_bf16(int nr, int64_t n, const float * q, int64_t ldq, const pg_bf16_t * k, float * s, int64_t lds);
void pg_rvv_attn_softmax_rows_f32(int nr, int64_t n, float * x, int64_t ldx, const float * mv, int64_t ldm,
                                  float * run_max, float * run_sum, float * f);
void pg_rvv_attn_mask_f16(int64_t n, const pg_fp16_t * m, float slope, float * y, int64_t * lo, int64_t * hi);
void pg_rvv_attn_acc_f32(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p, int64_t ldp,
                         const float * v, size_t nbv, const float * f);
void pg_rvv_attn_acc_f16(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p, int64_t ldp,
                         const pg_fp16_t * v, size_t nbv, const float * f);
void pg_rvv_attn_acc_bf16(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p, int64_t ldp,
                          const pg_bf16_t * v, size_t nbv, const float * f);
void pg_rvv_attn_gemm_qk_f32(int nr, int64_t nc, int64_t dk, const float * q, int64_t ldq,
                             const float * kt, int64_t ldk, float * s, int64_t lds);
void pg_rvv_attn_transpose_f32(int64_t nr, int64_t nc, const float * x, int64_t ldx, float * y, int64_t ldy);
