"""pyggml convert on a Gemma3ForConditionalGeneration folder (the HF architecture of Gemma 3
4B/12B/27B: the Gemma 3 text decoder under `language_model.`, a SigLIP vision tower and a multimodal
projector): a `gemma3` GGUF of the text decoder, as llama.cpp's converter writes it (its Gemma3Model
on the text_config), and with mmproj= the vision tower and projector as llama.cpp's --mmproj writes
them (Gemma3VisionModel; pyggml does not run Gemma 3's vision).

The folder: a random model (the text decoder of tests/hf_models.py's "gemma3" kind: 6 layers, a
sliding window of 4, two RoPE bases) with a tiny SigLIP tower, saved with save_pretrained and its
tensors named as in the released checkpoints (`language_model.model.layers.N...`,
`vision_tower.vision_model...`, `multi_modal_projector...`), a sentencepiece tokenizer.model of 320
pieces and a tokenizer_config.json adding Gemma 3's three image tokens after them, in a vocabulary of
340 (the rest padding, as the released 262144 pieces in 262208), and a preprocessor_config.json.
Checked: the text file is the one the same weights give as a text-only Gemma3ForCausalLM (names,
order, types, bytes, keys), its vocabulary holds the image tokens, its logits match HF's
Gemma3ForConditionalGeneration on input_ids alone (no image); the mmproj file's names, order, types,
values and keys; and (marked llama_cpp) both files' F32/F16/Q8_0 bytes are llama.cpp's converter's
on the same folder."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
TokenType = pytest.importorskip("gguf").TokenType
pytest.importorskip("sentencepiece")

from hf_models import (
    assert_same_gguf,
    hf_config,
    hf_logits,
    prefill_then_decode,
    random_ids,
    rel_err,
    spm_tokenizer,
)

import pyggml as gg
from pyggml import gguf, models
from pyggml.convert import CONVERTERS, convert_hf
from pyggml.models import vision

N_VOCAB, N_PIECES = 340, 320
# Gemma 3's image tokens (ids past the sentencepiece pieces here): begin and end of an image are plain
# added tokens, the soft token (a placeholder for each image embedding) is special
IMAGE_TOKENS = {320: ("<start_of_image>", False), 321: ("<end_of_image>", False), 322: ("<image_soft_token>", True)}
# a SigLIP tower of 2 layers over 28x28 images in 7x7 patches (16 patches), pooled to 4 image tokens
VISION = {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 2,
          "image_size": 28, "patch_size": 7}
N_PREFILL, N_DECODE = 7, 9
KV = {"f32": gg.Type.F32, "f16": gg.Type.F16}
# as tests/test_gemma_phi.py: max |logit - HF| / max |HF logit| per token, per 2 layers
BOUNDS = {"f32": 1e-5, "f16": 1e-2}


def gemma3_mm_model(seed=0):
    """A Gemma3ForConditionalGeneration with seeded random parameters (float32, eval mode; norm
    weights near 1, as tests/hf_models.py's hf_model)."""
    cfg = transformers.Gemma3Config(text_config=hf_config("gemma3", vocab_size=N_VOCAB).to_dict(),
                                    vision_config=VISION, mm_tokens_per_image=4, boi_token_index=320,
                                    eoi_token_index=321, image_token_index=322)
    torch.manual_seed(seed)
    model = transformers.Gemma3ForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.2 * torch.randn_like(p) if p.ndim == 1 else torch.randn_like(p) / p.shape[-1] ** 0.5)
    return model


def released_layout(d):
    """Rename d/model.safetensors' vision tensors as the released checkpoints name them
    (transformers 5 saves `vision_tower.X`, they hold `vision_tower.vision_model.X`)."""
    from safetensors.numpy import load_file, save_file
    path = d / "model.safetensors"
    tensors = load_file(path)
    save_file({"vision_tower.vision_model." + k.removeprefix("vision_tower.") if k.startswith("vision_tower.") else k:
               v for k, v in tensors.items()}, path, metadata={"format": "pt"})


def preprocessor_config(d, **changes):
    """Gemma3ImageProcessor's preprocessor_config.json for VISION's images; image_seq_length 4 (a 2x2
    grid of image tokens pooled from the 4x4 patches: pooling factor 2, Gemma 3's is 4)."""
    cfg = {"image_processor_type": "Gemma3ImageProcessor", "processor_class": "Gemma3Processor",
           "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "image_seq_length": 4,
           "size": {"height": 28, "width": 28}, **changes}
    (d / "preprocessor_config.json").write_text(json.dumps(cfg))


def tokenizer_files(d):
    """tokenizer.model (N_PIECES pieces) and a tokenizer_config.json adding IMAGE_TOKENS, in d."""
    spm_tokenizer(d, vocab_size=N_PIECES)
    added = {str(i): {"content": text, "special": special, "normalized": False, "lstrip": False, "rstrip": False,
                      "single_word": False} for i, (text, special) in IMAGE_TOKENS.items()}
    (d / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": added, "bos_token": "<s>",
                                                         "eos_token": "</s>", "boi_token": "<start_of_image>",
                                                         "image_token": "<image_soft_token>"}))


@pytest.fixture(scope="module")
def model():
    return gemma3_mm_model()


@pytest.fixture(scope="module")
def folder(tmp_path_factory, model):
    d = tmp_path_factory.mktemp("mm") / "gemma3"
    model.save_pretrained(d)
    released_layout(d)
    tokenizer_files(d)
    preprocessor_config(d)
    return d


@pytest.fixture(scope="module")
def files(tmp_path_factory, folder):
    """outtype -> the GGUF pyggml converts the folder to (f32 and f16, converted once)."""
    out = tmp_path_factory.mktemp("gguf")
    return {t: convert_hf(folder, out / f"{t}.gguf", outtype=t) for t in ("f32", "f16")}


def test_registered():
    assert CONVERTERS["Gemma3ForConditionalGeneration"].arch == "gemma3"


@pytest.mark.parametrize("name, want", [
    ("language_model.model.layers.3.self_attn.q_norm.weight", "model.layers.3.self_attn.q_norm.weight"),
    ("model.language_model.embed_tokens.weight", "model.embed_tokens.weight"),   # transformers' own layout
    ("language_model.model.norm.weight", "model.norm.weight"),
    ("vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight", None),
    ("model.vision_tower.embeddings.patch_embedding.weight", None),
    ("multi_modal_projector.mm_input_projection_weight", None),
    ("model.multi_modal_projector.mm_soft_emb_norm.weight", None)])
def test_rename(name, want):
    """The text decoder's names as the tensor map knows them; the vision tower and projector dropped."""
    conv = CONVERTERS["Gemma3ForConditionalGeneration"]({"num_hidden_layers": 6}, "Gemma3ForConditionalGeneration")
    assert conv.rename(name) == want


def test_same_file_as_the_text_model(tmp_path, model, folder, files):
    """The same weights as a text-only Gemma3ForCausalLM (same folder name and tokenizer files) give
    the same file: every tensor, its type and bytes, every key; the vision tower is not in it."""
    text = transformers.Gemma3ForCausalLM(model.config.text_config).eval()
    text.model.load_state_dict(model.model.language_model.state_dict())
    d = tmp_path / folder.name
    text.save_pretrained(d)
    tokenizer_files(d)
    ref = gguf.load(convert_hf(d, tmp_path / "text.gguf", outtype="f32"))
    got = gguf.load(files["f32"])
    assert_same_gguf(got, ref)
    assert got.metadata["general.architecture"] == "gemma3" and len(got.tensors) == 2 + 6 * 13
    assert not [n for n in got.tensors if n.startswith(("v.", "mm."))]
    emb = model.model.language_model.embed_tokens.weight.detach().numpy()
    np.testing.assert_array_equal(got.tensors["token_embd.weight"].numpy(), emb)


def test_vocabulary_has_the_image_tokens(files):
    md = gguf.load(files["f32"]).metadata
    tokens, types = md["tokenizer.ggml.tokens"], md["tokenizer.ggml.token_type"]
    assert len(tokens) == N_VOCAB
    T = TokenType
    for i, (text, special) in IMAGE_TOKENS.items():
        assert (tokens[i], types[i]) == (text, T.CONTROL if special else T.USER_DEFINED)
    assert tokens[N_VOCAB - 1] == f"[PAD{N_VOCAB - 1}]" and types[N_VOCAB - 1] == T.UNUSED


@pytest.mark.parametrize("flash_attn", [True, False])
@pytest.mark.parametrize("outtype", ["f32", "f16"])
def test_logits_match_hf(model, files, outtype, flash_attn):
    """HF's Gemma3ForConditionalGeneration on input_ids alone (its text path) against the converted
    file, prefill then token by token; the sequence (16) is longer than the window (4)."""
    ids = random_ids(N_PREFILL + N_DECODE, n_vocab=N_PIECES)
    ref = hf_logits(model, ids)
    m = models.load(files[outtype], n_ctx=64, n_threads=2, kv_type=KV[outtype], flash_attn=flash_attn)
    assert (m.arch, m.n_vocab) == ("gemma3", N_VOCAB)
    err = rel_err(prefill_then_decode(m, ids, N_PREFILL), ref)
    assert err < BOUNDS[outtype] * m.hparams.n_layer / 2, err


# ---- the mmproj file ----

def mmproj_names():
    """The mmproj tensors in checkpoint order (names sorted): the projector, then the tower."""
    block = [f"{n}.{s}" for n in ("ln1", "ln2", "ffn_up", "ffn_down") for s in ("bias", "weight")]
    block += [f"{n}.{s}" for n in ("attn_k", "attn_out", "attn_q", "attn_v") for s in ("bias", "weight")]
    return (["mm.input_projection.weight", "mm.soft_emb_norm.weight", "v.patch_embd.bias", "v.patch_embd.weight",
             "v.position_embd.weight"] + [f"v.blk.{i}.{n}" for i in range(2) for n in block]
            + ["v.post_ln.bias", "v.post_ln.weight"])


@pytest.mark.parametrize("outtype", ["f32", "f16", "q8_0"])
def test_mmproj_layout(tmp_path, model, folder, outtype):
    """Names and order (SigLIP's unused pooling head left out), types (the input projection F16 and
    the embeddings F32 whatever the outtype; 1-D F32; Q8_0 rows of 48 fall back to F16), values (the
    projector's RMSNorm as 1 + w) and keys."""
    convert_hf(folder, tmp_path / "text.gguf", outtype=outtype, mmproj=tmp_path / "mmproj.gguf")
    f = gguf.load(tmp_path / "mmproj.gguf")
    assert list(f.tensors) == mmproj_names()
    want = {"f32": gg.Type.F32, "f16": gg.Type.F16, "q8_0": gg.Type.Q8_0}[outtype]
    for name, t in f.tensors.items():
        one_d = t.ne[1:] == (1,) * (len(t.ne) - 1)
        typ = (gg.Type.F16 if name == "mm.input_projection.weight" else
               gg.Type.F32 if one_d or name.startswith(("v.patch_embd", "v.position_embd")) else
               gg.Type.F16 if want == gg.Type.Q8_0 and t.ne[0] % 32 else want)
        assert t.type == typ, name
    params = dict(model.named_parameters())
    proj = params["model.multi_modal_projector.mm_input_projection_weight"].detach().numpy()
    assert f.tensors["mm.input_projection.weight"].tobytes() == proj.astype(np.float16).tobytes()
    norm = params["model.multi_modal_projector.mm_soft_emb_norm.weight"].detach().numpy()
    np.testing.assert_array_equal(f.tensors["mm.soft_emb_norm.weight"].numpy().ravel(), norm + 1)
    patch = params["model.vision_tower.embeddings.patch_embedding.weight"].detach().numpy()
    assert f.tensors["v.patch_embd.weight"].tobytes() == patch.tobytes()
    md = f.metadata
    assert (md["general.architecture"], md["general.type"], md["clip.projector_type"]) == ("clip", "mmproj", "gemma3")
    assert (md["clip.vision.projection_dim"], md["clip.vision.embedding_length"],
            md["clip.vision.feed_forward_length"], md["clip.vision.block_count"],
            md["clip.vision.attention.head_count"]) == (64, 32, 48, 2, 2)
    assert (md["clip.vision.image_size"], md["clip.vision.patch_size"]) == (28, 7)
    assert md["clip.use_gelu"] is True and md["clip.vision.projector.scale_factor"] == 2
    assert md["clip.vision.image_mean"] == md["clip.vision.image_std"] == [0.5, 0.5, 0.5]


def test_mmproj_of_the_transformers_5_layout(tmp_path, model, folder):
    """The folder as transformers 5's save_pretrained leaves it (`vision_tower.X`, which llama.cpp's
    converter cannot map) gives the released layout's file, byte for byte."""
    d = tmp_path / folder.name
    model.save_pretrained(d)
    tokenizer_files(d)
    preprocessor_config(d)
    convert_hf(d, tmp_path / "t.gguf", outtype="f16", mmproj=tmp_path / "got.gguf")
    convert_hf(folder, tmp_path / "t.gguf", outtype="f16", mmproj=tmp_path / "ref.gguf")
    assert_same_gguf(gguf.load(tmp_path / "got.gguf"), gguf.load(tmp_path / "ref.gguf"))


def test_mmproj_defaults_scale_factor_and_errors(tmp_path, model):
    """Without a preprocessor config: Gemma3ImageProcessor's mean and std, and 256 image tokens (more
    than the 16 patches: no pooling factor written, as llama.cpp); Gemma 3's own pooling (4x4 patches
    to 1 token) writes none either; an image_seq_length of 0 is refused; pyggml's vision encoder
    refuses the file (it runs Qwen2-VL's only)."""
    d = tmp_path / "g"
    model.save_pretrained(d)
    tokenizer_files(d)
    convert_hf(d, tmp_path / "t.gguf", outtype="f32", mmproj=tmp_path / "m.gguf")
    md = gguf.load(tmp_path / "m.gguf").metadata
    assert md["clip.vision.image_mean"] == md["clip.vision.image_std"] == [0.5, 0.5, 0.5]
    assert "clip.vision.projector.scale_factor" not in md
    preprocessor_config(d, image_seq_length=1)                  # a 1x1 grid from 4x4 patches: factor 4
    convert_hf(d, tmp_path / "t.gguf", outtype="f32", mmproj=tmp_path / "m.gguf")
    assert "clip.vision.projector.scale_factor" not in gguf.load(tmp_path / "m.gguf").metadata
    with pytest.raises(ValueError, match="projector type 'gemma3' is not supported"):
        vision.load(tmp_path / "m.gguf")
    preprocessor_config(d, image_seq_length=0)
    with pytest.raises(ValueError, match="image_seq_length must be a positive integer, got 0"):
        convert_hf(d, tmp_path / "t.gguf", outtype="f32", mmproj=tmp_path / "m.gguf")


def llama_cpp_convert(src, folder, out, outtype, *args):
    env = dict(os.environ, PYTHONPATH=str(src / "gguf-py"))
    r = subprocess.run([sys.executable, str(src / "convert_hf_to_gguf.py"), str(folder), "--outfile", str(out),
                        "--outtype", outtype, *args], env=env, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return gguf.load(out)


@pytest.mark.slow
@pytest.mark.llama_cpp
@pytest.mark.parametrize("outtype", ["f32", "f16", "q8_0"])
def test_byte_identical_to_llama_cpp(tmp_path, llama_cpp_src, folder, outtype):
    """pyggml convert and llama.cpp's convert_hf_to_gguf.py write the same bytes from the folder: the
    text model, and with --mmproj the vision tower."""
    ref = llama_cpp_convert(llama_cpp_src, folder, tmp_path / "ref.gguf", outtype)
    ref_mm = llama_cpp_convert(llama_cpp_src, folder, tmp_path / "ref-mmproj.gguf", outtype, "--mmproj")
    convert_hf(folder, tmp_path / "got.gguf", outtype=outtype, mmproj=tmp_path / "got-mmproj.gguf")
    assert_same_gguf(gguf.load(tmp_path / "got.gguf"), ref)
    assert_same_gguf(gguf.load(tmp_path / "got-mmproj.gguf"), ref_mm)


def test_convert_command(tmp_path, model):
    """`pyggml convert DIR --mmproj` writes both files next to the model, by their default names."""
    import argparse

    from pyggml import convert
    d = tmp_path / "g"
    model.save_pretrained(d)
    tokenizer_files(d)
    preprocessor_config(d)
    args = convert.add_arguments(argparse.ArgumentParser()).parse_args([str(d), "--outtype", "q8_0", "--mmproj"])
    assert convert.main(args) == 0
    assert gguf.load(d / "model-q8_0.gguf").metadata["general.architecture"] == "gemma3"
    assert list(gguf.load(d / "mmproj-model-q8_0.gguf").tensors) == mmproj_names()
