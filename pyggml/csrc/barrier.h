/* Threads of one compute: an OpenMP parallel region, the barrier between nodes, and the atomic
 * chunk counter for dynamic work (ggml's pattern: thread 0 sets the counter to nth, barrier, each
 * thread starts with chunk ith and then takes chunk_add() until it runs past the last chunk).
 * Without OpenMP everything runs on one thread and the barrier is a no-op. */
#pragma once
#include "pyggml.h"

#ifdef _OPENMP
#include <omp.h>
#endif

typedef void (*pg_worker_fn)(void * arg, int ith, int nth);

static inline int pg_have_openmp(void) {
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}

static inline int pg_max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* run fn on n_threads threads (one parallel region); returns the team size actually used */
static inline int pg_parallel_run(int n_threads, pg_worker_fn fn, void * arg) {
    int used = 1;
#ifdef _OPENMP
    if (n_threads > 1) {
        #pragma omp parallel num_threads(n_threads)
        {
            const int nth = omp_get_num_threads();
            #pragma omp single
            used = nth;
            fn(arg, omp_get_thread_num(), nth);
        }
        return used;
    }
#endif
    (void) n_threads;
    fn(arg, 0, 1);
    return used;
}

static inline void pg_barrier(const pg_params * p) {
#ifdef _OPENMP
    if (p->nth > 1) {
        #pragma omp barrier
    }
#else
    (void) p;
#endif
}

static inline void pg_chunk_set(const pg_params * p, int v) {
    __atomic_store_n(&p->shared->chunk, v, __ATOMIC_RELAXED);
}

/* returns the old value */
static inline int pg_chunk_add(const pg_params * p, int v) {
    return __atomic_fetch_add(&p->shared->chunk, v, __ATOMIC_RELAXED);
}
