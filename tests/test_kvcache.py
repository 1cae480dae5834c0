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
    with pytest.raises(ValueError, match=r"KVBatch.cpy_v: cur must hold \[32, 2, 1\] elements, got ne=\(64, 2, 1, 1\)"):
        kv.cpy_v(0, ctx.new_tensor(gg.Type.F32, (64, 2, 1)))
