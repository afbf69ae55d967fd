/* Strategy: how the model is replicated and how gradients or weights are
 * combined (single_device, ddp, ddp_spawn, dp, ddp2, bagua ...).
 *
 * Replacing hooks. Any hook below may be replaced, two ways:
 *  - a strategy with `base` set that defines only some hooks; the rest come
 *    from the base, whose resolved table arrives in the header's `super`
 *    slot so an override can call the original: (*super)->configure_ddp(...);
 *  - one function from any shared object, named in the config:
 *    `[strategy] init_dist_connection = ./libmine.so:my_init`; it reaches the
 *    function it replaced with lt_ctx_original(ctx, "init_dist_connection").
 * What a hook must leave behind is stated with each hook; it lives in the
 * run (the default group, the buckets), never only in a plugin's private
 * state, so a replacement that does not call the original works too. Both
 * kinds of override share the base's context: keep state with
 * lt_ctx_keyed_state (lt/core.h), not lt_ctx_state, which is the base's.
 *
 * Unless said otherwise hooks run on the worker's main thread (the training
 * thread), in the order they are listed. */
#ifndef LT_STRATEGY_H
#define LT_STRATEGY_H

#include "lt/run.h"
#include "lt/nn.h"
#include "lt/data.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lt_launch_kind {
    LT_LAUNCH_NONE = 0,       /* run in this process (single_device, dp) */
    LT_LAUNCH_SUBPROCESS = 1, /* ltrun starts one process per local device (ddp) */
    LT_LAUNCH_SPAWN = 2,      /* fork workers after setup; results return to the parent */
    LT_LAUNCH_NODE = 3,       /* ABI 1.3: ltrun starts one process per node, driving all of
                               * the node's devices (ddp2) */
} lt_launch_kind;

typedef struct lt_strategy_desc {
    lt_plugin_header hdr;

    /* Required. How processes are made; ltrun asks before anything else. */
    lt_status (*launch_kind)(lt_ctx *ctx, lt_launch_kind *out);
    /* Optional: samples one optimizer step stands for, divided by the
     * per-process batch and accumulation: ddp = world size, dp = nodes.
     * Default: world_size. Printed as the effective batch size. */
    lt_status (*batch_multiplier)(lt_ctx *ctx, lt_run *run, int *out);
    /* Optional: how the sampler shards data: how many shards and which one
     * this process reads. Default: world_size shards, shard = global rank. */
    lt_status (*sampler_shard)(lt_ctx *ctx, lt_run *run, int *num_shards, int *shard);

    /* Required. Worker start: device binding and anything the environment
     * needs before process groups exist. Leaves nothing the other hooks
     * need: ddp reads its parameters here only to fail early on bad ones. */
    lt_status (*setup_environment)(lt_ctx *ctx, lt_run *run);
    /* Required. Collective. Creates the process group(s) and must leave the
     * one the later hooks communicate over as the run's default group:
     *     lt_run_new_group(run, NULL, "default", &pg); lt_run_set_default_group(run, pg);
     * (the run then owns it). Single-process strategies do nothing. A
     * replacement may call the original first and set another group after
     * it (destroying the one handed back); ddp's later hooks fail, naming
     * this hook, when no default group is set. */
    lt_status (*init_dist_connection)(lt_ctx *ctx, lt_run *run);
    /* Required. Collective. After the module's init and the precision setup,
     * with the flat buffers in place (lt_run_flat, lt_run_params). Must leave
     * every replica with rank 0's parameters and, for strategies that
     * communicate gradients, publish the gradient buckets
     * (lt_run_set_buckets). ddp's does that (a broadcast over the default
     * group, then buckets of bucket_cap_mb), checks its comm_hook against the
     * backend, and lowers the training thread's priority by compute_nice
     * (the backend's threads exist by now; the data loader's, made later,
     * inherit it). A replacement that skips the original must broadcast and
     * publish buckets itself; ddp's gradient hooks refuse to start without. */
    lt_status (*configure_ddp)(lt_ctx *ctx, lt_run *run);

    /* Optional: training is about to start / has ended. on_train_end runs
     * also when fit fails after the worker's setup, with the default group
     * already aborted (its communication fails at once), and before
     * teardown; not when setup itself failed (teardown still runs).
     * Background work (bagua async) starts and stops here; on_train_end must
     * stop it within a bounded time. */
    lt_status (*on_train_start)(lt_ctx *ctx, lt_run *run);
    lt_status (*on_train_end)(lt_ctx *ctx, lt_run *run);

    /* Optional: runs one micro-batch forward and returns the loss, a scalar
     * on `step`'s tape. Default: the module's training_step on the root
     * replica, then its training_step_end when it has one. dp and ddp2 call
     * lt_run_replicas_training_step (lt/replica.h) to split the batch. */
    lt_status (*training_step)(lt_ctx *ctx, lt_run *run, lt_step *step, lt_tensor **loss);

    /* Required. Backward is about to run. `sync` is false on accumulation
     * micro-batches (no_sync): then no communication may happen. ddp's
     * (re)reads the published buckets here; a replacement that keeps ddp's
     * on_grad_ready and before_optimizer_step must call the original. */
    lt_status (*on_backward_start)(lt_ctx *ctx, lt_run *run, bool sync);
    /* Required. During backward, training thread: gradients of flat elements
     * [offset, offset + count) are final for this micro-batch. Ranges arrive
     * as backward completes them (for a plain stack of layers, reverse
     * registration order; a parameter used twice arrives after its first
     * use's backward), each element once per backward. Must
     * return quickly: start communication, do not wait for it. */
    lt_status (*on_grad_ready)(lt_ctx *ctx, lt_run *run, size_t offset, size_t count, bool sync);
    /* Required. After the last micro-batch's backward: finish communication
     * so the flat gradients hold the average over every replica. */
    lt_status (*before_optimizer_step)(lt_ctx *ctx, lt_run *run);
    /* Optional: after the optimizer updated the parameters (decentralized
     * averaging, copying to replicas). */
    lt_status (*after_optimizer_step)(lt_ctx *ctx, lt_run *run);

    /* Required collectives for the user (sync_dist, all_gather, broadcast,
     * barrier); single-process strategies return the input. Host buffers. */
    lt_status (*reduce)(lt_ctx *ctx, lt_run *run, void *buf, size_t count, lt_dtype t,
                        lt_redop op);
    lt_status (*all_gather)(lt_ctx *ctx, lt_run *run, const void *send, void *recv,
                            size_t count, lt_dtype t);
    lt_status (*broadcast)(lt_ctx *ctx, lt_run *run, void *buf, size_t count, lt_dtype t,
                           int root);
    lt_status (*barrier)(lt_ctx *ctx, lt_run *run);

    /* Required. Frees what the strategy made; also after a failure, and
     * then possibly without the earlier hooks having run. Not the default
     * group: the run destroys it after teardown returns. */
    lt_status (*teardown)(lt_ctx *ctx, lt_run *run);

    /* ---- ABI 1.3 ---- */
    /* Optional: one validation or test batch (stage LT_STAGE_VALIDATE or
     * LT_STAGE_TEST), training thread. Default: the module's validation_step
     * or test_step on the root replica; dp and ddp2 call
     * lt_run_replicas_eval_step. */
    lt_status (*eval_step)(lt_ctx *ctx, lt_run *run, lt_step *step, lt_stage stage);

    /* ---- ABI 1.5 ---- */
    /* Optional: the optimizer's update of one step, in place of the core's
     * (bagua's qadam). Training thread, after before_optimizer_step, the
     * precision's unscale_and_check and gradient clipping, and only when
     * the step goes ahead (a 16-mixed step with Inf/NaN gradients skips
     * it). lt_run_optimizer gives the configured optimizer: this step's
     * learning rate, the hyper-parameters and its state buffers, which
     * checkpoints save and restore. Must leave lt_flat.params updated from
     * the gradients in lt_run_master_grads; afterwards the core counts the
     * step and refreshes whatever derives from the parameters. Default:
     * lt_run_optimizer_step (lt/run.h), which a replacement may call. */
    lt_status (*optimizer_step)(lt_ctx *ctx, lt_run *run);

    /* ABI 1.9. Optional: judges the parameters before anything starts
     * (lt/abi.h, under lt_param_spec). */
    lt_status (*check_params)(lt_ctx *ctx);
} lt_strategy_desc;

#ifdef __cplusplus
}
#endif
#endif
