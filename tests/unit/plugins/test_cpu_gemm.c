/* lt's f32 GEMM variants (plugins/accelerators/cpu/gemm_avx512.c and
 * gemm_avx2.c over gemm_short.c) against a double-precision reference:
 * every transpose, every tile edge (rows 1-8, vector tails 1-16 columns), k
 * across the k-block boundaries, beta 0 / 1 / other, padded leading
 * dimensions, the blocks of AVX2's packed paths; which shapes they take
 * and decline (with OpenBLAS on one thread and on several); and the cpu
 * plugin's gemm and isa parameters. Every test runs once per variant this
 * CPU executes; a variant it cannot run is reported as skipped, after
 * checking that it declines every call (so the plugin falls back to
 * OpenBLAS). */
#include <CUnit/Basic.h>
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cunit_run.h"
#include "config/config.h"
#include "cpu_plugin.h"
#include "gemm_avx2.h"
#include "gemm_avx512.h"

/* fn: every call the shared rules allow (the sweeps); plugin: what the
 * plugin calls, with the variant's own rule on top (AVX2: avx2_wins). */
typedef struct variant {
    const char *name;
    lt_sgemm_fn fn, plugin;
    bool (*usable)(void);
} variant;

static const variant variants[] = {
    {"avx512", lt_sgemm_avx512, lt_sgemm_avx512, lt_sgemm_avx512_usable},
    {"avx2", lt_sgemm_avx2_every, lt_sgemm_avx2, lt_sgemm_avx2_usable},
};
enum { NVARIANTS = sizeof variants / sizeof *variants };
static const variant *V; /* the variant run_case calls */

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
static int run_fn(lt_sgemm_fn fn, bool ta, bool tb, int m, int n, int k, double alpha,
                  double beta) {
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
    int took = fn(&g_scratch, ta, tb, m, n, k, (float)alpha, a, lda, b, ldb, (float)beta, c, ldc);
    int result = took;
    if (took) {
        /* f32 products summed in f32: error grows with k and |values| <= 0.5. */
        double tol = 2e-6 * (k + 2);
        for (int i = 0; i < m && result > 0; i++)
            for (int j = 0; j < ldc; j++) {
                double got = c[i * ldc + j], w = j < n ? want[i * ldc + j] : c0[i * ldc + j];
                if (!(fabs(got - w) <= tol * (1 + fabs(w)))) {
                    printf("\n  %s ta=%d tb=%d m=%d n=%d k=%d alpha=%g beta=%g: C[%d,%d] = "
                           "%.9g, want %.9g\n",
                           V->name, ta, tb, m, n, k, alpha, beta, i, j, got, w);
                    result = -1;
                    break;
                }
            }
    } else if (memcmp(c, before, sizeof(float) * m * ldc)) { /* declining leaves C as it was */
        printf("\n  %s ta=%d tb=%d m=%d n=%d k=%d: declined but wrote C\n", V->name, ta, tb, m,
               n, k);
        result = -1;
    }
    free(a), free(b), free(c), free(c0), free(want), free(before);
    return result;
}

static int run_case(bool ta, bool tb, int m, int n, int k, double alpha, double beta) {
    return run_fn(V->fn, ta, tb, m, n, k, alpha, beta);
}

static const int edge_m[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 23, 64};
static const int edge_n[] = {1, 15, 16, 17, 31, 33, 47, 48, 49, 64, 100, 128, 130};
static const int edge_k[] = {1, 7, 64, 255, 256, 257, 600};

static void every_tile(void) {
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
                    if (r >= 0 && (r > 0) != expect && unexpected++ < 3)
                        printf("\n  %s ta=%d tb=%d m=%d n=%d k=%d: %s, expected otherwise",
                               V->name, tr & 1, (tr & 2) != 0, m, n, k,
                               r ? "taken" : "declined");
                }
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_EQUAL(unexpected, 0);
    printf("\n  %s: %d of %d shapes ran on its kernels, all within tolerance", V->name, took,
           cases);
}

/* Transposed products wider than one pass (NT_PANEL = 256 rows of Y^T):
 * every panel lands in its own columns of C. */
static void nt_panels(void) {
    int r = run_case(false, true, 20, 600, 37, 0.5, 1.0);
    CU_ASSERT(r >= 0);
    r = run_case(true, true, 64, 1000, 64, 1.0, 0.0);
    CU_ASSERT_EQUAL(r, 1);
}

/* The AVX2 variant's own paths (gemm_avx2.c) on shapes the tile sweep
 * leaves out, every transpose, alpha other than 1, beta 0 (C holding NaN) /
 * 1 / other: k across the equal k blocks (257 = 136 + 121, 520 = 2 x 176 +
 * 168, 784 = 3 x 200 + 184) and off the packers' 8-step (13, 30, 100), m
 * across the 144-row blocks of packed A and every 6-row edge, n one to 15
 * past a multiple of 16 (the 6 x 8 kernels), the transposed case both as
 * Y^T (k > 2m) and with B^T packed, Y^T in more than one pass (n beyond
 * 4096 rows at m = 16, 512 at m = 128), and narrow products left to the
 * in-place paths. The AVX-512 variant runs them too, on its own kernels. */
static void packed_paths(void) {
    static const int shapes[][3] = {
        {19, 65, 520},  {20, 71, 784},  {21, 67, 257},   {24, 100, 600}, {40, 130, 784},
        {72, 68, 300},  {100, 69, 520}, {150, 79, 64},   {289, 73, 128}, {150, 72, 300},
        {16, 4100, 20}, {16, 4100, 40}, {128, 600, 300}, {37, 64, 96},   {88, 250, 120},
        {45, 90, 30},   {64, 100, 13},  {50, 80, 100},   {30, 40, 700},  {64, 20, 64},
    };
    int wrong = 0, declined = 0, cases = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (int tr = 0; tr < 4; tr++) {
            int m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
            double beta = (int)(i + tr) % 3 == 0 ? 0.0 : ((i + tr) % 3 == 1 ? 1.0 : -0.75);
            double alpha = tr % 2 ? -0.5 : 1.25;
            int r = run_case(tr & 1, tr & 2, m, n, k, alpha, beta);
            cases++;
            wrong += r < 0;
            if (r == 0 && declined++ < 3)
                printf("\n  %s ta=%d tb=%d m=%d n=%d k=%d: declined", V->name, tr & 1,
                       (tr & 2) != 0, m, n, k);
        }
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_EQUAL(declined, 0);
    printf("\n  %s: %d shapes, all within tolerance", V->name, cases);
}

/* The MLP's own shapes at batch 64 and 1024 (forward, weight and input
 * gradients) through what the plugin calls, OpenBLAS on one thread.
 * AVX-512: at 64 the kernels take every one (but the thin logits forward),
 * at 1024 only the thin last layer's. AVX2: the same but for the input
 * gradients with a long k (dX = dY W, k = 512: even with OpenBLAS at batch
 * 64), and at 1024 also the wide layers' (no short dimension: its packed
 * kernels); the thin layer's, whose k is 10, it takes at every batch. With
 * OpenBLAS on several threads AVX2 keeps to the thin layer's shapes (those
 * are what threads speed up least); AVX-512 takes the same as on one. */
static void mlp_shapes(bool several) {
    const int in[3] = {784, 512, 512}, out[3] = {512, 512, 10};
    const int batch[2] = {64, 1024};
    bool is512 = V == &variants[0];
    for (int bi = 0; bi < 2; bi++)
        for (int l = 0; l < 3; l++) {
            int B = batch[bi];
            int fwd = run_fn(V->plugin, false, true, B, out[l], in[l], 1.0, 0.0);
            int wgrad = run_fn(V->plugin, true, false, out[l], in[l], B, 1.0, 0.0);
            int dgrad = run_fn(V->plugin, false, false, B, in[l], out[l], 1.0, 0.0);
            CU_ASSERT(fwd >= 0 && wgrad >= 0 && dgrad >= 0);
            bool thin = out[l] < 16, small = B <= 128 && (is512 || !several);
            bool wide = !is512 && !several && B > 128 && !thin; /* avx2_wins_wide */
            CU_ASSERT_EQUAL(wgrad, small || thin || wide);
            CU_ASSERT_EQUAL(dgrad, is512 ? small || thin : (thin || wide) && !several);
            CU_ASSERT_EQUAL(fwd, thin ? B > 128 : small || wide);
        }
}

static void training_shapes(void) {
    int threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
    mlp_shapes(false);
    openblas_set_num_threads(2);
    if (openblas_get_num_threads() > 1)
        mlp_shapes(true);
    else
        printf("\n  %s: several OpenBLAS threads: SKIPPED (OpenBLAS runs one here)", V->name);
    openblas_set_num_threads(threads);
}

/* Shapes with no short dimension, or whose streamed row of B outgrows L2,
 * are left to OpenBLAS; so are alpha 0 (BLAS reads neither A nor B then),
 * a transposed product whose Y^T rows are thin (m < 16), and packing that
 * would not fit the scratch reserved at setup (AVX-512's NT path packs all
 * of X^T; AVX2's packs one k block at a time, so a small scratch shows it):
 * a transposed product is declined then, and B not transposed runs on the
 * in-place kernels, which need none. */
static void declines(void) {
    CU_ASSERT_EQUAL(run_case(false, false, 8, 2048, 300, 1.0, 0.0), 0);
    /* no short dimension: AVX2 takes it on one OpenBLAS thread, not on two */
    int threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
    CU_ASSERT_EQUAL(run_fn(V->plugin, false, true, 2048, 2048, 300, 1.0, 0.0), V != &variants[0]);
    openblas_set_num_threads(2);
    if (openblas_get_num_threads() > 1)
        CU_ASSERT_EQUAL(run_fn(V->plugin, false, true, 2048, 2048, 300, 1.0, 0.0), 0);
    openblas_set_num_threads(threads);
    CU_ASSERT_EQUAL(run_case(false, false, 64, 100, 50, 0.0, 0.5), 0);
    CU_ASSERT_EQUAL(run_case(false, true, 8, 100, 50, 1.0, 0.0), 0);
    if (V == &variants[0])
        CU_ASSERT_EQUAL(run_case(true, true, 64, 96, LT_SGEMM_SCRATCH_FLOATS / 64, 1.0, 0.0), 0);
    int64_t reserved = g_scratch.floats;
    g_scratch.floats = 1000;
    CU_ASSERT_EQUAL(run_case(false, true, 64, 512, 784, 1.0, 0.0), 0);
    CU_ASSERT_EQUAL(run_case(false, true, 64, 512, 40, 1.0, 0.0), 0);
    CU_ASSERT_EQUAL(run_case(true, false, 512, 512, 64, 0.5, 0.0), 1);
    CU_ASSERT_EQUAL(run_case(false, false, 64, 512, 10, 1.0, 1.0), 1);
    g_scratch.floats = reserved;
    float x = 1;
    CU_ASSERT_FALSE(V->fn(&g_scratch, false, false, 1, 1, 0, 1, &x, 1, &x, 1, 0, &x, 1));
}

/* Runs `body` once per variant this CPU executes. A variant it cannot run
 * must decline even shapes it would take (the plugin then uses OpenBLAS);
 * that is checked, and the variant reported as skipped, not passed over
 * silently. */
static void each_variant(void (*body)(void), const char *what) {
    for (int v = 0; v < NVARIANTS; v++) {
        V = &variants[v];
        if (V->usable()) {
            body();
            printf("\n  %s: ran", V->name);
            continue;
        }
        CU_ASSERT_EQUAL(run_case(false, false, 64, 100, 50, 1.0, 0.0), 0);
        CU_ASSERT_EQUAL(run_case(true, true, 64, 512, 784, 1.0, 0.5), 0);
        printf("\n  %s: SKIPPED (%s): this CPU cannot run it; checked it declines", V->name, what);
    }
    printf("\n");
}

static void test_every_tile(void) { each_variant(every_tile, "tile sweep"); }
static void test_training_shapes(void) { each_variant(training_shapes, "MLP shapes"); }
static void test_nt_panels(void) { each_variant(nt_panels, "NT panels"); }
static void test_packed_paths(void) { each_variant(packed_paths, "packed paths"); }
static void test_declines(void) { each_variant(declines, "declines"); }

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
    CU_ASSERT_PTR_NOT_NULL(
        strstr(lt_last_error(&ctx), "accelerator.gemm = 'mkl': use auto, openblas"));
    lt_config_free(cfg);
}

/* Opens the plugin with accelerator.cpu.<key> = val; returns
 * cpu_plugin_open_config's result, the error in err on failure, and on
 * success C = A B^T (the forward pass's NT shape) from the plugin's gemm:
 * a thin layer at batch 256, which every variant takes. */
enum { PM = 256, PN = 10, PK = 80 };
static int open_gemm(const char *key, const char *val, float *c, char *err, size_t errlen) {
    static float a[PM * PK], b[PN * PK];
    fill(a, PM * PK, 4);
    fill(b, PN * PK, 5);
    lt_config *cfg = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
    char e[256] = "";
    lt_config_declare(cfg, "accelerator.cpu", key, LT_PARAM_STRING, "auto", key);
    CU_ASSERT_EQUAL(lt_config_set(cfg, "accelerator.cpu", key, val, LT_SRC_FLAG, "--set", e,
                                  sizeof e), LT_OK);
    const lt_accelerator_desc *acc;
    const lt_kernels *k;
    lt_ctx ctx;
    int rc = cpu_plugin_open_config(&acc, &ctx, &k, cfg);
    if (rc == 0) {
        k->gemm(&ctx, LT_F32, false, true, PM, PN, PK, 1.0, a, PK, b, PK, 0.0, c, PN);
        CU_ASSERT_EQUAL(acc->synchronize(&ctx), LT_OK);
        acc->teardown(&ctx);
    } else {
        snprintf(err, errlen, "%s", lt_last_error(&ctx));
    }
    lt_config_free(cfg);
    return rc;
}

/* The plugin's isa parameter: auto and generic always open; avx512 and avx2
 * open where the CPU runs them and then give bit for bit what that variant
 * gives when called directly (so that variant, not OpenBLAS, ran), and are
 * refused at setup with the key, what the CPU has and the fix where it does
 * not. Every result matches OpenBLAS's to rounding. */
static void test_isa_param(void) {
    static float blas[PM * PN], got[PM * PN], direct[PM * PN], a[PM * PK], b[PN * PK];
    char err[256] = "";
    CU_ASSERT_EQUAL_FATAL(open_gemm("isa", "generic", blas, err, sizeof err), 0);
    fill(a, PM * PK, 4);
    fill(b, PN * PK, 5);
    const char *vals[] = {"auto", "avx512", "avx2"};
    int refused = 0;
    for (int i = 0; i < 3; i++) {
        const variant *v = i == 0 ? NULL : &variants[i - 1];
        int rc = open_gemm("isa", vals[i], got, err, sizeof err);
        if (v && !v->usable()) {
            CU_ASSERT_EQUAL(rc, -1);
            char want[64];
            snprintf(want, sizeof want, "isa=%s but this CPU has ", vals[i]);
            CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
            CU_ASSERT_PTR_NOT_NULL(strstr(err, "set accelerator.isa to auto or generic"));
            printf("\n  isa=%s refused: %s", vals[i], err);
            refused++;
            continue;
        }
        CU_ASSERT_EQUAL_FATAL(rc, 0);
        int bad = 0;
        for (int j = 0; j < PM * PN; j++) bad += !(fabsf(got[j] - blas[j]) <= 1e-5f);
        CU_ASSERT_EQUAL(bad, 0);
        if (v) {
            CU_ASSERT_TRUE(v->plugin(&g_scratch, false, true, PM, PN, PK, 1.0f, a, PK, b, PK, 0.0f,
                                 direct, PN));
            CU_ASSERT_EQUAL(memcmp(got, direct, sizeof got), 0);
        }
    }
    if (!refused) printf("\n  isa the CPU lacks: SKIPPED (this CPU runs every variant)");
    CU_ASSERT_EQUAL(open_gemm("isa", "sse", got, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "accelerator.isa = 'sse': use auto, avx512, avx2, generic"));
    printf("\n");
}

/* The plugin's bf16_gemm parameter (which kernel bf16 GEMMs run; their
 * results are test_cpu_lowp's): auto, widen and emulated open anywhere;
 * native opens where the CPU has AVX-512 F, BW, VL and BF16 and is refused
 * elsewhere with what it needs and the fix; anything else is named with
 * the valid values. */
static void test_bf16_gemm_param(void) {
    static float got[PM * PN];
    char err[512] = "";
    static const char *const ok[] = {"auto", "widen", "emulated"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        CU_ASSERT_EQUAL(open_gemm("bf16_gemm", ok[i], got, err, sizeof err), 0);
#if defined(__x86_64__)
    __builtin_cpu_init();
    bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
#else
    bool has = false;
#endif
    int rc = open_gemm("bf16_gemm", "native", got, err, sizeof err);
    if (has) {
        CU_ASSERT_EQUAL(rc, 0);
    } else {
        CU_ASSERT_EQUAL(rc, -1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "bf16_gemm=native needs AVX-512 F, BW, VL and BF16"));
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "set accelerator.bf16_gemm to auto"));
    }
    CU_ASSERT_EQUAL(open_gemm("bf16_gemm", "amx", got, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(err, "accelerator.bf16_gemm = 'amx': use auto, widen, native, emulated"));
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    if (!lt_sgemm_scratch_init(&g_scratch)) {
        fprintf(stderr, "test_cpu_gemm: cannot reserve the packing scratch\n");
        return 1;
    }
    CU_pSuite s = CU_add_suite("cpu_gemm", NULL, NULL);
    if (!s) return 1;
    CU_add_test(s, "every tile edge, transpose, beta, k block", test_every_tile);
    CU_add_test(s, "the MLP's shapes at batch 64 and 1024", test_training_shapes);
    CU_add_test(s, "transposed products in several panels", test_nt_panels);
    CU_add_test(s, "k blocks, row blocks and passes of the packed paths", test_packed_paths);
    CU_add_test(s, "calls left to OpenBLAS, C untouched", test_declines);
    CU_add_test(s, "gemm parameter", test_gemm_param);
    CU_add_test(s, "isa parameter", test_isa_param);
    CU_add_test(s, "bf16_gemm parameter", test_bf16_gemm_param);
    int rc = lt_cunit_run();
    lt_sgemm_scratch_free(&g_scratch);
    return rc;
}
