"""ROPE (rope_ext, rope_multi, rope_set_offset) against the float64 reference and against the Hugging
Face formulas in PyTorch (and the transformers functions themselves when that package is installed)."""
import struct

import numpy as np
import pytest
import reference as R
from conftest import EMULATED, THREADS, run

import pyggml as gg

NORMAL, NEOX, MROPE, VISION, IMROPE = 0, 2, 8, 24, 40
MODES = [NORMAL, NEOX, MROPE, IMROPE, VISION]
TYPES = {"F32": np.float32, "F16": np.float16}
# F32: the angles are ggml's iterated f32 products, reproduced exactly by the reference, so only
# the last-bit rounding of cos/sin and the rotation remains (measured ~1e-15). F16: compared with the
# reference rounded to fp16, where rare one-ulp rounding flips are all that can differ.
BOUND = {"F32": 1e-9, "F16": 1e-7}
# YaRN blends the interpolated and extrapolated angles in f32 (fused or not, as the compiler
# contracts it): one more rounding of angles in the thousands, measured up to ~3e-9
YARN_BOUND = 1e-8
N_TOK, N_HEAD, NE3 = (3, 2, 1) if EMULATED else (7, 3, 2)
DEFAULTS = {"n_ctx_orig": 0, "freq_base": 10000.0, "freq_scale": 1.0, "ext_factor": 0.0, "attn_factor": 1.0,
            "beta_fast": 32.0, "beta_slow": 1.0}


def rope_node(a, b, c, n_dims, mode, sections=None, **kw):
    p = {**DEFAULTS, **kw}
    args = (p["n_ctx_orig"], p["freq_base"], p["freq_scale"], p["ext_factor"], p["attn_factor"],
            p["beta_fast"], p["beta_slow"])
    if sections is not None:
        return gg.rope_multi(a, b, c, n_dims, sections, mode, *args)
    return gg.rope_ext(a, b, c, n_dims, mode, *args)


def case(mode, ne0):
    """(n_dims, sections) for a row of ne0 in each mode; pair counts are not multiples of 4/8/16."""
    if mode == VISION:
        return ne0 // 2, [ne0 // 4, ne0 // 2 - ne0 // 4, 0, 0]
    n_pairs = ne0 // 2
    if mode == MROPE:
        return ne0, [n_pairs // 3, n_pairs // 3, n_pairs - 2 * (n_pairs // 3), 0]
    if mode == IMROPE:
        return ne0, [n_pairs // 3, n_pairs // 3, n_pairs // 3 - 1, 1]
    return ne0, None


def positions(rng, mode, n_tok, hi=8000):
    return rng.integers(0, hi, (4 if mode & 8 else 1) * n_tok).astype(np.int32)


def check(got, ref, typ, bound=None):
    if typ == "F16":
        ref = R.round_f16(ref)
    err = R.nmse(got, ref)
    assert err < (bound or BOUND[typ]), err


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("typ", TYPES)
@pytest.mark.parametrize("mode", MODES)
def test_modes(ctx, rng, mode, typ, nth):
    ne0 = 76 if not EMULATED else 44          # 38 / 22 pairs: vector bodies and scalar tails
    n_dims, sections = case(mode, ne0)
    x = rng.standard_normal((NE3, N_TOK, N_HEAD, ne0)).astype(TYPES[typ])
    pos = positions(rng, mode, N_TOK)
    out = rope_node(ctx.from_numpy(x), ctx.from_numpy(pos), None, n_dims, mode, sections)
    run(out, nth)
    assert out.type == gg.Type[typ] and out.ne == (ne0, N_HEAD, N_TOK, NE3)
    check(out.to_numpy(), R.rope(x.astype(np.float32), pos, n_dims, mode, sections=sections), typ)


@pytest.mark.parametrize("nth", sorted({*THREADS, 3}))
@pytest.mark.parametrize("mode", MODES)
def test_token_batches(ctx, rng, mode, nth):
    """The cos/sin caches are built 16 tokens at a time (rope.h, PG_ROPE_TOK): 37 tokens in two
    dims-3 slices, split over threads mid-token, with and without frequency factors."""
    ne0, n_tok = (44, 37) if EMULATED else (76, 37)
    n_dims, sections = case(mode, ne0)
    n_pairs = n_dims if mode == VISION else n_dims // 2
    x = rng.standard_normal((2, n_tok, 3, ne0)).astype(np.float32)
    pos = positions(rng, mode, n_tok)
    ff = rng.uniform(1.0, 4.0, n_pairs).astype(np.float32)
    a, b = ctx.from_numpy(x), ctx.from_numpy(pos)
    outs = [rope_node(a, b, None, n_dims, mode, sections), rope_node(a, b, ctx.from_numpy(ff), n_dims, mode, sections)]
    run(outs, nth)
    check(outs[0].to_numpy(), R.rope(x, pos, n_dims, mode, sections=sections), "F32")
    check(outs[1].to_numpy(), R.rope(x, pos, n_dims, mode, sections=sections, freq_factors=ff), "F32")


@pytest.mark.parametrize("typ", TYPES)
@pytest.mark.parametrize("mode", [NORMAL, NEOX, MROPE, IMROPE])
def test_partial_rotation_and_offset(ctx, rng, mode, typ):
    """n_dims < ne0 rotates [n_offs, n_offs + n_dims) and leaves the other elements bit-exact."""
    ne0, n_dims, n_offs = 90, 38, 22
    sections = {MROPE: [6, 7, 6, 0], IMROPE: [7, 6, 5, 1]}.get(mode)
    x = rng.standard_normal((1, N_TOK, N_HEAD, ne0)).astype(TYPES[typ])
    pos = positions(rng, mode, N_TOK)
    a, b = ctx.from_numpy(x), ctx.from_numpy(pos)
    plain = rope_node(a, b, None, n_dims, mode, sections)
    shifted = gg.rope_set_offset(rope_node(a, b, None, n_dims, mode, sections), n_offs)
    run([plain, shifted], THREADS[-1])
    xf = x.astype(np.float32)
    for out, o in ((plain, 0), (shifted, n_offs)):
        got = out.to_numpy()
        check(got, R.rope(xf, pos, n_dims, mode, sections=sections, n_offs=o), typ)
        keep = np.r_[0:o, o + n_dims:ne0]
        np.testing.assert_array_equal(got[..., keep], x[..., keep])


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("mode", MODES)
def test_yarn_and_freq_factors(ctx, rng, mode, nth):
    """ext_factor > 0 with freq_scale < 1: the ramp between the correction dims, mscale; with and
    without frequency factors."""
    ne0 = 64
    n_dims, sections = case(mode, ne0)
    n_pairs = n_dims if mode == VISION else n_dims // 2
    x = rng.standard_normal((1, N_TOK, N_HEAD, ne0)).astype(np.float32)
    pos = positions(rng, mode, N_TOK)
    ff = rng.uniform(1.0, 8.0, n_pairs).astype(np.float32)
    yarn = {"n_ctx_orig": 4096, "freq_base": 500000.0, "freq_scale": 0.3, "ext_factor": 0.8,
            "attn_factor": 0.9, "beta_fast": 32.0, "beta_slow": 1.0}
    lo, hi = R.rope_corr_dims(n_dims, 4096, 500000.0, 32.0, 1.0)
    assert 0 < lo < hi < n_pairs - 1            # the ramp is inside the rotated pairs
    a, b = ctx.from_numpy(x), ctx.from_numpy(pos)
    outs = [rope_node(a, b, None, n_dims, mode, sections, **yarn),
            rope_node(a, b, ctx.from_numpy(ff), n_dims, mode, sections, **yarn),
            rope_node(a, b, ctx.from_numpy(ff), n_dims, mode, sections, freq_scale=0.5)]
    run(outs, nth)
    refs = [R.rope(x, pos, n_dims, mode, sections=sections, **yarn),
            R.rope(x, pos, n_dims, mode, sections=sections, freq_factors=ff, **yarn),
            R.rope(x, pos, n_dims, mode, sections=sections, freq_factors=ff, freq_scale=0.5)]
    for out, ref, bound in zip(outs, refs, (YARN_BOUND, YARN_BOUND, None)):
        check(out.to_numpy(), ref, "F32", bound)


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("typ", TYPES)
@pytest.mark.parametrize("mode", [NORMAL, NEOX, MROPE])
def test_views_into_fused_qkv(ctx, rng, mode, typ, nth):
    """Q and K as strided views of one [D*(H + 2*Hkv), T] projection, and a permuted input."""
    D, H, Hkv, T = 40, 3, 1, N_TOK
    n_dims, sections = case(mode, D)
    es = np.dtype(TYPES[typ]).itemsize
    qkv_np = rng.standard_normal((T, D * (H + 2 * Hkv))).astype(TYPES[typ])
    qkv = ctx.from_numpy(qkv_np)
    row = qkv.nb[1]
    q = gg.view_3d(qkv, D, H, T, D * es, row, 0)
    k = gg.view_3d(qkv, D, Hkv, T, D * es, row, D * H * es)
    thd = rng.standard_normal((H, T, D)).astype(TYPES[typ])   # ne [D, T, H] -> permuted to [D, H, T]
    p = gg.permute(ctx.from_numpy(thd), 0, 2, 1, 3)
    assert not q.is_contiguous() and not p.is_contiguous()
    pos = ctx.from_numpy(positions(rng, mode, T))
    outs = [rope_node(t, pos, None, n_dims, mode, sections) for t in (q, k, p)]
    run(outs, nth)
    xs = [qkv_np[:, :D * H].reshape(T, H, D), qkv_np[:, D * H:D * (H + Hkv)].reshape(T, Hkv, D),
          thd.transpose(1, 0, 2)]
    for out, x in zip(outs, xs):
        check(out.to_numpy(), R.rope(x[None].astype(np.float32), pos.numpy(), n_dims, mode,
                                     sections=sections)[0], typ)


def test_iterated_angles_matter(ctx, rng):
    """At positions in the thousands the f32 iteration differs from exact angles by far more than
    pyggml differs from the iterated reference: the test fails if the kernel stops iterating."""
    ne0, T = 128, 16
    x = rng.standard_normal((1, T, 2, ne0)).astype(np.float32)
    pos = rng.integers(4000, 16000, T).astype(np.int32)
    out = rope_node(ctx.from_numpy(x), ctx.from_numpy(pos), None, ne0, NEOX)
    run(out)
    got = out.to_numpy()
    k = np.arange(ne0 // 2)
    theta = pos[:, None].astype(np.float64) * 10000.0 ** (-2.0 * k / ne0)
    c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
    x0, x1 = x[..., :ne0 // 2].astype(np.float64), x[..., ne0 // 2:].astype(np.float64)
    exact = np.concatenate([x0 * c - x1 * s, x0 * s + x1 * c], axis=-1)
    iterated = R.nmse(got, R.rope(x, pos, ne0, NEOX))
    assert R.nmse(got, exact) > 1e3 * iterated, (R.nmse(got, exact), iterated)


@pytest.mark.parametrize("nth", THREADS)
def test_sincos_accuracy(ctx, rng, nth):
    """Pair 0 rotates by the position itself: (1, 0) -> (cos p, sin p), compared with float64 up to
    positions of 2^23 (the range reduction keeps the absolute error near 1e-7)."""
    n = 500 if EMULATED else 20000
    pos = np.concatenate([rng.integers(0, 1 << 23, n), np.arange(64)]).astype(np.int32)
    x = np.zeros((pos.size, 1, 2), np.float32)
    x[..., 0] = 1
    out = rope_node(ctx.from_numpy(x), ctx.from_numpy(pos), None, 2, NEOX)
    run(out, nth)
    y = out.to_numpy()[:, 0].astype(np.float64)
    p = pos.astype(np.float64)
    assert np.abs(y[:, 0] - np.cos(p)).max() < 2e-7
    assert np.abs(y[:, 1] - np.sin(p)).max() < 2e-7


def test_op_params_and_recompute(ctx, rng):
    """op_params packed as ggml packs them; a graph recomputed after new positions are written."""
    x = rng.standard_normal((1, 4, 2, 32)).astype(np.float32)
    pos = np.array([0, 1, 2, 3] * 4, dtype=np.int32)
    b = ctx.from_numpy(pos)
    out = gg.rope_multi(ctx.from_numpy(x), b, None, 32, [3, 5, 8, 0], MROPE, 2048, 1e6, 0.5, 0.25,
                        1.5, 30.0, 2.0)
    gg.rope_set_offset(out, 0)
    slots = struct.unpack("<5i6f5i", out.op_params)
    assert slots[:5] == (0, 32, MROPE, 0, 2048)
    assert slots[5:11] == pytest.approx((1e6, 0.5, 0.25, 1.5, 30.0, 2.0))
    assert slots[11:] == (3, 5, 8, 0, 0)
    neox = gg.rope_multi(ctx.from_numpy(x), ctx.from_numpy(pos[:4]), None, 32, [3, 5, 8, 0], NEOX,
                         0, 1e4, 1, 0, 1, 32, 1)
    assert struct.unpack("<4i", neox.op_params[44:60]) == (0, 0, 0, 0)   # sections only for multi
    g = run(out)
    new = pos + 1000
    b.set(new)
    g.compute(n_threads=THREADS[-1])
    kw = {"n_ctx_orig": 2048, "freq_base": 1e6, "freq_scale": 0.5, "ext_factor": 0.25, "attn_factor": 1.5,
          "beta_fast": 30.0, "beta_slow": 2.0, "sections": [3, 5, 8, 0]}
    check(out.to_numpy(), R.rope(x, new, 32, MROPE, **kw), "F32", YARN_BOUND)


def bad_cases(ctx):
    a = ctx.new_tensor(gg.Type.F32, (16, 2, 3))
    pos = ctx.new_tensor(gg.Type.I32, (3,))
    pos4 = ctx.new_tensor(gg.Type.I32, (12,))
    d = {"n_ctx_orig": 0, "freq_base": 1e4, "freq_scale": 1.0, "ext_factor": 0.0, "attn_factor": 1.0,
         "beta_fast": 32.0, "beta_slow": 1.0}

    def ext(a=a, b=pos, c=None, n=16, m=NEOX, **kw):
        return gg.rope_ext(a, b, c, n, m, *{**d, **kw}.values())

    def multi(s, m=MROPE, n=16, b=pos4, a=a):
        return gg.rope_multi(a, b, None, n, s, m, *d.values())

    vision = gg.rope_multi(a, pos4, None, 8, [4, 4, 0, 0], VISION, *d.values())
    return [
        (lambda: ext(n=15), ValueError, "n_dims must be even"),
        (lambda: ext(n=0), ValueError, "n_dims must be even and > 0"),
        (lambda: ext(n=18), ValueError, r"n_dims must be <= a.ne\[0\] = 16"),
        (lambda: ext(m=1), ValueError, "mode must be one of"),
        (lambda: ext(m=3), ValueError, "mode must be one of"),
        (lambda: ext(m=MROPE, b=pos4), ValueError, "needs sections: use rope_multi"),
        (lambda: ext(b=ctx.new_tensor(gg.Type.I32, (2,))), ValueError, "b must be a vector of a.ne.2. = 3"),
        (lambda: ext(b=pos4), ValueError, "b must be a vector"),
        (lambda: multi([2, 2, 2, 0], b=pos), ValueError, r"4 \* a.ne\[2\]"),
        (lambda: ext(b=ctx.new_tensor(gg.Type.F32, (3,))), TypeError, "b must be of type I32"),
        (lambda: ext(b=ctx.new_tensor(gg.Type.I64, (3,))), TypeError, "b must be of type I32"),
        (lambda: ext(c=ctx.new_tensor(gg.Type.F16, (8,))), TypeError, "c must be of type F32"),
        (lambda: ext(c=ctx.new_tensor(gg.Type.F32, (7,))), ValueError, r"c must hold one frequency factor .*\(8\)"),
        (lambda: ext(a=ctx.new_tensor(gg.Type.BF16, (16, 2, 3))), TypeError, "a must be of type F16, F32"),
        (lambda: ext(a=gg.transpose(ctx.new_tensor(gg.Type.F32, (3, 16)))), ValueError, "a must be packed in dim 0"),
        (lambda: ext(freq_base=float("nan")), ValueError, "freq_base must be a number"),
        (lambda: ext(freq_base=0.0), ValueError, "freq_base must be > 0"),
        (lambda: ext(freq_scale=0.0, ext_factor=1.0), ValueError, "freq_scale must be > 0"),
        (lambda: multi([0, 0, 0, 4]), ValueError, r"one of sections\[0:3\] must be > 0"),
        (lambda: multi([8, 8, 1, 0]), ValueError, "sum to 17, more than the row"),
        (lambda: multi([2, -1, 2, 0]), ValueError, "sections must be 4 integers >= 0"),
        (lambda: multi([2, 2, 2]), ValueError, "sections must be 4 integers >= 0"),
        (lambda: multi([4, 4, 0, 0], m=VISION), ValueError, "n_dims must be a.ne.0. / 2"),
        (lambda: gg.rope_set_offset(vision, 2), ValueError, "n_offs must be 0 with mode VISION"),
        (lambda: gg.rope_set_offset(ext(n=8), 3), ValueError, "n_offs must be even"),
        (lambda: gg.rope_set_offset(ext(n=8), -2), ValueError, "n_offs must be even and >= 0"),
        (lambda: gg.rope_set_offset(ext(n=8), 10), ValueError, r"n_offs \+ n_dims must be <= a.ne\[0\] = 16"),
        (lambda: gg.rope_set_offset(a, 2), ValueError, "t must be a rope_ext/rope_multi result"),
        (lambda: ext(a=np.zeros(3)), TypeError, "a must be a pyggml.Tensor"),
    ]


N_BAD_CASES = 29


def test_bad_cases_are_all_run(ctx):
    assert len(bad_cases(ctx)) == N_BAD_CASES


@pytest.mark.parametrize("case", range(N_BAD_CASES))
def test_bad_input(ctx, case):
    fn, exc, match = bad_cases(ctx)[case]
    with pytest.raises(exc, match=match):
        fn()


# ---- cross-checks: the Hugging Face formulas in PyTorch, and transformers' own functions ----

def _hf_neox(torch, q, cos, sin):
    """q [1, H, T, D]; cos/sin [1, T, D]: q*cos + rotate_half(q)*sin (Llama)."""
    def rotate_half(x):
        return torch.cat((-x[..., x.shape[-1] // 2:], x[..., :x.shape[-1] // 2]), dim=-1)
    return q * cos[:, None] + rotate_half(q) * sin[:, None]


def _hf_gptj(torch, q, sin, cos):
    """q [1, T, H, D]; sin/cos [1, T, D/2]: interleaved pairs (GPT-J rotate_every_two)."""
    def rotate_every_two(x):
        return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
    sin = torch.repeat_interleave(sin[:, :, None, :], 2, 3)
    cos = torch.repeat_interleave(cos[:, :, None, :], 2, 3)
    return q * cos + rotate_every_two(q) * sin


def _impls(source):
    torch = pytest.importorskip("torch")
    if source == "torch":
        return torch, _hf_neox, _hf_gptj
    pytest.importorskip("transformers", minversion="5.0")     # 5.x: Qwen2-VL's rope_parameters API
    from transformers.models.gptj import modeling_gptj
    from transformers.models.llama import modeling_llama
    return (torch, lambda torch, q, c, s: modeling_llama.apply_rotary_pos_emb(q, q, c, s)[0],
            lambda torch, q, s, c: modeling_gptj.apply_rotary_pos_emb(q, s, c))


SOURCES = ["torch", "transformers"]
# angles: ggml iterates in f32 and transformers multiplies in f32; both are ~1e-7 relative off the
# exact angle, which at positions up to 2000 moves the result by at most ~1e-8 (nmse)
CROSS_BOUND = 1e-7


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("mode", [NORMAL, NEOX])
def test_cross_check_text(ctx, rng, source, mode):
    """NEOX against Llama's rotate_half form, NORMAL against GPT-J's interleaved form (with a
    partial rotary_dim: the rest of the head passes through)."""
    torch, neox, gptj = _impls(source)
    D, H, T, n_dims, base = 64, 3, 9, 48, 10000.0
    x = rng.standard_normal((T, H, D)).astype(np.float32)
    pos = rng.integers(0, 2000, T).astype(np.int32)
    out = rope_node(ctx.from_numpy(x), ctx.from_numpy(pos), None, n_dims, mode, freq_base=base)
    run(out)
    inv = 1.0 / base ** (torch.arange(0, n_dims, 2, dtype=torch.float64) / n_dims)
    freqs = torch.tensor(pos, dtype=torch.float64)[:, None] * inv          # [T, n_dims/2]
    xt = torch.tensor(x, dtype=torch.float64)
    rot, rest = xt[..., :n_dims], xt[..., n_dims:]
    if mode == NEOX:
        emb = torch.cat((freqs, freqs), dim=-1)[None]
        y = neox(torch, rot.permute(1, 0, 2)[None], emb.cos(), emb.sin())[0].permute(1, 0, 2)
    else:
        y = gptj(torch, rot[None], freqs.sin()[None], freqs.cos()[None])[0]
    ref = torch.cat((y, rest), dim=-1).numpy()
    assert R.nmse(out.to_numpy(), ref) < CROSS_BOUND


def _qwen2vl_mrope_cos_sin(torch, source, pos3, D, base, mrope_section):
    """cos/sin [1, T, D] of Qwen2-VL's multimodal rotary embedding for positions [3, T]."""
    if source == "transformers":
        from transformers.models.qwen2_vl import modeling_qwen2_vl as m
        cfg = m.Qwen2VLTextConfig(hidden_size=D * 2, num_attention_heads=2, num_hidden_layers=1,
                                  rope_parameters={"rope_type": "default", "rope_theta": base,
                                                   "mrope_section": list(mrope_section)})
        emb = m.Qwen2VLRotaryEmbedding(cfg)
        x = torch.zeros(1, dtype=torch.float32)
        return emb(x, torch.tensor(pos3, dtype=torch.int64)[:, None, :])
    inv = 1.0 / base ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
    freqs = torch.tensor(pos3, dtype=torch.float64)[:, None, :, None] * inv   # [3, 1, T, D/2]
    parts = freqs.split(list(mrope_section), dim=-1)
    f = torch.cat([p[i % 3] for i, p in enumerate(parts)], dim=-1)
    f = torch.cat((f, f), dim=-1)
    return f.cos(), f.sin()


@pytest.mark.parametrize("source", SOURCES)
def test_cross_check_qwen2vl_mrope(ctx, rng, source):
    """MROPE with sections [t, h, w, 0] against Qwen2-VL's mrope_section recomposition + rotate_half."""
    torch, neox, _ = _impls(source)
    D, H, T, base, sec = 64, 2, 8, 1e6, (8, 12, 12)
    x = rng.standard_normal((T, H, D)).astype(np.float32)
    pos3 = rng.integers(0, 1000, (3, T)).astype(np.int32)
    pos = np.concatenate([pos3.ravel(), np.zeros(T, np.int32)])
    out = rope_node(ctx.from_numpy(x), ctx.from_numpy(pos), None, D, MROPE, list(sec) + [0], freq_base=base)
    run(out)
    cos, sin = _qwen2vl_mrope_cos_sin(torch, source, pos3, D, base, sec)
    q = torch.tensor(x, dtype=cos.dtype).permute(1, 0, 2)[None]
    ref = neox(torch, q, cos, sin)[0].permute(1, 0, 2).double().numpy()
    assert R.nmse(out.to_numpy(), ref) < CROSS_BOUND


@pytest.mark.parametrize("source", SOURCES)
def test_cross_check_qwen2vl_vision(ctx, rng, source):
    """VISION (n_dims = D/2, sections [D/4, D/4, 0, 0], blocks h and w) against Qwen2-VL's vision
    rotary embedding (axial: h frequencies then w frequencies over half the head, doubled)."""
    torch, neox, _ = _impls(source)
    D, H, N, base = 80, 2, 12, 10000.0
    x = rng.standard_normal((N, H, D)).astype(np.float32)
    hw = rng.integers(0, 64, (N, 2)).astype(np.int32)
    pos = np.concatenate([hw[:, 0], hw[:, 1], np.zeros(2 * N, np.int32)])
    out = rope_node(ctx.from_numpy(x), ctx.from_numpy(pos), None, D // 2, VISION, [D // 4, D // 4, 0, 0],
                    freq_base=base)
    run(out)
    if source == "transformers":
        from transformers.models.qwen2_vl import modeling_qwen2_vl as m
        cfg = m.Qwen2VLVisionConfig(embed_dim=D * H, num_heads=H, depth=1,
                                    rope_parameters={"rope_type": "axial", "rope_theta": base})
        cos, sin = m.Qwen2VLVisionRotaryEmbedding(cfg)(torch.zeros(1), torch.tensor(hw, dtype=torch.int64))
        q = torch.tensor(x)
        ref = m.apply_rotary_pos_emb_vision(q, q, cos, sin)[0].double().numpy()
    else:
        inv = 1.0 / base ** (torch.arange(0, D // 2, 2, dtype=torch.float64) / (D // 2))
        f = torch.tensor(hw, dtype=torch.float64)[:, :, None] * inv        # [N, 2, D/4]
        emb = torch.cat((f[:, 0], f[:, 1]), dim=-1)
        emb = torch.cat((emb, emb), dim=-1)[None]                          # [1, N, D]
        q = torch.tensor(x, dtype=torch.float64).permute(1, 0, 2)[None]
        ref = neox(torch, q, emb.cos(), emb.sin())[0].permute(1, 0, 2).numpy()
    assert R.nmse(out.to_numpy(), ref) < CROSS_BOUND
