/* The gpu accelerator's per-context state (C sources only: the .cu files
 * reach it through gpu_enter). One per context, made by setup on the
 * context's device, freed by teardown. */
#ifndef LT_GPU_STATE_H
#define LT_GPU_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include "gpu_internal.h"

/* One live allocation of alloc(), for free() to know its size
 * (memory_stats stays exact without asking the driver). */
typedef struct gpu_block {
    void *p;
    size_t bytes;
} gpu_block;

typedef struct gpu_state {
    int device;
    uint64_t serial;            /* unique per setup: thread.c's cache key */
    _Atomic uint64_t allocated; /* live bytes from alloc() */
    _Atomic uint64_t peak;      /* high-water mark of allocated */
    uint64_t total;             /* device memory, from cudaMemGetInfo at setup */
    pthread_mutex_t lock;       /* guards everything below */
    gpu_thread *threads;        /* every slot made for this context */
    lt_status pending;          /* parked error, LT_OK when none */
    char pending_msg[512];
    gpu_block *blocks;          /* open addressing on the pointer; NULL p: empty */
    size_t nblocks, cap;        /* live entries, table size (a power of two) */
} gpu_state;

/* memory.c: frees the block table (teardown). */
void gpu_blocks_release(gpu_state *s);

#endif
