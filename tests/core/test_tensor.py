"""Tensors: types, ne/nb, conversions (bit for bit), numpy interop, views."""
import gc

import numpy as np
import pytest
import reference as ref

import pyggml as gg

FLOATS = ["F32", "F16", "BF16", "Q8_0", "Q4_0"]


def test_new_tensor_layout(ctx):
    t = ctx.new_tensor(gg.Type.F32, (5, 3))
    assert t.ne == (5, 3, 1, 1) and t.nb == (4, 20, 60, 60)
    assert t.type == gg.Type.F32 and t.op == gg.Op.NONE and t.is_contiguous()
    assert not t.numpy().any()
    q = ctx.new_tensor_3d(gg.Type.Q8_0, 64, 3, 2)
    assert q.nb == (34, 68, 204, 408) and q.nbytes == 408
    q4 = ctx.new_tensor_2d(gg.Type.Q4_0, 96, 2)
    assert q4.nb[:2] == (18, 54)
    h = ctx.new_tensor_4d(gg.Type.BF16, 3, 1, 1, 2)
    assert h.nb == (2, 6, 6, 6) and h.numpy().shape == (2, 1, 1, 3)


@pytest.mark.parametrize("bad, match", [
    ({"type": gg.Type.Q8_0, "ne": (33,)}, "multiple of 32"),
    ({"type": gg.Type.F32, "ne": (1, 2, 3, 4, 5)}, "1 to 4 entries"),
    ({"type": gg.Type.F32, "ne": (-1,)}, ">= 0"),
    ({"type": 99, "ne": (4,)}, "pyggml.Type"),
    ({"type": gg.Type.F32, "ne": (1 << 40, 1 << 40)}, "too large"),
])
def test_new_tensor_errors(ctx, bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        ctx.new_tensor(bad["type"], bad["ne"])


def test_from_numpy_dtypes(ctx):
    for dt, typ in [(np.float32, gg.Type.F32), (np.float16, gg.Type.F16), (np.int32, gg.Type.I32),
                    (np.int64, gg.Type.I64), (np.float64, gg.Type.F32)]:
        a = np.arange(24, dtype=dt).reshape(2, 3, 4)
        t = ctx.from_numpy(a)
        assert t.type == typ and t.ne == (4, 3, 2, 1)
        np.testing.assert_array_equal(t.to_numpy(), a.astype(t.numpy().dtype))
    with pytest.raises(TypeError, match="dtype"):
        ctx.from_numpy(np.array(["x"]))
    with pytest.raises(ValueError, match="at most 4"):
        ctx.from_numpy(np.zeros((1, 1, 1, 1, 1), np.float32))


def _special_values(rng, n):
    x = rng.standard_normal(n).astype(np.float32) * np.float32(10) ** rng.integers(-9, 6, n)
    extra = [0.0, -0.0, np.inf, -np.inf, 65504, 65519.99, 65520, -65520, 1e-8, 5.96e-8, 2.98e-8,
             6.1e-5, 3.0e38, 1.0009765625, 1.00048828125, 1.00146484375]
    x[:len(extra)] = extra
    return x


def test_f16_conversion_bit_exact(ctx, rng):
    x = _special_values(rng, 4099)
    t = ctx.from_numpy(x, type=gg.Type.F16)
    np.testing.assert_array_equal(t.numpy().view(np.uint16), ref.f32_to_f16_bits(x))
    back = t.to_numpy()
    np.testing.assert_array_equal(back, ref.round_f16(x))
    nan = ctx.from_numpy(np.array([np.nan, -np.nan] * 9, np.float32), type=gg.Type.F16)
    assert np.isnan(nan.to_numpy()).all()


def test_bf16_conversion_bit_exact(ctx, rng):
    x = _special_values(rng, 4099)
    x[-3:] = [1e-40, -3e-39, 1.1754942e-38]              # denormals are kept, not flushed
    t = ctx.from_numpy(x, type=gg.Type.BF16)
    np.testing.assert_array_equal(t.numpy(), ref.f32_to_bf16_bits(x))
    np.testing.assert_array_equal(t.to_numpy(), ref.round_bf16(x))
    nan = np.array([np.nan] * 17, np.float32)
    assert (ctx.from_numpy(nan, type=gg.Type.BF16).numpy() == ref.f32_to_bf16_bits(nan)).all()


@pytest.mark.parametrize("typ", ["Q8_0", "Q4_0"])
def test_quant_bytes_bit_exact(ctx, rng, typ):
    x = rng.standard_normal((5, 96)).astype(np.float32)
    x[0, :32] = np.arange(32) - 15.5                     # exact .5 ties after scaling
    x[1, :32] = 0                                         # a zero block
    x[2, :32] = np.linspace(-127, 127, 32) / 2           # q = x*127/amax hits .5 exactly
    x[3, :32] = 8.0                                       # equal magnitudes: the first one sets the sign
    x[3, 5] = -8.0
    quant = ref.quantize_q8_0 if typ == "Q8_0" else ref.quantize_q4_0
    t = ctx.from_numpy(x, type=getattr(gg.Type, typ))
    assert t.tobytes() == quant(x).tobytes()
    np.testing.assert_array_equal(t.to_numpy(), ref.roundtrip(x, typ))
    with pytest.raises(TypeError, match="to_numpy"):
        t.numpy()


def test_numpy_zero_copy_and_lifetime(rng):
    ctx = gg.Context()
    a = rng.standard_normal((3, 5)).astype(np.float32)
    t = ctx.from_numpy(a)
    v = t.numpy()
    assert np.shares_memory(v, t.numpy()) and v.shape == (3, 5) and v.strides == (20, 4)
    v[1, 2] = 42
    assert t.to_numpy()[1, 2] == 42
    del t, ctx
    gc.collect()
    assert v[1, 2] == 42 and v.sum() == pytest.approx(a.sum() - a[1, 2] + 42, rel=1e-5)


def test_bytes_roundtrip(ctx, rng):
    x = rng.standard_normal((4, 64)).astype(np.float32)
    for typ in FLOATS:
        t = ctx.from_numpy(x, type=getattr(gg.Type, typ))
        u = ctx.from_bytes(t.type, t.ne, t.tobytes())
        assert u.tobytes() == t.tobytes()
        with pytest.raises(ValueError, match="expected"):
            u.set_bytes(b"123")


def test_set_converts_and_checks_shape(ctx, rng):
    t = ctx.new_tensor(gg.Type.F16, (7, 2))
    x = rng.standard_normal((2, 7))
    t.set(x)
    np.testing.assert_array_equal(t.to_numpy(), ref.round_f16(x.astype(np.float32)))
    with pytest.raises(ValueError, match="does not match"):
        t.set(np.zeros((7, 2)))
    i = ctx.new_tensor(gg.Type.I32, (3,))
    i.set(np.array([1, -2, 3]))
    assert i.numpy().tolist() == [1, -2, 3]


def test_views_no_copy(ctx):
    a = ctx.from_numpy(np.arange(24, dtype=np.float32).reshape(4, 6))
    v = gg.view_2d(a, 3, 2, a.nb[1] * 2, 4)             # rows 0 and 2, columns 1..3
    np.testing.assert_array_equal(v.numpy(), [[1, 2, 3], [13, 14, 15]])
    assert v.view_src is a and v.view_offs == 4 and not v.is_contiguous()
    w = gg.view_1d(v, 2, 4)                              # view of a view flattens to the root
    assert w.view_src is a and w.view_offs == 8
    np.testing.assert_array_equal(w.numpy(), [2, 3])
    a.numpy()[0, 2] = -1
    assert v.numpy()[0, 1] == -1
    r = gg.reshape_3d(a, 2, 3, 4)
    np.testing.assert_array_equal(r.numpy(), a.numpy().reshape(4, 3, 2))
    assert np.shares_memory(r.numpy(), a.numpy())
    with pytest.raises(ValueError, match="out of the bounds"):
        gg.view_1d(a, 25)
    with pytest.raises(ValueError, match="out of the bounds"):
        gg.view_2d(a, 6, 2, 24, 80)
    with pytest.raises(ValueError, match="elements"):
        gg.reshape_2d(a, 5, 5)
    with pytest.raises(ValueError, match="contiguous"):
        gg.reshape_1d(gg.transpose(a), 24)


def test_view_4d_and_permute(ctx, rng):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    a = ctx.from_numpy(x)
    for axes in [(0, 1, 2, 3), (1, 0, 2, 3), (2, 0, 1, 3), (3, 2, 1, 0), (0, 2, 1, 3)]:
        p = gg.permute(a, *axes)
        # ggml: dim i of a becomes dim axes[i]; numpy axes are reversed
        perm = [0] * 4
        for i, ax in enumerate(axes):
            perm[3 - ax] = 3 - i
        np.testing.assert_array_equal(p.numpy(), x.transpose(perm))
        assert np.shares_memory(p.numpy(), a.numpy())
    np.testing.assert_array_equal(gg.transpose(a).numpy(), x.transpose(0, 1, 3, 2))
    v = gg.view_4d(a, 2, 2, 2, 2, a.nb[1], a.nb[2], a.nb[3], 4)
    np.testing.assert_array_equal(v.numpy(), x[:2, :2, :2, 1:3])
    with pytest.raises(ValueError, match="permutation"):
        gg.permute(a, 0, 0, 1, 2)


def test_quantized_view_rules(ctx):
    q = ctx.new_tensor(gg.Type.Q8_0, (64, 4))
    v = gg.view_2d(q, 32, 4, q.nb[1], 34)
    assert v.nb == (34, 68, 272, 272)
    with pytest.raises(ValueError, match="multiple of 32"):
        gg.view_1d(q, 16)


def test_no_memory_before_compute(ctx):
    a = ctx.from_numpy(np.ones(4, np.float32))
    s = gg.scale(a, 2.0)
    assert not s.has_data
    with pytest.raises(RuntimeError, match="no memory"):
        s.numpy()


def test_tensor_cannot_be_constructed_directly():
    with pytest.raises(TypeError):
        gg.Tensor()


def test_name_and_repr(ctx):
    t = ctx.new_tensor(gg.Type.F32, (2,))
    t.name = "x" * 100
    assert len(t.name) == 63 and "F32" in repr(t)
    assert len(t.op_params) == 64 and len(t.src) == 10


def test_empty_tensors(ctx):
    e = ctx.new_tensor(gg.Type.F32, (2, 0, 3))
    assert e.shape == (3, 0, 2) and e.to_numpy().shape == (3, 0, 2) and e.nbytes == 0
    g = gg.CGraph()
    out = gg.get_rows(ctx.new_tensor(gg.Type.F32, (2,)), ctx.new_tensor(gg.Type.I32, (0,)))
    g.build_forward_expand(out)
    g.compute(2)
    assert out.ne == (2, 0, 1, 1) and out.to_numpy().shape == (0, 2)


def test_zero_divisor_dims_raise(ctx):
    # broadcast checks divide by the mask's dims: a zero there is a clear error, not a crash
    a = ctx.new_tensor(gg.Type.F32, (8, 2, 2))
    with pytest.raises(ValueError, match="soft_max_ext: a.ne"):
        gg.soft_max_ext(a, ctx.new_tensor(gg.Type.F16, (8, 2, 0)), 1.0, 0.0)
    q = ctx.new_tensor(gg.Type.F32, (64, 1, 2))
    k = ctx.new_tensor(gg.Type.F16, (64, 4, 2))
    with pytest.raises(ValueError, match="flash_attn_ext"):
        gg.flash_attn_ext(q, k, k, ctx.new_tensor(gg.Type.F16, (4, 1, 0)), 0.1)
