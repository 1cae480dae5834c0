"""rms_norm(x) * w, fused (one kernel) and unfused (RMS_NORM then MUL), on a prefill shape [4096, 512]
and the decode shape [4096, 1], against numpy and torch.nn.functional.rms_norm, 1 and 2 threads.
The op is memory bound, so each row also gives the bytes it must move and the GB/s achieved, next
to a plain copy of the same bytes (numpy copyto of x into y, measured in the same run).

    python benchmarks/bench_norm.py
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import best_time, machine, report, torch, torch_threads

import pyggml as gg

N = 4096
EPS = 1e-6


def graph(ctx, x, w, fused):
    """Graph of rms_norm(x) * w; fusion is decided when the plan is made, so the environment only
    needs to say so then."""
    g = gg.CGraph()
    y = gg.mul(gg.rms_norm(x, EPS), w)
    g.build_forward_expand(y)
    old = os.environ.pop("PYGGML_DISABLE_FUSION", None)
    if not fused:
        os.environ["PYGGML_DISABLE_FUSION"] = "1"
    for nth in (1, 2):
        assert len(g.plan(nth).fused) == (1 if fused else 0)
    os.environ.pop("PYGGML_DISABLE_FUSION", None)
    if old is not None:
        os.environ["PYGGML_DISABLE_FUSION"] = old
    return g, y


def main():
    print(f"machine: {machine()}, pyggml {gg.build_info()}")
    rng = np.random.default_rng(0)
    rows = []
    for m in (512, 1):
        xa = rng.standard_normal((m, N)).astype(np.float32)
        wa = rng.standard_normal(N).astype(np.float32)
        ctx = gg.Context()
        x, w = ctx.from_numpy(xa), ctx.from_numpy(wa)
        graphs = {mode: graph(ctx, x, w, mode == "fused") for mode in ("fused", "unfused")}
        if m > 1:
            # the same x placed 3968 bytes into a page, so the (page-aligned) y is 128 bytes ahead
            # of x within the page: the layout every tensor had before blocks were page-aligned
            # (_tensor.block_align); the gap to "fused" is the cost of 4K aliasing
            buf = ctx.new_tensor_1d(gg.Type.F32, xa.size + 1024)
            x_alias = gg.view_2d(buf, N, m, 4 * N, 3968)
            x_alias.set(xa)
            graphs["fused, x 128 B behind y in the page"] = graph(ctx, x_alias, w, True)
        for g, y in graphs.values():
            g.compute(1)
        for _, y in graphs.values():
            np.testing.assert_array_equal(y.numpy(), graphs["fused"][1].numpy())

        ya = np.empty_like(xa)
        t_copy = best_time(lambda xa=xa, ya=ya: np.copyto(ya, xa))
        t_np = best_time(lambda xa=xa, wa=wa: xa / np.sqrt((xa * xa).mean(axis=-1, keepdims=True) + EPS) * wa)
        act = xa.nbytes
        rep = 200   # fixed: on a busy machine one slow first call must not shrink the sample
        for nth in (1, 2):
            t_th = None
            if torch is not None:
                torch_threads(nth)
                xt, wt = torch.from_numpy(xa), torch.from_numpy(wa)
                t_th = best_time(lambda xt=xt, wt=wt: torch.nn.functional.rms_norm(xt, (N,), wt, EPS), rep)
            for mode, (g, _) in graphs.items():
                t = best_time(lambda g=g, nth=nth: g.compute(nth), rep)
                # fused: x read, y written; unfused: also the norm's result written and read back
                moved = (4 if mode == "unfused" else 2) * act + wa.nbytes
                note = (f"{moved / 1e6:.2f} MB, {moved / t / 1e9:.1f} GB/s; copy of x {t_copy * 1e6:.1f} us "
                        f"({2 * act / t_copy / 1e9:.1f} GB/s), pg/copy {t / t_copy:.2f}")
                rows.append((f"rms_norm*w [{N}, {m}] {mode}", nth, t, t_np, t_th, note))
    report(rows)


if __name__ == "__main__":
    main()
