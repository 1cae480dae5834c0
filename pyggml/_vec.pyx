"""vec.h's row primitives called directly, for tests/test_vec.py: each SIMD path (AVX-512, AVX2,
NEON, RVV at any VLEN, the scalar loops) is compared against float64 references at lengths that hit
every tail. Arguments are element counts and raw addresses (numpy's arr.ctypes.data); nothing is
checked here, the test helpers pass contiguous arrays of the right dtype and length."""
from libc.stdint cimport int64_t, uint16_t


cdef extern from "vec.h" nogil:
    ctypedef struct pg_block_q8_0:
        pass
    ctypedef struct pg_block_q4_0:
        pass
    void pg_vec_cvt_f16_f32(int64_t n, const uint16_t * x, float * y)
    void pg_vec_cvt_f32_f16(int64_t n, const float * x, uint16_t * y)
    void pg_vec_cvt_bf16_f32(int64_t n, const uint16_t * x, float * y)
    void pg_vec_cvt_f32_bf16(int64_t n, const float * x, uint16_t * y)
    float pg_vec_dot_f32(int64_t n, const float * x, const float * y)
    float pg_vec_dot_f16(int64_t n, const uint16_t * x, const uint16_t * y)
    float pg_vec_dot_bf16(int64_t n, const uint16_t * x, const uint16_t * y)
    float pg_vec_dot_f16_f32(int64_t n, const uint16_t * x, const float * y)
    void pg_vec_add_f32(int64_t n, float * z, const float * x, const float * y)
    void pg_vec_mul_f32(int64_t n, float * z, const float * x, const float * y)
    void pg_vec_mad_f32(int64_t n, float * y, const float * x, float v)
    void pg_vec_scale_f32(int64_t n, float * y, const float * x, float v)
    float pg_vec_max_f32(int64_t n, const float * x)
    double pg_vec_sum_f32(int64_t n, const float * x)
    double pg_vec_exp_sum_f32(int64_t n, float * y, const float * x, float m)
    void pg_vec_quantize_q8_0(int64_t n, const float * x, pg_block_q8_0 * y)
    void pg_vec_silu_f32(int64_t n, float * y, const float * x)
    void pg_vec_gelu_f32(int64_t n, float * y, const float * x)
    void pg_vec_gelu_erf_f32(int64_t n, float * y, const float * x)
    void pg_vec_relu_glu_f32(int64_t n, float * y, const float * x, const float * g)
    void pg_vec_gelu_glu_f32(int64_t n, float * y, const float * x, const float * g)
    void pg_vec_silu_glu_f32(int64_t n, float * y, const float * x, const float * g)
    void pg_vec_gelu_erf_glu_f32(int64_t n, float * y, const float * x, const float * g)
    void pg_vec_gelu_quick_glu_f32(int64_t n, float * y, const float * x, const float * g)
    float pg_vec_dot_bf16_f32(int64_t n, const uint16_t * x, const float * y)
    void pg_vec_dot4_f32(int64_t n, const float * x, const float * const * y, float * s)
    void pg_vec_dot4_f16_f32(int64_t n, const uint16_t * x, const float * const * y, float * s)
    void pg_vec_dot4_bf16_f32(int64_t n, const uint16_t * x, const float * const * y, float * s)
    ctypedef struct pg_gemm_shape:
        int mr
        int nr
    pg_gemm_shape pg_vec_gemm_shape()
    void pg_vec_gemm_tile_f32(int64_t n, const float * a, int64_t lda, const float * b, float * c)
    double pg_vec_sum_f64_f32(int64_t n, const float * x)
    double pg_vec_sumsq_f32(int64_t n, const float * x)
    double pg_vec_add_sumsq_f32(int64_t n, float * y, const float * x, const float * r)
    double pg_vec_cvar_f32(int64_t n, float * y, const float * x, float mean)
    void pg_vec_scale_mul_f32(int64_t n, float * y, const float * x, float s, const float * w)
    void pg_vec_sincos_f32(int64_t n, const float * x, float * c, float * s, float scale)
    void pg_vec_rope_half_f32(int64_t n, float * y0, float * y1, const float * x0, const float * x1,
                              const float * c, const float * s)
    void pg_vec_rope_adj_f32(int64_t n, float * y, const float * x, const float * c, const float * s)
    void pg_vec_attn_dot_f32(int nr, int64_t n, const float * q, int64_t ldq, const float * k, float * s, int64_t lds)
    void pg_vec_attn_dot_f16(int nr, int64_t n, const float * q, int64_t ldq, const uint16_t * k, float * s, int64_t lds)
    void pg_vec_attn_dot_bf16(int nr, int64_t n, const float * q, int64_t ldq, const uint16_t * k, float * s, int64_t lds)
    void pg_vec_attn_softmax_rows_f32(int nr, int64_t n, float * x, int64_t ldx, const float * mv, int64_t ldm,
                                      float * M, float * S, float * f)
    void pg_vec_attn_mask_f16(int64_t n, const uint16_t * m, float slope, float * y, int64_t * lo, int64_t * hi)
    void pg_vec_attn_acc_f32(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p, int64_t ldp,
                             const float * v, size_t nbv, const float * f)
    void pg_vec_attn_acc_f16(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p, int64_t ldp,
                             const uint16_t * v, size_t nbv, const float * f)
    void pg_vec_attn_acc_bf16(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p, int64_t ldp,
                              const uint16_t * v, size_t nbv, const float * f)
    void pg_vec_attn_gemm_qk_f32(int nr, int64_t nc, int64_t dk, const float * q, int64_t ldq,
                                 const float * kt, int64_t ldk, float * s, int64_t lds)
    void pg_vec_attn_transpose_f32(int64_t nr, int64_t nc, const float * x, int64_t ldx, float * y, int64_t ldy)


cdef extern from "quants-legacy.h" nogil:
    float pg_vec_dot_q8_0_q8_0(int64_t n, const pg_block_q8_0 * x, const pg_block_q8_0 * y)
    float pg_vec_dot_q4_0_q8_0(int64_t n, const pg_block_q4_0 * x, const pg_block_q8_0 * y)


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


def dot_q4_0_q8_0(int64_t n, size_t x, size_t y):
    return pg_vec_dot_q4_0_q8_0(n, <const pg_block_q4_0 *> x, <const pg_block_q8_0 *> y)


def quantize_q8_0(int64_t n, size_t x, size_t y):
    pg_vec_quantize_q8_0(n, <const float *> x, <pg_block_q8_0 *> y)


ACTS = ("silu", "gelu", "gelu_erf")
GLUS = ("relu", "gelu", "silu", "gelu_erf", "gelu_quick")


def act_f32(str name, int64_t n, size_t y, size_t x):
    """y = name(x) for name in ACTS"""
    cdef float * py = <float *> y
    cdef const float * px = <const float *> x
    if name == "silu":
        pg_vec_silu_f32(n, py, px)
    elif name == "gelu":
        pg_vec_gelu_f32(n, py, px)
    elif name == "gelu_erf":
        pg_vec_gelu_erf_f32(n, py, px)
    else:
        raise ValueError(name)


def glu_f32(str name, int64_t n, size_t y, size_t x, size_t g):
    """y = name(x) * g for name in GLUS"""
    cdef float * py = <float *> y
    cdef const float * px = <const float *> x
    cdef const float * pg = <const float *> g
    if name == "relu":
        pg_vec_relu_glu_f32(n, py, px, pg)
    elif name == "gelu":
        pg_vec_gelu_glu_f32(n, py, px, pg)
    elif name == "silu":
        pg_vec_silu_glu_f32(n, py, px, pg)
    elif name == "gelu_erf":
        pg_vec_gelu_erf_glu_f32(n, py, px, pg)
    elif name == "gelu_quick":
        pg_vec_gelu_quick_glu_f32(n, py, px, pg)
    else:
        raise ValueError(name)


def dot_bf16_f32(int64_t n, size_t x, size_t y):
    return pg_vec_dot_bf16_f32(n, <const uint16_t *> x, <const float *> y)


def dot4(str xtype, int64_t n, size_t x, y, size_t s):
    """s[c] = dot(x, y[c]) for c < 4: x of xtype ("f32", "f16", "bf16"), y four addresses of f32 rows"""
    cdef const float * rows[4]
    for c in range(4):
        rows[c] = <const float *> <size_t> y[c]
    if xtype == "f32":
        pg_vec_dot4_f32(n, <const float *> x, rows, <float *> s)
    elif xtype == "f16":
        pg_vec_dot4_f16_f32(n, <const uint16_t *> x, rows, <float *> s)
    elif xtype == "bf16":
        pg_vec_dot4_bf16_f32(n, <const uint16_t *> x, rows, <float *> s)
    else:
        raise ValueError(xtype)


def gemm_shape():
    """(mr, nr) of the GEMM micro-kernel that runs on this CPU"""
    cdef pg_gemm_shape t = pg_vec_gemm_shape()
    return t.mr, t.nr


def gemm_tile_f32(int64_t n, size_t a, int64_t lda, size_t b, size_t c):
    """c (mr x nr) = a (mr rows of n, lda apart) times b (n x nr, k-major panel)"""
    pg_vec_gemm_tile_f32(n, <const float *> a, lda, <const float *> b, <float *> c)


def sum_f64_f32(int64_t n, size_t x):
    return pg_vec_sum_f64_f32(n, <const float *> x)


def sumsq_f32(int64_t n, size_t x):
    return pg_vec_sumsq_f32(n, <const float *> x)


def add_sumsq_f32(int64_t n, size_t y, size_t x, size_t r):
    return pg_vec_add_sumsq_f32(n, <float *> y, <const float *> x, <const float *> r)


def cvar_f32(int64_t n, size_t y, size_t x, float mean):
    return pg_vec_cvar_f32(n, <float *> y, <const float *> x, mean)


def scale_mul_f32(int64_t n, size_t y, size_t x, float s, size_t w):
    pg_vec_scale_mul_f32(n, <float *> y, <const float *> x, s, <const float *> w)


def sincos_f32(int64_t n, size_t x, size_t c, size_t s, float scale):
    pg_vec_sincos_f32(n, <const float *> x, <float *> c, <float *> s, scale)


def rope_half_f32(int64_t n, size_t y0, size_t y1, size_t x0, size_t x1, size_t c, size_t s):
    pg_vec_rope_half_f32(n, <float *> y0, <float *> y1, <const float *> x0, <const float *> x1,
                         <const float *> c, <const float *> s)


def rope_adj_f32(int64_t n, size_t y, size_t x, size_t c, size_t s):
    pg_vec_rope_adj_f32(n, <float *> y, <const float *> x, <const float *> c, <const float *> s)


def attn_dot(str ktype, int nr, int64_t n, size_t q, int64_t ldq, size_t k, size_t s, int64_t lds):
    if ktype == "f32":
        pg_vec_attn_dot_f32(nr, n, <const float *> q, ldq, <const float *> k, <float *> s, lds)
    elif ktype == "f16":
        pg_vec_attn_dot_f16(nr, n, <const float *> q, ldq, <const uint16_t *> k, <float *> s, lds)
    elif ktype == "bf16":
        pg_vec_attn_dot_bf16(nr, n, <const float *> q, ldq, <const uint16_t *> k, <float *> s, lds)
    else:
        raise ValueError(ktype)


def attn_softmax_rows_f32(int nr, int64_t n, size_t x, int64_t ldx, size_t mv, int64_t ldm,
                          size_t M, size_t S, size_t f):
    """mv may be 0 (no mask)"""
    pg_vec_attn_softmax_rows_f32(nr, n, <float *> x, ldx, <const float *> mv, ldm, <float *> M, <float *> S,
                                 <float *> f)


def attn_mask_f16(int64_t n, size_t m, float slope, size_t y):
    """returns (lo, hi)"""
    cdef int64_t lo, hi
    pg_vec_attn_mask_f16(n, <const uint16_t *> m, slope, <float *> y, &lo, &hi)
    return lo, hi


def attn_acc(str vtype, int nr, int64_t n, size_t acc, int64_t lda, int64_t nk, size_t p, int64_t ldp,
             size_t v, size_t nbv, size_t f):
    """f may be 0 (no rescale)"""
    if vtype == "f32":
        pg_vec_attn_acc_f32(nr, n, <float *> acc, lda, nk, <const float *> p, ldp, <const float *> v, nbv,
                            <const float *> f)
    elif vtype == "f16":
        pg_vec_attn_acc_f16(nr, n, <float *> acc, lda, nk, <const float *> p, ldp, <const uint16_t *> v, nbv,
                            <const float *> f)
    elif vtype == "bf16":
        pg_vec_attn_acc_bf16(nr, n, <float *> acc, lda, nk, <const float *> p, ldp, <const uint16_t *> v, nbv,
                             <const float *> f)
    else:
        raise ValueError(vtype)


def attn_gemm_qk_f32(int nr, int64_t nc, int64_t dk, size_t q, int64_t ldq, size_t kt, int64_t ldk,
                     size_t s, int64_t lds):
    pg_vec_attn_gemm_qk_f32(nr, nc, dk, <const float *> q, ldq, <const float *> kt, ldk, <float *> s, lds)


def attn_transpose_f32(int64_t nr, int64_t nc, size_t x, int64_t ldx, size_t y, int64_t ldy):
    pg_vec_attn_transpose_f32(nr, nc, <const float *> x, ldx, <float *> y, ldy)
