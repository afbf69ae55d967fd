/* The DOT path of the 16-bit GEMM (gemm_lowp_avx2.h): C[i, j] as dot
 * products along k, for a C of few columns (n <= 16: the logits layer's
 * forward, a convolution's weight gradient over its 9 taps, a bias
 * gradient). A's rows are read in place and widened in registers, 16 k at
 * a time; op(B)^T, n rows, is widened once into the scratch. A tile is
 * DOT_RA rows of A against up to DOT_RB rows of op(B)^T, each sum an
 * 8-lane vector reduced once at the end; C's values of a tile row are
 * rounded and stored as one vector. Where C is that thin, the 6 x 16 tile
 * of the other paths would run mostly on padding. */
#include "gemm_lowp_avx2.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "gemm_lowp_simd.h"

enum {
    DOT_RA = 2, /* rows of A per tile */
    DOT_RB = 5  /* columns of C per tile, at most (10 sums, 2 of A, 1 of Bt: 13 ymm) */
};

/* Lane q of the result: the sum of v[q]'s lanes, for q < n (<= 8); zero
 * after. A tree of horizontal adds: 9 operations for 8 sums. */
INL __m256 hsum8(const __m256 *v, int n) {
    __m256 x[8];
    for (int q = 0; q < 8; q++) x[q] = q < n ? v[q] : _mm256_setzero_ps();
    __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(x[0], x[1]), _mm256_hadd_ps(x[2], x[3]));
    __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(x[4], x[5]), _mm256_hadd_ps(x[6], x[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                         _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* out[r][q] = sum_p A[r, p] Bt[q, p] for r < RA, q < RB: A's rows
 * 16-bit in place (a[r * lda + p]), Bt fp32 rows of kp >= k floats in
 * widen16's order, zero from k on. */
typedef void (*dot_fn)(int64_t k, const uint16_t *a, int64_t lda, const float *bt, int64_t kp,
                       float out[][8]);

/* Half a step: 8 of the 16 k (h = 0: the lo vectors, 1: hi) of A's rows
 * against each Bt row; halves keep 10 sums + 2 of A + 1 of Bt in the 16
 * ymm registers, where whole steps spilled. */
#define DOT_HALF(RA, RB, WIDEN, h)                                                         \
    {                                                                                      \
        __m256 av[RA];                                                                     \
        _Pragma("GCC unroll 2") for (int r = 0; r < RA; r++) {                             \
            __m256 lo, hi;                                                                 \
            WIDEN;                                                                         \
            av[r] = h ? hi : lo;                                                           \
        }                                                                                  \
        _Pragma("GCC unroll 6") for (int q = 0; q < RB; q++) {                             \
            __m256 bv = _mm256_loadu_ps(bt + q * kp + p + 8 * h);                          \
            _Pragma("GCC unroll 2") for (int r = 0; r < RA; r++) acc[r][q] =               \
                _mm256_fmadd_ps(av[r], bv, acc[r][q]);                                     \
        }                                                                                  \
    }
#define DOT_FN(BF, RA, RB)                                                                 \
    static KERN void dot_##BF##_##RA##x##RB(int64_t k, const uint16_t *a, int64_t lda,      \
                                            const float *bt, int64_t kp, float out[][8]) {  \
        __m256 acc[RA][RB];                                                                \
        _Pragma("GCC unroll 2") for (int r = 0; r < RA; r++)                               \
            _Pragma("GCC unroll 6") for (int q = 0; q < RB; q++) acc[r][q] =               \
                _mm256_setzero_ps();                                                       \
        int64_t p = 0;                                                                     \
        for (; p + 16 <= k; p += 16) {                                                     \
            DOT_HALF(RA, RB, widen16(BF, a + r * lda + p, &lo, &hi), 0)                    \
            DOT_HALF(RA, RB, widen16(BF, a + r * lda + p, &lo, &hi), 1)                    \
        }                                                                                  \
        if (p < k) {                                                                       \
            DOT_HALF(RA, RB, widen16_part(BF, a + r * lda + p, (int)(k - p), &lo, &hi), 0) \
            DOT_HALF(RA, RB, widen16_part(BF, a + r * lda + p, (int)(k - p), &lo, &hi), 1) \
        }                                                                                  \
        for (int r = 0; r < RA; r++) _mm256_storeu_ps(out[r], hsum8(acc[r], RB));          \
    }
#define DOT_COLS(X, BF, RA) X(BF, RA, 1) X(BF, RA, 2) X(BF, RA, 3) X(BF, RA, 4) X(BF, RA, 5)
DOT_COLS(DOT_FN, false, 1)
DOT_COLS(DOT_FN, false, 2)
DOT_COLS(DOT_FN, true, 1)
DOT_COLS(DOT_FN, true, 2)

#define DOT_PTR(BF, RA, RB) dot_##BF##_##RA##x##RB,
/* [bf16][rows - 1][cols - 1] */
static const dot_fn dots[2][DOT_RA][DOT_RB] = {
    {{DOT_COLS(DOT_PTR, false, 1)}, {DOT_COLS(DOT_PTR, false, 2)}},
    {{DOT_COLS(DOT_PTR, true, 1)}, {DOT_COLS(DOT_PTR, true, 2)}},
};

KERN void cpu_hgemm_dot_avx2(bool bf, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                             const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
                             float beta, uint16_t *c, int64_t ldc, float *bt) {
    int64_t kp = (k + 15) / 16 * 16;
    for (int64_t j = 0; j < n; j++) {
        float *row = bt + j * kp;
        for (int64_t p = 0; p < k; p += 16) {
            int len = k - p < 16 ? (int)(k - p) : 16;
            __m256 lo, hi;
            if (tb && len == 16) { /* op(B)^T row j is B's row j */
                widen16(bf, b + j * ldb + p, &lo, &hi);
            } else if (tb) {
                widen16_part(bf, b + j * ldb + p, len, &lo, &hi);
            } else { /* column j of B, gathered */
                uint16_t col[16] = {0};
                for (int q = 0; q < len; q++) col[q] = b[(p + q) * ldb + j];
                widen16(bf, col, &lo, &hi);
            }
            _mm256_storeu_ps(row + p, lo);
            _mm256_storeu_ps(row + p + 8, hi);
        }
    }
    int ntiles = (int)((n + DOT_RB - 1) / DOT_RB);
    for (int64_t i = 0; i < m; i += DOT_RA) {
        int ra = m - i < DOT_RA ? (int)(m - i) : DOT_RA;
        for (int t = 0, j = 0; t < ntiles; t++) { /* even widths: 10 = 5 + 5 */
            int rb = (int)(n / ntiles) + (t < (int)(n % ntiles));
            float out[DOT_RA][8];
            dots[bf][ra - 1][rb - 1](k, a + i * lda, lda, bt + j * kp, kp, out);
            for (int r = 0; r < ra; r++) { /* C's rb values of row i + r, as one vector */
                uint16_t *cp = c + (i + r) * ldc + j;
                __m256 v = _mm256_loadu_ps(out[r]);
                if (alpha != 1.0f) v = _mm256_mul_ps(v, _mm256_set1_ps(alpha));
                if (beta != 0.0f)
                    v = _mm256_fmadd_ps(_mm256_set1_ps(beta), widen_part(bf, cp, rb), v);
                narrow_part(bf, cp, v, rb);
            }
            j += rb;
        }
    }
}

#endif
