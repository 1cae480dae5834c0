"""SET_ROWS into a KV-cache-sized destination: 512 F32 rows of 1024 (prefill) and 1 row (decode) into
[1024, 4096] F16 / BF16 / Q8_0, threads 1 and 2, against numpy fancy assignment and torch index_copy_
(both converting the source first). The note gives pyggml's time over a plain numpy copy of the same
source bytes (target for F16 at 1 thread: <= 1.1). Last, RoPE fused into the cache write against
the unfused rope_ext + set_rows pair.

    python benchmarks/bench_rows.py
"""
import os

import numpy as np
from common import best_time, machine, report, torch, torch_threads

import pyggml as gg

E, R, SLOT0 = 1024, 4096, 1024
NP_DTYPE = {"F16": np.float16}
TORCH_DTYPE = {"F16": "float16", "BF16": "bfloat16"}


def bench(typ, n, nth):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, E)).astype(np.float32)
    idx = np.arange(SLOT0, SLOT0 + n)
    ctx = gg.Context()
    a = ctx.new_tensor(gg.Type[typ], (E, R))
    g = gg.CGraph()
    g.build_forward_expand(gg.set_rows(a, ctx.from_numpy(x), ctx.from_numpy(idx.astype(np.int64))))
    t_pg = best_time(lambda: g.compute(nth))

    t_np = None
    if typ in NP_DTYPE:
        dst = np.zeros((R, E), NP_DTYPE[typ])

        def np_set():
            dst[idx] = x.astype(NP_DTYPE[typ])
        t_np = best_time(np_set)

    t_th = None
    if torch is not None and typ in TORCH_DTYPE:
        torch_threads(nth)
        dt = getattr(torch, TORCH_DTYPE[typ])
        tdst, tx, tidx = torch.zeros((R, E), dtype=dt), torch.from_numpy(x), torch.from_numpy(idx)
        t_th = best_time(lambda: tdst.index_copy_(0, tidx, tx.to(dt)))

    copy_dst = np.empty_like(x)
    t_copy = best_time(lambda: np.copyto(copy_dst, x))
    return (f"{n} x {E} F32 -> {typ}", nth, t_pg, t_np, t_th, f"{t_pg / t_copy:.2f} x numpy copy")


def bench_rope_fused(typ, n, nth):
    """rope_ext of [128, 8, n] F32 written through a KVCache step: the fused node against the
    unfused pair (PYGGML_DISABLE_FUSION when the plan is made)."""
    ctx = gg.Context()
    x = ctx.from_numpy(np.random.default_rng(0).standard_normal((n, 8, 128)).astype(np.float32))
    times = []
    for disable in ("0", "1"):
        os.environ["PYGGML_DISABLE_FUSION"] = disable
        cache = gg.KVCache(ctx, 1, R, 128, 8, type=gg.Type[typ])
        cache.prepare(SLOT0)
        step = cache.prepare(n)
        g = gg.CGraph()
        g.build_forward_expand(step.cpy_k(0, gg.rope_ext(x, step.positions, None, 128, gg.RopeType.NEOX, 4096,
                                                         10000.0, 1.0, 0.0, 1.0, 32.0, 1.0)))
        assert len(g.plan(nth).fused) == (disable == "0")
        times.append(best_time(lambda g=g: g.compute(nth)))
    os.environ.pop("PYGGML_DISABLE_FUSION")
    return (f"rope + set_rows {n} x 1024 -> {typ}, fused", nth, times[0], None, None,
            f"unfused {times[1] * 1e6:.1f} us ({times[1] / times[0]:.2f}x)")


def main():
    print(machine())
    print()
    rows = [bench(typ, n, nth) for n in (512, 1) for typ in ("F16", "BF16", "Q8_0") for nth in (1, 2)]
    rows += [bench_rope_fused(typ, n, nth) for n in (512, 1) for typ in ("F16", "Q8_0") for nth in (1, 2)]
    report(rows)


if __name__ == "__main__":
    main()
