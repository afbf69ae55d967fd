/* What strategy and precision plugins borrow from a run (lt/run.h), and the
 * core's defaults for the strategy hooks that need a run. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "run_internal.h"
#include "replicas.h"
#include "registry/hook_defaults.h"

const lt_world *lt_run_world(const lt_run *run) { return &run->world; }

lt_status lt_run_flat(lt_run *run, lt_flat *out) {
    if (!run->model || !run->model->params_flat) {
        lt_set_error(NULL, "lt_run_flat: the flat buffers do not exist before the model is made (precision setup)");
        return LT_ERR_STATE;
    }
    out->params = lt_model_opt_params(run->model); /* the fp32 master copy in mixed precision */
    out->grads = run->model->grads_flat;
    out->count = run->model->total;
    out->param_dtype = lt_model_opt_dtype(run->model);
    out->grad_dtype = run->model->dtype;
    return LT_OK;
}

lt_status lt_run_place_grads(lt_run *run, bool *placed) {
    *placed = false;
    lt_model *m = run->model;
    if (!m || !m->grads_flat || !run->default_pg) {
        lt_set_error(NULL, "lt_run_place_grads: needs the model and the default group (call it from configure_ddp)");
        return LT_ERR_STATE;
    }
    if (run->placed_grads.p) {
        lt_set_error(NULL, "lt_run_place_grads: the gradients were placed already");
        return LT_ERR_STATE;
    }
    /* A precision plugin built before 1.7 was promised lt_flat.grads would
     * not move after its setup: it may hold the pointer. */
    if (run->precision.desc && run->precision.desc->abi_minor < 7) {
        lt_log(&run->precision.ctx, LT_LOG_DEBUG, "built for ABI 1.%u: the gradients stay in the accelerator's memory",
               (unsigned)run->precision.desc->abi_minor);
        return LT_OK;
    }
    size_t bytes = m->total * lt_dtype_size(m->dtype);
    char err[512];
    lt_status st = lt_pg_mem_alloc(run->default_pg, bytes, &run->placed_grads, err, sizeof err);
    if (st == LT_ERR_UNSUPPORTED) { /* none, or no room for it: every rank alike */
        if (err[0] && run->world.global_rank == 0)
            lt_log(NULL, LT_LOG_WARN, "the gradients stay in the accelerator's memory: %s", err);
        return LT_OK;
    }
    if (st != LT_OK) {
        lt_set_error(NULL, "%s", err);
        return st;
    }
    /* Group memory is host memory, and so is an accelerator's whose groups
     * take host buffers unstaged (lt_pg_mem_alloc refused the others). */
    memcpy(run->placed_grads.p, m->grads_flat, bytes);
    LT_ACC(run)->free(&run->accel.ctx, m->grads_flat);
    m->grads_flat = run->placed_grads.p;
    *placed = true;
    return LT_OK;
}

/* Before the model goes: it must not give group memory to the accelerator. */
void lt_run_release_placed_grads(lt_run *run) {
    if (!run->placed_grads.p) return;
    if (run->model && run->model->grads_flat == run->placed_grads.p) run->model->grads_flat = NULL;
    lt_pg_mem_free(&run->placed_grads);
}

lt_status lt_run_master_grads(lt_run *run, void **out) {
    if (!run->model || !run->model->params_flat) {
        lt_set_error(NULL, "lt_run_master_grads: the gradients do not exist before the model is made (precision setup)");
        return LT_ERR_STATE;
    }
    lt_model_unscale_grads(run->model); /* the caller reads them: a deferred cast happens now */
    *out = lt_model_opt_grads(run->model);
    return LT_OK;
}

lt_status lt_run_defer_unscale(lt_run *run, double grad_mul) {
    lt_model *m = run->model;
    if (!m || !m->master_grads) {
        lt_set_error(NULL, "lt_run_defer_unscale: there are no master gradients to defer (no model yet, or the precision's param dtype equals its grad dtype); call it from unscale_and_check, under mixed precision only (lt_flat.param_dtype != grad_dtype)");
        return LT_ERR_STATE;
    }
    if (!(grad_mul > 0 && isfinite(grad_mul))) {
        lt_set_error(NULL, "lt_run_defer_unscale: grad_mul = %g; it must be finite and > 0 (1 / the loss scale)", grad_mul);
        return LT_ERR_INVALID;
    }
    lt_model_defer_unscale(m, grad_mul);
    return LT_OK;
}

void lt_run_params_changed(lt_run *run) { run->params_version++; }

const lt_kernels *lt_run_kernels(lt_run *run) {
    const lt_kernels *k = NULL;
    if (run->model) return run->model->k;
    LT_ACC(run)->get_kernels(&run->accel.ctx, &k);
    return k;
}

lt_ctx *lt_run_kernel_ctx(lt_run *run) { return &run->accel.ctx; }

lt_status lt_run_alloc(lt_run *run, size_t bytes, void **out) {
    return LT_ACC(run)->alloc(&run->accel.ctx, bytes, out);
}

void lt_run_free(lt_run *run, void *p) { LT_ACC(run)->free(&run->accel.ctx, p); }

lt_status lt_run_synchronize(lt_run *run) { return LT_ACC(run)->synchronize(&run->accel.ctx); }

lt_store *lt_run_store(lt_run *run) { return run->store; }

void lt_run_set_default_group(lt_run *run, lt_pg *pg) { run->default_pg = pg; }
lt_pg *lt_run_default_group(lt_run *run) { return run->default_pg; }

lt_status lt_run_params(lt_run *run, const lt_param_view **out, size_t *count) {
    lt_model *m = run->model;
    if (!m || !m->params_flat) {
        lt_set_error(NULL, "lt_run_params: the parameters do not exist before the model is made (precision setup)");
        return LT_ERR_STATE;
    }
    if (!run->param_views) {
        lt_param_view *v = calloc((size_t)m->nparams ? (size_t)m->nparams : 1, sizeof *v);
        if (!v) {
            lt_set_error(NULL, "lt_run_params: out of memory");
            return LT_ERR_NOMEM;
        }
        for (int i = 0; i < m->nparams; i++) {
            const lt_param *p = m->params[i];
            v[i] = (lt_param_view){.name = p->name, .offset = p->offset, .count = (size_t)p->numel,
                                   .index = i, .ndim = p->ndim, .dtype = lt_model_opt_dtype(m)};
            for (int d = 0; d < p->ndim && d < LT_MAX_DIMS; d++) v[i].shape[d] = p->shape[d];
        }
        run->param_views = v;
        run->nparam_views = (size_t)m->nparams;
    }
    *out = run->param_views;
    *count = run->nparam_views;
    return LT_OK;
}

static int by_offset(const void *a, const void *b) {
    const lt_bucket_view *x = *(const lt_bucket_view *const *)a, *y = *(const lt_bucket_view *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Every element of the flat gradients in exactly one bucket: sorted by
 * offset, each bucket starts where the one before ended, the last ends at
 * the total. */
static lt_status check_cover(const lt_bucket_view *b, size_t n, size_t total) {
    const lt_bucket_view **s = malloc((n ? n : 1) * sizeof *s);
    if (!s) {
        lt_set_error(NULL, "lt_run_set_buckets: out of memory");
        return LT_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) s[i] = &b[i];
    qsort(s, n, sizeof *s, by_offset);
    size_t at = 0;
    lt_status st = LT_OK;
    for (size_t i = 0; i < n && st == LT_OK; i++) {
        size_t idx = (size_t)(s[i] - b);
        if (s[i]->count == 0 || s[i]->offset != at || s[i]->count > total - s[i]->offset) {
            char why[96];
            if (s[i]->count == 0) snprintf(why, sizeof why, "is empty");
            else if (s[i]->offset > at) snprintf(why, sizeof why, "leaves a gap before it");
            else if (s[i]->offset < at) snprintf(why, sizeof why, "overlaps bucket %zu", (size_t)(s[i - 1] - b));
            else snprintf(why, sizeof why, "runs past the end");
            lt_set_error(NULL, "lt_run_set_buckets: bucket %zu [%zu, +%zu) %s; buckets must cover "
                         "the %zu gradient elements exactly once", idx, s[i]->offset, s[i]->count,
                         why, total);
            st = LT_ERR_INVALID;
        }
        at = s[i]->offset + s[i]->count;
    }
    if (st == LT_OK && at != total) {
        lt_set_error(NULL, "lt_run_set_buckets: the buckets end at element %zu of %zu; buckets must "
                     "cover the gradient elements exactly once", at, total);
        st = LT_ERR_INVALID;
    }
    free(s);
    return st;
}

lt_status lt_run_set_buckets(lt_run *run, const lt_bucket_view *buckets, size_t count) {
    if (!run->model || !run->model->params_flat) {
        lt_set_error(NULL, "lt_run_set_buckets: the gradients do not exist before the model is made (precision setup)");
        return LT_ERR_STATE;
    }
    if (!buckets || count == 0) {
        lt_set_error(NULL, "lt_run_set_buckets: no buckets given; pass at least one covering "
                     "every gradient element");
        return LT_ERR_INVALID;
    }
    LT_CHECK(check_cover(buckets, count, run->model->total));
    lt_bucket_view *copy = malloc(count * sizeof *copy);
    if (!copy) {
        lt_set_error(NULL, "lt_run_set_buckets: out of memory");
        return LT_ERR_NOMEM;
    }
    memcpy(copy, buckets, count * sizeof *copy);
    free(run->buckets);
    run->buckets = copy;
    run->nbuckets = count;
    return LT_OK;
}

lt_status lt_run_buckets(lt_run *run, const lt_bucket_view **out, size_t *count) {
    *out = run->buckets;
    *count = run->nbuckets;
    return LT_OK;
}

void lt_run_teardown_strategy(lt_run *r) {
    if (r->strategy.loaded && r->strategy_started) {
        lt_status st = LT_STRAT(r)->teardown(&r->strategy.ctx, r);
        if (st != LT_OK)
            lt_log(&r->strategy.ctx, LT_LOG_WARN, "teardown failed: %s", lt_last_error(&r->strategy.ctx));
    }
    r->strategy_started = false;
    lt_replicas_destroy(r->replicas); /* each on its own thread, before the root's model goes */
    r->replicas = NULL;
    if (r->default_pg) lt_pg_destroy(r->default_pg);
    r->default_pg = NULL;
    free(r->buckets);
    r->buckets = NULL;
    r->nbuckets = 0;
    free(r->param_views);
    r->param_views = NULL;
    r->nparam_views = 0;
}

/* ---- defaults for optional strategy hooks ---------------------------------- */

static lt_status default_batch_multiplier(lt_ctx *ctx, lt_run *run, int *out) {
    (void)ctx;
    *out = run->world.world_size;
    return LT_OK;
}

static lt_status default_sampler_shard(lt_ctx *ctx, lt_run *run, int *num_shards, int *shard) {
    (void)ctx;
    *num_shards = run->world.world_size;
    *shard = run->world.global_rank;
    return LT_OK;
}

lt_status lt_run_module_training_step(lt_run *run, lt_step *step, lt_tensor **loss) {
    lt_status st = LT_MOD(run)->training_step(&run->module.ctx, step, loss);
    if (st != LT_OK || step->status != LT_OK || !LT_MOD(run)->training_step_end) return st;
    if (!*loss) return lt_step_fail(step, "training_step returned no output for training_step_end");
    /* One device: training_step_end receives its one output (Lightning). */
    return LT_MOD(run)->training_step_end(&run->module.ctx, step, loss);
}

lt_status lt_run_module_eval_step(lt_run *run, lt_step *step, lt_stage stage) {
    lt_status (*hook)(lt_ctx *, lt_step *) =
        stage == LT_STAGE_TEST ? LT_MOD(run)->test_step : LT_MOD(run)->validation_step;
    if (!hook) /* a strategy asked for a stage the module lacks */
        return lt_step_set_error(step, LT_ERR_UNSUPPORTED, "the module has no %s",
                                 stage == LT_STAGE_TEST ? "test_step" : "validation_step");
    return hook(&run->module.ctx, step);
}

static lt_status default_training_step(lt_ctx *ctx, lt_run *run, lt_step *step, lt_tensor **loss) {
    (void)ctx;
    return lt_run_module_training_step(run, step, loss);
}

static lt_status default_eval_step(lt_ctx *ctx, lt_run *run, lt_step *step, lt_stage stage) {
    (void)ctx;
    return lt_run_module_eval_step(run, step, stage);
}

lt_status lt_run_optimizer_step(lt_run *run) {
    lt_model *m = run->model;
    if (!m) return lt_run_fail(run, LT_ERR_STATE, "lt_run_optimizer_step: no model yet");
    bool fused = lt_model_update_fuses(m, &run->optim);
    if (!fused) lt_model_unscale_grads(m);
    if (run->replicas) { /* their threads read what this one's kernels wrote (unscale, clipping) */
        lt_status st = LT_ACC(run)->synchronize(&run->accel.ctx);
        if (st != LT_OK) return lt_run_hook_failed(run, &run->accel, "synchronize (before the optimizer step)", st);
    }
    /* The step writes the compute copy too: the trainer need not cast it
     * again unless the parameters change once more before the next step. */
    if (fused) run->fused_version = run->params_version + 1;
    if (run->replicas) return lt_replicas_optimizer_step(run, fused); /* each replica's thread a slice */
    lt_model_optim_apply(m, &run->optim, fused, 0, m->total, m->kctx);
    return LT_OK;
}

lt_status lt_run_optimizer(lt_run *run, lt_optimizer_view *out) {
    /* A caller built against a later minor passes a larger struct: it gets
     * the fields this build knows, and struct_size says how far they go. */
    size_t v15 = offsetof(lt_optimizer_view, dtype) + sizeof out->dtype;
    if (!out || out->struct_size < v15)
        return lt_run_fail(run, LT_ERR_INVALID, "lt_run_optimizer: set struct_size = sizeof(lt_optimizer_view)");
    if (!run->model || !run->optim.count)
        return lt_run_fail(run, LT_ERR_STATE, "lt_run_optimizer: the optimizer does not exist yet (call it from configure_ddp on)");
    const lt_optimizer *o = &run->optim;
    const lt_optim_config *c = &o->cfg;
    lt_optimizer_view v = {.struct_size = sizeof v, .name = o->kind == LT_OPT_ADAMW ? "adamw" : "sgd",
                               .lr = o->lr, .momentum = c->momentum, .dampening = c->dampening,
                               .nesterov = c->nesterov, .weight_decay = c->weight_decay, .beta1 = c->beta1,
                               .beta2 = c->beta2, .eps = c->eps, .step = o->step, .nstate = o->nstate,
                               .count = o->count, .dtype = o->dtype};
    for (int i = 0; i < o->nstate && i < 2; i++) {
        v.state[i] = o->state[i];
        v.state_names[i] = lt_optim_state_name(o, i);
    }
    size_t n = out->struct_size < sizeof v ? out->struct_size : sizeof v;
    memcpy(out, &v, n);
    out->struct_size = (uint32_t)n;
    return LT_OK;
}

static lt_status default_optimizer_step(lt_ctx *ctx, lt_run *run) {
    (void)ctx;
    return lt_run_optimizer_step(run);
}

bool lt_run_optimizer_step_is_default(lt_run *run) {
    return LT_STRAT(run)->optimizer_step == default_optimizer_step;
}

void lt_run_register_defaults(void) {
    static bool done;
    if (done) return;
    done = true;
    lt_hooks_set_default(LT_KIND_STRATEGY, "batch_multiplier", (void (*)(void))default_batch_multiplier);
    lt_hooks_set_default(LT_KIND_STRATEGY, "sampler_shard", (void (*)(void))default_sampler_shard);
    lt_hooks_set_default(LT_KIND_STRATEGY, "training_step", (void (*)(void))default_training_step);
    lt_hooks_set_default(LT_KIND_STRATEGY, "eval_step", (void (*)(void))default_eval_step);
    lt_hooks_set_default(LT_KIND_STRATEGY, "optimizer_step", (void (*)(void))default_optimizer_step);
}

/* ---- the module's collectives, through the strategy ------------------------ */

static lt_status no_run(lt_step *s, const char *what) {
    return lt_step_set_error(s, LT_ERR_STATE, "%s: this step does not belong to a trainer run", what);
}

static lt_status collective_done(lt_step *s, lt_run *r, const char *what, lt_status st) {
    if (st == LT_OK) return LT_OK;
    lt_run_hook_failed(r, &r->strategy, what, st);
    return lt_step_set_error(s, st, "%s", r->error);
}

/* A step one of several dp replicas drives: its collectives meet the other
 * replicas first (replica_collective.c). */
static bool on_replica(const lt_step *s) { return s->run && s->run->replicas && s != &s->run->step; }

/* On replicas the module's world is every replica of every process. */
int lt_step_rank(const lt_step *s) {
    if (on_replica(s)) return s->run->world.global_rank * s->run->replicas->count + s->replica;
    return s->run ? s->run->world.global_rank : 0;
}
int lt_step_world_size(const lt_step *s) {
    if (on_replica(s)) return s->run->world.world_size * s->run->replicas->count;
    return s->run ? s->run->world.world_size : 1;
}
bool lt_step_is_global_zero(const lt_step *s) { return lt_step_rank(s) == 0; }

lt_status lt_step_reduce(lt_step *s, void *buf, size_t count, lt_dtype t, lt_redop op) {
    lt_run *r = s->run;
    if (!r) return no_run(s, "lt_step_reduce");
    if (on_replica(s)) return lt_replicas_collective(s, &(lt_replica_coll){LT_COLL_REDUCE, .buf = buf, .count = count, .t = t, .op = op});
    return collective_done(s, r, "reduce", LT_STRAT(r)->reduce(&r->strategy.ctx, r, buf, count, t, op));
}

lt_status lt_step_all_gather(lt_step *s, const void *send, void *recv, size_t count, lt_dtype t) {
    lt_run *r = s->run;
    if (!r) return no_run(s, "lt_step_all_gather");
    if (on_replica(s)) return lt_replicas_collective(s, &(lt_replica_coll){LT_COLL_GATHER, .send = send, .recv = recv, .count = count, .t = t});
    return collective_done(s, r, "all_gather", LT_STRAT(r)->all_gather(&r->strategy.ctx, r, send, recv, count, t));
}

lt_status lt_step_broadcast(lt_step *s, void *buf, size_t count, lt_dtype t, int root) {
    lt_run *r = s->run;
    if (!r) return no_run(s, "lt_step_broadcast");
    if (on_replica(s)) return lt_replicas_collective(s, &(lt_replica_coll){LT_COLL_BCAST, .buf = buf, .count = count, .t = t, .root = root});
    return collective_done(s, r, "broadcast", LT_STRAT(r)->broadcast(&r->strategy.ctx, r, buf, count, t, root));
}

lt_status lt_step_barrier(lt_step *s) {
    lt_run *r = s->run;
    if (!r) return no_run(s, "lt_step_barrier");
    if (on_replica(s)) return lt_replicas_collective(s, &(lt_replica_coll){.kind = LT_COLL_BARRIER});
    return collective_done(s, r, "barrier", LT_STRAT(r)->barrier(&r->strategy.ctx, r));
}
