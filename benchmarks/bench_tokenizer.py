"""Encoding speed of pyggml.tokenizer against llama.cpp's tokenizer (llama-cpp-python, vocab_only) on
the same vocabulary and the same 1 MB text, in one run.

    PYGGML_LLAMA_CPP=<llama.cpp tree> python benchmarks/bench_tokenizer.py [--mb 1] [--repeat 3] [--text mix|stdlib]

Vocabularies: llama.cpp's ggml-vocab-{llama-bpe,llama-spm,qwen2}.gguf. Texts: "mix" mixes English
prose, code, digits, CJK, Cyrillic and emoji (fixed seed; a few hundred distinct words, repeated);
"stdlib" is Python's own standard library sources (English and code with tens of thousands of
distinct words). Both sides tokenize with add_special and parse_special on; the ids are checked
equal; the best of --repeat runs is reported (MB/s). pyggml's BPE word cache is emptied before each
run, so every run starts cold.
"""
import argparse
import os
import pathlib
import random
import time

import pyggml.gguf as G
from pyggml.tokenizer import Tokenizer, _collapse

VOCABS = ["llama-bpe", "llama-spm", "qwen2"]
_PIECES = ["The quick brown fox jumps over the lazy dog. ", "It's what they'd've said, isn't it? ",
           "def f(x):\n    return x ** 2  # square\n", "for (int i = 0; i < n; ++i) { s += a[i]; }\n",
           "1234567890 3.14159 2026-12-04 ", "Съешь же ещё этих мягких французских булок. ", "你好，世界！今天天气很好。",
           "日本語のテキスト。", "😀 👍🏽 👨‍👩‍👧 ", "   \t\n\n", "naïve café déjà vu — “quotes” ", "<html><body>x</body></html>\n"]


def make_text(mb, seed=0):
    rng = random.Random(seed)
    parts, size = [], 0
    while size < mb * 1_000_000:
        p = rng.choice(_PIECES)
        parts.append(p)
        size += len(p.encode())
    return "".join(parts)


def stdlib_text(mb):
    """The first `mb` MB of the standard library's .py files (sorted by path): real text, not a
    repeated sample."""
    parts, size = [], 0
    for path in sorted(pathlib.Path(os.__file__).parent.glob("*.py")):
        parts.append(path.read_text(encoding="utf-8", errors="replace"))
        size += len(parts[-1].encode())
        if size >= mb * 1_000_000:
            break
    return "".join(parts).encode()[:int(mb * 1_000_000)].decode("utf-8", "ignore")


def best_time(fn, repeat, before=None):
    best = float("inf")
    for _ in range(repeat):
        if before:
            before()
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--text", choices=["mix", "stdlib"], default="mix")
    args = ap.parse_args()
    import llama_cpp
    tree = pathlib.Path(os.environ.get("PYGGML_LLAMA_CPP", "vendor/llama.cpp"))
    text = make_text(args.mb) if args.text == "mix" else stdlib_text(args.mb)
    data = text.encode()
    mb = len(data) / 1e6
    print(f"text: {mb:.2f} MB, best of {args.repeat}")
    print(f"{'vocabulary':12s} {'tokens':>9s} {'llama.cpp MB/s':>15s} {'pyggml MB/s':>12s} {'ratio':>6s}")
    for name in VOCABS:
        path = tree / "models" / f"ggml-vocab-{name}.gguf"
        llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
        buf = (llama_cpp.llama_token * (len(data) + 16))()

        def ref(vocab=vocab, buf=buf):
            n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, len(data) + 16, True, True)
            return list(buf[:n])

        tok = Tokenizer(G.load(path).metadata)

        def ours(tok=tok):
            return tok.encode(text, add_special=True, parse_special=True)
        _collapse("warm up")                     # first use builds the Unicode tables
        t_ref, ids_ref = best_time(ref, args.repeat)
        t_ours, ids = best_time(ours, args.repeat, before=tok._word_ids.clear)
        same = "" if ids == ids_ref else "  IDS DIFFER"
        print(f"{name:12s} {len(ids):9d} {mb / t_ref:15.2f} {mb / t_ours:12.2f} {t_ref / t_ours:6.2f}{same}")


if __name__ == "__main__":
    main()
