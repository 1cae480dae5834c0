"""pyggml convert against llama.cpp's convert_hf_to_gguf.py on the same Hugging Face folder (a random
model of tests/hf_models.py with a sentencepiece vocabulary): the same metadata (keys, order, values,
types) and the same tensors (names, order, types, bytes) for F32, F16 and Q8_0, for the architectures
and RoPE scalings of issue 27 (qwen3, Llama 3 rope_freqs, qwen2 yarn); then pyggml's qwen3 on
llama.cpp's own file against llama.cpp. Marked llama_cpp: run with pytest -m llama_cpp."""
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

from hf_models import assert_same_gguf, hf_model, spm_tokenizer

import pyggml as gg
from pyggml import gguf, models
from pyggml.convert import convert_hf

pytestmark = [pytest.mark.slow, pytest.mark.llama_cpp]

N_VOCAB = 320


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """kind -> a saved HF folder (model and tokenizer.model), made once."""
    base = tmp_path_factory.mktemp("hf")
    out = {}
    for kind in ("qwen3", "llama3", "qwen2-yarn"):
        d = base / kind
        hf_model(kind, vocab_size=N_VOCAB).save_pretrained(d)
        spm_tokenizer(d, vocab_size=N_VOCAB)
        out[kind] = d
    return out


def llama_cpp_convert(src, folder, out, outtype):
    env = dict(os.environ, PYTHONPATH=str(src / "gguf-py"))
    r = subprocess.run([sys.executable, str(src / "convert_hf_to_gguf.py"), str(folder), "--outfile", str(out),
                        "--outtype", outtype], env=env, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


@pytest.mark.parametrize("kind, outtype", [("qwen3", "f32"), ("qwen3", "f16"), ("qwen3", "q8_0"),
                                           ("llama3", "f16"), ("qwen2-yarn", "q8_0")])
def test_same_file_as_llama_cpp(llama_cpp_src, folders, tmp_path, kind, outtype):
    ref = gguf.load(llama_cpp_convert(llama_cpp_src, folders[kind], tmp_path / "ref.gguf", outtype))
    convert_hf(folders[kind], tmp_path / "got.gguf", outtype=outtype)
    got = gguf.load(tmp_path / "got.gguf")
    assert_same_gguf(got, ref)


def test_qwen3_on_llama_cpps_file(llama_cpp_src, folders, tmp_path):
    """pyggml's qwen3 graph on the file llama.cpp's converter wrote, against llama.cpp on that file:
    F32 weights and cache, llama.cpp without flash attention (its flash path rounds K/V to F16)."""
    llama_cpp = pytest.importorskip("llama_cpp")
    path = llama_cpp_convert(llama_cpp_src, folders["qwen3"], tmp_path / "qwen3.gguf", "f32")
    ids = np.random.default_rng(0).integers(3, N_VOCAB, 15).tolist()
    llm = llama_cpp.Llama(str(path), n_ctx=64, n_batch=64, logits_all=True, type_k=0, type_v=0,
                          flash_attn=False, n_threads=1, verbose=False)
    llm.eval(ids[:7])
    for t in ids[7:]:
        llm.eval([t])
    ref = np.array(llm.scores[:len(ids)], dtype=np.float64)
    for flash_attn in (True, False):
        m = models.load(path, n_ctx=64, kv_type=gg.Type.F32, flash_attn=flash_attn)
        assert m.arch == "qwen3"
        got = np.concatenate([m.eval(ids[:7])] + [m.eval([t]) for t in ids[7:]])
        err = float((np.abs(got - ref).max(axis=-1) / np.abs(ref).max(axis=-1)).max())
        assert err < 1e-4, (flash_attn, err)
