/* Worker setup (docs/architecture.md "Worker setup"): environment → accelerator → strategy
 * setup_environment → init_dist_connection → module init into flat buffers →
 * precision setup → optimizer → configure_ddp → data. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include "trainer_internal.h"
#include "data/idx_cache.h"

#define ENV_CALL(r, hook, out)                                                          \
    do {                                                                                \
        lt_status s_ = LT_ENV(r)->hook(&(r)->env.ctx, out);                             \
        if (s_ != LT_OK) return lt_run_hook_failed(r, &(r)->env, #hook, s_);           \
    } while (0)

lt_status lt_run_read_world(lt_run *r) {
    lt_world *w = &r->world;
    memset(w, 0, sizeof *w);
    int v;
    w->num_nodes = r->num_nodes;
    w->num_devices = 1;
    if (r->launch == LT_LAUNCH_NONE) {
        w->world_size = 1;
        w->local_world_size = 1;
        w->device = r->devices.ids[0];
        w->num_devices = r->devices.count;
        snprintf(w->main_address, sizeof w->main_address, "127.0.0.1");
        return LT_OK;
    }
    ENV_CALL(r, world_size, &v); w->world_size = v;
    ENV_CALL(r, global_rank, &v); w->global_rank = v;
    ENV_CALL(r, local_rank, &v); w->local_rank = v;
    ENV_CALL(r, node_rank, &v); w->node_rank = v;
    ENV_CALL(r, local_world_size, &v); w->local_world_size = v;
    ENV_CALL(r, main_port, &v); w->main_port = v;
    lt_status st = LT_ENV(r)->main_address(&r->env.ctx, w->main_address, sizeof w->main_address);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->env, "main_address", st);
    if (w->local_rank < 0 || w->local_rank >= r->devices.count)
        return lt_run_fail(r, LT_ERR_INVALID,
                           "local rank %d has no device: trainer.devices gives %d; start one process per device (devices=%d) or fix LOCAL_RANK",
                           w->local_rank, r->devices.count, w->local_world_size);
    w->device = r->devices.ids[w->local_rank];
    if (r->launch == LT_LAUNCH_NODE) { /* one process drives every device of its node */
        w->num_devices = r->devices.count;
        if (w->world_size != w->num_nodes || w->local_world_size != 1)
            return lt_run_fail(r, LT_ERR_MISMATCH,
                               "strategy '%s' runs one process per node, but the environment (%s) reports %d "
                               "process(es) in all and %d on this node for num_nodes = %d; start one process per "
                               "node (torchrun --nproc-per-node 1, srun --ntasks-per-node 1)",
                               r->strategy.ctx.name, r->env.ctx.name, w->world_size, w->local_world_size, w->num_nodes);
    }
    if (w->world_size != w->num_nodes * r->devices.count && r->launch == LT_LAUNCH_SUBPROCESS)
        return lt_run_fail(r, LT_ERR_MISMATCH,
                           "the environment (%s) reports world size %d but num_nodes (%d) x devices (%d) = %d; make them agree",
                           r->env.ctx.name, w->world_size, w->num_nodes, r->devices.count,
                           w->num_nodes * r->devices.count);
    return LT_OK;
}

static bool parse_seed(const char *v, uint64_t *out) {
    char *end;
    errno = 0;
    *out = strtoull(v, &end, 10); /* base 10, as the config validates it */
    return *v && *v != '-' && !*end && !errno;
}

/* seed_everything: one seed for the job, exported as LT_GLOBAL_SEED so every
 * worker a launcher starts uses the same one. A resumed run takes the
 * checkpoint's, so it shuffles and drops out as the original did. */
static lt_status choose_seed(lt_trainer *t, uint64_t *out) {
    lt_run *r = &t->run;
    const char *s = t->opt.loop.seed;
    uint64_t seed = 0;
    bool have = *s != 0;
    if (have && !parse_seed(s, &seed))
        return lt_run_fail(r, LT_ERR_INVALID, "trainer.seed = '%s' (%s): use an integer >= 0, or leave it empty for a random seed",
                           s, t->opt.loop.seed_origin);
    if (t->ckpt_path[0]) {
        uint64_t ck;
        bool found = false; /* a weights-only file has no seed: the run keeps its own */
        LT_CHECK(lt_checkpoint_peek(t, t->ckpt_path, &ck, &found));
        if (found && have && seed != ck)
            lt_log(NULL, LT_LOG_WARN, "trainer.seed = %s but %s was trained with seed %llu: resuming with the checkpoint's",
                   s, t->ckpt_path, (unsigned long long)ck);
        if (found) {
            seed = ck;
            have = true;
        }
    }
    const char *env = getenv("LT_GLOBAL_SEED");
    if (!have && env && *env) {
        if (!parse_seed(env, &seed))
            return lt_run_fail(r, LT_ERR_INVALID, "LT_GLOBAL_SEED = '%s' is not an integer >= 0; unset it or fix it", env);
        have = true;
    }
    if (!have) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = ((uint64_t)ts.tv_nsec ^ (uint64_t)getpid() * 2654435761u) % 4294967296u;
        lt_log(NULL, LT_LOG_INFO, "no seed set (trainer.seed): using %llu", (unsigned long long)seed);
    }
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)seed);
    setenv("LT_GLOBAL_SEED", buf, 1);
    *out = seed;
    return LT_OK;
}

static void grad_ready_cb(void *user, size_t offset, size_t count);

static lt_status setup_model(lt_trainer *t) {
    lt_run *r = &t->run;
    if (!r->module.loaded)
        return lt_run_fail(r, LT_ERR_INVALID, "no model: set [model] name = <module plugin> in the config or --set model.name=...");
    r->dtypes.struct_size = sizeof r->dtypes;
    lt_status st = LT_PREC(r)->dtypes(&r->precision.ctx, &r->dtypes);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->precision, "dtypes", st);
    const lt_kernels *k;
    st = LT_ACC(r)->get_kernels(&r->accel.ctx, &k);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->accel, "get_kernels", st);
    LT_CHECK(lt_precision_check_dtypes(r, k));
    r->model = lt_model_new((lt_dtype)r->dtypes.compute, r->accel.desc, &r->accel.ctx, k);
    if (!r->model) return lt_run_fail(r, LT_ERR_NOMEM, "out of memory");
    r->model->master_dtype = (lt_dtype)r->dtypes.param;
    r->module_started = true; /* init may have made state before failing: teardown frees it */
    st = LT_MOD(r)->init(&r->module.ctx, r->model);
    if (st == LT_OK && r->model->status != LT_OK) st = r->model->status;
    if (st != LT_OK) return lt_run_init_failed(r, &r->module.ctx, r->model, st);
    st = lt_model_finalize(r->model, r->seed);
    if (st != LT_OK) return lt_run_fail(r, st, "model '%s': %s", r->module.ctx.name, r->model->error);
    r->compute_version = r->params_version - 1; /* recast before the first step (ddp's broadcast may move the master) */
    r->model->grad_ready = grad_ready_cb;
    r->model->grad_ready_user = r;
    return lt_step_init(&r->step, r->model);
}

/* Raised from inside backward: remembered, checked after backward returns. */
static void grad_ready_cb(void *user, size_t offset, size_t count) {
    lt_run *r = user;
    if (r->step.status != LT_OK) return;
    lt_status st = LT_STRAT(r)->on_grad_ready(&r->strategy.ctx, r, offset, count, r->sync_grads);
    if (st != LT_OK) {
        lt_run_hook_failed(r, &r->strategy, "on_grad_ready", st);
        lt_step_set_error(&r->step, st, "%s", r->error);
        r->backward_hook_failed = true; /* r->error already says it all */
    }
}

static lt_status setup_optimizer(lt_trainer *t) {
    lt_run *r = &t->run;
    lt_optim_config *o = &r->optim_cfg;
    *o = t->opt.optim.cfg;
    if (t->opt.loop.clip_val > 0 && t->opt.loop.clip_by_value && !LT_KERNELS_HAS(r->model->k, clamp))
        return lt_run_fail(r, LT_ERR_UNSUPPORTED, "trainer.gradient_clip_algorithm = value needs the clamp "
                           "kernel (ABI 1.2), which accelerator '%s' lacks; use norm or rebuild the "
                           "accelerator against lt 1.2 headers", r->accel.ctx.name);
    if (LT_MOD(r)->configure_optimizers) {
        lt_status st = LT_MOD(r)->configure_optimizers(&r->module.ctx, o);
        if (st != LT_OK) return lt_run_hook_failed(r, &r->module, "configure_optimizers", st);
    }
    char err[512];
    if (lt_optim_validate(o, err, sizeof err) != LT_OK) return lt_run_fail(r, LT_ERR_INVALID, "%s", err);

    /* Effective batch and the learning-rate scaling rule (Goyal et al.: linear). */
    int mult = r->world.world_size;
    lt_status st = LT_STRAT(r)->batch_multiplier(&r->strategy.ctx, r, &mult);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->strategy, "batch_multiplier", st);
    int64_t batch = t->opt.data.batch_size;
    int64_t eff = batch * mult * r->accumulate;
    const char *rule = t->opt.optim.lr_scaling; /* none, linear or sqrt: checked by lt_options_read */
    int64_t ref = t->opt.optim.reference_batch > 0 ? t->opt.optim.reference_batch : batch;
    double base = o->lr;
    if (!strcasecmp(rule, "linear")) o->lr = base * (double)eff / (double)ref;
    else if (!strcasecmp(rule, "sqrt")) o->lr = base * sqrt((double)eff / (double)ref);
    if (r->world.global_rank == 0 && !t->quiet)
        printf("lt: effective batch size %lld = %lld per process x %d (%s) x %lld accumulation; lr %g (lr_scaling %s, reference batch %lld, base lr %g)\n",
               (long long)eff, (long long)batch, mult, r->strategy.ctx.name, (long long)r->accumulate,
               o->lr, rule, (long long)ref, base);
    LT_CHECK(lt_optim_init(&r->optim, o, r->model->total, lt_model_opt_dtype(r->model), LT_ACC(r), &r->accel.ctx, r->model->k));
    r->optim.fuse = t->opt.optim.fused;
    if (r->model->master_flat && r->world.global_rank == 0)
        lt_log(NULL, LT_LOG_INFO, "optimizer step: %s",
               lt_model_update_fuses(r->model, &r->optim)
                   ? "one pass (sgd_step_mixed: the gradient cast and the compute-copy refresh folded into sgd)"
                   : !t->opt.optim.fused ? "three passes (optimizer.fused = false)"
                   : r->optim.kind != LT_OPT_SGD ? "three passes (only sgd has a one-pass kernel)"
                   : !LT_KERNELS_HAS(r->model->k, sgd_step_mixed) ? "three passes (the accelerator has no sgd_step_mixed kernel)"
                   : "three passes (sgd_step_mixed takes an fp32 master and an f16 or bf16 compute copy)");
    return LT_OK;
}

static void *host_alloc(void *user, size_t bytes) {
    lt_run *r = user;
    void *p = NULL;
    return LT_ACC(r)->alloc_host(&r->accel.ctx, bytes, &p) == LT_OK ? p : NULL;
}

static void host_free(void *user, void *p) {
    lt_run *r = user;
    LT_ACC(r)->free_host(&r->accel.ctx, p);
}

static lt_status make_loader(lt_trainer *t, const lt_dataset *ds, int64_t batch, bool train,
                             lt_loader **out) {
    lt_run *r = &t->run;
    int shards = r->world.world_size, shard = r->world.global_rank;
    lt_status st = LT_STRAT(r)->sampler_shard(&r->strategy.ctx, r, &shards, &shard);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->strategy, "sampler_shard", st);
    lt_loader_opts o = {
        .struct_size = sizeof o, .batch_size = batch, .num_shards = shards, .shard = shard,
        .shuffle = train && t->opt.data.shuffle, .seed = r->seed, .pad = train,
        .drop_last = train && t->opt.data.drop_last, .prefetch = t->opt.data.prefetch,
        .alloc_host = host_alloc, .free_host = host_free, .alloc_user = r};
    char err[1024];
    st = lt_loader_new(ds, &o, out, err, sizeof err);
    if (st != LT_OK) return lt_run_fail(r, st, "data loader: %s", err);
    return LT_OK;
}

lt_status lt_trainer_split_paths(lt_trainer *t, const char *split, char img[1200], char lab[1200]) {
    const lt_data_options *d = &t->opt.data;
    char err[1024], name[64];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", split);
    lt_status st = lt_idx_find(d->dir, name, img, 1200, err, sizeof err);
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", split);
    if (st == LT_OK) st = lt_idx_find(d->dir, name, lab, 1200, err, sizeof err);
    if (st != LT_OK)
        return lt_run_fail(&t->run, st, "data.dir = %s (%s): %s", d->dir, d->dir_origin, err);
    return LT_OK;
}

/* One split of data.dir, opened through the decoded-image cache. */
static lt_status open_split(lt_trainer *t, const char *split, const char *cache, lt_dataset *out) {
    const lt_data_options *d = &t->opt.data;
    char err[1024], img[1200], lab[1200];
    LT_CHECK(lt_trainer_split_paths(t, split, img, lab));
    lt_status st = lt_idx_dataset_open_cached(img, lab, d->mean, d->std, d->num_classes, cache, out,
                                              err, sizeof err);
    if (st != LT_OK)
        return lt_run_fail(&t->run, st, "data.dir = %s (%s): %s", d->dir, d->dir_origin, err);
    return LT_OK;
}

/* Opens the datasets once per process: ddp_spawn opens them before forking so
 * the workers share the pages. */
lt_status lt_trainer_open_data(lt_trainer *t) {
    lt_run *r = &t->run;
    if (t->data_open) return LT_OK;
    lt_dataset train = {0}, val = {0};
    if (LT_MOD(r)->setup_data) {
        lt_status st = LT_MOD(r)->setup_data(&r->module.ctx, LT_STAGE_FIT, &train, &val);
        if (st != LT_OK) return lt_run_hook_failed(r, &r->module, "setup_data", st);
    }
    const lt_data_options *d = &t->opt.data;
    if (train.iface) {
        t->train_ds = train;
        t->val_ds = val;
        lt_dataset test = {0}, unused = {0};
        lt_status st = LT_MOD(r)->setup_data(&r->module.ctx, LT_STAGE_TEST, &test, &unused);
        if (st != LT_OK) return lt_run_hook_failed(r, &r->module, "setup_data(test)", st);
        if (test.iface) t->test_ds = test;
        t->data_open = true;
        return LT_OK;
    }
    char cache_buf[600];
    const char *cache = lt_idx_cache_dir(d->cache_dir, cache_buf, sizeof cache_buf) ? cache_buf : NULL;
    LT_CHECK(open_split(t, "train", cache, &t->train_base));
    int64_t n = t->train_base.iface->length(t->train_base.self);
    int64_t nval = d->val_split;
    if (nval < 0 || nval >= n)
        return lt_run_fail(r, LT_ERR_INVALID, "data.val_split = %lld must be in [0, %lld) (the training set has %lld samples)",
                           (long long)nval, (long long)n, (long long)n);
    lt_dataset_subset(&t->train_base, 0, n - nval, &t->train_ds);
    if (nval > 0) lt_dataset_subset(&t->train_base, n - nval, nval, &t->val_ds);
    LT_CHECK(open_split(t, "t10k", cache, &t->test_ds));
    t->data_open = true;
    return LT_OK;
}

static lt_status setup_data(lt_trainer *t) {
    LT_CHECK(lt_trainer_open_data(t));
    const lt_data_options *d = &t->opt.data;
    LT_CHECK(make_loader(t, &t->train_ds, d->batch_size, true, &t->train_loader));
    if (t->val_ds.iface) LT_CHECK(make_loader(t, &t->val_ds, d->val_batch_size, false, &t->val_loader));
    if (t->test_ds.iface) LT_CHECK(make_loader(t, &t->test_ds, d->val_batch_size, false, &t->test_loader));
    return LT_OK;
}

lt_status lt_trainer_setup_worker(lt_trainer *t) {
    if (t->worker_ready) return LT_OK;
    lt_run *r = &t->run;
    /* Another go over a half-made setup would make the model, the groups and
     * the module's state again on top of the first ones. */
    if (t->setup_tried)
        return lt_run_fail(r, LT_ERR_STATE, "this trainer's setup failed earlier; make a new trainer "
                           "(lt_trainer_new) to try again");
    t->setup_tried = true;
    LT_CHECK(lt_run_read_world(r));
    r->status_slot = lt_status_slot_attach();
    if (r->status_slot) r->status_slot->phase = LT_PHASE_SETUP;
    if (r->launch != LT_LAUNCH_NONE) lt_log_set_rank(r->world.global_rank);
    LT_CHECK(choose_seed(t, &r->seed));
    lt_status st = LT_ACC(r)->setup(&r->accel.ctx, r->world.device);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->accel, "setup", st);
    r->accel_ready = true;
    bool host = false; /* what memory_is_host promises from 1.9 (accelerator.h) */
    r->inputs_in_place = r->accel.desc->abi_minor >= 9 && LT_ACC(r)->memory_is_host &&
                         LT_ACC(r)->memory_is_host(&r->accel.ctx, &host) == LT_OK && host;
    r->strategy_started = true; /* teardown is owed from here, even if this fails */
    st = LT_STRAT(r)->setup_environment(&r->strategy.ctx, r);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->strategy, "setup_environment", st);
    st = LT_STRAT(r)->init_dist_connection(&r->strategy.ctx, r);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->strategy, "init_dist_connection", st);
    if (r->world.world_size > 1 && !r->default_pg)
        return lt_run_fail(r, LT_ERR_STATE, "strategy '%s': init_dist_connection left no default process "
                           "group; it must call lt_run_new_group and lt_run_set_default_group (or the "
                           "original hook)", r->strategy.ctx.name);
    /* One seed for the job: without trainer.seed each process drew its own,
     * and the samplers must shuffle alike on every rank. */
    if (r->world.world_size > 1) {
        int64_t seed = (int64_t)r->seed;
        st = LT_STRAT(r)->broadcast(&r->strategy.ctx, r, &seed, 1, LT_I64, 0);
        if (st != LT_OK) return lt_run_hook_failed(r, &r->strategy, "broadcast (seed)", st);
        r->seed = (uint64_t)seed;
        char buf[32];
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)r->seed);
        setenv("LT_GLOBAL_SEED", buf, 1);
    }
    LT_CHECK(setup_model(t));
    r->precision_started = true; /* setup may have made state before failing */
    st = LT_PREC(r)->setup(&r->precision.ctx, r);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->precision, "setup", st);
    /* the optimizer before configure_ddp: a strategy that owns the update
     * (bagua's qadam) checks it there (lt_run_optimizer) */
    LT_CHECK(setup_optimizer(t));
    st = LT_STRAT(r)->configure_ddp(&r->strategy.ctx, r);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->strategy, "configure_ddp", st);
    LT_CHECK(setup_data(t));
    lt_preempt_install(t);
    t->worker_ready = true;
    return LT_OK;
}
