"""im2col (2-D and 1-D, F32 and F16 results), conv_2d (ggml's im2col + mul_mat) and concat (any dim,
every element type) against the float64 references; strided inputs, threads, bad input."""
import numpy as np
import pytest
import reference as ref
from conftest import THREADS, run

import pyggml as gg

# (kernel KH, KW, input IH, IW, s0, s1, p0, p1, d0, d1): strides, paddings, dilations, odd sizes
CASES_2D = [(3, 3, 7, 9, 1, 1, 0, 0, 1, 1), (3, 3, 7, 9, 2, 1, 1, 2, 1, 1), (2, 5, 9, 11, 1, 2, 0, 1, 2, 1),
            (14, 14, 28, 42, 14, 14, 0, 0, 1, 1), (1, 1, 5, 3, 1, 1, 0, 0, 1, 1), (3, 2, 4, 4, 3, 3, 2, 2, 2, 2)]


@pytest.mark.parametrize("case", CASES_2D)
@pytest.mark.parametrize("dst", [gg.Type.F32, gg.Type.F16])
@pytest.mark.parametrize("nth", THREADS)
def test_im2col_2d(ctx, rng, case, dst, nth):
    kh, kw, ih, iw, s0, s1, p0, p1, d0, d1 = case
    ic, oc, n = 3, 2, 2
    b = rng.standard_normal((n, ic, ih, iw)).astype(np.float32)
    k = ctx.new_tensor(gg.Type.F16, (kw, kh, ic, oc))                  # only the kernel's shape is read
    out = gg.im2col(k, ctx.from_numpy(b), s0, s1, p0, p1, d0, d1, True, dst)
    want = ref.im2col((oc, ic, kh, kw), b, s0, s1, p0, p1, d0, d1, True)
    assert out.ne == want.shape[::-1] and out.type == dst
    run(out, nth)
    got = out.to_numpy()
    np.testing.assert_array_equal(got, want.astype(np.float32 if dst == gg.Type.F32 else np.float16))


@pytest.mark.parametrize("k,il,s0,p0,d0", [(3, 10, 1, 0, 1), (3, 10, 2, 1, 1), (4, 11, 1, 2, 3), (1, 1, 1, 0, 1)])
@pytest.mark.parametrize("dst", [gg.Type.F32, gg.Type.F16])
@pytest.mark.parametrize("nth", THREADS)
def test_im2col_1d(ctx, rng, k, il, s0, p0, d0, dst, nth):
    ic, oc, n = 5, 2, 3
    b = rng.standard_normal((n, ic, il)).astype(np.float32)
    kt = ctx.new_tensor(gg.Type.F32, (k, ic, oc))
    out = gg.im2col(kt, ctx.from_numpy(b), s0, 0, p0, 0, d0, 0, False, dst)
    want = ref.im2col((oc, ic, k), b, s0, 0, p0, 0, d0, 0, False)
    assert out.ne == want.shape[::-1] + (1,)
    run(out, nth)
    np.testing.assert_array_equal(out.to_numpy().reshape(want.shape),
                                  want.astype(np.float32 if dst == gg.Type.F32 else np.float16))


def test_im2col_strided_input(ctx, rng):
    b = rng.standard_normal((2, 4, 9, 10)).astype(np.float32)
    t = gg.permute(ctx.from_numpy(b.transpose(1, 0, 2, 3).copy()), 0, 1, 3, 2)    # channels and images swapped
    k = ctx.new_tensor(gg.Type.F32, (3, 3, 4, 1))
    out = gg.im2col(k, t, 1, 2, 1, 0, 1, 1, True, gg.Type.F32)
    run(out, 2)
    np.testing.assert_array_equal(out.to_numpy(), ref.im2col((1, 4, 3, 3), b, 1, 2, 1, 0, 1, 1, True).astype(np.float32))


@pytest.mark.parametrize("ktype", [gg.Type.F32, gg.Type.F16])
@pytest.mark.parametrize("case", CASES_2D)
@pytest.mark.parametrize("nth", THREADS)
def test_conv_2d(ctx, rng, ktype, case, nth):
    kh, kw, ih, iw, s0, s1, p0, p1, d0, d1 = case
    ic, oc, n = 3, 4, 2
    a = (rng.standard_normal((oc, ic, kh, kw)) / (ic * kh * kw) ** 0.5).astype(np.float32)
    b = rng.standard_normal((n, ic, ih, iw)).astype(np.float32)
    ka = ctx.from_numpy(a.astype(np.float16) if ktype == gg.Type.F16 else a)
    out = gg.conv_2d(ka, ctx.from_numpy(b), s0, s1, p0, p1, d0, d1)
    want = ref.conv_2d(ref.round_f16(a), ref.round_f16(b), s0, s1, p0, p1, d0, d1)   # fp16 operands, as ggml
    assert out.type == gg.Type.F32 and out.ne == want.shape[::-1]
    run(out, nth)
    assert ref.nmse(out.to_numpy(), want) < 1e-10


SHAPES = [(2, 3, 4, 5), (1, 1, 1, 7), (3, 1, 2, 33)]
TYPES = {gg.Type.F32: np.float32, gg.Type.F16: np.float16, gg.Type.F64: np.float64, gg.Type.I32: np.int32,
         gg.Type.I8: np.int8, gg.Type.I64: np.int64}


@pytest.mark.parametrize("dim", [0, 1, 2, 3])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("typ", list(TYPES))
@pytest.mark.parametrize("nth", THREADS)
def test_concat(ctx, rng, dim, shape, typ, nth):
    a = (10 * rng.standard_normal(shape)).astype(TYPES[typ])
    bshape = list(shape)
    bshape[3 - dim] += 2
    b = (10 * rng.standard_normal(bshape)).astype(TYPES[typ])
    out = gg.concat(ctx.from_numpy(a, typ), ctx.from_numpy(b, typ), dim)
    want = ref.concat(a, b, dim)
    assert out.ne == want.shape[::-1] and out.type == typ
    run(out, nth)
    np.testing.assert_array_equal(out.to_numpy(), want)


def test_concat_bf16_and_views(ctx, rng):
    a = rng.standard_normal((4, 6, 8)).astype(np.float32)
    b = rng.standard_normal((4, 3, 8)).astype(np.float32)
    ta = gg.transpose(ctx.from_numpy(a.transpose(0, 2, 1).copy()))          # a non-contiguous view of a
    out = gg.concat(ta, ctx.from_numpy(b), 1)
    run(out, 2)
    np.testing.assert_array_equal(out.to_numpy(), np.concatenate([a, b], axis=1))
    h = ctx.from_numpy(a)
    c = gg.concat(gg.cpy(h, ctx.new_tensor(gg.Type.BF16, h.ne)), gg.cpy(h, ctx.new_tensor(gg.Type.BF16, h.ne)), 2)
    run(c, 1)
    assert c.type == gg.Type.BF16
    back = gg.cpy(c, ctx.new_tensor(gg.Type.F32, c.ne))
    run(back, 1)
    np.testing.assert_array_equal(back.to_numpy().reshape(8, 6, 8), np.concatenate([ref.round_bf16(a)] * 2, axis=0))


def test_bad_input(ctx):
    k = ctx.new_tensor(gg.Type.F32, (3, 3, 2, 4))
    b = ctx.new_tensor(gg.Type.F32, (8, 8, 2, 1))
    with pytest.raises(TypeError, match="im2col: b must be of type F32, got F16"):
        gg.im2col(k, ctx.new_tensor(gg.Type.F16, (8, 8, 2, 1)), 1, 1, 0, 0, 1, 1, True)
    with pytest.raises(TypeError, match="im2col: dst_type must be F32 or F16"):
        gg.im2col(k, b, 1, 1, 0, 0, 1, 1, True, gg.Type.BF16)
    with pytest.raises(ValueError, match=r"im2col: a.ne\[2\] and b.ne\[2\] \(input channels\) must match, got 3 and 2"):
        gg.im2col(ctx.new_tensor(gg.Type.F32, (3, 3, 3, 4)), b, 1, 1, 0, 0, 1, 1, True)
    with pytest.raises(ValueError, match="im2col: s1 must be > 0, got 0"):
        gg.im2col(k, b, 1, 0, 0, 0, 1, 1, True)
    with pytest.raises(ValueError, match="im2col: p0 must be >= 0, got -1"):
        gg.im2col(k, b, 1, 1, -1, 0, 1, 1, True)
    with pytest.raises(ValueError, match="too small for the kernel"):
        gg.im2col(ctx.new_tensor(gg.Type.F32, (9, 9, 2, 4)), b, 1, 1, 0, 0, 1, 1, True)
    with pytest.raises(ValueError, match=r"1-D: a.ne\[1\] and b.ne\[1\]"):
        gg.im2col(ctx.new_tensor(gg.Type.F32, (3, 4, 1)), ctx.new_tensor(gg.Type.F32, (10, 3, 1)), 1, 0, 0, 0, 1, 0, False)
    with pytest.raises(TypeError, match="conv_2d: a must be of type F16, F32, got Q8_0"):
        gg.conv_2d(ctx.new_tensor(gg.Type.Q8_0, (32, 1, 2, 1)), b)
    x = ctx.new_tensor(gg.Type.F32, (4, 5))
    with pytest.raises(ValueError, match=r"concat: a.ne and b.ne must match except in dim 0"):
        gg.concat(x, ctx.new_tensor(gg.Type.F32, (4, 6)), 0)
    with pytest.raises(TypeError, match="concat: a and b must have one type, got F32 and F16"):
        gg.concat(x, ctx.new_tensor(gg.Type.F16, (4, 5)), 1)
    with pytest.raises(TypeError, match="Q8_0 is a block type"):
        gg.concat(ctx.new_tensor(gg.Type.Q8_0, (32, 2)), ctx.new_tensor(gg.Type.Q8_0, (32, 2)), 1)
    with pytest.raises(ValueError, match=r"concat: dim must be in \[0, 4\), got 4"):
        gg.concat(x, x, 4)
