/* The Fashion-MNIST MLP (examples/fashion_mnist/mlp.c: the same parameters
 * fc1 .. fcN, so its checkpoints compare with fashion_mnist_mlp's) with the
 * loss moved to training_step_end: training_step returns the logits of its
 * slice, training_step_end takes the cross-entropy over the logits of every
 * replica gathered. Under dp it must train what fashion_mnist_mlp trains.
 * model.probe makes the replicas other than the root misbehave, bugs the
 * core must refuse with an error naming them:
 *   none            (default) the plain module
 *   uneven_metrics  replicas 1.. log a training metric the root does not
 *   uneven_params   replicas 1.. register fc1 one unit wider than the root
 *   skip_collective replicas 1.. return from training_step without the
 *                   barrier the root waits in (must fail, not hang)
 *   collectives     every training_step checks the module collectives
 *                   across the replicas (each replica a rank) and logs the
 *                   world size it saw as coll_world; a wrong result fails
 *                   the step, naming it
 * A module keeps its state per replica (lt_ctx_set_state); the probe tells
 * its replicas apart by counting the inits run in this process (the root's
 * runs first), a global on purpose. Used by dp_equivalence.sh only; built
 * into the test plugin directory. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lt/lt.h"

#define MAX_LAYERS 8

typedef struct probe {
    lt_linear_layer *layers[MAX_LAYERS + 1];
    int nlayers;
    double dropout;
    int uneven_metrics; /* this replica logs a metric the root does not */
    int collectives;    /* check lt_step_reduce & co. every step */
    int skip_collective; /* replicas 1..: no barrier; the root: one */
} probe;

static atomic_int inits;

static const lt_param_spec probe_params[] = {
    {"hidden", LT_PARAM_INT, "512", "width of each hidden layer"},
    {"layers", LT_PARAM_INT, "2", "number of hidden layers (1-8)"},
    {"dropout", LT_PARAM_FLOAT, "0", "dropout probability after each hidden layer"},
    {"probe", LT_PARAM_STRING, "none", "none, uneven_metrics or uneven_params (see the source)"},
    {NULL, 0, NULL, NULL},
};

static lt_status probe_init(lt_ctx *ctx, lt_model *model) {
    int replica = atomic_fetch_add(&inits, 1); /* 0: the root */
    int64_t hidden = lt_param_int(ctx, "hidden", 512);
    int64_t layers = lt_param_int(ctx, "layers", 2);
    double dropout = lt_param_float(ctx, "dropout", 0);
    const char *mode = lt_param_str(ctx, "probe", "none");
    if (strcmp(mode, "none") && strcmp(mode, "uneven_metrics") && strcmp(mode, "uneven_params") &&
        strcmp(mode, "collectives") && strcmp(mode, "skip_collective")) {
        lt_set_error(ctx, "model.probe = '%s': use none, uneven_metrics, uneven_params, collectives or "
                     "skip_collective", mode);
        return LT_ERR_INVALID;
    }
    if (hidden < 1 || layers < 1 || layers > MAX_LAYERS) {
        lt_set_error(ctx, "model.hidden = %lld and model.layers = %lld: need hidden >= 1 and 1 <= layers <= %d",
                     (long long)hidden, (long long)layers, MAX_LAYERS);
        return LT_ERR_INVALID;
    }
    probe *p = calloc(1, sizeof *p);
    if (!p) return LT_ERR_NOMEM;
    p->dropout = dropout;
    p->uneven_metrics = replica > 0 && !strcmp(mode, "uneven_metrics");
    p->collectives = !strcmp(mode, "collectives");
    p->skip_collective = !strcmp(mode, "skip_collective") ? (replica > 0 ? 1 : 2) : 0;
    int64_t in = 28 * 28;
    char name[32];
    for (int i = 0; i < layers; i++) {
        /* the bug under test: fc1 [hidden + 1, 784] on the replicas */
        int64_t out = i == 0 && replica > 0 && !strcmp(mode, "uneven_params") ? hidden + 1 : hidden;
        snprintf(name, sizeof name, "fc%d", i + 1);
        p->layers[p->nlayers++] = lt_linear_new(model, name, in, out, true);
        in = out;
    }
    snprintf(name, sizeof name, "fc%d", (int)layers + 1);
    p->layers[p->nlayers++] = lt_linear_new(model, name, in, 10, true);
    lt_ctx_set_state(ctx, p);
    return LT_OK;
}

static lt_tensor *forward(lt_ctx *ctx, lt_step *s) {
    probe *p = lt_ctx_state(ctx);
    lt_tensor *x = lt_flatten(s, lt_step_input(s, 0));
    for (int i = 0; i < p->nlayers - 1; i++) {
        x = lt_relu(s, lt_linear(s, p->layers[i], x));
        if (p->dropout > 0) x = lt_dropout(s, x, p->dropout);
    }
    return lt_linear(s, p->layers[p->nlayers - 1], x);
}

/* Each rank (replica) r of W contributes r + 1, r, 10 r; the results are
 * known in closed form. */
static lt_status check_collectives(lt_step *s) {
    int w = lt_step_world_size(s), r = lt_step_rank(s);
    double sum = r + 1, max = r, avg = r + 1, b = 10.0 * r;
    int64_t mine = r, all[64], iavg = r + 1;
    if (w < 1 || w > 64 || r < 0 || r >= w) return lt_step_fail(s, "collectives: rank %d of world %d", r, w);
    if (lt_step_reduce(s, &sum, 1, LT_F64, LT_SUM) || lt_step_reduce(s, &max, 1, LT_F64, LT_MAX) ||
        lt_step_reduce(s, &avg, 1, LT_F64, LT_AVG) || lt_step_reduce(s, &iavg, 1, LT_I64, LT_AVG) ||
        lt_step_all_gather(s, &mine, all, 1, LT_I64) ||
        lt_step_broadcast(s, &b, 1, LT_F64, w - 1) || lt_step_barrier(s))
        return lt_step_status(s);
    if (sum != w * (w + 1) / 2.0) return lt_step_fail(s, "collectives: rank %d: sum %g, expected %g", r, sum, w * (w + 1) / 2.0);
    if (max != w - 1) return lt_step_fail(s, "collectives: rank %d: max %g, expected %d", r, max, w - 1);
    if (avg != (w + 1) / 2.0) return lt_step_fail(s, "collectives: rank %d: avg %g, expected %g", r, avg, (w + 1) / 2.0);
    if (iavg != (int64_t)w * (w + 1) / 2 / w)
        return lt_step_fail(s, "collectives: rank %d: i64 avg %lld, expected %lld", r, (long long)iavg,
                            (long long)((int64_t)w * (w + 1) / 2 / w));
    if (b != 10.0 * (w - 1)) return lt_step_fail(s, "collectives: rank %d: broadcast %g, expected %d", r, b, 10 * (w - 1));
    for (int i = 0; i < w; i++)
        if (all[i] != i) return lt_step_fail(s, "collectives: rank %d: all_gather[%d] = %lld", r, i, (long long)all[i]);
    return lt_log_metric(s, "coll_world", w, 1.0, LT_LOG_ON_STEP);
}

/* The output of this replica's slice, not a loss. */
static lt_status probe_training_step(lt_ctx *ctx, lt_step *s, lt_tensor **out) {
    probe *p = lt_ctx_state(ctx);
    *out = forward(ctx, s);
    if (p->uneven_metrics) lt_log_metric(s, "replica_only", 1.0, (double)lt_step_batch_size(s), 0);
    if (p->collectives) check_collectives(s);
    if (p->skip_collective == 2) lt_step_barrier(s); /* the others never come */
    return lt_step_status(s);
}

/* *loss: the logits of the whole batch; step: its labels. */
static lt_status probe_training_step_end(lt_ctx *ctx, lt_step *s, lt_tensor **loss) {
    (void)ctx;
    *loss = lt_cross_entropy(s, *loss, lt_step_input(s, 1));
    if (*loss)
        lt_log_metric(s, "train_loss", lt_item(s, *loss), (double)lt_step_batch_size(s),
                      LT_LOG_ON_STEP | LT_LOG_ON_EPOCH | LT_LOG_PROG_BAR | LT_LOG_SYNC_DIST);
    return lt_step_status(s);
}

static lt_status evaluate(lt_ctx *ctx, lt_step *s, const char *loss_name, const char *acc_name) {
    lt_tensor *logits = forward(ctx, s), *labels = lt_step_input(s, 1);
    lt_tensor *loss = lt_cross_entropy(s, logits, labels);
    double n = (double)lt_step_batch_size(s);
    unsigned flags = LT_LOG_ON_EPOCH | LT_LOG_PROG_BAR | LT_LOG_SYNC_DIST;
    lt_log_metric(s, loss_name, lt_item(s, loss), n, flags);
    lt_log_metric(s, acc_name, (double)lt_count_correct(s, logits, labels) / n, n, flags);
    return lt_step_status(s);
}

static lt_status probe_validation_step(lt_ctx *ctx, lt_step *s) { return evaluate(ctx, s, "val_loss", "val_acc"); }

static lt_status probe_test_step(lt_ctx *ctx, lt_step *s) { return evaluate(ctx, s, "test_loss", "test_acc"); }

static lt_status probe_teardown(lt_ctx *ctx) {
    free(lt_ctx_state(ctx));
    lt_ctx_set_state(ctx, NULL);
    return LT_OK;
}

static const lt_module_desc replica_probe = {
    LT_HEADER(LT_KIND_MODULE, lt_module_desc, "replica_probe", NULL, "1.0.0",
              "test module: the Fashion-MNIST MLP with its loss in training_step_end", probe_params, NULL),
    .init = probe_init,
    .training_step = probe_training_step,
    .validation_step = probe_validation_step,
    .test_step = probe_test_step,
    .training_step_end = probe_training_step_end,
    .teardown = probe_teardown,
};

LT_PLUGIN_EXPORT(&replica_probe.hdr)
