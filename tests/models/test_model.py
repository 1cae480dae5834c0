"""End to end: a two-layer llama-style decoder (RMSNorm, Q/K/V projections, NEOX RoPE, a KV cache
written with set_rows, flash attention with GQA and a causal mask, SwiGLU FFN, residuals) run as a
prefill then token-by-token decode, against the same model in float64 numpy. This is the graph shape
a ported model builds, with every fusion pattern in it."""
import math

import numpy as np
import pytest
import reference as ref
from conftest import EMULATED

import pyggml as gg

D, HD, HQ, HKV, FF, EPS = 64, 16, 4, 2, 96, 1e-5
LAYERS = 2
ROPE = {"n_ctx_orig": 0, "freq_base": 10000.0, "freq_scale": 1.0, "ext_factor": 0.0, "attn_factor": 1.0,
            "beta_fast": 32.0, "beta_slow": 1.0}


def make_weights(rng):
    def w(rows, cols):
        return (rng.standard_normal((rows, cols)) / math.sqrt(cols)).astype(np.float32)
    return [{"attn_norm": (1 + 0.1 * rng.standard_normal(D)).astype(np.float32),
                 "ffn_norm": (1 + 0.1 * rng.standard_normal(D)).astype(np.float32),
                 "wq": w(HQ * HD, D), "wk": w(HKV * HD, D), "wv": w(HKV * HD, D), "wo": w(D, HQ * HD),
                 "gate": w(FF, D), "up": w(FF, D), "down": w(D, FF)} for _ in range(LAYERS)]


def build_layer(w, x, step, il):
    """One decoder layer as a ggml model graph; x is [D, n_tokens]."""
    n = x.ne[1]
    rope_args = list(ROPE.values())
    h = gg.mul(gg.rms_norm(x, EPS), w["attn_norm"])
    q = gg.reshape_3d(gg.mul_mat(w["wq"], h), HD, HQ, n)
    k = gg.reshape_3d(gg.mul_mat(w["wk"], h), HD, HKV, n)
    v = gg.reshape_3d(gg.mul_mat(w["wv"], h), HD, HKV, n)
    q = gg.rope_ext(q, step.positions, None, HD, gg.RopeType.NEOX, *rope_args)
    k = gg.rope_ext(k, step.positions, None, HD, gg.RopeType.NEOX, *rope_args)
    step.cpy_k(il, k)
    step.cpy_v(il, v)
    att = gg.flash_attn_ext(gg.permute(q, 0, 2, 1, 3), step.get_k(il), step.get_v(il), step.mask,
                            1.0 / math.sqrt(HD))
    x = gg.add(x, gg.mul_mat(w["wo"], gg.reshape_2d(att, HD * HQ, n)))
    h = gg.mul(gg.rms_norm(x, EPS), w["ffn_norm"])
    f = gg.swiglu_split(gg.mul_mat(w["gate"], h), gg.mul_mat(w["up"], h))
    return gg.add(x, gg.mul_mat(w["down"], f))


def reference_model(weights, x, wtype):
    """All tokens at once, causal, float64; K/V rounded to F16 as the cache stores them."""
    T = x.shape[0]
    pos = np.arange(T, dtype=np.int32)
    mask = np.where(np.arange(T)[None, :] <= np.arange(T)[:, None], 0.0, -np.inf)[None, None]
    def mm(w, name, a):
        return ref.mul_mat(ref.roundtrip(w[name], wtype), a.astype(np.float32), wtype)

    for w in weights:
        h = ref.rms_norm(x, EPS) * w["attn_norm"]
        q = ref.rope(mm(w, "wq", h).reshape(1, T, HQ, HD), pos, HD, 2, **ROPE)
        k = ref.rope(mm(w, "wk", h).reshape(1, T, HKV, HD), pos, HD, 2, **ROPE)
        v = mm(w, "wv", h).reshape(1, T, HKV, HD)
        k, v = ref.round_f16(k), ref.round_f16(v)
        att = ref.flash_attn_ext(q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3),
                                 mask, 1.0 / math.sqrt(HD))
        x = x + mm(w, "wo", att.reshape(T, HQ * HD))
        h = ref.rms_norm(x, EPS) * w["ffn_norm"]
        x = x + mm(w, "down", ref.silu(mm(w, "gate", h)) * mm(w, "up", h))
    return x


@pytest.mark.parametrize("wtype", ["F32", "F16", "Q8_0"] if not EMULATED else ["F16"])
@pytest.mark.parametrize("nth", [1, 2])
def test_prefill_then_decode(rng, wtype, nth):
    n_prefill, n_decode = 5, 3
    weights = make_weights(rng)
    xs = rng.standard_normal((n_prefill + n_decode, D)).astype(np.float32)
    expect = reference_model(weights, xs.astype(np.float64), wtype)

    ctx = gg.Context()
    tw = [{name: ctx.from_numpy(a, type=gg.Type.F32 if a.ndim == 1 else getattr(gg.Type, wtype))
           for name, a in w.items()} for w in weights]
    cache = gg.KVCache(ctx, n_layer=LAYERS, n_ctx=16, head_dim=HD, n_head_kv=HKV)
    got = []
    for chunk in [xs[:n_prefill]] + [xs[i:i + 1] for i in range(n_prefill, n_prefill + n_decode)]:
        step = cache.prepare(len(chunk))
        x = ctx.from_numpy(chunk)
        for il in range(LAYERS):
            x = build_layer(tw[il], x, step, il)
        g = gg.CGraph()
        g.build_forward_expand(x)
        plan = g.plan(nth)
        fused = {tuple(t.op.name for t in group) for group in plan.fused}
        assert {("RMS_NORM", "MUL"), ("ROPE", "SET_ROWS"), ("ADD", "RMS_NORM", "MUL")} <= fused, fused
        g.compute(nth)
        got.append(x.to_numpy())
    got = np.concatenate(got)
    bound = {"F32": 1e-7, "F16": 1e-6, "Q8_0": 2e-4}[wtype]
    assert ref.nmse(got, expect) < bound
    assert ref.nmse(got[n_prefill:], expect[n_prefill:]) < bound       # the decode steps on their own
    with pytest.raises(ValueError, match="do not fit"):
        cache.prepare(16)
