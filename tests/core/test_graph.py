"""CGraph: topological order, planning (threads, work buffer, memory of intermediates), compute."""
import time

import numpy as np
import pytest
import reference as ref
from conftest import EMULATED, THREADS

import pyggml as gg


def test_build_forward_expand_order(ctx):
    a = ctx.from_numpy(np.ones(4, np.float32))
    b = ctx.from_numpy(np.full(4, 2, np.float32))
    s = gg.add(a, b)
    m = gg.mul(s, s)                                  # s used twice: one node
    out = gg.add(m, a)
    g = gg.CGraph()
    g.build_forward_expand(out)
    g.build_forward_expand(out)                       # idempotent
    assert g.nodes == (s, m, out)
    assert set(map(id, g.leafs)) == {id(a), id(b)}
    g.compute(1)
    np.testing.assert_array_equal(out.numpy(), np.full(4, 10, np.float32))


@pytest.mark.parametrize("nth", THREADS)
def test_recompute_after_inputs_change(ctx, nth):
    x = ctx.from_numpy(np.zeros(33, np.float32))
    y = gg.scale(gg.add(x, x), 0.5)
    g = gg.CGraph()
    g.build_forward_expand(y)
    for step in range(3):
        x.numpy()[:] = step
        g.compute(nth)
        np.testing.assert_array_equal(y.numpy(), np.full(33, step, np.float32))


def test_memory_is_reused_but_outputs_are_kept(ctx, rng):
    x0 = rng.standard_normal(1024).astype(np.float32)
    x = ctx.from_numpy(x0)
    chain = [x]
    for _ in range(8):
        chain.append(gg.scale(chain[-1], 2.0))
    keep = chain[3]                                   # an output in the middle of the chain
    g = gg.CGraph()
    g.build_forward_expand(keep)
    g.build_forward_expand(chain[-1])
    plan = g.plan(2)
    assert plan.mem_bytes_naive == 8 * 4096
    assert plan.mem_bytes <= 4 * 4096                 # the chain ping-pongs, keep has its own block
    g.compute(2)
    np.testing.assert_array_equal(keep.numpy(), x0 * 8)
    np.testing.assert_array_equal(chain[-1].numpy(), x0 * 256)


def test_page_sized_blocks_are_page_aligned(ctx, rng):
    """Blocks of 4 KiB or more start on a page (no 4K aliasing between a kernel's loads and
    stores, _tensor.block_align), smaller ones on a cache line, and the arena still reuses the
    gaps that alignment leaves."""
    a0 = rng.standard_normal(1500).astype(np.float32)     # 6000 bytes
    b0 = rng.standard_normal(17).astype(np.float32)       # 68 bytes
    a, b = ctx.from_numpy(a0), ctx.from_numpy(b0)
    assert a.data_ptr % 4096 == 0 and b.data_ptr % 64 == 0
    nodes, big, small = [], a, b
    for k in range(6):                                    # small and page-sized intermediates interleaved
        small = gg.scale(small, 2.0)
        big = gg.scale(big, 0.5)
        nodes += [small, big]
    out = gg.add(big, gg.scale(gg.view_1d(big, 15, 0), 0.0))
    g = gg.CGraph()
    g.build_forward_expand(out)
    g.build_forward_expand(small)
    plan = g.plan(1)
    assert plan.mem_bytes < plan.mem_bytes_naive
    g.compute(1)
    for n in nodes + [out]:
        assert n.data_ptr % (4096 if n.nbytes >= 4096 else 64) == 0, n
    np.testing.assert_array_equal(out.numpy(), a0 / 64)
    np.testing.assert_array_equal(small.numpy(), b0 * 64)


def test_graph_grows_after_compute(ctx):
    x = ctx.from_numpy(np.ones(16, np.float32))
    a = gg.scale(x, 3.0)
    b = gg.scale(a, 2.0)
    g = gg.CGraph()
    g.build_forward_expand(b)
    g.compute(1)
    c = gg.add(a, b)                                  # a gets a new consumer: memory is replanned
    g.build_forward_expand(c)
    g.compute(2)
    np.testing.assert_array_equal(c.numpy(), np.full(16, 9, np.float32))
    np.testing.assert_array_equal(b.numpy(), np.full(16, 6, np.float32))


def test_views_of_intermediates(ctx, rng):
    x0 = rng.standard_normal((4, 8)).astype(np.float32)
    x = ctx.from_numpy(x0)
    s = gg.scale(x, 2.0)
    v = gg.view_2d(s, 4, 4, s.nb[1], 16)              # right half of every row
    t = gg.transpose(v)
    out = gg.cont(t)
    g = gg.CGraph()
    g.build_forward_expand(out)
    g.compute(2)
    np.testing.assert_array_equal(out.numpy(), (x0[:, 4:] * 2).T)
    assert v.has_data and np.shares_memory(v.numpy(), s.numpy())


def test_plan_reports(ctx):
    x = ctx.from_numpy(np.ones((3, 64), np.float32))
    y = gg.add(x, ctx.from_numpy(np.ones(64, np.float16)))   # f16 b needs scratch
    g = gg.CGraph()
    g.build_forward_expand(y)
    p1, p2 = g.plan(1), g.plan(3)
    assert p1.n_threads == 1 and p2.n_threads == 3 and p2.work_size >= 3 * 2 * 64 * 4
    assert p2.n_tasks == (3,)
    assert g.plan(3) is p2
    with pytest.raises(ValueError, match="n_threads must be >= 1"):
        g.plan(0)


def test_graph_errors(ctx):
    g = gg.CGraph(size=2)
    x = ctx.from_numpy(np.ones(4, np.float32))
    with pytest.raises(TypeError, match="must be a pyggml.Tensor"):
        g.build_forward_expand(np.ones(3))
    with pytest.raises(ValueError, match="graph is full"):
        g.build_forward_expand(gg.scale(gg.scale(gg.scale(x, 1.0), 1.0), 1.0))


def test_build_info():
    info = gg.build_info()
    assert info["simd"] in {"avx512", "avx2", "neon", "rvv", "scalar"}
    assert isinstance(info["openmp"], bool) and info["compiler"] and info["version"]


def test_default_threads_compute(ctx):
    x = ctx.from_numpy(np.arange(100, dtype=np.float32))
    y = gg.scale(x, -1.0)
    g = gg.CGraph()
    g.build_forward_expand(y)
    g.compute()                                       # n_threads=None: all cores
    np.testing.assert_array_equal(y.numpy(), -np.arange(100, dtype=np.float32))


def test_many_nodes_many_threads(ctx):
    """300 one-row adds get one task each, but the scale at the end splits its elements over all
    four threads, so the plan keeps four: three threads are idle at every add and must still meet
    its barrier."""
    x = ctx.from_numpy(np.ones(5, np.float32))
    t = x
    for _ in range(300):
        t = gg.add(t, x)
    y = gg.mul(ctx.from_numpy(np.full((4, 5), 2, np.float32)), t)
    g = gg.CGraph()
    g.build_forward_expand(y)
    plan = g.plan(4)
    assert plan.n_threads == 4 and plan.n_tasks[:300] == (1,) * 300 and plan.n_tasks[300] == 4
    g.compute(4)
    np.testing.assert_array_equal(y.numpy(), np.full((4, 5), 602, np.float32))


def test_one_row_graph_runs_on_one_thread(ctx):
    """nodes that split whole rows get at most one task per row, so a graph of one-row scale,
    unary, glu and rope nodes plans one thread whatever it is given (a second would only wake to
    wait), and a four-row one plans four"""
    def graph(rows):
        x = ctx.from_numpy(np.linspace(-1, 1, 16 * rows, dtype=np.float32).reshape(rows, 1, 16))
        r = gg.rope_ext(x, ctx.from_numpy(np.arange(3, 3 + rows, dtype=np.int32)))
        y = gg.swiglu(gg.silu(gg.scale(r, 0.5)))
        g = gg.CGraph()
        g.build_forward_expand(y)
        return g, x.numpy().copy(), y
    g, x, y = graph(1)
    plan = g.plan(4)
    assert plan.n_threads == 1 and plan.n_tasks == (1,) * len(g.nodes)
    g.compute(4)
    h = 0.5 * ref.rope(x, np.array([3], np.int32), 16, 0)
    s = ref.silu(h)
    np.testing.assert_allclose(y.numpy(), ref.silu(s[..., :8]) * s[..., 8:], rtol=1e-5, atol=1e-6)
    assert graph(4)[0].plan(4).n_threads == 4


@pytest.mark.skipif(EMULATED, reason="timing-based; too slow under qemu")
def test_concurrent_compute_of_one_graph_is_refused(ctx):
    import threading
    x = ctx.from_numpy(np.ones((256, 4096), np.float32))
    y = x
    for _ in range(100):                              # tens of ms per compute
        y = gg.scale(y, 1.0)
    g = gg.CGraph()
    g.build_forward_expand(y)
    g.compute(1)
    errors = []

    def run():
        try:
            g.compute(1)
        except RuntimeError as e:
            errors.append(str(e))
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:   # again if the thread ran before we could meet it
        t = threading.Thread(target=run)
        t.start()
        while t.is_alive() and not errors:            # one of the two overlapping computes is refused
            run()
        t.join()
    assert errors and all("already being computed" in e for e in errors)
    np.testing.assert_array_equal(y.numpy(), 1.0)
