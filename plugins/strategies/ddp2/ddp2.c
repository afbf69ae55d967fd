/* ddp2: dp inside each node, ddp across nodes (Lightning 1.x's ddp2). One
 * process per node drives the node's devices as dp replicas; the root
 * replica's summed gradients are averaged over the node roots by ddp's own
 * hooks (its buckets start as the replica sum reports each range), and the
 * sampler shards by node. Effective batch = batch x num_nodes. Everything
 * not below is ddp's, reached through `base`. */
#include "lt/lt.h"
#include "../replica_hooks.h"

static const lt_strategy_desc *ddp; /* the base's resolved table */

static const lt_param_spec ddp2_params[] = {
    LT_REPLICA_PARAMS_SPEC,
    {NULL, 0, NULL, NULL},
};

static lt_status ddp2_launch_kind(lt_ctx *ctx, lt_launch_kind *out) {
    (void)ctx;
    *out = LT_LAUNCH_NODE;
    return LT_OK;
}

static lt_status ddp2_batch_multiplier(lt_ctx *ctx, lt_run *run, int *out) {
    (void)ctx;
    *out = lt_run_world(run)->num_nodes;
    return LT_OK;
}

/* One shard per node (= per process). */
static lt_status ddp2_sampler_shard(lt_ctx *ctx, lt_run *run, int *num_shards, int *shard) {
    (void)ctx;
    const lt_world *w = lt_run_world(run);
    *num_shards = w->num_nodes;
    *shard = w->node_rank;
    return LT_OK;
}

/* ddp's broadcast of rank 0's parameters and its buckets, then the node's
 * replicas, which read the broadcast values. */
static lt_status ddp2_configure_ddp(lt_ctx *ctx, lt_run *run) {
    LT_CHECK(ddp->configure_ddp(ctx, run));
    return lt_replicate_devices(ctx, run);
}

static const lt_strategy_desc ddp2_strategy = {
    LT_HEADER(LT_KIND_STRATEGY, lt_strategy_desc, "ddp2", "ddp", "1.0.0",
              "one process per node: dp over the node's devices, ddp across nodes", ddp2_params, &ddp),
    .launch_kind = ddp2_launch_kind,
    .batch_multiplier = ddp2_batch_multiplier,
    .sampler_shard = ddp2_sampler_shard,
    .configure_ddp = ddp2_configure_ddp,
    .training_step = lt_replicas_training_step_hook,
    .eval_step = lt_replicas_eval_step_hook,
};

LT_PLUGIN_EXPORT(&ddp2_strategy.hdr)
