"""The graph API a model porter needs: set_input/set_output, CGraph.get_tensor, reading an
intermediate, the overwrite rule of outputs, cont_2d..cont_4d and the RoPE keyword defaults."""
import numpy as np
import pytest
import reference as ref
from conftest import THREADS, run

import pyggml as gg
from pyggml._graph import FLAG_INPUT, FLAG_OUTPUT


def test_set_input_and_set_output_flags(ctx):
    x = ctx.new_tensor(gg.Type.F32, (8,))
    assert gg.set_input(x) is x and x.flags & FLAG_INPUT
    y = gg.scale(x, 2.0)
    assert not y.flags & FLAG_OUTPUT
    assert gg.set_output(y) is y and y.flags & FLAG_OUTPUT
    for fn in (gg.set_input, gg.set_output):
        with pytest.raises(TypeError, match=f"{fn.__name__}: tensor must be a pyggml.Tensor, got int"):
            fn(3)


@pytest.mark.parametrize("nth", THREADS)
def test_set_output_keeps_an_intermediate_readable(ctx, rng, nth):
    """An intermediate marked with set_output keeps its own memory (not reused by later nodes) and
    is not fused away, so its numpy() holds its value after compute."""
    x0 = rng.standard_normal((4, 256)).astype(np.float32)
    w0 = rng.standard_normal(256).astype(np.float32)
    x, w = ctx.from_numpy(x0), ctx.from_numpy(w0)

    def build(mark):
        norm = gg.rms_norm(x, 1e-5)          # RMS_NORM -> MUL fuses: the norm's result is not written
        norm.name = "norm"
        if mark:
            gg.set_output(norm)
        out = gg.mul(norm, w)
        for _ in range(6):                   # enough nodes for the arena to reuse norm's block
            out = gg.add(gg.scale(out, 0.5), out)
        return norm, out

    norm, out = build(True)
    g = run(out, nth)
    assert g.plan(nth).fused == [] and g.get_tensor("norm") is norm
    expect = ref.rms_norm(x0.astype(np.float64), 1e-5)
    np.testing.assert_allclose(g.get_tensor("norm").numpy(), expect, rtol=1e-5, atol=1e-6)
    norm2, out2 = build(False)
    g2 = run(out2, nth)
    assert any(norm2 in grp for grp in g2.plan(nth).fused)
    np.testing.assert_allclose(out2.numpy(), out.numpy(), rtol=1e-6)


def test_get_tensor(ctx):
    x = ctx.from_numpy(np.ones(4, np.float32))
    x.name = "x"
    y = gg.add(x, x)
    y.name = "y"
    g = gg.CGraph()
    g.build_forward_expand(gg.scale(y, 3.0))
    assert g.get_tensor("y") is y and g.get_tensor("x") is x
    assert g.get_tensor("nothing") is None


def test_output_view_is_overwritten_by_the_next_compute(ctx):
    x = ctx.from_numpy(np.zeros(3, np.float32))
    y = gg.scale(x, 2.0)
    g = gg.CGraph()
    g.build_forward_expand(y)
    x.numpy()[:] = 1
    g.compute(1)
    view, copy = y.numpy(), y.numpy().copy()
    x.numpy()[:] = 5
    g.compute(1)
    np.testing.assert_array_equal(copy, [2, 2, 2])
    np.testing.assert_array_equal(view, [10, 10, 10])       # the same memory, rewritten


@pytest.mark.parametrize("typ", ["F32", "F16"])
def test_cont_nd(ctx, rng, typ):
    a0 = rng.standard_normal((3, 5, 8)).astype(np.float32)
    a = gg.permute(ctx.from_numpy(a0, type=gg.Type[typ]), 1, 0, 2, 3)     # ne (5, 8, 3): strided
    logical = ref.roundtrip(a0, typ).transpose(0, 2, 1)                    # numpy order of a
    outs = [gg.cont_2d(a, 40, 3), gg.cont_3d(a, 10, 4, 3), gg.cont_4d(a, 2, 5, 4, 3)]
    run(outs, 2)
    for t, ne in zip(outs, [(40, 3, 1, 1), (10, 4, 3, 1), (2, 5, 4, 3)]):
        assert t.op == gg.Op.CONT and t.ne == ne and t.type == gg.Type[typ] and t.is_contiguous()
        np.testing.assert_array_equal(t.to_numpy().reshape(-1), logical.reshape(-1))
    with pytest.raises(ValueError, match=r"cont_2d: ne=\(7, 3\) has 21 elements, a has 120"):
        gg.cont_2d(a, 7, 3)
    q = ctx.from_numpy(rng.standard_normal((2, 64)).astype(np.float32), type=gg.Type.Q8_0)
    with pytest.raises(ValueError, match="cont_2d: a quantized tensor keeps its shape"):
        gg.cont_2d(q, 32, 4)


def test_rope_keyword_defaults_are_ggmls(ctx, rng):
    """rope_ext(a, b) = ggml_rope(a, b, ne0, NORMAL) with ggml_rope's constants; positional calls
    with every argument still work; rope_multi defaults to MROPE."""
    x0 = rng.standard_normal((5, 2, 32)).astype(np.float32)
    x, pos = ctx.from_numpy(x0), ctx.from_numpy(np.arange(5, dtype=np.int32) * 3)
    outs = [gg.rope_ext(x, pos),
            gg.rope_ext(x, pos, None, 32, gg.RopeType.NORMAL, 0, 10000.0, 1.0, 0.0, 1.0, 32.0, 1.0),
            gg.rope_ext(x, pos, n_dims=16, mode=gg.RopeType.NEOX, freq_base=500.0),
            gg.rope_ext(x, pos, None, 16, gg.RopeType.NEOX, 0, 500.0, 1.0, 0.0, 1.0, 32.0, 1.0)]
    run(outs, 1)
    np.testing.assert_array_equal(outs[0].numpy(), outs[1].numpy())
    np.testing.assert_array_equal(outs[2].numpy(), outs[3].numpy())
    np.testing.assert_allclose(outs[0].numpy(), ref.rope(x0, np.arange(5) * 3, 32, 0), rtol=1e-5, atol=1e-5)
    assert outs[0].op_params == outs[1].op_params
    p4 = ctx.from_numpy(np.tile(np.arange(5, dtype=np.int32), 4))
    m = gg.rope_multi(x, p4, sections=[4, 6, 6, 0])
    assert m.op_params == gg.rope_multi(x, p4, None, 32, [4, 6, 6, 0], gg.RopeType.MROPE, 0, 10000.0, 1.0, 0.0,
                                        1.0, 32.0, 1.0).op_params
    with pytest.raises(ValueError, match="rope_multi: mode MROPE needs sections"):
        gg.rope_multi(x, p4)
