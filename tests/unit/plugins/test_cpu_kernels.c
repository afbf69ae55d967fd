/* The cpu accelerator plugin, loaded the way the core loads it (dlopen +
 * lt_plugin_entry_v1), checked kernel by kernel against naive references
 * written here, finite differences, and hand-computed optimizer steps. */
#include <CUnit/Basic.h>
#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cunit_run.h"
#include "config/config.h"
#include "common/ctx.h"
#include "lt/accelerator.h"

#define PLUGIN_PATH LT_TEST_PLUGIN_DIR "/liblt-accelerator-cpu.so"

static void *g_dl;
static const lt_accelerator_desc *g_acc;
static const lt_kernels *K;
static lt_ctx g_ctx;
static lt_ctx *C = &g_ctx;

/* f32 then f64 (consecutive enum values). */
#define FOR_EACH_FLOAT_TYPE(t) for (lt_dtype t = LT_F32; t <= LT_F64; t++)

/* ---- helpers ------------------------------------------------------------ */

static void *buf_new(lt_dtype t, int64_t n) {
    return calloc((size_t)(n ? n : 1), lt_dtype_size(t));
}

static void buf_set(lt_dtype t, void *b, int64_t i, double v) {
    if (t == LT_F32)
        ((float *)b)[i] = (float)v;
    else
        ((double *)b)[i] = v;
}

static double buf_get(lt_dtype t, const void *b, int64_t i) {
    return t == LT_F32 ? (double)((const float *)b)[i] : ((const double *)b)[i];
}

static void *buf_from(lt_dtype t, const double *v, int64_t n) {
    void *b = buf_new(t, n);
    for (int64_t i = 0; i < n; i++) buf_set(t, b, i, v[i]);
    return b;
}

static void buf_fill_value(lt_dtype t, void *b, int64_t n, double v) {
    for (int64_t i = 0; i < n; i++) buf_set(t, b, i, v);
}

/* Relative-or-absolute closeness, the tolerance suiting the dtype. */
static double tol_of(lt_dtype t) { return t == LT_F32 ? 2e-5 : 1e-12; }
static bool near(double got, double want, double tol) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabs(got - want) <= tol * (1 + fabs(want));
}

/* One assertion per array; the first mismatch is printed. */
static void check_array(const char *what, lt_dtype t, const void *got, const double *want,
                        int64_t n, double tol) {
    for (int64_t i = 0; i < n; i++) {
        double g = buf_get(t, got, i);
        if (!near(g, want[i], tol)) {
            printf("\n  %s (%s) [%lld]: got %.17g, want %.17g\n", what, lt_dtype_name(t),
                   (long long)i, g, want[i]);
            CU_FAIL(what);
            return;
        }
    }
    CU_PASS(what);
}

static void check_value(const char *what, double got, double want, double tol) {
    if (!near(got, want, tol)) {
        printf("\n  %s: got %.17g, want %.17g\n", what, got, want);
        CU_FAIL(what);
    } else {
        CU_PASS(what);
    }
}

/* Deterministic test inputs in [-1, 1). */
static double test_rand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) * 0x1p-52 - 1.0;
}

static void fill_rand(double *v, int64_t n, uint64_t seed) {
    for (int64_t i = 0; i < n; i++) v[i] = test_rand(&seed);
}

static void expect_sync_ok(void) {
    lt_status s = g_acc->synchronize(C);
    if (s != LT_OK) printf("\n  unexpected kernel error: %s\n", lt_last_error(C));
    CU_ASSERT_EQUAL(s, LT_OK);
}

/* ---- suite setup: load the plugin like the core does ---------------------- */

static int suite_init(void) {
    g_dl = dlopen(PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!g_dl) {
        fprintf(stderr, "cannot load %s: %s\n", PLUGIN_PATH, dlerror());
        return -1;
    }
    lt_plugin_entry_fn entry = (lt_plugin_entry_fn)dlsym(g_dl, LT_PLUGIN_ENTRY_SYMBOL);
    if (!entry) return -1;
    for (const lt_plugin_header *const *h = entry(); *h; h++)
        if ((*h)->kind == LT_KIND_ACCELERATOR && strcmp((*h)->name, "cpu") == 0)
            g_acc = (const lt_accelerator_desc *)*h;
    if (!g_acc) return -1;
    lt_ctx_init(C, LT_KIND_ACCELERATOR, "cpu", &g_acc->hdr, NULL);
    if (g_acc->setup(C, 0) != LT_OK || g_acc->get_kernels(C, &K) != LT_OK) return -1;
    return 0;
}

static int suite_clean(void) {
    if (g_acc) g_acc->teardown(C);
    if (g_dl) dlclose(g_dl);
    return 0;
}

/* ---- descriptor, device hooks, memory --------------------------------------- */

static void test_descriptor(void) {
    const lt_plugin_header *h = &g_acc->hdr;
    CU_ASSERT_EQUAL(h->magic, LT_PLUGIN_MAGIC);
    CU_ASSERT_EQUAL(h->abi_major, LT_ABI_MAJOR);
    CU_ASSERT_EQUAL(h->struct_size, sizeof(lt_accelerator_desc));
    CU_ASSERT_PTR_NULL(h->base);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h->params);
    CU_ASSERT_STRING_EQUAL(h->params[0].name, "num_threads");
    CU_ASSERT_EQUAL(h->params[0].type, LT_PARAM_INT);
    CU_ASSERT_STRING_EQUAL(h->params[0].def, "0");
    CU_ASSERT_EQUAL(K->struct_size, sizeof(lt_kernels));
    bool avail = false;
    int count = 0;
    CU_ASSERT_EQUAL(g_acc->is_available(C, &avail), LT_OK);
    CU_ASSERT_TRUE(avail);
    CU_ASSERT_EQUAL(g_acc->device_count(C, &count), LT_OK);
    CU_ASSERT_EQUAL(count, 1);
    /* Every kernel is present: call sites never test for NULL. */
    const void *const *fns = (const void *const *)((const char *)K + offsetof(lt_kernels, gemm));
    size_t nfns = (sizeof(lt_kernels) - offsetof(lt_kernels, gemm)) / sizeof(void *);
    for (size_t i = 0; i < nfns; i++) CU_ASSERT_PTR_NOT_NULL(fns[i]);
}

static void test_setup_rules(void) {
    CU_ASSERT_EQUAL(g_acc->setup(C, 0), LT_ERR_STATE); /* already set up */
    lt_ctx other;
    lt_ctx_init(&other, LT_KIND_ACCELERATOR, "cpu", &g_acc->hdr, NULL);
    CU_ASSERT_EQUAL(g_acc->setup(&other, -1), LT_ERR_INVALID);
    CU_ASSERT_EQUAL(g_acc->setup(&other, 0), LT_OK);
    CU_ASSERT_EQUAL(g_acc->teardown(&other), LT_OK);
    CU_ASSERT_PTR_NULL(lt_ctx_state(&other));
}

/* num_threads > 0 reaches OpenBLAS (found through the plugin's own handle,
 * which searches its dependencies). */
static void test_num_threads_param(void) {
    int (*get_threads)(void) = (int (*)(void))dlsym(g_dl, "openblas_get_num_threads");
    CU_ASSERT_PTR_NOT_NULL_FATAL(get_threads);
    int before = get_threads();
    lt_config *cfg = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
    char err[256] = "";
    lt_config_declare(cfg, "accelerator.cpu", "num_threads", LT_PARAM_INT, "0", "threads");
    CU_ASSERT_EQUAL(lt_config_set(cfg, "accelerator.cpu", "num_threads", "1", LT_SRC_FLAG,
                                  "--set", err, sizeof err),
                    LT_OK);
    lt_ctx other;
    lt_ctx_init(&other, LT_KIND_ACCELERATOR, "cpu", &g_acc->hdr, cfg);
    CU_ASSERT_EQUAL(g_acc->setup(&other, 0), LT_OK);
    CU_ASSERT_EQUAL(get_threads(), 1);
    g_acc->teardown(&other);
    lt_config_free(cfg);
    void (*set_threads)(int) = (void (*)(int))dlsym(g_dl, "openblas_set_num_threads");
    if (set_threads) set_threads(before);
}

static void test_memory(void) {
    lt_memory_stats s0, s;
    CU_ASSERT_EQUAL_FATAL(g_acc->memory_stats(C, &s0), LT_OK);
    void *a = NULL, *b = NULL, *h = NULL;
    CU_ASSERT_EQUAL_FATAL(g_acc->alloc(C, 1000, &a), LT_OK);
    CU_ASSERT_EQUAL_FATAL(g_acc->alloc(C, 3001, &b), LT_OK);
    CU_ASSERT_EQUAL((uintptr_t)a % 64, 0);
    CU_ASSERT_EQUAL((uintptr_t)b % 64, 0);
    memset(a, 1, 1000); /* the whole block is usable */
    memset(b, 2, 3001);
    g_acc->memory_stats(C, &s);
    CU_ASSERT_EQUAL(s.allocated_bytes - s0.allocated_bytes, 4001);
    CU_ASSERT(s.peak_bytes >= s0.allocated_bytes + 4001);
    CU_ASSERT(s.total_bytes > 0);
    g_acc->free(C, a);
    g_acc->memory_stats(C, &s);
    CU_ASSERT_EQUAL(s.allocated_bytes - s0.allocated_bytes, 3001);
    CU_ASSERT(s.peak_bytes >= s0.allocated_bytes + 4001); /* the high-water mark stays */
    /* Host memory is aligned too and is not device memory. */
    CU_ASSERT_EQUAL_FATAL(g_acc->alloc_host(C, 100, &h), LT_OK);
    CU_ASSERT_EQUAL((uintptr_t)h % 64, 0);
    memset(h, 7, 100);
    CU_ASSERT_EQUAL(g_acc->copy(C, b, h, 100, LT_COPY_H2D), LT_OK);
    CU_ASSERT_EQUAL(((unsigned char *)b)[99], 7);
    CU_ASSERT_EQUAL(((unsigned char *)b)[100], 2);
    CU_ASSERT_EQUAL(g_acc->copy(C, b, h, 1, (lt_copy_dir)9), LT_ERR_INVALID);
    g_acc->memory_stats(C, &s);
    CU_ASSERT_EQUAL(s.allocated_bytes - s0.allocated_bytes, 3001);
    g_acc->free_host(C, h);
    g_acc->free(C, b);
    g_acc->free(C, NULL);
    g_acc->memory_stats(C, &s);
    CU_ASSERT_EQUAL(s.allocated_bytes, s0.allocated_bytes);
    void *z = NULL; /* a zero-byte allocation is a valid, freeable pointer */
    CU_ASSERT_EQUAL(g_acc->alloc(C, 0, &z), LT_OK);
    CU_ASSERT_PTR_NOT_NULL(z);
    g_acc->free(C, z);
}

/* ---- gemm -------------------------------------------------------------------- */

/* C = alpha op(A) op(B) + beta C on row-major storage with leading dims. */
static void gemm_ref(bool ta, bool tb, int m, int n, int k, double alpha, const double *a,
                     int lda, const double *b, int ldb, double beta, double *c, int ldc) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++)
                s += (ta ? a[p * lda + i] : a[i * lda + p]) *
                     (tb ? b[j * ldb + p] : b[p * ldb + j]);
            c[i * ldc + j] = alpha * s + (beta == 0 ? 0 : beta * c[i * ldc + j]);
        }
}

static void gemm_case(lt_dtype t, bool ta, bool tb, int m, int n, int k, double beta) {
    int arows = ta ? k : m, acols = ta ? m : k, brows = tb ? n : k, bcols = tb ? k : n;
    int lda = acols + 3, ldb = bcols + 2, ldc = n + 1;
    double *a = malloc(sizeof(double) * arows * lda), *b = malloc(sizeof(double) * brows * ldb);
    double *c = malloc(sizeof(double) * m * ldc);
    fill_rand(a, (int64_t)arows * lda, 1);
    fill_rand(b, (int64_t)brows * ldb, 2);
    fill_rand(c, (int64_t)m * ldc, 3);
    void *da = buf_from(t, a, (int64_t)arows * lda), *db = buf_from(t, b, (int64_t)brows * ldb);
    void *dc = buf_from(t, c, (int64_t)m * ldc);
    if (beta == 0) /* beta 0 must ignore whatever C held, NaN included */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) buf_set(t, dc, i * ldc + j, NAN);
    K->gemm(C, t, ta, tb, m, n, k, 1.5, da, lda, db, ldb, beta, dc, ldc);
    expect_sync_ok();
    gemm_ref(ta, tb, m, n, k, 1.5, a, lda, b, ldb, beta, c, ldc);
    char what[64];
    snprintf(what, sizeof what, "gemm ta=%d tb=%d %dx%dx%d beta=%g", ta, tb, m, n, k, beta);
    /* Padding columns (j >= n) are the untouched originals in both. */
    check_array(what, t, dc, c, (int64_t)m * ldc, (t == LT_F32 ? 1e-5 : 1e-12) * (k + 1));
    free(a), free(b), free(c), free(da), free(db), free(dc);
}

static void test_gemm(void) {
    FOR_EACH_FLOAT_TYPE(t) {
        for (int tr = 0; tr < 4; tr++) {
            gemm_case(t, tr & 1, tr & 2, 7, 5, 9, 0.5);
            gemm_case(t, tr & 1, tr & 2, 7, 5, 9, 0.0);
            gemm_case(t, tr & 1, tr & 2, 33, 70, 65, 1.0);
        }
        gemm_case(t, false, false, 3, 4, 0, 0.5); /* k = 0: C = beta C */
        /* one output column over a contiguous row of B: dot products (gemv.c) */
        gemm_case(t, false, true, 7, 1, 9, 0.0);
        gemm_case(t, false, true, 33, 1, 70, 0.5);
    }
}

static void test_gemm_bad_args(void) {
    float a[4] = {0}, b[4] = {0}, c[4] = {0};
    K->gemm(C, LT_F32, false, false, 2, 2, 2, 1, a, 1 /* < k */, b, 2, 0, c, 2);
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(C), "lda=1"));
    expect_sync_ok(); /* reported once */
}

/* ---- element-wise ------------------------------------------------------------- */

static void test_fill_axpby(void) {
    FOR_EACH_FLOAT_TYPE(t) {
        enum { N = 37 };
        double x[N], y[N], want[N];
        fill_rand(x, N, 4);
        fill_rand(y, N, 5);
        void *dx = buf_from(t, x, N), *dy = buf_from(t, y, N);
        K->axpby(C, t, N, 2.0, dx, -0.5, dy);
        for (int i = 0; i < N; i++) want[i] = 2.0 * x[i] - 0.5 * y[i];
        check_array("axpby", t, dy, want, N, tol_of(t));
        buf_fill_value(t, dy, N, NAN); /* b = 0 overwrites: never reads y */
        K->axpby(C, t, N, 3.0, dx, 0.0, dy);
        for (int i = 0; i < N; i++) want[i] = 3.0 * x[i];
        check_array("axpby b=0", t, dy, want, N, tol_of(t));
        K->fill(C, t, dy, N, -1.25);
        for (int i = 0; i < N; i++) want[i] = -1.25;
        check_array("fill", t, dy, want, N, 0);
        expect_sync_ok();
        free(dx), free(dy);
    }
}

static void test_bias_and_sum_rows(void) {
    FOR_EACH_FLOAT_TYPE(t) {
        enum { R = 5, COLS = 13 };
        double y[R * COLS], bias[COLS], out0[COLS], want[R * COLS];
        fill_rand(y, R * COLS, 6);
        fill_rand(bias, COLS, 7);
        fill_rand(out0, COLS, 8);
        void *dy = buf_from(t, y, R * COLS), *db = buf_from(t, bias, COLS);
        K->add_bias(C, t, dy, db, R, COLS);
        for (int r = 0; r < R; r++)
            for (int c = 0; c < COLS; c++) want[r * COLS + c] = y[r * COLS + c] + bias[c];
        check_array("add_bias", t, dy, want, R * COLS, tol_of(t));

        void *dout = buf_from(t, out0, COLS);
        K->sum_rows(C, t, dout, dy, R, COLS, 2.0);
        double sums[COLS];
        for (int c = 0; c < COLS; c++) {
            sums[c] = 0;
            for (int r = 0; r < R; r++) sums[c] += want[r * COLS + c];
        }
        double w2[COLS];
        for (int c = 0; c < COLS; c++) w2[c] = 2.0 * out0[c] + sums[c];
        check_array("sum_rows beta=2", t, dout, w2, COLS, tol_of(t));
        buf_fill_value(t, dout, COLS, NAN);
        K->sum_rows(C, t, dout, dy, R, COLS, 0.0);
        check_array("sum_rows beta=0", t, dout, sums, COLS, tol_of(t));
        expect_sync_ok();
        free(dy), free(db), free(dout);
    }
}

static double act_ref(lt_act f, double x) {
    switch (f) {
    case LT_ACT_RELU: return x < 0 ? 0 : x;
    case LT_ACT_TANH: return tanh(x);
    default: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    }
}

static void test_act_fwd(void) {
    static const double xs[] = {-3.5, -1.0, -0.25, 0.0, 0.3, 1.0, 2.75, 6.0};
    enum { N = sizeof xs / sizeof xs[0] };
    FOR_EACH_FLOAT_TYPE(t) {
        for (lt_act f = LT_ACT_RELU; f <= LT_ACT_GELU; f++) {
            double want[N];
            for (int i = 0; i < N; i++) want[i] = act_ref(f, xs[i]);
            void *dx = buf_from(t, xs, N), *dy = buf_new(t, N);
            K->act_fwd(C, t, f, dy, dx, N);
            check_array("act_fwd", t, dy, want, N, tol_of(t));
            K->act_fwd(C, t, f, dx, dx, N); /* in place */
            check_array("act_fwd in place", t, dx, want, N, tol_of(t));
            free(dx), free(dy);
        }
        /* GELU is the exact erf form (PyTorch's default), not the tanh
         * approximation, which gives 0.8411919906 at 1. */
        double one = 1.0, g;
        void *d1 = buf_from(t, &one, 1);
        K->act_fwd(C, t, LT_ACT_GELU, d1, d1, 1);
        g = buf_get(t, d1, 0);
        check_value("gelu(1) exact", g, 0.8413447460685429, tol_of(t));
        /* ReLU lets NaN through, so loss scaling sees it. */
        buf_set(t, d1, 0, NAN);
        K->act_fwd(C, t, LT_ACT_RELU, d1, d1, 1);
        CU_ASSERT_TRUE(isnan(buf_get(t, d1, 0)));
        free(d1);
    }
    K->act_fwd(C, LT_F32, (lt_act)99, NULL, NULL, 0);
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_INVALID);
}

/* act_bwd against central differences of act_fwd itself. */
static void act_bwd_case(lt_dtype t, lt_act f) {
    static const double xs[] = {-2.1, -0.7, -0.1, 0.3, 1.2, 2.5, 0.05};
    enum { N = sizeof xs / sizeof xs[0] };
    double h = t == LT_F32 ? 1e-2 : 1e-6, tol = t == LT_F32 ? 2e-3 : 1e-7;
    double xp[N], xm[N], dyv[N], dx0[N], want[N];
    for (int i = 0; i < N; i++) xp[i] = xs[i] + h, xm[i] = xs[i] - h;
    fill_rand(dyv, N, 9);
    fill_rand(dx0, N, 10);
    void *dxp = buf_from(t, xp, N), *dxm = buf_from(t, xm, N), *dX = buf_from(t, xs, N);
    void *fp = buf_new(t, N), *fm = buf_new(t, N), *Y = buf_new(t, N);
    void *dY = buf_from(t, dyv, N), *dX_out = buf_new(t, N);
    K->act_fwd(C, t, f, fp, dxp, N);
    K->act_fwd(C, t, f, fm, dxm, N);
    K->act_fwd(C, t, f, Y, dX, N);
    for (int i = 0; i < N; i++)
        want[i] = dyv[i] * (buf_get(t, fp, i) - buf_get(t, fm, i)) / (2 * h);
    buf_fill_value(t, dX_out, N, NAN); /* beta 0: overwritten, never read */
    K->act_bwd(C, t, f, dX_out, dY, dX, Y, N, 0.0);
    check_array("act_bwd vs finite differences", t, dX_out, want, N, tol);
    for (int i = 0; i < N; i++) buf_set(t, dX_out, i, dx0[i]);
    K->act_bwd(C, t, f, dX_out, dY, dX, Y, N, 0.5);
    for (int i = 0; i < N; i++) want[i] += 0.5 * dx0[i];
    check_array("act_bwd beta=0.5", t, dX_out, want, N, tol);
    expect_sync_ok();
    free(dxp), free(dxm), free(dX), free(fp), free(fm), free(Y), free(dY), free(dX_out);
}

static void test_act_bwd(void) {
    FOR_EACH_FLOAT_TYPE(t) {
        for (lt_act f = LT_ACT_RELU; f <= LT_ACT_GELU; f++) act_bwd_case(t, f);
    }
}

/* ---- dropout -------------------------------------------------------------------- */

static void test_dropout(void) {
    enum { N = 100000 };
    const double p = 0.3;
    FOR_EACH_FLOAT_TYPE(t) {
        void *x = buf_new(t, N), *y = buf_new(t, N);
        uint8_t *mask = malloc(N), *mask2 = malloc(N);
        for (int i = 0; i < N; i++) buf_set(t, x, i, 1.0 + (i % 7));
        K->dropout_fwd(C, t, y, mask, x, N, p, 1234, 77);
        int kept = 0, bad = 0;
        for (int i = 0; i < N; i++) {
            kept += mask[i];
            double want = mask[i] ? (1.0 + (i % 7)) / (1 - p) : 0.0;
            bad += mask[i] > 1 || !near(buf_get(t, y, i), want, tol_of(t));
        }
        CU_ASSERT_EQUAL(bad, 0);
        check_value("dropout keep fraction", (double)kept / N, 1 - p, 0.01);
        /* Same (seed, offset): same mask; split into two calls: still the same. */
        K->dropout_fwd(C, t, y, mask2, x, N, p, 1234, 77);
        CU_ASSERT_EQUAL(memcmp(mask, mask2, N), 0);
        memset(mask2, 9, N);
        K->dropout_fwd(C, t, y, mask2, x, 333, p, 1234, 77);
        K->dropout_fwd(C, t, y, mask2 + 333, x, N - 333, p, 1234, 77 + 333);
        CU_ASSERT_EQUAL(memcmp(mask, mask2, N), 0);
        K->dropout_fwd(C, t, y, mask2, x, N, p, 1235, 77);
        CU_ASSERT_NOT_EQUAL(memcmp(mask, mask2, N), 0);
        K->dropout_fwd(C, t, y, mask2, x, N, p, 1234, 78);
        CU_ASSERT_NOT_EQUAL(memcmp(mask, mask2, N), 0);

        /* Backward: dx = beta dx + dy * mask / (1 - p). */
        void *dx = buf_new(t, N);
        buf_fill_value(t, dx, N, 2.0);
        K->dropout_bwd(C, t, dx, x, mask, N, p, 0.5);
        bad = 0;
        for (int i = 0; i < N; i++)
            bad += !near(buf_get(t, dx, i), 1.0 + (mask[i] ? (1.0 + (i % 7)) / (1 - p) : 0),
                         tol_of(t));
        CU_ASSERT_EQUAL(bad, 0);

        /* p = 0 keeps everything unscaled; p = 1 drops everything. */
        K->dropout_fwd(C, t, y, mask, x, N, 0.0, 5, 0);
        bad = 0;
        for (int i = 0; i < N; i++) bad += !mask[i] || buf_get(t, y, i) != buf_get(t, x, i);
        CU_ASSERT_EQUAL(bad, 0);
        K->dropout_fwd(C, t, y, mask, x, N, 1.0, 5, 0);
        bad = 0;
        for (int i = 0; i < N; i++) bad += mask[i] || buf_get(t, y, i) != 0;
        CU_ASSERT_EQUAL(bad, 0);
        expect_sync_ok();
        K->dropout_fwd(C, t, y, mask, x, N, 1.5, 5, 0);
        CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_INVALID);
        free(x), free(y), free(mask), free(mask2), free(dx);
    }
}

/* The mask does not depend on the dtype. */
static void test_dropout_dtype_independent(void) {
    enum { N = 1001 };
    float xf[N];
    double xd[N];
    float yf[N];
    double yd[N];
    uint8_t mf[N], md[N];
    for (int i = 0; i < N; i++) xf[i] = 1, xd[i] = 1;
    K->dropout_fwd(C, LT_F32, yf, mf, xf, N, 0.5, 42, 1000);
    K->dropout_fwd(C, LT_F64, yd, md, xd, N, 0.5, 42, 1000);
    CU_ASSERT_EQUAL(memcmp(mf, md, N), 0);
    expect_sync_ok();
}

/* ---- losses ------------------------------------------------------------------- */

static double xent_ref(const double *x, const int32_t *labels, int rows, int cols) {
    double total = 0;
    for (int r = 0; r < rows; r++) {
        double mx = x[r * cols], s = 0;
        for (int c = 1; c < cols; c++) mx = fmax(mx, x[r * cols + c]);
        for (int c = 0; c < cols; c++) s += exp(x[r * cols + c] - mx);
        total += log(s) + mx - x[r * cols + labels[r]];
    }
    return total / rows;
}

static double xent_loss(lt_dtype t, const double *x, const int32_t *labels, int rows, int cols) {
    void *dx = buf_from(t, x, rows * cols), *probs = buf_new(t, rows * cols), *loss = buf_new(t, 1);
    K->xent_fwd(C, t, dx, labels, rows, cols, probs, loss);
    double l = buf_get(t, loss, 0);
    free(dx), free(probs), free(loss);
    return l;
}

static void test_xent_fwd(void) {
    enum { R = 4, COLS = 6 };
    int32_t labels[R] = {0, 5, 2, 3};
    double x[R * COLS];
    fill_rand(x, R * COLS, 11);
    FOR_EACH_FLOAT_TYPE(t) {
        check_value("xent_fwd", xent_loss(t, x, labels, R, COLS), xent_ref(x, labels, R, COLS),
                    tol_of(t));
        /* Probabilities are a softmax per row. */
        void *dx = buf_from(t, x, R * COLS), *probs = buf_new(t, R * COLS), *loss = buf_new(t, 1);
        K->xent_fwd(C, t, dx, labels, R, COLS, probs, loss);
        for (int r = 0; r < R; r++) {
            double s = 0;
            for (int c = 0; c < COLS; c++) s += buf_get(t, probs, r * COLS + c);
            check_value("softmax row sum", s, 1.0, tol_of(t));
        }
        free(dx), free(probs), free(loss);
        /* Stable for large logits: no inf/NaN, log 2 for two equal ones. */
        double big[4] = {1000, 0, 1000, 1000};
        int32_t lb[2] = {0, 1};
        check_value("xent large logits", xent_loss(t, big, lb, 2, 2), M_LN2 / 2, tol_of(t));
        double small[2] = {-1000, -1000};
        check_value("xent tiny logits", xent_loss(t, small, lb, 1, 2), M_LN2, tol_of(t));
        /* A label outside [0, cols) is an error, and the loss says NaN. */
        int32_t badl[1] = {7};
        CU_ASSERT_TRUE(isnan(xent_loss(t, small, badl, 1, 2)));
        CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_INVALID);
        CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(C), "label 7"));
    }
}

/* xent_bwd with scale 1/rows is the gradient of the mean loss. */
static void test_xent_bwd(void) {
    enum { R = 3, COLS = 5 };
    int32_t labels[R] = {4, 0, 2};
    double x[R * COLS], want[R * COLS];
    fill_rand(x, R * COLS, 12);
    FOR_EACH_FLOAT_TYPE(t) {
        double h = t == LT_F32 ? 1e-2 : 1e-6, tol = t == LT_F32 ? 2e-3 : 1e-7;
        for (int i = 0; i < R * COLS; i++) {
            double xp[R * COLS], xm[R * COLS];
            memcpy(xp, x, sizeof x);
            memcpy(xm, x, sizeof x);
            xp[i] += h, xm[i] -= h;
            double lp = xent_loss(t, xp, labels, R, COLS), lm = xent_loss(t, xm, labels, R, COLS);
            want[i] = (lp - lm) / (2 * h);
        }
        void *dx = buf_from(t, x, R * COLS), *probs = buf_new(t, R * COLS), *loss = buf_new(t, 1);
        void *dl = buf_new(t, R * COLS);
        K->xent_fwd(C, t, dx, labels, R, COLS, probs, loss);
        K->xent_bwd(C, t, dl, probs, labels, R, COLS, 1.0 / R);
        check_array("xent_bwd vs finite differences", t, dl, want, R * COLS, tol);
        K->xent_bwd(C, t, probs, probs, labels, R, COLS, 1.0 / R); /* in place */
        double exact[R * COLS];
        for (int i = 0; i < R * COLS; i++) exact[i] = buf_get(t, dl, i);
        check_array("xent_bwd in place", t, probs, exact, R * COLS, 0);
        expect_sync_ok();
        free(dx), free(probs), free(loss), free(dl);
    }
}

static void test_mse(void) {
    enum { N = 9 };
    double pred[N], target[N];
    fill_rand(pred, N, 13);
    fill_rand(target, N, 14);
    FOR_EACH_FLOAT_TYPE(t) {
        void *dp = buf_from(t, pred, N), *dt = buf_from(t, target, N), *loss = buf_new(t, 1);
        void *grad = buf_new(t, N);
        K->mse_fwd(C, t, dp, dt, N, loss);
        double want = 0, wg[N];
        for (int i = 0; i < N; i++) want += (pred[i] - target[i]) * (pred[i] - target[i]) / N;
        check_value("mse_fwd", buf_get(t, loss, 0), want, tol_of(t));
        K->mse_bwd(C, t, grad, dp, dt, N, 3.0);
        for (int i = 0; i < N; i++) wg[i] = 3.0 * 2 * (pred[i] - target[i]) / N;
        check_array("mse_bwd", t, grad, wg, N, tol_of(t));
        /* ... and that is the derivative of mse_fwd. */
        double h = 1e-3, fd[N];
        for (int i = 0; i < N; i++) {
            double v = pred[i];
            buf_set(t, dp, i, v + h);
            K->mse_fwd(C, t, dp, dt, N, loss);
            double lp = buf_get(t, loss, 0);
            buf_set(t, dp, i, v - h);
            K->mse_fwd(C, t, dp, dt, N, loss);
            fd[i] = 3.0 * (lp - buf_get(t, loss, 0)) / (2 * h);
            buf_set(t, dp, i, v);
        }
        check_array("mse_bwd vs finite differences", t, grad, fd, N, t == LT_F32 ? 1e-3 : 1e-8);
        expect_sync_ok();
        free(dp), free(dt), free(loss), free(grad);
    }
}

static void test_count_correct(void) {
    double x[4 * 3] = {0.1, 0.9, 0.0, /* 1 */ 2, 2, 1, /* 0: first maximum */
                       -1, -3, -0.5,   /* 2 */ 5, 1, 7 /* 2 */};
    int32_t labels[4] = {1, 0, 1, 2};
    FOR_EACH_FLOAT_TYPE(t) {
        void *dx = buf_from(t, x, 12);
        int64_t hits = -1;
        K->count_correct(C, t, dx, labels, 4, 3, &hits);
        CU_ASSERT_EQUAL(hits, 3);
        free(dx);
    }
    expect_sync_ok();
}

/* ---- optimizers: two steps, values worked out by hand with torch.optim's rules ---- */

static const double P0[2] = {1.0, -2.0};
static const double G[2][2] = {{0.5, 0.25}, {-0.5, 1.0}};

static void sgd_two_steps(lt_dtype t, lt_sgd_args a, const double *want_p, const double *want_buf) {
    void *p = buf_from(t, P0, 2), *g = buf_new(t, 2), *buf = buf_new(t, 2);
    buf_fill_value(t, buf, 2, NAN); /* first step must not read the buffer */
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < 2; i++) buf_set(t, g, i, G[s][i]);
        a.first_step = s == 0;
        K->sgd_step(C, t, p, g, a.momentum != 0 ? buf : NULL, 2, &a);
    }
    check_array("sgd params", t, p, want_p, 2, tol_of(t));
    if (want_buf) check_array("sgd momentum buffer", t, buf, want_buf, 2, tol_of(t));
    expect_sync_ok();
    free(p), free(g), free(buf);
}

static void test_sgd(void) {
    FOR_EACH_FLOAT_TYPE(t) {
        /* Plain: p - lr g1 - lr g2. */
        sgd_two_steps(t, (lt_sgd_args){.lr = 0.1}, (double[]){1.0, -2.125}, NULL);
        /* Momentum 0.9, dampening 0.1, weight decay 0.01. Element 0:
         * d1 = 0.5 + 0.01 = 0.51, buf = 0.51, p = 1 - 0.051 = 0.949;
         * d2 = -0.5 + 0.00949 = -0.49051, buf = 0.459 + 0.9 d2 = 0.017541,
         * p = 0.949 - 0.0017541 = 0.9472459. */
        sgd_two_steps(t,
                      (lt_sgd_args){.lr = 0.1, .momentum = 0.9, .dampening = 0.1,
                                    .weight_decay = 0.01},
                      (double[]){0.9472459, -2.1318793}, (double[]){0.017541, 1.088793});
        /* Nesterov: d1 = 0.51, buf = 0.51, p = 1 - 0.1 (0.51 + 0.459) = 0.9031;
         * d2 = -0.490969, buf = -0.031969, p = 0.9031 + 0.1 * 0.5197411. */
        sgd_two_steps(t,
                      (lt_sgd_args){.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01,
                                    .nesterov = 1},
                      (double[]){0.95507411, -2.24844697}, (double[]){-0.031969, 1.186563});
    }
    float p = 0, g = 0, b = 0;
    K->sgd_step(C, LT_F32, &p, &g, &b, 1,
                &(lt_sgd_args){.lr = 0.1, .momentum = 0.9, .dampening = 0.5, .nesterov = 1});
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_INVALID);
}

static void test_adamw(void) {
    const lt_adamw_args base = {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                .weight_decay = 0.01};
    /* Step 1, element 0: p = 0.9999; m = 0.05, v = 0.00025; bias corrections
     * 0.1 and 0.001: p -= (0.01 / 0.1) * 0.05 / (0.5 + 1e-8) -> 0.9899.
     * Step 2 likewise gives the values below. */
    const double want_p[2] = {0.9903273259789274, -2.0184427843844914};
    const double want_m[2] = {-0.005, 0.1225}, want_v[2] = {0.00049975, 0.0010624375};
    FOR_EACH_FLOAT_TYPE(t) {
        void *p = buf_from(t, P0, 2), *g = buf_new(t, 2), *m = buf_new(t, 2), *v = buf_new(t, 2);
        for (int s = 0; s < 2; s++) {
            for (int i = 0; i < 2; i++) buf_set(t, g, i, G[s][i]);
            lt_adamw_args a = base;
            a.step = s + 1;
            K->adamw_step(C, t, p, g, m, v, 2, &a);
        }
        check_array("adamw params", t, p, want_p, 2, tol_of(t));
        check_array("adamw m", t, m, want_m, 2, tol_of(t));
        check_array("adamw v", t, v, want_v, 2, tol_of(t));
        expect_sync_ok();
        free(p), free(g), free(m), free(v);
    }
    lt_adamw_args a = base; /* step counts from 1 */
    float x = 0;
    K->adamw_step(C, LT_F32, &x, &x, &x, &x, 1, &a);
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_INVALID);
}

/* ---- casts ------------------------------------------------------------------------ */

static uint16_t to16(lt_dtype dst, lt_dtype src, double v) {
    float f = (float)v;
    uint16_t out = 0xDEAD;
    K->cast(C, dst, &out, src, src == LT_F32 ? (const void *)&f : (const void *)&v, 1);
    return out;
}

static void test_cast_known_values(void) {
    const lt_dtype srcs[] = {LT_F32, LT_F64};
    for (int s = 0; s < 2; s++) {
        lt_dtype st = srcs[s];
        /* bf16: 8 significant bits. */
        CU_ASSERT_EQUAL(to16(LT_BF16, st, 1.0), 0x3F80);
        CU_ASSERT_EQUAL(to16(LT_BF16, st, -2.0), 0xC000);
        CU_ASSERT_EQUAL(to16(LT_BF16, st, 1 + 0x1p-8), 0x3F80);      /* tie -> even */
        CU_ASSERT_EQUAL(to16(LT_BF16, st, 1 + 3 * 0x1p-8), 0x3F82);  /* tie -> even (up) */
        CU_ASSERT_EQUAL(to16(LT_BF16, st, 1 + 0x1p-8 + 0x1p-20), 0x3F81); /* above tie */
        CU_ASSERT_EQUAL(to16(LT_BF16, st, INFINITY), 0x7F80);
        CU_ASSERT_EQUAL(to16(LT_BF16, st, -INFINITY), 0xFF80);
        CU_ASSERT_EQUAL(to16(LT_BF16, st, FLT_MAX), 0x7F80);        /* rounds past the max */
        CU_ASSERT_EQUAL(to16(LT_BF16, st, 0x1p-133), 0x0001);       /* smallest subnormal */
        uint16_t nb = to16(LT_BF16, st, NAN);
        CU_ASSERT((nb & 0x7F80) == 0x7F80 && (nb & 0x7F) != 0);
        /* f16: 11 significant bits, max 65504. */
        CU_ASSERT_EQUAL(to16(LT_F16, st, 1.0), 0x3C00);
        CU_ASSERT_EQUAL(to16(LT_F16, st, -2.0), 0xC000);
        CU_ASSERT_EQUAL(to16(LT_F16, st, 0.1), 0x2E66);
        CU_ASSERT_EQUAL(to16(LT_F16, st, 1 + 0x1p-11), 0x3C00);     /* tie -> even */
        CU_ASSERT_EQUAL(to16(LT_F16, st, 1 + 3 * 0x1p-11), 0x3C02);
        CU_ASSERT_EQUAL(to16(LT_F16, st, 65504), 0x7BFF);
        CU_ASSERT_EQUAL(to16(LT_F16, st, 65519), 0x7BFF);
        CU_ASSERT_EQUAL(to16(LT_F16, st, 65520), 0x7C00);           /* overflow -> inf */
        CU_ASSERT_EQUAL(to16(LT_F16, st, 1e6), 0x7C00);
        CU_ASSERT_EQUAL(to16(LT_F16, st, -INFINITY), 0xFC00);
        CU_ASSERT_EQUAL(to16(LT_F16, st, 0x1p-14), 0x0400);         /* smallest normal */
        CU_ASSERT_EQUAL(to16(LT_F16, st, 0x1p-24), 0x0001);         /* smallest subnormal */
        CU_ASSERT_EQUAL(to16(LT_F16, st, 0x1p-25), 0x0000);         /* tie -> even (zero) */
        CU_ASSERT_EQUAL(to16(LT_F16, st, 1.5 * 0x1p-25), 0x0001);
        CU_ASSERT_EQUAL(to16(LT_F16, st, 3 * 0x1p-25), 0x0002);     /* tie -> even */
        CU_ASSERT_EQUAL(to16(LT_F16, st, -0.0), 0x8000);
        uint16_t nh = to16(LT_F16, st, NAN);
        CU_ASSERT((nh & 0x7C00) == 0x7C00 && (nh & 0x3FF) != 0);
    }
    /* From f64 the result is rounded once: 1 + 2^-8 + 2^-30 is above the tie,
     * though rounding to f32 first would land on it and then go to even. */
    CU_ASSERT_EQUAL(to16(LT_BF16, LT_F64, 1 + 0x1p-8 + 0x1p-30), 0x3F81);
    CU_ASSERT_EQUAL(to16(LT_F16, LT_F64, 1 + 0x1p-11 + 0x1p-40), 0x3C01);
    CU_ASSERT_EQUAL(to16(LT_BF16, LT_F64, 1e300), 0x7F80);
    CU_ASSERT_EQUAL(to16(LT_F16, LT_F64, -1e300), 0xFC00);
    CU_ASSERT_EQUAL(to16(LT_BF16, LT_F64, 1e-300), 0x0000);
    expect_sync_ok();
}

/* Every 16-bit pattern widens exactly and narrows back to itself (NaNs stay
 * NaN); f16 <-> bf16 goes through the exact f32 value. */
static void test_cast_roundtrip(void) {
    enum { N = 65536 };
    uint16_t *h = malloc(N * 2), *back = malloc(N * 2);
    float *f = malloc(N * 4);
    double *d = malloc(N * 8);
    for (int i = 0; i < N; i++) h[i] = (uint16_t)i;
    const lt_dtype halves[] = {LT_F16, LT_BF16};
    for (int k = 0; k < 2; k++) {
        lt_dtype ht = halves[k];
        uint16_t exp_mask = ht == LT_F16 ? 0x7C00 : 0x7F80;
        K->cast(C, LT_F32, f, ht, h, N);
        K->cast(C, LT_F64, d, ht, h, N);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            bool nan_in = (h[i] & exp_mask) == exp_mask && (h[i] & ~exp_mask & 0x7FFF);
            bad += nan_in ? !isnan(f[i]) : (double)f[i] != d[i];
        }
        CU_ASSERT_EQUAL(bad, 0);
        lt_dtype wides[] = {LT_F32, LT_F64};
        for (int w = 0; w < 2; w++) {
            K->cast(C, ht, back, wides[w], w ? (void *)d : (void *)f, N);
            bad = 0;
            for (int i = 0; i < N; i++) {
                bool nan_in = (h[i] & exp_mask) == exp_mask && (h[i] & ~exp_mask & 0x7FFF);
                bool nan_out = (back[i] & exp_mask) == exp_mask && (back[i] & ~exp_mask & 0x7FFF);
                bad += nan_in ? !nan_out : back[i] != h[i];
            }
            CU_ASSERT_EQUAL(bad, 0);
        }
    }
    /* Known values for the two 16-bit formats and the two wide ones. */
    uint16_t one_h = 0x3C00, one_b = 0, third_b = 0x3EAB, third_h = 0;
    K->cast(C, LT_BF16, &one_b, LT_F16, &one_h, 1);
    CU_ASSERT_EQUAL(one_b, 0x3F80);
    K->cast(C, LT_F16, &third_h, LT_BF16, &third_b, 1); /* 0.333984375 is exact in f16 */
    CU_ASSERT_EQUAL(third_h, 0x3558);
    float ff[3] = {1.5f, -0.1f, 3e38f};
    double dd[3], want_d[3] = {1.5, (double)-0.1f, (double)3e38f};
    K->cast(C, LT_F64, dd, LT_F32, ff, 3);
    check_array("cast f32->f64", LT_F64, dd, want_d, 3, 0);
    double d2[2] = {0.1, 1e300};
    float f2[2];
    K->cast(C, LT_F32, f2, LT_F64, d2, 2);
    CU_ASSERT_EQUAL(f2[0], 0.1f);
    CU_ASSERT_TRUE(isinf(f2[1]));
    float same[2] = {0};
    K->cast(C, LT_F32, same, LT_F32, ff, 2);
    CU_ASSERT_EQUAL(memcmp(same, ff, sizeof same), 0);
    expect_sync_ok();
    K->cast(C, LT_I32, same, LT_F32, ff, 2);
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_UNSUPPORTED);
    free(h), free(back), free(f), free(d);
}

/* ---- reductions ------------------------------------------------------------- */

static void test_sumsq_all_finite(void) {
    enum { N = 10007 };
    double v[N], want = 0;
    fill_rand(v, N, 15);
    for (int i = 0; i < N; i++) want += v[i] * v[i];
    FOR_EACH_FLOAT_TYPE(t) {
        void *x = buf_from(t, v, N);
        double got = -1, w = 0;
        for (int i = 0; i < N; i++) w += buf_get(t, x, i) * buf_get(t, x, i);
        K->sumsq(C, t, x, N, &got);
        check_value("sumsq", got, w, 1e-12); /* summed in double whatever the dtype */
        check_value("sumsq vs exact", got, want, tol_of(t));
        bool ok = false;
        K->all_finite(C, t, x, N, &ok);
        CU_ASSERT_TRUE(ok);
        buf_set(t, x, N - 3, NAN);
        K->all_finite(C, t, x, N, &ok);
        CU_ASSERT_FALSE(ok);
        buf_set(t, x, N - 3, 0);
        buf_set(t, x, 5000, -INFINITY);
        K->all_finite(C, t, x, N, &ok);
        CU_ASSERT_FALSE(ok);
        K->all_finite(C, t, x, 5000, &ok); /* the inf is just past the range */
        CU_ASSERT_TRUE(ok);
        free(x);
    }
    /* 16-bit formats, for mixed precision's unscale-and-check. */
    uint16_t h[5] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x0000}; /* f16: 1, -2, 65504, tiny, 0 */
    uint16_t b[3] = {0x3F80, 0x4000, 0xFF80};                 /* bf16: 1, 2, -inf */
    bool ok = false;
    double s = 0;
    K->all_finite(C, LT_F16, h, 5, &ok);
    CU_ASSERT_TRUE(ok);
    K->sumsq(C, LT_F16, h, 2, &s);
    check_value("sumsq f16", s, 5.0, 0);
    h[4] = 0x7E00; /* NaN */
    K->all_finite(C, LT_F16, h, 5, &ok);
    CU_ASSERT_FALSE(ok);
    K->all_finite(C, LT_BF16, b, 2, &ok);
    CU_ASSERT_TRUE(ok);
    K->sumsq(C, LT_BF16, b, 2, &s);
    check_value("sumsq bf16", s, 5.0, 0);
    K->all_finite(C, LT_BF16, b, 3, &ok);
    CU_ASSERT_FALSE(ok);
    expect_sync_ok();
}

/* ---- random numbers ------------------------------------------------------------- */

static void moments(lt_dtype t, const void *x, int64_t n, double *mean, double *sd) {
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) s += buf_get(t, x, i);
    *mean = s / n;
    for (int64_t i = 0; i < n; i++) s2 += pow(buf_get(t, x, i) - *mean, 2);
    *sd = sqrt(s2 / (n - 1));
}

static void test_rand_fill(void) {
    enum { N = 200001 }; /* odd, so normal's last pair is split */
    FOR_EACH_FLOAT_TYPE(t) {
        void *x = buf_new(t, N), *y = buf_new(t, N);
        double mean, sd;
        K->rand_fill(C, t, x, N, LT_RAND_UNIFORM, 2.0, 5.0, 99, 0);
        moments(t, x, N, &mean, &sd);
        check_value("uniform mean", mean, 3.5, 0.005);
        check_value("uniform sd", sd, 3.0 / sqrt(12.0), 0.01);
        int out = 0;
        for (int i = 0; i < N; i++) out += !(buf_get(t, x, i) >= 2.0 && buf_get(t, x, i) < 5.0);
        CU_ASSERT_EQUAL(out, 0);

        const lt_rand_dist dists[] = {LT_RAND_UNIFORM, LT_RAND_NORMAL};
        for (int d = 0; d < 2; d++) {
            lt_rand_dist dist = dists[d];
            K->rand_fill(C, t, x, N, dist, 1.0, 2.0, 7, 101);
            if (dist == LT_RAND_NORMAL) {
                moments(t, x, N, &mean, &sd);
                check_value("normal mean", mean, 1.0, 0.01);
                check_value("normal sd", sd, 2.0, 0.01);
            }
            /* Same (seed, offset): same numbers, however the range is split
             * (odd split points cut a Box-Muller pair). */
            size_t es = lt_dtype_size(t);
            K->rand_fill(C, t, y, 1, dist, 1.0, 2.0, 7, 101);
            K->rand_fill(C, t, (char *)y + es, 4444, dist, 1.0, 2.0, 7, 102);
            K->rand_fill(C, t, (char *)y + 4445 * es, N - 4445, dist, 1.0, 2.0, 7, 101 + 4445);
            CU_ASSERT_EQUAL(memcmp(x, y, N * es), 0);
            K->rand_fill(C, t, y, N, dist, 1.0, 2.0, 8, 101);
            CU_ASSERT_NOT_EQUAL(memcmp(x, y, N * es), 0);
        }
        expect_sync_ok();
        free(x), free(y);
    }
    /* f32 values are the f64 values rounded. */
    float f[64];
    double d[64];
    K->rand_fill(C, LT_F32, f, 64, LT_RAND_NORMAL, 0, 1, 3, 17);
    K->rand_fill(C, LT_F64, d, 64, LT_RAND_NORMAL, 0, 1, 3, 17);
    int bad = 0;
    for (int i = 0; i < 64; i++) bad += f[i] != (float)d[i];
    CU_ASSERT_EQUAL(bad, 0);
    K->rand_fill(C, LT_F32, f, 4, LT_RAND_UNIFORM, 1, 0, 3, 0);
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_INVALID);
}

/* ---- convolution lowering and pooling ------------------------------------------ */

static lt_conv_geom geom(int64_t c, int64_t h, int64_t w, int64_t k, int64_t st, int64_t pad) {
    lt_conv_geom g = {c, h, w, k, k, st, st, pad, pad, 0, 0};
    g.oh = (h + 2 * pad - k) / st + 1;
    g.ow = (w + 2 * pad - k) / st + 1;
    return g;
}

/* im2col against its definition, and col2im as its adjoint:
 * <im2col(x), c> = <x, col2im(c)> for random x and c, both dtypes. */
static void test_im2col_col2im(void) {
    const lt_conv_geom gs[] = {geom(2, 5, 6, 3, 1, 1), geom(3, 7, 6, 2, 2, 0),
                               geom(1, 5, 5, 3, 2, 2), geom(2, 4, 4, 1, 1, 0),
                               geom(1, 6, 9, 4, 3, 1)};
    FOR_EACH_FLOAT_TYPE(t) {
        for (size_t q = 0; q < sizeof gs / sizeof *gs; q++) {
            const lt_conv_geom *g = &gs[q];
            int64_t nx = g->c * g->h * g->w, rows = g->c * g->kh * g->kw, nc = rows * g->oh * g->ow;
            double *x = malloc(sizeof(double) * nx), *cv = malloc(sizeof(double) * nc);
            double *want = malloc(sizeof(double) * nc);
            fill_rand(x, nx, 7 + q);
            fill_rand(cv, nc, 9 + q);
            for (int64_t c = 0; c < g->c; c++)
                for (int64_t i = 0; i < g->kh; i++)
                    for (int64_t j = 0; j < g->kw; j++)
                        for (int64_t oy = 0; oy < g->oh; oy++)
                            for (int64_t ox = 0; ox < g->ow; ox++) {
                                int64_t iy = oy * g->sh - g->ph + i, ix = ox * g->sw - g->pw + j;
                                bool in = iy >= 0 && iy < g->h && ix >= 0 && ix < g->w;
                                want[((c * g->kh + i) * g->kw + j) * g->oh * g->ow + oy * g->ow + ox] =
                                    in ? x[(c * g->h + iy) * g->w + ix] : 0.0;
                            }
            void *dx = buf_from(t, x, nx), *dcol = buf_new(t, nc), *dc = buf_from(t, cv, nc);
            K->im2col(C, t, dx, g, dcol);
            expect_sync_ok();
            char what[96];
            snprintf(what, sizeof what, "im2col geometry %zu", q);
            check_array(what, t, dcol, want, nc, t == LT_F32 ? 1e-7 : 0);
            /* adjoint: <col, c> == <x, col2im(c)>; col2im with beta 1 adds to x's old values */
            double lhs = 0, rhs = 0;
            for (int64_t i = 0; i < nc; i++) lhs += want[i] * cv[i];
            void *back = buf_from(t, x, nx);
            K->col2im(C, t, dc, g, back, 1.0);
            expect_sync_ok();
            for (int64_t i = 0; i < nx; i++) rhs += x[i] * (buf_get(t, back, i) - x[i]);
            snprintf(what, sizeof what, "col2im adjoint, geometry %zu", q);
            check_value(what, rhs, lhs, t == LT_F32 ? 1e-4 : 1e-12);
            free(x), free(cv), free(want), free(dx), free(dcol), free(dc), free(back);
        }
    }
}

/* Max pooling against a naive window scan; backward routes each dy to its
 * window's first maximum (ties broken by the earlier element), adding where
 * overlapping windows share it; NaN wins a window. */
static void test_max_pool(void) {
    const lt_conv_geom gs[] = {geom(3, 4, 6, 2, 2, 0), geom(2, 5, 4, 3, 1, 0),
                               geom(2, 7, 8, 2, 3, 0), geom(1, 5, 5, 3, 2, 1)};
    FOR_EACH_FLOAT_TYPE(t) {
        for (size_t q = 0; q < sizeof gs / sizeof *gs; q++) {
            const lt_conv_geom *g = &gs[q];
            int64_t nx = g->c * g->h * g->w, ny = g->c * g->oh * g->ow;
            double *x = malloc(sizeof(double) * nx), *dy = malloc(sizeof(double) * ny);
            double *want_y = malloc(sizeof(double) * ny), *want_dx = calloc((size_t)nx, sizeof(double));
            fill_rand(x, nx, 3 + q);
            for (int64_t i = 0; i < nx; i += 5) x[i] = x[(i + 1) % nx]; /* some ties */
            fill_rand(dy, ny, 4 + q);
            for (int64_t p = 0; p < g->c; p++)
                for (int64_t oy = 0; oy < g->oh; oy++)
                    for (int64_t ox = 0; ox < g->ow; ox++) {
                        int64_t best = -1;
                        for (int64_t i = 0; i < g->kh; i++)
                            for (int64_t j = 0; j < g->kw; j++) {
                                int64_t iy = oy * g->sh - g->ph + i, ix = ox * g->sw - g->pw + j;
                                if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w) continue;
                                int64_t e = p * g->h * g->w + iy * g->w + ix;
                                if (best < 0 || x[e] > x[best]) best = e;
                            }
                        int64_t o = (p * g->oh + oy) * g->ow + ox;
                        want_y[o] = x[best];
                        want_dx[best] += dy[o];
                    }
            void *dxin = buf_from(t, x, nx), *y = buf_new(t, ny), *ddy = buf_from(t, dy, ny);
            void *dx = buf_new(t, nx);
            buf_fill_value(t, dx, nx, NAN); /* beta 0 must not read it */
            int32_t *arg = calloc((size_t)ny, sizeof(int32_t));
            K->max_pool_fwd(C, t, dxin, g, y, arg);
            K->max_pool_bwd(C, t, ddy, arg, g, dx, 0.0);
            expect_sync_ok();
            char what[96];
            snprintf(what, sizeof what, "max_pool_fwd geometry %zu", q);
            check_array(what, t, y, want_y, ny, t == LT_F32 ? 1e-7 : 0);
            snprintf(what, sizeof what, "max_pool_bwd geometry %zu", q);
            check_array(what, t, dx, want_dx, nx, tol_of(t));
            free(x), free(dy), free(want_y), free(want_dx), free(dxin), free(y), free(ddy), free(dx);
            free(arg);
        }
        /* NaN wins its window (PyTorch propagates it) */
        lt_conv_geom g = geom(1, 2, 2, 2, 2, 0);
        double xv[4] = {1, NAN, 3, 2}, yv;
        void *dxin = buf_from(t, xv, 4), *y = buf_new(t, 1);
        int32_t arg;
        K->max_pool_fwd(C, t, dxin, &g, y, &arg);
        yv = buf_get(t, y, 0);
        CU_ASSERT(isnan(yv));
        CU_ASSERT_EQUAL(arg, 1);
        free(dxin), free(y);
        /* Backward ignores an argmax outside its own window. 2x2 windows,
         * stride 2 (disjoint), on a 4x4 plane. Without padding: (1,1) in
         * window 0 (taken), (1,0) for window 1 (window 0's), (2,3) for window
         * 2 (flat index just before its second row), -1. With one of padding
         * (windows start at -1, 1, 3): 0 and 3 in windows 0 and 2 (taken), 3
         * for window 1 (window 2's), 3 for window 3 (its padding column -1 of
         * row 1 wraps to row 0's last element), (2,2) in window 4 (taken),
         * 8 for window 5 (its padding column 4 of row 1 wraps to row 2),
         * -1, 16, and (3,3) in window 8 (taken). */
        const int32_t am0[4] = {5, 4, 11, -1}, am1[9] = {0, 3, 3, 3, 10, 8, -1, 16, 15};
        const int taken0[] = {0}, taken1[] = {0, 2, 4, 8};
        for (int pad = 0; pad <= 1; pad++) {
            lt_conv_geom gp = geom(1, 4, 4, 2, 2, pad);
            const int32_t *am = pad ? am1 : am0;
            int64_t nout = gp.oh * gp.ow;
            double dyv[9], want[16] = {0};
            for (int64_t o = 0; o < nout; o++) dyv[o] = (double)(o + 1);
            for (int q = 0; q < (pad ? 4 : 1); q++) {
                int o = pad ? taken1[q] : taken0[q];
                want[am[o]] += dyv[o];
            }
            void *pdy = buf_from(t, dyv, nout), *pdx = buf_new(t, 16);
            buf_fill_value(t, pdx, 16, NAN);
            K->max_pool_bwd(C, t, pdy, am, &gp, pdx, 0.0);
            expect_sync_ok();
            check_array(pad ? "max_pool_bwd foreign argmax, padded" : "max_pool_bwd foreign argmax",
                        t, pdx, want, 16, 0);
            free(pdy), free(pdx);
        }
        /* The same on a 2 x 10 plane: five windows in a row, which the f32
         * kernel takes four at a time (the last group overlapping the first):
         * (0,1) in window 0 and (1,9) in window 4 are taken; -1, INT32_MIN
         * and window 2's (0,4) for window 3 are not. */
        {
            lt_conv_geom gw = geom(1, 2, 10, 2, 2, 0);
            const int32_t am[5] = {1, -1, INT32_MIN, 4, 19};
            double dyv[5] = {1, 2, 3, 4, 5}, want[20] = {0};
            want[1] = 1, want[19] = 5;
            void *pdy = buf_from(t, dyv, 5), *pdx = buf_new(t, 20);
            buf_fill_value(t, pdx, 20, NAN);
            K->max_pool_bwd(C, t, pdy, am, &gw, pdx, 0.0);
            expect_sync_ok();
            check_array("max_pool_bwd foreign argmax, 5 windows a row", t, pdx, want, 20, 0);
            free(pdy), free(pdx);
        }
    }
    /* geometry that does not add up is an error, not a wild write */
    lt_conv_geom bad = geom(1, 4, 4, 2, 2, 0);
    bad.oh = 3;
    float xs[16] = {0}, ys[9];
    int32_t as[9];
    K->max_pool_fwd(C, LT_F32, xs, &bad, ys, as);
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(C), "max_pool_fwd: geometry"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(C), "oh/ow must be"));
    /* a window taller than the input: integer division would make oh 1 */
    lt_conv_geom tall = {1, 1, 4, 2, 2, 2, 2, 0, 0, 1, 2};
    K->max_pool_fwd(C, LT_F32, xs, &tall, ys, as);
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(C), "kernel is larger than the padded input"));
    K->im2col(C, LT_F32, xs, &tall, ys);
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_INVALID);
}

/* ---- deferred errors ------------------------------------------------------------ */

static void test_unsupported_dtype(void) {
    expect_sync_ok();
    int32_t ib[4] = {0};
    K->gemm(C, LT_I32, false, false, 2, 2, 2, 1, ib, 2, ib, 2, 0, ib, 2);
    K->fill(C, LT_I8, ib, 4, 1.0); /* a second error: the first is the one reported */
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(C), "gemm"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(C), "i32"));
    expect_sync_ok(); /* cleared once reported */
    /* The element-wise kernels take the 16-bit formats too
     * (test_cpu_kernels_lowp.c); an integer dtype is named with the list. */
    K->act_bwd(C, LT_I32, LT_ACT_RELU, ib, ib, ib, ib, 4, 0);
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(C), "act_bwd"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(C), "i32"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(C), "f32, f64, f16 or bf16"));
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("cpu_accelerator", suite_init, suite_clean);
    if (!s) return 1;
    CU_add_test(s, "descriptor and device hooks", test_descriptor);
    CU_add_test(s, "setup rules", test_setup_rules);
    CU_add_test(s, "num_threads parameter", test_num_threads_param);
    CU_add_test(s, "memory and stats", test_memory);
    CU_add_test(s, "gemm, 4 transposes, odd sizes, padded ld", test_gemm);
    CU_add_test(s, "gemm bad leading dimension", test_gemm_bad_args);
    CU_add_test(s, "fill and axpby", test_fill_axpby);
    CU_add_test(s, "add_bias and sum_rows", test_bias_and_sum_rows);
    CU_add_test(s, "activations forward", test_act_fwd);
    CU_add_test(s, "activations backward vs finite differences", test_act_bwd);
    CU_add_test(s, "dropout", test_dropout);
    CU_add_test(s, "dropout mask independent of dtype", test_dropout_dtype_independent);
    CU_add_test(s, "cross-entropy forward", test_xent_fwd);
    CU_add_test(s, "cross-entropy backward vs finite differences", test_xent_bwd);
    CU_add_test(s, "mse", test_mse);
    CU_add_test(s, "count_correct", test_count_correct);
    CU_add_test(s, "sgd two steps", test_sgd);
    CU_add_test(s, "adamw two steps", test_adamw);
    CU_add_test(s, "cast known values", test_cast_known_values);
    CU_add_test(s, "cast round trips", test_cast_roundtrip);
    CU_add_test(s, "sumsq and all_finite", test_sumsq_all_finite);
    CU_add_test(s, "rand_fill", test_rand_fill);
    CU_add_test(s, "im2col against its definition, col2im its adjoint", test_im2col_col2im);
    CU_add_test(s, "max pooling: forward, backward, ties, NaN", test_max_pool);
    CU_add_test(s, "unsupported dtype reported by synchronize", test_unsupported_dtype);
    int rc = lt_cunit_run();
    return rc;
}
