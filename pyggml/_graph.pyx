"""CGraph: nodes in topological order, the plan (threads, work buffer, fusion, memory of the
intermediate tensors) and compute: one parallel region in which every thread walks every node with
(ith, nth) and a barrier separates the nodes. The single dispatch switch is _compute_node().

Fusion. plan() turns the nodes into exec entries (struct pg_exec: node, kind, aux[2]). An entry of
kind EXEC_OP runs node.op; a fused kind runs a group of consecutive executed nodes as one kernel:
`node` is the group's last node, aux[] the earlier ones in order, and the nodes absorbed into aux[]
get no entry of their own. The groups come from _PATTERNS, a table of

    (ops of the consecutive nodes, exec kind, check(group, uses) -> bool)

tried longest first at every node; `uses` counts how often each tensor is a source in this graph.
The check holds exactly when the fused kernel gives the nodes' own results bit for bit, e.g. that an
intermediate it never writes has no other reader (one use, not a view, not a graph output). A new
pattern is one table entry, one exec kind and one line in _compute_node.

    ADD -> RMS_NORM -> MUL   h = a + b, y = rms_norm(h) * w; h written, the norm's result not
    RMS_NORM -> MUL          ggml's one CPU fusion (ggml-semantics.md sections 6 and 9)
    ADD -> RMS_NORM          h = a + b, y = rms_norm(h) (pyggml's; h is still written)
    ROPE -> SET_ROWS         rotated rows written converted straight into a cache (pyggml's; the
                             rope result, read by the set_rows only, is not written)

Matching depends only on the graph, so the memory planner treats a group as one step (no block is
reused inside it, whether the group then runs fused or not). plan() applies the groups once per
(graph, n_threads, use_ref) and lists them in Plan.fused; use_ref=True, or the environment variable
PYGGML_DISABLE_FUSION set to anything but "" or "0" when the plan is made, turns fusion off.
"""
import os
import struct
import weakref
from time import perf_counter

from libc.stdint cimport int32_t
from libc.string cimport memcpy, memset

from pyggml._openmp cimport pg_barrier, pg_have_openmp, pg_parallel_run
from pyggml._tensor cimport Memory, Tensor, block_align, check_int, tensor_nbytes
from pyggml._typedefs cimport *

from pyggml._enums import NO_COMPUTE_OPS, Op, Type
from pyggml._threads import count_threads

cdef extern from "binary.h" nogil:
    void pg_compute_add(const pg_params * p, pg_tensor * dst)
    void pg_compute_mul(const pg_params * p, pg_tensor * dst)
    void pg_compute_scale(const pg_params * p, pg_tensor * dst)
    size_t pg_work_binary(const pg_tensor * dst, int nth)

cdef extern from "copy.h" nogil:
    void pg_compute_dup(const pg_params * p, pg_tensor * dst)
    size_t pg_work_dup(const pg_tensor * dst, int nth)

cdef extern from "glu.h" nogil:
    void pg_compute_glu(const pg_params * p, pg_tensor * dst)
    void pg_compute_unary(const pg_params * p, pg_tensor * dst)
    size_t pg_work_glu(const pg_tensor * dst, int nth)
    size_t pg_work_unary(const pg_tensor * dst, int nth)

cdef extern from "softmax.h" nogil:
    void pg_compute_soft_max(const pg_params * p, pg_tensor * dst)
    size_t pg_work_soft_max(const pg_tensor * dst, int nth)

cdef extern from "rows.h" nogil:
    void pg_compute_get_rows(const pg_params * p, pg_tensor * dst)
    void pg_compute_set_rows(const pg_params * p, pg_tensor * dst)
    void pg_compute_rope_set_rows(const pg_params * p, const pg_tensor * rope, pg_tensor * dst)
    size_t pg_work_rope_set_rows(const pg_tensor * dst, int nth)
    size_t pg_work_get_rows(const pg_tensor * dst, int nth)
    size_t pg_work_set_rows(const pg_tensor * dst, int nth)

cdef extern from "matmul.h" nogil:
    void pg_compute_mul_mat(const pg_params * p, pg_tensor * dst)
    size_t pg_work_mul_mat(const pg_tensor * dst, int nth)

cdef extern from "norm.h" nogil:
    void pg_compute_rms_norm_fused(const pg_params * p, const pg_tensor * add, const pg_tensor * norm,
                                   const pg_tensor * mul)
    void pg_compute_rms_norm(const pg_params * p, pg_tensor * dst)
    void pg_compute_norm(const pg_params * p, pg_tensor * dst)
    size_t pg_work_rms_norm(const pg_tensor * dst, int nth)
    size_t pg_work_norm(const pg_tensor * dst, int nth)

cdef extern from "rope.h" nogil:
    void pg_compute_rope(const pg_params * p, pg_tensor * dst)
    size_t pg_work_rope(const pg_tensor * dst, int nth)

cdef extern from "flash-attn.h" nogil:
    void pg_compute_flash_attn_ext(const pg_params * p, pg_tensor * dst)
    size_t pg_work_flash_attn_ext(const pg_tensor * dst, int nth)


FLAG_INPUT = 1
FLAG_OUTPUT = 2


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


# what an exec entry does
cdef enum:
    EXEC_OP = 0                 # run node.op
    EXEC_RMS_NORM_MUL = 1       # aux[0] = rms_norm, node = mul
    EXEC_ADD_RMS_NORM = 2       # aux[0] = add, node = rms_norm
    EXEC_ADD_RMS_NORM_MUL = 3   # aux[0] = add, aux[1] = rms_norm, node = mul
    EXEC_ROPE_SET_ROWS = 4      # aux[0] = rope, node = set_rows


cdef struct pg_exec:
    pg_tensor * node
    int32_t kind
    pg_tensor * aux[2]


cdef void _compute_node(const pg_params * p, const pg_exec * e) noexcept nogil:
    cdef pg_tensor * t = e.node
    cdef int op = t.op
    if e.kind == EXEC_RMS_NORM_MUL:
        pg_compute_rms_norm_fused(p, NULL, e.aux[0], t)
    elif e.kind == EXEC_ADD_RMS_NORM:
        pg_compute_rms_norm_fused(p, e.aux[0], t, NULL)
    elif e.kind == EXEC_ADD_RMS_NORM_MUL:
        pg_compute_rms_norm_fused(p, e.aux[0], e.aux[1], t)
    elif e.kind == EXEC_ROPE_SET_ROWS:
        pg_compute_rope_set_rows(p, e.aux[0], t)
    elif op == PG_OP_ADD:
        pg_compute_add(p, t)
    elif op == PG_OP_MUL:
        pg_compute_mul(p, t)
    elif op == PG_OP_SCALE:
        pg_compute_scale(p, t)
    elif op == PG_OP_DUP or op == PG_OP_CONT or op == PG_OP_CPY:
        pg_compute_dup(p, t)
    elif op == PG_OP_GET_ROWS:
        pg_compute_get_rows(p, t)
    elif op == PG_OP_SET_ROWS:
        pg_compute_set_rows(p, t)
    elif op == PG_OP_SOFT_MAX:
        pg_compute_soft_max(p, t)
    elif op == PG_OP_GLU:
        pg_compute_glu(p, t)
    elif op == PG_OP_UNARY:
        pg_compute_unary(p, t)
    elif op == PG_OP_MUL_MAT:
        pg_compute_mul_mat(p, t)
    elif op == PG_OP_RMS_NORM:
        pg_compute_rms_norm(p, t)
    elif op == PG_OP_NORM:
        pg_compute_norm(p, t)
    elif op == PG_OP_ROPE:
        pg_compute_rope(p, t)
    elif op == PG_OP_FLASH_ATTN_EXT:
        pg_compute_flash_attn_ext(p, t)


cdef size_t _work_size(const pg_tensor * t, int nth) noexcept nogil:
    """Bytes of work buffer the node needs with nth threads (ggml_graph_plan's `cur`)."""
    cdef int op = t.op
    if op == PG_OP_ADD or op == PG_OP_MUL:
        return pg_work_binary(t, nth)
    if op == PG_OP_DUP or op == PG_OP_CONT or op == PG_OP_CPY:
        return pg_work_dup(t, nth)
    if op == PG_OP_GET_ROWS:
        return pg_work_get_rows(t, nth)
    if op == PG_OP_SET_ROWS:
        return pg_work_set_rows(t, nth)
    if op == PG_OP_SOFT_MAX:
        return pg_work_soft_max(t, nth)
    if op == PG_OP_GLU:
        return pg_work_glu(t, nth)
    if op == PG_OP_UNARY:
        return pg_work_unary(t, nth)
    if op == PG_OP_MUL_MAT:
        return pg_work_mul_mat(t, nth)
    if op == PG_OP_RMS_NORM:
        return pg_work_rms_norm(t, nth)
    if op == PG_OP_NORM:
        return pg_work_norm(t, nth)
    if op == PG_OP_ROPE:
        return pg_work_rope(t, nth)
    if op == PG_OP_FLASH_ATTN_EXT:
        return pg_work_flash_attn_ext(t, nth)
    return 0


cdef struct _run_state:
    pg_exec * ex
    int n
    void * wdata
    size_t wsize
    pg_shared * shared
    int use_ref


cdef void _worker(void * arg, int ith, int nth) noexcept nogil:
    cdef _run_state * r = <_run_state *> arg
    cdef pg_params p
    p.ith = ith
    p.nth = nth
    p.wsize = r.wsize
    p.wdata = r.wdata
    p.shared = r.shared
    p.use_ref = r.use_ref
    cdef int i
    # a barrier after the last node too: the threads then reach the end of the parallel region
    # together, and the wait for a descheduled one happens in pg_barrier (which sleeps after a
    # short spin), not in libgomp's end-of-region barrier (which spins for milliseconds)
    for i in range(r.n):
        _compute_node(&p, &r.ex[i])
        pg_barrier(&p)


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
    register bits the kernels use, read at run time for RVV; 0 for scalar), OpenMP, compiler, version."""
    return {
        "simd": pg_simd_name().decode(),
        "vlen": pg_simd_vlen(),
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
    # the indices of get_rows/set_rows (src[1]) are checked even when no element is copied
    if t.c.op == Op.GET_ROWS or t.c.op == Op.SET_ROWS:
        return t._src[1].nelements != 0
    return t.c.op not in NO_COMPUTE_OPS and t.nelements != 0


# Tensor._graph of an op result: None until a graph holds it as a node, then a weak reference to
# that graph, which plans its memory; _SHARED once a second graph has reached it (CGraph._claim)
_SHARED = object()


# ops whose kernels split whole rows: more threads than rows would only wait
_ROW_SPLIT_OPS = frozenset({Op.SOFT_MAX, Op.RMS_NORM, Op.NORM, Op.ADD, Op.MUL})


cdef int _n_tasks(Tensor t, int nth):
    if t.c.op in _ROW_SPLIT_OPS:
        return min(nth, max(1, t.c.ne[1] * t.c.ne[2] * t.c.ne[3]))
    return nth


# ---- fusion patterns (see the module docstring) ----

def _norm_mul(Tensor norm, Tensor mul, dict uses):
    """RMS_NORM -> MUL, ggml's conditions: the norm's result is read by the mul only and is not a
    view or an output; same shape; the weight is F32 with packed rows of the norm's width."""
    if uses.get(id(norm), 0) != 1 or norm._view_src is not None or norm.c.flags & FLAG_OUTPUT:
        return False
    w = mul._src[1] if mul._src[0] is norm else mul._src[0] if mul._src[1] is norm else None
    return (w is not None and mul.ne == norm.ne and mul.c.type == Type.F32 and w.type == Type.F32
            and w.nb[0] == 4 and w.ne[0] == norm.c.ne[0])


def _add_norm(Tensor add, Tensor norm, dict uses):
    """ADD -> RMS_NORM: the norm reads the sum itself (not a view of it), the norm is not in place,
    all F32 and the addend's rows are as wide as the sum's (no repeat within a row)."""
    a, b = add._src[0], add._src[1]
    return (norm._src[0] is add and norm._view_src is None and add.c.type == Type.F32
            and a.type == Type.F32 and b.type == Type.F32 and b.ne[0] == add.c.ne[0])


def _rope_set_rows(Tensor rope, Tensor sr, dict uses):
    """ROPE -> SET_ROWS: the rope result is F32, is not a view or an output, and is read only by the
    set_rows, directly or through one reshape (a KV cache writes [head_dim * n_head, n_tokens] rows);
    a set_rows row is a whole number of rope rows."""
    if uses.get(id(rope), 0) != 1 or rope._view_src is not None or rope.c.flags & FLAG_OUTPUT:
        return False
    cdef Tensor b = sr._src[0]
    if b is not rope and (b.c.op != Op.RESHAPE or b._src[0] is not rope or uses.get(id(b), 0) != 1
                          or b.c.flags & FLAG_OUTPUT):
        return False
    return rope.c.type == Type.F32 and b.c.ne[0] % rope.c.ne[0] == 0


_PATTERNS = (
    ((Op.ADD, Op.RMS_NORM, Op.MUL), EXEC_ADD_RMS_NORM_MUL,
     lambda g, u: _add_norm(g[0], g[1], u) and _norm_mul(g[1], g[2], u)),
    ((Op.RMS_NORM, Op.MUL), EXEC_RMS_NORM_MUL, lambda g, u: _norm_mul(g[0], g[1], u)),
    ((Op.ADD, Op.RMS_NORM), EXEC_ADD_RMS_NORM, lambda g, u: _add_norm(g[0], g[1], u)),
    ((Op.ROPE, Op.SET_ROWS), EXEC_ROPE_SET_ROWS, lambda g, u: _rope_set_rows(g[0], g[1], u)),
)


cdef inline pg_tensor * _c(t):
    return NULL if t is None else &(<Tensor> t).c


class Plan:
    """What plan() decided: thread count, work buffer bytes, tasks per node, fused groups (tuples of
    the Tensors each fused kernel computes, in graph order) and the memory planned for intermediate
    tensors (mem_bytes, against mem_bytes_naive without reuse)."""

    def __init__(self, n_threads, work_size, n_tasks, fused, mem_bytes, mem_bytes_naive, use_ref):
        self.n_threads = n_threads
        self.work_size = work_size
        self.n_tasks = n_tasks
        self.fused = fused
        self.mem_bytes = mem_bytes
        self.mem_bytes_naive = mem_bytes_naive
        self.use_ref = use_ref

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
    cdef Memory _exec_mem
    cdef Memory _shared_mem
    cdef tuple _mem           # (arena bytes, bytes without reuse)
    cdef bint _busy           # an expand, plan or compute is running (see _enter)
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

    def _fusions(self):
        """[(exec kind, (Tensor, ...))]: the groups of consecutive executed nodes that _PATTERNS fuse."""
        cdef Tensor n
        uses = {}
        for n in self._nodes:
            for s in n._src:
                if s is not None:
                    uses[id(s)] = uses.get(id(s), 0) + 1
        nodes = [n for n in self._nodes if _executed(n)]
        found = []
        i = 0
        while i < len(nodes):
            for ops, kind, ok in _PATTERNS:
                g = tuple(nodes[i:i + len(ops)])
                if tuple(t.op for t in g) == ops and ok(g, uses):
                    found.append((kind, g))
                    i += len(g)
                    break
            else:
                i += 1
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
                    rest = [[o, z] for o, z in ((blk_off, off - blk_off), (off + size, blk_off + blk_size - off - size)) if z > 0]
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
        (default_threads()); RuntimeError while another call of this graph runs."""
        key = _plan_key(n_threads, use_ref)
        self._enter("plan")
        try:
            return self._plan(key)
        finally:
            self._leave()

    def _plan(self, key):
        nth, use_ref = key
        if key in self._plans:
            return self._plans[key][0]
        if not self._mem_planned:
            self._plan_memory()
        cdef Tensor n
        groups = [] if use_ref or os.environ.get("PYGGML_DISABLE_FUSION", "") not in ("", "0") else self._fusions()
        group_of = {id(t): (kind, g) for kind, g in groups for t in g}
        entries = []     # (node, exec kind, aux0, aux1) in execution order
        n_tasks = []
        for n in self._nodes:
            if not _executed(n):
                n_tasks.append(1)
                continue
            n_tasks.append(_n_tasks(n, nth))
            kind, g = group_of.get(id(n), (EXEC_OP, (n,)))
            if n is g[-1]:
                aux = g[:-1] + (None, None)
                entries.append((n, kind, aux[0], aux[1]))
        plan_threads = min(nth, max(n_tasks, default=1))
        work = 0
        for n, kind, _, _ in entries:
            if kind == EXEC_OP:
                work = max(work, _work_size(&n.c, plan_threads))
            elif kind == EXEC_ROPE_SET_ROWS:
                work = max(work, pg_work_rope_set_rows(&n.c, plan_threads))
        plan = Plan(plan_threads, work, tuple(n_tasks), [g for _, g in groups], self._mem[0], self._mem[1],
                    use_ref)
        self._plans[key] = (plan, entries)
        return plan

    def compute(self, n_threads=None, use_ref=False):
        """Run every node; the GIL is released for the whole compute. Data errors found while
        running raise afterwards: IndexError for indices out of range (get_rows, set_rows),
        ValueError for a rope frequency factor that is not finite and > 0; the results of such a
        compute are undefined, and no set_rows after the error writes anything. A graph runs one
        call at a time (its arena, work buffer and barrier are shared): compute, plan or
        build_forward_expand from another Python thread while this runs raises RuntimeError.
        run_seconds is then the time spent in the C parallel region (Python preparation excluded)."""
        key = _plan_key(n_threads, use_ref)
        self._enter("compute")
        try:
            self._run(key)
        finally:
            self._leave()

    cdef _run(self, tuple key):
        plan = self._plan(key)
        entries = self._plans[key][1]
        cdef int n = len(entries)
        cdef _run_state st
        if self._exec_mem is None or self._exec_mem.size < max(n, 1) * sizeof(pg_exec):
            self._exec_mem = Memory(max(n, 1) * sizeof(pg_exec))
        cdef pg_exec * ex = <pg_exec *> self._exec_mem.ptr
        for i, (node, kind, aux0, aux1) in enumerate(entries):
            ex[i].node = _c(node)
            ex[i].kind = kind
            ex[i].aux[0] = _c(aux0)
            ex[i].aux[1] = _c(aux1)
        if self._work is None or self._work.size < plan.work_size:
            self._work = Memory(plan.work_size)
        if self._shared_mem is None:
            self._shared_mem = Memory(sizeof(pg_shared))
        memset(self._shared_mem.ptr, 0, sizeof(pg_shared))
        st.ex = ex
        st.n = n
        st.wdata = self._work.ptr
        st.wsize = plan.work_size
        st.shared = <pg_shared *> self._shared_mem.ptr
        st.use_ref = plan.use_ref
        cdef int nth = plan.n_threads
        t0 = perf_counter()
        try:
            with nogil:
                pg_parallel_run(nth, _worker, &st)
        finally:
            self.run_seconds = perf_counter() - t0
        if st.shared.err:
            self._raise_data_error(st.shared)

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
                n0, n1 = idx.ne[0], idx.ne[1]
                pos = (sh.err_pos % n0, sh.err_pos // n0 % n1, sh.err_pos // (n0 * n1))
                what = "the destination was not written" if t.c.op == Op.SET_ROWS else "its row is zero"
                raise IndexError(f"{op}: index {sh.err_val} at position {pos} of the indices is out of "
                                 f"range [0, {limit}); {what}")
        raise IndexError(f"index {sh.err_val} at position {sh.err_pos} is out of range")

    def __repr__(self):
        return f"CGraph(n_nodes={len(self._nodes)}, n_leafs={len(self._leafs)})"
