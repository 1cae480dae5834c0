/* Intel AMX (AMX-TILE, AMX-INT8) for the integer GEMMs of the avx512 level: eight tile registers of
 * up to 16 rows x 64 bytes and one instruction (tdpbssd) that adds to C (16 x 16 int32) the products
 * of A (16 rows x K int8) and B (K/4 rows x 16 dwords of 4 int8, "VNNI" layout), K <= 64. The sums
 * are exact int32, as dpbusd's, so a kernel that takes its block sums from the tiles keeps the bits
 * of the vector kernels it replaces.
 *
 * The tile instructions are in every avx512 build and run only where pg_amx_ready(): the CPU has
 * AMX-TILE and AMX-INT8 (cpuid 7.0 EDX bits 24 and 25) and Linux grants the process the tile state
 * (arch_prctl ARCH_REQ_XCOMP_PERM, without which the first tile instruction faults). PYGGML_AMX=0
 * turns them off. */
#pragma once
#include "arch/simd-mappings.h"

#if defined(PG_X86_GEMV) && defined(__linux__) && (defined(__clang__) || __GNUC__ >= 11)
#define PG_X86_AMX 1
#include <cpuid.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PG_AMX_REQ_XCOMP_PERM 0x1023    /* arch_prctl code */
#define PG_AMX_XTILEDATA 18             /* the tile data's XSAVE feature number */

static int pg_amx_state;                /* 0: not probed yet, 1: usable, -1: not */

static inline bool pg_amx_probe(void) {
    const char * env = getenv("PYGGML_AMX");
    if (env && strcmp(env, "0") == 0) return false;
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25))) return false;
    return syscall(SYS_arch_prctl, PG_AMX_REQ_XCOMP_PERM, PG_AMX_XTILEDATA) == 0;
}
/* probed once per process (every thread that races to it finds the same answer) */
static inline bool pg_amx_ready(void) {
    int s = __atomic_load_n(&pg_amx_state, __ATOMIC_RELAXED);
    if (s == 0) {
        s = pg_amx_probe() ? 1 : -1;
        __atomic_store_n(&pg_amx_state, s, __ATOMIC_RELAXED);
    }
    return s > 0;
}

/* The instructions, one each, as inline assembly rather than the compilers' intrinsics: they need no
 * target attribute then, and each tells the compiler which memory it reads or writes (gcc 12's
 * tileloadd and ldtilecfg intrinsics do not, so it may drop the stores that fill a tile's source).
 * t, a, b: tile register numbers, constants. */
#define PG_TILE_ZERO(t) __asm__ volatile("tilezero %%tmm" #t ::: "memory")
#define PG_TILE_LOAD(t, base, stride) \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"((const void *) (base)), "r"((long) (stride)) : "memory")
#define PG_TILE_STORE(t, base, stride) \
    __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"((void *) (base)), "r"((long) (stride)) : "memory")
/* C += A B, the int8 of both signed */
#define PG_TILE_DPBSSD(c, a, b) __asm__ volatile("tdpbssd %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::: "memory")

/* ldtilecfg's 64-byte operand, palette 1 */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} pg_amx_cfg;

/* the tiles of the int8 block GEMMs, per thread: four slots of C (tmm0..3, 16 x 16 int32) for
 * blocks in flight, A in tmm4, tmm5 (16 rows of a 32-byte block), B in tmm6, tmm7 (8 rows x 16 dwords:
 * a 32-element block of 16 rows), the even and odd slots' */
static inline void pg_amx_config_blocks(void) {
    pg_amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 6; t++) {
        c.rows[t] = 16;
        c.colsb[t] = t < 4 ? 64 : 32;
    }
    for (int t = 6; t < 8; t++) {
        c.rows[t] = 8;
        c.colsb[t] = 64;
    }
    __asm__ volatile("ldtilecfg %0" ::"m"(c));
}
/* slot (a constant; taken mod 4) = A B, A's rows lda bytes apart from a, B's 512 bytes at b */
PG_ALWAYS_INLINE void pg_amx_block_dp(const int slot, const char * a, size_t lda, const int8_t * b) {
    switch (slot & 3) {
    case 0: PG_TILE_ZERO(0); PG_TILE_LOAD(4, a, lda); PG_TILE_LOAD(6, b, 64); PG_TILE_DPBSSD(0, 4, 6); break;
    case 1: PG_TILE_ZERO(1); PG_TILE_LOAD(5, a, lda); PG_TILE_LOAD(7, b, 64); PG_TILE_DPBSSD(1, 5, 7); break;
    case 2: PG_TILE_ZERO(2); PG_TILE_LOAD(4, a, lda); PG_TILE_LOAD(6, b, 64); PG_TILE_DPBSSD(2, 4, 6); break;
    default: PG_TILE_ZERO(3); PG_TILE_LOAD(5, a, lda); PG_TILE_LOAD(7, b, 64); PG_TILE_DPBSSD(3, 5, 7); break;
    }
}
/* slot's C (16 rows of 64 bytes) to c */
PG_ALWAYS_INLINE void pg_amx_block_store(const int slot, int32_t (*c)[16]) {
    switch (slot & 3) {
    case 0: PG_TILE_STORE(0, c, 64); break;
    case 1: PG_TILE_STORE(1, c, 64); break;
    case 2: PG_TILE_STORE(2, c, 64); break;
    default: PG_TILE_STORE(3, c, 64); break;
    }
}
/* A kernel keeps the tile configuration it found and puts it back when it is done: another library
 * in the process (llama.cpp's AMX kernels) may configure a thread's tiles once and rely on them. */
static inline void pg_amx_save(pg_amx_cfg * c) { __asm__ volatile("sttilecfg %0" : "=m"(*c)); }
static inline void pg_amx_restore(const pg_amx_cfg * c) {
    if (c->palette)
        __asm__ volatile("ldtilecfg %0" ::"m"(*c));
    else
        __asm__ volatile("tilerelease" ::: "memory");
}
#endif

/* whether the integer GEMMs take their block sums from the AMX tiles (build_info()'s amx) */
static inline int pg_amx_on(void) {
#if defined(PG_X86_AMX)
    return pg_amx_ready();
#else
    return 0;
#endif
}
