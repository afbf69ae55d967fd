/* y = alpha A x + beta y for an f32 GEMM with one output column (gemv.c):
 * A m x k with rows lda apart, x contiguous (k), y's elements incy apart;
 * beta 0 never reads y. cpu_sgemm_f32 sends such calls here. */
#ifndef LT_CPU_GEMV_H
#define LT_CPU_GEMV_H

#include <stdint.h>
#include "cpu_internal.h"

void cpu_sgemv_f32(int64_t m, int64_t k, float alpha, const float *a, int64_t lda,
                   const float *x, float beta, float *y, int64_t incy);

#endif
