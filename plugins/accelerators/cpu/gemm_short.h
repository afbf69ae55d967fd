/* lt's own f32 GEMM for shapes with a short dimension: what the ISA variants
 * (gemm_avx512.c, gemm_avx2.c) share. The decline rules, the transposed-B
 * (NT) panel logic and the packing scratch live in gemm_short.c; a variant
 * supplies its micro-kernel driver and its transpose, and may add paths of
 * its own that run first (AVX2 packs its operands). Internal to the cpu
 * accelerator. */
#ifndef LT_CPU_GEMM_SHORT_H
#define LT_CPU_GEMM_SHORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Packing space, reserved once per context by lt_sgemm_scratch_init
 * (address space: pages are touched only as far as a call uses them, for
 * the MLP at batch 64 264 KiB with AVX-512, 232 KiB with AVX2), so a GEMM
 * never allocates. A call that would need more is left to OpenBLAS (or,
 * for AVX2's packed paths, to the in-place kernels). A context's kernels
 * run on one thread. */
#define LT_SGEMM_SCRATCH_FLOATS (4 << 20) /* 16 MiB */
typedef struct lt_sgemm_scratch {
    float *buf;
    int64_t floats;
} lt_sgemm_scratch;

/* False (and nothing reserved) without memory. */
bool lt_sgemm_scratch_init(lt_sgemm_scratch *s);
void lt_sgemm_scratch_free(lt_sgemm_scratch *s);

/* One variant's entry point, the contract of every lt_sgemm_<isa>: row-major
 * C[m,n] = alpha * op(A) op(B) + beta * C, as cblas_sgemm. Returns false,
 * having touched nothing, when it does not take the call (CPU without the
 * ISA, no scratch, no short dimension, alpha 0, packing beyond the scratch);
 * the caller then uses another GEMM. Arguments are valid. */
typedef bool (*lt_sgemm_fn)(lt_sgemm_scratch *s, bool ta, bool tb, int64_t m, int64_t n,
                            int64_t k, float alpha, const float *a, int64_t lda, const float *b,
                            int64_t ldb, float beta, float *c, int64_t ldc);

/* ---- for the variants only ---- */

/* What an ISA supplies:
 *  - rows: C = alpha * op(A) B + beta * C with B row-major k x n (not
 *    transposed), A[i, p] at a[i * a_rs + p * a_cs]; beta 0 never reads C;
 *  - transpose_scale: dst[c, r] = alpha * src[r, c] + beta * dst[c, r] for
 *    r < rows, c < cols; beta 0 never reads dst;
 *  - wins (NULL: every call the shared rules allow): false for the calls
 *    OpenBLAS runs faster on this ISA, asked after the shared rules;
 *  - own (NULL: none): the variant's own paths for a call wins took, asked
 *    before rows and the NT path: true when it ran the call, false (having
 *    written nothing) to leave it to them;
 *  - wins_wide (NULL: none): true for the calls with no short dimension
 *    (all above LT_SGEMM_SHORT) that own should run; the shared rules are
 *    not asked then, and a call own declines goes to OpenBLAS. */
typedef struct lt_sgemm_isa {
    void (*rows)(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t a_rs,
                 int64_t a_cs, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
    void (*transpose_scale)(float *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows,
                            int64_t cols, float alpha, float beta);
    bool (*wins)(bool ta, bool tb, int64_t m, int64_t n, int64_t k);
    lt_sgemm_fn own;
    bool (*wins_wide)(bool ta, bool tb, int64_t m, int64_t n, int64_t k);
} lt_sgemm_isa;

enum {
    LT_SGEMM_KC = 256,   /* k block: an MR x KC slab of A stays in L1 across n */
    LT_SGEMM_SHORT = 128 /* a call is taken only when some dimension is at most this */
};

/* The shared driver: the decline rules, then isa->own where it takes the
 * call, else isa->rows directly (B not transposed) or the NT path. The
 * caller has checked the CPU runs `isa`. */
bool lt_sgemm_short(const lt_sgemm_isa *isa, lt_sgemm_scratch *s, bool ta, bool tb, int64_t m,
                    int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

#endif
