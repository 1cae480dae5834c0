"""Small random Hugging Face models (offline, seeded) and their GGUF conversions, shared by tests.

    model = hf_model("llama-gqa")                    # transformers model, float32, eval mode
    path = converted("qwen2", "f16", tmp_dir)        # the GGUF pyggml.convert writes for it (cached)
    ids = model(torch.tensor([tokens])).logits       # the reference logits

Every parameter is random (norm weights near 1, biases nonzero), so a converter or a model that
drops a norm or a bias, or permutes the wrong rows, shows in the logits. KINDS covers GQA and MHA,
tied and untied output, rope_theta other than 10000, qwen2's Q/K/V biases, qwen2vl's MROPE
sections, qwen3's Q/K norms and its own head dimension, and the RoPE scalings linear, llama3 and yarn; n_ff = 80 is not a multiple of 32, so q8_0 conversions exercise llama.cpp's F16 fallback.

KINDS_SWA: Gemma 2 and Gemma 3 (text-only Gemma3ForCausalLM) have a sliding window of 4 positions,
shorter than the test sequences, and soft-capping strong enough to matter (Gemma 2); Gemma 3 has 6
layers, so that its pattern (five sliding-window layers, then a global one) has a global layer, and
different RoPE bases for the two kinds. Their query_pre_attn_scalar is head_dim: llama.cpp does not read
it (it scales queries by 1/sqrt(head_dim), or 1/sqrt(n_embd/n_head) for the 27B layer counts), as the
released models set it. Phi-3 has fused qkv_proj / gate_up_proj; phi3-longrope adds LongRoPE short/long
factors with an original context of 8, so sequences past 8 tokens use the long factors (HF picks them
per sequence length, llama.cpp by the context size).

KINDS_MOE: Qwen3-MoE (8 experts, 2 per token, expert width 64), with and without norm_topk_prob.
"""
import functools
import re
from pathlib import Path

_COMMON = {"vocab_size": 128, "hidden_size": 64, "intermediate_size": 80, "num_hidden_layers": 2,
           "num_attention_heads": 4, "max_position_embeddings": 256, "rms_norm_eps": 1e-5}

# kind -> (GGUF architecture, config arguments)
KINDS = {
    "llama-gqa": ("llama", {"num_key_value_heads": 2, "rope_theta": 500000.0, "tie_word_embeddings": False}),
    "llama-mha-tied": ("llama", {"num_key_value_heads": 4, "rope_theta": 10000.0, "tie_word_embeddings": True}),
    "qwen2": ("qwen2", {"num_key_value_heads": 2, "rope_theta": 1000000.0, "tie_word_embeddings": False}),
    "qwen2-mha-tied": ("qwen2", {"num_key_value_heads": 4, "rope_theta": 10000.0, "tie_word_embeddings": True}),
    "qwen2vl": ("qwen2vl", {"num_key_value_heads": 2, "rope_theta": 1000000.0, "tie_word_embeddings": False,
                            "mrope_section": [2, 3, 3]}),
    # per-head Q/K norms; a head dimension (24) that is not n_embd / n_head
    "qwen3": ("qwen3", {"num_key_value_heads": 2, "head_dim": 24, "rope_theta": 1000000.0,
                        "tie_word_embeddings": True}),
    # RoPE scalings: each changes the angles of a 15-token test sequence (yarn and llama3 through the
    # frequencies, which depend on the original context, not on the position)
    "llama-linear": ("llama", {"num_key_value_heads": 2, "rope_theta": 10000.0, "tie_word_embeddings": False,
                               "rope": {"rope_type": "linear", "factor": 2.0}}),
    "llama3": ("llama", {"num_key_value_heads": 2, "rope_theta": 500000.0, "tie_word_embeddings": True,
                         "rope": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}),
    "qwen2-yarn": ("qwen2", {"num_key_value_heads": 2, "rope_theta": 10000.0, "tie_word_embeddings": False,
                             "max_position_embeddings": 1024,
                             "rope": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256}}),
}

# the sliding-window and fused-projection architectures, kept apart from KINDS (which the tests of the
# other architectures run over); hf_config, hf_model and converted take the kinds of both
KINDS_SWA = {
    "gemma2": ("gemma2", {"num_key_value_heads": 2, "head_dim": 16, "rope_theta": 10000.0, "rms_norm_eps": 1e-6,
                          "query_pre_attn_scalar": 16, "sliding_window": 4, "attn_logit_softcapping": 3.0,
                          "final_logit_softcapping": 5.0, "tie_word_embeddings": True}),
    "gemma3": ("gemma3", {"num_hidden_layers": 6, "num_key_value_heads": 2, "head_dim": 16, "rope_theta": 1000000.0,
                          "rope_local_theta": 10000.0, "rms_norm_eps": 1e-6, "query_pre_attn_scalar": 16,
                          "sliding_window": 4, "tie_word_embeddings": True}),
    "phi3": ("phi3", {"num_key_value_heads": 2, "rope_theta": 10000.0, "original_max_position_embeddings": 256,
                      "tie_word_embeddings": False}),
    "phi3-longrope": ("phi3", {"num_key_value_heads": 2, "rope_theta": 10000.0, "original_max_position_embeddings": 8,
                               "tie_word_embeddings": False,
                               "rope": {"rope_type": "longrope", "short_factor": [1.0 + 0.05 * i for i in range(8)],
                                        "long_factor": [1.0 + 0.6 * i for i in range(8)]}}),
}
# mixture-of-experts: qwen3's attention with 8 experts of width 64 (Q8_0 rows) chosen 2 per token by a
# softmax router, the chosen weights renormalised (norm_topk_prob, as the released models) or not
_MOE = {"num_key_value_heads": 2, "head_dim": 24, "rope_theta": 1000000.0, "tie_word_embeddings": False,
        "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64, "decoder_sparse_step": 1,
        "mlp_only_layers": []}
KINDS_MOE = {
    "qwen3moe": ("qwen3moe", {**_MOE, "norm_topk_prob": True}),
    "qwen3moe-nonorm": ("qwen3moe", {**_MOE, "norm_topk_prob": False}),
}
# gpt-oss: 4 layers (sliding window of 4 on the even ones, whole context on the odd ones), 8 experts of
# which 4 are used, attention sinks, Q/K/V/O biases, YaRN with truncate=True (the corrections range
# rounded outward, as ggml's rope_yarn_corr_dims always does; the released models say truncate=False,
# which llama.cpp does not read either). hf_model scales the experts' gate_up_proj so that some gate
# and up values pass swiglu_limit (7) and the clamps matter, and the sinks so that they do.
KINDS_GPT_OSS = {
    "gpt-oss": ("gpt-oss", {"num_hidden_layers": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 48,
                            "num_local_experts": 8, "num_experts_per_tok": 4, "sliding_window": 4,
                            "rope_theta": 10000.0, "max_position_embeddings": 1024, "tie_word_embeddings": False,
                            "rope": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256,
                                     "beta_fast": 32.0, "beta_slow": 1.0, "truncate": True}}),
}
_ALL_KINDS = {**KINDS, **KINDS_SWA, **KINDS_MOE, **KINDS_GPT_OSS}


def hf_config(kind, **overrides):
    """The transformers config of `kind` (KINDS), with config arguments `overrides`."""
    import transformers
    arch, args = _ALL_KINDS[kind]
    args = {**_COMMON, **args, **overrides}
    theta = args.pop("rope_theta")
    rope = {"rope_type": "default", "rope_theta": theta, **args.pop("rope", {})}
    if arch == "qwen2vl":
        rope["mrope_section"] = args.pop("mrope_section")
        tie = args.pop("tie_word_embeddings")
        vision = args.pop("vision_config", {"depth": 1, "embed_dim": 16, "hidden_size": 32, "num_heads": 2,
                                            "patch_size": 2})
        return transformers.Qwen2VLConfig(
            text_config={**args, "rope_parameters": rope, "bos_token_id": 1, "eos_token_id": 2},
            vision_config=vision,
            tie_word_embeddings=tie, image_token_id=120, video_token_id=121, vision_start_token_id=122,
            vision_end_token_id=123)
    if arch == "gemma3":
        rope = {"full_attention": rope, "sliding_attention": {"rope_type": "default",
                                                              "rope_theta": args.pop("rope_local_theta")}}
    if arch == "phi3":
        args["pad_token_id"] = 0                          # Phi3Config's default 32000 is past the vocabulary
    cls = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config, "qwen3": transformers.Qwen3Config,
           "gemma2": transformers.Gemma2Config, "gemma3": transformers.Gemma3TextConfig,
           "phi3": transformers.Phi3Config, "qwen3moe": transformers.Qwen3MoeConfig,
           "gpt-oss": transformers.GptOssConfig}[arch]
    if arch == "gpt-oss":
        args["layer_types"] = ["sliding_attention" if il % 2 == 0 else "full_attention"
                               for il in range(args["num_hidden_layers"])]
    return cls(**args, rope_parameters=rope, bos_token_id=1, eos_token_id=2)


def hf_model(kind, seed=0, **overrides):
    """A transformers model of `kind` (config arguments changed by `overrides`) with seeded random
    parameters (float32, eval mode)."""
    import torch
    import transformers
    arch = _ALL_KINDS[kind][0]
    cls = {"llama": transformers.LlamaForCausalLM, "qwen2": transformers.Qwen2ForCausalLM,
           "qwen3": transformers.Qwen3ForCausalLM, "qwen2vl": transformers.Qwen2VLForConditionalGeneration,
           "gemma2": transformers.Gemma2ForCausalLM, "gemma3": transformers.Gemma3ForCausalLM,
           "phi3": transformers.Phi3ForCausalLM, "qwen3moe": transformers.Qwen3MoeForCausalLM,
           "gpt-oss": transformers.GptOssForCausalLM}[arch]
    torch.manual_seed(seed)
    model = cls(hf_config(kind, **overrides)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.2 * torch.randn_like(p) if p.ndim == 1 else torch.randn_like(p) / p.shape[-1] ** 0.5)
            if arch == "gpt-oss" and name.endswith("experts.gate_up_proj"):
                p.mul_(4.0)
            elif name.endswith("self_attn.sinks"):
                p.mul_(10.0)
    return model



def random_ids(n, seed=0, n_vocab=128):
    """n token ids drawn uniformly from [0, n_vocab), seeded."""
    import numpy as np
    return np.random.default_rng(seed).integers(0, n_vocab, n).tolist()


def hf_logits(model, ids, position_ids=None, **overrides):
    """float64 logits [len(ids), n_vocab] of a transformers model over one sequence; `model` may also
    be a kind's name (hf_model(kind, **overrides) is built)."""
    import torch
    if isinstance(model, str):
        model = hf_model(model, **overrides)
    kw = {} if position_ids is None else {"position_ids": torch.tensor(position_ids)}
    with torch.no_grad():
        return model(torch.tensor([ids]), **kw).logits[0].double().numpy()


def prefill_then_decode(m, ids, n_prefill):
    """A pyggml Model's logits over ids: the first n_prefill in one eval, then one eval per id."""
    import numpy as np
    return np.concatenate([m.eval(ids[:n_prefill])] + [m.eval([t]) for t in ids[n_prefill:]])


def rel_err(got, ref):
    """The largest, over rows, of max |got - ref| / max |ref| in the row."""
    import numpy as np
    return float((np.abs(got - ref).max(axis=-1) / np.abs(ref).max(axis=-1)).max())

# Qwen2-VL with a vision tower that fits the text model (merger output = n_embd): 3 blocks (llama.cpp's
# tensor map names mm.2 only when the depth exceeds 2), head_dim 16 (four (h, w) RoPE sections of 4), an
# MLP width (96) unlike the merger output (64) that llama.cpp writes as feed_forward_length
VISION = {"depth": 3, "embed_dim": 32, "hidden_size": 64, "num_heads": 2, "mlp_ratio": 3, "patch_size": 14,
          "spatial_merge_size": 2, "temporal_patch_size": 2}
# the image processor: few pixels, so a test image is a few patches
IMAGE_PROCESSOR = {"min_pixels": 28 * 28 * 2, "max_pixels": 28 * 28 * 16}


def qwen2vl_vision_model(seed=0):
    """hf_model("qwen2vl") with the VISION tower; its LayerNorm weights near 1 as the text norms."""
    import torch
    model = hf_model("qwen2vl", seed, vision_config=VISION)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if re.search(r"(norm1|norm2|ln_q)\.weight$", name):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
    return model


def image_processor():
    """transformers' Qwen2-VL image processor (its Pillow backend) with IMAGE_PROCESSOR's limits."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    return Qwen2VLImageProcessorPil(**IMAGE_PROCESSOR)


@functools.cache
def _converted_mm(outtype, directory, seed):
    from pyggml.convert import convert_hf
    d = Path(directory)
    text, mmproj = d / f"qwen2vl-mm-{outtype}-{seed}.gguf", d / f"mmproj-qwen2vl-{outtype}-{seed}.gguf"
    convert_hf(qwen2vl_vision_model(seed), text, outtype=outtype, mmproj=mmproj, image_processor=image_processor())
    return text, mmproj


def converted_mm(outtype, directory, seed=0):
    """(text GGUF, mmproj GGUF) pyggml.convert writes for qwen2vl_vision_model(seed), in `directory`."""
    return _converted_mm(outtype, str(directory), seed)


@functools.cache
def _converted(kind, outtype, directory, seed):
    from pyggml.convert import convert_hf
    path = Path(directory) / f"{kind}-{outtype}-{seed}.gguf"
    convert_hf(hf_model(kind, seed), path, outtype=outtype)
    return path


def converted(kind, outtype, directory, seed=0):
    """The GGUF file pyggml.convert.convert_hf writes for hf_model(kind, seed), in `directory`
    (converted once per process for each argument set)."""
    return _converted(kind, outtype, str(directory), seed)


# tokenizers built from a small text, for the converter's vocabulary and pyggml.tokenizer

TEXT = ["hello world, this is a small test of the tokenizer", "the quick brown fox jumps over the lazy dog",
        "pyggml runs gguf models: 123 4567 890!", "   spaces\tand\nnewlines  ", "héllo wörld ünïcode 你好"] * 20

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def bpe_tokenizer(directory, vocab_size=300):
    """A byte-level BPE tokenizer with Qwen2's pre-tokenizer and special tokens, trained on TEXT and
    saved as a transformers tokenizer in `directory` (tokenizer.json, tokenizer_config.json)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(SPECIAL), initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(TEXT, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    fast.add_special_tokens({"additional_special_tokens": SPECIAL[1:]})
    fast.save_pretrained(directory)
    return fast


def spm_tokenizer(directory, vocab_size=320):
    """A sentencepiece BPE model with byte fallback trained on TEXT, saved as `directory`/tokenizer.model
    (llama's <unk>, <s>, </s> at 0, 1, 2; 256 byte tokens from 3). Returns the SentencePieceProcessor."""
    import io

    import sentencepiece as spm
    blob = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(TEXT), model_writer=blob, vocab_size=vocab_size,
                                   model_type="bpe", byte_fallback=True, character_coverage=1.0, minloglevel=2,
                                   # as llama.cpp's SPM tokenizer: no Unicode normalisation, spaces kept
                                   normalization_rule_name="identity", remove_extra_whitespaces=False)
    Path(directory).mkdir(parents=True, exist_ok=True)
    (Path(directory) / "tokenizer.model").write_bytes(blob.getvalue())
    return spm.SentencePieceProcessor(model_proto=blob.getvalue())


def llama_hf_tokenizer(directory, vocab_size=320):
    """A Llama-2-style tokenizer.json (sentencepiece-like BPE with byte fallback, no tokenizer.model)
    trained on TEXT: <unk>, <s>, </s>, then the 256 byte tokens. Returns the transformers tokenizer."""
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    specials = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tok.train_from_iterator(TEXT, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                                      show_progress=False))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(directory)
    return fast


# ---- llama.cpp's side (tests marked llama_cpp) ----

def assert_same_gguf(got, ref):
    """The GGUFFiles got and ref hold the same keys in the same order, of the same types and values
    (floats as float32), and the same tensors in the same order, byte for byte."""
    import numpy as np
    assert list(got.metadata) == list(ref.metadata)
    for key, value in ref.metadata.items():
        assert got.types[key] == ref.types[key], key
        if isinstance(value, float) or (isinstance(value, list) and value and isinstance(value[0], float)):
            np.testing.assert_array_equal(np.float32(got.metadata[key]), np.float32(value), err_msg=key)
        else:
            assert got.metadata[key] == value, key
    assert list(got.tensors) == list(ref.tensors)
    for name, t in ref.tensors.items():
        assert (got.tensors[name].type, got.tensors[name].ne) == (t.type, t.ne), name
        assert got.tensors[name].tobytes() == t.tobytes(), name


def llama_cpp_quantize(src, dst, ftype):
    """llama.cpp's quantizer (llama_model_quantize, one thread) of the GGUF src into dst as
    llama_ftype `ftype` (15: Q4_K_M)."""
    import ctypes

    import pytest
    llama_cpp = pytest.importorskip("llama_cpp")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.nthread = ftype, 1
    assert llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params)) == 0
    return dst
