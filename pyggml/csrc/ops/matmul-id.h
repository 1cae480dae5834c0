/* MUL_MAT_ID (ggml_mul_mat_id): a matrix product per column with the matrix the column picks, for
 * mixture-of-experts layers.
 *   as  [K, M, n_expert]          the expert weights: every type mul_mat takes, packed in dim 0
 *   b   [K, nb1, n_tokens]        F32 activations, packed in dim 0; nb1 divides n_used (1: one row
 *                                 per token, broadcast to every expert it uses)
 *   ids [n_used, n_tokens]        I32, the experts each token uses
 *   dst [M, n_used, n_tokens]     F32, dst[:, u, t] = as[:, :, ids[u, t]] . b[:, u % nb1, t]
 *
 *   ids [[2 0]     ──►  expert 0: columns (1, 0) (0, 1)     each expert's weights read once for all
 *        [0 3]]         expert 2: column  (0, 0)            the columns that use it; experts nobody
 *                       expert 3: column  (1, 1)            uses are not read at all
 *
 * Phases, every thread taking part:
 *  0. each thread scans all of ids (a few entries per token); an id outside [0, n_expert) is
 *     reported (pg_report_error, the first in ids order) and no thread writes anything.
 *  1. thread 0 groups the columns by expert, in token order within an expert: off[e] .. off[e + 1]
 *     index ent[], which holds the columns' positions u + n_used * t. Barrier.
 *  2. the columns' activation rows are converted to as's vec_dot_type as mul_mat does (F32 copied),
 *     straight into the grouped order, pieces of rows split across threads. Barrier.
 *  3. the (expert, weight row) pairs of the used experts are split into one contiguous range per
 *     thread, balanced by the columns each row is dotted with; per expert the thread's rows run
 *     against the expert's columns in groups of PG_MM_IC: vec_dot_rows for a lone column, else the
 *     integer tiles of mul_mat (vec_dot_tile or vec_dot_n, through a small buffer scattered to the
 *     columns), vec_dot for float weights. Repacked experts (pg_tensor.panels: each expert's panels
 *     in turn) take whole panels: the split's rows rounded to PG_PANELS_R, and mul_mat's
 *     pg_panels_rows/_tile on them.
 * Every sum is computed by the kernels mul_mat uses for one expert's matrix, so each column is bit
 * for bit mul_mat's: for the integer types whatever the number of columns (their tiles give each
 * column the same bits), for F32/F16/BF16 as mul_mat's one-column GEMV (vec_dot_rows' sums are
 * vec_dot's; mul_mat's dot tiles and f32 GEMM tile sum in another order). Float weights never take
 * a tile here.
 */
#pragma once
#include "ops/matmul.h"

/* the shared work area: column groups, then the grouped converted activation rows */
typedef struct pg_mmid_layout {
    int vt;
    size_t conv_row;            /* bytes of one converted row */
    int64_t n_expert, n_ids;
    size_t off_at, ent_at, conv_at, bytes;
} pg_mmid_layout;

static inline pg_mmid_layout pg_mmid_get_layout(const pg_tensor * dst) {
    const pg_tensor * as = dst->src[0];
    const pg_tensor * ids = dst->src[2];
    pg_mmid_layout l;
    l.vt = pg_traits[as->type].vec_dot_type;
    l.conv_row = pg_row_size(l.vt, as->ne[0]);
    l.n_expert = as->ne[2];
    l.n_ids = ids->ne[0] * ids->ne[1];
    l.off_at = 0;
    l.ent_at = PG_PAD((size_t) (l.n_expert + 1) * sizeof(int64_t), PG_CACHE_LINE);
    l.conv_at = l.ent_at + PG_PAD((size_t) l.n_ids * sizeof(int32_t), PG_CACHE_LINE);
    l.bytes = l.conv_at + (size_t) l.n_ids * l.conv_row;
    return l;
}

static inline bool pg_plan_mul_mat_id(const pg_tensor * dst, pg_plan * pl) {
    pl->work = pg_mmid_get_layout(dst).bytes;
    return true;
}

static inline int32_t pg_mmid_id(const pg_tensor * ids, int64_t u, int64_t t) {
    return *(const int32_t *) ((const char *) ids->data + u * ids->nb[0] + t * ids->nb[1]);
}

/* as's repacked panels where mul_mat_id reads them (pg_mm_panels' for each expert) */
static inline bool pg_mmid_panels(const pg_tensor * as) {
    return as->panels && as->ne[3] == 1 && pg_panels_size(as->type, as->ne[0], 1);
}

/* phase 3's split: the boundary w of the work (each row of expert e weighs its column count) as
 * (expert, row), the row rounded up to a multiple of g; adjacent threads compute their common
 * boundary alike, so the ranges tile the work */
static inline int64_t pg_mmid_pos(const int64_t * off, int64_t n_expert, int64_t M, int64_t w, int64_t g,
                                  int64_t * row) {
    int64_t cum = 0;
    for (int64_t e = 0; e < n_expert; e++) {
        const int64_t c = off[e + 1] - off[e];
        if (w < cum + M * c) {
            *row = PG_MIN(M, ((w - cum + c - 1) / c + g - 1) / g * g);
            return e;
        }
        cum += M * c;
    }
    *row = 0;
    return n_expert;
}

/* rows [i0, i1) of expert e against its nc columns (converted rows at y, their positions in ent) */
static inline void pg_mmid_rows(pg_tensor * dst, const pg_mmid_layout * l, int64_t e, int64_t i0, int64_t i1,
                                const char * y, const int32_t * ent, int64_t nc) {
    const pg_tensor * as = dst->src[0];
    const int64_t K = as->ne[0], n_used = dst->ne[1];
    const pg_type_traits * tr = &pg_traits[as->type];
    const char * a0 = (const char *) as->data + e * as->nb[2];
#define PG_MMID_COL(c) ((float *) pg_row(dst, ent[c] % n_used, ent[c] / n_used, 0))
    if (!tr->vec_dot_n) {
        for (int64_t i = i0; i < i1; i++)
            for (int64_t c = 0; c < nc; c++) PG_MMID_COL(c)[i] = tr->vec_dot(K, a0 + i * as->nb[1], y + c * l->conv_row);
        return;
    }
#if defined(PG_PANELS)
    size_t bp = 0;
    const char * pk = NULL;             /* expert e's panels */
    if (pg_mmid_panels(as)) {
        bp = pg_panels_size(as->type, K, PG_PANELS_R);
        pk = (const char *) as->panels + (size_t) e * pg_panels_size(as->type, K, as->ne[1]);
    }
    if (nc == 1 && pk) {
        pg_panels_rows(as->type, K, pk + (size_t) (i0 / PG_PANELS_R) * bp, bp, i1 - i0, y, PG_MMID_COL(0) + i0);
        return;
    }
#endif
    if (nc == 1 && tr->vec_dot_rows) {
        tr->vec_dot_rows(K, a0 + i0 * as->nb[1], as->nb[1], i1 - i0, y, PG_MMID_COL(0) + i0);
        return;
    }
    /* a tile of its own rows (tile_mr) takes them for any number of columns, as mul_mat does */
    const int64_t mr = !tr->vec_dot_tile ? 1 : tr->tile_mr ? tr->tile_mr : nc >= PG_MM_GEMM_MIN_N_MAX ? PG_QGEMM_MR : 1;
    const int64_t step = tr->vec_dot_tile ? PG_MIN(tr->tile_nc, PG_MM_IC) : 4;
    float s[PG_TILE_MR_MAX * PG_MM_IC];
    for (int64_t j0 = 0; j0 < nc; j0 += PG_MM_IC) {
        const int64_t j1 = PG_MIN(nc, j0 + PG_MM_IC);
        for (int64_t i = i0; i < i1; i += mr) {
            const int r = (int) PG_MIN(mr, i1 - i);
            const char * arow = a0 + i * as->nb[1];
            for (int64_t j = j0; j < j1; j += step) {
                const int n = (int) PG_MIN(step, j1 - j);
#if defined(PG_PANELS)
                if (pk)
                    pg_panels_tile(as->type, K, pk + (size_t) (i / PG_PANELS_R) * bp, bp, r, y + j * l->conv_row,
                                   l->conv_row, n, s, (size_t) mr);
                else
#endif
                if (tr->vec_dot_tile)
                    tr->vec_dot_tile(K, arow, as->nb[1], r, y + j * l->conv_row, l->conv_row, n, s, (size_t) mr);
                else tr->vec_dot_n(K, arow, y + j * l->conv_row, l->conv_row, n, s);
                for (int c = 0; c < n; c++) {
                    float * out = PG_MMID_COL(j + c) + i;
                    for (int k = 0; k < r; k++) out[k] = s[c * (tr->vec_dot_tile ? mr : 1) + k];
                }
            }
        }
    }
#undef PG_MMID_COL
}

static inline void pg_compute_mul_mat_id(const pg_params * p, pg_tensor * dst) {
    const pg_tensor * as = dst->src[0];
    const pg_tensor * b = dst->src[1];
    const pg_tensor * ids = dst->src[2];
    const pg_mmid_layout l = pg_mmid_get_layout(dst);
    const int64_t K = as->ne[0], M = as->ne[1], n_used = ids->ne[0], n_tok = ids->ne[1], nb1 = b->ne[1];
    char * w = (char *) p->wdata;
    int64_t * off = (int64_t *) (w + l.off_at);
    int32_t * ent = (int32_t *) (w + l.ent_at);
    char * conv = w + l.conv_at;

    /* 0: the ids, checked by every thread before anyone writes */
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t u = 0; u < n_used; u++) {
            const int32_t e = pg_mmid_id(ids, u, t);
            if (e < 0 || e >= l.n_expert) {
                if (p->ith == 0) pg_report_error(p, dst, u + t * n_used, e);
                return;
            }
        }
    }

    /* 1: columns grouped by expert (a counting sort, stable in token order) */
    if (p->ith == 0) {
        memset(off, 0, (size_t) (l.n_expert + 1) * sizeof(int64_t));
        for (int64_t t = 0; t < n_tok; t++)
            for (int64_t u = 0; u < n_used; u++) off[pg_mmid_id(ids, u, t) + 1]++;
        for (int64_t e = 0; e < l.n_expert; e++) off[e + 1] += off[e];
        for (int64_t t = 0; t < n_tok; t++)
            for (int64_t u = 0; u < n_used; u++) ent[off[pg_mmid_id(ids, u, t)]++] = (int32_t) (u + t * n_used);
        for (int64_t e = l.n_expert; e > 0; e--) off[e] = off[e - 1];     /* the cursors ended one expert on */
        off[0] = 0;
    }
    pg_barrier(p);

    /* 2: grouped rows converted in pieces, a contiguous range of pieces per thread */
    const int64_t cvt = PG_MAX(PG_MM_CVT, pg_traits[l.vt].blck), npiece = (K + cvt - 1) / cvt;
    int64_t u0, u1;
    pg_split_rows(l.n_ids * npiece, p->ith, p->nth, &u0, &u1);
    while (u0 < u1) {
        const int64_t g = u0 / npiece, uend = PG_MIN(u1, (g + 1) * npiece);
        const int64_t k0 = (u0 - g * npiece) * cvt, k1 = PG_MIN(K, (uend - g * npiece) * cvt);
        const int64_t u = ent[g] % n_used, t = ent[g] / n_used;
        const float * src = (const float *) pg_row(b, u % nb1, t, 0) + k0;
        pg_traits[l.vt].from_float(src, conv + (size_t) g * l.conv_row + pg_row_size(l.vt, k0), k1 - k0);
        u0 = uend;
    }
    pg_barrier(p);

    /* 3: this thread's share of the (expert, row) pairs */
    const int64_t work = M * l.n_ids, g = pg_mmid_panels(as) ? PG_PANELS_R : 1;
    int64_t r0, r1;
    const int64_t e0 = pg_mmid_pos(off, l.n_expert, M, work * p->ith / p->nth, g, &r0);
    const int64_t e1 = pg_mmid_pos(off, l.n_expert, M, work * (p->ith + 1) / p->nth, g, &r1);
    for (int64_t e = e0; e <= e1 && e < l.n_expert; e++) {
        const int64_t nc = off[e + 1] - off[e];
        const int64_t i0 = e == e0 ? r0 : 0, i1 = e == e1 ? r1 : M;
        if (nc && i0 < i1) pg_mmid_rows(dst, &l, e, i0, i1, conv + (size_t) off[e] * l.conv_row, ent + off[e], nc);
    }
}
