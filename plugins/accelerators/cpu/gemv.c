/* f32 GEMM calls with one output column whose other operand is contiguous
 * (n = 1, A not transposed, op(B) a contiguous column): y = alpha A x +
 * beta y as one dot product per row of A. A convolution's bias gradient is
 * such a call per image (db += dY_n 1: 32 or 64 rows of 784 or 196 in the
 * CNN example); the GEMM kernels ran it in one lane of eight (7 GF/s, 2% of
 * that model's step). Four rows at a time, eight partial sums per row,
 * written with GCC's generic vectors so that both clones of CPU_HOT compile
 * the same source. Rounding differs from OpenBLAS's (another order). */
#include "gemv.h"

#include <string.h>

typedef float v8f __attribute__((vector_size(32)));

static inline float hsum(v8f s) {
    float t = 0;
    for (int l = 0; l < 8; l++) t += s[l];
    return t;
}

/* y[0:rows] = the dot products of rows i .. i+rows-1 of A with x, rows <= 4. */
static inline __attribute__((always_inline)) void dots(int rows, int64_t k, const float *a,
                                                       int64_t lda, const float *x, float *out) {
    v8f s[4] = {{0}, {0}, {0}, {0}};
    int64_t p = 0;
    for (; p + 8 <= k; p += 8) {
        v8f xv;
        memcpy(&xv, x + p, sizeof xv);
        for (int r = 0; r < rows; r++) {
            v8f av;
            memcpy(&av, a + r * lda + p, sizeof av);
            s[r] += av * xv;
        }
    }
    for (int r = 0; r < rows; r++) {
        float t = hsum(s[r]);
        for (int64_t q = p; q < k; q++) t += a[r * lda + q] * x[q];
        out[r] = t;
    }
}

CPU_HOT void cpu_sgemv_f32(int64_t m, int64_t k, float alpha, const float *a, int64_t lda,
                           const float *x, float beta, float *y, int64_t incy) {
    for (int64_t i = 0; i < m; i += 4) {
        int rows = m - i < 4 ? (int)(m - i) : 4;
        float t[4];
        if (rows == 4) dots(4, k, a + i * lda, lda, x, t);
        else dots(rows, k, a + i * lda, lda, x, t);
        for (int r = 0; r < rows; r++) {
            float *yi = y + (i + r) * incy;
            *yi = beta == 0.0f ? alpha * t[r] : alpha * t[r] + beta * *yi; /* beta 0 reads no y */
        }
    }
}
