/* K-quants: ggml's types of 256-element super-blocks (QK_K), and IQ4_XS, 256 elements of IQ4_NL's code
 * points dotted against Q8_K as they are: their blocks, row conversions and the scalar super-block
 * loops the dots share. The dot products and their per-ISA kernels are in dot-k.h.
 *
 *   type   bytes  per super-block of 256                          element e = d*scale*q - dmin*min
 *   Q2_K    84    16 x (4-bit scale | 4-bit min << 4), q 2 bits    groups of 16
 *   Q3_K   110    16 6-bit signed scales (-32 offset), q 3 bits    groups of 16, q in -4..3
 *                 (2 low bits in qs, the high one in hmask)
 *   Q4_K   144    8 6-bit scales + 8 6-bit mins (12 bytes), q 4    groups of 32
 *   Q5_K   176    as Q4_K, q 5 bits (high bit in qh)                groups of 32
 *   Q6_K   210    16 int8 scales, q 6 bits - 32 (ql 4 + qh 2)      groups of 16
 *   Q8_K   292    f32 d, 256 int8 q, 16 int16 sums of 16 q (bsums)  activations only
 *   IQ4_XS 136    [d f16][scales_h u16][scales_l 4 B][128 B nibbles]: eight blocks of 32 with 6-bit
 *                 scales ls (low 4 bits in scales_l, high 2 in scales_h), e = d*(ls - 32)*kvalues[q]
 *                 (IQ4_NL's code points, quants-legacy.h); from_float is ggml's quantize_iq4_xs
 *                 without an importance matrix
 *
 * Bit positions (ggml's): in Q2_K/Q3_K/Q6_K the block is two halves of 128; element 128h + 32j + l
 * has its 2-bit field at bits 2j of byte 32h + l (qs of Q2_K/Q3_K; the two low bits of Q6_K's 4-bit
 * pair are ql), Q3_K's high bit in hmask[l] bit 4h + j. Q4_K/Q5_K: element 64c + l (l < 32) is the
 * low nibble of qs[32c + l], 64c + 32 + l its high nibble; Q5_K's fifth bit is qh[l] bit 2c (+1 for
 * the high nibble).
 *
 * to_float is bit for bit ggml's dequantize_row_*, from_float its quantize_row_*_ref (the CPU path
 * without an importance matrix, llama-quantize's too): the same float operations in the same order,
 * rounding with nearest_int's magic-number trick (ties to even), and no fused multiply-add where ggml
 * (compiled for the baseline ISA) has none - hence PG_KQ_EXACT on those functions.
 */
#pragma once
#include "vec/vec.h"
#include "types/quants-legacy.h"      /* PG_QK, the IQ4_NL code points and scale fit IQ4_XS shares */

#define PG_QK_K 256

typedef struct pg_block_q2_K { uint8_t scales[16]; uint8_t qs[64]; pg_fp16_t d, dmin; } pg_block_q2_K;
typedef struct pg_block_q3_K { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; pg_fp16_t d; } pg_block_q3_K;
typedef struct pg_block_q4_K { pg_fp16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; } pg_block_q4_K;
typedef struct pg_block_q5_K { pg_fp16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } pg_block_q5_K;
typedef struct pg_block_q6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; pg_fp16_t d; } pg_block_q6_K;
typedef struct pg_block_q8_K { float d; int8_t qs[PG_QK_K]; int16_t bsums[PG_QK_K / 16]; } pg_block_q8_K;
#define PG_QK_IQ4_XS 256
typedef struct pg_block_iq4_xs {
    pg_fp16_t d;
    uint16_t scales_h;
    uint8_t scales_l[PG_QK_IQ4_XS / 64];
    uint8_t qs[PG_QK_IQ4_XS / 2];
} pg_block_iq4_xs;
_Static_assert(sizeof(pg_block_q2_K) == 84, "q2_K block");
_Static_assert(sizeof(pg_block_q3_K) == 110, "q3_K block");
_Static_assert(sizeof(pg_block_q4_K) == 144, "q4_K block");
_Static_assert(sizeof(pg_block_q5_K) == 176, "q5_K block");
_Static_assert(sizeof(pg_block_q6_K) == 210, "q6_K block");
_Static_assert(sizeof(pg_block_q8_K) == 292, "q8_K block");
_Static_assert(sizeof(pg_block_iq4_xs) == 136, "iq4_xs block");

/* ggml's float semantics for the conversions: no contraction of a*b + c into an fma */
#if defined(__clang__)
#  define PG_KQ_EXACT
#  pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#  define PG_KQ_EXACT __attribute__((optimize("fp-contract=off")))
#else
#  define PG_KQ_EXACT
#endif

#define PG_KQ_GROUP_MAX_EPS 1e-15f

/* round to nearest, ties to even, for |f| < 2^22: adding 1.5 * 2^23 leaves the integer in the low
 * mantissa bits */
static inline PG_KQ_EXACT int pg_kq_nearest_int(float f) {
    const float v = f + 12582912.0f;
    int32_t i;
    memcpy(&i, &v, sizeof(i));
    return (i & 0x007fffff) - 0x00400000;
}

/* scale and min j (< 8) of a Q4_K/Q5_K block: 6 bits each; j < 4 in the low 6 bits of bytes j and
 * j + 4, j >= 4 split into a nibble of byte j + 4 and the top 2 bits of bytes j - 4 and j */
static inline void pg_kq_scale_min(const uint8_t * q, int j, uint8_t * d, uint8_t * m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t) ((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t) ((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static inline void pg_kq_put_scale_min(uint8_t * q, int j, uint8_t ls, uint8_t lm) {
    if (j < 4) {
        q[j] = ls;
        q[j + 4] = lm;
    } else {
        q[j + 4] = (uint8_t) ((ls & 0xf) | ((lm & 0xf) << 4));
        q[j - 4] |= (uint8_t) ((ls >> 4) << 6);
        q[j] |= (uint8_t) ((lm >> 4) << 6);
    }
}

/* scale j (< 16) of a Q3_K block, -32..31: low nibble in byte j % 8, high 2 bits in byte 8 + j % 4 */
static inline int pg_kq_q3_scale(const uint8_t * s, int j) {
    const int lo = j < 8 ? s[j] & 0xf : s[j - 8] >> 4;
    return (lo | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

/* IQ4_XS: the 6-bit block scale of block ib (< 8) of a super-block, minus 32 */
static inline int pg_kq_iq4_xs_scale(const pg_block_iq4_xs * x, int ib) {
    return (((x->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((x->scales_h >> (2 * ib)) & 3) << 4)) - 32;
}

/* ---- to_float ---- */

static inline PG_KQ_EXACT void pg_row_q2_K_to_f32(const void * vx, float * y, int64_t n) {
    const pg_block_q2_K * x = (const pg_block_q2_K *) vx;
    for (int64_t ib = 0; ib < n / PG_QK_K; ib++, y += PG_QK_K) {
        const float d = pg_fp16_to_fp32(x[ib].d), dmin = pg_fp16_to_fp32(x[ib].dmin);
        /* element 128h + 32j + 16k + l: bits 2j of qs[32h + 16k + l], group 8h + 2j + k */
        for (int h = 0; h < 2; h++) {
            for (int j = 0; j < 4; j++) {
                for (int k = 0; k < 2; k++) {
                    const uint8_t sc = x[ib].scales[8 * h + 2 * j + k];
                    const float dl = d * (sc & 0xf), ml = dmin * (sc >> 4);
                    const uint8_t * q = x[ib].qs + 32 * h + 16 * k;
                    float * o = y + 128 * h + 32 * j + 16 * k;
                    for (int l = 0; l < 16; l++) o[l] = dl * ((q[l] >> (2 * j)) & 3) - ml;
                }
            }
        }
    }
}

static inline PG_KQ_EXACT void pg_row_q3_K_to_f32(const void * vx, float * y, int64_t n) {
    const pg_block_q3_K * x = (const pg_block_q3_K *) vx;
    for (int64_t ib = 0; ib < n / PG_QK_K; ib++, y += PG_QK_K) {
        const float d = pg_fp16_to_fp32(x[ib].d);
        /* as Q2_K, the high bit of element 128h + 32j + 16k + l in hmask[16k + l] bit 4h + j */
        for (int h = 0; h < 2; h++) {
            for (int j = 0; j < 4; j++) {
                for (int k = 0; k < 2; k++) {
                    const float dl = d * pg_kq_q3_scale(x[ib].scales, 8 * h + 2 * j + k);
                    const uint8_t * q = x[ib].qs + 32 * h + 16 * k;
                    const uint8_t * hm = x[ib].hmask + 16 * k;
                    float * o = y + 128 * h + 32 * j + 16 * k;
                    for (int l = 0; l < 16; l++) {
                        o[l] = dl * (((q[l] >> (2 * j)) & 3) - (((hm[l] >> (4 * h + j)) & 1) ? 0 : 4));
                    }
                }
            }
        }
    }
}

static inline PG_KQ_EXACT void pg_row_q4_K_to_f32(const void * vx, float * y, int64_t n) {
    const pg_block_q4_K * x = (const pg_block_q4_K *) vx;
    for (int64_t ib = 0; ib < n / PG_QK_K; ib++, y += PG_QK_K) {
        const float d = pg_fp16_to_fp32(x[ib].d), dmin = pg_fp16_to_fp32(x[ib].dmin);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            pg_kq_scale_min(x[ib].scales, j, &sc, &m);
            const float dl = d * sc, ml = dmin * m;
            const uint8_t * q = x[ib].qs + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            for (int l = 0; l < 32; l++) y[32 * j + l] = dl * ((q[l] >> shift) & 0xf) - ml;
        }
    }
}

static inline PG_KQ_EXACT void pg_row_q5_K_to_f32(const void * vx, float * y, int64_t n) {
    const pg_block_q5_K * x = (const pg_block_q5_K *) vx;
    for (int64_t ib = 0; ib < n / PG_QK_K; ib++, y += PG_QK_K) {
        const float d = pg_fp16_to_fp32(x[ib].d), dmin = pg_fp16_to_fp32(x[ib].dmin);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            pg_kq_scale_min(x[ib].scales, j, &sc, &m);
            const float dl = d * sc, ml = dmin * m;
            const uint8_t * q = x[ib].qs + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            for (int l = 0; l < 32; l++) {
                y[32 * j + l] = dl * (((q[l] >> shift) & 0xf) + (((x[ib].qh[l] >> j) & 1) << 4)) - ml;
            }
        }
    }
}

/* 6-bit value of element e of a Q6_K block, 0..63 */
static inline int pg_kq_q6(const pg_block_q6_K * b, int e) {
    const int h = e / 128, j = e % 128 / 32, l = e % 32;
    const int lo = (b->ql[64 * h + 32 * (j % 2) + l] >> (4 * (j / 2))) & 0xf;
    return lo | (((b->qh[32 * h + l] >> (2 * j)) & 3) << 4);
}

static inline PG_KQ_EXACT void pg_row_q6_K_to_f32(const void * vx, float * y, int64_t n) {
    const pg_block_q6_K * x = (const pg_block_q6_K *) vx;
    for (int64_t ib = 0; ib < n / PG_QK_K; ib++, y += PG_QK_K) {
        const float d = pg_fp16_to_fp32(x[ib].d);
        /* element 128h + 32j + 16k + l: nibble j / 2 of ql[64h + 32(j % 2) + 16k + l], bits 2j of
         * qh[32h + 16k + l], group 8h + 2j + k (pg_kq_q6) */
        for (int h = 0; h < 2; h++) {
            for (int j = 0; j < 4; j++) {
                for (int k = 0; k < 2; k++) {
                    const float ds = d * x[ib].scales[8 * h + 2 * j + k];
                    const uint8_t * ql = x[ib].ql + 64 * h + 32 * (j % 2) + 16 * k;
                    const uint8_t * qh = x[ib].qh + 32 * h + 16 * k;
                    float * o = y + 128 * h + 32 * j + 16 * k;
                    for (int l = 0; l < 16; l++) {
                        o[l] = ds * ((((ql[l] >> (4 * (j / 2))) & 0xf) | (((qh[l] >> (2 * j)) & 3) << 4)) - 32);
                    }
                }
            }
        }
    }
}

static inline PG_KQ_EXACT void pg_row_q8_K_to_f32(const void * vx, float * y, int64_t n) {
    const pg_block_q8_K * x = (const pg_block_q8_K *) vx;
    for (int64_t ib = 0; ib < n / PG_QK_K; ib++, y += PG_QK_K) {
        for (int e = 0; e < PG_QK_K; e++) y[e] = x[ib].d * x[ib].qs[e];
    }
}

static inline void pg_row_iq4_xs_to_f32(const void * vx, float * y, int64_t n) {
    const pg_block_iq4_xs * x = (const pg_block_iq4_xs *) vx;
    for (int64_t ibl = 0; ibl < n / PG_QK_IQ4_XS; ibl++) {
        const float d = pg_fp16_to_fp32(x[ibl].d);
        for (int ib = 0; ib < PG_QK_IQ4_XS / PG_QK; ib++) {
            const int ls = ((x[ibl].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x[ibl].scales_h >> 2 * ib) & 3) << 4);
            const float dl = d * (float) (ls - 32);
            const uint8_t * qs = x[ibl].qs + ib * (PG_QK / 2);
            float * yb = y + ibl * PG_QK_IQ4_XS + ib * PG_QK;
            for (int j = 0; j < PG_QK / 2; j++) {
                yb[j] = dl * pg_iq4nl_values[qs[j] & 0xf];
                yb[j + PG_QK / 2] = dl * pg_iq4nl_values[qs[j] >> 4];
            }
        }
    }
}

/* ---- from_float: ggml's reference quantisers ---- */

/* symmetric levels -nmax..nmax-1 for n values, weights x^2 (ggml's make_qx_quants, rmse_type 1,
 * no importance): the scale of 19 candidate inverse scales with the best weighted fit; L = q + nmax */
static inline PG_KQ_EXACT float pg_kq_make_qx(int n, int nmax, const float * x, int8_t * L) {
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < PG_KQ_GROUP_MAX_EPS) {
        memset(L, 0, (size_t) n);
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = PG_MAX(-nmax, PG_MIN(nmax - 1, pg_kq_nearest_int(iscale * x[i])));
        L[i] = (int8_t) (l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = PG_MAX(-nmax, PG_MIN(nmax - 1, pg_kq_nearest_int(iscale * x[i])));
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                L[i] = (int8_t) (nmax + PG_MAX(-nmax, PG_MIN(nmax - 1, pg_kq_nearest_int(iscale * x[i]))));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* levels -nmax..nmax-1 refined element by element (ggml's make_q3_quants with do_rmse) */
static inline PG_KQ_EXACT float pg_kq_make_q3(int n, int nmax, const float * x, int8_t * L) {
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < PG_KQ_GROUP_MAX_EPS) {
        memset(L, 0, (size_t) n);
        return 0.0f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = PG_MAX(-nmax, PG_MIN(nmax - 1, pg_kq_nearest_int(iscale * x[i])));
        L[i] = (int8_t) l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                const int nl = PG_MAX(-nmax, PG_MIN(nmax - 1, pg_kq_nearest_int(x[i] * sl2 / slx)));
                if (nl != L[i]) {
                    slx += w * x[i] * nl;
                    sl2 += w * nl * nl;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t) nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t) (L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* levels 0..nmax with an offset (ggml's make_qkx2_quants): x ~ scale*L - the_min, searching nstep+1
 * inverse scales (rmin + rdelta*is + nmax)/(max - min) for the least weighted squared (or absolute,
 * use_mad) error; returns the scale, *the_min >= 0 */
static inline PG_KQ_EXACT float pg_kq_make_qkx2(int n, int nmax, const float * x, const float * weights,
                                                uint8_t * L, float * the_min, uint8_t * Laux, float rmin,
                                                float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t) n);
        *the_min = -min;
        return 0.0f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = pg_kq_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t) PG_MAX(0, PG_MIN(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = PG_MAX(0, PG_MIN(nmax, pg_kq_nearest_int(iscale * (x[i] - min))));
            Laux[i] = (uint8_t) l;
            const float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0.0f;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t) n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* 2-bit fields of L (256 values < 4) into qs: element 128h + 32j + l at bits 2j of byte 32h + l */
static inline void pg_kq_pack2(const uint8_t * L, uint8_t * qs) {
    for (int h = 0; h < 2; h++) {
        for (int l = 0; l < 32; l++) {
            const uint8_t * g = L + 128 * h + l;
            qs[32 * h + l] = (uint8_t) (g[0] | (g[32] << 2) | (g[64] << 4) | (g[96] << 6));
        }
    }
}

static inline PG_KQ_EXACT void pg_row_q2_K_from_f32(const float * x, void * vy, int64_t n) {
    pg_block_q2_K * y = (pg_block_q2_K *) vy;
    uint8_t L[PG_QK_K], Laux[16];
    float weights[16], mins[16], scales[16];
    for (int64_t ib = 0; ib < n / PG_QK_K; ib++, x += PG_QK_K) {
        float max_scale = 0.0f, max_min = 0.0f;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = pg_kq_make_qkx2(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = 15.0f / max_scale;
            for (int j = 0; j < 16; j++) y[ib].scales[j] = (uint8_t) pg_kq_nearest_int(iscale * scales[j]);
            y[ib].d = pg_fp32_to_fp16(max_scale / 15.0f);
        } else {
            memset(y[ib].scales, 0, sizeof(y[ib].scales));
            y[ib].d = pg_fp32_to_fp16(0.0f);
        }
        if (max_min > 0) {
            const float iscale = 15.0f / max_min;
            for (int j = 0; j < 16; j++) y[ib].scales[j] |= (uint8_t) (pg_kq_nearest_int(iscale * mins[j]) << 4);
            y[ib].dmin = pg_fp32_to_fp16(max_min / 15.0f);
        } else {
            y[ib].dmin = pg_fp32_to_fp16(0.0f);
        }
        for (int j = 0; j < 16; j++) {
            const float d = pg_fp16_to_fp32(y[ib].d) * (y[ib].scales[j] & 0xf);
            if (!d) continue;
            const float dm = pg_fp16_to_fp32(y[ib].dmin) * (y[ib].scales[j] >> 4);
            for (int l = 0; l < 16; l++) {
                L[16 * j + l] = (uint8_t) PG_MAX(0, PG_MIN(3, pg_kq_nearest_int((x[16 * j + l] + dm) / d)));
            }
        }
        pg_kq_pack2(L, y[ib].qs);
    }
}

static inline PG_KQ_EXACT void pg_row_q3_K_from_f32(const float * x, void * vy, int64_t n) {
    pg_block_q3_K * y = (pg_block_q3_K *) vy;
    int8_t L[PG_QK_K];
    float scales[16];
    for (int64_t ib = 0; ib < n / PG_QK_K; ib++, x += PG_QK_K) {
        float max_scale = 0.0f, amax = 0.0f;
        for (int j = 0; j < 16; j++) {
            scales[j] = pg_kq_make_q3(16, 4, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) { amax = fabsf(scales[j]); max_scale = scales[j]; }
        }
        memset(y[ib].scales, 0, sizeof(y[ib].scales));
        if (max_scale) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < 16; j++) {
                const int l = PG_MAX(-32, PG_MIN(31, (int8_t) pg_kq_nearest_int(iscale * scales[j]))) + 32;
                if (j < 8) {
                    y[ib].scales[j] = (uint8_t) (l & 0xf);
                } else {
                    y[ib].scales[j - 8] |= (uint8_t) ((l & 0xf) << 4);
                }
                y[ib].scales[8 + j % 4] |= (uint8_t) ((l >> 4) << (2 * (j / 4)));
            }
            y[ib].d = pg_fp32_to_fp16(1 / iscale);
        } else {
            y[ib].d = pg_fp32_to_fp16(0.0f);
        }
        for (int j = 0; j < 16; j++) {
            const float d = pg_fp16_to_fp32(y[ib].d) * pg_kq_q3_scale(y[ib].scales, j);
            if (!d) continue;
            for (int l = 0; l < 16; l++) {
                L[16 * j + l] = (int8_t) (PG_MAX(-4, PG_MIN(3, pg_kq_nearest_int(x[16 * j + l] / d))) + 4);
            }
        }
        memset(y[ib].hmask, 0, sizeof(y[ib].hmask));
        uint8_t low[PG_QK_K];
        for (int e = 0; e < PG_QK_K; e++) {
            if (L[e] > 3) y[ib].hmask[e % 32] |= (uint8_t) (1 << (e / 32));
            low[e] = (uint8_t) (L[e] & 3);
        }
        pg_kq_pack2(low, y[ib].qs);
    }
}

/* Q4_K and Q5_K share the scale search; nmax 15 or 31 and the search grid differ */
static inline PG_KQ_EXACT void pg_kq_scales_mins_k4(const float * x, int nmax, float rmin, int nstep,
                                                    uint8_t * L, uint8_t * packed, pg_fp16_t * d, pg_fp16_t * dmin) {
    uint8_t Laux[32];
    float weights[32], mins[8], scales[8];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = pg_kq_make_qkx2(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < 8; j++) {
        const uint8_t ls = (uint8_t) pg_kq_nearest_int(inv_scale * scales[j]);
        const uint8_t lm = (uint8_t) pg_kq_nearest_int(inv_min * mins[j]);
        pg_kq_put_scale_min(packed, j, PG_MIN(63, ls), PG_MIN(63, lm));
    }
    *d = pg_fp32_to_fp16(max_scale / 63.0f);
    *dmin = pg_fp32_to_fp16(max_min / 63.0f);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        pg_kq_scale_min(packed, j, &sc, &m);
        const float dl = pg_fp16_to_fp32(*d) * sc;
        if (!dl) continue;
        const float dm = pg_fp16_to_fp32(*dmin) * m;
        for (int l = 0; l < 32; l++) {
            L[32 * j + l] = (uint8_t) PG_MAX(0, PG_MIN(nmax, pg_kq_nearest_int((x[32 * j + l] + dm) / dl)));
        }
    }
}

static inline PG_KQ_EXACT void pg_row_q4_K_from_f32(const float * x, void * vy, int64_t n) {
    pg_block_q4_K * y = (pg_block_q4_K *) vy;
    uint8_t L[PG_QK_K];
    for (int64_t ib = 0; ib < n / PG_QK_K; ib++, x += PG_QK_K) {
        memset(y[ib].scales, 0, sizeof(y[ib].scales));
        pg_kq_scales_mins_k4(x, 15, -1.0f, 20, L, y[ib].scales, &y[ib].d, &y[ib].dmin);
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) y[ib].qs[32 * c + l] = (uint8_t) (L[64 * c + l] | (L[64 * c + 32 + l] << 4));
        }
    }
}

static inline PG_KQ_EXACT void pg_row_q5_K_from_f32(const float * x, void * vy, int64_t n) {
    pg_block_q5_K * y = (pg_block_q5_K *) vy;
    uint8_t L[PG_QK_K];
    for (int64_t ib = 0; ib < n / PG_QK_K; ib++, x += PG_QK_K) {
        memset(y[ib].scales, 0, sizeof(y[ib].scales));
        pg_kq_scales_mins_k4(x, 31, -0.5f, 15, L, y[ib].scales, &y[ib].d, &y[ib].dmin);
        memset(y[ib].qh, 0, sizeof(y[ib].qh));
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                const uint8_t a = L[64 * c + l], b = L[64 * c + 32 + l];
                y[ib].qs[32 * c + l] = (uint8_t) ((a & 0xf) | ((b & 0xf) << 4));
                y[ib].qh[l] |= (uint8_t) (((a >> 4) << (2 * c)) | ((b >> 4) << (2 * c + 1)));
            }
        }
    }
}

static inline PG_KQ_EXACT void pg_row_q6_K_from_f32(const float * x, void * vy, int64_t n) {
    pg_block_q6_K * y = (pg_block_q6_K *) vy;
    int8_t L[PG_QK_K];
    float scales[16];
    for (int64_t ib = 0; ib < n / PG_QK_K; ib++, x += PG_QK_K) {
        float max_scale = 0.0f, max_abs = 0.0f;
        for (int j = 0; j < 16; j++) {
            scales[j] = pg_kq_make_qx(16, 32, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > max_abs) { max_abs = fabsf(scales[j]); max_scale = scales[j]; }
        }
        if (max_abs < PG_KQ_GROUP_MAX_EPS) {
            memset(&y[ib], 0, sizeof(y[ib]));
            continue;
        }
        const float iscale = -128.0f / max_scale;
        y[ib].d = pg_fp32_to_fp16(1 / iscale);
        for (int j = 0; j < 16; j++) y[ib].scales[j] = (int8_t) PG_MIN(127, pg_kq_nearest_int(iscale * scales[j]));
        for (int j = 0; j < 16; j++) {
            const float d = pg_fp16_to_fp32(y[ib].d) * y[ib].scales[j];
            if (!d) continue;
            for (int l = 0; l < 16; l++) {
                L[16 * j + l] = (int8_t) (PG_MAX(-32, PG_MIN(31, pg_kq_nearest_int(x[16 * j + l] / d))) + 32);
            }
        }
        for (int h = 0; h < 2; h++) {
            const int8_t * g = L + 128 * h;
            for (int l = 0; l < 32; l++) {
                y[ib].ql[64 * h + l] = (uint8_t) ((g[l] & 0xf) | ((g[l + 64] & 0xf) << 4));
                y[ib].ql[64 * h + 32 + l] = (uint8_t) ((g[l + 32] & 0xf) | ((g[l + 96] & 0xf) << 4));
                y[ib].qh[32 * h + l] = (uint8_t) ((g[l] >> 4) | ((g[l + 32] >> 4) << 2) | ((g[l + 64] >> 4) << 4)
                                                  | ((g[l + 96] >> 4) << 6));
            }
        }
    }
}

/* IQ4_XS: eight block scales fitted as IQ4_NL's (7 trials each), quantised to 6 bits against the
 * super-block scale d = -(the block scale of largest |.|)/32, then the codes refitted to d*l */
static PG_NO_CONTRACT void pg_row_iq4_xs_from_f32(const float * x, void * vy, int64_t n) {
    pg_block_iq4_xs * y = (pg_block_iq4_xs *) vy;
    enum { NB = PG_QK_IQ4_XS / PG_QK };
    for (int64_t ibl = 0; ibl < n / PG_QK_IQ4_XS; ibl++) {
        const float * xs = x + ibl * PG_QK_IQ4_XS;
        float scales[NB], amax_scale = 0.0f, max_scale = 0.0f;
        for (int ib = 0; ib < NB; ib++) {
            scales[ib] = pg_iq4nl_block_scale(xs + ib * PG_QK, 7, NULL);
            if (fabsf(scales[ib]) > amax_scale) { amax_scale = fabsf(scales[ib]); max_scale = scales[ib]; }
        }
        const float d = -max_scale / 32.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[ibl].d = pg_fp32_to_fp16(d);
        y[ibl].scales_h = 0;
        for (int ib = 0; ib < NB; ib++) {
            int l = (int) rintf(id * scales[ib]);
            l = PG_MAX(-32, PG_MIN(31, l));
            const float dl = d * (float) l;
            const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
            uint8_t L[PG_QK];
            for (int j = 0; j < PG_QK; j++) L[j] = (uint8_t) pg_iq4nl_index(idl * xs[ib * PG_QK + j]);
            pg_pack_codes(L, y[ibl].qs + ib * (PG_QK / 2), NULL);
            l += 32;
            if (ib % 2 == 0) y[ibl].scales_l[ib / 2] = (uint8_t) (l & 0xf);
            else y[ibl].scales_l[ib / 2] |= (uint8_t) ((l & 0xf) << 4);
            y[ibl].scales_h |= (uint16_t) ((l >> 4) << (2 * ib));
        }
    }
}

#if defined(__clang__)
#  pragma STDC FP_CONTRACT ON
#endif

/* ---- the scale unpacking and super-block loops the dots share (dot-k.h, arch/) ---- */

/* the 8 scales then the 8 mins of a Q4_K/Q5_K block (12 bytes), as bytes: the layout of
 * pg_kq_scale_min done on 32-bit words */
static inline void pg_kq_unpack_k4(const uint8_t * q, uint8_t * out) {
    const uint32_t lo6 = 0x3f3f3f3f, lo4 = 0x0f0f0f0f, lo2 = 0x03030303;
    uint32_t w[3];
    memcpy(w, q, sizeof(w));
    const uint32_t o[4] = {w[0] & lo6, (w[2] & lo4) | (((w[0] >> 6) & lo2) << 4),
                           w[1] & lo6, ((w[2] >> 4) & lo4) | (((w[1] >> 6) & lo2) << 4)};
    memcpy(out, o, sizeof(o));
}

/* the 16 scales of a Q3_K block (12 bytes) + 32, 0..63: pg_kq_q3_scale done on 32-bit words */
static inline void pg_kq_unpack_q3(const uint8_t * s, uint8_t * out) {
    const uint32_t lo4 = 0x0f0f0f0f, lo2 = 0x03030303;
    uint32_t w[3];
    memcpy(w, s, sizeof(w));
    const uint32_t o[4] = {(w[0] & lo4) | ((w[2] & lo2) << 4), (w[1] & lo4) | (((w[2] >> 2) & lo2) << 4),
                           ((w[0] >> 4) & lo4) | (((w[2] >> 4) & lo2) << 4),
                           ((w[1] >> 4) & lo4) | (((w[2] >> 6) & lo2) << 4)};
    memcpy(out, o, sizeof(o));
}

/* the super-block loops of Q2_K and Q3_K around a 2-bit integer dot of pg_kq_dot_2bit's
 * form (that one, or arch/riscv/quant-k-rvv.c's on RVV: the same f32 steps either way) */
typedef int32_t (*pg_kq_2bit_fn)(const uint8_t * qs, const uint8_t * hm, const int8_t * sc, const int8_t * y);

static inline __attribute__((always_inline)) float pg_kq_q2_K_blocks(int64_t nb, const pg_block_q2_K * x,
                                                                     const pg_block_q8_K * y, pg_kq_2bit_fn dot) {
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < nb; ib++) {
        int8_t sc[16];
        int32_t summ = 0;
        for (int g = 0; g < 16; g++) {
            sc[g] = (int8_t) (x[ib].scales[g] & 0xf);
            summ += (x[ib].scales[g] >> 4) * y[ib].bsums[g];
        }
        const int32_t sumi = dot(x[ib].qs, NULL, sc, y[ib].qs);
        sumf += pg_fp16_to_fp32(x[ib].d) * y[ib].d * (float) sumi - pg_fp16_to_fp32(x[ib].dmin) * y[ib].d * (float) summ;
    }
    return sumf;
}

/* dot sums (q + 4) * y: 4 * scale * bsums is taken back off */
static inline __attribute__((always_inline)) float pg_kq_q3_K_blocks(int64_t nb, const pg_block_q3_K * x,
                                                                     const pg_block_q8_K * y, pg_kq_2bit_fn dot) {
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < nb; ib++) {
        uint8_t raw[16];
        int8_t sc[16];
        pg_kq_unpack_q3(x[ib].scales, raw);
        int32_t off = 0;
        for (int g = 0; g < 16; g++) {
            sc[g] = (int8_t) (raw[g] - 32);
            off += sc[g] * y[ib].bsums[g];
        }
        const int32_t sumi = dot(x[ib].qs, x[ib].hmask, sc, y[ib].qs) - 4 * off;
        sumf += pg_fp16_to_fp32(x[ib].d) * y[ib].d * (float) sumi;
    }
    return sumf;
}
