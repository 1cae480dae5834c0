"""Prefill (pp) and decode (tg) tokens/s of a llama GGUF: pyggml.models against llama.cpp (through
llama-cpp-python, optional: pip install llama-cpp-python) on the same file and HF transformers on
the same weights, F16 and Q8_0, 1 and 2 threads, in one run; F16 decode against the weight-stream
limit measured in the same run; pyggml's Python work per decode token; greedy tokens of pyggml and
llama.cpp compared.

    python benchmarks/bench_model.py                     # the issue's model, F16 + Q8_0, 1 and 2 threads
    python benchmarks/bench_model.py --types f16 --threads 1 --reps 5

The model (issue 11): 8 layers, width 2048, 16 heads, 4 KV heads, FFN 5632, vocabulary 32000, an
untied LM head, random weights written by pyggml.gguf.save (pyggml.demo.write_random_llama; the
files are kept in --dir and reused). Every engine is timed in turn, `--reps` times, and the best
run of each is reported: the machine is shared, so the ratio of runs taken side by side is what to
read. All times are wall times of the Python calls: the prompt's eval, then per decode step the
eval of one token and the argmax of its logits (llama-cpp-python's Llama.eval; pyggml's
Model._step, what Model.eval and generate run per token).

Weight-stream limit: the bytes a decode step reads (Model.weight_bytes: every weight but the
embedding table) over the read bandwidth of a streaming pass over those same weights
(pyggml._vec.stream_read_f32 on the same threads, one pass between every two decode steps; medians).
Python work: a decode step's wall time minus CGraph.run_seconds (the C parallel region), median.
"""
import argparse
import gc
import os
import sys
import time

import numpy as np

import pyggml as gg
from pyggml import models
from pyggml.demo import read_seconds, write_random_llama

sys.path.insert(0, os.path.dirname(__file__))
from common import machine

MODEL = {"n_layer": 8, "n_embd": 2048, "n_head": 16, "n_head_kv": 4, "n_ff": 5632, "n_vocab": 32000}


def model_path(directory, typ):
    path = os.path.join(directory, f"bench-llama-8x2048-{typ}.gguf")
    if not os.path.exists(path):
        print(f"writing {path} ...", file=sys.stderr)
        write_random_llama(path, **MODEL, type=typ, seed=0)
    return path


# ---- pyggml ----

class PyggmlRun:
    def __init__(self, path, nth, ctx):
        self.m = models.load(path, n_ctx=ctx, n_threads=nth)
        self.nth = nth

    def pp(self, prompt):
        self.m.reset()
        t0 = time.perf_counter()
        logits = self.m.eval(prompt, logits="last")
        return time.perf_counter() - t0, int(np.argmax(logits[0]))

    def tg(self, first, n, read_between=False):
        """n decode steps after pp(); returns (seconds, ids, per-step seconds, per-step C seconds,
        read-pass seconds)."""
        m, tok, ids = self.m, first, [first]
        steps, c_time, reads = [], [], []
        x, pos = np.zeros(1, np.int32), np.zeros((1, 1), np.int32)
        t_all = time.perf_counter()
        for _ in range(n):
            if read_between:
                reads.append(read_seconds(m, self.nth, repeat=1))
            t0 = time.perf_counter()
            x[0], pos[:] = tok, m.n_past
            tok = int(np.argmax(m._step(x, pos, 1)[0]))
            steps.append(time.perf_counter() - t0)
            c_time.append(m.last_graph.run_seconds)
            ids.append(tok)
        total = sum(steps) if read_between else time.perf_counter() - t_all
        return total, ids, np.array(steps), np.array(c_time), np.array(reads)


# ---- llama.cpp ----

class LlamaCppRun:
    def __init__(self, path, nth, ctx):
        import llama_cpp
        self.lc = llama_cpp
        self.llm = llama_cpp.Llama(path, n_ctx=ctx, n_batch=512, n_ubatch=512, n_threads=nth, n_threads_batch=nth,
                                   flash_attn=True, verbose=False)

    def pp(self, prompt):
        self.llm.reset()
        t0 = time.perf_counter()
        self.llm.eval(prompt)
        return time.perf_counter() - t0, int(np.argmax(self.logits_last()))

    def logits_last(self):
        """The last evaluated token's logits, read from llama.cpp's buffer (without logits_all,
        llama-cpp-python does not keep them in Llama.scores)."""
        ptr = self.lc.llama_get_logits_ith(self.llm.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.llm.n_vocab(),)).copy()

    def tg(self, first, n):
        tok, ids, margins, t = first, [first], [], 0.0
        for _ in range(n):
            t0 = time.perf_counter()
            self.llm.eval([tok])
            lg = self.logits_last()
            tok = int(np.argmax(lg))
            t += time.perf_counter() - t0
            top = np.partition(lg, -2)[-2:]
            margins.append(float(top[1] - top[0]))
            ids.append(tok)
        return t, ids, margins


# ---- HF transformers ----

def _unpermute(w, n_head):
    """Undo llama.cpp's Q/K row permutation (interleaved pairs -> HF's rotate-half halves)."""
    r = w.shape[0]
    return w.reshape(n_head, r // n_head // 2, 2, -1).swapaxes(1, 2).reshape(w.shape)


class HFRun:
    """LlamaForCausalLM in float32 with the GGUF's weights (dequantized: HF has no F16/Q8_0 CPU path
    that would be a fair peer; it reads 2x (F16) or ~3.8x (Q8_0) the bytes)."""

    def __init__(self, path, nth, ctx):
        import torch
        import transformers
        self.torch = torch
        torch.set_num_threads(nth)
        hp = gg.gguf.load(path).hparams
        cfg = transformers.LlamaConfig(vocab_size=hp["n_vocab"], hidden_size=hp["n_embd"],
                                       intermediate_size=hp["n_ff"], num_hidden_layers=hp["n_layer"],
                                       num_attention_heads=hp["n_head"], num_key_value_heads=hp["n_head_kv"],
                                       rms_norm_eps=hp["rms_eps"], max_position_embeddings=ctx,
                                       rope_parameters={"rope_type": "default", "rope_theta": hp["rope_freq_base"]},
                                       tie_word_embeddings=False)
        with torch.device("meta"):
            model = transformers.LlamaForCausalLM(cfg)
        f = gg.gguf.load(path)
        names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                 "lm_head.weight": "output.weight"}
        per_layer = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
                     "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
                     "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
                     "mlp.down_proj": "ffn_down"}
        for i in range(hp["n_layer"]):
            names.update({f"model.layers.{i}.{k}.weight": f"blk.{i}.{v}.weight" for k, v in per_layer.items()})
        sd = {}
        for hf_name, g_name in names.items():
            w = f.tensor(g_name).to_numpy()
            if g_name.endswith("attn_q.weight"):
                w = _unpermute(w, hp["n_head"])
            elif g_name.endswith("attn_k.weight"):
                w = _unpermute(w, hp["n_head_kv"])
            sd[hf_name] = torch.from_numpy(np.ascontiguousarray(w))
        model.load_state_dict(sd, assign=True)
        model.model.rotary_emb = type(model.model.rotary_emb)(cfg)
        self.model = model.eval()

    def pp(self, prompt):
        torch = self.torch
        with torch.no_grad():
            t0 = time.perf_counter()
            out = self.model(torch.tensor([prompt]), use_cache=True, logits_to_keep=1)
            dt = time.perf_counter() - t0
        self.cache = out.cache if hasattr(out, "cache") else out.past_key_values
        return dt, int(out.logits[0, -1].argmax())

    def tg(self, first, n):
        torch = self.torch
        tok, ids = first, [first]
        t0 = time.perf_counter()
        with torch.no_grad():
            for _ in range(n):
                out = self.model(torch.tensor([[tok]]), cache=self.cache, use_cache=True)
                self.cache = out.cache if hasattr(out, "cache") else out.past_key_values
                tok = int(out.logits[0, -1].argmax())
                ids.append(tok)
        return time.perf_counter() - t0, ids


def bench(path, typ, nth, args, prompt, rows, notes):
    engines = {"pyggml": PyggmlRun(path, nth, args.ctx)}
    if not args.no_llama_cpp:
        try:
            engines["llama.cpp"] = LlamaCppRun(path, nth, args.ctx)
        except ImportError:
            notes.append("llama-cpp-python is not installed: no llama.cpp column (pip install llama-cpp-python)")
            args.no_llama_cpp = True
    if not args.no_hf and nth in args.hf_threads:
        try:
            engines["HF"] = HFRun(path, nth, args.ctx)
        except ImportError:
            notes.append("torch/transformers are not installed: no HF column")
            args.no_hf = True
    best = {e: {"pp": np.inf, "tg": np.inf} for e in engines}
    ids, margins, extra = {}, None, {}
    for rep in range(args.reps):
        for name, eng in engines.items():
            t_pp, first = eng.pp(prompt)
            best[name]["pp"] = min(best[name]["pp"], t_pp)
            if name == "pyggml":
                t_tg, out, steps, c_time, reads = eng.tg(first, args.tg, read_between=rep == 0)
                if rep == 0:
                    extra["py_work"] = float(np.median(steps - c_time))
                    extra["step"] = float(np.median(steps))
                    extra["read"] = float(np.median(reads))
                    extra["bytes"] = eng.m.weight_bytes
                    t_tg = np.inf        # the run with read passes in between does not count for tg
            elif name == "llama.cpp":
                t_tg, out, margins = eng.tg(first, args.tg)
            else:
                t_tg, out = eng.tg(first, args.tg)
            best[name]["tg"] = min(best[name]["tg"], t_tg)
            ids[name] = out
    rate = {e: (len(prompt) / b["pp"], args.tg / b["tg"]) for e, b in best.items()}
    rows.append((typ, nth, rate, extra))
    if "llama.cpp" in ids:
        a, b = ids["pyggml"], ids["llama.cpp"]
        same = next((i for i in range(len(a)) if a[i] != b[i]), len(a))
        msg = f"{typ} {nth} threads: greedy tokens of pyggml and llama.cpp equal for {same} of {len(a)}"
        if same < len(a):
            msg += (f"; at the first difference llama.cpp's top-2 logit margin is "
                    f"{margins[same - 1] if same > 0 else float('nan'):.2e}")
        notes.append(msg)
    if "HF" in ids:
        a, b = ids["pyggml"], ids["HF"]
        same = next((i for i in range(len(a)) if a[i] != b[i]), len(a))
        notes.append(f"{typ} {nth} threads: greedy tokens of pyggml and HF (float32) equal for {same} of {len(a)}")
    del engines
    gc.collect()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--types", nargs="+", default=["f16", "q8_0"], choices=["f16", "q8_0"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--hf-threads", nargs="+", type=int, default=[1, 2], help="thread counts HF runs at")
    ap.add_argument("--pp", type=int, default=128)
    ap.add_argument("--tg", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3, help="runs of each engine, in turn (the best counts)")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "pyggml-bench"))
    ap.add_argument("--no-llama-cpp", action="store_true")
    ap.add_argument("--no-hf", action="store_true")
    args = ap.parse_args()
    args.reps = max(args.reps, 2)       # the first pyggml tg run has read passes in between
    os.makedirs(args.dir, exist_ok=True)
    info = gg.build_info()
    print(f"machine: {machine()}; pyggml {info['version']} {info['simd']}, openmp={info['openmp']}")
    prompt = np.random.default_rng(1).integers(3, MODEL["n_vocab"], args.pp).tolist()
    rows, notes = [], []
    for typ in args.types:
        path = model_path(args.dir, typ)
        for nth in args.threads:
            bench(path, typ, nth, args, prompt, rows, notes)
    engines = ["pyggml"] + ([] if args.no_llama_cpp else ["llama.cpp"]) + ([] if args.no_hf else ["HF"])
    print("\n| type | threads | " + " | ".join(f"{e} pp{args.pp}" for e in engines) + " | "
          + " | ".join(f"{e} tg{args.tg}" for e in engines) + " | pg/llama.cpp pp | pg/llama.cpp tg |"
          " weight-stream limit | pg tg / limit | Python work / step |")
    print("|" + "---|" * (2 * len(engines) + 7))
    for typ, nth, rate, x in rows:
        # tokens/s if a decode step took one streaming read of its weights; the steps and the reads
        # alternated in pyggml's first tg run, so their medians saw the same machine
        stream_limit, step, py_work = 1.0 / x["read"], x["step"], x["py_work"]
        cells = [f"{rate[e][0]:.1f}" if e in rate else "-" for e in engines]
        cells += [f"{rate[e][1]:.2f}" if e in rate else "-" for e in engines]
        r = (f"{rate['pyggml'][0] / rate['llama.cpp'][0]:.2f}", f"{rate['pyggml'][1] / rate['llama.cpp'][1]:.2f}") \
            if "llama.cpp" in rate else ("-", "-")
        print(f"| {typ.upper()} | {nth} | " + " | ".join(cells) + f" | {r[0]} | {r[1]} | "
              f"{stream_limit:.2f} tok/s ({x['bytes'] / 1e9:.2f} GB) | {x['read'] / step:.0%} | "
              f"{py_work * 1e6:.0f} us = {py_work / (step - py_work):.2%} |")
    print()
    for n in notes:
        print(f"- {n}")


if __name__ == "__main__":
    main()
