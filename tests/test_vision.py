"""Qwen2-VL's vision side: the mmproj GGUF (checked against the layout llama.cpp's converter writes),
the image preprocessing (against transformers' image processor), the vision encoder and a prompt with
images through the M-RoPE decoder (against transformers' Qwen2VLForConditionalGeneration)."""
import numpy as np
import pytest

pytest.importorskip("gguf")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from hf_models import IMAGE_PROCESSOR, VISION, converted_mm, image_processor, qwen2vl_vision_model

import pyggml as gg
import pyggml.gguf as G

# what llama.cpp's converter names each tensor of a vision block (TensorNameMap, MODEL_ARCH.MMPROJ)
BLOCK = {"attn.proj": "attn_out", "mlp.fc1": "ffn_up", "mlp.fc2": "ffn_down", "norm1": "ln1", "norm2": "ln2"}
TOP = {"visual.merger.ln_q": "v.post_ln", "visual.merger.mlp.0": "mm.0", "visual.merger.mlp.2": "mm.2"}


@pytest.fixture(scope="module")
def hf():
    return qwen2vl_vision_model(0)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("vision")
    return {t: converted_mm(t, d) for t in ("f32", "f16", "q8_0")}


def expected_mmproj(model):
    """name -> float32 array of what llama.cpp's converter stores, in its order: the checkpoint's
    visual.* tensors sorted by name, QKV split in three, the Conv3D kernel split per temporal step."""
    sd = {k.replace("model.visual.", "visual."): v.detach().float().numpy()
          for k, v in model.state_dict().items() if ".visual." in k}
    out = {}
    for name in sorted(sd):
        w, (stem, suffix) = sd[name], name.rsplit(".", 1)
        if stem == "visual.patch_embed.proj":
            out["v.patch_embd.weight"], out["v.patch_embd.weight.1"] = w[:, :, 0], w[:, :, 1]
        elif stem in TOP:
            out[f"{TOP[stem]}.{suffix}"] = w
        else:
            _, _, i, part = stem.split(".", 3)
            if part == "attn.qkv":
                for j, x in enumerate("qkv"):
                    out[f"v.blk.{i}.attn_{x}.{suffix}"] = np.split(w, 3)[j]
            else:
                out[f"v.blk.{i}.{BLOCK[part]}.{suffix}"] = w
    return out


def expected_type(name, shape, outtype):
    if name.startswith("v.patch_embd"):
        return gg.Type.F16 if outtype == "f16" else gg.Type.F32
    if len(shape) == 1:
        return gg.Type.F32
    return {"f32": gg.Type.F32, "f16": gg.Type.F16, "q8_0": gg.Type.Q8_0}[outtype]


@pytest.mark.parametrize("outtype", ["f32", "f16", "q8_0"])
def test_mmproj_layout_as_llama_cpp(hf, files, outtype):
    f = G.load(files[outtype][1], validate=False)
    want = expected_mmproj(hf)
    assert list(f.tensors) == list(want)
    for name, w in want.items():
        t = f.tensors[name]
        assert t.ne[:w.ndim] == w.shape[::-1], name
        assert t.type == expected_type(name, w.shape, outtype), name
        if t.type in (gg.Type.F32, gg.Type.F16):
            tol = 0 if t.type == gg.Type.F32 else 1e-3
            np.testing.assert_allclose(t.numpy().astype(np.float32).reshape(w.shape), w, rtol=tol, atol=tol)
    meta = {k: v for k, v in f.metadata.items() if not k.startswith("general.") or k in ("general.architecture",
                                                                                             "general.type",
                                                                                             "general.file_type")}
    proc = image_processor()
    f32 = {k: np.float32(meta.pop(k)).tolist() for k in ("clip.vision.image_mean", "clip.vision.image_std",
                                                           "clip.vision.attention.layer_norm_epsilon")}
    assert f32 == {"clip.vision.image_mean": np.float32(proc.image_mean).tolist(),
                   "clip.vision.image_std": np.float32(proc.image_std).tolist(),
                   "clip.vision.attention.layer_norm_epsilon": np.float32(1e-6).tolist()}
    assert meta == {
        "general.architecture": "clip", "general.type": "mmproj", "general.file_type": {"f32": 0, "f16": 1, "q8_0": 7}[outtype],
        "clip.has_vision_encoder": True, "clip.vision.projection_dim": 64, "clip.vision.image_size": 560,
        "clip.vision.patch_size": VISION["patch_size"], "clip.vision.embedding_length": VISION["embed_dim"],
        "clip.vision.feed_forward_length": VISION["hidden_size"],   # llama.cpp's rename, not the MLP width
        "clip.vision.block_count": VISION["depth"], "clip.vision.attention.head_count": VISION["num_heads"],
        "clip.projector_type": "qwen2vl_merger"}
    assert f.types["clip.vision.image_size"] == G._gguf().GGUFValueType.UINT32
    assert list(f.metadata)[-1] == "general.quantization_version"


def test_mmproj_of_a_text_model_is_refused(tmp_path):
    from hf_models import hf_model

    import pyggml.convert as C
    with pytest.raises(ValueError, match="mmproj: architecture 'Qwen2ForCausalLM'.*no vision tower"):
        C.convert_hf(hf_model("qwen2"), tmp_path / "t.gguf", outtype="f32", mmproj=tmp_path / "m.gguf")
    assert not (tmp_path / "m.gguf").exists()
