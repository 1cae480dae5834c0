"""pyggml.convert: small random transformers models converted to GGUF, checked against the layout
llama.cpp's convert_hf_to_gguf.py writes (tensor names, order, shapes, types, metadata keys and
values, the Q/K permutation for RoPE NORMAL, the F16 fallback of Q8_0) and against the HF weights."""
import argparse
import json
import os

import numpy as np
import pytest

pytest.importorskip("gguf")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import gguf
from hf_models import KINDS, KINDS_SWA, bpe_tokenizer, converted, hf_model, llama_hf_tokenizer, spm_tokenizer

import pyggml as gg
import pyggml.convert as C
import pyggml.gguf as G
from pyggml import models

# what llama.cpp's converter names each HF tensor (TensorNameMap of the architecture)
HF_TO_GGUF = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
              "lm_head.weight": "output.weight"}
LAYER = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
         "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
         "self_attn.o_proj.weight": "attn_output.weight", "self_attn.q_proj.bias": "attn_q.bias",
         "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
         "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias",
         "post_attention_layernorm.weight": "ffn_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
         "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}


def gguf_name(hf):
    if hf in HF_TO_GGUF:
        return HF_TO_GGUF[hf]
    _, _, i, rest = hf.split(".", 3)
    return f"blk.{i}.{LAYER[rest]}"


def checkpoint(model):
    """The checkpoint's tensors as save_pretrained stores them (names of the text model, no tied
    lm_head, no vision tower), sorted by name as safetensors orders them."""
    sd = model.state_dict()
    out = {}
    for name, t in sd.items():
        name = name.replace("model.language_model.", "model.")
        if ".visual." in name or (name == "lm_head.weight" and model.config.tie_word_embeddings):
            continue
        out[name] = t.detach().float().numpy()
    return dict(sorted(out.items()))


def expected_type(name, shape, outtype):
    if len(shape) == 1 or not name.endswith(".weight"):
        return gg.Type.F32
    if outtype == "q8_0" and shape[-1] % 32:
        return gg.Type.F16
    return {"f32": gg.Type.F32, "f16": gg.Type.F16, "q8_0": gg.Type.Q8_0}[outtype]


def normal_rope_rows(w, n_head):
    """The rows as llama.cpp stores Q/K for RoPE NORMAL: within each head of d rows, HF's row i and
    its rotation partner i + d/2 become rows 2i and 2i + 1."""
    d = w.shape[0] // n_head
    return w[[h * d + (j // 2 if j % 2 == 0 else d // 2 + j // 2) for h in range(n_head) for j in range(d)]]


def expected_keys(arch, kind):
    a = arch
    keys = ["general.architecture", "general.type", "general.name", "general.size_label", f"{a}.block_count",
            f"{a}.context_length", f"{a}.embedding_length", f"{a}.feed_forward_length", f"{a}.attention.head_count",
            f"{a}.attention.head_count_kv"]
    rope = KINDS[kind][1].get("rope", {}).get("rope_type")
    if rope in ("linear", "yarn"):
        keys += [f"{a}.rope.scaling.type", f"{a}.rope.scaling.factor"]
    if rope == "yarn":
        keys.append(f"{a}.rope.scaling.original_context_length")
    if arch == "qwen2vl":
        keys.append(f"{a}.rope.dimension_sections")
    keys += [f"{a}.rope.freq_base", f"{a}.attention.layer_norm_rms_epsilon"]
    if arch in ("llama", "qwen3"):            # LlamaConfig.to_dict() has head_dim, Qwen2's has not
        keys += [f"{a}.attention.key_length", f"{a}.attention.value_length"]
    keys.append("general.file_type")
    if arch == "llama":
        keys += [f"{a}.vocab_size", f"{a}.rope.dimension_count"]
    keys.append("general.quantization_version")
    return keys


@pytest.mark.parametrize("outtype", ["f32", "f16", "q8_0"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_layout_and_values(tmp_path_factory, kind, outtype):
    arch = KINDS[kind][0]
    model = hf_model(kind)
    cfg = model.config.get_text_config() if arch == "qwen2vl" else model.config
    path = converted(kind, outtype, tmp_path_factory.mktemp("conv"))
    f = G.load(path)
    models.read_hparams(f)                    # validates every shape against the metadata
    ckpt = checkpoint(model)
    extra = ["rope_freqs.weight"] if kind == "llama3" else []          # computed from the config, first
    assert list(f.tensors) == extra + [gguf_name(n) for n in ckpt]    # names, in llama.cpp's order
    assert list(f.metadata) == expected_keys(arch, kind)
    md = f.metadata
    assert md["general.architecture"] == arch and md["general.type"] == "model"
    assert md[f"{arch}.block_count"] == cfg.num_hidden_layers
    assert md[f"{arch}.context_length"] == cfg.max_position_embeddings
    assert md[f"{arch}.embedding_length"] == cfg.hidden_size
    assert md[f"{arch}.feed_forward_length"] == cfg.intermediate_size
    assert md[f"{arch}.attention.head_count"] == cfg.num_attention_heads
    assert md[f"{arch}.attention.head_count_kv"] == cfg.num_key_value_heads
    assert md[f"{arch}.rope.freq_base"] == cfg.rope_parameters["rope_theta"]
    assert md[f"{arch}.attention.layer_norm_rms_epsilon"] == pytest.approx(cfg.rms_norm_eps, rel=1e-6)
    assert md["general.file_type"] == {"f32": 0, "f16": 1, "q8_0": 7}[outtype]
    assert md["general.quantization_version"] == 2
    if arch == "llama":
        assert md["llama.vocab_size"] == cfg.vocab_size and md["llama.rope.dimension_count"] == 16
        assert md["llama.attention.key_length"] == md["llama.attention.value_length"] == 16
    if arch == "qwen3":
        assert md["qwen3.attention.key_length"] == md["qwen3.attention.value_length"] == 24
    if arch == "qwen2vl":
        assert md["qwen2vl.rope.dimension_sections"] == [2, 3, 3, 0]
        assert f.types["qwen2vl.rope.dimension_sections"] == (gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.INT32)
    assert ("output.weight" not in f.tensors) == model.config.tie_word_embeddings
    n_head, n_head_kv = cfg.num_attention_heads, cfg.num_key_value_heads
    for hf, w in ckpt.items():
        t = f.tensor(gguf_name(hf))
        assert t.shape == w.shape, hf
        assert t.type == expected_type(gguf_name(hf), w.shape, outtype), hf
        got = t.to_numpy()
        if arch == "llama" and ("q_proj" in hf or "k_proj" in hf):
            w = normal_rope_rows(w, n_head if "q_proj" in hf else n_head_kv)
        if t.type == gg.Type.F32:
            np.testing.assert_array_equal(got, w)
        elif t.type == gg.Type.F16:
            np.testing.assert_array_equal(got, w.astype(np.float16).astype(np.float32))
        else:
            ref = gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q8_0)
            assert t.tobytes() == ref.tobytes(), hf
            np.testing.assert_allclose(got, w, atol=np.abs(w).max() / 127)


def test_folder_and_model_give_the_same_file(tmp_path):
    model = hf_model("qwen2")
    model.save_pretrained(tmp_path / "hf")
    C.convert_hf(tmp_path / "hf", tmp_path / "a.gguf", "q8_0")
    C.convert_hf(model, tmp_path / "b.gguf", "q8_0")
    a, b = G.load(tmp_path / "a.gguf"), G.load(tmp_path / "b.gguf")
    assert a.metadata.pop("general.name") == "Hf"                   # from the folder's name, as llama.cpp
    assert b.metadata.pop("general.name") == "Qwen2ForCausalLM"
    assert a.metadata == b.metadata
    assert {n: t.tobytes() for n, t in a.tensors.items()} == {n: t.tobytes() for n, t in b.tensors.items()}


def test_bf16_checkpoint(tmp_path):
    model = hf_model("llama-gqa").to(torch.bfloat16)
    model.save_pretrained(tmp_path / "hf")
    C.convert_hf(tmp_path / "hf", tmp_path / "m.gguf", "f32")
    w = model.model.layers[0].mlp.up_proj.weight.detach().float().numpy()
    np.testing.assert_array_equal(G.load(tmp_path / "m.gguf").tensor("blk.0.ffn_up.weight").to_numpy(), w)


def test_llama3_rope_freqs(tmp_path):
    model = hf_model("llama-gqa")
    model.config.rope_parameters = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                    "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 8192}
    C.convert_hf(model, tmp_path / "m.gguf", "f32")
    f = G.load(tmp_path / "m.gguf")
    assert next(iter(f.tensors)) == "rope_freqs.weight"
    freqs = f.tensor("rope_freqs.weight").numpy()
    # head_dim 16: 8 wavelengths 2 pi base^(2i/16); original context 8192 (llama.cpp reads it from the
    # config's top level, else 8192): below 8192/4 -> 1, above 8192 -> factor 8, smoothed between
    wavelen = 2 * np.pi * 500000.0 ** (np.arange(0, 16, 2) / 16)
    low, high, mid = wavelen < 2048, wavelen > 8192, (wavelen >= 2048) & (wavelen <= 8192)
    assert low.sum() == 4 and high.sum() == 3 and mid.sum() == 1
    assert freqs[low].tolist() == [1.0] * 4 and freqs[high].tolist() == [8.0] * 3
    smooth = (8192 / wavelen[mid] - 1) / 3
    np.testing.assert_allclose(freqs[mid], 1 / ((1 - smooth) / 8 + smooth), rtol=1e-6)


def test_bpe_vocabulary(tmp_path):
    model = hf_model("qwen2", vocab_size=320)
    tok = bpe_tokenizer(tmp_path / "tok", vocab_size=300)          # 20 ids of the model without a token
    C.convert_hf(model, tmp_path / "m.gguf", "f16", tokenizer=tok)
    md = G.load(tmp_path / "m.gguf").metadata
    assert md["tokenizer.ggml.model"] == "gpt2" and md["tokenizer.ggml.pre"] == "qwen2"
    vocab = tok.get_vocab()
    n = model.config.vocab_size
    tokens = md["tokenizer.ggml.tokens"]
    assert len(tokens) == n
    for text, i in vocab.items():
        assert tokens[i] == text
    assert tokens[len(vocab):] == [f"[PAD{i}]" for i in range(len(vocab), n)]
    T = gguf.TokenType
    types = md["tokenizer.ggml.token_type"]
    assert [types[vocab[s]] for s in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")] == [T.CONTROL] * 3
    assert types[vocab["Ġthe"]] == T.NORMAL and types[-1] == T.UNUSED
    merges = json.loads((tmp_path / "tok" / "tokenizer.json").read_text())["model"]["merges"]
    assert md["tokenizer.ggml.merges"] == [m if isinstance(m, str) else " ".join(m) for m in merges]
    assert md["tokenizer.ggml.eos_token_id"] == vocab["<|endoftext|>"]
    assert md["tokenizer.ggml.padding_token_id"] == vocab["<|endoftext|>"]


def test_sentencepiece_vocabulary(tmp_path):
    pytest.importorskip("sentencepiece")
    sp = spm_tokenizer(tmp_path / "tok", vocab_size=320)
    model = hf_model("llama-gqa", vocab_size=320)
    C.convert_hf(model, tmp_path / "m.gguf", "f16", tokenizer=tmp_path / "tok")
    md = G.load(tmp_path / "m.gguf").metadata
    assert md["tokenizer.ggml.model"] == "llama" and md["tokenizer.ggml.pre"] == "default"
    n = sp.vocab_size()
    assert md["tokenizer.ggml.tokens"] == [sp.id_to_piece(i) for i in range(n)]
    np.testing.assert_allclose(md["tokenizer.ggml.scores"], [sp.get_score(i) for i in range(n)])
    T = gguf.TokenType
    types = md["tokenizer.ggml.token_type"]
    assert types[:3] == [T.UNKNOWN, T.CONTROL, T.CONTROL] and types[3:259] == [T.BYTE] * 256
    assert types[300] == T.NORMAL
    assert (md["tokenizer.ggml.bos_token_id"], md["tokenizer.ggml.eos_token_id"]) == (1, 2)


def test_llama_tokenizer_json_vocabulary(tmp_path):
    """llama without tokenizer.model: the Llama-style tokenizer.json through gguf.LlamaHfVocab (scores
    -1000, byte tokens BYTE, special tokens CONTROL), as llama.cpp's _set_vocab_llama_hf."""
    tok = llama_hf_tokenizer(tmp_path / "tok", vocab_size=320)
    C.convert_hf(hf_model("llama-gqa", vocab_size=320), tmp_path / "m.gguf", "f16", tokenizer=tok)
    md = G.load(tmp_path / "m.gguf").metadata
    assert md["tokenizer.ggml.model"] == "llama" and md["tokenizer.ggml.pre"] == "default"
    vocab = tok.get_vocab()
    assert md["tokenizer.ggml.tokens"] == sorted(vocab, key=vocab.get)
    assert md["tokenizer.ggml.scores"] == [-1000.0] * len(vocab)
    T = gguf.TokenType
    types = md["tokenizer.ggml.token_type"]
    assert types[:3] == [T.CONTROL] * 3 and types[3:259] == [T.BYTE] * 256 and types[300] == T.NORMAL
    assert (md["tokenizer.ggml.bos_token_id"], md["tokenizer.ggml.eos_token_id"]) == (1, 2)


def test_errors(tmp_path):
    with pytest.raises(ValueError, match="convert_hf: outtype must be one of f32, f16, q8_0, q4_k_m, got 'q4_0'"):
        C.convert_hf(tmp_path, tmp_path / "x.gguf", "q4_0")
    with pytest.raises(FileNotFoundError, match="has no config.json"):
        C.convert_hf(tmp_path, tmp_path / "x.gguf")
    import transformers
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=64))
    with pytest.raises(ValueError, match="convert_hf: architecture 'GPT2LMHeadModel' of .* is not supported; "
                                         "supported: .*LlamaForCausalLM.*Qwen2ForCausalLM"):
        C.convert_hf(gpt2, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists()


def test_command(tmp_path, capsys):
    hf_model("llama-mha-tied").save_pretrained(tmp_path / "hf")
    args = C.add_arguments(argparse.ArgumentParser()).parse_args([str(tmp_path / "hf"), "--outtype", "q8_0"])
    assert C.main(args) == 0
    out = tmp_path / "hf" / "model-q8_0.gguf"
    assert f"wrote {out}" in capsys.readouterr().out
    assert G.load(out).metadata["general.file_type"] == 7


# ---- Gemma 2, Gemma 3, Phi-3 (read back with the gguf package's reader: pyggml.gguf.load knows the
# architectures the model layer runs) ----

def read(path):
    """{key: value}, {tensor name: (type, numpy-order shape, float32 values)} of a GGUF file."""
    r = gguf.GGUFReader(path)
    keys = {k: f.contents() for k, f in r.fields.items()}
    tensors = {}
    for t in r.tensors:
        shape = tuple(int(n) for n in reversed(t.shape))
        vals = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape)
        tensors[t.name] = (gg.Type(int(t.tensor_type)), shape, vals.astype(np.float32))
    return keys, tensors


GEMMA_PHI_NAMES = {"input_layernorm": "attn_norm", "post_attention_layernorm": "post_attention_norm",
                   "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
                   "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
                   "self_attn.qkv_proj": "attn_qkv", "mlp.gate_up_proj": "ffn_up"}


def gemma_phi_name(arch, hf):
    if hf in HF_TO_GGUF:
        return HF_TO_GGUF[hf]
    _, _, i, rest = hf.split(".", 3)
    stem = rest.rsplit(".", 1)[0]
    if arch == "phi3" and stem == "post_attention_layernorm":
        return f"blk.{i}.ffn_norm.weight"                         # Phi-3's pre-FFN norm
    return f"blk.{i}.{GEMMA_PHI_NAMES.get(stem) or LAYER[rest].rsplit('.', 1)[0]}.weight"


@pytest.mark.parametrize("kind", list(KINDS_SWA))
def test_gemma_phi_layout_and_values(tmp_path_factory, kind):
    """Names and order, types, values (Gemma's norms stored as 1 + w, Phi-3's fused qkv and gate_up
    as HF stores them) and the architecture keys llama.cpp's converter writes."""
    arch = KINDS_SWA[kind][0]
    model = hf_model(kind)
    cfg = model.config
    keys, tensors = read(converted(kind, "f32", tmp_path_factory.mktemp("conv")))
    ckpt = checkpoint(model)
    names = [gemma_phi_name(arch, n) for n in ckpt if n != "lm_head.weight" or arch == "phi3"]
    extra = ["rope_factors_long.weight", "rope_factors_short.weight"] if kind == "phi3-longrope" else []
    assert list(tensors) == extra + names
    for hf, w in ckpt.items():
        typ, shape, got = tensors[gemma_phi_name(arch, hf)]
        assert shape == w.shape and typ == expected_type(hf, w.shape, "f32"), hf
        want = w + 1 if arch.startswith("gemma") and hf.endswith("norm.weight") else w
        np.testing.assert_array_equal(got, want.astype(np.float32), err_msg=hf)
    a = arch
    assert keys["general.architecture"] == arch and keys[f"{a}.block_count"] == cfg.num_hidden_layers
    assert keys[f"{a}.attention.head_count_kv"] == cfg.num_key_value_heads
    if arch == "gemma2":
        assert keys[f"{a}.attention.sliding_window"] == 4 and keys[f"{a}.attention.key_length"] == 16
        assert keys[f"{a}.attn_logit_softcapping"] == 3.0 and keys[f"{a}.final_logit_softcapping"] == 5.0
        assert f"{a}.rope.freq_base" not in keys                  # llama.cpp's Gemma2Model writes none
    if arch == "gemma3":
        assert keys[f"{a}.attention.sliding_window"] == 4 and keys[f"{a}.attention.key_length"] == 16
        assert keys[f"{a}.rope.freq_base"] == 1e6 and keys[f"{a}.rope.freq_base_swa"] == 1e4
        assert f"{a}.final_logit_softcapping" not in keys
    if arch == "phi3":
        assert keys[f"{a}.rope.dimension_count"] == 16 and keys[f"{a}.attention.sliding_window"] == 0
        assert keys[f"{a}.rope.scaling.original_context_length"] == cfg.original_max_position_embeddings
    if kind == "phi3-longrope":
        rope = cfg.rope_parameters
        np.testing.assert_array_equal(tensors["rope_factors_long.weight"][2], np.float32(rope["long_factor"]))
        np.testing.assert_array_equal(tensors["rope_factors_short.weight"][2], np.float32(rope["short_factor"]))
        # 256 / 8 = 32 times the original context: sqrt(1 + ln 32 / ln 8)
        assert keys[f"{a}.rope.scaling.attn_factor"] == pytest.approx(np.sqrt(1 + np.log(32) / np.log(8)), rel=1e-6)
        assert list(keys)[3:5] == ["general.architecture", f"{a}.rope.scaling.attn_factor"]   # before general.type


def test_gemma3_tokenizer_json_cuts_the_embedding(tmp_path):
    """Gemma 3 without tokenizer.model: the embedding keeps the tokenizer.json's tokens only."""
    tok = bpe_tokenizer(tmp_path / "tok", vocab_size=300)
    n = len(tok.get_vocab())
    model = hf_model("gemma3", vocab_size=320)
    C.convert_hf(model, tmp_path / "m.gguf", "f32", tokenizer=tmp_path / "tok")
    _, tensors = read(tmp_path / "m.gguf")
    assert n < 320 and tensors["token_embd.weight"][1] == (n, 64)
    np.testing.assert_array_equal(tensors["token_embd.weight"][2], model.model.embed_tokens.weight[:n].detach().numpy())


def test_gemma_phi_errors(tmp_path):
    cfg = hf_model("phi3-longrope").config.to_dict()
    cfg["rope_parameters"]["long_factor"] = cfg["rope_parameters"]["long_factor"][:7]      # transformers refuses it
    with pytest.raises(ValueError, match="long_factor and short_factor must have 8 values each, got 7 and 8"):
        C.Phi3Converter(cfg, "Phi3ForCausalLM").extra_tensors()
    with pytest.raises(ValueError, match="Phi-3 needs .*tokenizer.model"):
        C.convert_hf(hf_model("phi3"), tmp_path / "x.gguf", tokenizer=bpe_tokenizer(tmp_path / "tok"))


@pytest.mark.slow
@pytest.mark.llama_cpp
@pytest.mark.parametrize("outtype", ["f32", "f16", "q8_0"])
@pytest.mark.parametrize("kind", list(KINDS_SWA))
def test_gemma_phi_byte_identical_to_llama_cpp(tmp_path, llama_cpp_src, kind, outtype):
    """pyggml convert and llama.cpp's convert_hf_to_gguf.py write the same bytes from one folder
    (a sentencepiece vocabulary, so that llama.cpp's converter has the tokenizer it requires)."""
    import subprocess
    import sys
    pytest.importorskip("sentencepiece")
    d = tmp_path / kind
    hf_model(kind, vocab_size=320).save_pretrained(d)
    spm_tokenizer(d)
    ours, theirs = tmp_path / "pyggml.gguf", tmp_path / "llama_cpp.gguf"
    C.convert_hf(d, ours, outtype)
    env = {**os.environ, "PYTHONPATH": str(llama_cpp_src / "gguf-py")}
    subprocess.run([sys.executable, str(llama_cpp_src / "convert_hf_to_gguf.py"), str(d), "--outtype", outtype,
                    "--outfile", str(theirs)], env=env, check=True, capture_output=True)
    assert ours.read_bytes() == theirs.read_bytes()
