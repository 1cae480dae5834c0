"""Prefill (pp) and decode (tg) tokens/s of a llama GGUF: pyggml.models against llama.cpp (through
llama-cpp-python, optional: pip install llama-cpp-python) on the same file and HF transformers on
the same weights, any of F16, Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K and IQ4_NL, 1 and 2 threads, in one
run; F16 decode against the weight-stream limit measured in the same run; pyggml's Python work per
decode token; greedy tokens of pyggml and llama.cpp compared.

    python -m benchmarks model --vs-llama-cpp --types f16,q8_0,q4_k_m,q4_0 --threads 1,2
    python -m benchmarks model --arch qwen3,gemma3 --types f16,q4_0 --no-hf
    python benchmarks/bench_model.py --types f16 --threads 1 --reps 5
    python -m benchmarks model --vs-llama-cpp --types f16,q4_k_m --no-mmap --no-hf   # both engines' --no-mmap

The quantized files are made by llama.cpp's own quantizer (llama_model_quantize through
llama-cpp-python, from the F16 file), so llama.cpp loads exactly what it would make itself and
repacks what it repacks; --quantizer pyggml writes them with pyggml's quantizers instead (F16, Q8_0
and Q4_K_M only). --vs-llama-cpp builds llama-cpp-python from source (tools/llama_cpp.sh, about five
minutes on two cores) when it is not installed.

The model (issue 11): 8 layers, width 2048, 16 heads, 4 KV heads, FFN 5632, vocabulary 32000, an
untied LM head, random weights written by pyggml.gguf.save (pyggml.demo.write_random_llama; the
files are kept in --dir and reused). --arch runs the same sizes as other architectures
(pyggml.demo.write_random_model, ARCHS below; the HF column is llama's only). The engines run in turn: each prefills the prompt (the
order rotates from run to run), then they decode one token each in turn, `--tg` rounds, with a
streaming read of pyggml's weights in every round; `--reps` runs. The machine is shared, so what
to read are the ratios of times taken side by side: pg/llama.cpp is llama.cpp's time over
pyggml's (> 1: pyggml is faster) run by run for prefill and step by step for decode, given as the
median and quartiles, whose spread says how noisy the run was; tokens/s are from median times.
All times are wall times of the Python calls: the prompt's eval, then per decode step the eval of
one token and the argmax of its logits (llama-cpp-python's Llama.eval; pyggml's Model._step, what
Model.eval and generate run per token).

Weight-stream limit: the bytes a decode step reads (Model.weight_bytes: every weight but the
embedding table) over the read bandwidth of a streaming pass over those same weights
(pyggml._vec.stream_read_f32 on the same threads, one pass before each decode round; the ratio pass by pass, median and quartiles).
Python work: a decode step's wall time minus CGraph.run_seconds (the C parallel region), median.
Mixture-of-experts models (--arch qwen3moe) keep their router's choices (ffn_moe_topk-<il>) and a note
gives the bytes a decode step reads by them (Model.step_read_bytes: the dense weights plus the chosen
experts' matrices, median over the steps) against all the weights the weight-stream limit reads.
"""
import argparse
import gc
import os
import sys
import time

import numpy as np

import pyggml as gg
from pyggml import models
from pyggml.demo import read_seconds, write_random_llama, write_random_model

sys.path.insert(0, os.path.dirname(__file__))
from common import machine

MODEL = {"n_layer": 8, "n_embd": 2048, "n_head": 16, "n_head_kv": 4, "n_ff": 5632, "n_vocab": 32000}
# --arch: MODEL's sizes as each architecture's GGUF keys, plus what it needs beyond them (gemma's
# window longer than the benchmark's context: the same work as llama's; phi3's fused QKV; qwen3moe's
# experts)
KEYS = {"block_count": 8, "embedding_length": 2048, "attention.head_count": 16, "attention.head_count_kv": 4,
        "feed_forward_length": 5632, "vocab_size": 32000, "context_length": 4096,
        "attention.layer_norm_rms_epsilon": 1e-5}
ARCHS = {"llama": ({}, ()), "qwen2": ({}, ()), "qwen3": ({}, ()), "gemma2": ({}, ()), "gemma3": ({}, ()),
         "phi3": ({"rope.dimension_count": 128}, ("attn_qkv.weight",)),
         # Qwen3-30B-A3B's proportions at this width (issue 28): 64 experts of FFN 768, 8 chosen per token
         "qwen3moe": ({"expert_count": 64, "expert_used_count": 8, "expert_feed_forward_length": 768}, ())}


# --types: llama.cpp's file types (LLAMA_FTYPE_MOSTLY_<name>); pyggml's own writer makes the first three
TYPES = ["f16", "q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k", "iq4_nl"]
PYGGML_WRITES = ["f16", "q8_0", "q4_k_m"]


def model_path(directory, typ, quantizer, arch="llama"):
    """The benchmark model of `arch` and `typ`, written once and kept in `directory`: F16 by pyggml
    (the same seeded weights for every type), the other types quantized from it by `quantizer`."""
    if typ == "f16" or quantizer == "pyggml":
        path = os.path.join(directory, f"bench-{arch}-8x2048-{typ}.gguf")
        if not os.path.exists(path):
            print(f"writing {path} ...", file=sys.stderr)
            if arch == "llama":
                write_random_llama(path, **MODEL, type=typ, seed=0)
            else:
                keys, optional = ARCHS[arch]
                write_random_model(path, arch, {**KEYS, **keys}, type=typ, seed=0, optional=optional)
        return path
    path = os.path.join(directory, f"bench-{arch}-8x2048-{typ}-llama-quantize.gguf")
    if not os.path.exists(path):
        llama_quantize(model_path(directory, "f16", quantizer, arch), path, typ)
    return path


def llama_quantize(src, dst, typ):
    """Quantize the GGUF `src` to `dst` with llama.cpp's llama_model_quantize (its default recipe
    for the file type: which tensors get Q6_K in Q4_K_M, the output tensor's type, ...)."""
    import llama_cpp
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{typ.upper()}")
    params.nthread = os.cpu_count() or 1
    print(f"quantizing {src} to {typ} with llama.cpp ...", file=sys.stderr)
    tmp = dst + ".part"
    if llama_cpp.llama_model_quantize(src.encode(), tmp.encode(), params) != 0:
        raise SystemExit(f"llama.cpp's quantizer failed on {src} -> {typ}")
    os.replace(tmp, dst)


def find_llama_cpp():
    """Import llama_cpp, building llama-cpp-python from source (tools/llama_cpp.sh) when it is missing."""
    try:
        import llama_cpp
    except ImportError:
        import subprocess
        script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools", "llama_cpp.sh")
        print("llama-cpp-python is not installed: building it from source (tools/llama_cpp.sh) ...", file=sys.stderr)
        subprocess.run(["bash", script], check=True, stdout=sys.stderr)
        import llama_cpp  # noqa: F401


def int_list(text):
    return [int(x) for x in text.replace(",", " ").split()]


def arch_list(text):
    archs = text.replace(",", " ").split()
    bad = [a for a in archs if a not in ARCHS]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown architecture {bad[0]!r}: expected some of {','.join(ARCHS)}")
    return archs


def type_list(text):
    types = text.replace(",", " ").split()
    bad = [t for t in types if t not in TYPES]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown type {bad[0]!r}: expected some of {','.join(TYPES)}")
    return types


# ---- pyggml ----

class PyggmlRun:
    def __init__(self, path, nth, ctx, mmap=True):
        self.m = models.load(path, n_ctx=ctx, n_threads=nth, mmap=mmap)
        self.moe = getattr(self.m.hparams, "n_expert", 0) > 0
        if self.moe:            # the router's choices kept, for the bytes each decode step read
            keep = [f"ffn_moe_topk-{il}" for il in range(self.m.hparams.n_layer)]
            self.m = models.load(path, n_ctx=ctx, n_threads=nth, keep=keep, mmap=mmap)
        self.nth = nth
        self.x, self.pos = np.zeros(1, np.int32), np.zeros((1, 1), np.int32)
        self.step_bytes = []    # MoE: Model.step_read_bytes() of each decode step

    def pp(self, prompt):
        self.m.reset()
        t0 = time.perf_counter()
        logits = self.m.eval(prompt, logits="last")
        return time.perf_counter() - t0, int(np.argmax(logits[0]))

    def step(self, tok):
        """One decode step as Model.eval/generate run it (Model._step) and the argmax of its
        logits; returns (seconds, next id, seconds in the C parallel region)."""
        m = self.m
        t0 = time.perf_counter()
        self.x[0], self.pos[:] = tok, m.n_past
        nxt = int(np.argmax(m._step(self.x, self.pos, 1)[0]))
        dt = time.perf_counter() - t0
        if self.moe:
            self.step_bytes.append(m.step_read_bytes())
        return dt, nxt, m.last_graph.run_seconds


# ---- llama.cpp ----

class LlamaCppRun:
    def __init__(self, path, nth, ctx, mmap=True):
        import llama_cpp
        self.lc = llama_cpp
        self.llm = llama_cpp.Llama(path, n_ctx=ctx, n_batch=512, n_ubatch=512, n_threads=nth, n_threads_batch=nth,
                                   flash_attn=True, verbose=False, use_mmap=mmap)

    def pp(self, prompt):
        self.llm.reset()
        t0 = time.perf_counter()
        self.llm.eval(prompt)
        return time.perf_counter() - t0, int(np.argmax(self.logits_last()))

    def logits_last(self):
        """The last evaluated token's logits, read from llama.cpp's buffer (without logits_all,
        llama-cpp-python does not keep them in Llama.scores)."""
        ptr = self.lc.llama_get_logits_ith(self.llm.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.llm.n_vocab(),))

    def step(self, tok):
        """One decode step and the argmax; returns (seconds, next id, top-2 logit margin)."""
        t0 = time.perf_counter()
        self.llm.eval([tok])
        lg = self.logits_last()
        nxt = int(np.argmax(lg))
        dt = time.perf_counter() - t0
        top = np.partition(lg, -2)[-2:]
        return dt, nxt, float(top[1] - top[0])


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
        hp = models.read_hparams(gg.gguf.load(path))
        cfg = transformers.LlamaConfig(vocab_size=hp.n_vocab, hidden_size=hp.n_embd,
                                       intermediate_size=hp.n_ff, num_hidden_layers=hp.n_layer,
                                       num_attention_heads=hp.n_head, num_key_value_heads=hp.n_head_kv,
                                       rms_norm_eps=hp.rms_eps, max_position_embeddings=ctx,
                                       rope_parameters={"rope_type": "default", "rope_theta": hp.rope.freq_base},
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

    def step(self, tok):
        torch = self.torch
        with torch.no_grad():
            t0 = time.perf_counter()
            out = self.model(torch.tensor([[tok]]), cache=self.cache, use_cache=True)
            nxt = int(out.logits[0, -1].argmax())
            dt = time.perf_counter() - t0
        self.cache = out.cache if hasattr(out, "cache") else out.past_key_values
        return dt, nxt, None


def first_difference(a, b):
    return next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))


def quartiles(x):
    return np.percentile(np.asarray(x), [25, 50, 75])


def bench(path, typ, nth, args, prompt, rows, notes, hf=True):
    engines = {"pyggml": PyggmlRun(path, nth, args.ctx, not args.no_mmap)}
    if not args.no_llama_cpp:
        try:
            engines["llama.cpp"] = LlamaCppRun(path, nth, args.ctx, not args.no_mmap)
        except ImportError:
            notes.append("llama-cpp-python is not installed: no llama.cpp column (pip install llama-cpp-python)")
            args.no_llama_cpp = True
    if hf and not args.no_hf and nth in args.hf_threads:
        try:
            engines["HF"] = HFRun(path, nth, args.ctx)
        except ImportError:
            notes.append("torch/transformers are not installed: no HF column")
            args.no_hf = True
    names = list(engines)
    pp = {e: [] for e in names}
    tg = {e: [] for e in names}
    c_time, reads, margins, ids = [], [], [], {}
    for e in names:             # untimed: first touch of the mapped weights, graphs and buffers made
        engines[e].step(engines[e].pp(prompt)[1])
    for rep in range(args.reps):
        order = names[rep % len(names):] + names[:rep % len(names)]     # who goes first rotates
        tok = {}
        for e in order:
            t, tok[e] = engines[e].pp(prompt)
            pp[e].append(t)
        ids = {e: [tok[e]] for e in names}
        for _ in range(args.tg):
            # one step of every engine in turn, and a streaming read of pyggml's weights, so that
            # the times compared were taken within a fraction of a second of each other
            reads.append(read_seconds(engines["pyggml"].m, nth, repeat=1))
            for e in order:
                dt, tok[e], extra = engines[e].step(tok[e])
                tg[e].append(dt)
                ids[e].append(tok[e])
                if e == "pyggml":
                    c_time.append(extra)
                elif e == "llama.cpp":
                    margins.append(extra)
        print(f"  {typ} {nth} threads: run {rep + 1} of {args.reps} done", file=sys.stderr)
    pp = {e: np.array(v) for e, v in pp.items()}
    tg = {e: np.array(v) for e, v in tg.items()}
    steps, reads, c_time = tg["pyggml"], np.array(reads), np.array(c_time)
    x = {"pp": {e: len(prompt) / np.median(v) for e, v in pp.items()},
         "tg": {e: 1.0 / np.median(v) for e, v in tg.items()},
         "stream": quartiles(reads / steps), "read": float(np.median(reads)), "bytes": engines["pyggml"].m.weight_bytes,
         "py_work": float(np.median(steps - c_time)), "c_time": float(np.median(c_time))}
    if "llama.cpp" in engines:
        # pyggml's speed over llama.cpp's, run by run (pp) and step by step (tg): quartiles
        x["pp_ratio"] = quartiles(pp["llama.cpp"] / pp["pyggml"])
        x["tg_ratio"] = quartiles(tg["llama.cpp"] / steps)
    rows.append((typ, nth, x))
    if engines["pyggml"].moe:
        notes.append(moe_note(typ, nth, engines["pyggml"], x))
    last = args.tg + 1          # the ids of the last run
    if "llama.cpp" in ids:
        a, b = ids["pyggml"][-last:], ids["llama.cpp"][-last:]
        same = first_difference(a, b)
        msg = f"{typ} {nth} threads: greedy tokens of pyggml and llama.cpp equal for {same} of {len(a)}"
        if same < len(a):
            m = margins[-args.tg:][same - 1] if same > 0 else float("nan")
            msg += f"; at the first difference llama.cpp's top-2 logit margin is {m:.2e}"
        notes.append(msg)
    if "HF" in ids:
        same = first_difference(ids["pyggml"][-last:], ids["HF"][-last:])
        notes.append(f"{typ} {nth} threads: greedy tokens of pyggml and HF (float32) equal for {same} of {last}")
    del engines
    gc.collect()


def moe_note(typ, nth, run, x):
    """A MoE model's decode bytes: what its steps read by their router choices (Model.step_read_bytes:
    the dense weights and the chosen experts' matrices), median over the steps, against all its weights
    (what the weight-stream limit reads), and the limit at those bytes."""
    b = {k: float(np.median([s[k] for s in run.step_bytes])) for k in ("dense", "experts", "total")}
    return (f"{typ} {nth} threads: a decode step reads {b['total'] / 1e9:.3f} GB by its router's choices (median of "
            f"{len(run.step_bytes)} steps: dense {b['dense'] / 1e9:.3f} GB + chosen experts {b['experts'] / 1e9:.3f} "
            f"GB) of the {x['bytes'] / 1e9:.3f} GB of weights; at the streaming read rate "
            f"{x['bytes'] / b['total'] / x['read']:.2f} tok/s")


def cell(q):
    """median [25%-75%] of a ratio's quartiles."""
    return f"{q[1]:.2f} [{q[0]:.2f}-{q[2]:.2f}]"


def row_text(typ, nth, x, engines):
    """The table row of one (type, threads) result."""
    cells = [f"{x['pp'][e]:.1f}" if e in x["pp"] else "-" for e in engines]
    cells += [f"{x['tg'][e]:.2f}" if e in x["tg"] else "-" for e in engines]
    r = (cell(x["pp_ratio"]), cell(x["tg_ratio"])) if "pp_ratio" in x else ("-", "-")
    # the limit: tokens/s if a decode step took one streaming read of its weights (the read
    # passes alternated with the steps; the ratio is taken pass by pass)
    return (f"| {typ.upper()} | {nth} | " + " | ".join(cells) + f" | {r[0]} | {r[1]} | "
            f"{1.0 / x['read']:.2f} tok/s ({x['bytes'] / 1e9:.2f} GB) | {cell(x['stream'])} | "
            f"{x['py_work'] * 1e6:.0f} us = {x['py_work'] / x['c_time']:.2%} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", type=arch_list, default=["llama"], help=f"comma-separated: {','.join(ARCHS)}")
    ap.add_argument("--types", type=type_list, default=["f16", "q8_0"], help=f"comma-separated: {','.join(TYPES)}")
    ap.add_argument("--threads", type=int_list, default=[1, 2], help="comma-separated thread counts")
    ap.add_argument("--hf-threads", type=int_list, default=[1, 2], help="thread counts HF runs at")
    ap.add_argument("--quantizer", choices=["llama.cpp", "pyggml"], default="llama.cpp",
                    help="who quantizes the files (pyggml: f16, q8_0 and q4_k_m only)")
    ap.add_argument("--vs-llama-cpp", action="store_true",
                    help="require the llama.cpp column: build llama-cpp-python from source if it is missing")
    ap.add_argument("--pp", type=int, default=128)
    ap.add_argument("--tg", type=int, default=64)
    ap.add_argument("--reps", type=int, default=2, help="runs (prefill, then --tg decode rounds)")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "pyggml-bench"))
    ap.add_argument("--no-llama-cpp", action="store_true")
    ap.add_argument("--no-hf", action="store_true")
    ap.add_argument("--no-mmap", action="store_true",
                    help="pyggml and llama.cpp read the file into memory instead of mapping it (both engines' "
                         "--no-mmap); the weight-stream limit then reads pyggml's copy")
    args = ap.parse_args()
    if args.vs_llama_cpp and args.no_llama_cpp:
        ap.error("--vs-llama-cpp and --no-llama-cpp contradict each other")
    if args.quantizer == "pyggml" and set(args.types) - {"f16", "q8_0"} and args.arch != ["llama"]:
        ap.error("--quantizer pyggml writes only f16 and q8_0 for architectures other than llama")
    if args.quantizer == "pyggml" and set(args.types) - set(PYGGML_WRITES):
        ap.error(f"--quantizer pyggml writes only {','.join(PYGGML_WRITES)}")
    if args.vs_llama_cpp or (args.quantizer == "llama.cpp" and set(args.types) != {"f16"}):
        find_llama_cpp()
    os.makedirs(args.dir, exist_ok=True)
    info = gg.build_info()
    print(f"machine: {machine()}; pyggml {info['version']} {info['simd']}, openmp={info['openmp']}"
          + ("; weights read into memory (--no-mmap)" if args.no_mmap else ""))
    prompt = np.random.default_rng(1).integers(3, MODEL["n_vocab"], args.pp).tolist()
    rows, notes = [], []
    for arch in args.arch:
        for typ in args.types:
            path = model_path(args.dir, typ, args.quantizer, arch)
            label = typ if arch == "llama" else f"{arch} {typ}"
            for nth in args.threads:
                bench(path, label, nth, args, prompt, rows, notes, hf=arch == "llama")
                print(row_text(*rows[-1], list(rows[-1][2]["pp"])), file=sys.stderr)     # so far
    engines = ["pyggml"] + ([] if args.no_llama_cpp else ["llama.cpp"]) + ([] if args.no_hf else ["HF"])
    print(f"\ntokens/s from median times; pg/llama.cpp: speed ratio run by run (pp{args.pp}) and step by step "
          f"(tg), median [quartiles]")
    print("\n| model | threads | " + " | ".join(f"{e} pp{args.pp}" for e in engines) + " | "
          + " | ".join(f"{e} tg" for e in engines) + " | pg/llama.cpp pp | pg/llama.cpp tg |"
          " weight-stream limit | pg tg / limit | Python work / step |")
    print("|" + "---|" * (2 * len(engines) + 7))
    for typ, nth, x in rows:
        print(row_text(typ, nth, x, engines))
    print()
    for n in notes:
        print(f"- {n}")


if __name__ == "__main__":
    main()
