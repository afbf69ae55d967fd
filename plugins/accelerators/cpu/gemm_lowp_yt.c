/* The YT path of the 16-bit GEMM (gemm_lowp_avx2.h): C = alpha op(A) B^T
 * + beta C with B stored n x k and op(A) short (a layer's forward at a
 * small batch, Y = X W^T), computed as Y^T = B op(A)^T, as lt's f32 path
 * does (gemm_avx2.c, gemm_nt).
 *
 * Why: PACKED widens B into transposed 16-column panels, 8 x 8 shuffles
 * per 64 values, and for the MLP's first layer those panels (784 x 512
 * floats, 1.6 MB) outgrow L2 and are read back from L3 once per 48 rows of
 * A. Here B's rows are widened 6 at a time, k-contiguous as they are
 * stored (a shift or a conversion per value, no shuffles), into an L1
 * buffer the 6 x 16 tile broadcasts from, while op(A)^T (the batch, 64 x
 * 784 floats) is the packed operand that stays in L2. The sums land in an
 * fp32 Y^T that is transposed into C at the end, scaled and rounded once. */
#include "gemm_lowp_avx2.h"

#include "gemm_short.h"

enum {
    MR = 6,              /* rows of B (columns of C) per tile */
    NR = 16,             /* columns of op(A)^T (rows of C) per tile */
    KB = LT_SGEMM_KC,    /* k block, the f32 path's: 6 widened rows of B (6 KiB) stay in L1 */
    YT_FLOATS = 1 << 16, /* Y^T per pass, 256 KiB: half of L2 (64 x 1024 floats) */
};

typedef struct yt_layout {
    int64_t kb, mp, pass;
} yt_layout;

/* k in equal blocks of at most KB (a multiple of 8: 784 = 4 x 196), m
 * padded to whole 16-column panels, B's rows taken `pass` at a time so
 * that Y^T (pass x mp) fits YT_FLOATS (one pass for the MLP). */
static yt_layout layout_of(int64_t m, int64_t n, int64_t k) {
    int64_t blocks = (k + KB - 1) / KB, kb = ((k + blocks - 1) / blocks + 7) / 8 * 8;
    int64_t mp = (m + NR - 1) / NR * NR, pass = YT_FLOATS / mp / 24 * 24;
    if (pass < 24) pass = 24;
    if (pass > n) pass = n;
    return (yt_layout){kb, mp, pass};
}

int64_t cpu_hgemm_yt_scratch(int64_t m, int64_t n, int64_t k) {
    yt_layout l = layout_of(m, n, k);
    return l.kb * l.mp + MR * l.kb + l.pass * l.mp;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include "avx2_transpose8.h"
#include "gemm_lowp_simd.h"

/* wr[i * kc + p] = B[i, p0 + p] widened, for i < mr, p < kc: rows in place,
 * k-contiguous, converted 8 at a time. */
INL void widen_rows(bool bf, const uint16_t *b, int64_t ldb, int mr, int64_t kc, float *wr) {
    for (int i = 0; i < mr; i++) {
        const uint16_t *src = b + i * ldb;
        float *dst = wr + i * kc;
        int64_t p = 0;
        for (; p + 8 <= kc; p += 8) _mm256_storeu_ps(dst + p, widen8(bf, src + p));
        if (p < kc) {
            int left = (int)(kc - p);
            _mm256_maskstore_ps(dst + p, lanes(left), widen_part(bf, src + p, left));
        }
    }
}

/* yt[i, 0:16] (+)= sum_p wr[i, p] xp[p, 0:16] for i < mr, adding when
 * `add` (a later k block). Rows past mr broadcast row 0 again (computed,
 * not stored), so the loop has one shape. */
static KERN void yt_tile(int64_t kc, const float *wr, int mr, const float *xp, float *yt,
                         int64_t ldyt, bool add) {
    const float *row[MR];
    _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++) row[i] = wr + (i < mr ? i : 0) * kc;
    __m256 acc[MR][2];
    _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] =
        _mm256_setzero_ps();
    for (int64_t p = 0; p < kc; p++) {
        __m256 b0 = _mm256_loadu_ps(xp + p * NR), b1 = _mm256_loadu_ps(xp + p * NR + 8);
        _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++) {
            __m256 av = _mm256_broadcast_ss(row[i] + p);
            acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
        }
    }
    _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++) {
        if (i >= mr) break;
        float *d = yt + i * ldyt;
        if (add) {
            acc[i][0] = _mm256_add_ps(acc[i][0], _mm256_loadu_ps(d));
            acc[i][1] = _mm256_add_ps(acc[i][1], _mm256_loadu_ps(d + 8));
        }
        _mm256_storeu_ps(d, acc[i][0]);
        _mm256_storeu_ps(d + 8, acc[i][1]);
    }
}

/* C[j, r] = alpha Y^T[r, j] + beta C[j, r], rounded once, for r < rows
 * (C's columns of this pass), j < cols (= m); 8 x 8 blocks transposed in
 * registers. Y^T's rows are mp >= cols rounded up to 8 long, so whole
 * vectors load; beta 0 never reads C. */
static KERN void store_c(bool bf, uint16_t *c, int64_t ldc, const float *yt, int64_t ldyt,
                         int64_t rows, int64_t cols, float alpha, float beta) {
    __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    for (int64_t r0 = 0; r0 < rows; r0 += 8) {
        int nr = rows - r0 < 8 ? (int)(rows - r0) : 8;
        for (int64_t c0 = 0; c0 < cols; c0 += 8) {
            int nc = cols - c0 < 8 ? (int)(cols - c0) : 8;
            __m256 v[8];
            for (int i = 0; i < 8; i++)
                v[i] = i < nr ? _mm256_loadu_ps(yt + (r0 + i) * ldyt + c0) : _mm256_setzero_ps();
            avx2_transpose8(v);
            for (int j = 0; j < nc; j++) {
                uint16_t *d = c + (c0 + j) * ldc + r0;
                __m256 x = alpha == 1.0f ? v[j] : _mm256_mul_ps(v[j], va);
                if (beta != 0.0f)
                    x = _mm256_fmadd_ps(vb, nr == 8 ? widen8(bf, d) : widen_part(bf, d, nr), x);
                if (nr == 8) narrow8(bf, d, x);
                else narrow_part(bf, d, x, nr);
            }
        }
    }
}

KERN void cpu_hgemm_yt_avx2(bool bf, bool ta, int64_t m, int64_t n, int64_t k, float alpha,
                       const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
                       float beta, uint16_t *c, int64_t ldc, float *scratch) {
    yt_layout l = layout_of(m, n, k);
    float *xp = scratch, *wr = xp + l.kb * l.mp, *yt = wr + MR * l.kb;
    for (int64_t i0 = 0; i0 < n; i0 += l.pass) {
        int64_t nb = n - i0 < l.pass ? n - i0 : l.pass;
        for (int64_t p0 = 0; p0 < k; p0 += l.kb) {
            int64_t kc = k - p0 < l.kb ? k - p0 : l.kb;
            /* op(A)^T[p, j] = op(A)[j, p]: A's row j along k (stored m x
             * k), or A[p, j] (stored k x m): B-panel packing with the
             * transpose flag flipped; columns past m zero */
            for (int64_t j0 = 0; j0 < m; j0 += NR)
                cpu_hgemm_pack_b(bf, !ta, a, lda, p0, kc, j0, m - j0 < NR ? (int)(m - j0) : NR,
                                 xp + j0 * kc);
            /* B's 6 rows outer: widened once per block, they stay in L1
             * across the batch's panels */
            for (int64_t ir = 0; ir < nb; ir += MR) {
                int mr = nb - ir < MR ? (int)(nb - ir) : MR;
                widen_rows(bf, b + (i0 + ir) * ldb + p0, ldb, mr, kc, wr);
                for (int64_t j0 = 0; j0 < l.mp; j0 += NR)
                    yt_tile(kc, wr, mr, xp + j0 * kc, yt + ir * l.mp + j0, l.mp, p0 > 0);
            }
        }
        store_c(bf, c + i0, ldc, yt, l.mp, nb, m, alpha, beta);
    }
}

#endif
