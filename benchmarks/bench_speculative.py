"""Speculative decoding (pyggml.models.speculative) on the benchmark llama of bench_model.py (8 layers,
width 2048, vocabulary 32000): what a verify step costs and what generation gains.

    python -m benchmarks speculative
    python benchmarks/bench_speculative.py --type q4_0 --threads 1 --draft-max 4,8 --tg 32

1. Verify step: the wall time of Model.eval of k + 1 tokens (logits for every row, what a verify
   step runs) after a prompt of --pp tokens, against a one-token step, k = 1 .. 8 (each rolled back
   after timing; median of --reps). Given as t(k + 1) / t(1) and the cost of each extra token,
   (t(k + 1) - t(1)) / k / t(1).
2. Generation: greedy tokens/s of --tg new ids after the prompt, plain and speculative, with the
   speed-up over plain (median of --reps) and the acceptance (accepted / drafted ids):
     draft = target   a second Model over the same file (acceptance ~100%; the draft costs what
                      the target does, so this shows the verify step's saving net of a full-size draft)
     oracle, right    a drafter proposing plain decoding's own next ids at no cost (acceptance 100%,
                      what prompt lookup gives when its n-grams hit: the verify step's bound)
     oracle, wrong    the same ids plus one (acceptance 0 at no drafting cost: the verify overhead)
     random draft     a small random llama (2 layers, width 512, same vocabulary; acceptance ~0)
     lookup           prompt lookup on the (random) prompt
   "same ids" says whether the speculative ids equal plain decoding's (speculative.py's docstring
   says on which paths they may differ at near-ties).
The machine is shared: read the numbers as indicative.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from bench_model import model_path
from common import machine

import pyggml as gg
from pyggml import models
from pyggml.demo import write_random_llama
from pyggml.models.model import generation
from pyggml.models.sampling import Sampler
from pyggml.models.speculative import Speculative

DRAFT = {"n_layer": 2, "n_embd": 512, "n_head": 8, "n_head_kv": 4, "n_ff": 1408, "n_vocab": 32000}


def int_list(text):
    return [int(x) for x in text.split(",") if x]


class Oracle:
    """A drafter that knows the future: plain decoding's ids (plus `shift`, modulo n_vocab)."""

    def __init__(self, prompt, ids, shift=0, n_vocab=32000):
        self.seq = list(prompt) + [(t + shift) % n_vocab if shift else t for t in ids]
        self.n_prompt = len(prompt)

    def begin(self, ids):
        pass

    def draft(self, tokens, k):
        return self.seq[len(tokens):len(tokens) + k]


def oracle_generate(m, prompt, n, drafter, draft_max):
    """Model.generate's speculative loop with `drafter` in place of a model or lookup."""
    sample = Sampler()
    spec = Speculative(m, sample, n, frozenset(), lookup=True, draft_max=draft_max)
    spec.drafter = drafter
    return list(generation(m, prompt, n, (), spec.prefill(lambda ids: sample(m.eval(ids, logits="last")[0])),
                           spec.decode))


def verify_costs(m, prompt, reps, k_max):
    m.reset()
    m.eval(prompt, logits="last")
    p = m.n_past
    rng = np.random.default_rng(1)
    times = {}
    for k in [0] + list(range(1, k_max + 1)):
        ts = []
        for _ in range(reps + 1):           # the first builds the graph
            ids = rng.integers(0, m.n_vocab, k + 1).tolist()
            t0 = time.perf_counter()
            m.eval(ids)
            ts.append(time.perf_counter() - t0)
            m.cache.seq_rm(-1, p)
            m.n_past = p
        times[k] = float(np.median(ts[1:]))
    print("\n### Verify step: Model.eval of k + 1 tokens after the prompt\n")
    print("| k | ms | t(k+1) / t(1) | per extra token / t(1) |\n|---|---|---|---|")
    for k, t in times.items():
        extra = "" if k == 0 else f"{(t - times[0]) / k / times[0]:.3f}"
        print(f"| {k} | {t * 1e3:.1f} | {t / times[0]:.2f} | {extra} |")


def timed(fn, m, reps):
    ts, out, stats = [], None, None
    for _ in range(reps):
        m.reset()
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0 - m.timings["prefill_s"])
        stats = dict(m.timings)
    return float(np.median(ts)), out, stats


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--type", default="f16", help="the target's file type (bench_model.py's --types)")
    ap.add_argument("--quantizer", choices=["llama.cpp", "pyggml"], default="llama.cpp")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pp", type=int, default=64, help="prompt tokens")
    ap.add_argument("--tg", type=int, default=32, help="new tokens per generation")
    ap.add_argument("--draft-max", type=int_list, default=[4, 8])
    ap.add_argument("--k-max", type=int, default=8, help="largest k of the verify-step table")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "pyggml-bench"))
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    info = gg.build_info()
    print(f"machine: {machine()}; pyggml {info['version']} {info['simd']}, openmp={info['openmp']}")
    path = model_path(args.dir, args.type, args.quantizer)
    draft_path = os.path.join(args.dir, "bench-llama-2x512-f16-seed1.gguf")
    if not os.path.exists(draft_path):
        write_random_llama(draft_path, **DRAFT, type="f16", seed=1)
    m = models.load(path, n_ctx=args.ctx, n_threads=args.threads)
    same = models.load(path, n_ctx=args.ctx, n_threads=args.threads)
    small = models.load(draft_path, n_ctx=args.ctx, n_threads=args.threads)
    prompt = np.random.default_rng(0).integers(0, m.n_vocab, args.pp).tolist()
    print(f"target: {os.path.basename(path)}, {args.threads} threads, prompt {args.pp}, {args.tg} new ids, "
          f"median of {args.reps}")

    verify_costs(m, prompt, args.reps, args.k_max)

    t_plain, want, _ = timed(lambda: m.generate(prompt, args.tg, stop=()), m, args.reps)
    print("\n### Greedy generation (decode time, prefill excluded)\n")
    print("| drafter | draft_max | tokens/s | speed-up | accepted / drafted | verify steps | same ids |")
    print("|---|---|---|---|---|---|---|")
    print(f"| none | - | {(args.tg - 1) / t_plain:.2f} | 1.00 | - | {args.tg - 1} | yes |")
    for k in args.draft_max:
        cases = [("draft = target", lambda k=k: m.generate(prompt, args.tg, stop=(), draft=same, draft_max=k)),
                 ("oracle, right", lambda k=k: oracle_generate(m, prompt, args.tg, Oracle(prompt, want), k)),
                 ("oracle, wrong", lambda k=k: oracle_generate(m, prompt, args.tg, Oracle(prompt, want, 1), k)),
                 ("random draft", lambda k=k: m.generate(prompt, args.tg, stop=(), draft=small, draft_max=k)),
                 ("lookup", lambda k=k: m.generate(prompt, args.tg, stop=(), lookup=True, draft_max=k))]
        for name, fn in cases:
            t, got, st = timed(fn, m, args.reps)
            print(f"| {name} | {k} | {(args.tg - 1) / t:.2f} | {t_plain / t:.2f} | "
                  f"{st['accepted_tokens']} / {st['draft_tokens']} | {st['verify_steps']} | "
                  f"{'yes' if got == want else 'no'} |")


if __name__ == "__main__":
    main()
