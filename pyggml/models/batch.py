"""Continuous batching: several sequences generated together in one KV cache, one graph step at a time.

    eng = BatchEngine(model, n_seq=4)                 # 4 sequences (slots) share model.cache
    a = eng.submit([1, 15043, 3186], 32, temperature=0.8, seed=1)
    b = eng.submit(other_ids, 16)                     # may also join between two steps
    while eng.busy:
        eng.step()
    a.tokens, b.tokens, a.finish_reason               # "stop", "length", "cancelled" or "error"

A step is one graph (the model's graph_class, a pyggml.models.blocks.Decoder) over the next token of every decoding sequence plus prefill chunks of the
prompts still being read, up to n_batch tokens (a long prompt is read over several steps, so it
does not stall the others). Each token carries its sequence id: its K/V go to cells of that
sequence (KVCache.alloc) and the mask lets it see only its sequence's cells (KVBatch.fill); the
rows whose logits are wanted (a decoding token, the last token of a prompt) reach the LM head
through the graph's inp_out_ids. Graphs are built once per shape (tokens, n_kv, rows out) and kept
(the last _MAX_GRAPHS); n_kv is padded to the cache's pad, the tokens and the rows out only where
the bits need it (below): a graph takes about a millisecond to build, padding costs compute in
every step (padding tokens write to a free cell and see nothing).

A sequence's result does not depend on what else is in the batch: the same request alone or with
any companions, joining at any step, gives the same logits to the bit and so the same tokens.
pyggml's mul_mat gives each column's bits independently of the other columns on its integer
paths (quantized weights, whatever the column count), and with F32/F16/BF16 weights within each of
its float paths: the dot tiles (from FLOAT_TILE_MIN_COLS columns to gemm_min_cols() - 1) and the
GEMM (from gemm_min_cols() on, in whole panels of gemm_shape()[1] columns: a last panel at most
half full goes to the tiles); one column takes the one-column kernels, which sum in another order.
So with float weights (exact=True) every step is of one class, and every token's class follows
from its own request:
- with fewer slots than gemm_min_cols(): decoding tokens, and prompts shorter than that, take the
  tiles' steps (FLOAT_TILE_MIN_COLS to gemm_min_cols() - 1 tokens: padding below, n_batch capped
  above); the tokens of a longer prompt take the GEMM's steps (up to n_batch tokens, padded to at
  least gemm_min_cols() and to whole panels). While both have work the steps alternate, so a long
  prompt is read in large steps without stopping the others' decoding for more than one step at a
  time. The LM head's rows out always take the tiles. A prompt reuses cached cells only where
  they came from steps of its own class (_Slot.reusable);
- with more slots: every step the GEMM's (at least gemm_min_cols() tokens, whole panels).
The padding costs compute on small batches; exact=False drops it and the bits (the tokens may then
differ in rare near-ties).
Attention runs flash_attn_ext's one_chunk path (key by key, hidden keys skipped), which meets a sequence's
keys in position order (KVCache keeps each sequence's cells in position order, defrag included);
each request samples with its own seeded Sampler. (Without flash attention the soft_max and the
V product sum over all n_kv cells, so the bits depend on the cell layout; the tokens usually agree.)

Slots: sequence id i is slot i. A request takes a free slot; when it ends its cells stay in the
cache (llama-server's cache_prompt). A new request whose prompt starts with tokens some slot holds
reuses those cells: its own slot's (seq_rm past the common prefix) or another slot's (seq_cp, the
cells then shared), at most all but the last prompt token (whose logits are needed). Each slot
holds at most n_ctx_seq = (n_ctx - 1) // n_seq cells, so the slots never run out of cells together
(one cell stays free for padding tokens);
a prompt longer than n_ctx_seq - 1 is refused and a generation stops at n_ctx_seq ("length").

Threads: submit() and cancel() may be called from any thread; step() runs in one. EngineThread
runs the steps in a background thread (what agenerate and pyggml.serve use).
"""
import atexit
import collections
import functools
import threading
import time
import weakref

import numpy as np

from pyggml._enums import Op, Type
from pyggml._ops import flash_attn_ext_set_path
from pyggml._vec import gemm_shape
from pyggml.kvcache import MAX_SEQ
from pyggml.models.sampling import Sampler
from pyggml.models.speculative import check_draft_max, lookup_drafter

__all__ = ["BatchEngine", "EngineThread", "Request", "StepGraphs", "agenerate", "generate_batch"]

_MAX_GRAPHS = 24


# matmul.h's PG_MM_TILE_MIN_N: float weights take the dot tiles from this many columns
FLOAT_TILE_MIN_COLS = 2


def gemm_min_cols():
    """The column count from which mul_mat of float weights takes its GEMM path (matmul.h's
    pg_mm_float_gemm_min_n: the micro-kernel's panel, at least 6)."""
    return max(6, gemm_shape()[1])


def _float_matmuls(model):
    """Whether some matrix the graph multiplies by is F32, F16 or BF16."""
    floats = (Type.F32, Type.F16, Type.BF16)
    mats = [t for n, t in model.tensors.items() if n.startswith("blk.") and t.ne[1] > 1] + [model.output_weight]
    return any(t.type in floats for t in mats)


def _common_prefix(a, b):
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(diff[0]) if len(diff) else n


class Request:
    """One generation: prompt ids, up to n_predict new ids, its own Sampler. Read while it runs
    (from any thread): tokens (the ids so far, the stop id included), logprobs (per token: (logprob
    of the id, [(id, logprob)] of the top `logprobs` ids) when logprobs is set), logits (per token,
    float32 copies, when keep_logits), n_reused (prompt tokens whose cells were reused), done,
    finish_reason ("stop": an id of `stop`; "length": n_predict or the slot's context;
    "cancelled"; "error", with `error` the exception). on_update(request) is called (in the
    engine's thread) after each new token and when the request ends."""

    def __init__(self, prompt, n_predict, sampler, stop, logprobs=None, keep_logits=False, on_update=None,
                 lookup=None, draft_max=8):
        self.prompt = [int(t) for t in prompt]
        self.lookup, self.draft_max = lookup, int(draft_max)     # speculative: a Lookup drafter, or None
        self.n_predict, self.sampler, self.stop = int(n_predict), sampler, frozenset(int(s) for s in stop)
        self.n_logprobs, self.keep_logits, self.on_update = logprobs, bool(keep_logits), on_update
        self.tokens, self.logprobs, self.logits = [], [], []
        self.n_reused = 0
        self.n_cached = 0           # prompt tokens whose K/V are in the cache
        self.gemm = False           # its prompt takes steps of the GEMM's class (BatchEngine._admit)
        self.slot = None
        self.finish_reason = None
        self.error = None
        self.cancelled = False
        self.done_event = threading.Event()

    @property
    def done(self):
        return self.finish_reason is not None

    def cancel(self):
        """Ask the engine to end this request; its slot is freed at the start of the next step."""
        self.cancelled = True

    def __repr__(self):
        return (f"Request(prompt={len(self.prompt)} ids, tokens={len(self.tokens)}, slot={self.slot}, "
                f"finish_reason={self.finish_reason})")


class _Slot:
    def __init__(self, seq):
        self.seq = seq
        self.cached = []        # the ids whose K/V the cache holds for this sequence, at positions 0, 1, ...
        self.by_gemm = []       # per cached id: its K/V came from a step of the GEMM's class (module docstring)
        self.req = None
        self.last_used = 0

    def add(self, tok, gemm):
        self.cached.append(int(tok))
        self.by_gemm.append(bool(gemm))

    def keep(self, n):
        del self.cached[n:], self.by_gemm[n:]

    def reusable(self, prompt, gemm):
        """How many leading ids of prompt this slot's cells hold as the prompt's own steps would
        make them: the same ids, from steps of the class (gemm) the prompt's tokens take."""
        n = _common_prefix(self.cached, prompt)
        return next((i for i in range(n) if self.by_gemm[i] != gemm), n)


class StepGraphs:
    """The graphs of a model's batched steps, one per shape (n_tokens, n_kv, n_out), the last
    _MAX_GRAPHS kept, their flash attention on the one_chunk path (keys in cell order, each row
    alone: see the module docstring). BatchEngine's, and each pipeline stage's
    (pyggml.serve.pipeline)."""

    def __init__(self, model):
        self.model = model
        self._graphs = collections.OrderedDict()
        self.n_builds = 0

    def get(self, n_tokens, n_kv, n_out):
        key = (n_tokens, n_kv, n_out)
        sg = self._graphs.get(key)
        if sg is None:
            while len(self._graphs) >= _MAX_GRAPHS:
                self._graphs.popitem(last=False)
            sg = self.model.graph_class(self.model, n_tokens, n_kv, n_out)
            for node in sg.graph.nodes:
                if node.op == Op.FLASH_ATTN_EXT:
                    flash_attn_ext_set_path(node, "one_chunk")
            self._graphs[key] = sg
            self.n_builds += 1
        else:
            self._graphs.move_to_end(key)
        return sg

    @property
    def shapes(self):
        """The shapes (n_tokens, n_kv, n_out) of the graphs kept, oldest use first."""
        return list(self._graphs)

    def run(self, inputs, pos, cells, n_kv, n_out, want):
        """Run the step: inputs (ids, or hidden rows [n_tokens, n_embd] for layers after 0) at
        positions pos [rows, n_tokens] into `cells` of the model's cache, which the cache's cells
        must already hold; want: the rows whose output the LM head computes (n_out of them,
        padded). Returns the output view and, per wanted row, its row in it."""
        sg = self.get(len(inputs), n_kv, n_out)
        sg.feed(inputs, pos, cells)
        if sg.out_ids is not None:
            out_ids = sg.out_ids.numpy()
            out_ids[:] = want[0] if len(want) else 0
            out_ids[:len(want)] = want
            out_rows = np.arange(len(want))
        else:
            out_rows = want
        sg.graph.compute(self.model.n_threads)
        self.model.last_graph = sg.graph
        return sg.output(), out_rows


class BatchEngine:
    """Generates several requests together with `model` (a whole pyggml.models.Model; its KV cache
    is cleared and from then on belongs to the engine). n_seq: slots (sequences at once); n_batch:
    most tokens per step (default model.n_batch, at least n_seq); exact: keep each sequence's
    bits independent of the batch (see the module docstring)."""

    def __init__(self, model, n_seq=4, n_batch=None, exact=True):
        if not model.has_head or model.l0 != 0:
            raise ValueError("BatchEngine: needs the whole model (layers from 0 to n_layer)")
        n_seq = int(n_seq)
        most = min(MAX_SEQ, (model.n_ctx - 1) // 2)
        if not 1 <= n_seq <= most:
            raise ValueError(f"BatchEngine: n_seq must be in [1, {most}] (n_ctx = {model.n_ctx}: at least 2 cells "
                             f"per sequence and one spare), got {n_seq}")
        self.model, self.cache, self.n_seq = model, model.cache, n_seq
        self.n_batch = max(n_seq, int(model.n_batch if n_batch is None else n_batch))
        self.n_ctx_seq = (model.n_ctx - 1) // n_seq
        # the float paths of exact mode (module docstring): min_cols, the fewest columns of a step;
        # tile_batch, the most tokens of a step of the tiles' class; long_prompt: the prompt length
        # from which a prompt's tokens take steps of the GEMM's class (None: one class); col_round:
        # the GEMM's steps hold whole panels of columns
        self.min_cols, self.tile_batch, self.long_prompt, self.col_round = 1, self.n_batch, None, 1
        if exact and _float_matmuls(model):
            g, nr = gemm_min_cols(), gemm_shape()[1]
            self.col_round = nr
            if n_seq < g:
                self.min_cols, self.tile_batch, self.long_prompt = FLOAT_TILE_MIN_COLS, min(self.n_batch, g - 1), g
            else:
                self.min_cols = g
        self._gemm_last = False
        self.cache.clear()
        model.n_past = 0
        self.slots = [_Slot(i) for i in range(n_seq)]
        self.waiting = collections.deque()
        self.running = []           # requests holding a slot, in the order they took it
        self._inbox = collections.deque()       # appended by any thread, drained by step()
        self.graphs = StepGraphs(model)
        self._clock = 0
        self.stats = {"steps": 0, "tokens_prefilled": 0, "tokens_generated": 0, "tokens_reused": 0,
                      "requests_done": 0, "tokens_drafted": 0, "drafts_accepted": 0}
        self.wake = threading.Event()           # set by submit: EngineThread waits on it when idle

    # ---- requests ----

    def submit(self, prompt, n_predict, temperature=0.0, top_k=0, top_p=1.0, seed=None, stop=None, *,
               sampler=None, logprobs=None, keep_logits=False, on_update=None, lookup=False, draft_max=8,
               **sampling):
        """Queue a request and return its Request. prompt: ids; stop: ids that end it (default the
        end-of-sequence id); sampler: a ready Sampler (else Sampler(temperature, top_k, top_p, seed,
        **sampling): sampling is Sampler's other keyword options, such as min_p, dry_multiplier,
        xtc_probability, mirostat_mode; DRY's sequence breakers are matched against the model's
        tokenizer); each request has its own Sampler, so its state (penalty windows, mirostat's mu,
        the random generators) is its own;
        logprobs: how many top ids to report per token (0: the sampled id's only; None: none).
        lookup (True, n_max or (n_min, n_max)), draft_max: speculative decoding by prompt lookup
        (pyggml.models.speculative): up to draft_max proposed ids ride along with the request's
        next id in a step, the ones its sampler would have produced are kept (the same ids).
        ValueError: an empty prompt, an id outside the vocabulary, a prompt longer than a slot's
        context, n_predict < 0."""
        ids = np.asarray(prompt, dtype=np.int64).reshape(-1)
        if len(ids) == 0:
            raise ValueError("BatchEngine.submit: the prompt is empty")
        if ids.min() < 0 or ids.max() >= self.model.n_vocab:
            bad = ids[(ids < 0) | (ids >= self.model.n_vocab)][0]
            raise ValueError(f"BatchEngine.submit: token id {bad} is out of range [0, {self.model.n_vocab})")
        if len(ids) >= self.n_ctx_seq:
            raise ValueError(f"BatchEngine.submit: the prompt has {len(ids)} tokens; a sequence holds at most "
                             f"{self.n_ctx_seq} (n_ctx {self.model.n_ctx} / {self.n_seq} sequences), leaving room "
                             f"for one new token: at most {self.n_ctx_seq - 1}")
        if int(n_predict) < 0:
            raise ValueError(f"BatchEngine.submit: n_predict must be >= 0, got {n_predict}")
        if logprobs is not None and not 0 <= int(logprobs) <= self.model.n_vocab:
            raise ValueError(f"BatchEngine.submit: logprobs must be in [0, n_vocab], got {logprobs}")
        if stop is None:
            eos = self.model.hparams.eos_id
            stop = () if eos is None else (eos,)
        if sampler is None:
            if sampling.get("dry_multiplier") and "tokenizer" not in sampling:
                sampling["tokenizer"] = self.model.tokenizer        # DRY's sequence breakers are text
            sampler = Sampler(temperature, top_k, top_p, seed, **sampling)
        elif sampling:
            raise TypeError(f"BatchEngine.submit: sampler= and Sampler options ({', '.join(sampling)}) together")
        drafter = None
        if lookup is not None and lookup is not False:
            check_draft_max(draft_max, "BatchEngine.submit")
            drafter = lookup_drafter(lookup, "BatchEngine.submit")
        req = Request(ids, n_predict, sampler, stop, None if logprobs is None else int(logprobs), keep_logits,
                      on_update, drafter, draft_max)
        self._inbox.append(req)
        self.wake.set()
        return req

    def warmup(self):
        """Run one step of a one-token request and forget it, as llama-server does when it starts: the
        weights are read once (a mapped file's pages come in) and the one-token graph is built, so
        the first request pays for neither. The cache, the slots and the stats are left empty.
        RuntimeError on an engine with requests."""
        if self.busy:
            raise RuntimeError("BatchEngine.warmup: the engine has requests; warm it up before submitting any")
        bos = self.model.hparams.bos_id
        req = self.submit([0 if bos is None else bos], 1, stop=())
        while not req.done:
            self.step()
        if req.error is not None:
            raise req.error
        self._forget_cells()
        self.stats = dict.fromkeys(self.stats, 0)

    def _forget_cells(self):
        """Empty the cache and the slots' record of what their cells hold."""
        self.cache.clear()
        self.slots = [_Slot(i) for i in range(self.n_seq)]

    @property
    def n_graph_builds(self):
        """The step graphs built so far (one per shape: tokens, n_kv, rows out)."""
        return self.graphs.n_builds

    @property
    def busy(self):
        """Requests are waiting or running."""
        return bool(self._inbox or self.waiting or self.running)

    @property
    def n_running(self):
        return len(self.running)

    @property
    def n_waiting(self):
        return len(self._inbox) + len(self.waiting)

    @staticmethod
    def _notify(req):
        """Call req.on_update; a callback that fails (its consumer gone) cancels its request."""
        if req.on_update is not None:
            try:
                req.on_update(req)
            except Exception:  # noqa: BLE001 (a consumer's error must not stop the other sequences)
                req.cancelled = True

    def _finish(self, req, reason, error=None):
        if req.done:
            return
        req.finish_reason, req.error = reason, error
        if req.slot is not None:
            slot = self.slots[req.slot]
            slot.req = None
            self._clock += 1
            slot.last_used = self._clock
            self.running.remove(req)
        self.stats["requests_done"] += 1
        req.done_event.set()
        self._notify(req)

    # ---- admission and prefix reuse ----

    def _admit(self, req):
        """Give req a free slot, reusing the longest cached prefix of its prompt (all but its last id)."""
        prompt = req.prompt
        free = [s for s in self.slots if s.req is None]
        req.gemm = self.long_prompt is not None and len(prompt) >= self.long_prompt
        reuse = {s.seq: s.reusable(prompt, req.gemm) for s in self.slots}
        # the free slot with the longest prefix of this prompt, else the least recently used
        slot = max(free, key=lambda s: (reuse[s.seq], -s.last_used))
        best = max(self.slots, key=lambda s: reuse[s.seq])
        n_own, n_best = min(reuse[slot.seq], len(prompt) - 1), min(reuse[best.seq], len(prompt) - 1)
        if n_best > n_own:
            self.cache.seq_rm(slot.seq)
            self.cache.seq_cp(best.seq, slot.seq, 0, n_best)
            n = n_best
        else:
            self.cache.seq_rm(slot.seq, n_own)
            n = n_own
        slot.cached, slot.by_gemm = prompt[:n], [req.gemm] * n
        slot.req, req.slot = req, slot.seq
        req.n_cached = req.n_reused = n
        self.stats["tokens_reused"] += n
        self.running.append(req)

    # ---- one step ----

    def _alloc(self, pos, seqs):
        try:
            return self.cache.alloc(pos, seqs=seqs)
        except ValueError:
            self._defrag()          # the cells a sequence needs are free, but below its last cell
            return self.cache.alloc(pos, seqs=seqs)

    def _defrag(self):
        self.cache.defrag()

    def _plan(self):
        """The step's tokens and whether it is of the GEMM's class: rows (request, id, position,
        wants logits, proposals) in order: every decoding request's last id (proposals: its
        drafter's ids, which follow as rows marked "draft"), then prompt chunks in arrival order
        within the token budget (proposals None). A step of the GEMM's class carries the chunks of
        long prompts alone; while both classes have work, the steps alternate."""
        rows = []
        decoding = [r for r in self.running if r.n_cached == len(r.prompt)]
        prefill = [r for r in self.running if r.n_cached < len(r.prompt)]
        long = [r for r in prefill if r.gemm]
        gemm = bool(long) and (not self._gemm_last or not decoding and len(long) == len(prefill))
        self._gemm_last = gemm
        if gemm:
            decoding, prefill = [], long
        else:
            prefill = [r for r in prefill if not r.gemm]
        budget = (self.n_batch if gemm else self.tile_batch) - len(decoding)
        for req in decoding:
            at = len(self.slots[req.slot].cached)
            k = min(req.draft_max, req.n_predict - len(req.tokens) - 1, self.n_ctx_seq - at - 2, budget)
            drafted = req.lookup.draft(req.prompt + req.tokens, k) if req.lookup is not None and k > 0 else []
            rows.append((req, req.tokens[-1], at, True, drafted))
            rows += [(req, t, at + 1 + i, True, "draft") for i, t in enumerate(drafted)]
            budget -= len(drafted)
        for req in prefill:
            if budget:
                k = min(len(req.prompt) - req.n_cached, budget)
                for i in range(req.n_cached, req.n_cached + k):
                    rows.append((req, req.prompt[i], i, i == len(req.prompt) - 1, None))
                budget -= k
        return rows, gemm

    def _next_waiting(self):
        """The next queued request that wants tokens, or None; the cancelled ones and those asking
        for none end on the way."""
        while self.waiting:
            req = self.waiting.popleft()
            if req.cancelled:
                self._finish(req, "cancelled")
            elif req.n_predict == 0:
                self._finish(req, "length")
            else:
                return req
        return None

    def step(self):
        """Admit queued requests into free slots, drop cancelled ones, run one graph over the next
        tokens of every running request and sample where a request needs an id. Returns the
        number of tokens the graph carried (0: nothing to do)."""
        while self._inbox:
            self.waiting.append(self._inbox.popleft())
        for req in [r for r in self.running if r.cancelled]:
            self._finish(req, "cancelled")
        while len(self.running) < self.n_seq and (req := self._next_waiting()) is not None:
            self._admit(req)
        rows, gemm = self._plan()
        if not rows:
            return 0
        try:
            self._run(rows, gemm)
        except Exception as e:  # noqa: BLE001 (the requests of a failed step end with the error; the engine goes on)
            for req in {id(r[0]): r[0] for r in rows}.values():
                if req.slot is not None:
                    self.cache.seq_rm(req.slot)
                    self.slots[req.slot].keep(0)
                self._finish(req, "error", e)
        return len(rows)

    def step_tokens(self, n, gemm=False):
        """The tokens of a graph step that carries n of the requests', padding included: at least
        min_cols; a step of the GEMM's class at least gemm_min_cols(), in whole panels (module
        docstring)."""
        n_tok = max(n, self.long_prompt if gemm else self.min_cols)
        if gemm or self.long_prompt is None:
            n_tok = -(-n_tok // self.col_round) * self.col_round
        return n_tok

    def _run(self, rows, gemm):
        n = len(rows)
        reqs = [r[0] for r in rows]
        ids = np.array([r[1] for r in rows], np.int32)
        pos = np.array([r[2] for r in rows], np.int32)
        seqs = np.array([r.slot for r in reqs], np.int64)
        cells = self._alloc(pos, seqs)
        try:
            want = np.flatnonzero([r[3] for r in rows])
            n_tok = self.step_tokens(n, gemm)
            free = np.flatnonzero(self.cache.cell_pos < 0)
            if n_tok > n and len(free):         # padding tokens: one free cell, seen by nobody
                cells = np.concatenate([cells, np.full(n_tok - n, free[0], np.int64)])
                ids = np.concatenate([ids, np.zeros(n_tok - n, np.int32)])
                pos = np.concatenate([pos, np.zeros(n_tok - n, np.int32)])
            else:
                n_tok = n
            n_out = min(self.step_tokens(len(want)), n_tok)
            if self.long_prompt is not None:        # the LM head's rows: the tiles' class in any step
                n_out = min(n_out, self.tile_batch)
            rows_pos = np.broadcast_to(pos, (self.model.pos_rows, n_tok))
            out, out_rows = self._compute(ids, rows_pos, cells, self.cache.pad_n_kv(cells.max() + 1), n_out, want)
        except BaseException:
            self.cache.free(cells[:n])
            raise
        self.stats["steps"] += 1
        for req, tok in zip(reqs, ids[:n]):
            self.slots[req.slot].add(tok, gemm)
            if req.n_cached < len(req.prompt):
                req.n_cached += 1
                self.stats["tokens_prefilled"] += 1
        at = dict(zip(want.tolist(), out_rows.tolist()))
        for i in want:
            drafted = rows[i][4]
            if drafted == "draft":
                continue            # sampled by _verify, with its request's decoding row
            if drafted:
                self._verify(reqs[i], drafted, [out[at[j]] for j in range(i, i + 1 + len(drafted))])
            else:
                self._sample(reqs[i], out[at[i]])

    def _compute(self, ids, pos, cells, n_kv, n_out, want):
        """Run the step's graph (StepGraphs.run)."""
        return self.graphs.run(ids, pos, cells, n_kv, n_out, want)

    def _verify(self, req, drafted, logits):
        """Sample a decoding request's rows while its sampler's ids equal the proposals; the
        rejected proposals leave the slot's cells and its cached ids."""
        slot = self.slots[req.slot]
        slot.keep(len(slot.cached) - len(drafted))              # as after a step of one id, for _sample
        self.stats["tokens_drafted"] += len(drafted)
        for i, row in enumerate(logits):
            self._sample(req, row)
            if req.done or i == len(drafted) or req.tokens[-1] != drafted[i]:
                break
            slot.add(drafted[i], False)
            self.stats["drafts_accepted"] += 1
        self.cache.seq_rm(slot.seq, len(slot.cached))

    def _sample(self, req, logits):
        if req.cancelled:
            self._finish(req, "cancelled")
            return
        tok = int(req.sampler(logits))
        if req.keep_logits:
            req.logits.append(np.array(logits, np.float32))
        if req.n_logprobs is not None:
            x = np.asarray(logits, np.float64)
            lp = x - x.max()
            lp -= np.log(np.exp(lp).sum())
            top = np.argsort(-lp, kind="stable")[:req.n_logprobs]
            req.logprobs.append((float(lp[tok]), [(int(t), float(lp[t])) for t in top]))
        req.tokens.append(tok)
        self.stats["tokens_generated"] += 1
        slot_full = len(self.slots[req.slot].cached) + 1 >= self.n_ctx_seq
        if tok in req.stop:
            self._finish(req, "stop")
        elif len(req.tokens) >= req.n_predict or slot_full:
            self._finish(req, "length")
        else:
            self._notify(req)

    def run(self):
        """Step until every request has ended."""
        while self.busy:
            self.step()


class EngineThread:
    """Runs engine.step() in a daemon thread while the engine is busy, sleeping on engine.wake
    otherwise. close() stops it (running requests are cancelled); one still open at interpreter
    exit is closed then, before the modules it uses are torn down under a step."""

    def __init__(self, engine):
        self.engine = engine
        self.busy_s = 0.0           # seconds spent in steps
        self._stop = False
        self.thread = threading.Thread(target=self._loop, name="pyggml-batch", daemon=True)
        self.thread.start()
        self._at_exit = functools.partial(_close_at_exit, weakref.ref(self))
        atexit.register(self._at_exit)

    def _loop(self):
        eng = self.engine
        while not self._stop:
            if not eng.busy:
                eng.wake.wait(0.5)
                eng.wake.clear()
                continue
            t0 = time.perf_counter()
            eng.step()
            self.busy_s += time.perf_counter() - t0

    def close(self):
        atexit.unregister(self._at_exit)
        for req in list(self.engine.running) + list(self.engine.waiting) + list(self.engine._inbox):
            req.cancel()
        self._stop = True
        self.engine.wake.set()
        if self.thread is not threading.current_thread():
            self.thread.join()


def _close_at_exit(ref):
    runner = ref()
    if runner is not None:
        runner.close()


def generate_batch(model, prompts, n_predict, temperature=0.0, top_k=0, top_p=1.0, seed=None, stop=None, n_seq=None,
                   n_batch=None, options=None, **sampling):
    """The new ids of each prompt (a list of lists), generated together by a BatchEngine over
    model (n_seq default: min(len(prompts), 8); seed: one for all, or one per prompt). sampling:
    Sampler's other keyword options for every prompt; options: None or one dict per prompt of
    BatchEngine.submit's keywords (temperature, top_k, ..., mirostat_mode) over those. Each list
    is what the prompt alone would give."""
    prompts = [model.tokenize(p) if isinstance(p, str) else list(p) for p in prompts]
    seeds = list(seed) if isinstance(seed, (list, tuple)) else [seed] * len(prompts)
    if len(seeds) != len(prompts):
        raise ValueError(f"generate_batch: {len(seeds)} seeds for {len(prompts)} prompts")
    options = [{}] * len(prompts) if options is None else list(options)
    if len(options) != len(prompts) or not all(isinstance(o, dict) for o in options):
        raise ValueError(f"generate_batch: options must be one dict per prompt ({len(prompts)}), got {len(options)}")
    base = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "stop": stop, **sampling}
    eng = BatchEngine(model, n_seq or max(1, min(len(prompts), 8)), n_batch)
    reqs = [eng.submit(p, n_predict, **{"seed": s, **base, **o}) for p, s, o in zip(prompts, seeds, options)]
    eng.run()
    for r in reqs:
        if r.finish_reason == "error":
            raise r.error
    return [r.tokens for r in reqs]


async def agenerate(engine, prompt, n_predict, **options):
    """Yield the new ids of one request as the engine (run by an EngineThread) samples them;
    options as BatchEngine.submit. Leaving the loop early cancels the request."""
    import asyncio
    loop = asyncio.get_running_loop()
    changed = asyncio.Event()
    req = engine.submit(prompt, n_predict, on_update=lambda r: loop.call_soon_threadsafe(changed.set), **options)
    seen = 0
    try:
        while True:
            await changed.wait()
            changed.clear()
            toks = req.tokens[:]
            for t in toks[seen:]:
                yield t
            seen = len(toks)
            if req.done and seen == len(req.tokens):
                if req.finish_reason == "error":
                    raise req.error
                return
    finally:
        if not req.done:
            req.cancel()
            engine.wake.set()
