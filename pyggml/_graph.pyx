"""CGraph: nodes in topological order, the plan (threads, work buffer, fusion, memory of the
intermediate tensors) and compute: one parallel region in which every thread walks every step with
(ith, nth) and a barrier separates the steps. The executor itself is C (csrc/graph.h): the op table's
kernels, the fusion table and the worker; this module keeps the Python side of the graph.

Fusion. plan() turns the executed nodes into steps (struct pg_exec): a node alone, or a group of
consecutive executed nodes that one fused kernel computes (graph.h's fusion table: the ops of the
group, the rule under which the fused kernel gives the nodes' own results bit for bit, the kernel
and its plan function). The groups are found once per (graph, n_threads, use_ref) and listed in
Plan.fused:

    ADD -> RMS_NORM -> MUL   h = a + b, y = rms_norm(h) * w; h written, the norm's result not
    RMS_NORM -> MUL          ggml's one CPU fusion (docs/semantics.md, section 13)
    ADD -> RMS_NORM          h = a + b, y = rms_norm(h) (pyggml's; h is still written)
    ROPE -> SET_ROWS         rotated rows written converted straight into a cache (pyggml's; the
                             rope result, read by the set_rows only, is not written)

Matching depends only on the graph, so the memory planner treats a group as one step (no block is
reused inside it, whether the group then runs fused or not). use_ref=True, or the environment
variable PYGGML_DISABLE_FUSION set to anything but "" or "0" when the plan is made, turns fusion off.

Hooks. compute(hooks=...) and set_hook call a Python function on a node's result as soon as it is
computed, before any later step runs (llama.cpp's eval callback, inside the one parallel region): a
hooked node is a cut no fused group spans (a fused kernel could otherwise skip writing it, or read
it before the hook changed it), so a compute with hooks has a plan of its own, cached per set of
hooked nodes; after the step that completes the node, thread 0 (the calling thread) takes the GIL
and calls the hooks while the other threads wait at the barrier (graph.h's pg_graph_walk). The
memory plan needs no change: a node's block is reused only after its last consumer ran, and every
consumer runs after the hook. A compute without hooks runs the plain walk, unchanged.
"""
import os
import struct
import weakref
from bisect import bisect_right
from time import perf_counter

import numpy as np

from libc.stdint cimport int32_t, uint64_t
from libc.string cimport memcpy, memset

from pyggml._openmp cimport pg_have_openmp, pg_parallel_run
from pyggml._tensor cimport Memory, Tensor, block_align, check_int, tensor_nbytes
from pyggml._typedefs cimport *

from pyggml._enums import Op, Type
from pyggml._tables import FA_PARAMS as _FA_PARAMS, FA_PATHS as _FA_PATHS
from pyggml._threads import count_threads

cdef extern from "graph.h" nogil:
    enum:
        PG_FUSE_MAX

    ctypedef struct pg_graph:
        pg_tensor * const * nodes
        int n
        const int32_t * uses

    ctypedef struct pg_exec:
        pg_tensor * nodes[3]
        int32_t fusion
        int32_t variant

    ctypedef struct pg_run:
        const pg_exec * steps
        int n
        void * wdata
        size_t wsize
        pg_shared * shared
        uint64_t * prof
        int prof_nth
        uint64_t t0
        const int32_t * hook_after
        int (*hook)(void * ctx, int k)
        void * hook_ctx
        int * hook_stop

    uint64_t pg_now_ns()
    bint pg_executed(const pg_tensor * t)
    int pg_op_tasks(const pg_tensor * t, int nth)
    int pg_graph_fuse(const pg_graph * g, pg_tensor * const * run, int n_run, int32_t * fusion_at)
    ctypedef struct pg_fusion:
        int n

    const pg_fusion pg_fusions[]
    bint pg_exec_plan(pg_exec * e, pg_plan * pl)
    void pg_graph_worker(void * arg, int ith, int nth)


FLAG_INPUT = PG_FLAG_INPUT
FLAG_OUTPUT = PG_FLAG_OUTPUT


def set_input(tensor):
    """Mark tensor as a graph input (ggml_set_input): data the caller writes in place between
    computes (token ids, positions, a mask). Leafs always keep their own memory; the flag documents
    the role and shows in Tensor.flags. Returns tensor."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"set_input: tensor must be a pyggml.Tensor, got {type(tensor).__name__}")
    (<Tensor> tensor).c.flags |= FLAG_INPUT
    return tensor


def set_output(tensor):
    """Mark tensor as a graph output (ggml_set_output): a graph planned afterwards neither reuses its
    memory nor fuses it away, so an intermediate can be read after compute() (for debugging, or a
    second result). build_forward_expand(t) marks t too. Set it before the graph is first planned;
    like every result, its numpy() view is overwritten by the next compute. Returns tensor."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"set_output: tensor must be a pyggml.Tensor, got {type(tensor).__name__}")
    (<Tensor> tensor).c.flags |= FLAG_OUTPUT
    return tensor


cdef int _fusion_size(int k) noexcept:
    return pg_fusions[k].n


cdef class _HookRun:
    """The hooks of one compute, by the step they follow (graph.h's pg_run.hook_ctx), and the
    exception that stopped it."""
    cdef list at
    cdef object exc

    def __init__(self, list at):
        self.at = at


cdef int _call_hooks(void * ctx, int k) noexcept with gil:
    # thread 0 of the compute, every other thread at the barrier: 1 stops the compute
    cdef _HookRun r = <_HookRun> ctx
    try:
        for t, fn in r.at[k]:
            fn(t)
    except BaseException as e:
        r.exc = e
        return 1
    return 0


# flash_attn_ext reports the path its plan chose in this op_params slot (flash_attn_ext_get_path)
cdef int _FA_TAKEN = _FA_PARAMS["taken"]


# What compute(profile=True) returns and what to_dot draws: pyggml.profile sits above this module
# and installs both when it is imported (pyggml's __init__ imports it), so the core imports nothing
# from the layers above it.
_make_profile = _graph_dot = None


def _install_views(make_profile, graph_dot):
    """Called by pyggml.profile: make_profile(groups, times, wall_ns, paths) makes what
    compute(profile=True) returns, graph_dot(nodes, leafs, fused) the DOT text of to_dot."""
    global _make_profile, _graph_dot
    _make_profile, _graph_dot = make_profile, graph_dot


_default_threads = None


# the most threads one compute may use (ggml's GGML_MAX_N_THREADS)
MAX_THREADS = 512


def default_threads():
    """Threads used when n_threads is None: OMP_NUM_THREADS if set, else the physical cores (SMT
    siblings counted once) among the CPUs the process may run on; 1 without OpenMP. At most MAX_THREADS. Read once, at
    the first call (pyggml/_threads.py). A graph's plan then uses no more threads than its widest
    node can split work for."""
    global _default_threads
    if _default_threads is None:
        _default_threads = min(MAX_THREADS, count_threads(bool(pg_have_openmp())))
    return _default_threads


def build_info():
    """What this build runs: simd ISA (on riscv64 "scalar" where the CPU has no V), vlen (vector
    register bits the kernels use, read at run time for RVV; 0 for scalar), amx (the integer GEMMs
    use Intel AMX tiles: avx512 on a CPU with AMX-INT8, unless PYGGML_AMX=0), repack (the weight
    types Tensor.repack has a layout for here), OpenMP, compiler, version."""
    return {
        "simd": pg_simd_name().decode(),
        "vlen": pg_simd_vlen(),
        "amx": bool(pg_amx_on()),
        "repack": [t.name for t in Type if pg_traits[t].blck and pg_panels_size(t, pg_traits[t].blck, 1)],
        "openmp": bool(pg_have_openmp()),
        "compiler": pg_build_compiler().decode(),
        "version": _version(),
        "max_threads": default_threads(),
    }


def _version():
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("pyggml")
    except PackageNotFoundError:
        return "0+unknown"


def _plan_key(n_threads, use_ref):
    nth = default_threads() if n_threads is None else check_int("plan", "n_threads", n_threads)
    if not 1 <= nth <= MAX_THREADS:
        raise ValueError(f"plan: n_threads must be >= 1 and <= {MAX_THREADS}, got {n_threads}")
    return (nth, bool(use_ref))


cdef inline Tensor _root(Tensor t):
    return t._view_src if t._view_src is not None else t


cdef inline bint _executed(Tensor t):
    return pg_executed(&t.c)


# Tensor._graph of an op result: None until a graph holds it as a node, then a weak reference to
# that graph, which plans its memory; _SHARED once a second graph has reached it (CGraph._claim)
_SHARED = object()


class Plan:
    """What plan() decided: thread count, work buffer bytes, tasks per node, fused groups (tuples of
    the Tensors each fused kernel computes, in graph order), the path of each flash_attn_ext node
    (paths: {Tensor: "one_chunk" | "tiled" | "split"}) and the memory planned for intermediate
    tensors (mem_bytes, against mem_bytes_naive without reuse)."""

    def __init__(self, n_threads, work_size, n_tasks, fused, mem_bytes, mem_bytes_naive, use_ref, paths=None):
        self.n_threads = n_threads
        self.work_size = work_size
        self.n_tasks = n_tasks
        self.fused = fused
        self.mem_bytes = mem_bytes
        self.mem_bytes_naive = mem_bytes_naive
        self.use_ref = use_ref
        self.paths = {} if paths is None else paths

    def __repr__(self):
        return (f"Plan(n_threads={self.n_threads}, work_size={self.work_size}, fused={len(self.fused)}, "
                f"mem_bytes={self.mem_bytes}, mem_bytes_naive={self.mem_bytes_naive})")


cdef class CGraph:
    """A compute graph: build_forward_expand(t) adds t and everything it depends on, each node once,
    in topological order. compute() runs it; it can run many times, with inputs changed in place.

    Threads: build_forward_expand, plan and compute of one graph are one at a time; a call while
    another one of the same graph runs (in another Python thread) raises RuntimeError. Nodes shared
    with other graphs get memory of their own (docs/reliability.md)."""
    cdef public int size
    cdef list _nodes
    cdef list _leafs
    cdef set _seen
    cdef list _outputs
    cdef list _allocated      # tensors that got memory from this graph's arena
    cdef object _arena
    cdef bint _mem_planned
    cdef dict _plans
    cdef Memory _work
    cdef Memory _shared_mem
    cdef tuple _mem           # (arena bytes, bytes without reuse)
    cdef bint _busy           # an expand, plan or compute is running (see _enter)
    cdef dict _index          # id(node) -> its position in _nodes
    cdef dict _hooks          # id(node) -> (position, node, fn): set_hook's hooks
    cdef object __weakref__
    cdef public double run_seconds    # wall time of the last compute's parallel region

    def __init__(self, size=2048):
        size = check_int("CGraph", "size", size)
        if not 1 <= size < 2**31:
            raise ValueError(f"CGraph: size must be >= 1 and < 2^31 nodes, got {size}")
        self.size = size
        self._nodes = []
        self._leafs = []
        self._seen = set()
        self._outputs = []
        self._allocated = []
        self._arena = None
        self._mem_planned = False
        self._plans = {}
        self._index = {}
        self._hooks = {}
        self.run_seconds = 0.0

    @property
    def nodes(self):
        return tuple(self._nodes)

    @property
    def leafs(self):
        return tuple(self._leafs)

    @property
    def n_nodes(self):
        return len(self._nodes)

    def __reduce__(self):
        raise TypeError("CGraph: a graph cannot be pickled or copied; build it again from its tensors")

    cdef _enter(self, str what):
        """The graph's guard: build_forward_expand, plan and compute hold it for their whole run (the
        GIL is released while computing, and planning runs Python code), so a second call from
        another Python thread raises instead of sharing the arena, work buffer and barrier. The
        check and the set hold the GIL without a Python call between them: they are atomic."""
        if self._busy:
            raise RuntimeError(f"{what}: this graph is already being computed, planned or expanded "
                               f"(in another thread); it runs one call at a time")
        self._busy = True

    cdef void _leave(self):
        self._busy = False

    def get_tensor(self, name):
        """The node or leaf called `name` (Tensor.name), nodes first, or None (ggml_graph_get_tensor)."""
        for t in self._nodes:
            if (<Tensor> t)._name == name:
                return t
        for t in self._leafs:
            if (<Tensor> t)._name == name:
                return t
        return None

    def build_forward_expand(self, tensor):
        """Add tensor and every node it depends on (each once, sources first) and mark it an output,
        kept after compute. Raises RuntimeError while another call of this graph runs, or when a
        node of it belongs to another graph that is computing (see _claim)."""
        if not isinstance(tensor, Tensor):
            raise TypeError(f"build_forward_expand: tensor must be a pyggml.Tensor, got {type(tensor).__name__}")
        self._enter("build_forward_expand")
        try:
            n0 = len(self._nodes) + len(self._leafs)
            try:
                self._visit(tensor)
            finally:
                # a new node (even from a visit cut short) changes what may be reused or fused
                if len(self._nodes) + len(self._leafs) != n0 or not self._mem_planned:
                    self._invalidate()
            (<Tensor> tensor).c.flags |= FLAG_OUTPUT
            if all(o is not tensor for o in self._outputs):
                self._outputs.append(tensor)
                self._invalidate()
        finally:
            self._leave()

    def _visit(self, Tensor root):
        # iterative DFS: sources left to right, then the node (ggml's order)
        stack = [(root, 0)]
        while stack:
            t, i = stack.pop()
            if id(t) in self._seen:
                continue
            srcs = (<Tensor> t)._src
            while i < len(srcs) and (srcs[i] is None or id(srcs[i]) in self._seen):
                i += 1
            if i < len(srcs):
                stack.append((t, i + 1))
                stack.append((srcs[i], 0))
                continue
            if (<Tensor> t).c.op == Op.NONE:
                self._leafs.append(t)
            else:
                if len(self._nodes) >= self.size:
                    raise ValueError(f"build_forward_expand: graph is full (size={self.size} nodes)")
                self._claim(t)
                self._index[id(t)] = len(self._nodes)
                self._nodes.append(t)
            self._seen.add(id(t))

    cdef _claim(self, Tensor t):
        """The node-sharing rule (docs/reliability.md). The first graph that holds an op result plans
        its memory: a block of its arena, reused after the node's last consumer. A node reached by a
        second graph becomes _SHARED and gets memory of its own (its current contents kept), outside
        every arena and never reused or released by a graph; the first graph, if still alive, drops
        its plan and makes a new one on its next use. A view gets no memory of its own: its root (a
        source of it, so claimed first) has, and plans re-derive the view's address from the root."""
        owner = t._graph
        if owner is None:
            t._graph = weakref.ref(self)
            return
        if owner is _SHARED:
            return
        cdef CGraph g = owner()
        if g is self:
            return
        cdef Memory own = None
        if g is not None:
            # the other graph's guard (atomic as in _enter): it must not be running meanwhile
            if g._busy:
                raise RuntimeError(f"build_forward_expand: {t!r} is a node of another graph, which is being "
                                   f"computed, planned or expanded in another thread; expand after that call")
            g._busy = True
        try:
            if t._view_src is None:
                own = Memory(tensor_nbytes(&t.c))
                if t.c.data != NULL:
                    memcpy(own.ptr, t.c.data, own.size)
            t._graph = _SHARED
            if g is not None:
                g._invalidate()
            if own is not None:
                t._attach(own, 0)
        finally:
            if g is not None:
                g._leave()

    def _invalidate(self):
        # memory planned for a smaller graph may overlap tensors the new nodes still need; shared
        # nodes keep theirs (other graphs' plans use it)
        cdef Tensor t
        for t in self._allocated:
            if t._graph is not _SHARED:
                t._mem = None
                t.c.data = NULL
        self._allocated = []
        self._arena = None
        self._mem_planned = False
        self._plans = {}

    def _fusions(self, cuts=()):
        """[(fusion row, (Tensor, ...))]: the groups of consecutive executed nodes that graph.h's
        fusion table fuses. cuts: positions in nodes (sorted) after which no group goes on (hooked
        nodes)."""
        cdef Tensor n
        uses = {}
        for n in self._nodes:
            for s in n._src:
                if s is not None:
                    uses[id(s)] = uses.get(id(s), 0) + 1
        at = [i for i, n in enumerate(self._nodes) if _executed(n)]
        run = [self._nodes[i] for i in at]
        cdef int n_all = len(self._nodes), n_run = len(run), i
        buf = Memory(max(n_all + n_run, 1) * sizeof(pg_tensor *) + max(n_all + n_run, 1) * sizeof(int32_t))
        cdef pg_tensor ** ptrs = <pg_tensor **> buf.ptr
        cdef int32_t * ints = <int32_t *> (buf.ptr + max(n_all + n_run, 1) * sizeof(pg_tensor *))
        for i in range(n_all):
            n = self._nodes[i]
            ptrs[i] = &n.c
            ints[i] = uses.get(id(n), 0)
        for i in range(n_run):
            n = run[i]
            ptrs[n_all + i] = &n.c
        cdef pg_graph g
        g.nodes = ptrs
        g.n = n_all
        g.uses = ints
        # each stretch of run between two cuts is matched on its own
        bounds = [0] + [bisect_right(at, j) for j in cuts] + [n_run]
        cdef int a, b
        for a, b in zip(bounds[:-1], bounds[1:]):
            if b > a:
                pg_graph_fuse(&g, ptrs + n_all + a, b - a, ints + n_all + a)
        found = []
        for i in range(n_run):
            k = ints[n_all + i]
            if k >= 0:
                found.append((k, tuple(run[i:i + _fusion_size(k)])))
        return found

    def _plan_memory(self):
        """Give every node without memory a place in one arena; a block is reused once the last
        consumer of its tensor has run, and a fusable group counts as one step (a fused kernel
        reads its inputs while it writes its outputs). Inputs (leafs), outputs and tensors that
        already have memory are never reused. Returns (arena bytes, bytes without reuse)."""
        cdef Tensor n, s, r
        index = {id(n): i for i, n in enumerate(self._nodes)}
        in_group = set()    # nodes after which a group still goes on
        for _, g in self._fusions():
            in_group.update(range(index[id(g[0])], index[id(g[-1])]))
        pending = []        # sources whose release waits for the end of the step
        remaining = {}
        for n in self._nodes:
            for s in n._src:
                if s is not None:
                    remaining[id(_root(s))] = remaining.get(id(_root(s)), 0) + 1
        protected = {id(_root(o)) for o in self._outputs}
        for n in self._nodes:
            if n.c.flags & FLAG_OUTPUT:
                protected.add(id(_root(n)))
        free = []      # [offset, size], sorted by offset
        top = 0
        offsets = {}   # id -> (tensor, offset, size)
        naive = 0
        for n in self._nodes:
            if n.c.data == NULL and n._view_src is None:
                align = block_align(tensor_nbytes(&n.c))
                size = (tensor_nbytes(&n.c) + align - 1) // align * align
                naive += size
                best = -1      # smallest free block that holds size at an aligned offset
                for k in range(len(free)):
                    start = -(-free[k][0] // align) * align
                    if start + size <= free[k][0] + free[k][1] and (best < 0 or free[k][1] < free[best][1]):
                        best = k
                if best >= 0:
                    blk_off, blk_size = free.pop(best)
                    off = -(-blk_off // align) * align
                    # what is left before and after the block stays free (free stays sorted)
                    pieces = ((blk_off, off - blk_off), (off + size, blk_off + blk_size - off - size))
                    rest = [[o, z] for o, z in pieces if z > 0]
                    free[best:best] = rest
                else:
                    off = -(-top // align) * align
                    if off > top:
                        free.append([top, off - top])
                    top = off + size
                offsets[id(n)] = (n, off, size)
            pending.extend(s for s in n._src if s is not None)
            if index[id(n)] in in_group:
                continue
            for s in pending:
                r = _root(s)
                remaining[id(r)] -= 1
                if remaining[id(r)] == 0 and id(r) in offsets and id(r) not in protected:
                    _, off, size = offsets[id(r)]
                    free.append([off, size])
                    free.sort()
                    merged = []
                    for blk in free:
                        if merged and merged[-1][0] + merged[-1][1] == blk[0]:
                            merged[-1][1] += blk[1]
                        else:
                            merged.append(blk)
                    free = merged
                    if free and free[-1][0] + free[-1][1] == top:
                        top = free.pop()[0]
            pending = []
        # the arena is as large as the highest block ever handed out
        high = 0
        for _, off, size in offsets.values():
            high = max(high, off + size)
        arena = Memory(high)
        for n, off, _ in offsets.values():
            n._attach(arena, off)
            self._allocated.append(n)
        # every view's address is derived from its root again (a root may have got memory of its own
        # since the view was made); views into the arena are released with it
        for n in self._nodes:
            r = n._view_src
            if r is not None and r.c.data != NULL:
                n._attach(r._mem, <size_t> (<char *> r.c.data - r._mem.ptr) + n.c.view_offs)
                if id(r) in offsets:
                    self._allocated.append(n)
        self._arena = arena
        self._mem_planned = True
        self._mem = (high, naive)

    def plan(self, n_threads=None, use_ref=False):
        """Decide threads, work buffer, fusion and the memory of intermediates (once per graph,
        thread count and use_ref). Returns a Plan. n_threads: an integer in [1, MAX_THREADS] or None
        (default_threads()); RuntimeError while another call of this graph runs. A node whose plan
        function refuses it (an op parameter no table row covers) raises ValueError naming the node."""
        key = _plan_key(n_threads, use_ref)
        self._enter("plan")
        try:
            return self._plan(key)
        finally:
            self._leave()

    def _plan(self, key):
        """The Plan for key = (n_threads, use_ref) or, for a compute with hooks, (n_threads, use_ref,
        cuts): cuts are the hooked nodes' positions, and the cached entry then also holds, per cut,
        the step after which its hooks run (-1: before the first)."""
        nth, use_ref = key[0], key[1]
        cuts = key[2] if len(key) > 2 else ()
        if key in self._plans:
            return self._plans[key][0]
        if not self._mem_planned:
            self._plan_memory()
        cdef Tensor n
        no_fusion = use_ref or os.environ.get("PYGGML_DISABLE_FUSION", "") not in ("", "0")
        groups = [] if no_fusion else self._fusions(cuts)
        group_of = {id(t): (kind, g) for kind, g in groups for t in g}
        steps = []       # (fusion row or -1, nodes) in execution order
        n_tasks = []
        for n in self._nodes:
            if not _executed(n):
                n_tasks.append(1)
                continue
            n_tasks.append(pg_op_tasks(&n.c, nth))
            kind, g = group_of.get(id(n), (-1, (n,)))
            if n is g[-1]:
                steps.append((kind, g))
        plan_threads = min(nth, max(n_tasks, default=1))
        ex_mem = Memory(max(len(steps), 1) * sizeof(pg_exec))
        cdef pg_exec * ex = <pg_exec *> ex_mem.ptr
        cdef pg_plan pl
        pl.nth = plan_threads
        pl.use_ref = bool(use_ref)
        work = 0
        paths = {}
        for i, (kind, g) in enumerate(steps):
            ex[i].fusion = kind
            for j in range(PG_FUSE_MAX):
                ex[i].nodes[j] = &(<Tensor> g[j]).c if j < len(g) else NULL
            if not pg_exec_plan(&ex[i], &pl):
                n = g[-1]
                what = Op(n.c.op).name if n.c.op < len(Op) else f"op {n.c.op}"
                raise ValueError(f"plan: node {self._nodes.index(n)} ({what}"
                                 f"{' ' + repr(n.name) if n.name else ''}): {pl.err.decode()}")
            work = max(work, pl.work)
            if kind < 0 and (<Tensor> g[0]).c.op == Op.FLASH_ATTN_EXT:
                paths[g[0]] = _FA_PATHS[ex[i].variant]
        plan = Plan(plan_threads, work, tuple(n_tasks), [g for _, g in groups], self._mem[0], self._mem[1],
                    bool(use_ref), paths)
        ends = [self._index[id(g[-1])] for _, g in steps] if cuts else []
        hook_at = [bisect_right(ends, j) - 1 for j in cuts]
        self._plans[key] = (plan, ex_mem, len(steps), [g for _, g in steps], hook_at)
        return plan

    def _hook_node(self, str what, target):
        """(position, node) of a hook's target: a node of this graph, or the name of one."""
        if isinstance(target, str):
            t = self.get_tensor(target)
            if t is None:
                raise ValueError(f"{what}: no node named {target!r} in the graph")
        elif isinstance(target, Tensor):
            t = target
        else:
            raise TypeError(f"{what}: a hook's node must be a pyggml.Tensor or a tensor name, "
                            f"got {type(target).__name__}")
        i = self._index.get(id(t))
        if i is None:
            where = "a leaf (an input or a weight: read it before or after compute)" if any(
                leaf is t for leaf in self._leafs) else "not in this graph"
            raise ValueError(f"{what}: {t!r} is {where}; hooks run on nodes")
        return i, t

    def set_hook(self, target, fn):
        """Call fn(tensor) in every later compute as soon as node `target` (a Tensor of this graph or
        a node's name, e.g. "l_out-3") is computed, before anything after it runs. fn holds the GIL;
        it may read target.numpy() and write into it in place (what it writes is what the rest of the
        graph reads). Replaces an earlier hook on the node; fn=None removes it. The graph is not
        rebuilt: the first compute with a new set of hooked nodes plans its steps (hooked nodes are
        kept out of fused groups that would skip or pre-read them). A compute without hooks runs as
        if none were ever set. RuntimeError while a call of this graph runs (from a hook, too)."""
        if fn is not None and not callable(fn):
            raise TypeError(f"set_hook: fn must be callable or None, got {type(fn).__name__}")
        self._enter("set_hook")
        try:
            i, t = self._hook_node("set_hook", target)
            if fn is None:
                self._hooks.pop(id(t), None)
            else:
                self._hooks[id(t)] = (i, t, fn)
        finally:
            self._leave()

    def remove_hook(self, target):
        """Remove the hook set on node `target` (a Tensor or a name); nothing when it has none."""
        self.set_hook(target, None)

    @property
    def hooks(self):
        """{node: fn} of the hooks set with set_hook."""
        return {t: fn for _, t, fn in self._hooks.values()}

    def _hook_calls(self, hooks):
        """{position: [(node, fn), ...]} of set_hook's hooks and a compute's own (after them)."""
        calls = {}
        for i, t, fn in self._hooks.values():
            calls.setdefault(i, []).append((t, fn))
        if hooks is not None:
            if not isinstance(hooks, dict):
                raise TypeError(f"compute: hooks must be a dict {{node or name: fn}}, got {type(hooks).__name__}")
            for target, fn in hooks.items():
                if not callable(fn):
                    raise TypeError(f"compute: the hook of {target!r} must be callable, got {type(fn).__name__}")
                i, t = self._hook_node("compute", target)
                calls.setdefault(i, []).append((t, fn))
        return calls

    def compute(self, n_threads=None, use_ref=False, profile=False, hooks=None):
        """Run every node; the GIL is released for the whole compute. Data errors found while
        running raise afterwards: IndexError for indices out of range (get_rows, set_rows, add_id, mul_mat_id),
        ValueError for a rope frequency factor that is not finite and > 0; the results of such a
        compute are undefined, and no set_rows after the error writes anything. A graph runs one
        call at a time (its arena, work buffer and barrier are shared): compute, plan or
        build_forward_expand from another Python thread while this runs raises RuntimeError.
        run_seconds is then the time spent in the C parallel region (Python preparation excluded).
        profile=True times every step on every thread and returns a pyggml.profile.Profile
        (docs/profiling.md); else None.
        hooks: {node or name: fn}, called for this compute only, after those of set_hook: fn(tensor)
        runs once the node is computed and before anything after it, with the GIL (the other
        threads wait); it may read and rewrite the tensor in place. An exception from a hook ends
        the compute there (no later step or hook runs) and is raised. A hook runs on the thread
        that called compute; a graph it computes (another one: this one raises RuntimeError) runs
        on that thread alone."""
        key = _plan_key(n_threads, use_ref)
        self._enter("compute")
        try:
            calls = self._hook_calls(hooks) if hooks or self._hooks else None
            return self._run(key, profile, calls)
        finally:
            self._leave()

    cdef _run(self, tuple key, bint profile, dict calls):
        cdef _HookRun hook_run = None
        cdef Memory hook_after = None
        if calls:
            cuts = tuple(sorted(calls))
            key = key + (cuts,)
        plan = self._plan(key)
        _, ex_mem, n_steps, groups, hook_at = self._plans[key]
        if calls:
            # the hooks of one step run together, in node order; those before the first step now
            at = {}
            for j, k in zip(cuts, hook_at):
                at.setdefault(k, []).extend(calls[j])
            for node, fn in at.pop(-1, ()):
                fn(node)
            hook_run = _HookRun(list(at.values()))
            hook_after = Memory((len(at) + 1) * sizeof(int32_t))
            for i, k in enumerate(at):
                (<int32_t *> hook_after.ptr)[i] = k
            (<int32_t *> hook_after.ptr)[len(at)] = -1
        cdef Tensor t
        for t, path in plan.paths.items():
            t.c.op_params[_FA_TAKEN] = _FA_PATHS.index(path)
        cdef pg_run st
        if self._work is None or self._work.size < plan.work_size:
            self._work = Memory(plan.work_size)
        if self._shared_mem is None:
            self._shared_mem = Memory(sizeof(pg_shared))
        memset(self._shared_mem.ptr, 0, sizeof(pg_shared))
        st.steps = <pg_exec *> (<Memory> ex_mem).ptr
        st.n = n_steps
        st.wdata = self._work.ptr
        st.wsize = plan.work_size
        st.shared = <pg_shared *> self._shared_mem.ptr
        cdef int nth = plan.n_threads, used
        cdef Memory prof = Memory(max(n_steps, 1) * nth * 3 * sizeof(uint64_t)) if profile else None
        st.prof = <uint64_t *> prof.ptr if profile else NULL
        st.prof_nth = nth
        cdef int stop = 0
        st.hook_after = <int32_t *> hook_after.ptr if hook_after is not None else NULL
        st.hook = _call_hooks
        st.hook_ctx = <void *> hook_run
        st.hook_stop = &stop
        t0 = perf_counter()
        try:
            st.t0 = pg_now_ns()
            with nogil:
                used = pg_parallel_run(nth, pg_graph_worker, &st)
            wall = pg_now_ns() - st.t0
        finally:
            self.run_seconds = perf_counter() - t0
        if st.shared.err:
            self._raise_data_error(st.shared)
        if stop:
            raise hook_run.exc
        if profile:
            times = np.frombuffer(prof, dtype=np.uint64, count=n_steps * nth * 3).reshape(n_steps, nth, 3)[:, :used]
            return _make_profile(groups, times, wall, plan.paths)

    def to_dot(self):
        """The graph as Graphviz DOT (pyggml.profile.graph_dot): nodes with op, name, type and
        shape, leafs, sources as edges, the groups that fusion would run as one kernel outlined."""
        return _graph_dot(self._nodes, self._leafs, [g for _, g in self._fusions()])

    cdef _raise_data_error(self, pg_shared * sh):
        # the indices are src[1] of get_rows (range: a.ne[1]) and of set_rows (range: the destination's
        # ne[1]); err_pos is the linear element position in the indices, shown as (i, j, k)
        cdef Tensor t
        for t in self._nodes:
            if &t.c == sh.err_node and t.c.op == Op.ROPE:
                f = struct.unpack("<f", struct.pack("<i", sh.err_val))[0]
                raise ValueError(f"rope: frequency factor c[{sh.err_pos}] must be finite and > 0, got {f}")
            if &t.c == sh.err_node:
                op = Op(t.c.op).name.lower()
                idx, limit = t._src[1], (t._src[0].ne[1] if t.c.op == Op.GET_ROWS else t.c.ne[1])
                what = "the destination was not written" if t.c.op == Op.SET_ROWS else "its row is zero"
                if t.c.op == Op.ADD_ID:        # ids are src[2], ranging over the rows of b
                    idx, limit, what = t._src[2], t._src[1].ne[1], "its row was not written"
                elif t.c.op == Op.MUL_MAT_ID:  # ids are src[2], ranging over the experts of a
                    idx, limit, what = t._src[2], t._src[0].ne[2], "nothing of the result was written"
                n0, n1 = idx.ne[0], idx.ne[1]
                pos = (sh.err_pos % n0, sh.err_pos // n0 % n1, sh.err_pos // (n0 * n1))
                raise IndexError(f"{op}: index {sh.err_val} at position {pos} of the indices is out of "
                                 f"range [0, {limit}); {what}")
        raise IndexError(f"index {sh.err_val} at position {sh.err_pos} is out of range")

    def __repr__(self):
        return f"CGraph(n_nodes={len(self._nodes)}, n_leafs={len(self._leafs)})"
