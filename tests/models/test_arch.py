"""pyggml.models' architectures as a GGUF describes them: each one's typed hyper-parameters with
llama.cpp's defaults (read_hparams), their validation before anything is allocated (hostile values
give a GGUFError at once), the tensor table, the registry and the warning about unread tensors."""
import math
import time

import numpy as np
import pytest

pytest.importorskip("gguf")

from tiny_gguf import llama_metadata, llama_tensors

import pyggml as gg
import pyggml.gguf as G
from pyggml import models


def write(tmp_path, rng, arch="llama", md=None, tensors=None, name="m.gguf"):
    if md is None:
        md = llama_metadata(arch)
        if arch == "qwen2vl":
            md["qwen2vl.rope.dimension_sections"] = [2, 3, 3, 0]
    G.save(tmp_path / name, llama_tensors(rng, arch) if tensors is None else tensors, md)
    return tmp_path / name


def hparams(path):
    return models.read_hparams(G.load(path))


# hyper-parameters and their defaults

def test_llama_defaults(tmp_path, rng):
    hp = hparams(write(tmp_path, rng))
    assert type(hp) is models.llama.LlamaHParams
    assert hp == models.llama.LlamaHParams(
        n_vocab=100, n_embd=64, n_layer=2, n_head=4, n_head_kv=2, head_dim=16, head_dim_v=16, n_ff=96,
        n_ctx_train=256, rms_eps=2.0 ** -17, bos_id=None, eos_id=None,
        rope=models.Rope(gg.RopeType.NORMAL, 16, freq_base=10000.0, freq_scale=1.0, n_ctx_orig=256,
                         scaling="linear", ext_factor=0.0, attn_factor=1.0, beta_fast=32.0, beta_slow=1.0))


def test_defaults_mha_no_token_list(tmp_path, rng):
    md = llama_metadata(n_head_kv=4)
    del md["llama.attention.head_count_kv"], md["tokenizer.ggml.tokens"]
    hp = hparams(write(tmp_path, rng, md=md, tensors=llama_tensors(rng, tied=True, n_head_kv=4)))
    assert hp.n_head_kv == 4
    assert hp.n_vocab == 100                     # token_embd's rows without a vocabulary


def test_from_keys(tmp_path, rng):
    md = llama_metadata("qwen2", n_vocab=100)
    md.update({"qwen2.attention.key_length": 16, "qwen2.attention.value_length": 16, "qwen2.vocab_size": 100,
               "qwen2.rope.freq_base": 1e6, "qwen2.rope.dimension_count": 8, "qwen2.rope.scaling.factor": 4.0,
               "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2})
    hp = hparams(write(tmp_path, rng, "qwen2", md))
    assert (hp.rope.freq_base, hp.rope.n_dims, hp.rope.freq_scale) == (1e6, 8, 0.25)
    assert (hp.bos_id, hp.eos_id, hp.rope.mode) == (1, 2, gg.RopeType.NEOX)


def test_qwen2vl_sections(tmp_path, rng):
    md = llama_metadata("qwen2vl")
    md["qwen2vl.rope.dimension_sections"] = [2, 3, 3]
    hp = hparams(write(tmp_path, rng, "qwen2vl", md))
    assert hp.rope.sections == (2, 3, 3, 0) and hp.rope.mode == gg.RopeType.MROPE and hp.rope.multi


@pytest.mark.parametrize("kind, keys, want", [
    ("none", {"rope.scaling.type": "none", "rope.scaling.factor": 4.0}, (1.0, 0.0, 1.0, 256)),
    ("linear", {"rope.scaling.factor": 4.0}, (0.25, 0.0, 1.0, 256)),
    ("linear-old-key", {"rope.scale_linear": 2.0}, (0.5, 0.0, 1.0, 256)),
    # YaRN: ggml's rope multiplies by 1 + 0.1 ln(factor) itself; llama.cpp's attn_factor leaves that
    ("yarn", {"rope.scaling.type": "yarn", "rope.scaling.factor": 4.0,
              "rope.scaling.original_context_length": 64}, (0.25, 1.0, 1.0, 64)),
    # HF's attention_factor (rope.scaling.yarn_attn_factor) is the whole scale
    ("yarn-attn", {"rope.scaling.type": "yarn", "rope.scaling.factor": 4.0, "rope.scaling.yarn_attn_factor": 2.0},
     (0.25, 1.0, 2.0 / (1 + 0.1 * math.log(4.0)), 256)),
])
def test_rope_scaling(tmp_path, rng, kind, keys, want):
    md = llama_metadata("qwen2")
    md.update({f"qwen2.{k}": v for k, v in keys.items()})
    r = hparams(write(tmp_path, rng, "qwen2", md)).rope
    got = (r.freq_scale, r.ext_factor, r.attn_factor, r.n_ctx_orig)
    assert got == pytest.approx(want, rel=1e-6)
    assert r.scaling == keys.get("rope.scaling.type", "linear")


# hostile hyper-parameters: a GGUFError naming the file, the key, expected and actual, at once

@pytest.mark.parametrize("key, value, match", [
    ("attention.head_count", 0, r"llama.attention.head_count: expected an integer in \[1, \d+\], got 0"),
    ("attention.head_count", -4, r"llama.attention.head_count: expected an integer in \[1, \d+\], got -4"),
    ("attention.head_count", "4", r"llama.attention.head_count: expected an integer .*, got '4'"),
    ("attention.head_count_kv", 3, r"llama.attention.head_count_kv: expected a divisor of the head count 4, got 3"),
    ("attention.head_count_kv", 8, r"llama.attention.head_count_kv: expected an integer in \[1, 4\], got 8"),
    ("attention.head_count", 5, r"llama.attention.head_count: expected a divisor of the embedding length 64"),
    ("block_count", 2**31, r"llama.block_count: expected an integer in \[1, 2147483647\], got 2147483648"),
    ("block_count", 2**31 - 1, r"llama.block_count: expected at most the 2 blocks the file has tensors for"),
    ("block_count", 3, r"llama.block_count: expected at most the 2 blocks"),
    ("embedding_length", 2**40, r"llama.embedding_length: expected an integer in \[1, 2147483647\]"),
    ("feed_forward_length", 0, r"llama.feed_forward_length: expected an integer"),
    ("context_length", 0, r"llama.context_length: expected an integer"),
    ("attention.key_length", 2**30, (r"tensor 'blk.0.attn_q.weight' has ne=\(64, 64\) but the metadata gives "
                                     r"\[n_embd=64, n_head\*head_dim=4294967296\]")),
    ("attention.layer_norm_rms_epsilon", float("nan"), r"layer_norm_rms_epsilon: expected a finite number >= 0"),
    ("attention.layer_norm_rms_epsilon", -1.0, r"layer_norm_rms_epsilon: expected a finite number >= 0, got -1.0"),
    ("rope.freq_base", 0.0, r"llama.rope.freq_base: expected a finite number > 0"),
    ("rope.dimension_count", 15, r"llama.rope.dimension_count: expected an even number"),
    ("rope.dimension_count", 32, r"llama.rope.dimension_count: expected an integer in \[1, 16\], got 32"),
    ("rope.dimension_count", 8, r"llama.rope.dimension_count: expected the head dimension 16, got 8"),
    ("rope.scaling.type", "dynamic", r"llama.rope.scaling.type: expected one of none, linear, yarn, got 'dynamic'"),
    ("rope.scaling.factor", float("inf"), r"llama.rope.scaling.factor: expected a finite number"),
    ("vocab_size", 10**6, (r"tensor 'token_embd.weight' has ne=\(64, 100\) but the metadata gives "
                           r"\[n_embd=64, n_vocab=1000000\]")),
    ("tokenizer.ggml.eos_token_id", -1, r"tokenizer.ggml.eos_token_id: expected an integer in \[0, \d+\], got -1"),
])
def test_hostile_hparams(tmp_path, rng, key, value, match):
    md = llama_metadata()
    md[key if key.startswith("tokenizer.") else f"llama.{key}"] = value
    path = write(tmp_path, rng, md=md)
    t0 = time.perf_counter()
    with pytest.raises(G.GGUFError, match=r"m.gguf: .*" + match):
        models.load(path)
    assert time.perf_counter() - t0 < 5


@pytest.mark.parametrize("sections, match", [([2, 3, 3, 1], r"sections of at most rope.dimension_count / 2 = 8 pairs"),
                                             ([2, -3, 3], r"1 to 4 integers >= 0"),
                                             ([1, 1, 1, 1, 1], r"1 to 4 integers >= 0")])
def test_hostile_qwen2vl_sections(tmp_path, rng, sections, match):
    md = llama_metadata("qwen2vl")
    md["qwen2vl.rope.dimension_sections"] = sections
    with pytest.raises(G.GGUFError, match=r"qwen2vl.rope.dimension_sections: expected " + match):
        hparams(write(tmp_path, rng, "qwen2vl", md))


def test_unsupported_architecture(tmp_path, rng):
    md = llama_metadata()
    md["general.architecture"] = "gpt2"
    path = write(tmp_path, rng, md=md)
    with pytest.raises(G.GGUFError, match=r"m.gguf: architecture 'gpt2' is not supported; supported: llama, "
                                          r"qwen2, qwen2vl, qwen3"):
        models.load(path)
    assert G.load(path).arch == "gpt2"          # the format is fine


@pytest.mark.parametrize("arch, key", [("llama", "llama.embedding_length"), ("llama", "llama.block_count"),
                                       ("llama", "llama.attention.layer_norm_rms_epsilon"),
                                       ("qwen2vl", "qwen2vl.rope.dimension_sections")])
def test_missing_required_key(tmp_path, rng, arch, key):
    md = llama_metadata(arch)
    md["qwen2vl.rope.dimension_sections"] = [2, 3, 3, 0]
    del md[key]
    with pytest.raises(G.GGUFError, match=f"m.gguf: the metadata has no '{key}', which a {arch} model requires"):
        hparams(write(tmp_path, rng, arch, md))


def test_tensor_shape_disagrees_with_metadata(tmp_path, rng):
    tensors = llama_tensors(rng)
    tensors["blk.1.attn_k.weight"] = np.zeros((64, 64), np.float16)        # MHA-sized K in a GQA model
    with pytest.raises(G.GGUFError, match=r"m.gguf: tensor 'blk.1.attn_k.weight' has ne=\(64, 64\) but the "
                                          r"metadata gives \[n_embd=64, n_head_kv\*head_dim=32\]"):
        hparams(write(tmp_path, rng, tensors=tensors))


def test_missing_tensor_and_qwen2_biases(tmp_path, rng):
    tensors = llama_tensors(rng, "qwen2")
    del tensors["blk.0.attn_q.bias"]
    with pytest.raises(G.GGUFError, match="tensor 'blk.0.attn_q.bias' is missing; a qwen2 model needs it"):
        hparams(write(tmp_path, rng, "qwen2", tensors=tensors))


# tensors the graph never reads

def test_unread_tensors_warn(tmp_path, rng):
    """A qwen3 file labelled qwen2 (Q/K norms that qwen2's graph ignores) warns, naming them."""
    tensors = llama_tensors(rng, "qwen2")
    tensors["blk.0.attn_q_norm.weight"] = np.ones(16, np.float32)
    path = write(tmp_path, rng, "qwen2", tensors=tensors)
    with pytest.warns(UserWarning, match=r"m.gguf: the qwen2 graph never reads 1 of the file's tensors "
                                         r"\(blk.0.attn_q_norm.weight\)"):
        models.load(path)


def test_registry_errors():
    with pytest.raises(TypeError, match="expected a subclass of pyggml.models.Decoder"):
        models.register("x", object)

    class Bad(models.Decoder):
        hparams_class = dict
    with pytest.raises(TypeError, match="Bad.hparams_class must be a subclass of pyggml.models.HParams"):
        models.register("x", Bad)
    assert "x" not in models.ARCHS
    assert models.architecture("qwen3") is models.Qwen3


def test_load_without_mmap_gives_the_same_logits(tmp_path, rng):
    """models.load(mmap=False) reads the file into memory; with Q8_0 matrices (repacked where the
    CPU's kernels have a layout, their copied rows then mapped back to the file) the logits are the
    mapped model's, to the bit"""
    ctx = gg.Context()
    tensors = {n: ctx.from_numpy(w, type=gg.Type.Q8_0) if n.startswith("blk.") and w.ndim == 2 else w
               for n, w in llama_tensors(rng).items()}
    path = write(tmp_path, rng, tensors=tensors)
    ids = [1, 5, 7, 2, 9]
    a, b = models.load(path, n_ctx=32), models.load(path, n_ctx=32, mmap=False)
    assert a.repacked_bytes == b.repacked_bytes
    np.testing.assert_array_equal(b.eval(ids), a.eval(ids))
