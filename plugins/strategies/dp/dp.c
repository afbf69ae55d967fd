/* dp: one process drives every device of trainer.devices (Lightning's
 * DataParallel). Each batch is split over the replicas, each runs forward
 * and backward on its slice at once on its own thread, the gradients are
 * summed into the root's and the optimizer steps once there. The loss and
 * the metrics are weighted by slice size, so a run equals one device on the
 * whole batch. The mechanics are the core's (lt/replica.h); this plugin only
 * says when to use them. Everything else is single_device's (`base`): one
 * process, no process group, collectives for a world of one process. */
#include "lt/lt.h"
#include "../replica_hooks.h"

static const lt_param_spec dp_params[] = {
    LT_REPLICA_PARAMS_SPEC,
    {NULL, 0, NULL, NULL},
};

/* One process on one node: its batch is what one optimizer step stands
 * for (single_device's batch multiplier, the world size 1). */
static lt_status dp_setup_environment(lt_ctx *ctx, lt_run *run) {
    const lt_world *w = lt_run_world(run);
    if (w->num_nodes > 1) {
        lt_set_error(ctx, "dp runs in one process on one node but trainer.num_nodes = %d; use "
                     "strategy ddp2 (dp inside each node, ddp across nodes) or ddp", (int)w->num_nodes);
        return LT_ERR_INVALID;
    }
    return LT_OK;
}

/* The replicas' gradients are summed into the root's during backward (the
 * core's node on the tape): single_device's gradient hooks, which do
 * nothing, are right. */
static const lt_strategy_desc dp_strategy = {
    LT_HEADER(LT_KIND_STRATEGY, lt_strategy_desc, "dp", "single_device", "1.0.0",
              "one process, the batch split over trainer.devices replicas (one thread each)", dp_params, NULL),
    .setup_environment = dp_setup_environment,
    .configure_ddp = lt_replicate_devices,
    .training_step = lt_replicas_training_step_hook,
    .eval_step = lt_replicas_eval_step_hook,
};

LT_PLUGIN_EXPORT(&dp_strategy.hdr)
