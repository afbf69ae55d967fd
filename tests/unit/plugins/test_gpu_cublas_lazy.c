/* The gpu accelerator opens cuBLAS at its first GEMM (cublas_lazy.c), not
 * when it is loaded: an `accelerator = auto` run on a machine without a GPU
 * loads the plugin to ask, and mapping libcublas and cublasLt then cost
 * ~200 MB of resident memory and 0.15 s. Checks, without a GPU:
 *   - loading the plugin maps no libcublas (/proc/self/maps);
 *   - lt_cublas() opens the library of the toolkit the plugin was built
 *     with and finds every entry point (a wrong symbol name fails here,
 *     not at a GPU job's first GEMM), and a status call answers.
 * Skips (77) when the gpu plugin is not built. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define SKIP 77
#define PLUGIN LT_TEST_PLUGIN_DIR "/liblt-accelerator-gpu.so"

#ifndef LT_TEST_GPU_BUILT
int main(void) {
    printf("gpu accelerator not built (LT_WITH_CUDA=OFF or no CUDA toolkit): skipping\n");
    return SKIP;
}
#else
#include "cublas_lazy.h"

static int maps_cublas(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];
    int hit = 0;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "libcublas")) hit = 1;
    if (f) fclose(f);
    return hit;
}

int main(void) {
    int fails = 0;
    void *p = dlopen(PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (!p) {
        fprintf(stderr, "FAIL: %s does not load: %s\n", PLUGIN, dlerror());
        return 1;
    }
    if (maps_cublas()) {
        fprintf(stderr, "FAIL: loading the gpu plugin mapped libcublas (it must open it at the first GEMM)\n");
        fails++;
    } else {
        printf("ok: loading the gpu plugin maps no libcublas\n");
    }
    const char *why = NULL;
    const lt_cublas_api *cb = lt_cublas(&why);
    if (!cb) {
        fprintf(stderr, "FAIL: lt_cublas: %s\n", why ? why : "(no reason)");
        return 1;
    }
    void *const fields[] = {(void *)cb->create, (void *)cb->destroy, (void *)cb->set_stream,
                            (void *)cb->set_workspace, (void *)cb->status_name, (void *)cb->status_string,
                            (void *)cb->sgemm, (void *)cb->dgemm, (void *)cb->gemm_ex};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        if (!fields[i]) {
            fprintf(stderr, "FAIL: entry %zu of the cuBLAS table is NULL\n", i);
            fails++;
        }
    const char *name = cb->status_name(CUBLAS_STATUS_NOT_INITIALIZED);
    if (!name || strcmp(name, "CUBLAS_STATUS_NOT_INITIALIZED") != 0) {
        fprintf(stderr, "FAIL: status_name gave '%s'\n", name ? name : "(null)");
        fails++;
    } else {
        printf("ok: %s opened, every entry point found, status_name answers\n", LT_CUBLAS_SONAME);
    }
    if (lt_cublas(NULL) != cb) {
        fprintf(stderr, "FAIL: a second lt_cublas() gave another table\n");
        fails++;
    }
    dlclose(p);
    return fails ? 1 : 0;
}
#endif
