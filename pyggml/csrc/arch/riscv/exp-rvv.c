/* RVV 1.0 kernels of vec/exp.h (the softmax sum): compiled with V, chosen at run time (arch/riscv/rvv.h).
 * Every loop is strip-mined with vsetvl, so any VLEN works and there is no scalar tail; LMUL is chosen
 * per kernel from the registers it keeps live. Accumulators that outlive a shorter last strip use the
 * _tu (tail undisturbed) intrinsics, or the lanes past vl would be clobbered (qemu's
 * rvv_ta_all_1s=true fills them with NaN bits, so tests catch it). */
#include "arch/riscv/exp-rvv.h"

double pg_rvv_exp_sum_f32(int64_t n, float * y, const float * x, float m) { return pg_rvv_exp_sum(n, y, x, m); }
