import os
import pathlib
import platform

import numpy as np
import pytest

import pyggml as gg

# thread counts every threaded op is tested with (1 and 2+; more under PYGGML_TEST_THREADS)
THREADS = sorted({1, 2, int(os.environ.get("PYGGML_TEST_THREADS", "2"))})
# under qemu (tools/qemu.sh sets PYGGML_EMULATED; riscv64 is always emulated here) keep shapes
# small; tests read this to pick their grids
EMULATED = bool(os.environ.get("PYGGML_EMULATED")) or platform.machine() not in ("x86_64", "AMD64", "aarch64", "arm64")


REPO = pathlib.Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config, items):
    # qemu-user without binfmt_misc cannot exec a second foreign program (sys.executable, spawn);
    # slow tests take minutes there, and their kernels run in the small shapes too
    if EMULATED:
        skips = {"subprocess": pytest.mark.skip(reason="starts a new Python process: impossible under qemu-user"),
                 "slow": pytest.mark.skip(reason="marked slow: skipped under emulation")}
        for item in items:
            for mark, skip in skips.items():
                if mark in item.keywords:
                    item.add_marker(skip)
    # the comparisons with llama.cpp run in their own CI stage (they take minutes), only when asked for
    if "llama_cpp" not in (config.getoption("markexpr") or ""):
        skip = pytest.mark.skip(reason="compared with llama.cpp: bash tools/llama_cpp.sh, then pytest -m llama_cpp")
        for item in items:
            if "llama_cpp" in item.keywords:
                item.add_marker(skip)


def llama_cpp_tree():
    """The llama.cpp tree of llama-cpp-python's source distribution that tools/llama_cpp.sh unpacks
    (convert_hf_to_gguf.py, gguf-py, models/ggml-vocab-*.gguf, models/templates), or None:
    $PYGGML_LLAMA_CPP, else the newest under .cache/llama-cpp-python."""
    env = os.environ.get("PYGGML_LLAMA_CPP")
    trees = [pathlib.Path(env)] if env else sorted(REPO.glob(".cache/llama-cpp-python/*/vendor/llama.cpp"))
    return trees[-1] if trees and (trees[-1] / "convert_hf_to_gguf.py").is_file() else None


@pytest.fixture(scope="session")
def llama_cpp_src():
    """llama_cpp_tree(), or skip (the tests that need it are marked llama_cpp)."""
    tree = llama_cpp_tree()
    if tree is None:
        pytest.skip("no llama.cpp tree: run bash tools/llama_cpp.sh")
    return tree


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
