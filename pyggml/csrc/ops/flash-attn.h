/* FLASH_ATTN_EXT: per query row, softmax(scale * q.k (softcapped) + slope * mask) over the keys,
 * weighted sum of the value rows. f32 accumulation on every path.
 *
 *   q     F32                         [DK, N,  Hq,  S]   S: sequences
 *   k     float or quantized          [DK, L,  Hkv, S]   rows packed in dim 0; nb1..nb3 free
 *   v     float or quantized          [DV, L,  Hkv, S]   (KV-cache views: honour the strides)
 *         (K: the types whose type-table row has vec_dot and attn_dot, V: attn_acc)
 *   mask  F16, optional               [>=L, >=N, M2, M3] head h reads slice h % M2, sequence s % M3
 *   sinks F32, optional               [Hq]               one extra logit per head (denominator only)
 *   out   F32                         [DV, Hq, N,  S]    heads before queries
 *
 *   GQA: query head h reads KV head h / (Hq / Hkv). ALiBi: slope_h multiplies the mask value.
 *   A key whose slope*mask is -inf never gets weight, on every path, whatever its K and V rows hold
 *   (inf and NaN included); a row with no key left is exactly 0.
 *
 * op_params: the slots of pg_fa_param below (the one definition: pyggml._tables exposes them to
 *            the builders in _ops.pyx and to CGraph.compute)
 *
 * Paths, chosen by the plan (pg_plan_flash_attn_ext; use_ref forces one_chunk), which sizes the
 * work buffer for that path only from the same layout the kernel carves (pg_fa_<path>_layout):
 *   one_chunk  one query row at a time, key by key (ggml's reference path). Q is converted to the
 *              K type's dot type (fp16, bf16, Q8_0, Q8_1) as ggml does.
 *   tiled      prefill: up to 64 query rows x 64 keys of the PG_FA_TILE_HEADS query heads that share a
 *              KV head. The K tile is converted to f32 once, scaled and transposed (key index = SIMD
 *              lane), V rows once to f32 padded to whole vectors (any DV); Q rows are read in place.
 *              the scores Q K^T and O = f O + P V are f32 register-blocked micro-GEMMs over blocks of 4
 *              rows, each block only over the keys its rows can see (the live range of each mask
 *              row), so a tile whose mask is all -inf for a head costs no dot product and causal
 *              prefill computes about half of a diagonal tile. Padding keys of a short last tile
 *              are -inf after softcap (no leak).
 *   split      decode (S == 1, N <= PG_FA_SPLIT_MAX_N), one query row after the other: thread t owns a
 *              contiguous segment of the keys the row's mask leaves visible to some head
 *              (pg_fa_live_keys) and computes the partial (max, sum, acc[DV]) of every head over it,
 *              GQA-packed: each K and V row is read once for all the query heads that share it and
 *              its mask row. Barrier, then the partials of each head are merged (parallel over
 *              heads). Any K/V type. A row's result is the same bits whatever the other rows are:
 *              a step of a few rows (speculative decoding's verify step, several sequences' decode)
 *              gives each row what a one-row decode step gives it.
 */
#pragma once
#include "types.h"
#include "core/barrier.h"
#include "ops/softmax.h"

#define PG_FA_TILE_Q 64
#define PG_FA_TILE_KV 64
#define PG_FA_TILE_HEADS 4      /* query heads of one KV head processed together on the tiled path */
#define PG_FA_BLOCK_KV 32       /* keys per softmax block on the split path */
#define PG_FA_SPLIT_HEADS 8     /* query heads per K/V sweep on the split path */
#define PG_FA_SPLIT_MAX_N 16    /* the most query rows the split path takes (one after the other) */
/* the automatic choice takes split-KV for decode from this many keys on (chosen from the sweep in
 * docs/bench/flash_attn.md: bench_flash_attn.py --sweep) and the tiled path from PG_FA_TILE_Q rows on */
#define PG_FA_SPLIT_MIN_L 64

/* flash_attn_ext's op_params: f32 scale, max_bias and logit_softcap as ggml packs them, the precision
 * request (DEFAULT/F32, identical on the CPU), the forced path (a pg_fa_path; AUTO lets the plan
 * choose) and the path the last compute took (CGraph.compute writes the plan's choice there for
 * flash_attn_ext_get_path) */
typedef enum pg_fa_param {
    PG_FA_PARAM_SCALE = 0, PG_FA_PARAM_MAX_BIAS = 1, PG_FA_PARAM_SOFTCAP = 2, PG_FA_PARAM_PREC = 3,
    PG_FA_PARAM_PATH = 4, PG_FA_PARAM_TAKEN = 5,
} pg_fa_param;

/* the attention paths; the plan's choice is its variant (pyggml.FA_PATHS names them in this order) */
typedef enum pg_fa_path { PG_FA_PATH_AUTO = 0, PG_FA_PATH_ONE_CHUNK = 1, PG_FA_PATH_TILED = 2, PG_FA_PATH_SPLIT = 3 } pg_fa_path;

typedef struct pg_fa_ctx {
    const pg_tensor * q, * k, * v, * mask, * sinks;
    int64_t DK, DV, DVp, N, L, Hq, Hkv, S, G;   /* S: sequences */
    float scale, softcap;
    pg_alibi alibi;
} pg_fa_ctx;

static inline void pg_fa_init(pg_fa_ctx * c, const pg_tensor * dst) {
    c->q = dst->src[0]; c->k = dst->src[1]; c->v = dst->src[2]; c->mask = dst->src[3]; c->sinks = dst->src[4];
    c->DK = c->q->ne[0]; c->DV = c->v->ne[0]; c->DVp = PG_PAD(c->DV, PG_F32_EPR);
    c->N = c->q->ne[1]; c->Hq = c->q->ne[2]; c->S = c->q->ne[3];
    c->L = c->k->ne[1]; c->Hkv = c->k->ne[2]; c->G = c->Hq / c->Hkv;
    c->scale = pg_op_param_f32(dst, PG_FA_PARAM_SCALE);
    c->softcap = pg_op_param_f32(dst, PG_FA_PARAM_SOFTCAP);
    if (c->softcap != 0.0f) c->scale /= c->softcap;
    c->alibi = pg_alibi_init(pg_op_param_f32(dst, PG_FA_PARAM_MAX_BIAS), c->Hq);
}

static inline float pg_fa_slope(const pg_fa_ctx * c, int64_t h) { return pg_alibi_slope(&c->alibi, h); }

static inline const pg_fp16_t * pg_fa_mask_row(const pg_fa_ctx * c, int64_t i, int64_t h, int64_t s) {
    if (!c->mask) return NULL;
    return (const pg_fp16_t *) pg_row(c->mask, i, h % c->mask->ne[2], s % c->mask->ne[3]);
}

/* x[j] (q.k, already scaled) -> softcapped logit; slope*mask is added by pg_vec_attn_softmax_f32 */
static inline void pg_fa_softcap(const pg_fa_ctx * c, int64_t n, float * x) {
    if (c->softcap != 0.0f) for (int64_t j = 0; j < n; j++) x[j] = c->softcap * tanhf(x[j]);
}

/* acc_r = f[r] * acc_r + sum_{j<nk} p[r*ldp + j] * v row j (rows from vrows at stride v->nb[1]), with
 * V's attn_acc; tmp: nk x DV floats for types converted first */
static inline void pg_fa_acc(const pg_tensor * v, int nr, float * acc, int64_t lda, int64_t nk,
                             const float * p, int64_t ldp, const char * vrows, const float * f, float * tmp) {
    pg_traits[v->type].attn_acc(nr, v->ne[0], acc, lda, nk, p, ldp, vrows, v->nb[1], f, tmp);
}

/* out = acc / sum (mx, sum: the row's running max and softmax sum) with the head's sink logit
 * joining the denominator; 0 when nothing had weight */
static inline void pg_fa_finalize(const pg_fa_ctx * c, int64_t h, float mx, float sum, const float * acc, float * out) {
    float f = 1.0f;
    if (c->sinks) {
        const float sk = ((const float *) c->sinks->data)[h];
        if (sk > mx) {
            f = pg_expf(mx - sk);
            sum = sum * f + 1.0f;
        } else {
            sum += pg_expf(sk - mx);
        }
    }
    pg_vec_scale_f32(c->DV, out, acc, sum == 0.0f ? 0.0f : f / sum);
}

/* Keys the mask hides (-inf) get no weight whatever their K and V rows hold: one_chunk never reads
 * them, and the batched paths must give the same answer when such a row holds inf or NaN (a stale
 * or overflowed KV-cache cell behind a causal mask). */

/* s[r*lds + j] = -inf where m[r*ldm + j] is -inf: a NaN or inf score of a hidden key would survive
 * the mask's addition (NaN + -inf, inf + -inf are NaN) */
static inline void pg_fa_hide_masked(int nr, int64_t n, float * s, int64_t lds, const float * m, int64_t ldm) {
    for (int r = 0; r < nr; r++)
        for (int64_t j = 0; j < n; j++)
            if (m[r * ldm + j] == -INFINITY) s[r * lds + j] = -INFINITY;
}

/* whether the n floats at x are all finite (inf and NaN have every exponent bit set) */
static inline bool pg_fa_all_finite(int64_t n, const float * x) {
    uint32_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}

/* pg_vec_attn_acc_f32 over the pairs (row r, key j) with m[r*ldm + j] != -inf only: for a V tile
 * holding inf or NaN, where the micro-GEMM's zero weight of a hidden key would make NaN (0 * inf) */
static inline void pg_fa_acc_visible(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p,
                                     int64_t ldp, const float * m, int64_t ldm, const float * v, int64_t ldv,
                                     const float * f) {
    for (int r = 0; r < nr; r++) {
        float * a = acc + r * lda;
        pg_vec_scale_f32(n, a, a, f[r]);
        for (int64_t j = 0; j < nk; j++)
            if (m[r * ldm + j] != -INFINITY) pg_vec_mad_f32(n, a, v + j * ldv, p[r * ldp + j]);
    }
}

/* ---- scratch: one layout per path, read by the plan (sizes) and the path's kernel (pointers) ----
 * pg_fa_<path>_layout(c, at, b) lays the path's per-thread buffers out from `at` (the thread's slice,
 * pg_scratch) into b and returns the slice's bytes; with at == NULL it only counts. */

typedef struct pg_fa_one_chunk_buf {
    float * acc;        /* [DV] output accumulator */
    float * vtmp;       /* [DV] a V row converted to f32 (types converted first) */
    void * qc;          /* the query row in K's vec_dot_type (at most DK floats, plus slack) */
} pg_fa_one_chunk_buf;

static inline size_t pg_fa_one_chunk_layout(const pg_fa_ctx * c, void * at, pg_fa_one_chunk_buf * b) {
    pg_layout l = {(char *) at, 0};
    b->acc = pg_layout_f32(&l, c->DV);
    b->vtmp = pg_layout_f32(&l, c->DV);
    b->qc = pg_layout_f32(&l, c->DK + 16);
    return l.bytes;
}

static inline bool pg_fa_split_ok(const pg_fa_ctx * c) { return c->N <= PG_FA_SPLIT_MAX_N && c->S == 1; }

typedef struct pg_fa_split_buf {
    float * qs;         /* [Hq][DK] q * scale */
    float * sc;         /* [PG_FA_SPLIT_HEADS][B] scores, then weights */
    float * mv;         /* [B] slope*mask of one head */
    float * live;       /* [B] 1 when some head of the sweep needs the key */
    float * ktmp;       /* [DK] a K row converted to f32 */
    float * vtmp;       /* [B][DV] V rows converted to f32 */
    float * racc;       /* [DVp] reduction accumulator */
} pg_fa_split_buf;

static inline size_t pg_fa_split_layout(const pg_fa_ctx * c, void * at, pg_fa_split_buf * b) {
    const int64_t B = PG_FA_BLOCK_KV;
    pg_layout l = {(char *) at, 0};
    b->qs = pg_layout_f32(&l, c->Hq * c->DK);
    b->sc = pg_layout_f32(&l, PG_FA_SPLIT_HEADS * B);
    b->mv = pg_layout_f32(&l, B);
    b->live = pg_layout_f32(&l, B);
    b->ktmp = pg_layout_f32(&l, c->DK);
    b->vtmp = pg_layout_f32(&l, B * c->DV);
    b->racc = pg_layout_f32(&l, c->DVp);
    return l.bytes;
}

/* after every thread's slice, shared: the partial state of each (head, thread),
 * [max, sum, pad][acc DVp] with acc on its own cache line */
static inline int64_t pg_fa_part_floats(const pg_fa_ctx * c) { return PG_PAD(16 + c->DVp, 16); }
static inline size_t pg_fa_split_shared(const pg_fa_ctx * c, int nth) {
    return (size_t) (c->Hq * nth * pg_fa_part_floats(c)) * sizeof(float);
}

static inline int64_t pg_fa_tile_heads(const pg_fa_ctx * c) { return PG_MIN(c->G, PG_FA_TILE_HEADS); }

typedef struct pg_fa_tiled_buf {
    int64_t * rlo, * rhi;   /* [T] first live key of each row, one past its last */
    float * ot;             /* [hn][T][DVp] accumulators */
    float * run_max, * run_sum;   /* [hn][T] running max, softmax sum */
    float * kt;             /* [DK][K] K tile * scale, transposed */
    float * st;             /* [T][K] scores, then weights */
    float * mt;             /* [T][K] slope*mask, -inf past nk */
    float * vt;             /* [K][DVp] V tile */
    float * kr;             /* [K][DK] K tile rows */
} pg_fa_tiled_buf;

static inline size_t pg_fa_tiled_layout(const pg_fa_ctx * c, void * at, pg_fa_tiled_buf * b) {
    const int64_t hn = pg_fa_tile_heads(c), T = PG_FA_TILE_Q, K = PG_FA_TILE_KV;
    pg_layout l = {(char *) at, 0};
    b->rlo = (int64_t *) pg_layout_take(&l, T * sizeof(int64_t));
    b->rhi = (int64_t *) pg_layout_take(&l, T * sizeof(int64_t));
    b->ot = pg_layout_f32(&l, hn * T * c->DVp);
    b->run_max = pg_layout_f32(&l, hn * T);
    b->run_sum = pg_layout_f32(&l, hn * T);
    b->kt = pg_layout_f32(&l, c->DK * K);
    b->st = pg_layout_f32(&l, T * K);
    b->mt = pg_layout_f32(&l, T * K);
    b->vt = pg_layout_f32(&l, K * c->DVp);
    b->kr = pg_layout_f32(&l, K * c->DK);
    return l.bytes;
}

/* the path of a node: compute(use_ref=True) takes one_chunk, a forced path is taken (split only for
 * S == 1 and up to PG_FA_SPLIT_MAX_N rows), else split for those from PG_FA_SPLIT_MIN_L keys on,
 * tiled from PG_FA_TILE_Q rows on */
static inline pg_fa_path pg_fa_choose_path(const pg_fa_ctx * c, const pg_tensor * dst, bool use_ref) {
    if (use_ref) return PG_FA_PATH_ONE_CHUNK;
    const int forced = dst->op_params[PG_FA_PARAM_PATH];
    if (forced == PG_FA_PATH_SPLIT && !pg_fa_split_ok(c)) return PG_FA_PATH_ONE_CHUNK;
    if (forced == PG_FA_PATH_ONE_CHUNK || forced == PG_FA_PATH_TILED || forced == PG_FA_PATH_SPLIT) return forced;
    if (pg_fa_split_ok(c) && c->L >= PG_FA_SPLIT_MIN_L) return PG_FA_PATH_SPLIT;
    if (c->N >= PG_FA_TILE_Q) return PG_FA_PATH_TILED;
    return PG_FA_PATH_ONE_CHUNK;
}

/* the plan: the path (the variant its kernel runs) and that path's scratch */
static inline bool pg_plan_flash_attn_ext(const pg_tensor * dst, pg_plan * pl) {
    pg_fa_ctx c;
    pg_fa_init(&c, dst);
    const int forced = dst->op_params[PG_FA_PARAM_PATH];
    if (forced < PG_FA_PATH_AUTO || forced > PG_FA_PATH_SPLIT) return pg_plan_fail(pl, "op_params[%d] = %d is no path", PG_FA_PARAM_PATH, forced);
    const pg_type_traits * kt = &pg_traits[c.k->type], * vt = &pg_traits[c.v->type];
    if (!kt->vec_dot || !kt->attn_dot || !kt->to_float || !vt->attn_acc || !vt->to_float)
        return pg_plan_fail(pl, "the type table has no attention kernels for K %s, V %s", kt->name, vt->name);
    const pg_fa_path path = pg_fa_choose_path(&c, dst, pl->use_ref);
    pl->variant = path;
    switch (path) {
    case PG_FA_PATH_ONE_CHUNK: {
        pg_fa_one_chunk_buf b;
        pl->work = pg_per_thread(pg_fa_one_chunk_layout(&c, NULL, &b), pl->nth);
        return true;
    }
    case PG_FA_PATH_TILED: {
        pg_fa_tiled_buf b;
        pl->work = pg_per_thread(pg_fa_tiled_layout(&c, NULL, &b), pl->nth);
        return true;
    }
    case PG_FA_PATH_SPLIT: {
        pg_fa_split_buf b;
        pl->work = pg_per_thread(pg_fa_split_layout(&c, NULL, &b), pl->nth) + pg_fa_split_shared(&c, pl->nth);
        return true;
    }
    case PG_FA_PATH_AUTO: break;
    }
    return pg_plan_fail(pl, "no path chosen");
}

/* ---- one_chunk ---- */

static inline void pg_fa_one_chunk(const pg_params * p, const pg_fa_ctx * c, pg_tensor * dst) {
    const pg_tensor * k = c->k;
    pg_fa_one_chunk_buf b;
    pg_fa_one_chunk_layout(c, pg_scratch(p, pg_fa_one_chunk_layout(c, NULL, &b)), &b);
    float * acc = b.acc;
    const pg_type_traits * kt = &pg_traits[k->type];
    const int kdt = kt->vec_dot_type;
    const int64_t nr = c->N * c->Hq * c->S;
    /* ggml's chunking: about 4 chunks per thread, taken dynamically */
    int64_t nchunk = p->nth;
    if (p->nth > 1) {
        const int64_t chunk = (nr + 4 * p->nth - 1) / (4 * p->nth);
        nchunk = PG_MAX((nr + chunk - 1) / chunk, p->nth);
    }
    const int64_t dr = (nr + nchunk - 1) / nchunk;
    if (p->ith == 0) pg_chunk_set(p, p->nth);
    pg_barrier(p);
    for (int64_t ch = p->ith; ch < nchunk; ch = pg_chunk_add(p, 1)) {
        for (int64_t ir = ch * dr; ir < PG_MIN(nr, (ch + 1) * dr); ir++) {
            const int64_t i = ir % c->N, h = ir / c->N % c->Hq, s = ir / (c->N * c->Hq);
            const int64_t kh = h / c->G;
            const float * qrow = (const float *) pg_row(c->q, i, h, s);
            if (kdt != PG_TYPE_F32) pg_traits[kdt].from_float(qrow, b.qc, c->DK);
            const void * qd = kdt != PG_TYPE_F32 ? b.qc : (const void *) qrow;
            const pg_fp16_t * mrow = pg_fa_mask_row(c, i, h, s);
            const float slope = pg_fa_slope(c, h);
            float mx = -INFINITY, sum = 0.0f;
            memset(acc, 0, (size_t) c->DV * sizeof(float));
            for (int64_t j = 0; j < c->L; j++) {
                const float mv = mrow ? slope * pg_fp16_to_fp32(mrow[j]) : 0.0f;
                if (mv == -INFINITY) continue;
                float x = kt->vec_dot(c->DK, pg_row(k, j, kh, s), qd) * c->scale;
                pg_fa_softcap(c, 1, &x);
                const float f = pg_vec_attn_softmax_f32(1, &x, &mv, &mx, &sum);
                pg_fa_acc(c->v, 1, acc, c->DV, 1, &x, 1, pg_row(c->v, j, kh, s), &f, b.vtmp);
            }
            pg_fa_finalize(c, h, mx, sum, acc, (float *) pg_row(dst, h, i, s));
        }
    }
}

/* ---- split-KV decode ---- */

/* how many of the n heads from h0 one sweep takes: those that read h0's mask row (all n unless the
 * mask has a slice per head), so that a key is hidden for every head of the sweep or for none */
static inline int pg_fa_split_sweep(const pg_fa_ctx * c, int64_t r, int64_t h0, int n) {
    for (int g = 1; g < n; g++)
        if (pg_fa_mask_row(c, r, h0 + g, 0) != pg_fa_mask_row(c, r, h0, 0)) return g;
    return n;
}

/* [*lo, *hi): the keys some head can see. The threads split this range, not L: a decode step over a
 * KV cache padded past its last token (a causal mask hiding the tail) would otherwise leave the
 * last threads' segments hidden and the work to the first. Every thread computes the same range. */
static inline void pg_fa_live_keys(const pg_fa_ctx * c, int64_t r, int64_t * lo, int64_t * hi) {
    *lo = c->L;
    *hi = 0;
    const pg_fp16_t * prev = NULL;
    float prev_slope = 0.0f;
    for (int64_t h = 0; h < c->Hq; h++) {
        const pg_fp16_t * m = pg_fa_mask_row(c, r, h, 0);
        const float slope = pg_fa_slope(c, h);
        if (!m) { *lo = 0; *hi = c->L; return; }
        if (m == prev && slope == prev_slope) continue;
        prev = m;
        prev_slope = slope;
        for (int64_t j = 0; j < c->L; j++) {
            if (slope * pg_fp16_to_fp32(m[j]) == -INFINITY) continue;
            *lo = PG_MIN(*lo, j);
            *hi = PG_MAX(*hi, j + 1);
        }
    }
}

/* query row r of a split-KV node (every thread takes part; the caller separates rows by a barrier) */
static inline void pg_fa_split_row(const pg_params * p, const pg_fa_ctx * c, pg_tensor * dst, int64_t r) {
    const int64_t B = PG_FA_BLOCK_KV, DK = c->DK, DV = c->DV, PS = pg_fa_part_floats(c);
    pg_fa_split_buf b;
    const size_t tb = pg_fa_split_layout(c, NULL, &b);
    pg_fa_split_layout(c, pg_scratch(p, tb), &b);
    float * const qs = b.qs, * const sc = b.sc, * const mv = b.mv, * const live = b.live;
    float * part = (float *) ((char *) p->wdata + pg_per_thread(tb, p->nth));   /* pg_fa_split_shared */
    const int nth = p->nth, ith = p->ith;
    const pg_attn_dot_fn k_dot = pg_traits[c->k->type].attn_dot;

    int64_t lo, hi;
    pg_fa_live_keys(c, r, &lo, &hi);
    const int64_t seg = hi > lo ? (hi - lo + nth - 1) / nth : 0;
    const int64_t j0 = PG_MIN(hi, lo + ith * seg), j1 = PG_MIN(hi, j0 + seg);
    for (int64_t h = 0; h < c->Hq; h++) pg_vec_scale_f32(DK, qs + h * DK, (const float *) pg_row(c->q, r, h, 0), c->scale);

    for (int64_t kh = 0; kh < c->Hkv; kh++) {
        for (int64_t g0 = 0, ng; g0 < c->G; g0 += ng) {
            const int64_t h0 = kh * c->G + g0;
            ng = pg_fa_split_sweep(c, r, h0, (int) PG_MIN(PG_FA_SPLIT_HEADS, c->G - g0));
            float mx[PG_FA_SPLIT_HEADS], sum[PG_FA_SPLIT_HEADS], slope[PG_FA_SPLIT_HEADS], f[PG_FA_SPLIT_HEADS];
            const pg_fp16_t * mrow[PG_FA_SPLIT_HEADS];
            float * acc = part + (h0 * nth + ith) * PS + 16;
            for (int g = 0; g < ng; g++) {
                mx[g] = -INFINITY; sum[g] = 0.0f;
                slope[g] = pg_fa_slope(c, h0 + g);
                mrow[g] = pg_fa_mask_row(c, r, h0 + g, 0);
                memset(acc + g * nth * PS, 0, (size_t) DV * sizeof(float));
            }
            for (int64_t jb = j0; jb < j1; jb += B) {
                const int64_t nk = PG_MIN(B, j1 - jb);
                int any = 0;
                for (int64_t jj = 0; jj < nk; jj++) {
                    live[jj] = 0.0f;
                    for (int g = 0; g < ng && !live[jj]; g++)
                        live[jj] = !mrow[g] || slope[g] * pg_fp16_to_fp32(mrow[g][jb + jj]) != -INFINITY;
                    any |= live[jj] != 0.0f;
                }
                if (!any) continue;
                for (int64_t jj = 0; jj < nk; jj++) {
                    if (live[jj] != 0.0f) {
                        k_dot(ng, DK, qs + h0 * DK, DK, pg_row(c->k, jb + jj, kh, 0), sc + jj, B, b.ktmp);
                    } else {
                        for (int g = 0; g < ng; g++) sc[g * B + jj] = -INFINITY;
                    }
                }
                for (int g = 0; g < ng; g++) {
                    float * x = sc + g * B;
                    for (int64_t jj = 0; jj < nk; jj++)
                        mv[jj] = mrow[g] ? slope[g] * pg_fp16_to_fp32(mrow[g][jb + jj]) : 0.0f;
                    pg_fa_softcap(c, nk, x);
                    f[g] = pg_vec_attn_softmax_f32(nk, x, mv, &mx[g], &sum[g]);
                }
                /* V over the runs of visible keys: a hidden key's row is not read */
                const float * fs = f;
                for (int64_t ja = 0; ja < nk;) {
                    if (live[ja] == 0.0f) { ja++; continue; }
                    int64_t jz = ja + 1;
                    while (jz < nk && live[jz] != 0.0f) jz++;
                    pg_fa_acc(c->v, ng, acc, nth * PS, jz - ja, sc + ja, B, pg_row(c->v, jb + ja, kh, 0), fs, b.vtmp);
                    fs = NULL;
                    ja = jz;
                }
            }
            for (int g = 0; g < ng; g++) {
                float * st = part + ((h0 + g) * nth + ith) * PS;
                st[0] = mx[g];
                st[1] = sum[g];
            }
        }
    }

    pg_barrier(p);

    float * const racc = b.racc;
    for (int64_t h = ith; h < c->Hq; h += nth) {
        float mx = -INFINITY, sum = 0.0f;
        memset(racc, 0, (size_t) DV * sizeof(float));
        for (int t = 0; t < nth; t++) {
            const float * st = part + (h * nth + t) * PS;
            if (st[1] == 0.0f) continue;        /* empty or fully masked segment */
            const float m = PG_MAX(mx, st[0]);
            const float f0 = pg_expf(mx - m), f1 = pg_expf(st[0] - m);
            pg_vec_scale_f32(DV, racc, racc, f0);
            pg_vec_mad_f32(DV, racc, st + 16, f1);
            sum = sum * f0 + st[1] * f1;
            mx = m;
        }
        pg_fa_finalize(c, h, mx, sum, racc, (float *) pg_row(dst, h, r, 0));
    }
}

static inline void pg_fa_split(const pg_params * p, const pg_fa_ctx * c, pg_tensor * dst) {
    for (int64_t r = 0; r < c->N; r++) {
        if (r) pg_barrier(p);           /* the partials of row r - 1 are merged before they are reused */
        pg_fa_split_row(p, c, dst, r);
    }
}

/* ---- tiled prefill ---- */

static inline void pg_fa_tiled(const pg_params * p, const pg_fa_ctx * c, pg_tensor * dst) {
    const int64_t T = PG_FA_TILE_Q, K = PG_FA_TILE_KV, DK = c->DK, DV = c->DV, DVp = c->DVp;
    const int64_t hn = pg_fa_tile_heads(c);
    pg_fa_tiled_buf b;
    pg_fa_tiled_layout(c, pg_scratch(p, pg_fa_tiled_layout(c, NULL, &b)), &b);
    int64_t * const rlo = b.rlo, * const rhi = b.rhi;
    float * const ot = b.ot, * const run_max = b.run_max, * const run_sum = b.run_sum;
    float * const kt = b.kt, * const st = b.st, * const mt = b.mt, * const vt = b.vt, * const kr = b.kr;
    const pg_to_float_fn k_to_f32 = pg_traits[c->k->type].to_float;
    const pg_to_float_fn v_to_f32 = pg_traits[c->v->type].to_float;

    /* padding columns of the V tile stay zero; padding keys are -inf in mt and zero in kt */
    for (int64_t j = 0; j < K; j++) memset(vt + j * DVp + DV, 0, (size_t) (DVp - DV) * sizeof(float));

    const int64_t ldq = (int64_t) (c->q->nb[1] / sizeof(float));   /* Q rows are read in place */
    const int64_t ntq = (c->N + T - 1) / T, nhg = (c->G + hn - 1) / hn;
    const int64_t nunits = c->S * c->Hkv * nhg * ntq;
    if (p->ith == 0) pg_chunk_set(p, p->nth);
    pg_barrier(p);
    for (int64_t u = p->ith; u < nunits; u = pg_chunk_add(p, 1)) {
        const int64_t tq = u % ntq, hg = u / ntq % nhg, kh = u / (ntq * nhg) % c->Hkv, s = u / (ntq * nhg * c->Hkv);
        const int64_t i0 = tq * T, nq = PG_MIN(T, c->N - i0);
        const int64_t h0 = kh * c->G + hg * hn, nh = PG_MIN(hn, c->G - hg * hn);
        for (int64_t hh = 0; hh < nh; hh++) {
            for (int64_t r = 0; r < nq; r++) {
                memset(ot + (hh * T + r) * DVp, 0, (size_t) DVp * sizeof(float));
                run_max[hh * T + r] = -INFINITY;
                run_sum[hh * T + r] = 0.0f;
            }
        }
        for (int64_t j0 = 0; j0 < c->L; j0 += K) {
            const int64_t nk = PG_MIN(K, c->L - j0);
            bool k_ready = false, v_ready = false, v_finite = true, any = false;
            int64_t mt_slice = -1;
            for (int64_t hh = 0; hh < nh; hh++) {
                const int64_t h = h0 + hh;
                /* the mask tile and the live key range of each row are shared by the heads that read
                 * the same slice with slope 1 */
                const int64_t slice = c->mask ? h % c->mask->ne[2] : 0;
                if (slice != mt_slice || c->alibi.max_bias > 0.0f) {
                    const float slope = pg_fa_slope(c, h);
                    any = false;
                    for (int64_t r = 0; r < nq; r++) {
                        const pg_fp16_t * mrow = pg_fa_mask_row(c, i0 + r, h, s);
                        float * m = mt + r * K;
                        if (mrow) {
                            pg_vec_attn_mask_f16(nk, mrow + j0, slope, m, &rlo[r], &rhi[r]);
                        } else {
                            memset(m, 0, (size_t) nk * sizeof(float));
                            rlo[r] = 0;
                            rhi[r] = nk;
                        }
                        for (int64_t j = nk; j < K; j++) m[j] = -INFINITY;
                        any |= rlo[r] < rhi[r];
                    }
                    mt_slice = slice;
                }
                if (!any) continue;            /* every key of the tile is masked for this head */
                if (!k_ready) {
                    for (int64_t j = 0; j < nk; j++) {
                        k_to_f32(pg_row(c->k, j0 + j, kh, s), kr + j * DK, DK);
                        pg_vec_scale_f32(DK, kr + j * DK, kr + j * DK, c->scale);
                    }
                    pg_vec_attn_transpose_f32(nk, DK, kr, DK, kt, K);
                    for (int64_t d = 0; d < DK; d++) memset(kt + d * K + nk, 0, (size_t) (K - nk) * sizeof(float));
                    k_ready = true;
                }
                if (!v_ready) {
                    for (int64_t j = 0; j < nk; j++) v_to_f32(pg_row(c->v, j0 + j, kh, s), vt + j * DVp, DV);
                    v_finite = pg_fa_all_finite(nk * DVp, vt);
                    v_ready = true;
                }
                /* blocks of PG_ATTN_RB rows over the keys [k0, k1) some row of the block can see:
                 * the scores on whole vectors from k0 (the extra keys are -inf in mt), P V on [k0, k1) only.
                 * Causal prefill computes about half of a diagonal tile this way. */
                for (int64_t r0 = 0; r0 < nq; r0 += PG_ATTN_RB) {
                    const int nr = (int) PG_MIN(PG_ATTN_RB, nq - r0);
                    int64_t k0 = nk, k1 = 0;
                    for (int r = 0; r < nr; r++) {
                        if (rlo[r0 + r] >= rhi[r0 + r]) continue;
                        k0 = PG_MIN(k0, rlo[r0 + r]);
                        k1 = PG_MAX(k1, rhi[r0 + r]);
                    }
                    if (k0 >= k1) continue;
                    k0 -= k0 % PG_F32_EPR;
                    const int64_t nc = PG_MIN(K, PG_PAD(k1, PG_F32_EPR)) - k0;
                    float * sb = st + r0 * K + k0;
                    float fr[PG_ATTN_RB];               /* accumulator rescale of each row */
                    pg_vec_attn_gemm_qk_f32(nr, nc, DK, (const float *) pg_row(c->q, i0 + r0, h, s), ldq, kt + k0, K, sb, K);
                    const float * mb = mt + r0 * K + k0;
                    for (int r = 0; r < nr; r++) pg_fa_softcap(c, nc, sb + r * K);
                    pg_fa_hide_masked(nr, nc, sb, K, mb, K);
                    pg_vec_attn_softmax_rows_f32(nr, nc, sb, K, mb, K, run_max + hh * T + r0,
                                                 run_sum + hh * T + r0, fr);
                    if (v_finite) {
                        pg_vec_attn_acc_f32(nr, DVp, ot + (hh * T + r0) * DVp, DVp, k1 - k0, sb, K,
                                            vt + k0 * DVp, (size_t) DVp * sizeof(float), fr);
                    } else {
                        pg_fa_acc_visible(nr, DVp, ot + (hh * T + r0) * DVp, DVp, k1 - k0, sb, K, mb, K,
                                          vt + k0 * DVp, DVp, fr);
                    }
                }
            }
        }
        for (int64_t hh = 0; hh < nh; hh++)
            for (int64_t r = 0; r < nq; r++)
                pg_fa_finalize(c, h0 + hh, run_max[hh * T + r], run_sum[hh * T + r], ot + (hh * T + r) * DVp,
                               (float *) pg_row(dst, h0 + hh, i0 + r, s));
    }
}

/* runs the path the plan chose (pg_plan_flash_attn_ext) */
static inline void pg_compute_flash_attn_ext(const pg_params * p, pg_tensor * dst) {
    pg_fa_ctx c;
    pg_fa_init(&c, dst);
    switch ((pg_fa_path) p->variant) {
    case PG_FA_PATH_ONE_CHUNK: pg_fa_one_chunk(p, &c, dst); break;
    case PG_FA_PATH_TILED: pg_fa_tiled(p, &c, dst); break;
    case PG_FA_PATH_SPLIT: pg_fa_split(p, &c, dst); break;
    case PG_FA_PATH_AUTO: break;    /* never planned */
    }
}
