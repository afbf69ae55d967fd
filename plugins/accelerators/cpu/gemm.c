/* GEMM: lt's kernels (AVX-512 or AVX2, chosen at setup) for f32 calls with
 * a short dimension (see gemm_short.c), dot products for one output column
 * (gemv.c), OpenBLAS's row-major CBLAS for the rest; f16 and bf16 through
 * fp32 (gemm_lowp.c). */
#include <cblas.h>
#include <limits.h>
#include "common/kernel_args.h"
#include "gemm_lowp.h"
#include "gemv.h"

/* CBLAS takes int sizes, and OpenBLAS prints to stderr (xerbla) instead of
 * failing when a leading dimension is too small; both become a parked
 * LT_ERR_INVALID here so the caller learns of it at synchronize. */
static bool gemm_args_ok(lt_ctx *ctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                         int64_t lda, int64_t ldb, int64_t ldc) {
    char msg[512];
    if (lt_gemm_args_ok("cpu gemm", "OpenBLAS's", ta, tb, m, n, k, lda, ldb, ldc, msg, sizeof msg)) return true;
    cpu_fail(ctx, LT_ERR_INVALID, "%s", msg);
    return false;
}

void cpu_sgemm_f32(cpu_state *s, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                   int64_t ldc) {
    /* one output column over a contiguous column of op(B): dot products
     * (gemv.c), where lt's kernels run at all (gemm=openblas keeps them off);
     * alpha 0 stays with OpenBLAS, which then reads neither A nor B */
    if (s && s->sgemm && n == 1 && !ta && (tb || ldb == 1) && k > 0 && alpha != 0.0f) {
        cpu_sgemv_f32(m, k, alpha, a, lda, b, beta, c, ldc);
        return;
    }
    if (s && s->sgemm && k > 0 &&
        s->sgemm(&s->gemm_scratch, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
        return;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

void cpu_gemm(lt_ctx *ctx, lt_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
              double alpha, const void *a, int64_t lda, const void *b, int64_t ldb, double beta,
              void *c, int64_t ldc) {
    if (t != LT_F32 && t != LT_F64 && t != LT_F16 && t != LT_BF16) {
        cpu_bad_dtype(ctx, "gemm", t, "f32, f64, f16 or bf16");
        return;
    }
    if (!gemm_args_ok(ctx, ta, tb, m, n, k, lda, ldb, ldc)) return;
    if (m == 0 || n == 0) return;
    cpu_state *s = lt_ctx_state(ctx);
    if (t == LT_F32) {
        cpu_sgemm_f32(s, ta, tb, m, n, k, (float)alpha, a, lda, b, ldb, (float)beta, c, ldc);
    } else if (t == LT_F64) {
        cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
    } else if (!s) { /* the 16-bit path keeps its fp32 copies in the context */
        cpu_fail(ctx, LT_ERR_STATE, "cpu gemm: a %s GEMM before setup; call setup first",
                 lt_dtype_name(t));
    } else {
        cpu_gemm_lowp(ctx, s, t, ta, tb, m, n, k, (float)alpha, a, lda, b, ldb, (float)beta, c,
                      ldc);
    }
}
