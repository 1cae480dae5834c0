"""The reusable KV cache: causal_mask, padded n_kv, KVBatch inputs rewritten in place by fill(),
both V layouts (rows per cell, and transposed as llama.cpp without flash attention)."""
import numpy as np
import pytest
import reference as ref

import pyggml as gg
from pyggml.kvcache import causal_mask

NEG = -np.inf


def test_causal_mask():
    # cells hold positions 0, 1, 2 and are then empty; tokens at 1 and 2
    m = causal_mask(np.array([0, 1, 2, -1, -1]), np.array([1, 2]))
    assert m.dtype == np.float16
    np.testing.assert_array_equal(m, [[0, 0, NEG, NEG, NEG], [0, 0, 0, NEG, NEG]])
    out = np.ones((2, 5), np.float16)
    assert causal_mask(np.array([0, 1, 2, -1, -1]), np.array([1, 2]), out) is out
    np.testing.assert_array_equal(out, m)
    # positions, not cells, decide: a cell of a later position is masked wherever it sits
    np.testing.assert_array_equal(causal_mask(np.array([5, 3, 4]), np.array([4])), [[NEG, 0, 0]])


def test_causal_mask_mrope_image_order():
    """M-RoPE tokens at one temporal position (an image) see the cells of that position whose
    (y, x) come before or at theirs, as llama.cpp orders them."""
    cell_pos = np.array([0, 1, 1, 1, 1])
    yx = np.array([[0, 0], [0, 0], [0, 1], [1, 0], [1, 1]])
    m = causal_mask(cell_pos, cell_pos[1:], cell_yx=yx, tok_yx=yx[1:])
    expect = np.where(np.tril(np.ones((4, 4), bool)), 0, NEG)
    np.testing.assert_array_equal(m[:, 1:], expect)
    np.testing.assert_array_equal(m[:, 0], [0, 0, 0, 0])


def window_rule(cell_pos, tok_pos, n_swa):
    """The visible cells by the rule stated element by element: a cell holds a token (pos >= 0)
    not after the query, and, with a window, fewer than n_swa positions before it."""
    m = np.full((len(tok_pos), len(cell_pos)), NEG)
    for i, t in enumerate(tok_pos):
        for j, c in enumerate(cell_pos):
            if 0 <= c <= t and (n_swa == 0 or t - c < n_swa):
                m[i, j] = 0
    return m


@pytest.mark.parametrize("n_swa", [0, 1, 2, 5, 100])
def test_causal_mask_sliding_window(rng, n_swa):
    cell_pos = rng.permutation(np.concatenate([np.arange(30), -np.ones(6, int)]))
    tok_pos = np.array([0, 3, 4, 5, 17, 29, 40])
    np.testing.assert_array_equal(causal_mask(cell_pos, tok_pos, n_swa=n_swa), window_rule(cell_pos, tok_pos, n_swa))
    # n_swa = 1: only the token's own position
    if n_swa == 1:
        m = causal_mask(np.arange(5), np.arange(5), n_swa=1)
        np.testing.assert_array_equal(m == 0, np.eye(5, dtype=bool))


@pytest.mark.parametrize("n_tokens", [1, 3])
def test_batch_fills_full_and_window_masks(ctx, n_tokens):
    """A cache with a window gives every batch both masks for the same step (prefill and decode
    routes, holes and cells of later positions), each equal to the rule; layers pick one."""
    n_swa, n_kv = 4, 24
    cache = gg.KVCache(ctx, 2, 32, 32, 2, pad=8, n_swa=n_swa)
    kv = cache.batch(n_tokens, n_kv)
    assert kv.mask_swa.ne == kv.mask.ne == (n_kv, n_tokens, 1, 1)
    assert kv.mask_swa.flags & gg._graph.FLAG_INPUT and kv.mask_swa.name == "kq_mask_swa"
    assert kv.get_mask(swa=True) is kv.mask_swa and kv.get_mask() is kv.mask
    cache.alloc(np.arange(5))
    cache.cell_pos[2] = -1                     # a hole
    cache.cell_pos[4] = 13                     # a cell of a later position
    for step in range(5):
        p0 = 5 + step * n_tokens
        cells = cache.alloc(np.arange(p0, p0 + n_tokens))
        kv.mask.numpy()[...] = 7.0
        kv.mask_swa.numpy()[...] = 7.0
        kv.fill(cells)
        cp, tp = cache.cell_pos[:n_kv], cache.cell_pos[cells]
        np.testing.assert_array_equal(kv.mask.numpy(), window_rule(cp, tp, 0))
        np.testing.assert_array_equal(kv.mask_swa.numpy(), window_rule(cp, tp, n_swa))
        # the window hides something the full mask shows once the positions pass n_swa
        assert ((kv.mask_swa.numpy() != 0) & (kv.mask.numpy() == 0)).any() == (p0 >= n_swa)


def test_sliding_window_attention(ctx, rng):
    """flash_attn_ext over the cache with mask_swa attends exactly the window: the result equals
    softmax attention over the last n_swa positions computed in numpy."""
    hd, n_swa, n = 32, 3, 7
    cache = gg.KVCache(ctx, 1, 8, hd, 1, type=gg.Type.F32, pad=8, n_swa=n_swa)
    kv = cache.batch(n, 8)
    q, k, v = (rng.standard_normal((n, 1, hd)).astype(np.float32) for _ in range(3))
    tk, tv = ctx.from_numpy(k), ctx.from_numpy(v)
    kv.cpy_k(0, tk)
    kv.cpy_v(0, tv)
    tq = gg.permute(ctx.from_numpy(q), 0, 2, 1, 3)            # [hd, n, 1]
    out = gg.flash_attn_ext(tq, kv.get_k(0), kv.get_v(0), kv.get_mask(swa=True), 0.25)
    kv.fill(cache.alloc(np.arange(n)))
    g = gg.CGraph()
    g.build_forward_expand(out)
    g.compute(1)
    got = out.to_numpy().reshape(n, hd)
    for i in range(n):
        lo = max(0, i - n_swa + 1)
        s = 0.25 * k[lo:i + 1, 0].astype(np.float64) @ q[i, 0]
        w = np.exp(s - s.max())
        np.testing.assert_allclose(got[i], (w / w.sum()) @ v[lo:i + 1, 0], rtol=1e-5, atol=1e-6)


def test_n_kv_for_pads_to_the_padding_step(ctx):
    cache = gg.KVCache(ctx, 1, 600, 64, 1, pad=256)
    assert [cache.n_kv_for(n) for n in (1, 256, 257)] == [256, 256, 512]
    cache.alloc(np.arange(500))
    assert cache.n_kv_for(1) == 512 and cache.n_kv_for(20) == 600       # capped at n_ctx
    with pytest.raises(ValueError, match=r"KVCache.alloc: 101 new tokens do not fit: 500 of n_ctx=600"):
        cache.alloc(np.arange(101))
    assert cache.n_used == 500
    cache.clear()
    assert cache.n_used == 0 and (cache.cell_pos == -1).all()


@pytest.mark.parametrize("typ,v_trans", [("F32", False), ("F32", True), ("F16", False), ("F16", True),
                                          ("Q5_1", False), ("IQ4_NL", False)])
def test_batch_reused_across_steps(ctx, rng, typ, v_trans):
    """One graph over n_kv = 8 cells: each step rewrites the indices and the mask and writes K/V
    into the next cells; the views read back everything written so far."""
    hd, nh, n_ctx, n_kv = 32, 2, 12, 8
    cache = gg.KVCache(ctx, 2, n_ctx, hd, nh, type=gg.Type[typ], v_trans=v_trans, pad=8)
    kv = cache.batch(2, n_kv)
    assert kv.idx.flags & gg._graph.FLAG_INPUT and kv.mask.ne == (n_kv, 2, 1, 1)
    k_in = ctx.new_tensor(gg.Type.F32, (hd, nh, 2))
    v_in = ctx.new_tensor(gg.Type.F32, (hd, nh, 2))
    kv.cpy_k(1, k_in)
    kv.cpy_v(1, v_in)
    k_out, v_out = gg.cont(kv.get_k(1)), gg.cont(kv.get_v(1))
    assert kv.get_k(1).ne == (hd, n_kv, nh, 1)
    assert kv.get_v(1).ne == ((n_kv, hd, nh, 1) if v_trans else (hd, n_kv, nh, 1))
    g = gg.CGraph()
    g.build_forward_expand(k_out)
    g.build_forward_expand(v_out)
    stored = {"k": np.zeros((n_kv, nh, hd)), "v": np.zeros((n_kv, nh, hd))}
    for step in range(4):
        cells = cache.alloc([2 * step, 2 * step + 1])
        kv.fill(cells)
        np.testing.assert_array_equal(kv.idx.numpy(), cells)
        np.testing.assert_array_equal(kv.mask.numpy(), causal_mask(cache.cell_pos[:n_kv], cache.cell_pos[cells]))
        for name, t in (("k", k_in), ("v", v_in)):
            x = rng.standard_normal((2, nh, hd)).astype(np.float32)
            t.numpy()[...] = x
            stored[name][cells] = ref.roundtrip(x, typ)
        g.compute(2)
        np.testing.assert_array_equal(k_out.to_numpy(), stored["k"].transpose(1, 0, 2))
        v_got = v_out.to_numpy()
        np.testing.assert_array_equal(v_got.transpose(0, 2, 1) if v_trans else v_got, stored["v"].transpose(1, 0, 2))
    with pytest.raises(ValueError, match=r"KVBatch.fill: cell 9 is beyond n_kv = 8"):
        kv.fill(cache.alloc([8, 9]))
    with pytest.raises(ValueError, match=r"KVBatch.fill: need 2 cells, got 1"):
        kv.fill([0])


@pytest.mark.parametrize("yx", [False, True])
def test_decode_batch_mask_equals_causal_mask(ctx, yx):
    """a one-token batch writes its mask row by its own route (text) or causal_mask's (M-RoPE
    (y, x) present): the same values with empty cells (-1), holes, cells of later positions, the
    cell range past n_used, and a stale row of the previous step to overwrite"""
    cache = gg.KVCache(ctx, 1, 40, 32, 2, pad=16)
    kv = cache.batch(1, 32)
    cache.alloc(np.arange(10), np.ones((10, 2), np.int32) if yx else None)
    cache.cell_pos[3] = -1                     # a hole (a step that failed)
    cache.cell_pos[7] = 30                     # a cell of a later position
    for p in (10, 11, 29, 30, 31):
        cells = cache.alloc([p], np.ones((1, 2), np.int32) if yx else None)
        kv.mask.numpy()[...] = 7.0
        kv.fill(cells)
        want = causal_mask(cache.cell_pos[:32], cache.cell_pos[cells],
                           cell_yx=cache.cell_yx[:32] if yx else None, tok_yx=cache.cell_yx[cells] if yx else None)
        np.testing.assert_array_equal(kv.mask.numpy(), want)
        assert (kv.mask.numpy()[0, 7] == 0) == (p >= 30)
    assert cache.has_yx == yx
    cache.clear()
    assert not cache.has_yx


def test_batch_and_cache_errors(ctx):
    with pytest.raises(TypeError, match=r"KVCache: a transposed V \(v_trans=True\) needs F32, F16 or BF16, got Q8_0"):
        gg.KVCache(ctx, 1, 8, 64, 1, type=gg.Type.Q8_0, v_trans=True)
    with pytest.raises(ValueError, match=r"head_dim_v must be a positive multiple of the Q8_0 block size 32, got 16"):
        gg.KVCache(ctx, 1, 8, 64, 1, type=gg.Type.Q8_0, head_dim_v=16)
    cache = gg.KVCache(ctx, 1, 8, 64, 2, head_dim_v=32, v_trans=True)
    with pytest.raises(ValueError, match=r"KVBatch: need n_tokens > 0 and 0 < n_kv <= n_ctx = 8, got n_tokens=1, n_kv=9"):
        cache.batch(1, 9)
    kv = cache.batch(1, 8)
    assert kv.mask_swa is None
    with pytest.raises(ValueError, match=r"KVBatch.get_mask: a sliding-window layer needs a cache made with n_swa > 0"):
        kv.get_mask(swa=True)
    for bad in (-1, 1.5, True, 2 ** 31):
        with pytest.raises(ValueError, match=r"KVCache: n_swa must be an int in \[0, 2\^31\)"):
            gg.KVCache(ctx, 1, 8, 64, 1, n_swa=bad)
    with pytest.raises(ValueError, match=r"KVBatch.cpy_v: cur must hold \[32, 2, 1\] elements, got ne=\(64, 2, 1, 1\)"):
        kv.cpy_v(0, ctx.new_tensor(gg.Type.F32, (64, 2, 1)))
