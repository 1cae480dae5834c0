"""Serving: `pyggml serve` against llama.cpp's `llama-server` on the same GGUF, in one run.

    python -m benchmarks serve --types f16,q4_k_m --streams 1,4,8 --threads 2
    python benchmarks/bench_serve.py --llama-server /path/to/llama-server

Each server runs as its own process with the same threads, the same number of slots (--parallel)
and a context that holds every slot's prompt and answer. For each stream count S, S clients send
/v1/completions requests at once (streaming, greedy, --tokens answer tokens each, a different
prompt each) and read the answers to the end; --rounds rounds, the servers taking turns. Reported:
aggregate decode tokens/s (every stream's tokens over the round's wall time, median of rounds), time
to first token (median and worst over all requests) and the latency between streamed tokens (p50
and p99 over all gaps). The model is bench_model.py's (8 layers x 2048, random weights; quantized
types by llama.cpp's own quantizer).

llama-server comes from the llama.cpp tree of llama-cpp-python's source distribution
(tools/llama_cpp.sh --server builds it with CMake, a few minutes), or --llama-server.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from bench_model import model_path, type_list
from common import machine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server process on a free port, up once /health answers."""

    def __init__(self, name, argv_for_port, timeout=300):
        import httpx
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # not started in the repository root, where `python -m pyggml` would import the source folder
        self.proc = subprocess.Popen(argv_for_port(self.port), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     cwd=tempfile.gettempdir())
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                raise SystemExit(f"{name} exited ({self.proc.returncode}): {self.proc.stderr.read().decode()[-2000:]}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.close()
        raise SystemExit(f"{name} did not answer /health within {timeout} s")

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def stream_one(url, prompt, n_tokens, out):
    """One streamed greedy completion; appends (time to first token, token gaps, tokens, seconds)."""
    import httpx
    body = {"prompt": prompt, "max_tokens": n_tokens, "temperature": 0.0, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    stamps, usage = [], None
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                usage = chunk["usage"]
            if chunk.get("choices") and chunk["choices"][0].get("text"):
                stamps.append(time.perf_counter())
    n = usage["completion_tokens"] if usage else len(stamps)
    if n < n_tokens:
        print(f"warning: {url}: a stream ended after {n} of {n_tokens} tokens", file=sys.stderr)
    out.append((stamps[0] - t0 if stamps else float("nan"), np.diff(stamps).tolist(), n, time.perf_counter() - t0))


def round_of(server, prompts, n_tokens):
    """Every prompt streamed at once; returns (wall seconds, per-request results)."""
    out = []
    threads = [threading.Thread(target=stream_one, args=(server.url, p, n_tokens, out)) for p in prompts]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if len(out) < len(prompts):         # a thread's exception is printed, not raised
        raise SystemExit(f"{server.name}: {len(prompts) - len(out)} of {len(prompts)} requests failed")
    return time.perf_counter() - t0, out


def prompts_for(n, length, seed):
    """n different prompts of `length` token ids (both servers take a prompt as a list of ids)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(3, 32000, length).tolist() for _ in range(n)]


def find_llama_server(path):
    if path:
        return path
    out = subprocess.run(["bash", os.path.join(ROOT, "tools", "llama_cpp.sh"), "--server"], check=True,
                         capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--types", type=type_list, default=["f16", "q4_k_m"])
    ap.add_argument("--streams", default="1,4,8", help="comma-separated concurrent stream counts")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=8, help="slots of each server")
    ap.add_argument("--tokens", type=int, default=64, help="answer tokens per request")
    ap.add_argument("--prompt", type=int, default=32, help="prompt tokens per request")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--llama-server", help="the llama-server binary (default: tools/llama_cpp.sh --server)")
    ap.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "pyggml-bench"))
    ap.add_argument("--no-mmap", action="store_true",
                    help="both servers read the file into memory instead of mapping it (pyggml's --no-mmap, "
                         "llama-server's --load-mode none)")
    args = ap.parse_args()
    streams = [int(s) for s in args.streams.split(",")]
    if max(streams) > args.parallel:
        ap.error(f"--streams up to {max(streams)} need --parallel >= {max(streams)}")
    os.makedirs(args.dir, exist_ok=True)
    binary = find_llama_server(args.llama_server)
    ctx = args.parallel * (args.prompt + args.tokens + 64)        # every slot's prompt and answer
    print(f"machine: {machine()}; {args.threads} threads, {args.parallel} slots, {args.tokens} tokens per "
          f"stream, the median of {args.rounds} rounds" + (", weights read into memory (--no-mmap)" if args.no_mmap else ""))
    no_mmap = {"pyggml": ["--no-mmap"], "llama-server": ["--load-mode", "none"]} if args.no_mmap else \
        {"pyggml": [], "llama-server": []}
    rows = []
    for typ in args.types:
        path = model_path(args.dir, typ, "llama.cpp")
        argv = {
            "pyggml": lambda port, path=path: [sys.executable, "-m", "pyggml", "serve", path, "--port", str(port),
                                    "--parallel", str(args.parallel), "-t", str(args.threads), "--ctx", str(ctx),
                                    *no_mmap["pyggml"]],
            "llama-server": lambda port, path=path: [binary, "-m", path, "--port", str(port), "--parallel", str(args.parallel),
                                          "-t", str(args.threads), "-tb", str(args.threads), "-c", str(ctx),
                                          "--kv-unified", "--no-webui",
                                          *no_mmap["llama-server"]],
        }
        servers = {name: Server(name, fn) for name, fn in argv.items()}
        try:
            for s in streams:
                res = {name: {"tps": [], "ttft": [], "gaps": []} for name in servers}
                for r in range(args.rounds):
                    prompts = prompts_for(s, args.prompt, seed=1000 * r + s)
                    for name in (list(servers) if r % 2 == 0 else list(servers)[::-1]):
                        wall, out = round_of(servers[name], prompts, args.tokens)
                        res[name]["tps"].append(sum(o[2] for o in out) / wall)
                        res[name]["ttft"] += [o[0] for o in out]
                        res[name]["gaps"] += [g for o in out for g in o[1]]
                rows.append((typ, s, res))
                print(f"  {typ} {s} streams done", file=sys.stderr)
        finally:
            for srv in servers.values():
                srv.close()
    print("\n| type | streams | pyggml tok/s | llama-server tok/s | ratio | TTFT p50 pyggml / llama-server (ms) |"
          " TTFT max | inter-token p50 (ms) | inter-token p99 (ms) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for typ, s, res in rows:
        p, q = res["pyggml"], res["llama-server"]
        tp, tq = np.median(p["tps"]), np.median(q["tps"])

        def pct(x, k):
            return 1e3 * np.percentile(x, k) if x else float("nan")
        print(f"| {typ.upper()} | {s} | {tp:.1f} | {tq:.1f} | {tp / tq:.2f} | {pct(p['ttft'], 50):.0f} / "
              f"{pct(q['ttft'], 50):.0f} | {pct(p['ttft'], 100):.0f} / {pct(q['ttft'], 100):.0f} | "
              f"{pct(p['gaps'], 50):.1f} / {pct(q['gaps'], 50):.1f} | {pct(p['gaps'], 99):.1f} / {pct(q['gaps'], 99):.1f} |")


if __name__ == "__main__":
    main()
