/* MUL_MAT (ggml_mul_mat): every row of a dotted with every row of b, per matrix.
 *   a   [K, M, ne02, ne03]   weights: every type with a vec_dot (types.h); packed in dim 0, any row strides
 *   b   [K, N, ne12, ne13]   activations: F32, packed in dim 0, any strides in dims 1..3
 *   dst [M, N, ne12, ne13]   F32, dst[i, j, i2, i3] = dot(a[:, i, i2 / r2, i3 / r3], b[:, j, i2, i3])
 *                            with r2 = ne12 / ne02, r3 = ne13 / ne03 (a repeated by integer division)
 *
 *             K                    K                          M
 *        ┌─────────┐          ┌─────────┐               ┌─────────┐
 *   a  M │ row i   │    b   N │ row j   │  ──►  dst   N │    (i,j)│     per (i2, i3)
 *        └─────────┘          └─────────┘               └─────────┘
 *
 * Phases, every thread taking part, a barrier after each:
 *  1. b is converted into the shared work area as ggml does, to a's vec_dot_type: F16 weights -> b
 *     rounded to fp16, BF16 -> bf16, quantized weights -> the CPU Q8_0 or Q8_1 quantiser; packed rows
 *     [ne13][ne12][N]. The rows are cut into 32-element pieces split across threads. F32 weights
 *     read b in place.
 *  2. N < pg_mm_gemm_min_n (GEMV, decode; 16 with AVX-512; float weights: N < PG_MM_TILE_MIN_N, one
 *     column): each thread takes a contiguous range of weight rows and streams every row once,
 *     dotting it with the N activation rows: one column of a type with vec_dot_rows with that (the
 *     thread's whole range in one call; float weights: the two halves of it side by side, two read
 *     streams, types.h pg_type_float_rows); else quantized weights with the integer vec_dot_tile
 *     (x86: one weight row x four columns in registers per call; a type with a tile_mr that many
 *     rows) or vec_dot_n (four columns per decoded weight row), the others with vec_dot.
 *     N >= pg_mm_gemm_min_n (GEMM), quantized weights (vec_dot_n): chunks of PG_MM_IR weight rows x
 *     PG_MM_IC columns from the chunk counter (PG_MM_IR or tile_mr rows), the integer tiles of the
 *     GEMV path with PG_QGEMM_MR weight rows per call, or the type's tile_mr (each activation block
 *     loaded once for them), so a
 *     product sums int8 products per block and scales them as ggml does, the same bits whatever N is.
 *     Float weights from PG_MM_TILE_MIN_N columns to pg_mm_float_gemm_min_n (a full GEMM panel):
 *     the activations widened to f32 rows once, shared (phase 1 does it as it converts), then
 *     each thread's contiguous range of weight rows in tiles of PG_DOT_TILE_MR rows, one from each
 *     quarter of the range, against all columns in one call, every sum in a register (vec/dot.h
 *     pg_dot_tile: each weight vector widened once per group of columns, the groups taking turns
 *     over pieces of the rows, each sum in pg_vec_dot4_*'s order whatever the neighbours).
 *     GEMM, float weights: the converted activations are widened (exact) into f32 panels of nr
 *     columns, k-major; then tiles of mr weight rows x up to PG_MM_NC columns come from the chunk
 *     counter. A thread widens its tile of weight rows to f32 once, into its scratch, and runs the
 *     register-blocked micro-kernel of vec/gemm.h over all of K for each panel; the columns of a
 *     last panel at most half full are f32 rows instead, taken by the dot tiles.
 *     (mr, nr) is the micro-kernel's tile, pg_vec_gemm_shape(): fixed per ISA at compile time,
 *     except on riscv64, where the RVV tile's width follows the VLEN found at run time.
 */
#pragma once
#include "types.h"
#include "core/barrier.h"

/* columns per matrix from which the chunked GEMM path of quantized weights takes over from the GEMV's
 * contiguous row ranges (float weights: pg_mm_float_gemm_min_n) */
static inline int64_t pg_mm_gemm_min_n(pg_gemm_shape t) { return PG_MAX(6, t.nr / 2); }
/* float weights (a type with dot_tile_f32): the one-column kernels below PG_MM_TILE_MIN_N columns,
 * the dot tiles (vec/dot.h pg_dot_tile) up to a full panel, where the GEMM's panels hold no padding
 * and its weight tiles, widened once, serve many columns. From two columns on: a tile reads several
 * rows side by side (the read streams a GEMV from DRAM needs) and each weight load serves every
 * column, where the one-column kernels stream one row per call and dot it once per column */
#define PG_MM_TILE_MIN_N 2
_Static_assert(PG_MM_NR_MAX <= PG_DOT_TILE_NMAX, "the dot tiles take every column of a panel in one call");
static inline int64_t pg_mm_float_gemm_min_n(pg_gemm_shape t) { return PG_MAX(pg_mm_gemm_min_n(t), t.nr); }
#define PG_MM_GEMM_MIN_N_MAX PG_MAX(6, PG_MM_NR_MAX / 2)
#define PG_MM_NC 128           /* columns of one GEMM chunk: one weight tile serves them all */
#define PG_MM_KB 256           /* elements per piece when packing panels (a multiple of 32) */
#define PG_MM_CVT 32           /* elements per piece when converting b (one Q8_0 block) */
/* floats past K between the f32 rows matmul lays out itself (widened weights and activations):
 * rows of a power-of-two size would start at the same offset in a 4 KB page, in the same L1 set,
 * and a tile's dozen rows then evict one another from its 8 ways */
#define PG_MM_ROW_PAD 16

/* what both pg_work_mul_mat and the kernel derive from the shapes */
typedef struct pg_mm_layout {
    int vt;                 /* vec_dot_type of a */
    pg_gemm_shape tile;     /* GEMM micro-kernel: mr weight rows x nr columns */
    bool gemm;
    bool idot;              /* integer path: a has vec_dot_n, the GEMM takes tiles of its dot products */
    bool tiles;             /* float weights, few columns: the dot tiles over f32 activation rows */
    size_t conv_row;        /* bytes of one converted b row; 0 = b read in place */
    size_t conv_bytes;      /* shared: converted b */
    int64_t npanel;         /* GEMM: panels of tile.nr columns per matrix */
    int64_t ntail;          /* GEMM, float weights: columns of a last panel at most half full (dot tiles) */
    int64_t ldw;            /* floats from one f32 row laid out here to the next: K + PG_MM_ROW_PAD */
    size_t pack_bytes;      /* shared: f32 panels */
    size_t scratch;         /* bytes per thread */
} pg_mm_layout;

static inline pg_mm_layout pg_mm_get_layout(const pg_tensor * dst) {
    const pg_tensor * a = dst->src[0];
    const pg_tensor * b = dst->src[1];
    const int64_t K = b->ne[0], N = b->ne[1], nbatch = b->ne[2] * b->ne[3];
    pg_mm_layout l;
    l.vt = pg_traits[a->type].vec_dot_type;
    l.tile = pg_vec_gemm_shape();
    l.idot = pg_traits[a->type].vec_dot_n != NULL;
    const bool ftile = pg_traits[a->type].dot_tile_f32 != NULL;
    l.gemm = N >= (ftile ? pg_mm_float_gemm_min_n(l.tile) : pg_mm_gemm_min_n(l.tile));
    l.tiles = ftile && !l.gemm && N >= PG_MM_TILE_MIN_N;
    l.conv_row = l.vt == PG_TYPE_F32 ? 0 : pg_row_size(l.vt, K);
    l.conv_bytes = l.conv_row * (size_t) (N * nbatch);
    const int64_t mr = l.tile.mr, nr = l.tile.nr;
    l.npanel = l.gemm && !l.idot ? (N + nr - 1) / nr : 0;
    /* a last panel at most half full: its columns to the dot tiles; a fuller one costs less padded
     * (the GEMM has widened the weight tile already, and its kernel outruns the tiles per column) */
    l.ntail = l.npanel && N % nr <= nr / 2 ? N % nr : 0;
    l.ldw = K + PG_MM_ROW_PAD;
    l.pack_bytes = (size_t) (l.npanel * nr * l.ldw * nbatch) * sizeof(float);
    if (l.tiles && l.conv_row) l.pack_bytes = (size_t) (N * l.ldw * nbatch) * sizeof(float);
    l.scratch = l.gemm && !l.idot ? PG_MAX((size_t) (mr * (l.ldw + nr)), (size_t) PG_MM_KB) * sizeof(float) : 0;
    return l;
}

static inline bool pg_plan_mul_mat(const pg_tensor * dst, pg_plan * pl) {
    const pg_mm_layout l = pg_mm_get_layout(dst);
    pl->work = pg_per_thread(l.scratch, pl->nth) + PG_PAD(l.conv_bytes, PG_CACHE_LINE) + l.pack_bytes;
    return true;
}

/* activation row (j, i12, i13) in vec_dot_type: converted copy, or b itself for F32 weights */
static inline const char * pg_mm_brow(const pg_tensor * b, const pg_mm_layout * l, const char * conv,
                                      int64_t j, int64_t i12, int64_t i13) {
    if (!l->conv_row) return pg_row(b, j, i12, i13);
    return conv + (size_t) ((i13 * b->ne[2] + i12) * b->ne[1] + j) * l->conv_row;
}

/* phase 1: rows of b cut in pieces of PG_MM_CVT elements (or one block of vec_dot_type, when larger:
 * Q8_K's 256), a contiguous range of pieces per thread */
static inline void pg_mm_convert_b(const pg_params * p, const pg_tensor * b, const pg_mm_layout * l, char * conv,
                                   float * wide) {
    const int64_t cvt = PG_MAX(PG_MM_CVT, pg_traits[l->vt].blck);
    const int64_t K = b->ne[0], npiece = (K + cvt - 1) / cvt;
    const pg_from_float_fn from_float = pg_traits[l->vt].from_float;
    int64_t u0, u1;
    pg_split_rows(pg_nrows(b) * npiece, p->ith, p->nth, &u0, &u1);
    while (u0 < u1) {
        const int64_t row = u0 / npiece, uend = PG_MIN(u1, (row + 1) * npiece);
        const int64_t k0 = (u0 - row * npiece) * cvt, k1 = PG_MIN(K, (uend - row * npiece) * cvt);
        const int64_t j = row % b->ne[1], i12 = row / b->ne[1] % b->ne[2], i13 = row / (b->ne[1] * b->ne[2]);
        const float * src = (const float *) pg_row(b, j, i12, i13) + k0;
        char * piece = conv + (size_t) row * l->conv_row + pg_row_size(l->vt, k0);
        from_float(src, piece, k1 - k0);
        if (l->tiles) pg_traits[l->vt].to_float(piece, wide + row * l->ldw + k0, k1 - k0);
        u0 = uend;
    }
}

/* a's repacked panels (pg_tensor.panels) where mul_mat reads them: a 2-D matrix of a type with panels
 * at this level; its rows are then split in whole panels (PG_PANELS_R rows) */
#if defined(PG_PANELS)
static inline bool pg_mm_panels(const pg_tensor * a) {
    return a->panels && a->ne[2] == 1 && a->ne[3] == 1 && pg_panels_size(a->type, a->ne[0], 1);
}
/* the panel of a's row i (a multiple of PG_PANELS_R), *bp the bytes of one */
static inline const char * pg_mm_panel(const pg_tensor * a, int64_t i, size_t * bp) {
    *bp = pg_panels_size(a->type, a->ne[0], PG_PANELS_R);
    return (const char *) a->panels + (size_t) (i / PG_PANELS_R) * *bp;
}
#else
static inline bool pg_mm_panels(const pg_tensor * a) {
    (void) a;
    return false;
}
#endif

/* phase 2, types with vec_dot_n: weight rows [i0, i1) of matrix (i12, i13) against columns [j0, j1),
 * mr rows x the type's tile_nc columns per vec_dot_tile call (each row dotted with four columns per
 * vec_dot_n call without one); a column's sums are the same whatever the columns around it. The
 * GEMV takes one row per call: adjacent rows read side by side from memory are as many streams
 * close together, which read slower than one (docs/bench/journal.md), and few columns leave little
 * to share (one column of a type with a vec_dot_rows goes to that instead) */
static inline void pg_mm_int_tiles(pg_tensor * dst, const pg_mm_layout * l, const char * conv, int64_t i12, int64_t i13,
                                   int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t mr) {
    const pg_tensor * a = dst->src[0];
    const pg_tensor * b = dst->src[1];
    const int64_t K = b->ne[0], r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    const pg_type_traits * tr = &pg_traits[a->type];
    const size_t lds = dst->nb[1] / sizeof(float);
    if (!tr->vec_dot_tile) mr = 1;
    const int64_t step = tr->vec_dot_tile ? tr->tile_nc : 4;
    for (int64_t i = i0; i < i1; i += mr) {
        const char * arow = pg_row(a, i, i12 / r2, i13 / r3);
        for (int64_t j = j0; j < j1; j += step) {
            const int nc = (int) PG_MIN(step, j1 - j);
            const char * brow = pg_mm_brow(b, l, conv, j, i12, i13);
            float * y = (float *) pg_row(dst, j, i12, i13) + i;
#if defined(PG_PANELS)
            if (pg_mm_panels(a)) {     /* i0 and mr multiples of PG_PANELS_R (pg_mm_dot_rows, pg_mm_gemm_int) */
                size_t bp;
                const char * x = pg_mm_panel(a, i, &bp);
                pg_panels_tile(a->type, K, x, bp, (int) PG_MIN(mr, i1 - i), brow, l->conv_row, nc, y, lds);
                continue;
            }
#endif
            if (tr->vec_dot_tile) {
                tr->vec_dot_tile(K, arow, a->nb[1], (int) PG_MIN(mr, i1 - i), brow, l->conv_row, nc, y, lds);
            } else {
                float s4[4];
                tr->vec_dot_n(K, arow, brow, l->conv_row, nc, s4);
                for (int c = 0; c < nc; c++) y[(size_t) c * lds] = s4[c];
            }
        }
    }
}

/* phase 2, GEMV and few columns: contiguous ranges of weight rows, each streamed once (one column of
 * an integer type with vec_dot_rows: the whole range in one call), in whole panels of repacked weights */
static inline void pg_mm_dot_rows(const pg_params * p, pg_tensor * dst, const pg_mm_layout * l, const char * conv) {
    const pg_tensor * a = dst->src[0];
    const pg_tensor * b = dst->src[1];
    const int64_t K = b->ne[0], M = a->ne[1], N = b->ne[1];
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    const pg_type_traits * tr = &pg_traits[a->type];
    const void * brows[PG_MM_GEMM_MIN_N_MAX];       /* activation rows in vec_dot_type */
    const bool pk = pg_mm_panels(a);
    const int64_t g = pk ? PG_PANELS_R : 1, nu = (M + g - 1) / g;   /* rows per unit split, units per matrix */
    int64_t u0, u1;
    pg_split_rows(nu * b->ne[2] * b->ne[3], p->ith, p->nth, &u0, &u1);
    while (u0 < u1) {
        const int64_t batch = u0 / nu, iu1 = PG_MIN(nu, u0 % nu + (u1 - u0));
        const int64_t i12 = batch % b->ne[2], i13 = batch / b->ne[2];
        const int64_t i0 = u0 % nu * g, i1 = PG_MIN(M, iu1 * g);
        u0 += iu1 - u0 % nu;
#if defined(PG_PANELS)
        if (N == 1 && pk) {
            size_t bp;
            const char * x = pg_mm_panel(a, i0, &bp);
            pg_panels_rows(a->type, K, x, bp, i1 - i0, pg_mm_brow(b, l, conv, 0, i12, i13),
                           (float *) pg_row(dst, 0, i12, i13) + i0);
            continue;
        }
#endif
        if (N == 1 && tr->vec_dot_rows) {
            tr->vec_dot_rows(K, pg_row(a, i0, i12 / r2, i13 / r3), a->nb[1], i1 - i0, pg_mm_brow(b, l, conv, 0, i12, i13),
                             (float *) pg_row(dst, 0, i12, i13) + i0);
            continue;
        }
        if (l->idot) {
            pg_mm_int_tiles(dst, l, conv, i12, i13, i0, i1, 0, N, tr->tile_mr ? tr->tile_mr : 1);
            continue;
        }
        for (int64_t j = 0; j < N; j++) brows[j] = pg_mm_brow(b, l, conv, j, i12, i13);
        for (int64_t i = i0; i < i1; i++) {
            const char * arow = pg_row(a, i, i12 / r2, i13 / r3);
            for (int64_t j = 0; j < N; j++) ((float *) pg_row(dst, j, i12, i13))[i] = tr->vec_dot(K, arow, brows[j]);
        }
    }
}

/* phase 2, float weights and few columns: a contiguous range of weight rows per thread, taken as
 * PG_DOT_TILE_MR quarters side by side (a tile's rows far apart: as many read streams, which a GEMV
 * from DRAM needs; rows close together read slower), each tile against all N columns in one call
 * (vec/dot.h pg_dot_tile: groups of at most PG_DOT_TILE_NC columns taking turns over pieces of the
 * rows). Which rows share a tile does not change a sum. The activations: f32 rows, b itself for F32
 * weights, else the rows of vec_dot_type widened back to f32 (exact) when converted. */
static inline void pg_mm_dot_tiles(const pg_params * p, pg_tensor * dst, const pg_mm_layout * l, const char * conv,
                                   const float * wide) {
    const pg_tensor * a = dst->src[0];
    const pg_tensor * b = dst->src[1];
    const int64_t K = b->ne[0], M = a->ne[1], N = b->ne[1];
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    const pg_dot_tile_f32_fn tile_fn = pg_traits[a->type].dot_tile_f32;
    const size_t lds = dst->nb[1] / sizeof(float);
    const float * y[PG_MM_NR_MAX];
    float s[PG_MM_NR_MAX * PG_DOT_TILE_MR];
    int64_t r0, r1;
    pg_split_rows(M * b->ne[2] * b->ne[3], p->ith, p->nth, &r0, &r1);
    while (r0 < r1) {
        const int64_t batch = r0 / M, i0 = r0 % M, i1 = PG_MIN(M, i0 + (r1 - r0));
        const int64_t i12 = batch % b->ne[2], i13 = batch / b->ne[2];
        r0 += i1 - i0;
        for (int64_t j = 0; j < N; j++)
            y[j] = l->conv_row ? wide + (batch * N + j) * l->ldw : (const float *) pg_mm_brow(b, l, conv, j, i12, i13);
        float * d = (float *) pg_row(dst, 0, i12, i13);
        /* tile t < q: rows i0 + t + r*q; then the rest (fewer than PG_DOT_TILE_MR rows) as one tile */
        const int64_t q = (i1 - i0) / PG_DOT_TILE_MR, rest = (i1 - i0) % PG_DOT_TILE_MR;
        for (int64_t t = 0; t < q + (rest > 0); t++) {
            const int64_t first = t < q ? i0 + t : i1 - rest, dist = t < q ? q : 1;
            const int mr = t < q ? PG_DOT_TILE_MR : (int) rest;
            tile_fn(K, pg_row(a, first, i12 / r2, i13 / r3), (size_t) dist * a->nb[1], mr, y, (int) N, s,
                    PG_DOT_TILE_MR, true);
            for (int64_t c = 0; c < N; c++)
                for (int r = 0; r < mr; r++) d[c * lds + first + r * dist] = s[c * PG_DOT_TILE_MR + r];
        }
    }
}

/* phase 2a, GEMM: units (matrix, panel, piece of K) dealt round-robin; a panel holds columns
 * [nr * panel, +nr) as f32, k-major, zeros past N; a last panel at most half full (ntail) holds its
 * columns as f32 rows instead, for the dot tiles */
static inline void pg_mm_pack_b(const pg_params * p, const pg_tensor * b, const pg_mm_layout * l,
                                const char * conv, float * pack) {
    const int64_t K = b->ne[0], N = b->ne[1], nr = l->tile.nr;
    const int64_t npiece = (K + PG_MM_KB - 1) / PG_MM_KB, nunit = b->ne[2] * b->ne[3] * l->npanel * npiece;
    const pg_to_float_fn to_float = pg_traits[l->vt].to_float;
    float * tmp = (float *) pg_scratch(p, l->scratch);
    for (int64_t u = p->ith; u < nunit; u += p->nth) {
        const int64_t piece = u % npiece, panel = u / npiece % l->npanel, batch = u / (npiece * l->npanel);
        const int64_t k0 = piece * PG_MM_KB, kn = PG_MIN(PG_MM_KB, K - k0);
        float * dstp = pack + (size_t) (batch * l->npanel + panel) * (size_t) (l->ldw * nr) + k0 * nr;
        if (l->ntail && panel == l->npanel - 1) {
            dstp -= k0 * nr;
            for (int64_t jj = 0; jj < l->ntail; jj++)
                to_float(pg_mm_brow(b, l, conv, panel * nr + jj, batch % b->ne[2], batch / b->ne[2]) +
                         pg_row_size(l->vt, k0), dstp + jj * l->ldw + k0, kn);
            continue;
        }
        for (int64_t jj = 0; jj < nr; jj++) {
            const int64_t j = panel * nr + jj;
            if (j < N) {
                to_float(pg_mm_brow(b, l, conv, j, batch % b->ne[2], batch / b->ne[2]) + pg_row_size(l->vt, k0), tmp, kn);
                for (int64_t k = 0; k < kn; k++) dstp[k * nr + jj] = tmp[k];
            } else {
                for (int64_t k = 0; k < kn; k++) dstp[k * nr + jj] = 0.0f;
            }
        }
    }
}

/* phase 2b, GEMM, the columns of a last panel at most half full (pack: their f32 rows): the tile's mr
 * weight rows, already widened to f32 (at), against them through the F32 dot tiles, whose sums
 * are the same bits as the weights' own type's (the widening is exact) */
static inline void pg_mm_gemm_tail(pg_tensor * dst, const pg_mm_layout * l, const float * at, int64_t mr,
                                   const float * pack, int64_t j0, int64_t i0, int64_t i12, int64_t i13) {
    const int64_t K = dst->src[1]->ne[0];
    const size_t lds = dst->nb[1] / sizeof(float);
    const float * y[PG_MM_NR_MAX];
    for (int64_t jj = 0; jj < l->ntail; jj++) y[jj] = pack + jj * l->ldw;
    float * d = (float *) pg_row(dst, j0, i12, i13) + i0;
    for (int64_t r = 0; r < mr; r += PG_DOT_TILE_MR)
        pg_traits[PG_TYPE_F32].dot_tile_f32(K, at + r * l->ldw, (size_t) l->ldw * sizeof(float),
                                            (int) PG_MIN(PG_DOT_TILE_MR, mr - r), y, (int) l->ntail, d + r, lds, false);
}

/* phase 2b, GEMM: chunks (group of PG_MM_NC columns, matrix, tile of mr weight rows), the
 * column group outermost so that all threads share one group's panels in cache while the weights
 * (the cheaper reload: one tile per chunk) stream past */
static inline void pg_mm_gemm(const pg_params * p, pg_tensor * dst, const pg_mm_layout * l, const float * pack) {
    const pg_tensor * a = dst->src[0];
    const pg_tensor * b = dst->src[1];
    const int64_t K = b->ne[0], M = a->ne[1], N = b->ne[1], MR = l->tile.mr, NR = l->tile.nr;
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    const int64_t ppg = PG_MAX(1, PG_MM_NC / NR);                    /* panels per column group */
    const int64_t ntile = (M + MR - 1) / MR, ngroup = (l->npanel + ppg - 1) / ppg;
    const int64_t nbatch = b->ne[2] * b->ne[3], nchunk = nbatch * ntile * ngroup;
    const pg_to_float_fn to_float = pg_traits[a->type].to_float;
    float * at = (float *) pg_scratch(p, l->scratch);
    const int64_t lda = l->ldw;
    float * ct = at + MR * lda;
    for (int64_t c = p->ith; c < nchunk; c = pg_chunk_add(p, 1)) {
        const int64_t tile = c % ntile, batch = c / ntile % nbatch, group = c / (ntile * nbatch);
        const int64_t i12 = batch % b->ne[2], i13 = batch / b->ne[2];
        const int64_t i0 = tile * MR, mr = PG_MIN(MR, M - i0);
        for (int64_t r = 0; r < mr; r++) to_float(pg_row(a, i0 + r, i12 / r2, i13 / r3), at + r * lda, K);
        if (mr < MR) memset(at + mr * lda, 0, (size_t) ((MR - mr) * lda) * sizeof(float));
        const int64_t pend = PG_MIN(l->npanel, (group + 1) * ppg);
        for (int64_t panel = group * ppg; panel < pend; panel++) {
            const float * pp = pack + (size_t) (batch * l->npanel + panel) * (size_t) (lda * NR);
            if (l->ntail && panel == l->npanel - 1) {
                pg_mm_gemm_tail(dst, l, at, mr, pp, panel * NR, i0, i12, i13);
                continue;
            }
            pg_vec_gemm_tile_f32(K, at, lda, pp, ct);
            const int64_t j0 = panel * NR, nr = PG_MIN(NR, N - j0);
            for (int64_t jj = 0; jj < nr; jj++) {
                float * y = (float *) pg_row(dst, j0 + jj, i12, i13) + i0;
                for (int64_t r = 0; r < mr; r++) y[r] = ct[r * NR + jj];
            }
        }
    }
}

/* phase 2, GEMM of a type with vec_dot_n: chunks (group of PG_MM_IC columns, matrix, tile of
 * PG_MM_IR weight rows), each weight row dotted with its group's converted columns four at a time
 * (the row stays in L1, the group's activations in L2) */
#define PG_MM_IR 16
#define PG_MM_IC 64
static inline void pg_mm_gemm_int(const pg_params * p, pg_tensor * dst, const pg_mm_layout * l, const char * conv) {
    const pg_tensor * a = dst->src[0];
    const pg_tensor * b = dst->src[1];
    const int64_t M = a->ne[1], N = b->ne[1];
    const int tmr = pg_traits[a->type].tile_mr;
    const int64_t ir = PG_MAX(PG_MM_IR, tmr), mr = tmr ? tmr : PG_QGEMM_MR;
    const int64_t ntile = (M + ir - 1) / ir, ngroup = (N + PG_MM_IC - 1) / PG_MM_IC;
    const int64_t nbatch = b->ne[2] * b->ne[3], nchunk = nbatch * ntile * ngroup;
    for (int64_t c = p->ith; c < nchunk; c = pg_chunk_add(p, 1)) {
        const int64_t tile = c % ntile, batch = c / ntile % nbatch, group = c / (ntile * nbatch);
        const int64_t i12 = batch % b->ne[2], i13 = batch / b->ne[2];
        const int64_t i0 = tile * ir, j0 = group * PG_MM_IC;
        pg_mm_int_tiles(dst, l, conv, i12, i13, i0, PG_MIN(M, i0 + ir), j0, PG_MIN(N, j0 + PG_MM_IC), mr);
    }
}

static inline void pg_compute_mul_mat(const pg_params * p, pg_tensor * dst) {
    const pg_tensor * b = dst->src[1];
    const pg_mm_layout l = pg_mm_get_layout(dst);
    char * conv = (char *) p->wdata + pg_per_thread(l.scratch, p->nth);
    float * pack = (float *) (conv + PG_PAD(l.conv_bytes, PG_CACHE_LINE));
    if (l.conv_row) {
        pg_mm_convert_b(p, b, &l, conv, pack);
        pg_barrier(p);
    }
    if (l.tiles) {
        pg_mm_dot_tiles(p, dst, &l, conv, pack);
        return;
    }
    if (!l.gemm) {
        pg_mm_dot_rows(p, dst, &l, conv);
        return;
    }
    if (l.idot) {
        if (p->ith == 0) pg_chunk_set(p, p->nth);
        pg_barrier(p);
        pg_mm_gemm_int(p, dst, &l, conv);
        return;
    }
    pg_mm_pack_b(p, b, &l, conv, pack);
    if (p->ith == 0) pg_chunk_set(p, p->nth);
    pg_barrier(p);
    pg_mm_gemm(p, dst, &l, pack);
}
