/* What the two Fashion-MNIST models share: given a model's forward (images
 * to logits), the hooks of a classifier, as a LightningModule would write
 * them once in a base class:
 *   training_step   cross-entropy loss, logged as train_loss;
 *   validation_step / test_step   loss and accuracy (val_* / test_*),
 *                   averaged over the epoch and over ranks;
 *   teardown        frees the state init stored with lt_ctx_set_state.
 * FMNIST_CLASSIFIER_HOOKS(prefix, forward) defines prefix_training_step,
 * prefix_validation_step, prefix_test_step and prefix_teardown. */
#ifndef FMNIST_CLASSIFIER_H
#define FMNIST_CLASSIFIER_H

#include <stdlib.h>
#include "lt/lt.h"

static inline lt_status fmnist_train(lt_step *s, lt_tensor *logits, lt_tensor **loss) {
    *loss = lt_cross_entropy(s, logits, lt_step_input(s, 1));
    if (*loss)
        lt_log_metric(s, "train_loss", lt_item(s, *loss), (double)lt_step_batch_size(s),
                      LT_LOG_ON_STEP | LT_LOG_ON_EPOCH | LT_LOG_PROG_BAR | LT_LOG_SYNC_DIST);
    return lt_step_status(s);
}

static inline lt_status fmnist_evaluate(lt_step *s, lt_tensor *logits, const char *loss_name,
                                        const char *acc_name) {
    lt_tensor *labels = lt_step_input(s, 1);
    lt_tensor *loss = lt_cross_entropy(s, logits, labels);
    double n = (double)lt_step_batch_size(s);
    unsigned flags = LT_LOG_ON_EPOCH | LT_LOG_PROG_BAR | LT_LOG_SYNC_DIST;
    lt_log_metric(s, loss_name, lt_item(s, loss), n, flags);
    lt_log_metric(s, acc_name, (double)lt_count_correct(s, logits, labels) / n, n, flags);
    return lt_step_status(s);
}

#define FMNIST_CLASSIFIER_HOOKS(prefix, forward)                                          \
    static lt_status prefix##_training_step(lt_ctx *ctx, lt_step *s, lt_tensor **loss) { \
        return fmnist_train(s, forward(ctx, s), loss);                                    \
    }                                                                                     \
    static lt_status prefix##_validation_step(lt_ctx *ctx, lt_step *s) {                  \
        return fmnist_evaluate(s, forward(ctx, s), "val_loss", "val_acc");                \
    }                                                                                     \
    static lt_status prefix##_test_step(lt_ctx *ctx, lt_step *s) {                        \
        return fmnist_evaluate(s, forward(ctx, s), "test_loss", "test_acc");              \
    }                                                                                     \
    static lt_status prefix##_teardown(lt_ctx *ctx) {                                     \
        free(lt_ctx_state(ctx));                                                          \
        lt_ctx_set_state(ctx, NULL);                                                      \
        return LT_OK;                                                                     \
    }

#endif
