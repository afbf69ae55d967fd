/* dp on cpu: each replica is one core. Setup is called once per replica,
 * on the replica's own thread (the root's first); the second live context
 * says the process runs replicas, so from then on every context's thread is
 * pinned and OpenBLAS stops spreading one call over the cores the other
 * replicas compute on. Replicas are told apart from two trainers sharing
 * a process by their devices: contexts on different devices. The root, set
 * up alone, is pinned when the second device appears (pthread_setaffinity_np
 * pins another thread); every pinned thread gets its own mask back when its
 * context goes or the replicas are gone. */
#define _GNU_SOURCE
#include <cblas.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include "cpu_internal.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static cpu_state *g_live[256]; /* contexts set up and not torn down */
static int g_nlive;
static int g_saved_blas_threads = -1; /* OpenBLAS's count before replicas: given back after */
static bool g_share_cores;

/* The n-th CPU this process may run on, or -1. */
static int allowed_cpu(int n, int *count) {
    cpu_set_t set;
    *count = 0;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    int found = -1;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &set)) continue;
        if (*count == n) found = c;
        (*count)++;
    }
    return found;
}

/* Replica `device` computes on allowed core `device`; with share_cores,
 * more replicas than cores share them (core device % count; slower, but
 * dp's result is the same). */
static lt_status pin(lt_ctx *ctx, const cpu_state *s) {
    int count;
    allowed_cpu(0, &count);
    if (count < 1) {
        lt_set_error(ctx, "cpu accelerator: cannot read the cores this process may use (sched_getaffinity)");
        return LT_ERR_INVALID;
    }
    if (s->device >= count && !g_share_cores) {
        lt_set_error(ctx, "cpu accelerator: device %d does not exist: dp on cpu runs one replica per core "
                     "and this process may use %d core(s); set trainer.devices <= %d, or "
                     "accelerator.share_cores=true to run more replicas side by side", s->device, count, count);
        return LT_ERR_INVALID;
    }
    int cpu = allowed_cpu(s->device % count, &count);
    if (s->device >= count)
        lt_log(ctx, LT_LOG_WARN, "replica on device %d shares cpu %d with device %d: this process may use "
               "%d core(s), so trainer.devices > %d runs replicas side by side on one core", s->device, cpu,
               s->device % count, count, count);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    int rc = pthread_setaffinity_np(s->thread, sizeof one, &one);
    if (rc != 0) {
        lt_set_error(ctx, "cpu accelerator: pinning the replica of device %d to cpu %d failed (error %d)",
                     s->device, cpu, rc);
        return LT_ERR_INVALID;
    }
    lt_log(ctx, LT_LOG_DEBUG, "replica on device %d pinned to cpu %d", s->device, cpu);
    return LT_OK;
}

/* Replicas are contexts on different devices: two trainers of one process
 * on device 0 are not. */
static bool replicas_live(void) {
    for (int i = 1; i < g_nlive; i++)
        if (g_live[i]->device != g_live[0]->device) return true;
    return false;
}

/* Pins every live context not pinned yet, keeping its thread's mask. */
static lt_status pin_all(lt_ctx *ctx, int64_t num_threads) {
    for (int i = 0; i < g_nlive; i++) {
        cpu_state *c = g_live[i];
        if (c->pinned) continue;
        c->has_mask = pthread_getaffinity_np(c->thread, sizeof c->mask, &c->mask) == 0;
        LT_CHECK(pin(ctx, c));
        c->pinned = true;
    }
    if (num_threads <= 0 && g_saved_blas_threads < 0) {
        g_saved_blas_threads = openblas_get_num_threads();
        openblas_set_num_threads(1);
    }
    return LT_OK;
}

/* No replicas left: every pinned thread gets its mask back, OpenBLAS its
 * thread count (an embedding program's next single-device run). */
static void unpin_all(void) {
    for (int i = 0; i < g_nlive; i++) {
        cpu_state *c = g_live[i];
        if (c->pinned && c->has_mask) pthread_setaffinity_np(c->thread, sizeof c->mask, &c->mask);
        c->pinned = false;
    }
    if (g_saved_blas_threads > 0) openblas_set_num_threads(g_saved_blas_threads);
    g_saved_blas_threads = -1;
}

static void drop(cpu_state *s) {
    for (int i = 0; i < g_nlive; i++)
        if (g_live[i] == s) {
            if (s->pinned && s->has_mask) pthread_setaffinity_np(s->thread, sizeof s->mask, &s->mask);
            s->pinned = false;
            memmove(&g_live[i], &g_live[i + 1], (size_t)(g_nlive - i - 1) * sizeof g_live[0]);
            g_nlive--;
            break;
        }
    if (!replicas_live()) unpin_all();
}

lt_status cpu_bind_replicas(lt_ctx *ctx, cpu_state *s, int64_t num_threads, bool share_cores) {
    pthread_mutex_lock(&g_lock);
    g_share_cores = share_cores;
    lt_status st = LT_OK;
    if (g_nlive == (int)(sizeof g_live / sizeof g_live[0])) {
        lt_set_error(ctx, "cpu accelerator: more than %d contexts in one process", g_nlive);
        st = LT_ERR_INVALID;
    } else {
        g_live[g_nlive++] = s;
        if (replicas_live()) st = pin_all(ctx, num_threads);
        if (st != LT_OK) drop(s);
    }
    pthread_mutex_unlock(&g_lock);
    return st;
}

void cpu_unbind_replicas(cpu_state *s) {
    pthread_mutex_lock(&g_lock);
    drop(s);
    pthread_mutex_unlock(&g_lock);
}
