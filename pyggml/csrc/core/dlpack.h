/* The DLPack ABI (https://dmlc.github.io/dlpack), v1.0: the structs a producer hands to a consumer
 * inside a PyCapsule named "dltensor" (legacy) or "dltensor_versioned". Only what pyggml exports
 * is declared: CPU memory, int and float element types. */
#pragma once
#include <stdint.h>

#define PG_DLPACK_MAJOR 1
#define PG_DLPACK_MINOR 0
#define PG_DL_CPU 1                              /* DLDeviceType kDLCPU */
#define PG_DL_INT 0                              /* DLDataTypeCode kDLInt */
#define PG_DL_FLOAT 2                            /* DLDataTypeCode kDLFloat */
#define PG_DL_FLAG_IS_COPIED ((uint64_t) 1 << 1)

typedef struct { int32_t device_type; int32_t device_id; } pg_DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } pg_DLDataType;

typedef struct {
    void * data;
    pg_DLDevice device;
    int32_t ndim;
    pg_DLDataType dtype;
    int64_t * shape;
    int64_t * strides;       /* in elements */
    uint64_t byte_offset;
} pg_DLTensor;

typedef struct pg_DLManagedTensor {
    pg_DLTensor dl_tensor;
    void * manager_ctx;
    void (*deleter)(struct pg_DLManagedTensor * self);
} pg_DLManagedTensor;

typedef struct { uint32_t major; uint32_t minor; } pg_DLPackVersion;

typedef struct pg_DLManagedTensorVersioned {
    pg_DLPackVersion version;
    void * manager_ctx;
    void (*deleter)(struct pg_DLManagedTensorVersioned * self);
    uint64_t flags;
    pg_DLTensor dl_tensor;
} pg_DLManagedTensorVersioned;
