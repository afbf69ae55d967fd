/* cuBLAS opened on first use: see cublas_lazy.h. */
#include "cublas_lazy.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#ifndef LT_CUBLAS_SONAME
#error "LT_CUBLAS_SONAME (libcublas.so.<CUDA major>) comes from CMakeLists.txt"
#endif

static lt_cublas_api g_api;
static const lt_cublas_api *g_ok;
static char g_why[600];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* The _v2 names are the symbols cublas_v2.h maps its calls to. */
#define SYM(field, name)                                                                     \
    do {                                                                                     \
        *(void **)&g_api.field = dlsym(h, name);                                             \
        if (!g_api.field) {                                                                  \
            snprintf(g_why, sizeof g_why, "%s has no %s (a cuBLAS older than this build's "  \
                     "toolkit?)", LT_CUBLAS_SONAME, name);                                   \
            return;                                                                          \
        }                                                                                    \
    } while (0)

static void open_cublas(void) {
    /* The soname first (the dynamic linker's paths), then the toolkit's
     * folder this plugin was built against, where the link found it. */
    void *h = dlopen(LT_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
#ifdef LT_CUBLAS_DIR
    if (!h) h = dlopen(LT_CUBLAS_DIR "/" LT_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
#endif
    if (!h) {
        const char *e = dlerror();
        snprintf(g_why, sizeof g_why, "%s cannot be loaded (%s); install the CUDA toolkit's cuBLAS "
                 "or add its folder to LD_LIBRARY_PATH", LT_CUBLAS_SONAME, e ? e : "not found");
        return;
    }
    SYM(create, "cublasCreate_v2");
    SYM(destroy, "cublasDestroy_v2");
    SYM(set_stream, "cublasSetStream_v2");
    SYM(set_workspace, "cublasSetWorkspace_v2");
    SYM(set_math_mode, "cublasSetMathMode");
    SYM(status_name, "cublasGetStatusName");
    SYM(status_string, "cublasGetStatusString");
    SYM(sgemm, "cublasSgemm_v2");
    SYM(dgemm, "cublasDgemm_v2");
    SYM(gemm_ex, "cublasGemmEx");
    g_ok = &g_api; /* the library stays open for the process's life */
}

const lt_cublas_api *lt_cublas(const char **why) {
    pthread_once(&g_once, open_cublas);
    if (!g_ok && why) *why = g_why;
    return g_ok;
}
