from pyggml._typedefs cimport pg_tensor


cdef class Memory:
    cdef char * ptr
    cdef size_t size
    cdef Py_buffer _view      # the buffer held when the memory is another object's (Context.from_buffer)
    cdef bint _external
    cdef Py_ssize_t _shape[1]
    cdef Py_ssize_t _strides[1]


cdef class Context:
    cdef public str name


cdef class Tensor:
    cdef pg_tensor c
    cdef Memory _mem          # owner of the memory behind c.data (None until planned)
    cdef tuple _src           # the Python tensors behind c.src (keeps them alive)
    cdef Tensor _view_src
    cdef readonly Context ctx
    cdef str _name
    cdef int _ndim            # numpy rank: trailing ne == 1 dims beyond it are dropped
    cdef object _graph        # of an op result: the CGraph (weakref) holding it, or _graph._SHARED
    cdef Memory _panels       # the repacked copy behind c.panels (Tensor.repack), or None

    cdef void _attach(self, Memory mem, size_t offset)


cdef Tensor new_tensor_impl(Context ctx, int type, tuple ne, int ndim)
cdef Tensor new_node(Context ctx, int type, tuple ne, int op, tuple srcs, int ndim=*)
cdef Tensor new_view(Tensor a, tuple ne, tuple nb, offset, int op, int ndim, str name=*)
cdef object check_int(str op, str arg, v)
cdef object byte_extent(str op, int type, tuple ne, tuple nb)
cdef size_t tensor_nbytes(const pg_tensor * t) noexcept nogil
cdef size_t block_align(size_t size) noexcept nogil
cdef bint tensor_is_contiguous(const pg_tensor * t) noexcept nogil
