"""pyggml: ggml's CPU backend as a Python tensor library.

Build tensors (ggml's ne/nb layout, views without copies, numpy interop), build a compute graph
from ops, and compute it in C with the GIL released on OpenMP threads. See docs/api.md.
"""
from pyggml import _ops
from pyggml._enums import GluOp, Op, Prec, RopeType, Type, UnaryOp
from pyggml._graph import CGraph, Plan, build_info, default_threads
from pyggml._ops import *
from pyggml._tensor import Context, Tensor

__version__ = "0.1.0"

__all__ = [
           "CGraph",
           "Context",
           "GluOp",
           "Op",
           "Plan",
           "Prec",
           "RopeType",
           "Tensor",
           "Type",
           "UnaryOp",
           "build_info",
           "default_threads",
]
__all__ += _ops.__all__
