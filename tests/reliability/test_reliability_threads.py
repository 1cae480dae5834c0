"""Graphs and Python threads (docs/reliability.md): build_forward_expand, plan and compute of one
graph from several threads never crash, hang or return wrong values (each call runs or raises
RuntimeError), and different graphs run at once."""
import threading
import time

import numpy as np
import pytest
from conftest import EMULATED

import pyggml as gg

pytestmark = pytest.mark.skipif(EMULATED, reason="timing-based; too slow under qemu")

TIMEOUT = 60    # seconds a thread may take before the test calls it a hang
OVERLAP = 30    # seconds a test keeps two threads going until their calls have overlapped as it needs


def chain(ctx, n=60, shape=(64, 4096)):
    """x (ones) and a chain of 2n scale nodes over it, by 2 and 1/2 in turn (a compute of some
    milliseconds): the nodes, x first, whose last equals x."""
    x = ctx.from_numpy(np.ones(shape, np.float32))
    nodes = [x]
    for _ in range(n):
        nodes.append(gg.scale(nodes[-1], 2.0))
        nodes.append(gg.scale(nodes[-1], 0.5))
    return x, nodes


def in_threads(*fns):
    """Run each fn in its own thread, all released at once; returns what each returned or raised."""
    start = threading.Barrier(len(fns))
    out = [None] * len(fns)

    def body(i, fn):
        start.wait()
        try:
            out[i] = fn()
        except Exception as e:          # noqa: BLE001 - the caller inspects what was raised
            out[i] = e
    threads = [threading.Thread(target=body, args=(i, fn), daemon=True) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
        assert not t.is_alive(), "a graph call hangs"
    return out


def refused(r, what):
    return isinstance(r, RuntimeError) and f"{what}: this graph is already being computed" in str(r)


@pytest.mark.parametrize("nth", [1, 2])
def test_a_fresh_graph_computed_from_two_threads(ctx, nth):
    """Both computes used to pass the guard while the first was still planning: one work buffer and
    barrier for two parallel regions (wrong values with one thread, a hang with two)."""
    for _ in range(8):
        y = chain(ctx, n=20)[1][-1]
        g = gg.CGraph()
        g.build_forward_expand(y)
        res = in_threads(lambda g=g: g.compute(nth), lambda g=g: g.compute(nth))
        assert all(r is None or refused(r, "compute") for r in res), res
        assert None in res
        np.testing.assert_array_equal(y.numpy(), 1.0)


def test_expand_and_plan_while_computing(ctx):
    """build_forward_expand used to free the arena under a running compute."""
    x, nodes = chain(ctx)
    g = gg.CGraph()
    g.build_forward_expand(nodes[-1])
    g.compute(2)
    stop = threading.Event()
    refusals = {"build_forward_expand": 0, "plan": 0}
    added = []

    def computer():
        # 30 computes, and more until the meddler has been refused both ways (a loaded machine may
        # schedule the meddler only between computes for a while)
        deadline = time.monotonic() + OVERLAP
        n = 0
        try:
            while n < 30 or (not all(refusals.values()) and time.monotonic() < deadline):
                n += 1
                try:
                    g.compute(2)
                except RuntimeError as err:      # the meddler holds the graph: refused, not blocked
                    assert refused(err, "compute"), err
        finally:
            stop.set()

    def meddler():
        while not stop.is_set():
            # a new node, or (the graph holds 2048) one expanded again: that takes the guard too
            new = len(added) < 500
            e = gg.scale(x, 3.0) if new else added[-1]
            for what, call in (("build_forward_expand", lambda e=e: g.build_forward_expand(e)),
                               ("plan", lambda: g.plan(1))):
                try:
                    call()
                    if what == "build_forward_expand" and new:
                        added.append(e)
                except RuntimeError as err:
                    assert refused(err, what), err
                    refusals[what] += 1
            time.sleep(0.0005)
    assert in_threads(computer, meddler) == [None, None]
    assert refusals["build_forward_expand"] and refusals["plan"], refusals    # the calls did overlap
    g.compute(2)
    np.testing.assert_array_equal(nodes[-1].numpy(), 1.0)
    for e in added:
        np.testing.assert_array_equal(e.numpy(), 3.0)


def test_claiming_a_node_of_a_computing_graph_is_refused(ctx):
    """A second graph that reaches a node of the first moves it to memory of its own (and makes the
    first re-plan): not while the first graph computes."""
    x, nodes = chain(ctx, shape=(256, 4096))
    g1 = gg.CGraph()
    g1.build_forward_expand(nodes[-1])
    g1.compute(1)
    done = threading.Event()
    errors = []

    def computer():
        # until the claimer has hit a compute (a loaded machine may need many tries)
        deadline = time.monotonic() + OVERLAP
        try:
            n = 0
            while not errors and (n < 20 or time.monotonic() < deadline):
                n += 1
                try:
                    g1.compute(1)
                except RuntimeError as err:      # the claimer is planning g1
                    assert refused(err, "compute"), err
        finally:
            done.set()

    def claimer():
        for node in nodes[1:-1]:           # each try reaches a node no other graph has claimed yet
            while not done.is_set():
                try:
                    g1.plan(1)
                except RuntimeError:       # g1 is computing: claim one of its nodes now
                    break
            try:
                gg.CGraph().build_forward_expand(gg.add(node, x))
            except RuntimeError as e:
                errors.append(e)
                return
    in_threads(computer, claimer)
    assert errors and "is a node of another graph, which is being computed" in str(errors[0])
    g1.compute(1)
    np.testing.assert_array_equal(nodes[-1].numpy(), 1.0)


def test_two_graphs_in_two_threads(ctx, rng):
    """Graphs that share only their inputs (weights) compute at once, each correctly."""
    w0 = rng.standard_normal((64, 256)).astype(np.float32)
    w = ctx.from_numpy(w0)
    graphs = []
    for k in range(2):
        a0 = rng.standard_normal((33, 256)).astype(np.float32)
        out = gg.soft_max_ext(gg.mul_mat(w, ctx.from_numpy(a0)), None, 0.1)
        g = gg.CGraph()
        g.build_forward_expand(out)
        e = np.exp((a0.astype(np.float64) @ w0.T.astype(np.float64)) * 0.1)
        graphs.append((g, out, e / e.sum(axis=1, keepdims=True)))

    def job(g, out, want):
        def run():
            for _ in range(40):
                g.compute(2)
                np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-6)
        return run
    assert in_threads(*(job(*gr) for gr in graphs)) == [None, None]
