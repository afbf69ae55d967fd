/* Staging a process group's device buffers through pinned host memory, for a
 * backend that takes host memory only (gloo, shm) in a job whose buffers
 * live on a device (process_group.c decides, per group, at creation).
 *
 * A pool of pinned host buffers from the accelerator's alloc_host: each
 * collective in flight holds one, so works waited for in any order never
 * share bytes; a buffer goes back to the pool when its work was waited for.
 * Buffers are reused and grown, never freed before the group is, so a
 * steady training loop (the same buckets every step) allocates only during
 * its first steps. The copies run on the calling thread's stream
 * (accelerator.h) and are waited for before they return: the host bytes are
 * complete when the backend gets them, and a buffer that goes back to the
 * pool is no longer read by a copy still under way on some stream. */
#ifndef LT_DIST_PG_STAGING_H
#define LT_DIST_PG_STAGING_H

#include "lt/accelerator.h"

typedef struct lt_pg_stage lt_pg_stage; /* one group's pool */
typedef struct lt_stage_buf lt_stage_buf; /* one pinned buffer of it */

/* A pool copying with `accel` (its desc an accelerator's table; borrowed:
 * it must stay set up until lt_stage_free). Allocates no host memory yet.
 * Called by lt_pg_create on the group's owning thread. */
lt_status lt_stage_new(lt_ctx *accel, lt_pg_stage **out);
/* Frees every buffer (free_host) and the pool. Called by lt_pg_destroy on
 * the owning thread, after the backend group is gone: no work holds a
 * buffer any more. NULL: nothing. */
void lt_stage_free(lt_pg_stage *s);

/* One staged collective, laid out by the caller (process_group.c, per
 * collective): `in` (in_bytes of device memory) goes to host + in_at
 * before the backend starts, host + out_at back to `out` (out_bytes) once
 * its work completed; `total` bytes of host buffer in all. A work keeps
 * its record from begin to end. */
typedef struct lt_staged {
    const void *in;
    size_t in_at, in_bytes;
    void *out;
    size_t out_at, out_bytes;
    size_t total;
    bool overflow;            /* a size did not fit a size_t (lt_staged_span) */
    lt_stage_buf *buf;        /* begin..end */
    unsigned char *host;      /* the buffer's memory: what the backend gets */
} lt_staged;

/* count elements of dtype t, `blocks` times, in bytes (0 for an unknown
 * dtype: the backend refuses it); sets x->overflow when it does not fit. */
size_t lt_staged_span(lt_staged *x, size_t count, lt_dtype t, size_t blocks);
/* On the issuing thread, before the backend's call: takes a buffer of the
 * pool and copies the input into it (complete on return). On failure
 * nothing is held, this thread's error says why, and *local_fault says
 * whether this rank's device or memory failed (a copy, the pinned
 * allocation) rather than the arguments (a NULL buffer, a size). */
lt_status lt_staged_begin(lt_pg_stage *s, lt_staged *x, bool *local_fault);
/* On the thread that waited, once the backend is done with the buffer:
 * copies the result back when `completed`, then gives the buffer back.
 * A failed copy's reason is in this thread's error. */
lt_status lt_staged_end(lt_pg_stage *s, lt_staged *x, bool completed);

#endif
