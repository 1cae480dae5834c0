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


@pytest.mark.parametrize("cmd", [[], ["run"], ["convert"], ["info"], ["demo"], ["profile"]])
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


@pytest.mark.parametrize("load", [[], ["--no-mmap", "--no-repack"]])
def test_run_tokens(tmp_path, load):
    path = converted("llama-gqa", "f16", tmp_path)
    p = pyggml("run", path, "--tokens", "1,5,9", "-n", 6, "-t", 1, "--ctx", 32, "--ignore-eos", *load, cwd=tmp_path)
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


def test_run_with_dry_xtc_mirostat(tmp_path, chat_gguf):
    m = models.load(chat_gguf, n_ctx=64)
    ids = m.tokenize("hello world hello world")
    for opts, kw in [(["--mirostat", 2, "--mirostat-ent", 4.0, "--mirostat-lr", 0.2],
                      {"mirostat_mode": 2, "mirostat_tau": 4.0, "mirostat_eta": 0.2}),
                     (["--dry-multiplier", 2.0, "--dry-allowed-length", 1, "--dry-sequence-breaker", "o",
                       "--xtc-probability", 0.5, "--xtc-threshold", 0.05],
                      {"dry_multiplier": 2.0, "dry_allowed_length": 1, "dry_sequence_breakers": ["o"],
                       "xtc_probability": 0.5, "xtc_threshold": 0.05})]:
        p = pyggml("run", chat_gguf, "-p", "hello world hello world", "-n", 8, "--temp", 0.8, "--seed", 3,
                   "--ignore-eos", "--ids", *opts, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        m.reset()
        want = m.generate(ids, 8, temperature=0.8, seed=3, stop=(), **kw)
        assert p.stdout.split() == [str(t) for t in want]
    p = pyggml("run", chat_gguf, "--tokens", "1", "--mirostat", 3, cwd=tmp_path)
    assert p.returncode == 2 and "invalid choice: 3" in p.stderr


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


# ---- user errors: one line, exit status 2, a traceback only with --debug ----

@pytest.fixture(scope="module")
def chat_gguf(tmp_path_factory):
    from pyggml.convert import convert_hf
    d = tmp_path_factory.mktemp("chatcli")
    tok = bpe_tokenizer(d / "tok", vocab_size=300)
    convert_hf(hf_model("qwen2", vocab_size=320), d / "m.gguf", "f32", tokenizer=tok)
    return d / "m.gguf"


def test_user_errors_are_one_line(tmp_path, chat_gguf):
    (tmp_path / "text.txt").write_text("not a model")
    import numpy as np

    import pyggml.gguf as G
    G.save(tmp_path / "bert.gguf", {"w": np.zeros(4, np.float32)}, {"general.architecture": "bert"})
    cases = [(["run", tmp_path / "nope.gguf", "--tokens", "1"], "cannot open: No such file"),
             (["chat", tmp_path / "nope.gguf"], "cannot open: No such file"),
             (["info", tmp_path / "text.txt"], "not a GGUF file"),
             (["profile", tmp_path / "text.txt"], "not a GGUF file"),
             (["run", tmp_path / "bert.gguf", "--tokens", "1"], "bert"),
             (["run", chat_gguf, "--tokens", "1", "--ctx", "0"], "n_ctx and n_batch must be > 0"),
             (["run", chat_gguf, "--tokens", "1", "--top-p", "2"], "top_p must be in (0, 1]"),
             (["run", chat_gguf, "--tokens", "1," * 40, "--ctx", "16"], "the prompt is 40 tokens, more than the context"),
             (["run", chat_gguf, "-p", ""], "the prompt is empty"),
             (["run", chat_gguf, "--tokens", "1", "--threads", "x"], "argument -t/--threads: invalid int value"),
             (["chat", chat_gguf, "--temp", "nan"], "temperature must be finite"),
             (["convert", tmp_path / "nodir", "-o", tmp_path / "x.gguf"], "has no config.json"),
             (["demo", "--layers", "0"], "error: ")]
    for args, msg in cases:
        p = pyggml(*args, cwd=tmp_path)
        cmd = args[0]
        assert p.returncode == 2, (args, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert lines[-1].startswith(f"pyggml {cmd}: error: ") and msg in lines[-1], (args, p.stderr)
        assert "Traceback" not in p.stderr and len(lines) == 1, (args, p.stderr)
    p = pyggml("run", tmp_path / "nope.gguf", "--tokens", "1", "--debug", cwd=tmp_path)
    assert p.returncode == 1 and "Traceback" in p.stderr and "GGUFError" in p.stderr


# ---- pyggml chat ----

def test_chat_piped(tmp_path, chat_gguf):
    script = "hello world\nthis is a test\n/stats\n/system be brief\nhello world\n/reset\n/bogus\n"
    p = subprocess.run([sys.executable, "-m", "pyggml", "chat", str(chat_gguf), "--temp", "0", "-n", "6", "-t", "1",
                        "--ctx", "256"], input=script, capture_output=True, text=True, cwd=tmp_path, timeout=300,
                       check=False)
    assert p.returncode == 0, p.stderr
    m = models.load(chat_gguf, n_ctx=256, n_threads=1)
    kw = {"max_tokens": 6, "temperature": 0.0}
    h = [{"role": "user", "content": "hello world"}]
    a1 = m.create_chat_completion(h, **kw)["choices"][0]["message"]["content"]
    h += [{"role": "assistant", "content": a1}, {"role": "user", "content": "this is a test"}]
    a2 = m.create_chat_completion(h, **kw)["choices"][0]["message"]["content"]
    m.reset()
    a3 = m.create_chat_completion([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello world"}],
                                  **kw)["choices"][0]["message"]["content"]
    head = f"{a1}\n{a2}\n"                             # answers may hold line breaks: compare text
    assert p.stdout.startswith(head), p.stdout
    stats, rest = p.stdout[len(head):].split("\n", 1)
    assert stats.startswith("prefill: ") and "tokens/s; decode: " in stats
    n_full = len(m.tokenizer.encode(m.apply_chat_template(h)))
    prefilled = int(stats.split()[1])
    assert prefilled < n_full - 5                      # only the new turn was prefilled
    assert rest.startswith(f"(system message set; conversation reset)\n{a3}\n(conversation reset)\n"
                           "unknown command /bogus"), rest


@pytest.fixture(scope="module")
def slow_chat_gguf(tmp_path_factory):
    """A model whose prefill of a few thousand tokens takes seconds on one thread."""
    from pyggml.convert import convert_hf
    d = tmp_path_factory.mktemp("chatslow")
    tok = bpe_tokenizer(d / "tok", vocab_size=300)
    convert_hf(hf_model("qwen2", vocab_size=320, hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
                        max_position_embeddings=8192), d / "m.gguf", "f16", tokenizer=tok)
    return d / "m.gguf"


@pytest.mark.slow
def test_chat_ctrl_c_during_the_prefill(tmp_path, slow_chat_gguf):
    """SIGINT while a long message is prefilled: "(interrupted)", the message is dropped, and the next
    one is answered as if it had never been sent, with only its turn prefilled."""
    import os
    import pathlib
    import signal
    import time
    if not os.path.exists("/proc/self/stat"):
        pytest.skip("needs /proc to tell when the prefill runs")
    p = subprocess.Popen([sys.executable, "-m", "pyggml", "chat", str(slow_chat_gguf), "--temp", "0", "-n", "4",
                          "-t", "1", "--ctx", "8192"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        def cpu_s():                                   # the process's user + system time
            fields = pathlib.Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        p.stdin.write("hello world\n/stats\n")
        p.stdin.flush()
        first = []
        while not (first and first[-1].startswith("prefill: ")):
            first.append(p.stdout.readline())
        t0 = cpu_s()
        p.stdin.write("hello world " * 1000 + "\n")    # some 6000 tokens: seconds of prefill
        p.stdin.flush()
        end = time.time() + 60
        while cpu_s() < t0 + 0.5 and time.time() < end:  # the chat waits for input without using the CPU
            time.sleep(0.02)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate("this is a test\n/stats\n", timeout=120)
    finally:
        p.kill()
    assert p.returncode == 0 and "Traceback" not in err, err
    interrupted, answer, stats = out.rsplit("\n", 3)[:3]
    assert interrupted == "(interrupted)", out
    m = models.load(slow_chat_gguf, n_ctx=256, n_threads=1)
    kw = {"max_tokens": 4, "temperature": 0.0}
    h = [{"role": "user", "content": "hello world"}]
    h += [{"role": "assistant", "content": m.create_chat_completion(h, **kw)["choices"][0]["message"]["content"]},
          {"role": "user", "content": "this is a test"}]
    want = m.create_chat_completion(h, **kw)
    assert answer == want["choices"][0]["message"]["content"]
    assert stats.startswith("prefill: ") and int(stats.split()[1]) == m.timings["prefill_tokens"]


def test_chat_shows_a_terminal_no_control_characters(chat_gguf):
    """a model's text reaches a terminal with its control characters (escape sequences that would
    reprogram the terminal) as U+FFFD; a pipe gets the text as it is"""
    import argparse
    import io

    from pyggml import chat_cli

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    p = argparse.ArgumentParser()
    chat_cli.add_arguments(p)
    args = p.parse_args([str(chat_gguf), "--temp", "0", "-n", "40", "-t", "1", "--ctx", "256"])
    shown = {}
    for name, out in [("pipe", io.StringIO()), ("terminal", Terminal())]:
        assert chat_cli.main(args, stdin=io.StringIO("hello world\n"), out=out) == 0
        shown[name] = out.getvalue()
    controls = {chr(c) for c in [*range(9), 11, 12, *range(14, 32), *range(127, 160)]}
    assert controls & set(shown["pipe"]), "the random model's answer has no control characters to show"
    assert not controls & set(shown["terminal"])
    assert shown["terminal"] == shown["pipe"].translate(chat_cli._CONTROLS)


def tmux(*args):
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=False, timeout=30)


def test_chat_in_a_terminal(tmp_path, chat_gguf):
    import shutil
    import time
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    name = f"pyggml-chat-{tmp_path.name}"
    cmd = f"{sys.executable} -m pyggml chat {chat_gguf} --ctx 4096 -t 1 --seed 1; echo EXITED=$?; sleep 30"
    # -c: not the repository root, where `python -m pyggml` would find the uncompiled source folder first
    assert tmux("new-session", "-d", "-s", name, "-c", str(tmp_path), "-x", "200", "-y", "50", cmd).returncode == 0
    try:
        def screen():
            return tmux("capture-pane", "-p", "-t", name, "-S", "-200").stdout

        def wait_for(text, timeout=120):
            end = time.time() + timeout
            while time.time() < end:
                if text in screen():
                    return True
                time.sleep(0.2)
            return False
        assert wait_for("\n>"), screen()                      # the banner, then the prompt "> "
        assert "/reset" in screen()
        tmux("send-keys", "-t", name, "hello world", "Enter")
        end = time.time() + 120                               # until the answer has begun to stream
        while time.time() < end and not screen().split("hello world", 1)[-1].strip():
            time.sleep(0.1)
        tmux("send-keys", "-t", name, "C-c")                  # stops the answer, not the program
        time.sleep(1)
        tmux("send-keys", "-t", name, "/stats", "Enter")
        assert wait_for("prefill: "), screen()
        assert "EXITED" not in screen() and "Traceback" not in screen()
        tmux("send-keys", "-t", name, "C-d")
        assert wait_for("EXITED=0"), screen()
    finally:
        tmux("kill-session", "-t", name)
