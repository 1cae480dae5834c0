"""What profiling costs: compute() against compute(profile=True) on the same graph, timed alternately
in one run (vs_ggml.alternate), best of several passes.

    python -m benchmarks profile [--quick]

Cases: the 640-node graph of tiny nodes (the worst case: three clock reads per step and thread
against almost no work) and one decode step of a 2-layer llama of the demo's width (real work per
step). Target (issue 15): profiled totals within 10% of an unprofiled run."""
import sys
import tempfile

import numpy as np
from common import machine
from vs_ggml import alternate

import pyggml as gg

QUICK = "--quick" in sys.argv


def tiny_chain():
    ctx = gg.Context()
    x = ctx.from_numpy(np.ones(16, np.float32))
    t = x
    for _ in range(320):
        t = gg.add(gg.scale(t, 0.5), x)
    g = gg.CGraph()
    g.build_forward_expand(t)
    return g, ctx


def decode_step(tmp):
    from pyggml import models
    from pyggml.demo import DEMO, write_random_llama
    from pyggml.profile import profile_decode
    path = f"{tmp}/m.gguf"
    write_random_llama(path, **dict(DEMO, n_layer=2), type="f16", tied=True)
    m = models.load(path, n_ctx=64, n_threads=1)
    _, g = profile_decode(m, list(range(1, 17)))
    return g, m


def timed(g, nth):
    """Best seconds of the whole call (compute, profiled compute), alternately over several passes,
    then of the parallel region alone (run_seconds against Profile.wall_ns), alternately."""
    best = [float("inf")] * 2
    for _ in range(2 if QUICK else 5):
        t = alternate([lambda: g.compute(nth), lambda: g.compute(nth, profile=True)], 0.2 if QUICK else 0.6)
        best = [min(a, b) for a, b in zip(best, t)]
    region = [float("inf")] * 2
    for _ in range(max(5, min(2000, int(0.5 / best[0])))):
        g.compute(nth)
        region[0] = min(region[0], g.run_seconds)
        region[1] = min(region[1], g.compute(nth, profile=True).wall_ns * 1e-9)
    return best, region


def main():
    print(machine(), "|", gg.build_info()["simd"])
    print("| case | threads | compute() | compute(profile=True) | profiled/plain | parallel region: plain | "
          "profiled | profiled/plain |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        cases = (("640-node graph", tiny_chain), ("llama decode step, 2 layers of 1024", lambda: decode_step(tmp)))
        for name, make in cases:
            g, keep = make()
            for nth in (1, 2):
                (c0, c1), (r0, r1) = timed(g, nth)
                print(f"| {name} | {nth} | {c0 * 1e6:.1f} us | {c1 * 1e6:.1f} us | {c1 / c0:.3f} | {r0 * 1e6:.1f} us | "
                      f"{r1 * 1e6:.1f} us | {r1 / r0:.3f} |", flush=True)
            del keep


main()
