/* Single-precision GEMM for the shapes a training step makes, on AVX2+FMA
 * (AMD Zen 1-3, Intel client parts: CPUs without AVX-512). Every path keeps
 * a 6 x 16 tile of C in registers (12 ymm accumulators; per k, 2 loads of
 * B, 6 broadcasts of A, 12 FMAs) and folds beta into the tile's store, so a
 * beta = 0 call never reads C (OpenBLAS zeroes C in a pass of its own: 8% of
 * the MLP's step at batch 64). Which operand is packed depends on the shape:
 *
 *   - B not transposed (dW = dY^T X, dX = dY W): both operands packed, as
 *     BLIS does. k is cut into equal blocks of at most 256; per block, B
 *     into 16-column panels (p-major, aligned), then A 144 rows at a time
 *     into 6-row panels. Read in place, the rows of B and the k stride of A
 *     are 2-3 KiB apart in the MLP, so the lines a tile touches crowd into
 *     a few L1 sets and evict each other: the in-place kernels ran 25-40%
 *     slower than OpenBLAS on the 512-wide weight gradients, the packed
 *     ones 18-20% faster.
 *   - B transposed with k well above m (the forward pass, Y = X W^T, m the
 *     batch): Y^T = W X^T, with W, the big operand, the broadcast one read
 *     in place (6 rows, each contiguous in k: 6 streams; packing W cost a
 *     third of the call) and X^T, the batch-sized one, packed per k block.
 *     Y^T accumulates in the scratch over the k blocks; 8 x 8 transposes
 *     then write it into C, applying alpha and beta. With a short k, B^T is
 *     packed instead and the product runs as above.
 *   - thin or narrow shapes (m or n below 16; n below 64 outside the Y^T
 *     path): the in-place kernels (gemm_avx512.c's algorithm on 8-float
 *     vectors) through the shared paths (gemm_short.c). B is read once or
 *     twice there, or is small enough to stay in L1 in place, and packing it
 *     cost more than it saved.
 *
 * The micro-kernels compute every row of a 6-row tile and store the ones
 * that exist; a last panel of 8 columns or fewer gets a 6 x 8 kernel.
 * Which calls are taken (the shared rules, then avx2_wins below), the thin
 * paths and the scratch are shared with AVX-512. The file is compiled for
 * the base ISA: only these functions carry target("avx2,fma"), and
 * lt_sgemm_avx2 runs none of them on a CPU without it. */
#include "gemm_avx2.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cblas.h>
#include <immintrin.h>
#include "avx2_transpose8.h"

#define AVX2 __attribute__((target("avx2,fma")))
#define INLINE inline __attribute__((always_inline))

/* Register blocking: 6 x 16, 12 accumulators + 2 vectors of B + 1
 * broadcast of the 16 ymm registers. 4 x 24 (also 12) measured slower on
 * every MLP shape (wgrad1 at batch 64: 1.18 against 0.94 ms, in place).
 * MC: rows of A packed at a time, 144 x 256 floats (144 KiB), which stay in
 * L2 while one 16-column panel of B (16 KiB) stays in L1. YT_FLOATS: the
 * NT path's Y^T per pass, 256 KiB, half of L2 (64 x 1024 or 128 x 512). */
enum { KC = LT_SGEMM_KC, MR = 6, NV = 2, NR = 8 * NV, MC = 144, YT_FLOATS = 1 << 16 };

/* Lanes 0 .. cols-1 set: maskload/maskstore's mask for a vector tail
 * (masked-out lanes are neither read nor written, so no fault past C's or
 * B's end; a masked load gives 0 there). */
static AVX2 INLINE __m256i lanes(int cols) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* ---- thin shapes: both operands in place ---- */

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

/* The in-place micro-kernel: C[0:MR, 0:NV*8] (last vector masked) = alpha *
 * sum_p A[i, p] B[p, :] + beta * C, A[i, p] at a[i * a_rs + p * a_cs],
 * B[p, :] at b + p * ldb. One function per tile size (thin shapes are
 * mostly edge: m = 10 is a 6-row and a 4-row tile); a macro so the
 * accumulator array has a literal size and lives in registers. */
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

/* C = alpha * op(A) B + beta * C with B row-major k x n (not transposed),
 * both in place: the shared `rows` hook. */
static AVX2 void gemm_b_rows(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                             int64_t a_rs, int64_t a_cs, const float *b, int64_t ldb,
                             float beta, float *c, int64_t ldc) {
    for (int64_t p0 = 0; p0 < k; p0 += KC) {
        int64_t kc = k - p0 < KC ? k - p0 : KC;
        float be = p0 == 0 ? beta : 1.0f;
        for (int64_t i0 = 0; i0 < m; i0 += MR) {
            int mr = m - i0 < MR ? (int)(m - i0) : MR;
            const float *ap = a + i0 * a_rs + p0 * a_cs;
            for (int64_t j0 = 0; j0 < n; j0 += NR) {
                int64_t nr = n - j0 < NR ? n - j0 : NR;
                int nv = (int)((nr + 7) / 8);
                tiles[mr][nv](kc, ap, a_rs, a_cs, b + p0 * ldb + j0, ldb, c + i0 * ldc + j0, ldc,
                              alpha, be, lanes((int)(nr - 8 * (nv - 1))));
            }
        }
    }
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

/* ---- packed operands ---- */

/* The k block of the packed paths: k cut into ceil(k / KC) blocks of equal
 * size (rounded up to 8, the transposing packers' step), so that k = 784 is
 * 4 x 196 rather than 3 x 256 + 16, a last block too short to pay for its
 * tile stores. At most KC. */
static int64_t k_block(int64_t k) {
    int64_t nk = (k + KC - 1) / KC;
    return ((k + nk - 1) / nk + 7) & ~(int64_t)7;
}

/* Packs X[0:kc, 0:nc], X[p, j] at x[p * rs + j * cs], into 16-column
 * panels: panel q holds X[p, 16q + j] at dst[q * kc * NR + p * NR + j],
 * columns past nc zero. dst is 32-byte aligned. Rows contiguous in j (B not
 * transposed) are copied; columns contiguous in p (the NT case's X^T) are
 * turned in 8 x 8 transposes. */
static AVX2 void pack_panels(int64_t kc, int64_t nc, const float *x, int64_t rs, int64_t cs,
                             float *dst) {
    for (int64_t j0 = 0; j0 < nc; j0 += NR, dst += kc * NR) {
        int nr = nc - j0 < NR ? (int)(nc - j0) : NR;
        const float *xj = x + j0 * cs;
        if (cs == 1) {
            __m256i m0 = lanes(nr), m1 = lanes(nr - 8);
            for (int64_t p = 0; p < kc; p++) {
                const float *src = xj + p * rs;
                __m256 v0, v1;
                if (nr == NR) {
                    v0 = _mm256_loadu_ps(src);
                    v1 = _mm256_loadu_ps(src + 8);
                } else {
                    v0 = _mm256_maskload_ps(src, m0);
                    v1 = _mm256_maskload_ps(src + 8, m1);
                }
                _mm256_store_ps(dst + p * NR, v0);
                _mm256_store_ps(dst + p * NR + 8, v1);
            }
        } else if (rs == 1) {
            for (int64_t p0 = 0; p0 < kc; p0 += 8) {
                int np = kc - p0 < 8 ? (int)(kc - p0) : 8;
                __m256i pm = lanes(np);
                for (int h = 0; h < NV; h++) {
                    __m256 r[8];
                    for (int j = 0; j < 8; j++) {
                        const float *src = xj + (8 * h + j) * cs + p0;
                        r[j] = 8 * h + j >= nr ? _mm256_setzero_ps()
                               : np == 8       ? _mm256_loadu_ps(src)
                                               : _mm256_maskload_ps(src, pm);
                    }
                    avx2_transpose8(r);
                    for (int q = 0; q < np; q++) _mm256_store_ps(dst + (p0 + q) * NR + 8 * h, r[q]);
                }
            }
        } else {
            for (int64_t p = 0; p < kc; p++)
                for (int j = 0; j < NR; j++) dst[p * NR + j] = j < nr ? xj[p * rs + j * cs] : 0.0f;
        }
    }
}

/* Packs A[0:mc, 0:kc], A[i, p] at a[i * rs + p * cs], into 6-row panels:
 * panel q holds A[6q + i, p] at dst[q * kc * MR + p * MR + i], rows past mc
 * zero. A stored transposed (TN) has the 6 values of each p contiguous;
 * rows contiguous in p (NN) are turned in 8 x 8 transposes. */
static AVX2 void pack_rows(int64_t mc, int64_t kc, const float *a, int64_t rs, int64_t cs,
                           float *dst) {
    for (int64_t i0 = 0; i0 < mc; i0 += MR, dst += kc * MR) {
        int mr = mc - i0 < MR ? (int)(mc - i0) : MR;
        const float *ai = a + i0 * rs;
        if (mr == MR && rs == 1) {
            for (int64_t p = 0; p < kc; p++) memcpy(dst + p * MR, ai + p * cs, MR * sizeof(float));
        } else if (mr == MR && cs == 1) {
            for (int64_t p0 = 0; p0 < kc; p0 += 8) {
                int np = kc - p0 < 8 ? (int)(kc - p0) : 8;
                __m256i pm = lanes(np);
                __m256 r[8];
                for (int i = 0; i < 8; i++)
                    r[i] = i >= MR   ? _mm256_setzero_ps()
                           : np == 8 ? _mm256_loadu_ps(ai + i * rs + p0)
                                     : _mm256_maskload_ps(ai + i * rs + p0, pm);
                avx2_transpose8(r);
                for (int q = 0; q < np; q++) { /* 6 of the 8 lanes */
                    float *d = dst + (p0 + q) * MR;
                    _mm_storeu_ps(d, _mm256_castps256_ps128(r[q]));
                    _mm_storel_pi((__m64 *)(d + 4), _mm256_extractf128_ps(r[q], 1));
                }
            }
        } else {
            for (int64_t p = 0; p < kc; p++)
                for (int i = 0; i < MR; i++) dst[p * MR + i] = i < mr ? ai[i * rs + p * cs] : 0.0f;
        }
    }
}

/* The tile product over one k block: acc[i][0:nv] = sum_p A[i, p] bp[p *
 * NR : + 8 nv], bp a packed 16-column panel (nv = 1: its first 8 columns),
 * A[i, p] at row[i][p * a_cs]. A macro, not a function, so the accumulators
 * stay in registers in the kernel that uses it. */
#define TILE_PRODUCT(acc, nv, kc, row, a_cs, bp)                                        \
    do {                                                                                \
        _Pragma("GCC unroll 8") for (int i_ = 0; i_ < MR; i_++)                         \
            _Pragma("GCC unroll 2") for (int j_ = 0; j_ < (nv); j_++) acc[i_][j_] =     \
                _mm256_setzero_ps();                                                    \
        for (int64_t p_ = 0; p_ < (kc); p_++) {                                         \
            __m256 b_[NV];                                                              \
            _Pragma("GCC unroll 2") for (int j_ = 0; j_ < (nv); j_++) b_[j_] =          \
                _mm256_load_ps((bp) + p_ * NR + 8 * j_);                                \
            _Pragma("GCC unroll 8") for (int i_ = 0; i_ < MR; i_++) {                   \
                __m256 a_ = _mm256_broadcast_ss(row[i_] + p_ * (a_cs));                 \
                _Pragma("GCC unroll 2") for (int j_ = 0; j_ < (nv); j_++) acc[i_][j_] = \
                    _mm256_fmadd_ps(a_, b_[j_], acc[i_][j_]);                           \
            }                                                                           \
        }                                                                               \
    } while (0)

/* C[0:mr, 0:nr] = alpha * ap bp + beta * C over one k block, ap a packed
 * 6-row panel, bp a packed 16-column panel of which the first 8 nv columns
 * are used (nr <= 8 nv). The padding rows and columns are computed but not
 * stored; beta == 0 never reads C. */
static AVX2 INLINE void packed_tile(int nv, int64_t kc, const float *ap, const float *bp,
                                    float *c, int64_t ldc, int mr, int nr, float alpha,
                                    float beta) {
    const float *row[MR] = {ap, ap + 1, ap + 2, ap + 3, ap + 4, ap + 5};
    __m256 acc[MR][NV];
    TILE_PRODUCT(acc, nv, kc, row, MR, bp);
    __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    __m256i mask[NV] = {lanes(nr), lanes(nr - 8)};
    _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) {
        if (i >= mr) break;
        _Pragma("GCC unroll 2") for (int j = 0; j < nv; j++) {
            float *d = c + i * ldc + 8 * j;
            __m256 v = _mm256_mul_ps(acc[i][j], va);
            if (nr == 8 * nv) {
                if (beta != 0.0f) v = _mm256_fmadd_ps(vb, _mm256_loadu_ps(d), v);
                _mm256_storeu_ps(d, v);
            } else {
                if (beta != 0.0f) v = _mm256_fmadd_ps(vb, _mm256_maskload_ps(d, mask[j]), v);
                _mm256_maskstore_ps(d, mask[j], v);
            }
        }
    }
}

/* 6 x 16, and 6 x 8 for a last panel of B with at most 8 columns (n = 100
 * would otherwise compute 112 columns, enough to lose to OpenBLAS). */
static AVX2 void kernel_packed16(int64_t kc, const float *ap, const float *bp, float *c,
                                 int64_t ldc, int mr, int nr, float alpha, float beta) {
    packed_tile(2, kc, ap, bp, c, ldc, mr, nr, alpha, beta);
}

static AVX2 void kernel_packed8(int64_t kc, const float *ap, const float *bp, float *c,
                                int64_t ldc, int mr, int nr, float alpha, float beta) {
    packed_tile(1, kc, ap, bp, c, ldc, mr, nr, alpha, beta);
}

/* C = alpha * op(A) B + beta * C (B not transposed), A[i, p] at a[i * a_rs +
 * p * a_cs], both operands packed per k block into the scratch. Per block:
 * all of B's panels, then per 144 rows of A its panels, each B panel
 * against every A panel (the B panel stays in L1, the A panels in L2).
 * False, having written nothing, when the panels outgrow the scratch. */
static AVX2 bool gemm_packed(lt_sgemm_scratch *s, int64_t m, int64_t n, int64_t k, float alpha,
                             const float *a, int64_t a_rs, int64_t a_cs, const float *b,
                             int64_t b_rs, int64_t b_cs, float beta, float *c, int64_t ldc) {
    int64_t kb = k_block(k), bfloats = kb * ((n + NR - 1) / NR * NR);
    if (bfloats + MC * kb > s->floats) return false;
    float *bp = s->buf, *ap = s->buf + bfloats; /* bfloats: a multiple of 16, so both aligned */
    for (int64_t p0 = 0; p0 < k; p0 += kb) {
        int64_t kc = k - p0 < kb ? k - p0 : kb;
        float be = p0 == 0 ? beta : 1.0f;
        pack_panels(kc, n, b + p0 * b_rs, b_rs, b_cs, bp);
        for (int64_t i0 = 0; i0 < m; i0 += MC) {
            int64_t mc = m - i0 < MC ? m - i0 : MC;
            pack_rows(mc, kc, a + i0 * a_rs + p0 * a_cs, a_rs, a_cs, ap);
            for (int64_t j0 = 0; j0 < n; j0 += NR) {
                int nr = n - j0 < NR ? (int)(n - j0) : NR;
                void (*kernel)(int64_t, const float *, const float *, float *, int64_t, int,
                               int, float, float) = nr > 8 ? kernel_packed16 : kernel_packed8;
                for (int64_t ir = 0; ir < mc; ir += MR)
                    kernel(kc, ap + ir * kc, bp + j0 * kc, c + (i0 + ir) * ldc + j0, ldc,
                           mc - ir < MR ? (int)(mc - ir) : MR, nr, alpha, be);
            }
        }
    }
    return true;
}

/* ct[0:mr, 0:8 nv] (+)= W[0:mr, :] bp over one k block (adding when `add`):
 * W's rows in place at w + i * ldw, contiguous in k; rows past mr read row
 * 0 again (computed, not stored). ct is the scratch's Y^T, aligned. */
static AVX2 INLINE void nt_tile(int nv, int64_t kc, const float *w, int64_t ldw, int mr,
                                const float *bp, float *ct, int64_t ldct, bool add) {
    const float *row[MR];
    _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) row[i] = i < mr ? w + i * ldw : w;
    __m256 acc[MR][NV];
    TILE_PRODUCT(acc, nv, kc, row, 1, bp);
    _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) {
        if (i >= mr) break;
        _Pragma("GCC unroll 2") for (int j = 0; j < nv; j++) {
            float *d = ct + i * ldct + 8 * j;
            _mm256_store_ps(d, add ? _mm256_add_ps(acc[i][j], _mm256_load_ps(d)) : acc[i][j]);
        }
    }
}

/* 6 x 16, and 6 x 8 for a last panel of the batch with at most 8 columns
 * left (m = 72 would otherwise compute 80 columns: 10% more, enough to lose
 * to OpenBLAS; 6 x 8 does one load per 6 FMAs and runs near peak still). */
static AVX2 void kernel_nt16(int64_t kc, const float *w, int64_t ldw, int mr, const float *bp,
                             float *ct, int64_t ldct, bool add) {
    nt_tile(2, kc, w, ldw, mr, bp, ct, ldct, add);
}

static AVX2 void kernel_nt8(int64_t kc, const float *w, int64_t ldw, int mr, const float *bp,
                            float *ct, int64_t ldct, bool add) {
    nt_tile(1, kc, w, ldw, mr, bp, ct, ldct, add);
}

/* C = alpha * op(A) B^T + beta * C (B stored n x k) as C^T = B op(A)^T:
 * per k block op(A)^T is packed into 16-column panels (m padded to 16), and
 * every 6 rows of B (read in place) meet every panel, adding into Y^T (n x
 * m16) in the scratch; Y^T is then transposed into C. B's rows are taken in
 * passes whose Y^T fits YT_FLOATS (op(A)^T packed again per pass): one pass
 * for the MLP. False, having written nothing, when the scratch holds less
 * than a pass. */
static AVX2 bool gemm_nt(lt_sgemm_scratch *s, bool ta, int64_t m, int64_t n, int64_t k,
                         float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                         float beta, float *c, int64_t ldc) {
    int64_t kb = k_block(k), mp = (m + NR - 1) / NR * NR, xfloats = kb * mp;
    int64_t pass = YT_FLOATS / mp / 24 * 24; /* whole 8 x 8 blocks and 6-row tiles */
    if (pass < 24) pass = 24;
    if (pass > n) pass = n;
    if (xfloats + pass * mp > s->floats) return false;
    float *xp = s->buf, *yt = s->buf + xfloats; /* both 64-byte aligned */
    /* op(A)^T[p, j] = op(A)[j, p]: A[j, p], or A[p, j] when A is stored
     * transposed (k x m) */
    int64_t rs = ta ? lda : 1, cs = ta ? 1 : lda;
    for (int64_t i0 = 0; i0 < n; i0 += pass) {
        int64_t nb = n - i0 < pass ? n - i0 : pass;
        for (int64_t p0 = 0; p0 < k; p0 += kb) {
            int64_t kc = k - p0 < kb ? k - p0 : kb;
            pack_panels(kc, m, a + p0 * rs, rs, cs, xp);
            /* B's 6 rows outer: they stay in L1 across the batch's panels
             * (the other order measured slower). */
            for (int64_t ir = 0; ir < nb; ir += MR) {
                int mr = nb - ir < MR ? (int)(nb - ir) : MR;
                const float *w = b + (i0 + ir) * ldb + p0;
                for (int64_t j0 = 0; j0 < m; j0 += NR)
                    (m - j0 > 8 ? kernel_nt16 : kernel_nt8)(kc, w, ldb, mr, xp + j0 * kc,
                                                            yt + ir * mp + j0, mp, p0 > 0);
            }
        }
        transpose_scale(c + i0, ldc, yt, mp, nb, m, alpha, beta);
    }
    return true;
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

/* This file's own paths (the shared driver's `own` hook). Thin shapes, and
 * narrow ones (n < 64) unless they run as Y^T, are left to the shared
 * in-place paths: there B stays in L1 unpacked, and packing it cost more
 * (TN 512 x 16 x 64: 0.013 ms in place, 0.022 packed). */
static bool avx2_own(lt_sgemm_scratch *s, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                     float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                     float beta, float *c, int64_t ldc) {
    if (m < 16 || n < 16) return false;
    if (tb && lt_sgemm_nt_by_yt(m, k))
        return gemm_nt(s, ta, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (n < 64) return false;
    return gemm_packed(s, m, n, k, alpha, a, ta ? 1 : lda, ta ? lda : 1, b, tb ? 1 : ldb,
                       tb ? ldb : 1, beta, c, ldc);
}

/* Where these kernels beat OpenBLAS 0.3.21 (its Haswell/Zen kernels, one
 * thread) on an AMD EPYC with AVX2 (32 KiB L1, 512 KiB L2), best of 40-80
 * calls each:
 *  - the MLP (784-512-512-10) at batch 64: the forward Y = X W^T 0.549
 *    against 0.630 ms (k = 784) and 0.357 against 0.405 (k = 512); the
 *    weight gradients dW = dY^T X 0.571 against 0.684 (512 x 784), 0.377
 *    against 0.447 (512 x 512) and 0.008 against 0.014 (the 10-wide
 *    layer); that layer's dX = dY W (k = 10) 0.011 against 0.020, and
 *    twice as fast at every batch. At batch 128, 5-6% faster on the
 *    forward, 10-11% on the weight gradients;
 *  - sweeps: B transposed with m <= 128, 2% to 2x faster (n >= 64, or k
 *    long enough for Y^T); B not transposed with k <= 128, 5% to 2x from m
 *    = 40 (and below with k <= 32), narrow B (n < 64) only with A not
 *    transposed.
 * Left to OpenBLAS: dX = dY W with a long k (64 x 512 x 512: 0.41 against
 * 0.40 ms), and the losses of the sweeps: m 16-39 with k > 32 (6-row tiles
 * pad 16 rows to 18, 32 to 36: 1-11% slower), transposed A with narrow B
 * (TN 512 x 33 x 128 in place: 18% slower), transposed B narrow outside
 * Y^T (TT 64 x 33 x 128: 11%). Still taken, near even: n a little past a
 * multiple of 8 (TN 512 x 65 x 128: 8% slower). From batch 256 on, only the
 * 10-wide layer's calls have a dimension <= 128 (the shared rules); the
 * others are wide shapes (avx2_wins_wide below).
 * OpenBLAS on several threads ran the wide shapes 1.65x faster at 2 (0.375
 * ms for the first forward): lt's kernels use one, so they keep then to
 * the thin shapes, as before this file packed. */
static bool avx2_wins(bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
    if (m < 16 || n < 16) return true;
    if (openblas_get_num_threads() > 1) return false;
    if (tb) return m <= LT_SGEMM_SHORT && (n >= 64 || lt_sgemm_nt_by_yt(m, k));
    return k <= LT_SGEMM_SHORT && (m >= 40 || k <= 32) && (n >= 64 || !ta);
}

/* Shapes with no short dimension (the MLP's from batch 256 on): the packed
 * paths on one OpenBLAS thread. On warm operands they run even with
 * OpenBLAS (90-96 against 91-94 GF/s on the MLP's shapes at batch 256 and
 * 1024, bench/lowp_gemm_bench); in a training step, where C is cold,
 * OpenBLAS's separate pass zeroing C for beta = 0 costs more (1.8% of the
 * step at batch 1024, perf), and the MLP trained 0.9-2.7% faster at batch
 * 256, 1.9-2.5% at 512, 1.2-2.2% at 1024 (train_bench, interleaved runs,
 * AMD EPYC). With several threads OpenBLAS keeps them, as above. */
static bool avx2_wins_wide(bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
    (void)ta, (void)tb, (void)m, (void)n, (void)k;
    return openblas_get_num_threads() == 1;
}

static bool every_shape(bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
    (void)ta, (void)tb, (void)m, (void)n, (void)k;
    return true;
}

static const lt_sgemm_isa avx2_isa = {gemm_b_rows, transpose_scale, avx2_wins, avx2_own,
                                      avx2_wins_wide};
static const lt_sgemm_isa avx2_every_isa = {gemm_b_rows, transpose_scale, NULL, avx2_own,
                                            every_shape};

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
