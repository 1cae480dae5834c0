"""The legacy quantized types (Q4_1, Q5_0, Q5_1, Q8_1, IQ4_NL, IQ4_XS, MXFP4; Q8_0/Q4_0 beside them): bytes
bit for bit with reference.py's quantisers (written from ggml's block formats and quantisers) at
ties, outliers, all-zero blocks and odd block counts; values bit for bit with reference.py's
dequantisers and, independently, with the gguf package's numpy (de)quantisers; the conversions,
get_rows and cpy through the type table; the integer dot products against the dequantised values."""
import numpy as np
import pytest
import reference as ref
from conftest import THREADS, run

import pyggml as gg

T = gg.Type
TYPES = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_1", "IQ4_NL", "IQ4_XS", "MXFP4"]
# the types gguf can quantise (it only dequantises the IQ4 ones; ggml has no Q8_1 there)
GGUF_QUANTISES = {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "MXFP4"}


def blck(typ):
    return gg.blck_size(T[typ])


def hard_values(rng, typ, nblocks):
    """[4, nblocks * blck] values whose 32-blocks cycle through the cases a quantiser can get wrong:
    random, all zero, one outlier, exact .5 ties of every offset quantiser (integers and halves
    between -8 and 8 around a block max of 8 or -8, min 0 for the _1 types), all equal, tiny."""
    n = nblocks * blck(typ)
    x = (rng.standard_normal((4, n)) * 2).astype(np.float32)
    b = x.reshape(-1, 32)
    k = np.arange(b.shape[0]) % 7
    b[k == 1] = 0
    b[k == 2, 7] = 300                                              # outlier
    ties = (rng.integers(-16, 16, ((k == 3).sum(), 32)) / 2).astype(np.float32)
    ties[:, 3] = -8
    b[k == 3] = ties
    b[k == 4] = rng.integers(0, 31, ((k == 4).sum(), 32)).astype(np.float32) / 2
    b[k == 4, 0], b[k == 4, 1] = 0, 15.5
    b[k == 5] = -1.25
    b[k == 6] *= 1e-20
    return x


@pytest.mark.parametrize("nblocks", [1, 3, 5])
@pytest.mark.parametrize("typ", TYPES)
def test_bytes_and_values_bit_exact(ctx, rng, typ, nblocks):
    x = hard_values(rng, typ, nblocks if blck(typ) == 32 else (nblocks + 1) // 2)
    enc, dec = ref.QUANTS[typ]
    t = ctx.from_numpy(x, type=T[typ])
    want = enc(x)
    got = np.frombuffer(t.tobytes(), np.uint8).reshape(want.shape)
    np.testing.assert_array_equal(got, want)
    vals = t.to_numpy()
    np.testing.assert_array_equal(vals.view(np.uint32), dec(want, x.shape[-1]).astype(np.float32).view(np.uint32))
    # from_bytes/tobytes round trip, and the quantisation error is what the type allows
    again = ctx.from_bytes(T[typ], t.ne, t.tobytes())
    assert again.tobytes() == t.tobytes()
    assert ref.nmse(vals, x) < (0.05 if typ == "MXFP4" else 0.02)   # MXFP4: 3 bits and a power-of-two scale


@pytest.mark.parametrize("typ", TYPES)
def test_against_gguf(ctx, rng, typ):
    """the gguf package's numpy dequantisers (all types but Q8_1) and quantisers (legacy ones)"""
    gguf_quants = pytest.importorskip("gguf.quants", reason="requirements-dev.txt has gguf; the qemu sysroots do not")
    qtype = gguf_quants.GGMLQuantizationType[typ] if typ != "Q8_1" else None
    x = hard_values(rng, typ, 8)
    t = ctx.from_numpy(x, type=T[typ])
    raw = np.frombuffer(t.tobytes(), np.uint8).reshape(4, -1)
    if typ != "Q8_1":
        deq = gguf_quants.dequantize(raw, qtype).astype(np.float32)
        np.testing.assert_array_equal(t.to_numpy().view(np.uint32), deq.reshape(x.shape).view(np.uint32))
    if typ in GGUF_QUANTISES and typ != "Q8_0":                     # gguf's Q8_0 is the reference one
        np.testing.assert_array_equal(raw, gguf_quants.quantize(x, qtype).reshape(raw.shape))


def test_zero_and_eps_blocks(ctx):
    """all-zero blocks keep d = 0 and decode to +0.0 (-0.0 where ggml's product gives it)"""
    x = np.zeros((2, 256), np.float32)
    x[1, :32] = -1e-16                                              # below IQ4's GROUP_MAX_EPS
    for typ in TYPES:
        t = ctx.from_numpy(x, type=T[typ])
        assert not t.to_numpy()[: 1 if typ == "MXFP4" else 2].any(), typ   # MXFP4 scales any block (no eps)


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("typ", TYPES)
def test_cpy_dup_get_rows(ctx, rng, typ, nth):
    n = 2 * blck(typ)
    x = rng.standard_normal((5, n)).astype(np.float32)
    q = ctx.from_numpy(x, type=T[typ])
    stored = ref.roundtrip(x, typ)
    f = ctx.new_tensor(T.F32, q.ne)
    run(gg.cpy(q, f), nth)                                          # quantized -> f32
    np.testing.assert_array_equal(f.to_numpy().reshape(stored.shape), stored)
    h = ctx.new_tensor(T[typ], q.ne)
    run(gg.cpy(ctx.from_numpy(x), h), nth)                          # f32 -> quantized: the same bytes
    assert h.tobytes() == q.tobytes()
    d = gg.dup(q)
    run(d, nth)
    assert d.type == T[typ] and d.tobytes() == q.tobytes()
    idx = np.array([4, 0, 4, 2], np.int32)
    g = gg.get_rows(q, ctx.from_numpy(idx))
    run(g, nth)
    np.testing.assert_array_equal(g.to_numpy().reshape(4, n), stored[idx])


@pytest.mark.parametrize("typ", ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "MXFP4"])
def test_integer_dot_matches_blocks(ctx, rng, typ):
    """mul_mat of one weight row: sum over blocks of d_x*d_y*sum(q_x*q_y) (+ m_x*s_y), computed
    from the block bytes in float64 (the activation quantised to the type's vec_dot_type)"""
    k = 32 * 7
    w = rng.standard_normal((1, k)).astype(np.float32)
    xa = rng.standard_normal((1, k)).astype(np.float32)
    vt = ref.VEC_DOT_TYPE[typ]
    yb = ref.QUANTS[vt][0](xa).reshape(7, -1)
    off = 4 if vt == "Q8_1" else 2
    dy = yb[:, :2].copy().view(np.float16).astype(np.float64)[:, 0]
    qy = yb[:, off:].view(np.int8).astype(np.float64)
    wv = ref.roundtrip(w, typ).astype(np.float64).reshape(7, 32)
    want = 0.0
    for i in range(7):
        if vt == "Q8_1":                                            # x = q*d + m: m's part uses s
            sy = yb[i, 2:4].copy().view(np.float16).astype(np.float64)[0]
            m = wv[i].min()                                         # code 0 is the min
            want += ((wv[i] - m) * qy[i]).sum() * dy[i] + m * sy
        else:
            want += (wv[i] * qy[i]).sum() * dy[i]
    out = gg.mul_mat(ctx.from_numpy(w, type=T[typ]), ctx.from_numpy(xa))
    run(out, 1)
    assert abs(float(out.to_numpy()[0, 0]) - want) <= 1e-4 * max(1.0, abs(want))


def test_mxfp4_scales_and_codes(ctx):
    """every E8M0 exponent (0 and 1: the subnormal scales 2^-128, 2^-127; 255: 2^127) with every
    code, decoded from bytes; infinite input clamps e to 255 where ggml's conversion is undefined"""
    e = np.arange(256, dtype=np.uint8)
    codes = np.tile(np.arange(16, dtype=np.uint8) | (np.arange(16, dtype=np.uint8)[::-1] << 4), (256, 1))
    raw = np.concatenate([e[:, None], codes], axis=1)
    t = ctx.from_bytes(T.MXFP4, (32, 256), raw.tobytes())
    with np.errstate(over="ignore"):
        want = ref.dequantize_mxfp4(raw, 32).astype(np.float32)
    np.testing.assert_array_equal(t.to_numpy().view(np.uint32), want.view(np.uint32))
    got = t.to_numpy()
    assert got[1, 7] == 12 * 2.0 ** -127 and got[255, 0] == 0 and got[255, 1] == 2.0 ** 127
    assert got[255, 7] == np.inf                   # 12 * 2^127 overflows f32, as ggml's x0*d
    x = np.zeros((1, 32), np.float32)
    x[0, :3] = [np.inf, 1.0, np.nan]
    q = ctx.from_numpy(x, type=T.MXFP4)
    np.testing.assert_array_equal(np.frombuffer(q.tobytes(), np.uint8), ref.encode_mxfp4(x).ravel())
    assert q.tobytes()[0] == 255


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("exps,xscale", [((0, 1, 2, 40, 127, 128, 200), 1.0),
                                         ((0, 1, 127, 200, 254, 255), 2.0 ** -40)])
def test_mxfp4_dot_extreme_scales(ctx, rng, exps, xscale, nth):
    """MXFP4's E8M0 scales that fp16 cannot hold (2^-128 to 2^127, subnormal d_x*d_y included;
    activations scaled down beside the largest so that no block's product overflows f32) through
    the integer tile and the one-column GEMV (vec_dot_n where there is neither: NEON, RVV): each
    column the same bits whatever N (an odd last block, rows past a tile's), and the float64 dot
    of the decoded blocks"""
    m, nb, n = 5, 9, 6
    k = 32 * nb
    e = rng.choice(np.array(exps, np.uint8), (m, nb))
    raw = np.concatenate([e[..., None], rng.integers(0, 256, (m, nb, 16), dtype=np.uint8)], axis=-1)
    a = ctx.from_bytes(T.MXFP4, (k, m), raw.tobytes())
    x = (rng.standard_normal((n, k)) * xscale).astype(np.float32)
    full = gg.mul_mat(a, ctx.from_numpy(x))
    cols = [gg.mul_mat(a, ctx.from_numpy(x[j:j + 1])) for j in range(n)]
    run([full] + cols, nth)
    got = full.to_numpy()
    np.testing.assert_array_equal(got.view(np.uint32), np.concatenate([c.to_numpy() for c in cols]).view(np.uint32))
    wv = ref.dequantize_mxfp4(raw.reshape(-1, 17), k)
    yv = ref.dequantize_q8_0(ref.quantize_q8_0(x), k).astype(np.float64)
    tol = 1e-5 * (np.abs(yv) @ np.abs(wv).T) + 1e-38
    assert (np.abs(got - yv @ wv.T) <= tol).all()
