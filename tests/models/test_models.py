"""pyggml.models end to end: small random transformers models (tests/hf_models.py) converted by
pyggml.convert, loaded with models.load and run as a prefill of 7 tokens then 8 decode steps,
against the HF model's logits over the whole sequence; both attention forms (flash_attn_ext, and
mul_mat + soft_max_ext over a transposed V), graph reuse, layer ranges, explicit M-RoPE positions,
generation and the errors."""
import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

from conftest import EMULATED
from hf_models import (
    KINDS,
    converted,
    hf_config,
    hf_logits,
    hf_model,
    prefill_then_decode,
    random_ids,
    rel_err,
)

import pyggml as gg
from pyggml import models

N_PREFILL, N_DECODE = 7, 8
# max |logit - HF| / max |HF logit| of each token. F32 weights and cache: float32 rounding only.
# F16 weights and F16 cache round weights, activations before each mul_mat and K/V to fp16 (ggml's
# F16 dot), about 1e-3 on these models; the bound leaves a factor of ~10.
BOUNDS = {"f32": 1e-4, "f16": 1e-2}
KV = {"f32": gg.Type.F32, "f16": gg.Type.F16}


@pytest.fixture(scope="module")
def gguf_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


@pytest.mark.parametrize("flash_attn", [True, False])
@pytest.mark.parametrize("outtype", ["f32", "f16"] if not EMULATED else ["f16"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_logits_match_hf(gguf_dir, kind, outtype, flash_attn):
    ids = random_ids(N_PREFILL + N_DECODE)
    ref = hf_logits(kind, ids)
    m = models.load(converted(kind, outtype, gguf_dir), n_ctx=64, n_threads=2, kv_type=KV[outtype],
                    flash_attn=flash_attn)
    assert (m.arch, m.n_vocab, m.n_ctx) == (KINDS[kind][0], 128, 64)
    got = prefill_then_decode(m, ids, N_PREFILL)
    assert got.shape == (len(ids), 128) and got.dtype == np.float32
    assert rel_err(got, ref) < BOUNDS[outtype]
    if outtype == "f32":      # a wrong RoPE mode, bias or norm would be far off: the bound means something
        assert rel_err(got, ref) < 1e-5


@pytest.mark.parametrize("nth", [1, 2])
def test_q8_0_and_threads(gguf_dir, nth):
    ids = random_ids(N_PREFILL + N_DECODE)
    ref = hf_logits("llama-gqa", ids)
    m = models.load(converted("llama-gqa", "q8_0", gguf_dir), n_ctx=32, n_threads=nth)
    # Q8_0 weights (n_ff = 80 rows stay F16) with activations quantised to Q8_0: ~1e-2
    assert rel_err(prefill_then_decode(m, ids, N_PREFILL), ref) < 5e-2


def test_llama3_rope_freqs(gguf_dir, tmp_path):
    """llama3 RoPE scaling: the converter's rope_freqs.weight divides the angles (rope_ext's c); the
    original context 8192 is where llama.cpp's converter takes it from (the config's top level, else 8192)."""
    from pyggml.convert import convert_hf
    rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    import transformers
    cfg = hf_config("llama-gqa")
    cfg.rope_parameters = rope
    model = transformers.LlamaForCausalLM(cfg).eval()
    model.load_state_dict(hf_model("llama-gqa").state_dict())
    convert_hf(model, tmp_path / "m.gguf", "f32")
    m = models.load(tmp_path / "m.gguf", n_ctx=32, kv_type=gg.Type.F32)
    assert m.weight("rope_freqs.weight", required=False) is not None
    ids = random_ids(N_PREFILL + N_DECODE)
    assert rel_err(prefill_then_decode(m, ids, N_PREFILL), hf_logits(model, ids)) < 1e-5


def test_logits_last_and_chunks(gguf_dir):
    ids = random_ids(20)
    path = converted("qwen2", "f32", gguf_dir)
    full = models.load(path, n_ctx=64, kv_type=gg.Type.F32).eval(ids)
    m = models.load(path, n_ctx=64, kv_type=gg.Type.F32, n_batch=6)     # 4 chunks: 6, 6, 6, 2
    np.testing.assert_allclose(m.eval(ids), full, rtol=0, atol=1e-5 * np.abs(full).max())
    m.reset()
    last = m.eval(ids, logits="last")
    assert last.shape == (1, 128)
    np.testing.assert_allclose(last[0], full[-1], rtol=0, atol=1e-5 * np.abs(full).max())


@pytest.mark.parametrize("flash_attn", [True, False])
def test_decode_graph_is_reused_until_a_padding_step(gguf_dir, flash_attn):
    m = models.load(converted("llama-gqa", "f16", gguf_dir), n_ctx=40, kv_pad=16, flash_attn=flash_attn)
    m.eval(random_ids(5))
    graphs = []
    for t in random_ids(30, seed=1):
        m.eval([t])
        graphs.append(m.last_graph)
    # cells 6..16 attend n_kv = 16, 17..32 n_kv = 32, 33..35 n_kv = 40 (n_ctx)
    assert all(g is graphs[0] for g in graphs[:11]) and graphs[11] is not graphs[10]
    assert all(g is graphs[11] for g in graphs[11:27]) and graphs[27] is not graphs[26]
    assert all(g is graphs[27] for g in graphs[27:])
    assert m.n_graph_builds == 4          # prefill, then one decode graph per padding step
    n = m.graph_for(1, 1)
    assert n.graph is graphs[-1] and n.kv.n_kv == 40


def test_reset_and_context_full(gguf_dir):
    m = models.load(converted("llama-mha-tied", "f32", gguf_dir), n_ctx=16, kv_type=gg.Type.F32)
    ids = random_ids(10)
    first = m.eval(ids)
    with pytest.raises(ValueError, match=r"Model.eval: 7 tokens do not fit in the context: 10 of n_ctx=16"):
        m.eval(random_ids(7))
    assert m.cache.n_used == 10 and m.n_past == 10          # nothing was appended
    m.reset()
    assert (m.cache.n_used, m.n_past) == (0, 0)
    np.testing.assert_array_equal(m.eval(ids), first)


def test_layer_ranges_chain_to_the_whole_model(gguf_dir):
    """Layers [0, 1) (token ids in, hidden states out) then [1, 2) (hidden in, logits out): the
    pipeline split of issue 17 gives the whole model's logits, prefill and decode."""
    path = converted("qwen2", "f32", gguf_dir)
    whole = models.load(path, n_ctx=32, kv_type=gg.Type.F32)
    a = models.load(path, n_ctx=32, kv_type=gg.Type.F32, layers=(0, 1))
    b = models.load(path, n_ctx=32, kv_type=gg.Type.F32, layers=(1, 2))
    assert not a.has_head and b.has_head and a.cache.n_layer == b.cache.n_layer == 1
    ids = random_ids(N_PREFILL + N_DECODE)
    h = a.eval(ids[:N_PREFILL])
    assert h.shape == (N_PREFILL, 64)
    got = [b.eval(h)] + [b.eval(a.eval([t])) for t in ids[N_PREFILL:]]
    ref = prefill_then_decode(whole, ids, N_PREFILL)
    np.testing.assert_allclose(np.concatenate(got), ref, rtol=0, atol=1e-6 * np.abs(ref).max())
    with pytest.raises(ValueError, match=r"hidden states \[n_tokens, 64\], got shape \(3,\)"):
        b.eval([1, 2, 3])
    with pytest.raises(ValueError, match="needs the whole model"):
        a.generate([1, 2], 3)


def test_mrope_explicit_positions(gguf_dir):
    """qwen2vl: text positions (all four rows equal) are the default; explicit t/h/w rows (a
    multimodal caller's) rotate each section with its own row, as HF's position_ids [3, 1, n]."""
    ids = random_ids(N_PREFILL + N_DECODE)
    n = len(ids)
    m = models.load(converted("qwen2vl", "f32", gguf_dir), n_ctx=32, kv_type=gg.Type.F32)
    default = m.eval(ids)
    m.reset()
    np.testing.assert_array_equal(m.eval(ids, positions=np.tile(np.arange(n), (4, 1))), default)
    m.reset()
    np.testing.assert_array_equal(m.eval(ids, positions=np.arange(n)), default)
    rng = np.random.default_rng(3)
    t = np.arange(n)
    hw = t + rng.integers(0, 5, (2, n))
    pos = np.stack([t, hw[0], hw[1], np.zeros(n, int)])
    ref = hf_logits("qwen2vl", ids, position_ids=pos[:3, None, :])
    m.reset()
    got = np.concatenate([m.eval(ids[:N_PREFILL], positions=pos[:, :N_PREFILL])] +
                         [m.eval([ids[i]], positions=pos[:, i:i + 1]) for i in range(N_PREFILL, n)])
    assert rel_err(got, ref) < 1e-5
    assert rel_err(default, ref) > 1e-3       # the h/w rows matter
    with pytest.raises(ValueError, match=r"positions must have shape \[15\] or \[4, 15\]"):
        m.eval(ids, positions=np.zeros((3, n)))


def test_generate_greedy_is_argmax_and_stops_at_eos(gguf_dir):
    path = converted("llama-gqa", "f32", gguf_dir)
    m = models.load(path, n_ctx=64, kv_type=gg.Type.F32)
    prompt = random_ids(5)
    ids = m.generate(prompt, 12, stop=())
    assert len(ids) == 12 and m.timings["decode_tokens"] == 11 and m.timings["prefill_tokens"] == 5
    # teacher-forced: each id is the argmax after the prompt and the ids before it
    m.reset()
    logits = m.eval(prompt + ids[:-1])
    assert ids == logits[len(prompt) - 1:].argmax(axis=1).tolist()
    # stop after the first id that is in `stop`, and at eos by default
    m.reset()
    assert m.generate(prompt, 12, stop=[ids[3]]) == ids[:ids.index(ids[3]) + 1]
    m.reset()
    eos = m.hparams.eos_id
    got = m.generate(prompt, 12)
    assert got == (ids[:ids.index(eos) + 1] if eos in ids else ids)
    assert m.generate(prompt, 0) == []


def test_generate_sampling_is_reproducible(gguf_dir):
    m = models.load(converted("qwen2", "f16", gguf_dir), n_ctx=64)
    runs = []
    for seed in (7, 7, 8):
        m.reset()
        runs.append(m.generate(random_ids(4), 16, temperature=1.5, top_k=40, top_p=0.95, seed=seed, stop=()))
    assert runs[0] == runs[1] and runs[0] != runs[2]


def test_errors(gguf_dir, tmp_path):
    path = converted("llama-gqa", "f32", gguf_dir)
    m = models.load(path, n_ctx=16)
    with pytest.raises(ValueError, match=r"Model.eval: token id 128 is out of range \[0, 128\)"):
        m.eval([1, 128])
    with pytest.raises(ValueError, match=r"Model.eval: token id -1 is out of range"):
        m.eval([-1])
    with pytest.raises(ValueError, match="logits must be 'all' or 'last', got 'first'"):
        m.eval([1], logits="first")
    with pytest.raises(ValueError, match="no tokens"):
        m.eval([])
    assert m.cache.n_used == 0
    with pytest.raises(ValueError, match=r"layers must be a range \(l0, l1\) with 0 <= l0 < l1 <= n_layer = 2"):
        models.load(path, layers=(1, 1))
    with pytest.raises(TypeError, match="a transposed V .* needs F32, F16 or BF16, got Q8_0"):
        models.load(path, kv_type=gg.Type.Q8_0, flash_attn=False)
    f = gg.gguf.load(path)
    hp = models.read_hparams(f)
    with pytest.raises(ValueError, match=r"unsupported architecture 'gpt2'; supported: llama, qwen2, qwen2vl, qwen3"):
        models.Model("gpt2", hp, f.tensors)
    tensors = dict(f.tensors)
    del tensors["blk.1.ffn_up.weight"]
    with pytest.raises(KeyError, match=r"tensor 'blk.1.ffn_up.weight' is missing \(architecture llama\)"):
        models.Model("llama", hp, tensors, source=path)
    tensors["blk.1.ffn_up.weight"] = f.tensors["blk.1.ffn_gate.weight"]
    with pytest.raises(ValueError, match=r"tensor 'blk.0.ffn_gate.weight' has ne=\(64, 80\), expected \(64, 96\)"):
        models.Model("llama", dataclasses.replace(hp, n_ff=96), tensors)
    with pytest.raises(TypeError, match="hparams must be a Qwen2HParams .*, got LlamaHParams"):
        models.Model("qwen2", hp, f.tensors)
    with pytest.raises(RuntimeError, match="has no tokenizer"):
        models.Model("llama", hp, f.tensors).generate("hello", 3)


def test_weight_bytes(gguf_dir):
    """Bytes a decode step reads: every layer's weights, the output norm and the LM head; the
    embedding table only when it is the LM head (tied), each tensor once."""
    for kind, n_kv_head in (("llama-gqa", 2), ("llama-mha-tied", 4)):
        m = models.load(converted(kind, "f16", gguf_dir))
        layer = 2 * (2 * 64 * 64 + 2 * 64 * n_kv_head * 16 + 3 * 64 * 80) + 2 * 4 * 64
        assert m.weight_bytes == 2 * layer + 4 * 64 + 2 * 64 * 128


def test_keep_an_intermediate(gguf_dir):
    """keep=(names): the nodes stay graph outputs with memory of their own, readable after a step.
    attn_norm-0 is rms_norm(embedding) * weight; without keep its block is reused by later nodes."""
    path = converted("llama-gqa", "f32", gguf_dir)
    ids = [1, 2, 3]
    x = models.load(path).weight("token_embd.weight").numpy()[ids].astype(np.float64)
    got = {}
    for keep in ((), ("attn_norm-0",)):
        m = models.load(path, n_ctx=16, kv_type=gg.Type.F32, keep=keep)
        m.eval(ids)
        got[keep] = m.last_graph.get_tensor("attn_norm-0").numpy()
    w = m.weight("blk.0.attn_norm.weight").numpy()
    expect = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + m.hparams.rms_eps) * w
    np.testing.assert_allclose(got["attn_norm-0",], expect, rtol=1e-5, atol=1e-6)
    assert np.abs(got[()] - expect).max() > 1e-3           # overwritten when not kept
    with pytest.raises(ValueError, match="keep: no tensor 'ffn_out-9'"):
        models.load(path, keep=("ffn_out-9",)).eval([1])


def test_tokenizer_is_built_on_first_use(gguf_dir, monkeypatch):
    """models.load does not build the tokenizer (seconds for a large vocabulary): Model.tokenizer
    does, once."""
    calls = []
    monkeypatch.setattr(gg.gguf.GGUFFile, "tokenizer", lambda self: calls.append(self.path) or "tok")
    m = models.load(converted("llama-gqa", "f16", gguf_dir))
    m.eval([1, 2])
    assert calls == []
    assert m.tokenizer == "tok" and m.tokenizer == "tok"
    assert len(calls) == 1
    m.tokenizer = None              # settable (pyggml.distributed's stages set it themselves)
    assert m.tokenizer is None
