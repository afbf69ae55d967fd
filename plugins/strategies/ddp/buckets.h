/* Gradient buckets: the flat gradient buffer cut, from its end backwards
 * (reverse registration order, the order backward finishes them), into
 * buckets of bucket_cap_mb, the first one small so communication starts
 * early. configure_ddp publishes the cut in the run (lt_run_set_buckets);
 * the gradient hooks follow whatever is published. A bucket is launched the
 * moment its last element is reported ready. */
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

/* ddp's cut of `total` elements: from the end of the flat buffer backwards,
 * the first bucket first_mb, the others cap_mb. *out is malloc'ed. */
lt_status buckets_cut(size_t total, size_t elem_size, double first_mb, double cap_mb,
                      lt_bucket_view **out, size_t *n);
/* A plan over published buckets, launched in the order given. */
lt_status buckets_adopt(bucket_plan *p, const lt_bucket_view *v, size_t n);
void buckets_free(bucket_plan *p);
/* Resets readiness for a new backward. */
void buckets_reset(bucket_plan *p);
/* Marks [offset, offset + count) ready; returns how many buckets at the front
 * of the launch order are now complete and not yet launched. */
int buckets_mark_ready(bucket_plan *p, size_t offset, size_t count);

#endif
