"""A key/value cache for decoding: per-layer K and V tensors written row by row with set_rows.

Layout as llama.cpp's unified cache: layer il holds K [head_dim * n_head_kv, n_ctx] (one row per slot,
the heads side by side) and V the same (not transposed, as flash_attn_ext wants it). Slots are given
out contiguously: a step of n tokens takes the next n free slots, so token t of the step sits at slot
(and position) n_used + t.

    cache = KVCache(ctx, n_layer=2, n_ctx=256, head_dim=64, n_head_kv=4)   # F16 by default
    step = cache.prepare(n_tokens)          # reserves the slots; raises ValueError when full
    # per layer: k_cur, v_cur [head_dim, n_head_kv, n_tokens] (F32/F16, e.g. a rope_ext result)
    step.cpy_k(il, k_cur); step.cpy_v(il, v_cur)               # the set_rows nodes
    out = flash_attn_ext(q, step.get_k(il), step.get_v(il), step.mask, scale)
    # step.positions (I32 [n_tokens]) are the positions to rotate k_cur/q with; a rope_ext result
    # passed to cpy_k is rotated and written into the cache by one fused node

get_k/get_v are views over the filled slots [head_dim, n_kv, n_head_kv] built on the set_rows node of
the step (when there is one), so a graph that uses them runs the write first. The mask is F16
[n_kv, n_tokens]: 0 where slot s <= the token's position, -inf after it (causal).
"""
import numpy as np

from pyggml._enums import Type
from pyggml._ops import reshape_2d, set_rows, view_3d
from pyggml._tables import blck_size, row_size

__all__ = ["KVCache", "KVStep"]

# the types ggml allows for a KV cache (set_rows writes them, flash_attn_ext reads them)
_CACHE_TYPES = (Type.F32, Type.F16, Type.BF16, Type.Q8_0, Type.Q4_0, Type.Q4_1, Type.Q5_0, Type.Q5_1, Type.IQ4_NL)


class KVCache:
    """Per-layer K and V cache tensors of `type` (F16, F32, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL)
    with n_ctx slots."""

    def __init__(self, ctx, n_layer, n_ctx, head_dim, n_head_kv, type=Type.F16):
        typ = Type(type)
        if typ not in _CACHE_TYPES:
            raise TypeError(f"KVCache: type must be one of {', '.join(t.name for t in _CACHE_TYPES)}, got {typ.name}")
        blck = blck_size(typ)
        if head_dim <= 0 or head_dim % blck:
            raise ValueError(f"KVCache: head_dim must be a positive multiple of the {typ.name} block size {blck}, "
                             f"got {head_dim}")
        if n_layer <= 0 or n_ctx <= 0 or n_head_kv <= 0:
            raise ValueError(f"KVCache: n_layer, n_ctx and n_head_kv must be > 0, got {n_layer}, {n_ctx}, {n_head_kv}")
        self.ctx, self.type = ctx, typ
        self.n_layer, self.n_ctx, self.head_dim, self.n_head_kv = n_layer, n_ctx, head_dim, n_head_kv
        ne = (head_dim * n_head_kv, n_ctx)
        self.k = [ctx.new_tensor(typ, ne) for _ in range(n_layer)]
        self.v = [ctx.new_tensor(typ, ne) for _ in range(n_layer)]
        self.n_used = 0

    def prepare(self, n_tokens):
        """Reserve the next n_tokens slots and return the KVStep that writes and reads them."""
        n_tokens = int(n_tokens)
        if n_tokens <= 0:
            raise ValueError(f"KVCache.prepare: n_tokens must be > 0, got {n_tokens}")
        if self.n_used + n_tokens > self.n_ctx:
            raise ValueError(f"KVCache.prepare: {n_tokens} new tokens do not fit: {self.n_used} of n_ctx={self.n_ctx} "
                             f"slots are used ({self.n_ctx - self.n_used} free)")
        step = KVStep(self, self.n_used, n_tokens)
        self.n_used += n_tokens
        return step

    def clear(self):
        """Forget every cached token (the slots are reused from 0; the data is not erased)."""
        self.n_used = 0

    def __repr__(self):
        return (f"KVCache({self.type.name}, n_layer={self.n_layer}, n_ctx={self.n_ctx}, head_dim={self.head_dim}, "
                f"n_head_kv={self.n_head_kv}, n_used={self.n_used})")


class KVStep:
    """The slots [pos, pos + n_tokens) of one step: the indices to write (`idx`, I64), the token
    positions (`positions`, I32), the causal `mask` (F16 [n_kv, n_tokens]) and the K/V nodes."""

    def __init__(self, cache, pos, n_tokens):
        self.cache, self.pos, self.n_tokens = cache, pos, n_tokens
        self.n_kv = pos + n_tokens
        slots = np.arange(pos, pos + n_tokens)
        self.idx = cache.ctx.from_numpy(slots.astype(np.int64))
        self.positions = cache.ctx.from_numpy(slots.astype(np.int32))
        mask = np.where(np.arange(self.n_kv)[None, :] <= slots[:, None], 0.0, -np.inf)
        self.mask = cache.ctx.from_numpy(mask.astype(np.float16))
        self._written = {}

    def _cpy(self, kind, il, cur):
        c = self.cache
        dst = (c.k if kind == "k" else c.v)[il]
        e = c.head_dim * c.n_head_kv
        if cur.nelements != e * self.n_tokens:
            raise ValueError(f"KVStep.cpy_{kind}: cur must hold [{c.head_dim}, {c.n_head_kv}, {self.n_tokens}] "
                             f"elements, got ne={cur.ne}")
        node = set_rows(dst, reshape_2d(cur, e, self.n_tokens), self.idx)
        self._written[kind, il] = node
        return node

    def _get(self, kind, il):
        c = self.cache
        src = self._written.get((kind, il), (c.k if kind == "k" else c.v)[il])
        row = row_size(c.type, c.head_dim)
        return view_3d(src, c.head_dim, self.n_kv, c.n_head_kv, src.nb[1], row, 0)

    def cpy_k(self, il, k_cur):
        """set_rows of k_cur ([head_dim, n_head_kv, n_tokens], contiguous) into layer il's K."""
        return self._cpy("k", il, k_cur)

    def cpy_v(self, il, v_cur):
        """set_rows of v_cur into layer il's V."""
        return self._cpy("v", il, v_cur)

    def get_k(self, il):
        """K of layer il over the filled slots: [head_dim, n_kv, n_head_kv], after this step's write."""
        return self._get("k", il)

    def get_v(self, il):
        """V of layer il over the filled slots: [head_dim, n_kv, n_head_kv], after this step's write."""
        return self._get("v", il)
