"""Tensor, Context and memory: ggml's tensor object (ne/nb, views without copies) with numpy interop."""
from cpython.buffer cimport PyBUF_ANY_CONTIGUOUS, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid, PyCapsule_New
from cpython.ref cimport Py_DECREF, Py_INCREF
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from pyggml._openmp cimport pg_parallel_run
from pyggml._typedefs cimport PG_MAX_SRC, PG_PANELS_R, pg_panels_pack, pg_panels_size, pg_tensor, pg_traits

import operator

import numpy as np

from pyggml._enums import FLOAT_TYPES, INT_TYPES, QUANT_TYPES, Op, Type, kernel_types
from pyggml._tables import blck_size, type_size

cdef extern from "ops/copy.h" nogil:
    bint pg_is_contiguous(const pg_tensor * t)
    void pg_load_row_f32(const pg_tensor * x, int64_t i1, int64_t i2, int64_t i3, float * buf)
    void pg_store_row_f32(const pg_tensor * x, int64_t i1, int64_t i2, int64_t i3, const float * buf)

# Tensor.repack's work: nmat matrices of nr rows (x + m*bmat) into their panels (dst + m*size), the
# (matrix, panel) pairs split across the threads
cdef struct _pack_arg:
    int type
    int64_t n, nr, nmat, npanel
    const char * x
    size_t bx, bmat, size, panel
    char * dst


cdef void _pack_worker(void * arg, int ith, int nth) noexcept nogil:
    cdef _pack_arg * a = <_pack_arg *> arg
    cdef int64_t units = a.nmat * a.npanel
    cdef int64_t u = units * ith // nth, u1 = units * (ith + 1) // nth, m, p0, p1
    while u < u1:
        m, p0 = u // a.npanel, u % a.npanel
        p1 = min(a.npanel, p0 + (u1 - u))
        pg_panels_pack(a.type, a.n, min(a.nr, PG_PANELS_R * p1) - PG_PANELS_R * p0,
                       a.x + m * a.bmat + PG_PANELS_R * p0 * a.bx, a.bx, a.dst + m * a.size + p0 * a.panel)
        u += p1 - p0

cdef extern from "stdlib.h" nogil:
    void * aligned_alloc(size_t alignment, size_t size)

cdef extern from "core/dlpack.h" nogil:
    enum:
        PG_DLPACK_MAJOR
        PG_DLPACK_MINOR
        PG_DL_CPU
        PG_DL_INT
        PG_DL_FLOAT
    const uint64_t PG_DL_FLAG_IS_COPIED

    ctypedef struct pg_DLDevice:
        int32_t device_type
        int32_t device_id

    ctypedef struct pg_DLDataType:
        uint8_t code
        uint8_t bits
        uint16_t lanes

    ctypedef struct pg_DLTensor:
        void * data
        pg_DLDevice device
        int32_t ndim
        pg_DLDataType dtype
        int64_t * shape
        int64_t * strides
        uint64_t byte_offset

    ctypedef struct pg_DLManagedTensor:
        pg_DLTensor dl_tensor
        void * manager_ctx
        void (*deleter)(pg_DLManagedTensor * self) noexcept nogil

    ctypedef struct pg_DLPackVersion:
        uint32_t major
        uint32_t minor

    ctypedef struct pg_DLManagedTensorVersioned:
        pg_DLPackVersion version
        void * manager_ctx
        void (*deleter)(pg_DLManagedTensorVersioned * self) noexcept nogil
        uint64_t flags
        pg_DLTensor dl_tensor

_NP_DTYPE = {
    Type.F32: np.dtype(np.float32), Type.F16: np.dtype(np.float16), Type.BF16: np.dtype(np.uint16),
    Type.I8: np.dtype(np.int8), Type.I16: np.dtype(np.int16), Type.I32: np.dtype(np.int32),
    Type.I64: np.dtype(np.int64), Type.F64: np.dtype(np.float64),
}
_FROM_DTYPE = {np.dtype(np.float32): Type.F32, np.dtype(np.float16): Type.F16,
               np.dtype(np.int32): Type.I32, np.dtype(np.int64): Type.I64}
# float and quantized types with both row conversions in the type table
_CONVERTIBLE = kernel_types("to_float", "from_float") & (FLOAT_TYPES | QUANT_TYPES)


# DLPack: element types that can be exported, as (type code, bits)
_DL_DTYPE = {Type.F32: (PG_DL_FLOAT, 32), Type.F16: (PG_DL_FLOAT, 16),
             Type.I32: (PG_DL_INT, 32), Type.I64: (PG_DL_INT, 64)}


cdef void _dl_release(void * owner) noexcept nogil:
    # consumers may call the deleter from any thread, with or without the GIL
    with gil:
        Py_DECREF(<object> owner)


cdef void _dl_deleter(pg_DLManagedTensor * m) noexcept nogil:
    _dl_release(m.manager_ctx)
    free(m)


cdef void _dl_deleter_versioned(pg_DLManagedTensorVersioned * m) noexcept nogil:
    _dl_release(m.manager_ctx)
    free(m)


cdef void _dl_capsule_free(object capsule) noexcept:
    # a capsule still carrying its original name was never consumed: the producer deletes it
    cdef pg_DLManagedTensor * m
    cdef pg_DLManagedTensorVersioned * mv
    if PyCapsule_IsValid(capsule, "dltensor"):
        m = <pg_DLManagedTensor *> PyCapsule_GetPointer(capsule, "dltensor")
        m.deleter(m)
    elif PyCapsule_IsValid(capsule, "dltensor_versioned"):
        mv = <pg_DLManagedTensorVersioned *> PyCapsule_GetPointer(capsule, "dltensor_versioned")
        mv.deleter(mv)


cdef object _dl_capsule(object owner, char * data, tuple shape, tuple strides, uint8_t code, uint8_t bits,
                        bint versioned, uint64_t flags):
    """A DLPack capsule for CPU memory at data (strides in elements) that holds a reference to owner
    until the consumer (or the capsule, if never consumed) calls the deleter."""
    cdef int nd = len(shape), i
    cdef size_t head = max(sizeof(pg_DLManagedTensor), sizeof(pg_DLManagedTensorVersioned))
    cdef char * block = <char *> malloc(head + 2 * max(nd, 1) * sizeof(int64_t))
    if block == NULL:
        raise MemoryError("__dlpack__: cannot allocate the DLPack header")
    cdef pg_DLManagedTensor * m = <pg_DLManagedTensor *> block
    cdef pg_DLManagedTensorVersioned * mv = <pg_DLManagedTensorVersioned *> block
    cdef pg_DLTensor * dl = &mv.dl_tensor if versioned else &m.dl_tensor
    cdef int64_t * dims = <int64_t *> (block + head)
    for i in range(nd):
        dims[i] = shape[i]
        dims[nd + i] = strides[i]
    dl.data = data
    dl.device.device_type = PG_DL_CPU
    dl.device.device_id = 0
    dl.ndim = nd
    dl.dtype.code = code
    dl.dtype.bits = bits
    dl.dtype.lanes = 1
    dl.shape = dims
    dl.strides = dims + nd
    dl.byte_offset = 0
    Py_INCREF(owner)
    if versioned:
        mv.version.major = PG_DLPACK_MAJOR
        mv.version.minor = PG_DLPACK_MINOR
        mv.manager_ctx = <void *> owner
        mv.deleter = _dl_deleter_versioned
        mv.flags = flags
        return PyCapsule_New(mv, "dltensor_versioned", _dl_capsule_free)
    m.manager_ctx = <void *> owner
    m.deleter = _dl_deleter
    return PyCapsule_New(m, "dltensor", _dl_capsule_free)


cdef size_t block_align(size_t size) noexcept nogil:
    """Alignment of a block of tensor data: 64 bytes (a cache line), a page for a page or more.
    Page-aligned blocks share their offset within a 4 KiB page, so a kernel streaming
    y[i] = f(x[i], w[i]) never issues a load whose low 12 address bits match a store still in
    flight (4K aliasing: the CPU assumes a dependence and stalls the load; the fused
    rms_norm(x) * w is where it shows, docs/bench/norm.md)."""
    return 4096 if size >= 4096 else 64


cdef class Memory:
    """A zero-filled block that owns tensor data, aligned by block_align; exposes the buffer
    protocol. With `buffer` (a writable, contiguous buffer-protocol object) it is instead that
    object's memory, held (not copied) until this Memory is freed; `size` is then ignored."""

    def __cinit__(self, size_t size, object buffer=None):
        if buffer is not None:
            PyObject_GetBuffer(buffer, &self._view, PyBUF_WRITABLE | PyBUF_ANY_CONTIGUOUS)
            self._external = True
            self.ptr = <char *> self._view.buf
            self.size = <size_t> self._view.len
            self._shape[0] = self._view.len
            self._strides[0] = 1
            return
        self.size = size
        cdef size_t align = block_align(size)
        cdef size_t padded = (max(size, <size_t> 1) + align - 1) // align * align
        self.ptr = <char *> aligned_alloc(align, padded)
        if self.ptr == NULL:
            raise MemoryError(f"pyggml: cannot allocate {size} bytes")
        memset(self.ptr, 0, padded)
        self._shape[0] = <Py_ssize_t> size
        self._strides[0] = 1

    def __dealloc__(self):
        if self._external:
            PyBuffer_Release(&self._view)
        else:
            free(self.ptr)

    def __getbuffer__(self, Py_buffer * buf, int flags):
        buf.buf = self.ptr
        buf.obj = self
        buf.len = <Py_ssize_t> self.size
        buf.readonly = 0
        buf.itemsize = 1
        buf.format = "B"
        buf.ndim = 1
        buf.shape = self._shape
        buf.strides = self._strides
        buf.suboffsets = NULL
        buf.internal = NULL

    def __releasebuffer__(self, Py_buffer * buf):
        pass

    def __len__(self):
        return self.size

    @property
    def address(self):
        return <uintptr_t> self.ptr


cdef size_t tensor_nbytes(const pg_tensor * t) noexcept nogil:
    cdef int i
    cdef size_t n
    for i in range(4):
        if t.ne[i] <= 0:
            return 0
    cdef int64_t blck = pg_traits[t.type].blck
    if blck == 1:
        n = pg_traits[t.type].size
        for i in range(4):
            n += (t.ne[i] - 1) * t.nb[i]
    else:
        n = t.ne[0] * t.nb[0] // blck
        for i in range(1, 4):
            n += (t.ne[i] - 1) * t.nb[i]
    return n


cdef bint tensor_is_contiguous(const pg_tensor * t) noexcept nogil:
    return pg_is_contiguous(t)


cdef inline int _n_dims(tuple ne):
    cdef int i
    for i in range(3, 0, -1):
        if ne[i] != 1:
            return i + 1
    return 1


# the largest extent (and entry of ne or nb) a tensor may have: sums of a few extents stay in size_t
_MAX_BYTES = 1 << 62


cdef object check_int(str op, str arg, v):
    """v as a Python int (numpy integers too); a float or anything else raises TypeError naming op."""
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{op}: {arg} must be an integer, got {v!r}") from None


cdef object byte_extent(str op, int type, tuple ne, tuple nb):
    """Bytes from the first element of a tensor of `type` with 4 entries ne and byte strides nb to one
    past its last (0 when an entry of ne is 0), as tensor_nbytes counts them but in Python integers,
    so no product wraps around. Every tensor's size goes through here before it reaches the C
    struct: ValueError naming op when an entry of ne or nb, or the extent, is 2^62 or more."""
    n = 0
    if 0 not in ne:
        blck, ts = pg_traits[type].blck, pg_traits[type].size
        n = ne[0] * nb[0] // blck if blck > 1 else ts + (ne[0] - 1) * nb[0]
        for i in range(1, 4):
            n += (ne[i] - 1) * nb[i]
    if n >= _MAX_BYTES or any(x >= _MAX_BYTES for x in ne + nb):
        raise ValueError(f"{op}: a tensor of ne={ne} and nb={nb} is too large: it spans {n} bytes, and the "
                         f"limit for the extent and every entry of ne and nb is 2^62")
    return n


def _check_type(op, arg, t):
    try:
        return Type(t)
    except ValueError:
        raise TypeError(f"{op}: {arg} must be a pyggml.Type, got {t!r}") from None


def _check_ne(op, ne, typ):
    ne = tuple(check_int(op, "each entry of ne", x) for x in ne)
    if not 1 <= len(ne) <= 4:
        raise ValueError(f"{op}: ne must have 1 to 4 entries, got {len(ne)}")
    if any(x < 0 for x in ne):
        raise ValueError(f"{op}: ne entries must be >= 0, got {ne}")
    blck, ts = blck_size(typ), type_size(typ)
    if ne[0] % blck:
        raise ValueError(f"{op}: ne[0] of a {typ.name} tensor must be a multiple of {blck}, got {ne[0]}")
    full = ne + (1,) * (4 - len(ne))
    nb1 = full[0] // blck * ts
    byte_extent(op, typ, full, (ts, nb1, nb1 * full[1], nb1 * full[1] * full[2]))
    return full, len(ne)


cdef void _fill_nb(pg_tensor * t) noexcept:
    t.nb[0] = pg_traits[t.type].size
    t.nb[1] = t.nb[0] * (t.ne[0] // pg_traits[t.type].blck)
    t.nb[2] = t.nb[1] * t.ne[1]
    t.nb[3] = t.nb[2] * t.ne[2]


cdef Tensor _blank(Context ctx, int type, tuple ne, int ndim):
    cdef Tensor t = Tensor.__new__(Tensor)
    cdef int i
    t.ctx = ctx
    t._src = (None,) * PG_MAX_SRC
    t._name = ""
    t.c.type = type
    for i in range(4):
        t.c.ne[i] = ne[i]
    t._ndim = max(ndim, _n_dims(ne))
    return t


cdef Tensor new_tensor_impl(Context ctx, int type, tuple ne, int ndim):
    cdef Tensor t = _blank(ctx, type, ne, ndim)
    _fill_nb(&t.c)
    t._attach(Memory(tensor_nbytes(&t.c)), 0)
    return t


cdef Tensor new_node(Context ctx, int type, tuple ne, int op, tuple srcs, int ndim=0):
    """A result tensor of an op: packed strides, memory assigned when a graph is planned."""
    cdef Tensor t = _blank(ctx, type, ne, ndim)
    cdef Tensor s
    _fill_nb(&t.c)
    t.c.op = op
    srcs = tuple(srcs) + (None,) * (PG_MAX_SRC - len(srcs))
    t._src = srcs
    for i in range(PG_MAX_SRC):
        s = srcs[i]
        if s is not None:
            t.c.src[i] = &s.c
            t._ndim = max(t._ndim, s._ndim)
    if ndim:
        t._ndim = max(ndim, _n_dims(ne))
    return t


cdef Tensor new_view(Tensor a, tuple ne, tuple nb, offset, int op, int ndim, str name=None):
    """A tensor aliasing a's memory (flattened to the root: view of a view -> view of the base) at
    byte `offset` from a. The view must lie inside the root and every element must be aligned:
    offset and strides multiples of the element (block) size. `name` names the op in errors."""
    name = name or Op(op).name.lower()
    cdef Tensor root = a._view_src if a._view_src is not None else a
    offs = a.c.view_offs + offset
    need = offs + byte_extent(name, a.c.type, ne, nb)
    have = tensor_nbytes(&root.c)
    if need > have:
        raise ValueError(f"{name}: view of {need} bytes (offset {offs}) is out of "
                         f"the bounds of its base tensor of {have} bytes")
    ts = pg_traits[a.c.type].size
    if offs % ts or any(x % ts for x in nb):
        raise ValueError(f"{name}: the byte offset ({offs}) and strides (nb={nb}) of a {Type(a.c.type).name} "
                         f"view must be multiples of its element size {ts} (elements would be misaligned)")
    cdef Tensor t = _blank(a.ctx, a.c.type, ne, ndim)
    for i in range(4):
        t.c.nb[i] = nb[i]
    t.c.op = op
    t._src = (a,) + (None,) * (PG_MAX_SRC - 1)
    t.c.src[0] = &a.c
    t._view_src = root
    t.c.view_src = &root.c
    t.c.view_offs = offs
    t._ndim = max(ndim, _n_dims(ne))
    if root._mem is not None:
        t._attach(root._mem, <size_t> (<char *> root.c.data - root._mem.ptr) + t.c.view_offs)
    return t


def _check_int_values(op, arr, typ):
    """arr can be written into an integer tensor of type typ without truncation or wrap-around."""
    if arr.dtype.kind not in "iub":
        raise TypeError(f"{op}: a {typ.name} tensor takes integer values, got an array of dtype {arr.dtype} "
                        f"(round and convert it first)")
    if arr.size and arr.dtype.kind != "b":
        info = np.iinfo(_NP_DTYPE[typ])
        lo, hi = int(arr.min()), int(arr.max())
        if lo < info.min or hi > info.max:
            bad = lo if lo < info.min else hi
            raise ValueError(f"{op}: value {bad} does not fit in {typ.name} [{info.min}, {info.max}]")


cdef class Context:
    """Creates tensors. Every tensor owns (a reference to) its memory, so arrays returned by
    Tensor.numpy() stay valid after the Context and the Tensor are gone."""

    def __init__(self, name=""):
        self.name = name

    def new_tensor(self, type, ne):
        """A zero-filled packed tensor of `type` with `ne` (1 to 4 entries, dim 0 fastest)."""
        typ = _check_type("new_tensor", "type", type)
        full, nd = _check_ne("new_tensor", ne, typ)
        return new_tensor_impl(self, typ, full, nd)

    def new_tensor_1d(self, type, ne0):
        return self.new_tensor(type, (ne0,))

    def new_tensor_2d(self, type, ne0, ne1):
        return self.new_tensor(type, (ne0, ne1))

    def new_tensor_3d(self, type, ne0, ne1, ne2):
        return self.new_tensor(type, (ne0, ne1, ne2))

    def new_tensor_4d(self, type, ne0, ne1, ne2, ne3):
        return self.new_tensor(type, (ne0, ne1, ne2, ne3))

    def from_numpy(self, array, type=None):
        """A new packed tensor holding a copy of `array` (ne = array.shape reversed).

        type=None maps dtypes to types: float32 -> F32, float16 -> F16, other floats and bool -> F32
        (bool as 0.0/1.0), int64 -> I64, every other integer dtype (int8, int16, int32, uint8,
        uint16, uint32, uint64) -> I32, whose values must then fit in int32 (ValueError otherwise,
        never a wrap-around). An integer tensor takes integer or bool arrays only (TypeError for
        floats, which would be truncated). A float array stored as F16, BF16 or a quantized type is
        rounded as ggml's CPU backend rounds (round-to-nearest-even; Q8_0/Q8_1 with the CPU
        quantiser, Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL/IQ4_XS and the K-quants with ggml's quantisers without
        an importance matrix, as llama-quantize); float64 input is rounded to float32 first.

        Non-finite values in Q8_0/Q4_0 are stored as ggml stores them, not as themselves: a block
        holding inf or NaN, or a value of magnitude above ~8.3e6 (Q8_0; the fp16 block scale
        overflows), dequantizes to inf/NaN garbage (+inf comes back as -inf with the AVX2/AVX-512
        quantiser). See docs/reliability.md.
        """
        arr = np.asarray(array)
        if arr.ndim > 4:
            raise ValueError(f"from_numpy: array must have at most 4 dimensions, got {arr.ndim}")
        if arr.ndim == 0:
            arr = arr.reshape(1)
        if type is None:
            if arr.dtype in _FROM_DTYPE:
                typ = _FROM_DTYPE[arr.dtype]
            elif arr.dtype.kind in "fiub":
                typ = Type.F32 if arr.dtype.kind in "fb" else Type.I32
            else:
                raise TypeError(f"from_numpy: unsupported dtype {arr.dtype}")
        else:
            typ = _check_type("from_numpy", "type", type)
        t = self.new_tensor(typ, arr.shape[::-1])
        t._store(arr, "from_numpy")
        return t

    def from_bytes(self, type, ne, buffer):
        """A new tensor from raw ggml storage (e.g. quantized blocks), copied as is."""
        typ = _check_type("from_bytes", "type", type)
        full, nd = _check_ne("from_bytes", ne, typ)
        t = new_tensor_impl(self, typ, full, nd)
        t.set_bytes(buffer)
        return t

    def from_buffer(self, type, ne, buffer, offset=0):
        """A packed tensor whose data is `buffer`'s memory from byte `offset` on, not copied: a
        numpy array or memmap, an mmap, a bytearray (any writable, contiguous buffer-protocol object).
        The tensor, and its numpy() views, hold the buffer until they are gone (an mmap cannot be
        closed meanwhile); writes to the tensor write the buffer. Read-only buffers are refused,
        since ops and set() write into tensors: map a file copy-on-write (np.memmap(path, mode="c"),
        mmap.ACCESS_COPY) to read it without changing it. The data must be aligned to the type's
        element (F32 4 bytes, F16 2, a quantized block 2 for its f16 scale)."""
        typ = _check_type("from_buffer", "type", type)
        full, nd = _check_ne("from_buffer", ne, typ)
        try:
            mem = Memory(0, buffer)
        except (BufferError, TypeError, ValueError) as e:
            raise TypeError(f"from_buffer: buffer must be a writable, contiguous buffer-protocol object "
                            f"(numpy array, np.memmap with mode 'r+' or 'c', mmap, bytearray), got "
                            f"{buffer.__class__.__name__}: {e}") from None
        offset = operator.index(offset)
        cdef Tensor t = _blank(self, typ, full, nd)
        _fill_nb(&t.c)
        cdef size_t need = tensor_nbytes(&t.c)
        if offset < 0 or offset + need > mem.size:
            raise ValueError(f"from_buffer: a {typ.name} tensor of ne={full} needs {need} bytes from offset "
                             f"{offset}, but the buffer has {mem.size} bytes")
        blck, size = blck_size(typ), type_size(typ)
        align = size if blck == 1 else 2
        misalign = (<uintptr_t> mem.ptr + <size_t> offset) % align
        if misalign:
            raise ValueError(f"from_buffer: {typ.name} data must be aligned to {align} bytes, but offset "
                             f"{offset} gives an address {misalign} bytes past a multiple of {align}")
        t._attach(mem, offset)
        return t

    def __repr__(self):
        return f"Context({self.name!r})"


cdef class Tensor:
    """A ggml tensor: `type`, `ne` (elements, dim 0 fastest), `nb` (byte strides), the op that
    produces it and its sources. Op results get memory when a graph containing them is planned."""

    def __init__(self):
        raise TypeError("Tensor: create tensors with Context.new_tensor/from_numpy or with ops")

    cdef void _attach(self, Memory mem, size_t offset):
        self._mem = mem
        self.c.data = mem.ptr + offset

    @property
    def type(self):
        return Type(self.c.type)

    @property
    def ne(self):
        return (self.c.ne[0], self.c.ne[1], self.c.ne[2], self.c.ne[3])

    @property
    def nb(self):
        return (self.c.nb[0], self.c.nb[1], self.c.nb[2], self.c.nb[3])

    @property
    def shape(self):
        """numpy-order shape (ne reversed, trailing unit dims beyond the tensor's rank dropped)."""
        return self.ne[::-1][4 - self._ndim:]

    @property
    def op(self):
        return Op(self.c.op)

    @property
    def src(self):
        return self._src

    @property
    def op_params(self):
        return (<char *> self.c.op_params)[:64]

    @property
    def flags(self):
        return self.c.flags

    @property
    def name(self):
        return self._name

    @name.setter
    def name(self, value):
        self._name = str(value)[:63]

    @property
    def view_src(self):
        return self._view_src

    @property
    def view_offs(self):
        return self.c.view_offs

    @property
    def nbytes(self):
        return tensor_nbytes(&self.c)

    @property
    def nelements(self):
        return self.c.ne[0] * self.c.ne[1] * self.c.ne[2] * self.c.ne[3]

    @property
    def has_data(self):
        return self.c.data != NULL

    @property
    def data_ptr(self):
        return <uintptr_t> self.c.data

    def is_contiguous(self):
        return bool(tensor_is_contiguous(&self.c))

    def repack(self, bint enable=True, int n_threads=1):
        """Give mul_mat a copy of this weight matrix in its kernels' repacked layout; return the bytes
        the copy takes (0: none). Where the kernels running on this CPU have such a layout for the
        tensor's type (AVX-512 with VNNI and GFNI: Q8_0, Q4_0, IQ4_NL, MXFP4, Q4_K and Q5_K; AVX2:
        those and Q6_K; rows packed in dim 0), each block is stored in the order the kernels read
        it, panel by panel of 16 rows: a one-token GEMV reads one stream instead of 16 and skips a transpose, and every
        result keeps its bits. A 3-D tensor is a stack of matrices (mul_mat_id's experts), each
        repacked in turn; mul_mat reads the copy of a 2-D one. Elsewhere nothing is done and 0 is
        returned.

        The rows stay where they are for everything else (views, get_rows, numpy, saving); mul_mat
        reads the copy. set() and set_bytes() make it again; after writing the rows another way
        (numpy(), DLPack, the buffer behind from_buffer) call repack() again. A second call keeps the
        copy it finds; repack(False) drops it. n_threads: threads making the copy."""
        if not enable:
            self._panels = None
            self.c.panels = NULL
            return 0
        if self._panels is not None:
            return self._panels.size
        return self._pack(n_threads)

    def _pack(self, int n_threads=1):
        """repack()'s copy made (again), its bytes; none (0) where the layout does not apply."""
        self._panels = None
        self.c.panels = NULL
        self._need_data("repack")
        if self.c.ne[3] != 1 or self.c.nb[0] != pg_traits[self.c.type].size or self.c.ne[1] * self.c.ne[2] == 0:
            return 0
        cdef size_t size = pg_panels_size(self.c.type, self.c.ne[0], self.c.ne[1])
        if size == 0:
            return 0
        cdef Memory mem = Memory(size * self.c.ne[2])
        cdef _pack_arg a
        a.type, a.n, a.nr, a.nmat = self.c.type, self.c.ne[0], self.c.ne[1], self.c.ne[2]
        a.npanel = (a.nr + PG_PANELS_R - 1) // PG_PANELS_R
        a.x, a.bx, a.bmat = <const char *> self.c.data, self.c.nb[1], self.c.nb[2]
        a.size, a.panel, a.dst = size, pg_panels_size(a.type, a.n, 1), mem.ptr
        with nogil:
            pg_parallel_run(max(1, min(n_threads, a.nmat * a.npanel)), _pack_worker, &a)
        self._panels = mem
        self.c.panels = mem.ptr
        return mem.size

    @property
    def repacked(self):
        """The bytes of the copy repack() made (0: none)."""
        return 0 if self._panels is None else self._panels.size

    def __repr__(self):
        nm = f" {self._name!r}" if self._name else ""
        return f"<pyggml.Tensor{nm} {Type(self.c.type).name} ne={self.ne} op={Op(self.c.op).name}>"

    def __reduce__(self):
        raise TypeError("Tensor: a pyggml tensor cannot be pickled or copied (it is a node over C memory "
                        "and graph state); pickle t.to_numpy() and rebuild it with Context.from_numpy")

    def _need_data(self, what):
        if self.c.data == NULL:
            raise RuntimeError(f"{what}: tensor {self!r} has no memory yet; compute a graph that contains it")

    def numpy(self):
        """A numpy view of the tensor memory (no copy): shape ne[::-1], strides nb[::-1].
        BF16 is shown as its uint16 bits. The view keeps the memory alive."""
        typ = Type(self.c.type)
        if typ not in _NP_DTYPE:
            raise TypeError(f"numpy: a {typ.name} tensor has no numpy view; use to_numpy() to dequantize")
        self._need_data("numpy")
        nd = self._ndim
        offset = <size_t> (<char *> self.c.data - self._mem.ptr)
        return np.ndarray(self.ne[::-1][4 - nd:], dtype=_NP_DTYPE[typ], buffer=self._mem, offset=offset,
                          strides=self.nb[::-1][4 - nd:])

    def __dlpack_device__(self):
        """(kDLCPU, 0): pyggml tensors live in host memory."""
        return (PG_DL_CPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Export the tensor through DLPack without a copy (F32, F16, I32, I64), so that
        np.from_dlpack(t) and torch.from_dlpack(t) share its memory; the consumer keeps the memory
        alive. Shape is ne[::-1], strides nb[::-1] in elements. copy=True exports a packed copy."""
        typ = Type(self.c.type)
        if typ not in _DL_DTYPE:
            raise BufferError(f"__dlpack__: a {typ.name} tensor cannot be exported; DLPack export "
                              f"supports F32, F16, I32 and I64")
        if self.c.data == NULL:
            raise BufferError(f"__dlpack__: tensor {self!r} has no memory yet; "
                              f"compute a graph that contains it")
        if stream is not None:
            raise BufferError(f"__dlpack__: stream must be None for a CPU tensor, got {stream!r}")
        if dl_device is not None and tuple(dl_device) != (PG_DL_CPU, 0):
            raise BufferError(f"__dlpack__: only export to the CPU (dl_device=({PG_DL_CPU}, 0)) is "
                              f"possible, got {tuple(dl_device)}")
        versioned = max_version is not None and max_version[0] >= 1
        code, bits = _DL_DTYPE[typ]
        nd = self._ndim
        cdef size_t ts = bits // 8
        cdef char * data
        if copy:
            owner = np.array(self.numpy(), order="C", copy=True)
            data = <char *> <uintptr_t> owner.ctypes.data
            strides = tuple(st // ts for st in owner.strides)
        else:
            nbs = self.nb[::-1][4 - nd:]     # multiples of ts: new_view refuses misaligned views
            owner = self._mem
            data = <char *> self.c.data
            strides = tuple(nb // ts for nb in nbs)
        return _dl_capsule(owner, data, self.shape, strides, code, bits, versioned,
                           PG_DL_FLAG_IS_COPIED if copy else 0)

    def to_numpy(self):
        """A new C-contiguous array: float32 for float and quantized types, the integer dtype otherwise."""
        self._need_data("to_numpy")
        typ = Type(self.c.type)
        if typ in INT_TYPES or typ == Type.F64:
            return np.ascontiguousarray(self.numpy())
        out = np.empty(self.ne[::-1], dtype=np.float32)
        cdef float[:, :, :, ::1] o = out
        cdef int64_t i1, i2, i3
        if self.c.ne[0] == 0:
            return out.reshape(self.shape)
        with nogil:
            for i3 in range(self.c.ne[3]):
                for i2 in range(self.c.ne[2]):
                    for i1 in range(self.c.ne[1]):
                        pg_load_row_f32(&self.c, i1, i2, i3, &o[i3, i2, i1, 0])
        return out.reshape(self.shape)

    def _as_shape(self, array, what):
        arr = np.asarray(array)
        want = self.ne[::-1]
        have = (1,) * (4 - arr.ndim) + arr.shape if arr.ndim <= 4 else arr.shape
        if have != want:
            raise ValueError(f"{what}: array shape {arr.shape} does not match the tensor's {self.shape}")
        return arr.reshape(want)

    def set(self, array):
        """Copy `array` (shape == self.shape) into the tensor, converting to its type. Integer
        tensors take integer or bool arrays whose values fit the type (TypeError, ValueError);
        float types round as from_numpy does."""
        self._store(array, "set")

    def _store(self, array, what):
        """set(array), its errors naming `what` (the public call)."""
        self._need_data(what)
        typ = Type(self.c.type)
        arr = self._as_shape(array, what)
        if typ not in _CONVERTIBLE:
            if typ in INT_TYPES:
                _check_int_values(what, arr, typ)
            self.numpy()[...] = arr.reshape(self.shape)
            return
        if arr.dtype.kind not in "fiub":
            raise TypeError(f"{what}: cannot convert an array of dtype {arr.dtype} to {typ.name}")
        if self.c.nb[0] != pg_traits[self.c.type].size and pg_traits[self.c.type].blck != 1:
            raise ValueError(f"{what}: a quantized tensor must have packed rows")
        cdef float[:, :, :, ::1] src = np.ascontiguousarray(arr, dtype=np.float32)
        cdef int64_t i1, i2, i3
        if self.c.ne[0] == 0:
            return
        with nogil:
            for i3 in range(self.c.ne[3]):
                for i2 in range(self.c.ne[2]):
                    for i1 in range(self.c.ne[1]):
                        pg_store_row_f32(&self.c, i1, i2, i3, &src[i3, i2, i1, 0])
        if self._panels is not None:
            self._pack()

    def _row_bytes(self):
        if self.c.nb[0] != pg_traits[self.c.type].size and self.c.ne[0] != pg_traits[self.c.type].blck:
            raise ValueError("tobytes/set_bytes: the tensor's rows must be packed in dim 0")
        return self.c.ne[0] // pg_traits[self.c.type].blck * pg_traits[self.c.type].size

    def tobytes(self):
        """The raw packed storage (rows of a strided view are gathered)."""
        self._need_data("tobytes")
        cdef size_t rb = self._row_bytes()
        out = bytearray(rb * (self.c.ne[1] * self.c.ne[2] * self.c.ne[3]))
        if not out:
            return b""
        cdef char[::1] o = out
        cdef size_t k = 0
        cdef int64_t i1, i2, i3
        for i3 in range(self.c.ne[3]):
            for i2 in range(self.c.ne[2]):
                for i1 in range(self.c.ne[1]):
                    memcpy(&o[k], <char *> self.c.data + i1 * self.c.nb[1] + i2 * self.c.nb[2]
                           + i3 * self.c.nb[3], rb)
                    k += rb
        return bytes(out)

    def set_bytes(self, buffer):
        """Copy raw packed storage (len == packed size of the tensor) into the tensor."""
        self._need_data("set_bytes")
        cdef size_t rb = self._row_bytes()
        cdef const unsigned char[::1] b = memoryview(buffer).cast("B")
        cdef size_t want = rb * (self.c.ne[1] * self.c.ne[2] * self.c.ne[3])
        if <size_t> b.shape[0] != want:
            raise ValueError(f"set_bytes: expected {want} bytes for {Type(self.c.type).name} ne={self.ne}, "
                             f"got {b.shape[0]}")
        cdef size_t k = 0
        cdef int64_t i1, i2, i3
        for i3 in range(self.c.ne[3]):
            for i2 in range(self.c.ne[2]):
                for i1 in range(self.c.ne[1]):
                    if want:
                        memcpy(<char *> self.c.data + i1 * self.c.nb[1] + i2 * self.c.nb[2] + i3 * self.c.nb[3],
                               &b[k], rb)
                    k += rb
        if self._panels is not None:
            self._pack()
