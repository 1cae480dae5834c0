"""pyggml: ggml's CPU backend as a Python tensor library.

Build tensors (ggml's ne/nb layout, views without copies, numpy interop), build a compute graph
from ops, and compute it in C with the GIL released on OpenMP threads. See docs/api.md.
"""
from pyggml._enums import GluOp, Op, Prec, RopeType, Type, UnaryOp
from pyggml._graph import CGraph, Plan, build_info, default_threads
from pyggml._ops import *  # noqa: F403
from pyggml._ops import __all__ as _ops_all
from pyggml._tensor import Context, Tensor
from pyggml.kvcache import KVCache, KVStep

__version__ = "0.1.0"

__all__ = ["Context", "Tensor", "CGraph", "Plan", "Type", "Op", "UnaryOp", "GluOp", "RopeType", "Prec",
           "build_info", "default_threads", "KVCache", "KVStep", *_ops_all]
