/* The panels of 16 weight rows that the integer tiles of Q8_0, Q4_0, IQ4_NL, MXFP4 (qgemm-x86.h) and of
 * Q4_K, Q5_K (kgemm-x86.h) run on: their shape, the repacked layout, where a kernel reads a panel's
 * rows and the prefetch of the next panel. Plain C and AVX2, shared by the AVX-512 kernels and
 * the AVX2 ones (qpanel-avx2.h); the arithmetic is in those files. */
#pragma once
#include "types/quants-k.h"          /* the block types */

#define PG_QP_R 16                   /* rows per panel: one lane each */
#define PG_QP_MR 64                  /* rows per call (types.h's tile_mr) */
#define PG_QP_NC 64                  /* columns per call (tile_nc) */
#define PG_QP_KB 32                  /* blocks per pass */
#define PG_QP_GEMV_KB 256            /* the GEMV's blocks per pass */
#define PG_QP_GEMV_MR 512            /* the GEMV's rows per pass */

/* block b of a column: d_y and -off*sum(y) */
typedef struct { float d; int32_t c; } pg_qp_col;
/* the 16-bit words at p[r] + off of 16 rows, lane r; four rows' packed in a 64-bit word by the
 * scalar units (idle here; a gather costs the vector ports more) */
PG_ALWAYS_INLINE __m256i pg_x16_words(const char * const * p, size_t off) {
    uint64_t h[4];
#pragma GCC unroll 4
    for (int a = 0; a < 4; a++) {
        uint16_t e[4];
        for (int i = 0; i < 4; i++) memcpy(&e[i], p[4 * a + i] + off, 2);
        h[a] = (uint64_t) e[0] | (uint64_t) e[1] << 16 | (uint64_t) e[2] << 32 | (uint64_t) e[3] << 48;
    }
    return _mm256_set_epi64x((long long) h[3], (long long) h[2], (long long) h[1], (long long) h[0]);
}
/* a panel type's block size and where its codes start */
PG_ALWAYS_INLINE size_t pg_qp_bsize(const int t) {
    return t == PG_TYPE_Q8_0 ? sizeof(pg_block_q8_0) : t == PG_TYPE_MXFP4 ? sizeof(pg_block_mxfp4) : sizeof(pg_block_q4_0);
}
PG_ALWAYS_INLINE size_t pg_qp_qs(const int t) { return t == PG_TYPE_MXFP4 ? 1 : 2; }
/* how far the unsigned operand of the integer products (dpbusd, maddubs) lies above the value */
PG_ALWAYS_INLINE int pg_qp_off(const int t) { return t == PG_TYPE_Q4_0 ? 8 : 128; }

/* The panels' repacked layout (qgemm-x86.h's pg_x16_pack, qpanel-avx2.h's pg_q2_pack; made once,
 * e.g. when a model loads: Tensor.repack). The kernels read a panel's block as 16 vectors' worth of
 * bytes gathered from 16 rows and transposed (qgemm-x86.h's pg_x16_dwords, qpanel-avx2.h's
 * pg_x8_dwords, two halves of 8 rows); the repacked copy holds each block of a panel in that
 * transposed order already, so a block is a few whole-vector loads and a GEMV reads one stream
 * instead of 16. Per panel of 16 rows, block after block; a block of type t: its head (the first
 * pg_x16_hb bytes: the fp16 d, MXFP4's E8M0 exponent) as one 16-bit word per row (lane r: row r),
 * then the rest of the block, padded to whole dwords, as dword vectors (vector i, lane r: dword i of
 * row r's rest; the AVX2 level's Q6_K values three bytes per four: qpanel-avx2.h's pg_k62_pkbyte).
 * Rows past the matrix's last repeat it. The arithmetic does not change, so the bits do not. */
PG_ALWAYS_INLINE int64_t pg_x16_blck(const int t) {
    return t == PG_TYPE_Q4_K || t == PG_TYPE_Q5_K || t == PG_TYPE_Q6_K ? PG_QK_K : PG_QK8_0;
}
PG_ALWAYS_INLINE size_t pg_x16_bsize(const int t) {
    switch (t) {
    case PG_TYPE_Q4_K: return sizeof(pg_block_q4_K);
    case PG_TYPE_Q5_K: return sizeof(pg_block_q5_K);
    case PG_TYPE_Q6_K: return sizeof(pg_block_q6_K);
    default: return pg_qp_bsize(t);
    }
}
PG_ALWAYS_INLINE size_t pg_x16_hb(const int t) { return pg_x16_blck(t) == PG_QK_K ? 0 : pg_qp_qs(t); }
/* bytes of a repacked block's heads, and of the whole block */
PG_ALWAYS_INLINE size_t pg_x16_heads(const int t) { return pg_x16_hb(t) ? 2 * PG_QP_R : 0; }
PG_ALWAYS_INLINE size_t pg_x16_pbsize(const int t) {
    return pg_x16_heads(t) + PG_QP_R * ((pg_x16_bsize(t) - pg_x16_hb(t) + 3) / 4 * 4);
}
/* the bytes of the repacked panels of nr rows of n elements of type t */
PG_ALWAYS_INLINE size_t pg_x16_bytes(const int t, int64_t n, int64_t nr) {
    return (size_t) ((nr + PG_QP_R - 1) / PG_QP_R * (n / pg_x16_blck(t))) * pg_x16_pbsize(t);
}
/* where a kernel reads a panel's 16 rows: the rows as stored (r[i]: row i) or, pk, their repacked
 * panel */
typedef struct { const char * r[PG_QP_R]; const char * pk; } pg_x16_src;
/* panel p of a call's mr rows: rows x + i*bx, those past mr repeating row mr - 1; pk (a constant):
 * the repacked panels from x, bx bytes apart */
PG_ALWAYS_INLINE pg_x16_src pg_x16_panel(const char * x, size_t bx, int p, int mr, const int pk) {
    pg_x16_src s;
    s.pk = pk ? x + (size_t) p * bx : NULL;
    if (!pk)
        for (int r = 0; r < PG_QP_R; r++) s.r[r] = x + (size_t) (p * PG_QP_R + PG_MIN(r, mr - p * PG_QP_R - 1)) * bx;
    return s;
}
/* The GEMV's prefetch of the next panel while one runs. A panel reads its 16 rows side by
 * side, 16 streams that restart at every panel; over rows of a few KB the hardware prefetcher has not
 * caught up with them before the panel ends, and a GEMV from DRAM ran at about half the bandwidth of
 * the one-row kernels (docs/bench/journal.md). So each step of a panel also prefetches, into L2 (a
 * panel of long rows does not fit L1 beside the running one), its share of the bytes of the next
 * panel, row after row; a repacked panel is one run of bytes, its share a constant number of lines.
 * The next panel, not the one after: the better of the two on Zen 3, the same on Zen 4
 * (docs/bench/journal.md). */
typedef struct { const char * p; size_t bx; int nrow, lines, per, row, line; } pg_x16_ahead;
/* the rows x + r*bx (r < nrow, at most 16) over the bytes [0, len) from x, spread over kb steps;
 * rows read whole (len == bx) are one run of bytes */
PG_ALWAYS_INLINE pg_x16_ahead pg_x16_ahead_init(const char * x, size_t bx, int64_t nrow, size_t len, int kb) {
    int n = (int) PG_MAX(0, PG_MIN(nrow, PG_QP_R));
    if (len == bx && n > 0) {
        len *= (size_t) n;
        n = 1;
    }
    const int lines = (int) ((len + 127) / 64);      /* one more line than len needs: x may not be aligned */
    return (pg_x16_ahead) {x, bx, n, lines, (n * lines + kb - 1) / kb, 0, 0};
}
PG_ALWAYS_INLINE void pg_x16_ahead_step(pg_x16_ahead * a) {
    if (a->bx == 0) {
        /* repacked panels: one run of bytes, a constant number of lines a step (unrolled) */
        if (a->row < a->nrow) {
            for (int l = 0; l < a->per; l++) __builtin_prefetch(a->p + (size_t) l * 64, 0, 2);
            a->p += (size_t) a->per * 64;
            a->line += a->per;
            a->row = a->line >= a->lines;
        }
        return;
    }
    for (int todo = a->per; todo > 0 && a->row < a->nrow;) {
        const int end = PG_MIN(a->lines, a->line + todo);
        for (int l = a->line; l < end; l++) __builtin_prefetch(a->p + (size_t) l * 64, 0, 2);
        todo -= end - a->line;
        a->line = end;
        if (end == a->lines) {
            a->line = 0;
            a->row++;
            a->p += a->bx;
        }
    }
}
#define PG_X16_AHEAD 1                /* panels ahead */
/* the prefetch while panel p of a call's rows runs blocks [b0, b0 + kb) of type t, in parts steps a
 * block: the rows (x, bx as pg_x16_panel's) of the next panel, up to row nahead - i0 (i0: the
 * call's rows before x) */
PG_ALWAYS_INLINE pg_x16_ahead pg_x16_ahead_of(const int t, const char * x, size_t bx, int p, int64_t i0,
                                              int64_t nahead, int64_t b0, int kb, int parts, const int pk) {
    const int64_t ra = (p + PG_X16_AHEAD) * PG_QP_R;    /* the first row of the panel prefetched */
    if (pk) {
        /* bx 0: one run of kb panel blocks, per lines a step: a constant, more than a block's lines
         * over its steps */
        const int lines = (int) ((size_t) kb * pg_x16_pbsize(t) / 64) + 1;
        return (pg_x16_ahead) {x + (size_t) (p + PG_X16_AHEAD) * bx + (size_t) b0 * pg_x16_pbsize(t), 0,
                               nahead - i0 - ra > 0, lines, (int) (pg_x16_pbsize(t) / (64 * (size_t) parts)) + 1, 0, 0};
    }
    return pg_x16_ahead_init(x + (size_t) ra * bx + (size_t) b0 * pg_x16_bsize(t), bx, nahead - i0 - ra,
                             (size_t) kb * pg_x16_bsize(t), kb * parts);
}
/* blocks [b0, b0 + kb) of a Q8_0 column y against weights whose codes are off above their values */
static inline void pg_qp_column(const char * y, int64_t b0, int kb, int off, pg_qp_col * out) {
    const pg_block_q8_0 * yb = (const pg_block_q8_0 *) y + b0;
    for (int k = 0; k < kb; k++) {
        /* sum(y) + 32*128: the bytes xor 0x80 summed in four qwords */
        const __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *) yb[k].qs), _mm256_set1_epi8((char) 0x80));
        const __m256i q = _mm256_sad_epu8(v, _mm256_setzero_si256());
        __m128i t = _mm_add_epi64(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        t = _mm_add_epi64(t, _mm_unpackhi_epi64(t, t));
        out[k].c = -off * (_mm_cvtsi128_si32(t) - 32 * 128);
        out[k].d = pg_fp16_to_fp32(yb[k].d);
    }
}
/* super-block of a column: d_y; Q4_K/Q5_K: c[0..3] its sub-block sums paired as the mins are, Q6_K:
 * c[j] = -32 * its sum over sub-block j */
typedef struct { float d; int32_t c[16]; } pg_kp_col;
/* super-blocks [b0, b0 + kb) of a Q8_K column y */
static inline void pg_kp_column(const int t, const char * y, int64_t b0, int kb, pg_kp_col * out) {
    const pg_block_q8_K * yb = (const pg_block_q8_K *) y + b0;
    for (int k = 0; k < kb; k++) {
        out[k].d = yb[k].d;
        if (t == PG_TYPE_Q6_K) {
            for (int j = 0; j < 16; j++) out[k].c[j] = -32 * yb[k].bsums[j];
            continue;
        }
        int32_t b[8];
        for (int j = 0; j < 8; j++) b[j] = yb[k].bsums[2 * j] + yb[k].bsums[2 * j + 1];
        for (int i = 0; i < 4; i++) {
            const int j = 4 * (i / 2) + i % 2;       /* pairs (0, 2), (1, 3), (4, 6), (5, 7) */
            out[k].c[i] = (int32_t) ((uint32_t) (uint16_t) b[j] | (uint32_t) (uint16_t) b[j + 2] << 16);
        }
    }
}

/* mul_mat on repacked weights (types.h's pg_panels_* interface; Tensor.repack): the bytes the panels
 * of nr rows of n elements of type t take (0: t has none at this level), the repacking, and
 * vec_dot_rows and vec_dot_tile reading the panels, x the one of the call's first row (a multiple
 * of PG_QP_R), bx the bytes of a panel. Each level defines, below its kernels, the four with t a
 * compile-time constant (kgemm-x86.h at AVX-512 with VNNI and GFNI, qpanel-avx2.h at AVX2); the one
 * switch over the types is here. AVX-512 without them has no panels. */
#if defined(PG_X86_GEMV) || defined(PG_SIMD_AVX2)
PG_ALWAYS_INLINE bool pg_panel_has(const int t);
PG_ALWAYS_INLINE void pg_panel_pack(const int t, int64_t n, int64_t nr, const char * x, size_t bx, char * dst);
PG_ALWAYS_INLINE void pg_panel_rows(const int t, int64_t n, const void * x, size_t bx, int64_t nr, const void * y,
                                    float * s);
PG_ALWAYS_INLINE void pg_panel_tile(const int t, int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by,
                                    int nc, float * s, size_t lds);

enum { PG_PANEL_SIZE, PG_PANEL_PACK, PG_PANEL_ROWS, PG_PANEL_TILE };
typedef struct {
    int64_t n, nr;          /* elements per row; rows (PACK, ROWS) */
    const void * x;
    size_t bx;
    const void * y;         /* ROWS, TILE: the activation rows, by bytes apart */
    size_t by;
    int mr, nc;             /* TILE */
    float * s;              /* ROWS, TILE: the sums, lds floats from a column to the next */
    size_t lds;
    void * dst;             /* PACK */
} pg_panel_args;
/* op of the panel type t (a constant) on a */
PG_ALWAYS_INLINE size_t pg_panel_op(const int t, int op, const pg_panel_args * a) {
    if (!pg_panel_has(t)) return 0;
    switch (op) {
    case PG_PANEL_PACK: pg_panel_pack(t, a->n, a->nr, (const char *) a->x, a->bx, (char *) a->dst); return 0;
    case PG_PANEL_ROWS: pg_panel_rows(t, a->n, a->x, a->bx, a->nr, a->y, a->s); return 0;
    case PG_PANEL_TILE: pg_panel_tile(t, a->n, a->x, a->bx, a->mr, a->y, a->by, a->nc, a->s, a->lds); return 0;
    default: return pg_x16_bytes(t, a->n, a->nr);
    }
}
static inline size_t pg_panels_do(int t, int op, const pg_panel_args * a) {
    switch (t) {
    case PG_TYPE_Q8_0: return pg_panel_op(PG_TYPE_Q8_0, op, a);
    case PG_TYPE_Q4_0: return pg_panel_op(PG_TYPE_Q4_0, op, a);
    case PG_TYPE_IQ4_NL: return pg_panel_op(PG_TYPE_IQ4_NL, op, a);
    case PG_TYPE_MXFP4: return pg_panel_op(PG_TYPE_MXFP4, op, a);
    case PG_TYPE_Q4_K: return pg_panel_op(PG_TYPE_Q4_K, op, a);
    case PG_TYPE_Q5_K: return pg_panel_op(PG_TYPE_Q5_K, op, a);
    case PG_TYPE_Q6_K: return pg_panel_op(PG_TYPE_Q6_K, op, a);
    default: return 0;
    }
}
#define PG_PANELS 1
#define PG_PANELS_R PG_QP_R           /* rows per panel */
static inline size_t pg_panels_size(int t, int64_t n, int64_t nr) {
    return pg_panels_do(t, PG_PANEL_SIZE, &(pg_panel_args) {.n = n, .nr = nr});
}
static inline void pg_panels_pack(int t, int64_t n, int64_t nr, const void * x, size_t bx, void * dst) {
    pg_panels_do(t, PG_PANEL_PACK, &(pg_panel_args) {.n = n, .nr = nr, .x = x, .bx = bx, .dst = dst});
}
static inline void pg_panels_rows(int t, int64_t n, const void * x, size_t bx, int64_t nr, const void * y, float * s) {
    pg_panels_do(t, PG_PANEL_ROWS, &(pg_panel_args) {.n = n, .nr = nr, .x = x, .bx = bx, .y = y, .s = s});
}
static inline void pg_panels_tile(int t, int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by,
                                  int nc, float * s, size_t lds) {
    pg_panels_do(t, PG_PANEL_TILE,
                 &(pg_panel_args) {.n = n, .x = x, .bx = bx, .mr = mr, .y = y, .by = by, .nc = nc, .s = s, .lds = lds});
}
#endif
