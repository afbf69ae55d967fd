/* AVX2+FMA single-precision GEMM for short-dimension shapes (gemm_avx2.c):
 * the algorithm of gemm_avx512.c on 8-float vectors, for CPUs without
 * AVX-512. Internal to the cpu accelerator. */
#ifndef LT_CPU_GEMM_AVX2_H
#define LT_CPU_GEMM_AVX2_H

#include "gemm_short.h"

/* True when this CPU runs the kernels (AVX2 and FMA). */
bool lt_sgemm_avx2_usable(void);

/* An lt_sgemm_fn (gemm_short.h): declines everything on a CPU without
 * AVX2+FMA, and, beyond the shared rules, every call without a thin side
 * (m or n below 16): only there did these kernels beat OpenBLAS's AVX2
 * kernels in the MLP's step (gemm_avx2.c). */
bool lt_sgemm_avx2(lt_sgemm_scratch *s, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                   float beta, float *c, int64_t ldc);

/* The same kernels without the rule above: every call the shared rules
 * (gemm_short.c) allow, so a test can check them on every tile edge. */
bool lt_sgemm_avx2_every(lt_sgemm_scratch *s, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                         float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                         float beta, float *c, int64_t ldc);

#endif
