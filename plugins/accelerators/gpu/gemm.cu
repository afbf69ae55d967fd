/* GEMM through cuBLAS, on the calling thread's handle (bound to
 * cudaStreamPerThread).
 *
 * lt is row-major, cuBLAS column-major. A row-major m x n matrix with
 * leading dimension ld is, read column-major, its n x m transpose with the
 * same ld; so C = op(A) op(B) in row-major is C^T = op(B)^T op(A)^T in
 * column-major: the call swaps the operands (B first) and the sizes
 * (n, m), and keeps each operand's own transpose flag. The leading
 * dimensions need no change.
 *
 * f32: cublasSgemm in the default math mode (true fp32, no TF32 unless
 * NVIDIA_TF32_OVERRIDE asks for it). f64: cublasDgemm. f16 and bf16:
 * cublasGemmEx with CUBLAS_COMPUTE_32F (fp32 accumulation, fp32 alpha and
 * beta), the result rounded once into the 16-bit C. */
#include <limits.h>
#include "cublas_lazy.h"
#include "gpu_cuda.cuh"
#include "common/kernel_args.h"

static bool gemm_args_ok(lt_ctx *ctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                         int64_t lda, int64_t ldb, int64_t ldc) {
    char msg[512];
    if (lt_gemm_args_ok("gpu gemm", "cuBLAS's", ta, tb, m, n, k, lda, ldb, ldc, msg, sizeof msg)) return true;
    gpu_fail(ctx, LT_ERR_INVALID, "%s", msg);
    return false;
}

/* k == 0: C = beta C (beta == 0 writes zeros without reading C), done here
 * rather than trusting every cuBLAS version's reading of an empty product. */
template <class T>
__global__ void k_scale_c(T *c, int64_t m, int64_t n, int64_t ldc, typename Num<T>::C beta) {
    typedef Num<T> N;
    GPU_LOOP(e, m * n) {
        int64_t r = e / n, col = e - r * n;
        T *p = c + r * ldc + col;
        *p = beta == 0 ? N::st(0) : N::st(beta * N::ld(*p));
    }
}
template <class T>
static void scale_c_t(lt_ctx *ctx, void *c, int64_t m, int64_t n, int64_t ldc, double beta) {
    typedef typename Num<T>::C C;
    k_scale_c<T><<<gpu_grid(m * n), GPU_THREADS, 0, GPU_STREAM>>>((T *)c, m, n, ldc, (C)beta);
    GPU_LAUNCHED(ctx, "gemm");
}

extern "C" void gpu_gemm(lt_ctx *ctx, lt_dtype t, bool ta, bool tb, int64_t m, int64_t n,
                         int64_t k, double alpha, const void *a, int64_t lda, const void *b,
                         int64_t ldb, double beta, void *c, int64_t ldc) {
    if (t != LT_F32 && t != LT_F64 && t != LT_F16 && t != LT_BF16) {
        gpu_bad_dtype(ctx, "gemm", t, "f32, f64, f16 or bf16");
        return;
    }
    if (!gemm_args_ok(ctx, ta, tb, m, n, k, lda, ldb, ldc) || m == 0 || n == 0) return;
    gpu_thread *th = gpu_enter(ctx);
    if (!th) return;
    if (k == 0) {
        if (beta != 1) GPU_DISPATCH(ctx, "gemm", t, scale_c_t, ctx, c, m, n, ldc, beta);
        return;
    }
    cublasHandle_t h = (cublasHandle_t)gpu_blas(ctx, th);
    if (!h) return;
    const lt_cublas_api *cb = lt_cublas(NULL); /* loaded: gpu_blas made a handle */
    /* column-major view: (n x m) = op(B)^T (n x k) * op(A)^T (k x m) */
    cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    int M = (int)n, N = (int)m, K = (int)k;
    cublasStatus_t st;
    if (t == LT_F32) {
        float al = (float)alpha, be = (float)beta;
        st = cb->sgemm(h, opb, opa, M, N, K, &al, (const float *)b, (int)ldb, (const float *)a,
                         (int)lda, &be, (float *)c, (int)ldc);
    } else if (t == LT_F64) {
        st = cb->dgemm(h, opb, opa, M, N, K, &alpha, (const double *)b, (int)ldb,
                         (const double *)a, (int)lda, &beta, (double *)c, (int)ldc);
    } else {
        float al = (float)alpha, be = (float)beta;
        cudaDataType_t dt = t == LT_F16 ? CUDA_R_16F : CUDA_R_16BF;
        st = cb->gemm_ex(h, opb, opa, M, N, K, &al, b, dt, (int)ldb, a, dt, (int)lda, &be, c, dt,
                          (int)ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    if (st != CUBLAS_STATUS_SUCCESS)
        gpu_fail(ctx, LT_ERR_PLUGIN,
                 "gpu gemm (%s, ta=%d tb=%d m=%lld n=%lld k=%lld): cuBLAS failed: %s (%s)",
                 lt_dtype_name(t), ta, tb, (long long)m, (long long)n, (long long)k,
                 cb->status_string(st), cb->status_name(st));
}
