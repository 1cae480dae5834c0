"""flash_attn_ext against the float64 reference: every path forced and the automatic choice, K/V
types, head sizes (vector tails), GQA, lengths around the tile and split boundaries, masks, ALiBi,
softcap, sinks, S = 2, KV-cache views, threads; build-time errors; torch SDPA where it applies."""
import numpy as np
import pytest
import reference as R
from conftest import EMULATED, THREADS

import pyggml as gg

PATHS = ("one_chunk", "tiled", "split")
TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL")
BOUND = {"F32": 1e-6, "F16": 5e-4, "BF16": 5e-4, "Q8_0": 5e-3, "Q4_0": 5e-3, "Q4_1": 5e-3, "Q5_0": 5e-3,
         "Q5_1": 5e-3, "IQ4_NL": 5e-3}


def make_mask(rng, kind, S, N, L, M2=1, M3=1, Lpad=0, Npad=0):
    """F16 mask values [M3, M2, N + Npad, L + Lpad] of a kind: causal (the N queries are the last N
    positions), random (-inf with p = 0.3), dead (causal with query row 0 fully masked), alibi
    (causal plus finite -|i-j| distances), window (causal, and keys more than 37 positions back
    masked: each row's live keys start inside a tile, off the vector boundaries), padded (causal, and
    the last L/2 keys hidden for every row: a KV cache padded past its last token)."""
    if kind == "none":
        return None
    m = np.zeros((M3, M2, N + Npad, L + Lpad), np.float32)
    pos = np.arange(N + Npad)[:, None] + (L - N)
    key = np.arange(L + Lpad)[None, :]
    if kind in ("causal", "dead", "alibi", "window"):
        m[..., key > pos] = -np.inf
    if kind == "window":
        m[..., key < pos - 37] = -np.inf
    if kind == "padded":        # a KV cache padded past the last token: the last half of the keys hidden
        m[..., key > pos - L // 2] = -np.inf
    if kind == "random":
        m[rng.random(m.shape) < 0.3] = -np.inf
    if kind == "dead":
        m[..., 0, :] = -np.inf
    if kind == "alibi":
        m = m - np.abs(pos - key).astype(np.float32)
    return m.astype(np.float16)


def attn(rng, *, path="auto", typ="F16", S=1, Hq=4, Hkv=1, N=7, L=65, DK=64, DV=None, mask="none",
         M2=1, M3=1, max_bias=0.0, softcap=0.0, sinks=False, nth=1, kv_view=None, vtyp=None, use_ref=False,
         q_view=False):
    """Run flash_attn_ext on random inputs; returns (got, ref, node)."""
    DV = DK if DV is None else DV
    vtyp = vtyp or typ
    ctx = gg.Context()
    q = rng.standard_normal((S, Hq, N, DK)).astype(np.float32)
    k = rng.standard_normal((S, Hkv, L, DK)).astype(np.float32)
    v = rng.standard_normal((S, Hkv, L, DV)).astype(np.float32)
    if q_view:
        # llama.cpp's layout: heads inside positions ([DK, Hq, N, S] storage, permuted): nb1 > nb2
        tq = gg.permute(ctx.from_numpy(np.ascontiguousarray(q.transpose(0, 2, 1, 3))), 0, 2, 1, 3)
    else:
        tq = ctx.from_numpy(q)
    if kv_view == "cache":
        # a KV cache of 2L slots per head; the first L are used (nb1 < nb2 < nb3 but not packed)
        ck = np.zeros((S, Hkv, 2 * L, DK), np.float32); ck[:, :, :L] = k
        cv = np.zeros((S, Hkv, 2 * L, DV), np.float32); cv[:, :, :L] = v
        bk, bv = ctx.from_numpy(ck, type=gg.Type[typ]), ctx.from_numpy(cv, type=gg.Type[vtyp])
        tk = gg.view_4d(bk, DK, L, Hkv, S, bk.nb[1], bk.nb[2], bk.nb[3], 0)
        tv = gg.view_4d(bv, DV, L, Hkv, S, bv.nb[1], bv.nb[2], bv.nb[3], 0)
    elif kv_view == "permuted":
        # heads inside positions ([DK, Hkv, L, S] storage, permuted): nb1 > nb2
        bk = ctx.from_numpy(np.ascontiguousarray(k.transpose(0, 2, 1, 3)), type=gg.Type[typ])
        bv = ctx.from_numpy(np.ascontiguousarray(v.transpose(0, 2, 1, 3)), type=gg.Type[vtyp])
        tk, tv = gg.permute(bk, 0, 2, 1, 3), gg.permute(bv, 0, 2, 1, 3)
    else:
        tk, tv = ctx.from_numpy(k, type=gg.Type[typ]), ctx.from_numpy(v, type=gg.Type[vtyp])
    m = make_mask(rng, mask, S, N, L, M2, M3)
    tm = None if m is None else ctx.from_numpy(m)
    scale = 1.0 / np.sqrt(DK)
    out = gg.flash_attn_ext(tq, tk, tv, tm, scale, max_bias, softcap)
    sk = None
    if sinks is True:
        sk = (rng.standard_normal(Hq) * 2).astype(np.float32)
    elif sinks is not False:            # the given sinks
        sk = np.asarray(sinks, np.float32)
    if sk is not None:
        gg.flash_attn_ext_add_sinks(out, ctx.from_numpy(sk))
    gg.flash_attn_ext_set_path(out, path)
    g = gg.CGraph()
    g.build_forward_expand(out)
    g.compute(n_threads=nth, use_ref=use_ref)
    ref = R.flash_attn_ext(q, R.roundtrip(k, typ), R.roundtrip(v, vtyp), m, scale, max_bias, softcap, sk)
    return out.to_numpy(), ref, out


def check(got, ref, typ, out=None, path=None):
    err = R.nmse(got, ref)
    assert err <= BOUND[typ], f"nmse {err:.3g} > {BOUND[typ]}"
    if out is not None and path not in (None, "auto"):
        assert gg.flash_attn_ext_get_path(out) == path


def shape_for(path):
    """a shape that exercises the path: decode for split, a ragged Q tile for tiled"""
    return {"N": 1, "L": 300} if path == "split" else {"N": 70 if path == "tiled" else 5, "L": 100}


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("typ", TYPES)
@pytest.mark.parametrize("path", PATHS)
def test_types(rng, path, typ, nth):
    got, ref, out = attn(rng, path=path, typ=typ, Hq=8, Hkv=2, mask="random", nth=nth, **shape_for(path))
    check(got, ref, typ, out, path)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("typ,vtyp", [("F16", "Q8_0"), ("Q4_0", "F32"), ("BF16", "F16")])
def test_mixed_kv_types(rng, path, typ, vtyp):
    got, ref, out = attn(rng, path=path, typ=typ, vtyp=vtyp, mask="causal", **shape_for(path))
    check(got, ref, max((typ, vtyp), key=lambda t: BOUND[t]), out, path)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("DK,DV", [(40, 40), (64, 64), (72, 72), (80, 80), (128, 128), (256, 256), (72, 40), (128, 80)])
def test_head_sizes(rng, path, DK, DV):
    shape = {"N": 1, "L": 130} if path == "split" else {"N": 65 if path == "tiled" else 3, "L": 70}
    got, ref, out = attn(rng, path=path, typ="F32", DK=DK, DV=DV, mask="causal", **shape)
    check(got, ref, "F32", out, path)


@pytest.mark.parametrize("G", [1, 4, 8])
@pytest.mark.parametrize("path", PATHS)
def test_gqa(rng, path, G):
    got, ref, out = attn(rng, path=path, typ="F16", Hq=2 * G, Hkv=2, mask="random", nth=2, **shape_for(path))
    check(got, ref, "F16", out, path)


GQA_WIDE = 12   # more query heads per KV head than PG_FA_SPLIT_HEADS and PG_FA_TILE_HEADS


@pytest.mark.parametrize("path", ("tiled", "split"))
def test_gqa_wider_than_blocks(rng, path):
    got, ref, out = attn(rng, path=path, typ="F32", Hq=GQA_WIDE, Hkv=1, mask="causal", **shape_for(path))
    check(got, ref, "F32", out, path)


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("L", [1, 63, 64, 65, 511, 512, 513, 2000])
def test_decode_lengths(rng, L, nth):
    """N = 1 over the split boundaries (segments of L/nth keys, blocks of 32); auto and forced split"""
    for path in ("auto", "split"):
        got, ref, out = attn(rng, path=path, typ="F16", Hq=8, Hkv=2, L=L, N=1, mask="causal", nth=nth)
        check(got, ref, "F16", out, path)


@pytest.mark.parametrize("nth", [1, 2, 3])
@pytest.mark.parametrize("typ", ["F16", "Q8_0"])
@pytest.mark.parametrize("mask", ["causal", "window", "alibi"])
def test_split_rows_are_one_row_steps(rng, mask, typ, nth):
    """split takes up to 16 query rows one after the other: each row's result is, bit for bit, the
    one-row decode step's at its position (its own mask row, its own key segments), so a verify
    step of speculative decoding gives each position what plain decoding gives it; the automatic
    choice takes split for such steps"""
    ctx = gg.Context()
    L, N, Hq, Hkv, DK = 300, 9, 8, 2, 64
    q = rng.standard_normal((1, Hq, N, DK)).astype(np.float32)
    k = ctx.from_numpy(rng.standard_normal((1, Hkv, L, DK)).astype(np.float32), type=gg.Type[typ])
    v = ctx.from_numpy(rng.standard_normal((1, Hkv, L, DK)).astype(np.float32), type=gg.Type[typ])
    m = make_mask(rng, mask, 1, N, L)
    max_bias = 8.0 if mask == "alibi" else 0.0
    nodes = [gg.flash_attn_ext(ctx.from_numpy(q), k, v, ctx.from_numpy(m), 0.125, max_bias)]
    nodes += [gg.flash_attn_ext(ctx.from_numpy(q[:, :, i:i + 1]), k, v, ctx.from_numpy(m[:, :, i:i + 1]), 0.125, max_bias)
              for i in range(N)]
    g = gg.CGraph()
    for t in nodes:
        g.build_forward_expand(t)
    g.compute(n_threads=nth)
    assert {gg.flash_attn_ext_get_path(t) for t in nodes} == {"split"}
    rows = nodes[0].to_numpy()                                     # [S, N, Hq, DV]
    for i, one in enumerate(nodes[1:]):
        np.testing.assert_array_equal(rows[:, i].view(np.uint32), one.to_numpy()[:, 0].view(np.uint32))
    got, ref, out = attn(rng, path="split", typ=typ, Hq=Hq, Hkv=Hkv, N=N, L=L, mask=mask, nth=nth, max_bias=max_bias)
    check(got, ref, typ, out, "split")                            # and the reference's values


@pytest.mark.parametrize("nth", [1, 2, 3])
@pytest.mark.parametrize("mask", ["padded", "window"])
@pytest.mark.parametrize("L", [64, 300, 513])
def test_decode_splits_the_visible_keys(rng, L, mask, nth):
    """split-KV segments cover the keys some head can see (the padded cache's hidden tail and the
    window's hidden head are nobody's work), ALiBi slopes included"""
    for max_bias in (0.0, 8.0):
        got, ref, out = attn(rng, path="split", typ="F16", Hq=8, Hkv=2, L=L, N=1, mask=mask, nth=nth,
                             max_bias=max_bias)
        check(got, ref, "F16", out, "split")


@pytest.mark.parametrize("N,L", [(1, 65), (7, 63), (64, 64), (65, 511), (200, 513)] + ([] if EMULATED else [(64, 2000)]))
@pytest.mark.parametrize("path", ("auto", "one_chunk", "tiled"))
def test_prefill_lengths(rng, path, N, L):
    if path == "one_chunk" and N * L > 20000:
        pytest.skip("one_chunk is covered on the smaller shapes")
    got, ref, out = attn(rng, path=path, typ="F16", Hq=2, Hkv=1, N=N, L=L, DK=64, mask="causal", nth=2)
    check(got, ref, "F16", out, path)


@pytest.mark.parametrize("mask", ["none", "causal", "random", "dead", "window"])
@pytest.mark.parametrize("path", PATHS)
def test_masks(rng, path, mask):
    got, ref, out = attn(rng, path=path, typ="F32", mask=mask, **shape_for(path))
    check(got, ref, "F32", out, path)
    if mask == "dead":      # query row 0 sees no key: exact zeros
        assert not np.any(got[:, 0])


@pytest.mark.parametrize("path", PATHS)
def test_tiled_skips_masked_tiles_and_dead_rows(rng, path):
    """causal prefill with L = N: whole KV tiles are masked for the first Q tiles"""
    got, ref, out = attn(rng, path=path, typ="F16", N=1 if path == "split" else 130, L=200, mask="causal")
    check(got, ref, "F16", out, path)


@pytest.mark.parametrize("path", PATHS)
def test_mask_broadcast_and_sequences(rng, path):
    """S = 2 sequences, mask slices per head (M2 = Hq) and per sequence (M3 = 2)"""
    shape = {"N": 1, "L": 200} if path == "split" else shape_for(path)
    S = 1 if path == "split" else 2
    got, ref, out = attn(rng, path=path, typ="F16", S=S, Hq=4, Hkv=2, mask="random", M2=4, M3=S, nth=2, **shape)
    check(got, ref, "F16", out, path)


@pytest.mark.parametrize("path", PATHS)
def test_alibi(rng, path):
    got, ref, out = attn(rng, path=path, typ="F32", Hq=6, Hkv=2, mask="alibi", max_bias=8.0, **shape_for(path))
    check(got, ref, "F32", out, path)


@pytest.mark.parametrize("mask", ["none", "causal"])
@pytest.mark.parametrize("path", PATHS)
def test_softcap(rng, path, mask):
    """L = 65: the last KV tile holds one key and 63 padding keys, which must get no weight
    (ggml leaks exp(-softcap - M) to them on its tiled path without a mask)"""
    shape = {"N": 1, "L": 65} if path == "split" else {"N": 70 if path == "tiled" else 5, "L": 65}
    got, ref, out = attn(rng, path=path, typ="F32", mask=mask, softcap=2.0, **shape)
    check(got, ref, "F32", out, path)


@pytest.mark.parametrize("mask", ["causal", "dead"])
@pytest.mark.parametrize("path", PATHS)
def test_sinks(rng, path, mask):
    got, ref, out = attn(rng, path=path, typ="F32", Hq=4, Hkv=2, mask=mask, sinks=True, nth=2, **shape_for(path))
    check(got, ref, "F32", out, path)


@pytest.mark.parametrize("mask", ["none", "causal", "dead"])
@pytest.mark.parametrize("path", PATHS)
def test_sinks_far_above_and_below_the_scores(rng, path, mask):
    """A sink far above every score (the denominator is almost all sink: the output is ~e^-25 times
    the values, and stays accurate relative to that), far below (no effect) and near them, per head;
    rows with no visible key are 0 whatever the sink"""
    sk = np.array([25.0, -25.0, 0.5, 3.0], np.float32)
    got, ref, out = attn(rng, path=path, typ="F32", Hq=4, Hkv=2, mask=mask, sinks=sk, nth=2, **shape_for(path))
    assert gg.flash_attn_ext_get_path(out) == path
    assert np.isfinite(got).all()
    for h in range(4):          # out [S, N, Hq, DV], each head against its own scale
        g, r = got[:, :, h], ref[:, :, h]
        assert np.abs(g - r).max() <= 1e-5 * np.abs(r).max() + 1e-30, h


@pytest.mark.parametrize("path", PATHS)
def test_q_view(rng, path):
    """q as a permuted view (rows of one head nb1 = Hq * DK * 4 apart): the tiled path reads Q in place"""
    got, ref, out = attn(rng, path=path, typ="F16", Hq=4, Hkv=2, mask="window", q_view=True, nth=2, **shape_for(path))
    check(got, ref, "F16", out, path)


@pytest.mark.parametrize("view", ["cache", "permuted"])
@pytest.mark.parametrize("path", PATHS)
def test_kv_views(rng, path, view):
    typ = "Q8_0" if view == "cache" else "F16"
    got, ref, out = attn(rng, path=path, typ=typ, Hq=4, Hkv=2, mask="causal", kv_view=view, nth=2, **shape_for(path))
    check(got, ref, typ, out, path)


def test_automatic_choice_and_use_ref(rng):
    _, _, out = attn(rng, typ="F16", N=1, L=2000)
    assert gg.flash_attn_ext_get_path(out) == "split"
    _, _, out = attn(rng, typ="F16", N=1, L=8)
    assert gg.flash_attn_ext_get_path(out) == "one_chunk"
    _, _, out = attn(rng, typ="F16", N=64, L=64)
    assert gg.flash_attn_ext_get_path(out) == "tiled"
    _, _, out = attn(rng, typ="F16", N=63, L=64)
    assert gg.flash_attn_ext_get_path(out) == "one_chunk"
    got, ref, out = attn(rng, path="tiled", typ="F16", N=64, L=64, use_ref=True)
    assert gg.flash_attn_ext_get_path(out) == "one_chunk"
    check(got, ref, "F16")


def test_the_plan_chooses_the_path_and_sizes_the_work_for_it(ctx):
    """The path is a plan decision (Plan.paths), made per plan (use_ref forces one_chunk) and
    reported by get_path for the plan last computed; the work buffer holds that path's scratch only."""
    q = ctx.new_tensor(gg.Type.F32, (64, 1, 8))
    k = ctx.new_tensor(gg.Type.F16, (64, 256, 2))
    out = gg.flash_attn_ext(q, k, k, None, 0.125)
    g = gg.CGraph()
    g.build_forward_expand(out)
    auto, ref = g.plan(2), g.plan(2, use_ref=True)
    assert auto.paths == {out: "split"} and ref.paths == {out: "one_chunk"}
    # split: q * scale for every head and the per-thread partials; one_chunk: a few rows
    assert ref.work_size < auto.work_size
    assert auto.work_size >= 2 * 8 * 64 * 4 + 2 * 8 * (64 + 16) * 4
    g.compute(2, use_ref=True)
    assert gg.flash_attn_ext_get_path(out) == "one_chunk"
    g.compute(2)
    assert gg.flash_attn_ext_get_path(out) == "split"


def test_path_not_reported_before_compute(ctx):
    q = ctx.new_tensor(gg.Type.F32, (32, 1, 2))
    k = ctx.new_tensor(gg.Type.F16, (32, 4, 2))
    out = gg.flash_attn_ext(q, k, k, None, 1.0)
    assert gg.flash_attn_ext_get_path(out) is None


def test_prec_and_split_reusing_graph(rng, ctx):
    """set_prec is accepted and changes nothing; a graph computed twice with new K gives new results"""
    q = ctx.from_numpy(rng.standard_normal((4, 1, 64)).astype(np.float32))
    kn = rng.standard_normal((2, 600, 64)).astype(np.float32)
    k = ctx.from_numpy(kn, type=gg.Type.F16)
    out = gg.flash_attn_ext_set_prec(gg.flash_attn_ext(q, k, k, None, 0.125), gg.Prec.F32)
    g = gg.CGraph()
    g.build_forward_expand(out)
    for _ in range(2):
        kn = rng.standard_normal((2, 600, 64)).astype(np.float32)
        k.set(kn)
        g.compute(n_threads=2)
        kr = R.round_f16(kn)[None]
        check(out.to_numpy(), R.flash_attn_ext(q.to_numpy()[None], kr, kr, None, 0.125), "F16")
    assert gg.flash_attn_ext_get_path(out) == "split"


def test_errors(ctx):
    q = ctx.new_tensor(gg.Type.F32, (64, 3, 8))
    k = ctx.new_tensor(gg.Type.F16, (64, 20, 2))
    v = ctx.new_tensor(gg.Type.F16, (48, 20, 2))
    fa = gg.flash_attn_ext
    with pytest.raises(ValueError, match=r"flash_attn_ext: k.ne\[0\] must equal q.ne\[0\] = 64"):
        fa(q, ctx.new_tensor(gg.Type.F16, (32, 20, 2)), v, None, 1.0)
    with pytest.raises(ValueError, match=r"Hq = 8\) must be a multiple of k.ne\[2\] \(Hkv = 3\)"):
        fa(q, ctx.new_tensor(gg.Type.F16, (64, 20, 3)), ctx.new_tensor(gg.Type.F16, (48, 20, 3)), None, 1.0)
    with pytest.raises(TypeError, match="flash_attn_ext: q must be of type F32, got F16"):
        fa(ctx.new_tensor(gg.Type.F16, (64, 3, 8)), k, v, None, 1.0)
    with pytest.raises(TypeError, match="flash_attn_ext: k must be of type .*got I32"):
        fa(q, ctx.new_tensor(gg.Type.I32, (64, 20, 2)), v, None, 1.0)
    with pytest.raises(TypeError, match="flash_attn_ext: mask must be of type F16, got F32"):
        fa(q, k, v, ctx.new_tensor(gg.Type.F32, (20, 3)), 1.0)
    with pytest.raises(ValueError, match=r"mask.ne\[0\] must be >= L = 20, got 19"):
        fa(q, k, v, ctx.new_tensor(gg.Type.F16, (19, 3)), 1.0)
    with pytest.raises(ValueError, match=r"mask.ne\[1\] must be >= N = 3, got 2"):
        fa(q, k, v, ctx.new_tensor(gg.Type.F16, (20, 2)), 1.0)
    with pytest.raises(ValueError, match=r"must be multiples of mask.ne\[2:4\]"):
        fa(q, k, v, ctx.new_tensor(gg.Type.F16, (20, 3, 3)), 1.0)
    with pytest.raises(ValueError, match=r"max_bias > 0 \(got 8.0\) needs a mask"):
        fa(q, k, v, None, 1.0, 8.0)
    with pytest.raises(ValueError, match=r"v.ne\[1:3\] must equal k.ne\[1:3\]"):
        fa(q, k, ctx.new_tensor(gg.Type.F16, (48, 21, 2)), None, 1.0)
    with pytest.raises(ValueError, match="q must be packed in dim 0"):
        fa(gg.permute(ctx.new_tensor(gg.Type.F32, (3, 64, 8)), 1, 0, 2, 3), k, v, None, 1.0)
    out = fa(q, k, v, None, 1.0)
    with pytest.raises(ValueError, match=r"sinks must have ne=\(8, 1, 1, 1\).*got \(4, 1, 1, 1\)"):
        gg.flash_attn_ext_add_sinks(out, ctx.new_tensor(gg.Type.F32, (4,)))
    with pytest.raises(TypeError, match="sinks must be of type F32, got F16"):
        gg.flash_attn_ext_add_sinks(out, ctx.new_tensor(gg.Type.F16, (8,)))
    gg.flash_attn_ext_set_path(out, "split")                     # N = 3 rows: one after the other
    many = fa(ctx.new_tensor(gg.Type.F32, (64, 17, 8)), k, v, None, 1.0)
    with pytest.raises(ValueError, match="the split path needs N <= 16 and S == 1, got N=17"):
        gg.flash_attn_ext_set_path(many, "split")
    with pytest.raises(ValueError, match="path must be one of"):
        gg.flash_attn_ext_set_path(out, "fast")
    with pytest.raises(ValueError, match="prec must be a pyggml.Prec"):
        gg.flash_attn_ext_set_prec(out, 3)
    with pytest.raises(ValueError, match="t must be a flash_attn_ext result"):
        gg.flash_attn_ext_set_path(q, "tiled")


@pytest.mark.parametrize("path", PATHS)
def test_against_torch_sdpa(rng, path):
    torch = pytest.importorskip("torch")
    ctx = gg.Context()
    Hq, Hkv, D = 8, 2, 64
    N, L = (1, 300) if path == "split" else (70, 70)
    q = rng.standard_normal((1, Hq, N, D)).astype(np.float32)
    k = rng.standard_normal((1, Hkv, L, D)).astype(np.float32)
    v = rng.standard_normal((1, Hkv, L, D)).astype(np.float32)
    causal = path != "split"
    m = make_mask(rng, "causal", 1, N, L) if causal else None
    out = gg.flash_attn_ext(ctx.from_numpy(q), ctx.from_numpy(k), ctx.from_numpy(v),
                            None if m is None else ctx.from_numpy(m), 1.0 / np.sqrt(D))
    gg.flash_attn_ext_set_path(out, path)
    g = gg.CGraph()
    g.build_forward_expand(out)
    g.compute(n_threads=2)
    want = torch.nn.functional.scaled_dot_product_attention(
        torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), is_causal=causal, enable_gqa=True)
    check(out.to_numpy(), want.numpy().transpose(0, 2, 1, 3), "F32")
