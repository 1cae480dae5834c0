"""Hugging Face models to GGUF, laid out as llama.cpp's convert_hf_to_gguf.py lays them out.

    pyggml.convert.convert_hf("path/to/hf-folder", "model.gguf", outtype="f16")
    pyggml.convert.convert_hf(transformers_model, "model.gguf", tokenizer=hf_tokenizer)

Architectures (HF class -> GGUF architecture): LlamaForCausalLM, LlamaModel, MistralForCausalLM ->
llama; Qwen2ForCausalLM, Qwen2Model -> qwen2; Qwen3ForCausalLM -> qwen3; Qwen3MoeForCausalLM -> qwen3moe
(experts stacked into 3-D tensors); Qwen2VLForConditionalGeneration,
Qwen2_5_VLForConditionalGeneration -> qwen2vl (the text decoder); Gemma2ForCausalLM -> gemma2;
Gemma3ForCausalLM, Gemma3ForConditionalGeneration -> gemma3 (the text decoder); Phi3ForCausalLM -> phi3;
GptOssForCausalLM -> gpt-oss (float checkpoints). The vision tower of
Qwen2VLForConditionalGeneration goes to a separate mmproj file (`mmproj=`: architecture "clip",
projector "qwen2vl_merger"), as llama.cpp's converter writes it with --mmproj (Qwen2VLVisionModel);
so does Gemma3ForConditionalGeneration's SigLIP tower and projector (projector "gemma3",
Gemma3VisionModel).

As llama.cpp: tensor names from the gguf package's TensorNameMap; llama's Q/K rows permuted from
HF's rotate-half order to the interleaved order of RoPE NORMAL; 1-D tensors, norms, biases and MoE
routers (ffn_gate_inp) in F32;
other weights in `outtype` (f32, f16, q8_0 with the gguf package's reference quantiser), Q8_0 falling
back to F16 for a tensor whose rows are not a multiple of 32; outtype q4_k_m gives each weight the
type llama-quantize's Q4_K_M mixture gives it (pyggml._mixtures: Q4_K, Q6_K for the output and some
attn_v/ffn_down, llama.cpp's fallbacks), quantised with ggml's reference quantisers as llama-quantize
does without an importance matrix (the bytes llama-quantize makes from an f32 conversion); the metadata keys of TextModel and the
architecture's class; the vocabulary from tokenizer.model (sentencepiece), else a Llama-style
tokenizer.json, else the byte-level BPE tokenizer. Where pyggml differs: tokenizer.ggml.pre of a BPE
vocabulary is chosen by architecture (qwen2/qwen2vl/qwen3/qwen3moe: "qwen2", llama: "llama-bpe"; `tokenizer_pre`
overrides it) instead of from llama.cpp's table of tokenizer hashes, and a model without tokenizer
files is converted without vocabulary metadata (llama.cpp stops).

A transformers model object is first saved (save_pretrained) to a temporary folder, so both inputs
take one path: the checkpoint names, config.json and tokenizer files llama.cpp reads.
"""
import contextlib
import json
import logging
import math
import os
import re
import tempfile
import warnings
from pathlib import Path

import numpy as np

from pyggml._enums import Type
from pyggml._mixtures import FTYPES, tensor_types
from pyggml._tensor import Context
from pyggml.gguf import _gguf, _write

__all__ = ["OUTTYPES", "add_arguments", "convert_hf", "main"]

OUTTYPES = ("f32", "f16", "q8_0", "q4_k_m")
# (type, LlamaFileType); a mixture (q4_k_m) picks each tensor's type in pyggml._mixtures
_OUTTYPE = {"f32": (Type.F32, 0), "f16": (Type.F16, 1), "q8_0": (Type.Q8_0, 7), **FTYPES}

# tensors llama.cpp never converts
_SKIP_SUFFIXES = (".attention.masked_bias", ".attention.bias", ".rotary_emb.inv_freq")


def _find(hp, keys, optional=True):
    for k in keys:
        if k in hp:
            return hp[k]
    if optional:
        return None
    raise KeyError(f"convert: the config has none of {keys}")


class TextConverter:
    """A decoder-only text model: TextModel of convert_hf_to_gguf.py. Subclasses set `arch` (the GGUF
    architecture) and `hf_archs`, and adjust rename / transform / set_vocab / set_parameters."""
    arch = None
    hf_archs = ()
    tokenizer_pre = None            # tokenizer.ggml.pre of a byte-level BPE vocabulary
    mixtures = True                 # pyggml._mixtures gives its tensors llama-quantize's types (q4_k_m)

    def __init__(self, hparams, hf_arch):
        if "text_config" in hparams:                         # a multimodal config: the text model's keys win
            hparams = {**hparams, **hparams["text_config"]}
        self.hp = hparams
        self.hf_arch = hf_arch
        self.n_layer = _find(hparams, ("n_layers", "num_hidden_layers", "n_layer", "num_layers"), False)
        self.rope = dict(hparams.get("rope_parameters") or hparams.get("rope_scaling") or {})
        if "full_attention" not in self.rope and "sliding_attention" not in self.rope:
            # the top-level keys mirrored into the RoPE parameters, as TextModel.__init__
            local = _find(hparams, ("local_rope_theta", "rope_local_theta", "rope_theta_local", "swa_rope_theta",
                                    "rope_local_base_freq"))
            if local is not None:
                self.rope["sliding_attention"] = {"rope_theta": local}
            theta = _find(hparams, ("global_rope_theta", "rope_global_theta", "rope_theta_global", "rope_theta",
                                    "rotary_emb_base"))
            if "rope_theta" not in self.rope and theta is not None:
                self.rope["rope_theta"] = theta
            if "rope_type" not in self.rope and "type" in self.rope:
                self.rope["rope_type"] = self.rope["type"]
            for key, keys in (("partial_rotary_factor", ("partial_rotary_factor", "rope_pct", "rope_percent")),
                              ("original_max_position_embeddings", ("original_max_position_embeddings",))):
                value = _find(hparams, keys)
                if key not in self.rope and value is not None:
                    self.rope[key] = value
        # the global layers' RoPE (Gemma 3 keeps one per layer kind) and the sliding-window layers' base
        self.rope_full = self.rope.get("full_attention", self.rope)
        self.rope_theta_swa = self.rope.get("sliding_attention", {}).get("rope_theta")
        self.model_dir = None           # the folder being converted (set by convert_hf)

    # tensors

    def rename(self, name):
        """The HF tensor name TensorNameMap should see, or None to skip the tensor."""
        return name

    def transform(self, name, data):
        """The tensor as it is stored (after rename: name is the HF name)."""
        return data

    def extra_tensors(self):
        """(GGUF name, float32 array) of tensors computed from the config, written first."""
        return ()

    def merge(self, items):
        """The checkpoint's (tensor, name after rename, HF name) as the tensor map names them: where
        llama.cpp's modify_tensors joins or splits checkpoint tensors (experts), a subclass yields
        _Lazy tensors in their place, at the position llama.cpp writes them."""
        return items

    def stored_shape(self, name, shape):
        """The numpy-order shape a checkpoint tensor (HF name after rename) is stored with."""
        return shape

    def parts(self, name):
        """The HF names (each mapped by TensorNameMap) of the tensors one checkpoint tensor (after
        rename) becomes: itself, or the pieces transform and stored_shape then cut from it."""
        return (name,)

    def add_tensor_keys(self, w):
        """Keys llama.cpp adds while it prepares the tensors, so before general.*."""

    # metadata

    def set_parameters(self, w, ftype):
        """The model's keys, in llama.cpp's order (TextModel.set_gguf_parameters); ftype: general.file_type."""
        gguf, hp = _gguf(), self.hp
        w.add_block_count(self.n_layer)
        for add, keys in ((w.add_context_length, ("max_position_embeddings", "n_ctx", "n_positions", "max_length",
                                                  "max_sequence_length", "model_max_length")),
                          (w.add_embedding_length, ("hidden_size", "n_embd", "dim")),
                          (w.add_feed_forward_length, ("intermediate_size", "n_inner", "hidden_dim")),
                          (w.add_head_count, ("num_attention_heads", "n_head", "n_heads")),
                          (w.add_head_count_kv, ("num_key_value_heads", "n_kv_heads"))):
            value = _find(hp, keys)
            if value is not None:
                add(value)
        if hp.get("is_causal") is False:
            w.add_causal_attention(False)
        rope = self.rope_full
        rope_type, factor = rope.get("rope_type"), rope.get("factor")
        if rope_type == "linear" and factor is not None:
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(factor)
        elif rope_type == "yarn" and factor is not None:
            w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
            w.add_rope_scaling_factor(factor)
            w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
            for add, keys in ((w.add_rope_scaling_yarn_ext_factor, ("extrapolation_factor",)),
                              (w.add_rope_scaling_yarn_attn_factor, ("attention_factor", "attn_factor")),
                              (w.add_rope_scaling_yarn_beta_fast, ("beta_fast",)),
                              (w.add_rope_scaling_yarn_beta_slow, ("beta_slow",))):
                value = _find(rope, keys)
                if value is not None:
                    add(value)
        elif rope_type in ("su", "longrope"):
            w.add_rope_scaling_type(gguf.RopeScalingType.LONGROPE)
        elif rope_type not in (None, "default", "llama3", "dynamic"):
            warnings.warn(f"convert: RoPE scaling {rope_type!r} is not converted (as llama.cpp)", stacklevel=3)
        if "mrope_section" in self.rope:
            sections = list(self.rope["mrope_section"])
            w.add_rope_dimension_sections((sections + [0] * 4)[:4])
        if "rope_theta" in rope:
            w.add_rope_freq_base(rope["rope_theta"])
        if self.rope_theta_swa is not None:
            w.add_rope_freq_base_swa(self.rope_theta_swa)
        eps = _find(hp, ("rms_norm_eps", "norm_eps"))
        if eps is not None:
            w.add_layer_norm_rms_eps(eps)
        eps = _find(hp, ("layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"))
        if eps is not None:
            w.add_layer_norm_eps(eps)
        for add, keys in ((w.add_expert_count, ("num_local_experts", "num_experts", "n_routed_experts")),
                          (w.add_expert_used_count, ("num_experts_per_tok", "num_experts_per_token", "top_k_experts"))):
            value = _find(hp, keys)
            if value is not None:
                add(value)
        if hp.get("head_dim") is not None:
            w.add_key_length(hp["head_dim"])
            w.add_value_length(hp["head_dim"])
        w.add_file_type(ftype)

    # vocabulary

    def set_vocab(self, w, tok_dir, pre):
        """The sentencepiece vocabulary, else the byte-level BPE one (Qwen2Model.set_vocab)."""
        try:
            _vocab_sentencepiece(w, tok_dir, self.hp)
        except FileNotFoundError:
            _vocab_gpt2(w, tok_dir, self.hp, pre or self.tokenizer_pre)


def _permute(w, n_head):
    """HF's Q/K rows (per head: the first halves of the rotated pairs, then the second halves) in
    ggml's RoPE NORMAL order (pairs adjacent): llama.cpp's LlamaModel.permute."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


_MULTIMODAL = re.compile(r"vision_tower|vision_model|audio_tower|model\.connector|multi_modal_projector|"
                         r"^(vision_encoder\.|vision_language_adapter\.|patch_merger\.|pre_mm_projector_norm|"
                         r"audio_encoder\.)")


class LlamaConverter(TextConverter):
    """LlamaModel: Q/K permuted for RoPE NORMAL, vocab_size and rope.dimension_count written."""
    arch = "llama"
    hf_archs = ("LlamaForCausalLM", "LLaMAForCausalLM", "MistralForCausalLM", "LlamaModel")
    tokenizer_pre = "llama-bpe"

    def rename(self, name):
        if _MULTIMODAL.search(name):
            return None
        if self.hf_arch == "LlamaModel":
            return "model." + name
        if name.startswith("model.text_model"):
            return name.replace("text_model.", "")
        if name.startswith("language_model."):
            return name.replace("language_model.", "")
        return name

    def transform(self, name, data):
        n_head = _find(self.hp, ("n_heads", "num_attention_heads"), False)
        if name.endswith(("q_proj.weight", "q_proj.bias")):
            return _permute(data, n_head)
        if name.endswith(("k_proj.weight", "k_proj.bias")):
            n_head_kv = _find(self.hp, ("n_kv_heads", "num_key_value_heads")) or n_head
            return _permute(data, n_head_kv)
        return data

    def extra_tensors(self):
        """rope_freqs.weight for Llama 3's RoPE scaling (LlamaModel.generate_extra_tensors)."""
        if str(self.rope.get("rope_type", "")).lower() != "llama3":
            return ()
        base = self.rope.get("rope_theta", 10000.0)
        dim = self.hp.get("head_dim") or self.hp["hidden_size"] // self.hp["num_attention_heads"]
        freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
        factor = self.rope.get("factor", 8.0)
        low, high = self.rope.get("low_freq_factor", 1.0), self.rope.get("high_freq_factor", 4.0)
        old_ctx = self.hp.get("original_max_position_embeddings", 8192)
        factors = []
        for f in freqs:
            wavelen = 2 * math.pi / f
            if wavelen < old_ctx / high:
                factors.append(1.0)
            elif wavelen > old_ctx / low:
                factors.append(factor)
            else:
                smooth = (old_ctx / wavelen - low) / (high - low)
                factors.append(1 / ((1 - smooth) / factor + smooth))
        return [("rope_freqs.weight", np.array(factors, dtype=np.float32))]

    def set_parameters(self, w, ftype):
        super().set_parameters(w, ftype)
        w.add_vocab_size(self.hp["vocab_size"])
        w.add_rope_dimension_count(self.hp.get("head_dim") or self.hp["hidden_size"] // self.hp["num_attention_heads"])

    def set_vocab(self, w, tok_dir, pre):
        """sentencepiece, else a Llama tokenizer.json (gguf.LlamaHfVocab), else byte-level BPE (Llama 3)."""
        try:
            _vocab_sentencepiece(w, tok_dir, self.hp)
        except FileNotFoundError:
            try:
                _vocab_llama_hf(w, tok_dir)
            except (FileNotFoundError, TypeError):
                _vocab_gpt2(w, tok_dir, self.hp, pre or self.tokenizer_pre)
        config = tok_dir / "tokenizer_config.json"
        if config.is_file():
            cfg = json.loads(config.read_text(encoding="utf-8"))
            if "add_prefix_space" in cfg:
                w.add_add_space_prefix(cfg["add_prefix_space"])


class Qwen2Converter(TextConverter):
    """Qwen2Model: vision and audio tensors of multimodal checkpoints skipped."""
    arch = "qwen2"
    hf_archs = ("Qwen2ForCausalLM", "Qwen2Model")
    tokenizer_pre = "qwen2"

    def rename(self, name):
        if self.hf_arch == "Qwen2Model":
            name = "model." + name
        name = name.replace("language_model.", "")
        if name.startswith(("mlp", "multi_modal_projector", "vision_model", "audio_tower", "model.vision_tower",
                            "model.multi_modal_projector", "vision_tower.")):
            return None
        return name


class Qwen2VLConverter(TextConverter):
    """Qwen2VLModel: the text decoder; rope.dimension_sections from rope_parameters' mrope_section."""
    arch = "qwen2vl"
    hf_archs = ("Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration", "Qwen2VLModel")
    tokenizer_pre = "qwen2"

    def rename(self, name):
        name = name.removeprefix("thinker.")
        if name.startswith(("visual", "audio", "talker", "token2wav")):
            return None
        return name


class Qwen3Converter(Qwen2Converter):
    """Qwen3Model: qwen2's layout under architecture qwen3 (the Q/K norms are named by TensorNameMap)."""
    arch = "qwen3"
    hf_archs = ("Qwen3ForCausalLM",)


class Qwen3MoeConverter(Qwen3Converter):
    """Qwen3MoeModel (Qwen2MoeModel's tensors and keys): each layer's per-expert gate/up/down matrices
    stacked into one [n_expert, rows, cols] tensor each (ffn_down_exps, ffn_gate_exps, ffn_up_exps,
    written where the layer's last expert tensor comes), or a fused checkpoint's experts.gate_up_proj
    split into gate and up; expert_feed_forward_length (moe_intermediate_size) and, unlike
    llama.cpp, expert_weights_norm = false for a model with norm_topk_prob false (llama.cpp writes
    nothing and renormalises the chosen experts' weights of every qwen3moe file; pyggml then runs
    such a model as transformers does)."""
    arch = "qwen3moe"
    hf_archs = ("Qwen3MoeForCausalLM",)

    def merge(self, items):
        n_experts = _find(self.hp, ("num_local_experts", "num_experts"), False)
        pending = {}                                   # layer -> {name: tensor} of its expert matrices
        for t, name, hf_name in items:
            base = name.removesuffix(".weight")
            if base.endswith("mlp.experts.down_proj"):
                yield t, base + ".weight", hf_name
            elif base.endswith("mlp.experts.gate_up_proj"):
                if len(t.shape) < 3 or t.shape[-2] % 2:
                    raise ValueError(f"convert_hf: {hf_name}: expected [n_expert, 2 * n_ff, n_embd], got {tuple(t.shape)}")
                half = t.shape[-2] // 2
                shape = (*t.shape[:-2], half, t.shape[-1])
                stem = base.removesuffix(".gate_up_proj")
                yield _Lazy(shape, lambda t=t, h=half: _numpy(t)[..., :h, :]), stem + ".gate_proj.weight", hf_name
                yield _Lazy(shape, lambda t=t, h=half: _numpy(t)[..., h:, :]), stem + ".up_proj.weight", hf_name
            elif "experts" in name:
                bid = next(int(part) for part in name.split(".") if part.isdecimal())
                layer = pending.setdefault(bid, {})
                layer[name] = t
                if len(layer) < 3 * n_experts:
                    continue
                for proj in ("down_proj", "gate_proj", "up_proj"):
                    parts = [layer.pop(f"model.layers.{bid}.mlp.experts.{e}.{proj}.weight") for e in range(n_experts)]
                    yield (_Lazy((n_experts, *parts[0].shape), lambda parts=parts: np.stack([_numpy(p) for p in parts])),
                           f"model.layers.{bid}.mlp.experts.{proj}.weight", name)
                del pending[bid]
            else:
                yield t, name, hf_name
        left = sorted(n for layer in pending.values() for n in layer)
        if left:
            raise ValueError(f"convert_hf: expert tensors without all {n_experts} experts of their layer: {left[:6]}")

    def set_parameters(self, w, ftype):
        super().set_parameters(w, ftype)
        hp = self.hp
        if hp.get("moe_intermediate_size") is not None:
            w.add_expert_feed_forward_length(hp["moe_intermediate_size"])
        if hp.get("shared_expert_intermediate_size") is not None:
            w.add_expert_shared_feed_forward_length(hp["shared_expert_intermediate_size"])
        if hp.get("norm_topk_prob") is False:
            w.add_expert_weights_norm(False)



@contextlib.contextmanager
def _rewriting_keys():
    """Silence the gguf writer's warning for keys written twice: llama.cpp's Gemma 3 writes some keys
    again after TextModel's, and the writer keeps each where it was first added, with the last value."""
    log = logging.getLogger("gguf.gguf_writer")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


class Gemma2Converter(TextConverter):
    """Gemma2Model: norm weights stored as 1 + w (HF's Gemma RMSNorm scales by 1 + w), lm_head (the
    embedding, always tied) skipped, its own keys (no TextModel ones: no rope.freq_base) with the
    soft-capping values and the sliding window; the sentencepiece vocabulary without a space prefix."""
    arch = "gemma2"
    hf_archs = ("Gemma2ForCausalLM",)
    tokenizer_pre = "default"

    def rename(self, name):
        return None if name == "lm_head.weight" else name

    def transform(self, name, data):
        # in the checkpoint's float type, as llama.cpp adds 1 to the torch tensor (bf16 arrives as f32)
        return data + 1 if name.endswith("norm.weight") else data

    def set_parameters(self, w, ftype):
        hp = self.hp
        w.add_context_length(hp["max_position_embeddings"])
        w.add_embedding_length(hp["hidden_size"])
        w.add_block_count(self.n_layer)
        w.add_feed_forward_length(hp["intermediate_size"])
        w.add_head_count(hp["num_attention_heads"])
        w.add_head_count_kv(hp.get("num_key_value_heads", hp["num_attention_heads"]))
        w.add_layer_norm_rms_eps(hp["rms_norm_eps"])
        w.add_key_length(hp["head_dim"])
        w.add_value_length(hp["head_dim"])
        w.add_file_type(ftype)
        w.add_attn_logit_softcapping(hp["attn_logit_softcapping"])
        w.add_final_logit_softcapping(hp["final_logit_softcapping"])
        w.add_sliding_window(hp["sliding_window"])

    def set_vocab(self, w, tok_dir, pre):
        _vocab_sentencepiece(w, tok_dir, self.hp)
        w.add_add_space_prefix(False)


class Gemma3Converter(TextConverter):
    """Gemma3Model, text decoder: norm weights (Q/K norms too) stored as 1 + w; TextModel's keys (with
    rope.freq_base_swa, the local layers' base) and Gemma 3's own after them (the global layers'
    rope.freq_base, final_logit_softcapping when set, the sliding window unless every layer is
    global); the embedding cut to the tokenizer.json's vocabulary when there is no tokenizer.model."""
    arch = "gemma3"
    hf_archs = ("Gemma3ForCausalLM",)
    tokenizer_pre = "default"

    def _n_vocab_real(self):
        """llama.cpp's count of real tokens, or None (no tokenizer files: nothing to cut)."""
        d = self.model_dir
        if d is None or (d / "tokenizer.model").is_file() or not (d / "tokenizer.json").is_file():
            return None
        tok = json.loads((d / "tokenizer.json").read_text(encoding="utf-8"))
        return len(tok["model"]["vocab"]) + len(tok.get("added_tokens", []))

    def stored_shape(self, name, shape):
        n = self._n_vocab_real() if "embed_tokens.weight" in name else None
        return shape if n is None else (min(n, shape[0]), *shape[1:])

    def transform(self, name, data):
        if "embed_tokens.weight" in name:
            data = data[:self.stored_shape(name, data.shape)[0]]
        return data + 1 if name.endswith("norm.weight") else data

    def set_parameters(self, w, ftype):
        super().set_parameters(w, ftype)
        hp = self.hp
        with _rewriting_keys():
            w.add_context_length(hp.get("max_position_embeddings", 131072))
            w.add_head_count(hp.get("num_attention_heads", 8))
            w.add_layer_norm_rms_eps(hp.get("rms_norm_eps", 1e-6))
            w.add_key_length(hp.get("head_dim", 256))
            w.add_value_length(hp.get("head_dim", 256))
            w.add_rope_freq_base(self.rope_full.get("rope_theta", 1_000_000.0))
            if hp.get("attn_logit_softcapping") is not None:
                raise ValueError("convert_hf: Gemma 3 has no attention soft-capping (as llama.cpp), got "
                                 f"attn_logit_softcapping={hp['attn_logit_softcapping']}")
            if hp.get("final_logit_softcapping"):
                w.add_final_logit_softcapping(hp["final_logit_softcapping"])
            if hp.get("sliding_window_pattern") != 1:
                w.add_sliding_window(hp["sliding_window"])
            w.add_head_count_kv(hp.get("num_key_value_heads", 4))

    def set_vocab(self, w, tok_dir, pre):
        if (tok_dir / "tokenizer.model").is_file():
            _vocab_sentencepiece(w, tok_dir, self.hp)
            w.add_add_space_prefix(False)
        else:
            _vocab_gpt2(w, tok_dir, self.hp, pre or self.tokenizer_pre)


# what TextModel.filter_tensors of convert_hf_to_gguf.py drops from a multimodal checkpoint: names that
# start with one of the prefixes or hold one of the parts (vision and audio towers, projectors)
_MM_PREFIXES = ("mlp", "vit.", "vpm.", "siglip2.", "conformer.", "merger.", "resampler.", "sound_encoder.",
                "sound_projection.", "speech_embeddings.")
_MM_PARTS = ("visual.", "vision.", "audio.", "talker.", "vision_", "audio_", "token2wav.", "code2wav.", "projector.",
             "pre_mm_projector_norm", "image_newline", "view_seperator", "patch_embed", "patch_embedding",
             "patch_merger.", "patch_merge_mlp.", "model.connector.")


class Gemma3VLConverter(Gemma3Converter):
    """Gemma3ForConditionalGeneration (Gemma 3 4B/12B/27B), the text decoder: Gemma3Model of
    convert_hf_to_gguf.py on the text_config (merged over the top-level keys by TextConverter), the
    SigLIP vision tower and the multimodal projector dropped, "language_model." taken out of the names
    (`language_model.model.layers.0...` and `model.language_model.layers.0...` both become
    `model.layers.0...`)."""
    hf_archs = ("Gemma3ForConditionalGeneration",)

    def rename(self, name):
        if name.startswith(_MM_PREFIXES) or any(part in name for part in _MM_PARTS):
            return None
        return name.replace("language_model.", "")


class Phi3Converter(TextConverter):
    """Phi3MiniModel: the fused attn_qkv and ffn_up (gate then up) as HF stores them; its own keys
    (rope.scaling.original_context_length, rope.dimension_count from partial_rotary_factor, the
    sliding window, 0 when unset); LongRoPE's rope_factors_long/short tensors with
    rope.scaling.attn_factor, sqrt(1 + ln(s) / ln(n_ctx_orig)) for s = n_ctx / n_ctx_orig > 1."""
    arch = "phi3"
    hf_archs = ("Phi3ForCausalLM",)
    tokenizer_pre = "default"

    def _dims(self):
        hp = self.hp
        n_embd, n_head = _find(hp, ("hidden_size", "n_embd"), False), _find(hp, ("num_attention_heads", "n_head"), False)
        return n_embd, n_head, int(self.rope_full.get("partial_rotary_factor", 1.0) * n_embd) // n_head

    def _long_rope(self):
        """(attn_factor, long, short) of a LongRoPE model, else None; ValueError for what llama.cpp refuses."""
        long, short = self.rope.get("long_factor"), self.rope.get("short_factor")
        if not long:
            return None
        n_ctx = _find(self.hp, ("n_positions", "max_position_embeddings"), False)
        n_orig = self.rope["original_max_position_embeddings"]
        scale = n_ctx / n_orig
        kind = str(self.rope.get("rope_type", "")).lower()
        if kind in ("su", "longrope"):
            attn_factor = math.sqrt(1 + math.log(scale) / math.log(n_orig)) if scale > 1.0 else 1.0
        elif kind == "yarn":
            attn_factor = 0.1 * math.log(scale) + 1.0 if scale > 1.0 else 1.0
        else:
            raise ValueError(f"convert_hf: Phi-3 RoPE scaling {kind!r} with long_factor is not supported (as llama.cpp)")
        n_rot = self._dims()[2]
        if short is None or len(long) != len(short) or 2 * len(long) != n_rot:
            raise ValueError(f"convert_hf: Phi-3 long_factor and short_factor must have {n_rot // 2} values each, got "
                             f"{len(long)} and {None if short is None else len(short)}")
        return attn_factor, long, short

    def extra_tensors(self):
        lr = self._long_rope()
        if lr is None:
            return ()
        return [("rope_factors_long.weight", np.array(lr[1], np.float32)),
                ("rope_factors_short.weight", np.array(lr[2], np.float32))]

    def add_tensor_keys(self, w):
        lr = self._long_rope()
        if lr is not None:
            w.add_rope_scaling_attn_factors(lr[0])

    def set_parameters(self, w, ftype):
        hp = self.hp
        n_embd, n_head, n_rot = self._dims()
        w.add_context_length(_find(hp, ("n_positions", "max_position_embeddings"), False))
        w.add_rope_scaling_orig_ctx_len(self.rope["original_max_position_embeddings"])
        w.add_embedding_length(n_embd)
        w.add_feed_forward_length(hp["intermediate_size"])
        w.add_block_count(self.n_layer)
        w.add_head_count(n_head)
        w.add_head_count_kv(_find(hp, ("num_key_value_heads", "n_head_kv"), False))
        w.add_layer_norm_rms_eps(hp["rms_norm_eps"])
        w.add_rope_dimension_count(n_rot)
        w.add_rope_freq_base(self.rope_full["rope_theta"])
        w.add_file_type(ftype)
        w.add_sliding_window(hp.get("sliding_window") or 0)

    def set_vocab(self, w, tok_dir, pre):
        config = tok_dir / "tokenizer_config.json"
        cfg = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else {}
        if cfg.get("tokenizer_class") == "GPT2Tokenizer":            # Phi-4
            _vocab_gpt2(w, tok_dir, self.hp, pre or self.tokenizer_pre)
        else:
            _vocab_phi3(w, tok_dir, self.hp, cfg)


# gpt-oss's fused or unsuffixed expert tensors -> the HF-style names of the GGUF tensors they become
_GPT_OSS_PARTS = {"experts.gate_up_proj": ("experts.gate_proj.weight", "experts.up_proj.weight"),
                  "experts.gate_up_proj_bias": ("experts.gate_proj.bias", "experts.up_proj.bias"),
                  "experts.down_proj": ("experts.down_proj.weight",),
                  "experts.down_proj_bias": ("experts.down_proj.bias",)}


class GptOssConverter(TextConverter):
    """GptOssModel from a float (bf16/f32) checkpoint: each layer's fused experts.gate_up_proj [E, n_embd,
    2 n_ff] (gate and up columns interleaved) split into ffn_gate_exps and ffn_up_exps [E, n_ff, n_embd]
    (its bias likewise), experts.down_proj transposed to [E, n_embd, n_ff], self_attn.sinks named
    attn_sinks.weight; TextModel's keys (expert counts included) with the sliding window and the expert
    FFN width; the byte-level BPE vocabulary, tokenizer.ggml.pre "gpt-4o" (the released tokenizer's).
    Checkpoints with MXFP4 experts (*_blocks / *_scales, which llama.cpp repacks) are refused."""
    arch = "gpt-oss"
    hf_archs = ("GptOssForCausalLM",)
    tokenizer_pre = "gpt-4o"
    mixtures = False                # llama-quantize's MoE rules (router, experts) are not in pyggml._mixtures

    def rename(self, name):
        if name.endswith(("_blocks", "_scales")):
            raise ValueError(f"convert_hf: {name}: gpt-oss checkpoints with MXFP4 experts are not supported; "
                             f"convert a float (bf16/f32) checkpoint")
        return name + ".weight" if name.endswith(".sinks") else name

    def parts(self, name):
        for fused, parts in _GPT_OSS_PARTS.items():
            if name.endswith("." + fused):
                stem = name[:-len(fused)]
                return tuple(stem + part for part in parts)
        return (name,)

    def stored_shape(self, name, shape):
        return self.transform(name, np.broadcast_to(np.float32(0), shape)).shape

    def transform(self, name, data):
        if ".experts." not in name:
            return data
        if name.endswith(".weight"):                         # [E, in, out] -> ggml's [E, out, in]
            data = data.swapaxes(-1, -2)
        if ".down_proj." in name:
            return data
        first = 0 if ".gate_proj." in name else 1           # gate, up: every other output of the fused one
        return data[..., first::2, :] if name.endswith(".weight") else data[..., first::2]

    def set_parameters(self, w, ftype):
        super().set_parameters(w, ftype)
        w.add_sliding_window(self.hp["sliding_window"])
        w.add_expert_feed_forward_length(self.hp["intermediate_size"])

    def set_vocab(self, w, tok_dir, pre):
        _vocab_gpt2(w, tok_dir, self.hp, pre or self.tokenizer_pre)


CONVERTERS = {hf: cls for cls in (LlamaConverter, Qwen2Converter, Qwen2VLConverter, Qwen3Converter, Gemma2Converter,
                                  Gemma3Converter, Gemma3VLConverter, Phi3Converter, Qwen3MoeConverter,
                                  GptOssConverter)
           for hf in cls.hf_archs}


# Qwen2VLImageProcessor's defaults (OpenAI CLIP's mean and std), for a folder without preprocessor_config.json
_CLIP_MEAN, _CLIP_STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)


class _VisionConverter:
    """What the mmproj converters share: the image processor's defaults (image_defaults: the (key,
    value) pairs _preprocessor starts from) and no per-tensor keys."""
    image_defaults = ()

    def add_tensor_keys(self, w):
        """None: every key of the vision tower comes from the config."""


class Qwen2VLVisionConverter(_VisionConverter):
    """The vision tower and merger of Qwen2-VL as an mmproj GGUF: MmprojModel and Qwen2VLVisionModel
    of convert_hf_to_gguf.py. clip.vision.* keys from the vision config (llama.cpp's renames: depth ->
    block_count, num_heads -> head_count, embed_dim -> embedding_length, and the config's hidden_size,
    the merger's output width, as feed_forward_length), image_mean/std from the image processor's
    config; the fused QKV split into attn_q/k/v, the Conv3D patch embedding into one Conv2D kernel per
    temporal step (v.patch_embd.weight and v.patch_embd.weight.1)."""
    hf_archs = ("Qwen2VLForConditionalGeneration",)
    image_defaults = (("image_mean", _CLIP_MEAN), ("image_std", _CLIP_STD))          # OpenAI CLIP's

    def __init__(self, hparams, preprocessor):
        self.global_hp = hparams
        text = {**hparams, **(hparams.get("text_config") or {})}
        self.n_embd_text = text.get("hidden_size", text.get("n_embd", 0))
        self.vhp = vhp = dict(hparams.get("vision_config") or {})
        if not vhp or not self.n_embd_text:
            raise ValueError("convert_hf: mmproj: the config has no vision_config or no text hidden_size")
        if vhp.get("temporal_patch_size", 2) != 2:
            raise ValueError(f"convert_hf: mmproj: temporal_patch_size must be 2 (as llama.cpp), got "
                             f"{vhp['temporal_patch_size']}")
        self.n_layer = vhp["depth"]
        self.pre = preprocessor

    def rename(self, name):
        return name if name.startswith("visual.") else None

    def split(self, gguf_name, data):
        """(GGUF name, array) of the tensors stored for one checkpoint tensor named gguf_name."""
        if ".attn_qkv." in gguf_name:
            c = data.shape[0] // 3
            return [(gguf_name.replace("qkv", part), data[i * c:(i + 1) * c]) for i, part in enumerate("qkv")]
        if gguf_name == "v.patch_embd.weight":
            return [(gguf_name, data[:, :, 0]), (gguf_name + ".1", data[:, :, 1])]
        return [(gguf_name, data)]

    def stored_type(self, gguf_name, shape, outtype):
        if gguf_name.startswith("v.patch_embd.weight"):          # tensor_force_quant: F16 files only
            return Type.F16 if outtype == Type.F16 else Type.F32
        return _stored_type(gguf_name, shape, outtype)

    def set_parameters(self, w, ftype):
        vhp = self.vhp
        w.add_file_type(ftype)
        w.add_clip_has_vision_encoder(True)
        w.add_vision_projection_dim(self.n_embd_text)
        w.add_vision_image_size(vhp.get("image_size", 560))
        w.add_vision_patch_size(vhp["patch_size"])
        w.add_vision_embedding_length(vhp["embed_dim"])
        w.add_vision_feed_forward_length(vhp["hidden_size"])
        w.add_vision_block_count(self.n_layer)
        w.add_vision_head_count(vhp["num_heads"])
        w.add_vision_image_mean(list(self.pre["image_mean"]))
        w.add_vision_image_std(list(self.pre["image_std"]))
        w.add_clip_projector_type(_gguf().VisionProjectorType.QWEN2VL)
        w.add_vision_attention_layernorm_eps(self.global_hp.get("rms_norm_eps", 1e-6))


class Gemma3VisionConverter(_VisionConverter):
    """The SigLIP vision tower and multimodal projector of Gemma3ForConditionalGeneration as an mmproj
    GGUF: MmprojModel and Gemma3VisionModel of convert_hf_to_gguf.py. Tensors under the released
    checkpoints' prefixes (`vision_tower.vision_model.`, `multi_modal_projector.`; also `vision_tower.`
    alone, as transformers 5 saves the tower, which llama.cpp does not convert) in checkpoint order,
    the pooling head SigLIP carries (`vision_model.head.`, unused) dropped, `_weight` read as `.weight`
    (the projector's `mm_input_projection_weight`), the projector's RMSNorm stored as 1 + w;
    `mm.input_projection` in F16 and the patch and position embeddings in F32 whatever the outtype;
    clip.vision.* keys from the vision config, image_mean/std from the image processor's config,
    projector "gemma3", GELU, and the projector's pooling factor when it is not Gemma 3's 4 (side of
    the patch grid over the side of the image_seq_length token grid)."""
    hf_archs = ("Gemma3ForConditionalGeneration",)
    image_defaults = (("image_mean", (0.5, 0.5, 0.5)), ("image_std", (0.5, 0.5, 0.5)))   # Gemma3ImageProcessor's

    def __init__(self, hparams, preprocessor):
        text = {**hparams, **(hparams.get("text_config") or {})}
        self.n_embd_text = text.get("hidden_size", text.get("n_embd", 0))
        self.vhp = vhp = dict(hparams.get("vision_config") or {})
        if not vhp or not self.n_embd_text:
            raise ValueError("convert_hf: mmproj: the config has no vision_config or no text hidden_size")
        self.n_layer = _find(vhp, ("num_hidden_layers", "n_layers", "depth", "layers"), False)
        self.pre = preprocessor
        n_tokens = self.pre.get("image_seq_length", 256)
        if not isinstance(n_tokens, int) or n_tokens < 1:
            raise ValueError(f"convert_hf: mmproj: image_seq_length must be a positive integer, got {n_tokens!r}")
        self.image_size, self.patch_size = _find(vhp, ("image_size",), False), _find(vhp, ("patch_size",), False)
        self.scale = (self.image_size // self.patch_size) // int(n_tokens ** 0.5)

    def rename(self, name):
        if name.startswith("vision_tower.") and not name.startswith("vision_tower.vision_model."):
            # transformers 5's save_pretrained drops vision_model. (llama.cpp cannot map those names)
            name = "vision_tower.vision_model." + name.removeprefix("vision_tower.")
        if "vision_model.head." in name or not name.startswith(("multi_modal_projector.", "vision_tower.",
                                                                "multimodal_projector.", "vision_model.")):
            return None
        return name.replace("_weight", ".weight")

    def split(self, gguf_name, data):
        """[(GGUF name, array)]: the tensor as stored (the projector's norm weight plus 1)."""
        return [(gguf_name, data + 1 if gguf_name == "mm.soft_emb_norm.weight" else data)]

    def stored_type(self, gguf_name, shape, outtype):
        if len(shape) > 1 and not gguf_name.endswith("_norm.weight"):     # Gemma3VisionModel.tensor_force_quant
            if gguf_name.startswith("mm.input_projection."):
                return Type.F16
            if gguf_name.startswith(("v.patch_embd.", "v.position_embd.")):
                return Type.F32
        return _stored_type(gguf_name, shape, outtype)

    def set_parameters(self, w, ftype):
        vhp = self.vhp
        w.add_file_type(ftype)
        w.add_clip_has_vision_encoder(True)
        w.add_vision_projection_dim(self.n_embd_text)
        w.add_vision_image_size(self.image_size)
        w.add_vision_patch_size(self.patch_size)
        w.add_vision_embedding_length(_find(vhp, ("hidden_size", "width"), False))
        w.add_vision_feed_forward_length(vhp["intermediate_size"])
        w.add_vision_block_count(self.n_layer)
        w.add_vision_head_count(_find(vhp, ("num_attention_heads", "num_heads", "heads"), False))
        w.add_vision_image_mean(list(self.pre["image_mean"]))
        w.add_vision_image_std(list(self.pre["image_std"]))
        w.add_clip_projector_type(_gguf().VisionProjectorType.GEMMA3)
        w.add_vision_attention_layernorm_eps(vhp.get("layer_norm_eps", 1e-6))
        w.add_vision_use_gelu(True)
        if self.scale > 0 and self.scale != 4:
            w.add_vision_projector_scale_factor(self.scale)


MMPROJ_CONVERTERS = {hf: cls for cls in (Qwen2VLVisionConverter, Gemma3VisionConverter) for hf in cls.hf_archs}


def _looks_special(token):
    """llama.cpp's TextModel.does_token_look_special."""
    return (token in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or (token.startswith("<|") and token.endswith("|>"))
            or (token.startswith("<｜") and token.endswith("｜>"))
            or (token.startswith("<unused") and token.endswith(">")))


def _sp_vocab(gguf, sp, n, tok_dir):
    """The sentencepiece model's first n pieces as GGUF token lists (tokens, scores, types; ids past
    its vocabulary "[PADi]", unused), then added_tokens.json's as user-defined tokens."""
    T = gguf.TokenType
    tokens = [f"[PAD{i}]".encode() for i in range(n)]
    scores, types = [-10000.0] * n, [T.UNUSED] * n
    for i in range(min(sp.vocab_size(), n)):
        tokens[i], scores[i] = sp.IdToPiece(i).encode(), sp.GetScore(i)
        types[i] = (T.UNKNOWN if sp.IsUnknown(i) else T.CONTROL if sp.IsControl(i) else
                    T.UNUSED if sp.IsUnused(i) else T.BYTE if sp.IsByte(i) else T.NORMAL)
    added = tok_dir / "added_tokens.json"
    if added.is_file():
        for text, i in json.loads(added.read_text(encoding="utf-8")).items():
            if i < n:
                tokens[i], scores[i], types[i] = text.encode(), -1000.0, T.USER_DEFINED
    return tokens, scores, types


def _add_sp_vocab(gguf, w, tok_dir, tokens, scores, types):
    """Write a sentencepiece vocabulary as llama.cpp's "llama" tokenizer, with the special ids."""
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    gguf.SpecialVocab(tok_dir, n_vocab=len(tokens)).add_to_gguf(w, quiet=True)


def _vocab_sentencepiece(w, tok_dir, hp):
    """tokenizer.model through sentencepiece (TextModel._create_vocab_sentencepiece); FileNotFoundError
    without one."""
    gguf = _gguf()
    path = tok_dir / "tokenizer.model"
    if not path.is_file():
        raise FileNotFoundError(path)
    try:
        from sentencepiece import SentencePieceProcessor
    except ImportError:
        raise ImportError(f"convert: {path} needs the sentencepiece package: pip install sentencepiece") from None
    sp = SentencePieceProcessor()
    sp.LoadFromFile(str(path))
    n = _find(hp, ("vocab_size_per_layer_input", "vocab_size")) or sp.vocab_size()
    T = gguf.TokenType
    tokens, scores, types = _sp_vocab(gguf, sp, n, tok_dir)
    config = tok_dir / "tokenizer_config.json"
    if config.is_file():
        decoder = json.loads(config.read_text(encoding="utf-8")).get("added_tokens_decoder", {})
        for i, data in decoder.items():
            i, text = int(i), data["content"]
            if i >= n:
                continue
            if data.get("special") or _looks_special(text):
                types[i] = T.CONTROL
            else:
                text = text.replace("\u2581", " ")
                types[i] = T.USER_DEFINED
            scores[i], tokens[i] = -1000.0, text.encode()
    _add_sp_vocab(gguf, w, tok_dir, tokens, scores, types)


def _vocab_phi3(w, tok_dir, hp, tok_config):
    """Phi3MiniModel.set_vocab: tokenizer.model, then added_tokens.json, the config's
    added_tokens_decoder and tokenizer.json's added_tokens as user-defined (control when special)
    tokens; ValueError without a tokenizer.model."""
    gguf = _gguf()
    path = tok_dir / "tokenizer.model"
    if not path.is_file():
        raise ValueError(f"convert: Phi-3 needs {path}")
    from sentencepiece import SentencePieceProcessor
    sp = SentencePieceProcessor()
    sp.LoadFromFile(str(path))
    n = hp.get("vocab_size", sp.vocab_size())
    T = gguf.TokenType
    tokens, scores, types = _sp_vocab(gguf, sp, n, tok_dir)
    entries = [(int(i), d) for i, d in tok_config.get("added_tokens_decoder", {}).items()]
    tok_json = tok_dir / "tokenizer.json"
    if tok_json.is_file():
        entries += [(int(d["id"]), d) for d in json.loads(tok_json.read_text(encoding="utf-8")).get("added_tokens", [])]
    for i, d in entries:
        if not 0 <= i < n:
            raise ValueError(f"convert: added token {d.get('content')!r} has id {i}, past the vocabulary of {n}")
        tokens[i], scores[i] = d["content"].encode(), -1000.0
        types[i] = T.CONTROL if d.get("special") else T.USER_DEFINED
    _add_sp_vocab(gguf, w, tok_dir, tokens, scores, types)


def _vocab_llama_hf(w, tok_dir):
    """A Llama (sentencepiece-style BPE with byte fallback) tokenizer.json (TextModel._set_vocab_llama_hf)."""
    gguf = _gguf()
    vocab = gguf.LlamaHfVocab(tok_dir)
    tokens, scores, types = zip(*vocab.all_tokens())
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(list(tokens))
    w.add_token_scores(list(scores))
    w.add_token_types(list(types))
    gguf.SpecialVocab(tok_dir, n_vocab=len(tokens)).add_to_gguf(w, quiet=True)


def _vocab_gpt2(w, tok_dir, hp, pre):
    """A byte-level BPE tokenizer (TextModel.get_vocab_base and _set_vocab_gpt2)."""
    gguf = _gguf()
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(tok_dir)
    vocab = tok.get_vocab()
    n = hp.get("vocab_size", len(vocab))
    if max(vocab.values()) >= n:
        raise ValueError(f"convert: the tokenizer has token id {max(vocab.values())}, past the model's vocab_size {n}")
    reverse = {i: t for t, i in vocab.items()}
    added, decoder = tok.get_added_vocab(), tok.added_tokens_decoder
    T = gguf.TokenType
    tokens, types = [], []
    for i in range(n):
        if i not in reverse:
            tokens.append(f"[PAD{i}]")
            types.append(T.UNUSED)
            continue
        token = reverse[i]
        if token in added:
            if not decoder[i].normalized:                 # llama.cpp wants added tokens pre-normalised
                token = tok.decode(tok.encode(token, add_special_tokens=False))
            if decoder[i].special or _looks_special(token):
                types.append(T.CONTROL)
            else:
                token = token.replace("\u2581", " ")
                types.append(T.USER_DEFINED)
        else:
            types.append(T.NORMAL)
        tokens.append(token)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    gguf.SpecialVocab(tok_dir, load_merges=True).add_to_gguf(w, quiet=True)


def _has_tokenizer(d):
    return any((d / f).is_file() for f in ("tokenizer.model", "tokenizer.json", "vocab.json"))


def _config(model_dir):
    """The config as llama.cpp reads it: AutoConfig's to_dict(), or config.json."""
    try:
        from transformers import AutoConfig
        return AutoConfig.from_pretrained(model_dir, trust_remote_code=False).to_dict()
    except (ImportError, OSError, ValueError, KeyError):
        return json.loads((model_dir / "config.json").read_text(encoding="utf-8"))


def _safetensors(model_dir):
    """name -> lazy array of every tensor of the checkpoint, in llama.cpp's order (parts sorted,
    names sorted within a part)."""
    gguf = _gguf()
    parts = sorted(p.name for p in model_dir.iterdir() if p.name.startswith("model") and p.suffix == ".safetensors")
    if not parts:
        found = sorted(p.name for p in model_dir.iterdir())
        raise FileNotFoundError(f"convert: no model*.safetensors in {model_dir} (found {found}); pyggml "
                                f"converts safetensors checkpoints")
    out = {}
    for part in parts:
        with gguf.utility.SafetensorsLocal(model_dir / part) as tensors:
            for name, t in tensors.items():
                out[name] = t
    return out


class _Lazy:
    """A tensor made from checkpoint tensors when it is written (experts stacked, a fused matrix
    split): its numpy-order shape and load(), the array as _numpy gives it."""

    def __init__(self, shape, load):
        self.shape, self.load = tuple(shape), load


def _numpy(t):
    """A safetensors tensor as llama.cpp hands it on: float16 and float32 as stored, others as float32."""
    if isinstance(t, _Lazy):
        return t.load()
    raw = t.mmap_bytes()
    if t.dtype == "F32":
        return raw.view(np.float32).reshape(t.shape)
    if t.dtype == "F16":
        return raw.view(np.float16).reshape(t.shape)
    if t.dtype == "BF16":
        return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(t.shape)
    dtypes = {"F64": np.float64, "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
              "BOOL": np.bool_}
    if t.dtype not in dtypes:
        raise ValueError(f"convert: safetensors dtype {t.dtype} is not supported")
    return raw.view(dtypes[t.dtype]).reshape(t.shape).astype(np.float32)


def _mapped(model_dir, conv, names, where):
    """(tensor, HF name after conv.rename, GGUF name) of each checkpoint tensor conv keeps, in
    llama.cpp's order; ValueError for one the tensor map cannot name."""
    def renamed():
        for hf_name, t in _safetensors(model_dir).items():
            name = None if hf_name.endswith(_SKIP_SUFFIXES) else conv.rename(hf_name)
            if name is None:
                continue
            for part in conv.parts(name) if isinstance(conv, TextConverter) else (name,):
                yield t, part, hf_name

    items = conv.merge(renamed()) if isinstance(conv, TextConverter) else renamed()
    for t, name, hf_name in items:
        gguf_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise ValueError(f"{where}: cannot map tensor {hf_name!r} to a GGUF name")
        yield t, name, gguf_name


def _stored_type(gguf_name, shape, outtype):
    """The type llama.cpp's prepare_tensors stores a tensor in."""
    if (len(shape) <= 1 or gguf_name.endswith(("_norm.weight", ".ffn_gate_inp.weight"))
            or not gguf_name.endswith(".weight")):
        return Type.F32                   # ffn_gate_inp: the MoE router, always F32 in llama.cpp
    if outtype == Type.Q8_0 and shape[-1] % 32:
        return Type.F16                   # llama.cpp: QuantError -> "falling back to F16"
    return outtype


def convert_hf(model_or_dir, out_path, outtype="f16", tokenizer=None, tokenizer_pre=None, mmproj=None,
               image_processor=None):
    """Convert a Hugging Face model (a transformers model, or a folder with config.json and
    model*.safetensors) to a GGUF file at out_path, laid out as llama.cpp's converter lays it out.

    outtype: "f32", "f16", "q8_0" or "q4_k_m" (a mixture, see above) for the weight matrices. tokenizer: the folder of the tokenizer
    files, or a transformers tokenizer (default: the model folder; a model object without one is
    converted without vocabulary). tokenizer_pre: tokenizer.ggml.pre of a BPE vocabulary (default by
    architecture). mmproj: also write the vision tower to this path (Qwen2-VL, Gemma 3), with
    image_mean/std (and Gemma 3's image_seq_length) from the folder's preprocessor_config.json or from
    `image_processor` (a transformers image processor; default: the architecture's image processor's,
    for Qwen2-VL OpenAI CLIP's mean and std). Returns out_path."""
    if outtype not in _OUTTYPE:
        raise ValueError(f"convert_hf: outtype must be one of {', '.join(OUTTYPES)}, got {outtype!r}")
    with tempfile.TemporaryDirectory(prefix="pyggml-convert-") as tmp:
        tmp = Path(tmp)
        if isinstance(model_or_dir, (str, os.PathLike)):
            model_dir = Path(model_or_dir)
            if not (model_dir / "config.json").is_file():
                raise FileNotFoundError(f"convert_hf: {model_dir} has no config.json; pass a Hugging Face "
                                        f"model folder or a transformers model")
            if tokenizer is not None:                  # one folder with both, as llama.cpp reads it
                model_dir = _linked(model_dir, tmp / model_dir.resolve().name)
        else:
            name = getattr(model_or_dir.config, "_name_or_path", "") or type(model_or_dir).__name__
            model_dir = tmp / Path(name).name                   # general.name comes from the folder's name
            model_or_dir.save_pretrained(model_dir)
        if isinstance(tokenizer, (str, os.PathLike)):
            _linked(Path(tokenizer), model_dir)
        elif tokenizer is not None:
            tokenizer.save_pretrained(model_dir)
        if image_processor is not None:
            image_processor.save_pretrained(model_dir)
        _convert_dir(model_dir, Path(out_path), outtype, tokenizer_pre)
        if mmproj is not None:
            _convert_mmproj(model_dir, Path(mmproj), outtype)
    return out_path


def _linked(src, dst):
    """dst (created) with a symbolic link to each file of src; returns dst."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file():
            (dst / f.name).unlink(missing_ok=True)
            (dst / f.name).symlink_to(f.resolve())
    return dst


def _convert_dir(model_dir, out_path, outtype, tokenizer_pre):
    gguf = _gguf()
    hparams = _config(model_dir)
    hf_arch = (hparams.get("architectures") or [None])[0]
    if hf_arch not in CONVERTERS:
        raise ValueError(f"convert_hf: architecture {hf_arch!r} of {model_dir} is not supported; supported: "
                         f"{', '.join(sorted(CONVERTERS))}")
    conv = CONVERTERS[hf_arch](hparams, hf_arch)
    conv.model_dir = model_dir
    if outtype in FTYPES and not conv.mixtures:
        raise ValueError(f"convert_hf: outtype {outtype!r} is not available for {hf_arch}; convert to f32 or f16 "
                         f"and quantize with llama.cpp's llama-quantize")
    qtype, ftype = _OUTTYPE[outtype]
    arch_id = next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == conv.arch)
    names = gguf.get_tensor_name_map(arch_id, conv.n_layer)
    plan = [(name, data, data.shape, None) for name, data in conv.extra_tensors()]
    for t, name, gguf_name in _mapped(model_dir, conv, names, f"convert_hf: {hf_arch}"):
        plan.append((gguf_name, t, conv.stored_shape(name, tuple(t.shape)), name))
    types = [_stored_type(gguf_name, shape, qtype) for gguf_name, _, shape, _ in plan]
    if outtype in FTYPES:
        n_expert = _find(conv.hp, ("num_local_experts", "num_experts", "n_routed_experts")) or 0
        types = tensor_types([(p[0], p[2], t) for p, t in zip(plan, types)], outtype, conv.n_layer, n_expert)
    tensors = [(gguf_name, typ, shape, _loader(conv, src, name, typ))
               for (gguf_name, src, shape, name), typ in zip(plan, types)]
    vocab = (lambda w: conv.set_vocab(w, model_dir, tokenizer_pre)) if _has_tokenizer(model_dir) else None
    _write_converted(out_path, conv.arch, conv, model_dir, gguf.GGUFType.MODEL, ftype, tensors, vocab)




def _preprocessor(model_dir, defaults):
    """The image processor's config as llama.cpp merges it: `defaults` ((key, value) pairs, the
    converter's image_defaults), then preprocessor_config.json, then processor_config.json (its
    image_processor section lifted)."""
    cfg = dict(defaults)
    for name, section in (("preprocessor_config.json", "media_proc_cfg"), ("processor_config.json", "image_processor")):
        f = model_dir / name
        if f.is_file():
            d = json.loads(f.read_text(encoding="utf-8"))
            cfg.update({**d, **d.get(section, {})})
    return cfg


def _convert_mmproj(model_dir, out_path, outtype):
    gguf = _gguf()
    hparams = _config(model_dir)
    hf_arch = (hparams.get("architectures") or [None])[0]
    if hf_arch not in MMPROJ_CONVERTERS:
        raise ValueError(f"convert_hf: mmproj: architecture {hf_arch!r} of {model_dir} has no vision tower pyggml "
                         f"converts; supported: {', '.join(sorted(MMPROJ_CONVERTERS))}")
    cls = MMPROJ_CONVERTERS[hf_arch]
    conv = cls(hparams, _preprocessor(model_dir, cls.image_defaults))
    qtype, ftype = _OUTTYPE[outtype]
    # the map's mm.{bid} entries are block-numbered: llama.cpp's (n_block = depth) names mm.2 only for a
    # depth above 2; a map of at least 3 blocks names it at any depth
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MMPROJ, max(conv.n_layer, 3))
    tensors = []
    for t, _, gguf_name in _mapped(model_dir, conv, names, "convert_hf: mmproj"):
        for part, data in conv.split(gguf_name, np.broadcast_to(np.uint8(0), tuple(t.shape))):
            typ = conv.stored_type(part, data.shape, qtype)
            tensors.append((part, typ, data.shape, _part_loader(conv, t, gguf_name, part, typ)))
    _write_converted(out_path, "clip", conv, model_dir, gguf.GGUFType.MMPROJ, ftype, tensors)


def _write_converted(out_path, arch, conv, model_dir, gguf_type, ftype, tensors, vocab=None):
    """Write a converted file (a model, or its mmproj): the tensors, and the metadata in llama.cpp's
    order: the keys conv adds while it prepares the tensors, general.*, conv's parameters, the
    quantization version, then vocab(w) (the model's vocabulary) when given."""
    gguf = _gguf()

    def metadata(w):
        conv.add_tensor_keys(w)
        _add_general(w, model_dir, gguf_type)
        conv.set_parameters(w, ftype)
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
        if vocab is not None:
            vocab(w)

    _write(out_path, arch, metadata, tensors)


def _part_loader(conv, src, gguf_name, part, typ):
    """The stored bytes of tensor `part`, one of those conv.split makes of the checkpoint tensor src."""
    def load():
        data = dict(conv.split(gguf_name, _numpy(src)))[part]
        return _gguf().quants.quantize(np.ascontiguousarray(data), _gguf().GGMLQuantizationType(int(typ)))
    return load


def _add_general(w, model_dir, gguf_type):
    """general.type and the general.* keys of the gguf package's Metadata (name from the folder)."""
    gguf = _gguf()
    w.add_type(gguf_type)
    total, shared, expert, n_expert = w.get_total_parameter_count()
    meta = gguf.Metadata.load(None, model_dir, None, total)
    if meta.name is None:
        meta.name = model_dir.name
    if meta.size_label is None and total > 0:
        meta.size_label = gguf.size_label(total, shared, expert, n_expert)
    meta.set_gguf_meta_model(w)


def _loader(conv, src, name, typ):
    """A function producing the stored bytes of one tensor: read, transform, convert (quantize; the
    K-quants, which the gguf package cannot make, with pyggml's copy of ggml's reference quantisers)."""
    def load():
        gguf = _gguf()
        data = np.ascontiguousarray(src if isinstance(src, np.ndarray) else conv.transform(name, _numpy(src)))
        if typ.name.endswith("_K"):
            raw = np.frombuffer(Context().from_numpy(data, type=typ).tobytes(), np.uint8)
            return raw.reshape(data.shape[:-1] + (-1,))
        return gguf.quants.quantize(data, gguf.GGMLQuantizationType(int(typ)))
    return load


def add_arguments(parser):
    """The arguments of `pyggml convert` (an argparse parser)."""
    parser.add_argument("model", help="a Hugging Face model folder (config.json, model*.safetensors, tokenizer files)")
    parser.add_argument("-o", "--outfile", help="the GGUF file to write (default: MODEL/model-OUTTYPE.gguf)")
    parser.add_argument("--outtype", choices=OUTTYPES, default="f16",
                        help="type of the weight matrices (1-D tensors are always F32; Q8_0 falls back to F16 "
                             "for rows not a multiple of 32; q4_k_m: llama-quantize's Q4_K_M mixture of Q4_K "
                             "and Q6_K), default f16")
    parser.add_argument("--tokenizer-pre", help="tokenizer.ggml.pre of a BPE vocabulary (default by architecture)")
    parser.add_argument("--mmproj", nargs="?", const="", metavar="FILE",
                        help="also write the vision tower (Qwen2-VL, Gemma 3) as an mmproj GGUF (default: "
                             "MODEL/mmproj-model-OUTTYPE.gguf)")
    return parser


def main(args):
    """Run `pyggml convert` with parsed arguments; returns the exit status."""
    out = args.outfile or os.path.join(args.model, f"model-{args.outtype}.gguf")
    mmproj = getattr(args, "mmproj", None)
    if mmproj == "":
        mmproj = os.path.join(args.model, f"mmproj-model-{args.outtype}.gguf")
    convert_hf(args.model, out, outtype=args.outtype, tokenizer_pre=args.tokenizer_pre, mmproj=mmproj)
    print(f"wrote {out}" + (f" and {mmproj}" if mmproj else ""))
    return 0
