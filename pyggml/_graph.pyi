from typing import Any

from pyggml._tensor import Tensor

FLAG_OUTPUT: int

def default_threads() -> int: ...
def build_info() -> dict[str, Any]: ...

class Plan:
    n_threads: int
    work_size: int
    n_tasks: tuple[int, ...]
    fused: list[Any]
    mem_bytes: int
    mem_bytes_naive: int
    use_ref: bool
    paths: dict[Tensor, str]

class CGraph:
    size: int
    def __init__(self, size: int = 2048) -> None: ...
    @property
    def nodes(self) -> tuple[Tensor, ...]: ...
    @property
    def leafs(self) -> tuple[Tensor, ...]: ...
    @property
    def n_nodes(self) -> int: ...
    def build_forward_expand(self, tensor: Tensor) -> None: ...
    def plan(self, n_threads: int | None = None, use_ref: bool = False) -> Plan: ...
    def compute(self, n_threads: int | None = None, use_ref: bool = False) -> None: ...
