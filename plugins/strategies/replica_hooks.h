/* What the strategies that make replicas (dp, ddp2) share: the
 * strategy.replica_params parameter, making the replicas, and the two step
 * hooks that split a batch over them (lt/replica.h). Header only: each
 * plugin is its own .so. */
#ifndef LT_STRATEGIES_REPLICA_HOOKS_H
#define LT_STRATEGIES_REPLICA_HOOKS_H

#include <strings.h>
#include "lt/lt.h"

#define LT_REPLICA_PARAMS_SPEC                                                                      \
    {"replica_params", LT_PARAM_STRING, "auto",                                                     \
     "auto | shared | copied: replicas read the root's parameters in place (shared, host memory "   \
     "only) or hold copies refreshed after each update; auto shares when it can"}

static inline lt_status lt_replica_mode(lt_ctx *ctx, lt_replica_params *out) {
    const char *m = lt_param_str(ctx, "replica_params", "auto");
    if (!strcasecmp(m, "auto")) *out = LT_REPLICA_PARAMS_AUTO;
    else if (!strcasecmp(m, "shared")) *out = LT_REPLICA_PARAMS_SHARED;
    else if (!strcasecmp(m, "copied")) *out = LT_REPLICA_PARAMS_COPIED;
    else {
        lt_set_error(ctx, "strategy.replica_params = '%s': use auto, shared or copied", m);
        return LT_ERR_INVALID;
    }
    return LT_OK;
}

/* One replica per device this process drives; call from configure_ddp once
 * the root's parameters are final. */
static inline lt_status lt_replicate_devices(lt_ctx *ctx, lt_run *run) {
    lt_replica_params mode;
    LT_CHECK(lt_replica_mode(ctx, &mode));
    return lt_run_replicate(run, lt_run_world(run)->num_devices, mode);
}

static inline lt_status lt_replicas_training_step_hook(lt_ctx *ctx, lt_run *run, lt_step *step,
                                                       lt_tensor **loss) {
    (void)ctx;
    return lt_run_replicas_training_step(run, step, loss);
}

static inline lt_status lt_replicas_eval_step_hook(lt_ctx *ctx, lt_run *run, lt_step *step, lt_stage stage) {
    (void)ctx;
    return lt_run_replicas_eval_step(run, step, stage);
}

#endif
