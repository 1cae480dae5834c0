/* The executor: the op table's kernels, the fusion table, and the worker every thread of a compute
 * runs. _graph.pyx (CGraph) keeps the nodes, plans memory and calls in here.
 *
 *   plan:     pg_graph_fuse     the fused groups (the fusion table below, tried longest first)
 *             pg_exec_plan      per step (a node or a fused group): its plan function -> work bytes,
 *                               the variant its kernel reads, or why it cannot run
 *   compute:  pg_graph_worker   every thread walks every step with (ith, nth), a barrier between
 *                               steps; a step runs its fusion's kernel or its node's op-table kernel;
 *                               hooks (Python callbacks at chosen nodes) run between two barriers
 *
 * No case falls through to a default: an op without a kernel, or a plan function that refuses its
 * node (an unknown GLU op, a type without the kernels), is an error of the plan.
 */
#pragma once
#include "ops.h"
#include "core/barrier.h"
#include "ops/binary.h"
#include "ops/conv.h"
#include "ops/copy.h"
#include "ops/flash-attn.h"
#include "ops/glu.h"
#include "ops/matmul.h"
#include "ops/matmul-id.h"
#include "ops/norm.h"
#include "ops/rope.h"
#include "ops/rows.h"
#include "ops/softmax.h"
#include "ops/sort.h"

typedef void (*pg_compute_fn)(const pg_params * p, pg_tensor * dst);
typedef bool (*pg_plan_fn)(const pg_tensor * dst, pg_plan * pl);

typedef struct pg_op_kernels {
    pg_compute_fn compute;
    pg_plan_fn plan;
} pg_op_kernels;

#define PG_OP_KERNELS(name, flags, kernel, plan) {pg_compute_##kernel, pg_plan_##plan},
#define PG_LEAF_KERNELS(name) {NULL, NULL},
static const pg_op_kernels pg_op_kernel_table[] = { PG_OPS(PG_OP_KERNELS, PG_LEAF_KERNELS) };
#undef PG_OP_KERNELS
#undef PG_LEAF_KERNELS
_Static_assert(sizeof(pg_op_kernel_table) / sizeof(pg_op_kernel_table[0]) == PG_OP_COUNT, "one kernel row per op id");

/* ---- fusion ----
 * A fusion runs consecutive executed nodes as one kernel. Its rule holds exactly when the fused
 * kernel gives the nodes' own results bit for bit, e.g. that an intermediate it never writes has no
 * other reader (one use, not a view, not a graph output). Rules see the graph through pg_graph: the
 * nodes in order and how often each is a source of a node. */
#define PG_FUSE_MAX 3

typedef struct pg_graph {
    pg_tensor * const * nodes;
    int n;
    const int32_t * uses;       /* uses[i]: how often nodes[i] is a source in the graph */
} pg_graph;

static inline int pg_graph_uses(const pg_graph * g, const pg_tensor * t) {
    for (int i = 0; i < g->n; i++) if (g->nodes[i] == t) return g->uses[i];
    return 0;
}

/* read by nothing but its one consumer inside the group: not a view, not an output, one use */
static inline bool pg_fuse_private(const pg_graph * g, const pg_tensor * t) {
    return pg_graph_uses(g, t) == 1 && !t->view_src && !(t->flags & PG_FLAG_OUTPUT);
}

/* RMS_NORM -> MUL, ggml's conditions: the norm's result is read by the mul only; same shape; the
 * weight is F32 with packed rows of the norm's width */
static inline bool pg_fuse_norm_mul(const pg_graph * g, const pg_tensor * norm, const pg_tensor * mul) {
    if (!pg_fuse_private(g, norm)) return false;
    const pg_tensor * w = mul->src[0] == norm ? mul->src[1] : mul->src[1] == norm ? mul->src[0] : NULL;
    for (int i = 0; i < 4; i++) if (mul->ne[i] != norm->ne[i]) return false;
    return w && mul->type == PG_TYPE_F32 && w->type == PG_TYPE_F32 && w->nb[0] == sizeof(float) &&
           w->ne[0] == norm->ne[0];
}

/* ADD -> RMS_NORM: the norm reads the sum itself (not a view of it), the norm is not in place, all
 * F32, and the addend's rows are as wide as the sum's (no repeat within a row) */
static inline bool pg_fuse_add_norm(const pg_tensor * add, const pg_tensor * norm) {
    const pg_tensor * a = add->src[0], * b = add->src[1];
    return norm->src[0] == add && !norm->view_src && add->type == PG_TYPE_F32 && a->type == PG_TYPE_F32 &&
           b->type == PG_TYPE_F32 && b->ne[0] == add->ne[0];
}

static inline bool pg_match_add_rms_norm_mul(const pg_graph * g, pg_tensor * const * n) {
    return pg_fuse_add_norm(n[0], n[1]) && pg_fuse_norm_mul(g, n[1], n[2]);
}
static inline bool pg_match_rms_norm_mul(const pg_graph * g, pg_tensor * const * n) { return pg_fuse_norm_mul(g, n[0], n[1]); }
static inline bool pg_match_add_rms_norm(const pg_graph * g, pg_tensor * const * n) { (void) g; return pg_fuse_add_norm(n[0], n[1]); }

/* ROPE -> SET_ROWS: the rope result is F32 and read only by the set_rows, directly or through one
 * reshape (a KV cache writes [head_dim * n_head, n_tokens] rows); a set_rows row is a whole number
 * of rope rows */
static inline bool pg_match_rope_set_rows(const pg_graph * g, pg_tensor * const * n) {
    const pg_tensor * rope = n[0], * b = n[1]->src[0];
    if (!pg_fuse_private(g, rope)) return false;
    if (b != rope && (b->op != PG_OP_RESHAPE || b->src[0] != rope || pg_graph_uses(g, b) != 1 ||
                      (b->flags & PG_FLAG_OUTPUT)))
        return false;
    return rope->type == PG_TYPE_F32 && b->ne[0] % rope->ne[0] == 0;
}

typedef struct pg_fusion {
    int n;                                  /* nodes in the group */
    int32_t ops[PG_FUSE_MAX];               /* their ops, in graph order */
    bool (*match)(const pg_graph * g, pg_tensor * const * nodes);
    void (*compute)(const pg_params * p, pg_tensor * const * nodes);
    bool (*plan)(pg_tensor * const * nodes, pg_plan * pl);
} pg_fusion;

/* longest first: a group is taken at the first row that matches */
static const pg_fusion pg_fusions[] = {
    {3, {PG_OP_ADD, PG_OP_RMS_NORM, PG_OP_MUL}, pg_match_add_rms_norm_mul, pg_compute_add_rms_norm_mul, pg_plan_group_no_scratch},
    {2, {PG_OP_RMS_NORM, PG_OP_MUL}, pg_match_rms_norm_mul, pg_compute_rms_norm_mul, pg_plan_group_no_scratch},
    {2, {PG_OP_ADD, PG_OP_RMS_NORM}, pg_match_add_rms_norm, pg_compute_add_rms_norm, pg_plan_group_no_scratch},
    {2, {PG_OP_ROPE, PG_OP_SET_ROWS}, pg_match_rope_set_rows, pg_compute_rope_set_rows, pg_plan_rope_set_rows},
};
#define PG_N_FUSIONS ((int) (sizeof(pg_fusions) / sizeof(pg_fusions[0])))

/* a node that runs: an op with a kernel and at least one element (at least one index, for the
 * ops whose indices are checked: PG_OPF_INDICES) */
static inline bool pg_executed(const pg_tensor * t) {
    if (!pg_op_known(t->op)) return true;      /* for pg_exec_plan to refuse */
    const int flags = pg_op_table[t->op].flags;
    if (flags & PG_OPF_NO_COMPUTE) return false;
    const pg_tensor * n = flags & PG_OPF_INDICES ? t->src[1] : t;
    return n->ne[0] * n->ne[1] * n->ne[2] * n->ne[3] != 0;
}

/* the fused groups among run[0..n_run) (the executed nodes of g, in order): fusion_at[i] is the
 * fusion whose group starts at run[i], or -1; returns the number of groups */
static inline int pg_graph_fuse(const pg_graph * g, pg_tensor * const * run, int n_run, int32_t * fusion_at) {
    int groups = 0;
    for (int i = 0; i < n_run; i++) fusion_at[i] = -1;
    for (int i = 0; i < n_run;) {
        int k = 0;
        for (; k < PG_N_FUSIONS; k++) {
            const pg_fusion * f = &pg_fusions[k];
            if (i + f->n > n_run) continue;
            int j = 0;
            while (j < f->n && run[i + j]->op == f->ops[j]) j++;
            if (j == f->n && f->match(g, run + i)) break;
        }
        if (k < PG_N_FUSIONS) {
            fusion_at[i] = k;
            i += pg_fusions[k].n;
            groups++;
        } else {
            i++;
        }
    }
    return groups;
}

/* ---- steps ---- */

/* one step of a compute: a node, or a fused group of consecutive nodes (the last is the result) */
typedef struct pg_exec {
    pg_tensor * nodes[PG_FUSE_MAX];
    int32_t fusion;         /* a row of pg_fusions, or -1: nodes[0] alone, by the op table */
    int32_t variant;        /* the plan function's choice */
} pg_exec;

/* plan step e for pl->nth threads: fills pl (work, variant) or explains in pl->err why it cannot run */
static inline bool pg_exec_plan(pg_exec * e, pg_plan * pl) {
    pl->work = 0;
    pl->variant = 0;
    pl->err[0] = 0;
    bool ok;
    if (e->fusion >= 0) {
        ok = pg_fusions[e->fusion].plan(e->nodes, pl);
    } else {
        /* pg_executed() let only ops with kernels through, and ids past the table */
        const pg_tensor * t = e->nodes[0];
        ok = pg_op_known(t->op) ? pg_op_kernel_table[t->op].plan(t, pl)
                                : pg_plan_fail(pl, "op id %d has no row in the op table", t->op);
    }
    e->variant = pl->variant;
    return ok;
}

static inline void pg_exec_run(const pg_params * p, const pg_exec * e) {
    if (e->fusion >= 0) pg_fusions[e->fusion].compute(p, e->nodes);
    else pg_op_kernel_table[e->nodes[0]->op].compute(p, e->nodes[0]);
}

/* what the threads of one compute share */
typedef struct pg_run {
    const pg_exec * steps;
    int n;
    void * wdata;
    size_t wsize;
    pg_shared * shared;
    /* profiling (compute(profile=True)), else NULL: prof[(step * prof_nth + ith) * 3 + k] = ns since
     * t0 of the start of the thread's work (k = 0), its end (1), its return from the barrier (2) */
    uint64_t * prof;
    int prof_nth;
    uint64_t t0;
    /* hooks (compute with hooks), else hook_after is NULL: after step hook_after[k] (increasing, ended
     * by -1) thread 0 calls hook(hook_ctx, k) while the other threads wait at the barrier that follows;
     * a nonzero return, kept in *hook_stop, ends the compute there on every thread */
    const int32_t * hook_after;
    int (*hook)(void * ctx, int k);
    void * hook_ctx;
    int * hook_stop;
} pg_run;

/* prof and hooks are constants at the call sites: the plain walk has no clock read, no hook test and
 * no call beyond the steps' kernels. A barrier after the last step too: the threads then reach the
 * end of the parallel region together, and the wait for a descheduled one happens in pg_barrier
 * (which sleeps after a short spin), not in libgomp's end-of-region barrier (which spins for
 * milliseconds). A hook runs on thread 0, the thread that called compute (OpenMP's master; the one
 * that can take the GIL back), once every thread has passed the barrier of its step: the hooked
 * tensors are complete and nothing after them has started. */
static inline __attribute__((always_inline)) void pg_graph_walk(const pg_run * r, int ith, int nth, const bool prof,
                                                                const bool hooks) {
    pg_params p = {ith, nth, r->wsize, r->wdata, r->shared, 0};
    uint64_t t = prof ? pg_now_ns() - r->t0 : 0;   /* a step starts where the previous barrier returned */
    int h = 0;
    for (int i = 0; i < r->n; i++) {
        uint64_t * rec = prof ? r->prof + ((size_t) i * r->prof_nth + ith) * 3 : NULL;
        if (prof) rec[0] = t;
        p.variant = r->steps[i].variant;
        pg_exec_run(&p, &r->steps[i]);
        if (prof) rec[1] = pg_now_ns() - r->t0;
        pg_barrier(&p);
        if (prof) rec[2] = t = pg_now_ns() - r->t0;
        if (hooks && i == r->hook_after[h]) {
            if (ith == 0) __atomic_store_n(r->hook_stop, r->hook(r->hook_ctx, h), __ATOMIC_RELAXED);
            pg_barrier(&p);     /* its atomics order thread 0's store before every thread's load */
            if (__atomic_load_n(r->hook_stop, __ATOMIC_RELAXED)) return;
            h++;
            if (prof) t = pg_now_ns() - r->t0;     /* the hook's time is no step's */
        }
    }
}

static inline void pg_graph_worker(void * arg, int ith, int nth) {
    const pg_run * r = (const pg_run *) arg;
    if (r->hook_after) {
        if (r->prof) pg_graph_walk(r, ith, nth, true, true);
        else pg_graph_walk(r, ith, nth, false, true);
    } else if (r->prof) {
        pg_graph_walk(r, ith, nth, true, false);
    } else {
        pg_graph_walk(r, ith, nth, false, false);
    }
}
