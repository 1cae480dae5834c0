/* The Q4_K GEMV (pg_vec_dot_q4_K_q8_K_rows, mul_mat's one-column path) against a plain 512-bit read
 * of the same bytes, ns per 144-byte super-block, weights resident in L1, L2 and L3 (docs/bench/journal.md,
 * "The Q4_K GEMV against a pipeline model"). Build and run on an AVX-512 host:
 *   gcc -O3 -march=native -fno-math-errno -Ipyggml/csrc -Wno-unused-function -o /tmp/q4k_gemv benchmarks/q4k_gemv.c
 *   /tmp/q4k_gemv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "types/dot-k.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* the read: two 512-bit loads and adds per 128 bytes, two accumulators */
__attribute__((noinline)) static int readsum(const char * p, size_t n) {
    __m512i a = _mm512_setzero_si512(), b = a;
    for (size_t i = 0; i < n; i += 128) {
        a = _mm512_add_epi32(a, _mm512_loadu_si512(p + i));
        b = _mm512_add_epi32(b, _mm512_loadu_si512(p + i + 64));
    }
    return _mm512_reduce_add_epi32(_mm512_add_epi32(a, b));
}

__attribute__((noinline)) static void gemv(int64_t n, const void * x, size_t bx, int64_t nr, const void * y, float * s) {
    pg_vec_dot_q4_K_q8_K_rows(n, x, bx, nr, y, s);
}

int main(void) {
    const int64_t n = 4096, nb = n / PG_QK_K;
    const int64_t rows[] = {8, 64, 224, 4096};
    pg_block_q8_K * y = aligned_alloc(64, sizeof(pg_block_q8_K) * nb);
    for (int64_t i = 0; i < nb; i++) {
        y[i].d = 0.01f;
        for (int j = 0; j < PG_QK_K; j++) y[i].qs[j] = (int8_t) (rand() % 255 - 127);
        for (int j = 0; j < 16; j++) {
            int t = 0;
            for (int k = 0; k < 16; k++) t += y[i].qs[16 * j + k];
            y[i].bsums[j] = (int16_t) t;
        }
    }
    volatile int sink = 0;
    for (int ri = 0; ri < 4; ri++) {
        const int64_t nr = rows[ri];
        const size_t bx = (size_t) nb * sizeof(pg_block_q4_K), tot = bx * nr;
        char * x = aligned_alloc(64, (tot + 127) / 128 * 128);
        for (size_t i = 0; i < tot; i++) x[i] = (char) rand();
        for (int64_t r = 0; r < nr; r++)   /* d, dmin 2^-7: finite sums */
            for (int64_t b = 0; b < nb; b++) memcpy(x + r * bx + b * sizeof(pg_block_q4_K), "\0\x20\0\x20", 4);
        float * s = malloc(sizeof(float) * nr);
        const int it = (int) (2e7 / tot) + 1;
        double best = 1e9, bestr = 1e9;
        for (int rep = 0; rep < 60; rep++) {
            double t0 = now();
            for (int k = 0; k < it; k++) gemv(n, x, bx, nr, y, s);
            double t = (now() - t0) / it;
            if (t < best) best = t;
            t0 = now();
            for (int k = 0; k < it; k++) sink += readsum(x, tot / 128 * 128);
            t = (now() - t0) / it;
            if (t < bestr) bestr = t;
        }
        const double nsb = best * 1e9 / (double) (nr * nb), nsr = bestr * 1e9 / (double) (nr * nb);
        printf("rows %5ld (%8zu bytes): GEMV %.2f ns/super-block, read %.2f ns/144 B, read/GEMV %.2f\n", (long) nr,
               tot, nsb, nsr, nsr / nsb);
        free(x);
        free(s);
    }
    free(y);
    return 0;
}
