"""GGUF loading: a llama-shaped F16 model file (default 8 layers of width 1024, ~230 MB, vocab 32000
with a token list) loaded in fresh processes by pyggml.gguf.load (zero copy), by the gguf package's
GGUFReader, and by copying every tensor with Context.from_bytes, alternately, with the time and the
process's anonymous resident memory (RssAnon) added by each (the load, then a pass reading every
weight); then the same for a 151k-token
vocabulary with its merges (metadata only). Target: pyggml's RssAnon < 15% of the tensor bytes and
load time dominated by the metadata.

    python benchmarks/bench_gguf.py [--layers 8] [--width 1024] [--repeat 3]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

import pyggml.gguf as G

CHILD = """
import sys, time
def anon():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon"):
            return int(line.split()[1]) * 1024
how, path = sys.argv[1], sys.argv[2]
import numpy as np, gguf, pyggml as gg, pyggml.gguf as G
a0, t0 = anon(), time.perf_counter()
if how == "pyggml":
    f = G.load(path)
    t_load = time.perf_counter() - t0
    keep = [t.numpy().view(np.uint8).sum() if t.type in (gg.Type.F32, gg.Type.F16) else 0 for t in f.tensors.values()]
elif how == "GGUFReader":
    r = gguf.GGUFReader(path)
    t_load = time.perf_counter() - t0
    keep = [int(t.data.view(np.uint8).sum()) for t in r.tensors]
else:
    f = G.load(path)
    ctx = gg.Context()
    keep = [ctx.from_bytes(t.type, t.ne, t.tobytes()) for t in f.tensors.values()]
    t_load = time.perf_counter() - t0
print(t_load, time.perf_counter() - t0, anon() - a0)
"""


def write_model(path, layers, width, vocab):
    rng = np.random.default_rng(0)
    ff = width * 11 // 4 // 32 * 32
    tensors = {"token_embd.weight": rng.standard_normal((vocab, width), dtype=np.float32).astype(np.float16),
               "output_norm.weight": np.ones(width, np.float32)}
    for i in range(layers):
        for name, shape in [("attn_q", (width, width)), ("attn_k", (width // 4, width)),
                            ("attn_v", (width // 4, width)), ("attn_output", (width, width)),
                            ("ffn_gate", (ff, width)), ("ffn_up", (ff, width)), ("ffn_down", (width, ff))]:
            tensors[f"blk.{i}.{name}.weight"] = rng.standard_normal(shape, dtype=np.float32).astype(np.float16)
        tensors[f"blk.{i}.attn_norm.weight"] = tensors[f"blk.{i}.ffn_norm.weight"] = np.ones(width, np.float32)
    G.save(path, tensors, {"general.architecture": "llama", "tokenizer.ggml.tokens": [f"tok{i}" for i in range(vocab)],
                           "tokenizer.ggml.token_type": [1] * vocab})
    return sum(t.nbytes for t in tensors.values())


def run(how, path):
    out = subprocess.run([sys.executable, "-c", CHILD, how, path], capture_output=True, text=True, check=True,
                         cwd=tempfile.gettempdir())
    t_load, t, a = out.stdout.split()
    return float(t_load), float(t), int(a)


def compare(path, nbytes, ways, repeat):
    best = {w: (float("inf"), 0, 0) for w in ways}
    for _ in range(repeat):
        for w in ways:
            r = run(w, path)
            if r[0] < best[w][0]:
                best[w] = r
    for w, (t_load, t, a) in best.items():
        share = f"{100 * a / nbytes:5.1f}% of tensor bytes" if nbytes else ""
        print(f"  {w:11s} load {t_load * 1e3:8.1f} ms  with a read of every weight {t * 1e3:8.1f} ms  "
              f"RssAnon +{a / 1e6:7.1f} MB {share}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "model.gguf")
        nbytes = write_model(model, args.layers, args.width, 32000)
        os.system(f"cat {model} > /dev/null")                       # into the page cache for every run
        print(f"model: {args.layers} layers, width {args.width}, {nbytes / 1e6:.0f} MB of F16/F32 tensors, "
              f"vocab 32000 (each way reads every weight once)")
        compare(model, nbytes, ("pyggml", "GGUFReader", "from_bytes"), args.repeat)
        vocab = os.path.join(d, "vocab.gguf")
        n = 151000
        G.save(vocab, {"x": np.zeros(4, np.float32)}, {"general.architecture": "qwen2",
               "tokenizer.ggml.tokens": [f"tok{i}" for i in range(n)], "tokenizer.ggml.token_type": [1] * n,
               "tokenizer.ggml.merges": [f"a{i} b{i}" for i in range(n)]})
        print(f"vocabulary: {n} tokens and {n} merges (metadata only)")
        compare(vocab, 0, ("pyggml", "GGUFReader"), args.repeat)


if __name__ == "__main__":
    main()
