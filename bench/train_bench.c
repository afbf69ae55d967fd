/* Single-process training throughput of the Fashion-MNIST MLP (784-512-512-10,
 * ReLU, SGD momentum 0.9, lr 0.05) through the public trainer API, beside the
 * GEMM-only time of the same step measured in the same run; with --model cnn,
 * the CNN example's throughput alone.
 *
 *   train_bench [--batch 64[,256,...]] [--samples N] [--short-samples N] [--gemm-secs S]
 *
 * Timing: lt_trainer_fit is timed for two runs that differ only in max_steps
 * (a long one of about --samples samples and a short one of --short-samples);
 * steady-state time per step = (T_long - T_short) / (steps_long - steps_short),
 * which cancels every fixed cost (plugin loading, reading and decoding the gz
 * files, worker setup, arena growth in the first steps, teardown). The naive
 * figure (long run's samples / its whole fit time) is printed as well, and the
 * process CPU time per step (same difference; all threads, the loader's
 * included): wall step_ms well above cpu_step_ms means other work took the core.
 *
 * GEMM reference: the eight cblas_sgemm calls one training step makes, with
 * lt's shapes, transposes and leading dimensions (core/nn/layers.c):
 *   forward   Y = X W^T          NoTrans,Trans   m=B   n=out k=in     (3 layers)
 *   weight    dW = dY^T X        Trans,NoTrans   m=out n=in  k=B      (3 layers)
 *   input     dX = dY W          NoTrans,NoTrans m=B   n=in  k=out    (layers 2, 3;
 *             the first layer's input needs no gradient)
 * run back to back on separate buffers, single thread; the best of several
 * rounds is the GEMM-only step time. fraction = gemm_step / lt_step.
 *
 * Output: one machine-readable "lt batch=..." line per batch size (key=value),
 * plus "gemm batch=... shape=..." detail lines. --gemm-secs 0 skips the GEMM
 * reference (no gemm_* fields, no detail lines), so that the process's peak
 * RSS is the training runs' alone (bench/run_precision_bench.sh). Each lt
 * line ends precision=NAME: trainer.precision as the last --set gave it
 * (32-true when none did). OpenBLAS runs one thread: this
 * program sets OPENBLAS_NUM_THREADS=1 and calls openblas_set_num_threads(1)
 * before the first trainer exists. */
#define _GNU_SOURCE /* nftw, mkdtemp */
#include <cblas.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "lt/trainer.h"

#ifndef LT_BENCH_PLUGIN_DIR
#define LT_BENCH_PLUGIN_DIR "build/plugins"
#endif

/* OpenBLAS's own prototype lives in its cblas.h; declared again in case the
 * header in use is a reference CBLAS one. */
void openblas_set_num_threads(int num_threads);

#define TRAIN_SAMPLES 55000 /* 60000 - data.val_split (5000) */

static const int64_t layer_in[3] = {784, 512, 512};
static const int64_t layer_out[3] = {512, 512, 10};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* FLOPs of the GEMMs of one training step (2*m*n*k each). */
static double step_flops(int64_t b) {
    double f = 0;
    for (int l = 0; l < 3; l++) {
        double mnk = (double)b * (double)layer_in[l] * (double)layer_out[l];
        f += 2 * mnk;            /* forward */
        f += 2 * mnk;            /* weight gradient */
        if (l > 0) f += 2 * mnk; /* input gradient */
    }
    return f;
}

/* ---- lt ----------------------------------------------------------------- */

typedef struct fit_result {
    double fit_s;     /* wall time of lt_trainer_fit */
    double cpu_s;     /* CPU time of the process (every thread) during it */
    double train_loss;
    bool have_loss;
} fit_result;

static const char *data_dir(void) {
    const char *d = getenv("LT_FASHION_MNIST_DIR");
    return d && *d ? d : "/usr/share/datasets/fashion-mnist";
}

/* "mlp" (the target) or "cnn" (examples/fashion_mnist/cnn.c). */
static const char *g_model = "mlp";

/* --set section.key=value: settings the bench passes on (accelerator.isa,
 * accelerator.gemm ...); LT_* variables are ignored so that only what the
 * command line says changes what is measured. */
enum { MAX_EXTRA = 16 };
static const char *g_extra[MAX_EXTRA];
static int g_nextra;

/* The precision lt's runs use: the last --set trainer.precision=... (it
 * overrides the 32-true in run_lt's list, which the --set values follow). */
static const char *precision_name(void) {
    static const char key[] = "trainer.precision=";
    const char *p = "32-true";
    for (int i = 0; i < g_nextra; i++)
        if (!strncmp(g_extra[i], key, sizeof key - 1)) p = g_extra[i] + sizeof key - 1;
    return p;
}

static int run_lt(int64_t batch, int64_t steps, const char *root, fit_result *out) {
    char s_batch[64], s_steps[64], s_dir[1100], s_root[1100];
    snprintf(s_batch, sizeof s_batch, "data.batch_size=%lld", (long long)batch);
    snprintf(s_steps, sizeof s_steps, "trainer.max_steps=%lld", (long long)steps);
    snprintf(s_dir, sizeof s_dir, "data.dir=%s", data_dir());
    snprintf(s_root, sizeof s_root, "trainer.default_root_dir=%s", root);
    bool cnn = !strcmp(g_model, "cnn");
    const char *sets[] = {
        cnn ? "model.name=fashion_mnist_cnn" : "model.name=fashion_mnist_mlp",
        cnn ? "model.hidden=128" : "model.hidden=512",
        cnn ? "model.channels=32" : "model.layers=2",
        "trainer.accelerator=cpu",
        "trainer.devices=1",
        "trainer.strategy=auto",
        "trainer.precision=32-true",
        "trainer.max_epochs=100000", /* max_steps ends the run */
        s_steps,
        "trainer.seed=42",
        "trainer.limit_val_batches=0",
        "trainer.num_sanity_val_steps=0",
        "trainer.enable_checkpointing=false",
        "trainer.enable_progress_bar=false",
        "trainer.log_level=warn",
        s_root,
        "logger.csv=false",
        s_dir,
        s_batch,
        "data.val_split=5000",
        "data.drop_last=true", /* every step has exactly `batch` samples */
        "data.shuffle=true",
        "optimizer.name=sgd",
        "optimizer.lr=0.05",
        "optimizer.momentum=0.9",
    };
    const char *all[sizeof sets / sizeof sets[0] + MAX_EXTRA];
    int nall = 0;
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) all[nall++] = sets[i];
    for (int i = 0; i < g_nextra; i++) all[nall++] = g_extra[i];
    const char *dirs[] = {LT_BENCH_PLUGIN_DIR};
    lt_trainer_args a = {
        .struct_size = sizeof a,
        .config_path = NULL,
        .sets = all,
        .nsets = nall,
        .plugin_dirs = dirs,
        .nplugin_dirs = 1,
        .ignore_env = true, /* only --set may change what is measured */
    };
    char err[1024];
    lt_trainer *t = NULL;
    if (lt_trainer_new(&a, &t, err, sizeof err) != LT_OK) {
        fprintf(stderr, "train_bench: lt_trainer_new: %s\n", err);
        return -1;
    }
    double c0 = cpu_s(), t0 = now_s();
    lt_status st = lt_trainer_fit(t);
    double t1 = now_s(), c1 = cpu_s();
    if (st != LT_OK) {
        fprintf(stderr, "train_bench: lt_trainer_fit: %s\n", lt_trainer_error(t));
        lt_trainer_free(t);
        return -1;
    }
    out->fit_s = t1 - t0;
    out->cpu_s = c1 - c0;
    out->have_loss = lt_trainer_metric(t, "train_loss", &out->train_loss);
    lt_trainer_free(t);
    return 0;
}

/* ---- GEMM reference ------------------------------------------------------ */

typedef struct gemm_call {
    const char *name;
    CBLAS_TRANSPOSE ta, tb;
    int m, n, k, lda, ldb, ldc;
    float *a, *b, *c;
    double best_s; /* best time of this call within a round (for the breakdown) */
} gemm_call;

static float *rand_buf(size_t n, uint64_t *state) {
    float *p = aligned_alloc(64, ((n * sizeof(float)) + 63) & ~(size_t)63);
    if (!p) { fprintf(stderr, "train_bench: out of memory\n"); exit(1); }
    for (size_t i = 0; i < n; i++) {
        *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
        p[i] = (float)((double)(*state >> 40) / (double)(1ULL << 24) - 0.5);
    }
    return p;
}

/* Returns the best GEMM-only step time over rounds run for about `secs`. */
static double gemm_step_time(int64_t batch, double secs, gemm_call *calls, int *ncalls) {
    int B = (int)batch;
    uint64_t rs = 12345;
    float *x[3], *w[3], *y[3], *dy[3], *dw[3], *dx[3] = {NULL, NULL, NULL};
    for (int l = 0; l < 3; l++) {
        int in = (int)layer_in[l], out = (int)layer_out[l];
        x[l] = rand_buf((size_t)B * in, &rs);
        w[l] = rand_buf((size_t)out * in, &rs);
        y[l] = rand_buf((size_t)B * out, &rs);
        dy[l] = rand_buf((size_t)B * out, &rs);
        dw[l] = rand_buf((size_t)out * in, &rs);
        if (l > 0) dx[l] = rand_buf((size_t)B * in, &rs);
    }
    int n = 0;
    static const char *fwd_names[3] = {"fwd1", "fwd2", "fwd3"};
    static const char *wg_names[3] = {"wgrad1", "wgrad2", "wgrad3"};
    static const char *ig_names[3] = {NULL, "dgrad2", "dgrad3"};
    for (int l = 0; l < 3; l++) { /* forward, in order */
        int in = (int)layer_in[l], out = (int)layer_out[l];
        calls[n++] = (gemm_call){fwd_names[l], CblasNoTrans, CblasTrans, B, out, in, in, in, out,
                                 x[l], w[l], y[l], 1e30};
    }
    for (int l = 2; l >= 0; l--) { /* backward, last layer first */
        int in = (int)layer_in[l], out = (int)layer_out[l];
        calls[n++] = (gemm_call){wg_names[l], CblasTrans, CblasNoTrans, out, in, B, out, in, in,
                                 dy[l], x[l], dw[l], 1e30};
        if (l > 0)
            calls[n++] = (gemm_call){ig_names[l], CblasNoTrans, CblasNoTrans, B, in, out, out, in,
                                     in, dy[l], w[l], dx[l], 1e30};
    }
    *ncalls = n;
    double best = 1e30, t_end = now_s() + secs;
    int rounds = 0;
    while (rounds < 5 || now_s() < t_end) {
        double t0 = now_s();
        for (int i = 0; i < n; i++) {
            gemm_call *g = &calls[i];
            double a0 = now_s();
            cblas_sgemm(CblasRowMajor, g->ta, g->tb, g->m, g->n, g->k, 1.0f, g->a, g->lda, g->b,
                        g->ldb, 0.0f, g->c, g->ldc);
            double dt = now_s() - a0;
            if (dt < g->best_s) g->best_s = dt;
        }
        double dt = now_s() - t0;
        if (dt < best) best = dt;
        rounds++;
    }
    for (int l = 0; l < 3; l++) {
        free(x[l]); free(w[l]); free(y[l]); free(dy[l]); free(dw[l]); free(dx[l]);
    }
    return best;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

/* ---- main ------------------------------------------------------------- */

static void usage(void) {
    fprintf(stderr,
            "usage: train_bench [--model mlp|cnn] [--batch 64,256,1024] [--samples N] [--short-samples N] [--gemm-secs S]\n"
            "                   [--set section.key=value ...]\n"
            "  --set            a setting for lt's runs, e.g. accelerator.isa=generic (LT_* variables are ignored)\n"
            "  --model          mlp: 784-512-512-10 (default); cnn: the CNN example, no GEMM reference\n"
            "  --samples        samples the long lt run trains (default 110000 = 2 epochs)\n"
            "  --short-samples  samples the short lt run trains (default samples/10)\n"
            "  --gemm-secs      seconds spent timing the GEMM-only step (default 1; 0 skips it)\n"
            "env: LT_FASHION_MNIST_DIR (default /usr/share/datasets/fashion-mnist)\n");
}

int main(int argc, char **argv) {
    /* One OpenBLAS thread. OpenBLAS is linked into this program, so it has
     * read its variables already at load time: set the count explicitly too. */
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    openblas_set_num_threads(1);

    int64_t batches[16];
    int nb = 0;
    int64_t samples = 110000, short_samples = -1;
    double gemm_secs = 1.0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
            char *p = argv[++i];
            while (*p && nb < 16) {
                char *end;
                long long v = strtoll(p, &end, 10);
                if (end == p || v < 1) { usage(); return 2; }
                batches[nb++] = v;
                p = *end == ',' ? end + 1 : end;
            }
        } else if (!strcmp(argv[i], "--set") && i + 1 < argc && g_nextra < MAX_EXTRA) {
            g_extra[g_nextra++] = argv[++i];
        } else if (!strcmp(argv[i], "--model") && i + 1 < argc) {
            g_model = argv[++i];
            if (strcmp(g_model, "mlp") && strcmp(g_model, "cnn")) { usage(); return 2; }
        } else if (!strcmp(argv[i], "--samples") && i + 1 < argc) {
            samples = strtoll(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--short-samples") && i + 1 < argc) {
            short_samples = strtoll(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--gemm-secs") && i + 1 < argc) {
            gemm_secs = strtod(argv[++i], NULL);
        } else {
            usage();
            return 2;
        }
    }
    if (nb == 0) { batches[0] = 64; batches[1] = 256; batches[2] = 1024; nb = 3; }
    if (short_samples < 0) short_samples = samples / 10;

    char root[] = "/tmp/lt_train_bench.XXXXXX";
    if (!mkdtemp(root)) { perror("train_bench: mkdtemp"); return 1; }

    printf("# lt train_bench: %s, SGD momentum 0.9 lr 0.05, %d train samples/epoch, "
           "OpenBLAS 1 thread, plugins %s, data %s\n",
           strcmp(g_model, "cnn") ? "MLP 784-512-512-10" : "CNN conv32-pool-conv64-pool-128-10",
           TRAIN_SAMPLES, LT_BENCH_PLUGIN_DIR, data_dir());
    printf("# lt step time = (fit(long) - fit(short)) / (steps_long - steps_short); "
           "gemm step = best round of the step's 8 cblas_sgemm calls\n");
    fflush(stdout);
    int rc = 0;
    for (int bi = 0; bi < nb; bi++) {
        int64_t b = batches[bi];
        if (b > TRAIN_SAMPLES) { fprintf(stderr, "train_bench: batch %lld > %d\n", (long long)b, TRAIN_SAMPLES); rc = 1; continue; }
        int64_t steps_long = samples / b, steps_short = short_samples / b;
        if (steps_short < 2) steps_short = 2;
        if (steps_long < steps_short + 5) steps_long = steps_short + 5;
        fit_result rs, rl;
        if (run_lt(b, steps_short, root, &rs) || run_lt(b, steps_long, root, &rl)) { rc = 1; continue; }
        double dsteps = (double)(steps_long - steps_short);
        double step_s = (rl.fit_s - rs.fit_s) / dsteps;
        double naive = (double)(steps_long * b) / rl.fit_s;
        if (step_s <= 0) step_s = rl.fit_s / (double)steps_long; /* noise swamped the short run */
        /* CPU time per step, same difference: a wall step well above it means
         * the run lost its core to other work (a shared machine). */
        double cpu_step_s = (rl.cpu_s - rs.cpu_s) / dsteps;

        bool cnn = !strcmp(g_model, "cnn");
        /* No GEMM reference for the CNN (its convolutions' GEMMs vary per layer)
         * nor when --gemm-secs 0 asked for none. */
        if (cnn || gemm_secs <= 0) {
            printf("lt %sbatch=%lld samples_per_s=%.0f step_ms=%.4f naive_samples_per_s=%.0f "
                   "fit_long_s=%.3f fit_short_s=%.3f steps_long=%lld steps_short=%lld cpu_step_ms=%.4f "
                   "train_loss=%.4f precision=%s\n",
                   cnn ? "model=cnn " : "", (long long)b, (double)b / step_s, step_s * 1e3, naive,
                   rl.fit_s, rs.fit_s, (long long)steps_long, (long long)steps_short,
                   cpu_step_s * 1e3, rl.have_loss ? rl.train_loss : -1.0, precision_name());
            fflush(stdout);
            continue;
        }
        gemm_call calls[8];
        int ncalls = 0;
        double gemm_s = gemm_step_time(b, gemm_secs, calls, &ncalls);
        double flops = step_flops(b);
        printf("lt batch=%lld samples_per_s=%.0f step_ms=%.4f gemm_step_ms=%.4f gemm_fraction=%.3f "
               "lt_gflops=%.1f gemm_gflops=%.1f naive_samples_per_s=%.0f fit_long_s=%.3f "
               "fit_short_s=%.3f steps_long=%lld steps_short=%lld cpu_step_ms=%.4f train_loss=%.4f "
               "precision=%s\n",
               (long long)b, (double)b / step_s, step_s * 1e3, gemm_s * 1e3, gemm_s / step_s,
               flops / step_s * 1e-9, flops / gemm_s * 1e-9, naive, rl.fit_s, rs.fit_s,
               (long long)steps_long, (long long)steps_short, cpu_step_s * 1e3,
               rl.have_loss ? rl.train_loss : -1.0, precision_name());
        for (int i = 0; i < ncalls; i++) {
            const gemm_call *g = &calls[i];
            printf("gemm batch=%lld call=%s m=%d n=%d k=%d trans=%c%c best_ms=%.4f gflops=%.1f\n",
                   (long long)b, g->name, g->m, g->n, g->k, g->ta == CblasTrans ? 'T' : 'N',
                   g->tb == CblasTrans ? 'T' : 'N', g->best_s * 1e3,
                   2.0 * g->m * g->n * g->k / g->best_s * 1e-9);
        }
        fflush(stdout);
    }
    /* default_root_dir: nothing should be written there (no logger, no checkpoints). */
    if (nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "train_bench: could not remove %s\n", root);
    return rc;
}
