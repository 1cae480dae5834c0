"""GLU (glu, glu_split, swiglu, swiglu_split) and the unary activations silu, gelu, gelu_erf, gelu_quick, tanh."""
import numpy as np
import pytest
import reference as ref
from conftest import EMULATED, THREADS, run

import pyggml as gg

WIDTHS = (1, 3, 17, 33, 257) if EMULATED else (1, 3, 17, 33, 4095)
GLU_OPS = [op for op in gg.GluOp if op != gg.GluOp.SWIGLU_OAI]     # swiglu_oai: test_moe.py
DTYPES = {gg.Type.F32: np.float32, gg.Type.F16: np.float16}
BOUND = {gg.Type.F32: 1e-7, gg.Type.F16: 1e-5}      # F16: one rounding of the result (2^-11 relative)


def inputs(rng, shape, typ):
    """Values spread over the interesting range, as stored in a tensor of typ (float64 for references)."""
    x = (3 * rng.standard_normal(shape)).astype(DTYPES[typ])
    x.flat[:4] = np.array([-30, -9, 9, 30])[:x.size]       # saturated tails
    return x


def check(out, want, typ):
    got = out.to_numpy().reshape(want.shape)
    assert out.type == typ
    assert np.isfinite(got).all()
    assert ref.nmse(got, want) < BOUND[typ]


@pytest.mark.parametrize("op", GLU_OPS)
@pytest.mark.parametrize("swapped", [False, True])
@pytest.mark.parametrize("typ", [gg.Type.F32, gg.Type.F16])
@pytest.mark.parametrize("nth", THREADS)
def test_glu_ops(ctx, rng, op, swapped, typ, nth):
    a = inputs(rng, (3, 5, 2 * 37), typ)
    out = gg.glu(ctx.from_numpy(a), op, swapped)
    assert out.ne == (37, 5, 3, 1)
    run(out, nth)
    check(out, ref.glu(a, op, swapped), typ)


@pytest.mark.parametrize("n", WIDTHS)
@pytest.mark.parametrize("typ", [gg.Type.F32, gg.Type.F16])
@pytest.mark.parametrize("nth", THREADS)
def test_swiglu_widths(ctx, rng, n, typ, nth):
    a = inputs(rng, (7, 2 * n), typ)
    out = gg.swiglu(ctx.from_numpy(a))
    run(out, nth)
    check(out, ref.glu(a, gg.GluOp.SWIGLU), typ)


def test_glu_odd_width_ignores_last(ctx, rng):
    a = inputs(rng, (4, 2 * 17 + 1), gg.Type.F32)
    out = gg.glu(ctx.from_numpy(a), gg.GluOp.GEGLU, True)
    assert out.ne[0] == 17
    run(out)
    check(out, ref.glu(a, gg.GluOp.GEGLU, True), gg.Type.F32)


@pytest.mark.parametrize("op", GLU_OPS)
@pytest.mark.parametrize("typ", [gg.Type.F32, gg.Type.F16])
@pytest.mark.parametrize("nth", THREADS)
def test_glu_split(ctx, rng, op, typ, nth):
    a, b = inputs(rng, (2, 3, 45), typ), inputs(rng, (2, 3, 45), typ)
    out = gg.glu_split(ctx.from_numpy(a), ctx.from_numpy(b), op)
    run(out, nth)
    check(out, ref.glu_split(a, b, op), typ)


def test_swiglu_split_and_swapped_differ(ctx, rng):
    a, b = inputs(rng, (4, 40), gg.Type.F32), inputs(rng, (4, 40), gg.Type.F32)
    out = gg.swiglu_split(ctx.from_numpy(a), ctx.from_numpy(b))
    ab = np.concatenate([a, b], axis=1)
    sw = gg.glu(ctx.from_numpy(ab), gg.GluOp.SWIGLU, swapped=True)
    run([out, sw])
    check(out, ref.glu_split(a, b, gg.GluOp.SWIGLU), gg.Type.F32)
    check(sw, ref.glu_split(b, a, gg.GluOp.SWIGLU), gg.Type.F32)


@pytest.mark.parametrize("typ", [gg.Type.F32, gg.Type.F16])
@pytest.mark.parametrize("nth", THREADS)
def test_glu_strided_rows(ctx, rng, typ, nth):
    # every other row of a bigger tensor, and a permuted split operand
    base = inputs(rng, (6, 2 * 19), typ)
    tb = ctx.from_numpy(base)
    view = gg.view_2d(tb, 2 * 19, 3, 2 * tb.nb[1], tb.nb[1])
    out = gg.glu(view, gg.GluOp.SWIGLU)
    p = inputs(rng, (5, 4, 19), typ)
    tp = gg.permute(ctx.from_numpy(p), 0, 2, 1, 3)                 # ne [19, 5, 4], dims 1/2 strided
    q = inputs(rng, (4, 5, 19), typ)
    out2 = gg.glu_split(tp, ctx.from_numpy(q), gg.GluOp.GEGLU)
    run([out, out2], nth)
    check(out, ref.glu(base[1::2], gg.GluOp.SWIGLU), typ)
    check(out2, ref.glu_split(p.transpose(1, 0, 2), q, gg.GluOp.GEGLU), typ)


UNARY = [(gg.silu, ref.silu), (gg.gelu, ref.gelu), (gg.gelu_erf, ref.gelu_erf), (gg.gelu_quick, ref.gelu_quick),
         (gg.tanh, ref.tanh)]
UNARY_IDS = ["silu", "gelu", "gelu_erf", "gelu_quick", "tanh"]


@pytest.mark.parametrize("fn,want", UNARY, ids=UNARY_IDS)
@pytest.mark.parametrize("n", WIDTHS)
@pytest.mark.parametrize("typ", [gg.Type.F32, gg.Type.F16])
@pytest.mark.parametrize("nth", THREADS)
def test_unary(ctx, rng, fn, want, n, typ, nth):
    a = inputs(rng, (3, n), typ)
    out = fn(ctx.from_numpy(a))
    run(out, nth)
    check(out, want(a), typ)


@pytest.mark.parametrize("fn,want", UNARY, ids=UNARY_IDS)
def test_unary_strided(ctx, rng, fn, want):
    base = inputs(rng, (4, 3, 21), gg.Type.F32)
    t = gg.permute(ctx.from_numpy(base), 0, 2, 1, 3)
    out = fn(t)
    run(out, 2)
    check(out, want(base.transpose(1, 0, 2)), gg.Type.F32)


def test_unary_elementwise_accuracy(ctx):
    # relative error per element, not only NMSE: a sweep over [-12, 12]
    x = np.linspace(-12, 12, 4097).astype(np.float32)
    for fn, want in UNARY:
        out = fn(ctx.from_numpy(x))
        run(out)
        w = want(x)
        big = np.abs(w) > 1e-3
        err = np.abs(out.to_numpy() - w)
        assert (err[big] / np.abs(w[big])).max() < 2e-6, fn.__name__
        assert err[~big].max() < 1e-6, fn.__name__


def test_tanh_edges(ctx):
    # both sides of the polynomial/exp switch at |x| = 0.625, tiny and subnormal inputs (tanh(x) = x),
    # saturation, the signed zeros, infinities and NaN; every SIMD lane position is hit by the repeat
    x = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-40, 1e-4, -1e-4, 0.6249999, 0.625, 0.6250001, -0.625, 9.0, 10.0,
                  -10.0, 50.0, 1e30, -1e30, np.inf, -np.inf, np.nan], np.float32)
    x = np.tile(x, 5)
    out = gg.tanh(ctx.from_numpy(x))
    run(out)
    got = out.to_numpy()
    w = ref.tanh(x)
    ok = ~np.isnan(x)
    assert np.isnan(got[~ok]).all()
    np.testing.assert_allclose(got[ok], w[ok], rtol=2e-7, atol=0)
    assert (np.signbit(got[ok]) == np.signbit(x[ok])).all()


def test_f16_rounded_once(ctx, rng):
    a = inputs(rng, (2, 64), gg.Type.F16)
    out = gg.swiglu(ctx.from_numpy(a))
    run(out)
    want = ref.round_f16(ref.glu(a, gg.GluOp.SWIGLU)).astype(np.float32)
    # the f32 result rounded once to f16 matches the f64 result rounded to f16 almost everywhere
    assert np.mean(out.to_numpy() == want) > 0.99


def test_bad_input(ctx):
    a = ctx.new_tensor(gg.Type.F32, (8, 3))
    with pytest.raises(ValueError, match=r"glu: op must be a pyggml.GluOp \(REGLU, .*\), got 6"):
        gg.glu(a, 6)
    with pytest.raises(ValueError, match=r"glu_split: op must be a pyggml.GluOp"):
        gg.glu_split(a, a, 7)
    with pytest.raises(TypeError, match="glu: a must be of type F16, F32, got BF16"):
        gg.glu(ctx.new_tensor(gg.Type.BF16, (8, 3)), gg.GluOp.SWIGLU)
    with pytest.raises(TypeError, match="glu: a must be a pyggml.Tensor, got ndarray"):
        gg.swiglu(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match=r"glu: a.ne\[0\] must be >= 2 to split into x and g, got 1"):
        gg.swiglu(ctx.new_tensor(gg.Type.F32, (1, 3)))
    with pytest.raises(ValueError, match="glu: a must be packed in dim 0"):
        gg.swiglu(gg.transpose(a))
    with pytest.raises(TypeError, match="glu_split: b must have a's type F32, got F16"):
        gg.swiglu_split(a, ctx.new_tensor(gg.Type.F16, (8, 3)))
    with pytest.raises(ValueError, match=r"glu_split: b must have ne=\(8, 3, 1, 1\), got \(8, 4, 1, 1\)"):
        gg.swiglu_split(a, ctx.new_tensor(gg.Type.F32, (8, 4)))
    with pytest.raises(ValueError, match="glu_split: b must be packed in dim 0"):
        gg.swiglu_split(ctx.new_tensor(gg.Type.F32, (3, 8)), gg.transpose(a))
    for fn in (gg.silu, gg.gelu, gg.gelu_erf, gg.gelu_quick, gg.tanh):
        with pytest.raises(TypeError, match=f"{fn.__name__}: a must be of type F16, F32, got I32"):
            fn(ctx.new_tensor(gg.Type.I32, (4,)))
        with pytest.raises(ValueError, match=f"{fn.__name__}: a must be packed in dim 0"):
            fn(gg.transpose(a))
