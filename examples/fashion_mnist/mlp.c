/* An MLP for Fashion-MNIST: 784 -> hidden x layers -> 10, ReLU, optional
 * dropout. The module a Lightning user would write as a LightningModule. */
#include <stdio.h>
#include <stdlib.h>
#include "classifier.h"
#include "lt/lt.h"

#define MAX_LAYERS 8

typedef struct mlp {
    lt_linear_layer *layers[MAX_LAYERS + 1];
    int nlayers;
    double dropout;
} mlp;

static const lt_param_spec mlp_params[] = {
    {"hidden", LT_PARAM_INT, "512", "width of each hidden layer"},
    {"layers", LT_PARAM_INT, "2", "number of hidden layers (1-8)"},
    {"dropout", LT_PARAM_FLOAT, "0", "dropout probability after each hidden layer"},
    {NULL, 0, NULL, NULL},
};

static lt_status mlp_init(lt_ctx *ctx, lt_model *model) {
    int64_t hidden = lt_param_int(ctx, "hidden", 512);
    int64_t layers = lt_param_int(ctx, "layers", 2);
    double dropout = lt_param_float(ctx, "dropout", 0);
    /* dropout in [0, 1), as the CNN and lt_dropout take it: forward would
     * skip a negative one silently (it tests dropout > 0). */
    if (hidden < 1 || layers < 1 || layers > MAX_LAYERS || !(dropout >= 0 && dropout < 1)) {
        lt_set_error(ctx, "model.hidden = %lld, model.layers = %lld, model.dropout = %g: need "
                     "hidden >= 1, 1 <= layers <= %d and 0 <= dropout < 1",
                     (long long)hidden, (long long)layers, dropout, MAX_LAYERS);
        return LT_ERR_INVALID;
    }
    mlp *m = calloc(1, sizeof *m);
    if (!m) return LT_ERR_NOMEM;
    m->dropout = dropout;
    int64_t in = 28 * 28;
    char name[32];
    for (int i = 0; i < layers; i++) {
        snprintf(name, sizeof name, "fc%d", i + 1);
        m->layers[m->nlayers++] = lt_linear_new(model, name, in, hidden, true);
        in = hidden;
    }
    snprintf(name, sizeof name, "fc%d", (int)layers + 1);
    m->layers[m->nlayers++] = lt_linear_new(model, name, in, 10, true);
    lt_ctx_set_state(ctx, m);
    return LT_OK;
}

static lt_tensor *forward(lt_ctx *ctx, lt_step *s) {
    mlp *m = lt_ctx_state(ctx);
    lt_tensor *x = lt_flatten(s, lt_step_input(s, 0));
    for (int i = 0; i < m->nlayers - 1; i++) {
        x = lt_relu(s, lt_linear(s, m->layers[i], x));
        if (m->dropout > 0) x = lt_dropout(s, x, m->dropout);
    }
    return lt_linear(s, m->layers[m->nlayers - 1], x);
}

FMNIST_CLASSIFIER_HOOKS(mlp, forward)

static const lt_module_desc fashion_mnist_mlp = {
    LT_HEADER(LT_KIND_MODULE, lt_module_desc, "fashion_mnist_mlp", NULL, "1.0.0",
              "Fashion-MNIST MLP: 784-512-512-10, ReLU", mlp_params, NULL),
    .init = mlp_init,
    .training_step = mlp_training_step,
    .validation_step = mlp_validation_step,
    .test_step = mlp_test_step,
    .teardown = mlp_teardown,
};

LT_PLUGIN_EXPORT(&fashion_mnist_mlp.hdr)
