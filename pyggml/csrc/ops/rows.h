/* GET_ROWS, SET_ROWS: gather and scatter whole rows by index.
 *
 * get_rows(a, b)     a [E, R, B1, B2] any type with a to_float, b I32 [n, B1, B2, 1]
 *                    dst [E, n, B1, B2] F32 (I32 when a is I32)
 *                    dst[:, i, j, k] = to_f32(a[:, b[i, j, k], j, k])
 *
 * set_rows(a, b, c)  dst = a view of a [E, R, A2, A3] (float or quantized; may be strided)
 *                    src[0] = b F32/F16 [E, n, A2, A3]   src[1] = c I32/I64 [n, C1, C2, 1]
 *                    a[:, c[i, i2 % C1, i3 % C2], i2, i3] = convert(b[:, i, i2, i3])
 *
 *          c = [5 1 5]          b row 0 ──┐
 *                               b row 1 ──┼──► a row 1
 *                               b row 2 ──┴──► a row 5   (row 0 is overwritten: the last source row wins)
 *
 * Conversions are ggml's CPU ones (convert.h): F32 -> from_float of the destination type; F16 -> F16
 * a raw copy; F16 -> other widened to f32 in the thread's scratch (E floats per thread), then
 * from_float. Indices are data: an index out of range is reported with pg_report_error (Python raises
 * IndexError after the compute). get_rows zeroes that row; set_rows writes nothing at all, because
 * every thread checks its share of c (c is tiny) and the threads meet at a barrier before any row is
 * written.
 *
 * Threads in set_rows: with at least nth source rows whose indices rise strictly along each index
 * row (every destination row written once: a KV cache write), each thread takes a contiguous range
 * of source rows, the range the node that made them wrote on the same thread (so they come from its
 * own cache, not from another core's). Other indices deal whole rows
 * out by destination, row (i, i2, i3) to thread (c_index + i2 + A2*i3) % nth: every write to one
 * destination row is made by one thread in source order, so duplicates resolve to the last source
 * row with any thread count. With fewer rows than threads (decode writes one row per layer) every
 * thread converts its own range of blocks of each row, again in source order.
 *
 * Fused ROPE -> SET_ROWS (pyggml's; graph.h's fusion table checks the conditions): b is an F32 rope result (or a
 * reshape of one) that nothing else reads. Each source row is made on the fly from the rope rows it
 * consists of (E a multiple of the rope row ne0), rotated into the thread's scratch exactly as the
 * ROPE kernel would write them, then converted into the destination: the rope result is never
 * written, and the bytes equal the unfused pair's. Scratch: E floats of row plus the rope cos/sin
 * cache (at most E floats) per thread.
 */
#pragma once
#include "types.h"
#include "core/barrier.h"
#include "ops/rope.h"

/* elements per unit when a row is split across threads: a block, or 64 elements for the plain
 * types so that two threads never write into one cache line of an F16/BF16/F32 row */
#define PG_ROWS_SPLIT 64

static inline int64_t pg_rows_index(const pg_tensor * c, int64_t i, int64_t j, int64_t k) {
    const char * x = (const char *) c->data + i * c->nb[0] + j * c->nb[1] + k * c->nb[2];
    return c->type == PG_TYPE_I64 ? *(const int64_t *) x : *(const int32_t *) x;
}

/* the first i in [i0, i1) whose index c[i, j, k] is outside [0, R), else i1. Packed indices are
 * scanned branch-free first (the loop vectorises): a KV write of short rows is short enough that a
 * check of its indices one by one through pg_rows_index would be a visible share of it. */
static inline int64_t pg_rows_first_bad(const pg_tensor * c, int64_t i0, int64_t i1, int64_t j, int64_t k, int64_t R) {
    const char * base = (const char *) c->data + j * c->nb[1] + k * c->nb[2];
    int bad = 1;
    if (c->type == PG_TYPE_I64 && c->nb[0] == sizeof(int64_t)) {
        const int64_t * x = (const int64_t *) base;
        bad = 0;
        for (int64_t i = i0; i < i1; i++) bad |= (uint64_t) x[i] >= (uint64_t) R;
    } else if (c->type == PG_TYPE_I32 && c->nb[0] == sizeof(int32_t)) {
        const int32_t * x = (const int32_t *) base;
        bad = 0;
        for (int64_t i = i0; i < i1; i++) bad |= (uint64_t) (int64_t) x[i] >= (uint64_t) R;
    }
    if (!bad) return i1;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r = pg_rows_index(c, i, j, k);
        if (r < 0 || r >= R) return i;
    }
    return i1;
}

/* ---- get_rows ---- */

static inline void pg_compute_get_rows(const pg_params * p, pg_tensor * dst) {
    const pg_tensor * a = dst->src[0];
    const pg_tensor * b = dst->src[1];
    const int64_t E = dst->ne[0], n = dst->ne[1], B1 = dst->ne[2];
    const bool raw = a->type == PG_TYPE_F32 || a->type == PG_TYPE_I32;
    int64_t r0, r1;
    pg_split_rows(pg_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        const int64_t i = ir % n, j = ir / n % B1, k = ir / (n * B1);
        const int64_t r = pg_rows_index(b, i, j, k);
        char * y = pg_row(dst, i, j, k);
        if (r < 0 || r >= a->ne[1]) {
            pg_report_error(p, dst, ir, r);
            memset(y, 0, E * sizeof(float));
            continue;
        }
        const char * x = pg_row(a, r, j, k);
        if (raw) memcpy(y, x, E * sizeof(float));
        else pg_traits[a->type].to_float(x, (float *) y, E);
    }
}

/* ---- set_rows ---- */

/* where a fused set_rows gets its rows: the ROPE node, its decoded parameters and the thread's
 * cos/sin caches */
typedef struct pg_rows_rope {
    const pg_tensor * node;
    pg_rope r;
    pg_rope_batch batch;
} pg_rows_rope;

static inline bool pg_set_rows_widens(const pg_tensor * dst) {
    return dst->src[0]->type == PG_TYPE_F16 && dst->type != PG_TYPE_F16;
}

static inline bool pg_plan_set_rows(const pg_tensor * dst, pg_plan * pl) {
    pl->work = pg_set_rows_widens(dst) ? pg_per_thread(dst->ne[0] * sizeof(float), pl->nth) : 0;
    return true;
}

/* a fused set_rows' scratch: one destination row of E floats, then the rope's cache batch (a token's
 * cache is 2*n_pairs <= the rope's ne0 <= E floats) */
static inline size_t pg_rope_set_rows_scratch(int64_t E) { return (size_t) (1 + PG_ROPE_TOK) * E * sizeof(float); }

static inline bool pg_plan_rope_set_rows(pg_tensor * const * g, pg_plan * pl) {
    pl->work = pg_per_thread(pg_rope_set_rows_scratch(g[1]->ne[0]), pl->nth);
    return true;
}

/* source row ir (linear over b's rows) of a fused set_rows as f32 in buf: rope rows
 * ir*E/ne0 .. (ir+1)*E/ne0 - 1, each rotated with the cache of its token */
static inline void pg_rope_source_row(pg_rows_rope * rr, int64_t ir, int64_t E, float * buf) {
    const pg_tensor * rope = rr->node;
    const int64_t ne0 = rope->ne[0], ne1 = rope->ne[1], ne2 = rope->ne[2];
    for (int64_t j = ir * (E / ne0), k = 0; k < E; j++, k += ne0) {
        const int64_t i1 = j % ne1, i2 = j / ne1 % ne2, i3 = j / (ne1 * ne2);
        const float * cache = pg_rope_cache_of(&rr->r, rope->src[1], &rr->batch, i2);
        pg_rope_row_f32(&rr->r, cache, (const float *) pg_row(rope->src[0], i1, i2, i3), buf + k);
    }
}

/* elements [e0, e1) of source row (i, i2, i3) into destination row (r, i2, i3) */
static inline void pg_set_row(const pg_tensor * dst, pg_rows_rope * rr, int64_t r, int64_t i, int64_t i2,
                              int64_t i3, int64_t e0, int64_t e1, float * buf) {
    const pg_tensor * b = dst->src[0];
    /* whole rows (e0 = 0) skip pg_row_size's two divisions, a visible share of a short row's cost */
    const char * x = pg_row(b, i, i2, i3) + (e0 ? pg_row_size(b->type, e0) : 0);
    char * y = pg_row(dst, r, i2, i3) + (e0 ? pg_row_size(dst->type, e0) : 0);
    const int64_t m = e1 - e0;
    if (rr) {
        pg_rope_source_row(rr, i + b->ne[1] * (i2 + b->ne[2] * i3), dst->ne[0], buf);
        pg_traits[dst->type].from_float(buf + e0, y, m);
    } else if (b->type == dst->type) {
        memcpy(y, x, pg_row_size(dst->type, m));
    } else if (b->type == PG_TYPE_F32) {
        pg_traits[dst->type].from_float((const float *) x, y, m);
    } else {
        pg_row_f16_to_f32(x, buf, m);
        pg_traits[dst->type].from_float(buf, y, m);
    }
}

/* whether the indices rise strictly along every index row: no destination row is written twice.
 * Every thread scans all of c (n * C1 * C2 indices, a small part of the n * A2 * A3 rows' work) and
 * so decides the same without a word of shared state. */
static inline bool pg_set_rows_rising(const pg_tensor * c, int64_t n, int64_t C1, int64_t C2) {
    for (int64_t kk = 0; kk < C2; kk++) {
        for (int64_t kj = 0; kj < C1; kj++) {
            int64_t prev = pg_rows_index(c, 0, kj, kk);
            for (int64_t ki = 1; ki < n; ki++) {
                const int64_t r = pg_rows_index(c, ki, kj, kk);
                if (r <= prev) return false;
                prev = r;
            }
        }
    }
    return true;
}

/* set_rows, reading its source rows from b or, fused, from the ROPE node `rope` */
static inline void pg_set_rows_impl(const pg_params * p, pg_tensor * dst, const pg_tensor * rope) {
    const pg_tensor * b = dst->src[0];
    const pg_tensor * c = dst->src[1];
    const int64_t E = dst->ne[0], R = dst->ne[1];
    const int64_t n = b->ne[1], A2 = b->ne[2], A3 = b->ne[3], C1 = c->ne[1], C2 = c->ne[2];

    /* 1. every index checked before anything is written, k = ki + n * (kj + C1 * kk), by index rows */
    int64_t k0, k1;
    pg_split_rows(n * C1 * C2, p->ith, p->nth, &k0, &k1);
    for (int64_t k = k0; k < k1;) {
        const int64_t row = k / n, ki = k - row * n, ke = PG_MIN(k1 - row * n, n);
        const int64_t bad = pg_rows_first_bad(c, ki, ke, row % C1, row / C1, R);
        if (bad < ke) {
            pg_report_error(p, dst, row * n + bad, pg_rows_index(c, bad, row % C1, row / C1));
            break;
        }
        k = row * n + ke;
    }
    if (rope) {
        pg_rope r;
        pg_rope_init(&r, rope);
        pg_rope_check_factors(p, rope, &r);
    }
    pg_barrier(p);
    /* no thread reports after the barrier, so all threads read the same flag */
    if (__atomic_load_n(&p->shared->err, __ATOMIC_ACQUIRE)) return;

    /* 2. the writes, in source order within each thread */
    float * buf = NULL;
    pg_rows_rope rr, * prr = NULL;
    if (rope) {
        buf = (float *) pg_scratch(p, pg_rope_set_rows_scratch(E));
        rr.node = rope;
        pg_rope_init(&rr.r, rope);
        pg_rope_batch_init(&rr.batch, buf + E);
        prr = &rr;
    } else if (pg_set_rows_widens(dst)) {
        buf = (float *) pg_scratch(p, E * sizeof(float));
    }
    /* the source rows in order, by nested loops: a linear index would cost four divisions per row,
     * a large share of a KV-cache write's time */
    const int64_t nr = n * A2 * A3;
    if (nr >= p->nth && (p->nth == 1 || pg_set_rows_rising(c, n, C1, C2))) {
        int64_t s0, s1;
        pg_split_rows(nr, p->ith, p->nth, &s0, &s1);
        /* by runs of rows of one matrix (i2, i3). f32 source rows (a KV-cache write) go straight to
         * the converter with the row and index pointers carried, without pg_set_row's call and frame
         * (most of the cost of a short row) */
        const pg_from_float_fn from_float = !prr && b->type == PG_TYPE_F32 ? pg_traits[dst->type].from_float : NULL;
        const size_t bx = b->nb[1], by = dst->nb[1], bc = c->nb[0];
        const bool c64 = c->type == PG_TYPE_I64;
        int64_t s = s0, i = s0 % n, i2 = s0 / n % A2, i3 = s0 / (n * A2);
        while (s < s1) {
            const int64_t ie = PG_MIN(n, i + (s1 - s)), j2 = i2 % C1, j3 = i3 % C2;
            if (from_float) {
                const char * x = pg_row(b, i, i2, i3);
                const char * ci = (const char *) c->data + i * bc + j2 * c->nb[1] + j3 * c->nb[2];
                char * y = pg_row(dst, 0, i2, i3);
                for (int64_t k = i; k < ie; k++, x += bx, ci += bc)
                    from_float((const float *) x, y + (c64 ? *(const int64_t *) ci : *(const int32_t *) ci) * by, E);
            } else {
                for (int64_t k = i; k < ie; k++) pg_set_row(dst, prr, pg_rows_index(c, k, j2, j3), k, i2, i3, 0, E, buf);
            }
            s += ie - i;
            i = 0;
            if (++i2 == A2) i2 = 0, i3++;
        }
    } else if (nr >= p->nth) {
        for (int64_t i3 = 0; i3 < A3; i3++) {
            for (int64_t i2 = 0; i2 < A2; i2++) {
                for (int64_t i = 0; i < n; i++) {
                    const int64_t r = pg_rows_index(c, i, i2 % C1, i3 % C2);
                    if ((r + i2 + A2 * i3) % p->nth == p->ith)
                        pg_set_row(dst, prr, r, i, i2, i3, 0, E, buf);
                }
            }
        }
    } else {
        const int64_t unit = pg_traits[dst->type].blck > 1 ? pg_traits[dst->type].blck : PG_ROWS_SPLIT;
        int64_t u0, u1;
        pg_split_rows((E + unit - 1) / unit, p->ith, p->nth, &u0, &u1);
        const int64_t e0 = u0 * unit, e1 = PG_MIN(u1 * unit, E);
        if (e0 >= e1) return;
        for (int64_t i3 = 0; i3 < A3; i3++) {
            for (int64_t i2 = 0; i2 < A2; i2++) {
                for (int64_t i = 0; i < n; i++)
                    pg_set_row(dst, prr, pg_rows_index(c, i, i2 % C1, i3 % C2), i, i2, i3, e0, e1, buf);
            }
        }
    }
}

static inline void pg_compute_set_rows(const pg_params * p, pg_tensor * dst) { pg_set_rows_impl(p, dst, NULL); }

/* the fused pair: g[0] the ROPE node, g[1] the SET_ROWS node */
static inline void pg_compute_rope_set_rows(const pg_params * p, pg_tensor * const * g) {
    pg_set_rows_impl(p, g[1], g[0]);
}
