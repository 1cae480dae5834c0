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


# ---- several sequences in one cache (llama.cpp's llama_memory_seq_*) ----

def _tags(cache):
    """The tag each cell holds: the first K value of layer 0 (the tests write a token's tag there)."""
    return cache.k[0].numpy()[:, 0]


def _check_against_rule(cache, want):
    """The cache against the rule, a dict seq -> {position: tag} kept without looking at cells:
    each sequence holds exactly its tokens, its cells hold increasing positions, a token of s at p
    sees the cells holding s's positions <= p and nothing else, and the counts agree."""
    tags = _tags(cache)
    for s in range(4):
        bit = np.uint64(1 << s)
        cells = np.flatnonzero((cache.cell_pos >= 0) & ((cache.cell_seq & bit) != 0))
        got = {int(cache.cell_pos[c]): float(tags[c]) for c in cells}
        assert got == want[s] and len(cells) == len(want[s])
        assert (np.diff(cache.cell_pos[cells]) > 0).all()
        assert cache.seq_pos_max(s) == max(want[s], default=-1)
        assert cache.seq_pos_min(s) == min(want[s], default=-1)
        for p in (0, 3, 7, 20):
            m = causal_mask(cache.cell_pos, [p], cell_seq=cache.cell_seq, tok_seq=[bit])[0]
            seen = sorted(float(tags[c]) for c in np.flatnonzero(m == 0))
            assert seen == sorted(t for q, t in want[s].items() if q <= p)
    assert cache.n_used == len({t for w in want.values() for t in w.values()})


def test_sequences_follow_the_rule(ctx, rng):
    """Random alloc / seq_rm / seq_cp / seq_keep / defrag on 4 sequences, checked after every
    operation against a per-sequence dict of positions (the K rows carry each token's tag, so a
    defrag that lost or swapped a row shows)."""
    cache = gg.KVCache(ctx, 1, 48, 32, 1, type=gg.Type.F32, pad=16)
    want = {s: {} for s in range(4)}
    tag = 0.0
    for _ in range(300):
        op = rng.choice(["alloc", "alloc", "alloc", "rm", "cp", "keep", "defrag"], p=[.18, .18, .18, .25, .13, .02, .06])
        s = int(rng.integers(4))
        if op == "alloc":
            n = int(rng.integers(1, 6))
            p0 = cache.seq_pos_max(s) + 1
            try:
                cells = cache.alloc(np.arange(p0, p0 + n), seqs=s)
            except ValueError as e:
                assert "call defrag()" in str(e) or "do not fit" in str(e)
                if "call defrag()" in str(e):
                    cache.defrag()
                    assert cache.n_cells_top == cache.n_used
                    cells = cache.alloc(np.arange(p0, p0 + n), seqs=s)
                else:
                    continue
            for c, p in zip(cells, range(p0, p0 + n)):
                tag += 1
                cache.k[0].numpy()[c, 0] = tag
                want[s][p] = tag
        elif op == "rm":
            p0, p1 = int(rng.integers(-1, 10)), int(rng.integers(-1, 20))
            seq = -1 if rng.random() < 0.05 else s
            cache.seq_rm(seq, p0, p1)
            lo, hi = max(p0, 0), (1 << 30) if p1 < 0 else p1
            for t in (range(4) if seq < 0 else [s]):
                want[t] = {p: v for p, v in want[t].items() if not lo <= p < hi}
        elif op == "cp":
            dst = int(rng.integers(4))
            if dst != s and not want[dst]:         # a prefix into an empty sequence (what a server does)
                p1 = int(rng.integers(0, 12))
                cache.seq_cp(s, dst, 0, p1)
                want[dst] = {p: v for p, v in want[s].items() if p < p1}
        elif op == "keep":
            cache.seq_keep(s)
            want = {t: (want[t] if t == s else {}) for t in range(4)}
        else:
            cache.defrag()
            assert cache.n_cells_top == cache.n_used
        _check_against_rule(cache, want)


def test_batch_mask_of_several_sequences(ctx):
    """KVBatch.fill over tokens of three sequences, one sharing a copied prefix: each token sees
    its own sequence's cells at positions <= its own; a padding token (a free cell) sees nothing."""
    cache = gg.KVCache(ctx, 1, 32, 32, 1, pad=16)
    cache.alloc(np.arange(4), seqs=0)
    cache.alloc(np.arange(3), seqs=1)
    cache.seq_cp(0, 2, 0, 2)                    # sequence 2 starts from 0's first two tokens
    cells = cache.alloc([4, 3, 2, 3], seqs=[0, 1, 2, 2])
    assert list(cells) == [7, 8, 9, 10]
    kv = cache.batch(5, 16)
    kv.fill(np.append(cells, 11))               # cell 11 is free: a padding token
    vis = kv.mask.numpy() == 0
    pos = cache.cell_pos
    for i, (s, p) in enumerate(zip([0, 1, 2, 2], [4, 3, 2, 3])):
        mine = (pos >= 0) & ((cache.cell_seq & np.uint64(1 << s)) != 0) & (pos <= p)
        np.testing.assert_array_equal(vis[i], mine[:16])
    assert not vis[4].any()
    assert sorted(pos[:16][vis[3]]) == [0, 1, 2, 3] and set(np.flatnonzero(vis[3])) == {0, 1, 9, 10}


@pytest.mark.parametrize("typ,v_trans", [("F16", False), ("F16", True), ("Q8_0", False)])
def test_defrag_moves_rows_in_order(ctx, rng, typ, v_trans):
    cache = gg.KVCache(ctx, 2, 16, 32, 2, type=gg.Type[typ], v_trans=v_trans, pad=16)
    from pyggml.kvcache import _bytes
    for t in cache.k + cache.v:
        _bytes(t)[:] = rng.integers(0, 256, t.nbytes, dtype=np.uint8)
    before = [_bytes(t).copy() for t in cache.k + cache.v]
    cache.alloc(np.arange(6), seqs=0)
    cache.alloc(np.arange(5), seqs=1)
    cache.seq_rm(0, 1, 4)                        # holes at cells 1..3
    cache.seq_rm(1, 0, 2)                        # and 6..7
    old = cache.defrag()
    assert list(old) == [0, 4, 5, 8, 9, 10] and cache.n_cells_top == 6
    assert list(cache.cell_pos[:7]) == [0, 4, 5, 2, 3, 4, -1]
    for t, b in zip(cache.k + cache.v, before):
        if t in cache.v and v_trans:
            b, got = b.reshape(-1, 16, 2), _bytes(t).reshape(-1, 16, 2)
            np.testing.assert_array_equal(got[:, :6], b[:, old])
        else:
            b, got = b.reshape(16, -1), _bytes(t).reshape(16, -1)
            np.testing.assert_array_equal(got[:6], b[old])


@pytest.mark.parametrize("v_trans", [False, True])
def test_mirror_follows_cells_planned_elsewhere(ctx, rng, v_trans):
    """A KVCells planning the steps (alloc, seq_rm, seq_cp, defrag) of a cache kept elsewhere: the
    cache that takes its state with mirror(cells, moves) holds what a cache that did every
    operation itself holds, rows and cells."""
    from pyggml.kvcache import KVCells, _bytes
    own = gg.KVCache(ctx, 2, 16, 32, 2, v_trans=v_trans, pad=16)
    far = gg.KVCache(ctx, 2, 16, 32, 2, v_trans=v_trans, pad=16)
    plan = KVCells(16, pad=16)
    for t, u in zip(own.k + own.v, far.k + far.v):
        _bytes(t)[:] = _bytes(u)[:] = rng.integers(0, 256, t.nbytes, dtype=np.uint8)
    moves = []
    for c in (own, plan):
        c.alloc(np.arange(6), seqs=0)
        c.alloc(np.arange(5), seqs=1)
        c.seq_cp(1, 2, 0, 3)
        c.seq_rm(0, 1, 4)
        c.seq_rm(1, 0, 2)
        moves.append(c.defrag())
    np.testing.assert_array_equal(moves[0], moves[1])
    assert list(moves[1]) != list(range(len(moves[1])))            # something moved
    far.mirror(plan, moves[1:])
    for a in ("cell_pos", "cell_seq", "cell_yx", "seqs_used", "n_used", "has_yx"):
        np.testing.assert_array_equal(getattr(far, a), getattr(own, a))
    for t, u in zip(own.k + own.v, far.k + far.v):
        np.testing.assert_array_equal(_bytes(u), _bytes(t))
    with pytest.raises(ValueError, match="KVCache.mirror: the cells are 8, this cache's 16"):
        far.mirror(KVCells(8))


def test_sequence_errors(ctx):
    cache = gg.KVCache(ctx, 1, 8, 32, 1, pad=8)
    with pytest.raises(ValueError, match=r"KVCache.alloc: sequence ids are 0..63, got 64"):
        cache.alloc([0], seqs=64)
    cache.alloc(np.arange(3), seqs=0)
    cache.alloc(np.arange(5), seqs=1)
    cache.seq_rm(0, 0, 2)
    with pytest.raises(ValueError, match=r"sequence 0 needs 1 cells after its last cell 2, 0 are free there "
                                         r"\(2 in all\): call defrag\(\)"):
        cache.alloc([3], seqs=0)
    cache.defrag()
    assert list(cache.alloc([3], seqs=0)) == [6]
