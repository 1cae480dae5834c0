"""A key/value cache for decoding, laid out as llama.cpp's unified cache, with graphs built once.

Layer il holds K [head_dim * n_head_kv, n_ctx] (one row per cell, the heads side by side) and V
either the same way (`v_trans=False`, what flash_attn_ext reads) or transposed, [n_ctx,
head_dim_v * n_head_kv] (one row per value dimension, `v_trans=True`, what mul_mat(v, softmax(kq))
reads: llama.cpp's layout without flash attention). Each cell remembers the position of the token
it holds (-1: empty) and the sequences that token belongs to (a bit set of sequence ids 0..63,
llama.cpp's cells with their seq_id sets): several sequences share one cache, a token attends only
the cells of its own sequences at positions <= its own, and seq_rm / seq_cp / seq_keep /
seq_pos_max / defrag work as llama.cpp's llama_memory_seq_* (see KVCache). A sequence's new tokens
go to the lowest free cells after its last cell, so its cells always hold increasing positions: the
flash attention path that visits keys one by one (one_chunk) then meets a sequence's keys in the
same order whatever else shares the cache, and gives the same bits as the sequence alone.

A decode loop builds its graph once and feeds it in place (llama.cpp's way):

    cache = KVCache(ctx, n_layer=2, n_ctx=512, head_dim=64, n_head_kv=4)   # F16 by default
    kv = cache.batch(n_tokens=1, n_kv=cache.n_kv_for(1))   # input tensors of one graph shape
    # per layer: k_cur, v_cur [head_dim, n_head_kv, n_tokens] (F32/F16, e.g. a rope_ext result)
    kv.cpy_k(il, k_cur); kv.cpy_v(il, v_cur)                # the set_rows nodes
    out = flash_attn_ext(q, kv.get_k(il), kv.get_v(il), kv.mask, scale)
    ...                                                      # build the graph once
    cells = cache.alloc(positions)    # per step: reserve cells for the tokens at these positions
    kv.fill(cells)                    # write the cell indices and the mask into kv's inputs
    graph.compute()

get_k/get_v view the first n_kv cells ([head_dim, n_kv, n_head_kv]; transposed V: [n_kv,
head_dim_v, n_head_kv]), built on this batch's set_rows node so a graph runs the write first.
n_kv is fixed per graph; n_kv_for pads it to a multiple of `pad` cells (256, as llama.cpp), so one
decode graph serves 256 steps and is rebuilt only when the used cells cross a padding step. The mask
(F16 [n_kv, n_tokens]) is causal_mask(): 0 where a cell may be attended, -inf for empty cells,
cells of other sequences and cells of later positions.

Sliding-window attention (Gemma 2/3, Phi-3, as llama.cpp's LLAMA_SWA_TYPE_STANDARD): a cache made
with n_swa > 0 gives each batch a second mask, `mask_swa`, for the same step, which also hides the
cells a window of n_swa positions leaves out (a token at position p does not see positions
<= p - n_swa); each layer reads the mask of its kind. The cells themselves are shared: every layer
keeps every token, the window is the mask's business only.

KVStep (cache.prepare(n)) is the one-shot form: input tensors made for one step, already filled,
with n_kv = the used cells (no padding). It rebuilds the graph every step; prefer batch() + fill().
"""
import ctypes

import numpy as np

from pyggml._enums import QUANT_TYPES, Type
from pyggml._graph import set_input
from pyggml._ops import reshape_2d, set_rows, view_3d
from pyggml._tables import blck_size, row_size

__all__ = ["MAX_SEQ", "KVBatch", "KVCache", "KVCells", "KVStep", "causal_mask"]

MAX_SEQ = 64        # sequence ids 0..63: a cell's sequences are the bits of one uint64

_MASK_VALUES = np.array([0, -np.inf], np.float16)     # visible, hidden

# the types ggml allows for a KV cache (set_rows writes them, flash_attn_ext reads them)
_CACHE_TYPES = (Type.F32, Type.F16, Type.BF16, Type.Q8_0, Type.Q4_0, Type.Q4_1, Type.Q5_0, Type.Q5_1, Type.IQ4_NL)


def causal_mask(cell_pos, tok_pos, out=None, cell_yx=None, tok_yx=None, n_swa=0, cell_seq=None, tok_seq=None):
    """The attention mask of tokens at positions tok_pos [n_tokens] over cells holding positions
    cell_pos [n_kv] (-1 = empty): float16 [n_tokens, n_kv], 0 where the token may attend the cell
    (cell_pos >= 0 and cell_pos <= tok_pos), -inf elsewhere. n_swa > 0: a sliding window of n_swa
    positions, as llama.cpp's is_masked_swa (LLAMA_SWA_TYPE_STANDARD): cells with tok_pos - cell_pos
    >= n_swa are hidden too, so a token sees itself and the n_swa - 1 positions before it.
    cell_seq / tok_seq (uint64 bit sets of sequence ids, [n_kv] and [n_tokens]): a cell is also
    masked when it shares no sequence with the token. For M-RoPE image tokens that share a
    temporal position, cell_yx / tok_yx ([n, 2] (y, x) positions) order them as llama.cpp does: a
    cell at the same temporal position is masked when its (y, x) comes later. Written into `out`
    (an array or a tensor's numpy() view of that shape) when given, else returned new."""
    cp = np.asarray(cell_pos)[None, :]
    tp = np.asarray(tok_pos)[:, None]
    masked = (cp < 0) | (cp > tp)
    if n_swa > 0:
        masked |= tp - cp >= n_swa
    if cell_seq is not None and tok_seq is not None:
        masked |= (np.asarray(cell_seq, np.uint64)[None, :] & np.asarray(tok_seq, np.uint64)[:, None]) == 0
    if cell_yx is not None and tok_yx is not None:
        cy, cx = (np.asarray(cell_yx)[:, i][None, :] for i in (0, 1))
        ty, tx = (np.asarray(tok_yx)[:, i][:, None] for i in (0, 1))
        masked |= (cp == tp) & ((cy > ty) | ((cy == ty) & (cx > tx)))
    mask = np.where(masked, np.float16(-np.inf), np.float16(0))
    if out is None:
        return mask
    out[...] = mask
    return out


class KVCells:
    """The cells of a KV cache without its tensors: the position and the sequences of the token each
    of n_ctx cells holds, with alloc, free, the seq_* operations and defrag (KVCache's, which adds the
    K/V tensors). pad: the cell multiple n_kv_for rounds up to. n_swa > 0: the sliding window of the
    layers that use one (each batch then fills `mask_swa` too); 0: none. A process that plans the
    steps of a cache held elsewhere (pyggml.serve.pipeline: a model's layers in other processes)
    keeps its cells here and sends them with each step (KVCache.mirror)."""

    def __init__(self, n_ctx, pad=256, n_swa=0):
        if n_ctx <= 0 or pad <= 0:
            raise ValueError(f"{type(self).__name__}: n_ctx and pad must be > 0, got {n_ctx}, {pad}")
        if isinstance(n_swa, bool) or not isinstance(n_swa, (int, np.integer)) or not 0 <= n_swa < 2 ** 31:
            raise ValueError(f"{type(self).__name__}: n_swa must be an int in [0, 2^31) (0: no sliding window), "
                             f"got {n_swa!r}")
        self.n_ctx, self.pad, self.n_swa = int(n_ctx), int(pad), int(n_swa)
        self.cell_pos = np.full(n_ctx, -1, np.int32)      # position of the token in each cell, -1 empty
        self.cell_seq = np.zeros(n_ctx, np.uint64)        # its sequences, a bit per id (valid where pos >= 0)
        self.cell_yx = np.zeros((n_ctx, 2), np.int32)     # (y, x) of M-RoPE tokens
        self.has_yx = False         # some cell holds a (y, x): the mask orders equal positions by it
        self.seqs_used = np.uint64(0)   # the sequences ever given cells since clear (1: only sequence 0)
        self.n_used = 0

    def pad_n_kv(self, n_cells):
        """n_cells rounded up to a multiple of pad, at most n_ctx: the n_kv of a graph that must see
        cells [0, n_cells)."""
        return min(self.n_ctx, -(-int(n_cells) // self.pad) * self.pad)

    def n_kv_for(self, n_tokens):
        """The padded n_kv of a graph that appends n_tokens to the cells in use: n_used + n_tokens
        rounded up to a multiple of pad, at most n_ctx (one sequence filling cells from 0)."""
        return self.pad_n_kv(self.n_used + int(n_tokens))

    @property
    def n_cells_top(self):
        """One past the highest occupied cell (0 when empty)."""
        used = np.flatnonzero(self.cell_pos >= 0)
        return int(used[-1]) + 1 if len(used) else 0

    def _reserve(self, what, n_tokens):
        n_tokens = int(n_tokens)
        if n_tokens <= 0:
            raise ValueError(f"KVCache.{what}: n_tokens must be > 0, got {n_tokens}")
        if self.n_used + n_tokens > self.n_ctx:
            raise ValueError(f"KVCache.{what}: {n_tokens} new tokens do not fit: {self.n_used} of n_ctx={self.n_ctx} "
                             f"slots are used ({self.n_ctx - self.n_used} free)")
        first = self.n_used
        self.n_used += n_tokens
        return first

    @staticmethod
    def _bit(seq, what):
        seq = int(seq)
        if not 0 <= seq < MAX_SEQ:
            raise ValueError(f"KVCache.{what}: sequence ids are 0..{MAX_SEQ - 1}, got {seq}")
        return np.uint64(1 << seq)

    def _seq_cells(self, seq):
        """Boolean [n_ctx]: the occupied cells of seq (every occupied cell when seq < 0)."""
        used = self.cell_pos >= 0
        return used if seq < 0 else used & ((self.cell_seq & self._bit(seq, "seq")) != 0)

    def alloc(self, positions, yx=None, seqs=0):
        """Reserve cells for tokens at `positions` (ints) of sequences `seqs` (one id for all, or
        one per token; yx: their (y, x) for M-RoPE, [n, 2]) and return the cell indices (an int64
        array, in the tokens' order). A sequence's tokens, in the order given, take the lowest free
        cells after its last occupied cell. ValueError when the cache has too few free cells, or
        when a sequence has too few free cells after its last one (defrag() gathers them)."""
        pos = np.asarray(positions, dtype=np.int32).reshape(-1)
        n = len(pos)
        if n == 0:
            raise ValueError("KVCache.alloc: n_tokens must be > 0, got 0")
        seq = np.broadcast_to(np.asarray(seqs, np.int64).reshape(-1), (n,))
        bits = {int(s): self._bit(s, "alloc") for s in np.unique(seq)}
        if self.n_used + n > self.n_ctx:
            raise ValueError(f"KVCache.alloc: {n} new tokens do not fit: {self.n_used} of n_ctx={self.n_ctx} "
                             f"slots are used ({self.n_ctx - self.n_used} free)")
        cells = np.empty(n, np.int64)
        free = self.cell_pos < 0
        used = np.flatnonzero(~free)
        for s, bit in bits.items():
            at = np.flatnonzero(seq == s)
            mine = used[(self.cell_seq[used] & bit) != 0]
            start = int(mine[-1]) + 1 if len(mine) else 0
            got = np.flatnonzero(free[start:])[:len(at)] + start
            if len(got) < len(at):
                raise ValueError(f"KVCache.alloc: sequence {s} needs {len(at)} cells after its last cell {start - 1}, "
                                 f"{len(got)} are free there ({self.n_ctx - self.n_used} in all): call defrag()")
            cells[at] = got
            free[got] = False
        self.cell_pos[cells] = pos
        self.cell_seq[cells] = np.array([bits[int(s)] for s in seq], np.uint64) if len(bits) > 1 else bits[int(seq[0])]
        self.cell_yx[cells] = 0 if yx is None else yx
        self.has_yx |= yx is not None
        for bit in bits.values():
            self.seqs_used |= bit
        self.n_used += n
        return cells

    # ---- sequences: llama.cpp's llama_memory_seq_* ----

    @staticmethod
    def _range(p0, p1):
        """llama.cpp's position range: p0 < 0 is 0, p1 < 0 is infinity; [p0, p1)."""
        return max(int(p0), 0), (np.iinfo(np.int32).max if int(p1) < 0 else int(p1))

    def _in_range(self, seq, p0, p1):
        p0, p1 = self._range(p0, p1)
        return self._seq_cells(int(seq)) & (self.cell_pos >= p0) & (self.cell_pos < p1)

    def free(self, cells):
        """Empty these cells (whatever sequences they hold)."""
        self.cell_pos[cells] = -1
        self.cell_seq[cells] = 0
        self.n_used = int((self.cell_pos >= 0).sum())

    def seq_rm(self, seq, p0=-1, p1=-1):
        """Remove sequence seq (every sequence when seq < 0) from the cells at positions [p0, p1)
        (p0 < 0: from 0; p1 < 0: to the end); a cell left without a sequence is freed."""
        hit = np.flatnonzero(self._in_range(seq, p0, p1))
        if int(seq) >= 0:
            self.cell_seq[hit] &= ~self._bit(seq, "seq_rm")
            hit = hit[self.cell_seq[hit] == 0]
        self.free(hit)

    def seq_cp(self, src, dst, p0=-1, p1=-1):
        """Make sequence dst share src's cells at positions [p0, p1): the cells are not copied,
        they hold both sequences (as llama.cpp's unified cache). dst's new tokens then go after
        its last cell, so a prefix copied into an empty dst keeps dst's cells in position order."""
        if int(src) == int(dst):
            return
        bit = self._bit(dst, "seq_cp")
        self.cell_seq[self._in_range(src, p0, p1)] |= bit
        self.seqs_used |= bit

    def seq_keep(self, seq):
        """Keep sequence seq only: its cells hold seq alone, every other cell is freed."""
        bit = self._bit(seq, "seq_keep")
        used = self.cell_pos >= 0
        keep = used & ((self.cell_seq & bit) != 0)
        self.cell_seq[keep] = bit
        self.free(np.flatnonzero(used & ~keep))

    def seq_pos_min(self, seq):
        """The lowest position of sequence seq in the cache, -1 when it has none."""
        p = self.cell_pos[self._seq_cells(int(seq))]
        return int(p.min()) if len(p) else -1

    def seq_pos_max(self, seq):
        """The highest position of sequence seq in the cache, -1 when it has none."""
        p = self.cell_pos[self._seq_cells(int(seq))]
        return int(p.max()) if len(p) else -1

    def defrag(self):
        """Move the occupied cells to the front, keeping their order (so each sequence's cells
        still hold increasing positions), what they hold with them (move_rows). Returns the old
        indices of the cells now at 0, 1, ... (an int64 array); nothing moves when there is no hole."""
        old = np.flatnonzero(self.cell_pos >= 0)
        n = len(old)
        if n == 0 or old[-1] == n - 1:
            return old
        self.move_rows(old)
        for a in (self.cell_pos, self.cell_seq, self.cell_yx):
            a[:n] = a[old]
        self.cell_pos[n:] = -1
        self.cell_seq[n:] = 0
        return old

    def move_rows(self, old):
        """What defrag moves besides the cells' positions and sequences: nothing here (a KVCache
        moves its K and V rows from cells old to cells 0, 1, ...)."""

    def clear(self):
        """Forget every cached token (the cells are reused from 0; the data is not erased)."""
        self.n_used = 0
        self.cell_pos[:] = -1
        self.cell_seq[:] = 0
        self.has_yx = False
        self.seqs_used = np.uint64(0)


class KVCache(KVCells):
    """Per-layer K and V cache tensors of `type` (F16, F32, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL)
    with n_ctx cells, and their KVCells.

    v_trans=True stores V transposed (needs a float type: cells are written one element at a time).
    head_dim_v defaults to head_dim. pad and n_swa: KVCells'."""

    def __init__(self, ctx, n_layer, n_ctx, head_dim, n_head_kv, type=Type.F16, v_trans=False, head_dim_v=None,
                 pad=256, n_swa=0):
        typ = Type(type)
        if typ not in _CACHE_TYPES:
            raise TypeError(f"KVCache: type must be one of {', '.join(t.name for t in _CACHE_TYPES)}, got {typ.name}")
        if v_trans and typ in QUANT_TYPES:
            raise TypeError(f"KVCache: a transposed V (v_trans=True) needs F32, F16 or BF16, got {typ.name} "
                            "(use flash attention for a quantized cache)")
        head_dim_v = head_dim if head_dim_v is None else head_dim_v
        blck = blck_size(typ)
        for name, d in (("head_dim", head_dim), ("head_dim_v", head_dim_v)):
            if d <= 0 or d % blck:
                raise ValueError(f"KVCache: {name} must be a positive multiple of the {typ.name} block size {blck}, "
                                 f"got {d}")
        if n_layer <= 0 or n_ctx <= 0 or n_head_kv <= 0 or pad <= 0:
            raise ValueError(f"KVCache: n_layer, n_ctx, n_head_kv and pad must be > 0, got {n_layer}, {n_ctx}, "
                             f"{n_head_kv}, {pad}")
        super().__init__(n_ctx, pad, n_swa)
        self.ctx, self.type, self.v_trans = ctx, typ, bool(v_trans)
        self.n_layer, self.head_dim, self.n_head_kv = n_layer, head_dim, n_head_kv
        self.head_dim_v = head_dim_v
        ne_v = (n_ctx, head_dim_v * n_head_kv) if self.v_trans else (head_dim_v * n_head_kv, n_ctx)
        self.k = [ctx.new_tensor(typ, (head_dim * n_head_kv, n_ctx)) for _ in range(n_layer)]
        self.v = [ctx.new_tensor(typ, ne_v) for _ in range(n_layer)]

    def prepare(self, n_tokens):
        """Reserve the next n_tokens cells at positions = cells and return the one-shot KVStep."""
        first = self._reserve("prepare", n_tokens)
        self.cell_pos[first:self.n_used] = np.arange(first, self.n_used)
        self.cell_seq[first:self.n_used] = 1
        self.cell_yx[first:self.n_used] = 0
        self.seqs_used |= np.uint64(1)
        return KVStep(self, first, int(n_tokens))

    def batch(self, n_tokens, n_kv):
        """The reusable input tensors and K/V nodes of a graph of n_tokens tokens over n_kv cells."""
        return KVBatch(self, n_tokens, n_kv)

    def move_rows(self, old):
        """Move the K and V rows of cells old to cells 0, 1, ... (defrag's data movement)."""
        n = len(old)
        for t in self.k + ([] if self.v_trans else self.v):
            rows = _bytes(t).reshape(self.n_ctx, -1)
            rows[:n] = rows[old]
        if self.v_trans:
            for t in self.v:
                cols = _bytes(t).reshape(-1, self.n_ctx, t.nbytes // (t.ne[1] * self.n_ctx))
                cols[:, :n] = cols[:, old]

    def mirror(self, cells, moves=()):
        """Take the state of a KVCells `cells` (n_ctx cells as this cache's) that plans this cache's
        steps in another process: move the rows as its defrags since the last mirror did (moves:
        their results, in order), then copy its cells' positions and sequences."""
        if cells.n_ctx != self.n_ctx:
            raise ValueError(f"KVCache.mirror: the cells are {cells.n_ctx}, this cache's {self.n_ctx}")
        for old in moves:
            self.move_rows(np.asarray(old, np.int64))
        for a in ("cell_pos", "cell_seq", "cell_yx"):
            getattr(self, a)[:] = getattr(cells, a)
        self.has_yx, self.seqs_used, self.n_used = cells.has_yx, cells.seqs_used, cells.n_used

    @property
    def nbytes(self):
        return sum(t.nbytes for t in self.k + self.v)

    def __repr__(self):
        return (f"KVCache({self.type.name}, n_layer={self.n_layer}, n_ctx={self.n_ctx}, head_dim={self.head_dim}, "
                f"n_head_kv={self.n_head_kv}, v_trans={self.v_trans}, n_used={self.n_used})")


def _bytes(t):
    """The bytes of tensor t's data as a writable uint8 array (quantized types have no numpy view)."""
    return np.ctypeslib.as_array((ctypes.c_uint8 * t.nbytes).from_address(t.data_ptr))


class KVBatch:
    """The cache inputs of one graph shape (n_tokens tokens over n_kv cells): `idx` (I64 cell of
    each token), `idx_v` (transposed V: I64 element index of each value, else idx), `mask` (F16
    [n_kv, n_tokens]) and, when the cache has a sliding window, `mask_swa` (the same step's mask
    with the window; None without one), all marked as inputs and rewritten in place by fill()."""

    _name = "KVBatch"

    def __init__(self, cache, n_tokens, n_kv):
        n_tokens, n_kv = int(n_tokens), int(n_kv)
        if n_tokens <= 0 or not 0 < n_kv <= cache.n_ctx:
            raise ValueError(f"{self._name}: need n_tokens > 0 and 0 < n_kv <= n_ctx = {cache.n_ctx}, got "
                             f"n_tokens={n_tokens}, n_kv={n_kv}")
        self.cache, self.n_tokens, self.n_kv = cache, n_tokens, n_kv
        ctx = cache.ctx
        self.idx = set_input(ctx.new_tensor(Type.I64, (n_tokens,)))
        self.idx.name = "kv_idxs"
        e_v = cache.head_dim_v * cache.n_head_kv
        if cache.v_trans:
            self.idx_v = set_input(ctx.new_tensor(Type.I64, (n_tokens * e_v,)))
            self.idx_v.name = "kv_idxs_v"
            self._dim_offs = (np.arange(e_v, dtype=np.int64) * cache.n_ctx)[None, :]
        else:
            self.idx_v = self.idx
        self.mask = set_input(ctx.new_tensor(Type.F16, (n_kv, n_tokens)))
        self.mask.name = "kq_mask"
        self._idx_np, self._idx_v_np, self._mask_np = self.idx.numpy(), self.idx_v.numpy(), self.mask.numpy()
        self.mask_swa, self._mask_swa_np = None, None
        if cache.n_swa:
            self.mask_swa = set_input(ctx.new_tensor(Type.F16, (n_kv, n_tokens)))
            self.mask_swa.name = "kq_mask_swa"
            self._mask_swa_np = self.mask_swa.numpy()
            self._outside = np.empty(n_kv, np.bool_)     # a decode step's cells left of the window
        self._hidden = np.empty(n_kv, np.bool_)      # a decode step's mask row, before it becomes F16
        self._written = {}

    def get_mask(self, swa=False):
        """The mask a layer reads: mask_swa for a sliding-window layer (swa=True), else mask."""
        if swa and self.mask_swa is None:
            raise ValueError(f"{self._name}.get_mask: a sliding-window layer needs a cache made with n_swa > 0")
        return self.mask_swa if swa else self.mask

    def fill(self, cells):
        """Write the cells the batch's tokens go to (cache.alloc's result) and the mask over the
        first n_kv cells (and the sliding-window mask, if the cache has a window) into the input
        tensors: a token sees the cells of its sequences at positions <= its own. A cell that holds
        no token (a padding token's) sees nothing."""
        c = self.cache
        cells = np.asarray(cells, np.int64)
        if len(cells) != self.n_tokens:
            raise ValueError(f"{self._name}.fill: need {self.n_tokens} cells, got {len(cells)}")
        if cells.max() >= self.n_kv:
            raise ValueError(f"{self._name}.fill: cell {cells.max()} is beyond n_kv = {self.n_kv}; build a batch "
                             f"with n_kv = cache.n_kv_for(...)")
        self._idx_np[:] = cells
        if c.v_trans:
            self._idx_v_np[:] = (cells[:, None] + self._dim_offs).reshape(-1)
        n = self.n_kv
        one_seq = c.seqs_used <= 1
        seq = {} if one_seq else {"cell_seq": c.cell_seq[:n], "tok_seq": c.cell_seq[cells]}
        masks = ((self._mask_np, 0),) if self.mask_swa is None else ((self._mask_np, 0), (self._mask_swa_np, c.n_swa))
        if c.has_yx:
            for out, n_swa in masks:
                causal_mask(c.cell_pos[:n], c.cell_pos[cells], out, c.cell_yx[:n], c.cell_yx[cells], n_swa, **seq)
            return
        p = int(c.cell_pos[cells[0]])
        if self.n_tokens > 1 or p < 0 or not one_seq:
            for out, n_swa in masks:
                causal_mask(c.cell_pos[:n], c.cell_pos[cells], out, n_swa=n_swa, **seq)
            return
        # a decode step (one token, text, one sequence): causal_mask's values in two numpy calls
        # (few calls, because each is slow right after a compute has streamed the weights through
        # the caches), an empty cell's -1 comparing as the largest unsigned value
        np.greater(c.cell_pos[:n].view(np.uint32), p, out=self._hidden)
        np.take(_MASK_VALUES, self._hidden.view(np.uint8), out=self._mask_np[0])
        if self.mask_swa is not None:
            # and the cells left of the window (positions <= p - n_swa)
            np.less_equal(c.cell_pos[:n], p - c.n_swa, out=self._outside)
            np.logical_or(self._outside, self._hidden, out=self._outside)
            np.take(_MASK_VALUES, self._outside.view(np.uint8), out=self._mask_swa_np[0])

    def _check(self, kind, cur, e):
        if cur.nelements != e * self.n_tokens:
            dim = self.cache.head_dim if kind == "k" else self.cache.head_dim_v
            raise ValueError(f"{self._name}.cpy_{kind}: cur must hold [{dim}, {self.cache.n_head_kv}, "
                             f"{self.n_tokens}] elements, got ne={cur.ne}")

    def cpy_k(self, il, k_cur):
        """set_rows of k_cur ([head_dim, n_head_kv, n_tokens], contiguous) into layer il's K."""
        c = self.cache
        e = c.head_dim * c.n_head_kv
        self._check("k", k_cur, e)
        node = set_rows(c.k[il], reshape_2d(k_cur, e, self.n_tokens), self.idx)
        self._written["k", il] = node
        return node

    def cpy_v(self, il, v_cur):
        """set_rows of v_cur ([head_dim_v, n_head_kv, n_tokens], contiguous) into layer il's V
        (element by element when V is transposed, as llama.cpp)."""
        c = self.cache
        e = c.head_dim_v * c.n_head_kv
        self._check("v", v_cur, e)
        if c.v_trans:
            node = set_rows(reshape_2d(c.v[il], 1, c.n_ctx * e), reshape_2d(v_cur, 1, e * self.n_tokens), self.idx_v)
        else:
            node = set_rows(c.v[il], reshape_2d(v_cur, e, self.n_tokens), self.idx)
        self._written["v", il] = node
        return node

    def get_k(self, il):
        """K of layer il over the first n_kv cells: [head_dim, n_kv, n_head_kv], after this batch's write."""
        c = self.cache
        src = self._written.get(("k", il), c.k[il])
        return view_3d(src, c.head_dim, self.n_kv, c.n_head_kv, src.nb[1], row_size(c.type, c.head_dim), 0)

    def get_v(self, il):
        """V of layer il over the first n_kv cells: [head_dim_v, n_kv, n_head_kv], or [n_kv,
        head_dim_v, n_head_kv] when transposed, after this batch's write."""
        c = self.cache
        src = self._written.get(("v", il), c.v[il])
        if c.v_trans:
            row = row_size(c.type, c.n_ctx)
            return view_3d(src, self.n_kv, c.head_dim_v, c.n_head_kv, row, row * c.head_dim_v, 0)
        return view_3d(src, c.head_dim_v, self.n_kv, c.n_head_kv, src.nb[1], row_size(c.type, c.head_dim_v), 0)


class KVStep(KVBatch):
    """The cells [pos, pos + n_tokens) of one step, filled at creation: `idx` (I64 cells),
    `positions` (I32, = the cells), the causal `mask` (F16 [n_kv, n_tokens], n_kv = pos + n_tokens)
    and the K/V nodes. Made by KVCache.prepare."""

    _name = "KVStep"

    def __init__(self, cache, pos, n_tokens):
        super().__init__(cache, n_tokens, pos + n_tokens)
        self.pos = pos
        cells = np.arange(pos, pos + n_tokens)
        self.positions = set_input(cache.ctx.from_numpy(cells.astype(np.int32)))
        self.fill(cells)
