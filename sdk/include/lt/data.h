/* Datasets: what a module supplies when it brings its own data. The built-in
 * IDX reader (Fashion-MNIST, MNIST) implements the same interface.
 *
 * A sample is a tuple of fields (image, label, ...), each a fixed-shape array
 * of one dtype. The loader calls `get` on its prefetch thread, writing into
 * host buffers it owns; `get` must be safe to call concurrently with itself on
 * different indices (a dataset read into memory at creation trivially is). */
#ifndef LT_DATA_H
#define LT_DATA_H

#include "lt/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LT_MAX_FIELDS 4

typedef struct lt_field_info {
    uint32_t dtype;            /* lt_dtype of the field as the model receives it */
    int32_t ndim;              /* per sample, not counting the batch dimension */
    int64_t shape[4];
} lt_field_info;

typedef struct lt_dataset_iface {
    uint32_t struct_size;
    int64_t (*length)(void *self);
    int (*num_fields)(void *self);
    lt_status (*field_info)(void *self, int field, lt_field_info *out);
    /* Writes sample `index` into dst[field] (host memory, sized by field_info). */
    lt_status (*get)(void *self, int64_t index, void *const *dst);
    void (*destroy)(void *self);
} lt_dataset_iface;

typedef struct lt_dataset {
    const lt_dataset_iface *iface;
    void *self;
} lt_dataset;

typedef enum lt_stage { LT_STAGE_FIT = 1, LT_STAGE_VALIDATE = 2, LT_STAGE_TEST = 3 } lt_stage;

#ifdef __cplusplus
}
#endif
#endif
