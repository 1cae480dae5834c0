/* Threads of one compute: an OpenMP parallel region, the barrier between nodes, and the atomic
 * chunk counter for dynamic work (ggml's pattern: thread 0 sets the counter to nth, barrier, each
 * thread starts with chunk ith and then takes chunk_add() until it runs past the last chunk).
 * Without OpenMP everything runs on one thread (nth == 1) and the barrier returns at once. */
#pragma once
#include "pyggml.h"

#include <sched.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define PG_BARRIER_SPINS (1 << 14)   /* pause rounds before a waiting thread starts to yield */

typedef void (*pg_worker_fn)(void * arg, int ith, int nth);

static inline int pg_have_openmp(void) {
#ifdef _OPENMP
    return 1;
#else
    return 0;
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

static inline void pg_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

/* All threads of the compute meet here. A spinning generation counter (ggml's threadpool barrier)
 * rather than `omp barrier`: libgomp's barrier makes a futex_wake system call on every pass, which
 * costs more than the tiny nodes it separates. After a long spin the waiter yields its core, so an
 * oversubscribed machine still makes progress. */
static inline void pg_barrier(const pg_params * p) {
    if (p->nth == 1) return;
    pg_shared * s = p->shared;
    const int passed = __atomic_load_n(&s->n_barrier_passed, __ATOMIC_RELAXED);
    if (__atomic_add_fetch(&s->n_barrier, 1, __ATOMIC_SEQ_CST) == p->nth) {
        __atomic_store_n(&s->n_barrier, 0, __ATOMIC_RELAXED);
        __atomic_add_fetch(&s->n_barrier_passed, 1, __ATOMIC_SEQ_CST);
        return;
    }
    for (int spins = 0; __atomic_load_n(&s->n_barrier_passed, __ATOMIC_RELAXED) == passed; spins++) {
        if (spins < PG_BARRIER_SPINS) pg_cpu_relax();
        else sched_yield();
    }
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static inline void pg_chunk_set(const pg_params * p, int v) {
    __atomic_store_n(&p->shared->chunk, v, __ATOMIC_RELAXED);
}

/* returns the old value */
static inline int pg_chunk_add(const pg_params * p, int v) {
    return __atomic_fetch_add(&p->shared->chunk, v, __ATOMIC_RELAXED);
}
