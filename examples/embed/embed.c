/* Embedding lt: configure a Trainer from code, fit, test, and read the
 * results back — for programs that do not want ltrun.
 *
 *   ./build/lt_embed_example [plugin-dir]      (trains one epoch of the MLP) */
#include <stdio.h>
#include <stdlib.h>
#include "lt/trainer.h"

int main(int argc, char **argv) {
    const char *dirs[] = {argc > 1 ? argv[1] : LT_EXAMPLE_PLUGIN_DIR};
    const char *sets[] = {
        "model.name=fashion_mnist_mlp", "trainer.max_epochs=1", "trainer.seed=1",
        "trainer.default_root_dir=runs/embed", "optimizer.lr=0.05", "optimizer.momentum=0.9",
    };
    lt_trainer_args args = {
        .struct_size = sizeof args, .sets = sets, .nsets = (int)(sizeof sets / sizeof sets[0]),
        .plugin_dirs = dirs, .nplugin_dirs = 1,
    };
    char err[2048];
    lt_trainer *t;
    if (lt_trainer_new(&args, &t, err, sizeof err) != LT_OK) {
        fprintf(stderr, "embed: %s\n", err);
        return 1;
    }
    if (lt_trainer_fit(t) != LT_OK || lt_trainer_test(t) != LT_OK) {
        fprintf(stderr, "embed: %s\n", lt_trainer_error(t));
        lt_trainer_free(t);
        return 1;
    }
    double acc = 0;
    size_t n = 0;
    double first[4];
    lt_trainer_metric(t, "test_acc", &acc);
    lt_trainer_params(t, first, 4, &n);
    printf("embed: test accuracy %.4f; the model has %zu parameters, the first is %.6f\n", acc, n, first[0]);
    lt_trainer_free(t);
    return 0;
}
