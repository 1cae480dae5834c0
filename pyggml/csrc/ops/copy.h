/* DUP, CONT, CPY: copy src[0] into dst converting between any float or quantized types (integer
 * types copy to their own type). Elements are matched in logical order (i0 fastest, then i1, i2,
 * i3), so shapes may differ when the element counts agree (not for quantized tensors, which the
 * builder restricts to equal shapes). Either side may be strided; dst rows are split across threads.
 * Scratch: one row of max(src.ne0, dst.ne0) floats per thread.
 */
#pragma once
#include "types.h"
#include "core/barrier.h"

static inline size_t pg_copy_scratch(const pg_tensor * dst) {
    return (size_t) PG_MAX(dst->ne[0], dst->src[0]->ne[0]) * sizeof(float);
}

static inline bool pg_plan_dup(const pg_tensor * dst, pg_plan * pl) {
    pl->work = pg_per_thread(pg_copy_scratch(dst), pl->nth);
    return true;
}

/* row (i1, i2, i3) of x as f32 in buf; x's dim 0 may be strided (non-block types) */
static inline void pg_load_row_f32(const pg_tensor * x, int64_t i1, int64_t i2, int64_t i3, float * buf) {
    const char * row = pg_row(x, i1, i2, i3);
    if (x->nb[0] == pg_traits[x->type].size) {
        pg_traits[x->type].to_float(row, buf, x->ne[0]);
    } else {
        for (int64_t i0 = 0; i0 < x->ne[0]; i0++) pg_traits[x->type].to_float(row + i0 * x->nb[0], buf + i0, 1);
    }
}

static inline void pg_store_row_f32(const pg_tensor * x, int64_t i1, int64_t i2, int64_t i3, const float * buf) {
    char * row = pg_row(x, i1, i2, i3);
    if (x->nb[0] == pg_traits[x->type].size) {
        pg_traits[x->type].from_float(buf, row, x->ne[0]);
    } else {
        for (int64_t i0 = 0; i0 < x->ne[0]; i0++) pg_traits[x->type].from_float(buf + i0, row + i0 * x->nb[0], 1);
    }
}

static inline void pg_compute_dup(const pg_params * p, pg_tensor * dst) {
    const pg_tensor * src = dst->src[0];
    if (src->type == dst->type && pg_is_contiguous(src) && pg_is_contiguous(dst)) {
        /* memory order is logical order on both sides: one memcpy per thread, cut at cache lines
         * (row by row, every row would pay a call and a short tail) */
        const int64_t n = (int64_t) pg_row_size(dst->type, pg_nelements(dst));
        int64_t l0, l1;
        pg_split_rows((n + PG_CACHE_LINE - 1) / PG_CACHE_LINE, p->ith, p->nth, &l0, &l1);
        l0 *= PG_CACHE_LINE;
        l1 = PG_MIN(l1 * PG_CACHE_LINE, n);
        if (l1 > l0) memcpy((char *) dst->data + l0, (const char *) src->data + l0, (size_t) (l1 - l0));
        return;
    }
    const bool same_shape = src->ne[0] == dst->ne[0] && src->ne[1] == dst->ne[1] &&
                            src->ne[2] == dst->ne[2] && src->ne[3] == dst->ne[3];
    const bool as_float = pg_traits[dst->type].kind != PG_KIND_INT;
    const size_t esize = pg_traits[dst->type].size;   /* element bytes for the raw (integer) copy */
    float * buf = (float *) pg_scratch(p, pg_copy_scratch(dst));
    const int64_t ne0 = dst->ne[0];
    int64_t r0, r1;
    pg_split_rows(pg_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        pg_unravel_row(dst, ir, &i1, &i2, &i3);
        if (same_shape && src->type == dst->type && src->nb[0] == esize && dst->nb[0] == esize) {
            memcpy(pg_row(dst, i1, i2, i3), pg_row(src, i1, i2, i3), pg_row_size(dst->type, ne0));
            continue;
        }
        if (same_shape && as_float) {
            pg_load_row_f32(src, i1, i2, i3, buf);
            pg_store_row_f32(dst, i1, i2, i3, buf);
            continue;
        }
        /* shapes differ: walk src in logical order from linear element ir*ne0 */
        int64_t k = ir * ne0;
        int64_t j0 = k % src->ne[0]; k /= src->ne[0];
        int64_t j1 = k % src->ne[1]; k /= src->ne[1];
        int64_t j2 = k % src->ne[2]; int64_t j3 = k / src->ne[2];
        char * drow = pg_row(dst, i1, i2, i3);
        for (int64_t i0 = 0; i0 < ne0; i0++) {
            const char * s = pg_row(src, j1, j2, j3) + j0 * src->nb[0];
            if (as_float) pg_traits[src->type].to_float(s, buf + i0, 1);
            else memcpy(drow + i0 * dst->nb[0], s, esize);
            if (++j0 == src->ne[0]) {
                j0 = 0;
                if (++j1 == src->ne[1]) { j1 = 0; if (++j2 == src->ne[2]) { j2 = 0; j3++; } }
            }
        }
        if (as_float) pg_store_row_f32(dst, i1, i2, i3, buf);
    }
}
