/* The nccl backend: collectives with NVIDIA NCCL on device buffers.
 *
 * One group = one NCCL communicator, one CUDA stream of its own
 * (non-blocking, so it neither waits for nor holds up the legacy default
 * stream) and one thread, the group's "launcher".
 *
 * Ordering (accelerator.h, ABI 1.6). The gpu accelerator runs every kernel
 * and copy of a thread on that thread's per-thread default stream. A hook
 * that issues a collective records an event ("ready") on cudaStreamPerThread
 * in the calling thread, so the collective sees everything that thread had
 * queued before the call; the launcher makes the group's stream wait on that
 * event (no host or device-wide synchronize), issues the NCCL call on the
 * group's stream and records a second event ("done") after it. The
 * communication thus overlaps whatever the caller queues afterwards. wait()
 * polls "done" from the host: once it returns LT_OK the result is in memory
 * and any kernel launched after that, by any thread, sees it.
 *
 * Why a launcher thread. The communicator is created non-blocking
 * (config.blocking = 0) so that creation can be timed out and aborted. On
 * such a communicator every NCCL call may return ncclInProgress and nothing
 * else may be called on it until ncclCommGetAsyncError leaves that state;
 * the first operation of a kind also connects to the peers, which lasts
 * until they reach that operation too. Issuing on the caller's thread would
 * block it there, and two groups used in different orders by two ranks
 * would deadlock. The hooks therefore only record "ready" and queue; the
 * launcher issues in queue order (the issue order) and settles each call.
 * Every NCCL call on the communicator is made under comm_mu, which abort()
 * takes before ncclCommAbort, after which the communicator is gone (NULL).
 *
 * Watchdog. While operations are in flight the launcher also wakes every few
 * milliseconds: it retires the finished ones (in order: one stream), reads
 * ncclCommGetAsyncError, and enforces the group's timeout on the oldest
 * unfinished one. On an NCCL error or a timeout the group is killed: the
 * failing operation gets the cause, every other unfinished one
 * LT_ERR_ABORTED "the group failed earlier", and the communicator is aborted
 * so no kernel is left spinning on a peer that will never come.
 *
 * Completion versus abort. A kill marks every unfinished work failed under
 * the group mutex *before* it calls ncclCommAbort (which ends the kernels
 * early, completing their events). A work is marked done only under that
 * mutex after its event was seen complete while the group was alive, so an
 * event completed by the abort is never taken for success.
 *
 * Send and recv. NCCL carries no tag: a send and a recv meet by order per
 * peer (the n-th send from a to b with the n-th recv on b from a), as in
 * NCCL itself; the tag only appears in messages. A lone ncclSend or ncclRecv
 * holds its stream until the peer's matching call runs, so two ranks that
 * both post a recv before a send would deadlock if each op were launched on
 * its own. Consecutive sends and recvs are therefore collected and launched
 * as one ncclGroupStart/ncclGroupEnd batch, when a wait() touches one of them
 * or the next collective is issued (which also keeps the issue order).
 *
 * Memory: buffers must be device (or managed) memory of the group's device;
 * host pointers are refused at issue.
 *
 * Files. nccl_internal.h (this): the records and the calls between files.
 * nccl_util.c: clocks, lt-to-NCCL mapping, NCCL errors, the device scope,
 * the group's spare events. nccl_launcher.c: work states, killing the
 * group, the launcher thread and its watchdog. nccl_ops.c: argument checks,
 * issue, and the hooks that take or settle work. nccl_group.c: create,
 * destroy and the group's last reference. nccl_desc.c: the descriptor. */
#ifndef LT_NCCL_INTERNAL_H
#define LT_NCCL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "nccl_hooks.h"

/* What a work does; kind_names (nccl_ops.c) names them in this order. */
typedef enum { K_ALLREDUCE, K_BROADCAST, K_ALLGATHER, K_REDUCE_SCATTER, K_BARRIER, K_SEND, K_RECV } kind;

typedef enum {
    W_PENDING,  /* send/recv collected in the open batch, not yet handed over */
    W_QUEUED,   /* in the launcher's queue */
    W_LAUNCHED, /* on the group's stream; "done" recorded */
    W_FINAL,    /* st and err hold the result */
} wstate;

struct lt_backend_work {
    struct lt_backend_group *g;
    kind k;
    const void *send;
    void *recv;        /* in-out buffer of allreduce/broadcast/recv */
    size_t count;
    lt_dtype dtype;
    lt_redop op;
    int peer;          /* broadcast root, send/recv peer */
    uint32_t tag;
    unsigned batch;    /* send/recv: the batch it is launched in */
    char label[320];   /* "allreduce #12 (55050 f32) on group 'pg/0/default'" */
    cudaEvent_t ready, done;
    int64_t launched_ns;
    /* under g->mu */
    wstate state;
    lt_status st;
    char err[1024];
    int refs;          /* the caller's, and the launcher's while it is handed over */
    bool live;         /* in the live list (not final) */
    struct lt_backend_work *prev, *next; /* live list, issue order */
    struct lt_backend_work *qnext;       /* open batch or launcher queue */
};

struct lt_backend_group {
    int rank, world, device;
    char name[160];
    int64_t timeout_ms;
    cudaStream_t stream;
    void *bar_buf;     /* 4 zeroed bytes: the barrier's allreduce */

    pthread_mutex_t comm_mu; /* every NCCL call on comm */
    ncclComm_t comm;         /* NULL once aborted or destroyed */

    pthread_mutex_t mu;
    pthread_cond_t cv;       /* launcher: queue changed, stopping */
    pthread_cond_t done_cv;  /* waiters: a work changed state */
    struct lt_backend_work *q_head, *q_tail;       /* launcher queue */
    struct lt_backend_work *pend_head, *pend_tail; /* open send/recv batch */
    unsigned batch_id;
    struct lt_backend_work *live_head, *live_tail;
    bool stopping;
    _Atomic int dead;        /* killed or aborted: nothing runs any more */
    bool user_abort;         /* ... by abort() (else by a failure) */
    char dead_msg[1024];
    unsigned long long coll_seq, p2p_seq;
    pthread_t thr;
    bool thr_started;
    cudaEvent_t *pool;       /* spare events */
    size_t npool, cap;
    bool released;           /* destroy freed the CUDA resources */
    _Atomic int refs;        /* the owner's and one per work */
};

/* Makes the group's device current on this thread for the scope of a hook,
 * and puts the caller's back afterwards. */
typedef struct dev_scope {
    int prev;
    bool changed;
} dev_scope;

/* ---- nccl_util.c: small helpers and events ---- */

/* CLOCK_MONOTONIC in nanoseconds: every deadline and launch time here. Any
 * thread. */
int64_t ltnccl_now_ns(void);
/* Sleeps `ns` (under a second): the pollers' back-off (ltnccl_settle,
 * ltnccl_wait). Any thread; never with g->mu held. */
void ltnccl_sleep_ns(long ns);
/* The ltnccl_now_ns() time `ms` from now, INT64_MAX for "never" (ms < 0 or
 * absurdly large). Any thread: wait, create and destroy. */
int64_t ltnccl_deadline_after(int64_t ms);

/* The NCCL type of lt dtype `t` / the NCCL op of lt reduction `op`; false
 * when NCCL has none (the backend refuses it). `out` may be NULL to ask
 * only. Pure: the argument checks and supports (any hook's thread) and the
 * launcher's NCCL call. */
bool ltnccl_type(int t, ncclDataType_t *out);
bool ltnccl_op(int op, ncclRedOp_t *out);
/* The lt_status an NCCL failure `r` becomes (LT_OK for ncclSuccess). Pure. */
lt_status ltnccl_status_of(ncclResult_t r);
/* Writes "NCCL error: <meaning> (<NCCL's last message>)" for `r` into out.
 * `comm` may be NULL (before a communicator exists); the group's comm only
 * under comm_mu. The launcher, and create on its caller's thread. */
void ltnccl_describe(char *out, size_t len, ncclResult_t r, ncclComm_t comm);

/* Enters a dev_scope: `device` becomes current on the calling thread, the
 * previous one is remembered; the CUDA error if either step failed.
 * ltnccl_dev_leave restores it (a no-op when enter changed nothing, so
 * also safe after a failed enter). Hooks on their caller's thread: issue,
 * wait and destroy, each leaving before it returns. */
cudaError_t ltnccl_dev_enter(dev_scope *s, int device);
void ltnccl_dev_leave(dev_scope *s);

/* The group's spare events, caller holds g->mu. ltnccl_event_take: a spare
 * one, else a new one (timing disabled), NULL if CUDA cannot make one;
 * issue calls it on the hook's thread, the group's device current.
 * ltnccl_event_give: keeps `e` (NULL is ignored) for reuse, up to 64, or
 * destroys it, always once destroy released the group's CUDA resources;
 * issue on failure and ltnccl_work_unref_locked (any thread) call it. */
cudaEvent_t ltnccl_event_take(struct lt_backend_group *g);
void ltnccl_event_give(struct lt_backend_group *g, cudaEvent_t e);

/* ---- nccl_launcher.c: work states, kill, the launcher ---- */

/* Work states: every call here holds g->mu. */

/* Makes `w` final with `st` and a printf-style message (fmt NULL: none),
 * takes it off the live list and wakes the waiters (done_cv); a no-op on a
 * work already final. The watchdog (launcher thread), wait seeing "done" on
 * the caller's thread, ltnccl_kill_group and destroy. */
void ltnccl_finalize(struct lt_backend_group *g, struct lt_backend_work *w, lt_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Finalizes `w` with LT_ERR_ABORTED and why the group is dead (aborted, or
 * the first failure's message). issue on a dead or stopping group, the
 * launcher on a dequeued work, ltnccl_kill_group and destroy. */
void ltnccl_fail_dead(struct lt_backend_group *g, struct lt_backend_work *w);
/* Drops one reference to `w`: the caller's (free_work, any thread) or the
 * launcher's once it is done with a dequeued work. On the last one `w`
 * leaves the live list, its events go back, and it returns true: the
 * caller then unlocks and calls ltnccl_work_free. */
bool ltnccl_work_unref_locked(struct lt_backend_group *g, struct lt_backend_work *w);
/* Frees `w` and its reference to the group (possibly the last). Without
 * g->mu, only after ltnccl_work_unref_locked returned true. */
void ltnccl_work_free(struct lt_backend_work *w);
/* Hands the open send/recv batch to the launcher and wakes it; nothing
 * when none is open. issue before a collective (keeping the issue order),
 * wait on a pending work, destroy before stopping the launcher. */
void ltnccl_flush_batch(struct lt_backend_group *g);

/* Kills the group: `culprit` (may be NULL) fails with st and msg, every
 * other unfinished work with LT_ERR_ABORTED, all under g->mu; then the
 * communicator is aborted under comm_mu and set to NULL. `user`: killed
 * by abort() or destroy (later works then say the group was aborted), else
 * by a failure (they quote msg). The first kill wins, later ones return at
 * once. Any thread holding neither mutex: the launcher (launch, watchdog),
 * wait (a CUDA error), abort() and destroy. */
void ltnccl_kill_group(struct lt_backend_group *g, struct lt_backend_work *culprit, lt_status st, bool user,
                       const char *msg);
/* Waits until the communicator's state leaves ncclInProgress and returns
 * it. Called and returns with comm_mu held, released between polls so an
 * abort can come in: then *gone is set (and g->comm is NULL). *late is set
 * when `deadline` (ltnccl_now_ns) passed first. The launcher after each
 * NCCL call, create after ncclCommInitRankConfig and destroy after
 * ncclCommFinalize, each on its own thread. */
ncclResult_t ltnccl_settle(struct lt_backend_group *g, int64_t deadline, bool *gone, bool *late);
/* Starts the group's launcher thread (all signals blocked in it, named
 * "lt-nccl") and sets g->thr_started. create calls it on its caller's
 * thread once the communicator is up and g->mu, cv are initialized; on
 * failure it sets ctx's error and *st = LT_ERR_NOMEM. destroy stops
 * (g->stopping) and joins it. */
void ltnccl_start_launcher(struct lt_backend_group *g, lt_ctx *ctx, lt_status *st);

/* ---- nccl_group.c ---- */

/* Drops a reference to the group: the owner's (destroy, or a failed
 * create) or a work's (ltnccl_work_free). The last frees the event pool's
 * array, the mutexes, the conditions and the group; its CUDA resources
 * went at destroy. Any thread, without g->mu. */
void ltnccl_group_unref(struct lt_backend_group *g);

#endif
