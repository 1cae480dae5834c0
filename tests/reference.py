"""float64 numpy references written from ../shared/docs/ggml-semantics.md. No pyggml code here:
tests build inputs with numpy, run pyggml, and compare against these functions."""
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


# ================================================================================================
# ---- mul_mat ----
# ================================================================================================

# what the activations are converted to before the dot product (ggml's CPU vec_dot_type)
VEC_DOT_TYPE = {"F32": "F32", "F16": "F16", "BF16": "BF16", "Q8_0": "Q8_0", "Q4_0": "Q8_0"}


def mul_mat(a, b, wtype):
    """ggml_mul_mat in float64. a: the weights' values as stored (numpy [ne03, ne02, M, K], e.g.
    roundtrip(w, wtype)); b: F32 activations [ne13, ne12, N, K], first rounded to the weights'
    vec_dot type (F16 -> fp16, BF16 -> bf16, Q8_0/Q4_0 -> the CPU Q8_0 quantiser). a is repeated
    over dims 2/3 by integer division (b matrix i2 uses a matrix i2 // (ne12 // ne02)).
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


# ================================================================================================
# ---- rope ----
# ================================================================================================


# ================================================================================================
# ---- attention ----
# ================================================================================================


# ================================================================================================
# ---- set_rows ----
# ================================================================================================
