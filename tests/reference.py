"""float64 numpy references written from docs/semantics.md. No pyggml code here:
tests build inputs with numpy, run pyggml, and compare against these functions."""
import math

import numpy as np


def nmse(got, ref):
    """ggml's normalised mean squared error sum((a-b)^2)/sum(b^2)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    den = float((ref * ref).sum())
    num = float(((got - ref) ** 2).sum())
    return num / den if den > 0 else num


# ---- element conversions (bit-exact) ----

def f32_to_f16_bits(x):
    """IEEE round-to-nearest-even to binary16, as uint16 bits (numpy's cast is exact RNE)."""
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float32).astype(np.float16).view(np.uint16)


def f32_to_bf16_bits(x):
    """bf16 bits: RNE on the upper half; NaN -> (u >> 16) | 0x40."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), r)


def bf16_bits_to_f32(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_f16(x):
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def round_bf16(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(x))


def quantize_q8_0(x):
    """CPU Q8_0 quantiser on rows of x (last axis a multiple of 32): bytes [d f16][32 x int8] per block."""
    x = np.asarray(x, dtype=np.float32)
    b = x.reshape(-1, 32)
    amax = np.abs(b).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(amax != 0, np.float32(127) / amax, np.float32(0)).astype(np.float32)
    q = np.rint((b * idv[:, None]).astype(np.float32)).astype(np.int8)
    out = np.empty((b.shape[0], 34), dtype=np.uint8)
    out[:, :2] = f32_to_f16_bits(d).reshape(-1, 1).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.reshape(x.shape[:-1] + (x.shape[-1] // 32 * 34,))


def dequantize_q8_0(blocks, n):
    b = np.asarray(blocks, dtype=np.uint8).reshape(-1, 34)
    d = b[:, :2].copy().view(np.float16).astype(np.float32)
    q = b[:, 2:].view(np.int8).astype(np.float32)
    return (q * d).reshape(-1, n)


def quantize_q4_0(x):
    """Reference Q4_0 quantiser: bytes [d f16][16 x (lo | hi << 4)] per block of 32."""
    x = np.asarray(x, dtype=np.float32)
    b = x.reshape(-1, 32)
    idx = np.abs(b).argmax(axis=1)                  # first maximum wins
    m = b[np.arange(b.shape[0]), idx]
    d = (m / np.float32(-8)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = (b * idv[:, None]).astype(np.float32) + np.float32(8.5)
    q = np.minimum(15, np.trunc(v).astype(np.int8)).astype(np.uint8)
    out = np.empty((b.shape[0], 18), dtype=np.uint8)
    out[:, :2] = f32_to_f16_bits(d).reshape(-1, 1).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.reshape(x.shape[:-1] + (x.shape[-1] // 32 * 18,))


def dequantize_q4_0(blocks, n):
    b = np.asarray(blocks, dtype=np.uint8).reshape(-1, 18)
    d = b[:, :2].copy().view(np.float16).astype(np.float32)
    lo = (b[:, 2:] & 0x0F).astype(np.float32) - 8
    hi = (b[:, 2:] >> 4).astype(np.float32) - 8
    return (np.concatenate([lo, hi], axis=1) * d).reshape(-1, n)


# ---- K-quants: super-blocks of 256, read from ggml's block layouts (ggml-common.h) ----

QK_K = 256
# bytes per super-block and the byte ranges of each field
K_LAYOUT = {
    "Q2_K": (84, {"scales": (0, 16), "qs": (16, 80), "d": (80, 82), "dmin": (82, 84)}),
    "Q3_K": (110, {"hmask": (0, 32), "qs": (32, 96), "scales": (96, 108), "d": (108, 110)}),
    "Q4_K": (144, {"d": (0, 2), "dmin": (2, 4), "scales": (4, 16), "qs": (16, 144)}),
    "Q5_K": (176, {"d": (0, 2), "dmin": (2, 4), "scales": (4, 16), "qh": (16, 48), "qs": (48, 176)}),
    "Q6_K": (210, {"ql": (0, 128), "qh": (128, 192), "scales": (192, 208), "d": (208, 210)}),
    "Q8_K": (292, {"d": (0, 4), "qs": (4, 260), "bsums": (260, 292)}),
}


def _k_fields(blocks, typ):
    size, fields = K_LAYOUT[typ]
    b = np.asarray(blocks, dtype=np.uint8).reshape(-1, size)
    return {k: b[:, lo:hi] for k, (lo, hi) in fields.items()}


def _f16(f):
    return np.ascontiguousarray(f).view(np.float16).astype(np.float64)[:, 0]


def _bits2(qs):
    """[nb, 64] bytes -> [nb, 256] 2-bit fields: element 128h + 32j + l is bits 2j of byte 32h + l"""
    e = np.arange(QK_K)
    return (qs[:, 32 * (e // 128) + e % 32] >> (2 * (e % 128 // 32))) & 3


def _scale_min_k4(s):
    """[nb, 12] packed bytes -> 8 scales and 8 mins of 6 bits each (Q4_K/Q5_K)"""
    s = s.astype(np.int64)
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 0xF) | ((s[:, 0:4] >> 6) << 4)], axis=1)
    mn = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=1)
    return sc, mn


def dequantize_k(blocks, typ):
    """Values of K-quant blocks (bytes, any shape with a multiple of the block size) in float64,
    [nblocks * 256]: d * scale * q - dmin * min per group, from the layouts above."""
    f = _k_fields(blocks, typ)
    e = np.arange(QK_K)
    if typ == "Q8_K":
        d = np.ascontiguousarray(f["d"]).view(np.float32).astype(np.float64)[:, 0]
        return (d[:, None] * f["qs"].view(np.int8)).reshape(-1)
    d = _f16(f["d"])[:, None]
    if typ == "Q2_K":
        sc = f["scales"].astype(np.int64)[:, e // 16]
        v = d * (sc & 0xF) * _bits2(f["qs"]) - _f16(f["dmin"])[:, None] * (sc >> 4)
    elif typ == "Q3_K":
        s = f["scales"].astype(np.int64)
        j = np.arange(16)
        lo = np.where(j < 8, s[:, j % 8] & 0xF, s[:, j % 8] >> 4)
        sc = (lo | (((s[:, 8 + j % 4] >> (2 * (j // 4))) & 3) << 4)) - 32
        hi = (f["hmask"][:, e % 32] >> (e // 32)) & 1
        v = d * sc[:, e // 16] * (_bits2(f["qs"]).astype(np.int64) - 4 * (1 - hi))
    elif typ in ("Q4_K", "Q5_K"):
        sc, mn = _scale_min_k4(f["scales"])
        c, l = e // 64, e % 32
        q = (f["qs"][:, 32 * c + l] >> (4 * (e % 64 // 32))) & 0xF
        if typ == "Q5_K":
            q = q + 16 * ((f["qh"][:, l] >> (e // 32)) & 1)
        v = d * sc[:, e // 32] * q - _f16(f["dmin"])[:, None] * mn[:, e // 32]
    elif typ == "Q6_K":
        h, j, l = e // 128, e % 128 // 32, e % 32
        lo = (f["ql"][:, 64 * h + 32 * (j % 2) + l] >> (4 * (j // 2))) & 0xF
        q = lo | (((f["qh"][:, 32 * h + l] >> (2 * j)) & 3) << 4)
        v = d * f["scales"].view(np.int8)[:, e // 16] * (q.astype(np.int64) - 32)
    else:
        raise ValueError(typ)
    return v.reshape(-1)


def quantize_q8_k(x):
    """ggml's Q8_K quantiser (rows a multiple of 256): per super-block iscale = -127/max with max the
    element of largest |x| (first wins), q = min(127, round-half-even(iscale*x)), d = 1/iscale (f32),
    bsums the sums of 16 q; an all-zero block is all zero bytes."""
    x = np.asarray(x, dtype=np.float32)
    b = x.reshape(-1, QK_K)
    mx = b[np.arange(b.shape[0]), np.abs(b).argmax(axis=1)]
    with np.errstate(divide="ignore"):
        iscale = np.where(mx != 0, np.float32(-127) / mx, np.float32(0)).astype(np.float32)
        d = np.where(mx != 0, np.float32(1) / iscale, np.float32(0)).astype(np.float32)
    q = np.minimum(127, np.rint((iscale[:, None] * b).astype(np.float32))).astype(np.int8)
    out = np.empty((b.shape[0], 292), dtype=np.uint8)
    out[:, 0:4] = d.reshape(-1, 1).view(np.uint8)
    out[:, 4:260] = q.view(np.uint8)
    out[:, 260:] = q.reshape(-1, 16, 16).astype(np.int16).sum(axis=2).astype(np.int16).view(np.uint8)
    return out.reshape(x.shape[:-1] + (x.shape[-1] // QK_K * 292,))


def _f16_bytes(v):
    return f32_to_f16_bits(v).reshape(-1, 1).view(np.uint8).reshape(-1, 2)


def _f16_field(b, at):
    return b[:, at:at + 2].copy().view(np.float16).astype(np.float64)[:, 0]


def _nibbles(qs):
    """[nb, 16] bytes -> [nb, 32] codes: lo nibbles are elements 0..15, hi nibbles 16..31."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int64)


def _high_bits(qh):
    """[nb, 4] bytes (a little-endian word) -> [nb, 32]: bit e of the word, as 16, for element e."""
    h = qh.copy().view("<u4")[:, :1].astype(np.int64)
    return ((h >> np.arange(32)) & 1) << 4


def _pack_nibbles(q):
    q = q.astype(np.uint8)
    return (q[:, :16] & 0x0F) | ((q[:, 16:] & 0x0F) << 4)


def _pack_high_bits(q):
    bits = (q.astype(np.uint32) >> 4) & 1
    return (bits << np.arange(32, dtype=np.uint32)).sum(axis=1, dtype=np.uint32).astype("<u4").view(np.uint8).reshape(-1, 4)


def _blocks(x, n):
    return np.asarray(x, dtype=np.float32).reshape(-1, n)


def _rows(out, x, nb_bytes):
    return out.reshape(x.shape[:-1] + (x.shape[-1] // 32 * nb_bytes,))


def quantize_q4_1(x, nmax=15):
    """ggml's Q4_1 quantiser (Q5_1 with nmax=31, codes not packed): d = (max - min)/nmax, m = min,
    q = trunc((x - min)*id + 0.5), Q4_1 capped at 15. Returns (d, m, q)."""
    b = _blocks(x, 32)
    mn, mx = b.min(axis=1), b.max(axis=1)
    d = ((mx - mn) / np.float32(nmax)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = ((b - mn[:, None]) * idv[:, None]).astype(np.float32) + np.float32(0.5)
    q = np.trunc(v).astype(np.int64)
    return d, mn, np.minimum(15, q) if nmax == 15 else q


def encode_q4_1(x):
    """Q4_1 bytes [d f16][m f16][16 x (lo | hi << 4)] per block of 32."""
    x = np.asarray(x, dtype=np.float32)
    d, m, q = quantize_q4_1(x)
    return _rows(np.concatenate([_f16_bytes(d), _f16_bytes(m), _pack_nibbles(q)], axis=1), x, 20)


def encode_q5_1(x):
    """Q5_1 bytes [d f16][m f16][qh: bit 4 of element e in bit e][16 x (lo | hi << 4)]."""
    x = np.asarray(x, dtype=np.float32)
    d, m, q = quantize_q4_1(x, nmax=31)
    return _rows(np.concatenate([_f16_bytes(d), _f16_bytes(m), _pack_high_bits(q), _pack_nibbles(q)], axis=1), x, 24)


def encode_q5_0(x):
    """Q5_0 as the Q4_0 reference quantiser with 32 levels: d = m/-16 (m the first element of largest
    |x|), q = min(31, trunc(x*id + 16.5)); bytes [d f16][qh][16 x nibbles]."""
    x = np.asarray(x, dtype=np.float32)
    b = _blocks(x, 32)
    m = b[np.arange(b.shape[0]), np.abs(b).argmax(axis=1)]
    d = (m / np.float32(-16)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    q = np.minimum(31, np.trunc((b * idv[:, None]).astype(np.float32) + np.float32(16.5)).astype(np.int64))
    return _rows(np.concatenate([_f16_bytes(d), _pack_high_bits(q), _pack_nibbles(q)], axis=1), x, 22)


def encode_q8_1(x):
    """Q8_1: the CPU Q8_0 quantiser's d and q, plus s = fp16(amax/127 * sum(q)): [d][s][32 x int8]."""
    x = np.asarray(x, dtype=np.float32)
    q8 = quantize_q8_0(x).reshape(-1, 34)
    amax = np.abs(_blocks(x, 32)).max(axis=1)
    ssum = q8[:, 2:].view(np.int8).astype(np.int64).sum(axis=1).astype(np.float32)
    s = ((amax / np.float32(127)).astype(np.float32) * ssum).astype(np.float32)
    return _rows(np.concatenate([q8[:, :2], _f16_bytes(s), q8[:, 2:]], axis=1), x, 36)


IQ4NL_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.int64)


def _iq4nl_index(v):
    """Nearest code point of each v (f32): the upper one unless the lower is strictly nearer."""
    t = IQ4NL_VALUES.astype(np.float32)
    hi = np.clip(np.searchsorted(t, v, side="right"), 1, 15)
    lo = hi - 1
    idx = np.where((v - t[lo]).astype(np.float32) < (t[hi] - v).astype(np.float32), lo, hi)
    return np.where(v <= t[0], 0, np.where(v >= t[15], 15, idx))


def _iq4nl_fit(b, idv):
    """Codes of blocks b at inverse scales idv and the weighted sums (w = x^2) ggml fits the scale with,
    accumulated in f32 in element order."""
    L = _iq4nl_index((idv[:, None] * b).astype(np.float32))
    q = IQ4NL_VALUES[L].astype(np.float32)
    sqx = np.zeros(b.shape[0], dtype=np.float32)
    sq2 = np.zeros(b.shape[0], dtype=np.float32)
    for j in range(b.shape[1]):
        wq = (b[:, j] * b[:, j]).astype(np.float32) * q[:, j]
        sqx = (sqx + (wq * b[:, j]).astype(np.float32)).astype(np.float32)
        sq2 = (sq2 + (wq * q[:, j]).astype(np.float32)).astype(np.float32)
    return L, sqx, sq2


def iq4nl_block_scales(b, ntry):
    """ggml's IQ4_NL/IQ4_XS block scale without an importance matrix, per block of 32 (rows of b):
    returns (scale, codes); ntry < 0 is IQ4_NL (one fit), 7 IQ4_XS (15 trial scales)."""
    b = np.asarray(b, dtype=np.float32)
    rows = np.arange(b.shape[0])
    amax_i = np.abs(b).argmax(axis=1)
    mx = b[rows, amax_i]
    live = np.abs(mx) >= np.float32(1e-15)
    mx_safe = np.where(live, mx, np.float32(1))
    t0 = np.float32(IQ4NL_VALUES[0])
    d0 = (-mx_safe / t0 if ntry > 0 else mx_safe / t0).astype(np.float32)
    L, sqx, sq2 = _iq4nl_fit(b, (np.float32(1) / d0).astype(np.float32))
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(sq2 > 0, sqx / sq2, np.float32(0)).astype(np.float32)
        best = (d * sqx).astype(np.float32)
        for itry in range(-ntry, ntry + 1):
            _, sqx, sq2 = _iq4nl_fit(b, ((np.float32(itry) + t0) / mx_safe).astype(np.float32))
            better = (sq2 > 0) & ((sqx * sqx).astype(np.float32) > (best * sq2).astype(np.float32))
            d = np.where(better, (sqx / sq2).astype(np.float32), d)
            best = np.where(better, (d * sqx).astype(np.float32), best)
    L = np.where(live[:, None], L, 8)
    return np.where(live, d, np.float32(0)).astype(np.float32), L


def encode_iq4_nl(x):
    """IQ4_NL bytes [d f16][16 x nibbles]: one fitted scale per block of 32 (ggml's CPU quantiser,
    quantize_row_iq4_nl_ref); a block below 1e-15 gets d = 0 and code 8 (ggml: whatever it held)."""
    x = np.asarray(x, dtype=np.float32)
    d, L = iq4nl_block_scales(_blocks(x, 32), -1)
    return _rows(np.concatenate([_f16_bytes(d), _pack_nibbles(L)], axis=1), x, 18)


def encode_iq4_xs(x):
    """IQ4_XS bytes per 256: [d f16][scales_h u16][scales_l 4 B][128 B nibbles]. Block scales as
    IQ4_NL's with 7 trials; d = -(the one of largest |.|)/32, l = clip(rint(scale/d), -32, 31), then
    the codes are refitted to d*l; ls = l + 32 split into 4 low bits (scales_l, two per byte) and 2
    high ones (scales_h, bits 2*ib)."""
    x = np.asarray(x, dtype=np.float32)
    b = _blocks(x, 32)
    sc, _ = iq4nl_block_scales(b, 7)
    sc = sc.reshape(-1, 8)
    rows = np.arange(sc.shape[0])
    ms = sc[rows, np.abs(sc).argmax(axis=1)]
    d = (-ms / np.float32(32)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
        lv = np.clip(np.rint((idv[:, None] * sc).astype(np.float32)), -32, 31).astype(np.int64)
        dl = (d[:, None] * lv.astype(np.float32)).astype(np.float32)
        idl = np.where(dl != 0, np.float32(1) / dl, np.float32(0)).astype(np.float32)
    L = _iq4nl_index((idl.reshape(-1, 1) * b).astype(np.float32))
    ls = lv + 32
    lo = ls & 0xF
    scales_l = (lo[:, 0::2] | (lo[:, 1::2] << 4)).astype(np.uint8)
    scales_h = ((ls >> 4) << (2 * np.arange(8))).sum(axis=1).astype("<u2").view(np.uint8).reshape(-1, 2)
    qs = _pack_nibbles(L).reshape(-1, 128)
    out = np.concatenate([_f16_bytes(d), scales_h, scales_l, qs], axis=1)
    return out.reshape(x.shape[:-1] + (x.shape[-1] // 256 * 136,))


def dequantize_q4_1(blocks, n):
    b = np.asarray(blocks, dtype=np.uint8).reshape(-1, 20)
    return (_nibbles(b[:, 4:]) * _f16_field(b, 0)[:, None] + _f16_field(b, 2)[:, None]).reshape(-1, n)


def dequantize_q5_0(blocks, n):
    b = np.asarray(blocks, dtype=np.uint8).reshape(-1, 22)
    q = (_nibbles(b[:, 6:]) | _high_bits(b[:, 2:6])) - 16
    return (q * _f16_field(b, 0)[:, None]).reshape(-1, n)


def dequantize_q5_1(blocks, n):
    b = np.asarray(blocks, dtype=np.uint8).reshape(-1, 24)
    q = _nibbles(b[:, 8:]) | _high_bits(b[:, 4:8])
    return (q * _f16_field(b, 0)[:, None] + _f16_field(b, 2)[:, None]).reshape(-1, n)


def dequantize_q8_1(blocks, n):
    b = np.asarray(blocks, dtype=np.uint8).reshape(-1, 36)
    return (b[:, 4:].view(np.int8) * _f16_field(b, 0)[:, None]).reshape(-1, n)


def dequantize_iq4_nl(blocks, n):
    b = np.asarray(blocks, dtype=np.uint8).reshape(-1, 18)
    return (IQ4NL_VALUES[_nibbles(b[:, 2:])] * _f16_field(b, 0)[:, None]).reshape(-1, n)


def dequantize_iq4_xs(blocks, n):
    b = np.asarray(blocks, dtype=np.uint8).reshape(-1, 136)
    h = b[:, 2:4].copy().view("<u2").astype(np.int64)
    ib = np.arange(8)
    ls = ((b[:, 4:8][:, ib // 2] >> (4 * (ib % 2))) & 0xF) | (((h >> (2 * ib)) & 3) << 4)
    dl = _f16_field(b, 0)[:, None] * (ls - 32)                          # [nb, 8]
    q = IQ4NL_VALUES[_nibbles(b[:, 8:].reshape(-1, 16))].reshape(-1, 8, 32)
    return (q * dl[:, :, None]).reshape(-1, n)


MXFP4_VALUES = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], np.float32)


def encode_mxfp4(x):
    """MXFP4 blocks [e u8][16 B of codes, lo | hi << 4] of rows of x (ggml's quantize_row_mxfp4_ref,
    from the definition): e = floor(log2(amax)) - 2 + 127 in f32 (0 for a zero block; clamped to
    [0, 255], where ggml's conversion is undefined), the scale d = 2^(e - 128) (the E2M1 values are
    doubled), each element the code of least f32 |value*d - x|, the first of equals (NaN: code 0)."""
    x = np.asarray(x, dtype=np.float32)
    b = x.reshape(-1, 32)
    amax = np.max(np.where(np.isnan(b), np.float32(0), np.abs(b)), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        le = np.where(amax > 0, np.floor(np.log2(amax)) - np.float32(2) + np.float32(127), np.float32(0))
    e = np.clip(le, 0, 255).astype(np.uint8)
    d = np.ldexp(np.float32(1), e.astype(np.int32) - 128).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        err = np.abs(MXFP4_VALUES[None, None, :] * d[:, None, None] - b[:, :, None])
    code = np.argmin(np.where(np.isnan(err), np.inf, err), axis=2).astype(np.uint8)
    code[np.isnan(b)] = 0
    out = np.empty((b.shape[0], 17), np.uint8)
    out[:, 0] = e
    out[:, 1:] = _pack_nibbles(code)
    return out.reshape(x.shape[:-1] + (x.shape[-1] // 32 * 17,))


def dequantize_mxfp4(blocks, n):
    b = np.asarray(blocks, dtype=np.uint8).reshape(-1, 17)
    d = np.ldexp(1.0, b[:, 0].astype(np.int64) - 128)
    return (MXFP4_VALUES[_nibbles(b[:, 1:])].astype(np.float64) * d[:, None]).reshape(-1, n)


# type name -> (bytes of rows of x, values of rows of n elements from those bytes); the values are
# float64 (exact: every dequantised value is a product of an fp16 scale and a small integer, plus m)
QUANTS = {
    "Q8_0": (quantize_q8_0, dequantize_q8_0), "Q4_0": (quantize_q4_0, dequantize_q4_0),
    "Q4_1": (encode_q4_1, dequantize_q4_1), "Q5_0": (encode_q5_0, dequantize_q5_0),
    "Q5_1": (encode_q5_1, dequantize_q5_1), "Q8_1": (encode_q8_1, dequantize_q8_1),
    "IQ4_NL": (encode_iq4_nl, dequantize_iq4_nl), "IQ4_XS": (encode_iq4_xs, dequantize_iq4_xs),
    "MXFP4": (encode_mxfp4, dequantize_mxfp4),
}


def roundtrip(x, typ):
    """x as stored in a tensor of type name typ ('F32', 'F16', 'BF16' or a QUANTS key), back in f32."""
    x = np.asarray(x, dtype=np.float32)
    n = x.shape[-1]
    if typ == "F32":
        return x.copy()
    if typ == "F16":
        return round_f16(x)
    if typ == "BF16":
        return round_bf16(x)
    if typ in QUANTS:
        enc, dec = QUANTS[typ]
        return dec(enc(x), n).astype(np.float32).reshape(x.shape)
    if typ == "Q8_K":
        return dequantize_k(quantize_q8_k(x), "Q8_K").astype(np.float32).reshape(x.shape)
    raise ValueError(typ)


# ---- core ops ----

def broadcast_binary(a, b, op):
    """ggml's repeat of b over a (numpy order: shapes reversed), float64."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    b = b.reshape((1,) * (a.ndim - b.ndim) + b.shape)
    reps = tuple(sa // sb for sa, sb in zip(a.shape, b.shape))
    return op(a, np.tile(b, reps))


# ================================================================================================
# ---- activations, softmax, get_rows ----
# ================================================================================================

_erf = np.vectorize(math.erf, otypes=[np.float64])


def silu(x):
    x = np.asarray(x, dtype=np.float64)
    return x / (1.0 + np.exp(-x))


def gelu(x):
    """tanh approximation: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))."""
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def gelu_quick(x):
    x = np.asarray(x, dtype=np.float64)
    return x / (1.0 + np.exp(-1.702 * x))


def relu(x):
    x = np.asarray(x, dtype=np.float64)
    return np.where(x > 0, x, 0.0)


def tanh(x):
    """ggml_tanh: (e^x - e^-x) / (e^x + e^-x), in float64."""
    return np.tanh(np.asarray(x, dtype=np.float64))


# GLU op value (ggml's enum) -> activation of x
GLU_ACT = {0: relu, 1: gelu, 2: silu, 4: gelu_erf, 5: gelu_quick}


def glu(a, op, swapped=False):
    """Single-tensor GLU on numpy rows (last axis): x = first half, g = second (exchanged if swapped);
    an odd last element is dropped."""
    a = np.asarray(a, dtype=np.float64)
    n = a.shape[-1] // 2
    x, g = a[..., :n], a[..., n:2 * n]
    if swapped:
        x, g = g, x
    return GLU_ACT[op](x) * g


def glu_split(a, b, op):
    return GLU_ACT[op](np.asarray(a, dtype=np.float64)) * np.asarray(b, dtype=np.float64)


def alibi_slopes(n_head, max_bias):
    """ALiBi slope per head: n2 = 2^floor(log2 H), m0^(h+1) for h < n2 else m1^(2(h-n2)+1)."""
    if max_bias <= 0:
        return np.ones(n_head)
    n2 = 2 ** math.floor(math.log2(n_head))
    m0 = 2.0 ** (-max_bias / n2)
    m1 = 2.0 ** (-max_bias / 2.0 / n2)
    h = np.arange(n_head)
    return np.where(h < n2, m0 ** (h + 1), m1 ** (2 * (h - n2) + 1))


def soft_max_ext(a, mask=None, scale=1.0, max_bias=0.0, sinks=None):
    """a: numpy [S, H, R, n] (ggml ne reversed, 4-d); mask [M3, M2, >=R, n] (dims broadcast by
    modulo, rows 0..R-1 used); sinks [H]. Softmax over the last axis, float64."""
    a = np.asarray(a, dtype=np.float64)
    S, H, R = a.shape[:3]
    w = a * scale
    if mask is not None:
        m = np.asarray(mask, dtype=np.float64)[:, :, :R, :]
        m = m[np.arange(S) % m.shape[0]][:, np.arange(H) % m.shape[1]]
        with np.errstate(invalid="ignore"):
            w = w + alibi_slopes(H, max_bias)[None, :, None, None] * m
    mx = w.max(axis=-1, keepdims=True)
    if sinks is not None:
        sk = np.asarray(sinks, dtype=np.float64)[None, :, None, None]
        mx = np.maximum(mx, sk)
    with np.errstate(invalid="ignore"):
        e = np.exp(w - mx)
        den = e.sum(axis=-1, keepdims=True)
        if sinks is not None:
            den = den + np.exp(sk - mx)
        return e / den


# ================================================================================================
# ---- mul_mat ----
# ================================================================================================

# what the activations are converted to before the dot product (ggml's CPU vec_dot_type)
VEC_DOT_TYPE = {"F32": "F32", "F16": "F16", "BF16": "BF16", "Q8_0": "Q8_0", "Q4_0": "Q8_0", "Q4_1": "Q8_1",
                "Q5_0": "Q8_0", "Q5_1": "Q8_1", "IQ4_NL": "Q8_0", "MXFP4": "Q8_0",
                **{t: "Q8_K" for t in ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS")}}


def mul_mat(a, b, wtype):
    """ggml_mul_mat in float64. a: the weights' values as stored (numpy [ne03, ne02, M, K], e.g.
    roundtrip(w, wtype)); b: F32 activations [ne13, ne12, N, K], first rounded to the weights'
    vec_dot type (F16 -> fp16, BF16 -> bf16, quantized -> the CPU Q8_0/Q8_1 quantiser, the K-quants
    -> Q8_K). a is repeated over dims 2/3 by integer division (b matrix i2 uses a matrix
    i2 // (ne12 // ne02)).
    Returns [ne13, ne12, N, M] with as many leading dims as b has."""
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    shape = b.shape[:-1] + (a.shape[-2],)
    a = a.reshape((1,) * (4 - a.ndim) + a.shape)
    b = b.reshape((1,) * (4 - b.ndim) + b.shape)
    bq = roundtrip(b, VEC_DOT_TYPE[wtype]).astype(np.float64)
    a = np.repeat(np.repeat(a.astype(np.float64), b.shape[0] // a.shape[0], axis=0), b.shape[1] // a.shape[1], axis=1)
    return (bq @ a.swapaxes(-1, -2)).reshape(shape)


# ================================================================================================
# ---- norm ----
# ================================================================================================

def rms_norm(x, eps):
    """x / sqrt(mean(x^2) + eps) over the last axis (dim 0 in ggml order), float64."""
    x = np.asarray(x, dtype=np.float64)
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)


def norm(x, eps):
    """(x - mean) / sqrt(var + eps) over the last axis, no affine part (ggml_norm), float64."""
    x = np.asarray(x, dtype=np.float64)
    d = x - x.mean(axis=-1, keepdims=True)
    return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + eps)


def rms_norm_ggml(x, eps):
    """ggml's f32 steps (semantics section 6): f32 squares summed in double, mean = (float)(sum/n),
    scale = 1.0f/sqrtf(mean + eps), y = x*scale. Equal to ggml bit for bit up to the summation order
    of the double sum."""
    x = np.asarray(x, dtype=np.float32)
    s = (x * x).astype(np.float64).sum(axis=-1, keepdims=True)
    mean = (s / x.shape[-1]).astype(np.float32)
    scale = np.float32(1) / np.sqrt(mean + np.float32(eps))
    return x * scale


def norm_ggml(x, eps):
    """ggml_compute_forward_norm_f32's steps: sum in double rounded to f32, mean = sum/(float)n in
    f32, d = x - mean, var = (float)(sum of f32 d*d in double / n), y = d * (1.0f/sqrtf(var + eps))."""
    x = np.asarray(x, dtype=np.float32)
    n = x.shape[-1]
    mean = x.astype(np.float64).sum(axis=-1, keepdims=True).astype(np.float32) / np.float32(n)
    d = x - mean
    var = ((d * d).astype(np.float64).sum(axis=-1, keepdims=True) / n).astype(np.float32)
    return d * (np.float32(1) / np.sqrt(var + np.float32(eps)))


# ================================================================================================
# ---- rope ----
# ================================================================================================

ROPE_NORMAL, ROPE_NEOX, ROPE_MROPE, ROPE_VISION, ROPE_IMROPE = 0, 2, 8, 24, 40


def rope_theta_scale(freq_base, n_dims):
    """powf(freq_base, -2.0f/n_dims): the exponent is an f32 division, the power correctly rounded."""
    e = np.float32(-2.0) / np.float32(n_dims)
    return np.float32(np.float64(np.float32(freq_base)) ** np.float64(e))


def rope_corr_dims(n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow):
    def corr(nr):
        with np.errstate(divide="ignore"):
            return n_dims * np.log(np.float64(n_ctx_orig) / (nr * 2 * np.pi)) / (2 * np.log(freq_base))
    return max(0.0, np.floor(corr(beta_fast))), min(n_dims - 1.0, np.ceil(corr(beta_slow)))


def rope_angles(pos, n_tok, n_pairs, mode, n_dims, freq_base, freq_factors, sections):
    """Unscaled angles theta_extrap [n_tok, n_pairs] (float32) per the spec: the running thetas start
    at the positions and are multiplied by theta_scale in f32 at every pair, then divided by ff[k]."""
    pos = np.asarray(pos, dtype=np.int64)
    ts = rope_theta_scale(freq_base, n_dims)
    blocks = pos.reshape(4, n_tok) if mode & ROPE_MROPE else pos.reshape(1, n_tok)
    base = blocks.astype(np.float32)
    run = base.copy()                               # running theta per block
    out = np.empty((n_tok, n_pairs), dtype=np.float32)
    s = list(sections) if sections is not None else [0, 0, 0, 0]
    sect = sum(s)
    for k in range(n_pairs):
        if not mode & ROPE_MROPE:
            j = 0
        else:
            sector = k % sect
            if mode == ROPE_VISION:
                starts = [0, s[0], s[0] + s[1], s[0] + s[1] + s[2]]
                if sector in starts:
                    r = starts.index(sector)        # first matching start wins
                    run[r] = base[r]
            if mode == ROPE_IMROPE:
                if sector % 3 == 1 and sector < 3 * s[1]:
                    j = 1
                elif sector % 3 == 2 and sector < 3 * s[2]:
                    j = 2
                elif sector % 3 == 0 and sector < 3 * s[0]:
                    j = 0
                else:
                    j = 3
            else:
                j = 0 if sector < s[0] else 1 if sector < s[0] + s[1] else 2 if sector < s[0] + s[1] + s[2] else 3
        th = run[j]
        if freq_factors is not None:
            th = (th / np.float32(freq_factors[k])).astype(np.float32)
        out[:, k] = th
        run = (run * ts).astype(np.float32)
    return out


def rope(x, pos, n_dims, mode, n_ctx_orig=0, freq_base=10000.0, freq_scale=1.0, ext_factor=0.0,
         attn_factor=1.0, beta_fast=32.0, beta_slow=1.0, freq_factors=None, sections=None, n_offs=0):
    """ROPE of x (numpy order [ne3, n_tok, n_head, ne0]) in float64 from the f32 angles."""
    x = np.asarray(x, dtype=np.float64)
    n_tok = x.shape[-3]
    vision = mode == ROPE_VISION
    n_pairs = n_dims if vision else n_dims // 2
    t_ext = rope_angles(pos, n_tok, n_pairs, mode, n_dims, freq_base, freq_factors, sections)
    t_int = (np.float32(freq_scale) * t_ext).astype(np.float64)     # one f32 product, as the kernel
    t_ext = t_ext.astype(np.float64)
    mscale = float(np.float32(attn_factor))
    if ext_factor != 0:
        lo, hi = rope_corr_dims(n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow)
        y = (np.arange(n_pairs) - lo) / max(0.001, hi - lo)
        mix = (1 - np.clip(y, 0, 1)) * np.float32(ext_factor)
        theta = t_int * (1 - mix) + t_ext * mix
        mscale *= 1 + 0.1 * np.log(1 / np.float64(np.float32(freq_scale)))
    else:
        theta = t_int
    cos = (np.cos(theta) * mscale)[:, None, :]      # [n_tok, 1 (heads), n_pairs]
    sin = (np.sin(theta) * mscale)[:, None, :]
    out = x.copy()
    if mode == ROPE_NORMAL:
        i0 = n_offs + 2 * np.arange(n_pairs)
        i1 = i0 + 1
    elif vision:
        i0 = np.arange(n_pairs)
        i1 = i0 + n_dims
    else:
        i0 = n_offs + np.arange(n_pairs)
        i1 = i0 + n_dims // 2
    x0, x1 = x[..., i0], x[..., i1]
    out[..., i0] = x0 * cos - x1 * sin
    out[..., i1] = x0 * sin + x1 * cos
    return out


# ================================================================================================
# ---- attention ----
# ================================================================================================

# alibi_slopes: shared with soft_max_ext above


def flash_attn_ext(q, k, v, mask=None, scale=1.0, max_bias=0.0, softcap=0.0, sinks=None):
    """Attention in float64, numpy order: q [S, Hq, N, DK], k [S, Hkv, L, DK], v [S, Hkv, L, DV],
    mask [M3, M2, >=N, >=L] (the F16 values) or None, sinks [Hq] or None.
    Returns [S, N, Hq, DV] (ggml's output [DV, Hq, N, S]). Rows with every key masked are 0."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    S, Hq, N, _ = q.shape
    L = k.shape[2]
    g = Hq // k.shape[1]
    k = np.repeat(k, g, axis=1)
    v = np.repeat(v, g, axis=1)
    x = np.einsum("shnd,shld->shnl", q, k)
    if softcap:
        x = softcap * np.tanh(x * (scale / softcap))
    else:
        x = x * scale
    if mask is not None:
        m = np.asarray(mask, dtype=np.float64)
        m = m[np.arange(S) % m.shape[0]]                                 # [S, M2, Nm, Lm]
        m = m[:, np.arange(Hq) % m.shape[1]][:, :, :N, :L]               # [S, Hq, N, L]
        with np.errstate(invalid="ignore"):
            x = x + alibi_slopes(Hq, max_bias)[None, :, None, None] * m
    mx = x.max(axis=-1)
    if sinks is not None:
        mx = np.maximum(mx, np.asarray(sinks, dtype=np.float64)[None, :, None])
    dead = ~np.isfinite(mx)
    mx = np.where(dead, 0.0, mx)
    e = np.exp(x - mx[..., None])
    den = e.sum(axis=-1)
    if sinks is not None:
        den = den + np.exp(np.asarray(sinks, dtype=np.float64)[None, :, None] - mx)
    out = np.einsum("shnl,shld->shnd", e, v)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where((den > 0)[..., None], out / den[..., None], 0.0)
    return out.transpose(0, 2, 1, 3)



# ================================================================================================
# ---- set_rows ----
# ================================================================================================

def encode_rows(x, typ):
    """Rows of x (last axis) stored as type name typ, as uint8 bytes per row (ggml's CPU conversions)."""
    x = np.asarray(x, dtype=np.float32)
    if typ == "F32":
        b = x.copy()
    elif typ == "F16":
        b = f32_to_f16_bits(x)
    elif typ == "BF16":
        b = f32_to_bf16_bits(x)
    elif typ in QUANTS:
        return QUANTS[typ][0](x)
    else:
        raise ValueError(typ)
    return np.ascontiguousarray(b).view(np.uint8).reshape(x.shape[:-1] + (-1,))


def set_rows(a, b, c):
    """ggml_set_rows in numpy order: a [A3, A2, R, X] destination rows (any row representation, e.g.
    bytes), b [A3, A2, n, X] the rows to write in the same representation, c [C2, C1, n] indices
    broadcast over a's dims by modulo. Source rows are written in order, so the last duplicate wins.
    Returns the new a."""
    out = np.array(a, copy=True)
    A3, A2, n = b.shape[:3]
    C2, C1 = c.shape[:2]
    for i3 in range(A3):
        for i2 in range(A2):
            for i in range(n):
                out[i3, i2, c[i3 % C2, i2 % C1, i]] = b[i3, i2, i]
    return out


def get_rows(a, b):
    """ggml_get_rows in numpy order: a [B2, B1, R, E] (stored values), b [B2, B1, n] indices ->
    [B2, B1, n, E], row (k, j, i) = a[k, j, b[k, j, i]]."""
    a = np.asarray(a)
    B2, B1, n = b.shape
    out = np.empty((B2, B1, n, a.shape[-1]), dtype=a.dtype)
    for k in range(B2):
        for j in range(B1):
            out[k, j] = a[k, j, b[k, j]]
    return out


# ---- convolution ----

def im2col(kernel_shape, b, s0, s1, p0, p1, d0, d1, is_2d):
    """ggml_im2col of input b (numpy order: [N, IC, IH, IW] for 2-D, [N, IC, IL] for 1-D) for a
    kernel of numpy shape [OC, IC, KH, KW] (2-D) or [OC, IC, K] (1-D): float64, numpy order
    [N, OH, OW, IC*KH*KW] (2-D) or [N, OL, IC*K] (1-D); zero where the kernel reads padding."""
    b = np.asarray(b, dtype=np.float64)
    if not is_2d:                         # a 1-D convolution is a 2-D one of height 1, no vertical padding
        out = im2col((kernel_shape[0], kernel_shape[1], 1, kernel_shape[2]), b[:, :, None, :], s0, 1, p0, 0, d0, 1,
                     True)
        return out[:, 0]
    _, ic, kh, kw = kernel_shape
    n, _, ih, iw = b.shape
    oh = (ih + 2 * p1 - d1 * (kh - 1) - 1) // s1 + 1
    ow = (iw + 2 * p0 - d0 * (kw - 1) - 1) // s0 + 1
    padded = np.zeros((n, ic, ih + 2 * p1 + d1 * kh, iw + 2 * p0 + d0 * kw))
    padded[:, :, p1:p1 + ih, p0:p0 + iw] = b
    out = np.empty((n, oh, ow, ic, kh, kw))
    for ky in range(kh):
        for kx in range(kw):
            ys = ky * d1 + s1 * np.arange(oh)
            xs = kx * d0 + s0 * np.arange(ow)
            out[:, :, :, :, ky, kx] = padded[:, :, ys][:, :, :, xs].transpose(0, 2, 3, 1)
    return out.reshape(n, oh, ow, ic * kh * kw)


def conv_2d(a, b, s0=1, s1=1, p0=0, p1=0, d0=1, d1=1):
    """Cross-correlation of input b [N, IC, IH, IW] with kernel a [OC, IC, KH, KW] (numpy order),
    float64 -> [N, OC, OH, OW]."""
    a = np.asarray(a, dtype=np.float64)
    cols = im2col(a.shape, b, s0, s1, p0, p1, d0, d1, True)          # [N, OH, OW, IC*KH*KW]
    return (cols @ a.reshape(a.shape[0], -1).T).transpose(0, 3, 1, 2)


def concat(a, b, dim):
    """ggml_concat along ggml dim `dim` of arrays in numpy order (ggml dim d is numpy axis ndim-1-d)."""
    a, b = np.asarray(a), np.asarray(b)
    return np.concatenate([a, b], axis=a.ndim - 1 - dim)


# ================================================================================================
# ---- mixture of experts: routing, swiglu_oai, mul_mat_id ----
# ================================================================================================

def sum_rows(x):
    """ggml_sum_rows: the sum over the last axis, kept as an axis of 1."""
    return np.asarray(x, dtype=np.float64).sum(axis=-1, keepdims=True)


def argsort(x, desc=False):
    """ggml_argsort as pyggml defines its ties: rows (last axis) ordered by value, equal values by
    index (lower first), NaN above every number (last ascending, first descending)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty(x.shape, dtype=np.int32)
    for r in np.ndindex(x.shape[:-1]):
        v = x[r]
        nan = np.isnan(v)
        val = np.where(nan, 0.0, -v if desc else v)
        out[r] = np.lexsort((np.arange(v.size), val, ~nan if desc else nan))
    return out


def top_k(x, k):
    """ggml's CPU top_k: the k largest (argsort's descending order), then the first two exchanged."""
    out = argsort(x, desc=True)[..., :k].copy()
    if k > 1:
        out[..., [0, 1]] = out[..., [1, 0]]
    return out


def add_id(a, b, ids):
    """ggml_add_id in numpy order: a [A3, A2, A1, E], b [n_b, E], ids [A2, A1]:
    out[i3, i2, i1] = a[i3, i2, i1] + b[ids[i2, i1]]."""
    a = np.asarray(a, dtype=np.float64)
    return a + np.asarray(b, dtype=np.float64)[np.asarray(ids)][None]


def swiglu_oai(x, g, alpha, limit):
    """gpt-oss's clamped SwiGLU: xc = min(x, limit), gc = clip(g, -limit, limit),
    xc * sigmoid(alpha * xc) * (gc + 1)."""
    xc = np.minimum(np.asarray(x, dtype=np.float64), limit)
    gc = np.clip(np.asarray(g, dtype=np.float64), -limit, limit)
    return xc / (1.0 + np.exp(-alpha * xc)) * (gc + 1.0)


def mul_mat_id(a, b, ids, wtype):
    """ggml_mul_mat_id in float64, numpy order: a the experts' stored values [n_expert, M, K], b F32
    [n_tokens, nb1, K], ids [n_tokens, n_used] -> [n_tokens, n_used, M], row (t, u) =
    a[ids[t, u]] . b[t, u % nb1] with b rounded to the weights' vec_dot type first (as mul_mat)."""
    ids = np.asarray(ids)
    n_tok, n_used = ids.shape
    out = np.empty((n_tok, n_used, a.shape[1]))
    for t in range(n_tok):
        for u in range(n_used):
            out[t, u] = mul_mat(a[ids[t, u]], b[t, u % b.shape[1]][None], wtype)[0]
    return out
