/* Gradient buckets: the flat gradient buffer cut, from its end backwards
 * (reverse registration order, the order backward finishes them), into
 * buckets of bucket_cap_mb, the first one small so communication starts
 * early. A bucket is launched the moment its last element is reported ready. */
#ifndef LT_DDP_BUCKETS_H
#define LT_DDP_BUCKETS_H

#include "lt/lt.h"

typedef enum comm_hook { HOOK_ALLREDUCE = 0, HOOK_FP16 = 1, HOOK_BF16 = 2 } comm_hook;

typedef struct bucket {
    size_t start, count;   /* elements of the flat buffer */
    size_t pending;        /* elements not yet ready in this backward */
    lt_work *work;         /* in flight, or NULL */
    void *wire;            /* compressed copy (fp16/bf16 hooks), device memory */
} bucket;

typedef struct bucket_plan {
    bucket *b;
    int n;
    int next_launch;       /* buckets launch in order, so every rank issues the same sequence */
} bucket_plan;

lt_status buckets_build(bucket_plan *p, size_t total, size_t elem_size, double first_mb, double cap_mb);
void buckets_free(bucket_plan *p);
/* Resets readiness for a new backward. */
void buckets_reset(bucket_plan *p);
/* Marks [offset, offset + count) ready; returns how many buckets at the front
 * of the launch order are now complete and not yet launched. */
int buckets_mark_ready(bucket_plan *p, size_t offset, size_t count);

#endif
