"""vec.h's row primitives called directly, for tests/test_vec.py: each SIMD path (AVX-512, AVX2,
NEON, RVV at any VLEN, the scalar loops) is compared against float64 references at lengths that hit
every tail. Arguments are element counts and raw addresses (numpy's arr.ctypes.data); nothing is
checked here, the test helpers pass contiguous arrays of the right dtype and length."""
from libc.stdint cimport int64_t, uint16_t


cdef extern from "vec.h" nogil:
    ctypedef struct pg_block_q8_0:
        pass
    void pg_vec_cvt_f16_f32(int64_t n, const uint16_t * x, float * y)
    void pg_vec_cvt_f32_f16(int64_t n, const float * x, uint16_t * y)
    void pg_vec_cvt_bf16_f32(int64_t n, const uint16_t * x, float * y)
    void pg_vec_cvt_f32_bf16(int64_t n, const float * x, uint16_t * y)
    float pg_vec_dot_f32(int64_t n, const float * x, const float * y)
    float pg_vec_dot_f16(int64_t n, const uint16_t * x, const uint16_t * y)
    float pg_vec_dot_bf16(int64_t n, const uint16_t * x, const uint16_t * y)
    float pg_vec_dot_f16_f32(int64_t n, const uint16_t * x, const float * y)
    float pg_vec_dot_q8_0_q8_0(int64_t n, const pg_block_q8_0 * x, const pg_block_q8_0 * y)
    void pg_vec_add_f32(int64_t n, float * z, const float * x, const float * y)
    void pg_vec_mul_f32(int64_t n, float * z, const float * x, const float * y)
    void pg_vec_mad_f32(int64_t n, float * y, const float * x, float v)
    void pg_vec_scale_f32(int64_t n, float * y, const float * x, float v)
    float pg_vec_max_f32(int64_t n, const float * x)
    double pg_vec_sum_f32(int64_t n, const float * x)
    double pg_vec_exp_sum_f32(int64_t n, float * y, const float * x, float m)


def cvt_f16_f32(int64_t n, size_t x, size_t y):
    pg_vec_cvt_f16_f32(n, <const uint16_t *> x, <float *> y)


def cvt_f32_f16(int64_t n, size_t x, size_t y):
    pg_vec_cvt_f32_f16(n, <const float *> x, <uint16_t *> y)


def cvt_bf16_f32(int64_t n, size_t x, size_t y):
    pg_vec_cvt_bf16_f32(n, <const uint16_t *> x, <float *> y)


def cvt_f32_bf16(int64_t n, size_t x, size_t y):
    pg_vec_cvt_f32_bf16(n, <const float *> x, <uint16_t *> y)


def dot_f32(int64_t n, size_t x, size_t y):
    return pg_vec_dot_f32(n, <const float *> x, <const float *> y)


def dot_f16(int64_t n, size_t x, size_t y):
    return pg_vec_dot_f16(n, <const uint16_t *> x, <const uint16_t *> y)


def dot_bf16(int64_t n, size_t x, size_t y):
    return pg_vec_dot_bf16(n, <const uint16_t *> x, <const uint16_t *> y)


def dot_f16_f32(int64_t n, size_t x, size_t y):
    return pg_vec_dot_f16_f32(n, <const uint16_t *> x, <const float *> y)


def dot_q8_0_q8_0(int64_t n, size_t x, size_t y):
    return pg_vec_dot_q8_0_q8_0(n, <const pg_block_q8_0 *> x, <const pg_block_q8_0 *> y)


def add_f32(int64_t n, size_t z, size_t x, size_t y):
    pg_vec_add_f32(n, <float *> z, <const float *> x, <const float *> y)


def mul_f32(int64_t n, size_t z, size_t x, size_t y):
    pg_vec_mul_f32(n, <float *> z, <const float *> x, <const float *> y)


def mad_f32(int64_t n, size_t y, size_t x, float v):
    pg_vec_mad_f32(n, <float *> y, <const float *> x, v)


def scale_f32(int64_t n, size_t y, size_t x, float v):
    pg_vec_scale_f32(n, <float *> y, <const float *> x, v)


def max_f32(int64_t n, size_t x):
    return pg_vec_max_f32(n, <const float *> x)


def sum_f32(int64_t n, size_t x):
    return pg_vec_sum_f32(n, <const float *> x)


def exp_sum_f32(int64_t n, size_t y, size_t x, float m):
    return pg_vec_exp_sum_f32(n, <float *> y, <const float *> x, m)
