/* Group memory of the shm backend (the mem_alloc and mem_free hooks of
 * lt/backend.h): each allocation is a POSIX shared memory object of its own,
 * one slice per rank, that every rank of the group maps. An allreduce whose
 * buffer lies in this rank's slice reduces in place (shm.c): each rank
 * combines its share of the elements straight from every slice and writes
 * the result back into every slice, with no copies through the group's
 * slots. Internal to the shm backend. */
#ifndef LT_SHM_MEM_H
#define LT_SHM_MEM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "lt/backend.h"

typedef struct shm_mem {
    struct shm_mem *next;
    const void *owner;       /* the group it was made in; NULL once that is destroyed */
    uint64_t id;             /* the owner's allocation count: equal on every rank */
    unsigned char *map;      /* the whole object */
    size_t map_len;
    unsigned char *slices;   /* rank r's slice at slices + r * stride */
    size_t stride, bytes;
    int rank;
} shm_mem;

/* The allocation of `owner` whose slice for this rank holds [p, p + len),
 * with p's offset into the slice; NULL when there is none. Any thread. The
 * record stays valid until shm_mem_free of its memory. */
const shm_mem *shm_mem_find(const void *owner, const void *p, size_t len, size_t *off);

/* Rank r's copy of the bytes at offset `off` of the allocation. */
static inline unsigned char *shm_mem_at(const shm_mem *m, int r, size_t off) {
    return m->slices + (size_t)r * m->stride + off;
}

/* The collective allocation: rank 0 makes the object and publishes its name
 * under "<prefix>shm/mem/<id>"; every rank maps it and waits until all have
 * (or deadline_ms passes, or *aborted turns non-zero). *out: this rank's
 * slice, zeroed. When rank 0 cannot make the object (no room in /dev/shm)
 * it publishes an empty name and every rank returns LT_ERR_UNSUPPORTED.
 * One-line error in ctx. */
lt_status shm_mem_alloc(lt_ctx *ctx, const void *owner, lt_store *store, const char *prefix, int rank,
                        int world, uint64_t id, size_t bytes, int64_t deadline_ms,
                        _Atomic uint32_t *aborted, void **out);
/* Unmaps the allocation whose slice starts at p; unknown pointers are ignored. */
void shm_mem_free(void *p);
/* The group is gone: its allocations stay mapped, but no longer match its collectives. */
void shm_mem_forget_owner(const void *owner);

#endif
