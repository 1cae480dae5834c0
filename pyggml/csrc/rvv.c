/* RVV 1.0 kernels of vec.h's row primitives: the only translation unit built with V (rvv.h says how
 * they are chosen at run time). Every loop is strip-mined with vsetvl, so any VLEN works and there
 * is no scalar tail; LMUL is chosen per kernel from the registers it keeps live. Accumulators that
 * outlive a shorter last strip use the _tu (tail undisturbed) intrinsics, or the lanes past vl would
 * be clobbered (qemu's rvv_ta_all_1s=true fills them with NaN bits, so tests catch it).
 */
#include "vec.h"
#include <riscv_vector.h>

int pg_rvv_vlen(void) { return (int) (__riscv_vlenb() * 8); }
