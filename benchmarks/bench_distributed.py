"""Decode tokens/s of the 8-layer benchmark model pipelined over 1, 2 and 3 Ray actors on this
machine (pyggml.distributed) against the single-process model, and what each stage hop costs.

    python benchmarks/bench_distributed.py                     # F16, 2 threads per stage, 1-3 stages
    python benchmarks/bench_distributed.py --threads 1 --stages 1 2 3 4 --tg 32 --reps 3

--streams N also times N greedy requests generated together (continuous batching, each step
carrying one token of each) by a BatchEngine in one process and by pyggml.serve.pipeline's
PipelineEngine over each pipeline: aggregate decode tokens/s, the clock started once every request
has its first id.

The model is bench_model.py's (8 layers of width 2048, F16, an untied 32000-token head: 1.1 GB,
written once to --dir). The stages run one after another for a single sequence, so on one machine
each may use all the threads; what a pipeline adds is the transfers: the caller sends the token id
to stage 0, each stage's hidden state (2048 floats, 8 KiB) goes to the next through Ray's object
store, and the last stage sends back the sampled id, N + 1 messages for N stages. Each decode step
is timed in the caller (generate's steps, greedy); the stages time their own work (Model.eval and
the argmax, Pipeline.stage_timings), and the difference is the transfer overhead of a step. Engines
are timed in turn, --reps times, and the best median step of each counts (the machine is shared);
the prefill of the --pp token prompt is timed the same way.
"""
import argparse
import os
import sys
import time

import numpy as np

import pyggml as gg
from pyggml import distributed as dist
from pyggml import models

sys.path.insert(0, os.path.dirname(__file__))
from bench_model import MODEL, model_path
from common import machine


def run(m, prompt, n, stage_seconds=None):
    """A prefill of prompt, then n greedy decode steps of m.stream, each timed on its own:
    (prefill seconds, per-step seconds, per-step stage seconds or None, ids). stage_seconds: called
    before and after each step (outside its timing), returns the stages' seconds since its last call."""
    m.reset()
    t0 = time.perf_counter()
    ids = [int(np.argmax(m.eval(prompt, logits="last")[0]))]
    pp = time.perf_counter() - t0
    gen = m.stream(ids, n + 1, stop=())
    next(gen)                      # the first step also makes the sampler: not timed
    steps, work = [], []
    for _ in range(n):
        if stage_seconds:
            stage_seconds()
        t0 = time.perf_counter()
        ids.append(next(gen))
        steps.append(time.perf_counter() - t0)
        if stage_seconds:
            work.append(stage_seconds())
    return pp, np.array(steps), np.array(work) if stage_seconds else None, ids


def batched(engine, prompts, n):
    """(aggregate decode tokens/s, ids) of len(prompts) greedy requests of n + 1 ids submitted
    together to a BatchEngine (or PipelineEngine): the n ids after each request's first."""
    reqs = [engine.submit(p, n + 1, stop=()) for p in prompts]
    while not all(r.tokens for r in reqs):
        engine.step()
    t0 = time.perf_counter()
    engine.run()
    return len(reqs) * n / (time.perf_counter() - t0), [r.tokens for r in reqs]


class Single:
    name = "single process"

    def __init__(self, path, args):
        self.m = models.load(path, n_ctx=args.ctx, n_threads=args.threads)

    def run(self, prompt, n):
        return run(self.m, prompt, n)

    def engine(self, n_seq):
        from pyggml.models.batch import BatchEngine
        return BatchEngine(self.m, n_seq)


class Piped:
    def __init__(self, path, args, stages, passive):
        self.name = f"{stages} stage{'s' * (stages > 1)}" + (", OMP passive" if passive else "")
        env = {"runtime_env": {"env_vars": {"OMP_WAIT_POLICY": "passive"}}} if passive else {}
        self.p = dist.load(path, stages=stages, n_ctx=args.ctx, n_threads=args.threads, actor_options=env)

    def run(self, prompt, n):
        return run(self.p, prompt, n, lambda: sum(s["seconds"] for s in self.p.stage_timings()))

    def engine(self, n_seq):
        from pyggml.serve.pipeline import PipelineEngine, PipelineModel
        return PipelineEngine(PipelineModel(self.p, self.p.path), n_seq)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--type", default="f16", choices=["f16", "q8_0"])
    ap.add_argument("--threads", type=int, default=2, help="threads of the single model and of each stage")
    ap.add_argument("--stages", nargs="+", type=int, default=[1, 2, 3])
    ap.add_argument("--pp", type=int, default=64)
    ap.add_argument("--tg", type=int, default=24)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--streams", type=int, default=0,
                    help="also time this many greedy requests generated together by each engine (0: not)")
    ap.add_argument("--wait-policy", default="both", choices=["default", "passive", "both"],
                    help="OMP_WAIT_POLICY of the stage actors: libgomp's default (spin a while after each "
                         "parallel region) or passive (sleep at once), or both side by side")
    ap.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "pyggml-bench"))
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    path = model_path(args.dir, args.type, "pyggml")     # Q8_0 quantized by pyggml: no llama.cpp needed
    # Ray puts the caller's working directory first on its workers' sys.path: not the source folder
    os.chdir(args.dir)
    # Ray starts workers at niceness 15; on a shared machine that starves the stages, not the single model
    os.environ.setdefault("RAY_worker_niceness", "0")
    import ray
    policies = {"default": [False], "passive": [True], "both": [False, True]}[args.wait_policy]
    # every stage reserves one logical CPU (load's default num_cpus); the pipelines are all alive at once
    ray.init(num_cpus=sum(args.stages) * len(policies), include_dashboard=False, logging_level="ERROR")
    info = gg.build_info()
    print(f"machine: {machine()}; pyggml {info['version']} {info['simd']}, ray {ray.__version__}")
    engines = [Single(path, args)] + [Piped(path, args, s, w) for s in args.stages for w in policies]
    for e in engines[1:]:
        print(f"{e.name}: " + ", ".join(f"[{s['layers'][0]}, {s['layers'][1]}) {s['weight_bytes'] / 1e6:.0f} MB"
                                        for s in e.p.stages))
    prompt = np.random.default_rng(1).integers(3, MODEL["n_vocab"], args.pp).tolist()
    best = {e.name: {"pp": np.inf, "step": np.inf, "overhead": np.inf} for e in engines}
    ids = {}
    for _ in range(args.reps):
        for e in engines:
            pp, steps, work, out = e.run(prompt, args.tg)
            b = best[e.name]
            b["pp"], b["step"] = min(b["pp"], pp), min(b["step"], float(np.median(steps)))
            if work is not None:
                b["overhead"] = min(b["overhead"], float(np.median(steps - work)))
            ids[e.name] = out
    ref = ids[engines[0].name]
    print(f"\n{args.type.upper()}, {args.threads} threads per stage, prompt {args.pp}, {args.tg} decode steps, "
          f"best of {args.reps}:\n")
    print(f"| engine | pp{args.pp} tok/s | tg tok/s | step ms | transfer overhead / step | per message "
          f"(N + 1 per step) | greedy ids = single |")
    print("|---|---|---|---|---|---|---|")
    for e in engines:
        b = best[e.name]
        n = len(e.p.stages) if hasattr(e, "p") else 0
        over = (f"{b['overhead'] * 1e3:.2f} ms | {b['overhead'] / (n + 1) * 1e3:.2f} ms" if n else "- | -")
        print(f"| {e.name} | {args.pp / b['pp']:.1f} | {1 / b['step']:.2f} | {b['step'] * 1e3:.1f} | {over} | "
              f"{'yes' if ids[e.name] == ref else 'NO'} |")
    print()
    piped = [e for e in engines if hasattr(e, "p")]
    for w in policies:
        same = [e for e in piped if e.name.endswith("passive") == w]
        if len(same) > 1:
            a, z = same[0], same[-1]
            extra = (best[z.name]["overhead"] - best[a.name]["overhead"]) / (len(z.p.stages) - len(a.p.stages))
            print(f"- each added stage (one more hop) costs {extra * 1e3:.2f} ms of transfer overhead per decode "
                  f"step ({a.name} -> {z.name})")
    if args.streams:
        prompts = [np.random.default_rng(10 + i).integers(3, MODEL["n_vocab"], 8).tolist() for i in range(args.streams)]
        rate, got = {}, {}
        for _ in range(args.reps):
            for e in engines:
                r, got[e.name] = batched(e.engine(args.streams), prompts, args.tg)
                rate[e.name] = max(rate.get(e.name, 0.0), r)
        print(f"\n{args.streams} greedy requests generated together (8-token prompts, {args.tg} decode steps), "
              f"best of {args.reps}:\n")
        print("| engine | aggregate tg tok/s | vs one sequence | ids = single process |")
        print("|---|---|---|---|")
        for e in engines:
            same = got[e.name] == got[engines[0].name]
            print(f"| {e.name} | {rate[e.name]:.2f} | {rate[e.name] * best[e.name]['step']:.2f}x | "
                  f"{'yes' if same else 'NO'} |")
    for e in piped:
        e.p.close()
    ray.shutdown()


if __name__ == "__main__":
    main()
