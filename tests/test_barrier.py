"""The barrier between nodes: a long chain in which every node reads rows that the previous node's
other threads wrote (a transpose), so a missing or leaky barrier shows as wrong numbers."""
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
