"""An architecture added from outside pyggml with the public API only: qwen2 plus per-head Q/K norms
(the port a newcomer writes for Qwen3), registered under its own name and run on a copy of the qwen3
test file relabelled to it. It must give pyggml's qwen3 logits bit for bit, in both attention forms."""
from dataclasses import dataclass

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

from hf_models import converted

import pyggml as gg
from pyggml import gguf, models
from pyggml.models.qwen2 import Qwen2, Qwen2HParams

# ---- the port: everything an architecture file needs ----

@dataclass(frozen=True)
class MyQwen3HParams(Qwen2HParams):
    qkv_bias = False                                    # qwen2 requires Q/K/V biases; this variant has none

    def layer_tensors(self, il):
        norm = models.TensorSpec(((self.head_dim, "head_dim"),))
        return {**super().layer_tensors(il), f"blk.{il}.attn_q_norm.weight": norm,
                f"blk.{il}.attn_k_norm.weight": norm}


class MyQwen3(Qwen2):
    hparams_class = MyQwen3HParams

    def build_qkv(self, h, il):
        q, k, v = super().build_qkv(h, il)
        q = self.build_norm(q, f"blk.{il}.attn_q_norm")         # RMSNorm of each head, before RoPE
        k = self.build_norm(k, f"blk.{il}.attn_k_norm")
        return q, k, v


# ---- the check ----

@pytest.fixture
def my_qwen3():
    models.register("my-qwen3", MyQwen3)
    yield
    del models.ARCHS["my-qwen3"]


def relabel(src, dst, arch):
    """The GGUF at src with general.architecture and its keys renamed to `arch`."""
    with gguf.load(src) as f:
        md = {k.replace(f"{f.arch}.", f"{arch}.", 1): v for k, v in f.metadata.items()}
        md["general.architecture"] = arch
        types = {k.replace(f"{f.arch}.", f"{arch}.", 1): v for k, v in f.types.items()}
        gguf.save(dst, dict(f.tensors), md, types=types)
    return dst


@pytest.mark.parametrize("flash_attn", [True, False])
def test_user_architecture_matches_qwen3(tmp_path_factory, tmp_path, my_qwen3, flash_attn):
    src = converted("qwen3", "f32", tmp_path_factory.getbasetemp())     # converted once
    path = relabel(src, tmp_path / "my.gguf", "my-qwen3")
    ids = np.random.default_rng(0).integers(0, 128, 12).tolist()
    out = {}
    for p in (src, path):
        m = models.load(p, n_ctx=32, kv_type=gg.Type.F32, flash_attn=flash_attn)
        out[m.arch] = np.concatenate([m.eval(ids[:6])] + [m.eval([t]) for t in ids[6:]])
    assert type(models.read_hparams(gguf.load(path))) is MyQwen3HParams
    np.testing.assert_array_equal(out["my-qwen3"], out["qwen3"])

    class NoNorms(Qwen2):                   # the same tables without the graph change: far off
        hparams_class = MyQwen3HParams
    models.register("my-qwen3", NoNorms)
    m = models.load(path, n_ctx=32, kv_type=gg.Type.F32, flash_attn=flash_attn)
    ref = out["qwen3"][:6]
    assert np.abs(m.eval(ids[:6]) - ref).max() > 0.1 * np.abs(ref).max()
