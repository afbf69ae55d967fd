/* The training loop, top to bottom: forward, backward + reduce, update. */
#include <math.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include "trainer_internal.h"
#include "replicas.h"
#include "dist/process_group.h"

static lt_status log_metric_cb(void *user, const char *name, double value, double weight,
                               unsigned flags) {
    lt_run *r = user;
    if (r->drop_metrics) return LT_OK;
    if ((flags & LT_LOG_RANK_ZERO_ONLY) && r->world.global_rank != 0) return LT_OK;
    static const char *const loops[] = {"?", "training", "validation", "test"};
    int now = r->metrics.stage;
    lt_status st = lt_metrics_log(&r->metrics, name, value, weight, flags);
    if (st == LT_ERR_INVALID)
        lt_set_error(NULL, "metric name '%s' is longer than %d bytes", name, LT_METRIC_NAME - 1);
    else if (st == LT_ERR_MISMATCH) {
        const lt_metric *m = lt_metrics_find(&r->metrics, name);
        int was = m && m->stage >= 1 && m->stage <= 3 ? m->stage : 0;
        lt_set_error(NULL, "metric '%s' is logged in the %s loop and in the %s loop; give each loop "
                     "its own name (train_loss, val_loss): metrics.csv keeps one column per name",
                     name, loops[was], loops[now >= 1 && now <= 3 ? now : 0]);
    } else if (st != LT_OK)
        lt_set_error(NULL, "out of memory logging metric '%s'", name);
    return st;
}

static lt_status reduce_cb(void *user, double *buf, size_t n) {
    lt_run *r = user;
    lt_status st = LT_STRAT(r)->reduce(&r->strategy.ctx, r, buf, n, LT_F64, LT_SUM);
    if (st != LT_OK) lt_run_hook_failed(r, &r->strategy, "reduce (sync_dist metrics)", st);
    return st;
}

/* A limit in [0, 1] is a fraction of the batches, above 1 a count, below 0
 * the count of an integer literal (options.h; Lightning's int: 1 = one).
 * A count is compared as a double before it becomes an integer: 1e20 (past
 * int64) means all n batches, as Lightning's int(1e20) does, never a
 * wrapped-around negative; so does a NaN, which validation refuses anyway. */
int64_t lt_limit_batches(int64_t n, double limit) {
    if (limit < 0) limit = -limit; /* an integer count (options.h), 1 included */
    else if (limit <= 1.0) return (int64_t)floor((double)n * limit + 1e-9);
    return limit < (double)n ? (int64_t)limit : n;
}

/* Batches one training epoch takes: the loader's, cut by limit_train_batches. */
static int64_t train_batches(const lt_trainer *t) {
    return lt_limit_batches(lt_loader_num_batches(t->train_loader), t->opt.loop.limit_train);
}

/* Starts a step on a batch: inputs copied into the step's device arena, or,
 * where device memory is host memory, read in the loader's slot itself: the
 * trainer holds that slot until it asks for the next batch, after this
 * step (batch_loader.c), and a model that writes its inputs only changes a
 * slot the loader refills anyway. */
static lt_status begin_step(lt_run *r, const lt_batch_view *b, bool training, uint64_t rand_offset) {
    lt_step *s = &r->step;
    if (r->model->master_flat && r->compute_version != r->params_version) {
        lt_model_refresh_compute(r->model); /* the master parameters moved */
        r->compute_version = r->params_version;
    }
    lt_step_reset(s, training, r->global_step, r->epoch, r->seed, rand_offset);
    s->log_fn = log_metric_cb;
    s->log_user = r;
    s->run = r;
    s->batch_size = b->rows;
    s->ninputs = b->nfields;
    for (int f = 0; f < b->nfields; f++) {
        const lt_field_info *fi = &b->info[f];
        int64_t shape[LT_MAX_DIMS] = {b->rows};
        int nd = 1;
        for (int i = 0; i < fi->ndim && nd < LT_MAX_DIMS; i++) shape[nd++] = fi->shape[i];
        size_t bytes = (size_t)b->rows * lt_dtype_size((lt_dtype)fi->dtype);
        for (int i = 1; i < nd; i++) bytes *= (size_t)shape[i];
        void *dev = b->field[f];
        if (!r->inputs_in_place) {
            dev = lt_step_scratch(s, bytes);
            if (!dev) return lt_run_fail(r, s->status, "%s", s->error);
            lt_status st = LT_ACC(r)->copy(&r->accel.ctx, dev, b->field[f], bytes, LT_COPY_H2D);
            if (st != LT_OK) return lt_run_hook_failed(r, &r->accel, "copy", st);
        }
        lt_dtype ft = (lt_dtype)fi->dtype;
        /* Floating fields enter in the compute dtype (f32 images under 64-true). */
        if (ft >= LT_F32 && ft <= LT_BF16 && ft != r->model->dtype) {
            int64_t n = (int64_t)(bytes / lt_dtype_size(ft));
            void *cast = lt_step_scratch(s, (size_t)n * lt_dtype_size(r->model->dtype));
            if (!cast) return lt_run_fail(r, s->status, "%s", s->error);
            r->model->k->cast(&r->accel.ctx, r->model->dtype, cast, ft, dev, n);
            dev = cast;
            ft = r->model->dtype;
        }
        s->inputs[f] = lt_step_wrap(s, dev, ft, nd, shape);
    }
    return LT_OK;
}

static lt_status step_failed(lt_run *r, const char *what) {
    const char *msg = r->step.error[0] ? r->step.error : lt_last_error(&r->module.ctx);
    return lt_run_fail(r, r->step.status ? r->step.status : LT_ERR_PLUGIN, "model '%s': %s: %s",
                       r->module.ctx.name, what, *msg ? msg : "failed without a message");
}

/* Forward and backward of one micro-batch; returns the loss value. */
static lt_status train_micro(lt_trainer *t, const lt_batch_view *b, int64_t micro, double *loss_value) {
    lt_run *r = &t->run;
    uint64_t offset = ((uint64_t)r->global_step * (uint64_t)r->accumulate + (uint64_t)micro) << 32;
    LT_CHECK(begin_step(r, b, true, offset));
    lt_tensor *loss = NULL;
    lt_status st = LT_STRAT(r)->training_step(&r->strategy.ctx, r, &r->step, &loss);
    if (st != LT_OK || r->step.status != LT_OK || !loss) {
        if (!r->step.status && st == LT_OK) lt_step_fail(&r->step, "training_step returned no loss");
        if (!r->step.status) r->step.status = st;
        return step_failed(r, "training_step");
    }
    double scale = 1.0;
    st = LT_PREC(r)->scale_loss(&r->precision.ctx, &scale);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->precision, "scale_loss", st);
    st = LT_STRAT(r)->on_backward_start(&r->strategy.ctx, r, r->sync_grads);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->strategy, "on_backward_start", st);
    *loss_value = lt_item(&r->step, loss);
    /* A deferred unscale (lt_run_defer_unscale) holds until backward writes
     * new gradients: lt_run_master_grads after the step still gets its own. */
    r->model->grads_deferred = false;
    if (lt_step_backward(&r->step, loss, scale / (double)r->accumulate) != LT_OK) {
        if (r->backward_hook_failed) return r->step.status;
        return step_failed(r, "backward");
    }
    return LT_OK;
}

static lt_status optimizer_step(lt_trainer *t) {
    lt_run *r = &t->run;
    lt_status st = LT_STRAT(r)->before_optimizer_step(&r->strategy.ctx, r);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->strategy, "before_optimizer_step", st);
    bool finite = true;
    st = LT_PREC(r)->unscale_and_check(&r->precision.ctx, r, &finite);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->precision, "unscale_and_check", st);
    lt_model *m = r->model;
    if (finite) {
        double clip = t->opt.loop.clip_val;
        /* Clipping reads the master gradients, and so may a strategy's own
         * optimizer_step, through a pointer kept from lt_run_master_grads
         * (ABI 1.5-1.7), or any hook of a strategy built before 1.8, which
         * was promised them filled every step: a deferred unscale is
         * written out for them. */
        bool own_step = !lt_run_optimizer_step_is_default(r);
        if (clip > 0 || own_step || r->strategy.desc->abi_minor < 8) lt_model_unscale_grads(m);
        void *g = lt_model_opt_grads(m); /* true-scale gradients (master ones in mixed precision) */
        if (clip > 0 && t->opt.loop.clip_by_value) lt_clip_grad_value(g, m->total, lt_model_opt_dtype(m), clip, m->k, m->kctx);
        else if (clip > 0) lt_clip_grad_norm(g, m->total, lt_model_opt_dtype(m), clip, m->k, m->kctx);
        lt_optim_begin(&r->optim, r->epoch); /* this step's learning rate */
        st = LT_STRAT(r)->optimizer_step(&r->strategy.ctx, r);
        lt_optim_end(&r->optim);
        r->params_version++;
        /* The one pass wrote the compute copy, unless a strategy's own step
         * wrote the parameters after it: that one's is cast again; so is a
         * strategy's built before 1.4, which may write them in
         * after_optimizer_step with no lt_run_params_changed to say so. */
        if (!own_step && r->strategy.desc->abi_minor >= 4 && r->fused_version == r->params_version)
            r->compute_version = r->params_version;
        if (st != LT_OK) return lt_run_hook_failed(r, &r->strategy, "optimizer_step", st);
    }
    r->fused_version = 0;
    st = LT_PREC(r)->update(&r->precision.ctx, !finite);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->precision, "update", st);
    st = LT_STRAT(r)->after_optimizer_step(&r->strategy.ctx, r);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->strategy, "after_optimizer_step", st);
    r->global_step++;
    if (!r->first_step_logged) { /* start-up benches measure to here (bench/run_startup_bench.sh) */
        r->first_step_logged = true;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        lt_log(NULL, LT_LOG_DEBUG, "first optimizer step done at %lld.%06ld (unix time)", (long long)now.tv_sec,
               now.tv_nsec / 1000);
    }
    if (r->status_slot) {
        r->status_slot->global_step = r->global_step;
        r->status_slot->epoch = r->epoch;
    }
    return LT_OK;
}

static bool reached_max_steps(const lt_trainer *t) {
    return t->opt.loop.max_steps >= 0 && t->run.global_step >= t->opt.loop.max_steps;
}

static lt_status call_epoch_hook(lt_run *r, lt_status (*hook)(lt_ctx *, int64_t), const char *name) {
    if (!hook) return LT_OK;
    lt_status st = hook(&r->module.ctx, r->epoch);
    return st == LT_OK ? LT_OK : lt_run_hook_failed(r, &r->module, name, st);
}

static lt_status train_epoch(lt_trainer *t, int64_t *samples) {
    lt_run *r = &t->run;
    int64_t nb = train_batches(t);
    if (lt_loader_start_epoch(t->train_loader, r->epoch) != LT_OK)
        return lt_run_fail(r, LT_ERR_INVALID, "training data, epoch %lld: %s", (long long)r->epoch,
                           lt_loader_error(t->train_loader));
    lt_metrics_begin(&r->metrics, LT_STAGE_FIT);
    LT_CHECK(call_epoch_hook(r, LT_MOD(r)->on_train_epoch_start, "on_train_epoch_start"));
    lt_batch_view b;
    double loss = 0;
    for (int64_t i = 0; i < nb; i++) {
        lt_status st = lt_loader_next(t->train_loader, &b);
        if (st != LT_OK) return lt_run_fail(r, st, "training data, batch %lld: %s", (long long)i, lt_loader_error(t->train_loader));
        if (i < r->batch_in_epoch) continue; /* resumed mid-epoch: already trained on */
        int64_t micro = i % r->accumulate;
        r->sync_grads = micro == r->accumulate - 1 || i == nb - 1;
        if (micro == 0) lt_model_zero_grad(r->model);
        LT_CHECK(train_micro(t, &b, micro, &loss));
        *samples += b.rows;
        r->batch_in_epoch = i + 1;
        if (!r->sync_grads) continue;
        LT_CHECK(optimizer_step(t));
        if (r->global_step % t->opt.loop.log_every == 0) lt_metrics_step_rows(&r->metrics, r->global_step, r->epoch);
        /* A run killed mid-epoch keeps the steps logged up to its last flush. */
        if (r->global_step % t->opt.loop.flush_every == 0) LT_CHECK(lt_logdir_flush(t));
        LT_CHECK(lt_preempt_check(t)); /* the scheduler will stop us: saved, requeued */
        if (t->preempted) break;
        lt_progress_update(t, i + 1, nb, loss, false);
        if (reached_max_steps(t)) break;
    }
    lt_progress_update(t, r->batch_in_epoch, nb, loss, true);
    LT_CHECK(call_epoch_hook(r, LT_MOD(r)->on_train_epoch_end, "on_train_epoch_end"));
    return lt_metrics_end(&r->metrics, r->global_step, r->epoch, reduce_cb, r);
}

lt_status lt_trainer_eval_loop(lt_trainer *t, int stage, lt_loader *l, double limit, bool sanity) {
    lt_run *r = &t->run;
    bool has_hook = stage == LT_STAGE_TEST ? LT_MOD(r)->test_step : LT_MOD(r)->validation_step;
    const char *what = stage == LT_STAGE_TEST ? "test_step" : "validation_step";
    if (!has_hook || !l) return LT_OK;
    int64_t nb = lt_limit_batches(lt_loader_num_batches(l), limit);
    if (sanity && nb > t->opt.loop.num_sanity_val) nb = t->opt.loop.num_sanity_val;
    LT_CHECK(lt_loader_start_epoch(l, 0));
    if (!sanity) lt_metrics_begin(&r->metrics, stage);
    r->drop_metrics = sanity;
    lt_batch_view b;
    for (int64_t i = 0; i < nb; i++) {
        /* Asking for the next batch hands the last one's slot back to the
         * loader, and begin_step's copy out of it may still be queued (a
         * device's H2D is asynchronous); an eval step need not wait for its
         * work, as training's lt_item does. */
        lt_status st = i > 0 && !r->inputs_in_place ? LT_ACC(r)->synchronize(&r->accel.ctx) : LT_OK;
        if (st != LT_OK) {
            r->drop_metrics = false;
            return lt_run_hook_failed(r, &r->accel, "synchronize", st);
        }
        st = lt_loader_next(l, &b);
        if (st != LT_OK) { r->drop_metrics = false; return lt_run_fail(r, st, "evaluation data, batch %lld: %s", (long long)i, lt_loader_error(l)); }
        LT_CHECK(begin_step(r, &b, false, 0));
        st = LT_STRAT(r)->eval_step(&r->strategy.ctx, r, &r->step, (lt_stage)stage);
        if (st != LT_OK || r->step.status != LT_OK) {
            r->drop_metrics = false;
            if (!r->step.status) r->step.status = st;
            return step_failed(r, what);
        }
    }
    r->drop_metrics = false;
    if (sanity) return LT_OK;
    if (stage == LT_STAGE_VALIDATE && nb > 0) t->validated = true;
    LT_CHECK(lt_metrics_end(&r->metrics, r->global_step, r->epoch, reduce_cb, r));
    if (stage == LT_STAGE_VALIDATE)
        return call_epoch_hook(r, LT_MOD(r)->on_validation_epoch_end, "on_validation_epoch_end");
    return LT_OK;
}

/* Checkpoints after validation so the monitored metric is this epoch's. The
 * best score is updated first, so last.safetensors carries it too (a run
 * resumed from last must not let a worse epoch replace best). */
static lt_status epoch_checkpoints(lt_trainer *t) {
    lt_run *r = &t->run;
    if (!t->opt.ckpt.enabled || r->world.global_rank != 0) return LT_OK;
    bool better = false, skip = false;
    const lt_metric *m = lt_monitor_used(t) ? lt_metrics_find(&r->metrics, t->opt.ckpt.monitor) : NULL;
    if (lt_monitor_used(t) && (!m || !m->has_epoch)) LT_CHECK(lt_monitor_missing(t, &skip));
    if (lt_monitor_used(t) && !skip) {
        double v = m->epoch_value;
        /* NaN is never the best (Lightning ranks it below every number), so
         * a diverged epoch cannot take best.safetensors or freeze it. */
        better = !isnan(v) &&
                 (!t->has_best || (t->opt.ckpt.monitor_max ? v > t->best_score : v < t->best_score));
        if (better) {
            t->best_score = v;
            t->has_best = true;
        }
    }
    char path[1200];
    if (t->opt.ckpt.save_last) {
        snprintf(path, sizeof path, "%s/last.safetensors", t->opt.ckpt.dir);
        LT_CHECK(lt_checkpoint_save(t, path));
    }
    if (!better) return LT_OK;
    snprintf(path, sizeof path, "%s/best.safetensors", t->opt.ckpt.dir);
    return lt_checkpoint_save(t, path);
}

static lt_status run_fit(lt_trainer *t) {
    lt_run *r = &t->run;
    LT_CHECK(lt_trainer_setup_worker(t));
    if (t->ckpt_fresh && r->world.global_rank == 0)
        printf("lt: --ckpt-path last: no %s/last.safetensors yet; training starts fresh\n", t->opt.ckpt.dir);
    /* Claimed before anything there is touched; then temp files of killed
     * writers go. An earlier run's last/best are kept at the first save. */
    LT_CHECK(lt_checkpoint_claim_dir(t));
    if (t->opt.ckpt.enabled) lt_checkpoint_clean_temps(t, NULL);
    if (t->ckpt_path[0]) LT_CHECK(lt_checkpoint_load(t, t->ckpt_path, true));
    LT_CHECK(lt_logdir_prepare(t));
    int64_t nb = train_batches(t);
    if (nb < 1) /* nothing would ever advance global_step: fail instead of looping */
        return lt_run_fail(r, LT_ERR_INVALID,
                           "training has no batches: %lld in the data at data.batch_size %lld, "
                           "trainer.limit_train_batches = %s; lower the batch size or raise the limit",
                           (long long)lt_loader_num_batches(t->train_loader), (long long)t->opt.data.batch_size,
                           t->opt.loop.limit_train_said);
    if (r->batch_in_epoch > nb && t->world_changed) r->batch_in_epoch = nb; /* that epoch's samples are done */
    if (r->batch_in_epoch > nb)
        return lt_run_fail(r, LT_ERR_MISMATCH,
                           "--ckpt-path %s stopped after batch %lld of its epoch, but this run has %lld "
                           "batches per epoch; resume with the saved run's data.batch_size and "
                           "trainer.limit_train_batches", t->ckpt_path, (long long)r->batch_in_epoch,
                           (long long)nb);
    LT_CHECK(lt_monitor_check(t, nb));
    /* The last, partial accumulation window of an epoch steps too. */
    r->optim.steps_per_epoch = (nb + r->accumulate - 1) / r->accumulate;
    r->optim.total_steps = t->opt.loop.max_steps >= 0 ? t->opt.loop.max_steps : r->optim.steps_per_epoch * t->opt.loop.max_epochs;
    if (r->status_slot) r->status_slot->phase = LT_PHASE_TRAIN;
    lt_status st = LT_STRAT(r)->on_train_start(&r->strategy.ctx, r);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->strategy, "on_train_start", st);
    if (t->opt.loop.num_sanity_val > 0 && r->global_step == 0)
        LT_CHECK(lt_trainer_eval_loop(t, LT_STAGE_VALIDATE, t->val_loader, t->opt.loop.limit_val, true));
    /* A fit with nothing left to do (a resumed run already at its limit,
     * max_epochs = 0) says so instead of going quietly on to test. */
    bool done_steps = reached_max_steps(t) && r->epoch >= t->opt.loop.min_epochs;
    if ((r->epoch >= t->opt.loop.max_epochs || done_steps) && r->world.global_rank == 0)
        printf("lt: nothing to train: the run is at epoch %lld, step %lld, and trainer.%s = %lld; "
               "raise it to train on\n", (long long)r->epoch, (long long)r->global_step,
               done_steps ? "max_steps" : "max_epochs",
               (long long)(done_steps ? t->opt.loop.max_steps : t->opt.loop.max_epochs));
    for (; r->epoch < t->opt.loop.max_epochs; r->epoch++) {
        if (reached_max_steps(t) && r->epoch >= t->opt.loop.min_epochs) break;
        double t0 = lt_now();
        int64_t samples = 0;
        LT_CHECK(train_epoch(t, &samples));
        if (t->preempted) return lt_logdir_flush(t);
        double secs = lt_now() - t0;
        bool stopping = reached_max_steps(t) && r->batch_in_epoch < nb;
        if (!stopping && t->opt.loop.check_val_every > 0 && (r->epoch + 1) % t->opt.loop.check_val_every == 0)
            LT_CHECK(lt_trainer_eval_loop(t, LT_STAGE_VALIDATE, t->val_loader, t->opt.loop.limit_val, false));
        lt_progress_end_epoch(t, secs, samples);
        if (stopping) break; /* mid-epoch: the last checkpoint keeps batch_in_epoch */
        r->batch_in_epoch = 0;
        LT_CHECK(epoch_checkpoints(t));
        LT_CHECK(lt_logdir_flush(t));
    }
    if (t->opt.ckpt.enabled && r->world.global_rank == 0 && t->opt.ckpt.save_last && r->batch_in_epoch > 0) {
        char path[1200];
        snprintf(path, sizeof path, "%s/last.safetensors", t->opt.ckpt.dir);
        LT_CHECK(lt_checkpoint_save(t, path));
    }
    LT_CHECK(lt_logdir_flush(t));
    t->fit_done = true;
    return LT_OK;
}

lt_status lt_trainer_fit(lt_trainer *t) {
    lt_run *r = &t->run;
    /* Before ddp_spawn forks, so its workers and its own evaluation agree. */
    LT_CHECK(lt_checkpoint_resolve(t, true));
    if (r->launch == LT_LAUNCH_SPAWN && !t->in_spawn_child) {
        bool external = false;
        LT_ENV(r)->creates_processes_externally(&r->env.ctx, &external);
        if (!external) return lt_trainer_fit_spawn(t);
    }
    lt_status st = run_fit(t);
    /* A failure during setup keeps phase SETUP so ltrun can say so. */
    if (r->status_slot && (st == LT_OK || r->status_slot->phase == LT_PHASE_TRAIN))
        r->status_slot->phase = st != LT_OK ? LT_PHASE_FAILED : t->preempted ? LT_PHASE_STOPPED : LT_PHASE_DONE;
    /* A failed rank aborts its groups first: its peers' collectives fail at
     * once (the group ends within seconds) and on_train_end's own
     * communication cannot wait on ranks that are still training. */
    if (st != LT_OK && r->default_pg) {
        /* A failure of this rank's own (not a collective that failed under
         * it) is posted first, so its peers report it instead of the
         * closed connection they see. */
        if (!lt_pg_failed(r->default_pg)) lt_pg_post_failure(r->default_pg, r->error);
        /* ltrun stops the other ranks as soon as one exits, so this rank
         * may not live to return its error to main: the slot gets it now. */
        if (r->status_slot) lt_status_slot_set_error(r->status_slot, st, r->error);
        lt_pg_abort(r->default_pg);
    }
    /* What a failed run logged up to its failure is kept (after the abort:
     * the peers need not wait for a file). */
    if (st != LT_OK) lt_logdir_flush_after_failure(t);
    if (r->strategy.loaded && t->worker_ready) {
        lt_status s2 = LT_STRAT(r)->on_train_end(&r->strategy.ctx, r);
        if (st == LT_OK && s2 != LT_OK) st = lt_run_hook_failed(r, &r->strategy, "on_train_end", s2);
    }
    /* Fit writes no more checkpoints: another trainer of this program (or
     * another run) may have the directory now. */
    lt_checkpoint_release_dir(t);
    return st;
}

static lt_status run_eval(lt_trainer *t, int stage) {
    if (t->preempted) { /* the job is requeued: its resumed run evaluates */
        lt_log(NULL, LT_LOG_INFO, "%s skipped: the run was pre-empted", stage == LT_STAGE_TEST ? "test" : "validation");
        return LT_OK;
    }
    LT_CHECK(lt_checkpoint_resolve(t, false));
    LT_CHECK(lt_trainer_setup_worker(t));
    lt_run *r = &t->run;
    lt_loader *l = stage == LT_STAGE_TEST ? t->test_loader : t->val_loader;
    const char *what = stage == LT_STAGE_TEST ? "test_step" : "validation_step";
    if (!(stage == LT_STAGE_TEST ? LT_MOD(r)->test_step : LT_MOD(r)->validation_step))
        return lt_run_fail(r, LT_ERR_UNSUPPORTED, "model '%s' has no %s", r->module.ctx.name, what);
    if (!l) return lt_run_fail(r, LT_ERR_NOT_FOUND, "no %s data: the module's setup_data gave none", stage == LT_STAGE_TEST ? "test" : "validation");
    if (t->ckpt_path[0] && !t->fit_done) LT_CHECK(lt_checkpoint_load(t, t->ckpt_path, false));
    LT_CHECK(lt_trainer_eval_loop(t, stage, l, stage == LT_STAGE_TEST ? t->opt.loop.limit_test : t->opt.loop.limit_val, false));
    if (r->world.global_rank == 0) {
        printf("lt: %s results:", stage == LT_STAGE_TEST ? "test" : "validation");
        for (int i = 0; i < r->metrics.n; i++)
            if (r->metrics.m[i].stage == stage && r->metrics.m[i].has_epoch)
                printf(" %s %.4f", r->metrics.m[i].name, r->metrics.m[i].epoch_value);
        printf("\n");
        fflush(stdout);
    }
    return lt_logdir_flush(t);
}

lt_status lt_trainer_validate(lt_trainer *t) { return run_eval(t, LT_STAGE_VALIDATE); }
lt_status lt_trainer_test(lt_trainer *t) { return run_eval(t, LT_STAGE_TEST); }
