"""Per-tensor types of llama.cpp's quantisation mixtures (llama-quantize's llama_tensor_get_type in
src/llama-quant.cpp), for the converter's K-quant outtypes. Only Q4_K_M so far:

- quantised at all: tensors of 2+ dims whose name ends in "weight", not "*_norm.weight" (the others
  keep the type the plain conversion gives them);
- output.weight, and token_embd.weight when the model has no output.weight (tied embeddings): Q6_K,
  or Q8_0 when its rows are not a multiple of 256;
- attn_v.weight of layer counter i out of n (the attn_v tensors in llama.cpp's tensor order: by layer)
  and ffn_down of layer i out of n_layer: Q6_K where use_more_bits(i, n) (the first and last eighth of
  the layers and every third between), else Q4_K;
- mixture-of-experts models: the routers (ffn_gate_inp) are never quantised; with 8 experts
  (Mixtral's rule) attn_k and attn_v are Q8_0 and attn_output Q5_K; the experts' ffn_down_exps follow
  ffn_down's rule by the layer in their name;
- every other weight Q4_K;
- a K-quant whose rows are not a multiple of 256 falls back to Q5_0 (for Q4_K), Q5_1 (Q5_K) or Q8_0 (Q6_K),
  and to F16 when the rows are not even a multiple of 32 (Q8_0 too).

Not modelled (none of pyggml's converted architectures has them): Falcon's and 70B rules, fused
attn_qkv, imatrix-dependent choices.
"""
import re

from pyggml._enums import Type

__all__ = ["FTYPES", "tensor_types"]

# outtype -> (default type, LlamaFileType)
FTYPES = {"q4_k_m": (Type.Q4_K, 15)}

_QK_K = 256
_FALLBACK = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
_LAYER = re.compile(r"blk\.(\d+)\.")


def _use_more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _quantizable(name, shape):
    return len(shape) >= 2 and name.endswith("weight") and not name.endswith("_norm.weight")


def _fallback(typ, ncols):
    """llama.cpp's tensor_type_fallback: a 256-block type for rows that are not a multiple of 256"""
    if typ == Type.Q8_0:
        return typ if ncols % 32 == 0 else Type.F16
    if ncols % _QK_K == 0 or typ.name not in _FALLBACK:
        return typ
    name = _FALLBACK[typ.name]
    if name not in Type.__members__:
        raise ValueError(f"convert: a tensor with rows of {ncols} cannot be {typ.name}, and llama.cpp's fallback "
                         f"type {name} is not available in this build of pyggml")
    typ = Type[name]
    return typ if ncols % 32 == 0 else Type.F16


def tensor_types(tensors, outtype, n_layer, n_expert=0):
    """The stored type of each tensor under mixture `outtype` ("q4_k_m"). tensors: (gguf name, numpy
    shape (rows last), the type of the plain conversion) in any order; n_expert: the expert count of
    a mixture-of-experts model (0: none); returns a list of types."""
    default = FTYPES[outtype][0]
    names = [name for name, _, _ in tensors]
    tied = "output.weight" not in names
    # the attn_v counter runs over llama.cpp's tensor order: sorted by layer, then by name
    attn_v = sorted((n for n in names if "attn_v.weight" in n),
                    key=lambda n: (int(_LAYER.match(n).group(1)) if _LAYER.match(n) else -1, n))
    i_attn_v = {n: i for i, n in enumerate(attn_v)}
    out = []
    for name, shape, plain in tensors:
        if not _quantizable(name, shape) or ".ffn_gate_inp." in name:
            out.append(plain)
            continue
        ncols = shape[-1]
        typ = default
        if name == "output.weight" or (tied and name == "token_embd.weight"):
            typ = Type.Q8_0 if ncols % _QK_K else Type.Q6_K
        elif "attn_v.weight" in name:
            if n_expert == 8:
                typ = Type.Q8_0
            elif _use_more_bits(i_attn_v[name], len(attn_v)):
                typ = Type.Q6_K
        elif n_expert == 8 and "attn_k.weight" in name:
            typ = Type.Q8_0
        elif n_expert == 8 and "attn_output.weight" in name:
            typ = Type.Q5_K
        elif "ffn_down" in name:
            m = _LAYER.match(name)
            if m and _use_more_bits(int(m.group(1)), n_layer):
                typ = Type.Q6_K
        out.append(_fallback(typ, ncols))
    return out
