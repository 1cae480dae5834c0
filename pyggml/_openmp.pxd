# The only place the threading layer is cimported. csrc/core/barrier.h guards OpenMP, so the package
# also builds (and runs serially) without it.
from pyggml._typedefs cimport pg_params


cdef extern from "core/barrier.h" nogil:
    ctypedef void (*pg_worker_fn)(void * arg, int ith, int nth) noexcept nogil
    int pg_have_openmp()
    int pg_parallel_run(int n_threads, pg_worker_fn fn, void * arg)
    void pg_barrier(const pg_params * p)
