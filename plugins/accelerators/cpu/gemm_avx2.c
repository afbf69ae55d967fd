/* Single-precision GEMM for the shapes a training step makes, on AVX2+FMA:
 * gemm_avx512.c's algorithm on 8-float ymm vectors for CPUs without AVX-512
 * (AMD Zen 1-3, Intel client parts): the micro-kernel keeps a 6 x 16 tile
 * of C in registers, and an 8 x 8 transpose writes the NT case back. Which
 * calls are taken (plus avx2_wins below), the NT path and the scratch are
 * shared with AVX-512 (gemm_short.c). The file is compiled for the base
 * ISA: only these functions carry target("avx2,fma"), and lt_sgemm_avx2
 * runs none of them on a CPU without it. */
#include "gemm_avx2.h"

#include <pthread.h>
#include <stddef.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "avx2_transpose8.h"

#define AVX2 __attribute__((target("avx2,fma")))
#define INLINE inline __attribute__((always_inline))

/* Register blocking: 6 x 16, 12 accumulators + 2 rows of B + 1 broadcast of
 * the 16 ymm registers. 4 x 24 (also 12) measured slower on every MLP shape
 * (wgrad1 at batch 64: 1.18 against 0.94 ms). */
enum { KC = LT_SGEMM_KC, MR = 6, NV = 2 };

/* Lanes 0 .. cols-1 set: maskload/maskstore's mask for a vector tail
 * (masked-out lanes are neither read nor written, so no fault past C's or
 * B's end). */
static AVX2 INLINE __m256i lanes(int cols) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* C[i, 0:nv*8] = alpha * acc + beta * C for one row of a tile; `last` masks
 * the final vector (n not a multiple of 8). beta == 0 never reads C, so C
 * may hold garbage (NaN) then, as BLAS promises. */
static AVX2 INLINE void store_row(float *c, const __m256 *acc, int nv, __m256i last,
                                  __m256 alpha, float beta) {
    for (int j = 0; j < nv - 1; j++) {
        __m256 v = _mm256_mul_ps(acc[j], alpha);
        if (beta != 0.0f) v = _mm256_fmadd_ps(_mm256_set1_ps(beta), _mm256_loadu_ps(c + 8 * j), v);
        _mm256_storeu_ps(c + 8 * j, v);
    }
    float *cl = c + 8 * (nv - 1);
    __m256 v = _mm256_mul_ps(acc[nv - 1], alpha);
    if (beta != 0.0f) v = _mm256_fmadd_ps(_mm256_set1_ps(beta), _mm256_maskload_ps(cl, last), v);
    _mm256_maskstore_ps(cl, last, v);
}

/* The micro-kernel: C[0:MR, 0:NV*8] (last vector masked) = alpha * sum_p
 * A[i, p] B[p, :] + beta * C, A[i, p] at a[i * a_rs + p * a_cs], B[p, :] at
 * b + p * ldb. A macro so the accumulator array has a literal size and lives
 * in registers. */
typedef void (*tile_fn)(int64_t kc, const float *a, int64_t a_rs, int64_t a_cs, const float *b,
                        int64_t ldb, float *c, int64_t ldc, float alpha, float beta,
                        __m256i last);

#define TILE_FN(MR, NV)                                                                      \
    static AVX2 void tile_##MR##x##NV(int64_t kc, const float *a, int64_t a_rs, int64_t a_cs, \
                                      const float *b, int64_t ldb, float *c, int64_t ldc,     \
                                      float alpha, float beta, __m256i last) {               \
        __m256 acc[MR][NV];                                                                  \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                 \
            _Pragma("GCC unroll 4") for (int j = 0; j < NV; j++) acc[i][j] =                 \
                _mm256_setzero_ps();                                                         \
        for (int64_t p = 0; p < kc; p++) {                                                   \
            __m256 bv[NV];                                                                   \
            _Pragma("GCC unroll 4") for (int j = 0; j < NV - 1; j++) bv[j] =                 \
                _mm256_loadu_ps(b + 8 * j);                                                  \
            bv[NV - 1] = _mm256_maskload_ps(b + 8 * (NV - 1), last);                         \
            _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) {                           \
                __m256 av = _mm256_broadcast_ss(a + i * a_rs);                               \
                _Pragma("GCC unroll 4") for (int j = 0; j < NV; j++) acc[i][j] =             \
                    _mm256_fmadd_ps(av, bv[j], acc[i][j]);                                   \
            }                                                                                \
            a += a_cs;                                                                       \
            b += ldb;                                                                        \
        }                                                                                    \
        __m256 va = _mm256_set1_ps(alpha);                                                   \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                 \
            store_row(c + i * ldc, acc[i], NV, last, va, beta);                              \
    }
#define TILE_ROWS(X, NV) X(1, NV) X(2, NV) X(3, NV) X(4, NV) X(5, NV) X(6, NV)
TILE_ROWS(TILE_FN, 1)
TILE_ROWS(TILE_FN, 2)

#define TILE_PTR(MR, NV) [MR][NV] = tile_##MR##x##NV,
static const tile_fn tiles[MR + 1][NV + 1] = {TILE_ROWS(TILE_PTR, 1) TILE_ROWS(TILE_PTR, 2)};

/* C = alpha * op(A) B + beta * C with B row-major k x n (not transposed). */
static AVX2 void gemm_b_rows(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                             int64_t a_rs, int64_t a_cs, const float *b, int64_t ldb,
                             float beta, float *c, int64_t ldc) {
    const int64_t NB = 8 * (int64_t)NV;
    for (int64_t p0 = 0; p0 < k; p0 += KC) {
        int64_t kc = k - p0 < KC ? k - p0 : KC;
        float be = p0 == 0 ? beta : 1.0f;
        for (int64_t i0 = 0; i0 < m; i0 += MR) {
            int mr = m - i0 < MR ? (int)(m - i0) : MR;
            const float *ap = a + i0 * a_rs + p0 * a_cs;
            for (int64_t j0 = 0; j0 < n; j0 += NB) {
                int64_t nr = n - j0 < NB ? n - j0 : NB;
                int nv = (int)((nr + 7) / 8);
                tiles[mr][nv](kc, ap, a_rs, a_cs, b + p0 * ldb + j0, ldb, c + i0 * ldc + j0, ldc,
                              alpha, be, lanes((int)(nr - 8 * (nv - 1))));
            }
        }
    }
}

static int avx2_ok;
static pthread_once_t avx2_once = PTHREAD_ONCE_INIT;

static void avx2_probe(void) {
    __builtin_cpu_init();
    avx2_ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

bool lt_sgemm_avx2_usable(void) {
    pthread_once(&avx2_once, avx2_probe);
    return avx2_ok;
}

/* dst[c, r] = alpha * src[r, c] + beta * dst[c, r] for r < rows, c < cols
 * (src row stride lds, dst row stride ldd); beta 0 never reads dst. In 8 x 8
 * blocks, edges masked. */
static AVX2 void transpose_scale(float *dst, int64_t ldd, const float *src, int64_t lds,
                                 int64_t rows, int64_t cols, float alpha, float beta) {
    __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    for (int64_t r0 = 0; r0 < rows; r0 += 8) {
        int nr = rows - r0 < 8 ? (int)(rows - r0) : 8;
        __m256i rmask = lanes(nr);
        for (int64_t c0 = 0; c0 < cols; c0 += 8) {
            int nc = cols - c0 < 8 ? (int)(cols - c0) : 8;
            __m256i cmask = lanes(nc);
            __m256 r[8];
            for (int i = 0; i < 8; i++)
                r[i] = i >= nr   ? _mm256_setzero_ps()
                       : nc == 8 ? _mm256_loadu_ps(src + (r0 + i) * lds + c0)
                                 : _mm256_maskload_ps(src + (r0 + i) * lds + c0, cmask);
            avx2_transpose8(r);
            for (int c = 0; c < nc; c++) {
                float *d = dst + (c0 + c) * ldd + r0;
                __m256 v = alpha == 1.0f ? r[c] : _mm256_mul_ps(r[c], va);
                if (nr == 8) {
                    if (beta != 0.0f) v = _mm256_fmadd_ps(vb, _mm256_loadu_ps(d), v);
                    _mm256_storeu_ps(d, v);
                } else {
                    if (beta != 0.0f) v = _mm256_fmadd_ps(vb, _mm256_maskload_ps(d, rmask), v);
                    _mm256_maskstore_ps(d, rmask, v);
                }
            }
        }
    }
}

/* Where these kernels beat OpenBLAS (0.3.21: its Haswell/Zen kernels) on an AMD EPYC
 * with AVX2 (512 KiB L2), best of 30 calls each at batch 64: only a thin
 * side (m or n below 16: the 10-wide layer's weight gradient, 0.011 against
 * 0.016 ms, and its forward at large batch, 0.30 against 0.37 ms at 1024).
 * With 8-float vectors the in-place operands cost more than the packing they
 * save: the 512-wide weight gradients ran 25-40% slower (wgrad1 0.93 against
 * 0.75 ms), dX = dY W 20-40% slower, Y = X W^T only even; taking every call
 * the shared rules allow made the whole step about 10% slower (train_bench,
 * batch 64). So the broad rule stays AVX-512's. */
static bool avx2_wins(bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
    (void)ta, (void)tb, (void)k;
    return m < 16 || n < 16;
}

static const lt_sgemm_isa avx2_isa = {gemm_b_rows, transpose_scale, avx2_wins};
static const lt_sgemm_isa avx2_every_isa = {gemm_b_rows, transpose_scale, NULL};

bool lt_sgemm_avx2(lt_sgemm_scratch *s, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                   float beta, float *c, int64_t ldc) {
    if (!lt_sgemm_avx2_usable()) return false;
    return lt_sgemm_short(&avx2_isa, s, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

bool lt_sgemm_avx2_every(lt_sgemm_scratch *s, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                         float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                         float beta, float *c, int64_t ldc) {
    if (!lt_sgemm_avx2_usable()) return false;
    return lt_sgemm_short(&avx2_every_isa, s, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                          ldc);
}

#else /* not x86-64 with GCC or Clang: OpenBLAS does everything */

bool lt_sgemm_avx2_usable(void) { return false; }

bool lt_sgemm_avx2(lt_sgemm_scratch *s, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                   float beta, float *c, int64_t ldc) {
    (void)s, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda;
    (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
    return false;
}

bool lt_sgemm_avx2_every(lt_sgemm_scratch *s, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                         float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                         float beta, float *c, int64_t ldc) {
    return lt_sgemm_avx2(s, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

#endif
