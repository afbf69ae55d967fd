/* The 16-bit GEMM (f16 and bf16 operands and result, fp32 accumulation)
 * and what it shares with gemm.c. Internal to the cpu accelerator. */
#ifndef LT_CPU_GEMM_LOWP_H
#define LT_CPU_GEMM_LOWP_H

#include "cpu_internal.h"

/* gemm.c: the f32 GEMM as cpu_gemm runs it (lt's kernels where the context
 * chose them and they take the call, else OpenBLAS). Arguments are valid. */
void cpu_sgemm_f32(cpu_state *s, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                   int64_t ldc);

/* C = alpha * op(A) op(B) + beta * C for t = LT_F16 or LT_BF16, A, B and C
 * all of t: products summed in fp32, C rounded once (to nearest even, as
 * half.h) when it is stored; beta 0 never reads C. Arguments are valid (as
 * gemm.c checks them), m and n positive. A failed scratch allocation parks
 * LT_ERR_NOMEM. */
void cpu_gemm_lowp(lt_ctx *ctx, cpu_state *s, lt_dtype t, bool ta, bool tb, int64_t m,
                   int64_t n, int64_t k, float alpha, const uint16_t *a, int64_t lda,
                   const uint16_t *b, int64_t ldb, float beta, uint16_t *c, int64_t ldc);

#endif
