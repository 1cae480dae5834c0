"""mul_mat: every weight type against the float64 reference (which rounds the activations to the
weights' dot type as ggml does), odd sizes on the GEMV/dot path (small N) and the GEMM path,
broadcast over dims 2/3, strided activations and weights, threads, bad input."""
import numpy as np
import pytest
import reference as ref
from conftest import EMULATED, THREADS, run

import pyggml as gg
from pyggml import _vec
from pyggml.models.batch import gemm_min_cols

T = gg.Type
QUANT = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "MXFP4"]
WTYPES = ["F32", "F16", "BF16"] + QUANT
# the reference applies the same input rounding, so only f32 summation order is left; except for
# Q4_1/Q5_1, whose m*s term takes Q8_1's s = fp16(d*sum(q)) where the reference sums the
# dequantised activations (d rounded to fp16 first): ~1e-7
BOUND = {"Q4_1": 1e-6, "Q5_1": 1e-6}

# K: tails of every vector width for float weights, 1 to 5 blocks for quantized ones
K_FLOAT = [1, 7, 33] if EMULATED else [1, 7, 33, 65]
K_QUANT = [32, 96] if EMULATED else [32, 96, 160]
# (M, N): N = 1 runs the one-column kernels, quantized weights the dot path up to 5 columns in
# every build; float weights take the dot tiles from 2 columns up to gemm_min_cols() (6 to 32, by
# SIMD width), the GEMM from there, quantized ones the GEMM from 6 to 16 columns; tails in rows
# and columns (a GEMM's last panel at most half full: dot tiles, fuller: padded; a tile of fewer rows)
SHAPES = ([(1, 1), (17, 5), (3, 17), (13, 9)] if EMULATED else
          [(1, 1), (130, 1), (3, 3), (17, 5), (3, 17), (17, 130), (130, 17), (1, 130), (13, 31), (6, 40), (5, 59)])


def weights(ctx, w, typ):
    """a tensor of type typ from f32 numpy w, and the values it stores"""
    return ctx.from_numpy(w, type=T[typ]), ref.roundtrip(w, typ)


def check(out, want, typ=None):
    got = out.to_numpy()
    assert got.shape == want.shape
    err = ref.nmse(got, want)
    assert err < BOUND.get(typ, 1e-10), err


@pytest.mark.parametrize("n_threads", THREADS)
@pytest.mark.parametrize("mn", SHAPES)
@pytest.mark.parametrize("typ", WTYPES)
def test_types_and_sizes(ctx, rng, typ, mn, n_threads):
    m, n = mn
    for k in (K_QUANT if typ in QUANT else K_FLOAT):
        w = rng.standard_normal((m, k)).astype(np.float32)
        x = rng.standard_normal((n, k)).astype(np.float32)
        a, av = weights(ctx, w, typ)
        out = gg.mul_mat(a, ctx.from_numpy(x))
        assert out.type == T.F32 and out.ne == (m, n, 1, 1)
        run(out, n_threads)
        check(out, ref.mul_mat(av, x, typ), typ)


@pytest.mark.parametrize("n_threads", THREADS)
@pytest.mark.parametrize("n", [1, 3, 19])
@pytest.mark.parametrize("typ", WTYPES)
def test_broadcast(ctx, rng, typ, n, n_threads):
    """a [K, M, 2, 3] against b [K, N, 4, 6]: b matrix (i2, i3) uses a matrix (i2 // 2, i3 // 2)"""
    k, m = 64, 21
    w = rng.standard_normal((3, 2, m, k)).astype(np.float32)
    x = rng.standard_normal((6, 4, n, k)).astype(np.float32)
    a, av = weights(ctx, w, typ)
    out = gg.mul_mat(a, ctx.from_numpy(x))
    assert out.ne == (m, n, 4, 6)
    run(out, n_threads)
    want = ref.mul_mat(av, x, typ)
    check(out, want, typ)
    # integer division, not modulo: the result would differ under np.tile
    alt = ref.mul_mat(np.tile(av, (2, 2, 1, 1)), x, "F32")
    assert ref.nmse(want, alt) > 1e-2


@pytest.mark.parametrize("n_threads", THREADS)
@pytest.mark.parametrize("n", [1, 5, 24])
@pytest.mark.parametrize("typ", WTYPES)
def test_strided_activations(ctx, rng, typ, n, n_threads):
    """b a permuted view with padded rows: nb1 = 3 rows of the base, dims 1 and 2 swapped"""
    k = 96
    base = rng.standard_normal((n, 3, 2, k + 8)).astype(np.float32)   # ne [k+8, 2, 3, n]
    tb = ctx.from_numpy(base)
    v = gg.view_4d(tb, k, 2, 3, n, tb.nb[1], tb.nb[2], tb.nb[3], 4 * 4)  # skip 4 floats per row
    b = gg.permute(v, 0, 2, 1, 3)                                        # ne [k, 3, 2, n]
    assert not b.is_contiguous() and b.ne == (k, 3, 2, n)
    x = base[..., 4:4 + k].transpose(0, 2, 1, 3)                        # numpy [n, 2, 3, k]
    w = rng.standard_normal((1, 2, 5, k)).astype(np.float32)
    a, av = weights(ctx, w, typ)
    out = gg.mul_mat(a, b)
    run(out, n_threads)
    check(out, ref.mul_mat(av, x, typ), typ)


@pytest.mark.parametrize("n_threads", THREADS)
@pytest.mark.parametrize("n", [1, 21])
@pytest.mark.parametrize("typ", ["F32", "F16", "Q8_0", "Q5_1"])
def test_strided_weights(ctx, rng, typ, n, n_threads):
    """a: every other row of a larger weight tensor (nb1 = 2 rows)"""
    k, m = 64, 15
    w = rng.standard_normal((2 * m, k)).astype(np.float32)
    tw, wv = weights(ctx, w, typ)
    a = gg.view_2d(tw, k, m, 2 * tw.nb[1], 0)
    x = rng.standard_normal((n, k)).astype(np.float32)
    out = gg.mul_mat(a, ctx.from_numpy(x))
    run(out, n_threads)
    check(out, ref.mul_mat(wv[::2], x, typ), typ)


@pytest.mark.parametrize("n_threads", THREADS)
@pytest.mark.parametrize("typ", ["F32", "F16", "BF16"])
@pytest.mark.parametrize("k", [4096 + 2 * 16 + 5, 200 + 5])
@pytest.mark.parametrize("m", [7, 2])
def test_one_column_gemv(ctx, rng, typ, k, m, n_threads):
    """one column dots two weight rows per call (the two halves of a thread's rows side by side),
    and with K past 4096 in the activation's fp16/bf16 form (the f32 copy would not stay in L1):
    the reference's value, and bit for bit each row alone (one row per call), with vector tails and
    an odd row left over"""
    w = rng.standard_normal((m, k)).astype(np.float32)
    x = rng.standard_normal((1, k)).astype(np.float32)
    a, av = weights(ctx, w, typ)
    xt = ctx.from_numpy(x)
    one = gg.mul_mat(a, xt)
    alone = [gg.mul_mat(weights(ctx, w[i:i + 1], typ)[0], xt) for i in range(m)]
    g = gg.CGraph()
    for t in [one] + alone:
        g.build_forward_expand(t)
    g.compute(n_threads=n_threads)
    check(one, ref.mul_mat(av, x, typ), typ)
    np.testing.assert_array_equal(one.to_numpy()[0], [t.to_numpy()[0, 0] for t in alone])


FLOAT_NS = [n for n in (2, 3, 4, 5, 7, 9, 16, 23, 31) if n < gemm_min_cols()]


@pytest.mark.parametrize("n_threads", THREADS)
@pytest.mark.parametrize("typ", ["F32", "F16", "BF16"])
def test_float_tile_columns(ctx, rng, typ, n_threads):
    """from 2 columns to gemm_min_cols() float weights take the dot tiles: each column has the bits
    of the same column in a product of any other number of columns there, and of the dot4 row
    kernel (one weight row against four f32 columns, the activations rounded to the weights' type
    first), with tails in rows (M = 7: a tile of 4 rows and 3 single rows), odd K (vector and
    scalar tails) over several of the pieces the column groups take turns on, and groups of fewer
    columns than a tile's"""
    if not FLOAT_NS:
        pytest.skip("the GEMM starts at 2 columns here")
    k, m = 16 * 40 + 7, 7
    w = rng.standard_normal((m, k)).astype(np.float32)
    x = rng.standard_normal((max(FLOAT_NS), k)).astype(np.float32)
    a, av = weights(ctx, w, typ)
    outs = [gg.mul_mat(a, ctx.from_numpy(x[:n])) for n in FLOAT_NS]
    g = gg.CGraph()
    for t in outs:
        g.build_forward_expand(t)
    g.compute(n_threads=n_threads)
    full = outs[-1].to_numpy()
    check(outs[-1], ref.mul_mat(av, x, typ), typ)
    for n, out in zip(FLOAT_NS, outs):
        np.testing.assert_array_equal(out.to_numpy(), full[:n], err_msg=f"N={n}")
    xr = ref.roundtrip(x, typ)               # the activations as the dot type holds them
    kind = typ.lower()
    rows = {"F32": av, "F16": ref.f32_to_f16_bits(av), "BF16": ref.f32_to_bf16_bits(av)}[typ]
    rows = np.ascontiguousarray(rows)
    for i in range(m):
        for j0 in range(0, len(x) - 3, 4):
            s4 = np.zeros(4, np.float32)
            _vec.dot4(kind, k, rows[i].ctypes.data, [xr[j].ctypes.data for j in range(j0, j0 + 4)], s4.ctypes.data)
            np.testing.assert_array_equal(full[j0:j0 + 4, i], s4, err_msg=f"row {i}, columns {j0}..")


@pytest.mark.parametrize("n_threads", THREADS)
@pytest.mark.parametrize("typ", ["F32", "F16", "BF16"])
def test_float_tile_batches(ctx, rng, typ, n_threads):
    """the dot tiles over batches: weights broadcast over dims 2 and 3, every other row of a larger
    tensor, activations a permuted view with padded rows, odd K and M, against the float64 reference"""
    k, m = 16 * 5 + 3, 13
    for n in [n for n in (2, 4, 11, 29) if n < gemm_min_cols()] or [2]:
        w = rng.standard_normal((3, 1, 2 * m, k)).astype(np.float32)
        tw, wv = weights(ctx, w, typ)
        a = gg.view_4d(tw, k, m, 1, 3, 2 * tw.nb[1], tw.nb[2], tw.nb[3], 0)
        base = rng.standard_normal((6, n, 2, k + 8)).astype(np.float32)   # ne [k+8, 2, n, 6]
        tb = ctx.from_numpy(base)
        v = gg.view_4d(tb, k, 2, n, 6, tb.nb[1], tb.nb[2], tb.nb[3], 4 * 4)
        b = gg.permute(v, 0, 2, 1, 3)                                     # ne [k, n, 2, 6]
        assert not b.is_contiguous() and b.ne == (k, n, 2, 6)
        x = base[..., 4:4 + k].transpose(0, 2, 1, 3)                     # numpy [6, 2, n, k]
        out = gg.mul_mat(a, b)
        run(out, n_threads)
        check(out, ref.mul_mat(wv[:, :, ::2], x, typ), typ)


@pytest.mark.parametrize("n_threads", THREADS)
@pytest.mark.parametrize("typ", QUANT)
def test_quant_columns_independent_of_n(ctx, rng, typ, n_threads):
    """a column's sums are the same bits whatever the other columns: the GEMM path (register tiles of
    several weight rows and up to four columns on x86) against each column alone (the GEMV path),
    with tails in rows (M = 7) and columns (N = 17, 18, 19: a last tile of 1, 2 and 3 columns) and
    an odd number of blocks (K = 160)"""
    k, m, n = 160, 7, 19
    a = ctx.from_numpy(rng.standard_normal((m, k)).astype(np.float32), type=T[typ])
    x = rng.standard_normal((n, k)).astype(np.float32)
    fulls = [gg.mul_mat(a, ctx.from_numpy(x[:j])) for j in (17, 18, 19)]
    cols = [gg.mul_mat(a, ctx.from_numpy(x[j:j + 1])) for j in range(n)]
    g = gg.CGraph()
    for t in fulls + cols:
        g.build_forward_expand(t)
    g.compute(n_threads=n_threads)
    alone = np.concatenate([c.to_numpy() for c in cols])
    for full in fulls:
        got = full.to_numpy()
        np.testing.assert_array_equal(got, alone[:len(got)], err_msg=f"N={len(got)}")


@pytest.mark.parametrize("n_threads", THREADS)
@pytest.mark.parametrize("typ", ["Q4_0", "Q8_0", "IQ4_NL", "MXFP4"])
def test_quant_panels(ctx, rng, typ, n_threads):
    """Q8_0, Q4_0, IQ4_NL and MXFP4 on AVX-512 (VNNI, GFNI) take weight rows in panels of 16, up to 64 rows and 64
    columns a call: up to 16 columns with each panel's blocks in registers (as the one-column GEMV),
    more 8 at a time against blocks made once per pass of 32, the GEMV and the few columns in
    passes of 256: every column bit for bit the column alone, with a last panel of 3 rows, a last
    register group of 6 columns, a call of 6 columns after one of 64, and an odd last pass; near
    the reference elsewhere too. Where the level has no panels for the type, the same columns over
    three blocks: the pass lengths are the panels'"""
    m, k = 16 * 5 + 3, 32 * (256 + 33) if panels_here(typ) else 96
    w = rng.standard_normal((m, k)).astype(np.float32)
    a, av = weights(ctx, w, typ)
    x = rng.standard_normal((70, k)).astype(np.float32)
    outs = [gg.mul_mat(a, ctx.from_numpy(x[:n])) for n in (3, 14, 16, 17, 30, 70)]
    cols = [gg.mul_mat(a, ctx.from_numpy(x[j:j + 1])) for j in range(70)]
    g = gg.CGraph()
    for t in outs + cols:
        g.build_forward_expand(t)
    g.compute(n_threads=n_threads)
    alone = np.concatenate([c.to_numpy() for c in cols])
    check(outs[-1], ref.mul_mat(av, x, typ), typ)
    for out in outs:
        got = out.to_numpy()
        np.testing.assert_array_equal(got.view(np.uint32), alone[:len(got)].view(np.uint32), err_msg=f"N={len(got)}")


@pytest.mark.parametrize("typ", ["Q8_0", "Q4_0", "Q5_0", "Q4_1", "MXFP4"])
def test_quant_gemv_long_rows(ctx, rng, typ):
    """the one-column GEMV of the 32-element block types prepares the column once for all rows up
    to rows of 32K elements (AVX2: its scales) or 16K (AVX-512's row pairs, Q5_0/Q4_1: its blocks,
    corrections and scales; the panels, Q8_0/Q4_0/MXFP4: passes of 8K), and past that takes the
    rows one tile call each: both bit for bit the GEMM's column, with an odd last block and an odd
    number of rows (AVX-512: a row left over from the row pairs)"""
    m = 3
    for k in [16384 - 32, 16384 + 96, 32768 - 32, 32768 + 96]:
        a = ctx.from_numpy(rng.standard_normal((m, k)).astype(np.float32), type=T[typ])
        x = rng.standard_normal((5, k)).astype(np.float32)
        one = gg.mul_mat(a, ctx.from_numpy(x[:1]))
        full = gg.mul_mat(a, ctx.from_numpy(x))
        run(one, 2)
        run(full, 2)
        np.testing.assert_array_equal(one.to_numpy()[0], full.to_numpy()[0])


@pytest.mark.parametrize("typ", ["Q8_0", "IQ4_NL", "Q5_1", "MXFP4"])
def test_quant_gemm_decoded_rows_limit(ctx, rng, typ):
    """the AVX2 tile decodes its weight rows once for calls of more than 4 columns when a row has at
    most 128 steps of two blocks (K <= 8192), and decodes them per group of 4 columns past that:
    either way each column's bits are those of the column alone, at the limit and one block on
    each side of it (an odd last block at K = 8160 and 8224)"""
    m, n = 3, 6
    for k in [8192 - 32, 8192, 8192 + 32]:
        a = ctx.from_numpy(rng.standard_normal((m, k)).astype(np.float32), type=T[typ])
        x = rng.standard_normal((n, k)).astype(np.float32)
        full = gg.mul_mat(a, ctx.from_numpy(x))
        cols = [gg.mul_mat(a, ctx.from_numpy(x[j:j + 1])) for j in range(n)]
        g = gg.CGraph()
        for t in [full] + cols:
            g.build_forward_expand(t)
        g.compute(n_threads=2)
        alone = np.concatenate([c.to_numpy() for c in cols])
        np.testing.assert_array_equal(full.to_numpy().view(np.uint32), alone.view(np.uint32), err_msg=f"K={k}")


@pytest.mark.parametrize("typ", ["F16", "BF16", "Q8_0", "Q4_1"])
def test_activation_rounding(ctx, rng, typ):
    """the activations are converted to the dot type first (a reference without it is far off)"""
    k, m = 256, 8
    w = rng.standard_normal((m, k)).astype(np.float32)
    x = rng.standard_normal((9, k)).astype(np.float32)
    a, av = weights(ctx, w, typ)
    out = gg.mul_mat(a, ctx.from_numpy(x))
    run(out, 2)
    check(out, ref.mul_mat(av, x, typ), typ)
    assert ref.nmse(out.to_numpy(), ref.mul_mat(av, x, "F32")) > 1e-9


def test_chain_and_recompute(ctx, rng):
    """two GEMMs and a GEMV in one graph (barriers and the chunk counter between nodes, an
    intermediate as weights); the graph computes again after its input changed in place"""
    k, h, n = 64, 40, 20
    w1 = rng.standard_normal((h, k)).astype(np.float32)
    w2 = rng.standard_normal((24, h)).astype(np.float32)
    uv = rng.standard_normal((1, h)).astype(np.float32)
    x = ctx.from_numpy(rng.standard_normal((n, k)).astype(np.float32))
    a1, a1v = weights(ctx, w1, "F16")
    hid = gg.mul_mat(a1, x)                                  # [h, n]
    y = gg.mul_mat(ctx.from_numpy(w2), hid)                  # [24, n]
    z = gg.mul_mat(hid, ctx.from_numpy(uv))                  # [n, 1]: GEMV, F32 weights
    g = gg.CGraph()
    for t in (y, z):
        g.build_forward_expand(t)
    for _ in range(2):
        xv = rng.standard_normal((n, k)).astype(np.float32)
        x.set(xv)
        g.compute(n_threads=2)
        hv = ref.mul_mat(a1v, xv, "F16")
        check(y, ref.mul_mat(w2, hv, "F32"))
        check(z, ref.mul_mat(hv, uv, "F32"))


@pytest.mark.parametrize("n", [1, 40])
@pytest.mark.parametrize("typ", ["F32", "F16", "Q8_0"])
def test_empty_rows(ctx, typ, n):
    """K = 0: every dot product is empty, the result is zeros (dot path and GEMM path)"""
    out = gg.mul_mat(ctx.new_tensor(T[typ], (0, 5)), ctx.new_tensor(T.F32, (0, n)))
    run(out, 2)
    assert out.ne == (5, n, 1, 1) and not out.to_numpy().any()


def test_errors(ctx):
    a = ctx.new_tensor(T.F16, (64, 8))
    b = ctx.new_tensor(T.F32, (64, 4))
    with pytest.raises(TypeError, match="mul_mat: a must be a pyggml.Tensor"):
        gg.mul_mat(np.zeros((8, 64)), b)
    with pytest.raises(TypeError, match="mul_mat: a must be of type .*got I32"):
        gg.mul_mat(ctx.new_tensor(T.I32, (64, 8)), b)
    with pytest.raises(TypeError, match="mul_mat: b must be of type F32, got F16"):
        gg.mul_mat(a, ctx.new_tensor(T.F16, (64, 4)))
    with pytest.raises(ValueError, match="mul_mat: a.ne.0. and b.ne.0. must match, got 64 and 32"):
        gg.mul_mat(a, ctx.new_tensor(T.F32, (32, 4)))
    with pytest.raises(ValueError, match=r"mul_mat: b.ne\[2:4\] = \(3, 1\) must be multiples of a.ne\[2:4\] = \(2, 1\)"):
        gg.mul_mat(ctx.new_tensor(T.F16, (64, 8, 2)), ctx.new_tensor(T.F32, (64, 4, 3)))
    with pytest.raises(ValueError, match="must be multiples"):
        gg.mul_mat(ctx.new_tensor(T.F16, (64, 8, 0)), ctx.new_tensor(T.F32, (64, 4, 2)))
    with pytest.raises(ValueError, match="mul_mat: b must be packed in dim 0"):
        gg.mul_mat(ctx.new_tensor(T.F32, (4, 8)), gg.transpose(ctx.new_tensor(T.F32, (64, 4))))
    with pytest.raises(ValueError, match="mul_mat: a must be packed in dim 0"):
        gg.mul_mat(gg.transpose(ctx.new_tensor(T.F32, (8, 4))), ctx.new_tensor(T.F32, (4, 4)))


# the weight types with a repacked layout (Tensor.repack) where the panels run: AVX-512 with VNNI and
# GFNI (Q6_K's GEMV there is its row pairs, without one), and AVX2 (Q6_K's too)
PANEL_TYPES = ["Q8_0", "Q4_0", "IQ4_NL", "MXFP4", "Q4_K", "Q5_K"]
AVX2_PANEL_TYPES = PANEL_TYPES + ["Q6_K"]


def panels_here(typ):
    return typ in gg.build_info()["repack"]


def test_repack_types():
    """build_info()["repack"]: the panel types where the kernels have them, none elsewhere"""
    here = gg.build_info()["repack"]
    assert set(here) in (set(), set(AVX2_PANEL_TYPES), set(PANEL_TYPES)) and len(here) == len(set(here))
    want = {"avx2": AVX2_PANEL_TYPES, "scalar": [], "neon": [], "rvv": []}.get(gg.build_info()["simd"])
    if want is not None:
        assert sorted(here) == sorted(want)


@pytest.mark.parametrize("n_threads", THREADS)
@pytest.mark.parametrize("typ", PANEL_TYPES + ["Q6_K", "Q5_0", "F16"])
def test_repacked_weights(ctx, rng, typ, n_threads):
    """Tensor.repack: a copy of the rows in the panel layout the kernels read, where this level has
    one (else 0 bytes and nothing changes); mul_mat then reads the copy, every column bit for bit
    what the rows give: the one-column GEMV, few columns, many (AMX where the CPU has it), a last
    panel of 3 rows, an odd last pass of blocks. Its bytes are the panels' (rows padded to 16, and
    MXFP4's heads to two bytes)"""
    blck = gg.blck_size(T[typ])
    if not panels_here(typ):            # nothing to read but the rows: repack() copies nothing
        a = ctx.from_numpy(rng.standard_normal((3, blck)).astype(np.float32), type=T[typ])
        assert a.repack(n_threads=n_threads) == 0 and a.repacked == 0
        return
    m, k = 16 * 5 + 3, blck * (64 + 3) if blck == 256 else 32 * (256 + 33)
    w = rng.standard_normal((m, k)).astype(np.float32)
    a = ctx.from_numpy(w, type=T[typ])
    x = rng.standard_normal((70, k)).astype(np.float32)
    outs = [gg.mul_mat(a, ctx.from_numpy(x[:n])) for n in (1, 3, 17, 40, 70)]
    g = gg.CGraph()
    for t in outs:
        g.build_forward_expand(t)
    g.compute(n_threads=n_threads)
    rows = [t.to_numpy() for t in outs]
    nbytes = a.repack(n_threads=n_threads)          # panels split between the threads
    assert a.repacked == nbytes and a.repack() == nbytes
    size = {"MXFP4": 2 + 16, "Q6_K": 212}.get(typ, gg.type_size(T[typ]))     # rows padded to whole dwords
    assert nbytes == 16 * 6 * (k // blck) * size
    g.compute(n_threads=n_threads)
    for t, want in zip(outs, rows):
        np.testing.assert_array_equal(t.to_numpy().view(np.uint32), want.view(np.uint32), err_msg=f"N={t.ne[1]}")
    assert a.repack(False) == 0 and a.repacked == 0


@pytest.mark.parametrize("typ", ["Q4_0", "Q4_K"])
def test_repacked_weights_are_what_mul_mat_reads(ctx, rng, typ):
    """mul_mat reads the repacked copy, not the rows: rows written behind the tensor's back (through
    the buffer of from_buffer) do not change its results until repack() is made again; set_bytes
    makes it again itself; views read the rows; a 4-D tensor is not repacked"""
    if not panels_here(typ):
        pytest.skip("no repacked layout at this kernel level")
    k, m = 512, 48
    w1, w2 = (rng.standard_normal((m, k)).astype(np.float32) for _ in range(2))
    q1, q2 = (ctx.from_numpy(w, type=T[typ]).tobytes() for w in (w1, w2))
    buf = bytearray(q1)
    a = ctx.from_buffer(T[typ], (k, m), buf)
    x = ctx.from_numpy(rng.standard_normal((1, k)).astype(np.float32))
    y = gg.mul_mat(a, x)
    view = gg.view_2d(a, k, 16, a.nb[1], 16 * a.nb[1])
    yv = gg.mul_mat(view, x)
    g = gg.CGraph()
    g.build_forward_expand(y)
    g.build_forward_expand(yv)
    g.compute(n_threads=2)
    first = y.to_numpy().copy()
    a.repack()
    buf[:] = q2
    g.compute(n_threads=2)
    np.testing.assert_array_equal(y.to_numpy(), first)                 # the copy of the old rows
    second = gg.mul_mat(ctx.from_numpy(w2, type=T[typ]), x)
    run(second, 2)
    np.testing.assert_array_equal(yv.to_numpy(), second.to_numpy()[:, 16:32])   # a view: the rows
    a.repack(False)
    a.repack()
    g.compute(n_threads=2)
    np.testing.assert_array_equal(y.to_numpy(), second.to_numpy())
    a.set_bytes(q1)
    g.compute(n_threads=2)
    np.testing.assert_array_equal(y.to_numpy(), first)
    t4 = ctx.from_numpy(rng.standard_normal((2, 1, m, k)).astype(np.float32), type=T[typ])
    assert t4.repack() == 0
