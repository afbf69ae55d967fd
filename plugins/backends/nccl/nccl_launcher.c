/* The nccl backend's launcher: work states, killing the group, and the
 * group's launcher thread, which issues queued work on the group's stream
 * in issue order and watches what is in flight (design in nccl_internal.h,
 * contracts there too). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nccl_internal.h"

#define WATCH_NS 5000000LL       /* watchdog period while work is in flight */

/* ---- work states (all under g->mu) ---- */

static void live_remove(struct lt_backend_group *g, struct lt_backend_work *w) {
    if (!w->live) return;
    if (w->prev) w->prev->next = w->next;
    else g->live_head = w->next;
    if (w->next) w->next->prev = w->prev;
    else g->live_tail = w->prev;
    w->prev = w->next = NULL;
    w->live = false;
}

void ltnccl_finalize(struct lt_backend_group *g, struct lt_backend_work *w, lt_status st, const char *fmt, ...) {
    if (w->state == W_FINAL) return;
    w->state = W_FINAL;
    w->st = st;
    w->err[0] = 0;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->err, sizeof w->err, fmt, ap);
        va_end(ap);
    }
    live_remove(g, w);
    pthread_cond_broadcast(&g->done_cv);
}

/* Why a work cannot run or finish on a dead group. */
void ltnccl_fail_dead(struct lt_backend_group *g, struct lt_backend_work *w) {
    if (g->user_abort)
        ltnccl_finalize(g, w, LT_ERR_ABORTED, "%s: group '%s' was aborted", w->label, g->name);
    else
        ltnccl_finalize(g, w, LT_ERR_ABORTED, "%s: the group failed earlier: %s", w->label, g->dead_msg);
}

/* Drops a reference; returns true when the caller must call ltnccl_work_free
 * (after unlocking). */
bool ltnccl_work_unref_locked(struct lt_backend_group *g, struct lt_backend_work *w) {
    if (--w->refs > 0) return false;
    live_remove(g, w); /* freed unfinished: nobody will look at it again */
    ltnccl_event_give(g, w->ready);
    ltnccl_event_give(g, w->done);
    w->ready = w->done = NULL;
    return true;
}

void ltnccl_work_free(struct lt_backend_work *w) {
    struct lt_backend_group *g = w->g;
    free(w);
    ltnccl_group_unref(g);
}

/* Hands the open send/recv batch to the launcher. Caller holds g->mu. */
void ltnccl_flush_batch(struct lt_backend_group *g) {
    if (!g->pend_head) return;
    for (struct lt_backend_work *w = g->pend_head; w; w = w->qnext)
        if (w->state == W_PENDING) w->state = W_QUEUED;
    if (g->q_tail) g->q_tail->qnext = g->pend_head;
    else g->q_head = g->pend_head;
    g->q_tail = g->pend_tail;
    g->pend_head = g->pend_tail = NULL;
    g->batch_id++;
    pthread_cond_broadcast(&g->cv);
}

/* ---- killing the group ---- */

/* Marks the group dead: `culprit` (may be NULL) fails with st and msg,
 * every other unfinished work with LT_ERR_ABORTED; then aborts the
 * communicator. Any thread; the first kill wins. */
void ltnccl_kill_group(struct lt_backend_group *g, struct lt_backend_work *culprit, lt_status st, bool user,
                       const char *msg) {
    pthread_mutex_lock(&g->mu);
    if (atomic_load(&g->dead)) {
        pthread_mutex_unlock(&g->mu);
        return;
    }
    atomic_store(&g->dead, 1);
    g->user_abort = user;
    snprintf(g->dead_msg, sizeof g->dead_msg, "%s", msg);
    if (culprit && culprit->state != W_FINAL) ltnccl_finalize(g, culprit, st, "%s", msg);
    while (g->live_head) ltnccl_fail_dead(g, g->live_head);
    pthread_cond_broadcast(&g->cv);
    pthread_cond_broadcast(&g->done_cv);
    pthread_mutex_unlock(&g->mu);

    pthread_mutex_lock(&g->comm_mu);
    if (g->comm) {
        /* NCCL switches this thread to the communicator's device. */
        int prev = -1;
        bool have = cudaGetDevice(&prev) == cudaSuccess;
        ncclCommAbort(g->comm);
        g->comm = NULL;
        int now = -1;
        if (have && cudaGetDevice(&now) == cudaSuccess && now != prev) cudaSetDevice(prev);
    }
    pthread_mutex_unlock(&g->comm_mu);
}

/* ---- the launcher ---- */

/* Waits until the communicator's state leaves ncclInProgress. Called and
 * returns with comm_mu held (released between polls, so abort can come in;
 * then *gone is set). *late is set when `deadline` passed first. */
ncclResult_t ltnccl_settle(struct lt_backend_group *g, int64_t deadline, bool *gone, bool *late) {
    *gone = *late = false;
    for (unsigned i = 0;; i++) {
        if (!g->comm) {
            *gone = true;
            return ncclInvalidUsage;
        }
        ncclResult_t s = ncclInProgress;
        ncclResult_t r = ncclCommGetAsyncError(g->comm, &s);
        if (r != ncclSuccess) return r;
        if (s != ncclInProgress) return s;
        if (ltnccl_now_ns() > deadline) {
            *late = true;
            return ncclInProgress;
        }
        pthread_mutex_unlock(&g->comm_mu);
        ltnccl_sleep_ns(i < 100 ? 10000 : i < 1000 ? 100000 : 1000000);
        pthread_mutex_lock(&g->comm_mu);
    }
}

/* One NCCL call (or send/recv of a batch) of work w, on the group's stream. */
static ncclResult_t nccl_call(struct lt_backend_group *g, struct lt_backend_work *w) {
    ncclDataType_t t = ncclUint8;
    ncclRedOp_t op = ncclSum;
    ltnccl_type((int)w->dtype, &t);
    ltnccl_op((int)w->op, &op);
    if (w->count == 0 && w->k != K_BARRIER) return ncclSuccess; /* nothing to move on any rank */
    switch (w->k) {
    case K_ALLREDUCE: return ncclAllReduce(w->recv, w->recv, w->count, t, op, g->comm, g->stream);
    case K_BROADCAST: return ncclBroadcast(w->recv, w->recv, w->count, t, w->peer, g->comm, g->stream);
    case K_ALLGATHER: return ncclAllGather(w->send, w->recv, w->count, t, g->comm, g->stream);
    case K_REDUCE_SCATTER: return ncclReduceScatter(w->send, w->recv, w->count, t, op, g->comm, g->stream);
    case K_BARRIER: return ncclAllReduce(g->bar_buf, g->bar_buf, 1, ncclInt32, ncclSum, g->comm, g->stream);
    case K_SEND: return ncclSend(w->send, w->count, t, w->peer, g->comm, g->stream);
    case K_RECV: return ncclRecv(w->recv, w->count, t, w->peer, g->comm, g->stream);
    }
    return ncclInvalidArgument;
}

/* Launches ws[0..n) (one collective, or one batch of sends and recvs). */
static void launch(struct lt_backend_group *g, struct lt_backend_work **ws, size_t n) {
    char msg[1024];
    pthread_mutex_lock(&g->comm_mu);
    if (!g->comm) {
        pthread_mutex_unlock(&g->comm_mu);
        return; /* killed: the works were failed then */
    }
    for (size_t i = 0; i < n; i++) {
        cudaError_t ce = cudaStreamWaitEvent(g->stream, ws[i]->ready, 0);
        if (ce != cudaSuccess) {
            pthread_mutex_unlock(&g->comm_mu);
            snprintf(msg, sizeof msg, "%s: ordering after the caller's stream (cudaStreamWaitEvent): %s",
                     ws[i]->label, cudaGetErrorString(ce));
            ltnccl_kill_group(g, ws[i], LT_ERR_PLUGIN, false, msg);
            return;
        }
    }
    int64_t start = ltnccl_now_ns();
    ncclResult_t r;
    if (ws[0]->k == K_SEND || ws[0]->k == K_RECV) {
        r = ncclGroupStart();
        for (size_t i = 0; i < n && r == ncclSuccess; i++) r = nccl_call(g, ws[i]);
        ncclResult_t e = ncclGroupEnd(); /* always: it closes the group on this thread */
        if (r == ncclSuccess) r = e;
    } else {
        r = nccl_call(g, ws[0]);
    }
    bool gone = false, late = false;
    if (r == ncclInProgress) {
        int64_t deadline = g->timeout_ms > 0 && g->timeout_ms < (int64_t)1e12 ? start + g->timeout_ms * 1000000
                                                                             : INT64_MAX;
        r = ltnccl_settle(g, deadline, &gone, &late);
    }
    if (gone) {
        pthread_mutex_unlock(&g->comm_mu);
        return;
    }
    if (late) {
        pthread_mutex_unlock(&g->comm_mu);
        snprintf(msg, sizeof msg, "%s: timed out after %lld ms while NCCL started it: a peer did not make the "
                                  "matching call (it is stuck or gone, or called something else)",
                 ws[0]->label, (long long)g->timeout_ms);
        ltnccl_kill_group(g, ws[0], LT_ERR_TIMEOUT, false, msg);
        return;
    }
    if (r != ncclSuccess) {
        char what[400];
        ltnccl_describe(what, sizeof what, r, g->comm);
        pthread_mutex_unlock(&g->comm_mu);
        snprintf(msg, sizeof msg, "%s: %s", ws[0]->label, what);
        ltnccl_kill_group(g, ws[0], ltnccl_status_of(r), false, msg);
        return;
    }
    cudaError_t ce = cudaSuccess;
    for (size_t i = 0; i < n && ce == cudaSuccess; i++) ce = cudaEventRecord(ws[i]->done, g->stream);
    pthread_mutex_unlock(&g->comm_mu);
    if (ce != cudaSuccess) {
        snprintf(msg, sizeof msg, "%s: cudaEventRecord on the group's stream: %s", ws[0]->label,
                 cudaGetErrorString(ce));
        ltnccl_kill_group(g, ws[0], LT_ERR_PLUGIN, false, msg);
        return;
    }
    int64_t t = ltnccl_now_ns();
    pthread_mutex_lock(&g->mu);
    for (size_t i = 0; i < n; i++) {
        if (ws[i]->state != W_QUEUED) continue;
        ws[i]->state = W_LAUNCHED;
        ws[i]->launched_ns = t;
    }
    pthread_cond_broadcast(&g->done_cv);
    pthread_mutex_unlock(&g->mu);
}

/* Retires finished works, reads NCCL's asynchronous error, enforces the
 * timeout on the oldest unfinished one. */
static void watchdog(struct lt_backend_group *g) {
    char msg[1024];
    struct lt_backend_work *head = NULL;
    cudaError_t bad = cudaSuccess;
    pthread_mutex_lock(&g->mu);
    if (atomic_load(&g->dead)) {
        pthread_mutex_unlock(&g->mu);
        return;
    }
    for (struct lt_backend_work *w = g->live_head, *next; w; w = next) {
        next = w->next;
        if (w->state != W_LAUNCHED) break;
        cudaError_t q = cudaEventQuery(w->done);
        if (q == cudaSuccess) {
            ltnccl_finalize(g, w, LT_OK, NULL);
            continue;
        }
        head = w;
        if (q != cudaErrorNotReady) {
            bad = q;
            snprintf(msg, sizeof msg, "%s: CUDA error on the group's stream: %s (%s)", w->label,
                     cudaGetErrorString(q), cudaGetErrorName(q));
        } else if (g->timeout_ms > 0 && g->timeout_ms < (int64_t)1e12 &&
                   ltnccl_now_ns() - w->launched_ns > g->timeout_ms * 1000000) {
            bad = cudaErrorTimeout;
            snprintf(msg, sizeof msg, "%s: timed out after %lld ms: a peer did not make the matching call "
                                      "(it is stuck or gone, or called something else or with another size)",
                     w->label, (long long)g->timeout_ms);
        }
        break;
    }
    pthread_mutex_unlock(&g->mu);
    if (bad != cudaSuccess) {
        ltnccl_kill_group(g, head, bad == cudaErrorTimeout ? LT_ERR_TIMEOUT : LT_ERR_PLUGIN, false, msg);
        return;
    }
    if (!head) return;
    ncclResult_t s = ncclSuccess;
    char what[400] = "";
    pthread_mutex_lock(&g->comm_mu);
    if (g->comm && ncclCommGetAsyncError(g->comm, &s) == ncclSuccess && s != ncclSuccess && s != ncclInProgress)
        ltnccl_describe(what, sizeof what, s, g->comm);
    else
        s = ncclSuccess;
    pthread_mutex_unlock(&g->comm_mu);
    if (s == ncclSuccess) return;
    snprintf(msg, sizeof msg, "%s: %s", head->label, what);
    ltnccl_kill_group(g, head, ltnccl_status_of(s), false, msg);
}

static void *launcher_main(void *arg) {
    struct lt_backend_group *g = arg;
    cudaSetDevice(g->device);
    struct lt_backend_work **ws = NULL;
    size_t cap = 0;
    int64_t last_watch = 0;
    pthread_mutex_lock(&g->mu);
    for (;;) {
        if (g->q_head) {
            /* One collective, or the sends and recvs of one batch (all of
             * it, or only its head should the list not grow). */
            struct lt_backend_work *head = g->q_head;
            size_t n = 0;
            for (struct lt_backend_work *x = head; x; x = x->qnext) {
                if (n && (head->batch == 0 || x->batch != head->batch)) break;
                if (n == cap) {
                    size_t nc = cap ? cap * 2 : 16;
                    struct lt_backend_work **p = realloc(ws, nc * sizeof *p);
                    if (!p) break;
                    ws = p;
                    cap = nc;
                }
                ws[n++] = x;
            }
            struct lt_backend_work *single[1] = {head};
            struct lt_backend_work **list = n ? ws : single;
            if (!n) n = 1;
            g->q_head = list[n - 1]->qnext;
            if (!g->q_head) g->q_tail = NULL;
            bool any = false;
            for (size_t i = 0; i < n; i++) {
                list[i]->qnext = NULL;
                if (list[i]->state != W_QUEUED) continue;
                if (atomic_load(&g->dead)) ltnccl_fail_dead(g, list[i]);
                else any = true;
            }
            pthread_mutex_unlock(&g->mu);
            if (any) launch(g, list, n);
            /* The launcher's references: a work freed by its caller
             * meanwhile is freed here. */
            pthread_mutex_lock(&g->mu);
            for (size_t i = 0; i < n; i++) {
                if (!ltnccl_work_unref_locked(g, list[i])) continue;
                pthread_mutex_unlock(&g->mu);
                ltnccl_work_free(list[i]);
                pthread_mutex_lock(&g->mu);
            }
            continue;
        }
        if (g->stopping) break;
        bool inflight = !atomic_load(&g->dead) && g->live_head && g->live_head->state == W_LAUNCHED;
        if (!inflight) {
            pthread_cond_wait(&g->cv, &g->mu);
            continue;
        }
        int64_t t = ltnccl_now_ns();
        if (t - last_watch >= WATCH_NS) {
            last_watch = t;
            pthread_mutex_unlock(&g->mu);
            watchdog(g);
            pthread_mutex_lock(&g->mu);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t ns = ts.tv_nsec + (last_watch + WATCH_NS - t);
        ts.tv_sec += (time_t)(ns / 1000000000);
        ts.tv_nsec = (long)(ns % 1000000000);
        pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    }
    pthread_mutex_unlock(&g->mu);
    free(ws);
    return NULL;
}

void ltnccl_start_launcher(struct lt_backend_group *g, lt_ctx *ctx, lt_status *st) {
    /* The launcher takes no signals: they belong to the program's threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&g->thr, NULL, launcher_main, g);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        lt_set_error(ctx, "nccl create '%s': cannot start the launcher thread", g->name);
        *st = LT_ERR_NOMEM;
        return;
    }
    g->thr_started = true;
    pthread_setname_np(g->thr, "lt-nccl");
}
