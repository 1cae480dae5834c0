"""gemma2, gemma3 and phi3 end to end: small random transformers models (tests/hf_models.py,
KINDS_SWA) converted by pyggml.convert and run as a prefill then token-by-token decode, in both
attention forms, against the HF model's logits and greedy tokens. The sliding window (4 positions) is
shorter than the sequences, so a windowed layer that saw the whole context would be far off; Gemma 2's
soft caps and Gemma 3's two RoPE bases, Q/K norms and global layer are all in the logits. Then
(marked llama_cpp) each architecture on the file llama.cpp's own converter writes, against llama.cpp."""
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

from hf_models import (
    KINDS_SWA,
    converted,
    hf_logits,
    hf_model,
    prefill_then_decode,
    random_ids,
    rel_err,
    spm_tokenizer,
)

import pyggml as gg
from pyggml import models

N_PREFILL, N_DECODE = 7, 9
KV = {"f32": gg.Type.F32, "f16": gg.Type.F16}
# max |logit - HF| / max |HF logit| per token: F32 weights and cache round in float32 only; F16
# rounds weights, activations and K/V to fp16 (about 1e-3 per 2 layers), the bound leaves a factor
# of ~5-10 per 2 layers (Gemma 3's test model has 6)
BOUNDS = {"f32": 1e-5, "f16": 1e-2}


@pytest.fixture(scope="module")
def gguf_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("gemma_phi")


@pytest.mark.parametrize("flash_attn", [True, False])
@pytest.mark.parametrize("outtype", ["f32", "f16"])
@pytest.mark.parametrize("kind", list(KINDS_SWA))
def test_logits_match_hf(gguf_dir, kind, outtype, flash_attn):
    ids = random_ids(N_PREFILL + N_DECODE)
    ref = hf_logits(kind, ids)
    m = models.load(converted(kind, outtype, gguf_dir), n_ctx=64, n_threads=2, kv_type=KV[outtype],
                    flash_attn=flash_attn)
    assert (m.arch, m.n_vocab) == (KINDS_SWA[kind][0], 128)
    got = prefill_then_decode(m, ids, N_PREFILL)
    assert got.shape == (len(ids), 128)
    assert rel_err(got, ref) < BOUNDS[outtype] * m.hparams.n_layer / 2


@pytest.mark.parametrize("kind", list(KINDS_SWA))
def test_greedy_tokens_match_hf(gguf_dir, kind):
    """Greedy generation after a prompt longer than the window: HF's generate and Model.generate
    give the same tokens."""
    prompt = random_ids(6, seed=1)
    model = hf_model(kind)
    with torch.no_grad():
        want = model.generate(torch.tensor([prompt]), max_new_tokens=10, do_sample=False, eos_token_id=None,
                              pad_token_id=0)[0, len(prompt):].tolist()
    m = models.load(converted(kind, "f32", gguf_dir), n_ctx=64, n_threads=1, kv_type=gg.Type.F32)
    assert m.generate(prompt, 10, stop=()) == want


def test_the_window_matters(gguf_dir):
    """The same Gemma 2 file with the sliding window made larger than the sequence gives HF's logits
    for a model without a window, and not those of the windowed one: the mask is what differs."""
    ids = random_ids(N_PREFILL + N_DECODE)
    path = converted("gemma2", "f32", gguf_dir)
    m = models.load(path, n_ctx=64, kv_type=gg.Type.F32)
    assert m.hparams.n_swa == 4 and m.hparams.swa_layers == (True, False)
    windowed = prefill_then_decode(m, ids, N_PREFILL)
    wide = hf_logits("gemma2", ids, sliding_window=64)
    assert rel_err(windowed, wide) > 1e-2
    assert rel_err(windowed, hf_logits("gemma2", ids)) < 1e-5


def test_gemma3_layers_and_bases(gguf_dir):
    hp = models.load(converted("gemma3", "f32", gguf_dir), n_ctx=64).hparams
    assert hp.swa_layers == (True,) * 5 + (False,)
    assert (hp.rope.freq_base, hp.rope_swa.freq_base) == (1e6, 1e4)
    assert hp.q_scale == pytest.approx(0.25) and hp.final_softcap == 0.0 and hp.attn_softcap == 0.0


def test_phi3_long_and_short_factors(gguf_dir):
    """LongRoPE: the long factors when n_ctx exceeds the original context (8), as llama.cpp; HF picks
    them for sequences past 8 tokens, so a 16-token sequence matches HF with n_ctx 64, and a 7-token
    one matches HF (short factors) with n_ctx 8."""
    path = converted("phi3-longrope", "f32", gguf_dir)
    ids = random_ids(N_PREFILL + N_DECODE)
    long = models.load(path, n_ctx=64, kv_type=gg.Type.F32)
    assert long.hparams.rope.attn_factor == pytest.approx(np.sqrt(1 + np.log(32) / np.log(8)), rel=1e-6)
    assert rel_err(prefill_then_decode(long, ids, n_prefill=12), hf_logits("phi3-longrope", ids)) < 1e-5
    short = models.load(path, n_ctx=8, kv_type=gg.Type.F32)
    ids = ids[:7]
    assert rel_err(prefill_then_decode(short, ids, n_prefill=3), hf_logits("phi3-longrope", ids)) < 1e-5


@pytest.mark.slow
@pytest.mark.llama_cpp
@pytest.mark.parametrize("kind", list(KINDS_SWA))
def test_on_llama_cpps_file(llama_cpp_src, tmp_path, kind):
    """pyggml on the F32 file llama.cpp's converter writes, against llama.cpp on that file (F32 cache,
    llama.cpp without flash attention: its flash path rounds K/V to F16), prefill then decode. Gemma's
    bound is wider: ggml's CPU GELU reads an fp16 table (GGML_GELU_FP16), about 1e-3 off the formula
    pyggml and HF compute (pyggml is within 1e-5 of HF on these models, test_logits_match_hf)."""
    llama_cpp = pytest.importorskip("llama_cpp")
    pytest.importorskip("sentencepiece")
    d = tmp_path / "tiny"            # general.name: llama.cpp's vocabulary wants <|endoftext|> in one named phi3
    hf_model(kind, vocab_size=320).save_pretrained(d)
    spm_tokenizer(d, vocab_size=320)
    path = tmp_path / f"{kind}.gguf"
    env = {**os.environ, "PYTHONPATH": str(llama_cpp_src / "gguf-py")}
    subprocess.run([sys.executable, str(llama_cpp_src / "convert_hf_to_gguf.py"), str(d), "--outtype", "f32",
                    "--outfile", str(path)], env=env, check=True, capture_output=True)
    ids = random_ids(N_PREFILL + N_DECODE, n_vocab=320)
    llm = llama_cpp.Llama(str(path), n_ctx=64, n_batch=64, logits_all=True, type_k=0, type_v=0,
                          flash_attn=False, n_threads=1, verbose=False)
    llm.eval(ids[:N_PREFILL])
    for t in ids[N_PREFILL:]:
        llm.eval([t])
    ref = np.array(llm.scores[:len(ids)], dtype=np.float64)
    for flash_attn in (True, False):
        m = models.load(path, n_ctx=64, kv_type=gg.Type.F32, flash_attn=flash_attn)
        assert rel_err(prefill_then_decode(m, ids, N_PREFILL), ref) < (3e-3 if kind.startswith("gemma") else 1e-4), flash_attn
