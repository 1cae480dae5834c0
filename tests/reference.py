"""float64 numpy references written from ../shared/docs/ggml-semantics.md. No pyggml code here:
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


def roundtrip(x, typ):
    """x as stored in a tensor of type name typ ('F32', 'F16', 'BF16', 'Q8_0', 'Q4_0'), back in f32."""
    x = np.asarray(x, dtype=np.float32)
    n = x.shape[-1]
    if typ == "F32":
        return x.copy()
    if typ == "F16":
        return round_f16(x)
    if typ == "BF16":
        return round_bf16(x)
    if typ == "Q8_0":
        return dequantize_q8_0(quantize_q8_0(x), n).reshape(x.shape)
    if typ == "Q4_0":
        return dequantize_q4_0(quantize_q4_0(x), n).reshape(x.shape)
    raise ValueError(typ)


# ---- core ops ----

def broadcast_binary(a, b, op):
    """ggml's repeat of b over a (numpy order: shapes reversed), float64."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
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


# ================================================================================================
# ---- norm ----
# ================================================================================================


# ================================================================================================
# ---- rope ----
# ================================================================================================


# ================================================================================================
# ---- attention ----
# ================================================================================================


# ================================================================================================
# ---- set_rows ----
# ================================================================================================
