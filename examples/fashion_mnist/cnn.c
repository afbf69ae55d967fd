/* A small CNN for Fashion-MNIST, the model a Lightning user would write for
 * images: two 3x3 convolutions (padding 1) with ReLU and 2x2 max pooling,
 * then two linear layers.
 *   [N, 1, 28, 28] -> conv 32 -> pool -> conv 64 -> pool -> 3136 -> 128 -> 10 */
#include <stdlib.h>
#include "classifier.h"
#include "lt/lt.h"

typedef struct cnn {
    lt_conv2d_layer *conv1, *conv2;
    lt_linear_layer *fc1, *fc2;
    double dropout;
} cnn;

static const lt_param_spec cnn_params[] = {
    {"channels", LT_PARAM_INT, "32", "channels of the first convolution (the second has twice as many)"},
    {"hidden", LT_PARAM_INT, "128", "width of the hidden linear layer"},
    {"dropout", LT_PARAM_FLOAT, "0", "dropout probability before the last layer"},
    {NULL, 0, NULL, NULL},
};

static lt_status cnn_init(lt_ctx *ctx, lt_model *model) {
    int64_t ch = lt_param_int(ctx, "channels", 32), hidden = lt_param_int(ctx, "hidden", 128);
    double dropout = lt_param_float(ctx, "dropout", 0);
    if (ch < 1 || hidden < 1 || !(dropout >= 0 && dropout < 1)) {
        lt_set_error(ctx, "model.channels = %lld, model.hidden = %lld, model.dropout = %g: need "
                     "channels >= 1, hidden >= 1 and 0 <= dropout < 1",
                     (long long)ch, (long long)hidden, dropout);
        return LT_ERR_INVALID;
    }
    cnn *m = calloc(1, sizeof *m);
    if (!m) return LT_ERR_NOMEM;
    m->dropout = dropout;
    m->conv1 = lt_conv2d_new(model, "conv1", 1, ch, 3, 1, 1, true);
    m->conv2 = lt_conv2d_new(model, "conv2", ch, 2 * ch, 3, 1, 1, true);
    m->fc1 = lt_linear_new(model, "fc1", 2 * ch * 7 * 7, hidden, true);
    m->fc2 = lt_linear_new(model, "fc2", hidden, 10, true);
    lt_ctx_set_state(ctx, m);
    return LT_OK;
}

static lt_tensor *forward(lt_ctx *ctx, lt_step *s) {
    cnn *m = lt_ctx_state(ctx);
    lt_tensor *x = lt_step_input(s, 0);
    int64_t image[4] = {lt_step_batch_size(s), 1, 28, 28};
    x = lt_reshape(s, x, 4, image);
    x = lt_max_pool2d(s, lt_relu(s, lt_conv2d(s, m->conv1, x)), 2, 2);
    x = lt_max_pool2d(s, lt_relu(s, lt_conv2d(s, m->conv2, x)), 2, 2);
    x = lt_relu(s, lt_linear(s, m->fc1, lt_flatten(s, x)));
    if (m->dropout > 0) x = lt_dropout(s, x, m->dropout);
    return lt_linear(s, m->fc2, x);
}

FMNIST_CLASSIFIER_HOOKS(cnn, forward)

static const lt_module_desc fashion_mnist_cnn = {
    LT_HEADER(LT_KIND_MODULE, lt_module_desc, "fashion_mnist_cnn", NULL, "1.0.0",
              "Fashion-MNIST CNN: conv3x3 32 - pool - conv3x3 64 - pool - 128 - 10", cnn_params,
              NULL),
    .init = cnn_init,
    .training_step = cnn_training_step,
    .validation_step = cnn_validation_step,
    .test_step = cnn_test_step,
    .teardown = cnn_teardown,
};

LT_PLUGIN_EXPORT(&fashion_mnist_cnn.hdr)
