"""Run GGUF models: pyggml.models.load(path) -> Model with eval, generate and reset.

    m = pyggml.models.load("model.gguf", n_ctx=512, n_threads=None, kv_type=pyggml.Type.F16)
    logits = m.eval([1, 15043, 3186])             # float32 [3, n_vocab]; appends to the KV cache
    ids = m.generate([1, 15043], 32, temperature=0.8, top_k=40, top_p=0.95, seed=0)
    m.reset()

One module per architecture (pyggml.models.llama, qwen2, qwen2vl, qwen3, qwen3moe, gemma2, gemma3, phi3, gptoss), each a Decoder subclass
built from the shared blocks of pyggml.models.blocks and registered by its GGUF name; register() adds
one from outside pyggml, read_hparams() reads a file's typed hyper-parameters. See docs/models.md.
"""
from pyggml._enums import Type
from pyggml.models import vision
from pyggml.models.arch import ARCHS, architecture, read_hparams, register
from pyggml.models.blocks import Decoder, HParams, Keys, Rope, TensorSpec
from pyggml.models.gemma2 import Gemma2
from pyggml.models.gemma3 import Gemma3
from pyggml.models.gptoss import GptOss
from pyggml.models.llama import Llama
from pyggml.models.model import Model
from pyggml.models.phi3 import Phi3
from pyggml.models.qwen2 import Qwen2
from pyggml.models.qwen2vl import Qwen2VL
from pyggml.models.qwen3 import Qwen3
from pyggml.models.qwen3moe import Qwen3Moe
from pyggml.models.sampling import Sampler, candidates

__all__ = ["ARCHS", "Decoder", "HParams", "Keys", "Model", "Rope", "Sampler", "TensorSpec", "architecture",
           "candidates", "load", "read_hparams", "register", "vision"]

register("llama", Llama)
register("qwen2", Qwen2)
register("qwen2vl", Qwen2VL)
register("qwen3", Qwen3)
register("qwen3moe", Qwen3Moe)
register("gemma2", Gemma2)
register("gemma3", Gemma3)
register("phi3", Phi3)
register("gpt-oss", GptOss)


def load(path, n_ctx=512, n_threads=None, kv_type=Type.F16, mmproj=None, mmap=True, **options):
    """Open the GGUF at path (memory-mapped: the weights are not copied; mmap=False reads them into
    anonymous memory, llama.cpp's --no-mmap: see pyggml.gguf.GGUFFile) and return its Model, run by
    the Decoder registered for its general.architecture (GGUFError for an unknown one or hyper-
    parameters it cannot run, before anything is allocated). mmproj: an mmproj GGUF (Qwen2-VL's
    vision tower) for Model.eval_multimodal. options: flash_attn (default True), layers=(l0, l1),
    n_batch, kv_pad, keep, repack (default True; see Model). The mapped pages of repacked weights
    are given back to the OS (mul_mat reads the copies), so resident memory holds one copy. The file's tokenizer is built when Model.tokenizer is first
    used (a warning and None when the tokenizer library cannot read its vocabulary)."""
    import warnings

    from pyggml import gguf

    f = gguf.load(path, mmap)
    hparams = read_hparams(f)

    def tokenizer():
        try:
            return f.tokenizer()
        except Exception as e:  # noqa: BLE001 (a vocabulary the tokenizer library cannot read: ids still work)
            warnings.warn(f"pyggml.models.load: {path}: no tokenizer ({e}); pass token ids", stacklevel=3)
            return None

    enc = None if mmproj is None else vision.load(mmproj, n_threads=n_threads)
    m = Model(f.arch, hparams, f.tensors, n_ctx=n_ctx, n_threads=n_threads, kv_type=kv_type, tokenizer=tokenizer,
              source=f.path, vision=enc, **options)
    m.gguf = f      # keeps the mapping alive as long as the model
    if m.repacked_bytes:
        f.release([t for t in f.tensors.values() if t.repacked])
    return m
