/* AVX-512 single-precision GEMM for short-dimension shapes (gemm_avx512.c).
 * Internal to the cpu accelerator. */
#ifndef LT_CPU_GEMM_AVX512_H
#define LT_CPU_GEMM_AVX512_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Packing space for the transposed-B case, reserved once per context by
 * lt_sgemm_scratch_init (address space: pages are touched only as far as a
 * call uses them, 264 KiB for the MLP at batch 64), so a GEMM never
 * allocates. A call that would need more is left to OpenBLAS. A context's
 * kernels run on one thread. */
#define LT_SGEMM_SCRATCH_FLOATS (4 << 20) /* 16 MiB */
typedef struct lt_sgemm_scratch {
    float *buf;
    int64_t floats;
} lt_sgemm_scratch;

/* False (and nothing reserved) without AVX-512 or memory. */
bool lt_sgemm_scratch_init(lt_sgemm_scratch *s);

/* True when this CPU runs the kernels (AVX-512 F/VL/DQ/BW). */
bool lt_sgemm_avx512_usable(void);

/* Row-major C[m,n] = alpha * op(A) op(B) + beta * C, as cblas_sgemm. Returns
 * false, having touched nothing, when it does not take the call (no scratch:
 * no AVX-512,
 * no short dimension, alpha 0, packing beyond the scratch); the caller then
 * uses another GEMM. Arguments are valid. */
bool lt_sgemm_avx512(lt_sgemm_scratch *s, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                     float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                     float beta, float *c, int64_t ldc);

void lt_sgemm_scratch_free(lt_sgemm_scratch *s);

#endif
