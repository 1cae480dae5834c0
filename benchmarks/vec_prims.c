/* ns per call of the hot row primitives (csrc/vec/), the best of 7 timings, to compare two header
 * trees (before and after a change to csrc/vec or csrc/arch) built the same way and run alternately:
 *
 *   git worktree add /tmp/before <commit>      (or git archive <commit> | tar -x -C /tmp/before)
 *   for t in before after; do gcc -O3 -fPIC -std=gnu11 -fno-math-errno -march=native \
 *       -I <tree>/pyggml/csrc benchmarks/vec_prims.c -o /tmp/vp_$t -lm; done
 *   for i in 1 2 3 4; do /tmp/vp_before; /tmp/vp_after; done       (add -mno-avx512f for AVX2)
 *
 * Results: docs/bench/journal.md ("Row primitives before and after the vec.h split"). */
#include "vec/vec.h"
#include "types/dot-legacy.h"   /* the Q8_0 dot */
#include <stdio.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
#define N 4096
static float X[N * 8], Y[N * 8], Z[N * 8], O[N * 8], O2[N * 8];
static pg_fp16_t H[N * 8];
static pg_block_q8_0 QA[N / 32], QB[N / 32];
static volatile double sink;
static volatile int64_t vn = N;   /* the lengths are not compile-time constants in the kernels */
#define BENCH(name, reps, ...) do { double best = 1e30; for (int t = 0; t < 7; t++) { double t0 = now(); \
    for (int r = 0; r < reps; r++) { __VA_ARGS__; } double dt = (now() - t0) / reps; if (dt < best) best = dt; } \
    printf("%-22s %10.1f\n", name, best); } while (0)
int main(void) {
    const int64_t n = vn;
    for (int i = 0; i < N * 8; i++) { X[i] = (float) ((i * 37 % 1000) - 500) / 250.0f; Y[i] = (float) ((i * 91 % 777) - 300) / 300.0f; Z[i] = Y[i] * 0.5f; }
    pg_vec_cvt_f32_f16(N * 8, X, H);
    pg_vec_quantize_q8_0(N, X, QA); pg_vec_quantize_q8_0(N, Y, QB);
    BENCH("sumsq 4096", 2000, sink += pg_vec_sumsq_f32(n, X));
    BENCH("add_sumsq 4096", 2000, sink += pg_vec_add_sumsq_f32(n, O, X, Y));
    BENCH("cvar 4096", 2000, sink += pg_vec_cvar_f32(n, O, X, 0.1f));
    BENCH("exp_sum 4096", 1000, sink += pg_vec_exp_sum_f32(n, O, X, 2.0f));
    BENCH("silu_glu 4096", 1000, pg_vec_silu_glu_f32(n, O, X, Y));
    BENCH("gelu_erf 4096", 1000, pg_vec_gelu_erf_f32(n, O, X));
    BENCH("dot_f16 4096", 2000, sink += pg_vec_dot_f16(n, H, H + N));
    BENCH("dot_f16_f32 4096", 2000, sink += pg_vec_dot_f16_f32(n, H, X));
    BENCH("dot_bf16_f32 4096", 2000, sink += pg_vec_dot_bf16_f32(n, H, X));
    { const float * ys[4] = {X, Y, Z, X + N}; float s4[4];
      BENCH("dot4_f16_f32 4096", 1000, { pg_vec_dot4_f16_f32(n, H, ys, s4); sink += s4[0] + s4[3]; });
      BENCH("dot4_f32 4096", 1000, { pg_vec_dot4_f32(n, Y, ys, s4); sink += s4[0] + s4[3]; }); }
    BENCH("dot_q8_0 4096", 2000, sink += pg_vec_dot_q8_0_q8_0(n, QA, QB));
    BENCH("quantize_q8_0 4096", 1000, pg_vec_quantize_q8_0(n, Y, QB));
    BENCH("sincos 4096", 1000, pg_vec_sincos_f32(n, X, O, O2, 1.0f));
    BENCH("rope_adj 2048", 2000, pg_vec_rope_adj_f32(n / 2, O, X, Y, Z));
    { float mx[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY}, sum[4] = {0}, f[4];
      BENCH("attn_softmax 4x64", 20000, { memcpy(O, X, 4 * 64 * 4); pg_vec_attn_softmax_rows_f32(4, 64, O, 64, Y, 64, mx, sum, f); mx[0] = mx[1] = mx[2] = mx[3] = -INFINITY; }); }
    BENCH("attn_dot_f16 4x128", 20000, pg_vec_attn_dot_f16(4, 128, X, 128, H, O, 1));
    BENCH("attn_dot_f16 3x128", 20000, pg_vec_attn_dot_f16(3, 128, X, 128, H, O, 1));
    BENCH("attn_dot_f32 1x128", 20000, pg_vec_attn_dot_f32(1, 128, X, 128, Y, O, 1));
    BENCH("attn_acc_f16 4x128x64", 5000, pg_vec_attn_acc_f16(4, 128, O, 128, 64, X, 64, H, 256, NULL));
    BENCH("attn_acc_bf16 4x128x64", 5000, pg_vec_attn_acc_bf16(4, 128, O, 128, 64, X, 64, H, 256, NULL));
    BENCH("attn_acc_f32 3x136x32", 5000, pg_vec_attn_acc_f32(3, 136, O, 136, 32, X, 32, Y, 544, Z));
    BENCH("attn_gemm_qk 4x64x128", 5000, pg_vec_attn_gemm_qk_f32(4, 64, 128, X, 128, Y, 64, O, 64));
    BENCH("attn_transpose 64x128", 5000, pg_vec_attn_transpose_f32(64, 128, X, 128, O, 64));
    BENCH("attn_mask 4096", 2000, { int64_t lo, hi; pg_vec_attn_mask_f16(n, H, 0.5f, O, &lo, &hi); sink += lo + hi; });
    { pg_gemm_shape s = pg_vec_gemm_shape(); (void) s; BENCH("gemm_tile k=256", 5000, pg_vec_gemm_tile_f32(256, X, 256, Y, O)); }
    return 0;
}
