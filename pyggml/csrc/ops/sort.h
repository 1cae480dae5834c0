/* ARGSORT (ggml_argsort), TOP_K (ggml_top_k): indices that order each row (dim 0) of a.
 *
 *   argsort(a, order)  a F32 [n, R, ...] rows packed   dst I32 [n, R, ...]   op_params[0]: 0 ASC, 1 DESC
 *                      dst row = the indices 0..n-1 of the row in ascending (descending) value order
 *   top_k(a, k)        a F32 [n, R, ...]               dst I32 [k, R, ...]
 *                      the indices of the k largest values of the row: in descending order, then
 *                      the first two exchanged, as ggml's CPU (its std::partial_sort and swap)
 *
 *        a row  [0.3  0.9  0.1  0.9]    argsort DESC [1 3 0 2]    top_k 3 [3 1 0]
 *
 * Ties: the lower index first, in either order, so a row sorts one way only (ggml's std::sort
 * leaves equal values in an unspecified order; libstdc++'s insertion sort for rows of up to 16
 * elements keeps the lower index first, as here). NaN counts as above every number: last in ASC,
 * first in DESC and top_k (in ggml the comparisons with NaN leave the order undefined).
 * A stable bottom-up merge sort over the total order above: O(n log n), the thread's scratch holds
 * the n indices and the merge buffer. Rows are split contiguously across threads.
 */
#pragma once
#include "core/pyggml.h"

enum { PG_SORT_ASC = 0, PG_SORT_DESC = 1 };

/* whether index i goes before index j in the order (desc: descending) */
static inline bool pg_sort_before(const float * x, int32_t i, int32_t j, bool desc) {
    const float a = x[i], b = x[j];
    const bool an = a != a, bn = b != b;
    if (an || bn) return an && bn ? i < j : desc ? an : bn;
    if (a != b) return desc ? a > b : a < b;
    return i < j;
}

/* idx[0..n) = 0..n-1 sorted by pg_sort_before; tmp: n more indices */
static inline void pg_argsort_row(const float * x, int64_t n, bool desc, int32_t * idx, int32_t * tmp) {
    for (int64_t i = 0; i < n; i++) idx[i] = (int32_t) i;
    int32_t * src = idx, * out = tmp;
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            const int64_t mid = PG_MIN(lo + w, n), hi = PG_MIN(lo + 2 * w, n);
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) out[k++] = pg_sort_before(x, src[j], src[i], desc) ? src[j++] : src[i++];
            while (i < mid) out[k++] = src[i++];
            while (j < hi) out[k++] = src[j++];
        }
        int32_t * t = src; src = out; out = t;
    }
    if (src != idx) memcpy(idx, src, (size_t) n * sizeof(int32_t));
}

/* scratch per thread: the row's n indices (top_k: dst holds only k of them) and the merge buffer */
static inline size_t pg_sort_scratch(const pg_tensor * dst) { return 2 * (size_t) dst->src[0]->ne[0] * sizeof(int32_t); }

static inline bool pg_plan_sort(const pg_tensor * dst, pg_plan * pl) {
    pl->work = pg_per_thread(pg_sort_scratch(dst), pl->nth);
    return true;
}

static inline void pg_sort_rows(const pg_params * p, pg_tensor * dst, bool desc, bool top_k) {
    const pg_tensor * a = dst->src[0];
    const int64_t n = a->ne[0], k = dst->ne[0];
    int32_t * idx = (int32_t *) pg_scratch(p, pg_sort_scratch(dst));
    int64_t r0, r1;
    pg_split_rows(pg_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        pg_unravel_row(dst, ir, &i1, &i2, &i3);
        pg_argsort_row((const float *) pg_row(a, i1, i2, i3), n, desc, idx, idx + n);
        int32_t * y = (int32_t *) pg_row(dst, i1, i2, i3);
        memcpy(y, idx, (size_t) k * sizeof(int32_t));
        if (top_k && k > 1) {
            y[0] = idx[1];
            y[1] = idx[0];
        }
    }
}

static inline void pg_compute_argsort(const pg_params * p, pg_tensor * dst) {
    pg_sort_rows(p, dst, dst->op_params[0] == PG_SORT_DESC, false);
}
static inline void pg_compute_top_k(const pg_params * p, pg_tensor * dst) { pg_sort_rows(p, dst, true, true); }
