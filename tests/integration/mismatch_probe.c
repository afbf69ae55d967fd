/* A linear classifier whose ranks log different sync_dist metrics in
 * validation, a bug core/pg.c must report as an error naming both ranks
 * rather than hang on or compute garbage:
 *   model.mode = only_rank1  only rank 1 logs a sync_dist metric, so only
 *                            rank 1 reduces metrics after validation
 *   model.mode = extra       both log val_loss, rank 1 one metric more: the
 *                            two reductions differ in size
 * The rank comes from $RANK. Used by ddp_mismatch.sh only; built into the
 * test plugin directory. */
#include <stdlib.h>
#include <string.h>
#include "lt/lt.h"

typedef struct probe {
    lt_linear_layer *fc;
    int rank;
    int extra; /* mode extra, else only_rank1 */
} probe;

static const lt_param_spec probe_params[] = {
    {"mode", LT_PARAM_STRING, "only_rank1", "only_rank1 or extra (see the source)"},
    {NULL, 0, NULL, NULL},
};

static lt_status probe_init(lt_ctx *ctx, lt_model *model) {
    probe *p = calloc(1, sizeof *p);
    if (!p) return LT_ERR_NOMEM;
    const char *r = getenv("RANK");
    p->rank = r ? atoi(r) : 0;
    const char *mode = lt_param_str(ctx, "mode", "only_rank1");
    if (strcmp(mode, "only_rank1") && strcmp(mode, "extra")) {
        free(p);
        lt_set_error(ctx, "model.mode = '%s': use only_rank1 or extra", mode);
        return LT_ERR_INVALID;
    }
    p->extra = !strcmp(mode, "extra");
    p->fc = lt_linear_new(model, "fc", 28 * 28, 10, true);
    lt_ctx_set_state(ctx, p);
    return LT_OK;
}

static lt_tensor *forward(lt_ctx *ctx, lt_step *s) {
    probe *p = lt_ctx_state(ctx);
    return lt_linear(s, p->fc, lt_flatten(s, lt_step_input(s, 0)));
}

static lt_status probe_training_step(lt_ctx *ctx, lt_step *s, lt_tensor **loss) {
    *loss = lt_cross_entropy(s, forward(ctx, s), lt_step_input(s, 1));
    return lt_step_status(s);
}

static lt_status probe_validation_step(lt_ctx *ctx, lt_step *s) {
    probe *p = lt_ctx_state(ctx);
    lt_tensor *loss = lt_cross_entropy(s, forward(ctx, s), lt_step_input(s, 1));
    double n = (double)lt_step_batch_size(s);
    unsigned flags = LT_LOG_ON_EPOCH | LT_LOG_SYNC_DIST;
    if (p->extra || p->rank == 1) lt_log_metric(s, "val_loss", lt_item(s, loss), n, flags);
    if (p->extra && p->rank == 1) lt_log_metric(s, "rank1_extra", 1.0, n, flags); /* the bug under test */
    return lt_step_status(s);
}

static lt_status probe_teardown(lt_ctx *ctx) {
    free(lt_ctx_state(ctx));
    lt_ctx_set_state(ctx, NULL);
    return LT_OK;
}

static const lt_module_desc mismatch_probe = {
    LT_HEADER(LT_KIND_MODULE, lt_module_desc, "mismatch_probe", NULL, "1.0.0",
              "test module: rank 1 logs a sync_dist metric the others do not", probe_params, NULL),
    .init = probe_init,
    .training_step = probe_training_step,
    .validation_step = probe_validation_step,
    .teardown = probe_teardown,
};

LT_PLUGIN_EXPORT(&mismatch_probe.hdr)
