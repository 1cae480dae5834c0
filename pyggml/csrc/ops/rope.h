/* ROPE (ggml_rope_ext, ggml_rope_multi, ggml_rope_set_offset): rotary position embedding.
 *
 *   src[0] a    [ne0, n_head, n_tok, ne3]  F32 or F16; dim 0 packed, dims 1-3 any stride
 *   src[1] pos  I32 [n_tok] or, for the multi modes (mode & 8), [4*n_tok] = blocks t | h | w | e
 *   src[2] ff   F32 frequency factors (optional), one per rotated pair
 *   dst         same type and ne as a, packed
 *
 * op_params: 0 n_past (0), 1 n_dims, 2 mode, 3 n_ctx (0), 4 n_ctx_orig, 5 freq_base, 6 freq_scale,
 * 7 ext_factor, 8 attn_factor, 9 beta_fast, 10 beta_slow (floats), 11-14 sections, 15 n_offs.
 *
 * Pairs rotated by the angle of pair k (o = n_offs, d = n_dims):
 *
 *   NORMAL            [ .. o | o+0 o+1 | o+2 o+3 | ... | o+d-2 o+d-1 | .. ]   pair k = (o+2k, o+2k+1)
 *   NEOX/MROPE/IMROPE [ .. o | o+0 .. o+d/2-1 | o+d/2 .. o+d-1 | .. ]          pair k = (o+k, o+k+d/2)
 *   VISION            [ 0 .. d-1 | d .. 2d-1 ],  ne0 = 2d                      pair k = (k, k+d)
 *
 * Elements outside the rotated span are copied. The angle of pair k at position p is
 * p * theta_scale^k with theta_scale = powf(freq_base, -2/d), formed by iterated f32 multiplication
 * as ggml does (bit-for-bit the same angles), then divided by ff[k] and YaRN-mixed with freq_scale;
 * cos and sin (scaled by mscale) come from a vectorised sincos within 2 ulp of libm's. The multi
 * modes pick, per pair, which of the four position blocks drives the angle (pg_rope_multi_block).
 *
 * Threads split the rows (head fastest) into contiguous ranges. Each thread keeps the cos/sin
 * caches of up to PG_ROPE_TOK consecutive tokens in its scratch (pg_rope_batch): the angles of a
 * batch are formed together, the cos/sin of a token when it is first used, so the transcendental
 * work is per token, not per head.
 */
#pragma once
#include "types.h"
#include "core/barrier.h"

enum { PG_ROPE_NORMAL = 0, PG_ROPE_NEOX = 2, PG_ROPE_MROPE = 8, PG_ROPE_VISION = 24, PG_ROPE_IMROPE = 40 };

/* the decoded parameters of one ROPE node */
typedef struct pg_rope {
    int mode;
    int64_t ne0, n_dims, n_offs;
    int64_t n_pairs;            /* rotated pairs per row = cache entries */
    int64_t rot0, half;         /* first rotated element; distance between the two of a pair */
    int64_t n_tok;              /* tokens (a.ne[2]); positions of block j start at j*n_tok */
    int sections[4];
    float theta_scale, freq_scale, ext_factor, mscale, corr_lo, corr_hi;
    const float * freq_factors; /* NULL, or n_pairs values */
} pg_rope;

/* ggml_rope_yarn_corr_dim: the pair index at which the wavelength reaches n_ctx_orig / n_rot turns */
static inline float pg_rope_corr_dim(int64_t n_dims, int n_ctx_orig, float n_rot, float base) {
    return (float) n_dims * logf((float) n_ctx_orig / (n_rot * 2.0f * (float) M_PI)) / (2.0f * logf(base));
}

/* decode the op_params of ROPE node `node` (its src[0] gives the shape, src[2] the factors) */
static inline void pg_rope_init(pg_rope * r, const pg_tensor * node) {
    const int32_t * op = node->op_params;
    const float freq_base = pg_op_param_f32(node, 5);
    const float attn_factor = pg_op_param_f32(node, 8);
    const float beta_fast = pg_op_param_f32(node, 9), beta_slow = pg_op_param_f32(node, 10);
    r->mode = op[2];
    r->ne0 = node->src[0]->ne[0];
    r->n_dims = op[1];
    r->n_offs = op[15];
    r->n_tok = node->src[0]->ne[2];
    for (int i = 0; i < 4; i++) r->sections[i] = op[11 + i];
    const bool vision = r->mode == PG_ROPE_VISION;
    r->n_pairs = vision ? r->n_dims : r->n_dims / 2;
    r->half = r->mode == PG_ROPE_NORMAL ? 1 : r->n_pairs;
    r->rot0 = vision ? 0 : r->n_offs;
    r->theta_scale = powf(freq_base, -2.0f / (float) r->n_dims);
    r->freq_scale = pg_op_param_f32(node, 6);
    r->ext_factor = pg_op_param_f32(node, 7);
    r->mscale = attn_factor;
    if (r->ext_factor != 0.0f) r->mscale *= 1.0f + 0.1f * logf(1.0f / r->freq_scale);
    r->corr_lo = PG_MAX(0.0f, floorf(pg_rope_corr_dim(r->n_dims, op[4], beta_fast, freq_base)));
    r->corr_hi = PG_MIN((float) (r->n_dims - 1), ceilf(pg_rope_corr_dim(r->n_dims, op[4], beta_slow, freq_base)));
    r->freq_factors = node->src[2] ? (const float *) node->src[2]->data : NULL;
}

/* Frequency factors are data: one that is not finite and > 0 divides an angle into no angle (NaN
 * for finite input). Thread 0 reports the first such factor (Python raises ValueError after the
 * compute); the rows are still rotated, with results the compute does not return. */
static inline void pg_rope_check_factors(const pg_params * p, const pg_tensor * node, const pg_rope * r) {
    if (p->ith != 0 || !r->freq_factors) return;
    for (int64_t k = 0; k < r->n_pairs; k++) {
        const float f = r->freq_factors[k];
        if (!(f > 0.0f && f < INFINITY)) {
            int32_t bits;
            memcpy(&bits, &f, sizeof bits);
            pg_report_error(p, node, k, bits);
            return;
        }
    }
}

/* floats of cache one token needs: cos[n_pairs] then sin[n_pairs] */
static inline int64_t pg_rope_cache_floats(const pg_rope * r) { return 2 * r->n_pairs; }

/* the angle of pair k from its unscaled angle theta_extrap (YaRN: ramp between the interpolated and
 * extrapolated angles over pairs corr_lo..corr_hi) */
static inline float pg_rope_theta(const pg_rope * r, float theta_extrap, int64_t k) {
    const float theta_interp = r->freq_scale * theta_extrap;
    if (r->ext_factor == 0.0f) return theta_interp;
    const float y = ((float) k - r->corr_lo) / PG_MAX(0.001f, r->corr_hi - r->corr_lo);
    const float mix = (1.0f - PG_MIN(1.0f, PG_MAX(0.0f, y))) * r->ext_factor;
    return theta_interp * (1.0f - mix) + theta_extrap * mix;
}

/* Caches are built for up to PG_ROPE_TOK consecutive tokens at once: the angles of pair k are a
 * chain of dependent f32 multiplications (ggml's iteration), which one token at a time is bound by
 * the multiply latency; across tokens the chains are independent, so the loops below run over
 * token lanes and vectorise. Every lane does the scalar formula's operations in the same order, so
 * the angles are ggml's bit for bit. cos/sin of a token are taken when the token is first used. */
#define PG_ROPE_TOK 16

/* which position block drives pair k of a multi mode, and which block VISION restarts at pair k
 * (-1: none) */
static inline int pg_rope_multi_block(const pg_rope * r, int64_t k, int * reset) {
    const int * sec = r->sections;
    const int sect_dims = sec[0] + sec[1] + sec[2] + sec[3];
    const int sec_w = sec[0] + sec[1], sec_e = sec_w + sec[2];
    const int sector = (int) (k % sect_dims);
    /* VISION restarts the frequency index where a section starts (the first matching start wins
     * when sections are empty, as in ggml) */
    *reset = r->mode != PG_ROPE_VISION ? -1
           : sector == 0 ? 0 : sector == sec[0] ? 1 : sector == sec_w ? 2 : sector == sec_e ? 3 : -1;
    if (r->mode == PG_ROPE_IMROPE) {
        /* interleaved t h w t h w ..., each while its section lasts */
        return sector % 3 == 1 && sector < 3 * sec[1] ? 1
             : sector % 3 == 2 && sector < 3 * sec[2] ? 2
             : sector % 3 == 0 && sector < 3 * sec[0] ? 0 : 3;
    }
    return sector < sec[0] ? 0 : sector < sec_w ? 1 : sector < sec_e ? 2 : 3;
}

/* Angles of every pair for tokens t0 .. t0+nt-1 (nt <= PG_ROPE_TOK) into the cos slots of their
 * caches (token t's cache at out + t*pg_rope_cache_floats(r)). Positions come from the I32 vector
 * `pos` (packed; element i2 + j*n_tok for block j). Single modes run one angle per token from its
 * position; the multi modes run four (t, h, w, e), all advanced at every pair, and
 * pg_rope_multi_block picks the one that drives each pair. */
static inline void pg_rope_angles(const pg_rope * r, const pg_tensor * pos, int64_t t0, int64_t nt, float * out) {
    const int32_t * pp = (const int32_t *) pos->data + t0;
    const float * ff = r->freq_factors;
    const int64_t stride = pg_rope_cache_floats(r);
    const int nb = r->mode & PG_ROPE_MROPE ? 4 : 1;
    float base[4][PG_ROPE_TOK], theta[4][PG_ROPE_TOK], a[PG_ROPE_TOK];
    for (int j = 0; j < nb; j++)
        for (int t = 0; t < PG_ROPE_TOK; t++)
            base[j][t] = theta[j][t] = t < nt ? (float) pp[t + j * r->n_tok] : 0.0f;
    for (int64_t k = 0; k < r->n_pairs; k++) {
        int reset = -1, j = 0;
        if (nb == 4) j = pg_rope_multi_block(r, k, &reset);
        if (reset >= 0) memcpy(theta[reset], base[reset], sizeof theta[reset]);
        if (ff) for (int t = 0; t < PG_ROPE_TOK; t++) a[t] = theta[j][t] / ff[k];
        else memcpy(a, theta[j], sizeof a);
        for (int t = 0; t < nt; t++) out[t * stride + k] = pg_rope_theta(r, a[t], k);
        for (int i = 0; i < nb; i++)
            for (int t = 0; t < PG_ROPE_TOK; t++) theta[i][t] *= r->theta_scale;
    }
}

/* the caches of up to PG_ROPE_TOK consecutive tokens t0 .. t0+nt-1; bit t of `ready` is set once
 * token t0+t has its cos/sin (until then its cos slots hold the angles) */
typedef struct pg_rope_batch {
    float * cache;      /* PG_ROPE_TOK * pg_rope_cache_floats(r) floats */
    int64_t t0, nt;
    uint32_t ready;
} pg_rope_batch;

static inline void pg_rope_batch_init(pg_rope_batch * b, float * cache) {
    b->cache = cache;
    b->t0 = b->nt = 0;
    b->ready = 0;
}

static inline size_t pg_rope_batch_floats(const pg_rope * r) { return PG_ROPE_TOK * pg_rope_cache_floats(r); }

/* Contract: the cos/sin cache (cos[n_pairs] then sin[n_pairs], scaled by mscale) of token i2, from
 * the batch b, which is refilled from token i2 on when it does not hold i2. */
static inline const float * pg_rope_cache_of(const pg_rope * r, const pg_tensor * pos, pg_rope_batch * b, int64_t i2) {
    if (i2 < b->t0 || i2 >= b->t0 + b->nt) {
        b->t0 = i2;
        b->nt = PG_MIN(PG_ROPE_TOK, r->n_tok - i2);
        b->ready = 0;
        pg_rope_angles(r, pos, i2, b->nt, b->cache);
    }
    const int64_t t = i2 - b->t0;
    float * c = b->cache + t * pg_rope_cache_floats(r);
    if (!(b->ready >> t & 1)) {
        pg_vec_sincos_f32(r->n_pairs, c, c, c + r->n_pairs, r->mscale);
        b->ready |= 1u << t;
    }
    return c;
}

/* Contract: y = row x (ne0 f32 values) rotated with a cache from pg_rope_cache_init; elements outside
 * the rotated span are copied. y == x (in place) is allowed; otherwise they must not overlap. */
static inline void pg_rope_row_f32(const pg_rope * r, const float * cache, const float * x, float * y) {
    const float * c = cache, * s = cache + r->n_pairs;
    const int64_t a = r->rot0, b = r->rot0 + 2 * r->n_pairs;
    if (r->mode == PG_ROPE_NORMAL) {
        pg_vec_rope_adj_f32(r->n_pairs, y + a, x + a, c, s);
    } else {
        pg_vec_rope_half_f32(r->n_pairs, y + a, y + a + r->half, x + a, x + a + r->half, c, s);
    }
    if (x != y && a > 0) memcpy(y, x, (size_t) a * sizeof(float));
    if (x != y && b < r->ne0) memcpy(y + b, x + b, (size_t) (r->ne0 - b) * sizeof(float));
}

/* per thread: the cache batch, then one f32 row for F16 data */
static inline size_t pg_rope_scratch(const pg_tensor * dst) {
    pg_rope r;
    pg_rope_init(&r, dst);
    const int64_t row = dst->type == PG_TYPE_F32 ? 0 : r.ne0;
    return (pg_rope_batch_floats(&r) + (size_t) row) * sizeof(float);
}

static inline bool pg_plan_rope(const pg_tensor * dst, pg_plan * pl) {
    pl->work = pg_per_thread(pg_rope_scratch(dst), pl->nth);
    return true;
}

static inline void pg_compute_rope(const pg_params * p, pg_tensor * dst) {
    const pg_tensor * src = dst->src[0];
    pg_rope r;
    pg_rope_init(&r, dst);
    pg_rope_check_factors(p, dst, &r);
    float * scratch = (float *) pg_scratch(p, pg_rope_scratch(dst));
    float * buf = scratch + pg_rope_batch_floats(&r);
    pg_rope_batch batch;
    pg_rope_batch_init(&batch, scratch);
    const int64_t ne1 = dst->ne[1], ne2 = dst->ne[2];
    int64_t r0, r1;
    pg_split_rows(pg_nrows(dst), p->ith, p->nth, &r0, &r1);
    int64_t i1 = r0 % ne1, i2 = r0 / ne1 % ne2, i3 = r0 / (ne1 * ne2);
    for (int64_t ir = r0; ir < r1; ir++) {
        const float * cache = pg_rope_cache_of(&r, dst->src[1], &batch, i2);
        const char * x = pg_row(src, i1, i2, i3);
        char * y = pg_row(dst, i1, i2, i3);
        if (dst->type == PG_TYPE_F32) {
            pg_rope_row_f32(&r, cache, (const float *) x, (float *) y);
        } else {
            pg_traits[src->type].to_float(x, buf, r.ne0);
            pg_rope_row_f32(&r, cache, buf, buf);
            pg_traits[dst->type].from_float(buf, y, r.ne0);
        }
        if (++i1 == ne1) {
            i1 = 0;
            if (++i2 == ne2) { i2 = 0; i3++; }
        }
    }
}
