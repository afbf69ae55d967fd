/* GEMM on f16 and bf16 (gemm_lowp.h): exact products, fp32 sums, C
 * rounded once. Two ways, both fp32 FMAs on widened values:
 *   - lt's 16-bit kernels (gemm_lowp_avx2.c), which widen the operands as
 *     they pack or load them and round C as they store it, beside the f32
 *     path they were measured against (lt's AVX2 kernels): 0.95-2.5x its
 *     speed on every shape of the MLP and the CNN (lowp_gemm_bench);
 *   - otherwise A and B (and C when beta != 0) converted whole into fp32
 *     copies in the context's scratch, the f32 GEMM run on them as an f32
 *     call would be (lt's kernels or OpenBLAS), C rounded back: one more
 *     pass over each operand, 3-10% of the GEMM on wide shapes, 15-30%
 *     where a side is thin or k is tiny.
 * With accelerator.bf16_gemm = native (or emulated), bf16 GEMMs run on
 * AVX-512 BF16's dot products instead (gemm_bf16dp.c); auto does not pick
 * them yet: they have run only through SIMDe's emulation. No AMX.
 * OpenBLAS's cblas_sbgemm is no option either: Debian's 0.3.21 is built
 * without it (lowp_gemm_bench reports it where present). */
#include "gemm_lowp.h"

#include <cblas.h>
#include <stdlib.h>
#include <unistd.h>
#include "cast_simd.h"
#include "gemm_lowp_avx2.h"

/* The context's fp32 scratch, at least `floats` long: grown (never shrunk)
 * on demand, freed at teardown. NULL, with LT_ERR_NOMEM parked, when memory
 * is short; a request beyond the machine's physical memory is refused
 * without asking the allocator (it could only fail, or overcommit and
 * fail later). */
static float *scratch(lt_ctx *ctx, cpu_state *s, uint64_t floats) {
    if (floats <= (uint64_t)s->lowp.floats) return s->lowp.buf;
    /* room for the next bigger call too: grow by half again at least */
    uint64_t want = floats + (uint64_t)s->lowp.floats / 2;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    uint64_t phys = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
    void *p = NULL;
    if (floats > phys / sizeof(float) || floats > SIZE_MAX / sizeof(float)) {
        cpu_fail(ctx, LT_ERR_NOMEM,
                 "cpu gemm: a 16-bit GEMM needs %llu floats of fp32 scratch, more than this "
                 "machine's memory",
                 (unsigned long long)floats);
        return NULL;
    }
    if (want > phys / sizeof(float)) want = floats;
    if (posix_memalign(&p, 64, (size_t)want * sizeof(float))) {
        cpu_fail(ctx, LT_ERR_NOMEM,
                 "cpu gemm: cannot allocate %llu bytes of fp32 scratch for a 16-bit GEMM",
                 (unsigned long long)want * 4);
        return NULL;
    }
    free(s->lowp.buf);
    s->lowp.buf = p;
    s->lowp.floats = (int64_t)want;
    return p;
}

/* dst (rows x cols, dense) = src (rows x cols, row stride ld) converted. */
static void convert_rows(cpu_cast_fn f, void *dst, size_t dst_es, const void *src, size_t src_es,
                         int64_t ld, int64_t rows, int64_t cols) {
    if (ld == cols) {
        f(dst, src, rows * cols);
        return;
    }
    for (int64_t r = 0; r < rows; r++)
        f((char *)dst + (size_t)(r * cols) * dst_es, (const char *)src + (size_t)(r * ld) * src_es,
          cols);
}

/* C = beta * C (alpha 0 or k 0: BLAS reads neither A nor B), through an
 * fp32 row; beta 0 writes zeros without reading C. */
static void scale_c(lt_ctx *ctx, cpu_state *s, lt_dtype t, int64_t m, int64_t n, float beta,
                    uint16_t *c, int64_t ldc) {
    float *row = scratch(ctx, s, (uint64_t)n);
    if (!row) return;
    cpu_cast_fn widen = cpu_cast_lowp_best(LT_F32, t), narrow = cpu_cast_lowp_best(t, LT_F32);
    for (int64_t i = 0; i < m; i++) {
        if (beta != 0.0f)
            widen(row, c + i * ldc, n);
        for (int64_t j = 0; j < n; j++) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
        narrow(c + i * ldc, row, n);
    }
}

/* lt's 16-bit kernels where they measured faster, only beside the f32
 * path they were measured against (lt's AVX2 kernels: isa=avx2, or auto on
 * a CPU without AVX-512); anything else (isa=generic, gemm=openblas, an
 * AVX-512 CPU, whose f32 kernels they were never compared with) converts
 * whole operands for its own f32 path. */
static cpu_hgemm_path lowp_path(const cpu_state *s, bool ta, bool tb, int64_t m, int64_t n,
                                int64_t k) {
    if (s->sgemm != lt_sgemm_avx2 || !cpu_hgemm_avx2_usable()) return CPU_HGEMM_NONE;
    cpu_hgemm_path path = cpu_hgemm_avx2_pick(ta, tb, m, n, k);
    /* lt's kernels run on the calling thread. Where OpenBLAS spreads the
     * f32 GEMM over several threads (num_threads, or its default in a
     * process alone on several cores), the shapes PACKED takes go to it:
     * at 2 threads it ran them 1.8x faster than one, so converting whole
     * operands for it (0.83-0.95x of its f32) beats PACKED (about 0.5x).
     * DOT's and STREAM's thin shapes gain little from more threads. YT's
     * go too, as the f32 path's own Y^T does (gemm_avx2.c, avx2_wins). */
    if ((path == CPU_HGEMM_PACKED || path == CPU_HGEMM_YT) && openblas_get_num_threads() > 1)
        return CPU_HGEMM_NONE;
    return path;
}

void cpu_gemm_lowp(lt_ctx *ctx, cpu_state *s, lt_dtype t, bool ta, bool tb, int64_t m,
                   int64_t n, int64_t k, float alpha, const uint16_t *a, int64_t lda,
                   const uint16_t *b, int64_t ldb, float beta, uint16_t *c, int64_t ldc) {
    if (k == 0 || alpha == 0.0f) {
        scale_c(ctx, s, t, m, n, beta, c, ldc);
        return;
    }
    /* Its tiles are 32 columns wide: below 16 most of each dot product
     * would be padding (n = 1: 1/32 of it used), so thin outputs widen. */
    if (t == LT_BF16 && s->bf16dp && n >= 16) {
        float *buf = scratch(ctx, s, (uint64_t)(cpu_bf16dp_scratch_bytes(n, k) + 3) / 4);
        if (buf)
            s->bf16dp(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, buf,
                      cpu_cast_lowp_best(LT_F32, t), cpu_cast_lowp_best(t, LT_F32));
        return;
    }
    cpu_hgemm_path path = lowp_path(s, ta, tb, m, n, k);
    if (path != CPU_HGEMM_NONE) {
        float *buf = scratch(ctx, s, (uint64_t)cpu_hgemm_avx2_scratch(path, m, n, k));
        if (buf)
            cpu_hgemm_avx2(path, t, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, buf);
        return;
    }
    /* Stored shapes: A is m x k (k x m when ta), B k x n (n x k when tb). */
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    /* each product is below 2^62 (sizes fit an int), so the sum fits 64 bits */
    float *fa = scratch(ctx, s, (uint64_t)(ar * ac) + (uint64_t)(br * bc) + (uint64_t)(m * n));
    if (!fa) return;
    float *fb = fa + ar * ac, *fc = fb + br * bc;
    cpu_cast_fn widen = cpu_cast_lowp_best(LT_F32, t), narrow = cpu_cast_lowp_best(t, LT_F32);
    convert_rows(widen, fa, 4, a, 2, lda, ar, ac);
    convert_rows(widen, fb, 4, b, 2, ldb, br, bc);
    if (beta != 0.0f) convert_rows(widen, fc, 4, c, 2, ldc, m, n);
    cpu_sgemm_f32(s, ta, tb, m, n, k, alpha, fa, ac, fb, bc, beta, fc, n);
    for (int64_t i = 0; i < m; i++) narrow(c + i * ldc, fc + i * n, n);
}
