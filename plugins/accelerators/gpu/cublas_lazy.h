/* cuBLAS, opened when the plugin first runs a GEMM rather than when the
 * plugin is loaded. Linking libcublas made every `accelerator = auto` run
 * map it (and cublasLt) while asking whether a GPU is there: +200 MB of
 * resident memory and +0.15 s for a cpu job on a machine without one. The
 * entry points the plugin uses, with cuBLAS's own types; C and CUDA C++.
 * Internal to the gpu accelerator. */
#ifndef LT_GPU_CUBLAS_LAZY_H
#define LT_GPU_CUBLAS_LAZY_H

#include <stddef.h>
#include <cublas_v2.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lt_cublas_api {
    cublasStatus_t (*create)(cublasHandle_t *handle);
    cublasStatus_t (*destroy)(cublasHandle_t handle);
    cublasStatus_t (*set_stream)(cublasHandle_t handle, cudaStream_t stream);
    cublasStatus_t (*set_workspace)(cublasHandle_t handle, void *workspace, size_t bytes);
    cublasStatus_t (*set_math_mode)(cublasHandle_t handle, cublasMath_t mode);
    const char *(*status_name)(cublasStatus_t status);
    const char *(*status_string)(cublasStatus_t status);
    cublasStatus_t (*sgemm)(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                            int k, const float *alpha, const float *a, int lda, const float *b, int ldb,
                            const float *beta, float *c, int ldc);
    cublasStatus_t (*dgemm)(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                            int k, const double *alpha, const double *a, int lda, const double *b, int ldb,
                            const double *beta, double *c, int ldc);
    cublasStatus_t (*gemm_ex)(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                              int k, const void *alpha, const void *a, cudaDataType atype, int lda,
                              const void *b, cudaDataType btype, int ldb, const void *beta, void *c,
                              cudaDataType ctype, int ldc, cublasComputeType_t compute,
                              cublasGemmAlgo_t algo);
} lt_cublas_api;

/* The table, opening libcublas on the first call (any thread; once). NULL
 * when it cannot be opened, with a one-line reason in *why (static text). */
const lt_cublas_api *lt_cublas(const char **why);

#ifdef __cplusplus
}
#endif
#endif
