/* A linear classifier whose ranks log different sync_dist metrics in
 * validation, a bug core/dist/process_group.c must report as an error naming both ranks
 * rather than hang on or compute garbage:
 *   model.mode = only_rank1  only rank 1 logs a sync_dist metric, so only
 *                            rank 1 reduces metrics after validation
 *   model.mode = extra       both log val_loss, rank 1 one metric more: the
 *                            two reductions differ in size
 *   model.mode = collectives every rank checks the module collectives
 *                            (all_gather, broadcast, reduce, barrier, rank,
 *                            world size) against the values they must give
 *                            and fails the step otherwise; the run must pass
 * The rank comes from $RANK. Used by ddp_mismatch.sh only; built into the
 * test plugin directory. */
#include <stdlib.h>
#include <string.h>
#include "lt/lt.h"

typedef struct probe {
    lt_linear_layer *fc;
    int rank;
    int extra;       /* mode extra */
    int collectives; /* mode collectives */
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
    if (strcmp(mode, "only_rank1") && strcmp(mode, "extra") && strcmp(mode, "collectives")) {
        free(p);
        lt_set_error(ctx, "model.mode = '%s': use only_rank1, extra or collectives", mode);
        return LT_ERR_INVALID;
    }
    p->extra = !strcmp(mode, "extra");
    p->collectives = !strcmp(mode, "collectives");
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

/* Every module collective, checked against what it must return. */
static lt_status check_collectives(lt_step *s) {
    int rank = lt_step_rank(s), world = lt_step_world_size(s);
    if (world < 1 || world > 8 || rank < 0 || rank >= world)
        return lt_step_fail(s, "rank %d of world %d", rank, world);
    if (lt_step_is_global_zero(s) != (rank == 0)) return lt_step_fail(s, "is_global_zero wrong on rank %d", rank);
    double mine = rank + 1, all[8] = {0};
    if (lt_step_all_gather(s, &mine, all, 1, LT_F64) != LT_OK) return lt_step_status(s);
    for (int r = 0; r < world; r++)
        if (all[r] != r + 1) return lt_step_fail(s, "all_gather: [%d] = %g, want %d", r, all[r], r + 1);
    double sum = mine;
    if (lt_step_reduce(s, &sum, 1, LT_F64, LT_SUM) != LT_OK) return lt_step_status(s);
    if (sum != world * (world + 1) / 2.0) return lt_step_fail(s, "reduce: sum %g, want %g", sum, world * (world + 1) / 2.0);
    int64_t b = 100 + rank;
    int root = world - 1;
    if (lt_step_broadcast(s, &b, 1, LT_I64, root) != LT_OK) return lt_step_status(s);
    if (b != 100 + root) return lt_step_fail(s, "broadcast from %d: got %lld", root, (long long)b);
    return lt_step_barrier(s);
}

static lt_status probe_validation_step(lt_ctx *ctx, lt_step *s) {
    probe *p = lt_ctx_state(ctx);
    if (p->collectives) return check_collectives(s);
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
