/* Precision: the dtypes of parameters, compute, gradients and communication,
 * and loss scaling (32-true, 64-true, 16-mixed, bf16-mixed ...).
 *
 * Hooks run on the training thread. The trainer calls scale_loss before
 * every micro-batch's backward (several per optimizer step with
 * accumulate_grad_batches > 1; the scale must not change between them), and
 * once per optimizer step unscale_and_check after the strategy's
 * before_optimizer_step, then update with whether the step was skipped.
 *
 * Mixed precision (param != compute, ABI 1.4): the core keeps the master
 * parameters (lt_flat.params, param dtype) and a compute copy the layers
 * read, cast from the master after every optimizer step; backward writes
 * compute-dtype gradients (lt_flat.grads), which strategies reduce as they
 * are. unscale_and_check must leave the true-scale gradients in
 * lt_run_master_grads(), which clipping and the optimizer then read, or
 * (ABI 1.8) call lt_run_defer_unscale() to leave that cast to the core,
 * which folds it into the optimizer step where it can. The
 * decision to skip must be the same on every rank: base it on the reduced
 * gradients (identical everywhere), not on anything local. */
#ifndef LT_PRECISION_H
#define LT_PRECISION_H

#include "lt/run.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lt_precision_dtypes {
    uint32_t struct_size;
    uint32_t param;   /* master parameters and optimizer state */
    uint32_t compute; /* activations and the parameters' compute copy */
    uint32_t grad;    /* flat gradient buffer (what is communicated) */
} lt_precision_dtypes;

typedef struct lt_precision_desc {
    lt_plugin_header hdr;

    /* Required. Before the module's init: the dtypes the core makes the flat
     * buffers and activations in. */
    lt_status (*dtypes)(lt_ctx *ctx, lt_precision_dtypes *out);
    /* Required. After the flat buffers exist. */
    lt_status (*setup)(lt_ctx *ctx, lt_run *run);
    /* Required. The factor the loss gradient is seeded with (1 without scaling). */
    lt_status (*scale_loss)(lt_ctx *ctx, double *scale);
    /* Required. Brings the reduced gradients back to true scale (into the
     * master gradients) and reports whether every value is finite; a false
     * *finite skips the optimizer step. */
    lt_status (*unscale_and_check)(lt_ctx *ctx, lt_run *run, bool *finite);
    /* Required. After each step (skipped or not): grows or backs off the scale. */
    lt_status (*update)(lt_ctx *ctx, bool step_skipped);
    /* Required. Scaler state as a short text for checkpoints ("" when none),
     * and back. */
    lt_status (*save_state)(lt_ctx *ctx, char *buf, size_t len);
    lt_status (*load_state)(lt_ctx *ctx, const char *state);

    /* ABI 1.4. Optional: frees what setup made; called once at the end of
     * the run (also after a failed setup) on the thread that called setup.
     * Default: nothing. */
    lt_status (*teardown)(lt_ctx *ctx);

    /* ABI 1.9. Optional: judges the parameters before anything starts
     * (lt/abi.h, under lt_param_spec). */
    lt_status (*check_params)(lt_ctx *ctx);
} lt_precision_desc;

#ifdef __cplusplus
}
#endif
#endif
