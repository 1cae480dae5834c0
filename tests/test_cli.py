"""The pyggml command, run as a user runs it (a new Python process, outside the source folder):
help of every command, info, run with ids and with text, convert, demo, and bad arguments."""
import subprocess
import sys

import pytest

pytest.importorskip("gguf")
pytest.importorskip("torch")
pytest.importorskip("transformers")

from hf_models import bpe_tokenizer, converted, hf_model

from pyggml import models

pytestmark = pytest.mark.subprocess


def pyggml(*args, cwd):
    return subprocess.run([sys.executable, "-m", "pyggml", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, check=False, timeout=300)


@pytest.mark.parametrize("cmd", [[], ["run"], ["convert"], ["info"], ["demo"]])
def test_help(tmp_path, cmd):
    p = pyggml(*cmd, "--help", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("usage: pyggml" + "".join(" " + c for c in cmd))


def test_info(tmp_path):
    path = converted("qwen2", "f16", tmp_path)
    p = pyggml("info", path, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "simd: " in p.stdout and "openmp: " in p.stdout
    assert "qwen2, 27 tensors (16 F16, 11 F32)" in p.stdout and "n_head_kv: 2" in p.stdout


def test_run_tokens(tmp_path):
    path = converted("llama-gqa", "f16", tmp_path)
    p = pyggml("run", path, "--tokens", "1,5,9", "-n", 6, "-t", 1, "--ctx", 32, "--ignore-eos", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    expect = models.load(path, n_ctx=32, n_threads=1).generate([1, 5, 9], 6, stop=())
    assert p.stdout.split() == [str(t) for t in expect]
    assert "prefill: 3 tokens in" in p.stderr and "decode:  5 tokens in" in p.stderr
    assert p.stderr.count("tokens/s") == 2


def test_run_text_and_sampling(tmp_path):
    tok = bpe_tokenizer(tmp_path / "tok", vocab_size=300)
    from pyggml.convert import convert_hf
    convert_hf(hf_model("qwen2", vocab_size=320), tmp_path / "m.gguf", "f16", tokenizer=tok)
    m = models.load(tmp_path / "m.gguf", n_ctx=64)
    assert m.tokenizer is not None
    args = ["run", tmp_path / "m.gguf", "-p", "hello world", "-n", 8, "--temp", 0.8, "--top-k", 20, "--seed", 3,
            "--ignore-eos"]
    p = pyggml(*args, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    ids = m.generate(m.tokenize("hello world"), 8, temperature=0.8, top_k=20, seed=3, stop=())
    assert p.stdout == m.tokenizer.decode(ids) + "\n"
    assert pyggml(*args, cwd=tmp_path).stdout == p.stdout            # the seed reproduces
    ids_out = pyggml(*args, "--ids", cwd=tmp_path).stdout.split()
    assert ids_out == [str(t) for t in ids]


def test_convert_then_run(tmp_path):
    hf_model("llama-mha-tied").save_pretrained(tmp_path / "hf")
    p = pyggml("convert", tmp_path / "hf", "-o", tmp_path / "m.gguf", "--outtype", "q8_0", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert models.load(tmp_path / "m.gguf").arch == "llama"
    p = pyggml("run", tmp_path / "m.gguf", "--tokens", "3 4", "-n", 2, "--no-flash-attn", "--kv-type", "f32",
               cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.split()) in (1, 2)       # eos may come first


def test_demo(tmp_path):
    p = pyggml("demo", "--layers", 1, "--prefill", 8, "--decode", 8, "-t", 1, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert "prefill: 8 tokens" in out and "decode:  7 tokens" in out and "of the weight-stream limit" in out
    assert "check: decode logits against a batched prefill" in out


def test_bad_arguments(tmp_path):
    path = converted("llama-gqa", "f16", tmp_path)
    cases = [(["frobnicate"], "invalid choice: 'frobnicate'"),
             (["run", path], "one of the arguments -p/--prompt --tokens is required"),
             (["run", path, "--tokens", "1,x"], "--tokens: expected comma-separated integers"),
             (["run", path, "-p", "hi"], "has no usable tokenizer"),
             (["run", path, "--tokens", "1", "--kv-type", "q5"], "invalid choice: 'q5'")]
    for args, msg in cases:
        p = pyggml(*args, cwd=tmp_path)
        assert p.returncode == 2 and msg in p.stderr, (args, p.stderr)
