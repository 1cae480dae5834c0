"""The barrier between nodes: a long chain in which every node reads rows that the previous node's
other threads wrote (a transpose), so a missing or leaky barrier shows as wrong numbers; the sleep
path that a waiter takes after its spin, and threads oversubscribed under a busy competitor."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import reference as ref
from conftest import THREADS, run

import pyggml as gg


@pytest.mark.parametrize("nth", THREADS)
def test_chain_crossing_threads(ctx, rng, nth):
    x = rng.standard_normal((8, 8)).astype(np.float32)
    tx = ctx.from_numpy(x)
    t = tx
    want = x.astype(np.float64)
    for i in range(100):
        t = gg.add(gg.cont(gg.transpose(gg.scale(t, 0.5))), tx)
        want = (0.5 * want).T + x
    g = run(t, nth)
    assert g.n_nodes == 400
    for _ in range(3):
        assert ref.nmse(t.to_numpy(), want) < 1e-12
        g.compute(n_threads=nth)


# ---- the barrier's sleep path (barrier.h): a waiter spins briefly, then sleeps until woken ----

def _child(code, timeout, cwd):
    """Run code in a new Python process in cwd (not the source folder, which would shadow the
    installed package); a hang there fails this test instead of the suite."""
    env = {**os.environ, "PYGGML_TESTS_DIR": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=timeout, check=False, env=env, cwd=cwd)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


@pytest.mark.subprocess
@pytest.mark.skipif(not gg.build_info()["openmp"], reason="one thread without OpenMP: no barrier to wait at")
def test_waiting_thread_sleeps_and_is_woken(tmp_path):
    # each round one thread sleeps 2 ms before it arrives; the other must not spin all that time
    out = _child("""
        import pyggml._vec as v
        print(*v.barrier_probe(20, 0.002, 2))
    """, 120, tmp_path)
    used, wall, cpu = (float(x) for x in out.split())
    assert used == 2
    assert wall >= 20 * 0.002
    assert cpu < 0.25 * wall, f"the waiting threads used {cpu:.4f} s of CPU in {wall:.4f} s: they spun"


@pytest.mark.subprocess
@pytest.mark.skipif(not gg.build_info()["openmp"], reason="one thread without OpenMP")
def test_oversubscribed_with_busy_competitor(tmp_path):
    # 8 threads on this machine's cores while another process spins: threads are descheduled in
    # the middle of nodes, barriers sleep and wake all the time; no hang, the same numbers
    _child("""
        import os, subprocess, sys
        import numpy as np
        sys.path.insert(0, os.environ["PYGGML_TESTS_DIR"])
        import reference as ref
        import pyggml as gg
        import pyggml._vec as v

        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            assert v.barrier_probe(300, 0.0001, 8)[0] == 8
            rng = np.random.default_rng(0)
            ctx = gg.Context()
            x = rng.standard_normal((8, 8)).astype(np.float32)
            tx = ctx.from_numpy(x)
            t, want = tx, x.astype(np.float64)
            for _ in range(50):
                t = gg.add(gg.cont(gg.transpose(gg.scale(t, 0.5))), tx)
                want = (0.5 * want).T + x
            q = rng.standard_normal((1, 8, 1, 64)).astype(np.float32)
            k = rng.standard_normal((1, 2, 300, 64)).astype(np.float32)
            vv = rng.standard_normal((1, 2, 300, 64)).astype(np.float32)
            att = gg.flash_attn_ext(ctx.from_numpy(q), ctx.from_numpy(k), ctx.from_numpy(vv), None, 0.125)
            gg.flash_attn_ext_set_path(att, "split")
            w = rng.standard_normal((96, 64)).astype(np.float32)
            b = rng.standard_normal((5, 64)).astype(np.float32)
            mm = gg.mul_mat(ctx.from_numpy(w), ctx.from_numpy(b))
            g = gg.CGraph()
            for o in (t, att, mm):
                g.build_forward_expand(o)
            for _ in range(20):
                g.compute(n_threads=8)
                assert ref.nmse(t.to_numpy(), want) < 1e-12
                assert ref.nmse(att.to_numpy(), ref.flash_attn_ext(q, k, vv, None, 0.125)) < 1e-6
                assert ref.nmse(mm.to_numpy(), ref.mul_mat(w, b, "F32")) < 1e-10
            assert gg.flash_attn_ext_get_path(att) == "split"
        finally:
            busy.kill()
    """, 300, tmp_path)
