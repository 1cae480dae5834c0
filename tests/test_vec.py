"""vec.h's row primitives, called directly (pyggml._vec), against float64 numpy references.

Lengths cover empty rows, tails below and above every register width (AVX-512: 16 lanes, 64 per
unrolled dot; RVV at VLEN 256: 64 lanes for e32 m8) and several strips. Inputs start one element past
an aligned address; outputs carry a guard that must stay untouched (a vector store past vl fails)."""
import numpy as np
import pytest
import reference as R
from conftest import EMULATED

from pyggml import _vec

NS = [0, 1, 3, 7, 8, 15, 17, 31, 33, 63, 65, 130, 257] + ([] if EMULATED else [1000, 4099])
GUARD = 5


def ptr(a):
    return a.ctypes.data


def unaligned(a):
    """a copy of a that starts one element past an aligned address"""
    buf = np.empty(a.size + 1, dtype=a.dtype)
    buf[1:] = a
    return buf[1:]


def out_buf(n, dtype, fill):
    """n elements (unaligned) followed by GUARD elements of fill"""
    buf = np.full(n + GUARD + 1, fill, dtype=dtype)[1:]
    return buf


def check_guard(buf, n, fill):
    np.testing.assert_array_equal(buf[n:], np.full(GUARD, fill, dtype=buf.dtype))


def rand(rng, n, lo=-1.0, hi=1.0):
    return unaligned(rng.uniform(lo, hi, n).astype(np.float32))


# values that exercise the special cases of the conversions
F32_SPECIAL = np.array([0.0, -0.0, 1.0, -2.5, 65504.0, 65519.0, 65520.0, 1e9, -1e9, np.inf, -np.inf, np.nan,
                        6.1e-5, 5.96e-8, 2.98e-8, 2.99e-8, 1e-10, 3.0e-5, 1.00048828125, 1.00146484375,
                        3.4e38, 1.1754944e-38, 1e-45], dtype=np.float32)


def with_specials(rng, n):
    x = rng.normal(0, 100, n).astype(np.float32)
    k = min(n, F32_SPECIAL.size)
    x[:k] = F32_SPECIAL[:k]
    return unaligned(rng.permutation(x))


def assert_same_bits(got_f32, ref_f32):
    """bit equality, except that any NaN matches any NaN (RISC-V canonicalises NaN in conversions)"""
    g, r = np.asarray(got_f32), np.asarray(ref_f32)
    nan = np.isnan(r)
    np.testing.assert_array_equal(np.isnan(g), nan)
    np.testing.assert_array_equal(g[~nan].view(np.uint32), r[~nan].view(np.uint32))


@pytest.mark.parametrize("n", NS)
def test_cvt_f16_f32(rng, n):
    bits = unaligned(rng.integers(0, 1 << 16, n, dtype=np.uint16))
    if n:
        bits[: min(n, 6)] = [0x0000, 0x8000, 0x0001, 0x83FF, 0x7C00, 0xFC00][: min(n, 6)]
    y = out_buf(n, np.float32, 7.0)
    _vec.cvt_f16_f32(n, ptr(bits), ptr(y))
    assert_same_bits(y[:n], bits.view(np.float16).astype(np.float32))
    check_guard(y, n, 7.0)


@pytest.mark.parametrize("n", NS)
def test_cvt_f32_f16(rng, n):
    x = with_specials(rng, n)
    y = out_buf(n, np.uint16, 0xABCD)
    _vec.cvt_f32_f16(n, ptr(x), ptr(y))
    with np.errstate(over="ignore"):
        ref = R.f32_to_f16_bits(x)
    nan = np.isnan(x)
    np.testing.assert_array_equal(np.isnan(y[:n].view(np.float16)), nan)
    np.testing.assert_array_equal(y[:n][~nan], ref[~nan])
    check_guard(y, n, 0xABCD)


@pytest.mark.parametrize("n", NS)
def test_cvt_bf16_f32(rng, n):
    bits = unaligned(rng.integers(0, 1 << 16, n, dtype=np.uint16))
    y = out_buf(n, np.float32, 7.0)
    _vec.cvt_bf16_f32(n, ptr(bits), ptr(y))
    np.testing.assert_array_equal(y[:n].view(np.uint32), bits.astype(np.uint32) << 16)
    check_guard(y, n, 7.0)


@pytest.mark.parametrize("n", NS)
def test_cvt_f32_bf16(rng, n):
    x = with_specials(rng, n)
    y = out_buf(n, np.uint16, 0xABCD)
    _vec.cvt_f32_bf16(n, ptr(x), ptr(y))
    np.testing.assert_array_equal(y[:n], R.f32_to_bf16_bits(x))
    check_guard(y, n, 0xABCD)


def assert_dot(got, x64, y64):
    ref = float(np.dot(x64, y64))
    scale = float(np.abs(x64 * y64).sum())
    assert abs(got - ref) <= 2e-6 * scale + 1e-30, (got, ref)


@pytest.mark.parametrize("n", NS)
def test_dot_f32(rng, n):
    x, y = rand(rng, n), rand(rng, n)
    assert_dot(_vec.dot_f32(n, ptr(x), ptr(y)), x.astype(np.float64), y.astype(np.float64))


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("kind", ["f16", "bf16", "f16_f32"])
def test_dot_half(rng, n, kind):
    x, y = rand(rng, n), rand(rng, n)
    if kind == "bf16":
        xb, yb = unaligned(R.f32_to_bf16_bits(x)), unaligned(R.f32_to_bf16_bits(y))
        x64, y64 = R.bf16_bits_to_f32(xb).astype(np.float64), R.bf16_bits_to_f32(yb).astype(np.float64)
        got = _vec.dot_bf16(n, ptr(xb), ptr(yb))
    else:
        xb = unaligned(R.f32_to_f16_bits(x))
        x64 = xb.view(np.float16).astype(np.float64)
        if kind == "f16":
            yb = unaligned(R.f32_to_f16_bits(y))
            y64 = yb.view(np.float16).astype(np.float64)
            got = _vec.dot_f16(n, ptr(xb), ptr(yb))
        else:
            y64 = y.astype(np.float64)
            got = _vec.dot_f16_f32(n, ptr(xb), ptr(y))
    assert_dot(got, x64, y64)


@pytest.mark.parametrize("nb", [0, 1, 2, 3, 7] + ([] if EMULATED else [64]))
def test_dot_q8_0(rng, nb):
    n = 32 * nb
    x, y = rng.normal(0, 1, n).astype(np.float32), rng.normal(0, 1, n).astype(np.float32)
    qx, qy = R.quantize_q8_0(x), R.quantize_q8_0(y)
    got = _vec.dot_q8_0_q8_0(n, ptr(qx), ptr(qy))
    bx, by = qx.reshape(-1, 34), qy.reshape(-1, 34)
    dx = bx[:, :2].copy().view(np.float16).astype(np.float64).ravel()
    dy = by[:, :2].copy().view(np.float16).astype(np.float64).ravel()
    sx = bx[:, 2:].view(np.int8).astype(np.int64)
    sy = by[:, 2:].view(np.int8).astype(np.int64)
    terms = dx * dy * (sx * sy).sum(axis=1)
    ref = float(terms.sum())
    assert abs(got - ref) <= 1e-6 * float(np.abs(terms).sum()) + 1e-30, (got, ref)


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("op", ["add", "mul"])
def test_binary(rng, n, op):
    x, y = rand(rng, n), rand(rng, n)
    z = out_buf(n, np.float32, 7.0)
    getattr(_vec, f"{op}_f32")(n, ptr(z), ptr(x), ptr(y))
    np.testing.assert_array_equal(z[:n], x + y if op == "add" else x * y)
    check_guard(z, n, 7.0)


@pytest.mark.parametrize("n", NS)
def test_binary_in_place(rng, n):
    x, y = rand(rng, n), rand(rng, n)
    ref = x + y
    _vec.add_f32(n, ptr(x), ptr(x), ptr(y))
    np.testing.assert_array_equal(x, ref)


@pytest.mark.parametrize("n", NS)
def test_mad(rng, n):
    x, y0 = rand(rng, n), rand(rng, n)
    y = out_buf(n, np.float32, 7.0)
    y[:n] = y0
    _vec.mad_f32(n, ptr(y), ptr(x), np.float32(0.37))
    ref = x.astype(np.float64) * np.float64(np.float32(0.37)) + y0
    np.testing.assert_allclose(y[:n], ref, rtol=1e-6, atol=1e-7)
    check_guard(y, n, 7.0)


@pytest.mark.parametrize("n", NS)
def test_scale(rng, n):
    x = rand(rng, n)
    y = out_buf(n, np.float32, 7.0)
    _vec.scale_f32(n, ptr(y), ptr(x), np.float32(-1.7))
    np.testing.assert_array_equal(y[:n], x * np.float32(-1.7))
    check_guard(y, n, 7.0)
    x0 = x.copy()
    _vec.scale_f32(n, ptr(x), ptr(x), np.float32(2.0))   # in place
    np.testing.assert_array_equal(x, x0 * 2)


@pytest.mark.parametrize("n", NS)
def test_max(rng, n):
    x = rand(rng, n, -50.0, -10.0)   # all negative: a lane that kept its 0 or NaN initialiser shows
    got = _vec.max_f32(n, ptr(x))
    assert got == (x.max() if n else -np.inf)


@pytest.mark.parametrize("n", NS)
def test_sum(rng, n):
    x = rand(rng, n, 0.5, 1.5)
    got = _vec.sum_f32(n, ptr(x))
    ref = float(x.astype(np.float64).sum())
    assert abs(got - ref) <= 1e-6 * max(ref, 1.0)


@pytest.mark.parametrize("n", NS)
def test_exp_sum(rng, n):
    x = rand(rng, n, -20.0, 5.0)
    m = np.float32(x.max() if n else 0.0)
    y = out_buf(n, np.float32, 7.0)
    got = _vec.exp_sum_f32(n, ptr(y), ptr(x), m)
    ref = np.exp((x - m).astype(np.float64))   # the difference is rounded to f32 first, as in ggml
    np.testing.assert_allclose(y[:n], ref, rtol=4e-7, atol=0)
    assert abs(got - ref.sum()) <= 1e-6 * max(ref.sum(), 1.0)
    check_guard(y, n, 7.0)


def test_exp_special():
    # every lane position gets each special value once: tails and full registers alike
    special = np.array([-np.inf, -1e4, -87.4, -87.3, -10.0, 0.0, 1.0, 80.0, 88.7, 88.8, 1e4, np.inf, np.nan],
                       dtype=np.float32)
    x = unaligned(np.tile(special, 7))
    y = np.empty_like(x)
    _vec.exp_sum_f32(x.size, ptr(y), ptr(x), np.float32(0.0))
    with np.errstate(over="ignore"):
        ref = np.exp(x.astype(np.float64))
    small = x < -87.34
    np.testing.assert_array_equal(y[small], 0.0)
    big = x > 88.73
    np.testing.assert_array_equal(y[big], np.inf)
    assert np.isnan(y[np.isnan(x)]).all()
    mid = ~small & ~big & ~np.isnan(x)
    np.testing.assert_allclose(y[mid], ref[mid], rtol=4e-7)
