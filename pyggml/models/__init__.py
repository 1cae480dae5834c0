"""Run GGUF models: pyggml.models.load(path) -> Model with eval, generate and reset.

    m = pyggml.models.load("model.gguf", n_ctx=512, n_threads=None, kv_type=pyggml.Type.F16)
    logits = m.eval([1, 15043, 3186])             # float32 [3, n_vocab]; appends to the KV cache
    ids = m.generate([1, 15043], 32, temperature=0.8, top_k=40, top_p=0.95, seed=0)
    m.reset()

Architectures and their RoPE modes: pyggml.models.arch (llama: NORMAL, qwen2: NEOX, qwen2vl: MROPE).
See docs/models.md.
"""
from pyggml._enums import Type
from pyggml.models.arch import ARCHS, Arch
from pyggml.models.graph import StepGraph
from pyggml.models.model import Model
from pyggml.models.sampling import Sampler, candidates

__all__ = ["ARCHS", "Arch", "Model", "Sampler", "StepGraph", "candidates", "load"]


def load(path, n_ctx=512, n_threads=None, kv_type=Type.F16, **options):
    """Open the GGUF at path (memory-mapped: the weights are not copied) and return its Model.
    options: flash_attn (default True), layers=(l0, l1), n_batch, kv_pad (see Model)."""
    import warnings

    from pyggml import gguf

    f = gguf.load(path)
    try:
        tok = f.tokenizer()
    except Exception as e:  # noqa: BLE001 (a vocabulary the tokenizer library cannot read: ids still work)
        warnings.warn(f"pyggml.models.load: {path}: no tokenizer ({e}); pass token ids", stacklevel=2)
        tok = None
    m = Model(f.arch, f.hparams, f.tensors, n_ctx=n_ctx, n_threads=n_threads, kv_type=kv_type, tokenizer=tok,
              source=f.path, **options)
    m.gguf = f      # keeps the mapping alive as long as the model
    return m
