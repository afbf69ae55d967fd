/* Mixed precision's SGD step on the MLP's parameters (669,706, momentum
 * 0.9), three ways through the cpu accelerator, in one run:
 *   one pass, AVX2 + F16C   sgd_step_mixed (the default where the CPU has them)
 *   one pass, portable      sgd_step_mixed under isa=generic
 *   three passes            cast (16-bit gradients to f32), sgd_step on f32,
 *                           cast (master to the 16-bit compute copy): what
 *                           optimizer.fused=false runs
 * and sgd_step on f32 alone, 32-true's step, for scale. bf16 and f16.
 *
 *   sgd_mixed_bench [--n N] [--rounds R]
 *
 * Each figure is the best over R rounds (default 30) of the mean of 20
 * calls, in microseconds, the variants interleaved round by round (the
 * machine is shared and its speed drifts). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench_cpu.h"
#include "config/config.h"
#include "cpu_plugin.h" /* tests/unit: loads the built cpu accelerator with a config */

typedef struct variant {
    const lt_accelerator_desc *acc;
    const lt_kernels *k;
    lt_ctx ctx;
    lt_config *cfg;
} variant;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The cpu accelerator with accelerator.isa = isa. */
static int open_cpu(variant *v, const char *isa) {
    char err[256] = "";
    v->cfg = lt_config_new();
    if (!v->cfg) return -1;
    lt_config_declare(v->cfg, "accelerator.cpu", "isa", LT_PARAM_STRING, "auto", "isa");
    if (lt_config_set(v->cfg, "accelerator.cpu", "isa", isa, LT_SRC_FLAG, "--isa", err, sizeof err)) {
        fprintf(stderr, "sgd_mixed_bench: %s\n", err);
        return -1;
    }
    if (cpu_plugin_open_config(&v->acc, &v->ctx, &v->k, v->cfg)) return -1;
    if (!LT_KERNELS_HAS(v->k, sgd_step_mixed)) {
        fprintf(stderr, "sgd_mixed_bench: this cpu accelerator has no sgd_step_mixed\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    int64_t n = 669706; /* the MLP 784-512-512-10 */
    int rounds = 30;
    bool bad = false;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) bad = true;
        else if (!strcmp(argv[i], "--n")) n = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else bad = true;
    }
    if (bad || n < 1 || rounds < 1) {
        fprintf(stderr, "usage: sgd_mixed_bench [--n N >= 1] [--rounds R >= 1]\n");
        return 2;
    }
    variant fast, portable;
    if (open_cpu(&fast, "auto") || open_cpu(&portable, "generic")) return 1;
    float *p = aligned_alloc(64, (size_t)n * 4 + 64), *m = aligned_alloc(64, (size_t)n * 4 + 64);
    float *g32 = aligned_alloc(64, (size_t)n * 4 + 64);
    uint16_t *g = aligned_alloc(64, (size_t)n * 2 + 64), *h = aligned_alloc(64, (size_t)n * 2 + 64);
    if (!p || !m || !g32 || !g || !h) return 1;
    bench_print_cpu();
    printf("# sgd_mixed_bench: %lld parameters, momentum 0.9; best of %d rounds of 20 calls, us per call\n",
           (long long)n, rounds);
    printf("%-6s %14s %14s %14s %14s\n", "dtype", "one pass AVX2", "one pass port.", "three passes",
           "f32 sgd_step");
    for (int d = 0; d < 2; d++) {
        lt_dtype t = d ? LT_F16 : LT_BF16;
        for (int64_t i = 0; i < n; i++) {
            p[i] = (float)(i % 97) * 0.01f - 0.5f;
            m[i] = 0;
            g[i] = (uint16_t)(t == LT_BF16 ? 0x3C00 + (i & 0xFF) : 0x2000 + (i & 0xFF)); /* ~0.01 */
        }
        lt_sgd_args a = {.lr = 1e-6, .momentum = 0.9}; /* small steps: the values stay put */
        double best[4] = {1e30, 1e30, 1e30, 1e30};
        for (int r = 0; r < rounds; r++) {
            for (int v = 0; v < 4; v++) {
                double t0 = now();
                for (int it = 0; it < 20; it++) {
                    lt_ctx *c = v == 1 ? &portable.ctx : &fast.ctx;
                    const lt_kernels *k = v == 1 ? portable.k : fast.k;
                    if (v < 2) {
                        k->sgd_step_mixed(c, p, t, g, 1.0, m, t, h, n, &a);
                    } else if (v == 2) {
                        k->cast(c, LT_F32, g32, t, g, n);
                        k->sgd_step(c, LT_F32, p, g32, m, n, &a);
                        k->cast(c, t, h, LT_F32, p, n);
                    } else {
                        k->sgd_step(c, LT_F32, p, g32, m, n, &a);
                    }
                }
                double us = (now() - t0) / 20 * 1e6;
                if (us < best[v]) best[v] = us;
            }
        }
        printf("%-6s %14.1f %14.1f %14.1f %14.1f\n", lt_dtype_name(t), best[0], best[1], best[2], best[3]);
        printf("%-6s one pass AVX2 / three passes = %.2f, / f32 sgd_step = %.2f\n", lt_dtype_name(t),
               best[0] / best[2], best[0] / best[3]);
    }
    if (fast.acc->synchronize(&fast.ctx) != LT_OK || portable.acc->synchronize(&portable.ctx) != LT_OK) {
        fprintf(stderr, "sgd_mixed_bench: a kernel failed: %s\n", lt_last_error(&fast.ctx));
        return 1;
    }
    return 0;
}
