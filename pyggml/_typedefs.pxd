# The one home of the C declarations shared by the extension modules (csrc/pyggml.h, convert.h).
from libc.stdint cimport int32_t, int64_t, uint16_t


cdef extern from "pyggml.h" nogil:
    cdef enum pg_op:
        PG_OP_NONE
        PG_OP_DUP
        PG_OP_ADD
        PG_OP_MUL
        PG_OP_SCALE
        PG_OP_CPY
        PG_OP_CONT
        PG_OP_RESHAPE
        PG_OP_VIEW
        PG_OP_PERMUTE
        PG_OP_TRANSPOSE
        PG_OP_GET_ROWS
        PG_OP_SET_ROWS
        PG_OP_SOFT_MAX
        PG_OP_ROPE
        PG_OP_MUL_MAT
        PG_OP_NORM
        PG_OP_RMS_NORM
        PG_OP_GLU
        PG_OP_UNARY
        PG_OP_FLASH_ATTN_EXT

    enum:
        PG_MAX_DIMS
        PG_MAX_SRC
        PG_MAX_OP_PARAMS
        PG_CACHE_LINE

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
        int use_ref

    const char * pg_build_compiler()


cdef extern from "convert.h" nogil:
    ctypedef void (*pg_to_float_fn)(const void * x, float * y, int64_t n)
    ctypedef void (*pg_from_float_fn)(const float * x, void * y, int64_t n)

    ctypedef struct pg_type_traits:
        const char * name
        int64_t blck
        size_t size
        int vec_dot_type
        pg_to_float_fn to_float
        pg_from_float_fn from_float

    const pg_type_traits pg_traits[]
    size_t pg_row_size(int type, int64_t n)
    float pg_fp16_to_fp32(uint16_t h)
    uint16_t pg_fp32_to_fp16(float f)


cdef extern from "simd-mappings.h":
    const char * PG_SIMD_NAME
    int PG_F32_EPR
    const char * pg_simd_name()
    int pg_simd_vlen()
