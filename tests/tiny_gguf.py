"""The metadata and random tensors of small GGUF models (a llama by default, any architecture of
pyggml.models), for tests that write and load GGUF files."""
import numpy as np

# a small llama: GQA, untied output
HP = {"n_embd": 64, "n_head": 4, "n_head_kv": 2, "n_ff": 96, "n_layer": 2, "n_vocab": 100}


def llama_metadata(arch="llama", **hp):
    hp = {**HP, **hp}
    return {
        "general.architecture": arch,
        f"{arch}.block_count": hp["n_layer"], f"{arch}.context_length": 256,
        f"{arch}.embedding_length": hp["n_embd"], f"{arch}.feed_forward_length": hp["n_ff"],
        f"{arch}.attention.head_count": hp["n_head"], f"{arch}.attention.head_count_kv": hp["n_head_kv"],
        f"{arch}.attention.layer_norm_rms_epsilon": 2.0 ** -17,   # exact in float32
        "tokenizer.ggml.tokens": [f"t{i}" for i in range(hp["n_vocab"])],
    }


def llama_tensors(rng, arch="llama", tied=False, **hp):
    """Random tensors of every required (and the optional output) tensor of `arch`, as numpy
    arrays: float32 1-D, float16 matrices."""
    from pyggml import models
    hp = {**HP, **hp}
    hd = hp["n_embd"] // hp["n_head"]
    cls = models.ARCHS[arch].hparams_class
    full = cls(**hp, head_dim=hd, head_dim_v=hd, n_ctx_train=256, rms_eps=1e-5,
               rope=models.Rope(cls.rope_type, hd, sections=(2, 3, 3, 0) if arch == "qwen2vl" else None))
    out = {}
    for name, (dims, required) in full.tensor_table().items():
        if required or (name == "output.weight" and not tied):
            shape = tuple(d for d, _ in dims)[::-1]
            a = rng.standard_normal(shape).astype(np.float32)
            out[name] = a if len(shape) == 1 else a.astype(np.float16)
    return out
