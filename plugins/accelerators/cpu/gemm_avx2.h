/* AVX2+FMA single-precision GEMM for short-dimension shapes (gemm_avx2.c),
 * for CPUs without AVX-512: both operands packed BLIS-style for B not
 * transposed, Y^T = B op(A)^T with B in place for the transposed forward
 * pass, gemm_avx512.c's in-place kernels on 8-float vectors for thin
 * shapes. Internal to the cpu accelerator. */
#ifndef LT_CPU_GEMM_AVX2_H
#define LT_CPU_GEMM_AVX2_H

#include "gemm_short.h"

/* True when this CPU runs the kernels (AVX2 and FMA). */
bool lt_sgemm_avx2_usable(void);

/* An lt_sgemm_fn (gemm_short.h): declines everything on a CPU without
 * AVX2+FMA, and, beyond the shared rules, every call where these kernels
 * did not measure faster than OpenBLAS's (avx2_wins in gemm_avx2.c): it
 * takes thin shapes (m or n below 16) and, while OpenBLAS runs one thread,
 * the MLP's forward and weight gradients at batch <= 128 and the like. */
bool lt_sgemm_avx2(lt_sgemm_scratch *s, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                   float beta, float *c, int64_t ldc);

/* Whether C = alpha op(A) B^T + beta C (B stored n x k) runs as Y^T = B
 * op(A)^T rather than with B^T packed: transposing Y^T costs per element
 * of C, packing B^T per element of B, so a short k favours packing (NT
 * 128 x 512 x 64: 0.100 against 0.121 ms); the crossover measured at k =
 * 2m from m = 64 up, nearer k = m below (where packed A's 6-row tiles pad
 * more). Below m = 16 the 16-column panels of op(A)^T would be mostly
 * padding. The 16-bit kernels follow the same rule (gemm_lowp_avx2.c). */
static inline bool lt_sgemm_nt_by_yt(int64_t m, int64_t k) {
    return m >= 16 && k > (m < 48 ? m : 2 * m);
}

/* The same kernels without the rule above: every call the shared rules
 * (gemm_short.c) allow, so a test can check them on every tile edge. */
bool lt_sgemm_avx2_every(lt_sgemm_scratch *s, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                         float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                         float beta, float *c, int64_t ldc);

#endif
