"""The K-quants (Q2_K..Q6_K, Q8_K): to_float against the float64 block-format reference and the gguf
package's numpy dequantisers, from_float against ggml's own bytes (tests/data, made by
tools/kquants_golden.py) and reference.py's Q8_K quantiser, quantiser edge cases, the integer dot
products through mul_mat (with IQ4_XS, the other type dotted against Q8_K), and the tensor
conversions (get_rows, cpy both ways, set_rows)."""
from pathlib import Path

try:
    import gguf  # the second, independent check (requirements-dev.txt; the qemu sysroots lack it)
except ImportError:
    gguf = None
import numpy as np
import pytest
import reference as ref
from conftest import EMULATED, THREADS, run

import pyggml as gg

KTYPES = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]
ALL = KTYPES + ["Q8_K"]
GOLDEN = np.load(Path(__file__).resolve().parents[1] / "data" / "kquants_ggml.npz")
# roundtrip NMSE bounds for unit gaussians, 1.5x of what ggml's quantisers reach (0.085, 0.023,
# 5.1e-3, 1.3e-3, 3.2e-4, 4.8e-5)
QUANT_NMSE = {"Q2_K": 0.13, "Q3_K": 0.035, "Q4_K": 7.5e-3, "Q5_K": 2e-3, "Q6_K": 5e-4, "Q8_K": 7e-5}


def stored(t):
    """the bytes of a packed tensor as [rows, row bytes]"""
    return np.frombuffer(t.tobytes(), np.uint8).reshape(-1, gg.row_size(t.type, t.ne[0]))


@pytest.mark.parametrize("typ", ALL)
def test_layout(typ):
    size = ref.K_LAYOUT[typ][0]
    assert gg.blck_size(gg.Type[typ]) == 256 and gg.type_size(gg.Type[typ]) == size
    assert int(gg.Type[typ]) == {"Q2_K": 10, "Q3_K": 11, "Q4_K": 12, "Q5_K": 13, "Q6_K": 14, "Q8_K": 15}[typ]
    if typ != "Q8_K" and gguf is not None:
        assert gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[typ]] == (256, size)


@pytest.mark.parametrize("typ", ALL)
def test_quantize_bytes_equal_ggml(ctx, typ):
    """every edge-case row of the golden file (zeros, ties, outliers, constants, tiny values; three
    super-blocks a row) quantises to ggml's bytes"""
    x = GOLDEN["x"]
    got = stored(ctx.from_numpy(x, type=gg.Type[typ]))
    for r in range(x.shape[0]):
        np.testing.assert_array_equal(got[r], GOLDEN[typ][r], err_msg=f"{typ} row {r}")


def test_q8_k_reference_quantiser(ctx, rng):
    x = rng.standard_normal((5, 768)).astype(np.float32)
    x[1, :256] = 0
    x[2] = np.round(x[2] * 3)
    np.testing.assert_array_equal(stored(ctx.from_numpy(x, type=gg.Type.Q8_K)), ref.quantize_q8_k(x))
    np.testing.assert_array_equal(ref.quantize_q8_k(GOLDEN["x"]), GOLDEN["Q8_K"])


def test_q8_k_overflowing_scale_and_nan(ctx):
    """ggml's nearest_int (an addition of 1.5 * 2^23) wraps what it cannot round: in a block whose
    largest |x| is below 127 / FLT_MAX, iscale = -127/max is infinite, every product inf or NaN, and
    they all store 0 (d = 1/inf = 0), on every build (the NEON and AVX-512 quantisers round the same
    way, not with a saturating conversion). A NaN is passed over by the max and stores 0."""
    x = np.linspace(-1, 1, 512, dtype=np.float32).reshape(2, 256)
    x[0] *= np.float32(1e-40)
    x[1, 5] = np.nan
    got = stored(ctx.from_numpy(x.reshape(1, 512), type=gg.Type.Q8_K)).reshape(2, 292)
    assert not got[0].any()
    finite = x[1:].copy()
    finite[0, 5] = 0
    np.testing.assert_array_equal(got[1], ref.quantize_q8_k(finite)[0])


@pytest.mark.parametrize("typ", ALL)
def test_dequantize(ctx, rng, typ):
    """to_numpy equals the float64 block-format values rounded once to f32 (ggml's float steps
    round once), and the gguf package's dequantiser bit for bit"""
    x = np.concatenate([GOLDEN["x"], rng.standard_normal((3, 768)).astype(np.float32) * 5])
    t = ctx.from_numpy(x, type=gg.Type[typ])
    got = t.to_numpy()
    want = ref.dequantize_k(stored(t), typ).reshape(x.shape)
    np.testing.assert_array_equal(got, want.astype(np.float32))
    if typ != "Q8_K" and gguf is not None:
        g = gguf.quants.dequantize(stored(t), gguf.GGMLQuantizationType[typ])
        np.testing.assert_array_equal(got.view(np.uint32), g.astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("typ", ALL)
def test_quantiser_error_and_edge_cases(ctx, rng, typ):
    x = rng.standard_normal((8, 512)).astype(np.float32)
    back = ctx.from_numpy(x, type=gg.Type[typ]).to_numpy()
    assert ref.nmse(back, x) < QUANT_NMSE[typ]
    # all-zero rows: exact zeros back; a zero super-block beside a normal one stays zero
    z = np.zeros((2, 512), np.float32)
    z[1, 256:] = x[0, 256:]
    zb = ctx.from_numpy(z, type=gg.Type[typ]).to_numpy()
    assert not zb[0].any() and not zb[1, :256].any()
    # an outlier is kept to within the super-block's precision, and does not poison the next block
    o = x[:1].copy()
    o[0, 7] = 300.0
    ob = ctx.from_numpy(o, type=gg.Type[typ]).to_numpy()
    assert abs(ob[0, 7] - 300.0) < 300.0 * 0.15
    assert ref.nmse(ob[0, 256:], o[0, 256:]) < QUANT_NMSE[typ]


@pytest.mark.parametrize("typ", ALL)
def test_bad_sizes(ctx, typ):
    with pytest.raises(ValueError, match="multiple of 256"):
        ctx.new_tensor(gg.Type[typ], (320, 2))


# ---- mul_mat: the integer dots against Q8_K activations ----

SHAPES = [(1, 1), (7, 3), (5, 9)] if EMULATED else [(1, 1), (33, 1), (7, 5), (3, 7), (17, 24), (1, 130)]
DOT_TYPES = KTYPES + ["IQ4_XS"]          # IQ4_XS: a 256-element super-block dotted against Q8_K too


def weights(ctx, rng, typ, m, k):
    """[m, k] weights of type typ with rows of different scales, and their stored values in float64
    from the block bytes; IQ4_XS's bytes come from reference.py's own quantiser (from_bytes)"""
    w = (rng.standard_normal((m, k)) * rng.uniform(0.1, 3, (m, 1))).astype(np.float32)
    if typ == "IQ4_XS":
        raw = ref.encode_iq4_xs(w)
        return ctx.from_bytes(gg.Type.IQ4_XS, (k, m), raw.tobytes()), ref.dequantize_iq4_xs(raw, k).reshape(m, k)
    a = ctx.from_numpy(w, type=gg.Type[typ])
    return a, ref.dequantize_k(stored(a), typ).reshape(m, k)


@pytest.mark.parametrize("n_threads", THREADS)
@pytest.mark.parametrize("mn", SHAPES)
@pytest.mark.parametrize("typ", DOT_TYPES)
def test_mul_mat(ctx, rng, typ, mn, n_threads):
    """N below pg_mm_gemm_min_n is the dot path (vec_dot_n: up to four columns per decoded weight
    row), above it the integer GEMM tiles; K of 1 and 3 super-blocks, odd M. The reference rounds
    the activations to Q8_K as ggml does and uses the stored weights, so only f32 rounding of the
    per-block sums is left."""
    m, n = mn
    for k in (256, 768):
        a, wv = weights(ctx, rng, typ, m, k)
        x = rng.standard_normal((n, k)).astype(np.float32)
        out = gg.mul_mat(a, ctx.from_numpy(x))
        run(out, n_threads)
        want = ref.mul_mat(wv, x, typ)
        assert ref.nmse(out.to_numpy(), want) < 1e-10


@pytest.mark.parametrize("m", [11, 6])
@pytest.mark.parametrize("typ", DOT_TYPES)
def test_columns_are_vec_dot_bits(ctx, rng, typ, m):
    """every column of a product (2..5 columns: vec_dot_n with nc 2..4 and a remainder; 9..67: the
    integer GEMM, on AVX-512 the register tiles of vec_dot_tile: four-row tiles of two-row passes of
    up to eight columns, M = 11 and 6 leaving three and two rows, N leaving 1..7 columns of an
    eight-column step and 1..3 of a four-column one) has the bits of the same column alone (N = 1:
    the GEMV, one column per call)"""
    k = 512
    a, _ = weights(ctx, rng, typ, m, k)
    x = rng.standard_normal((67, k)).astype(np.float32)
    alone = []
    for j in range(len(x)):
        out = gg.mul_mat(a, ctx.from_numpy(x[j:j + 1]))
        run(out)
        alone.append(out.to_numpy()[0])
    alone = np.array(alone)
    for n, nth in [(2, 1), (3, 2), (4, 1), (5, 2), (9, 1), (10, 2), (21, 1), (23, 2), (30, 1), (67, 1), (67, 2)]:
        out = gg.mul_mat(a, ctx.from_numpy(x[:n]))
        run(out, nth)
        np.testing.assert_array_equal(out.to_numpy().view(np.uint32), alone[:n].view(np.uint32), err_msg=f"N={n}")


@pytest.mark.parametrize("n_threads", THREADS)
@pytest.mark.parametrize("typ", ["Q4_K", "Q5_K", "Q6_K"])
def test_k_panels(ctx, rng, typ, n_threads):
    """Q4_K, Q5_K and Q6_K on AVX-512 (VNNI, GFNI) take weight rows in panels of 16, up to 64 rows and 64
    columns a call: up to 8 columns with each panel's super-blocks made and used at once (Q4_K/Q5_K:
    as their GEMV), more 8 at a time in registers against super-blocks made once per pass (Q4_K/Q5_K:
    of 8, Q6_K: of 4; the few columns: passes of 64). Q6_K's GEMV is the row-pair kernel with the
    panels' f32 steps. Every column bit for bit the column alone, with a last panel of 3 rows, a last
    register group of 6 columns, a call of 6 columns after one of 64, and a last pass of one
    super-block; near the reference too. On a CPU with AMX, Q4_K's and Q5_K's many columns take their
    sub-block sums from the tiles (passes of 4), the same integers. At a level without panels (no
    repacked types), the same columns over three super-blocks: the pass lengths are the panels'"""
    m, k = 16 * 5 + 3, 256 * 65 if gg.build_info()["repack"] else 256 * 3
    a, wv = weights(ctx, rng, typ, m, k)
    x = rng.standard_normal((70, k)).astype(np.float32)
    outs = [gg.mul_mat(a, ctx.from_numpy(x[:n])) for n in (3, 8, 9, 14, 70)]
    cols = [gg.mul_mat(a, ctx.from_numpy(x[j:j + 1])) for j in range(70)]
    g = gg.CGraph()
    for t in outs + cols:
        g.build_forward_expand(t)
    g.compute(n_threads=n_threads)
    alone = np.concatenate([c.to_numpy() for c in cols])
    assert ref.nmse(outs[-1].to_numpy(), ref.mul_mat(wv, x, typ)) < 1e-10
    for out in outs:
        got = out.to_numpy()
        np.testing.assert_array_equal(got.view(np.uint32), alone[:len(got)].view(np.uint32), err_msg=f"N={len(got)}")


def test_mul_mat_against_f32(ctx, rng):
    """Q4_K weights and Q8_K activations against the float weights: the quantisation error only"""
    w = rng.standard_normal((64, 512)).astype(np.float32)
    x = rng.standard_normal((3, 512)).astype(np.float32)
    out = gg.mul_mat(ctx.from_numpy(w, type=gg.Type.Q4_K), ctx.from_numpy(x))
    run(out)
    assert ref.nmse(out.to_numpy(), x.astype(np.float64) @ w.T) < 2e-2


def test_q8_k_is_no_weight_type(ctx):
    a = ctx.new_tensor(gg.Type.Q8_K, (256, 4))
    with pytest.raises(TypeError, match="mul_mat"):
        gg.mul_mat(a, ctx.new_tensor(gg.Type.F32, (256, 2)))


# ---- conversions between tensors ----

@pytest.mark.parametrize("typ", ALL)
def test_get_rows_and_cpy(ctx, rng, typ):
    x = rng.standard_normal((5, 512)).astype(np.float32)
    q = ctx.from_numpy(x, type=gg.Type[typ])
    stored_values = q.to_numpy()
    idx = np.array([4, 0, 2, 2], np.int32)
    rows = gg.get_rows(q, ctx.from_numpy(idx))
    to_f32 = gg.cpy(q, ctx.new_tensor(gg.Type.F32, (512, 5)))
    to_q = gg.cpy(ctx.from_numpy(x), ctx.new_tensor(gg.Type[typ], (512, 5)))
    f16 = ctx.from_numpy(x.astype(np.float16))
    from_f16 = gg.cpy(f16, ctx.new_tensor(gg.Type[typ], (512, 5)))
    dup = gg.dup(q)
    run([rows, to_f32, to_q, from_f16, dup], 2)
    np.testing.assert_array_equal(rows.to_numpy(), stored_values[idx])
    np.testing.assert_array_equal(to_f32.to_numpy(), stored_values)
    np.testing.assert_array_equal(stored(to_q), stored(q))
    np.testing.assert_array_equal(stored(from_f16), stored(ctx.from_numpy(x.astype(np.float16).astype(np.float32),
                                                                           type=gg.Type[typ])))
    np.testing.assert_array_equal(stored(dup), stored(q))


@pytest.mark.parametrize("n_threads", THREADS)
@pytest.mark.parametrize("typ", ["Q4_K", "Q6_K"])
def test_set_rows(ctx, rng, typ, n_threads):
    a = ctx.new_tensor(gg.Type[typ], (512, 6))
    src = rng.standard_normal((3, 512)).astype(np.float32)
    out = gg.set_rows(a, ctx.from_numpy(src), ctx.from_numpy(np.array([5, 1, 3], np.int64)))
    run(out, n_threads)
    want = np.zeros((6, 512), np.float32)
    want[[5, 1, 3]] = ctx.from_numpy(src, type=gg.Type[typ]).to_numpy()
    np.testing.assert_array_equal(a.to_numpy(), want)


def test_from_bytes_roundtrip(ctx, rng):
    x = rng.standard_normal((2, 256)).astype(np.float32)
    q = ctx.from_numpy(x, type=gg.Type.Q6_K)
    again = ctx.from_bytes(gg.Type.Q6_K, (256, 2), q.tobytes())
    np.testing.assert_array_equal(again.to_numpy(), q.to_numpy())


# ---- the Q4_K_M mixture of llama-quantize (pyggml._mixtures) ----

T_F16, T_F32 = gg.Type.F16, gg.Type.F32


def _llama_tensors(n_layer, d=256, ff=512, vocab=512, tied=False):
    ts = [("token_embd.weight", (vocab, d), T_F16), ("output_norm.weight", (d,), T_F32)]
    if not tied:
        ts.append(("output.weight", (vocab, d), T_F16))
    for i in range(n_layer):
        for name, shape in [("attn_norm.weight", (d,)), ("attn_q.weight", (d, d)), ("attn_k.weight", (d // 2, d)),
                            ("attn_v.weight", (d // 2, d)), ("attn_output.weight", (d, d)), ("ffn_norm.weight", (d,)),
                            ("ffn_gate.weight", (ff, d)), ("ffn_up.weight", (ff, d)), ("ffn_down.weight", (d, ff))]:
            ts.append((f"blk.{i}.{name}", shape, T_F32 if len(shape) == 1 else T_F16))
    return ts


def test_q4_k_m_mixture():
    from pyggml._mixtures import tensor_types
    ts = _llama_tensors(8)
    got = dict(zip([n for n, _, _ in ts], tensor_types(ts[::-1], "q4_k_m", 8)[::-1]))
    T = gg.Type
    assert got["token_embd.weight"] == T.Q4_K and got["output.weight"] == T.Q6_K
    assert got["output_norm.weight"] == T.F32 and got["blk.3.attn_norm.weight"] == T.F32
    more = {0, 3, 6, 7}          # use_more_bits(i, 8): the first and last eighth, and i - 1 = 2 mod 3
    for i in range(8):
        for name in ("attn_v.weight", "ffn_down.weight"):
            assert got[f"blk.{i}.{name}"] == (T.Q6_K if i in more else T.Q4_K), (i, name)
        for name in ("attn_q.weight", "attn_k.weight", "attn_output.weight", "ffn_gate.weight", "ffn_up.weight"):
            assert got[f"blk.{i}.{name}"] == T.Q4_K
    # 32 layers: llama.cpp's counter runs by layer number (blk.10 after blk.9)
    ts = _llama_tensors(32)
    got = dict(zip([n for n, _, _ in ts], tensor_types(ts, "q4_k_m", 32)))
    q6 = [i for i in range(32) if got[f"blk.{i}.attn_v.weight"] == T.Q6_K]
    assert q6 == [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]
    assert q6 == [i for i in range(32) if got[f"blk.{i}.ffn_down.weight"] == T.Q6_K]


def test_q4_k_m_tied_and_odd_rows():
    from pyggml._mixtures import tensor_types
    T = gg.Type
    ts = _llama_tensors(2, tied=True)
    assert tensor_types(ts, "q4_k_m", 2)[0] == T.Q6_K                  # token_embd takes output's rule
    # rows of 96: the output rule gives Q8_0 directly; Q4_K falls back to Q5_0, Q6_K to Q8_0, and
    # rows that are not a multiple of 32 to F16
    assert tensor_types([("token_embd.weight", (512, 96), T_F16)], "q4_k_m", 2) == [T.Q8_0]
    ts = _llama_tensors(2, d=96, ff=160)
    if "Q5_0" in T.__members__:
        types = dict(zip([n for n, _, _ in ts], tensor_types(ts, "q4_k_m", 2)))
        assert types["blk.0.attn_q.weight"] == T.Q5_0 and types["blk.0.attn_v.weight"] == T.Q5_0
        assert types["blk.1.attn_v.weight"] == T.Q8_0           # use_more_bits(1, 2): Q6_K, then Q8_0
        assert tensor_types([("blk.0.ffn_down.weight", (8, 100), T_F16)], "q4_k_m", 1) == [T.F16]
    else:
        with pytest.raises(ValueError, match="fallback type Q5_0"):
            tensor_types(ts, "q4_k_m", 2)


def test_random_q4_k_m_llama(tmp_path):
    """pyggml.demo's Q4_K_M writer (bench_model.py --types q4_k_m): the mixture's types, the file
    type, and a model that runs on them through pyggml.models"""
    pytest.importorskip("gguf", reason="pyggml.gguf.save writes through the gguf package")
    from pyggml import gguf as pg_gguf
    from pyggml import models
    from pyggml.demo import write_random_llama
    path = tmp_path / "q4_k_m.gguf"
    md = write_random_llama(path, n_layer=2, n_embd=256, n_head=4, n_head_kv=2, n_ff=512, n_vocab=300,
                            type="q4_k_m")
    assert md["general.file_type"] == 15
    with pg_gguf.load(path) as f:
        types = {n: t.type for n, t in f.tensors.items()}
    assert types["output.weight"] == gg.Type.Q6_K and types["blk.1.ffn_down.weight"] == gg.Type.Q6_K
    assert types["blk.0.ffn_down.weight"] == gg.Type.Q4_K                  # use_more_bits(0, 2) is false
    assert types["blk.1.attn_q.weight"] == gg.Type.Q4_K and types["blk.0.attn_norm.weight"] == gg.Type.F32
    m = models.load(str(path), n_ctx=32, n_threads=2)
    logits = m.eval([1, 5, 7])
    assert logits.shape[-1] == 300 and np.isfinite(logits).all()
