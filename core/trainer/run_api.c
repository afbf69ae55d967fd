/* What strategy and precision plugins borrow from a run (lt/run.h), and the
 * core's defaults for the strategy hooks that need a run. */
#include <stdio.h>
#include <string.h>
#include "run_internal.h"
#include "registry/hook_defaults.h"

const lt_world *lt_run_world(const lt_run *run) { return &run->world; }

lt_status lt_run_flat(lt_run *run, lt_flat *out) {
    if (!run->model || !run->model->params_flat) {
        lt_set_error(NULL, "lt_run_flat: the flat buffers do not exist before configure_ddp");
        return LT_ERR_STATE;
    }
    out->params = run->model->params_flat;
    out->grads = run->model->grads_flat;
    out->count = run->model->total;
    out->param_dtype = run->model->dtype;
    out->grad_dtype = run->model->dtype;
    return LT_OK;
}

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

static lt_status default_training_step(lt_ctx *ctx, lt_run *run, lt_step *step, lt_tensor **loss) {
    (void)ctx;
    return LT_MOD(run)->training_step(&run->module.ctx, step, loss);
}

void lt_run_register_defaults(void) {
    static bool done;
    if (done) return;
    done = true;
    lt_hooks_set_default(LT_KIND_STRATEGY, "batch_multiplier", (void (*)(void))default_batch_multiplier);
    lt_hooks_set_default(LT_KIND_STRATEGY, "sampler_shard", (void (*)(void))default_sampler_shard);
    lt_hooks_set_default(LT_KIND_STRATEGY, "training_step", (void (*)(void))default_training_step);
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

int lt_step_rank(const lt_step *s) { return s->run ? s->run->world.global_rank : 0; }
int lt_step_world_size(const lt_step *s) { return s->run ? s->run->world.world_size : 1; }
bool lt_step_is_global_zero(const lt_step *s) { return lt_step_rank(s) == 0; }

lt_status lt_step_reduce(lt_step *s, void *buf, size_t count, lt_dtype t, lt_redop op) {
    lt_run *r = s->run;
    if (!r) return no_run(s, "lt_step_reduce");
    return collective_done(s, r, "reduce", LT_STRAT(r)->reduce(&r->strategy.ctx, r, buf, count, t, op));
}

lt_status lt_step_all_gather(lt_step *s, const void *send, void *recv, size_t count, lt_dtype t) {
    lt_run *r = s->run;
    if (!r) return no_run(s, "lt_step_all_gather");
    return collective_done(s, r, "all_gather", LT_STRAT(r)->all_gather(&r->strategy.ctx, r, send, recv, count, t));
}

lt_status lt_step_broadcast(lt_step *s, void *buf, size_t count, lt_dtype t, int root) {
    lt_run *r = s->run;
    if (!r) return no_run(s, "lt_step_broadcast");
    return collective_done(s, r, "broadcast", LT_STRAT(r)->broadcast(&r->strategy.ctx, r, buf, count, t, root));
}

lt_status lt_step_barrier(lt_step *s) {
    lt_run *r = s->run;
    if (!r) return no_run(s, "lt_step_barrier");
    return collective_done(s, r, "barrier", LT_STRAT(r)->barrier(&r->strategy.ctx, r));
}
