"""GET_ROWS, SET_ROWS and the KV cache (docs/semantics.md, section 6). Destinations are compared byte for
byte with the reference converters (quantised rows included, exact .5 ties among the values)."""
import numpy as np
import pytest
import reference as ref
from conftest import THREADS, run

import pyggml as gg

DST_TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL"]
IDX_DTYPE = {"I32": np.int32, "I64": np.int64}


def _values(rng, shape):
    """Random rows whose 32-blocks cycle through: normal values, a block where the Q8_0 quantiser
    sees exact .5 ties (amax 127, so x*id = x), and one where Q4_0 does (max |x| = -8, so x*id = -x).
    Every value is exact in fp16, so an F16 source carries the ties too."""
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    blocks = x.reshape(-1, 32) if shape[-1] % 32 == 0 else None
    if blocks is not None:
        q8 = blocks[1::3]
        q8[:] = rng.integers(-126, 126, q8.shape) + 0.5
        q8[:, 5] = 127
        q4 = blocks[2::3]
        q4[:] = rng.integers(-7, 7, q4.shape) + 0.5
        q4[:, 3] = -8
    return x.astype(np.float16).astype(np.float32)


def _rows(t, shape):
    """The stored bytes of t as [..., row bytes]."""
    return np.frombuffer(t.tobytes(), np.uint8).reshape(shape + (-1,))


def _indices(rng, n, R, C1, C2, dtype):
    return np.stack([np.stack([rng.permutation(R)[:n] for _ in range(C1)]) for _ in range(C2)]).astype(dtype)


def _set_rows_case(ctx, rng, typ, src, E, R, n, A2, A3, C1, C2, idx_type="I64", c=None):
    a = ctx.from_numpy(_values(rng, (A3, A2, R, E)), type=gg.Type[typ])
    x = _values(rng, (A3, A2, n, E))
    b = ctx.from_numpy(x.astype(np.float16) if src == "F16" else x)
    c = _indices(rng, n, R, C1, C2, IDX_DTYPE[idx_type]) if c is None else c
    tc = ctx.from_numpy(c)
    before = _rows(a, (A3, A2, R))
    want = ref.set_rows(before, ref.encode_rows(x, typ), c)
    return a, b, tc, before, want


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("idx_type", ["I32", "I64"])
@pytest.mark.parametrize("src", ["F32", "F16"])
@pytest.mark.parametrize("typ", DST_TYPES)
def test_set_rows_types(ctx, rng, typ, src, idx_type, nth):
    a, b, c, _, want = _set_rows_case(ctx, rng, typ, src, 96, 7, 4, 3, 2, 3, 2, idx_type)
    t = gg.set_rows(a, b, c)
    run(t, nth)
    np.testing.assert_array_equal(_rows(a, (2, 3, 7)), want)


@pytest.mark.parametrize("nth", [1, 2, 3])
@pytest.mark.parametrize("E", [37, 200, 1000])
@pytest.mark.parametrize("typ,src", [("F32", "F32"), ("F16", "F32"), ("BF16", "F16"), ("F16", "F16")])
def test_set_rows_odd_rows_and_decode(ctx, rng, typ, src, E, nth):
    """Row tails not a multiple of the vector width; one source row (split by blocks across threads)
    and a few rows (whole rows per thread)."""
    for n in (1, 5):
        a, b, c, _, want = _set_rows_case(ctx, rng, typ, src, E, 9, n, 1, 1, 1, 1)
        run(gg.set_rows(a, b, c), nth)
        np.testing.assert_array_equal(_rows(a, (1, 1, 9)), want)


@pytest.mark.parametrize("nth", [1, 2, 3])
@pytest.mark.parametrize("typ,src", [("Q8_0", "F32"), ("Q4_0", "F16"), ("Q8_0", "F16")])
def test_set_rows_decode_quant(ctx, rng, typ, src, nth):
    a, b, c, _, want = _set_rows_case(ctx, rng, typ, src, 1024, 6, 1, 1, 1, 1, 1)
    run(gg.set_rows(a, b, c), nth)
    np.testing.assert_array_equal(_rows(a, (1, 1, 6)), want)


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("C1,C2", [(1, 1), (2, 2), (4, 1), (1, 4)])
def test_set_rows_broadcast(ctx, rng, C1, C2, nth):
    """c [n, C1, C2] serves b [.., n, 4, 4] by modulo (i2 % C1, i3 % C2), not by division."""
    a, b, c, _, want = _set_rows_case(ctx, rng, "F16", "F32", 64, 6, 3, 4, 4, C1, C2)
    run(gg.set_rows(a, b, c), nth)
    np.testing.assert_array_equal(_rows(a, (4, 4, 6)), want)


@pytest.mark.parametrize("nth", [1, 2, 3])
@pytest.mark.parametrize("typ", ["F16", "Q8_0"])
@pytest.mark.parametrize("order", ["consecutive", "rising", "one_row_falls"])
@pytest.mark.parametrize("C1,C2,A3", [(2, 1, 2), (2, 3, 3)])
def test_set_rows_rising_indices(ctx, rng, typ, order, C1, C2, A3, nth):
    """Indices that rise along every index row (a KV cache write: each thread takes a contiguous
    range of source rows) and ones where a single index row falls (rows dealt out by destination),
    broadcast over dims 2 and 3 (the index matrix of a row carried from row to row, a thread's range
    starting inside a matrix), an odd number of rows per matrix."""
    n, R = 7, 20
    if order == "consecutive":
        c = np.broadcast_to(np.arange(5, 5 + n), (C2, C1, n))
    else:
        c = np.stack([np.stack([np.sort(rng.permutation(R)[:n]) for _ in range(C1)]) for _ in range(C2)])
        if order == "one_row_falls":
            c[0, 1, [2, 3]] = c[0, 1, [3, 2]]
    a, b, tc, _, want = _set_rows_case(ctx, rng, typ, "F32", 64, R, n, 4, A3, C1, C2, c=c.astype(np.int64))
    run(gg.set_rows(a, b, tc), nth)
    np.testing.assert_array_equal(_rows(a, (A3, 4, R)), want)


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("typ", ["F16", "Q8_0", "Q4_0"])
def test_set_rows_strided_destination(ctx, rng, typ, nth):
    """Two strided views of one base: every other row of a [E, 2R, A2] base, and the second head of
    a KV cache laid out as [2 heads * E, R] (rows of 2E, a row of the view is its upper half)."""
    E, R, A2, n = 64, 5, 2, 3
    base = ctx.from_numpy(_values(rng, (A2, 2 * R, E)), type=gg.Type[typ])
    view = gg.view_3d(base, E, R, A2, 2 * base.nb[1], base.nb[2], base.nb[1])
    x = _values(rng, (1, A2, n, E))
    c = _indices(rng, n, R, 1, 1, np.int64)
    before = _rows(base, (A2, 2 * R))
    want = before.copy()
    want[:, 1::2] = ref.set_rows(before[None, :, 1::2], ref.encode_rows(x, typ), c)[0]
    run(gg.set_rows(view, ctx.from_numpy(x[0]), ctx.from_numpy(c)), nth)
    np.testing.assert_array_equal(_rows(base, (A2, 2 * R)), want)

    kv = ctx.from_numpy(_values(rng, (R, 2 * E)), type=gg.Type[typ])
    head1 = gg.view_2d(kv, E, R, kv.nb[1], kv.nb[1] // 2)
    x = _values(rng, (n, E))
    c = rng.permutation(R)[:n].astype(np.int32)
    before = _rows(kv, (R,)).reshape(R, 2, -1)
    want = before.copy()
    want[c, 1] = ref.encode_rows(x, typ)
    run(gg.set_rows(head1, ctx.from_numpy(x), ctx.from_numpy(c)), nth)
    np.testing.assert_array_equal(_rows(kv, (R,)).reshape(R, 2, -1), want)


@pytest.mark.parametrize("nth", [1, 2, 3])
@pytest.mark.parametrize("typ", ["F16", "Q8_0"])
def test_set_rows_duplicates_last_wins(ctx, rng, typ, nth):
    """The last source row written to a slot wins, for whole-row and block-split threading."""
    x = _values(rng, (4, 64))
    a = ctx.new_tensor(gg.Type[typ], (64, 5))
    run(gg.set_rows(a, ctx.from_numpy(x), ctx.from_numpy(np.array([3, 1, 3, 3], np.int64))), nth)
    got = _rows(a, (5,))
    np.testing.assert_array_equal(got[3], ref.encode_rows(x[3], typ))
    np.testing.assert_array_equal(got[1], ref.encode_rows(x[1], typ))

    a = ctx.new_tensor(gg.Type[typ], (64, 5))
    run(gg.set_rows(a, ctx.from_numpy(x[:2]), ctx.from_numpy(np.array([4, 4], np.int32))), nth)
    np.testing.assert_array_equal(_rows(a, (5,))[4], ref.encode_rows(x[1], typ))

    a, b, c, _, want = _set_rows_case(ctx, rng, typ, "F32", 64, 8, 64, 2, 1, 1, 1,
                                      c=rng.integers(0, 8, (1, 1, 64)).astype(np.int64))
    run(gg.set_rows(a, b, c), nth)
    np.testing.assert_array_equal(_rows(a, (1, 2, 8)), want)


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("n", [1, 4])
@pytest.mark.parametrize("bad", [-1, 7, 2**40])
def test_set_rows_bad_index_writes_nothing(ctx, rng, bad, n, nth):
    a, b, c, before, want = _set_rows_case(ctx, rng, "Q8_0", "F32", 64, 7, n, 2, 1, 2, 1)
    good = c.numpy()[0, 1, n - 1]
    c.numpy()[0, 1, n - 1] = bad
    g = gg.CGraph()
    g.build_forward_expand(gg.set_rows(a, b, c))
    with pytest.raises(IndexError, match=rf"set_rows: index {bad} at position \({n - 1}, 1, 0\) of the indices "
                                         r"is out of range \[0, 7\); the destination was not written"):
        g.compute(nth)
    np.testing.assert_array_equal(_rows(a, (1, 2, 7)), before)
    c.numpy()[0, 1, n - 1] = good
    g.compute(nth)
    np.testing.assert_array_equal(_rows(a, (1, 2, 7)), want)


@pytest.mark.parametrize("nth", [1, 2, 3])
@pytest.mark.parametrize("idx_type", ["I32", "I64"])
@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("bad_at", [None, (0, 0), (5, 1), (12, 1)])
def test_set_rows_index_check(ctx, rng, idx_type, packed, bad_at, nth):
    """The check of every index before the writes, for packed indices (scanned branch-free) and
    strided ones (c a transposed view: nb0 = 2 elements), two index rows of 13 shared out between
    threads: a bad index is named and a left unchanged; without one the rows are written."""
    n, R, C1 = 13, 40, 2
    cn = np.stack([rng.permutation(R)[:n] for _ in range(C1)]).astype(IDX_DTYPE[idx_type])
    a, b, _, before, want = _set_rows_case(ctx, rng, "F16", "F32", 32, R, n, 2, 1, C1, 1, c=cn[None])
    if bad_at is not None:
        cn[bad_at[1], bad_at[0]] = R
    tc = ctx.from_numpy(cn) if packed else gg.transpose(ctx.from_numpy(np.ascontiguousarray(cn.T)))
    assert tc.ne[:2] == (n, C1) and tc.is_contiguous() == packed
    g = gg.CGraph()
    g.build_forward_expand(gg.set_rows(a, b, tc))
    if bad_at is None:
        g.compute(nth)
        np.testing.assert_array_equal(_rows(a, (1, 2, R)), want)
        return
    with pytest.raises(IndexError, match=rf"set_rows: index {R} at position \({bad_at[0]}, {bad_at[1]}, 0\) "):
        g.compute(nth)
    np.testing.assert_array_equal(_rows(a, (1, 2, R)), before)


def test_set_rows_is_a_view_of_a(ctx, rng):
    a = ctx.new_tensor(gg.Type.F16, (32, 4))
    b = ctx.from_numpy(_values(rng, (2, 32)))
    c = ctx.from_numpy(np.array([2, 0], np.int64))
    t = gg.set_rows(a, b, c)
    assert t.op == gg.Op.SET_ROWS and t.view_src is a and t.data_ptr == a.data_ptr
    assert t.src[:3] == (b, c, a) and t.ne == a.ne and t.nb == a.nb
    out = gg.cont(t)                       # a later node sees the write
    run(out, 2)
    np.testing.assert_array_equal(out.to_numpy()[[2, 0]], ref.round_f16(b.to_numpy()))


def test_set_rows_scratch_is_per_thread(ctx):
    """F16 -> Q8_0 widens each row into scratch: one row of floats per thread (ggml sizes one)."""
    a = ctx.new_tensor(gg.Type.Q8_0, (1024, 8))
    b = ctx.new_tensor(gg.Type.F16, (1024, 4))
    g = gg.CGraph()
    g.build_forward_expand(gg.set_rows(a, b, ctx.from_numpy(np.arange(4, dtype=np.int32))))
    assert g.plan(1).work_size == 4096
    assert g.plan(2).work_size == 2 * 4096
    g.compute(2)


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("typ", ["F32", "F16", "BF16", "Q8_0", "Q4_0", "I32"])
def test_get_rows_types(ctx, rng, typ, nth):
    E = 96 if typ in ("Q8_0", "Q4_0") else 37
    R, n, B1, B2 = 6, 5, 2, 3
    if typ == "I32":
        vals = rng.integers(-2**31, 2**31 - 1, (B2, B1, R, E)).astype(np.int32)
        a = ctx.from_numpy(vals)
    else:
        x = _values(rng, (B2, B1, R, E))
        a = ctx.from_numpy(x, type=gg.Type[typ])
        vals = ref.roundtrip(x, typ)
    # a strided view of a bigger tensor (rows 1..R of R+2) so dims 1..3 are not packed
    big = ctx.new_tensor(a.type, (E, R + 2, B1, B2))
    va = gg.view_4d(big, E, R, B1, B2, big.nb[1], big.nb[2], big.nb[3], big.nb[1])
    run(gg.cpy(a, va), 1)
    idx = rng.integers(0, R, (B2, B1, n)).astype(np.int32)
    out = gg.get_rows(va, ctx.from_numpy(idx))
    run(out, nth)
    assert out.type == (gg.Type.I32 if typ == "I32" else gg.Type.F32)
    np.testing.assert_array_equal(out.to_numpy(), ref.get_rows(vals, idx))


@pytest.mark.parametrize("nth", THREADS)
def test_get_rows_out_of_range(ctx, rng, nth):
    x = _values(rng, (4, 64))
    idx = np.array([3, 0, 4, 1], np.int32)
    out = gg.get_rows(ctx.from_numpy(x, type=gg.Type.Q4_0), ctx.from_numpy(idx))
    with pytest.raises(IndexError, match=r"get_rows: index 4 at position \(2, 0, 0\) of the indices is out of "
                                         r"range \[0, 4\); its row is zero"):
        run(out, nth)
    got = out.to_numpy()
    np.testing.assert_array_equal(got[[0, 1, 3]], ref.roundtrip(x, "Q4_0")[[3, 0, 1]])
    np.testing.assert_array_equal(got[2], 0)


def test_rows_bad_input(ctx):
    f16 = ctx.new_tensor(gg.Type.F16, (64, 8, 2))
    f32 = ctx.new_tensor(gg.Type.F32, (64, 3, 2))
    i64 = ctx.new_tensor(gg.Type.I64, (3,))
    cases = [
        (lambda: gg.set_rows(ctx.new_tensor(gg.Type.I32, (64, 8, 2)), f32, i64), TypeError, r"set_rows: a must be of type"),
        (lambda: gg.set_rows(f16, ctx.new_tensor(gg.Type.BF16, (64, 3, 2)), i64), TypeError, r"set_rows: b must be of type F16, F32, got BF16"),
        (lambda: gg.set_rows(f16, f32, ctx.new_tensor(gg.Type.F32, (3,))), TypeError, r"set_rows: c must be of type I32, I64, got F32"),
        (lambda: gg.set_rows(f16, ctx.new_tensor(gg.Type.F32, (32, 3, 2)), i64), ValueError, r"b.ne\[0\] must equal a.ne\[0\] = 64, got 32"),
        (lambda: gg.set_rows(f16, ctx.new_tensor(gg.Type.F32, (64, 3, 3)), i64), ValueError, r"b.ne\[2:4\] must equal a.ne\[2:4\]"),
        (lambda: gg.set_rows(f16, f32, ctx.new_tensor(gg.Type.I64, (4,))), ValueError, r"c.ne\[0\] must equal b.ne\[1\] = 3, got 4"),
        (lambda: gg.set_rows(f16, f32, ctx.new_tensor(gg.Type.I64, (3, 3))), ValueError, r"b.ne\[2:4\] = \(2, 1\) must be multiples of c.ne\[1:3\] = \(3, 1\)"),
        (lambda: gg.set_rows(f16, f32, ctx.new_tensor(gg.Type.I64, (3, 1, 1, 2))), ValueError, r"c.ne\[3\] must be 1, got 2"),
        (lambda: gg.set_rows(f16, gg.transpose(ctx.new_tensor(gg.Type.F32, (3, 64, 2))), i64), ValueError, r"set_rows: b must be packed in dim 0"),
        (lambda: gg.set_rows(gg.transpose(ctx.new_tensor(gg.Type.F16, (8, 64, 2))), f32, i64), ValueError, r"set_rows: a must be packed in dim 0"),
        (lambda: gg.set_rows(f16, f32, None), TypeError, r"set_rows: c must be a pyggml.Tensor, got NoneType"),
        (lambda: gg.get_rows(f16, i64), TypeError, r"get_rows: b must be of type I32, got I64"),
        (lambda: gg.get_rows(ctx.new_tensor(gg.Type.I64, (4, 4)), ctx.new_tensor(gg.Type.I32, (2,))), TypeError, r"get_rows: a must be of type"),
        (lambda: gg.get_rows(f16, ctx.new_tensor(gg.Type.I32, (2, 3))), ValueError, r"get_rows: a.ne\[2:4\] must equal b.ne\[1:3\]"),
    ]
    for fn, exc, match in cases:
        with pytest.raises(exc, match=match):
            fn()


# ---- KV cache ----

@pytest.mark.parametrize("typ", DST_TYPES)
def test_kvcache_steps(ctx, rng, typ):
    hd, nh, n_ctx = 64, 2, 8
    cache = gg.KVCache(ctx, n_layer=2, n_ctx=n_ctx, head_dim=hd, n_head_kv=nh, type=gg.Type[typ])
    assert cache.k[0].type == gg.Type[typ] and cache.k[1].ne == (hd * nh, n_ctx, 1, 1)
    stored = {"k": np.zeros((0, nh, hd), np.float32), "v": np.zeros((0, nh, hd), np.float32)}
    for n_tok in (3, 1, 2):
        step = cache.prepare(n_tok)
        pos = step.pos
        assert (step.n_kv, step.n_tokens) == (pos + n_tok, n_tok)
        np.testing.assert_array_equal(step.idx.numpy(), np.arange(pos, pos + n_tok))
        np.testing.assert_array_equal(step.positions.numpy(), np.arange(pos, pos + n_tok))
        mask = step.mask.numpy()
        assert step.mask.type == gg.Type.F16 and mask.shape == (n_tok, step.n_kv)
        for t in range(n_tok):
            assert (mask[t, :pos + t + 1] == 0).all() and (mask[t, pos + t + 1:] == -np.inf).all()
        outs = []
        for kind in ("k", "v"):
            x = _values(rng, (n_tok, nh, hd))
            getattr(step, "cpy_" + kind)(1, ctx.from_numpy(x))
            view = getattr(step, "get_" + kind)(1)
            assert view.ne == (hd, step.n_kv, nh, 1)
            outs.append(gg.cont(view))
            stored[kind] = np.concatenate([stored[kind], ref.roundtrip(x, typ)])
        run(outs, 2)
        for kind, out in zip(("k", "v"), outs):
            np.testing.assert_array_equal(out.to_numpy(), stored[kind].transpose(1, 0, 2))
    assert cache.n_used == 6
    with pytest.raises(ValueError, match=r"KVCache.prepare: 3 new tokens do not fit: 6 of n_ctx=8 slots are used"):
        cache.prepare(3)
    assert cache.n_used == 6
    cache.clear()
    assert cache.prepare(8).n_kv == 8


def test_kvcache_bad_input(ctx):
    with pytest.raises(TypeError, match=r"KVCache: type must be one of F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, got I32"):
        gg.KVCache(ctx, 1, 8, 64, 1, type=gg.Type.I32)
    with pytest.raises(ValueError, match=r"head_dim must be a positive multiple of the Q4_0 block size 32, got 48"):
        gg.KVCache(ctx, 1, 8, 48, 1, type=gg.Type.Q4_0)
    cache = gg.KVCache(ctx, 1, 8, 64, 2)
    step = cache.prepare(2)
    with pytest.raises(ValueError, match=r"KVStep.cpy_k: cur must hold \[64, 2, 2\] elements"):
        step.cpy_k(0, ctx.new_tensor(gg.Type.F32, (64, 2, 3)))
    with pytest.raises(ValueError, match=r"n_tokens must be > 0"):
        cache.prepare(0)


# ---- ROPE -> SET_ROWS fusion ----

def _rope(x, pos, n_dims, mode, ext_factor=0.0):
    return gg.rope_ext(x, pos, None, n_dims, mode, 4096, 10000.0, 1.0, ext_factor, 1.0, 32.0, 1.0)


def _kv_write(ctx, x, typ, nth, n_dims, mode, fused, monkeypatch, pos0=3):
    """rope(x) written through a KVCache step; returns (cache K bytes, plan)."""
    hd, nh, nt = x.shape[2], x.shape[1], x.shape[0]
    cache = gg.KVCache(ctx, 1, 32, hd, nh, type=gg.Type[typ])
    cache.prepare(pos0)
    step = cache.prepare(nt)
    monkeypatch.setenv("PYGGML_DISABLE_FUSION", "0" if fused else "1")
    g = gg.CGraph()
    g.build_forward_expand(step.cpy_k(0, _rope(ctx.from_numpy(x), step.positions, n_dims, mode)))
    plan = g.plan(nth)
    g.compute(nth)
    return _rows(cache.k[0], (32,)), plan


@pytest.mark.parametrize("nth", [1, 2, 3])
@pytest.mark.parametrize("nt", [1, 5, 21])     # 21: more tokens than one cos/sin batch (PG_ROPE_TOK)
@pytest.mark.parametrize("mode,n_dims", [(gg.RopeType.NORMAL, 64), (gg.RopeType.NEOX, 64), (gg.RopeType.NEOX, 32)])
@pytest.mark.parametrize("typ", DST_TYPES)
def test_rope_set_rows_fused_equals_unfused(ctx, rng, monkeypatch, typ, mode, n_dims, nt, nth):
    x = _values(rng, (nt, 3, 64)) * 10
    fused, plan = _kv_write(ctx, x, typ, nth, n_dims, mode, True, monkeypatch)
    assert [tuple(t.op for t in grp) for grp in plan.fused] == [(gg.Op.ROPE, gg.Op.SET_ROWS)]
    assert plan.work_size == (1 + 16) * 3 * 64 * 4 * plan.n_threads   # a row, then 16 tokens' caches
    unfused, plan = _kv_write(ctx, x, typ, nth, n_dims, mode, False, monkeypatch)
    assert plan.fused == []
    np.testing.assert_array_equal(fused, unfused)
    assert fused[3:3 + nt].any()


@pytest.mark.parametrize("nth", THREADS)
def test_rope_set_rows_fused_direct_and_bad_index(ctx, rng, nth):
    """set_rows reading the rope result itself (rows = heads, dim 2 = tokens), YaRN angles; a bad
    index leaves the destination as it was."""
    x = ctx.from_numpy(_values(rng, (4, 3, 64)))
    pos = ctx.from_numpy(np.array([7, 2, 9, 4], np.int32))
    c = ctx.from_numpy(np.array([5, 0, 2], np.int64))
    outs = []
    for fuse in (True, False):
        a = ctx.new_tensor(gg.Type.Q8_0, (64, 6, 4))
        r = _rope(x, pos, 64, gg.RopeType.NEOX, ext_factor=0.5)
        if not fuse:
            r.name = "rope"
            g = gg.CGraph()
            g.build_forward_expand(r)           # an output: not fusable
            g.build_forward_expand(gg.set_rows(a, r, c))
        else:
            g = gg.CGraph()
            g.build_forward_expand(gg.set_rows(a, r, c))
        assert len(g.plan(nth).fused) == (1 if fuse else 0)
        g.compute(nth)
        outs.append(_rows(a, (4, 6)))
        if fuse:
            before = outs[0].copy()
            c.numpy()[1] = -3
            with pytest.raises(IndexError, match=r"set_rows: index -3 at position \(1, 0, 0\)"):
                g.compute(nth)
            np.testing.assert_array_equal(_rows(a, (4, 6)), before)
            c.numpy()[1] = 0
    np.testing.assert_array_equal(outs[0], outs[1])
