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
 * cos and sin (scaled by mscale) come from a vectorised sincos within 2 ulp of libm's. The multi modes pick, per pair, which of the four position blocks drives the
 * angle (see pg_rope_cache_init).
 *
 * Threads split the rows (head fastest) into contiguous ranges. Each thread keeps a cos/sin cache
 * for the current token in its scratch and rebuilds it only when the token changes, so the
 * transcendental work is per token, not per head.
 */
#pragma once
#include "convert.h"
#include "barrier.h"

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

/* the angles of the multi modes: four running angles (t, h, w, e) from the position blocks, all
 * advanced at every pair; a mode-dependent rule picks which one drives pair k */
static inline void pg_rope_multi_angles(const pg_rope * r, const int32_t * pp, float * out) {
    const float * ff = r->freq_factors;
    const int * sec = r->sections;
    const int sect_dims = sec[0] + sec[1] + sec[2] + sec[3];
    const int sec_w = sec[0] + sec[1], sec_e = sec_w + sec[2];
    const float base[4] = {(float) pp[0], (float) pp[r->n_tok], (float) pp[2 * r->n_tok], (float) pp[3 * r->n_tok]};
    float theta[4] = {base[0], base[1], base[2], base[3]};
    for (int64_t k = 0; k < r->n_pairs; k++) {
        const int sector = (int) (k % sect_dims);
        int j;
        if (r->mode == PG_ROPE_IMROPE) {
            /* interleaved t h w t h w ..., each while its section lasts */
            j = sector % 3 == 1 && sector < 3 * sec[1] ? 1
              : sector % 3 == 2 && sector < 3 * sec[2] ? 2
              : sector % 3 == 0 && sector < 3 * sec[0] ? 0 : 3;
        } else {
            j = sector < sec[0] ? 0 : sector < sec_w ? 1 : sector < sec_e ? 2 : 3;
        }
        /* VISION restarts the frequency index where a section starts (the first matching start
         * wins when sections are empty, as in ggml) */
        if (r->mode == PG_ROPE_VISION) {
            const int reset = sector == 0 ? 0 : sector == sec[0] ? 1 : sector == sec_w ? 2 : sector == sec_e ? 3 : -1;
            if (reset >= 0) theta[reset] = base[reset];
        }
        out[k] = pg_rope_theta(r, ff ? theta[j] / ff[k] : theta[j], k);
        for (int i = 0; i < 4; i++) theta[i] *= r->theta_scale;
    }
}

/* Contract: fills cache (pg_rope_cache_floats(r) floats) with cos/sin of every pair for token i2,
 * reading its positions from the I32 vector `pos` (packed; element i2 + j*n_tok for block j).
 * Depends on the token only: build it once, rotate every head of that token with it. */
static inline void pg_rope_cache_init(const pg_rope * r, const pg_tensor * pos, int64_t i2, float * cache) {
    const int32_t * pp = (const int32_t *) pos->data + i2;
    const float * ff = r->freq_factors;
    float * c = cache, * s = cache + r->n_pairs;
    if (!(r->mode & PG_ROPE_MROPE)) {
        float theta = (float) pp[0];
        for (int64_t k = 0; k < r->n_pairs; k++) {
            c[k] = pg_rope_theta(r, ff ? theta / ff[k] : theta, k);
            theta *= r->theta_scale;
        }
    } else {
        pg_rope_multi_angles(r, pp, c);
    }
    pg_vec_sincos_f32(r->n_pairs, c, c, s, r->mscale);
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

/* per thread: the cache, then one f32 row for F16 data */
static inline size_t pg_rope_scratch(const pg_tensor * dst) {
    pg_rope r;
    pg_rope_init(&r, dst);
    const int64_t row = dst->type == PG_TYPE_F32 ? 0 : r.ne0;
    return (size_t) (pg_rope_cache_floats(&r) + row) * sizeof(float);
}

static inline size_t pg_work_rope(const pg_tensor * dst, int nth) {
    return pg_per_thread(pg_rope_scratch(dst), nth);
}

static inline void pg_compute_rope(const pg_params * p, pg_tensor * dst) {
    const pg_tensor * src = dst->src[0];
    pg_rope r;
    pg_rope_init(&r, dst);
    float * cache = (float *) pg_scratch(p, pg_rope_scratch(dst));
    float * buf = cache + pg_rope_cache_floats(&r);
    const int64_t ne1 = dst->ne[1], ne2 = dst->ne[2];
    int64_t r0, r1, cached = -1;
    pg_split_rows(pg_nrows(dst), p->ith, p->nth, &r0, &r1);
    int64_t i1 = r0 % ne1, i2 = r0 / ne1 % ne2, i3 = r0 / (ne1 * ne2);
    for (int64_t ir = r0; ir < r1; ir++) {
        if (i2 != cached) {
            pg_rope_cache_init(&r, dst->src[1], i2, cache);
            cached = i2;
        }
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
