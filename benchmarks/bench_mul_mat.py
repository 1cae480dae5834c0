"""mul_mat: GEMV (decode; F16, Q8_0 and the legacy quantized types) and a 128-column GEMM (prompt)
with 4096x4096 weights, against numpy's float32 matmul (OpenBLAS, its threads set to match) and
PyTorch float32.

GEMV is memory-bound: its line is the read bandwidth of numpy's a.sum() over the same number of
bytes as the weights (one thread), and the note gives the weights' read rate as a % of it.
Run: python benchmarks/bench_mul_mat.py [--quick]"""
import ctypes
import glob
import os
import sys

import numpy as np
from common import best_time, machine, report, torch, torch_threads

import pyggml as gg

K = M = 4096


def _openblas():
    libs = glob.glob(os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs", "libscipy_openblas*.so"))
    for name in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads"):
        for path in libs:
            fn = getattr(ctypes.CDLL(path), name, None)
            if fn is not None:
                return fn
    return None


_set_blas_threads = _openblas()


def numpy_threads(n):
    if _set_blas_threads is not None:
        _set_blas_threads(n)


def read_time(nbytes):
    a = np.ones(nbytes // 4, dtype=np.float32)
    return best_time(lambda: a.sum())


def time_case(g, nth, x, w, xt, wt, min_time):
    """(pyggml, numpy, torch) seconds for one case at nth threads"""
    t_pg = best_time(lambda: g.compute(n_threads=nth), min_time=min_time)
    t_np = best_time(lambda: x @ w.T, min_time=min_time)
    t_th = best_time(lambda: xt @ wt.T, min_time=min_time) if torch is not None else None
    return t_pg, t_np, t_th


def main(quick=False):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((M, K)).astype(np.float32)
    min_time = 0.1 if quick else 0.3
    wt = torch.from_numpy(w) if torch is not None else None
    ctx = gg.Context()
    rows = []
    gemv_quants = [("Q4_0", 1), ("Q4_1", 1), ("Q5_0", 1), ("Q5_1", 1), ("IQ4_NL", 1)]
    for typ, n in [("F16", 1), ("Q8_0", 1), *gemv_quants, ("F16", 128), ("Q8_0", 128)]:
        a = ctx.from_numpy(w, type=gg.Type[typ])
        x = rng.standard_normal((n, K)).astype(np.float32)
        out = gg.mul_mat(a, ctx.from_numpy(x))
        g = gg.CGraph()
        g.build_forward_expand(out)
        nbytes = len(a.tobytes())
        xt = torch.from_numpy(x) if torch is not None else None
        for nth in (1, 2):
            numpy_threads(nth)
            torch_threads(nth)
            t_pg, t_np, t_th = time_case(g, nth, x, w, xt, wt, min_time)
            if n == 1:
                t_read = read_time(nbytes)   # next to the pyggml timing: the load on this machine drifts
                note = (f"weights {nbytes / t_pg / 1e9:.1f} GB/s = {100 * t_read / t_pg:.0f}% of numpy read "
                        f"{nbytes / t_read / 1e9:.1f} GB/s")
            else:
                note = f"{2 * M * K * n / t_pg / 1e9:.0f} GFLOP/s (numpy {2 * M * K * n / t_np / 1e9:.0f})"
            rows.append((f"{'GEMV' if n == 1 else 'GEMM'} {typ} {M}x{K} x {n}", nth, t_pg, t_np, t_th, note))
    print(machine())
    print(f"pyggml {gg.build_info()}; numpy/torch: float32 weights")
    report(rows)


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
