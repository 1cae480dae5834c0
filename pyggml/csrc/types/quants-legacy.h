/* The legacy quantized types beside Q8_0/Q4_0, with ggml's block layouts (ggml-common.h), their row
 * conversions and the reference integer dot of every 32-element block type against its vec_dot_type
 * (pg_qdot_n; each type's named dots and the ISAs' kernels are in dot-legacy.h):
 *
 *   Q4_1    [d f16][m f16][16 x (lo | hi << 4)]              x = q*d + m, q in 0..15
 *   Q5_0    [d f16][qh 4 B][16 x (lo | hi << 4)]             x = (q - 16)*d, bit 4 of element e in bit e of qh
 *   Q5_1    [d f16][m f16][qh 4 B][16 x (lo | hi << 4)]      x = q*d + m, q in 0..31
 *   Q8_1    [d f16][s f16 = d*sum(q)][32 x int8]             x = q*d (vec_dot_type of Q4_1 and Q5_1)
 *   IQ4_NL  [d f16][16 x (lo | hi << 4)]                     x = d*kvalues[q] (a 16-entry int8 table)
 *   MXFP4   [e u8][16 x (lo | hi << 4)]                      x = 2^(e - 128) * kvalues_mxfp4[q] (the E2M1 values
 *           doubled, a 16-entry int8 table; e an E8M0 exponent: ggml_e8m0_to_fp32_half)
 *
 * Lo nibbles are elements 0..15 of a block, hi nibbles 16..31. Conversions are ggml's bit for bit:
 * to_float as ggml's dequantize_row_*, from_float as ggml's CPU quantisers without an importance
 * matrix (the *_ref ones for Q4_1/Q5_0/Q5_1/IQ4_NL; Q8_1 as the x86 CPU quantiser:
 * Q8_0's rounding plus s). Those run unfused in ggml (multiply, then add): PG_NO_CONTRACT keeps GCC
 * from fusing them into an FMA (convert.h), which would round once where ggml rounds twice.
 *
 * Dot products: every block type decodes a block into 32 int8 lanes (pg_q8x32), multiplies them with
 * the activation block's int8 in integers (arch/'s pg_qacc_add: AVX-512 VNNI dpbusd, AVX2
 * maddubs+madd, NEON vdotq or widening multiplies, RVV widening multiply-adds in arch/riscv/dot-rvv.c
 * when the CPU has V; the scalar forms below elsewhere) and adds d_x*d_y*sum per block in f32 (plus
 * m_x*s_y for Q4_1/Q5_1), as ggml does. Each type has (dot-legacy.h) the multi-column kernel pg_vec_dot_<type>_n
 * (nc <= 4 activation rows, `by` bytes apart: the weight block is decoded once for all of them), one
 * always-inline pg_qdot_n over the type's id, and the one-column pg_type_dot_<type> on top of it; on
 * x86 also the register-tiled pg_vec_dot_<type>_tile (arch/x86/qgemm-x86.h: several weight rows at once,
 * the same sums).
 */
#pragma once
#include "types/convert.h"

#define PG_QK 32                   /* elements per block of every type here (and of IQ4_XS's sub-blocks) */

typedef struct pg_block_q4_1 { pg_fp16_t d, m; uint8_t qs[PG_QK / 2]; } pg_block_q4_1;
typedef struct pg_block_q5_0 { pg_fp16_t d; uint8_t qh[4]; uint8_t qs[PG_QK / 2]; } pg_block_q5_0;
typedef struct pg_block_q5_1 { pg_fp16_t d, m; uint8_t qh[4]; uint8_t qs[PG_QK / 2]; } pg_block_q5_1;
typedef struct pg_block_q8_1 { pg_fp16_t d, s; int8_t qs[PG_QK]; } pg_block_q8_1;
typedef struct pg_block_iq4_nl { pg_fp16_t d; uint8_t qs[PG_QK / 2]; } pg_block_iq4_nl;
typedef struct pg_block_mxfp4 { uint8_t e; uint8_t qs[PG_QK / 2]; } pg_block_mxfp4;
_Static_assert(sizeof(pg_block_q4_1) == 20, "q4_1 block");
_Static_assert(sizeof(pg_block_q5_0) == 22, "q5_0 block");
_Static_assert(sizeof(pg_block_q5_1) == 24, "q5_1 block");
_Static_assert(sizeof(pg_block_q8_1) == 36, "q8_1 block");
_Static_assert(sizeof(pg_block_iq4_nl) == 18, "iq4_nl block");
_Static_assert(sizeof(pg_block_mxfp4) == 17, "mxfp4 block");

/* the IQ4_NL/IQ4_XS code points (ggml's kvalues_iq4nl) */
static const int8_t pg_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
/* the MXFP4 code points: E2M1's values doubled (ggml's kvalues_mxfp4); codes 0 and 8 are both 0 */
static const int8_t pg_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* 2^(e - 128): half the E8M0 scale 2^(e - 127), because the code points are doubled; e < 2 are the
 * subnormals 2^-128 and 2^-127 (ggml_e8m0_to_fp32_half; e = 255 is 2^127, not NaN, as there) */
static inline float pg_e8m0_to_fp32_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t) (e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

/* ---- block decoding: 32 int8 lanes in element order (arch/'s pg_q8x32 and pg_qacc; these scalar
 * forms where the ISA has none: the scalar build, RVV) ---- */

#if !PG_HAVE_QDOT
typedef struct { int8_t v[PG_QK]; } pg_q8x32;
static inline pg_q8x32 pg_q8x32_load(const int8_t * q) { pg_q8x32 r; memcpy(r.v, q, PG_QK); return r; }
static inline void pg_q8x32_store(pg_q8x32 q, int8_t * y) { memcpy(y, q.v, PG_QK); }
static inline pg_q8x32 pg_q8x32_nibbles(const uint8_t * qs) {
    pg_q8x32 r;
    for (int j = 0; j < PG_QK / 2; j++) {
        r.v[j] = (int8_t) (qs[j] & 0x0f);
        r.v[j + PG_QK / 2] = (int8_t) (qs[j] >> 4);
    }
    return r;
}
static inline pg_q8x32 pg_q8x32_bit4(const uint8_t * qh) {
    uint32_t h;
    memcpy(&h, qh, 4);
    pg_q8x32 r;
    for (int j = 0; j < PG_QK; j++) r.v[j] = (int8_t) (((h >> j) & 1) << 4);
    return r;
}
static inline pg_q8x32 pg_q8x32_or(pg_q8x32 a, pg_q8x32 b) {
    for (int j = 0; j < PG_QK; j++) a.v[j] |= b.v[j];
    return a;
}
static inline pg_q8x32 pg_q8x32_sub(pg_q8x32 a, int8_t c) {
    for (int j = 0; j < PG_QK; j++) a.v[j] = (int8_t) (a.v[j] - c);
    return a;
}
static inline pg_q8x32 pg_q8x32_lut16(pg_q8x32 a, const int8_t * table) {
    for (int j = 0; j < PG_QK; j++) a.v[j] = table[a.v[j]];
    return a;
}

typedef float pg_qacc;
static inline pg_qacc pg_qacc_zero(void) { return 0.0f; }
static inline pg_qacc pg_qacc_add(pg_qacc acc, pg_q8x32 x, const int8_t * y, int uns, float scale) {
    (void) uns;
    int32_t s = 0;
    for (int j = 0; j < PG_QK; j++) s += (int32_t) x.v[j] * y[j];
    return acc + (float) s * scale;
}
static inline pg_qacc pg_qacc_merge(pg_qacc a, pg_qacc b) { return a + b; }
static inline float pg_qacc_sum(pg_qacc acc) { return acc; }
#endif

/* the weight blocks as integers: what each type's x = q*d (+ m) multiplies */
static inline pg_q8x32 pg_decode_q8_0(const pg_block_q8_0 * b) { return pg_q8x32_load(b->qs); }
static inline pg_q8x32 pg_decode_q4_0(const pg_block_q4_0 * b) { return pg_q8x32_sub(pg_q8x32_nibbles(b->qs), 8); }
static inline pg_q8x32 pg_decode_q4_1(const pg_block_q4_1 * b) { return pg_q8x32_nibbles(b->qs); }
static inline pg_q8x32 pg_decode_q5_0(const pg_block_q5_0 * b) {
    return pg_q8x32_sub(pg_q8x32_or(pg_q8x32_nibbles(b->qs), pg_q8x32_bit4(b->qh)), 16);
}
static inline pg_q8x32 pg_decode_q5_1(const pg_block_q5_1 * b) {
    return pg_q8x32_or(pg_q8x32_nibbles(b->qs), pg_q8x32_bit4(b->qh));
}
static inline pg_q8x32 pg_decode_iq4_nl(const pg_block_iq4_nl * b) { return pg_q8x32_lut16(pg_q8x32_nibbles(b->qs), pg_iq4nl_values); }
static inline pg_q8x32 pg_decode_mxfp4(const pg_block_mxfp4 * b) { return pg_q8x32_lut16(pg_q8x32_nibbles(b->qs), pg_mxfp4_values); }

/* ---- a block type's description, t its pyggml.h type id: a compile-time constant wherever it is
 * passed, so the switches fold away where a kernel is inlined ---- */

/* the bytes of a block of type t */
PG_ALWAYS_INLINE int pg_qblock_size(const int t) {
    switch (t) {
    case PG_TYPE_Q4_0: return sizeof(pg_block_q4_0);
    case PG_TYPE_Q4_1: return sizeof(pg_block_q4_1);
    case PG_TYPE_Q5_0: return sizeof(pg_block_q5_0);
    case PG_TYPE_Q5_1: return sizeof(pg_block_q5_1);
    case PG_TYPE_IQ4_NL: return sizeof(pg_block_iq4_nl);
    case PG_TYPE_MXFP4: return sizeof(pg_block_mxfp4);
    default: return sizeof(pg_block_q8_0);
    }
}
/* whether t has a minimum (x = q*d + m: Q4_1, Q5_1), its blocks starting with the fp16 pair {d, m};
 * their vec_dot_type Q8_1 starts with {d, s}, the others' Q8_0 with d */
PG_ALWAYS_INLINE int pg_qblock_min(const int t) { return t == PG_TYPE_Q4_1 || t == PG_TYPE_Q5_1; }
/* block b of type t as integers (pg_decode_*) */
PG_ALWAYS_INLINE pg_q8x32 pg_qblock_decode(const int t, const void * b) {
    switch (t) {
    case PG_TYPE_Q4_0: return pg_decode_q4_0((const pg_block_q4_0 *) b);
    case PG_TYPE_Q4_1: return pg_decode_q4_1((const pg_block_q4_1 *) b);
    case PG_TYPE_Q5_0: return pg_decode_q5_0((const pg_block_q5_0 *) b);
    case PG_TYPE_Q5_1: return pg_decode_q5_1((const pg_block_q5_1 *) b);
    case PG_TYPE_IQ4_NL: return pg_decode_iq4_nl((const pg_block_iq4_nl *) b);
    case PG_TYPE_MXFP4: return pg_decode_mxfp4((const pg_block_mxfp4 *) b);
    default: return pg_decode_q8_0((const pg_block_q8_0 *) b);
    }
}
/* the scale of block b of type t: its fp16 d, or MXFP4's E8M0 exponent (ggml_e8m0_to_fp32_half) */
PG_ALWAYS_INLINE float pg_qblock_d(const int t, const void * b) {
    if (t == PG_TYPE_MXFP4) return pg_e8m0_to_fp32_half(((const pg_block_mxfp4 *) b)->e);
    return pg_fp16_to_fp32(*(const pg_fp16_t *) b);
}

/* ---- dot products ---- */

/* block ib of x (type t) into the accumulators acc of the nc columns y_c = vy + c*by (Q8_1 rows
 * when t has a minimum, whose m*s terms go to summ, else Q8_0) */
PG_ALWAYS_INLINE void pg_qdot_step(const int t, const char * x, int64_t ib, const void * vy, size_t by, const int nc,
                                   pg_qacc * acc, float * summ) {
    const int min = pg_qblock_min(t);
    const char * xb = x + ib * pg_qblock_size(t);
    const pg_q8x32 q = pg_qblock_decode(t, xb);
    const float dx = pg_qblock_d(t, xb);
    for (int c = 0; c < nc; c++) {
        const char * yc = (const char *) vy + (size_t) c * by;
        if (min) {
            const pg_block_q8_1 * y = (const pg_block_q8_1 *) yc + ib;
            acc[c] = pg_qacc_add(acc[c], q, y->qs, 1, dx * pg_fp16_to_fp32(y->d));
            summ[c] += pg_fp16_to_fp32(((const pg_fp16_t *) xb)[1]) * pg_fp16_to_fp32(y->s);
        } else {
            const pg_block_q8_0 * y = (const pg_block_q8_0 *) yc + ib;
            acc[c] = pg_qacc_add(acc[c], q, y->qs, 0, dx * pg_fp16_to_fp32(y->d));
        }
    }
}
/* s[c] = x . y_c for c < nc (a constant, <= 4), x a row of type t, y_c = vy + c*by. Even and odd
 * blocks go to separate accumulators (two FMA chains) */
PG_ALWAYS_INLINE void pg_qdot_body(const int t, int64_t n, const void * vx, const void * vy, size_t by, const int nc,
                                   float * s) {
    const char * x = (const char *) vx;
    const int64_t nb = n / PG_QK;
    pg_qacc acc0[4], acc1[4];
    float summ[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int c = 0; c < nc; c++) acc0[c] = acc1[c] = pg_qacc_zero();
    int64_t ib = 0;
    for (; ib + 1 < nb; ib += 2) {
        pg_qdot_step(t, x, ib, vy, by, nc, acc0, summ);
        pg_qdot_step(t, x, ib + 1, vy, by, nc, acc1, summ);
    }
    if (ib < nb) pg_qdot_step(t, x, ib, vy, by, nc, acc0, summ);
    for (int c = 0; c < nc; c++) s[c] = pg_qacc_sum(pg_qacc_merge(acc0[c], acc1[c])) + summ[c];
}
/* vec_dot_n of type t (nc <= 4): the body for each column count */
PG_ALWAYS_INLINE void pg_qdot_n(const int t, int64_t n, const void * x, const void * y, size_t by, int nc, float * s) {
    switch (nc) {
    case 1: pg_qdot_body(t, n, x, y, by, 1, s); break;
    case 2: pg_qdot_body(t, n, x, y, by, 2, s); break;
    case 3: pg_qdot_body(t, n, x, y, by, 3, s); break;
    default: pg_qdot_body(t, n, x, y, by, 4, s); break;
    }
}

/* ---- to_float: the decoded integers times d (plus m) ---- */

/* a row of n elements of type t (Q4_1, Q5_0, Q5_1, IQ4_NL or MXFP4) to f32: q*d (d the block's
 * pg_qblock_d), then + m for the types with a minimum (no + 0.0f for the others: it would turn
 * ggml's -0.0 into +0.0) */
PG_ALWAYS_INLINE PG_NO_CONTRACT void pg_qblock_row_to_f32(const int t, const void * vx, float * y, int64_t n) {
    const char * x = (const char *) vx;
    int8_t q[PG_QK];
    for (int64_t ib = 0; ib < n / PG_QK; ib++) {
        const char * xb = x + ib * pg_qblock_size(t);
        pg_q8x32_store(pg_qblock_decode(t, xb), q);
        const float d = pg_qblock_d(t, xb);
        for (int j = 0; j < PG_QK; j++) {
            const float v = (float) q[j] * d;
            y[ib * PG_QK + j] = pg_qblock_min(t) ? v + pg_fp16_to_fp32(((const pg_fp16_t *) xb)[1]) : v;
        }
    }
}
static PG_NO_CONTRACT void pg_row_q4_1_to_f32(const void * x, float * y, int64_t n) {
    pg_qblock_row_to_f32(PG_TYPE_Q4_1, x, y, n);
}
static PG_NO_CONTRACT void pg_row_q5_0_to_f32(const void * x, float * y, int64_t n) {
    pg_qblock_row_to_f32(PG_TYPE_Q5_0, x, y, n);
}
static PG_NO_CONTRACT void pg_row_q5_1_to_f32(const void * x, float * y, int64_t n) {
    pg_qblock_row_to_f32(PG_TYPE_Q5_1, x, y, n);
}
static PG_NO_CONTRACT void pg_row_iq4_nl_to_f32(const void * x, float * y, int64_t n) {
    pg_qblock_row_to_f32(PG_TYPE_IQ4_NL, x, y, n);
}

/* ggml's dequantize_row_mxfp4: the code point (an int) times the E8M0 scale */
static PG_NO_CONTRACT void pg_row_mxfp4_to_f32(const void * x, float * y, int64_t n) {
    pg_qblock_row_to_f32(PG_TYPE_MXFP4, x, y, n);
}

static inline void pg_row_q8_1_to_f32(const void * vx, float * y, int64_t n) {
    const pg_block_q8_1 * x = (const pg_block_q8_1 *) vx;
    for (int64_t ib = 0; ib < n / PG_QK; ib++) {
        const float d = pg_fp16_to_fp32(x[ib].d);
        for (int j = 0; j < PG_QK; j++) y[ib * PG_QK + j] = x[ib].qs[j] * d;
    }
}

/* ---- from_float ---- */

/* the 4/5-bit codes of one block: lo nibbles in qs, bit 4 of element e in bit e of *qh (5-bit types) */
static inline void pg_pack_codes(const uint8_t * code, uint8_t * qs, uint32_t * qh) {
    uint32_t h = 0;
    for (int j = 0; j < PG_QK / 2; j++) {
        qs[j] = (uint8_t) ((code[j] & 0x0f) | ((code[j + PG_QK / 2] & 0x0f) << 4));
        h |= (uint32_t) ((code[j] >> 4) & 1) << j;
        h |= (uint32_t) ((code[j + PG_QK / 2] >> 4) & 1) << (j + PG_QK / 2);
    }
    if (qh) *qh = h;
}

/* Q4_1/Q5_1: d = (max - min)/nmax, q = (x - min)/d + 0.5 truncated (Q4_1 capped at 15) */
static PG_NO_CONTRACT void pg_quantize_min_block(const float * x, int nmax, float * d, float * m, uint8_t * code) {
    float min = 3.402823466e+38f, max = -3.402823466e+38f;
    for (int j = 0; j < PG_QK; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    *d = (max - min) / (float) nmax;
    *m = min;
    const float id = *d != 0.0f ? 1.0f / *d : 0.0f;
    for (int j = 0; j < PG_QK; j++) {
        const float v = (x[j] - min) * id;
        const float r = v + 0.5f;
        code[j] = nmax == 15 ? (uint8_t) PG_MIN(15, (int8_t) r) : (uint8_t) r;
    }
}

static inline void pg_row_q4_1_from_f32(const float * x, void * vy, int64_t n) {
    pg_block_q4_1 * y = (pg_block_q4_1 *) vy;
    for (int64_t ib = 0; ib < n / PG_QK; ib++) {
        float d, m;
        uint8_t code[PG_QK];
        pg_quantize_min_block(x + ib * PG_QK, 15, &d, &m, code);
        y[ib].d = pg_fp32_to_fp16(d);
        y[ib].m = pg_fp32_to_fp16(m);
        pg_pack_codes(code, y[ib].qs, NULL);
    }
}

static inline void pg_row_q5_1_from_f32(const float * x, void * vy, int64_t n) {
    pg_block_q5_1 * y = (pg_block_q5_1 *) vy;
    for (int64_t ib = 0; ib < n / PG_QK; ib++) {
        float d, m;
        uint8_t code[PG_QK];
        uint32_t qh;
        pg_quantize_min_block(x + ib * PG_QK, 31, &d, &m, code);
        y[ib].d = pg_fp32_to_fp16(d);
        y[ib].m = pg_fp32_to_fp16(m);
        pg_pack_codes(code, y[ib].qs, &qh);
        memcpy(y[ib].qh, &qh, 4);
    }
}

/* Q5_0: Q4_0's quantiser with 32 levels (convert.h) */
static inline void pg_row_q5_0_from_f32(const float * x, void * vy, int64_t n) {
    pg_block_q5_0 * y = (pg_block_q5_0 *) vy;
    for (int64_t ib = 0; ib < n / PG_QK; ib++) {
        uint8_t code[PG_QK];
        uint32_t qh;
        y[ib].d = pg_fp32_to_fp16(pg_quantize_absmax_block(x + ib * PG_QK, 16, code));
        pg_pack_codes(code, y[ib].qs, &qh);
        memcpy(y[ib].qh, &qh, 4);
    }
}

/* Q8_1: Q8_0's CPU rounding, then s = d * sum(q) with d = amax/127 before its rounding to fp16 */
static inline void pg_row_q8_1_from_f32(const float * x, void * vy, int64_t n) {
    pg_block_q8_1 * y = (pg_block_q8_1 *) vy;
    for (int64_t ib = 0; ib < n / PG_QK; ib++) {
        const float * xb = x + ib * PG_QK;
        pg_block_q8_0 b;
        pg_vec_quantize_q8_0(PG_QK, xb, &b);
        float amax = 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < PG_QK; j++) {
            amax = PG_MAX(amax, fabsf(xb[j]));
            sum += b.qs[j];
        }
        y[ib].d = b.d;
        y[ib].s = pg_fp32_to_fp16(amax / 127.0f * (float) sum);
        memcpy(y[ib].qs, b.qs, PG_QK);
    }
}

/* IQ4_NL/IQ4_XS: the index of the code point nearest to v (the upper one unless the lower is
 * strictly nearer), ggml's best_index_int8 */
static inline int pg_iq4nl_index(float v) {
    const int8_t * t = pg_iq4nl_values;
    if (v <= t[0]) return 0;
    if (v >= t[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v < t[mid]) hi = mid; else lo = mid;
    }
    return v - t[hi - 1] < t[hi] - v ? hi - 1 : hi;
}

/* weighted (w = x^2) least-squares scale of the codes for xb at inverse scale id: sum w q x, sum w q q */
static PG_NO_CONTRACT void pg_iq4nl_fit(const float * xb, float id, uint8_t * L, float * sqx, float * sq2) {
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int j = 0; j < PG_QK; j++) {
        const int l = pg_iq4nl_index(id * xb[j]);
        if (L) L[j] = (uint8_t) l;
        const float q = pg_iq4nl_values[l], w = xb[j] * xb[j];
        const float wq = w * q;
        const float qx = wq * xb[j], q2 = wq * q;      /* own statements: clang fuses within one */
        sumqx += qx;
        sumq2 += q2;
    }
    *sqx = sumqx;
    *sq2 = sumq2;
}

/* one block of 32: the scale of ggml's quantize_row_iq4_nl_impl without weights; ntry < 0 (IQ4_NL):
 * only the first fit, else also the 2*ntry+1 trial scales around it. *max: the element of largest
 * |x|; returns 0 (and leaves L) for a block below ggml's GROUP_MAX_EPS */
static PG_NO_CONTRACT float pg_iq4nl_block_scale(const float * xb, int ntry, uint8_t * L) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < PG_QK; j++) {
        if (fabsf(xb[j]) > amax) { amax = fabsf(xb[j]); max = xb[j]; }
    }
    if (amax < 1e-15f) return 0.0f;
    const float t0 = pg_iq4nl_values[0];
    const float d0 = ntry > 0 ? -max / t0 : max / t0;
    float sumqx, sumq2;
    pg_iq4nl_fit(xb, 1.0f / d0, L, &sumqx, &sumq2);
    float d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
    float best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; itry++) {
        pg_iq4nl_fit(xb, ((float) itry + t0) / max, NULL, &sumqx, &sumq2);
        if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

static inline void pg_row_iq4_nl_from_f32(const float * x, void * vy, int64_t n) {
    pg_block_iq4_nl * y = (pg_block_iq4_nl *) vy;
    for (int64_t ib = 0; ib < n / PG_QK; ib++) {
        /* a block below GROUP_MAX_EPS keeps d = 0; ggml leaves its codes to whatever its buffer held,
         * here they are the code point 1 (index 8): every element dequantises to 0 either way */
        uint8_t L[PG_QK];
        memset(L, 8, sizeof(L));
        y[ib].d = pg_fp32_to_fp16(pg_iq4nl_block_scale(x + ib * PG_QK, -1, L));
        pg_pack_codes(L, y[ib].qs, NULL);
    }
}

/* MXFP4, ggml's quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2 + 127 (amax's exponent less two: 6,
 * the largest E2M1 value, times 2^(e - 127) reaches amax), 0 for a zero block; each element the code
 * point nearest at that scale, the first of equals (so 0 gets code 0, never 8). Differs from ggml
 * where its conversion to uint8 is undefined: e is clamped to [0, 255] (amax below 2^-125, or
 * infinite: ggml's e then depends on the compiler). NaN elements get code 0, as in ggml. */
static PG_NO_CONTRACT void pg_row_mxfp4_from_f32(const float * x, void * vy, int64_t n) {
    pg_block_mxfp4 * y = (pg_block_mxfp4 *) vy;
    for (int64_t ib = 0; ib < n / PG_QK; ib++) {
        const float * xb = x + ib * PG_QK;
        float amax = 0.0f;
        for (int j = 0; j < PG_QK; j++) if (amax < fabsf(xb[j])) amax = fabsf(xb[j]);
        const float le = amax > 0.0f ? floorf(log2f(amax)) - 2.0f + 127.0f : 0.0f;
        const uint8_t e = le <= 0.0f ? 0 : le >= 255.0f ? 255 : (uint8_t) le;
        const float d = pg_e8m0_to_fp32_half(e);
        uint8_t code[PG_QK];
        for (int j = 0; j < PG_QK; j++) {
            int best = 0;
            float best_err = fabsf((float) pg_mxfp4_values[0] * d - xb[j]);
            for (int i = 1; i < 16; i++) {
                const float err = fabsf((float) pg_mxfp4_values[i] * d - xb[j]);
                if (err < best_err) {
                    best = i;
                    best_err = err;
                }
            }
            code[j] = (uint8_t) best;
        }
        y[ib].e = e;
        pg_pack_codes(code, y[ib].qs, NULL);
    }
}
