/* The nccl backend's operation hooks: argument checks, issue (record
 * "ready" on the caller's stream and queue for the launcher), the
 * collectives, send and recv, and wait, free_work, abort and supports. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl_internal.h"

static const char *const kind_names[] = {"allreduce", "broadcast", "allgather", "reduce_scatter",
                                         "barrier", "send", "recv"};

/* ---- argument checks and issue ---- */

static lt_status check_handles(lt_ctx *ctx, const char *what, lt_backend_group *g, lt_backend_work **work) {
    if (g && work) return LT_OK;
    lt_set_error(ctx, "nccl %s: NULL %s", what, g ? "work pointer" : "group");
    return LT_ERR_INVALID;
}

static lt_status check_dtype(lt_ctx *ctx, const char *what, int dtype) {
    if (ltnccl_type(dtype, NULL)) return LT_OK;
    lt_set_error(ctx, "nccl %s: dtype %d is not one the nccl backend knows (f32 f64 f16 bf16 i8 u8 i32 i64)",
                 what, dtype);
    return LT_ERR_UNSUPPORTED;
}

static lt_status check_reduce(lt_ctx *ctx, const char *what, int dtype, int op) {
    LT_CHECK(check_dtype(ctx, what, dtype));
    if (ltnccl_op(op, NULL)) return LT_OK;
    lt_set_error(ctx, "nccl %s: reduction op %d on %s is not supported (use sum, avg, min or max)", what, op,
                 lt_dtype_name((lt_dtype)dtype));
    return LT_ERR_UNSUPPORTED;
}

/* `blocks` x count elements at p: they must fit in size_t and lie in
 * device (or managed) memory. */
static lt_status check_buf(lt_ctx *ctx, const lt_backend_group *g, const char *what, const char *role,
                           const void *p, size_t count, lt_dtype dtype, size_t blocks) {
    size_t esz = lt_dtype_size(dtype);
    if (count && count > SIZE_MAX / esz / blocks) {
        lt_set_error(ctx, "nccl %s: %zu elements of %s overflow the address space", what, count,
                     lt_dtype_name(dtype));
        return LT_ERR_INVALID;
    }
    if (!count) return LT_OK;
    if (!p) {
        lt_set_error(ctx, "nccl %s: NULL %s buffer for %zu elements", what, role, count);
        return LT_ERR_INVALID;
    }
    struct cudaPointerAttributes a;
    memset(&a, 0, sizeof a);
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* not sticky: clear it */
        lt_set_error(ctx, "nccl %s: cannot tell where the %s buffer %p lives: %s", what, role, p,
                     cudaGetErrorString(e));
        return LT_ERR_INVALID;
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) {
        lt_set_error(ctx, "nccl %s: the %s buffer %p is host memory; the nccl backend takes device buffers "
                          "(use gloo for host memory)",
                     what, role, p);
        return LT_ERR_INVALID;
    }
    if (a.type == cudaMemoryTypeDevice && a.device != g->device) {
        lt_set_error(ctx, "nccl %s: the %s buffer %p is on device %d, group '%s' on device %d", what, role, p,
                     a.device, g->name, g->device);
        return LT_ERR_INVALID;
    }
    return LT_OK;
}

static lt_status check_rank(lt_ctx *ctx, const char *what, const char *role, int r, const lt_backend_group *g,
                            bool self_ok) {
    if (r >= 0 && r < g->world && (self_ok || r != g->rank)) return LT_OK;
    if (r == g->rank)
        lt_set_error(ctx, "nccl %s: %s %d is not another rank of group '%s' (this is rank %d)", what, role, r,
                     g->name, g->rank);
    else
        lt_set_error(ctx, "nccl %s: %s %d is not a rank of group '%s' (0..%d)", what, role, r, g->name,
                     g->world - 1);
    return LT_ERR_INVALID;
}

static void make_label(struct lt_backend_group *g, struct lt_backend_work *w) {
    const char *dt = lt_dtype_name(w->dtype);
    switch (w->k) {
    case K_SEND:
    case K_RECV:
        snprintf(w->label, sizeof w->label, "%s #%llu %s rank %d (tag %u, %zu %s) on group '%s'",
                 kind_names[w->k], ++g->p2p_seq, w->k == K_SEND ? "to" : "from", w->peer, w->tag, w->count,
                 dt ? dt : "?", g->name);
        break;
    case K_BARRIER:
        snprintf(w->label, sizeof w->label, "barrier #%llu on group '%s'", ++g->coll_seq, g->name);
        break;
    default:
        snprintf(w->label, sizeof w->label, "%s #%llu (%zu %s) on group '%s'", kind_names[w->k], ++g->coll_seq,
                 w->count, dt ? dt : "?", g->name);
        break;
    }
}

static lt_status issue(lt_ctx *ctx, struct lt_backend_group *g, const struct lt_backend_work *tmpl,
                       lt_backend_work **out) {
    const char *what = kind_names[tmpl->k];
    dev_scope ds;
    cudaError_t ce = ltnccl_dev_enter(&ds, g->device);
    if (ce != cudaSuccess) {
        lt_set_error(ctx, "nccl %s: cannot make device %d current: %s", what, g->device, cudaGetErrorString(ce));
        return LT_ERR_PLUGIN;
    }
    struct lt_backend_work *w = malloc(sizeof *w);
    if (!w) {
        ltnccl_dev_leave(&ds);
        lt_set_error(ctx, "nccl %s: out of memory", what);
        return LT_ERR_NOMEM;
    }
    *w = *tmpl;
    w->g = g;
    w->state = W_QUEUED;
    w->st = LT_OK;
    w->err[0] = 0;
    w->refs = 1;
    w->live = false;
    w->prev = w->next = w->qnext = NULL;
    w->launched_ns = 0;
    pthread_mutex_lock(&g->mu);
    w->ready = ltnccl_event_take(g);
    w->done = ltnccl_event_take(g);
    pthread_mutex_unlock(&g->mu);
    if (!w->ready || !w->done) {
        pthread_mutex_lock(&g->mu);
        ltnccl_event_give(g, w->ready);
        ltnccl_event_give(g, w->done);
        pthread_mutex_unlock(&g->mu);
        free(w);
        ltnccl_dev_leave(&ds);
        lt_set_error(ctx, "nccl %s: cannot create a CUDA event (out of resources?)", what);
        return LT_ERR_NOMEM;
    }
    /* The collective comes after everything this thread queued so far. */
    ce = cudaEventRecord(w->ready, cudaStreamPerThread);
    ltnccl_dev_leave(&ds);
    if (ce != cudaSuccess) {
        pthread_mutex_lock(&g->mu);
        ltnccl_event_give(g, w->ready);
        ltnccl_event_give(g, w->done);
        pthread_mutex_unlock(&g->mu);
        free(w);
        lt_set_error(ctx, "nccl %s: recording an event on the calling thread's stream: %s", what,
                     cudaGetErrorString(ce));
        return LT_ERR_PLUGIN;
    }
    atomic_fetch_add(&g->refs, 1);
    pthread_mutex_lock(&g->mu);
    make_label(g, w);
    w->live = true;
    w->prev = g->live_tail;
    if (g->live_tail) g->live_tail->next = w;
    else g->live_head = w;
    g->live_tail = w;
    if (atomic_load(&g->dead) || g->stopping) {
        ltnccl_fail_dead(g, w);
    } else if (w->k == K_SEND || w->k == K_RECV) {
        w->state = W_PENDING;
        w->batch = g->batch_id + 1; /* nonzero: collectives have batch 0 */
        w->refs++;
        if (g->pend_tail) g->pend_tail->qnext = w;
        else g->pend_head = w;
        g->pend_tail = w;
    } else {
        ltnccl_flush_batch(g); /* earlier sends and recvs go first */
        w->batch = 0;
        w->refs++;
        if (g->q_tail) g->q_tail->qnext = w;
        else g->q_head = w;
        g->q_tail = w;
        pthread_cond_broadcast(&g->cv);
    }
    pthread_mutex_unlock(&g->mu);
    *out = w;
    return LT_OK;
}

/* ---- hooks: collectives ---- */

lt_status ltnccl_allreduce(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count, lt_dtype dtype,
                           lt_redop op, lt_backend_work **work) {
    LT_CHECK(check_handles(ctx, "allreduce", g, work));
    LT_CHECK(check_reduce(ctx, "allreduce", (int)dtype, (int)op));
    LT_CHECK(check_buf(ctx, g, "allreduce", "data", buf, count, dtype, 1));
    struct lt_backend_work t = {.k = K_ALLREDUCE, .recv = buf, .count = count, .dtype = dtype, .op = op};
    return issue(ctx, g, &t, work);
}

lt_status ltnccl_broadcast(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count, lt_dtype dtype,
                           int root, lt_backend_work **work) {
    LT_CHECK(check_handles(ctx, "broadcast", g, work));
    LT_CHECK(check_dtype(ctx, "broadcast", (int)dtype));
    LT_CHECK(check_rank(ctx, "broadcast", "root", root, g, true));
    LT_CHECK(check_buf(ctx, g, "broadcast", "data", buf, count, dtype, 1));
    struct lt_backend_work t = {.k = K_BROADCAST, .recv = buf, .count = count, .dtype = dtype, .peer = root};
    return issue(ctx, g, &t, work);
}

lt_status ltnccl_allgather(lt_ctx *ctx, lt_backend_group *g, const void *send, void *recv, size_t count,
                           lt_dtype dtype, lt_backend_work **work) {
    LT_CHECK(check_handles(ctx, "allgather", g, work));
    LT_CHECK(check_dtype(ctx, "allgather", (int)dtype));
    LT_CHECK(check_buf(ctx, g, "allgather", "send", send, count, dtype, 1));
    LT_CHECK(check_buf(ctx, g, "allgather", "recv", recv, count, dtype, (size_t)g->world));
    struct lt_backend_work t = {.k = K_ALLGATHER, .send = send, .recv = recv, .count = count, .dtype = dtype};
    return issue(ctx, g, &t, work);
}

lt_status ltnccl_reduce_scatter(lt_ctx *ctx, lt_backend_group *g, const void *send, void *recv, size_t count,
                                lt_dtype dtype, lt_redop op, lt_backend_work **work) {
    LT_CHECK(check_handles(ctx, "reduce_scatter", g, work));
    LT_CHECK(check_reduce(ctx, "reduce_scatter", (int)dtype, (int)op));
    LT_CHECK(check_buf(ctx, g, "reduce_scatter", "send", send, count, dtype, (size_t)g->world));
    LT_CHECK(check_buf(ctx, g, "reduce_scatter", "recv", recv, count, dtype, 1));
    struct lt_backend_work t = {.k = K_REDUCE_SCATTER, .send = send, .recv = recv, .count = count,
                                .dtype = dtype, .op = op};
    return issue(ctx, g, &t, work);
}

lt_status ltnccl_barrier(lt_ctx *ctx, lt_backend_group *g, lt_backend_work **work) {
    LT_CHECK(check_handles(ctx, "barrier", g, work));
    struct lt_backend_work t = {.k = K_BARRIER, .count = 1, .dtype = LT_I32};
    return issue(ctx, g, &t, work);
}

lt_status ltnccl_send(lt_ctx *ctx, lt_backend_group *g, const void *buf, size_t count, lt_dtype dtype, int peer,
                      uint32_t tag, lt_backend_work **work) {
    LT_CHECK(check_handles(ctx, "send", g, work));
    LT_CHECK(check_dtype(ctx, "send", (int)dtype));
    LT_CHECK(check_rank(ctx, "send", "peer", peer, g, false));
    LT_CHECK(check_buf(ctx, g, "send", "send", buf, count, dtype, 1));
    struct lt_backend_work t = {.k = K_SEND, .send = buf, .count = count, .dtype = dtype, .peer = peer, .tag = tag};
    return issue(ctx, g, &t, work);
}

lt_status ltnccl_recv(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count, lt_dtype dtype, int peer,
                      uint32_t tag, lt_backend_work **work) {
    LT_CHECK(check_handles(ctx, "recv", g, work));
    LT_CHECK(check_dtype(ctx, "recv", (int)dtype));
    LT_CHECK(check_rank(ctx, "recv", "peer", peer, g, false));
    LT_CHECK(check_buf(ctx, g, "recv", "recv", buf, count, dtype, 1));
    struct lt_backend_work t = {.k = K_RECV, .recv = buf, .count = count, .dtype = dtype, .peer = peer, .tag = tag};
    return issue(ctx, g, &t, work);
}

/* ---- hooks: wait, free, abort, supports ---- */

lt_status ltnccl_wait(lt_ctx *ctx, lt_backend_work *w, int64_t timeout_ms) {
    if (!w) {
        lt_set_error(ctx, "nccl wait: NULL work");
        return LT_ERR_INVALID;
    }
    struct lt_backend_group *g = w->g;
    int64_t deadline = ltnccl_deadline_after(timeout_ms);
    dev_scope ds = {0, false};
    bool dev_set = false;
    unsigned polls = 0;
    lt_status st;
    pthread_mutex_lock(&g->mu);
    if (w->state == W_PENDING) ltnccl_flush_batch(g); /* its batch starts now */
    for (;;) {
        if (w->state == W_FINAL) {
            st = w->st;
            if (st != LT_OK) lt_set_error(ctx, "%s", w->err);
            break;
        }
        if (w->state == W_LAUNCHED) {
            pthread_mutex_unlock(&g->mu);
            if (!dev_set) {
                dev_set = true;
                ltnccl_dev_enter(&ds, g->device);
            }
            cudaError_t q = cudaEventQuery(w->done);
            if (q != cudaSuccess && q != cudaErrorNotReady) {
                char msg[1024];
                snprintf(msg, sizeof msg, "%s: CUDA error on the group's stream: %s (%s)", w->label,
                         cudaGetErrorString(q), cudaGetErrorName(q));
                ltnccl_kill_group(g, w, LT_ERR_PLUGIN, false, msg);
            }
            pthread_mutex_lock(&g->mu);
            /* Seen complete while the group lived: a kill (which fails
             * every unfinished work under this mutex before aborting NCCL)
             * did not complete it. */
            if (q == cudaSuccess && w->state == W_LAUNCHED) ltnccl_finalize(g, w, LT_OK, NULL);
            if (w->state == W_FINAL) continue;
        }
        int64_t t = ltnccl_now_ns();
        if (t >= deadline) {
            st = LT_ERR_TIMEOUT;
            lt_set_error(ctx, "%s: still running after %lld ms (the work stays valid; wait again)", w->label,
                         (long long)timeout_ms);
            break;
        }
        if (w->state != W_LAUNCHED) {
            /* Queued behind others: the launcher signals each launch. */
            int64_t until = deadline - t < 2000000 ? deadline : t + 2000000;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            int64_t ns = ts.tv_nsec + (until - t);
            ts.tv_sec += (time_t)(ns / 1000000000);
            ts.tv_nsec = (long)(ns % 1000000000);
            pthread_cond_timedwait(&g->done_cv, &g->mu, &ts);
        } else {
            /* On the GPU: poll, backing off from a busy spin to 100 us. */
            pthread_mutex_unlock(&g->mu);
            polls++;
            if (polls > 200) {
                long ns = polls < 400 ? 10000 : polls < 1000 ? 50000 : 100000;
                if (deadline - ltnccl_now_ns() < ns)
                    ns = deadline - ltnccl_now_ns() > 0 ? (long)(deadline - ltnccl_now_ns()) : 0;
                if (ns > 0) ltnccl_sleep_ns(ns);
            } else if (polls > 20) {
                sched_yield();
            }
            pthread_mutex_lock(&g->mu);
        }
    }
    pthread_mutex_unlock(&g->mu);
    if (dev_set) ltnccl_dev_leave(&ds);
    return st;
}

void ltnccl_free_work(lt_ctx *ctx, lt_backend_work *w) {
    (void)ctx;
    if (!w) return;
    struct lt_backend_group *g = w->g;
    pthread_mutex_lock(&g->mu);
    bool last = ltnccl_work_unref_locked(g, w);
    pthread_mutex_unlock(&g->mu);
    if (last) ltnccl_work_free(w);
}

lt_status ltnccl_abort(lt_ctx *ctx, lt_backend_group *g) {
    (void)ctx;
    if (!g) return LT_OK;
    char msg[256];
    snprintf(msg, sizeof msg, "group '%s' was aborted", g->name);
    ltnccl_kill_group(g, NULL, LT_ERR_ABORTED, true, msg);
    return LT_OK;
}

lt_status ltnccl_supports(lt_ctx *ctx, lt_dtype dtype, lt_redop op, bool *out) {
    (void)ctx;
    if (!out) return LT_ERR_INVALID;
    *out = ltnccl_type((int)dtype, NULL) && ltnccl_op((int)op, NULL);
    return LT_OK;
}

lt_status ltnccl_supports_memory(lt_ctx *ctx, lt_mem_kind kind, bool *out) {
    (void)ctx;
    if (!out) return LT_ERR_INVALID;
    *out = kind == LT_MEM_DEVICE;
    return LT_OK;
}
