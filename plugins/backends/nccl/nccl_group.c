/* The nccl backend's group: create (device checks, the NCCL id through the
 * store, the non-blocking communicator, the launcher) and destroy, and the
 * group's last reference. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl_internal.h"

#define FINALIZE_MAX_MS 60000    /* destroy: how long a clean shutdown may take */
#define OPT_HAS(o, f) (offsetof(lt_pg_options, f) + sizeof((o)->f) <= (o)->struct_size)

/* ---- the last reference ---- */

void ltnccl_group_unref(struct lt_backend_group *g) {
    if (atomic_fetch_sub(&g->refs, 1) != 1) return;
    free(g->pool);
    pthread_mutex_destroy(&g->mu);
    pthread_mutex_destroy(&g->comm_mu);
    pthread_cond_destroy(&g->cv);
    pthread_cond_destroy(&g->done_cv);
    free(g);
}

/* ---- create and destroy ---- */

/* Frees what create made; the communicator is already gone. */
static void release_cuda(struct lt_backend_group *g, bool free_buf) {
    if (g->stream) cudaStreamDestroy(g->stream);
    g->stream = NULL;
    /* cudaFree waits for the device: only on a group whose stream is idle. */
    if (g->bar_buf && free_buf) cudaFree(g->bar_buf);
    g->bar_buf = NULL;
    pthread_mutex_lock(&g->mu);
    g->released = true;
    for (size_t i = 0; i < g->npool; i++) cudaEventDestroy(g->pool[i]);
    g->npool = 0;
    pthread_mutex_unlock(&g->mu);
}

static lt_status no_device(lt_ctx *ctx, const char *found) {
    lt_set_error(ctx, "nccl create: %s; use process_group_backend=gloo (it stages GPU buffers through host "
                      "memory) or run on a GPU machine",
                 found);
    return LT_ERR_UNSUPPORTED;
}

lt_status ltnccl_create(lt_ctx *ctx, lt_store *store, int rank, int world, const lt_pg_options *opt,
                        lt_backend_group **out) {
    if (!store || !opt || !out || world < 1 || rank < 0 || rank >= world || !OPT_HAS(opt, device)) {
        lt_set_error(ctx, "nccl create: invalid arguments (rank %d of %d%s%s)", rank, world,
                     store ? "" : ", no store", opt ? "" : ", no options");
        return LT_ERR_INVALID;
    }
    /* A device first: without one nothing below can work. */
    int ndev = 0;
    cudaError_t ce = cudaGetDeviceCount(&ndev);
    if (ce != cudaSuccess) {
        char why[160] = "";
        if (ce == cudaErrorInsufficientDriver) {
            /* cudart opened libcuda.so.1 if there is one: then it is too old. */
            void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
            if (drv) {
                snprintf(why, sizeof why, "; the NVIDIA driver is older than CUDA %d.%d needs",
                         CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
                dlclose(drv);
            } else {
                snprintf(why, sizeof why, "; no NVIDIA driver (libcuda.so.1) is installed");
            }
        } else if (ce == cudaErrorNoDevice) {
            snprintf(why, sizeof why, "; the driver sees no GPU");
        }
        char found[400];
        snprintf(found, sizeof found, "no usable CUDA device: cudaGetDeviceCount failed: %s (%s)%s",
                 cudaGetErrorString(ce), cudaGetErrorName(ce), why);
        cudaGetLastError();
        return no_device(ctx, found);
    }
    if (ndev < 1) return no_device(ctx, "the CUDA driver is loaded but reports no GPU");
    if (opt->mem_kind != LT_MEM_DEVICE) {
        lt_set_error(ctx, "nccl create: the nccl backend works on device memory only (mem_kind %u); host "
                          "buffers need a host backend (process_group_backend=gloo or shm)",
                     (unsigned)opt->mem_kind);
        return LT_ERR_INVALID;
    }
    if (opt->device < 0 || opt->device >= ndev) {
        lt_set_error(ctx, "nccl create: device %d does not exist (this process sees %d CUDA device%s: 0..%d; "
                          "check CUDA_VISIBLE_DEVICES and the accelerator's device)",
                     opt->device, ndev, ndev == 1 ? "" : "s", ndev - 1);
        return LT_ERR_INVALID;
    }
    if (!opt->prefix || !*opt->prefix) {
        lt_set_error(ctx, "nccl create: options need a store key prefix unique to the group");
        return LT_ERR_INVALID;
    }
    int64_t timeout_ms = opt->timeout_ms > 0 ? opt->timeout_ms : 30 * 60 * 1000;
    int64_t connect_ms = OPT_HAS(opt, connect_timeout_ms) && opt->connect_timeout_ms > 0
                             ? opt->connect_timeout_ms
                             : timeout_ms;
    int64_t deadline = ltnccl_deadline_after(connect_ms);

    struct lt_backend_group *g = calloc(1, sizeof *g);
    if (!g) {
        lt_set_error(ctx, "nccl create: out of memory");
        return LT_ERR_NOMEM;
    }
    g->rank = rank;
    g->world = world;
    g->device = opt->device;
    g->timeout_ms = timeout_ms;
    {
        size_t n = strlen(opt->prefix);
        while (n > 0 && opt->prefix[n - 1] == '/') n--;
        if (n == 0) snprintf(g->name, sizeof g->name, "default");
        else snprintf(g->name, sizeof g->name, "%.*s", (int)n, opt->prefix);
    }
    atomic_init(&g->refs, 1);
    atomic_init(&g->dead, 0);
    pthread_mutex_init(&g->mu, NULL);
    pthread_mutex_init(&g->comm_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->cv, &ca);
    pthread_cond_init(&g->done_cv, &ca);
    pthread_condattr_destroy(&ca);

    lt_status st = LT_OK;
    /* create runs on the thread that will issue the group's collectives:
     * its current device becomes the group's (NCCL binds the communicator
     * to the current device). */
    ce = cudaSetDevice(g->device);
    if (ce != cudaSuccess) {
        lt_set_error(ctx, "nccl create '%s': cudaSetDevice(%d): %s", g->name, g->device, cudaGetErrorString(ce));
        st = LT_ERR_PLUGIN;
        goto fail;
    }
    ce = cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking);
    if (ce == cudaSuccess) ce = cudaMalloc(&g->bar_buf, 16);
    /* On the group's stream, so it precedes every barrier. */
    if (ce == cudaSuccess) ce = cudaMemsetAsync(g->bar_buf, 0, 16, g->stream);
    if (ce != cudaSuccess) {
        lt_set_error(ctx, "nccl create '%s': setting up device %d: %s", g->name, g->device, cudaGetErrorString(ce));
        st = LT_ERR_PLUGIN;
        goto fail;
    }

    /* The unique id: rank 0 makes it, the others read it from the store. */
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    char key[LT_STORE_MAX_KEY];
    snprintf(key, sizeof key, "%snccl_id", opt->prefix);
    if (rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) {
            char what[400];
            ltnccl_describe(what, sizeof what, r, NULL);
            lt_set_error(ctx, "nccl create '%s': ncclGetUniqueId: %s (is a network interface up? see NCCL_SOCKET_IFNAME)",
                         g->name, what);
            st = ltnccl_status_of(r);
            goto fail;
        }
        st = lt_store_set(store, key, &id, sizeof id);
        if (st != LT_OK) {
            lt_set_error(ctx, "nccl create '%s': publishing the NCCL id: %s", g->name, lt_store_error(store));
            goto fail;
        }
    } else {
        const char *k = key;
        int64_t left = (deadline - ltnccl_now_ns()) / 1000000;
        int wait_ms = left > INT_MAX ? INT_MAX : left < 1 ? 1 : (int)left;
        st = lt_store_wait(store, &k, 1, wait_ms);
        void *v = NULL;
        size_t n = 0;
        if (st == LT_OK) st = lt_store_get(store, key, &v, &n);
        if (st != LT_OK) {
            lt_set_error(ctx, "nccl create '%s': rank %d of %d: waiting %lld ms for rank 0's NCCL id: %s", g->name,
                         rank, world, (long long)connect_ms, lt_store_error(store));
            free(v);
            goto fail;
        }
        if (n != sizeof id) {
            lt_set_error(ctx, "nccl create '%s': rank 0's NCCL id has %zu bytes, want %zu (another lt version?)",
                         g->name, n, sizeof id);
            free(v);
            st = LT_ERR_MISMATCH;
            goto fail;
        }
        memcpy(&id, v, sizeof id);
        free(v);
    }

    /* Non-blocking init: it runs in NCCL's thread while this one polls, so
     * a rank that never comes is a timeout here, not a hang. */
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    cfg.commName = g->name;
    double t0 = lt_now();
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclCommInitRankConfig(&comm, world, id, rank, &cfg);
    pthread_mutex_lock(&g->comm_mu);
    g->comm = comm;
    bool gone = false, late = false;
    if (r == ncclInProgress || (r == ncclSuccess && comm)) r = ltnccl_settle(g, deadline, &gone, &late);
    if (r != ncclSuccess || late || !g->comm) {
        char what[400];
        if (late)
            snprintf(what, sizeof what, "not every one of the %d ranks joined within %lld ms", world,
                     (long long)connect_ms);
        else
            ltnccl_describe(what, sizeof what, r, g->comm);
        if (g->comm) ncclCommAbort(g->comm);
        g->comm = NULL;
        cudaSetDevice(g->device);
        pthread_mutex_unlock(&g->comm_mu);
        lt_set_error(ctx, "nccl create '%s': rank %d of %d on device %d: creating the communicator: %s", g->name,
                     rank, world, g->device, what);
        st = late ? LT_ERR_TIMEOUT : r == ncclSuccess ? LT_ERR_PLUGIN : ltnccl_status_of(r);
        goto fail;
    }
    pthread_mutex_unlock(&g->comm_mu);
    cudaSetDevice(g->device);

    ltnccl_start_launcher(g, ctx, &st);
    if (st != LT_OK) {
        pthread_mutex_lock(&g->comm_mu);
        ncclCommAbort(g->comm);
        g->comm = NULL;
        pthread_mutex_unlock(&g->comm_mu);
        cudaSetDevice(g->device);
        goto fail;
    }
    lt_log(ctx, LT_LOG_DEBUG, "group '%s': rank %d of %d on device %d joined NCCL %d.%d.%d in %.3f s", g->name,
           rank, world, g->device, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, lt_now() - t0);
    *out = g;
    return LT_OK;
fail:
    release_cuda(g, true);
    ltnccl_group_unref(g);
    return st;
}

lt_status ltnccl_destroy(lt_ctx *ctx, lt_backend_group *g) {
    (void)ctx;
    if (!g) return LT_OK;
    dev_scope ds;
    ltnccl_dev_enter(&ds, g->device);
    /* Work nobody waited for: do not let it hold destroy up. */
    pthread_mutex_lock(&g->mu);
    bool busy = false;
    for (struct lt_backend_work *w = g->live_head; w; w = w->next)
        if (w->state != W_LAUNCHED) busy = true;
    pthread_mutex_unlock(&g->mu);
    if (busy) {
        char msg[256];
        snprintf(msg, sizeof msg, "group '%s' was destroyed with work still queued", g->name);
        ltnccl_kill_group(g, NULL, LT_ERR_ABORTED, true, msg);
    }
    pthread_mutex_lock(&g->mu);
    ltnccl_flush_batch(g); /* the launcher drops its references to them */
    g->stopping = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    if (g->thr_started) pthread_join(g->thr, NULL);
    g->thr_started = false;

    /* A healthy, idle communicator is finalized (NCCL flushes what its
     * proxies still send to the peers) and destroyed; any other is aborted. */
    bool clean = false;
    if (!atomic_load(&g->dead) && cudaStreamQuery(g->stream) == cudaSuccess) {
        pthread_mutex_lock(&g->comm_mu);
        if (g->comm) {
            ncclResult_t r = ncclCommFinalize(g->comm);
            bool gone = false, late = false;
            if (r == ncclInProgress) {
                int64_t ms = g->timeout_ms < FINALIZE_MAX_MS ? g->timeout_ms : FINALIZE_MAX_MS;
                r = ltnccl_settle(g, ltnccl_deadline_after(ms), &gone, &late);
            }
            if (g->comm && r == ncclSuccess && !late) {
                ncclCommDestroy(g->comm);
                g->comm = NULL;
                clean = true;
            }
        }
        pthread_mutex_unlock(&g->comm_mu);
    }
    if (!clean) {
        char msg[256];
        snprintf(msg, sizeof msg, "group '%s' was destroyed", g->name);
        ltnccl_kill_group(g, NULL, LT_ERR_ABORTED, true, msg); /* aborts the communicator if still there */
    } else {
        /* Works nobody waited for: the stream is idle, so they are done. */
        pthread_mutex_lock(&g->mu);
        g->user_abort = true;
        while (g->live_head) {
            struct lt_backend_work *w = g->live_head;
            if (w->state == W_LAUNCHED && cudaEventQuery(w->done) == cudaSuccess) ltnccl_finalize(g, w, LT_OK, NULL);
            else ltnccl_fail_dead(g, w);
        }
        atomic_store(&g->dead, 1);
        pthread_mutex_unlock(&g->mu);
    }
    cudaSetDevice(g->device);
    release_cuda(g, clean);
    ltnccl_dev_leave(&ds);
    ltnccl_group_unref(g);
    return LT_OK;
}
