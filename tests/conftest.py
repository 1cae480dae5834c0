import os
import platform

import numpy as np
import pytest

import pyggml as gg

# thread counts every threaded op is tested with (1 and 2+; more under PYGGML_TEST_THREADS)
THREADS = sorted({1, 2, int(os.environ.get("PYGGML_TEST_THREADS", "2"))})
# under qemu (tools/qemu.sh sets PYGGML_EMULATED; riscv64 is always emulated here) keep shapes
# small; tests read this to pick their grids
EMULATED = bool(os.environ.get("PYGGML_EMULATED")) or platform.machine() not in ("x86_64", "AMD64", "aarch64", "arm64")


def pytest_collection_modifyitems(config, items):
    # qemu-user without binfmt_misc cannot exec a second foreign program (sys.executable, spawn)
    if EMULATED:
        skip = pytest.mark.skip(reason="starts a new Python process: impossible under qemu-user")
        for item in items:
            if "subprocess" in item.keywords:
                item.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    info = gg.build_info()
    terminalreporter.write_line(f"pyggml {platform.machine()}: " +
                                ", ".join(f"{k}={info[k]}" for k in ("simd", "vlen", "openmp") if k in info))


def run(out, n_threads=1, use_ref=False, graph=None):
    """Build a graph for `out` (a tensor or a list), compute it, return the graph."""
    g = graph or gg.CGraph()
    for t in (out if isinstance(out, (list, tuple)) else [out]):
        g.build_forward_expand(t)
    g.compute(n_threads=n_threads, use_ref=use_ref)
    return g


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def ctx():
    return gg.Context()
