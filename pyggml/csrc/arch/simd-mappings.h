/* The ISA layer: the only place intrinsics headers are included (besides the RVV translation units,
 * arch/riscv/<family>-rvv.c, and arch/riscv/rvv-mappings.h they share). This header picks one ISA at compile time
 * from the compiler's macros; arch/<arch>/<isa>.h maps the vocabulary below onto it, and the row primitives
 * (vec/<family>.h) are written in the vocabulary only.
 *
 * f32 vectors (every ISA with PG_HAVE_F32V):
 *   pg_f32v                      one register of PG_F32_EPR floats; PG_F32V_NREGS registers in the file
 *   PG_F32V_LOAD(p) / STORE(p,v) unaligned load/store of f32
 *   PG_F32V_LOAD_F16(p)          PG_F32_EPR fp16 values widened to f32 (exact)
 *   PG_F32V_STORE_F16(p, v)      narrowed to fp16 with round-to-nearest-even
 *   PG_F32V_LOAD_BF16(p)         bf16 widened (shift left by 16)
 *   PG_F32V_SET1, ZERO, ADD, SUB, MUL, DIV, FMA(a, b, c) = a*b + c, MAX, MIN, REDUCE (horizontal sum),
 *   REDUCE_MAX (with a NaN operand MAX and MIN give what the ISA gives: x86 the second operand)
 *   PG_F32V_ROUND(v)             to the nearest integer, ties to even
 *   PG_F32V_SEL_LT(a, b, t, f)   lanes where a < b take t, the others f
 *   PG_F32V_KEEP_NAN(x, r)       r, with the NaN lanes of x kept
 *   PG_F32V_KEEP(v)              keep v in its register (no load folded into each use)
 *   pg_f32v_mul_pow2(p, k)       p * 2^k for integral k in [-126, 128], applied as two halves
 *   pg_f32v_mul_pow2_1(p, k)     p * 2^k for integral k in [-126, 127], one exponent (AVX-512: vscalefps)
 *   pg_f32v_quadrant(j, sp, cp, &s, &c)   sin/cos from their values on r and the quadrant j (mod 4)
 *   pg_f32v_load_even_odd(p, &e, &o)      2*EPR floats at p split into even and odd elements;
 *   pg_f32v_store_interleaved(p, e, o)    and back
 *   pg_f32v_transpose(x, ldx, y, ldy)     an EPR x EPR block of f32 transposed
 *   pg_f32v_live_bits(v)         a bit per lane that is not -inf
 *   PG_HAVE_F32V_SCALEF: pg_f32v_scalef_ge(x, lo, p, k) = p * 2^k where x >= lo or NaN, 0 below
 * f64 accumulation of f32 values (the norms' sums):
 *   pg_f64acc, pg_f64acc_zero(), pg_f64acc_add(a, v), pg_f64acc_add_sq(a, v), pg_f64acc_reduce(a, b);
 *   pg_f64acc_add_sq may add v*v scaled by 2^-896 (PG_SQ_SCALE undoes it, vec/norm.h says why)
 * quantized blocks (where the ISA has them; else the scalar loops):
 *   PG_HAVE_QDOT: pg_q8x32, the 32 int8 lanes of one decoded block: pg_q8x32_load(q),
 *     pg_q8x32_store(v, q), pg_q8x32_nibbles(qs) (16 bytes: lanes 0..15 the low nibbles, 16..31 the
 *     high ones), pg_q8x32_bit4(qh) (0x10 where bit e of the 32-bit word at qh is set), _or, _sub(v, c),
 *     pg_q8x32_lut16(v, table) (lanes 0..15 looked up in 16 int8); pg_qacc, pg_qacc_zero(),
 *     pg_qacc_add(acc, v, y, uns, scale) adds scale * (v . the 32 int8 at y) (uns: v's lanes are
 *     >= 0), pg_qacc_merge(a, b), pg_qacc_sum(acc). Without it quants-legacy.h has the scalar forms
 *   PG_HAVE_Q8_QUANT: pg_quantize_block_q8(x, q) quantises 32 floats with 127/amax, returns amax
 *   PG_HAVE_FP16_SCALAR: pg_fp16_to_fp32_1(h) one fp16 widened by one instruction
 *
 * PG_HAVE_F32V is 0 for the scalar build (-Dsimd=none, or an ISA without a mapping): every row
 * primitive then runs its scalar loop only. PG_SIMD_NAME is the ISA compiled; pg_simd_name() is
 * what runs (build_info() reports it).
 *
 * riscv64 (PG_SIMD_RVV, meson defines PYGGML_RVV) is different: this header is compiled without V,
 * PG_HAVE_F32V is 0, and the row primitives hand over to the RVV kernels when the CPU has V at run
 * time (arch/riscv/rvv.h).
 */
#pragma once

#if defined(PYGGML_SIMD_NONE)
#  define PG_SIMD_SCALAR 1
#elif defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__FMA__)
#  define PG_SIMD_AVX512 1
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#  define PG_SIMD_AVX2 1
#elif defined(__ARM_NEON) && defined(__aarch64__)
#  define PG_SIMD_NEON 1
#elif defined(PYGGML_RVV)
#  define PG_SIMD_RVV 1
#else
#  define PG_SIMD_SCALAR 1
#endif
/* AVX-512 with VNNI, GFNI and VBMI: the one-column GEMV kernels of arch/x86/qgemv-x86.h, kgemv-x86.h,
 * kgemv2-x86.h (meson.build's avx512 level compiles with all three) */
#if defined(PG_SIMD_AVX512) && defined(__AVX512VNNI__) && defined(__GFNI__) && defined(__AVX512VBMI__)
#  define PG_X86_GEMV 1
#endif

#if defined(PG_SIMD_AVX512)
#  include "arch/x86/avx512.h"
#elif defined(PG_SIMD_AVX2)
#  include "arch/x86/avx2.h"
#elif defined(PG_SIMD_NEON)
#  include "arch/arm/neon.h"
#elif defined(PG_SIMD_RVV)
#  include "arch/riscv/rvv.h"
#  define PG_SIMD_NAME "rvv"
#  define PG_HAVE_F32V 0
#  define PG_F32_EPR 1
#else
#  define PG_SIMD_NAME "scalar"
#  define PG_HAVE_F32V 0
#  define PG_F32_EPR 1
#endif

#if !defined(PG_SIMD_RVV)
#  define PG_RVV_RETURN(call)
#  define PG_RVV_DO(call)
#endif

/* the optional parts of the vocabulary an ISA leaves out */
#ifndef PG_HAVE_F32V_SCALEF
#  define PG_HAVE_F32V_SCALEF 0
#endif
#ifndef PG_HAVE_QDOT
#  define PG_HAVE_QDOT 0
#endif
#ifndef PG_HAVE_Q8_QUANT
#  define PG_HAVE_Q8_QUANT 0
#endif
#ifndef PG_HAVE_FP16_SCALAR
#  define PG_HAVE_FP16_SCALAR 0
#endif
/* bytes: the longest f32 copy of a one-column activation row the F16/BF16 GEMV reads (matmul.h);
 * longer rows are dotted in place: a longer copy does not stay in L1 while the weights stream past
 * it (docs/bench/journal.md) */
#ifndef PG_GEMV_WIDEN_MAX
#  define PG_GEMV_WIDEN_MAX 16384
#endif

/* what runs: the compiled ISA, or "scalar" on a riscv64 CPU without V; the vector register width
 * in bits the kernels use (VLEN as read at run time for RVV), 0 for scalar */
static inline const char * pg_simd_name(void) {
#if defined(PG_SIMD_RVV)
    return pg_rvv_on() ? PG_SIMD_NAME : "scalar";
#else
    return PG_SIMD_NAME;
#endif
}

static inline int pg_simd_vlen(void) {
#if defined(PG_SIMD_RVV)
    return pg_rvv_on() ? pg_rvv_vlen() : 0;
#else
    return PG_HAVE_F32V ? 32 * PG_F32_EPR : 0;
#endif
}
