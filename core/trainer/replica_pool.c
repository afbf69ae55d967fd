/* Replicas: made once per run with their threads (lt_run_replicate), a job
 * at a time run on all of them at once, freed each on its own thread. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "run_internal.h"
#include "replicas.h"

lt_status lt_replica_fail(lt_replica *rep, lt_status st, const char *fmt, ...) {
    if (rep->status != LT_OK) return rep->status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rep->error, sizeof rep->error, fmt, ap);
    va_end(ap);
    return rep->status = st;
}

/* Jobs come three times a step, a few milliseconds apart: a waiter spins
 * briefly before it sleeps, so a job starts in a microsecond instead of a
 * futex wake-up (tens of microseconds), and sleeps when training pauses. */
#define SPIN_ROUNDS 4000

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *replica_main(void *p) {
    lt_replica *rep = p;
    lt_replica_set *rs = rep->set;
    uint64_t seen = 0;
    for (;;) {
        for (int i = 0; i < SPIN_ROUNDS && __atomic_load_n(&rs->gen, __ATOMIC_ACQUIRE) == seen &&
                        !__atomic_load_n(&rs->quit, __ATOMIC_ACQUIRE); i++)
            cpu_relax();
        pthread_mutex_lock(&rs->mu);
        while (rs->gen == seen && !rs->quit) pthread_cond_wait(&rs->go, &rs->mu);
        if (rs->gen == seen) { /* quit, no job left */
            pthread_mutex_unlock(&rs->mu);
            return NULL;
        }
        seen = rs->gen;
        lt_replica_job job = rs->job;
        void *arg = rs->arg;
        pthread_mutex_unlock(&rs->mu);
        job(rep, arg);
        pthread_mutex_lock(&rs->mu);
        if (__atomic_sub_fetch(&rs->pending, 1, __ATOMIC_RELEASE) == 0) pthread_cond_signal(&rs->done);
        pthread_mutex_unlock(&rs->mu);
    }
}

lt_status lt_replicas_run(lt_replica_set *rs, lt_replica_job job, void *arg, const char *what) {
    for (int i = 0; i < rs->count; i++) {
        rs->rep[i].status = LT_OK;
        rs->rep[i].error[0] = 0;
    }
    pthread_mutex_lock(&rs->mu);
    int workers = 0;
    for (int i = 1; i < rs->count; i++) workers += rs->rep[i].thread_started;
    rs->job = job;
    rs->arg = arg;
    rs->pending = workers;
    __atomic_add_fetch(&rs->gen, 1, __ATOMIC_RELEASE); /* last: a spinning worker may start at once */
    pthread_cond_broadcast(&rs->go);
    pthread_mutex_unlock(&rs->mu);
    job(&rs->rep[0], arg);
    for (int i = 0; i < SPIN_ROUNDS && __atomic_load_n(&rs->pending, __ATOMIC_ACQUIRE) > 0; i++) cpu_relax();
    pthread_mutex_lock(&rs->mu);
    while (rs->pending > 0) pthread_cond_wait(&rs->done, &rs->mu);
    pthread_mutex_unlock(&rs->mu);
    for (int i = 0; i < rs->count; i++) {
        lt_replica *rep = &rs->rep[i];
        if (rep->status != LT_OK)
            return lt_run_fail(rs->run, rep->status, "replica %d (device %d): %s%s%s", i, rep->device,
                               rep->error[0] ? "" : what, rep->error[0] ? "" : " ",
                               rep->error[0] ? rep->error : "failed without a message");
    }
    return LT_OK;
}

lt_status lt_replica_refresh_params(lt_replica *rep) {
    lt_run *r = rep->set->run;
    if (!rep->set->copied || rep->index == 0 || rep->params_version == r->params_version) return LT_OK;
    const lt_accelerator_desc *a = LT_ACC(r);
    size_t bytes = rep->model->total * lt_dtype_size(rep->model->dtype);
    lt_status st = a->copy(&rep->accel_ctx, rep->model->params_flat, r->model->params_flat, bytes, LT_COPY_D2D);
    if (st == LT_OK) st = a->synchronize(&rep->accel_ctx);
    if (st != LT_OK)
        return lt_replica_fail(rep, st, "copying the root's parameters: %s", lt_last_error(&rep->accel_ctx));
    rep->params_version = r->params_version;
    return LT_OK;
}

/* Runs on each new replica's own thread: a GPU binds the thread to its
 * device in setup, and the cpu accelerator pins it to a core. */
static void setup_job(lt_replica *rep, void *arg) {
    (void)arg;
    if (rep->index == 0) return;
    lt_run *r = rep->set->run;
    const lt_accelerator_desc *a = LT_ACC(r);
    lt_status st = a->setup(&rep->accel_ctx, rep->device);
    if (st != LT_OK) {
        lt_replica_fail(rep, st, "accelerator '%s': setup of device %d failed: %s", rep->accel_ctx.name,
                        rep->device, lt_last_error(&rep->accel_ctx));
        return;
    }
    rep->accel_ready = true;
    const lt_kernels *k;
    st = a->get_kernels(&rep->accel_ctx, &k);
    if (st != LT_OK) {
        lt_replica_fail(rep, st, "accelerator '%s': get_kernels failed: %s", rep->accel_ctx.name,
                        lt_last_error(&rep->accel_ctx));
        return;
    }
    rep->model = lt_model_new(r->model->dtype, r->accel.desc, &rep->accel_ctx, k);
    if (!rep->model) { lt_replica_fail(rep, LT_ERR_NOMEM, "out of memory"); return; }
    rep->module_ready = true; /* teardown is owed from the first call of init */
    st = LT_MOD(r)->init(&rep->module_ctx, rep->model);
    if (st == LT_OK && rep->model->status != LT_OK) st = rep->model->status;
    if (st != LT_OK) {
        lt_replica_fail(rep, st, "model '%s': init: %s", rep->module_ctx.name,
                        rep->model->error[0] ? rep->model->error : lt_last_error(&rep->module_ctx));
        return;
    }
    st = lt_model_finalize_replica(rep->model, r->model, !rep->set->copied);
    if (st != LT_OK) {
        lt_replica_fail(rep, st, "model '%s': %s", rep->module_ctx.name, rep->model->error);
        return;
    }
    lt_step_init(&rep->step, rep->model);
    rep->step_ready = true;
    rep->params_version = r->params_version - 1; /* copied: fetch before the first step */
    rep->model->grad_ready = lt_replica_grad_ready;
    rep->model->grad_ready_user = rep;
}

static void teardown_job(lt_replica *rep, void *arg) {
    (void)arg;
    lt_run *r = rep->set->run;
    if (rep->step_ready) lt_step_destroy(&rep->step);
    rep->step_ready = false;
    free(rep->logs);
    rep->logs = NULL;
    if (rep->index == 0) return; /* the run's model, module and accelerator */
    if (rep->module_ready && LT_MOD(r)->teardown) LT_MOD(r)->teardown(&rep->module_ctx);
    rep->module_ready = false;
    lt_model_free(rep->model);
    rep->model = NULL;
    if (rep->accel_ready) LT_ACC(r)->teardown(&rep->accel_ctx);
    rep->accel_ready = false;
}

void lt_replicas_destroy(lt_replica_set *rs) {
    if (!rs) return;
    lt_replicas_run(rs, teardown_job, NULL, "teardown");
    pthread_mutex_lock(&rs->mu);
    __atomic_store_n(&rs->quit, true, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&rs->go);
    pthread_mutex_unlock(&rs->mu);
    for (int i = 1; i < rs->count; i++)
        if (rs->rep[i].thread_started) pthread_join(rs->rep[i].thread, NULL);
    pthread_mutex_destroy(&rs->mu);
    pthread_cond_destroy(&rs->go);
    pthread_cond_destroy(&rs->done);
    pthread_mutex_destroy(&rs->coll_mu);
    pthread_cond_destroy(&rs->coll_cv);
    free(rs->coll);
    free(rs->coll_here);
    free(rs->unreported);
    free(rs->queue);
    free(rs->rep);
    free(rs);
}

static lt_status choose_sharing(lt_run *r, lt_replica_params params, bool *copied) {
    bool host = false;
    if (LT_ACC(r)->memory_is_host && LT_ACC(r)->memory_is_host(&r->accel.ctx, &host) != LT_OK) host = false;
    if (params == LT_REPLICA_PARAMS_SHARED && !host) {
        lt_set_error(NULL, "replicas cannot share parameters on accelerator '%s': its memory is not host "
                     "memory; use copied (or auto) parameters", r->accel.ctx.name);
        return LT_ERR_UNSUPPORTED;
    }
    if (params > LT_REPLICA_PARAMS_COPIED || params < LT_REPLICA_PARAMS_AUTO) {
        lt_set_error(NULL, "lt_run_replicate: unknown parameter mode %d; use LT_REPLICA_PARAMS_AUTO", (int)params);
        return LT_ERR_INVALID;
    }
    *copied = params == LT_REPLICA_PARAMS_COPIED || (params == LT_REPLICA_PARAMS_AUTO && !host);
    return LT_OK;
}

lt_status lt_run_replicate(lt_run *r, int count, lt_replica_params params) {
    if (r->replicas) {
        lt_set_error(NULL, "lt_run_replicate called twice; call it once, from configure_ddp");
        return LT_ERR_STATE;
    }
    if (!r->model) {
        lt_set_error(NULL, "lt_run_replicate before the model exists; call it from configure_ddp");
        return LT_ERR_STATE;
    }
    if (count < 1 || count > r->devices.count) {
        lt_set_error(NULL, "%d replicas asked for, but this process has %d device(s) (trainer.devices); "
                     "ask for 1 to %d", count, r->devices.count, r->devices.count);
        return LT_ERR_INVALID;
    }
    if (count == 1) return LT_OK;
    if (r->batch_size < count || (r->val_batch_size > 0 && r->val_batch_size < count)) {
        lt_set_error(NULL, "data.batch_size = %lld (val_batch_size %lld) on %d replicas: every replica needs "
                     "at least one sample of each batch; raise the batch size or lower trainer.devices",
                     (long long)r->batch_size, (long long)r->val_batch_size, count);
        return LT_ERR_INVALID;
    }
    bool copied = false;
    LT_CHECK(choose_sharing(r, params, &copied));
    lt_replica_set *rs = calloc(1, sizeof *rs);
    lt_replica *rep = calloc((size_t)count, sizeof *rep);
    lt_replica_coll *coll = calloc((size_t)count, sizeof *coll);
    bool *coll_here = calloc((size_t)count, sizeof *coll_here);
    int np = r->model->nparams;
    _Atomic int *unreported = calloc((size_t)np, sizeof *unreported), *queue = calloc((size_t)np, sizeof *queue);
    if (!rs || !rep || !coll || !coll_here || !unreported || !queue) {
        free(rs);
        free(rep);
        free(coll);
        free(coll_here);
        free(unreported);
        free(queue);
        lt_set_error(NULL, "out of memory for %d replicas", count);
        return LT_ERR_NOMEM;
    }
    rs->run = r;
    rs->rep = rep;
    rs->count = count;
    rs->copied = copied;
    pthread_mutex_init(&rs->mu, NULL);
    pthread_cond_init(&rs->go, NULL);
    pthread_cond_init(&rs->done, NULL);
    rs->coll = coll;
    rs->coll_here = coll_here;
    rs->unreported = unreported;
    rs->queue = queue;
    pthread_mutex_init(&rs->coll_mu, NULL);
    pthread_cond_init(&rs->coll_cv, NULL);
    r->replicas = rs;
    for (int i = 0; i < count; i++) {
        rep[i].index = i;
        rep[i].device = r->devices.ids[i];
        rep[i].set = rs;
        rep[i].status = LT_OK;
    }
    rep[0].model = r->model;
    lt_step_init(&rep[0].step, r->model);
    rep[0].step_ready = true;
    for (int i = 1; i < count; i++) {
        /* The run's contexts without their state: the same plugin, config
         * and overrides, a state slot of the replica's own. */
        rep[i].accel_ctx = r->accel.ctx;
        rep[i].accel_ctx.state = NULL;
        memset(rep[i].accel_ctx.keyed, 0, sizeof rep[i].accel_ctx.keyed);
        rep[i].module_ctx = r->module.ctx;
        rep[i].module_ctx.state = NULL;
        memset(rep[i].module_ctx.keyed, 0, sizeof rep[i].module_ctx.keyed);
        if (pthread_create(&rep[i].thread, NULL, replica_main, &rep[i]) != 0) {
            lt_set_error(NULL, "cannot start the thread of replica %d", i);
            return LT_ERR_NOMEM; /* the run frees the set at teardown */
        }
        rep[i].thread_started = true;
    }
    lt_status st = lt_replicas_run(rs, setup_job, NULL, "setup");
    if (st != LT_OK) {
        lt_set_error(NULL, "%s", r->error);
        return st;
    }
    lt_log(NULL, LT_LOG_DEBUG, "%d replicas on devices %d..%d, parameters %s", count, rep[0].device,
           rep[count - 1].device, copied ? "copied" : "shared in place");
    return LT_OK;
}

int lt_run_replica_count(const lt_run *r) { return r->replicas ? r->replicas->count : 1; }
