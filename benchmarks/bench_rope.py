"""RoPE throughput: NEOX on [128, 32, 512] F32 (positions 0..511) and MROPE on [128, 12, 512], against
numpy and PyTorch computing q*cos + rotate_half(q)*sin with cos/sin precomputed (so they do not pay
for the angles; pyggml does), next to a copy of the same bytes (numpy copyto and pyggml cont).
GB/s counts the bytes read plus written. Target: NEOX at 1 thread within 1.5x of the copy time.

    python benchmarks/bench_rope.py
"""
import numpy as np
from common import best_time, machine, report, torch, torch_threads

import pyggml as gg

CASES = [("NEOX", gg.RopeType.NEOX, 128, 32, 512, None),
         ("MROPE", gg.RopeType.MROPE, 128, 12, 512, [16, 24, 24, 0])]
BASE = 10000.0


def angles(pos, d, sections):
    """cos/sin [T, 1, D] in the rotate_half layout (sections: Qwen2-VL's mrope recomposition)."""
    inv = BASE ** (-np.arange(0, d, 2) / d)
    if sections is None:
        f = pos[0][:, None] * inv
    else:
        bounds = np.cumsum([0] + sections[:3])
        f = np.concatenate([pos[i][:, None] * inv[bounds[i]:bounds[i + 1]] for i in range(3)], axis=1)
    f = np.concatenate([f, f], axis=1)[:, None, :]
    return np.cos(f).astype(np.float32), np.sin(f).astype(np.float32)


def bench_case(rng, name, mode, d, h, t, sections):
    x = rng.standard_normal((t, h, d)).astype(np.float32)
    multi = sections is not None
    pos = np.tile(np.arange(t, dtype=np.int32), 4 if multi else 1)
    ctx = gg.Context()
    a = ctx.from_numpy(x)
    b = ctx.from_numpy(pos)
    args = (0, BASE, 1.0, 0.0, 1.0, 32.0, 1.0)
    out = (gg.rope_multi(a, b, None, d, sections, mode, *args) if multi
           else gg.rope_ext(a, b, None, d, mode, *args))
    g = gg.CGraph()
    g.build_forward_expand(out)
    cp = gg.CGraph()
    cp.build_forward_expand(gg.cont(a))

    cos, sin = angles(pos.reshape(-1, t).astype(np.float64), d, sections)
    half = d // 2

    def np_rope():
        rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos + rot * sin

    y = np.empty_like(x)
    t_copy_np = best_time(lambda: np.copyto(y, x))
    th_rope = None
    if torch is not None:
        xt, ct, st = torch.from_numpy(x), torch.from_numpy(cos), torch.from_numpy(sin)

        def th_rope():
            rot = torch.cat((-xt[..., half:], xt[..., :half]), dim=-1)
            return xt * ct + rot * st
    moved = 2 * x.nbytes
    rows = []
    for nth in (1, 2):
        t_pg = best_time(lambda n=nth: g.compute(n_threads=n))
        t_cp = best_time(lambda n=nth: cp.compute(n_threads=n))
        t_np = best_time(np_rope)
        t_th = None
        if th_rope is not None:
            torch_threads(nth)
            t_th = best_time(th_rope)
        note = (f"{moved / t_pg / 1e9:.1f} GB/s; copy: pyggml cont {t_cp * 1e6:.0f} us "
                f"({moved / t_cp / 1e9:.1f} GB/s), numpy copyto {t_copy_np * 1e6:.0f} us; "
                f"rope/copy {t_pg / min(t_cp, t_copy_np):.2f}x")
        rows.append((f"{name} [{d}, {h}, {t}] F32", nth, t_pg, t_np, t_th, note))
    return rows


def main():
    print(machine())
    rng = np.random.default_rng(0)
    rows = []
    for case in CASES:
        rows += bench_case(rng, *case)
    report(rows)


if __name__ == "__main__":
    main()
