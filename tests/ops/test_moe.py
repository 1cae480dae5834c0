"""The ops of mixture-of-experts layers: sum_rows, div, argsort, top_k, argsort_top_k, add_id,
swiglu_oai, get_rows over 3-D experts' values and mul_mat_id (every weight type, bit for bit mul_mat's
columns), against tests/reference.py; bad input at build time and bad ids at compute time."""
import numpy as np
import pytest
import reference as ref
from conftest import EMULATED, THREADS, run

import pyggml as gg
from pyggml._enums import kernel_types

T = gg.Type
WTYPES = sorted((t.name for t in kernel_types("vec_dot")), key=lambda n: T[n])
FLOAT = {"F32", "F16", "BF16"}
BOUND = {"Q4_1": 1e-6, "Q5_1": 1e-6}


def values(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- routing ----

@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("n", [1, 7, 64, 1000])
def test_sum_rows(ctx, rng, n, nth):
    x = values(rng, (2, 3, 5, n))
    out = gg.sum_rows(ctx.from_numpy(x))
    assert out.ne == (1, 5, 3, 2) and out.type == T.F32
    run(out, nth)
    got = out.to_numpy()
    np.testing.assert_array_equal(got, ref.sum_rows(x).astype(np.float32))   # one rounding of a double sum


def test_sum_rows_strided(ctx, rng):
    x = values(rng, (6, 9))
    v = gg.view_2d(ctx.from_numpy(x), 9, 3, 2 * x.shape[1] * 4)             # every other row
    out = gg.sum_rows(v)
    run(out)
    np.testing.assert_array_equal(out.to_numpy().ravel(), ref.sum_rows(x[::2]).astype(np.float32).ravel())


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("bshape", [(3, 4, 37), (1, 4, 37), (1, 1, 37), (1, 1, 1)])
def test_div_broadcast(ctx, rng, bshape, nth):
    a = values(rng, (3, 4, 37))
    b = values(rng, bshape) + np.float32(3)
    out = gg.div(ctx.from_numpy(a), ctx.from_numpy(b))
    run(out, nth)
    assert ref.nmse(out.to_numpy(), ref.broadcast_binary(a, b, np.divide)) < 1e-14


def test_div_f16(ctx, rng):
    a, b = values(rng, (5, 33)).astype(np.float16), (values(rng, (1, 33)) + 3).astype(np.float16)
    out = gg.div(ctx.from_numpy(a), ctx.from_numpy(b))
    run(out, 2)
    assert out.type == T.F16
    assert ref.nmse(out.to_numpy(), ref.broadcast_binary(a, b, np.divide)) < 1e-7


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("order", list(gg.SortOrder))
@pytest.mark.parametrize("n", [1, 2, 8, 17, 128, 1001])
def test_argsort(ctx, rng, order, n, nth):
    x = np.round(values(rng, (3, 4, n)) * 2) / 2                  # many ties
    x[0, 0, : min(n, 3)] = np.nan
    out = gg.argsort(ctx.from_numpy(x), order)
    assert out.type == T.I32 and out.ne == (n, 4, 3, 1)
    run(out, nth)
    np.testing.assert_array_equal(out.to_numpy(), ref.argsort(x, order == gg.SortOrder.DESC))


def test_argsort_ties_keep_index_order(ctx):
    x = np.array([[1, 3, 1, 3, 2, 3]], np.float32)
    asc, desc = gg.argsort(ctx.from_numpy(x)), gg.argsort(ctx.from_numpy(x), gg.SortOrder.DESC)
    run([asc, desc])
    assert asc.to_numpy().tolist() == [[0, 2, 4, 1, 3, 5]]
    assert desc.to_numpy().tolist() == [[1, 3, 5, 4, 0, 2]]


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("n, k", [(1, 1), (8, 2), (8, 8), (64, 8), (129, 4), (1000, 50)])
def test_top_k(ctx, rng, n, k, nth):
    x = np.round(values(rng, (5, n)) * 4) / 4
    t = gg.top_k(ctx.from_numpy(x), k)
    v = gg.argsort_top_k(ctx.from_numpy(x), k)
    assert t.op == gg.Op.TOP_K and t.ne == (k, 5, 1, 1) and v.ne == (k, 5, 1, 1)
    run([t, v], nth)
    want = ref.argsort(x, desc=True)[:, :k]
    np.testing.assert_array_equal(v.to_numpy(), want)
    np.testing.assert_array_equal(t.to_numpy(), ref.top_k(x, k))      # ggml's CPU: the first two exchanged


@pytest.mark.parametrize("nth", THREADS)
def test_add_id(ctx, rng, nth):
    E, n_used, n_tok, n_b = 37, 3, 5, 4
    a = values(rng, (2, n_tok, n_used, E))
    b = values(rng, (n_b, E))
    ids = rng.integers(0, n_b, (n_tok, n_used)).astype(np.int32)
    out = gg.add_id(ctx.from_numpy(a), ctx.from_numpy(b), ctx.from_numpy(ids))
    run(out, nth)
    np.testing.assert_array_equal(out.to_numpy(), ref.add_id(a, b, ids).astype(np.float32))


@pytest.mark.parametrize("nth", THREADS)
def test_add_id_bad_id(ctx, rng, nth):
    a = values(rng, (3, 2, 16))
    ids = np.array([[0, 1], [1, 4], [0, 0]], np.int32)
    tb = ctx.from_numpy(values(rng, (2, 16)))
    out = gg.add_id(ctx.from_numpy(a), tb, ctx.from_numpy(ids))
    g = gg.CGraph()
    g.build_forward_expand(out)
    with pytest.raises(IndexError, match=r"add_id: index 4 at position \(1, 1, 0\) of the indices is out of "
                                         r"range \[0, 2\); its row was not written"):
        g.compute(nth)


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("n", [1, 7, 33, 300])
@pytest.mark.parametrize("split", [True, False])
def test_swiglu_oai(ctx, rng, n, split, nth):
    alpha, limit = 1.702, 7.0
    x, g = 6 * values(rng, (3, 4, n)), 6 * values(rng, (3, 4, n))
    x.flat[:2] = [np.float32(-200), np.float32(50)][: x.size]
    if split:
        out = gg.swiglu_oai(ctx.from_numpy(x), ctx.from_numpy(g), alpha, limit)
    else:
        out = gg.swiglu_oai(ctx.from_numpy(np.concatenate([x, g], axis=-1)), None, alpha, limit)
    assert out.op == gg.Op.GLU and out.ne == (n, 4, 3, 1)
    assert out.op_params[0] == gg.GluOp.SWIGLU_OAI
    run(out, nth)
    assert ref.nmse(out.to_numpy(), ref.swiglu_oai(x, g, alpha, limit)) < 1e-12


def test_swiglu_oai_params_as_ggml(ctx):
    x = ctx.new_tensor(T.F32, (8, 2))
    out = gg.swiglu_oai(x, x, 1.5, 7.0)
    assert np.frombuffer(out.op_params, np.float32)[2:4].tolist() == [1.5, 7.0]
    with pytest.raises(ValueError, match="swiglu_oai: limit must be >= 0, got -1"):
        gg.swiglu_oai(x, x, 1.0, -1)
    with pytest.raises(ValueError, match="glu: SWIGLU_OAI takes alpha and limit: use swiglu_oai"):
        gg.glu(x, gg.GluOp.SWIGLU_OAI)


def test_get_rows_3d_expert_weights(ctx, rng):
    """llama.cpp's weights of the chosen experts: probs [1, n_expert, n_tokens] picked by the
    selected ids [n_used, n_tokens] -> [1, n_used, n_tokens]"""
    n_expert, n_tok, k = 8, 5, 3
    probs = values(rng, (n_tok, n_expert))
    p = gg.reshape_3d(ctx.from_numpy(probs), 1, n_expert, n_tok)
    sel = gg.argsort_top_k(ctx.from_numpy(probs), k)
    out = gg.get_rows(p, sel)
    assert out.ne == (1, k, n_tok, 1)
    run(out, 2)
    idx = ref.argsort(probs, desc=True)[:, :k]
    np.testing.assert_array_equal(out.to_numpy().reshape(n_tok, k), np.take_along_axis(probs, idx, 1))


def test_router_softmax_normalised(ctx, rng):
    """qwen3moe's routing: softmax over the experts, top-k, their weights over their sum"""
    n_expert, n_tok, k = 8, 4, 2
    logits = values(rng, (n_tok, n_expert))
    probs = gg.soft_max_ext(ctx.from_numpy(logits))
    sel = gg.argsort_top_k(probs, k)
    w = gg.get_rows(gg.reshape_3d(probs, 1, n_expert, n_tok), sel)
    w = gg.div(w, gg.reshape_3d(gg.sum_rows(gg.reshape_2d(w, k, n_tok)), 1, 1, n_tok))
    run(w, 2)
    p = ref.soft_max_ext(logits[None, None])[0, 0]
    idx = ref.argsort(p, desc=True)[:, :k]
    pw = np.take_along_axis(p, idx, 1)
    assert ref.nmse(w.to_numpy().reshape(n_tok, k), pw / pw.sum(1, keepdims=True)) < 1e-12


# ---- mul_mat_id ----

def experts(ctx, rng, typ, n_expert, M, K):
    """the expert tensor of type typ and the values it stores (K-quants: decoded by the reference
    from the bytes pyggml's quantiser wrote)"""
    w = values(rng, (n_expert, M, K))
    a = ctx.from_numpy(w, type=T[typ])
    if typ in ref.K_LAYOUT:
        raw = np.frombuffer(a.tobytes(), np.uint8)
        return a, ref.dequantize_k(raw, typ).reshape(w.shape).astype(np.float32)
    return a, ref.roundtrip(w, typ)


def expert_view(a, e):
    return gg.view_2d(a, a.ne[0], a.ne[1], a.nb[1], e * a.nb[2])


def mul_mat_columns(ctx, a, x, ids):
    """each column as mul_mat computes it: per expert its columns in one mul_mat (float weights: one
    column a mul_mat, the GEMV path mul_mat_id matches)"""
    n_tok, n_used = ids.shape
    out = np.empty((n_tok, n_used, a.ne[1]), np.float32)
    groups = {}
    for t in range(n_tok):
        for u in range(n_used):
            groups.setdefault(int(ids[t, u]), []).append((t, u))
    for e, cols in groups.items():
        chunks = [[c] for c in cols] if a.type.name in FLOAT else [cols]
        for ch in chunks:
            b = np.stack([x[t, u % x.shape[1]] for t, u in ch])
            y = gg.mul_mat(expert_view(a, e), ctx.from_numpy(b))
            run(y)
            for (t, u), row in zip(ch, y.to_numpy()):
                out[t, u] = row
    return out


CASES = [(1, 1, 1), (1, 3, 3), (7, 2, 1), (7, 3, 3)] + ([] if EMULATED else [(40, 4, 1)])


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("typ", WTYPES)
def test_mul_mat_id(ctx, rng, typ, case, nth):
    """every weight type; decode (1 token) and prefill; b broadcast over the used experts (nb1 = 1)
    or one row per (expert, token); experts repeated within a token; bit for bit mul_mat's columns"""
    n_tok, n_used, nb1 = case
    n_expert, M = 5, 13
    K = 37 if typ in FLOAT else 256
    a, av = experts(ctx, rng, typ, n_expert, M, K)
    x = values(rng, (n_tok, nb1, K))
    ids = rng.integers(0, n_expert, (n_tok, n_used)).astype(np.int32)
    ids[0, -1] = ids[0, 0]                                   # an expert twice in one token
    out = gg.mul_mat_id(a, ctx.from_numpy(x), ctx.from_numpy(ids))
    assert out.type == T.F32 and out.ne == (M, n_used, n_tok, 1)
    run(out, nth)
    got = out.to_numpy()
    assert ref.nmse(got, ref.mul_mat_id(av, x, ids, typ)) < BOUND.get(typ, 1e-10)
    np.testing.assert_array_equal(got, mul_mat_columns(ctx, a, x, ids))


@pytest.mark.slow
@pytest.mark.parametrize("typ", ["Q8_0", "Q4_K", "IQ4_NL", "MXFP4"])
def test_mul_mat_id_prefill_groups(ctx, rng, typ):
    """> PG_MM_IC (64) columns for one expert (two column groups), uneven experts, 2 threads"""
    n_tok, n_expert, M, K = 90, 3, 35, 256
    a, _ = experts(ctx, rng, typ, n_expert, M, K)
    x = values(rng, (n_tok, 1, K))
    ids = np.stack([np.zeros(n_tok, np.int32), rng.integers(1, n_expert, n_tok).astype(np.int32)], 1)
    out = gg.mul_mat_id(a, ctx.from_numpy(x), ctx.from_numpy(ids))
    run(out, 2)
    np.testing.assert_array_equal(out.to_numpy(), mul_mat_columns(ctx, a, x, ids))


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("typ", ["Q8_0", "Q4_0", "IQ4_NL", "MXFP4", "Q4_K", "Q5_K"])
def test_mul_mat_id_repacked_experts(ctx, rng, typ, nth):
    """Tensor.repack of the experts' stack (where the kernels have a repacked layout): decode and
    prefill columns bit for bit those of the rows, with 37 rows an expert (a split between threads
    in whole panels of 16, a last panel of 5), one expert with 20 columns (AMX groups of 16)"""
    n_expert, M, K = 4, 37, 512
    a, _ = experts(ctx, rng, typ, n_expert, M, K)
    outs = []
    for n_tok in (1, 6, 20):
        ids = np.stack([np.full(n_tok, 2, np.int32), rng.integers(0, n_expert, n_tok).astype(np.int32)], 1)
        outs.append(gg.mul_mat_id(a, ctx.from_numpy(values(rng, (n_tok, 1, K))), ctx.from_numpy(ids)))
    g = run(outs, nth)
    rows = [o.to_numpy() for o in outs]
    blck, size = gg.blck_size(T[typ]), {"MXFP4": 2 + 16}.get(typ, gg.type_size(T[typ]))
    here = typ in gg.build_info()["repack"]
    assert a.repack(n_threads=nth) == (n_expert * 16 * 3 * (K // blck) * size if here else 0)
    g.compute(n_threads=nth)
    for o, want in zip(outs, rows):
        np.testing.assert_array_equal(o.to_numpy().view(np.uint32), want.view(np.uint32))


def test_mul_mat_id_ids_view(ctx, rng):
    """ids a strided view (argsort_top_k's first k of n_expert columns), as llama.cpp builds it"""
    n_tok, n_expert, k, M, K = 6, 8, 2, 9, 64
    a, av = experts(ctx, rng, "Q8_0", n_expert, M, K)
    logits = values(rng, (n_tok, n_expert))
    sel = gg.argsort_top_k(ctx.from_numpy(logits), k)
    assert not sel.is_contiguous()
    x = values(rng, (n_tok, 1, K))
    out = gg.mul_mat_id(a, ctx.from_numpy(x), sel)
    run(out, 2)
    ids = ref.argsort(logits, desc=True)[:, :k]
    assert ref.nmse(out.to_numpy(), ref.mul_mat_id(av, x, ids, "Q8_0")) < 1e-10


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("bad", [-1, 4])
def test_mul_mat_id_bad_id_writes_nothing(ctx, rng, bad, nth):
    a, _ = experts(ctx, rng, "Q4_0", 4, 8, 64)
    ids = np.array([[0, 1], [2, bad], [3, 3]], np.int32)
    out = gg.mul_mat_id(a, ctx.from_numpy(values(rng, (3, 1, 64))), ctx.from_numpy(ids))
    g = gg.CGraph()
    g.build_forward_expand(out)
    g.plan(nth)
    out.numpy()[...] = 7.0                                    # the arena block, before the compute
    with pytest.raises(IndexError, match=rf"mul_mat_id: index {bad} at position \(1, 1, 0\) of the indices is "
                                         r"out of range \[0, 4\); nothing of the result was written"):
        g.compute(nth)
    assert (out.numpy() == 7.0).all()


def test_mul_mat_id_bad_input(ctx):
    a = ctx.new_tensor(T.Q8_0, (64, 8, 4))
    b = ctx.new_tensor(T.F32, (64, 1, 3))
    ids = ctx.new_tensor(T.I32, (2, 3))
    with pytest.raises(TypeError, match="mul_mat_id: ids must be of type I32, got F32"):
        gg.mul_mat_id(a, b, ctx.new_tensor(T.F32, (2, 3)))
    with pytest.raises(TypeError, match="mul_mat_id: b must be of type F32, got F16"):
        gg.mul_mat_id(a, ctx.new_tensor(T.F16, (64, 1, 3)), ids)
    with pytest.raises(ValueError, match="a.ne\\[0\\] and b.ne\\[0\\] must match, got 64 and 32"):
        gg.mul_mat_id(a, ctx.new_tensor(T.F32, (32, 1, 3)), ids)
    with pytest.raises(ValueError, match="ids.ne\\[1\\] \\(n_tokens\\) must equal b.ne\\[2\\] = 3, got 2"):
        gg.mul_mat_id(a, b, ctx.new_tensor(T.I32, (2, 2)))
    with pytest.raises(ValueError, match="must be a multiple of b.ne\\[1\\] = 2"):
        gg.mul_mat_id(a, ctx.new_tensor(T.F32, (64, 2, 3)), ctx.new_tensor(T.I32, (3, 3)))
    with pytest.raises(ValueError, match="a must be \\[K, M, n_expert\\]"):
        gg.mul_mat_id(ctx.new_tensor(T.Q8_0, (64, 8, 4, 2)), b, ids)
    with pytest.raises(ValueError, match="ids must be \\[n_used, n_tokens\\]"):
        gg.mul_mat_id(a, b, ctx.new_tensor(T.I32, (2, 3, 2)))
    with pytest.raises(TypeError, match="mul_mat_id: a must be a pyggml.Tensor"):
        gg.mul_mat_id(None, b, ids)


def test_routing_bad_input(ctx):
    x = ctx.new_tensor(T.F32, (8, 2))
    with pytest.raises(ValueError, match=r"top_k: k must be in \[1, a.ne\[0\] = 8\], got 9"):
        gg.top_k(x, 9)
    with pytest.raises(ValueError, match="argsort: order must be a pyggml.SortOrder"):
        gg.argsort(x, 2)
    with pytest.raises(TypeError, match="argsort: a must be of type F32, got I32"):
        gg.argsort(ctx.new_tensor(T.I32, (8, 2)), gg.SortOrder.ASC)
    with pytest.raises(ValueError, match=r"add_id: ids must have ne=\(2, 1, 1, 1\)"):
        gg.add_id(x, ctx.new_tensor(T.F32, (8, 3)), ctx.new_tensor(T.I32, (3,)))
    with pytest.raises(ValueError, match=r"add_id: b must be \[a.ne\[0\] = 8, n_b\]"):
        gg.add_id(x, ctx.new_tensor(T.F32, (4, 3)), ctx.new_tensor(T.I32, (2,)))
