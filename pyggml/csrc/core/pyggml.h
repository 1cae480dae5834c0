/* pyggml core: the tensor struct shared by Cython and the kernels, compute and plan params, helpers.
 *
 * Tensors follow ggml: ne[4] element counts (dim 0 fastest), nb[4] byte strides. For block types
 * (Q8_0, Q4_0) nb[0] is the size of one block and dim 0 is addressed in blocks.
 * An op has two functions (its row in the op table, ops.h):
 *   bool pg_plan_<op>(const pg_tensor * dst, pg_plan * pl)     once per plan: work-buffer bytes and
 *                                                             choices for pl->nth threads, or why not
 *   void pg_compute_<op>(const pg_params * p, pg_tensor * dst) thread p->ith's share of p->nth: reads
 *                                                             dst->src[], dst->op_params, p->variant
 */
#pragma once

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define PG_MAX_DIMS 4
#define PG_MAX_SRC 10
#define PG_MAX_OP_PARAMS 16
#define PG_CACHE_LINE 64

/* pg_tensor.flags bits (ggml's values) */
enum { PG_FLAG_INPUT = 1, PG_FLAG_OUTPUT = 2 };

/* values equal ggml's; the type table (types.h) has a row per type and pyggml.Type is built from it */
enum pg_type {
    PG_TYPE_F32 = 0, PG_TYPE_F16 = 1, PG_TYPE_Q4_0 = 2, PG_TYPE_Q8_0 = 8,
    PG_TYPE_Q2_K = 10, PG_TYPE_Q3_K = 11, PG_TYPE_Q4_K = 12, PG_TYPE_Q5_K = 13, PG_TYPE_Q6_K = 14, PG_TYPE_Q8_K = 15,
    PG_TYPE_Q4_1 = 3, PG_TYPE_Q5_0 = 6, PG_TYPE_Q5_1 = 7, PG_TYPE_Q8_1 = 9, PG_TYPE_IQ4_NL = 20, PG_TYPE_IQ4_XS = 23,
    PG_TYPE_I8 = 24, PG_TYPE_I16 = 25, PG_TYPE_I32 = 26, PG_TYPE_I64 = 27, PG_TYPE_F64 = 28,
    PG_TYPE_BF16 = 30, PG_TYPE_MXFP4 = 39, PG_TYPE_COUNT = 40,
};

typedef uint16_t pg_fp16_t;
typedef uint16_t pg_bf16_t;

typedef struct pg_tensor {
    int32_t type;
    int32_t op;
    int64_t ne[PG_MAX_DIMS];
    size_t nb[PG_MAX_DIMS];
    int32_t op_params[PG_MAX_OP_PARAMS];
    int32_t flags;
    struct pg_tensor * src[PG_MAX_SRC];
    struct pg_tensor * view_src;
    size_t view_offs;
    void * data;
    /* a copy of the rows in the mul_mat kernels' repacked layout (pg_panels_*, Tensor.repack), which
     * mul_mat then reads instead; NULL: none */
    const void * panels;
} pg_tensor;

/* state shared by the threads of one compute; each counter on its own cache line */
typedef struct pg_shared {
    _Alignas(PG_CACHE_LINE) int chunk;
    /* the barrier between nodes (barrier.h): arrivals, completed barriers (the word sleepers wait
     * on), and how many threads sleep */
    _Alignas(PG_CACHE_LINE) int n_barrier;
    _Alignas(PG_CACHE_LINE) int n_barrier_passed;
    int n_sleeping;
    /* a kernel that finds bad data (an index out of range) records it here instead of crashing;
     * the first report wins and Python raises after the compute */
    _Alignas(PG_CACHE_LINE) int err;
    const struct pg_tensor * err_node;
    int64_t err_pos, err_val;
} pg_shared;

typedef struct pg_params {
    int ith, nth;
    size_t wsize;           /* bytes of wdata (all threads) */
    void * wdata;           /* work buffer, PG_CACHE_LINE aligned */
    pg_shared * shared;
    int32_t variant;        /* what the node's plan function chose (pg_plan.variant) */
} pg_params;

/* what a plan function gets and decides for one node (or fused group) */
typedef struct pg_plan {
    int nth;                /* in: threads of the compute */
    bool use_ref;           /* in: reference kernels only (compute(use_ref=True)) */
    size_t work;            /* out: work-buffer bytes, all threads together */
    int32_t variant;        /* out: a choice the kernel reads back as pg_params.variant */
    char err[192];          /* out: why the node cannot run, when the plan function returns false */
} pg_plan;

/* a plan function's refusal: the message (printf-style) for the error Python raises */
static inline bool pg_plan_fail(pg_plan * pl, const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pl->err, sizeof(pl->err), fmt, ap);
    va_end(ap);
    return false;
}

/* the plan function of an op that needs no work buffer and has nothing to choose */
static inline bool pg_plan_no_scratch(const pg_tensor * dst, pg_plan * pl) { (void) dst; (void) pl; return true; }
static inline bool pg_plan_group_no_scratch(pg_tensor * const * nodes, pg_plan * pl) { (void) nodes; (void) pl; return true; }

#define PG_MIN(a, b) ((a) < (b) ? (a) : (b))
#define PG_MAX(a, b) ((a) > (b) ? (a) : (b))
#define PG_ALWAYS_INLINE static inline __attribute__((always_inline))
#define PG_PAD(x, n) (((x) + (n) - 1) / (n) * (n))

static inline int64_t pg_nrows(const pg_tensor * t) { return t->ne[1] * t->ne[2] * t->ne[3]; }
static inline int64_t pg_nelements(const pg_tensor * t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }

/* contiguous rows [*r0, *r1) of nr for thread ith of nth */
static inline void pg_split_rows(int64_t nr, int ith, int nth, int64_t * r0, int64_t * r1) {
    const int64_t dr = (nr + nth - 1) / nth;
    *r0 = PG_MIN(dr * ith, nr);
    *r1 = PG_MIN(*r0 + dr, nr);
}

/* row index ir of t (dim 1 fastest) as (i1, i2, i3) */
static inline void pg_unravel_row(const pg_tensor * t, int64_t ir, int64_t * i1, int64_t * i2, int64_t * i3) {
    *i1 = ir % t->ne[1];
    *i2 = ir / t->ne[1] % t->ne[2];
    *i3 = ir / (t->ne[1] * t->ne[2]);
}

/* a pointer to row (i1, i2, i3) of t */
static inline char * pg_row(const pg_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
    return (char *) t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

/* per-thread scratch of `bytes` per thread, each slice on its own cache line */
static inline void * pg_scratch(const pg_params * p, size_t bytes) {
    return (char *) p->wdata + PG_PAD(bytes, PG_CACHE_LINE) * p->ith;
}

/* record a data error (first one wins); kernels then skip the offending work */
static inline void pg_report_error(const pg_params * p, const pg_tensor * node, int64_t pos, int64_t val) {
    int expected = 0;
    if (__atomic_compare_exchange_n(&p->shared->err, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
        p->shared->err_node = node;
        p->shared->err_pos = pos;
        p->shared->err_val = val;
    }
}

/* A scratch layout: buffers laid out one after the other, by one function that serves both the plan
 * and the kernel. With at == NULL it only counts (the plan's sizes); with at set it hands out the
 * pointers (the kernel's carving). */
typedef struct pg_layout {
    char * at;
    size_t bytes;
} pg_layout;

static inline void * pg_layout_take(pg_layout * l, size_t bytes) {
    void * p = l->at ? l->at + l->bytes : NULL;
    l->bytes += bytes;
    return p;
}

static inline float * pg_layout_f32(pg_layout * l, int64_t n) { return (float *) pg_layout_take(l, (size_t) n * sizeof(float)); }

/* work-buffer bytes for `bytes` of scratch per thread (the layout pg_scratch() indexes) */
static inline size_t pg_per_thread(size_t bytes, int nth) {
    return bytes ? PG_PAD(bytes, PG_CACHE_LINE) * (size_t) nth : 0;
}

static inline float pg_op_param_f32(const pg_tensor * t, int i) {
    float f; memcpy(&f, &t->op_params[i], sizeof(f)); return f;
}

static inline const char * pg_build_compiler(void) {
#ifdef PYGGML_COMPILER
    return PYGGML_COMPILER;
#else
    return "unknown";
#endif
}
