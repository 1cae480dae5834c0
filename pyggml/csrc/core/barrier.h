/* Threads of one compute: an OpenMP parallel region, the barrier between nodes, and the atomic
 * chunk counter for dynamic work (ggml's pattern: thread 0 sets the counter to nth, barrier, each
 * thread starts with chunk ith and then takes chunk_add() until it runs past the last chunk).
 * Without OpenMP everything runs on one thread (nth == 1) and the barrier returns at once. */
#pragma once
#include "core/pyggml.h"

#include <limits.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define PG_HAVE_FUTEX 1
#else
#include <pthread.h>
#endif

/* How long a thread waiting at the barrier spins before it sleeps: about what a sleep costs, the
 * classic spin-then-block bound (a wait costs at most twice the best choice made in hindsight). A
 * sleep costs the futex calls and the wake-up: the sleeper runs again 40-120 us (mean) after the
 * last arriver's futex_wake on a Zen 3 VM, as its vCPU had halted. A shorter spin feeds on itself:
 * the woken thread starts the next step late, so the other one waits past the spin in turn and
 * sleeps (a 10 us spin slept at about half of a decode step's barriers). The waits between the nodes
 * of an idle machine (fractions of a microsecond) never reach it; a thread whose partner was
 * descheduled for a scheduler slice (milliseconds) hands its core over after it. The price is paid
 * beside other busy processes: with more runnable threads than cores, each spin takes time from the
 * partner it waits for (docs/bench/journal.md), so such a run should take fewer threads than free
 * cores. A time, not a count of pause instructions: under a hypervisor one pause costs 40-160 ns. */
#define PG_BARRIER_SPIN_NS 100000

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

static inline uint64_t pg_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* Sleep while *addr == val, until pg_wake_all(addr) (or spuriously: callers re-check). Linux: a
 * private futex on the word itself. Elsewhere one process-wide condition variable: the waker
 * changes the word before it takes the mutex, so a waiter checks it under the mutex without
 * missing the wake-up (broadcast: waiters of other words re-check and sleep again). */
#ifndef PG_HAVE_FUTEX
static pthread_mutex_t pg_wait_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pg_wait_cond = PTHREAD_COND_INITIALIZER;
#endif

static inline void pg_wait_on(int * addr, int val) {
#ifdef PG_HAVE_FUTEX
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
#else
    pthread_mutex_lock(&pg_wait_mutex);
    while (__atomic_load_n(addr, __ATOMIC_SEQ_CST) == val) pthread_cond_wait(&pg_wait_cond, &pg_wait_mutex);
    pthread_mutex_unlock(&pg_wait_mutex);
#endif
}

static inline void pg_wake_all(int * addr) {
#ifdef PG_HAVE_FUTEX
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void) addr;
    pthread_mutex_lock(&pg_wait_mutex);
    pthread_cond_broadcast(&pg_wait_cond);
    pthread_mutex_unlock(&pg_wait_mutex);
#endif
}

/* Spin while *addr == val: 1 once it changed, 0 after PG_BARRIER_SPIN_NS (the clock is read
 * every 64 pauses, a few microseconds, so the idle path never calls it). */
static inline int pg_spin_while(const int * addr, int val) {
    uint64_t t0 = 0;
    for (unsigned i = 1;; i++) {
        if (__atomic_load_n(addr, __ATOMIC_RELAXED) != val) return 1;
        pg_cpu_relax();
        if (i % 64 == 0) {
            const uint64_t t = pg_now_ns();
            if (t0 == 0) t0 = t;
            else if (t - t0 > PG_BARRIER_SPIN_NS) return 0;
        }
    }
}

/* All threads of the compute meet here. A generation counter (ggml's threadpool barrier) rather
 * than `omp barrier`, whose futex_wake on every pass costs more than the tiny nodes it separates.
 * A waiter spins for PG_BARRIER_SPIN_NS, then sleeps on the generation word; the last arriver
 * makes the wake-up call only when someone sleeps. So an idle machine never enters the kernel,
 * and on a loaded one a thread whose partner was descheduled frees its core for that partner
 * instead of spinning out a scheduler slice (sched_yield does not: the partner waits in another
 * core's run queue).
 * Lost wake-ups: a sleeper counts itself in n_sleeping before it re-checks the generation, and the
 * last arriver bumps the generation before it reads n_sleeping (all seq_cst), so either the
 * sleeper sees the new generation or the waker sees the sleeper; the futex re-checks the word. */
static inline void pg_barrier(const pg_params * p) {
    if (p->nth == 1) return;
    pg_shared * s = p->shared;
    const int passed = __atomic_load_n(&s->n_barrier_passed, __ATOMIC_RELAXED);
    if (__atomic_add_fetch(&s->n_barrier, 1, __ATOMIC_SEQ_CST) == p->nth) {
        __atomic_store_n(&s->n_barrier, 0, __ATOMIC_RELAXED);
        __atomic_add_fetch(&s->n_barrier_passed, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&s->n_sleeping, __ATOMIC_SEQ_CST) != 0) pg_wake_all(&s->n_barrier_passed);
        return;
    }
    if (!pg_spin_while(&s->n_barrier_passed, passed)) {
        __atomic_add_fetch(&s->n_sleeping, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&s->n_barrier_passed, __ATOMIC_SEQ_CST) == passed) {
            pg_wait_on(&s->n_barrier_passed, passed);
        }
        __atomic_sub_fetch(&s->n_sleeping, 1, __ATOMIC_SEQ_CST);
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
