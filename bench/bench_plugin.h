/* The kernel benches' way into the cpu accelerator: dlopen its plugin from
 * the build's plugin directory and set it up with the accelerator.cpu
 * parameters a bench lets the user choose, as ltrun would. For programs
 * linked with lt_link_internal (lt_ctx_init and the config are internal). */
#ifndef LT_BENCH_PLUGIN_H
#define LT_BENCH_PLUGIN_H

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "common/ctx.h"
#include "config/config.h"
#include "lt/accelerator.h"

#ifndef LT_BENCH_PLUGIN_DIR
#define LT_BENCH_PLUGIN_DIR "build/plugins"
#endif

typedef struct bench_cpu {
    void *dl; /* the plugin's handle: dlsym finds its dependencies' symbols too */
    const lt_accelerator_desc *acc;
    lt_ctx ctx;
    const lt_kernels *k;
    lt_config *cfg;
} bench_cpu;

/* Loads and sets up the cpu accelerator with num_threads, isa and bf16_gemm
 * as given (each named by its flag in an error). Returns 0, or the exit
 * status to leave with after printing why: 1 when the plugin cannot be
 * loaded or set up, 2 for a bad value. */
static inline int bench_open_cpu(bench_cpu *B, const char *threads, const char *isa,
                                 const char *bf16) {
    const char *path = LT_BENCH_PLUGIN_DIR "/liblt-accelerator-cpu.so";
    B->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!B->dl) {
        fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
        return 1;
    }
    lt_plugin_entry_fn entry = (lt_plugin_entry_fn)dlsym(B->dl, LT_PLUGIN_ENTRY_SYMBOL);
    B->acc = NULL;
    for (const lt_plugin_header *const *h = entry ? entry() : NULL; h && *h; h++)
        if ((*h)->kind == LT_KIND_ACCELERATOR && !strcmp((*h)->name, "cpu"))
            B->acc = (const lt_accelerator_desc *)*h;
    if (!B->acc) {
        fprintf(stderr, "%s holds no cpu accelerator\n", path);
        return 1;
    }
    static const struct { const char *key, *flag; } params[] = {
        {"num_threads", "--threads"}, {"isa", "--isa"}, {"bf16_gemm", "--bf16-gemm"}};
    const char *values[] = {threads, isa, bf16};
    lt_config *cfg = B->cfg = lt_config_new();
    char err[256];
    for (int i = 0; i < 3; i++) {
        lt_config_declare(cfg, "accelerator.cpu", params[i].key,
                          i == 0 ? LT_PARAM_INT : LT_PARAM_STRING, i == 0 ? "0" : "auto",
                          params[i].key);
        if (lt_config_set(cfg, "accelerator.cpu", params[i].key, values[i], LT_SRC_FLAG,
                          params[i].flag, err, sizeof err) != LT_OK) {
            fprintf(stderr, "%s\n", err);
            return 2;
        }
    }
    if (lt_config_validate(cfg, err, sizeof err) != LT_OK) { /* --threads x */
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    lt_ctx_init(&B->ctx, LT_KIND_ACCELERATOR, "cpu", &B->acc->hdr, cfg);
    if (B->acc->setup(&B->ctx, 0) != LT_OK || B->acc->get_kernels(&B->ctx, &B->k) != LT_OK) {
        fprintf(stderr, "cpu accelerator setup failed: %s\n", lt_last_error(&B->ctx));
        return 1;
    }
    return 0;
}

/* The status of the kernels run since setup (synchronize), after which the
 * accelerator is torn down; printed with `what` when not LT_OK. */
static inline lt_status bench_close_cpu(bench_cpu *B, const char *what) {
    lt_status st = B->acc->synchronize(&B->ctx);
    if (st != LT_OK) fprintf(stderr, "%s: %s\n", what, lt_last_error(&B->ctx));
    B->acc->teardown(&B->ctx);
    lt_config_free(B->cfg);
    return st;
}

#endif
