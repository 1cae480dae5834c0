"""Regressions of issue 12 (docs/reliability.md): inputs that crashed pyggml or returned wrong numbers
silently, and the error messages of nonsense input. Thread safety is in test_reliability_threads.py,
the property tests over every builder in test_props.py."""
import pickle
import re

import numpy as np
import pytest
import reference as R
from conftest import THREADS, run

import pyggml as gg

# ---- bounds: every size in exact integer arithmetic ----


def test_view_whose_extent_wraps_64_bits_is_refused(ctx):
    a = ctx.from_numpy(np.ones(1, np.float32))
    # (ne1 - 1) * nb1 = 2^64: wrapped to 0 in size_t, the view passed as 4 bytes
    with pytest.raises(ValueError, match=r"view_4d: a tensor of ne=\(1, 2147483649, 1, 1\).* is too large"):
        gg.view_4d(a, 1, 2**31 + 1, 1, 1, 2**33, 4, 4, 0)
    with pytest.raises(ValueError, match="view_2d: .* too large"):
        gg.view_2d(a, 1, 2, 2**70, 0)                       # a stride beyond size_t
    with pytest.raises(ValueError, match="view_1d: .* too large"):
        gg.view_1d(a, 2**62, 0)
    with pytest.raises(ValueError, match=r"view_1d: view of \d+ bytes .* out of the bounds"):
        gg.view_1d(a, 1, 2**64)                             # an offset beyond size_t
    with pytest.raises(ValueError, match="new_tensor: .* too large"):
        ctx.new_tensor(gg.Type.F32, (2**32, 2**32, 2**32))  # 2^98 bytes, 0 after wrapping
    with pytest.raises(ValueError, match="new_tensor: .* too large"):
        ctx.new_tensor(gg.Type.F32, (0, 2**70))             # no element, but ne[1] is no int64


def test_view_in_bounds_up_to_the_last_byte(ctx):
    a = ctx.from_numpy(np.arange(12, dtype=np.float32))
    v = gg.view_2d(a, 2, 3, 16, 8)                          # elements 2,3 6,7 10,11: ends at byte 48
    np.testing.assert_array_equal(v.numpy(), [[2, 3], [6, 7], [10, 11]])
    with pytest.raises(ValueError, match=r"view_2d: view of 52 bytes \(offset 12\) is out of the bounds"):
        gg.view_2d(a, 2, 3, 16, 12)


@pytest.mark.parametrize("typ, size", [(gg.Type.F32, 4), (gg.Type.F16, 2), (gg.Type.I64, 8), (gg.Type.Q8_0, 34)])
def test_misaligned_views_are_refused(ctx, typ, size):
    a = ctx.new_tensor(typ, (64, 4))
    ne0 = 32 if typ == gg.Type.Q8_0 else 3
    assert gg.view_1d(a, ne0, size).view_offs == size      # a whole element in: fine
    msg = f"the byte offset .* must be multiples of its element size {size}"
    with pytest.raises(ValueError, match="view_1d: " + msg):
        gg.view_1d(a, ne0, size + 1)
    with pytest.raises(ValueError, match="view_2d: " + msg):
        gg.view_2d(a, ne0, 2, a.nb[1] + 1, 0)
    with pytest.raises(ValueError, match="view_1d: " + msg):
        gg.view_1d(gg.view_1d(a, 2 * ne0, size), ne0, size // 2)   # misaligned through a view of a view


# ---- two graphs, one node: the ownership rule ----


def _chain(ctx):
    """a -> x = 16 -> y = 16 -> w = 32: in a graph of w, y takes a fresh block and w reuses x's."""
    a = ctx.from_numpy(np.full(64, 2, np.float32))
    x = gg.scale(a, 8.0)
    y = gg.scale(x, 1.0)
    w = gg.scale(y, 2.0)
    return a, x, y, w


def test_memory_reuse_does_not_leak_into_another_graph(ctx):
    _, x, _, w = _chain(ctx)
    g1 = gg.CGraph()
    g1.build_forward_expand(gg.scale(w, 1.0))
    g1.compute(1)
    out = gg.add(x, w)                       # x and w shared g1's block: w overwrote x before the add
    g2 = run(out)
    np.testing.assert_array_equal(out.numpy(), 48)
    assert x.data_ptr != w.data_ptr
    g1.compute(1)                            # g1 re-plans around the shared nodes
    g2.compute(2)
    np.testing.assert_array_equal(out.numpy(), 48)


def test_memory_reuse_of_a_dead_graph_does_not_leak(ctx):
    _, x, _, w = _chain(ctx)
    run(gg.scale(w, 1.0))                    # the graph is gone, its arena lives on in x and w
    out = gg.add(x, w)
    run(out)
    np.testing.assert_array_equal(out.numpy(), 48)


@pytest.mark.parametrize("nth", THREADS)
def test_two_graphs_sharing_an_intermediate(ctx, nth):
    _, x, y, w = _chain(ctx)
    g1 = gg.CGraph()
    g1.build_forward_expand(w)
    g2 = gg.CGraph()
    z = gg.scale(y, 3.0)                     # y: an intermediate of g1, planned by it
    g2.build_forward_expand(z)
    g1.compute(nth)
    g2.compute(nth)
    g1.build_forward_expand(gg.scale(w, 0.5))   # re-plans g1: y used to lose its memory under g2
    g2.compute(nth)
    g1.compute(nth)
    np.testing.assert_array_equal(z.numpy(), 48)
    np.testing.assert_array_equal(w.numpy(), 32)
    assert y.has_data and x.has_data


def test_a_shared_node_keeps_its_value(ctx):
    a, _, _, w = _chain(ctx)
    run(w)
    v = gg.view_1d(w, 8, 16)                 # a view made before w moves to memory of its own
    g2 = gg.CGraph()
    g2.build_forward_expand(gg.add(w, a))
    np.testing.assert_array_equal(w.numpy(), 32)   # expanded, not computed: the value is kept
    run(gg.cont(v))
    np.testing.assert_array_equal(v.numpy(), 32)


# ---- quantized tensors out of numpy ----


@pytest.mark.parametrize("typ", ["Q8_0", "Q4_0"])
def test_quantized_views_keep_dim_0(ctx, rng, typ):
    """A transposed Q8_0 tensor addressed no element (to_numpy returned uninitialised memory): views
    that move the dim the blocks run along are refused when built."""
    x = rng.standard_normal((4, 3, 64)).astype(np.float32)
    t = ctx.from_numpy(x, type=gg.Type[typ])
    with pytest.raises(ValueError, match=f"transpose: a {typ} tensor must keep dim 0 in place"):
        gg.transpose(t)
    for axes in ((1, 0, 2, 3), (2, 1, 0, 3), (3, 0, 1, 2)):
        with pytest.raises(ValueError, match=f"permute: a {typ} tensor must keep dim 0 in place .* got axes " +
                           re.escape(str(axes))):
            gg.permute(t, *axes)
    kept = gg.permute(t, 0, 2, 1, 3)         # dim 0 stays: a strided but valid quantized view
    np.testing.assert_array_equal(kept.to_numpy(), R.roundtrip(x, typ).transpose(1, 0, 2))


# ---- numpy dtypes into integer tensors ----


def test_from_numpy_integer_mapping(ctx):
    for dtype in (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, np.uint64):
        t = ctx.from_numpy(np.array([0, 1, 100], dtype))
        assert t.type == gg.Type.I32, dtype
        np.testing.assert_array_equal(t.numpy(), [0, 1, 100])
    assert ctx.from_numpy(np.array([2**40])).type == gg.Type.I64
    b = ctx.from_numpy(np.array([True, False]))
    assert b.type == gg.Type.F32
    np.testing.assert_array_equal(b.numpy(), [1.0, 0.0])


@pytest.mark.parametrize("arr, typ, exc, match", [
    (np.array([4_000_000_000], np.uint32), None, ValueError, r"value 4000000000 does not fit in I32"),
    (np.array([2**63], np.uint64), None, ValueError, "does not fit in I32"),
    (np.array([2**31, 0]), gg.Type.I32, ValueError, r"value 2147483648 does not fit in I32 \[-2147483648, "),
    (np.array([-129]), gg.Type.I8, ValueError, "value -129 does not fit in I8"),
    (np.array([1.7, -2.5]), gg.Type.I32, TypeError, "a I32 tensor takes integer values, got an array of dtype float64"),
    (np.array([1.0]), gg.Type.I64, TypeError, "I64 tensor takes integer values"),
])
def test_from_numpy_out_of_range_raises(ctx, arr, typ, exc, match):
    with pytest.raises(exc, match="from_numpy: .*" + match):   # named as called, not as set()
        ctx.from_numpy(arr, type=typ)


def test_set_into_integer_tensor(ctx):
    t = ctx.new_tensor(gg.Type.I32, (3,))
    t.set(np.array([1, -2, 2**31 - 1], np.int64))             # fits: written exactly
    np.testing.assert_array_equal(t.numpy(), [1, -2, 2**31 - 1])
    with pytest.raises(ValueError, match="set: value -2147483649 does not fit"):
        t.set(np.array([0, -2**31 - 1, 0]))
    with pytest.raises(TypeError, match="set: a I32 tensor takes integer values"):
        t.set(np.zeros(3, np.float32))
    np.testing.assert_array_equal(t.numpy(), [1, -2, 2**31 - 1])   # refused writes change nothing


# ---- attention: what the mask hides has no weight, on every path ----


def _poisoned_attention(rng, path, typ, mask, poison, nth):
    """flash_attn_ext whose K or V rows at a few keys hold NaN or inf (poison). Returns the result
    [S, N, Hq, DV], the reference over the clean rows and, per (s, i, h), whether the query row sees
    a poisoned key through the mask."""
    S, Hq, Hkv, DK = 1, 4, 2, 64
    N, L = (1, 150) if path == "split" else (70, 150)
    q = rng.standard_normal((S, Hq, N, DK)).astype(np.float32)
    k = rng.standard_normal((S, Hkv, L, DK)).astype(np.float32)
    v = rng.standard_normal((S, Hkv, L, DK)).astype(np.float32)
    M2 = Hq if mask == "per_head" else 1
    m = np.zeros((1, M2, N, L), np.float32)
    pos = np.arange(N)[:, None] + L - N - 5          # the last 5 cells are stale: hidden from every row
    m[..., np.arange(L)[None, :] > pos] = -np.inf
    bad = [np.arange(L - 5, L)]
    if N > 1:                                        # keys on the diagonal: seen by the later rows only
        bad.append(rng.choice(np.arange(L - N - 5, L - 5), 3, replace=False))
    if mask != "causal":
        m[rng.random(m.shape) < 0.25] = -np.inf
        holes = rng.choice(L - N - 5, 3, replace=False)
        m[:, ::2 if mask == "per_head" else 1, :, holes] = -np.inf   # per_head: hidden from heads 0, 2
        bad.append(holes)
    bad = np.concatenate(bad)
    kc, vc = k.copy(), v.copy()
    target = k if poison in ("k", "k_overflow") else v
    if poison == "k_overflow":                       # finite keys whose scores overflow to +-inf or NaN
        target[:, :, bad, :] = 3e38
    else:
        target[:, :, bad, 3] = {"k": np.nan, "v": np.nan, "v_inf": np.inf}[poison]
    ctx = gg.Context()
    tk, tv = ctx.from_numpy(k, type=gg.Type[typ]), ctx.from_numpy(v, type=gg.Type[typ])
    mh = m.astype(np.float16)
    scale = 1.0 / np.sqrt(DK)
    out = gg.flash_attn_ext(ctx.from_numpy(q), tk, tv, ctx.from_numpy(mh), scale)
    gg.flash_attn_ext_set_path(out, path)
    with np.errstate(invalid="ignore", over="ignore"):
        run(out, nth)
    assert gg.flash_attn_ext_get_path(out) == path
    kc[:, :, bad] = 0
    vc[:, :, bad] = 0
    ref = R.flash_attn_ext(q, R.roundtrip(kc, typ), R.roundtrip(vc, typ), mh, scale)
    seen = np.isfinite(mh[..., bad].astype(np.float32)).any(axis=-1)      # [1, M2, N]
    sees = np.broadcast_to(seen[:, np.arange(Hq) % M2], (S, Hq, N)).transpose(0, 2, 1)
    return out.to_numpy().reshape(ref.shape), ref, sees


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("poison", ["k", "v", "v_inf", "k_overflow"])
@pytest.mark.parametrize("mask", ["causal", "holes", "per_head"])
@pytest.mark.parametrize("path", ["one_chunk", "tiled", "split"])
def test_flash_attn_hidden_keys_have_no_weight(rng, path, mask, poison, nth):
    """A stale or overflowed KV-cache cell behind the mask must not change any row that cannot see
    it; a row that sees it is not finite, on every path alike."""
    for typ in ("F32", "F16"):
        got, ref, sees = _poisoned_attention(rng, path, typ, mask, poison, nth)
        clean = ~sees
        assert np.isfinite(got[clean]).all(), f"{typ}: a row that cannot see the poison is not finite"
        assert R.nmse(got[clean], ref[clean]) < 5e-4, typ
        if poison != "k_overflow":                   # a score of -inf leaves a row that sees it finite
            assert not np.isfinite(got[sees]).all(axis=-1).any(), f"{typ}: a row that sees the poison is finite"


# ---- clear errors for nonsense (op, argument, expected, actual) ----


def _graph_of(ctx):
    g = gg.CGraph()
    g.build_forward_expand(gg.scale(ctx.from_numpy(np.ones((512, 4), np.float32)), 2.0))   # a row per thread
    return g


@pytest.mark.parametrize("n_threads, exc, match", [
    (2**31, ValueError, r"n_threads must be >= 1 and <= 512, got 2147483648"),
    (513, ValueError, "n_threads must be >= 1 and <= 512, got 513"),
    (0, ValueError, "n_threads must be >= 1"),
    (1.5, TypeError, "n_threads must be an integer, got 1.5"),
    ("2", TypeError, "n_threads must be an integer, got '2'"),
])
def test_n_threads_is_checked(ctx, n_threads, exc, match):
    g = _graph_of(ctx)
    with pytest.raises(exc, match=match):
        g.compute(n_threads)
    with pytest.raises(exc, match=match):
        g.plan(n_threads)
    assert g.plan(np.int64(512)).n_threads == 512


def test_integers_are_not_truncated(ctx):
    a = ctx.from_numpy(np.ones((4, 8), np.float32))
    with pytest.raises(TypeError, match="new_tensor: each entry of ne must be an integer, got 4.7"):
        ctx.new_tensor(gg.Type.F32, (4.7,))
    with pytest.raises(TypeError, match="reshape: each entry of ne must be an integer, got 2.5"):
        gg.reshape(a, (2.5, 16))
    with pytest.raises(TypeError, match="view_1d: offset must be an integer, got 4.0"):
        gg.view_1d(a, 1, 4.0)
    with pytest.raises(TypeError, match="view_2d: strides must be an integer, got 32.5"):
        gg.view_2d(a, 8, 2, 32.5)
    with pytest.raises(TypeError, match="permute: axes must be an integer"):
        gg.permute(a, 1.0, 0, 2, 3)
    with pytest.raises(TypeError, match="CGraph: size must be an integer, got 1.5"):
        gg.CGraph(size=1.5)
    with pytest.raises(ValueError, match="CGraph: size must be >= 1 .* got -1"):
        gg.CGraph(size=-1)
    assert ctx.new_tensor(gg.Type.F32, (np.int64(3),)).ne == (3, 1, 1, 1)


def test_float_parameters_name_the_op(ctx):
    a = ctx.from_numpy(np.ones((4, 8), np.float32))
    with pytest.raises(TypeError, match="scale: s must be a number, got 'x'"):
        gg.scale(a, "x")
    with pytest.raises(TypeError, match="rms_norm: eps must be a number, got None"):
        gg.rms_norm(a, None)
    with pytest.raises(ValueError, match=r"soft_max_ext: scale must be finite .*, got inf"):
        gg.soft_max_ext(a, None, float("inf"))
    with pytest.raises(ValueError, match=r"scale: s must be finite .*, got 1e\+39"):
        gg.scale(a, 1e39)                              # overflows float32
    q = ctx.from_numpy(np.ones((1, 1, 2, 64), np.float32))
    with pytest.raises(ValueError, match="flash_attn_ext: scale must be finite"):
        gg.flash_attn_ext(q, q, q, None, float("-inf"))


def test_rope_parameters_that_make_nan_are_refused(ctx):
    x = ctx.from_numpy(np.ones((3, 2, 8), np.float32))
    pos = ctx.from_numpy(np.arange(3, dtype=np.int32))

    def rope(n_ctx_orig=0, ext_factor=0.0, beta_fast=32.0, beta_slow=1.0):
        return gg.rope_ext(x, pos, None, 8, 0, n_ctx_orig, 10000.0, 1.0, ext_factor, 1.0, beta_fast, beta_slow)
    with pytest.raises(ValueError, match=r"rope_ext: n_ctx_orig must be in \[0, 2\^31\), got -1"):
        rope(n_ctx_orig=-1)
    with pytest.raises(TypeError, match="rope_ext: n_ctx_orig must be an integer, got 4096.5"):
        rope(n_ctx_orig=4096.5)
    with pytest.raises(ValueError, match="rope_ext: ext_factor must be >= 0, got -0.5"):
        rope(ext_factor=-0.5)
    with pytest.raises(ValueError, match="rope_ext: beta_fast and beta_slow must be > 0 when ext_factor"):
        rope(n_ctx_orig=4096, ext_factor=1.0, beta_slow=-1.0)
    y = rope(n_ctx_orig=4096, ext_factor=1.0)            # YaRN with sound parameters
    run(y)
    assert np.isfinite(y.numpy()).all()


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("bad", [0.0, -1.0, np.nan, np.inf])
def test_rope_frequency_factors_are_checked_when_run(ctx, bad, fused):
    x = ctx.from_numpy(np.ones((3, 2, 8), np.float32))
    pos = ctx.from_numpy(np.arange(3, dtype=np.int32))
    ff = np.array([1.0, 2.0, bad, 4.0], np.float32)
    y = gg.rope_ext(x, pos, ctx.from_numpy(ff), 8, 0, 0, 10000.0, 1.0, 0.0, 1.0, 32.0, 1.0)
    out = y
    if fused:                                            # ROPE -> SET_ROWS into a cache
        cache = ctx.new_tensor(gg.Type.F16, (16, 4))
        out = gg.set_rows(cache, gg.reshape_2d(y, 16, 3), ctx.from_numpy(np.arange(3, dtype=np.int64)))
    g = gg.CGraph()
    g.build_forward_expand(out)
    assert bool(g.plan(2).fused) == fused
    with pytest.raises(ValueError, match=rf"rope: frequency factor c\[2\] must be finite and > 0, got {bad}"):
        g.compute(2)
    if fused:
        np.testing.assert_array_equal(cache.numpy(), 0)      # nothing written
    ff[2] = 3.0
    g.leafs[[t.nelements for t in g.leafs].index(4)].set(ff)
    g.compute(2)


def test_zero_element_results_still_check_indices(ctx):
    bad = ctx.from_numpy(np.array([7], np.int32))
    with pytest.raises(IndexError, match=r"get_rows: index 7 .* out of range \[0, 4\)"):
        run(gg.get_rows(ctx.new_tensor(gg.Type.F32, (0, 4)), bad))
    dst = ctx.new_tensor(gg.Type.F32, (0, 4))
    with pytest.raises(IndexError, match=r"set_rows: index 7 .* out of range \[0, 4\)"):
        run(gg.set_rows(dst, ctx.new_tensor(gg.Type.F32, (0, 1)), bad))
    run(gg.get_rows(ctx.new_tensor(gg.Type.F32, (0, 8)), bad))       # in range: nothing to copy


def test_after_a_data_error_no_set_rows_writes(ctx):
    """Documented (CGraph.compute, docs/reliability.md): once a compute has found a bad index, the
    set_rows nodes after it write nothing."""
    w = ctx.from_numpy(np.ones((4, 8), np.float32))
    rows = gg.get_rows(w, ctx.from_numpy(np.array([9], np.int32)))
    cache = ctx.new_tensor(gg.Type.F32, (8, 4))
    later = gg.set_rows(cache, ctx.from_numpy(np.ones((1, 8), np.float32)), ctx.from_numpy(np.array([0], np.int64)))
    with pytest.raises(IndexError, match="get_rows: index 9"):
        run([rows, later])
    np.testing.assert_array_equal(cache.numpy(), 0)


def test_small_messages(ctx):
    with pytest.raises(TypeError, match=r"cpy: F64 -> F32 is not supported: the float types \(F32, F16, BF16\) "
                                        r"and the quantized ones convert"):
        gg.cpy(ctx.new_tensor(gg.Type.F64, (4,)), ctx.new_tensor(gg.Type.F32, (4,)))
    assert ctx.new_tensor(gg.Type.F32, (0, 3)).tobytes() == b""
    assert ctx.new_tensor(gg.Type.Q8_0, (32, 0)).tobytes() == b""
    t = ctx.from_numpy(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="Tensor: a pyggml tensor cannot be pickled"):
        pickle.dumps(t)
    with pytest.raises(TypeError, match="CGraph: a graph cannot be pickled"):
        pickle.dumps(gg.CGraph())


# ---- non-finite values on the quantized paths: ggml's numerics, kept (docs/reliability.md) ----


@pytest.mark.parametrize("typ, overflow", [("Q8_0", 8.4e6), ("Q4_0", 5.3e5)])
def test_quantized_non_finite_values_are_ggml_s(ctx, typ, overflow):
    """What holds on every build (the exact garbage depends on the quantiser's SIMD path, as in ggml):
    inf, or a value past the fp16 block scale's range (127 or 8 times 65504), ruins its block; a NaN
    is stored as some finite value and a NaN activation in a quantized mul_mat gives a finite result
    on x86, RVV and the scalar loops, while NEON's Q8_0 quantiser (as ggml's) propagates the NaN into
    the block scale: there a NaN ruins its Q8_0 block and, through the Q8_0 activations, the product."""
    neon = gg.build_info()["simd"] == "neon"
    nan_finite = not neon
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32)
    for bad, finite in ((np.inf, False), (-np.inf, False), (overflow, False), (overflow * 0.98, True),
                        (np.nan, not (neon and typ == "Q8_0"))):
        y = x.copy()
        y[0, 3] = bad
        back = ctx.from_numpy(y, type=gg.Type[typ]).to_numpy()
        assert np.isfinite(back[0]).all() == finite, (bad, back[0, :4])
        np.testing.assert_array_equal(back[1], R.roundtrip(x[1:], typ)[0])     # other blocks untouched
    w = ctx.from_numpy(np.ones((2, 32), np.float32), type=gg.Type[typ])
    a = np.ones((1, 32), np.float32)
    a[0, 5] = np.nan
    out = gg.mul_mat(w, ctx.from_numpy(a))
    run(out)
    assert np.isfinite(out.numpy()).all() == nan_finite
