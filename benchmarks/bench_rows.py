"""SET_ROWS into a KV-cache-sized destination: 512 F32 rows of 1024 (prefill) and 1 row (decode) into
[1024, 4096] F16 / BF16 / Q8_0, threads 1 and 2, against numpy fancy assignment and torch index_copy_
(both converting the source first). The note gives pyggml's time over a plain numpy copy of the same
source bytes (target for F16 at 1 thread: <= 1.1).

    python benchmarks/bench_rows.py
"""
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


def main():
    print(machine())
    print()
    rows = [bench(typ, n, nth) for n in (512, 1) for typ in ("F16", "BF16", "Q8_0") for nth in (1, 2)]
    report(rows)


if __name__ == "__main__":
    main()
