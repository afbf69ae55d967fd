/* What lt's short-dimension f32 GEMM variants share (see gemm_short.h):
 * which calls they take, the transposed-B (NT) path, the packing scratch.
 *
 * Why not OpenBLAS for everything: at small batch every GEMM of an MLP step
 * has one short dimension (the batch, 64), and OpenBLAS then spends about a
 * sixth of its time packing operands (and zeroing C before a beta = 0 call),
 * work that does not shrink with the short dimension. The variants read the
 * operands in place wherever their layout allows:
 *
 *   - the micro-kernel keeps an MR x (NV * vector) tile of C in registers,
 *     and for each k broadcasts MR scalars of A (from any layout: A is
 *     addressed with a row stride and a k stride) and loads NV vectors of one
 *     row of B;
 *   - so op(B) must have rows contiguous in n: B not transposed. That covers
 *     dX = dY W (NN) and dW = dY^T X (TN) directly;
 *   - Y = X W^T (NT, the forward pass) is computed as Y^T = W X^T: W is the
 *     broadcast operand in place, X^T (the small, batch-sized operand) is
 *     packed, and the tile of Y^T is written out transposed.
 *
 * That is the whole of AVX-512's path. AVX2's in-place kernels lost to
 * OpenBLAS except on thin shapes, so for the others it brings paths of its
 * own (isa->own: operands packed into contiguous panels, C^T built in the
 * scratch for NT; gemm_avx2.c says why) and keeps these for the thin ones.
 *
 * Results differ from OpenBLAS's in rounding only (another summation
 * order); every variant is checked against a double-precision reference in
 * test_cpu_gemm. */
#include "gemm_short.h"

#include <stdlib.h>
#include <string.h>

bool lt_sgemm_scratch_init(lt_sgemm_scratch *s) {
    void *p = NULL;
    s->buf = NULL;
    s->floats = 0;
    if (posix_memalign(&p, 64, (size_t)LT_SGEMM_SCRATCH_FLOATS * sizeof(float))) return false;
    s->buf = p;
    s->floats = LT_SGEMM_SCRATCH_FLOATS;
    return true;
}

void lt_sgemm_scratch_free(lt_sgemm_scratch *s) {
    free(s->buf);
    s->buf = NULL;
    s->floats = 0;
}

enum { NT_PANEL = 256 }; /* rows of Y^T computed per pass of the NT case */

/* op(B) transposed (B stored n x k). Packs the smaller operand:
 *  - n <= m (a thin output layer): B^T (k x n) is packed and the product
 *    runs directly;
 *  - otherwise: op(A)^T (k x m) is packed, and Y^T = B op(A)^T is computed
 *    NT_PANEL rows of B at a time with B in place as the broadcast operand,
 *    each panel written back transposed into its columns of C.
 * The packing space is the scratch reserved at setup: a call needing more
 * is declined (returns false before writing anything). */
static bool gemm_nt(const lt_sgemm_isa *isa, lt_sgemm_scratch *s, bool ta, int64_t m, int64_t n,
                    int64_t k, float alpha, const float *a, int64_t lda, const float *b,
                    int64_t ldb, float beta, float *c, int64_t ldc) {
    if (n <= m) {
        if (k * n > s->floats) return false;
        isa->transpose_scale(s->buf, n, b, ldb, n, k, 1.0f, 0.0f);
        isa->rows(m, n, k, alpha, a, ta ? 1 : lda, ta ? lda : 1, s->buf, n, beta, c, ldc);
        return true;
    }
    int64_t xt_floats = (k * m + 15) & ~(int64_t)15;
    if (xt_floats + NT_PANEL * m > s->floats) return false;
    float *xt = s->buf;         /* k x m: op(A)^T */
    float *yt = xt + xt_floats; /* NT_PANEL x m: a panel of (op(A) B^T)^T */
    if (ta) /* op(A) = A^T with A stored k x m: op(A)^T is A itself */
        for (int64_t p = 0; p < k; p++) memcpy(xt + p * m, a + p * lda, (size_t)m * sizeof(float));
    else
        isa->transpose_scale(xt, m, a, lda, m, k, 1.0f, 0.0f);
    for (int64_t j0 = 0; j0 < n; j0 += NT_PANEL) {
        int64_t nb = n - j0 < NT_PANEL ? n - j0 : NT_PANEL;
        isa->rows(nb, m, k, 1.0f, b + j0 * ldb, ldb, 1, xt, m, 0.0f, yt, m);
        isa->transpose_scale(c + j0, ldc, yt, m, nb, m, alpha, beta);
    }
    return true;
}

bool lt_sgemm_short(const lt_sgemm_isa *isa, lt_sgemm_scratch *s, bool ta, bool tb, int64_t m,
                    int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    /* alpha == 0: BLAS reads neither A nor B (so NaN there must not reach C);
     * OpenBLAS does that. */
    if (!s->buf || m <= 0 || n <= 0 || k <= 0 || alpha == 0.0f) return false;
    /* Only where packing would be a large share of OpenBLAS's time: some
     * dimension is short (measured on the MLP's step with the AVX-512
     * kernels: at batch 64 every GEMM gains, at 256 and beyond the 512-wide
     * ones lose a little; the AVX2 kernels win on fewer shapes and add their
     * own rule, isa->wins). The row of B the kernels stream (n, or m when the
     * NT case computes the transpose) times a k block must also sit in L2
     * with room to spare. A thin NT output (the 10 logits) at small batch is
     * cheaper for OpenBLAS than packing. */
    int64_t shortest = m < n ? (m < k ? m : k) : (n < k ? n : k);
    if (shortest > LT_SGEMM_SHORT)
        return isa->own && isa->wins_wide && isa->wins_wide(ta, tb, m, n, k) &&
               isa->own(s, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    int64_t row = tb && n > m ? m : n;
    if ((k < LT_SGEMM_KC ? k : LT_SGEMM_KC) * row > (1 << 18)) return false;
    if (tb && n < 16 && m <= 128) return false;
    if (tb && n > m && m < 16) return false; /* Y^T rows of m < 16 waste most of each vector */
    if (isa->wins && !isa->wins(ta, tb, m, n, k)) return false;
    if (isa->own && isa->own(s, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) return true;
    if (!tb) {
        isa->rows(m, n, k, alpha, a, ta ? 1 : lda, ta ? lda : 1, b, ldb, beta, c, ldc);
        return true;
    }
    return gemm_nt(isa, s, ta, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
