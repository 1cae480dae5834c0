/* MUL_MAT
 * (kernels to be written: see the issue for this op family) */
#pragma once
#include "convert.h"
#include "barrier.h"

static inline void pg_compute_mul_mat(const pg_params * p, pg_tensor * dst) { (void) p; (void) dst; }
static inline size_t pg_work_mul_mat(const pg_tensor * dst, int nth) { (void) dst; (void) nth; return 0; }
