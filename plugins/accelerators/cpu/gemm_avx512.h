/* AVX-512 single-precision GEMM for short-dimension shapes (gemm_avx512.c).
 * Internal to the cpu accelerator. */
#ifndef LT_CPU_GEMM_AVX512_H
#define LT_CPU_GEMM_AVX512_H

#include "gemm_short.h"

/* True when this CPU runs the kernels (AVX-512 F/VL/DQ/BW). */
bool lt_sgemm_avx512_usable(void);

/* An lt_sgemm_fn (gemm_short.h): declines everything on a CPU without
 * AVX-512. */
bool lt_sgemm_avx512(lt_sgemm_scratch *s, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                     float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                     float beta, float *c, int64_t ldc);

#endif
