# The one home of the C declarations shared by the extension modules (csrc/core/pyggml.h, types.h).
from libc.stdint cimport int32_t, int64_t


cdef extern from "core/pyggml.h" nogil:
    enum:
        PG_MAX_SRC
        PG_FLAG_INPUT
        PG_FLAG_OUTPUT

    ctypedef struct pg_tensor:
        int32_t type
        int32_t op
        int64_t ne[4]
        size_t nb[4]
        int32_t op_params[16]
        int32_t flags
        pg_tensor * src[10]
        pg_tensor * view_src
        size_t view_offs
        void * data
        const void * panels

    ctypedef struct pg_shared:
        int chunk
        int err
        const pg_tensor * err_node
        int64_t err_pos
        int64_t err_val

    ctypedef struct pg_params:
        int ith
        int nth
        size_t wsize
        void * wdata
        pg_shared * shared
        int32_t variant

    ctypedef struct pg_plan:
        int nth
        bint use_ref
        size_t work
        int32_t variant
        char err[192]

    const char * pg_build_compiler()


cdef extern from "types.h" nogil:
    ctypedef void (*pg_to_float_fn)(const void * x, float * y, int64_t n)
    ctypedef void (*pg_from_float_fn)(const float * x, void * y, int64_t n)

    enum:
        PG_TYPE_COUNT
        PG_KIND_FLOAT
        PG_KIND_QUANT
        PG_KIND_INT

    ctypedef struct pg_type_traits:
        const char * name
        int64_t blck
        size_t size
        int kind
        pg_to_float_fn to_float
        pg_from_float_fn from_float
        void * vec_dot
        int vec_dot_type
        void * vec_dot_rows
        void * dot_tile_f32
        void * attn_dot
        void * attn_acc

    const pg_type_traits pg_traits[]
    size_t pg_row_size(int type, int64_t n)
    # mul_mat's repacked weights (Tensor.repack): rows per panel, bytes, the copy
    enum:
        PG_PANELS_R
    size_t pg_panels_size(int t, int64_t n, int64_t nr)
    void pg_panels_pack(int t, int64_t n, int64_t nr, const void * x, size_t bx, void * dst)


cdef extern from "arch/simd-mappings.h":
    const char * pg_simd_name()
    int pg_simd_vlen()


cdef extern from "arch/x86/amx.h":
    int pg_amx_on()
