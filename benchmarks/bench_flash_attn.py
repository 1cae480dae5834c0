"""flash_attn_ext: decode (split-KV, GQA-packed) against a plain read of the same K/V bytes, PyTorch
SDPA and matmul+softmax; causal prefill (tiled) against PyTorch SDPA; the split-threshold sweep.

    python benchmarks/bench_flash_attn.py            # decode + prefill tables
    python benchmarks/bench_flash_attn.py --sweep    # every path over L = 64..8192, N = 1
"""
import argparse

import numpy as np
from common import best_time, machine, report, torch, torch_threads

import pyggml as gg

THREADS = (1, 2)


def graph(q, k, v, mask, scale, path="auto"):
    ctx = gg.Context()
    out = gg.flash_attn_ext(ctx.from_numpy(q), ctx.from_numpy(k, type=gg.Type.F16),
                            ctx.from_numpy(v, type=gg.Type.F16),
                            None if mask is None else ctx.from_numpy(mask), scale)
    gg.flash_attn_ext_set_path(out, path)
    g = gg.CGraph()
    g.build_forward_expand(out)
    return g, out


def np_attention(q, k, v, mask, scale):
    """matmul + softmax in numpy f32, GQA by grouping the query heads of each KV head"""
    hq, hkv = q.shape[1], k.shape[1]
    qg = q.reshape(hkv, hq // hkv * q.shape[2], q.shape[3])
    s = np.matmul(qg, k[0].transpose(0, 2, 1)) * scale
    if mask is not None:
        s = s.reshape(hkv, hq // hkv, q.shape[2], -1) + mask
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)
    return np.matmul(s.reshape(hkv, -1, s.shape[-1]), v[0])


def torch_cases(q, k, v, causal, scale):
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def f_sdpa():
        with torch.no_grad():
            sdpa(tq, tk, tv, is_causal=causal, enable_gqa=True, scale=scale)

    g = q.shape[1] // k.shape[1]
    kr, vr = tk.repeat_interleave(g, dim=1), tv.repeat_interleave(g, dim=1)

    def f_mm():
        with torch.no_grad():
            torch.softmax(torch.matmul(tq, kr.transpose(-1, -2)) * scale, dim=-1).matmul(vr)
    return f_sdpa, f_mm


def decode_rows(rng, L):
    D, Hq, Hkv = 128, 32, 8
    q = rng.standard_normal((1, Hq, 1, D)).astype(np.float32)
    k = rng.standard_normal((1, Hkv, L, D)).astype(np.float16)
    v = rng.standard_normal((1, Hkv, L, D)).astype(np.float16)
    scale = 1.0 / np.sqrt(D)
    g, out = graph(q, k.astype(np.float32), v.astype(np.float32), None, scale)
    kf, vf = k.astype(np.float32), v.astype(np.float32)
    kv_bytes = np.concatenate([k.ravel(), v.ravel()])
    words = kv_bytes.view(np.float32)
    rows = []
    for nth in THREADS:
        torch_threads(nth)
        t_pg = best_time(lambda nth=nth: g.compute(n_threads=nth))
        t_np = best_time(lambda: np_attention(q, kf, vf, None, scale)) if nth == 1 else None
        t_read = best_time(lambda: words.sum())
        note = f"path {gg.flash_attn_ext_get_path(out)}; read of the {kv_bytes.nbytes >> 20} MiB K/V: " \
               f"{t_read * 1e6:.0f} us, pg/read {t_pg / t_read:.2f}"
        if torch is not None:
            f_sdpa, f_mm = torch_cases(q, kf, vf, False, scale)
            rows.append((f"decode L={L} F16 KV (torch SDPA gqa F32)", nth, t_pg, t_np, best_time(f_sdpa), note))
            rows.append((f"decode L={L} F16 KV (torch matmul+softmax F32)", nth, t_pg, t_np, best_time(f_mm), ""))
        else:
            rows.append((f"decode L={L} F16 KV", nth, t_pg, t_np, None, note))
    return rows


def prefill_rows(rng):
    N = L = 512
    D, Hq, Hkv = 128, 32, 8
    q = rng.standard_normal((1, Hq, N, D)).astype(np.float32)
    k = rng.standard_normal((1, Hkv, L, D)).astype(np.float16).astype(np.float32)
    v = rng.standard_normal((1, Hkv, L, D)).astype(np.float16).astype(np.float32)
    mask = np.triu(np.full((N, L), -np.inf, np.float32), 1).astype(np.float16)
    scale = 1.0 / np.sqrt(D)
    g, out = graph(q, k, v, mask, scale)
    rows = []
    for nth in THREADS:
        torch_threads(nth)
        t_pg = best_time(lambda nth=nth: g.compute(n_threads=nth), repeat=5)
        t_np = best_time(lambda: np_attention(q, k, v, mask.astype(np.float32), scale), repeat=3) if nth == 1 else None
        t_th = best_time(torch_cases(q, k, v, True, scale)[0], repeat=5) if torch is not None else None
        rows.append(("prefill N=L=512 causal F16 KV (torch SDPA F32 is_causal)", nth, t_pg, t_np, t_th,
                     f"path {gg.flash_attn_ext_get_path(out)}"))
    return rows


def sweep(rng):
    """N = 1, q [128, 1, 32], F16 K/V [128, L, 8]: time of each path (us) per L and thread count"""
    D, Hq, Hkv = 128, 32, 8
    print("| L | threads | one_chunk | tiled | split | auto picks |")
    print("|---|---|---|---|---|---|")
    for L in (64, 128, 256, 512, 1024, 2048, 4096, 8192):
        q = rng.standard_normal((1, Hq, 1, D)).astype(np.float32)
        k = rng.standard_normal((1, Hkv, L, D)).astype(np.float32)
        v = rng.standard_normal((1, Hkv, L, D)).astype(np.float32)
        for nth in THREADS:
            ts = []
            for path in ("one_chunk", "tiled", "split", "auto"):
                g, out = graph(q, k, v, None, 0.088, path)
                t = best_time(lambda g=g, nth=nth: g.compute(n_threads=nth), min_time=0.1)
                ts.append(t)
            print(f"| {L} | {nth} | " + " | ".join(f"{t * 1e6:.0f} us" for t in ts[:3]) +
                  f" | {gg.flash_attn_ext_get_path(out)} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweep", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(machine())
    print()
    if args.sweep:
        sweep(rng)
        return
    report(decode_rows(rng, 4096) + decode_rows(rng, 512) + prefill_rows(rng))


if __name__ == "__main__":
    main()
