"""add, mul (broadcast as ggml's can_repeat), scale; copies with conversion (cpy, cont, dup)."""
import numpy as np
import pytest
import reference as ref
from conftest import THREADS, run

import pyggml as gg

SHAPES = [  # (a numpy shape, b numpy shape): b repeats over a
    ((17,), (17,)),
    ((3, 33), (33,)),
    ((3, 33), (1, 33)),
    ((2, 4, 40), (1, 4, 40)),
    ((2, 4, 40), (2, 1, 8)),             # repeat inside rows too
    ((2, 3, 5, 16), (1, 3, 1, 16)),
    ((4, 1), (1, 1)),
]


@pytest.mark.parametrize("op", ["add", "mul"])
@pytest.mark.parametrize("sa, sb", SHAPES)
@pytest.mark.parametrize("nth", THREADS)
def test_binary_f32(ctx, rng, op, sa, sb, nth):
    x = rng.standard_normal(sa).astype(np.float32)
    y = rng.standard_normal(sb).astype(np.float32)
    out = getattr(gg, op)(ctx.from_numpy(x), ctx.from_numpy(y))
    run(out, nth)
    expect = ref.broadcast_binary(x, y, np.add if op == "add" else np.multiply)
    # one f32 rounding of an exact result: identical to float32 numpy
    np.testing.assert_array_equal(out.numpy(), expect.astype(np.float32))


@pytest.mark.parametrize("ta", ["F32", "F16", "BF16"])
@pytest.mark.parametrize("tb", ["F32", "F16", "BF16"])
def test_binary_types(ctx, rng, ta, tb):
    x = rng.standard_normal((3, 37)).astype(np.float32)
    y = rng.standard_normal((1, 37)).astype(np.float32)
    a = ctx.from_numpy(x, type=getattr(gg.Type, ta))
    b = ctx.from_numpy(y, type=getattr(gg.Type, tb))
    out = gg.add(a, b)
    run(out, 2)
    assert out.type == a.type
    expect = ref.roundtrip(ref.roundtrip(x, ta) + ref.roundtrip(y, tb), ta)
    np.testing.assert_array_equal(out.to_numpy(), expect)


def test_binary_strided_rows(ctx, rng):
    x = rng.standard_normal((6, 20)).astype(np.float32)
    a = ctx.from_numpy(x)
    v = gg.view_2d(a, 9, 3, a.nb[1] * 2, 4)           # every other row, columns 1..9
    y = rng.standard_normal(9).astype(np.float32)
    out = gg.mul(v, ctx.from_numpy(y))
    run(out, 2)
    np.testing.assert_array_equal(out.numpy(), x[::2, 1:10] * y)


def test_binary_errors(ctx):
    a = ctx.new_tensor(gg.Type.F32, (6, 2))
    with pytest.raises(ValueError, match=r"add: b \(ne=\(4, 1, 1, 1\)\) cannot be broadcast"):
        gg.add(a, ctx.new_tensor(gg.Type.F32, (4,)))
    with pytest.raises(TypeError, match="mul: b must be of type"):
        gg.mul(a, ctx.new_tensor(gg.Type.I32, (6,)))
    with pytest.raises(TypeError, match="add: a must be a pyggml.Tensor"):
        gg.add(np.zeros(3), a)
    with pytest.raises(ValueError, match="packed in dim 0"):
        gg.add(gg.transpose(a), ctx.new_tensor(gg.Type.F32, (2,)))


@pytest.mark.parametrize("nth", THREADS)
def test_scale(ctx, rng, nth):
    x = rng.standard_normal((5, 23)).astype(np.float32)
    out = gg.scale(ctx.from_numpy(x), 0.37)
    out2 = gg.scale(ctx.from_numpy(x), 2.0, b=-1.0)
    run([out, out2], nth)
    np.testing.assert_array_equal(out.numpy(), x * np.float32(0.37))
    np.testing.assert_array_equal(out2.numpy(), x * np.float32(2) - np.float32(1))
    with pytest.raises(ValueError, match="scale: s must be a number"):
        gg.scale(ctx.from_numpy(x), float("nan"))


TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q5_1", "IQ4_NL", "MXFP4"]


@pytest.mark.parametrize("src", TYPES)
@pytest.mark.parametrize("dst", TYPES)
@pytest.mark.parametrize("nth", THREADS)
def test_cpy_conversions_bit_exact(ctx, rng, src, dst, nth):
    x = rng.standard_normal((3, 2, 64)).astype(np.float32)
    a = ctx.from_numpy(x, type=getattr(gg.Type, src))
    b = ctx.new_tensor(getattr(gg.Type, dst), a.ne)
    out = gg.cpy(a, b)
    assert out.view_src is b
    run(out, nth)
    expect = ctx.from_numpy(ref.roundtrip(x, src), type=getattr(gg.Type, dst))
    assert b.tobytes() == expect.tobytes()


@pytest.mark.parametrize("nth", sorted({*THREADS, 3}))
@pytest.mark.parametrize("typ,shape,to", [("F32", (3, 7, 101), (707, 3)), ("Q4_0", (5, 96), (5, 96)),
                                          ("I32", (13,), (13,)), ("F16", (2, 33), (66,))])
def test_cpy_packed_same_type(ctx, rng, typ, shape, to, nth):
    """Packed tensors of one type copy as one block of bytes cut among threads (copy.h), whatever
    their shapes; sizes that are not whole cache lines."""
    x = rng.integers(-2**30, 2**30, shape, np.int32) if typ == "I32" else rng.standard_normal(shape).astype(np.float32)
    a = ctx.from_numpy(x, type=getattr(gg.Type, typ))
    b = ctx.new_tensor(a.type, to[::-1])
    run(gg.cpy(a, b), nth)
    assert b.tobytes() == a.tobytes()


@pytest.mark.parametrize("nth", THREADS)
def test_cont_of_permuted(ctx, rng, nth):
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    a = ctx.from_numpy(x, type=gg.Type.F16)
    p = gg.permute(a, 2, 0, 3, 1)
    c = gg.cont(p)
    run(c, nth)
    assert c.is_contiguous() and c.ne == p.ne
    np.testing.assert_array_equal(c.numpy(), p.numpy())


def test_cpy_reshaping_and_strided(ctx, rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    a = ctx.from_numpy(x)
    t = gg.transpose(a)                               # [4, 6] view, strided dim 0
    b = ctx.new_tensor(gg.Type.F16, (8, 3))           # same element count, other shape
    run(gg.cpy(t, b), 2)
    np.testing.assert_array_equal(b.to_numpy().ravel(), ref.round_f16(x.T.ravel()))
    d = gg.dup(gg.view_2d(a, 3, 2, a.nb[1] * 2, 0))
    run(d, 1)
    np.testing.assert_array_equal(d.numpy(), x[::2, :3])
    i = ctx.from_numpy(np.arange(12, dtype=np.int32).reshape(3, 4))
    j = ctx.new_tensor(gg.Type.I32, (6, 2))
    run(gg.cpy(gg.transpose(i), j), 2)
    np.testing.assert_array_equal(j.numpy().ravel(), np.arange(12).reshape(3, 4).T.ravel())


def test_cpy_errors(ctx):
    a = ctx.new_tensor(gg.Type.F32, (64, 2))
    with pytest.raises(ValueError, match="same number of elements"):
        gg.cpy(a, ctx.new_tensor(gg.Type.F32, (64,)))
    with pytest.raises(ValueError, match="quantized copies need equal shapes"):
        gg.cpy(a, ctx.new_tensor(gg.Type.Q8_0, (32, 4)))
    with pytest.raises(TypeError, match="I32 -> F32"):
        gg.cpy(ctx.new_tensor(gg.Type.I32, (64, 2)), a)
