/* The Fashion-MNIST MLP (the parameters of examples/fashion_mnist/mlp.c, so
 * checkpoints compare) that poisons chosen steps: at each global step listed
 * in model.inject_steps, on rank model.inject_rank (-1: every rank), or at
 * every step with model.inject_every, the first pixel of the batch becomes
 * +Inf, so that step's gradients are Inf/NaN. 16-mixed must skip exactly
 * those optimizer steps on every rank and back the loss scale off.
 * Writes the input in place: cpu accelerator only (its device memory is
 * host memory). With model.delay_ms, rank model.delay_rank sleeps that
 * long in every training step: a slow rank for bagua's async. Used by
 * precision.sh and bagua.sh; built into the test plugin dir. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../../examples/fashion_mnist/classifier.h"
#include "lt/lt.h"

typedef struct probe {
    lt_linear_layer *layers[3];
    char steps[256]; /* ",3,7," */
    int64_t rank;
    bool every;
    int64_t delay_ms, delay_rank;
} probe;

static const lt_param_spec probe_params[] = {
    {"hidden", LT_PARAM_INT, "512", "width of the two hidden layers"},
    {"inject_steps", LT_PARAM_STRING, "", "comma-separated global steps whose gradients become Inf/NaN"},
    {"inject_rank", LT_PARAM_INT, "0", "the rank that injects (-1: all)"},
    {"inject_every", LT_PARAM_BOOL, "false", "inject at every step"},
    {"delay_ms", LT_PARAM_INT, "0", "milliseconds rank delay_rank sleeps in each training step"},
    {"delay_rank", LT_PARAM_INT, "1", "the rank that sleeps"},
    {NULL, 0, NULL, NULL},
};

static lt_status probe_init(lt_ctx *ctx, lt_model *model) {
    probe *p = calloc(1, sizeof *p);
    if (!p) return LT_ERR_NOMEM;
    int64_t hidden = lt_param_int(ctx, "hidden", 512);
    p->layers[0] = lt_linear_new(model, "fc1", 784, hidden, true);
    p->layers[1] = lt_linear_new(model, "fc2", hidden, hidden, true);
    p->layers[2] = lt_linear_new(model, "fc3", hidden, 10, true);
    snprintf(p->steps, sizeof p->steps, ",%s,", lt_param_str(ctx, "inject_steps", ""));
    p->rank = lt_param_int(ctx, "inject_rank", 0);
    p->every = lt_param_bool(ctx, "inject_every", false);
    p->delay_ms = lt_param_int(ctx, "delay_ms", 0);
    p->delay_rank = lt_param_int(ctx, "delay_rank", 1);
    lt_ctx_set_state(ctx, p);
    return LT_OK;
}

static bool injects(const probe *p, lt_step *s) {
    if (!lt_step_training(s) || (p->rank >= 0 && lt_step_rank(s) != p->rank)) return false;
    if (p->every) return true;
    char key[32];
    snprintf(key, sizeof key, ",%lld,", (long long)lt_step_global_step(s));
    return strstr(p->steps, key) != NULL;
}

static void poison(lt_tensor *x) {
    void *d = lt_tensor_data(x);
    switch (lt_tensor_dtype(x)) {
    case LT_F32: *(float *)d = 1.0f / 0.0f; break;
    case LT_F64: *(double *)d = 1.0 / 0.0; break;
    case LT_F16: *(uint16_t *)d = 0x7C00; break;
    case LT_BF16: *(uint16_t *)d = 0x7F80; break;
    default: break;
    }
}

static lt_tensor *forward(lt_ctx *ctx, lt_step *s) {
    probe *p = lt_ctx_state(ctx);
    lt_tensor *in = lt_step_input(s, 0);
    if (in && injects(p, s)) poison(in);
    if (p->delay_ms > 0 && lt_step_training(s) && lt_step_rank(s) == p->delay_rank) {
        struct timespec d = {(time_t)(p->delay_ms / 1000), (long)(p->delay_ms % 1000) * 1000000L};
        nanosleep(&d, NULL);
    }
    lt_tensor *x = lt_flatten(s, in);
    x = lt_relu(s, lt_linear(s, p->layers[0], x));
    x = lt_relu(s, lt_linear(s, p->layers[1], x));
    return lt_linear(s, p->layers[2], x);
}

FMNIST_CLASSIFIER_HOOKS(probe, forward)

static const lt_module_desc overflow_probe = {
    LT_HEADER(LT_KIND_MODULE, lt_module_desc, "overflow_probe", NULL, "1.0.0",
              "Fashion-MNIST MLP whose chosen steps get Inf gradients (tests)", probe_params, NULL),
    .init = probe_init,
    .training_step = probe_training_step,
    .validation_step = probe_validation_step,
    .test_step = probe_test_step,
    .teardown = probe_teardown,
};

LT_PLUGIN_EXPORT(&overflow_probe.hdr)
