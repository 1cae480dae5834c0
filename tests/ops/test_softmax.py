"""SOFT_MAX (soft_max_ext, soft_max_add_sinks) against reference.soft_max_ext."""
import numpy as np
import pytest
import reference as ref
from conftest import EMULATED, THREADS, run

import pyggml as gg

WIDTHS = (1, 3, 17, 33, 257) if EMULATED else (1, 3, 17, 33, 4095)
BOUND = 1e-7


def make_mask(rng, shape, dtype, p_inf=0.2):
    m = rng.standard_normal(shape).astype(np.float32)
    m[rng.random(shape) < p_inf] = -np.inf
    m[..., 0] = 0.0                      # keep every row finite somewhere
    return m.astype(dtype)


def check(out, want, bound=BOUND):
    got = out.to_numpy().reshape(want.shape)
    assert np.isfinite(got).all()
    assert ref.nmse(got, want) < bound


@pytest.mark.parametrize("n", WIDTHS)
@pytest.mark.parametrize("mask_dtype", [None, np.float16, np.float32])
@pytest.mark.parametrize("nth", THREADS)
def test_widths_masks_threads(ctx, rng, n, mask_dtype, nth):
    a = (3 * rng.standard_normal((1, 2, 5, n))).astype(np.float32)
    mask = None if mask_dtype is None else make_mask(rng, (1, 1, 5, n), mask_dtype)
    tm = None if mask is None else ctx.from_numpy(mask)
    out = gg.soft_max_ext(ctx.from_numpy(a), tm, 0.7, 0.0)
    run(out, nth)
    check(out, ref.soft_max_ext(a, mask, 0.7))


def test_scale_applied(ctx, rng):
    a = rng.standard_normal((4, 33)).astype(np.float32)
    out = gg.soft_max_ext(ctx.from_numpy(a), None, 2.5)
    run(out)
    check(out, ref.soft_max_ext(a[None, None], None, 2.5)[0, 0])
    assert ref.nmse(out.to_numpy(), ref.soft_max_ext(a[None, None])[0, 0]) > 1e-3


@pytest.mark.parametrize("mask_dtype", [np.float16, np.float32])
@pytest.mark.parametrize("nth", THREADS)
def test_mask_broadcast_dims_2_3_and_extra_rows(ctx, rng, mask_dtype, nth):
    # a [S=2, H=4, R=3, n], mask [M3=1, M2=2, 7 rows, n]: heads h use mask plane h % 2
    a = rng.standard_normal((2, 4, 3, 19)).astype(np.float32)
    mask = make_mask(rng, (1, 2, 7, 19), mask_dtype)
    out = gg.soft_max_ext(ctx.from_numpy(a), ctx.from_numpy(mask), 1.0, 0.0)
    run(out, nth)
    check(out, ref.soft_max_ext(a, mask))
    # the planes really differ per head: using plane 0 everywhere is wrong
    wrong = ref.soft_max_ext(a, mask[:, :1])
    assert ref.nmse(out.to_numpy(), wrong) > 1e-4


@pytest.mark.parametrize("n_head", [8, 12])
@pytest.mark.parametrize("nth", THREADS)
def test_alibi(ctx, rng, n_head, nth):
    # 12 heads is not a power of two: heads 8..11 take the m1 slopes
    a = rng.standard_normal((1, n_head, 4, 37)).astype(np.float32)
    pos = -np.abs(np.arange(37) - np.arange(4)[:, None] * 9).astype(np.float32)   # ALiBi-style distances
    mask = np.broadcast_to(pos, (1, 1, 4, 37)).astype(np.float16)
    out = gg.soft_max_ext(ctx.from_numpy(a), ctx.from_numpy(mask), 0.5, 8.0)
    run(out, nth)
    check(out, ref.soft_max_ext(a, mask, 0.5, 8.0))
    assert ref.nmse(out.to_numpy(), ref.soft_max_ext(a, mask, 0.5, 0.0)) > 1e-4


@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("nth", THREADS)
def test_sinks(ctx, rng, with_mask, nth):
    a = rng.standard_normal((2, 3, 5, 21)).astype(np.float32)
    sinks = np.array([0.5, 3.0, -2.0], dtype=np.float32)
    mask = make_mask(rng, (1, 3, 5, 21), np.float32) if with_mask else None
    out = gg.soft_max_ext(ctx.from_numpy(a), None if mask is None else ctx.from_numpy(mask), 1.2, 0.0)
    assert gg.soft_max_add_sinks(out, ctx.from_numpy(sinks)) is out
    run(out, nth)
    want = ref.soft_max_ext(a, mask, 1.2, 0.0, sinks)
    check(out, want)
    assert np.all(out.to_numpy().sum(axis=-1) < 1)      # the sink takes its share


def test_all_minus_inf_row_is_nan(ctx, rng):
    a = rng.standard_normal((3, 20)).astype(np.float32)
    mask = np.zeros((3, 20), np.float16)
    mask[1] = -np.inf
    out = gg.soft_max_ext(ctx.from_numpy(a), ctx.from_numpy(mask), 1.0)
    run(out, 2)
    got = out.to_numpy()
    assert np.isnan(got[1]).all()
    assert np.isfinite(got[[0, 2]]).all()


def test_all_minus_inf_row_with_sink_is_zero(ctx, rng):
    a = np.full((1, 1, 2, 20), -np.inf, np.float32)
    out = gg.soft_max_ext(ctx.from_numpy(a), None, 1.0)
    gg.soft_max_add_sinks(out, ctx.from_numpy(np.array([1.0], np.float32)))
    run(out)
    assert (out.to_numpy() == 0).all()


@pytest.mark.parametrize("nth", THREADS)
def test_strided_rows(ctx, rng, nth):
    # a: a permuted view (rows packed, dims 1/2 swapped); mask: every other row of a bigger tensor
    base = rng.standard_normal((3, 4, 23)).astype(np.float32)          # ne [23, 4, 3]
    ta = gg.permute(ctx.from_numpy(base), 0, 2, 1, 3)                 # ne [23, 3, 4]
    assert not ta.is_contiguous()
    mbase = make_mask(rng, (2 * 3, 23), np.float16)
    tmb = ctx.from_numpy(mbase)
    tm = gg.view_2d(tmb, 23, 3, 2 * tmb.nb[1], 0)
    out = gg.soft_max_ext(ta, tm, 0.9)
    run(out, nth)
    a = base.transpose(1, 0, 2)[None]                                  # [1, 4, 3, 23]
    check(out, ref.soft_max_ext(a, mbase[::2][None, None], 0.9))


def test_threads_agree_bitwise(ctx, rng):
    a = rng.standard_normal((2, 3, 7, 129)).astype(np.float32)
    mask = make_mask(rng, (1, 1, 7, 129), np.float16)
    outs = []
    for nth in (1, 2):
        out = gg.soft_max_ext(ctx.from_numpy(a), ctx.from_numpy(mask), 0.3, 0.0)
        run(out, nth)
        outs.append(out.to_numpy())
    assert np.array_equal(outs[0], outs[1])


def test_recompute_after_input_change(ctx, rng):
    a = rng.standard_normal((2, 9)).astype(np.float32)
    ta = ctx.from_numpy(a)
    out = gg.soft_max_ext(ta)
    g = run(out)
    ta.set(2 * a)
    g.compute(n_threads=1)
    check(out, ref.soft_max_ext(2 * a[None, None])[0, 0])


def test_bad_input(ctx):
    a = ctx.new_tensor(gg.Type.F32, (8, 4, 2))
    with pytest.raises(TypeError, match="soft_max_ext: a must be of type F32, got F16"):
        gg.soft_max_ext(ctx.new_tensor(gg.Type.F16, (8, 4)))
    with pytest.raises(TypeError, match="soft_max_ext: mask must be of type F16, F32, got BF16"):
        gg.soft_max_ext(a, ctx.new_tensor(gg.Type.BF16, (8, 4)))
    with pytest.raises(TypeError, match="soft_max_ext: a must be a pyggml.Tensor"):
        gg.soft_max_ext(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match=r"mask.ne\[0\] must equal a.ne\[0\] = 8, got 9"):
        gg.soft_max_ext(a, ctx.new_tensor(gg.Type.F16, (9, 4)))
    with pytest.raises(ValueError, match=r"mask.ne\[1\] must be >= a.ne\[1\] = 4, got 3"):
        gg.soft_max_ext(a, ctx.new_tensor(gg.Type.F16, (8, 3)))
    with pytest.raises(ValueError, match="must be multiples of mask.ne"):
        gg.soft_max_ext(a, ctx.new_tensor(gg.Type.F16, (8, 4, 3)))
    with pytest.raises(ValueError, match="max_bias > 0 .* needs a mask"):
        gg.soft_max_ext(a, None, 1.0, 1.0)
    with pytest.raises(ValueError, match="max_bias must be >= 0, got -1"):
        gg.soft_max_ext(a, None, 1.0, -1.0)
    with pytest.raises(ValueError, match="soft_max_ext: scale must be a number, got nan"):
        gg.soft_max_ext(a, None, float("nan"))
    with pytest.raises(ValueError, match=r"soft_max_ext: a must be packed in dim 0"):
        gg.soft_max_ext(gg.transpose(a))
    out = gg.soft_max_ext(a)
    with pytest.raises(ValueError, match="sinks must have a.ne\\[2\\] = 2 elements, got 3"):
        gg.soft_max_add_sinks(out, ctx.new_tensor(gg.Type.F32, (3,)))
    with pytest.raises(TypeError, match="soft_max_add_sinks: sinks must be of type F32, got F16"):
        gg.soft_max_add_sinks(out, ctx.new_tensor(gg.Type.F16, (2,)))
    with pytest.raises(ValueError, match="t must be a soft_max_ext result, got op ADD"):
        gg.soft_max_add_sinks(gg.add(a, a), ctx.new_tensor(gg.Type.F32, (2,)))
