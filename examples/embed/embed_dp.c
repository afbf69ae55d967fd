/* dp from code: one program drives k replicas of the model, one thread and
 * one core each, no launcher and no second process — lt's answer to "use dp
 * in a notebook". It trains 30 steps with dp, then the same 30 steps on one
 * device, and shows the two models are the same (the batch is split, the
 * loss and gradients weighted by rows, so dp equals one device on the whole
 * batch).
 *
 *   ./build/lt_embed_dp_example [replicas] [plugin-dir]   (default 2 replicas)
 *
 * Exit status 0 when the models agree to 1e-5 (relative norm), 1 when not,
 * 77 when the Fashion-MNIST files are missing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "lt/trainer.h"

#define DATA "/usr/share/datasets/fashion-mnist"

/* Trains with strategy `strategy` on `devices` and returns its parameters. */
static double *train(const char *dir, const char *strategy, const char *devices, size_t *n) {
    char s[64], d[64];
    snprintf(s, sizeof s, "trainer.strategy=%s", strategy);
    snprintf(d, sizeof d, "trainer.devices=%s", devices);
    const char *sets[] = {
        "model.name=fashion_mnist_mlp", "model.hidden=128", s, d, "trainer.seed=1",
        "trainer.max_steps=30", "trainer.max_epochs=1", "trainer.num_sanity_val_steps=0",
        "trainer.limit_val_batches=0", "trainer.enable_progress_bar=false",
        "trainer.default_root_dir=runs/embed_dp", "trainer.enable_checkpointing=false", "data.batch_size=50",
        "optimizer.lr=0.05", "optimizer.momentum=0.9",
    };
    const char *dirs[] = {dir};
    lt_trainer_args args = {
        .struct_size = sizeof args, .sets = sets, .nsets = (int)(sizeof sets / sizeof sets[0]),
        .plugin_dirs = dirs, .nplugin_dirs = 1,
    };
    char err[2048];
    lt_trainer *t;
    if (lt_trainer_new(&args, &t, err, sizeof err) != LT_OK) {
        fprintf(stderr, "embed_dp: %s\n", err);
        return NULL;
    }
    double *p = NULL;
    if (lt_trainer_fit(t) != LT_OK) {
        fprintf(stderr, "embed_dp: %s\n", lt_trainer_error(t));
    } else if (lt_trainer_params(t, NULL, 0, n) == LT_OK && (p = malloc(*n * sizeof *p))) {
        lt_trainer_params(t, p, *n, n);
    }
    lt_trainer_free(t);
    return p;
}

int main(int argc, char **argv) {
    const char *replicas = argc > 1 ? argv[1] : "2";
    const char *dir = argc > 2 ? argv[2] : LT_EXAMPLE_PLUGIN_DIR;
    if (access(DATA "/train-images-idx3-ubyte.gz", R_OK) != 0) {
        fprintf(stderr, "embed_dp: no Fashion-MNIST in %s (install dataset-fashion-mnist)\n", DATA);
        return 77;
    }
    size_t n = 0, n1 = 0;
    double *dp = train(dir, "dp", replicas, &n);
    double *one = dp ? train(dir, "single_device", "1", &n1) : NULL;
    if (!dp || !one || n != n1) {
        free(dp);
        free(one);
        return 1;
    }
    double diff = 0, norm = 0;
    for (size_t i = 0; i < n; i++) {
        diff += (dp[i] - one[i]) * (dp[i] - one[i]);
        norm += one[i] * one[i];
    }
    double ratio = sqrt(diff / norm);
    printf("embed_dp: %s replicas vs one device after 30 steps of batch 50: %zu parameters, "
           "||dp - one|| / ||one|| = %.2e (%s)\n", replicas, n, ratio, ratio <= 1e-5 ? "the same model" : "DIFFERENT");
    free(dp);
    free(one);
    return ratio <= 1e-5 ? 0 : 1;
}
