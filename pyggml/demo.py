"""The README demo: softmax attention built from mul_mat and soft_max_ext, checked against numpy."""
import time

import numpy as np

import pyggml as gg


def main(argv=()):
    rng = np.random.default_rng(0)
    d, n_kv, n_q = 64, 256, 8
    q = rng.standard_normal((n_q, d)).astype(np.float32)
    k = rng.standard_normal((n_kv, d)).astype(np.float32)
    v = rng.standard_normal((d, n_kv)).astype(np.float32)   # stored transposed: rows are dims

    ctx = gg.Context()
    tq, tk, tv = ctx.from_numpy(q), ctx.from_numpy(k, type=gg.Type.F16), ctx.from_numpy(v)
    kq = gg.mul_mat(tk, tq)                                  # [n_kv, n_q]
    p = gg.soft_max_ext(kq, None, 1.0 / np.sqrt(d), 0.0)
    out = gg.mul_mat(tv, p)                                  # [d, n_q]
    g = gg.CGraph()
    g.build_forward_expand(out)
    g.compute(n_threads=2)
    t0 = time.perf_counter()
    g.compute(n_threads=2)
    dt = time.perf_counter() - t0

    s = q.astype(np.float64) @ k.astype(np.float16).astype(np.float64).T / np.sqrt(d)
    s = np.exp(s - s.max(axis=1, keepdims=True))
    ref = (s / s.sum(axis=1, keepdims=True)) @ v.T.astype(np.float64)
    got = out.to_numpy()
    nmse = float(((got - ref) ** 2).sum() / (ref ** 2).sum())
    print(f"pyggml {gg.build_info()['version']} ({gg.build_info()['simd']}, openmp={gg.build_info()['openmp']})")
    print(f"attention of {n_q} queries over {n_kv} keys, d={d}: {len(g.nodes)} nodes, {dt * 1e6:.1f} us")
    print(f"out[0, :4] = {np.array2string(got[0, :4], precision=4)}")
    print(f"NMSE against float64 numpy: {nmse:.2e}")
    return 0 if nmse < 1e-5 else 1
