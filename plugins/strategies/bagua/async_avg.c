/* bagua's async: Bagua's asynchronous model averaging. After warmup_steps
 * of ddp-style training no step waits for another rank: each rank steps on
 * its own gradients while a background thread averages the parameters
 * with every rank, every sync_interval_ms, over a process group of its own.
 *
 * The training thread alone writes the parameters; the thread never
 * touches them. At each step boundary (after_optimizer_step) the training
 * thread looks at the round's phase, without a lock or a wait:
 *   WANT   it copies the parameters into snap and avg (TAKEN); the thread
 *          averages avg with every rank;
 *   READY  it applies the round: params += avg - snap, which keeps the
 *          steps it took while the round was on the wire (Bagua's rule);
 *   else   nothing.
 * So a step never reads a half-written average, and the training thread
 * pays two copies and two axpbys per round.
 *
 * Stopping: ranks must run the same rounds, since a round is an allreduce.
 * Each round's message carries a stop vote after the parameters; a rank
 * whose training ended (on_train_end) joins one last round voting stop,
 * with its final parameters as the snapshot; every rank's thread leaves
 * after the first round in which anyone voted stop. A rank still training
 * thus loses its averaging partner and goes on alone, as in Bagua. That
 * last round needs the other ranks' threads, which join it within one
 * sync interval and one step; on_train_end waits at most
 * 2 * sync_interval_ms plus the longest round's transfer time and two of
 * the slowest steps seen, then aborts the group, which fails the round at
 * once (and the peers' next round: they then end with that error). A failed round (a rank died) ends the thread with the
 * group's error, which the training thread reports at its next step. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bagua_internal.h"

static void deadline_in(struct timespec *ts, int64_t ms) {
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += (time_t)(ms / 1000);
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) ts->tv_sec++, ts->tv_nsec -= 1000000000L;
}

static void set_phase(async_state *a, async_phase p) {
    atomic_store(&a->phase, (int)p);
    pthread_cond_broadcast(&a->cond);
}

/* The training thread's copy of the parameters into a round's buffers. */
static lt_status copy_params(lt_run *run, bagua *b) {
    async_state *a = &b->as;
    const lt_kernels *k = lt_run_kernels(run);
    lt_ctx *kc = lt_run_kernel_ctx(run);
    int64_t n = (int64_t)b->flat.count;
    k->axpby(kc, b->flat.param_dtype, n, 1.0, b->flat.params, 0.0, a->snap);
    k->axpby(kc, b->flat.param_dtype, n, 1.0, b->flat.params, 0.0, a->avg);
    return lt_run_synchronize(run);
}

/* The vote lives in accelerator memory (device memory on a gpu), so the
 * thread goes through the kernels, on its own stream: fill is ordered
 * before the allreduce it issues next, and sumsq returns the value on the
 * host once the allreduce's result is there. */
static void write_vote(async_state *a, void *at, lt_dtype t, bool stop) {
    a->k->fill(a->kc, t, at, 1, stop ? 1.0 : 0.0);
}

static bool read_vote(async_state *a, const void *at, lt_dtype t) {
    double sq = 0;
    a->k->sumsq(a->kc, t, at, 1, &sq);
    return sq > 0;
}

static void *async_main(void *arg) {
    bagua *b = arg;
    async_state *a = &b->as;
    size_t n = b->flat.count;
    lt_dtype t = b->flat.param_dtype;
    void *vote = (char *)a->avg + n * lt_dtype_size(t);
    pthread_mutex_lock(&a->lock);
    for (;;) {
        while (!a->stop && atomic_load(&a->phase) == ASYNC_PAUSED) pthread_cond_wait(&a->cond, &a->lock);
        if (!a->stop) { /* sleep until the round is due */
            struct timespec due;
            deadline_in(&due, b->sync_interval_ms);
            while (!a->stop && pthread_cond_timedwait(&a->cond, &a->lock, &due) != ETIMEDOUT) {}
        }
        bool stopping = a->stop;
        if (!stopping) { /* the training thread copies at its next step boundary */
            set_phase(a, ASYNC_WANT);
            while (!a->stop && atomic_load(&a->phase) == ASYNC_WANT) pthread_cond_wait(&a->cond, &a->lock);
            stopping = atomic_load(&a->phase) == ASYNC_WANT; /* training ended first */
        }
        if (stopping) { /* async_stop copies the final parameters */
            while (!a->final_copied) pthread_cond_wait(&a->cond, &a->lock);
        }
        write_vote(a, vote, t, stopping);
        set_phase(a, ASYNC_TAKEN);
        pthread_mutex_unlock(&a->lock);
        double t0 = lt_now();
        lt_status st = lt_pg_allreduce_sync(a->pg, a->avg, n + 1, t, LT_SUM);
        double took_ms = (lt_now() - t0) * 1000;
        pthread_mutex_lock(&a->lock);
        if (took_ms > a->longest_round_ms) a->longest_round_ms = took_ms;
        if (st != LT_OK) {
            a->error = st;
            snprintf(a->message, sizeof a->message, "bagua async: averaging parameters (round %lld) failed: %s",
                     (long long)a->rounds, lt_pg_error(a->pg));
            break;
        }
        a->rounds++;
        bool anyone_stops = read_vote(a, vote, t);
        if (stopping) break; /* this rank trains no more: nothing to apply */
        set_phase(a, ASYNC_READY); /* avg holds sums: the training thread divides */
        while (!a->stop && atomic_load(&a->phase) == ASYNC_READY) pthread_cond_wait(&a->cond, &a->lock);
        if (anyone_stops) break; /* the ranks that stopped run no more rounds */
        /* training ended with the round unapplied: the next round votes stop */
    }
    set_phase(a, ASYNC_DONE);
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

lt_status async_start(lt_ctx *ctx, lt_run *run, bagua *b) {
    async_state *a = &b->as;
    const lt_flat f = b->flat;
    LT_CHECK(lt_run_new_group(run, NULL, "bagua-async", &a->pg));
    size_t es = lt_dtype_size(f.param_dtype);
    a->k = lt_run_kernels(run);
    a->kc = lt_run_kernel_ctx(run);
    LT_CHECK(lt_run_alloc(run, f.count * es, &a->snap));
    LT_CHECK(lt_run_alloc(run, (f.count + 1) * es, &a->avg));
    pthread_mutex_init(&a->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->cond, &ca);
    pthread_condattr_destroy(&ca);
    atomic_store(&a->phase, ASYNC_PAUSED);
    if (pthread_create(&a->thread, NULL, async_main, b)) {
        pthread_cond_destroy(&a->cond);
        pthread_mutex_destroy(&a->lock);
        lt_set_error(ctx, "bagua async: cannot start the averaging thread");
        return LT_ERR_IO;
    }
    a->started = true;
    return LT_OK;
}

lt_status async_after_step(lt_ctx *ctx, lt_run *run, bagua *b, int64_t steps_taken) {
    async_state *a = &b->as;
    if (!a->started) return LT_OK;
    double now = lt_now(); /* the slowest step so far bounds async_stop's wait */
    if (a->last_step_at > 0 && (now - a->last_step_at) * 1000 > a->longest_step_ms)
        a->longest_step_ms = (now - a->last_step_at) * 1000;
    a->last_step_at = now;
    if (steps_taken < b->warmup_steps) return LT_OK;
    int phase = atomic_load(&a->phase);
    if (phase == ASYNC_PAUSED) { /* warm-up over: rounds begin */
        pthread_mutex_lock(&a->lock);
        set_phase(a, ASYNC_IDLE);
        pthread_mutex_unlock(&a->lock);
        return LT_OK;
    }
    if (phase == ASYNC_DONE && a->error != LT_OK) {
        lt_set_error(ctx, "%s", a->message);
        return a->error;
    }
    if (phase != ASYNC_WANT && phase != ASYNC_READY) return LT_OK;
    const lt_kernels *k = lt_run_kernels(run);
    lt_ctx *kc = lt_run_kernel_ctx(run);
    int64_t n = (int64_t)b->flat.count;
    lt_dtype t = b->flat.param_dtype;
    if (phase == ASYNC_WANT) {
        k->axpby(kc, t, n, 1.0, b->flat.params, 0.0, a->snap);
        k->axpby(kc, t, n, 1.0, b->flat.params, 0.0, a->avg);
    } else { /* params += sum / world - snap */
        k->axpby(kc, t, n, -1.0, a->snap, 1.0, b->flat.params);
        k->axpby(kc, t, n, 1.0 / lt_pg_size(a->pg), a->avg, 1.0, b->flat.params);
        lt_run_params_changed(run);
    }
    LT_CHECK(lt_run_synchronize(run));
    pthread_mutex_lock(&a->lock);
    set_phase(a, phase == ASYNC_WANT ? ASYNC_TAKEN : ASYNC_IDLE);
    pthread_mutex_unlock(&a->lock);
    return LT_OK;
}

lt_status async_stop(lt_ctx *ctx, lt_run *run, bagua *b) {
    async_state *a = &b->as;
    if (!a->started) return LT_OK;
    /* The last round: the peers' threads join it within a sync interval and
     * a step (their step boundary serves the snapshot), and its transfer
     * takes about what the longest round took. */
    double t0 = lt_now();
    pthread_mutex_lock(&a->lock);
    int64_t limit_ms = 2 * b->sync_interval_ms + (int64_t)a->longest_round_ms + 2 * (int64_t)a->longest_step_ms;
    struct timespec limit;
    deadline_in(&limit, limit_ms);
    bool late = false;
    a->stop = true;
    pthread_cond_broadcast(&a->cond);
    while (atomic_load(&a->phase) == ASYNC_TAKEN && !late) /* a round in flight owns the buffers */
        late = pthread_cond_timedwait(&a->cond, &a->lock, &limit) == ETIMEDOUT;
    lt_status st = LT_OK;
    if (!late && atomic_load(&a->phase) != ASYNC_DONE) st = copy_params(run, b);
    a->final_copied = true;
    pthread_cond_broadcast(&a->cond);
    while (atomic_load(&a->phase) != ASYNC_DONE && !late)
        late = pthread_cond_timedwait(&a->cond, &a->lock, &limit) == ETIMEDOUT;
    pthread_mutex_unlock(&a->lock);
    if (late) lt_pg_abort(a->pg); /* a peer never came to the last round: fail it now */
    pthread_join(a->thread, NULL);
    a->started = false;
    pthread_cond_destroy(&a->cond);
    pthread_mutex_destroy(&a->lock);
    if (ctx)
        lt_log(ctx, LT_LOG_INFO, "bagua async: %lld averaging rounds; the thread stopped in %.0f ms (limit %lld ms)%s",
               (long long)a->rounds, (lt_now() - t0) * 1000, (long long)limit_ms,
               late ? " after aborting its last round (a peer never joined it)" : "");
    if (st != LT_OK) return st;
    if (a->error != LT_OK && !late && ctx) {
        lt_set_error(ctx, "%s", a->message);
        return a->error;
    }
    return LT_OK;
}

void async_free(lt_run *run, bagua *b) {
    async_state *a = &b->as;
    if (a->started) async_stop(NULL, run, b);
    if (a->pg) lt_pg_destroy(a->pg);
    if (a->snap) lt_run_free(run, a->snap);
    if (a->avg) lt_run_free(run, a->avg);
    a->pg = NULL;
    a->snap = a->avg = NULL;
}
