"""The row primitives (csrc/vec/, through vec/vec.h) called directly, for tests/kernels/test_vec.py:
each SIMD path (AVX-512, AVX2, NEON, RVV at any VLEN, the scalar loops) is compared against float64
references at lengths that hit every tail. Arguments are element counts and raw addresses (numpy's
arr.ctypes.data); nothing is checked here, the test helpers pass contiguous arrays of the right dtype
and length.
barrier_probe() drives barrier.h's barrier directly (tests/kernels/test_barrier.py)."""
from libc.stdint cimport int64_t, uint16_t
from libc.stdlib cimport free
from libc.string cimport memset
from posix.stdlib cimport posix_memalign
from posix.time cimport CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID, clock_gettime, clockid_t, nanosleep, timespec

from pyggml._openmp cimport pg_barrier, pg_parallel_run
from pyggml._typedefs cimport pg_params, pg_shared


cdef extern from "vec/vec.h" nogil:
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
    double pg_vec_exp_sum_f32(int64_t n, float * y, const float * x, float m)
    void pg_vec_quantize_q8_0(int64_t n, const float * x, pg_block_q8_0 * y)
    void pg_vec_silu_f32(int64_t n, float * y, const float * x)
    void pg_vec_gelu_f32(int64_t n, float * y, const float * x)
    void pg_vec_gelu_erf_f32(int64_t n, float * y, const float * x)
    void pg_vec_tanh_f32(int64_t n, float * y, const float * x)
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
    void pg_vec_attn_dot_f16(int nr, int64_t n, const float * q, int64_t ldq, const uint16_t * k, float * s,
                             int64_t lds)
    void pg_vec_attn_dot_bf16(int nr, int64_t n, const float * q, int64_t ldq, const uint16_t * k, float * s,
                              int64_t lds)
    void pg_vec_attn_softmax_rows_f32(int nr, int64_t n, float * x, int64_t ldx, const float * mv, int64_t ldm,
                                      float * run_max, float * run_sum, float * f)
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


cdef extern from "types/dot-legacy.h" nogil:
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


def exp_sum_f32(int64_t n, size_t y, size_t x, float m):
    return pg_vec_exp_sum_f32(n, <float *> y, <const float *> x, m)


def dot_q4_0_q8_0(int64_t n, size_t x, size_t y):
    return pg_vec_dot_q4_0_q8_0(n, <const pg_block_q4_0 *> x, <const pg_block_q8_0 *> y)


def quantize_q8_0(int64_t n, size_t x, size_t y):
    pg_vec_quantize_q8_0(n, <const float *> x, <pg_block_q8_0 *> y)


ACTS = ("silu", "gelu", "gelu_erf", "tanh")
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
    elif name == "tanh":
        pg_vec_tanh_f32(n, py, px)
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
                          size_t run_max, size_t run_sum, size_t f):
    """mv may be 0 (no mask)"""
    pg_vec_attn_softmax_rows_f32(nr, n, <float *> x, ldx, <const float *> mv, ldm, <float *> run_max,
                                 <float *> run_sum, <float *> f)


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


cdef struct _stream_arg:
    const int64_t * addr
    const int64_t * n
    int64_t n_blocks
    float * out     # one max per thread, a cache line apart


cdef enum:
    STREAM_CHUNK = 4096     # floats per max call: 16 KB from each half in turn


cdef void _stream_worker(void * arg, int ith, int nth) noexcept nogil:
    # a thread's part of each block is read as two halves side by side, a chunk of each in turn: two
    # read streams per thread keep more misses in flight than one (the fastest of the read patterns
    # measured, so the yardstick is the read rate at its best)
    cdef _stream_arg * a = <_stream_arg *> arg
    cdef int64_t b, lo, h, k, c
    cdef const float * x
    cdef float m = -1e38, v, w
    for b in range(a.n_blocks):
        lo = a.n[b] * ith // nth
        h = (a.n[b] * (ith + 1) // nth - lo) // 2
        x = <const float *> a.addr[b] + lo
        k = 0
        while k < h:
            c = min(<int64_t> STREAM_CHUNK, h - k)
            v = pg_vec_max_f32(c, x + k)
            w = pg_vec_max_f32(c, x + h + k)
            m = max(m, v, w)
            k += c
        v = pg_vec_max_f32(a.n[b] * (ith + 1) // nth - lo - 2 * h, x + 2 * h)
        m = max(m, v)
    a.out[16 * ith] = m


def stream_read_f32(addr, n, int n_threads):
    """Read n[i] floats at address addr[i] for every block i once, each block split in n_threads
    contiguous parts (each read as two halves side by side), in one parallel region (the threads of a
    compute), with the max primitive: a memory-read yardstick (bandwidth = 4 * sum(n) / seconds) for
    the benchmarks and the demo. Returns the max. The GIL is released."""
    import numpy as np
    cdef int64_t[::1] ad = np.ascontiguousarray(addr, dtype=np.int64)
    cdef int64_t[::1] cnt = np.ascontiguousarray(n, dtype=np.int64)
    out = np.full(16 * max(n_threads, 1), -np.inf, dtype=np.float32)
    cdef float[::1] o = out
    cdef _stream_arg a
    a.addr = &ad[0]
    a.n = &cnt[0]
    a.n_blocks = ad.shape[0]
    a.out = &o[0]
    with nogil:
        pg_parallel_run(max(n_threads, 1), _stream_worker, &a)
    return float(out.max())


# ---- barrier.h: the barrier's sleep path, for tests/kernels/test_barrier.py ----

cdef enum:
    PROBE_MAX_THREADS = 64

cdef struct _probe_state:
    pg_shared * shared
    int rounds
    timespec delay
    double cpu_s[PROBE_MAX_THREADS]


cdef double _seconds(clockid_t clock) noexcept nogil:
    cdef timespec ts
    clock_gettime(clock, &ts)
    return ts.tv_sec + 1e-9 * ts.tv_nsec


cdef void _probe_worker(void * arg, int ith, int nth) noexcept nogil:
    cdef _probe_state * s = <_probe_state *> arg
    cdef pg_params p
    memset(&p, 0, sizeof(p))
    p.ith = ith
    p.nth = nth
    p.shared = s.shared
    cdef double c0 = _seconds(CLOCK_THREAD_CPUTIME_ID)
    cdef int r
    for r in range(s.rounds):
        if r % nth == ith and (s.delay.tv_sec or s.delay.tv_nsec):
            nanosleep(&s.delay, NULL)
        pg_barrier(&p)
    s.cpu_s[ith] = _seconds(CLOCK_THREAD_CPUTIME_ID) - c0


def barrier_probe(int rounds, double delay_s, int n_threads=2):
    """Run `rounds` barriers on n_threads in one parallel region; before each, one thread in turn
    sleeps delay_s (if > 0), so the others wait that long. Returns (team size, wall seconds, CPU seconds of
    all threads together): a barrier that sleeps instead of spinning uses far less CPU than wall."""
    if not 1 <= n_threads <= PROBE_MAX_THREADS:
        raise ValueError(f"barrier_probe: n_threads must be in [1, {PROBE_MAX_THREADS}], got {n_threads}")
    cdef void * mem = NULL
    if posix_memalign(&mem, 64, sizeof(pg_shared)) != 0:
        raise MemoryError("barrier_probe")
    memset(mem, 0, sizeof(pg_shared))
    cdef _probe_state s
    s.shared = <pg_shared *> mem
    s.rounds = rounds
    s.delay.tv_sec = <long> delay_s
    s.delay.tv_nsec = <long> ((delay_s - <long> delay_s) * 1e9)
    memset(s.cpu_s, 0, sizeof(s.cpu_s))
    cdef double t0 = _seconds(CLOCK_MONOTONIC)
    cdef int used
    with nogil:
        used = pg_parallel_run(n_threads, _probe_worker, &s)
    wall = _seconds(CLOCK_MONOTONIC) - t0
    free(mem)
    return used, wall, sum(s.cpu_s[i] for i in range(used))
