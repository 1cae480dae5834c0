"""The row primitives (csrc/vec/), called directly (pyggml._vec), against float64 numpy references.

Lengths cover empty rows, tails below and above every register width (AVX-512: 16 lanes, 64 per
unrolled dot; RVV at VLEN 256: 64 lanes for e32 m8) and several strips. Inputs start one element past
an aligned address; outputs carry a guard that must stay untouched (a vector store past vl fails)."""
import numpy as np
import pytest
import reference as R
from conftest import EMULATED

import pyggml as gg
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
@pytest.mark.parametrize("wtype", ["q8_0", "q4_0"])
def test_dot_quant(rng, nb, wtype):
    """x (Q8_0 or Q4_0) times y (Q8_0): sum over blocks of d_x*d_y*sum(qx*qy). The dequantised
    values are exact in float64, so the per-block terms are exact too."""
    n = 32 * nb
    x, y = rng.normal(0, 1, n).astype(np.float32), rng.normal(0, 1, n).astype(np.float32)
    quant, dequant = (R.quantize_q8_0, R.dequantize_q8_0) if wtype == "q8_0" else (R.quantize_q4_0, R.dequantize_q4_0)
    qx, qy = quant(x), R.quantize_q8_0(y)
    got = getattr(_vec, f"dot_{wtype}_q8_0")(n, ptr(qx), ptr(qy))
    terms = np.zeros(0)
    if n:
        prod = dequant(qx, n).astype(np.float64) * R.dequantize_q8_0(qy, n).astype(np.float64)
        terms = prod.reshape(-1, 32).sum(axis=1)
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


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_stream_read_returns_the_max_of_every_block(rng, n_threads):
    """the benchmarks' read yardstick reads every element once: each thread's part as two halves
    side by side in chunks, the odd element left over after them, blocks of sizes around the chunk"""
    sizes = [1, 2, 7, 4096 * 2 + 1, 4096 * 3 + 5, 50001]
    blocks = [rand(rng, n, -50.0, -10.0) for n in sizes]
    addr, n = [b.ctypes.data for b in blocks], [b.size for b in blocks]
    assert _vec.stream_read_f32(addr, n, n_threads) == max(b.max() for b in blocks)
    for b in blocks:
        for i in {0, b.size // 2, b.size - 1, b.size // 3}:
            old = b[i]
            b[i] = 1.0
            assert _vec.stream_read_f32(addr, n, n_threads) == 1.0, (b.size, i)
            b[i] = old


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


@pytest.mark.parametrize("n", NS)
def test_dot_bf16_f32(rng, n):
    x, y = rand(rng, n), rand(rng, n)
    xb = unaligned(R.f32_to_bf16_bits(x))
    assert_dot(_vec.dot_bf16_f32(n, ptr(xb), ptr(y)), R.bf16_bits_to_f32(xb).astype(np.float64), y.astype(np.float64))


def half_row(rng, n, kind):
    """a random row of type kind ("f32", "f16", "bf16") and its exact float64 values"""
    x = rand(rng, n)
    if kind == "f32":
        return x, x.astype(np.float64)
    if kind == "f16":
        b = unaligned(R.f32_to_f16_bits(x))
        return b, b.view(np.float16).astype(np.float64)
    b = unaligned(R.f32_to_bf16_bits(x))
    return b, R.bf16_bits_to_f32(b).astype(np.float64)


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("kind", ["f32", "f16", "bf16"])
def test_dot4(rng, n, kind):
    x, x64 = half_row(rng, n, kind)
    ys = [rand(rng, n) for _ in range(4)]
    s = out_buf(4, np.float32, 7.0)
    _vec.dot4(kind, n, ptr(x), [ptr(y) for y in ys], ptr(s))
    for c in range(4):
        assert_dot(float(s[c]), x64, ys[c].astype(np.float64))
    check_guard(s, 4, 7.0)


def expected_gemm_shape():
    """the micro-kernel's tile by ISA; RVV: 12 rows x one e32 m2 group (2*VLEN/32 columns, max 32)"""
    info = gg.build_info()
    return {"avx512": (12, 32), "avx2": (6, 16), "neon": (12, 8), "scalar": (4, 4),
            "rvv": (12, min(2 * info["vlen"] // 32, 32))}[info["simd"]]


def test_gemm_shape():
    assert _vec.gemm_shape() == expected_gemm_shape()


@pytest.mark.parametrize("n", NS)
def test_gemm_tile(rng, n):
    """c = a @ panel for full and partial tiles as mul_mat makes them: rows past the used ones zero
    in a, columns past N zero in the k-major panel; a's rows lda apart with filler between"""
    mr, nr = _vec.gemm_shape()
    lda = n + 3
    for rows_used, cols_used in ((mr, nr), (1, nr), (mr - 1, 1), (mr, nr - 3 if nr > 4 else 1)):
        a = unaligned(np.full(mr * lda, 7.0, dtype=np.float32))
        am = a.reshape(mr, lda)
        am[:, :n] = 0.0
        am[:rows_used, :n] = rng.uniform(-1, 1, (rows_used, n))
        b = np.zeros((n, nr), dtype=np.float32)
        b[:, :cols_used] = rng.uniform(-1, 1, (n, cols_used))
        b = unaligned(b.ravel())
        c = out_buf(mr * nr, np.float32, 7.0)
        c[: mr * nr] = np.nan                       # every element must be written
        _vec.gemm_tile_f32(n, ptr(a), lda, ptr(b), ptr(c))
        a64, b64 = am[:, :n].astype(np.float64), b.reshape(n, nr).astype(np.float64)
        got, ref = c[: mr * nr].reshape(mr, nr), a64 @ b64
        scale = np.abs(a64) @ np.abs(b64)
        assert (np.abs(got - ref) <= 1.2e-7 * (n + 1) * scale).all(), (got, ref)
        assert (got[rows_used:] == 0).all() and (got[:, cols_used:] == 0).all()
        check_guard(c, mr * nr, 7.0)


def test_quantize_q8_0(rng):
    # blocks: random, zero, amax 127 with exact .5 ties (id = 1: ties to even), tiny, huge
    ties = np.arange(32, dtype=np.float32) - 15.5
    ties[0] = 127.0
    blocks = [rng.normal(0, 1, 32), np.zeros(32), ties, -ties, rng.normal(0, 1e-30, 32), rng.normal(0, 1e30, 32)]
    blocks += [rng.uniform(-5, 5, 32) for _ in range(3 if EMULATED else 60)]
    x = unaligned(np.concatenate(blocks).astype(np.float32))
    n = x.size
    # blocks start with their fp16 scale: 2 bytes (not 1) past an aligned address, as in a tensor
    y = np.full(n // 32 * 34 + GUARD + 2, 0xAB, np.uint8)[2:]
    _vec.quantize_q8_0(n, ptr(x), ptr(y))
    np.testing.assert_array_equal(y[: n // 32 * 34], R.quantize_q8_0(x))
    check_guard(y, n // 32 * 34, 0xAB)


# ---- activations ----
ACT_REF = {"silu": R.silu, "gelu": R.gelu, "gelu_erf": R.gelu_erf, "gelu_quick": R.gelu_quick, "relu": R.relu,
           "tanh": R.tanh}


def assert_act(got, ref):
    np.testing.assert_allclose(got, ref, rtol=4e-6, atol=1e-7)


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("name", _vec.ACTS)
def test_act(rng, n, name):
    x = rand(rng, n, -12.0, 12.0)
    y = out_buf(n, np.float32, 7.0)
    _vec.act_f32(name, n, ptr(y), ptr(x))
    assert_act(y[:n], ACT_REF[name](x))
    check_guard(y, n, 7.0)
    ref = y[:n].copy()
    _vec.act_f32(name, n, ptr(x), ptr(x))   # in place
    np.testing.assert_array_equal(x, ref)


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("name", _vec.GLUS)
def test_glu(rng, n, name):
    x, g = rand(rng, n, -12.0, 12.0), rand(rng, n, -2.0, 2.0)
    y = out_buf(n, np.float32, 7.0)
    _vec.glu_f32(name, n, ptr(y), ptr(x), ptr(g))
    assert_act(y[:n], ACT_REF[name](x) * g)
    check_guard(y, n, 7.0)


def test_act_extremes():
    # exp overflow and underflow inside the sigmoid, at every lane position
    x = unaligned(np.tile(np.array([-200.0, -90.0, -30.0, 0.0, 30.0, 90.0, 200.0], dtype=np.float32), 11))
    y = np.empty_like(x)
    for name in _vec.ACTS:
        _vec.act_f32(name, x.size, ptr(y), ptr(x))
        with np.errstate(over="ignore"):
            assert_act(y, ACT_REF[name](x))


def test_sigmoid_gated_acts_at_infinity():
    # x / (1 + exp(-z)) at x = -inf: the limit 0 (not -inf/inf = NaN); +inf stays inf, NaN stays NaN
    x = unaligned(np.tile(np.array([-np.inf, np.inf, np.nan, -1e30], dtype=np.float32), 9))
    y = np.empty_like(x)
    for name in ("silu", "gelu"):
        _vec.act_f32(name, x.size, ptr(y), ptr(x))
        assert np.all(np.abs(y[0::4]) < 1e-30) and np.all(np.abs(y[3::4]) < 1e-30), name
        assert np.all(y[1::4] == np.inf) and np.all(np.isnan(y[2::4])), name


# ---- norm sums ----
@pytest.mark.parametrize("n", NS)
def test_norm_sums(rng, n):
    x, r = rand(rng, n, -3.0, 3.0), rand(rng, n)
    x64 = x.astype(np.float64)
    sq = (x * x).astype(np.float64)                  # squares rounded to f32, added in double
    assert abs(_vec.sum_f64_f32(n, ptr(x)) - x64.sum()) <= 1e-12 * max(np.abs(x64).sum(), 1.0)
    sumsq = _vec.sumsq_f32(n, ptr(x))
    assert abs(sumsq - sq.sum()) <= 1e-12 * max(sq.sum(), 1.0)
    # the fused forms: y written exactly, and the sum bit for bit the one of sumsq_f32(y)
    y = out_buf(n, np.float32, 7.0)
    got = _vec.add_sumsq_f32(n, ptr(y), ptr(x), ptr(r))
    np.testing.assert_array_equal(y[:n], x + r)
    check_guard(y, n, 7.0)
    assert got == _vec.sumsq_f32(n, ptr(y))
    mean = np.float32(0.37)
    got = _vec.cvar_f32(n, ptr(y), ptr(x), mean)
    np.testing.assert_array_equal(y[:n], x - mean)
    check_guard(y, n, 7.0)
    assert got == _vec.sumsq_f32(n, ptr(y))


@pytest.mark.parametrize("n", NS)
def test_scale_mul(rng, n):
    x, w = rand(rng, n), rand(rng, n)
    y = out_buf(n, np.float32, 7.0)
    s = np.float32(0.731)
    _vec.scale_mul_f32(n, ptr(y), ptr(x), s, ptr(w))
    np.testing.assert_array_equal(y[:n], (x * s) * w)
    check_guard(y, n, 7.0)


# ---- rope ----
@pytest.mark.parametrize("n", NS)
def test_sincos(rng, n):
    x = rand(rng, n, -300.0, 300.0)
    c, s = out_buf(n, np.float32, 7.0), out_buf(n, np.float32, 7.0)
    _vec.sincos_f32(n, ptr(x), ptr(c), ptr(s), np.float32(1.5))
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(c[:n], 1.5 * np.cos(x64), rtol=0, atol=3e-7)
    np.testing.assert_allclose(s[:n], 1.5 * np.sin(x64), rtol=0, atol=3e-7)
    check_guard(c, n, 7.0)
    check_guard(s, n, 7.0)
    ref = c[:n].copy()
    _vec.sincos_f32(n, ptr(x), ptr(x), ptr(s), np.float32(1.5))   # c == x
    np.testing.assert_array_equal(x, ref)


def rotate64(a, b, c, s):
    a, b, c, s = (v.astype(np.float64) for v in (a, b, c, s))
    return a * c - b * s, a * s + b * c


@pytest.mark.parametrize("n", NS)
def test_rope_half(rng, n):
    x0, x1, c, s = rand(rng, n), rand(rng, n), rand(rng, n), rand(rng, n)
    y0, y1 = out_buf(n, np.float32, 7.0), out_buf(n, np.float32, 7.0)
    _vec.rope_half_f32(n, ptr(y0), ptr(y1), ptr(x0), ptr(x1), ptr(c), ptr(s))
    r0, r1 = rotate64(x0, x1, c, s)
    np.testing.assert_allclose(y0[:n], r0, rtol=0, atol=3e-7)
    np.testing.assert_allclose(y1[:n], r1, rtol=0, atol=3e-7)
    check_guard(y0, n, 7.0)
    check_guard(y1, n, 7.0)
    ref0, ref1 = y0[:n].copy(), y1[:n].copy()
    _vec.rope_half_f32(n, ptr(x0), ptr(x1), ptr(x0), ptr(x1), ptr(c), ptr(s))   # in place
    np.testing.assert_array_equal(x0, ref0)
    np.testing.assert_array_equal(x1, ref1)


@pytest.mark.parametrize("n", NS)
def test_rope_adj(rng, n):
    x, c, s = rand(rng, 2 * n), rand(rng, n), rand(rng, n)
    y = out_buf(2 * n, np.float32, 7.0)
    _vec.rope_adj_f32(n, ptr(y), ptr(x), ptr(c), ptr(s))
    r0, r1 = rotate64(x[0::2], x[1::2], c, s)
    np.testing.assert_allclose(y[: 2 * n : 2], r0, rtol=0, atol=3e-7)
    np.testing.assert_allclose(y[1 : 2 * n : 2], r1, rtol=0, atol=3e-7)
    check_guard(y, 2 * n, 7.0)
    ref = y[: 2 * n].copy()
    _vec.rope_adj_f32(n, ptr(x), ptr(x), ptr(c), ptr(s))   # in place
    np.testing.assert_array_equal(x, ref)


# ---- attention ----
NS_ATTN = [0, 1, 7, 17, 33, 65, 130] + ([] if EMULATED else [257, 1000])


def rows(rng, nr, n, ld, lo=-1.0, hi=1.0):
    """nr f32 rows of n values, ld apart, in one unaligned buffer (the gaps hold 7)"""
    buf = unaligned(np.full(max(nr * ld, 1), 7.0, dtype=np.float32))
    for r in range(nr):
        buf[r * ld : r * ld + n] = rng.uniform(lo, hi, n)
    return buf


@pytest.mark.parametrize("n", NS_ATTN)
@pytest.mark.parametrize("kind", ["f32", "f16", "bf16"])
def test_attn_dot(rng, n, kind):
    k, k64 = half_row(rng, n, kind)
    for nr in range(1, 7):
        q = rows(rng, nr, n, n + 3)
        s = out_buf(2 * nr, np.float32, 7.0)
        _vec.attn_dot(kind, nr, n, ptr(q), n + 3, ptr(k), ptr(s), 2)
        for r in range(nr):
            assert_dot(float(s[2 * r]), q[r * (n + 3) : r * (n + 3) + n].astype(np.float64), k64)
            assert s[2 * r + 1] == 7.0
        check_guard(s, 2 * nr, 7.0)


@pytest.mark.parametrize("n", NS_ATTN)
@pytest.mark.parametrize("masked", [False, True])
def test_attn_softmax_rows(rng, n, masked):
    for nr in range(1, 5):
        ldx, ldm = n + 2, n + 1
        x = rows(rng, nr, n, ldx, -5.0, 5.0)
        x0 = x.copy()
        mv = rows(rng, nr, n, ldm, -2.0, 0.0) if masked else None
        if masked:
            mv[rng.random(mv.size) < 0.3] = -np.inf
            mv[:n] = -np.inf                          # row 0 fully masked in this block
        M = np.array([-np.inf, 1.0, 9.0, -np.inf][:nr], dtype=np.float32)
        S = np.array([0.0, 2.0, 3.0, 0.0][:nr], dtype=np.float32)
        M0, S0 = M.copy(), S.copy()
        f = np.empty(nr, dtype=np.float32)
        _vec.attn_softmax_rows_f32(nr, n, ptr(x), ldx, ptr(mv) if masked else 0, ldm, ptr(M), ptr(S), ptr(f))
        for r in range(nr):
            v = x0[r * ldx : r * ldx + n].astype(np.float32)
            if masked:
                v = v + mv[r * ldm : r * ldm + n]
            m = max(float(M0[r]), float(v.max()) if n else -np.inf)
            fr = np.exp(np.float64(M0[r]) - m) if m > M0[r] else 1.0
            e = np.exp(v.astype(np.float64) - m) if m != -np.inf else np.zeros(n)
            assert M[r] == np.float32(m)
            np.testing.assert_allclose(f[r], fr, rtol=1e-6)
            np.testing.assert_allclose(x[r * ldx : r * ldx + n], e, rtol=1e-6, atol=1e-30)
            np.testing.assert_allclose(S[r], S0[r] * fr + e.sum(), rtol=2e-6)
            assert (x[r * ldx + n : (r + 1) * ldx] == 7.0).all()


@pytest.mark.parametrize("n", NS_ATTN)
def test_attn_mask(rng, n):
    cases = [rng.random(n) < 0.5, np.ones(n, bool), np.zeros(n, bool)]
    if n > 2:
        ends = np.ones(n, bool)
        ends[[0, n - 1]] = False                      # live only at both ends
        cases.append(ends)
    for dead in cases:
        m = unaligned(R.f32_to_f16_bits(np.where(dead, -np.inf, rng.uniform(-4, 4, n)).astype(np.float32)))
        y = out_buf(n, np.float32, 7.0)
        lo, hi = _vec.attn_mask_f16(n, ptr(m), np.float32(0.5), ptr(y))
        np.testing.assert_array_equal(y[:n], np.float32(0.5) * m.view(np.float16).astype(np.float32))
        check_guard(y, n, 7.0)
        live = np.flatnonzero(~dead)
        assert (lo, hi) == ((int(live[0]), int(live[-1]) + 1) if live.size else (n, 0))


@pytest.mark.parametrize("n", NS_ATTN)
@pytest.mark.parametrize("kind", ["f32", "f16", "bf16"])
def test_attn_acc(rng, n, kind):
    nk, pad = 5, 3
    vs = [half_row(rng, n + pad, kind) for _ in range(nk)]
    v = unaligned(np.concatenate([b for b, _ in vs]))   # rows n + pad elements apart
    v64 = np.stack([b64[:n] for _, b64 in vs])
    for nr in (1, 2, 3, 4, 6):
        for use_f in (False, True):
            lda, ldp = n + 1, nk + 2
            acc = rows(rng, nr, n, lda)
            p = rows(rng, nr, nk, ldp, 0.0, 1.0)
            f = rng.uniform(0.1, 1.0, nr).astype(np.float32)
            ref = [acc[r * lda : r * lda + n].astype(np.float64) * (f[r] if use_f else 1.0)
                   + p[r * ldp : r * ldp + nk].astype(np.float64) @ v64 for r in range(nr)]
            _vec.attn_acc(kind, nr, n, ptr(acc), lda, nk, ptr(p), ldp, ptr(v), (n + pad) * v.itemsize,
                          ptr(f) if use_f else 0)
            for r in range(nr):
                np.testing.assert_allclose(acc[r * lda : r * lda + n], ref[r], rtol=1e-5, atol=1e-6)
                assert acc[r * lda + n] == 7.0 or r == nr - 1


@pytest.mark.parametrize("nc", NS_ATTN)
def test_attn_gemm_qk(rng, nc):
    for nr, dk in ((1, 1), (3, 7), (4, 16), (6, 9)):
        ldq, ldk, lds = dk + 1, nc + 2, nc + 3
        q, kt = rows(rng, nr, dk, ldq), rows(rng, dk, nc, ldk)
        s = rows(rng, nr, 0, lds)
        _vec.attn_gemm_qk_f32(nr, nc, dk, ptr(q), ldq, ptr(kt), ldk, ptr(s), lds)
        qm = np.stack([q[r * ldq : r * ldq + dk] for r in range(nr)]).astype(np.float64)
        km = np.stack([kt[d * ldk : d * ldk + nc] for d in range(dk)]).astype(np.float64)
        got = np.stack([s[r * lds : r * lds + nc] for r in range(nr)])
        np.testing.assert_allclose(got, qm @ km, rtol=1e-5, atol=1e-6)
        assert (s.reshape(nr, lds)[:, nc:] == 7.0).all()


@pytest.mark.parametrize("nc", [0, 1, 7, 17, 33, 65])
def test_attn_transpose(rng, nc):
    for nr in (1, 5, 17, 33):
        ldx, ldy = nc + 1, nr + 2
        x = rows(rng, nr, nc, ldx)
        y = unaligned(np.full(max(nc * ldy, 1), 7.0, dtype=np.float32))
        _vec.attn_transpose_f32(nr, nc, ptr(x), ldx, ptr(y), ldy)
        if nc:
            got = y.reshape(nc, ldy)
            np.testing.assert_array_equal(got[:, :nr], x.reshape(nr, ldx)[:, :nc].T)
            assert (got[:, nr:] == 7.0).all()
