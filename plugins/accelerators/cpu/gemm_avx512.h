/* AVX-512 single-precision GEMM for short-dimension shapes (gemm_avx512.c).
 * Internal to the cpu accelerator. */
#ifndef LT_CPU_GEMM_AVX512_H
#define LT_CPU_GEMM_AVX512_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Packing space for the transposed-B case, grown on first use of a larger
 * shape and kept (a training step then allocates nothing). One per context;
 * a context's kernels run on one thread. */
typedef struct lt_sgemm_scratch {
    float *buf;
    size_t bytes;
} lt_sgemm_scratch;

/* True when this CPU runs the kernels (AVX-512 F/VL/DQ/BW). */
bool lt_sgemm_avx512_usable(void);

/* Row-major C[m,n] = alpha * op(A) op(B) + beta * C, as cblas_sgemm. Returns
 * false, having touched nothing, when it cannot run (no AVX-512, or no memory
 * for packing); the caller then uses another GEMM. Arguments are valid. */
bool lt_sgemm_avx512(lt_sgemm_scratch *s, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                     float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                     float beta, float *c, int64_t ldc);

void lt_sgemm_scratch_free(lt_sgemm_scratch *s);

#endif
