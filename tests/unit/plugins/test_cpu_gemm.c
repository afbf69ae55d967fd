/* lt's AVX-512 f32 GEMM (plugins/accelerators/cpu/gemm_avx512.c) against a
 * double-precision reference: every transpose, every tile edge (rows 1-8,
 * vector tails 1-16 columns), k across the k-block boundary, beta 0 / 1 /
 * other, padded leading dimensions; which shapes it takes and declines; and
 * the cpu plugin's gemm parameter. On a CPU without AVX-512 the direct tests
 * check that the kernels decline everything, and the plugin uses OpenBLAS. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cunit_run.h"
#include "config/config.h"
#include "cpu_plugin.h"
#include "gemm_avx512.h"

static lt_sgemm_scratch g_scratch;

static void fill(float *x, int64_t n, unsigned seed) {
    uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = (float)((double)(s >> 11) / (double)(1ull << 53) - 0.5);
    }
}

/* Row-major, as cblas_sgemm; sums in double. */
static void ref(bool ta, bool tb, int m, int n, int k, double alpha, const float *a, int lda,
                const float *b, int ldb, double beta, const float *c0, double *c, int ldc) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++)
                s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
                     (double)(tb ? b[j * ldb + p] : b[p * ldb + j]);
            c[i * ldc + j] = alpha * s + (beta == 0 ? 0 : beta * c0[i * ldc + j]);
        }
}

/* Runs one shape; returns 1 when the kernels took it, 0 when they declined,
 * -1 on a wrong result (printed, and an assertion failed). */
static int run_case(bool ta, bool tb, int m, int n, int k, double alpha, double beta) {
    int arows = ta ? k : m, acols = ta ? m : k, brows = tb ? n : k, bcols = tb ? k : n;
    int lda = acols + 3, ldb = bcols + 1, ldc = n + 2;
    float *a = malloc(sizeof(float) * arows * lda), *b = malloc(sizeof(float) * brows * ldb);
    float *c = malloc(sizeof(float) * m * ldc), *c0 = malloc(sizeof(float) * m * ldc);
    double *want = malloc(sizeof(double) * m * ldc);
    fill(a, (int64_t)arows * lda, 1);
    fill(b, (int64_t)brows * ldb, 2);
    fill(c0, (int64_t)m * ldc, 3);
    memcpy(c, c0, sizeof(float) * m * ldc);
    if (beta == 0) /* C's old contents must not be read: NaN would show */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) c[i * ldc + j] = NAN;
    float *before = malloc(sizeof(float) * m * ldc);
    memcpy(before, c, sizeof(float) * m * ldc);
    for (int i = 0; i < m * ldc; i++) want[i] = c0[i]; /* padding stays as it was */
    ref(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c0, want, ldc);
    int took = lt_sgemm_avx512(&g_scratch, ta, tb, m, n, k, (float)alpha, a, lda, b, ldb,
                               (float)beta, c, ldc);
    int result = took;
    if (took) {
        /* f32 products summed in f32: error grows with k and |values| <= 0.5. */
        double tol = 2e-6 * (k + 2);
        for (int i = 0; i < m && result > 0; i++)
            for (int j = 0; j < ldc; j++) {
                double got = c[i * ldc + j], w = j < n ? want[i * ldc + j] : c0[i * ldc + j];
                if (!(fabs(got - w) <= tol * (1 + fabs(w)))) {
                    printf("\n  ta=%d tb=%d m=%d n=%d k=%d alpha=%g beta=%g: C[%d,%d] = %.9g, "
                           "want %.9g\n", ta, tb, m, n, k, alpha, beta, i, j, got, w);
                    result = -1;
                    break;
                }
            }
    } else if (memcmp(c, before, sizeof(float) * m * ldc)) { /* declining leaves C as it was */
        printf("\n  ta=%d tb=%d m=%d n=%d k=%d: declined but wrote C\n", ta, tb, m, n, k);
        result = -1;
    }
    free(a), free(b), free(c), free(c0), free(want), free(before);
    return result;
}

static const int edge_m[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 23, 64};
static const int edge_n[] = {1, 15, 16, 17, 31, 33, 47, 48, 49, 64, 100, 128, 130};
static const int edge_k[] = {1, 7, 64, 255, 256, 257, 600};

static void test_every_tile(void) {
    int took = 0, wrong = 0, cases = 0, unexpected = 0;
    for (int tr = 0; tr < 4; tr++)
        for (size_t im = 0; im < sizeof edge_m / sizeof *edge_m; im++)
            for (size_t in = 0; in < sizeof edge_n / sizeof *edge_n; in++)
                for (size_t ik = 0; ik < sizeof edge_k / sizeof *edge_k; ik++) {
                    int m = edge_m[im], n = edge_n[in], k = edge_k[ik];
                    double beta = (int)(im + in + ik) % 3 == 0 ? 0.0 : (ik % 2 ? 1.0 : -0.75);
                    int r = run_case(tr & 1, tr & 2, m, n, k, 1.25, beta);
                    /* B not transposed: always taken at these sizes; transposed:
                     * only with m and n both >= 16 (thin sides go to OpenBLAS). */
                    bool expect = !(tr & 2) || (m >= 16 && n >= 16);
                    cases++;
                    took += r > 0;
                    wrong += r < 0;
                    if (lt_sgemm_avx512_usable() && r >= 0 && (r > 0) != expect && unexpected++ < 3)
                        printf("\n  ta=%d tb=%d m=%d n=%d k=%d: %s, expected otherwise", tr & 1,
                               (tr & 2) != 0, m, n, k, r ? "taken" : "declined");
                }
    CU_ASSERT_EQUAL(wrong, 0);
    if (lt_sgemm_avx512_usable()) {
        CU_ASSERT_EQUAL(unexpected, 0);
        printf("\n  %d of %d shapes ran on the AVX-512 kernels\n", took, cases);
    } else {
        CU_ASSERT_EQUAL(took, 0);
        printf("\n  no AVX-512 on this CPU: every shape declined (OpenBLAS runs them)\n");
    }
}

/* Transposed products wider than one pass (NT_PANEL = 256 rows of Y^T):
 * every panel lands in its own columns of C. */
static void test_nt_panels(void) {
    int r = run_case(false, true, 20, 600, 37, 0.5, 1.0);
    CU_ASSERT(r >= 0);
    r = run_case(true, true, 64, 1000, 64, 1.0, 0.0);
    CU_ASSERT(r >= 0);
    if (lt_sgemm_avx512_usable()) CU_ASSERT_EQUAL(r, 1);
}

/* The MLP's own shapes at batch 64 and 1024 (forward, weight and input
 * gradients): at 64 the kernels take every one (but the thin logits
 * forward), at 1024 only the thin last layer's. */
static void test_training_shapes(void) {
    const int in[3] = {784, 512, 512}, out[3] = {512, 512, 10};
    const int batch[2] = {64, 1024};
    for (int bi = 0; bi < 2; bi++)
        for (int l = 0; l < 3; l++) {
            int B = batch[bi];
            int fwd = run_case(false, true, B, out[l], in[l], 1.0, 0.0);
            int wgrad = run_case(true, false, out[l], in[l], B, 1.0, 0.0);
            int dgrad = run_case(false, false, B, in[l], out[l], 1.0, 0.0);
            CU_ASSERT(fwd >= 0 && wgrad >= 0 && dgrad >= 0);
            if (lt_sgemm_avx512_usable()) {
                bool thin = out[l] < 16, small = B <= 128;
                CU_ASSERT_EQUAL(wgrad, small || thin);
                CU_ASSERT_EQUAL(dgrad, small || thin);
                CU_ASSERT_EQUAL(fwd, thin ? !small : small);
            }
        }
}

/* Shapes with no short dimension, or whose streamed row of B outgrows L2,
 * are left to OpenBLAS; so are alpha 0 (BLAS reads neither A nor B then),
 * a transposed product whose Y^T rows are thin (m < 16), and packing that
 * would not fit the scratch reserved at setup. */
static void test_declines(void) {
    CU_ASSERT_EQUAL(run_case(false, false, 8, 2048, 300, 1.0, 0.0), 0);
    CU_ASSERT_EQUAL(run_case(false, true, 2048, 2048, 300, 1.0, 0.0), 0);
    CU_ASSERT_EQUAL(run_case(false, false, 64, 100, 50, 0.0, 0.5), 0);
    CU_ASSERT_EQUAL(run_case(false, true, 8, 100, 50, 1.0, 0.0), 0);
    CU_ASSERT_EQUAL(run_case(true, true, 64, 96, LT_SGEMM_SCRATCH_FLOATS / 64, 1.0, 0.0), 0);
    float x = 1;
    CU_ASSERT_FALSE(lt_sgemm_avx512(&g_scratch, false, false, 1, 1, 0, 1, &x, 1, &x, 1, 0, &x, 1));
}

/* The plugin's gemm parameter: openblas and auto give the same product to
 * rounding; anything else is refused at setup with the allowed values. */
static void test_gemm_param(void) {
    const char *vals[2] = {"openblas", "auto"};
    enum { M = 64, N = 96, K = 80 };
    static float a[M * K], b[N * K], c[2][M * N];
    fill(a, M * K, 4);
    fill(b, N * K, 5);
    for (int v = 0; v < 2; v++) {
        lt_config *cfg = lt_config_new();
        CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
        char err[256] = "";
        lt_config_declare(cfg, "accelerator.cpu", "gemm", LT_PARAM_STRING, "auto", "gemm");
        CU_ASSERT_EQUAL(lt_config_set(cfg, "accelerator.cpu", "gemm", vals[v], LT_SRC_FLAG,
                                      "--set", err, sizeof err), LT_OK);
        const lt_accelerator_desc *acc;
        const lt_kernels *k;
        lt_ctx ctx;
        CU_ASSERT_EQUAL_FATAL(cpu_plugin_open_config(&acc, &ctx, &k, cfg), 0);
        k->gemm(&ctx, LT_F32, false, true, M, N, K, 1.0, a, K, b, K, 0.0, c[v], N);
        CU_ASSERT_EQUAL(acc->synchronize(&ctx), LT_OK);
        acc->teardown(&ctx);
        lt_config_free(cfg);
    }
    int bad = 0;
    for (int i = 0; i < M * N; i++) bad += !(fabsf(c[0][i] - c[1][i]) <= 1e-5f);
    CU_ASSERT_EQUAL(bad, 0);

    lt_config *cfg = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
    char err[256] = "";
    lt_config_declare(cfg, "accelerator.cpu", "gemm", LT_PARAM_STRING, "auto", "gemm");
    lt_config_set(cfg, "accelerator.cpu", "gemm", "mkl", LT_SRC_FLAG, "--set", err, sizeof err);
    const lt_accelerator_desc *acc;
    const lt_kernels *k;
    lt_ctx ctx;
    CU_ASSERT_EQUAL(cpu_plugin_open_config(&acc, &ctx, &k, cfg), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(&ctx), "gemm=mkl is not one of auto, openblas"));
    lt_config_free(cfg);
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    if (lt_sgemm_avx512_usable() && !lt_sgemm_scratch_init(&g_scratch)) {
        fprintf(stderr, "test_cpu_gemm: cannot reserve the packing scratch\n");
        return 1;
    }
    CU_pSuite s = CU_add_suite("cpu_gemm", NULL, NULL);
    if (!s) return 1;
    CU_add_test(s, "every tile edge, transpose, beta, k block", test_every_tile);
    CU_add_test(s, "the MLP's shapes at batch 64 and 1024", test_training_shapes);
    CU_add_test(s, "transposed products in several panels", test_nt_panels);
    CU_add_test(s, "calls left to OpenBLAS, C untouched", test_declines);
    CU_add_test(s, "gemm parameter", test_gemm_param);
    int rc = lt_cunit_run();
    lt_sgemm_scratch_free(&g_scratch);
    return rc;
}
