"""pyggml: ggml's CPU backend as a Python tensor library.

Build tensors (ggml's ne/nb layout, views without copies, numpy interop), build a compute graph
from ops, and compute it in C with the GIL released on OpenMP threads. See docs/api.md.
"""
import importlib.util as _ilu

from pyggml import _isa

_isa.install()  # a dispatch build: the kernel level this CPU runs (pyggml/_isa/__init__.py)
if _ilu.find_spec("pyggml._tensor") is None:  # the source folder shadows the installed package
    raise ImportError(
        f"pyggml: the compiled modules are missing in {__path__[0]}: this is the source folder "
        "(Python puts the current directory first on sys.path). Run from another directory, or "
        "install in place with: pip install --no-build-isolation -e .")

from pyggml import (
    _ops,
    gguf,  # noqa: F401  (pyggml.gguf.load without importing the submodule)
    profile,  # noqa: F401  (installs what CGraph.compute(profile=True) and CGraph.to_dot return)
)
from pyggml._enums import GluOp, Op, Prec, RopeType, SortOrder, Type, UnaryOp
from pyggml._graph import CGraph, Plan, default_threads, set_input, set_output
from pyggml._isa import build_info
from pyggml._ops import *
from pyggml._tables import blck_size, row_size, type_size
from pyggml._tensor import Context, Tensor
from pyggml.kvcache import KVCache, KVStep

__version__ = "0.1.0"

__all__ = [
    "CGraph", "Context", "GluOp", "KVCache", "KVStep", "Op", "Plan", "Prec", "RopeType", "SortOrder", "Tensor", "Type",
    "UnaryOp", "blck_size", "build_info", "default_threads", "row_size", "set_input", "set_output", "type_size",
]
__all__ += _ops.__all__
