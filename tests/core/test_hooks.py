"""Hooks: CGraph.set_hook / compute(hooks=...) call a Python function on a node's result right
after it is computed, inside the compute. A hook reads the exact intermediate (also one a fused
kernel never writes otherwise), a hook that rewrites it changes the rest of the graph exactly as a
graph cut there would, a raising hook stops the compute, and Model.add_hook steers a model."""
import threading

import numpy as np
import pytest
import reference as ref
from conftest import THREADS

import pyggml as gg

HD, NH, T, CELLS, EPS = 16, 4, 5, 8, 1e-5
D = HD * NH
ROPE = (HD, gg.RopeType.NEOX, 0, 10000.0, 1.0, 0.0, 1.0, 32.0, 1.0)
# the nodes of the block below, in graph order; n and rope are fused away in a plain compute
STAGES = ("h", "n", "y", "rope", "kv", "out")


@pytest.fixture
def data(rng):
    return {"x": rng.standard_normal((T, D)).astype(np.float32),
            "r": rng.standard_normal((T, D)).astype(np.float32),
            "w": (1 + 0.1 * rng.standard_normal(D)).astype(np.float32),
            "pos": np.arange(3, 3 + T, dtype=np.int32),
            "idx": np.array([6, 1, 3, 0, 4], np.int64)}


def block(ctx, d, start=None, value=None, outputs=()):
    """h = x + r, n = rms_norm(h), y = n * w, rope = rope(y as heads), kv = set_rows(cache, rope rows),
    out = kv^T y: the ADD -> RMS_NORM -> MUL and ROPE -> SET_ROWS fusions. start/value: the stage
    `start` is a leaf holding `value` (the graph after a cut); outputs: stages marked as outputs.
    Returns (graph, {stage: tensor})."""
    x, r, w = (ctx.from_numpy(d[k]) for k in "xrw")
    pos, idx = ctx.from_numpy(d["pos"]), ctx.from_numpy(d["idx"])
    cache = ctx.from_numpy(np.zeros((CELLS, D), np.float32))
    build = {"h": lambda s: gg.add(s["x_view"], r),
             "n": lambda s: gg.rms_norm(s["h"], EPS),
             "y": lambda s: gg.mul(s["n"], w),
             "rope": lambda s: gg.rope_ext(gg.reshape_3d(s["y"], HD, NH, T), pos, None, *ROPE),
             "kv": lambda s: gg.set_rows(cache, gg.reshape_2d(s["rope"], D, T), idx),
             "out": lambda s: gg.mul_mat(s["kv"], s["y"])}
    s = {"x": x, "x_view": gg.reshape_2d(x, D, T)}       # a view node: the graph's first node
    s["x_view"].name = "x_view"
    for name in STAGES:
        s[name] = ctx.from_numpy(value) if name == start else build[name](s)
        s[name].name = name
        if name in outputs:
            gg.set_output(s[name])
    g = gg.CGraph()
    g.build_forward_expand(s["out"])
    return g, s


def fused_ops(g, nth):
    return [tuple(t.op.name for t in grp) for grp in g.plan(nth).fused]


def reference(d, steer=None):
    """The block in float64, with `steer` added to n."""
    h = d["x"].astype(np.float64) + d["r"]
    n = ref.rms_norm(h, EPS) + (0 if steer is None else steer)
    y = n * d["w"]
    rope = ref.rope(y.reshape(1, T, NH, HD), d["pos"], HD, gg.RopeType.NEOX).reshape(T, D)
    kv = np.zeros((CELLS, D))
    kv[d["idx"]] = rope
    return y @ kv.T


@pytest.mark.parametrize("nth", THREADS)
def test_hooks_read_the_exact_intermediates(ctx, data, nth):
    """Every stage read by a hook equals the same stage of a graph that marks it an output (written
    there), bit for bit, although a plain compute fuses n and rope away; reading changes
    nothing downstream."""
    g, s = block(ctx, data)
    assert fused_ops(g, nth) == [("ADD", "RMS_NORM", "MUL"), ("ROPE", "SET_ROWS")]
    g.compute(nth)
    plain = s["out"].numpy().copy()
    seen = {}
    g.compute(nth, hooks={s[k]: (lambda t, k=k: seen.__setitem__(k, t.numpy().copy())) for k in STAGES})
    np.testing.assert_array_equal(s["out"].numpy(), plain)
    g2, s2 = block(ctx, data, outputs=STAGES)
    assert fused_ops(g2, nth) == [("ADD", "RMS_NORM")]     # writes both nodes
    g2.compute(nth)
    assert list(seen) == list(STAGES)              # called in graph order
    for k in STAGES:
        np.testing.assert_array_equal(seen[k], s2[k].numpy(), err_msg=k)
    np.testing.assert_allclose(seen["n"], ref.rms_norm(data["x"].astype(np.float64) + data["r"], EPS),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("nth", THREADS)
@pytest.mark.parametrize("at", STAGES[:-1])
def test_a_rewriting_hook_is_a_cut_in_the_graph(ctx, data, rng, at, nth):
    """A hook that adds a vector to stage `at` gives what computing up to `at`, adding it in numpy
    and computing the rest from there gives, bit for bit."""
    g, s = block(ctx, data)
    v = rng.standard_normal(s[at].ne[0]).astype(np.float32)

    def steer(t):
        t.numpy()[...] += v

    g.set_hook(at, steer)
    g.compute(nth)
    hooked = s["out"].numpy().copy()
    assert fused_ops(g, nth) == [("ADD", "RMS_NORM", "MUL"), ("ROPE", "SET_ROWS")]   # the plain plan
    g1, s1 = block(ctx, data, outputs=(at,))
    g1.compute(nth)
    g2, s2 = block(ctx, data, start=at, value=s1[at].numpy() + v)
    g2.compute(nth)
    np.testing.assert_array_equal(hooked, s2["out"].numpy())
    g.remove_hook(at)
    g.compute(nth)
    assert np.abs(s["out"].numpy() - hooked).max() > 1e-3


@pytest.mark.parametrize("nth", THREADS)
def test_steering_the_fused_norm_matches_float64(ctx, data, rng, nth):
    """A steering vector added to the RMS_NORM of the fused ADD -> RMS_NORM -> MUL: the result is the
    float64 block with the vector added there, and far from the unsteered one; removing the hook
    gives back the plain results bit for bit."""
    g, s = block(ctx, data)
    g.compute(nth)
    plain = s["out"].numpy().copy()
    v = rng.standard_normal(D).astype(np.float32)
    g.set_hook("n", lambda t: np.add(t.numpy(), v, out=t.numpy()))
    assert list(g.hooks.values()) and next(iter(g.hooks)) is s["n"]
    for _ in range(2):                              # the hooked plan is cached and reused
        g.compute(nth)
        expect = reference(data, v)
        assert ref.nmse(s["out"].numpy(), expect) < 1e-10
        assert ref.nmse(s["out"].numpy(), reference(data)) > 1e-2
    g.remove_hook("n")
    assert g.hooks == {}
    g.compute(nth)
    np.testing.assert_array_equal(s["out"].numpy(), plain)


@pytest.mark.parametrize("nth", THREADS)
def test_a_raising_hook_stops_the_compute(ctx, data, nth):
    """The exception propagates; no later hook and no later node runs (the cache set_rows writes
    stays empty); the graph computes normally afterwards."""
    g, s = block(ctx, data)
    calls = []

    def boom(t):
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        g.compute(nth, hooks={"n": boom, "kv": lambda t: calls.append("kv")})
    assert calls == []
    assert not s["kv"].numpy().any()
    g.compute(nth)
    assert ref.nmse(s["out"].numpy(), reference(data)) < 1e-10


@pytest.mark.parametrize("nth", THREADS)
def test_hooks_run_on_the_calling_thread_in_order(ctx, data, nth):
    """set_hook's hook, then the compute's own on the same node; on the thread that called compute;
    a view of a leaf (nothing computed before it) is hooked before the parallel region; profiling
    works with hooks."""
    g, _ = block(ctx, data)
    order = []
    g.set_hook("y", lambda t: order.append(("set", threading.get_ident())))
    prof = g.compute(nth, profile=True, hooks={"y": lambda t: order.append(("call", threading.get_ident())),
                                                "x_view": lambda t: order.append(("x", t.numpy().sum()))})
    me = threading.get_ident()
    assert order == [("x", np.float32(data["x"].sum())), ("set", me), ("call", me)]
    assert len(prof.steps) == 3                     # y ends its group: both groups stay fused
    g.compute(nth)
    assert order[3:] == [("set", me)]


def test_hook_errors(ctx, data):
    g, s = block(ctx, data)
    with pytest.raises(ValueError, match="set_hook: no node named 'nope' in the graph"):
        g.set_hook("nope", print)
    with pytest.raises(ValueError, match="is a leaf"):
        g.set_hook(s["x"], print)
    with pytest.raises(ValueError, match="not in this graph"):
        g.set_hook(gg.add(s["h"], s["h"]), print)
    with pytest.raises(TypeError, match="fn must be callable"):
        g.set_hook("n", 3)
    with pytest.raises(TypeError, match="a pyggml.Tensor or a tensor name, got int"):
        g.set_hook(3, print)
    with pytest.raises(TypeError, match="hooks must be a dict"):
        g.compute(1, hooks=[("n", print)])
    with pytest.raises(TypeError, match="the hook of 'n' must be callable"):
        g.compute(1, hooks={"n": None})
    # the graph is busy while its hooks run: no set_hook or compute of it from a hook
    for inner in (lambda t: g.set_hook("y", print), lambda t: g.compute(1)):
        with pytest.raises(RuntimeError, match="already being computed"):
            g.compute(2, hooks={"n": inner})
    g.remove_hook("y")                              # none set: nothing to do
    g.compute(2)
    assert ref.nmse(s["out"].numpy(), reference(data)) < 1e-10


# ---- models ----

def test_model_steering_equals_a_layer_split(tmp_path):
    """A steering vector added to l_out-0 by Model.add_hook gives the logits of layers (0, 1), the
    vector added in numpy, then layers (1, n_layer): bit for bit, prefill and decode; hooks read
    attn_norm-1; remove_hook gives back the plain logits, and the graphs were never rebuilt."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from hf_models import converted

    from pyggml import models

    path = converted("llama-gqa", "f32", tmp_path)
    opts = {"n_ctx": 32, "kv_type": gg.Type.F32, "n_threads": 2}
    whole = models.load(path, **opts)
    a = models.load(path, layers=(0, 1), **opts)
    b = models.load(path, layers=(1, whole.hparams.n_layer), **opts)
    ids = [5, 17, 3, 99, 42, 7]
    plain = np.concatenate([whole.eval(ids[:4])] + [whole.eval([t]) for t in ids[4:]])
    whole.reset()
    v = np.random.default_rng(3).standard_normal(whole.hparams.n_embd).astype(np.float32)
    rows = []

    def steer(t):
        t.numpy()[...] += v

    whole.add_hook("l_out-0", steer)
    builds = whole.n_graph_builds
    with whole.hooks({"attn_norm-1": lambda t: rows.append(t.numpy().copy())}):
        got = np.concatenate([whole.eval(ids[:4])] + [whole.eval([t]) for t in ids[4:]])
    expect = np.concatenate([b.eval(a.eval(ids[:4]) + v)] + [b.eval(a.eval([t]) + v) for t in ids[4:]])
    np.testing.assert_array_equal(got, expect)
    assert np.abs(got - plain).max() > 1e-2
    assert [r.shape for r in rows] == [(4, 64), (1, 64), (1, 64)]
    whole.remove_hook("l_out-0")
    whole.reset()
    again = np.concatenate([whole.eval(ids[:4])] + [whole.eval([t]) for t in ids[4:]])
    np.testing.assert_array_equal(again, plain)
    assert whole.n_graph_builds == builds       # the graphs of the first run, reused throughout


@pytest.mark.parametrize("nth", THREADS)
def test_a_hook_may_compute_another_graph(ctx, data, nth):
    """A hook computing a second graph (here a copy of the block, on 2 threads asked, inside the
    first compute's region) gets that graph's exact results."""
    g, s = block(ctx, data)
    g2, s2 = block(ctx, data)
    g2.compute(2)
    expect = s2["out"].numpy().copy()
    s2["out"].numpy()[...] = 0
    got = []
    g.compute(nth, hooks={"y": lambda t: (g2.compute(2), got.append(s2["out"].numpy().copy()))})
    np.testing.assert_array_equal(got[0], expect)
    assert ref.nmse(s["out"].numpy(), reference(data)) < 1e-10
