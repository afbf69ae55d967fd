/* Loads the built cpu accelerator plugin for tests that drive kernels, the
 * nn layer or optimizers directly. Not dlclosed: the plugin may keep worker
 * threads alive. */
#ifndef LT_TEST_CPU_PLUGIN_H
#define LT_TEST_CPU_PLUGIN_H

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "common/ctx.h"
#include "lt/accelerator.h"

#define CPU_PLUGIN_PATH LT_TEST_PLUGIN_DIR "/liblt-accelerator-cpu.so"

/* 0 on success; on failure prints why and returns -1 (CUnit's suite-init convention). */
/* With a config, the plugin reads its parameters ([accelerator.cpu]) from it;
 * a failed setup prints and leaves its message in the context. */
static inline int cpu_plugin_open_config(const lt_accelerator_desc **acc, lt_ctx *ctx,
                                         const lt_kernels **k, const lt_config *config) {
    void *dl = dlopen(CPU_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!dl) { fprintf(stderr, "cannot load %s: %s\n", CPU_PLUGIN_PATH, dlerror()); return -1; }
    lt_plugin_entry_fn entry = (lt_plugin_entry_fn)dlsym(dl, LT_PLUGIN_ENTRY_SYMBOL);
    if (!entry) { fprintf(stderr, "%s has no %s\n", CPU_PLUGIN_PATH, LT_PLUGIN_ENTRY_SYMBOL); return -1; }
    *acc = NULL;
    for (const lt_plugin_header *const *h = entry(); *h; h++)
        if ((*h)->kind == LT_KIND_ACCELERATOR && !strcmp((*h)->name, "cpu"))
            *acc = (const lt_accelerator_desc *)*h;
    if (!*acc) { fprintf(stderr, "%s holds no cpu accelerator\n", CPU_PLUGIN_PATH); return -1; }
    lt_ctx_init(ctx, LT_KIND_ACCELERATOR, "cpu", &(*acc)->hdr, config);
    if ((*acc)->setup(ctx, 0) != LT_OK || (*acc)->get_kernels(ctx, k) != LT_OK) {
        fprintf(stderr, "cpu accelerator setup failed: %s\n", lt_last_error(ctx));
        return -1;
    }
    return 0;
}

static inline int cpu_plugin_open(const lt_accelerator_desc **acc, lt_ctx *ctx,
                                  const lt_kernels **k) {
    return cpu_plugin_open_config(acc, ctx, k, NULL);
}

#endif
