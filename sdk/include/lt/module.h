/* Module: the user's model, like a LightningModule.
 *
 * Threading: init runs once per replica on the thread that owns it (the
 * worker's main thread for the root; with dp and ddp2, each other replica's
 * own thread, once per device). Step hooks run on the thread driving that
 * replica, at the same time on every replica. Epoch hooks run on the training thread of the root
 * replica. State is per replica: keep it in lt_ctx_set_state, never in globals,
 * so dp replicas do not share it. */
#ifndef LT_MODULE_H
#define LT_MODULE_H

#include "lt/nn.h"
#include "lt/data.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What configure_optimizers returns; prefilled from [optimizer] and
 * [scheduler] in the config, so a module may leave it alone. */
typedef struct lt_optim_config {
    uint32_t struct_size;
    char name[16];          /* "sgd" | "adamw" */
    double lr;
    double momentum;        /* sgd */
    double dampening;       /* sgd */
    int32_t nesterov;       /* sgd */
    double weight_decay;
    double beta1, beta2, eps; /* adamw */
    char scheduler[16];     /* "none" | "step" | "cosine" */
    int64_t step_size;      /* step: every step_size epochs (or steps, see interval) */
    double gamma;           /* step: factor */
    int64_t warmup_steps;   /* linear warm-up from 0 before the schedule, in steps */
    double min_lr;          /* cosine: floor */
    int32_t interval_steps; /* 1: schedules count optimizer steps, 0: epochs */
} lt_optim_config;

typedef struct lt_module_desc {
    lt_plugin_header hdr;

    /* Required. Builds the layers (lt_linear_new ...) and registers every
     * parameter of one replica. Parameter values do not exist yet. Refuse
     * bad parameters here (lt_set_error naming the key, LT_ERR_INVALID):
     * `ltrun --check` calls init, then teardown, once on a model that never
     * gets weights, so it reports them too. */
    lt_status (*init)(lt_ctx *ctx, lt_model *model);
    /* Required. Forward pass of one (micro-)batch in training; *loss receives
     * the scalar to minimise (a tensor of the step). May log metrics. */
    lt_status (*training_step)(lt_ctx *ctx, lt_step *step, lt_tensor **loss);
    /* Optional: evaluation of one batch; logs metrics. Default: none (then
     * validation is skipped, and test says the module has no test_step). */
    lt_status (*validation_step)(lt_ctx *ctx, lt_step *step);
    lt_status (*test_step)(lt_ctx *ctx, lt_step *step);
    /* Optional: the loss over the whole batch from every replica's output.
     * When set, training_step's *loss is its output (one row per sample, e.g.
     * the logits, the tensor it computed last), not a loss. On entry *loss
     * is the outputs of all replicas gathered in batch order ([batch, ...],
     * on `step`'s tape; with one replica, training_step's own output) and
     * `step` holds the whole batch's inputs; the hook replaces *loss with a
     * loss layer's result (lt_cross_entropy, lt_mse) computed from it, as a
     * softmax or contrastive loss over every sample needs. Backward hands
     * each replica its rows of the gradient. Root replica's thread, the
     * root's state; compute from the gathered outputs only (no parameters). */
    lt_status (*training_step_end)(lt_ctx *ctx, lt_step *step, lt_tensor **loss);
    /* Optional: adjust the optimizer; default keeps the config's. */
    lt_status (*configure_optimizers)(lt_ctx *ctx, lt_optim_config *cfg);
    /* Optional: supply datasets, as Lightning's setup(stage). Called with
     * LT_STAGE_FIT for (train, val), then, when it gave a train set, with
     * LT_STAGE_TEST for the test set in `train` (val unused). Leave iface
     * NULL to use the built-in reader of [data] (FIT) or have no test set
     * (TEST). The trainer calls destroy. Main thread. */
    lt_status (*setup_data)(lt_ctx *ctx, lt_stage stage, lt_dataset *train, lt_dataset *val);
    /* Optional epoch hooks, training thread of the root replica only: with dp
     * or ddp2, state they change is the root's; keep what every replica's
     * steps need out of them (or derive it from lt_step_epoch). */
    lt_status (*on_train_epoch_start)(lt_ctx *ctx, int64_t epoch);
    lt_status (*on_train_epoch_end)(lt_ctx *ctx, int64_t epoch);
    lt_status (*on_validation_epoch_end)(lt_ctx *ctx, int64_t epoch);
    /* Optional: frees the state made in init. Called whenever init was
     * called, also when init or a later setup step failed: the state may
     * then be partial, or not set at all. */
    lt_status (*teardown)(lt_ctx *ctx);
} lt_module_desc;

#ifdef __cplusplus
}
#endif
#endif
