"""Regenerate tests/data/kquants_ggml.npz: rows of inputs chosen to reach the K-quant quantisers'
edge cases, and the bytes ggml itself makes of them (quantize_row_*_ref through ggml_quantize_chunk
without an importance matrix; Q8_K through the CPU backend's from_float). Needs the ggml-python
package (pip install ggml-python); tests/types/test_kquants.py compares pyggml's bytes with these.

    python tools/kquants_golden.py
"""
import ctypes
from pathlib import Path

import ggml
import numpy as np

TYPES = {"Q2_K": 10, "Q3_K": 11, "Q4_K": 12, "Q5_K": 13, "Q6_K": 14, "Q8_K": 15}
N = 768                      # three super-blocks: an odd number per row


def inputs():
    rng = np.random.default_rng(20261201)
    g = rng.standard_normal((20, N)).astype(np.float32)
    rows = [
        g[0],
        np.zeros(N, np.float32),                                  # all-zero blocks
        np.concatenate([np.zeros(256, np.float32), g[1, 256:]]),  # one zero super-block
        np.where(np.arange(N) == 300, np.float32(1000), g[2]),    # an outlier
        np.round(g[3] * 4) / 4,                                   # exact halves in nearest_int
        np.round(g[4] * 2),                                       # small integers: ties everywhere
        g[5] * np.float32(1e-20),                                 # below GROUP_MAX_EPS after scaling
        np.abs(g[6]),                                             # no negative values: min 0
        -np.abs(g[7]),                                            # no positive values
        np.where(np.arange(N) % 2 == 0, g[8], 0),                 # half zeros
        np.full(N, 0.75, np.float32),                             # constant: max == min
        rng.integers(-4, 4, N).astype(np.float32),                # Q3_K's levels exactly
        rng.uniform(-1, 1, N).astype(np.float32),
        g[9] * np.float32(1e3),
        g[10] * np.float32(1e-3),
        np.where(np.arange(N) % 16 == 0, g[11] * 30, g[12]),     # an outlier in every group of 16
    ]
    return np.stack(rows).astype(np.float32)


def quantize(x, name):
    tid = TYPES[name]
    rs = ggml.ggml_row_size(tid, N)
    dst = (ctypes.c_uint8 * (rs * x.shape[0]))()
    src = np.ascontiguousarray(x)
    if name == "Q8_K":           # no quantize_chunk for the activation type: the CPU from_float
        from_float = ggml.ggml_get_type_traits_cpu(tid).contents.from_float
        for r in range(x.shape[0]):
            from_float(src[r].ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                       ctypes.cast(ctypes.byref(dst, r * rs), ctypes.c_void_p), N)
    else:
        ggml.ggml_quantize_chunk(tid, src.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                 ctypes.cast(dst, ctypes.c_void_p), 0, x.shape[0], N, None)
    return np.frombuffer(bytes(dst), np.uint8).reshape(x.shape[0], rs)


def main():
    x = inputs()
    out = Path(__file__).resolve().parent.parent / "tests" / "data" / "kquants_ggml.npz"
    np.savez_compressed(out, x=x, **{name: quantize(x, name) for name in TYPES})
    print(out)


if __name__ == "__main__":
    main()
