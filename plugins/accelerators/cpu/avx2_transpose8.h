/* The in-register 8 x 8 transpose the f32 and the 16-bit AVX2 GEMM kernels
 * (gemm_avx2.c, gemm_lowp_avx2.c) both write back transposed tiles with.
 * Carries its own target attribute, a subset of its callers', so it inlines
 * into them; x86-64 with GCC or Clang only. Internal to the cpu accelerator. */
#ifndef LT_CPU_AVX2_TRANSPOSE8_H
#define LT_CPU_AVX2_TRANSPOSE8_H

#include <immintrin.h>

/* r[k] becomes column k of the 8 rows r[0..7]. */
static inline __attribute__((target("avx"), always_inline)) void avx2_transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x20);
        r[j + 4] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x31);
    }
}

#endif
