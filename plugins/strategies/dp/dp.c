/* dp: one process drives every device of trainer.devices (Lightning's
 * DataParallel). Each batch is split over the replicas, each runs forward
 * and backward on its slice at once on its own thread, the gradients are
 * summed into the root's and the optimizer steps once there. The loss and
 * the metrics are weighted by slice size, so a run equals one device on the
 * whole batch. The mechanics are the core's (lt/replica.h); this plugin only
 * says when to use them. No process group: a world of one process. */
#include <string.h>
#include <strings.h>
#include "lt/lt.h"
#include "../replica_mode.h"

static const lt_param_spec dp_params[] = {
    LT_REPLICA_PARAMS_SPEC,
    {NULL, 0, NULL, NULL},
};

static lt_status dp_launch_kind(lt_ctx *ctx, lt_launch_kind *out) {
    (void)ctx;
    *out = LT_LAUNCH_NONE;
    return LT_OK;
}

/* One optimizer step stands for one batch (split, not multiplied). */
static lt_status dp_batch_multiplier(lt_ctx *ctx, lt_run *run, int *out) {
    (void)ctx;
    *out = lt_run_world(run)->num_nodes;
    return LT_OK;
}

static lt_status dp_setup_environment(lt_ctx *ctx, lt_run *run) {
    const lt_world *w = lt_run_world(run);
    if (w->num_nodes > 1) {
        lt_set_error(ctx, "dp runs in one process on one node but trainer.num_nodes = %d; use "
                     "strategy ddp2 (dp inside each node, ddp across nodes) or ddp", (int)w->num_nodes);
        return LT_ERR_INVALID;
    }
    return LT_OK;
}

static lt_status dp_noop(lt_ctx *ctx, lt_run *run) {
    (void)ctx;
    (void)run;
    return LT_OK;
}

static lt_status dp_configure_ddp(lt_ctx *ctx, lt_run *run) {
    lt_replica_params mode;
    LT_CHECK(lt_replica_mode(ctx, &mode));
    return lt_run_replicate(run, lt_run_world(run)->num_devices, mode);
}

static lt_status dp_training_step(lt_ctx *ctx, lt_run *run, lt_step *step, lt_tensor **loss) {
    (void)ctx;
    return lt_run_replicas_training_step(run, step, loss);
}

static lt_status dp_eval_step(lt_ctx *ctx, lt_run *run, lt_step *step, lt_stage stage) {
    (void)ctx;
    return lt_run_replicas_eval_step(run, step, stage);
}

/* The replicas' gradients are summed into the root's during backward (the
 * core's node on the tape); there is nothing to communicate. */
static lt_status dp_on_backward_start(lt_ctx *ctx, lt_run *run, bool sync) {
    (void)ctx, (void)run, (void)sync;
    return LT_OK;
}

static lt_status dp_on_grad_ready(lt_ctx *ctx, lt_run *run, size_t offset, size_t count, bool sync) {
    (void)ctx, (void)run, (void)offset, (void)count, (void)sync;
    return LT_OK;
}

/* Collectives for the module: a world of one process. */
static lt_status dp_reduce(lt_ctx *ctx, lt_run *run, void *buf, size_t count, lt_dtype t, lt_redop op) {
    (void)ctx, (void)run, (void)buf, (void)count, (void)t, (void)op;
    return LT_OK;
}

static lt_status dp_all_gather(lt_ctx *ctx, lt_run *run, const void *send, void *recv, size_t count,
                               lt_dtype t) {
    (void)ctx, (void)run;
    if (recv != send) memcpy(recv, send, count * lt_dtype_size(t));
    return LT_OK;
}

static lt_status dp_broadcast(lt_ctx *ctx, lt_run *run, void *buf, size_t count, lt_dtype t, int root) {
    (void)run, (void)buf, (void)count, (void)t;
    if (root == 0) return LT_OK;
    lt_set_error(ctx, "broadcast from rank %d in a world of one process", root);
    return LT_ERR_INVALID;
}

static const lt_strategy_desc dp_strategy = {
    LT_HEADER(LT_KIND_STRATEGY, lt_strategy_desc, "dp", NULL, "1.0.0",
              "one process, the batch split over trainer.devices replicas (one thread each)", dp_params, NULL),
    .launch_kind = dp_launch_kind,
    .batch_multiplier = dp_batch_multiplier,
    .setup_environment = dp_setup_environment,
    .init_dist_connection = dp_noop,
    .configure_ddp = dp_configure_ddp,
    .training_step = dp_training_step,
    .on_backward_start = dp_on_backward_start,
    .on_grad_ready = dp_on_grad_ready,
    .before_optimizer_step = dp_noop,
    .reduce = dp_reduce,
    .all_gather = dp_all_gather,
    .broadcast = dp_broadcast,
    .barrier = dp_noop,
    .teardown = dp_noop,
    .eval_step = dp_eval_step,
};

LT_PLUGIN_EXPORT(&dp_strategy.hdr)
