/* Single-precision GEMM for the shapes a training step makes, on AVX-512:
 * the micro-kernel (an MR x NV*16 tile of C in zmm registers) and the 16 x 16
 * in-register transpose. Which calls are taken, the NT path and the scratch
 * are shared with the AVX2 variant (gemm_short.c, which also says why lt has
 * its own GEMM). */
#include "gemm_avx512.h"

#include <pthread.h>
#include <stddef.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))
#define INLINE inline __attribute__((always_inline))

enum { KC = LT_SGEMM_KC };

/* C[i, 0:nv*16] = alpha * acc + beta * C for one tile; `last` masks the
 * final vector of each row (n not a multiple of 16). beta == 0 never reads C,
 * so C may hold garbage (NaN) then, as BLAS promises. */
static AVX512 INLINE void store_row(float *c, const __m512 *acc, int nv, __mmask16 last,
                                    __m512 alpha, float beta) {
    for (int j = 0; j < nv; j++) {
        __mmask16 mk = j == nv - 1 ? last : (__mmask16)0xFFFF;
        __m512 v = _mm512_mul_ps(acc[j], alpha);
        if (beta != 0.0f)
            v = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mk, c + 16 * j), v);
        _mm512_mask_storeu_ps(c + 16 * j, mk, v);
    }
}

/* The micro-kernel: C[0:MR, 0:NV*16] (masked) = alpha * sum_p A[i, p] B[p, :]
 * + beta * C, A[i, p] at a[i * a_rs + p * a_cs], B[p, :] at b + p * ldb.
 * A macro, not an inline function with constant arguments, so that the
 * accumulator array has a literal size and lives in registers. */
typedef void (*tile_fn)(int64_t kc, const float *a, int64_t a_rs, int64_t a_cs, const float *b,
                        int64_t ldb, float *c, int64_t ldc, float alpha, float beta,
                        __mmask16 last);

#define TILE_FN(MR, NV)                                                                       \
    static AVX512 void tile_##MR##x##NV(int64_t kc, const float *a, int64_t a_rs,             \
                                        int64_t a_cs, const float *b, int64_t ldb, float *c,  \
                                        int64_t ldc, float alpha, float beta,                 \
                                        __mmask16 last) {                                     \
        __m512 acc[MR][NV];                                                                   \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                  \
            _Pragma("GCC unroll 4") for (int j = 0; j < NV; j++) acc[i][j] =                  \
                _mm512_setzero_ps();                                                          \
        for (int64_t p = 0; p < kc; p++) {                                                    \
            __m512 bv[NV];                                                                    \
            _Pragma("GCC unroll 4") for (int j = 0; j < NV - 1; j++) bv[j] =                  \
                _mm512_loadu_ps(b + 16 * j);                                                  \
            bv[NV - 1] = _mm512_maskz_loadu_ps(last, b + 16 * (NV - 1));                      \
            _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) {                            \
                __m512 av = _mm512_set1_ps(a[i * a_rs]);                                      \
                _Pragma("GCC unroll 4") for (int j = 0; j < NV; j++) acc[i][j] =              \
                    _mm512_fmadd_ps(av, bv[j], acc[i][j]);                                    \
            }                                                                                 \
            a += a_cs;                                                                        \
            b += ldb;                                                                         \
        }                                                                                     \
        __m512 va = _mm512_set1_ps(alpha);                                                    \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                  \
            store_row(c + i * ldc, acc[i], NV, last, va, beta);                               \
    }
#define TILE_ROWS(X, NV) X(1, NV) X(2, NV) X(3, NV) X(4, NV) X(5, NV) X(6, NV) X(7, NV) X(8, NV)
TILE_ROWS(TILE_FN, 1)
TILE_ROWS(TILE_FN, 2)
TILE_ROWS(TILE_FN, 3)
TILE_FN(1, 4) TILE_FN(2, 4) TILE_FN(3, 4) TILE_FN(4, 4) TILE_FN(5, 4) TILE_FN(6, 4)

#define TILE_PTR(MR, NV) [MR][NV] = tile_##MR##x##NV,
static const tile_fn tiles[9][5] = {
    TILE_ROWS(TILE_PTR, 1) TILE_ROWS(TILE_PTR, 2) TILE_ROWS(TILE_PTR, 3)
    TILE_PTR(1, 4) TILE_PTR(2, 4) TILE_PTR(3, 4) TILE_PTR(4, 4) TILE_PTR(5, 4) TILE_PTR(6, 4)
};

/* Register blocking: 24 accumulators either way. Four vectors (64 columns)
 * fit the transposed forward pass, whose n is the batch; three otherwise. */
static void blocking(int64_t n, int *mr, int *nv) {
    if (n % 64 == 0 && n <= 256) {
        *mr = 6, *nv = 4;
    } else {
        *mr = 8, *nv = 3;
    }
}

/* C = alpha * op(A) B + beta * C with B row-major k x n (not transposed). */
static void gemm_b_rows(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                        int64_t a_rs, int64_t a_cs, const float *b, int64_t ldb, float beta,
                        float *c, int64_t ldc) {
    int MR, NV;
    blocking(n, &MR, &NV);
    const int64_t NB = 16 * (int64_t)NV;
    for (int64_t p0 = 0; p0 < k; p0 += KC) {
        int64_t kc = k - p0 < KC ? k - p0 : KC;
        float be = p0 == 0 ? beta : 1.0f;
        float al = alpha;
        for (int64_t i0 = 0; i0 < m; i0 += MR) {
            int mr = m - i0 < MR ? (int)(m - i0) : MR;
            const float *ap = a + i0 * a_rs + p0 * a_cs;
            for (int64_t j0 = 0; j0 < n; j0 += NB) {
                int64_t nr = n - j0 < NB ? n - j0 : NB;
                int nv = (int)((nr + 15) / 16);
                int rem = (int)(nr - 16 * (nv - 1));
                __mmask16 last = (__mmask16)(rem == 16 ? 0xFFFF : (1u << rem) - 1);
                tiles[mr][nv](kc, ap, a_rs, a_cs, b + p0 * ldb + j0, ldb, c + i0 * ldc + j0, ldc,
                              al, be, last);
            }
        }
    }
}

static int avx512_ok;
static pthread_once_t avx512_once = PTHREAD_ONCE_INIT;

static void avx512_probe(void) {
    __builtin_cpu_init();
    avx512_ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw");
}

bool lt_sgemm_avx512_usable(void) {
    pthread_once(&avx512_once, avx512_probe);
    return avx512_ok;
}

/* In-register transpose of 16 rows of 16 floats: three rounds of shuffles,
 * then the 128-bit lanes put in place. */
static AVX512 INLINE void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4)
        for (int j = 0; j < 2; j++) {
            __m512d a = _mm512_castps_pd(t[i + j]), b = _mm512_castps_pd(t[i + j + 2]);
            r[i + j] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
            r[i + j + 2] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        }
    for (int i = 0; i < 16; i += 8)
        for (int j = 0; j < 4; j++) {
            t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
            t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xdd);
        }
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
        r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
    }
    /* r[k] now holds source column k with bits 0 and 1 of k swapped
     * (0, 2, 1, 3, 4, 6, 5, 7, ...), rows in order. */
}

/* dst[c, r] = alpha * src[r, c] + beta * dst[c, r] for r < rows, c < cols
 * (src row stride lds, dst row stride ldd); beta 0 never reads dst. In
 * 16 x 16 blocks, edges masked. */
static AVX512 void transpose_scale(float *dst, int64_t ldd, const float *src, int64_t lds,
                                   int64_t rows, int64_t cols, float alpha, float beta) {
    static const int order[16] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15};
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    for (int64_t r0 = 0; r0 < rows; r0 += 16) {
        int nr = rows - r0 < 16 ? (int)(rows - r0) : 16;
        __mmask16 rmask = (__mmask16)(nr == 16 ? 0xFFFF : (1u << nr) - 1);
        for (int64_t c0 = 0; c0 < cols; c0 += 16) {
            int nc = cols - c0 < 16 ? (int)(cols - c0) : 16;
            __mmask16 cmask = (__mmask16)(nc == 16 ? 0xFFFF : (1u << nc) - 1);
            __m512 r[16];
            for (int i = 0; i < 16; i++)
                r[i] = i < nr ? _mm512_maskz_loadu_ps(cmask, src + (r0 + i) * lds + c0)
                              : _mm512_setzero_ps();
            transpose16(r);
            for (int k = 0; k < 16; k++) {
                int c = order[k];
                if (c >= nc) continue;
                float *d = dst + (c0 + c) * ldd + r0;
                __m512 v = alpha == 1.0f ? r[k] : _mm512_mul_ps(r[k], va);
                if (beta != 0.0f) v = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(rmask, d), v);
                _mm512_mask_storeu_ps(d, rmask, v);
            }
        }
    }
}

static const lt_sgemm_isa avx512_isa = {gemm_b_rows, transpose_scale, NULL, NULL, NULL};

bool lt_sgemm_avx512(lt_sgemm_scratch *s, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                     float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                     float beta, float *c, int64_t ldc) {
    if (!lt_sgemm_avx512_usable()) return false;
    return lt_sgemm_short(&avx512_isa, s, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

#else /* not x86-64 with GCC or Clang: OpenBLAS does everything */

bool lt_sgemm_avx512_usable(void) { return false; }

bool lt_sgemm_avx512(lt_sgemm_scratch *s, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                     float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                     float beta, float *c, int64_t ldc) {
    (void)s, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda;
    (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
    return false;
}

#endif
