/* The type table: one row per tensor type, indexed by ggml's type id, with everything a kernel
 * needs to know about the type (ggml's type_traits and type_traits_cpu in one):
 *
 *   name, blck, size   ggml's type name (pyggml.Type.<NAME> is built from it), elements per block,
 *                      bytes per block
 *   kind               float, quantized or integer (the type groups of _enums.py)
 *   to_float           row of n elements -> f32                           (convert.h)
 *   from_float         f32 -> row, ggml's CPU rounding                    (convert.h)
 *   vec_dot            dot(row of this type, row of vec_dot_type): mul_mat's GEMV and the one_chunk
 *   vec_dot_type       attention path convert the other operand (activations, q) to this type first
 *   vec_dot_n          vec_dot against up to four activation rows at once (mul_mat's integer GEMV and
 *                      GEMM tiles), the weight row decoded once
 *   vec_dot_tile       PG_QGEMM_MR weight rows x up to four activation rows in registers (x86, the 32-element
 *                      block types; AVX-512, the K-quants and IQ4_XS; mul_mat prefers it to vec_dot_n);
 *                      Q8_0, Q4_0, IQ4_NL, MXFP4, Q4_K, Q5_K and Q6_K on AVX-512 with VNNI and GFNI:
 *                      up to tile_mr (64) rows x tile_nc (64) columns, in panels of 16 rows with sums
 *                      of their own (arch/x86/qgemm-x86.h's pg_qp_tile, arch/x86/kgemm-x86.h's
 *                      pg_kp_tile; their many columns from the AMX tiles where the CPU has them), and
 *                      all but Q5_K on AVX2 in the same panels (arch/x86/qpanel-avx2.h, the same
 *                      bits), which
 *                      their vec_dot_rows shares (Q6_K on AVX-512: and its vec_dot) and their vec_dot /
 *                      vec_dot_n (one row: the attention path) do not
 *   dot_tile_f32       float types: up to PG_DOT_TILE_MR rows against up to PG_DOT_TILE_NMAX f32 rows
 *                      in registers, PG_DOT_TILE_NC at a time, each sum in pg_vec_dot4_*'s order:
 *                      mul_mat's few columns
 *   vec_dot_rows       nr rows (bx bytes apart) against one vec_dot_type row: mul_mat's one-column
 *                      GEMV, a thread's whole row range per call. Integer types: each sum bit for bit
 *                      vec_dot_tile's (vec_dot_n's without a tile; AVX2, Q4_1, Q5_0, Q5_1: the
 *                      column's scales converted once for all rows; AVX-512 with VNNI and GFNI,
 *                      those (the column prepared once) and Q2_K, Q3_K, Q6_K, IQ4_XS: rows i and
 *                      i + nr/2 side by side, two read streams; Q8_0, Q4_0, IQ4_NL, MXFP4, Q4_K,
 *                      Q5_K, and on AVX2 all those but Q5_K, with Q6_K: the tile's panels of 16
 *                      rows, made and used in
 *                      registers). Float types:
 *                      rows i and i + nr/2 side by side against the column widened to f32 once
 *                      (exact), or in place when long (pg_type_float_rows). NULL: the GEMV calls
 *                      vec_dot_tile (or vec_dot) per row
 *   attn_dot           nr f32 query rows . one K row of this type (flash_attn_ext's split path)
 *   attn_acc           f32 accumulators += weights x nk V rows of this type (split and one_chunk)
 *
 * The attention kernels get scratch (tmp) for the types whose rows are converted to f32 first: n
 * floats for attn_dot, nk * n for attn_acc. Kernels take every type behaviour from this table (no
 * switch over types anywhere); a NULL entry is a type the op does not support, which its builder
 * refuses (pyggml._tables.types() tells Python which entries exist). Adding a type: its id in
 * pyggml.h's enum, its row here and the kernels the row names.
 */
#pragma once
#include "types/convert.h"
#include "types/dot-k.h"
#include "types/dot-legacy.h"

enum { PG_KIND_FLOAT = 0, PG_KIND_QUANT = 1, PG_KIND_INT = 2 };

#if !defined(PG_PANELS)
/* mul_mat's repacked weights (arch/x86/panels.h's pg_panels_*): no type has them at this level */
#define PG_PANELS_R 1
static inline size_t pg_panels_size(int t, int64_t n, int64_t nr) {
    (void) t, (void) n, (void) nr;
    return 0;
}
static inline void pg_panels_pack(int t, int64_t n, int64_t nr, const void * x, size_t bx, void * dst) {
    (void) t, (void) n, (void) nr, (void) x, (void) bx, (void) dst;
}
#endif

typedef float (*pg_vec_dot_fn)(int64_t n, const void * x, const void * y);
/* s[j] = dot(x, y_j) for j < nc (1 <= nc <= 4): one weight row x of this type against nc activation
 * rows of vec_dot_type, y_j = (const char *) y + j * by; the weight row is decoded once for all nc */
typedef void (*pg_vec_dot_n_fn)(int64_t n, const void * x, const void * y, size_t by, int nc, float * s);
/* s[c*lds + r] = dot(x_r, y_c) for r < mr (1 <= mr <= the type's tile_mr, or PG_QGEMM_MR), c < nc
 * (1 <= nc <= the type's tile_nc): mr weight rows x_r = x + r*bx against nc activation rows as
 * vec_dot_n's (the panel types on AVX-512 with VNNI and GFNI: as their vec_dot_rows'), all in registers
 * at once */
typedef void (*pg_vec_dot_tile_fn)(int64_t n, const void * x, size_t bx, int mr, const void * y, size_t by, int nc,
                                   float * s, size_t lds);
/* s[c*lds + r] = dot(x + r*bx, y[c]) for r < mr <= PG_DOT_TILE_MR, c < nc <= PG_DOT_TILE_NMAX, each
 * sum in pg_vec_dot4_*'s order; pf: prefetch the rows ahead (vec/dot.h pg_dot_tile) */
typedef void (*pg_dot_tile_f32_fn)(int64_t n, const void * x, size_t bx, int mr, const float * const * y, int nc,
                                   float * s, size_t lds, bool pf);
/* s[r] = dot(x + r * bx, y) for r < nr */
typedef void (*pg_vec_dot_rows_fn)(int64_t n, const void * x, size_t bx, int64_t nr, const void * y, float * s);
typedef void (*pg_attn_dot_fn)(int nr, int64_t n, const float * q, int64_t ldq, const void * k, float * s,
                               int64_t lds, float * tmp);
typedef void (*pg_attn_acc_fn)(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p,
                               int64_t ldp, const void * v, size_t nbv, const float * f, float * tmp);

typedef struct pg_type_traits {
    const char * name;
    int64_t blck;                /* elements per block */
    size_t size;                 /* bytes per block */
    int kind;
    pg_to_float_fn to_float;
    pg_from_float_fn from_float;
    pg_vec_dot_fn vec_dot;
    int vec_dot_type;
    pg_vec_dot_n_fn vec_dot_n;   /* NULL: mul_mat calls vec_dot per column */
    pg_vec_dot_tile_fn vec_dot_tile;  /* NULL: mul_mat calls vec_dot_n per weight row */
    int tile_nc;                 /* the most columns a vec_dot_tile call takes */
    int tile_mr;                 /* the most weight rows it takes; 0: PG_QGEMM_MR */
    pg_dot_tile_f32_fn dot_tile_f32;  /* float types: mul_mat's few-column tiles */
    pg_vec_dot_rows_fn vec_dot_rows;  /* NULL: the one-column GEMV calls vec_dot_tile (vec_dot) per row */
    pg_attn_dot_fn attn_dot;
    pg_attn_acc_fn attn_acc;
} pg_type_traits;

/* Q8_0's, Q4_0's, IQ4_NL's and MXFP4's tiles: panels of 16 rows on AVX-512 with VNNI and GFNI (arch/x86/qgemm-x86.h)
 * and on AVX2 (arch/x86/qpanel-avx2.h), else the other 32-element block types' */
#if !defined(PG_Q4_0_TILE_MR)
#define PG_Q4_0_TILE_MR 0
#define PG_Q4_0_TILE_NC PG_QGEMM_NC
#endif
#if !defined(PG_Q8_0_TILE_MR)
#define PG_Q8_0_TILE_MR 0
#define PG_Q8_0_TILE_NC PG_QGEMM_NC
#define PG_IQ4_NL_TILE_MR 0
#define PG_IQ4_NL_TILE_NC PG_QGEMM_NC
#define PG_MXFP4_TILE_MR 0
#define PG_MXFP4_TILE_NC PG_QGEMM_NC
#endif
/* Q4_K's and Q5_K's: the same panels there (arch/x86/kgemm-x86.h) and Q4_K's on AVX2
 * (arch/x86/qpanel-avx2.h), else the other K-quants' */
#if !defined(PG_Q4_K_TILE_MR)
#define PG_Q4_K_TILE PG_KTILE_FN(q4_K)
#define PG_Q4_K_ROWS PG_KROWS_FN(q4_K)
#define PG_Q4_K_TILE_NC PG_KTILE_NC(q4_K)
#define PG_Q4_K_TILE_MR 0
#endif
#if !defined(PG_Q5_K_TILE_MR)
#define PG_Q5_K_TILE PG_KTILE_FN(q5_K)
#define PG_Q5_K_ROWS PG_KROWS_FN(q5_K)
#define PG_Q5_K_TILE_NC PG_KTILE_NC(q5_K)
#define PG_Q5_K_TILE_MR 0
#endif
/* Q6_K's: panels of 16 rows there too and on AVX2 (its one-column GEMV there too), else the other K-quants' */
#if !defined(PG_Q6_K_ROWS)
#define PG_Q6_K_ROWS PG_KROWS_FN(q6_K)
#endif
#if !defined(PG_Q6_K_TILE_MR)
#define PG_Q6_K_TILE PG_KTILE_FN(q6_K)
#define PG_Q6_K_TILE_NC PG_KTILE_NC(q6_K)
#define PG_Q6_K_TILE_MR 0
#endif
#define PG_TILE_MR_MAX PG_MAX(PG_QGEMM_MR, PG_MAX(PG_Q4_0_TILE_MR, PG_Q4_K_TILE_MR))  /* the most rows of a vec_dot_tile call */

/* ---- the row kernels of each type, in the table's signatures ---- */

static inline float pg_type_dot_f32(int64_t n, const void * x, const void * y) {
    return pg_vec_dot_f32(n, (const float *) x, (const float *) y);
}
static inline float pg_type_dot_f16(int64_t n, const void * x, const void * y) {
    return pg_vec_dot_f16(n, (const pg_fp16_t *) x, (const pg_fp16_t *) y);
}
static inline float pg_type_dot_bf16(int64_t n, const void * x, const void * y) {
    return pg_vec_dot_bf16(n, (const pg_bf16_t *) x, (const pg_bf16_t *) y);
}
static inline float pg_type_dot_q8_0(int64_t n, const void * x, const void * y) {
    return pg_vec_dot_q8_0_q8_0(n, (const pg_block_q8_0 *) x, (const pg_block_q8_0 *) y);
}
static inline float pg_type_dot_q4_0(int64_t n, const void * x, const void * y) {
    return pg_vec_dot_q4_0_q8_0(n, (const pg_block_q4_0 *) x, (const pg_block_q8_0 *) y);
}

static inline void pg_type_dot_tile_f32(int64_t n, const void * x, size_t bx, int mr, const float * const * y, int nc,
                                        float * s, size_t lds, bool pf) {
    pg_vec_dot_tile_f32(n, (const float *) x, bx, mr, y, nc, s, lds, pf);
}
static inline void pg_type_dot_tile_f16(int64_t n, const void * x, size_t bx, int mr, const float * const * y, int nc,
                                        float * s, size_t lds, bool pf) {
    pg_vec_dot_tile_f16_f32(n, (const pg_fp16_t *) x, bx, mr, y, nc, s, lds, pf);
}
static inline void pg_type_dot_tile_bf16(int64_t n, const void * x, size_t bx, int mr, const float * const * y, int nc,
                                         float * s, size_t lds, bool pf) {
    pg_vec_dot_tile_bf16_f32(n, (const pg_bf16_t *) x, bx, mr, y, nc, s, lds, pf);
}

/* vec_dot_rows of the float types: the one-column GEMV over a thread's nr rows, rows i and i + nr/2
 * side by side (two read streams), an odd last row alone. The fp16/bf16 column is widened to f32
 * once per call (exact) where that copy stays in L1 (PG_GEMV_WIDEN_MAX) and dotted as f32; a longer
 * one is dotted in place, both operands widened in registers (the same sums bit for bit). */
PG_ALWAYS_INLINE void pg_type_float_rows(const int t, int64_t n, const void * vx, size_t bx, int64_t nr, const void * y,
                                         float * s) {
    const char * x = (const char *) vx;
    float wide[PG_GEMV_WIDEN_MAX / sizeof(float)];
    const bool f32 = t == PG_TYPE_F32 || (size_t) n * sizeof(float) <= PG_GEMV_WIDEN_MAX;
    if (t == PG_TYPE_F16 && f32) pg_row_f16_to_f32(y, wide, n);
    if (t == PG_TYPE_BF16 && f32) pg_row_bf16_to_f32(y, wide, n);
    const float * yf = t == PG_TYPE_F32 ? (const float *) y : wide;
    const int64_t h = nr / 2;
    const size_t bh = (size_t) h * bx;
    for (int64_t i = 0; i < h; i++) {
        const char * xi = x + (size_t) i * bx;
        float s2[2];
        if (t == PG_TYPE_F32) pg_vec_dot2_f32(n, (const float *) xi, bh, yf, s2);
        else if (t == PG_TYPE_F16 && f32) pg_vec_dot2_f16_f32(n, (const pg_fp16_t *) xi, bh, yf, s2);
        else if (t == PG_TYPE_F16) pg_vec_dot2_f16(n, (const pg_fp16_t *) xi, bh, (const pg_fp16_t *) y, s2);
        else if (f32) pg_vec_dot2_bf16_f32(n, (const pg_bf16_t *) xi, bh, yf, s2);
        else pg_vec_dot2_bf16(n, (const pg_bf16_t *) xi, bh, (const pg_bf16_t *) y, s2);
        s[i] = s2[0];
        s[i + h] = s2[1];
    }
    if (!(nr & 1)) return;
    const void * xl = x + (size_t) (2 * h) * bx;
    if (t == PG_TYPE_F32) s[2 * h] = pg_vec_dot_f32(n, (const float *) xl, yf);
    else if (t == PG_TYPE_F16 && f32) s[2 * h] = pg_vec_dot_f16_f32(n, (const pg_fp16_t *) xl, yf);
    else if (t == PG_TYPE_F16) s[2 * h] = pg_vec_dot_f16(n, (const pg_fp16_t *) xl, (const pg_fp16_t *) y);
    else if (f32) s[2 * h] = pg_vec_dot_bf16_f32(n, (const pg_bf16_t *) xl, yf);
    else s[2 * h] = pg_vec_dot_bf16(n, (const pg_bf16_t *) xl, (const pg_bf16_t *) y);
}
static inline void pg_type_rows_f32(int64_t n, const void * x, size_t bx, int64_t nr, const void * y, float * s) {
    pg_type_float_rows(PG_TYPE_F32, n, x, bx, nr, y, s);
}
static inline void pg_type_rows_f16(int64_t n, const void * x, size_t bx, int64_t nr, const void * y, float * s) {
    pg_type_float_rows(PG_TYPE_F16, n, x, bx, nr, y, s);
}
static inline void pg_type_rows_bf16(int64_t n, const void * x, size_t bx, int64_t nr, const void * y, float * s) {
    pg_type_float_rows(PG_TYPE_BF16, n, x, bx, nr, y, s);
}

static inline void pg_type_attn_dot_f32(int nr, int64_t n, const float * q, int64_t ldq, const void * k, float * s,
                                        int64_t lds, float * tmp) {
    (void) tmp;
    pg_vec_attn_dot_f32(nr, n, q, ldq, (const float *) k, s, lds);
}
static inline void pg_type_attn_dot_f16(int nr, int64_t n, const float * q, int64_t ldq, const void * k, float * s,
                                        int64_t lds, float * tmp) {
    (void) tmp;
    pg_vec_attn_dot_f16(nr, n, q, ldq, (const pg_fp16_t *) k, s, lds);
}
static inline void pg_type_attn_dot_bf16(int nr, int64_t n, const float * q, int64_t ldq, const void * k, float * s,
                                         int64_t lds, float * tmp) {
    (void) tmp;
    pg_vec_attn_dot_bf16(nr, n, q, ldq, (const pg_bf16_t *) k, s, lds);
}

static inline void pg_type_attn_acc_f32(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p,
                                        int64_t ldp, const void * v, size_t nbv, const float * f, float * tmp) {
    (void) tmp;
    pg_vec_attn_acc_f32(nr, n, acc, lda, nk, p, ldp, (const float *) v, nbv, f);
}
static inline void pg_type_attn_acc_f16(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p,
                                        int64_t ldp, const void * v, size_t nbv, const float * f, float * tmp) {
    (void) tmp;
    pg_vec_attn_acc_f16(nr, n, acc, lda, nk, p, ldp, (const pg_fp16_t *) v, nbv, f);
}
static inline void pg_type_attn_acc_bf16(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p,
                                         int64_t ldp, const void * v, size_t nbv, const float * f, float * tmp) {
    (void) tmp;
    pg_vec_attn_acc_bf16(nr, n, acc, lda, nk, p, ldp, (const pg_bf16_t *) v, nbv, f);
}

/* quantized K and V rows: dequantised into tmp (to_f32, the type's to_float), then the f32 kernels */
PG_ALWAYS_INLINE void pg_attn_dequant_dot(void (*to_f32)(const void *, float *, int64_t), int nr, int64_t n,
                                          const float * q, int64_t ldq, const void * k, float * s, int64_t lds,
                                          float * tmp) {
    to_f32(k, tmp, n);
    pg_vec_attn_dot_f32(nr, n, q, ldq, tmp, s, lds);
}
PG_ALWAYS_INLINE void pg_attn_dequant_acc(void (*to_f32)(const void *, float *, int64_t), int nr, int64_t n,
                                          float * acc, int64_t lda, int64_t nk, const float * p, int64_t ldp,
                                          const void * v, size_t nbv, const float * f, float * tmp) {
    for (int64_t j = 0; j < nk; j++) to_f32((const char *) v + j * nbv, tmp + j * n, n);
    pg_vec_attn_acc_f32(nr, n, acc, lda, nk, p, ldp, tmp, (size_t) n * sizeof(float), f);
}
static inline void pg_type_attn_dot_q8_0(int nr, int64_t n, const float * q, int64_t ldq, const void * k, float * s,
                                         int64_t lds, float * tmp) {
    pg_attn_dequant_dot(pg_row_q8_0_to_f32, nr, n, q, ldq, k, s, lds, tmp);
}
static inline void pg_type_attn_acc_q8_0(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p,
                                         int64_t ldp, const void * v, size_t nbv, const float * f, float * tmp) {
    pg_attn_dequant_acc(pg_row_q8_0_to_f32, nr, n, acc, lda, nk, p, ldp, v, nbv, f, tmp);
}
static inline void pg_type_attn_dot_q4_0(int nr, int64_t n, const float * q, int64_t ldq, const void * k, float * s,
                                         int64_t lds, float * tmp) {
    pg_attn_dequant_dot(pg_row_q4_0_to_f32, nr, n, q, ldq, k, s, lds, tmp);
}
static inline void pg_type_attn_acc_q4_0(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p,
                                         int64_t ldp, const void * v, size_t nbv, const float * f, float * tmp) {
    pg_attn_dequant_acc(pg_row_q4_0_to_f32, nr, n, acc, lda, nk, p, ldp, v, nbv, f, tmp);
}
static inline void pg_type_attn_dot_q4_1(int nr, int64_t n, const float * q, int64_t ldq, const void * k, float * s,
                                         int64_t lds, float * tmp) {
    pg_attn_dequant_dot(pg_row_q4_1_to_f32, nr, n, q, ldq, k, s, lds, tmp);
}
static inline void pg_type_attn_acc_q4_1(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p,
                                         int64_t ldp, const void * v, size_t nbv, const float * f, float * tmp) {
    pg_attn_dequant_acc(pg_row_q4_1_to_f32, nr, n, acc, lda, nk, p, ldp, v, nbv, f, tmp);
}
static inline void pg_type_attn_dot_q5_0(int nr, int64_t n, const float * q, int64_t ldq, const void * k, float * s,
                                         int64_t lds, float * tmp) {
    pg_attn_dequant_dot(pg_row_q5_0_to_f32, nr, n, q, ldq, k, s, lds, tmp);
}
static inline void pg_type_attn_acc_q5_0(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p,
                                         int64_t ldp, const void * v, size_t nbv, const float * f, float * tmp) {
    pg_attn_dequant_acc(pg_row_q5_0_to_f32, nr, n, acc, lda, nk, p, ldp, v, nbv, f, tmp);
}
static inline void pg_type_attn_dot_q5_1(int nr, int64_t n, const float * q, int64_t ldq, const void * k, float * s,
                                         int64_t lds, float * tmp) {
    pg_attn_dequant_dot(pg_row_q5_1_to_f32, nr, n, q, ldq, k, s, lds, tmp);
}
static inline void pg_type_attn_acc_q5_1(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p,
                                         int64_t ldp, const void * v, size_t nbv, const float * f, float * tmp) {
    pg_attn_dequant_acc(pg_row_q5_1_to_f32, nr, n, acc, lda, nk, p, ldp, v, nbv, f, tmp);
}
static inline void pg_type_attn_dot_iq4_nl(int nr, int64_t n, const float * q, int64_t ldq, const void * k, float * s,
                                           int64_t lds, float * tmp) {
    pg_attn_dequant_dot(pg_row_iq4_nl_to_f32, nr, n, q, ldq, k, s, lds, tmp);
}
static inline void pg_type_attn_acc_iq4_nl(int nr, int64_t n, float * acc, int64_t lda, int64_t nk, const float * p,
                                           int64_t ldp, const void * v, size_t nbv, const float * f, float * tmp) {
    pg_attn_dequant_acc(pg_row_iq4_nl_to_f32, nr, n, acc, lda, nk, p, ldp, v, nbv, f, tmp);
}

/* ---- the table ---- */

static const pg_type_traits pg_traits[PG_TYPE_COUNT] = {
    [PG_TYPE_F32] = {
        .name = "f32", .blck = 1, .size = sizeof(float), .kind = PG_KIND_FLOAT,
        .to_float = pg_row_f32_to_f32, .from_float = pg_row_f32_from_f32,
        .vec_dot = pg_type_dot_f32, .vec_dot_type = PG_TYPE_F32,
        .dot_tile_f32 = pg_type_dot_tile_f32, .vec_dot_rows = pg_type_rows_f32,
        .attn_dot = pg_type_attn_dot_f32, .attn_acc = pg_type_attn_acc_f32,
    },
    [PG_TYPE_F16] = {
        .name = "f16", .blck = 1, .size = sizeof(pg_fp16_t), .kind = PG_KIND_FLOAT,
        .to_float = pg_row_f16_to_f32, .from_float = pg_row_f16_from_f32,
        .vec_dot = pg_type_dot_f16, .vec_dot_type = PG_TYPE_F16,
        .dot_tile_f32 = pg_type_dot_tile_f16, .vec_dot_rows = pg_type_rows_f16,
        .attn_dot = pg_type_attn_dot_f16, .attn_acc = pg_type_attn_acc_f16,
    },
    [PG_TYPE_BF16] = {
        .name = "bf16", .blck = 1, .size = sizeof(pg_bf16_t), .kind = PG_KIND_FLOAT,
        .to_float = pg_row_bf16_to_f32, .from_float = pg_row_bf16_from_f32,
        .vec_dot = pg_type_dot_bf16, .vec_dot_type = PG_TYPE_BF16,
        .dot_tile_f32 = pg_type_dot_tile_bf16, .vec_dot_rows = pg_type_rows_bf16,
        .attn_dot = pg_type_attn_dot_bf16, .attn_acc = pg_type_attn_acc_bf16,
    },
    [PG_TYPE_Q8_0] = {
        .name = "q8_0", .blck = PG_QK8_0, .size = sizeof(pg_block_q8_0), .kind = PG_KIND_QUANT,
        .to_float = pg_row_q8_0_to_f32, .from_float = pg_row_q8_0_from_f32,
        .vec_dot = pg_type_dot_q8_0, .vec_dot_type = PG_TYPE_Q8_0, .vec_dot_n = pg_vec_dot_q8_0_n,
        .vec_dot_tile = PG_QTILE_FN(q8_0), .vec_dot_rows = PG_QROWS_FN(q8_0),
        .tile_nc = PG_Q8_0_TILE_NC, .tile_mr = PG_Q8_0_TILE_MR,
        .attn_dot = pg_type_attn_dot_q8_0, .attn_acc = pg_type_attn_acc_q8_0,
    },
    [PG_TYPE_Q4_0] = {
        .name = "q4_0", .blck = PG_QK4_0, .size = sizeof(pg_block_q4_0), .kind = PG_KIND_QUANT,
        .to_float = pg_row_q4_0_to_f32, .from_float = pg_row_q4_0_from_f32,
        .vec_dot = pg_type_dot_q4_0, .vec_dot_type = PG_TYPE_Q8_0, .vec_dot_n = pg_vec_dot_q4_0_n,
        .vec_dot_tile = PG_QTILE_FN(q4_0), .vec_dot_rows = PG_QROWS_FN(q4_0),
        .tile_nc = PG_Q4_0_TILE_NC, .tile_mr = PG_Q4_0_TILE_MR,
        .attn_dot = pg_type_attn_dot_q4_0, .attn_acc = pg_type_attn_acc_q4_0,
    },
    /* the K-quants (quants-k.h, dot-k.h); Q8_K is their activation type, no weight type itself (as in ggml) */
    [PG_TYPE_Q2_K] = {
        .name = "q2_K", .blck = PG_QK_K, .size = sizeof(pg_block_q2_K), .kind = PG_KIND_QUANT,
        .to_float = pg_row_q2_K_to_f32, .from_float = pg_row_q2_K_from_f32,
        .vec_dot = pg_vec_dot_q2_K_q8_K, .vec_dot_type = PG_TYPE_Q8_K, .vec_dot_n = pg_vec_dot_q2_K_q8_K_n,
        .vec_dot_tile = PG_KTILE_FN(q2_K),
        .tile_nc = PG_KTILE_NC(q2_K), .vec_dot_rows = PG_KROWS_FN(q2_K),
    },
    [PG_TYPE_Q3_K] = {
        .name = "q3_K", .blck = PG_QK_K, .size = sizeof(pg_block_q3_K), .kind = PG_KIND_QUANT,
        .to_float = pg_row_q3_K_to_f32, .from_float = pg_row_q3_K_from_f32,
        .vec_dot = pg_vec_dot_q3_K_q8_K, .vec_dot_type = PG_TYPE_Q8_K, .vec_dot_n = pg_vec_dot_q3_K_q8_K_n,
        .vec_dot_tile = PG_KTILE_FN(q3_K),
        .tile_nc = PG_KTILE_NC(q3_K), .vec_dot_rows = PG_KROWS_FN(q3_K),
    },
    [PG_TYPE_Q4_K] = {
        .name = "q4_K", .blck = PG_QK_K, .size = sizeof(pg_block_q4_K), .kind = PG_KIND_QUANT,
        .to_float = pg_row_q4_K_to_f32, .from_float = pg_row_q4_K_from_f32,
        .vec_dot = pg_vec_dot_q4_K_q8_K, .vec_dot_type = PG_TYPE_Q8_K, .vec_dot_n = pg_vec_dot_q4_K_q8_K_n,
        .vec_dot_tile = PG_Q4_K_TILE, .tile_mr = PG_Q4_K_TILE_MR,
        .tile_nc = PG_Q4_K_TILE_NC, .vec_dot_rows = PG_Q4_K_ROWS,
    },
    [PG_TYPE_Q5_K] = {
        .name = "q5_K", .blck = PG_QK_K, .size = sizeof(pg_block_q5_K), .kind = PG_KIND_QUANT,
        .to_float = pg_row_q5_K_to_f32, .from_float = pg_row_q5_K_from_f32,
        .vec_dot = pg_vec_dot_q5_K_q8_K, .vec_dot_type = PG_TYPE_Q8_K, .vec_dot_n = pg_vec_dot_q5_K_q8_K_n,
        .vec_dot_tile = PG_Q5_K_TILE, .tile_mr = PG_Q5_K_TILE_MR,
        .tile_nc = PG_Q5_K_TILE_NC, .vec_dot_rows = PG_Q5_K_ROWS,
    },
    [PG_TYPE_Q6_K] = {
        .name = "q6_K", .blck = PG_QK_K, .size = sizeof(pg_block_q6_K), .kind = PG_KIND_QUANT,
        .to_float = pg_row_q6_K_to_f32, .from_float = pg_row_q6_K_from_f32,
        .vec_dot = pg_vec_dot_q6_K_q8_K, .vec_dot_type = PG_TYPE_Q8_K, .vec_dot_n = pg_vec_dot_q6_K_q8_K_n,
        .vec_dot_tile = PG_Q6_K_TILE, .tile_mr = PG_Q6_K_TILE_MR,
        .tile_nc = PG_Q6_K_TILE_NC, .vec_dot_rows = PG_Q6_K_ROWS,
    },
    [PG_TYPE_Q8_K] = {
        .name = "q8_K", .blck = PG_QK_K, .size = sizeof(pg_block_q8_K), .kind = PG_KIND_QUANT,
        .to_float = pg_row_q8_K_to_f32, .from_float = pg_row_q8_K_from_f32,
    },
    /* the legacy types of quants-legacy.h and dot-legacy.h */
    [PG_TYPE_Q4_1] = {
        .name = "q4_1", .blck = PG_QK, .size = sizeof(pg_block_q4_1), .kind = PG_KIND_QUANT,
        .to_float = pg_row_q4_1_to_f32, .from_float = pg_row_q4_1_from_f32,
        .vec_dot = pg_type_dot_q4_1, .vec_dot_type = PG_TYPE_Q8_1, .vec_dot_n = pg_vec_dot_q4_1_n,
        .vec_dot_tile = PG_QTILE_FN(q4_1), .vec_dot_rows = PG_QROWS_FN(q4_1),
        .tile_nc = PG_QGEMM_NC,
        .attn_dot = pg_type_attn_dot_q4_1, .attn_acc = pg_type_attn_acc_q4_1,
    },
    [PG_TYPE_Q5_0] = {
        .name = "q5_0", .blck = PG_QK, .size = sizeof(pg_block_q5_0), .kind = PG_KIND_QUANT,
        .to_float = pg_row_q5_0_to_f32, .from_float = pg_row_q5_0_from_f32,
        .vec_dot = pg_type_dot_q5_0, .vec_dot_type = PG_TYPE_Q8_0, .vec_dot_n = pg_vec_dot_q5_0_n,
        .vec_dot_tile = PG_QTILE_FN(q5_0), .vec_dot_rows = PG_QROWS_FN(q5_0),
        .tile_nc = PG_QGEMM_NC,
        .attn_dot = pg_type_attn_dot_q5_0, .attn_acc = pg_type_attn_acc_q5_0,
    },
    [PG_TYPE_Q5_1] = {
        .name = "q5_1", .blck = PG_QK, .size = sizeof(pg_block_q5_1), .kind = PG_KIND_QUANT,
        .to_float = pg_row_q5_1_to_f32, .from_float = pg_row_q5_1_from_f32,
        .vec_dot = pg_type_dot_q5_1, .vec_dot_type = PG_TYPE_Q8_1, .vec_dot_n = pg_vec_dot_q5_1_n,
        .vec_dot_tile = PG_QTILE_FN(q5_1), .vec_dot_rows = PG_QROWS_FN(q5_1),
        .tile_nc = PG_QGEMM_NC,
        .attn_dot = pg_type_attn_dot_q5_1, .attn_acc = pg_type_attn_acc_q5_1,
    },
    /* Q8_1: only the activations of Q4_1/Q5_1 (ggml has no vec_dot for it either) */
    [PG_TYPE_Q8_1] = {
        .name = "q8_1", .blck = PG_QK, .size = sizeof(pg_block_q8_1), .kind = PG_KIND_QUANT,
        .to_float = pg_row_q8_1_to_f32, .from_float = pg_row_q8_1_from_f32, .vec_dot_type = PG_TYPE_Q8_1,
    },
    [PG_TYPE_IQ4_NL] = {
        .name = "iq4_nl", .blck = PG_QK, .size = sizeof(pg_block_iq4_nl), .kind = PG_KIND_QUANT,
        .to_float = pg_row_iq4_nl_to_f32, .from_float = pg_row_iq4_nl_from_f32,
        .vec_dot = pg_type_dot_iq4_nl, .vec_dot_type = PG_TYPE_Q8_0, .vec_dot_n = pg_vec_dot_iq4_nl_n,
        .vec_dot_tile = PG_QTILE_FN(iq4_nl), .vec_dot_rows = PG_QROWS_FN(iq4_nl),
        .tile_nc = PG_IQ4_NL_TILE_NC, .tile_mr = PG_IQ4_NL_TILE_MR,
        .attn_dot = pg_type_attn_dot_iq4_nl, .attn_acc = pg_type_attn_acc_iq4_nl,
    },
    /* MXFP4 (gpt-oss's experts): dotted against Q8_0 as ggml, in the 32-element types' tiles; no KV
     * cache type in ggml */
    [PG_TYPE_MXFP4] = {
        .name = "mxfp4", .blck = PG_QK, .size = sizeof(pg_block_mxfp4), .kind = PG_KIND_QUANT,
        .to_float = pg_row_mxfp4_to_f32, .from_float = pg_row_mxfp4_from_f32,
        .vec_dot = pg_type_dot_mxfp4, .vec_dot_type = PG_TYPE_Q8_0, .vec_dot_n = pg_vec_dot_mxfp4_n,
        .vec_dot_tile = PG_QTILE_FN(mxfp4), .vec_dot_rows = PG_QROWS_FN(mxfp4),
        .tile_nc = PG_MXFP4_TILE_NC, .tile_mr = PG_MXFP4_TILE_MR,
    },
    /* IQ4_XS: dotted against Q8_K as the K-quants (quants-k.h, dot-k.h); no KV cache type in ggml */
    [PG_TYPE_IQ4_XS] = {
        .name = "iq4_xs", .blck = PG_QK_IQ4_XS, .size = sizeof(pg_block_iq4_xs), .kind = PG_KIND_QUANT,
        .to_float = pg_row_iq4_xs_to_f32, .from_float = pg_row_iq4_xs_from_f32,
        .vec_dot = pg_vec_dot_iq4_xs_q8_K, .vec_dot_type = PG_TYPE_Q8_K, .vec_dot_n = pg_vec_dot_iq4_xs_q8_K_n,
        .vec_dot_tile = PG_KTILE_FN(iq4_xs),
        .tile_nc = PG_KTILE_NC(iq4_xs), .vec_dot_rows = PG_KROWS_FN(iq4_xs),
    },
    /* I32: to_float and from_float for get_rows and the tensor conversions */
    [PG_TYPE_I32] = {
        .name = "i32", .blck = 1, .size = sizeof(int32_t), .kind = PG_KIND_INT,
        .to_float = pg_row_i32_to_f32, .from_float = pg_row_i32_from_f32,
    },
    [PG_TYPE_I8] = {.name = "i8", .blck = 1, .size = sizeof(int8_t), .kind = PG_KIND_INT},
    [PG_TYPE_I16] = {.name = "i16", .blck = 1, .size = sizeof(int16_t), .kind = PG_KIND_INT},
    [PG_TYPE_I64] = {.name = "i64", .blck = 1, .size = sizeof(int64_t), .kind = PG_KIND_INT},
    [PG_TYPE_F64] = {.name = "f64", .blck = 1, .size = sizeof(double), .kind = PG_KIND_FLOAT},
};

static inline size_t pg_row_size(int type, int64_t n) { return pg_traits[type].size * (size_t) (n / pg_traits[type].blck); }

/* packed: no gaps, rows in order (ggml_is_contiguous); Tensor.is_contiguous() reports this */
static inline bool pg_is_contiguous(const pg_tensor * t) {
    size_t nb = pg_traits[t->type].size;
    if (t->ne[0] != pg_traits[t->type].blck && t->nb[0] != nb) return false;
    nb *= (size_t) (t->ne[0] / pg_traits[t->type].blck);
    for (int i = 1; i < 4; i++) {
        if (t->ne[i] == 1) continue;
        if (t->nb[i] != nb) return false;
        nb *= (size_t) t->ne[i];
    }
    return true;
}
