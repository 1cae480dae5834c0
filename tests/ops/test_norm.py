"""rms_norm and norm against the float64 references and ggml's f32 formula, and the plan-time fusion
of ADD -> RMS_NORM -> MUL (bit-identical to the separate nodes, applied only when it is safe)."""
import numpy as np
import pytest
import reference as ref
from conftest import EMULATED, THREADS, run

import pyggml as gg

NMSE = 1e-12
WIDTHS = (1, 3, 17, 4095)
OPS = {"rms_norm": (gg.rms_norm, ref.rms_norm, ref.rms_norm_ggml),
       "norm": (gg.norm, ref.norm, ref.norm_ggml)}


def check(got, x, op, eps):
    _, f64, f32 = OPS[op]
    assert ref.nmse(got, f64(x, eps)) < NMSE
    np.testing.assert_array_equal(got, f32(x, eps))


# ---- the ops ----

@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", WIDTHS)
@pytest.mark.parametrize("nth", THREADS)
def test_widths(ctx, rng, op, n, nth):
    x = rng.standard_normal((5, n)).astype(np.float32) + 0.5
    y = OPS[op][0](ctx.from_numpy(x), 1e-5)
    run(y, nth)
    assert y.type == gg.Type.F32 and y.ne == (n, 5, 1, 1)
    check(y.numpy(), x, op, 1e-5)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("nth", THREADS)
def test_many_rows(ctx, rng, op, nth):
    rows = 37 if EMULATED else 301
    x = (rng.standard_normal((rows, 257)) * 3).astype(np.float32)
    y = OPS[op][0](ctx.from_numpy(x), 1e-6)
    run(y, nth)
    check(y.numpy(), x, op, 1e-6)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape", [(7,), (3, 7), (2, 3, 7), (2, 2, 3, 7)])
def test_dims(ctx, rng, op, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    y = OPS[op][0](ctx.from_numpy(x), 1e-5)
    run(y, 2)
    assert y.numpy().shape == shape
    check(y.numpy(), x, op, 1e-5)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("eps", [0.0, 1e-6, 1e-2, 1.0])
def test_eps(ctx, rng, op, eps):
    x = rng.standard_normal((4, 33)).astype(np.float32)
    y = OPS[op][0](ctx.from_numpy(x), eps)
    run(y)
    assert y.op_params[:4] == np.float32(eps).tobytes()
    check(y.numpy(), x, op, eps)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("nth", THREADS)
def test_strided_rows(ctx, rng, op, nth):
    base = rng.standard_normal((6, 4, 40)).astype(np.float32)
    t = ctx.from_numpy(base)
    # 19 of every 40 floats, from float 3 on: rows padded in dim 1
    v = gg.view_3d(t, 19, 4, 6, 40 * 4, 40 * 4 * 4, 3 * 4)
    y = OPS[op][0](v, 1e-5)
    # dims 1 and 2 swapped: rows packed, dims 1-2 out of order
    yp = OPS[op][0](gg.permute(t, 0, 2, 1, 3), 1e-5)
    run([y, yp], nth)
    check(y.numpy(), base[:, :, 3:22], op, 1e-5)
    check(yp.numpy(), base.transpose(1, 0, 2), op, 1e-5)


def test_zero_row(ctx):
    x = np.zeros((2, 16), np.float32)
    x[1] = np.arange(16)
    y = gg.rms_norm(ctx.from_numpy(x), 1e-6)
    z = gg.norm(ctx.from_numpy(x), 1e-6)
    nan = gg.rms_norm(ctx.from_numpy(x[:1]), 0.0)
    run([y, z, nan])
    assert not y.numpy()[0].any() and not z.numpy()[0].any()
    check(y.numpy(), x, "rms_norm", 1e-6)
    check(z.numpy(), x, "norm", 1e-6)
    assert np.isnan(nan.numpy()).all()   # as ggml: 0 * 1/sqrt(0) with eps = 0


def test_huge_and_nonfinite_squares(ctx, rng):
    """Squares that overflow f32 or are NaN give ggml's results (the AVX-512 sum of squares works on
    scaled doubles and must notice them); squares near FLT_MAX whose sum exceeds 2^128 stay exact."""
    x = rng.standard_normal((5, 1000)).astype(np.float32)
    x[0, 7] = 1e20                  # square inf: scale 0, the row becomes zeros
    x[1, 500] = np.inf              # inf * 0 = NaN there, zeros elsewhere
    x[2, 999] = np.nan              # a NaN square: the whole row NaN
    x[3] = 1.5e19 * np.sign(x[3])   # squares 2.25e38, finite sum ~2.2e41 in double
    x[4, :3] = 1e-30                # f32-subnormal squares next to normal ones
    y = gg.rms_norm(ctx.from_numpy(x), 1e-6)
    run(y)
    with np.errstate(over="ignore", invalid="ignore"):
        np.testing.assert_array_equal(y.numpy(), ref.rms_norm_ggml(x, 1e-6))
    assert not y.numpy()[0].any() and np.isnan(y.numpy()[2]).all()


@pytest.mark.parametrize("op", OPS)
def test_inplace(ctx, rng, op):
    x = rng.standard_normal((3, 21)).astype(np.float32)
    t = ctx.from_numpy(x)
    y = getattr(gg, op + "_inplace")(t, 1e-5)
    assert y.view_src is t
    run(y, 2)
    check(t.numpy(), x, op, 1e-5)


def test_decode_row_uses_one_thread(ctx):
    """A single row is never split: the plan does not start threads that would only wait."""
    x = ctx.from_numpy(np.ones((1, 4096), np.float32))
    w = ctx.from_numpy(np.ones(4096, np.float32))
    g = gg.CGraph()
    g.build_forward_expand(gg.mul(gg.rms_norm(x, 1e-6), w))
    assert g.plan(2).n_threads == 1
    g = gg.CGraph()
    g.build_forward_expand(gg.rms_norm(ctx.from_numpy(np.ones((2, 4096), np.float32)), 1e-6))
    assert g.plan(2).n_threads == 2


def test_bad_input(ctx):
    f16 = ctx.new_tensor(gg.Type.F16, (8, 2))
    f32 = ctx.new_tensor(gg.Type.F32, (8, 2))
    with pytest.raises(TypeError, match="rms_norm: a must be of type F32, got F16"):
        gg.rms_norm(f16, 1e-5)
    with pytest.raises(TypeError, match="norm: a must be a pyggml.Tensor, got ndarray"):
        gg.norm(np.ones(3, np.float32), 1e-5)
    with pytest.raises(ValueError, match=r"rms_norm: a must be packed in dim 0 \(nb\[0\] == 4\)"):
        gg.rms_norm(gg.transpose(f32), 1e-5)
    with pytest.raises(ValueError, match="norm: eps must be finite and >= 0, got -1"):
        gg.norm(f32, -1)
    with pytest.raises(ValueError, match="rms_norm_inplace: eps must be finite .*, got inf"):
        gg.rms_norm_inplace(f32, float("inf"))
    with pytest.raises(ValueError, match="rms_norm: eps must be a number, got nan"):
        gg.rms_norm(f32, float("nan"))


# ---- fusion ----

def residual_block(ctx, x, r, w, eps=1e-5, layers=2):
    """Per layer: h = x + r; y = rms_norm(h) * w; x = h, r = 0.5*y (a transformer's residual chain).
    Returns the tensors to compare: every h and y."""
    outs = []
    for _ in range(layers):
        h = gg.add(x, r)
        y = gg.mul(gg.rms_norm(h, eps), w)
        outs += [h, y]
        x, r = h, gg.scale(y, 0.5)
    return outs


def compute_modes(build, nth, monkeypatch):
    """Build fresh nodes with build() (all outputs of the graph) and compute them fused, with use_ref
    and with PYGGML_DISABLE_FUSION=1; returns ([outputs as numpy per mode], fused groups as op tuples)."""
    results, fused = [], None
    for mode in ("fused", "ref", "env"):
        with monkeypatch.context() as m:
            if mode == "env":
                m.setenv("PYGGML_DISABLE_FUSION", "1")
            outs = build()
            g = gg.CGraph()
            for o in outs:
                g.build_forward_expand(o)
            plan = g.plan(nth, use_ref=mode == "ref")
            g.compute(nth, use_ref=mode == "ref")
            results.append([o.to_numpy() for o in outs])
            groups = [tuple(t.op for t in grp) for grp in plan.fused]
            if mode == "fused":
                fused = groups
            else:
                assert groups == []
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)
    return results[0], fused


ADD_NORM_MUL = (gg.Op.ADD, gg.Op.RMS_NORM, gg.Op.MUL)


@pytest.mark.parametrize("n", (3, 17, 4095))
@pytest.mark.parametrize("nth", THREADS)
def test_fused_residual_chain(ctx, rng, monkeypatch, n, nth):
    x = ctx.from_numpy(rng.standard_normal((9, n)).astype(np.float32))
    r = ctx.from_numpy(rng.standard_normal((9, n)).astype(np.float32))
    w = ctx.from_numpy(rng.standard_normal(n).astype(np.float32))
    outs, fused = compute_modes(lambda: residual_block(ctx, x, r, w), nth, monkeypatch)
    assert fused == [ADD_NORM_MUL, ADD_NORM_MUL]
    h = x.numpy().astype(np.float64) + r.numpy()
    assert ref.nmse(outs[0], h) < NMSE
    assert ref.nmse(outs[1], ref.rms_norm(outs[0], 1e-5) * w.numpy()) < NMSE


@pytest.mark.parametrize("nth", THREADS)
def test_fused_norm_mul(ctx, rng, monkeypatch, nth):
    """ggml's pattern with the weight broadcast over rows, a full-shape weight as the mul's first
    operand, and strided input rows."""
    base = rng.standard_normal((2, 5, 40)).astype(np.float32)
    xt = gg.permute(ctx.from_numpy(base), 0, 2, 1, 3)          # [40, 2, 5], rows packed
    w_row = ctx.from_numpy(rng.standard_normal((1, 2, 40)).astype(np.float32))
    w_full = ctx.from_numpy(rng.standard_normal((5, 2, 40)).astype(np.float32))

    def build():
        y1 = gg.mul(gg.rms_norm(xt, 1e-6), w_row)
        y2 = gg.mul(w_full, gg.rms_norm(xt, 1e-3))
        return [y1, y2, gg.add(y1, y2)]
    outs, fused = compute_modes(build, nth, monkeypatch)
    assert fused == [(gg.Op.RMS_NORM, gg.Op.MUL)] * 2
    x = base.transpose(1, 0, 2)
    assert ref.nmse(outs[0], ref.rms_norm(x, 1e-6) * w_row.numpy()) < NMSE
    assert ref.nmse(outs[1], ref.rms_norm(x, 1e-3) * w_full.numpy()) < NMSE


@pytest.mark.parametrize("nth", THREADS)
def test_fused_add_norm(ctx, rng, monkeypatch, nth):
    """ADD -> RMS_NORM without a weight, the addend's rows repeated over the sum's."""
    x = ctx.from_numpy(rng.standard_normal((6, 33)).astype(np.float32))
    b = ctx.from_numpy(rng.standard_normal((2, 33)).astype(np.float32))
    x3 = gg.reshape_3d(x, 33, 2, 3)

    def build():
        h = gg.add(x3, b)
        return [h, gg.scale(gg.rms_norm(h, 1e-5), 2.0)]
    outs, fused = compute_modes(build, nth, monkeypatch)
    assert fused == [(gg.Op.ADD, gg.Op.RMS_NORM)]
    h = x.numpy().reshape(3, 2, 33).astype(np.float64) + b.numpy()
    assert ref.nmse(outs[0], h) < NMSE
    assert ref.nmse(outs[1], 2 * ref.rms_norm(outs[0], 1e-5)) < NMSE


def test_fused_memory_disjoint(ctx, rng):
    """The memory plan keeps a fused kernel's outputs apart from its inputs, even where the
    separate nodes could have reused a block (h's only reader is the norm)."""
    a = ctx.from_numpy(rng.standard_normal((4, 64)).astype(np.float32))
    b = ctx.from_numpy(rng.standard_normal((4, 64)).astype(np.float32))
    w = ctx.from_numpy(rng.standard_normal(64).astype(np.float32))
    x = gg.scale(a, 1.0)
    h = gg.add(x, b)
    y = gg.mul(gg.rms_norm(h, 1e-5), w)
    g = run(y, 2)
    assert [tuple(t.op for t in grp) for grp in g.plan(2).fused] == [ADD_NORM_MUL]

    def span(t):
        return t.data_ptr, t.data_ptr + t.nbytes
    for t in (x, h):
        assert span(t)[1] <= span(y)[0] or span(y)[1] <= span(t)[0]
    h64 = a.numpy() + b.numpy().astype(np.float64)
    assert ref.nmse(y.numpy(), ref.rms_norm(h64, 1e-5) * w.numpy()) < NMSE


def not_fused_cases(ctx, rng):
    """(name, build) pairs where a pattern must not apply; build() returns the graph outputs."""
    x = ctx.from_numpy(rng.standard_normal((4, 16)).astype(np.float32))
    r = ctx.from_numpy(rng.standard_normal((4, 16)).astype(np.float32))
    w = ctx.from_numpy(rng.standard_normal(16).astype(np.float32))
    w16 = ctx.from_numpy(rng.standard_normal(16).astype(np.float32), type=gg.Type.F16)
    w1 = ctx.from_numpy(rng.standard_normal((4, 1)).astype(np.float32))
    wbig = ctx.from_numpy(rng.standard_normal((2, 4, 16)).astype(np.float32))

    def two_consumers():
        n = gg.rms_norm(x, 1e-5)
        return [gg.add(gg.mul(n, w), n)]

    def output():
        n = gg.rms_norm(x, 1e-5)
        return [n, gg.mul(n, w)]

    def view():
        xc = gg.dup(x)
        return [gg.mul(gg.rms_norm_inplace(xc, 1e-5), w)]

    def weight_f16():
        return [gg.mul(gg.rms_norm(x, 1e-5), w16)]

    def weight_width():
        return [gg.mul(gg.rms_norm(x, 1e-5), w1)]

    def other_shape():
        return [gg.mul(wbig, gg.rms_norm(x, 1e-5))]

    def not_adjacent():
        return [gg.mul(gg.rms_norm(x, 1e-5), gg.scale(w, 2.0))]

    def add_inplace_norm():
        return [gg.rms_norm_inplace(gg.add(x, r), 1e-5)]

    def add_repeat_in_row():
        return [gg.rms_norm(gg.add(x, w1), 1e-5)]

    def add_f16():
        r16 = gg.cpy(r, ctx.new_tensor(gg.Type.F16, (16, 4)))
        return [gg.rms_norm(gg.add(x, r16), 1e-5)]
    return [two_consumers, output, view, weight_f16, weight_width, other_shape, not_adjacent,
            add_inplace_norm, add_repeat_in_row, add_f16]


@pytest.mark.parametrize("case", range(10))
def test_not_fused(ctx, rng, case):
    build = not_fused_cases(ctx, rng)[case]
    outs = build()
    g = gg.CGraph()
    for o in outs:
        g.build_forward_expand(o)
    assert g.plan(2).fused == [], build.__name__
    g.compute(2)
    got = [o.to_numpy() for o in outs]
    ref_outs = build()
    g2 = gg.CGraph()
    for o in ref_outs:
        g2.build_forward_expand(o)
    g2.compute(1, use_ref=True)
    for a, b in zip(got, ref_outs):
        np.testing.assert_array_equal(a, b.to_numpy())


def test_output_added_after_plan(ctx, rng):
    """Marking the norm as an output after a plan was made re-plans: the norm is then written."""
    x = rng.standard_normal((2, 8)).astype(np.float32)
    n = gg.rms_norm(ctx.from_numpy(x), 1e-5)
    y = gg.mul(n, ctx.from_numpy(np.ones(8, np.float32)))
    g = run(y)
    assert len(g.plan(1).fused) == 1
    g.build_forward_expand(n)
    g.compute(1)
    assert g.plan(1).fused == []
    check(n.numpy(), x, "rms_norm", 1e-5)
