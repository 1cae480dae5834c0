/* The row primitives pg_vec_<op>_<type>(n, ...), one header per family, each beside its RVV
 * translation unit (arch/riscv/<family>-rvv.c; arch/riscv/rvv.h explains the run-time switch):
 *
 *   vec/cvt.h     f32 <-> fp16/bf16, one element and rows (bit-exact round-to-nearest-even)
 *   vec/quant.h   the Q8_0/Q4_0 blocks and the Q8_0 quantiser
 *   vec/dot.h     dot products: float pairs, mixed, one row against four (quantized blocks:
 *                 quants-legacy.h)
 *   vec/arith.h   elementwise add, mul, mad, scale; the maximum of a row
 *   vec/exp.h     exp (scalar and lanes, one set of constants) and the softmax sum
 *   vec/act.h     activations: silu, gelu, gelu_erf, gelu_quick, relu, tanh, and the GLU forms
 *   vec/norm.h    the norms' sums in double, scale-and-multiply
 *   vec/rope.h    sin/cos of the angles, rotation of pairs
 *   vec/gemm.h    the GEMM micro-kernel of mul_mat
 *   vec/attn.h    the attention micro-kernels of flash_attn_ext
 *
 * The primitives are written in the vocabulary of arch/simd-mappings.h only (no intrinsics); op
 * headers call them and never see an ISA. This header includes every family.
 */
#pragma once
#include "vec/cvt.h"
#include "vec/quant.h"
#include "vec/dot.h"
#include "vec/arith.h"
#include "vec/exp.h"
#include "vec/act.h"
#include "vec/norm.h"
#include "vec/rope.h"
#include "vec/gemm.h"
#include "vec/attn.h"
