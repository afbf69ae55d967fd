/* Process-group backend: collectives over a fixed set of ranks (gloo, nccl).
 *
 * Threading: create/destroy run on the thread that owns the group. Collective
 * hooks are called from one thread per group at a time (the core serializes
 * them); they only enqueue work and return a work handle. `wait` may be called
 * from any thread; `abort` from any thread at any time (a signal-driven shutdown
 * or a failed peer) and must make every pending and future wait return
 * LT_ERR_ABORTED promptly.
 *
 * Ordering: works of one group complete in the order they were issued, on
 * every rank. The core adds a sequence number and a fingerprint (op, count,
 * dtype) to each call and checks them through the store when a wait runs long,
 * so a backend need not detect mismatched collectives itself, but must return an
 * error rather than hang forever when the peer sends something unexpected.
 * Buffers passed to a collective belong to the backend until its wait returns. */
#ifndef LT_BACKEND_H
#define LT_BACKEND_H

#include "lt/core.h"
#include "lt/store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lt_redop { LT_SUM = 1, LT_AVG = 2, LT_MIN = 3, LT_MAX = 4 } lt_redop;

/* Where the buffers of a group's collectives live. */
typedef enum lt_mem_kind { LT_MEM_HOST = 0, LT_MEM_DEVICE = 1 } lt_mem_kind;

typedef struct lt_pg_options {
    uint32_t struct_size;    /* sizeof(lt_pg_options) as built */
    const char *prefix;      /* store key prefix unique to this group ("pg0/") */
    int64_t timeout_ms;      /* per collective; default 30 min */
    uint32_t mem_kind;       /* lt_mem_kind of the buffers */
    int32_t device;          /* device index for LT_MEM_DEVICE */
    const char *iface;       /* network interface or host address to bind; NULL = auto */
    int32_t num_threads;     /* worker threads (contexts) for async work; 0 = backend default */
    int64_t connect_timeout_ms; /* create: how long to wait for every rank to join; 0 = timeout_ms */
    /* ABI 1.1: the job's main (rank 0) address as the environment plugin
     * resolved it (MASTER_ADDR, or SLURM's first node ...); a backend with no
     * iface set binds the local address that routes to it. NULL: unknown. */
    const char *main_address;
} lt_pg_options;

typedef struct lt_backend_group lt_backend_group; /* the plugin's group */
typedef struct lt_backend_work lt_backend_work;   /* the plugin's pending work */

typedef struct lt_backend_desc {
    lt_plugin_header hdr;

    /* Required. Connects `rank` of `world` ranks through `store` (keys under
     * opt->prefix). Called by the core on the thread that will issue the
     * group's collectives, on every rank at about the same time; blocks until
     * every rank has joined or opt->timeout_ms passes. The store client stays
     * valid until destroy. */
    lt_status (*create)(lt_ctx *ctx, lt_store *store, int rank, int world,
                        const lt_pg_options *opt, lt_backend_group **out);
    /* Required. Frees the group after every work was waited for or aborted. */
    lt_status (*destroy)(lt_ctx *ctx, lt_backend_group *g);

    /* Collectives. Required unless noted. Each starts the operation and returns
     * at once with a work handle to wait on; count is in elements. */
    lt_status (*allreduce)(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count,
                           lt_dtype dtype, lt_redop op, lt_backend_work **work);
    lt_status (*broadcast)(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count,
                           lt_dtype dtype, int root, lt_backend_work **work);
    /* recv holds world * count elements, rank r's at r * count. */
    lt_status (*allgather)(lt_ctx *ctx, lt_backend_group *g, const void *send, void *recv,
                           size_t count, lt_dtype dtype, lt_backend_work **work);
    /* send holds world * count elements; rank r gets the reduction of block r. */
    lt_status (*reduce_scatter)(lt_ctx *ctx, lt_backend_group *g, const void *send, void *recv,
                                size_t count, lt_dtype dtype, lt_redop op,
                                lt_backend_work **work);
    lt_status (*send)(lt_ctx *ctx, lt_backend_group *g, const void *buf, size_t count,
                      lt_dtype dtype, int peer, uint32_t tag, lt_backend_work **work);
    lt_status (*recv)(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count,
                      lt_dtype dtype, int peer, uint32_t tag, lt_backend_work **work);
    lt_status (*barrier)(lt_ctx *ctx, lt_backend_group *g, lt_backend_work **work);

    /* Required. Waits up to timeout_ms for the work (0 = poll). Returns LT_OK
     * when done, LT_ERR_TIMEOUT when still running (the work stays valid and
     * may be waited on again), or the work's error. Any thread. */
    lt_status (*wait)(lt_ctx *ctx, lt_backend_work *work, int64_t timeout_ms);
    /* Required. Releases a finished (or aborted) work handle. */
    void (*free_work)(lt_ctx *ctx, lt_backend_work *work);
    /* Required. Fails every pending and future operation with LT_ERR_ABORTED
     * and closes connections so peers notice. Any thread, also while another
     * thread waits. */
    lt_status (*abort)(lt_ctx *ctx, lt_backend_group *g);

    /* Optional: which dtypes/ops the backend supports; default: everything. */
    lt_status (*supports)(lt_ctx *ctx, lt_dtype dtype, lt_redop op, bool *out);

    /* ABI 1.6. Optional: whether create() accepts groups whose buffers are
     * of this lt_mem_kind (nccl: LT_MEM_DEVICE only; gloo, shm: LT_MEM_HOST
     * only). Called by the core before create, on the creating thread.
     * Default (absent, or a plugin built before 1.6): LT_MEM_HOST only. For
     * a group over device memory on a backend that says no, the core gives
     * the backend LT_MEM_HOST and stages every collective through pinned
     * host buffers of the accelerator (copy to host, collective, copy back),
     * so any host backend serves a GPU job. A backend that takes device
     * memory orders its work after the kernels the calling thread issued on
     * its per-thread default stream (accelerator.h) and makes a wait()
     * that returned LT_OK mean the result is visible to that thread's
     * later kernels. */
    lt_status (*supports_memory)(lt_ctx *ctx, lt_mem_kind kind, bool *out);

    /* ABI 1.7. Optional, both or neither: group memory, which the group's
     * allreduce handles faster than the caller's own buffers (shm: a slice
     * of a segment every rank maps, so an allreduce of it reduces in place,
     * reading the peers' slices, instead of copying in and out of the
     * group's slots; a device backend could register it with its transport).
     * The core asks for it only through lt_run_place_grads (lt/run.h).
     * Default (absent): the caller keeps its own memory.
     *
     * mem_alloc is collective: every rank of g calls it with the same bytes,
     * in the same order, on the thread that issues g's collectives, between
     * collectives. *out: this rank's `bytes`, 64-byte aligned, zeroed, host
     * memory. LT_ERR_UNSUPPORTED, on every rank alike, when there is no
     * room for it: the caller goes on with memory of its own. Collectives accept it like any other buffer; a buffer inside it
     * must be at the same offset of the same allocation on every rank of a
     * collective (else the collective fails with LT_ERR_MISMATCH).
     *
     * The memory outlives the group: mem_free releases it, called once by
     * its owner, on any thread, after the last collective on it completed,
     * before or after destroy; ctx is any context of this backend. */
    lt_status (*mem_alloc)(lt_ctx *ctx, lt_backend_group *g, size_t bytes, void **out);
    void (*mem_free)(lt_ctx *ctx, void *p);

    /* ABI 1.9. Optional: judges the parameters before anything starts
     * (lt/abi.h, under lt_param_spec). */
    lt_status (*check_params)(lt_ctx *ctx);
} lt_backend_desc;

#ifdef __cplusplus
}
#endif
#endif
