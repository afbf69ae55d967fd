/* Kernel conformance, in the manner of ggml's test-backend-ops: every kernel
 * of lt_kernels (sdk/include/lt/accelerator.h) on every accelerator asked
 * for, every dtype it takes, at edge shapes (0, 1, odd sizes and sizes that
 * are no multiple of a tile or a vector: 7, 17, 33, 65, 257, 1025, 4099;
 * all four transposes and padded leading dimensions for gemm; convolution
 * and pooling geometries with strides and padding), against references in
 * double written here from the words of accelerator.h (never by calling a
 * plugin). Exact where the ABI says exact (cast rounding, quantize_u8
 * bytes, count_correct, max_pool's argmax, all_finite, im2col, fill,
 * clamp, the dropout mask); tolerances otherwise, per dtype, justified in
 * kernel_ops_harness.c. Each output buffer carries guard bytes that must
 * survive the kernel.
 *
 * Usage: test_kernel_ops [--accelerator NAME|all]... [--reference NAME]
 *                        [--kernel NAME] [--dtype f32|f64|f16|bf16] [-v]
 * Without --accelerator: the cpu. The ABI's cross-device equalities
 * (dropout masks and rand_fill values for one (seed, offset), quantize_u8
 * bytes and their decoding) are checked for each accelerator under test
 * against a context of the reference accelerator (--reference, default
 * cpu): a gpu run compares against the cpu; a run without arguments against
 * a second cpu context, so that this code runs on every machine. Exit status 77 (ctest: skipped) when no
 * accelerator asked for is available here, so the gpu test never passes
 * on a machine without a GPU. */
#include <CUnit/Basic.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cunit_run.h"
#include "kernel_ops.h"

static kops_dev *D;      /* the accelerator under test */
static const lt_kernels *KT;
static lt_ctx *X;

#define N_ELEMS(a) ((int)(sizeof(a) / sizeof *(a)))
/* The last size (2^20 + 1, past any grid a GPU launches in one go, so its
 * grid-stride loops wrap) is run on accelerators other than the cpu only. */
static const int64_t SIZES[] = {0, 1, 7, 17, 33, 65, 257, 1025, 4099, 1048577};
#define N_SIZES (D->reference ? N_ELEMS(SIZES) - 1 : N_ELEMS(SIZES))
/* At that size one configuration of each kernel is enough (the references
 * run in double on the host). */
#define BIG(n) ((n) > 65537)

/* ---- host scratch, freed after each case ---------------------------------- */

static void *g_tmp[64];
static int g_ntmp;

static void *tmp_alloc(size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) abort();
    if (g_ntmp == N_ELEMS(g_tmp)) abort();
    g_tmp[g_ntmp++] = p;
    return p;
}
static double *tmp_d(int64_t n) { return tmp_alloc((size_t)n * sizeof(double)); }
static void tmp_free(void) {
    while (g_ntmp) free(g_tmp[--g_ntmp]);
}

/* Ends a case and frees its host scratch. */
static void end_case(void) {
    kops_end(D);
    tmp_free();
}

static double dmax(double a, double b) { return a > b ? a : b; }
static int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

/* A finite garbage value for outputs that beta == 0 overwrites. */
#define GARBAGE 12288.0 /* 3 * 2^12: held exactly by every dtype */

/* ---- gemm --------------------------------------------------------------------- */

static void gemm_case(lt_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                      double beta, int64_t pad, uint64_t seed) {
    int64_t lda = imax((ta ? m : k) + pad, 1), ldb = imax((tb ? k : n) + pad, 1);
    int64_t ldc = imax(n + pad, 1);
    int64_t arows = ta ? k : m, brows = tb ? n : k;
    if (!kops_case(D, K_GEMM, t, "ta=%d tb=%d m=%lld n=%lld k=%lld lda=%lld ldb=%lld ldc=%lld "
                   "alpha=%g beta=%g", ta, tb, (long long)m, (long long)n, (long long)k,
                   (long long)lda, (long long)ldb, (long long)ldc, alpha, beta))
        return;
    kops_rng r = kops_rng_make(seed);
    int64_t na = arows * lda, nb = brows * ldb, nc = m * ldc;
    double *a = tmp_d(na), *b = tmp_d(nb), *c = tmp_d(nc), *got = tmp_d(nc);
    kops_fill_uniform(&r, t, a, na, -1, 1);
    kops_fill_uniform(&r, t, b, nb, -1, 1);
    kops_fill_uniform(&r, t, c, nc, -1, 1);
    if (beta == 0)
        for (int64_t i = 0; i < nc; i++) c[i] = GARBAGE; /* the old C must not matter */
    void *da = kops_up(D, t, a, na), *db = kops_up(D, t, b, nb), *dc = kops_up(D, t, c, nc);
    if (da && db && dc) {
        KT->gemm(X, t, ta, tb, m, n, k, alpha, da, lda, db, ldb, beta, dc, ldc);
        if (kops_sync(D)) {
            kops_down(D, t, dc, nc, got);
            double *ref = tmp_d(m * n), *scale = tmp_d(m * n), *g = tmp_d(m * n);
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double s = 0, sa = 0;
                    for (int64_t p = 0; p < k; p++) {
                        double av = ta ? a[p * lda + i] : a[i * lda + p];
                        double bv = tb ? b[j * ldb + p] : b[p * ldb + j];
                        s += av * bv;
                        sa += fabs(av * bv);
                    }
                    double cv = beta == 0 ? 0 : beta * c[i * ldc + j];
                    ref[i * n + j] = alpha * s + cv;
                    scale[i * n + j] = fabs(alpha) * sa + fabs(cv);
                    g[i * n + j] = got[i * ldc + j];
                }
            kops_close("C", t, g, ref, scale, m * n, kops_tol_sum(t, k + 1));
            /* The columns past n of each row of C (ldc > n) are not C's. */
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = n; j < ldc; j++)
                    if (got[i * ldc + j] != c[i * ldc + j]) {
                        kops_fail("C's padding [%lld, %lld] (ldc %lld) was written: %g, was %g",
                                  (long long)i, (long long)j, (long long)ldc, got[i * ldc + j],
                                  c[i * ldc + j]);
                        i = m;
                        break;
                    }
        }
    }
    end_case();
}

static void test_gemm(void) {
    static const int64_t dims[] = {0, 1, 7, 17, 33};
    static const double ab[][2] = {{1, 0}, {0.5, -1.25}, {-1, 1}};
    static const int64_t big[][3] = {{65, 65, 65},  {257, 33, 17}, {17, 257, 65}, {33, 17, 257},
                                     {1, 257, 257}, {257, 1, 257}, {129, 130, 131},
                                     {32, 1, 784},  {64, 1, 196}}; /* conv bias gradients */
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        uint64_t seed = 1;
        for (int tr = 0; tr < 4; tr++)
            for (int im = 0; im < N_ELEMS(dims); im++)
                for (int in = 0; in < N_ELEMS(dims); in++)
                    for (int ik = 0; ik < N_ELEMS(dims); ik++, seed++)
                        gemm_case(t, tr & 1, tr >> 1, dims[im], dims[in], dims[ik],
                                  ab[seed % 3][0], ab[seed % 3][1], (seed / 3) % 2 ? 3 : 0, seed);
        for (int tr = 0; tr < 4; tr++)
            for (int i = 0; i < N_ELEMS(big); i++, seed++)
                gemm_case(t, tr & 1, tr >> 1, big[i][0], big[i][1], big[i][2], ab[seed % 3][0],
                          ab[seed % 3][1], seed % 2 ? 5 : 0, seed);
        /* alpha 0: C = beta C whatever A and B hold */
        gemm_case(t, false, false, 7, 17, 33, 0, 0.5, 0, 99);
    }
}

/* ---- fill, axpby, clamp, add_bias, sum_rows ------------------------------------ */

/* The f32 kernel rounds a scalar argument to float; a 16-bit kernel stores
 * that value rounded (accelerator.h: what the f32 kernel computes, rounded
 * once). The values used here are not ties, so this is also the scalar
 * rounded once. */
static double scalar_in(lt_dtype t, double v) {
    return t == LT_F64 ? v : kops_round(t, (double)(float)v);
}

static void test_fill(void) {
    static const double vals[] = {0.3, -2.5, -0.0, 65504, 70000, 1e30};
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int si = 0; si < N_SIZES; si++)
            for (int vi = 0; vi < N_ELEMS(vals); vi++) {
                int64_t n = SIZES[si];
                if (BIG(n) && vi > 0) continue;
                if (!kops_case(D, K_FILL, t, "n=%lld v=%g", (long long)n, vals[vi])) continue;
                double *x = tmp_d(n), *want = tmp_d(n);
                for (int64_t i = 0; i < n; i++) x[i] = -1, want[i] = scalar_in(t, vals[vi]);
                void *dx = kops_up(D, t, x, n);
                if (dx) {
                    KT->fill(X, t, dx, n, vals[vi]);
                    if (kops_sync(D)) {
                        kops_down(D, t, dx, n, x);
                        kops_exact("x", x, want, n, true);
                    }
                }
                end_case();
            }
    }
}

static void test_axpby(void) {
    /* (a, b, in place); b == 0 is given a NaN y: the ABI says it is not read */
    static const struct { double a, b; bool in_place; } cfg[] = {
        {1.5, -0.5, false}, {0.75, 0, false}, {2, 1, false}, {-1.25, 0.5, true}, {0.5, 0, true}};
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int si = 0; si < N_SIZES; si++)
            for (int ci = 0; ci < N_ELEMS(cfg); ci++) {
                int64_t n = SIZES[si];
                if (BIG(n) && ci > 0) continue;
                double a = cfg[ci].a, b = cfg[ci].b;
                if (!kops_case(D, K_AXPBY, t, "n=%lld a=%g b=%g%s", (long long)n, a, b,
                               cfg[ci].in_place ? " in place (x == y)" : ""))
                    continue;
                kops_rng r = kops_rng_make(1000 + (uint64_t)(si * 10 + ci));
                double *x = tmp_d(n), *y = tmp_d(n), *ref = tmp_d(n), *sc = tmp_d(n),
                       *got = tmp_d(n);
                kops_fill_uniform(&r, t, x, n, -2, 2);
                kops_fill_uniform(&r, t, y, n, -2, 2);
                if (b == 0 && !cfg[ci].in_place)
                    for (int64_t i = 0; i < n; i++) y[i] = NAN;
                for (int64_t i = 0; i < n; i++) {
                    double xv = cfg[ci].in_place ? y[i] : x[i];
                    double by = b == 0 ? 0 : b * y[i];
                    ref[i] = a * xv + by;
                    sc[i] = fabs(a * xv) + fabs(by);
                }
                void *dy = kops_up(D, t, y, n);
                void *dx = cfg[ci].in_place ? dy : kops_up(D, t, x, n);
                if (dx && dy) {
                    KT->axpby(X, t, n, a, dx, b, dy);
                    if (kops_sync(D)) {
                        kops_down(D, t, dy, n, got);
                        kops_close("y", t, got, ref, sc, n, kops_tol_elem(t));
                    }
                }
                end_case();
            }
    }
}

static void test_clamp(void) {
    static const double bounds[][2] = {{-0.5, 0.75}, {-1e30, 1e30}, {0.3, 0.3}, {-3, -1}};
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int si = 0; si < N_SIZES; si++)
            for (int bi = 0; bi < N_ELEMS(bounds); bi++) {
                int64_t n = SIZES[si];
                if (BIG(n) && bi > 0) continue;
                double lo = bounds[bi][0], hi = bounds[bi][1];
                if (!kops_case(D, K_CLAMP, t, "n=%lld lo=%g hi=%g", (long long)n, lo, hi))
                    continue;
                kops_rng r = kops_rng_make(2000 + (uint64_t)(si * 10 + bi));
                double *x = tmp_d(n), *want = tmp_d(n);
                kops_fill_uniform(&r, t, x, n, -2, 2);
                /* NaN stays NaN; infinities are clamped like numbers */
                if (n > 2) x[1] = NAN, x[n - 1] = INFINITY, x[n / 2] = -INFINITY;
                /* min(max(x, lo), hi) involves no arithmetic: exact, with the
                 * bounds as the f32 kernel sees them (see scalar_in). */
                double l = scalar_in(t, lo), h = scalar_in(t, hi);
                for (int64_t i = 0; i < n; i++)
                    want[i] = isnan(x[i]) ? NAN : x[i] < l ? l : x[i] > h ? h : x[i];
                void *dx = kops_up(D, t, x, n);
                if (dx) {
                    KT->clamp(X, t, dx, n, lo, hi);
                    if (kops_sync(D)) {
                        kops_down(D, t, dx, n, x);
                        kops_exact("x", x, want, n, false);
                    }
                }
                end_case();
            }
    }
}

static const int64_t ROWS[] = {0, 1, 7, 33, 65};
static const int64_t COLS[] = {1, 7, 17, 65, 257, 513, 1025};

static void test_add_bias(void) {
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int ri = 0; ri < N_ELEMS(ROWS); ri++)
            for (int ci = 0; ci < N_ELEMS(COLS); ci++) {
                int64_t rows = ROWS[ri], cols = COLS[ci], n = rows * cols;
                if (!kops_case(D, K_ADD_BIAS, t, "rows=%lld cols=%lld", (long long)rows,
                               (long long)cols))
                    continue;
                kops_rng r = kops_rng_make(3000 + (uint64_t)(ri * 10 + ci));
                double *y = tmp_d(n), *bias = tmp_d(cols), *ref = tmp_d(n), *sc = tmp_d(n);
                kops_fill_uniform(&r, t, y, n, -2, 2);
                kops_fill_uniform(&r, t, bias, cols, -2, 2);
                for (int64_t i = 0; i < n; i++) {
                    ref[i] = y[i] + bias[i % cols];
                    sc[i] = fabs(y[i]) + fabs(bias[i % cols]);
                }
                void *dy = kops_up(D, t, y, n), *db = kops_up(D, t, bias, cols);
                if (dy && db) {
                    KT->add_bias(X, t, dy, db, rows, cols);
                    if (kops_sync(D)) {
                        kops_down(D, t, dy, n, y);
                        kops_close("y", t, y, ref, sc, n, kops_tol_elem(t));
                    }
                }
                end_case();
            }
    }
}

static void test_sum_rows(void) {
    static const int64_t rows_l[] = {0, 1, 7, 33, 257};
    static const double betas[] = {0, 1, 0.3};
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int ri = 0; ri < N_ELEMS(rows_l); ri++)
            for (int ci = 0; ci < N_ELEMS(COLS); ci++)
                for (int bi = 0; bi < N_ELEMS(betas); bi++) {
                    int64_t rows = rows_l[ri], cols = COLS[ci], n = rows * cols;
                    double beta = betas[bi];
                    if (!kops_case(D, K_SUM_ROWS, t, "rows=%lld cols=%lld beta=%g",
                                   (long long)rows, (long long)cols, beta))
                        continue;
                    kops_rng r = kops_rng_make(4000 + (uint64_t)(ri * 100 + ci * 10 + bi));
                    double *x = tmp_d(n), *out = tmp_d(cols), *ref = tmp_d(cols),
                           *sc = tmp_d(cols);
                    kops_fill_uniform(&r, t, x, n, -1, 1);
                    kops_fill_uniform(&r, t, out, cols, -1, 1);
                    if (beta == 0)
                        for (int64_t c = 0; c < cols; c++) out[c] = GARBAGE;
                    for (int64_t c = 0; c < cols; c++) {
                        double s = beta == 0 ? 0 : beta * out[c], a = fabs(s);
                        for (int64_t q = 0; q < rows; q++) s += x[q * cols + c], a += fabs(x[q * cols + c]);
                        ref[c] = s;
                        sc[c] = a;
                    }
                    void *dx = kops_up(D, t, x, n), *dout = kops_up(D, t, out, cols);
                    if (dx && dout) {
                        KT->sum_rows(X, t, dout, dx, rows, cols, beta);
                        if (kops_sync(D)) {
                            kops_down(D, t, dout, cols, out);
                            kops_close("out", t, out, ref, sc, cols, kops_tol_sum(t, rows + 1));
                        }
                    }
                    end_case();
                }
    }
}

/* ---- activations ------------------------------------------------------------------ */

static const char *act_name(lt_act f) {
    return f == LT_ACT_RELU ? "relu" : f == LT_ACT_TANH ? "tanh" : "gelu";
}

/* GELU is the exact one (PyTorch's default): x Phi(x). */
static double gelu(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double gelu_grad(double x) {
    return 0.5 * (1 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
}

/* Inputs: uniform in [-5, 5] and a few far out (saturation); never exactly
 * 0, where ReLU's derivative is a convention the ABI does not fix. */
static void act_inputs(kops_rng *r, lt_dtype t, double *x, int64_t n) {
    kops_fill_uniform(r, t, x, n, -5, 5);
    for (int64_t i = 0; i < n; i++)
        if (x[i] == 0) x[i] = 0.5;
    if (n > 4) x[0] = -20, x[1] = 20, x[2] = kops_round(t, 1e-3), x[3] = kops_round(t, -1e-3);
}

static void test_act_fwd(void) {
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (lt_act f = LT_ACT_RELU; f <= LT_ACT_GELU; f++)
            for (int si = 0; si < N_SIZES; si++) {
                int64_t n = SIZES[si];
                if (!kops_case(D, K_ACT_FWD, t, "%s n=%lld", act_name(f), (long long)n)) continue;
                kops_rng r = kops_rng_make(5000 + (uint64_t)(f * 100 + si));
                double *x = tmp_d(n), *ref = tmp_d(n), *sc = tmp_d(n), *y = tmp_d(n);
                act_inputs(&r, t, x, n);
                for (int64_t i = 0; i < n; i++) {
                    double v = x[i];
                    ref[i] = f == LT_ACT_RELU ? (v < 0 ? 0 : v) : f == LT_ACT_TANH ? tanh(v) : gelu(v);
                    /* tanh is well conditioned (|x tanh'(x) / tanh(x)| <= 1); GELU of a
                     * negative x is a small difference of terms of size |x|. */
                    sc[i] = f == LT_ACT_GELU ? fabs(v) : fabs(ref[i]);
                }
                void *dx = kops_up(D, t, x, n), *dy = kops_alloc(D, (size_t)n * lt_dtype_size(t));
                if (dx && dy) {
                    KT->act_fwd(X, t, f, dy, dx, n);
                    if (kops_sync(D)) {
                        kops_down(D, t, dy, n, y);
                        if (f == LT_ACT_RELU)
                            kops_exact("y", y, ref, n, false); /* a copy or a zero */
                        else
                            kops_close("y", t, y, ref, sc, n, kops_tol_elem(t));
                    }
                }
                end_case();
            }
    }
}

static void test_act_bwd(void) {
    static const double betas[] = {0, 1, 0.3};
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (lt_act f = LT_ACT_RELU; f <= LT_ACT_GELU; f++)
            for (int si = 0; si < N_SIZES; si++)
                for (int bi = 0; bi < N_ELEMS(betas); bi++) {
                    int64_t n = SIZES[si];
                    double beta = betas[bi];
                    if (BIG(n) && bi != 2) continue;
                    if (!kops_case(D, K_ACT_BWD, t, "%s n=%lld beta=%g", act_name(f),
                                   (long long)n, beta))
                        continue;
                    kops_rng r = kops_rng_make(6000 + (uint64_t)(f * 1000 + si * 10 + bi));
                    double *x = tmp_d(n), *y = tmp_d(n), *dy = tmp_d(n), *dx = tmp_d(n),
                           *ref = tmp_d(n), *sc = tmp_d(n);
                    act_inputs(&r, t, x, n);
                    kops_fill_uniform(&r, t, dy, n, -1, 1);
                    kops_fill_uniform(&r, t, dx, n, -1, 1);
                    if (beta == 0)
                        for (int64_t i = 0; i < n; i++) dx[i] = GARBAGE;
                    for (int64_t i = 0; i < n; i++) {
                        double v = x[i], g, gs;
                        /* y as the layer hands it over: act_fwd's output, rounded */
                        y[i] = kops_round(t, f == LT_ACT_RELU ? (v < 0 ? 0 : v)
                                             : f == LT_ACT_TANH ? tanh(v) : gelu(v));
                        if (f == LT_ACT_RELU) {
                            g = v > 0 ? dy[i] : 0;
                            gs = fabs(g);
                        } else if (f == LT_ACT_TANH) {
                            /* 1 - tanh^2 from the exact x; a kernel using the
                             * stored y (PyTorch does) sees y off by up to u |y|,
                             * so 1 - y^2 off by 2 u y^2: that term joins the
                             * scale (divided by tol, which the bound multiplies
                             * the scale by). */
                            double th = tanh(v);
                            g = dy[i] * (1 - th * th);
                            gs = fabs(dy[i]) * (1 + th * th) +
                                 2 * kops_unit_roundoff(t) * th * th * fabs(dy[i]) / kops_tol_elem(t);
                        } else {
                            g = dy[i] * gelu_grad(v);
                            gs = fabs(dy[i]) * (1 + fabs(v) * exp(-0.5 * v * v));
                        }
                        double bx = beta == 0 ? 0 : beta * dx[i];
                        ref[i] = bx + g;
                        sc[i] = fabs(bx) + gs;
                    }
                    void *ddx = kops_up(D, t, dx, n), *ddy = kops_up(D, t, dy, n),
                         *dxx = kops_up(D, t, x, n), *dyy = kops_up(D, t, y, n);
                    if (ddx && ddy && dxx && dyy) {
                        KT->act_bwd(X, t, f, ddx, ddy, dxx, dyy, n, beta);
                        if (kops_sync(D)) {
                            kops_down(D, t, ddx, n, dx);
                            kops_close("dx", t, dx, ref, sc, n, kops_tol_elem(t));
                        }
                    }
                    end_case();
                }
    }
}

/* ---- dropout ------------------------------------------------------------------------ */

static const uint64_t SEEDS[] = {0, 42, 0xDEADBEEFCAFEF00Dull};
static const uint64_t OFFSETS[] = {0, 5, (1ull << 40) + 3};

/* dropout_fwd: the mask is the counter-based keep decision of (seed,
 * offset + i) -- the same bytes on every device and for every dtype, so
 * exact -- and y = x mask / (1 - p) within rounding. p = 1 keeps nothing and
 * y is 0 (PyTorch's convention; the formula would give 0/0). */
static void test_dropout_fwd(void) {
    static const double ps[] = {0, 0.3, 0.5, 1};
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int si = 0; si < N_SIZES; si++)
            for (int pi = 0; pi < N_ELEMS(ps); pi++)
                for (int ki = 0; ki < N_ELEMS(SEEDS); ki++) {
                    int64_t n = SIZES[si];
                    double p = ps[pi];
                    uint64_t seed = SEEDS[ki], off = OFFSETS[(si + ki) % N_ELEMS(OFFSETS)];
                    if (BIG(n) && (pi != 1 || ki != 2)) continue;
                    if (!kops_case(D, K_DROPOUT_FWD, t, "n=%lld p=%g seed=%llu offset=%llu",
                                   (long long)n, p, (unsigned long long)seed,
                                   (unsigned long long)off))
                        continue;
                    kops_rng r = kops_rng_make(7000 + (uint64_t)(si * 100 + pi * 10 + ki));
                    double *x = tmp_d(n), *y = tmp_d(n), *ref = tmp_d(n), *sc = tmp_d(n);
                    uint8_t *mask = tmp_alloc((size_t)n), *want = tmp_alloc((size_t)n);
                    kops_fill_uniform(&r, t, x, n, -2, 2);
                    for (int64_t i = 0; i < n; i++) {
                        want[i] = kops_gen_keep(seed, off + (uint64_t)i, p);
                        ref[i] = want[i] ? x[i] / (1 - p) : 0;
                        sc[i] = fabs(ref[i]);
                    }
                    void *dx = kops_up(D, t, x, n), *dy = kops_alloc(D, (size_t)n * lt_dtype_size(t));
                    void *dm = kops_alloc(D, (size_t)n);
                    if (dx && dy && dm) {
                        KT->dropout_fwd(X, t, dy, dm, dx, n, p, seed, off);
                        if (kops_sync(D)) {
                            kops_down(D, t, dy, n, y);
                            kops_down_raw(D, dm, mask, (size_t)n);
                            kops_exact_bytes("mask (the shared generator)", mask, want, n);
                            kops_close("y", t, y, ref, sc, n, kops_tol_elem(t));
                            if (n >= 65536 && p > 0 && p < 1) {
                                int64_t kept = 0;
                                for (int64_t i = 0; i < n; i++) kept += mask[i];
                                double sd = sqrt(p * (1 - p) / (double)n);
                                if (fabs((double)kept / (double)n - (1 - p)) > 6 * sd)
                                    kops_fail("kept %lld of %lld with p = %g", (long long)kept,
                                              (long long)n, p);
                            }
                        }
                    }
                    end_case();
                }
        /* Counter-based: one call of n equals two calls split anywhere, the
         * second at offset + n1; and a large call keeps about 1 - p. */
        for (int64_t n1 = 0; n1 <= 4099; n1 += 1366) {
            const int64_t n = 65537;
            if (!kops_case(D, K_DROPOUT_FWD, t, "n=%lld split at %lld, seed 7 offset 11",
                           (long long)n, (long long)n1))
                continue;
            double *x = tmp_d(n);
            for (int64_t i = 0; i < n; i++) x[i] = 1;
            uint8_t *m1 = tmp_alloc((size_t)n), *m2 = tmp_alloc((size_t)n);
            void *dx = kops_up(D, t, x, n), *dy = kops_alloc(D, (size_t)n * lt_dtype_size(t));
            void *da = kops_alloc(D, (size_t)n), *db = kops_alloc(D, (size_t)n);
            if (dx && dy && da && db) {
                KT->dropout_fwd(X, t, dy, da, dx, n, 0.25, 7, 11);
                KT->dropout_fwd(X, t, dy, db, dx, n1, 0.25, 7, 11);
                KT->dropout_fwd(X, t, (char *)dy + n1 * (int64_t)lt_dtype_size(t),
                                (uint8_t *)db + n1, (const char *)dx + n1 * (int64_t)lt_dtype_size(t),
                                n - n1, 0.25, 7, 11 + (uint64_t)n1);
                if (kops_sync(D)) {
                    kops_down_raw(D, da, m1, (size_t)n);
                    kops_down_raw(D, db, m2, (size_t)n);
                    kops_exact_bytes("mask split in two calls", m2, m1, n);
                    int64_t kept = 0;
                    for (int64_t i = 0; i < n; i++) kept += m1[i];
                    double sd = sqrt(0.25 * 0.75 / (double)n);
                    if (fabs((double)kept / (double)n - 0.75) > 6 * sd)
                        kops_fail("kept %lld of %lld with p = 0.25", (long long)kept, (long long)n);
                }
            }
            end_case();
        }
    }
}

static void test_dropout_bwd(void) {
    static const double ps[] = {0, 0.3, 0.9};
    static const double betas[] = {0, 1, 0.3};
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int si = 0; si < N_SIZES; si++)
            for (int pi = 0; pi < N_ELEMS(ps); pi++)
                for (int bi = 0; bi < N_ELEMS(betas); bi++) {
                    int64_t n = SIZES[si];
                    double p = ps[pi], beta = betas[bi];
                    if (BIG(n) && (pi != 1 || bi != 2)) continue;
                    if (!kops_case(D, K_DROPOUT_BWD, t, "n=%lld p=%g beta=%g", (long long)n, p, beta))
                        continue;
                    kops_rng r = kops_rng_make(8000 + (uint64_t)(si * 100 + pi * 10 + bi));
                    double *dy = tmp_d(n), *dx = tmp_d(n), *ref = tmp_d(n), *sc = tmp_d(n);
                    uint8_t *mask = tmp_alloc((size_t)n);
                    kops_fill_uniform(&r, t, dy, n, -1, 1);
                    kops_fill_uniform(&r, t, dx, n, -1, 1);
                    for (int64_t i = 0; i < n; i++) {
                        mask[i] = kops_rng_next(&r) % 3 != 0;
                        if (beta == 0) dx[i] = GARBAGE;
                        double g = mask[i] ? dy[i] / (1 - p) : 0, bx = beta == 0 ? 0 : beta * dx[i];
                        ref[i] = bx + g;
                        sc[i] = fabs(bx) + fabs(g);
                    }
                    void *ddx = kops_up(D, t, dx, n), *ddy = kops_up(D, t, dy, n);
                    void *dm = kops_up_raw(D, mask, (size_t)n);
                    if (ddx && ddy && dm) {
                        KT->dropout_bwd(X, t, ddx, ddy, dm, n, p, beta);
                        if (kops_sync(D)) {
                            kops_down(D, t, ddx, n, dx);
                            kops_close("dx", t, dx, ref, sc, n, kops_tol_elem(t));
                        }
                    }
                    end_case();
                }
    }
}

/* ---- losses ------------------------------------------------------------------------- */

static const int64_t LROWS[] = {1, 7, 33, 65};
static const int64_t LCOLS[] = {1, 2, 7, 17, 65, 257, 1025};

static void test_xent_fwd(void) {
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int ri = 0; ri < N_ELEMS(LROWS); ri++)
            for (int ci = 0; ci < N_ELEMS(LCOLS); ci++)
                for (int big = 0; big < 2; big++) {
                    int64_t rows = LROWS[ri], cols = LCOLS[ci], n = rows * cols;
                    /* big: logits up to +-90, where exp without the row maximum
                     * taken out overflows f32 */
                    double span = big ? 90 : 3;
                    if (!kops_case(D, K_XENT_FWD, t, "rows=%lld cols=%lld logits in [-%g, %g]",
                                   (long long)rows, (long long)cols, span, span))
                        continue;
                    kops_rng r = kops_rng_make(9000 + (uint64_t)(ri * 100 + ci * 10 + big));
                    double *x = tmp_d(n), *p = tmp_d(n), *ref = tmp_d(n), *sc = tmp_d(n);
                    int32_t *lab = tmp_alloc((size_t)rows * sizeof(int32_t));
                    kops_fill_uniform(&r, t, x, n, -span, span);
                    double loss_ref = 0, loss_sc = 0;
                    for (int64_t q = 0; q < rows; q++) {
                        const double *row = x + q * cols;
                        lab[q] = (int32_t)(kops_rng_next(&r) % (uint64_t)cols);
                        double mx = row[0], sum = 0;
                        for (int64_t c = 1; c < cols; c++) mx = dmax(mx, row[c]);
                        for (int64_t c = 0; c < cols; c++) sum += exp(row[c] - mx);
                        for (int64_t c = 0; c < cols; c++) {
                            ref[q * cols + c] = exp(row[c] - mx) / sum;
                            /* exp's argument carries the rounding of x - max */
                            sc[q * cols + c] = ref[q * cols + c] * (3 + fabs(row[c] - mx));
                        }
                        loss_ref += log(sum) - (row[lab[q]] - mx);
                        loss_sc += log(sum) + fabs(row[lab[q]]) + fabs(mx) + 1;
                    }
                    loss_ref /= (double)rows;
                    loss_sc /= (double)rows;
                    void *dx = kops_up(D, t, x, n), *dl = kops_up_raw(D, lab, (size_t)rows * 4);
                    void *dp = kops_alloc(D, (size_t)n * lt_dtype_size(t));
                    void *dloss = kops_alloc(D, lt_dtype_size(t));
                    if (dx && dl && dp && dloss) {
                        KT->xent_fwd(X, t, dx, dl, rows, cols, dp, dloss);
                        if (kops_sync(D)) {
                            double loss;
                            kops_down(D, t, dp, n, p);
                            kops_down(D, t, dloss, 1, &loss);
                            kops_close("probs", t, p, ref, sc, n, kops_tol_sum(t, cols));
                            kops_close("loss", t, &loss, &loss_ref, &loss_sc, 1,
                                       kops_tol_sum(t, cols + rows));
                        }
                    }
                    end_case();
                }
    }
}

static void test_xent_bwd(void) {
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int ri = 0; ri < N_ELEMS(LROWS); ri++)
            for (int ci = 0; ci < N_ELEMS(LCOLS); ci++) {
                int64_t rows = LROWS[ri], cols = LCOLS[ci], n = rows * cols;
                double scale = ci % 2 ? 1.0 / (double)rows : 1.5;
                if (!kops_case(D, K_XENT_BWD, t, "rows=%lld cols=%lld scale=%g", (long long)rows,
                               (long long)cols, scale))
                    continue;
                kops_rng r = kops_rng_make(10000 + (uint64_t)(ri * 100 + ci));
                double *p = tmp_d(n), *g = tmp_d(n), *ref = tmp_d(n), *sc = tmp_d(n);
                int32_t *lab = tmp_alloc((size_t)rows * sizeof(int32_t));
                kops_fill_uniform(&r, t, p, n, 0, 1);
                for (int64_t q = 0; q < rows; q++) lab[q] = (int32_t)(kops_rng_next(&r) % (uint64_t)cols);
                for (int64_t i = 0; i < n; i++) {
                    double oh = lab[i / cols] == (int32_t)(i % cols) ? 1 : 0;
                    ref[i] = scale * (p[i] - oh);
                    sc[i] = fabs(scale) * (p[i] + oh);
                    g[i] = GARBAGE;
                }
                void *dp = kops_up(D, t, p, n), *dl = kops_up_raw(D, lab, (size_t)rows * 4);
                void *dg = kops_up(D, t, g, n);
                if (dp && dl && dg) {
                    KT->xent_bwd(X, t, dg, dp, dl, rows, cols, scale);
                    if (kops_sync(D)) {
                        kops_down(D, t, dg, n, g);
                        kops_close("dlogits", t, g, ref, sc, n, kops_tol_elem(t));
                    }
                }
                end_case();
            }
    }
}

static void test_mse(void) {
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int si = 0; si < N_SIZES; si++) {
            int64_t n = SIZES[si];
            kops_rng r = kops_rng_make(11000 + (uint64_t)si);
            double *pred = tmp_d(n), *tgt = tmp_d(n);
            kops_fill_uniform(&r, t, pred, n, -2, 2);
            kops_fill_uniform(&r, t, tgt, n, -2, 2);
            /* mse_fwd: the mean of nothing (n = 0) is left to the accelerator */
            if (n > 0 && kops_case(D, K_MSE_FWD, t, "n=%lld", (long long)n)) {
                double ref = 0, sc = 0, loss;
                for (int64_t i = 0; i < n; i++) {
                    double e = pred[i] - tgt[i], a = fabs(pred[i]) + fabs(tgt[i]);
                    ref += e * e;
                    sc += a * a;
                }
                ref /= (double)n;
                sc /= (double)n;
                void *dp = kops_up(D, t, pred, n), *dt = kops_up(D, t, tgt, n);
                void *dl = kops_alloc(D, lt_dtype_size(t));
                if (dp && dt && dl) {
                    KT->mse_fwd(X, t, dp, dt, n, dl);
                    if (kops_sync(D)) {
                        kops_down(D, t, dl, 1, &loss);
                        kops_close("loss", t, &loss, &ref, &sc, 1, kops_tol_sum(t, n));
                    }
                }
                kops_end(D);
            }
            for (int k = 0; k < 2; k++) {
                double scale = k ? 0.25 : 1;
                if (!kops_case(D, K_MSE_BWD, t, "n=%lld scale=%g", (long long)n, scale)) continue;
                double *g = tmp_d(n), *ref = tmp_d(n), *sc = tmp_d(n);
                for (int64_t i = 0; i < n; i++) {
                    ref[i] = scale * 2 * (pred[i] - tgt[i]) / (double)n;
                    sc[i] = scale * 2 * (fabs(pred[i]) + fabs(tgt[i])) / (double)n;
                    g[i] = GARBAGE;
                }
                void *dp = kops_up(D, t, pred, n), *dt = kops_up(D, t, tgt, n);
                void *dg = kops_up(D, t, g, n);
                if (dp && dt && dg) {
                    KT->mse_bwd(X, t, dg, dp, dt, n, scale);
                    if (kops_sync(D)) {
                        kops_down(D, t, dg, n, g);
                        kops_close("dpred", t, g, ref, sc, n, kops_tol_elem(t));
                    }
                }
                kops_end(D);
            }
            tmp_free();
        }
    }
}

/* count_correct: exact. Each row has one clear maximum (2.0 against values
 * in [-1, 1)) so the count does not depend on a tie rule the ABI leaves
 * open; its column runs over the first, the last and random ones, and about
 * half the labels point at it. */
static void test_count_correct(void) {
    static const int64_t rows_l[] = {0, 1, 7, 33, 257, 1025};
    static const int64_t cols_l[] = {1, 2, 7, 17, 257};
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int ri = 0; ri < N_ELEMS(rows_l); ri++)
            for (int ci = 0; ci < N_ELEMS(cols_l); ci++) {
                int64_t rows = rows_l[ri], cols = cols_l[ci], n = rows * cols;
                if (!kops_case(D, K_COUNT_CORRECT, t, "rows=%lld cols=%lld", (long long)rows,
                               (long long)cols))
                    continue;
                kops_rng r = kops_rng_make(12000 + (uint64_t)(ri * 10 + ci));
                double *x = tmp_d(n);
                int32_t *lab = tmp_alloc((size_t)imax(rows, 1) * sizeof(int32_t));
                kops_fill_uniform(&r, t, x, n, -1, 1);
                int64_t want = 0;
                for (int64_t q = 0; q < rows; q++) {
                    int64_t w = q % 3 == 0 ? 0 : q % 3 == 1 ? cols - 1
                                                            : (int64_t)(kops_rng_next(&r) % (uint64_t)cols);
                    x[q * cols + w] = 2;
                    lab[q] = kops_rng_next(&r) % 2 ? (int32_t)w
                                                   : (int32_t)(kops_rng_next(&r) % (uint64_t)cols);
                    want += lab[q] == w;
                }
                void *dx = kops_up(D, t, x, n), *dl = kops_up_raw(D, lab, (size_t)rows * 4);
                if (dx && dl) {
                    int64_t got = -1;
                    KT->count_correct(X, t, dx, dl, rows, cols, &got);
                    if (kops_sync(D)) kops_exact_i64("correct", got, want);
                }
                end_case();
            }
    }
}

/* ---- cast --------------------------------------------------------------------------- */

/* Values at the edges of rounding: ties of f16, bf16 and f32 (which go to
 * the even neighbour), ties just above (double rounding through f32 gets
 * these wrong when the source is f64), the overflow thresholds (a tie at
 * the largest finite value rounds to infinity), subnormals and the halves
 * between them, signed zeros, infinities, NaN. Each is first rounded to
 * the source dtype (those it does not hold become nearby values). */
static const double CAST_SPECIALS[] = {
    0.0, -0.0, 1, -1, INFINITY, -INFINITY, NAN, M_PI, -M_E, 1.0 / 3, 0.1,
    1 + 0x1p-11, 1 + 3 * 0x1p-11, -(1 + 0x1p-11), 1 + 0x1p-11 + 0x1p-40, 1 + 0x1p-11 - 0x1p-40,
    0x1p-25, 3 * 0x1p-25, 0x1p-24, 0x1p-26, 0x1p-14, 0x1p-14 - 0x1p-24, 5 * 0x1p-26,
    65504, 65519, 65520, -65520, 65536, 1e5,
    1 + 0x1p-8, 1 + 3 * 0x1p-8, 1 + 0x1p-8 + 0x1p-30, -(1 + 0x1p-8 + 0x1p-30),
    0x1.fep127, 0x1.fcp127, 0x1.fdp127, 0x1.ffp127, 0x1p-133, 0x1p-134, 3 * 0x1p-134, 0x1p-126,
    1 + 0x1p-24, 1 + 3 * 0x1p-24, 1 + 0x1p-24 + 0x1p-60, FLT_MAX, -FLT_MAX,
    0x1.ffffffp127, 0x1.fffffefffffffp127, 0x1p-149, 0x1p-150, 0x1.8p-149, 0x1p-150 + 0x1p-200,
    1e300, -1e300, 1e-300, 4.9406564584124654e-324, DBL_MAX,
};

/* Random values of the source dtype over its whole range: bit patterns for
 * the 16-bit and f32 sources (NaN payloads included), for f64 mostly
 * exponents where the narrower formats round, overflow or go subnormal. */
static double random_of(kops_rng *r, lt_dtype t) {
    uint64_t b = kops_rng_next(r);
    switch (t) {
    case LT_F16:
    case LT_BF16: return kops_decode16(t, (uint16_t)b);
    case LT_F32: {
        uint32_t u = (uint32_t)b;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    default: {
        int which = (int)(b % 4);
        double m = kops_rng_uniform(r, 1, 2) * (b & 16 ? -1 : 1);
        if (which == 0) return ldexp(m, (int)(kops_rng_next(r) % 61) - 30);
        if (which == 1) return ldexp(m, (int)(kops_rng_next(r) % 300) - 160);
        if (which == 2) return ldexp(m, (int)(kops_rng_next(r) % 2100) - 1075);
        uint64_t u = kops_rng_next(r);
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    }
}

static void cast_case(lt_dtype dst, lt_dtype src, int64_t n, bool specials, uint64_t seed) {
    if (!kops_case(D, K_CAST, dst, "from %s n=%lld%s", kops_dtype_name(src), (long long)n,
                   specials ? " (rounding edges)" : ""))
        return;
    kops_case_src(src);
    kops_rng r = kops_rng_make(seed);
    double *x = tmp_d(n), *want = tmp_d(n), *got = tmp_d(n);
    for (int64_t i = 0; i < n; i++) {
        double v = specials && i < N_ELEMS(CAST_SPECIALS) ? CAST_SPECIALS[i] : random_of(&r, src);
        x[i] = kops_round(src, v);
        /* rounded once, to nearest even, from the exact source value */
        want[i] = kops_round(dst, x[i]);
        got[i] = GARBAGE;
    }
    void *ds = kops_up(D, src, x, n), *dd = kops_up(D, dst, got, n);
    if (ds && dd) {
        KT->cast(X, dst, dd, src, ds, n);
        if (kops_sync(D)) {
            kops_down(D, dst, dd, n, got);
            kops_exact("dst", got, want, n, true);
        }
    }
    end_case();
}

static void test_cast(void) {
    static const int64_t sizes[] = {0, 1, 7, 33, 257, 4099};
    for (int a = 0; a < KOPS_NDTYPES; a++)
        for (int b = 0; b < KOPS_NDTYPES; b++) {
            lt_dtype dst = KOPS_DTYPES[a], src = KOPS_DTYPES[b];
            if (kops_only_dtype && (int)dst != kops_only_dtype && (int)src != kops_only_dtype)
                continue;
            cast_case(dst, src, N_ELEMS(CAST_SPECIALS), true, 13000 + (uint64_t)(a * 4 + b));
            for (int si = 0; si < N_ELEMS(sizes); si++)
                cast_case(dst, src, sizes[si], false, 13100 + (uint64_t)(a * 100 + b * 10 + si));
        }
}

/* ---- sumsq, all_finite -------------------------------------------------------------- */

static void test_sumsq(void) {
    static const int64_t sizes[] = {0, 1, 7, 17, 33, 65, 257, 1025, 4099, 65537};
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int si = 0; si < N_ELEMS(sizes); si++)
            for (int big = 0; big < 2; big++) {
                int64_t n = sizes[si];
                double span = big ? 100 : 1;
                if (!kops_case(D, K_SUMSQ, t, "n=%lld x in [-%g, %g)", (long long)n, span, span))
                    continue;
                kops_rng r = kops_rng_make(14000 + (uint64_t)(si * 2 + big));
                double *x = tmp_d(n), ref = 0, got = NAN;
                kops_fill_uniform(&r, t, x, n, -span, span);
                for (int64_t i = 0; i < n; i++) ref += x[i] * x[i];
                void *dx = kops_up(D, t, x, n);
                if (dx) {
                    KT->sumsq(X, t, dx, n, &got);
                    /* a sum of n positive terms in fp32 or wider (the ABI) */
                    if (kops_sync(D)) kops_close("sum", LT_F64, &got, &ref, NULL, 1, kops_tol_sum(t, n));
                }
                end_case();
            }
    }
}

/* Raw element bits for non-finite values with payloads: NaNs other than
 * the canonical one must count too. */
static void put_bits(lt_dtype t, void *buf, int64_t i, int kind) {
    switch (t) {
    case LT_F32: {
        static const uint32_t v[] = {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u, 0xFFFFFFFFu};
        memcpy((char *)buf + 4 * i, &v[kind], 4);
        break;
    }
    case LT_F64: {
        static const uint64_t v[] = {0x7FF0000000000000ull, 0xFFF0000000000000ull,
                                     0x7FF8000000000000ull, 0x7FF0000000000001ull,
                                     0xFFFFFFFFFFFFFFFFull};
        memcpy((char *)buf + 8 * i, &v[kind], 8);
        break;
    }
    case LT_F16: {
        static const uint16_t v[] = {0x7C00u, 0xFC00u, 0x7E00u, 0x7C01u, 0xFFFFu};
        memcpy((char *)buf + 2 * i, &v[kind], 2);
        break;
    }
    default: {
        static const uint16_t v[] = {0x7F80u, 0xFF80u, 0x7FC0u, 0x7F81u, 0xFFFFu};
        memcpy((char *)buf + 2 * i, &v[kind], 2);
    }
    }
}

static void test_all_finite(void) {
    static const char *const kinds[] = {"+inf", "-inf", "NaN", "signalling NaN", "NaN 0xFF..F"};
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        size_t es = lt_dtype_size(t);
        for (int si = 0; si < N_SIZES; si++) {
            int64_t n = SIZES[si];
            kops_rng r = kops_rng_make(15000 + (uint64_t)si);
            double *x = tmp_d(n);
            kops_fill_uniform(&r, t, x, n, -1, 1);
            /* finite extremes: the largest value, the smallest subnormal, -0 */
            if (n > 3) x[0] = -kops_max_finite(t), x[1] = kops_min_subnormal(t), x[2] = -0.0;
            if (n > 4) x[n - 1] = kops_max_finite(t);
            void *host = tmp_alloc((size_t)n * es);
            kops_pack(t, x, n, host);
            /* all finite, then one bad element at the first, a middle and the
             * last position */
            int64_t where[] = {-1, 0, n / 2, n - 1};
            for (int w = 0; w < 4; w++) {
                if (w > 0 && n == 0) break;
                if (BIG(n) && (w == 1 || w == 2)) continue;
                for (int kind = 0; kind < (w ? N_ELEMS(kinds) : 1); kind++) {
                    if (!kops_case(D, K_ALL_FINITE, t, "n=%lld %s%s%lld", (long long)n,
                                   w ? kinds[kind] : "all finite", w ? " at " : "",
                                   (long long)(w ? where[w] : 0)))
                        continue;
                    void *buf = tmp_alloc((size_t)n * es);
                    memcpy(buf, host, (size_t)n * es);
                    if (w) put_bits(t, buf, where[w], kind);
                    void *dx = kops_up_raw(D, buf, (size_t)n * es);
                    if (dx) {
                        bool got = w != 0; /* the opposite of the answer */
                        KT->all_finite(X, t, dx, n, &got);
                        if (kops_sync(D)) kops_exact_i64("all_finite", got, w == 0);
                    }
                    kops_end(D);
                }
            }
            tmp_free();
        }
    }
}

/* ---- optimizers --------------------------------------------------------------------- */

static const int64_t OSIZES[] = {0, 1, 7, 33, 257, 4099};

static void test_sgd(void) {
    static const lt_sgd_args cfg[] = {
        {.lr = 0.1},
        {.lr = 0.05, .weight_decay = 0.01},
        {.lr = 0.1, .momentum = 0.9, .first_step = 1},
        {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01},
        {.lr = 0.02, .momentum = 0.8, .weight_decay = 0.001, .nesterov = 1},
        {.lr = 0.02, .momentum = 0.8, .nesterov = 1, .first_step = 1},
    };
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int si = 0; si < N_ELEMS(OSIZES); si++)
            for (int ci = 0; ci < N_ELEMS(cfg); ci++) {
                int64_t n = OSIZES[si];
                const lt_sgd_args *a = &cfg[ci];
                if (!kops_case(D, K_SGD_STEP, t, "n=%lld lr=%g momentum=%g dampening=%g wd=%g "
                               "nesterov=%d first=%d", (long long)n, a->lr, a->momentum,
                               a->dampening, a->weight_decay, a->nesterov, a->first_step))
                    continue;
                kops_rng r = kops_rng_make(16000 + (uint64_t)(si * 10 + ci));
                double *p = tmp_d(n), *g = tmp_d(n), *buf = tmp_d(n), *rp = tmp_d(n),
                       *sp = tmp_d(n), *rb = tmp_d(n), *sb = tmp_d(n);
                kops_fill_uniform(&r, t, p, n, -1, 1);
                kops_fill_uniform(&r, t, g, n, -1, 1);
                kops_fill_uniform(&r, t, buf, n, -1, 1);
                for (int64_t i = 0; i < n; i++) {
                    /* The first step initialises the buffer from the gradient:
                     * whatever it held (NaN here) must not leak in. */
                    if (a->first_step && a->momentum != 0) buf[i] = NAN;
                    double d = g[i] + a->weight_decay * p[i];
                    double ad = fabs(g[i]) + fabs(a->weight_decay * p[i]);
                    if (a->momentum != 0) {
                        double b = a->first_step ? d : a->momentum * buf[i] + (1 - a->dampening) * d;
                        double ab = a->first_step ? ad
                                                  : fabs(a->momentum * buf[i]) + (1 - a->dampening) * ad;
                        rb[i] = b;
                        sb[i] = ab;
                        if (a->nesterov) d = d + a->momentum * b, ad = ad + a->momentum * ab;
                        else d = b, ad = ab;
                    }
                    rp[i] = p[i] - a->lr * d;
                    sp[i] = fabs(p[i]) + a->lr * ad;
                }
                void *dp = kops_up(D, t, p, n), *dg = kops_up(D, t, g, n), *db = kops_up(D, t, buf, n);
                if (dp && dg && db) {
                    KT->sgd_step(X, t, dp, dg, db, n, a);
                    if (kops_sync(D)) {
                        kops_down(D, t, dp, n, p);
                        kops_close("param", t, p, rp, sp, n, kops_tol_elem(t));
                        if (a->momentum != 0) {
                            kops_down(D, t, db, n, buf);
                            kops_close("momentum_buf", t, buf, rb, sb, n, kops_tol_elem(t));
                        }
                    }
                }
                end_case();
            }
    }
}

static void test_adamw(void) {
    static const lt_adamw_args cfg[] = {
        {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01, .step = 1},
        {.lr = 1e-2, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0, .step = 10},
        {.lr = 5e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-3, .weight_decay = 0.1, .step = 1000},
    };
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int si = 0; si < N_ELEMS(OSIZES); si++)
            for (int ci = 0; ci < N_ELEMS(cfg); ci++) {
                int64_t n = OSIZES[si];
                const lt_adamw_args *a = &cfg[ci];
                if (!kops_case(D, K_ADAMW_STEP, t, "n=%lld lr=%g betas=(%g, %g) eps=%g wd=%g step=%lld",
                               (long long)n, a->lr, a->beta1, a->beta2, a->eps, a->weight_decay,
                               (long long)a->step))
                    continue;
                kops_rng r = kops_rng_make(17000 + (uint64_t)(si * 10 + ci));
                double *p = tmp_d(n), *g = tmp_d(n), *m = tmp_d(n), *v = tmp_d(n);
                double *rp = tmp_d(n), *sp = tmp_d(n), *rm = tmp_d(n), *sm = tmp_d(n),
                       *rv = tmp_d(n), *sv = tmp_d(n);
                kops_fill_uniform(&r, t, p, n, -1, 1);
                kops_fill_uniform(&r, t, g, n, -1, 1);
                kops_fill_uniform(&r, t, m, n, -0.1, 0.1);
                kops_fill_uniform(&r, t, v, n, 1e-4, 1e-2);
                double st = (double)a->step, bc1 = 1 - pow(a->beta1, st);
                double bc2 = sqrt(1 - pow(a->beta2, st)), decay = 1 - a->lr * a->weight_decay;
                for (int64_t i = 0; i < n; i++) {
                    double mi = a->beta1 * m[i] + (1 - a->beta1) * g[i];
                    double vi = a->beta2 * v[i] + (1 - a->beta2) * g[i] * g[i];
                    double den = sqrt(vi) / bc2 + a->eps;
                    double upd = (a->lr / bc1) * mi / den;
                    rm[i] = mi;
                    sm[i] = a->beta1 * fabs(m[i]) + (1 - a->beta1) * fabs(g[i]);
                    rv[i] = vi;
                    sv[i] = vi; /* a sum of positive terms */
                    rp[i] = p[i] * decay - upd;
                    /* the update's relative error also carries m's and v's */
                    sp[i] = fabs(p[i] * decay) + (a->lr / bc1) * sm[i] / den * 4;
                }
                void *dp = kops_up(D, t, p, n), *dg = kops_up(D, t, g, n), *dm = kops_up(D, t, m, n),
                     *dv = kops_up(D, t, v, n);
                if (dp && dg && dm && dv) {
                    KT->adamw_step(X, t, dp, dg, dm, dv, n, a);
                    if (kops_sync(D)) {
                        kops_down(D, t, dp, n, p);
                        kops_down(D, t, dm, n, m);
                        kops_down(D, t, dv, n, v);
                        kops_close("param", t, p, rp, sp, n, kops_tol_elem(t));
                        kops_close("m", t, m, rm, sm, n, kops_tol_elem(t));
                        kops_close("v", t, v, rv, sv, n, kops_tol_elem(t));
                    }
                }
                end_case();
            }
    }
}

static void test_qadam(void) {
    static const lt_adamw_args cfg[] = {
        {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01, .step = 5},
        {.lr = 1e-2, .beta1 = 0.5, .beta2 = 0.9, .eps = 1e-6, .weight_decay = 0, .step = 100},
    };
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int si = 0; si < N_ELEMS(OSIZES); si++)
            for (int ci = 0; ci < N_ELEMS(cfg); ci++) {
                int64_t n = OSIZES[si];
                const lt_adamw_args *a = &cfg[ci];
                if (!kops_case(D, K_QADAM_STEP, t, "n=%lld lr=%g betas=(%g, %g) eps=%g wd=%g step=%lld",
                               (long long)n, a->lr, a->beta1, a->beta2, a->eps, a->weight_decay,
                               (long long)a->step))
                    continue;
                kops_rng r = kops_rng_make(18000 + (uint64_t)(si * 10 + ci));
                double *p = tmp_d(n), *m = tmp_d(n), *v = tmp_d(n), *rp = tmp_d(n), *sp = tmp_d(n);
                kops_fill_uniform(&r, t, p, n, -1, 1);
                kops_fill_uniform(&r, t, m, n, -0.1, 0.1);
                kops_fill_uniform(&r, t, v, n, 1e-4, 1e-2);
                for (int64_t i = 0; i < n; i++) {
                    if (i % 5 == 1) v[i] = 0;                            /* u = 0 */
                    if (i % 5 == 2) v[i] = kops_round(t, 1e-7), m[i] = 0.5; /* clamped */
                    if (i % 5 == 3) m[i] = -m[i] * 4;
                }
                double st = (double)a->step, bc1 = 1 - pow(a->beta1, st);
                double bc2 = sqrt(1 - pow(a->beta2, st)), decay = 1 - a->lr * a->weight_decay;
                double bound = dmax(1, (1 - a->beta1) / sqrt(1 - a->beta2));
                for (int64_t i = 0; i < n; i++) {
                    double u = v[i] == 0 ? 0 : (m[i] / bc1) / (sqrt(v[i]) / bc2 + a->eps);
                    u = u > bound ? bound : u < -bound ? -bound : u;
                    rp[i] = p[i] * decay - a->lr * u;
                    sp[i] = fabs(p[i] * decay) + a->lr * fabs(u) * 4;
                }
                void *dp = kops_up(D, t, p, n), *dm = kops_up(D, t, m, n), *dv = kops_up(D, t, v, n);
                if (dp && dm && dv) {
                    KT->qadam_step(X, t, dp, dm, dv, n, a);
                    if (kops_sync(D)) {
                        double *m2 = tmp_d(n), *v2 = tmp_d(n);
                        kops_down(D, t, dp, n, p);
                        kops_down(D, t, dm, n, m2);
                        kops_down(D, t, dv, n, v2);
                        kops_close("param", t, p, rp, sp, n, kops_tol_elem(t));
                        kops_exact("m (read only)", m2, m, n, true);
                        kops_exact("v (read only)", v2, v, n, true);
                    }
                }
                end_case();
            }
    }
}

/* ---- rand_fill ----------------------------------------------------------------------- */

/* The value the shared generator gives counter c, in the dtype: uniform
 * lo + (hi - lo) u and normal mean + std z computed in double; f32 and f64
 * round that, the 16-bit dtypes round the f32 value (the ABI: "the f32
 * values rounded"). A uniform value the rounding takes up to hi is not in
 * [lo, hi): it becomes the largest value below hi. */
static double below(lt_dtype t, double hi) {
    double h = kops_round(t, hi);
    if (h < hi) return h;
    if (t == LT_F64) return nextafter(h, -INFINITY);
    if (t == LT_F32) return nextafterf((float)h, -INFINITY);
    uint16_t bits = kops_encode16(t, h); /* magnitudes order like their bits */
    bits = h > 0 ? (uint16_t)(bits - 1) : h == 0 ? (uint16_t)0x8001u : (uint16_t)(bits + 1);
    return kops_decode16(t, bits);
}

static double gen_value(lt_dtype t, lt_rand_dist dist, double a, double b, uint64_t seed,
                        uint64_t c) {
    double v = dist == LT_RAND_UNIFORM ? a + (b - a) * kops_gen_u53(seed, c)
                                       : a + b * kops_gen_normal(seed, c);
    if (t != LT_F64 && t != LT_F32) v = (double)(float)v;
    double r = kops_round(t, v);
    if (dist == LT_RAND_UNIFORM && r >= b && b > a) r = below(t, b);
    return r;
}

static void test_rand_fill(void) {
    static const struct { lt_rand_dist dist; double a, b; } cfg[] = {
        {LT_RAND_UNIFORM, 0, 1}, {LT_RAND_UNIFORM, -2.5, 3}, {LT_RAND_NORMAL, 0.5, 2},
        {LT_RAND_NORMAL, 0, 1}};
    static const int64_t sizes[] = {0, 1, 7, 17, 33, 257, 4099};
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int si = 0; si < N_ELEMS(sizes); si++)
            for (int ci = 0; ci < N_ELEMS(cfg); ci++)
                for (int ki = 0; ki < N_ELEMS(SEEDS); ki++) {
                    int64_t n = sizes[si];
                    uint64_t seed = SEEDS[ki], off = OFFSETS[(si + ci + ki) % N_ELEMS(OFFSETS)];
                    bool uni = cfg[ci].dist == LT_RAND_UNIFORM;
                    double a = cfg[ci].a, b = cfg[ci].b;
                    if (!kops_case(D, K_RAND_FILL, t, "%s(%g, %g) n=%lld seed=%llu offset=%llu",
                                   uni ? "uniform" : "normal", a, b, (long long)n,
                                   (unsigned long long)seed, (unsigned long long)off))
                        continue;
                    double *x = tmp_d(n), *ref = tmp_d(n), *sc = tmp_d(n);
                    for (int64_t i = 0; i < n; i++) {
                        ref[i] = gen_value(t, cfg[ci].dist, a, b, seed, off + (uint64_t)i);
                        sc[i] = uni ? fabs(ref[i]) : fabs(a) + b * fabs(kops_gen_normal(seed, off + (uint64_t)i));
                    }
                    void *dx = kops_alloc(D, (size_t)n * lt_dtype_size(t));
                    if (dx) {
                        KT->rand_fill(X, t, dx, n, cfg[ci].dist, a, b, seed, off);
                        if (kops_sync(D)) {
                            kops_down(D, t, dx, n, x);
                            if (uni) {
                                for (int64_t i = 0; i < n; i++)
                                    if (!(x[i] >= a && x[i] < b)) {
                                        kops_fail("x[%lld] = %.17g is outside [%g, %g)", (long long)i, x[i], a, b);
                                        break;
                                    }
                                /* u's arithmetic is one multiply and one add */
                                kops_exact("x (the shared generator)", x, ref, n, false);
                            } else {
                                /* log, sqrt, sin/cos of another library may differ by
                                 * an ulp of double before the rounding to the dtype */
                                kops_close("x (the shared generator)", t, x, ref, sc, n, 1e-12);
                            }
                        }
                    }
                    end_case();
                }
        /* Counter-based: a split call gives the same numbers (odd offsets
         * split a Box-Muller pair); stats of a large fill. */
        for (int ci = 0; ci < N_ELEMS(cfg); ci++) {
            const int64_t n = 65537, n1 = 1001;
            bool uni = cfg[ci].dist == LT_RAND_UNIFORM;
            double a = cfg[ci].a, b = cfg[ci].b;
            if (!kops_case(D, K_RAND_FILL, t, "%s(%g, %g) n=%lld split at %lld, offset 3",
                           uni ? "uniform" : "normal", a, b, (long long)n, (long long)n1))
                continue;
            size_t es = lt_dtype_size(t);
            double *x1 = tmp_d(n), *x2 = tmp_d(n);
            char *d1 = kops_alloc(D, (size_t)n * es), *d2 = kops_alloc(D, (size_t)n * es);
            if (d1 && d2) {
                KT->rand_fill(X, t, d1, n, cfg[ci].dist, a, b, 99, 3);
                KT->rand_fill(X, t, d2, n1, cfg[ci].dist, a, b, 99, 3);
                KT->rand_fill(X, t, d2 + n1 * (int64_t)es, n - n1, cfg[ci].dist, a, b, 99, 3 + (uint64_t)n1);
                if (kops_sync(D)) {
                    kops_down(D, t, d1, n, x1);
                    kops_down(D, t, d2, n, x2);
                    kops_exact("fill split in two calls", x2, x1, n, true);
                    double s = 0, s2 = 0;
                    for (int64_t i = 0; i < n; i++) s += x1[i], s2 += x1[i] * x1[i];
                    double mean = s / (double)n, var = s2 / (double)n - mean * mean;
                    double want_mean = uni ? (a + b) / 2 : a;
                    double want_var = uni ? (b - a) * (b - a) / 12 : b * b;
                    /* 6 standard errors; the variance's error also has the
                     * dtype's rounding (bf16: 2^-8 relative per value) */
                    double se_mean = sqrt(want_var / (double)n);
                    double se_var = want_var * (sqrt(2.0 / (double)n) * (uni ? 0.9 : 1.5)) +
                                    want_var * 2 * kops_unit_roundoff(t);
                    if (fabs(mean - want_mean) > 6 * se_mean + 2 * kops_unit_roundoff(t) * fabs(want_mean))
                        kops_fail("mean %.6g, want %.6g", mean, want_mean);
                    if (fabs(var - want_var) > 6 * se_var)
                        kops_fail("variance %.6g, want %.6g", var, want_var);
                }
            }
            end_case();
        }
        /* The ABI: a 16-bit fill is the f32 fill of the same (seed, offset)
         * rounded (and kept below hi). Checked on the device's own f32. */
        if (t == LT_F16 || t == LT_BF16)
            for (int ci = 0; ci < N_ELEMS(cfg); ci++) {
                const int64_t n = 4099;
                if (!kops_case(D, K_RAND_FILL, t, "%s(%g, %g) n=%lld equals the f32 fill rounded",
                               cfg[ci].dist == LT_RAND_UNIFORM ? "uniform" : "normal", cfg[ci].a,
                               cfg[ci].b, (long long)n))
                    continue;
                double *x = tmp_d(n), *f = tmp_d(n);
                void *dx = kops_alloc(D, (size_t)n * lt_dtype_size(t)), *df = kops_alloc(D, (size_t)n * 4);
                if (dx && df) {
                    KT->rand_fill(X, LT_F32, df, n, cfg[ci].dist, cfg[ci].a, cfg[ci].b, 5, 17);
                    KT->rand_fill(X, t, dx, n, cfg[ci].dist, cfg[ci].a, cfg[ci].b, 5, 17);
                    if (kops_sync(D)) {
                        kops_down(D, t, dx, n, x);
                        kops_down(D, LT_F32, df, n, f);
                        for (int64_t i = 0; i < n; i++) {
                            f[i] = kops_round(t, f[i]);
                            if (cfg[ci].dist == LT_RAND_UNIFORM && f[i] >= cfg[ci].b) f[i] = below(t, cfg[ci].b);
                        }
                        kops_exact("16-bit fill vs the f32 fill rounded", x, f, n, true);
                    }
                }
                end_case();
            }
    }
}

/* ---- im2col, col2im, max pooling ------------------------------------------------------ */

typedef struct geom_in { int64_t c, h, w, kh, kw, sh, sw, ph, pw; } geom_in;
static const geom_in GEOMS[] = {
    {1, 1, 1, 1, 1, 1, 1, 0, 0},    {3, 7, 7, 3, 3, 1, 1, 1, 1},   {2, 7, 5, 3, 3, 2, 2, 1, 1},
    {1, 17, 17, 5, 5, 2, 2, 2, 2},  {4, 8, 8, 2, 2, 2, 2, 0, 0},   {3, 7, 7, 2, 2, 2, 2, 0, 0},
    {2, 33, 33, 3, 3, 2, 2, 0, 0},  {1, 5, 9, 3, 1, 1, 3, 1, 0},   {2, 4, 4, 4, 4, 1, 1, 0, 0},
    {1, 9, 9, 2, 2, 3, 3, 0, 0},    {1, 1, 1, 3, 3, 1, 1, 1, 1},   {3, 65, 17, 3, 3, 1, 1, 1, 1},
    {1, 6, 7, 3, 2, 3, 2, 1, 1},    {2, 3, 257, 1, 7, 1, 3, 0, 3},
    /* the CNN example's (cpu: unit stride through a padded plane where a row
     * holds 16 bytes; 2x2 pooling by windows), a 64 x 64 padded plane
     * (the largest the padded path takes) and 65 x 65 (the general loops),
     * a 2 x 3 kernel with uneven padding, odd 2x2 pooling, 16-byte rows of f64 */
    {32, 14, 14, 3, 3, 1, 1, 1, 1}, {1, 28, 28, 3, 3, 1, 1, 1, 1}, {2, 62, 62, 3, 3, 1, 1, 1, 1},
    {1, 63, 63, 3, 3, 1, 1, 1, 1},  {2, 9, 12, 2, 3, 1, 1, 0, 2},  {2, 14, 14, 2, 2, 2, 2, 0, 0},
    {1, 5, 9, 2, 2, 2, 2, 0, 0},    {2, 3, 2, 3, 3, 1, 1, 1, 1},
};

static lt_conv_geom geom_of(const geom_in *g) {
    lt_conv_geom r = {g->c, g->h, g->w, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, 0, 0};
    r.oh = (g->h + 2 * g->ph - g->kh) / g->sh + 1;
    r.ow = (g->w + 2 * g->pw - g->kw) / g->sw + 1;
    return r;
}

#define GEOM_FMT "c=%lld %lldx%lld kernel %lldx%lld stride %lldx%lld pad %lldx%lld -> %lldx%lld"
#define GEOM_ARGS(g) (long long)(g).c, (long long)(g).h, (long long)(g).w, (long long)(g).kh, \
    (long long)(g).kw, (long long)(g).sh, (long long)(g).sw, (long long)(g).ph, (long long)(g).pw, \
    (long long)(g).oh, (long long)(g).ow

/* The input element under window row i, column j of output (oy, ox), or -1
 * in the padding. */
static int64_t tap(const lt_conv_geom *g, int64_t oy, int64_t ox, int64_t i, int64_t j) {
    int64_t iy = oy * g->sh - g->ph + i, ix = ox * g->sw - g->pw + j;
    return iy < 0 || iy >= g->h || ix < 0 || ix >= g->w ? -1 : iy * g->w + ix;
}

static void test_im2col(void) {
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int gi = 0; gi < N_ELEMS(GEOMS); gi++) {
            lt_conv_geom g = geom_of(&GEOMS[gi]);
            if (!kops_case(D, K_IM2COL, t, GEOM_FMT, GEOM_ARGS(g))) continue;
            int64_t nx = g.c * g.h * g.w, plane = g.oh * g.ow, ncol = g.c * g.kh * g.kw * plane;
            kops_rng r = kops_rng_make(19000 + (uint64_t)gi);
            double *x = tmp_d(nx), *col = tmp_d(ncol), *want = tmp_d(ncol);
            kops_fill_uniform(&r, t, x, nx, -1, 1);
            for (int64_t c = 0; c < g.c; c++)
                for (int64_t i = 0; i < g.kh; i++)
                    for (int64_t j = 0; j < g.kw; j++)
                        for (int64_t oy = 0; oy < g.oh; oy++)
                            for (int64_t ox = 0; ox < g.ow; ox++) {
                                int64_t e = tap(&g, oy, ox, i, j);
                                want[((c * g.kh + i) * g.kw + j) * plane + oy * g.ow + ox] =
                                    e < 0 ? 0 : x[c * g.h * g.w + e];
                            }
            for (int64_t i = 0; i < ncol; i++) col[i] = GARBAGE;
            void *dx = kops_up(D, t, x, nx), *dc = kops_up(D, t, col, ncol);
            if (dx && dc) {
                KT->im2col(X, t, dx, &g, dc);
                if (kops_sync(D)) {
                    kops_down(D, t, dc, ncol, col);
                    kops_exact("col", col, want, ncol, false); /* copies and zeros */
                }
            }
            end_case();
        }
    }
}

static void test_col2im(void) {
    static const double betas[] = {0, 1, 0.3};
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int gi = 0; gi < N_ELEMS(GEOMS); gi++)
            for (int bi = 0; bi < N_ELEMS(betas); bi++) {
                lt_conv_geom g = geom_of(&GEOMS[gi]);
                double beta = betas[bi];
                if (!kops_case(D, K_COL2IM, t, GEOM_FMT " beta=%g", GEOM_ARGS(g), beta)) continue;
                int64_t nx = g.c * g.h * g.w, plane = g.oh * g.ow, ncol = g.c * g.kh * g.kw * plane;
                kops_rng r = kops_rng_make(20000 + (uint64_t)(gi * 10 + bi));
                double *x = tmp_d(nx), *col = tmp_d(ncol), *ref = tmp_d(nx), *sc = tmp_d(nx);
                kops_fill_uniform(&r, t, x, nx, -1, 1);
                kops_fill_uniform(&r, t, col, ncol, -1, 1);
                for (int64_t e = 0; e < nx; e++) {
                    if (beta == 0) x[e] = GARBAGE;
                    ref[e] = beta == 0 ? 0 : beta * x[e];
                    sc[e] = fabs(ref[e]);
                }
                for (int64_t c = 0; c < g.c; c++)
                    for (int64_t i = 0; i < g.kh; i++)
                        for (int64_t j = 0; j < g.kw; j++)
                            for (int64_t oy = 0; oy < g.oh; oy++)
                                for (int64_t ox = 0; ox < g.ow; ox++) {
                                    int64_t e = tap(&g, oy, ox, i, j);
                                    if (e < 0) continue;
                                    double v = col[((c * g.kh + i) * g.kw + j) * plane + oy * g.ow + ox];
                                    ref[c * g.h * g.w + e] += v;
                                    sc[c * g.h * g.w + e] += fabs(v);
                                }
                int64_t overlap = ((g.kh + g.sh - 1) / g.sh) * ((g.kw + g.sw - 1) / g.sw);
                void *dx = kops_up(D, t, x, nx), *dc = kops_up(D, t, col, ncol);
                if (dx && dc) {
                    KT->col2im(X, t, dc, &g, dx, beta);
                    if (kops_sync(D)) {
                        kops_down(D, t, dx, nx, x);
                        kops_close("x", t, x, ref, sc, nx, kops_tol_sum(t, overlap + 1));
                    }
                }
                end_case();
            }
    }
}

/* The window's winner as accelerator.h words it: the first maximum in
 * scan order (rows, then columns), a NaN beating every number and the last
 * NaN winning; padding never wins. */
static void pool_ref(const lt_conv_geom *g, const double *x, double *y, int32_t *arg) {
    for (int64_t p = 0; p < g->c; p++)
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                const double *in = x + p * g->h * g->w;
                int64_t best = -1, last_nan = -1;
                for (int64_t i = 0; i < g->kh; i++)
                    for (int64_t j = 0; j < g->kw; j++) {
                        int64_t e = tap(g, oy, ox, i, j);
                        if (e < 0) continue;
                        if (isnan(in[e])) last_nan = e;
                        else if (best < 0 || in[e] > in[best]) best = e;
                    }
                if (last_nan >= 0) best = last_nan;
                int64_t o = (p * g->oh + oy) * g->ow + ox;
                arg[o] = (int32_t)best;
                y[o] = best < 0 ? NAN : in[best];
            }
}

static void test_max_pool_fwd(void) {
    static const char *const flavours[] = {"random", "ties", "all negative", "with NaNs"};
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int gi = 0; gi < N_ELEMS(GEOMS); gi++)
            for (int fl = 0; fl < N_ELEMS(flavours); fl++) {
                lt_conv_geom g = geom_of(&GEOMS[gi]);
                if (!kops_case(D, K_MAX_POOL_FWD, t, GEOM_FMT " %s", GEOM_ARGS(g), flavours[fl]))
                    continue;
                int64_t nx = g.c * g.h * g.w, ny = g.c * g.oh * g.ow;
                kops_rng r = kops_rng_make(21000 + (uint64_t)(gi * 10 + fl));
                double *x = tmp_d(nx), *y = tmp_d(ny), *want = tmp_d(ny);
                int32_t *arg = tmp_alloc((size_t)ny * 4), *want_arg = tmp_alloc((size_t)ny * 4);
                kops_fill_uniform(&r, t, x, nx, fl == 2 ? -3 : -1, fl == 2 ? -1 : 1);
                for (int64_t e = 0; e < nx; e++) {
                    if (fl == 1) x[e] = (double)(int)(kops_rng_next(&r) % 3) - 1;
                    if (fl == 3 && kops_rng_next(&r) % 8 == 0) x[e] = NAN;
                }
                pool_ref(&g, x, want, want_arg);
                for (int64_t o = 0; o < ny; o++) y[o] = GARBAGE, arg[o] = -7;
                void *dx = kops_up(D, t, x, nx), *dy = kops_up(D, t, y, ny);
                void *da = kops_up_raw(D, arg, (size_t)ny * 4);
                if (dx && dy && da) {
                    KT->max_pool_fwd(X, t, dx, &g, dy, da);
                    if (kops_sync(D)) {
                        kops_down(D, t, dy, ny, y);
                        kops_down_raw(D, da, arg, (size_t)ny * 4);
                        kops_exact_i32("argmax", arg, want_arg, ny);
                        kops_exact("y", y, want, ny, false); /* the winner, as stored */
                    }
                }
                end_case();
            }
    }
}

static void test_max_pool_bwd(void) {
    static const double betas[] = {0, 1, 0.3};
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int gi = 0; gi < N_ELEMS(GEOMS); gi++)
            for (int bi = 0; bi < N_ELEMS(betas); bi++) {
                lt_conv_geom g = geom_of(&GEOMS[gi]);
                double beta = betas[bi];
                if (!kops_case(D, K_MAX_POOL_BWD, t, GEOM_FMT " beta=%g", GEOM_ARGS(g), beta))
                    continue;
                int64_t nx = g.c * g.h * g.w, ny = g.c * g.oh * g.ow;
                kops_rng r = kops_rng_make(22000 + (uint64_t)(gi * 10 + bi));
                double *x = tmp_d(nx), *y = tmp_d(ny), *dy = tmp_d(ny), *dx = tmp_d(nx),
                       *ref = tmp_d(nx), *sc = tmp_d(nx);
                int32_t *arg = tmp_alloc((size_t)ny * 4);
                int64_t *hits = tmp_alloc((size_t)nx * 8), most = 0;
                kops_fill_uniform(&r, t, x, nx, -1, 1);
                pool_ref(&g, x, y, arg); /* argmax from the reference, not the device */
                kops_fill_uniform(&r, t, dy, ny, -1, 1);
                kops_fill_uniform(&r, t, dx, nx, -1, 1);
                for (int64_t e = 0; e < nx; e++) {
                    if (beta == 0) dx[e] = GARBAGE;
                    ref[e] = beta == 0 ? 0 : beta * dx[e];
                    sc[e] = fabs(ref[e]);
                }
                for (int64_t p = 0; p < g.c; p++)
                    for (int64_t o = 0; o < g.oh * g.ow; o++) {
                        int64_t e = p * g.h * g.w + arg[p * g.oh * g.ow + o];
                        ref[e] += dy[p * g.oh * g.ow + o];
                        sc[e] += fabs(dy[p * g.oh * g.ow + o]);
                        most = imax(most, ++hits[e]);
                    }
                void *ddy = kops_up(D, t, dy, ny), *ddx = kops_up(D, t, dx, nx);
                void *da = kops_up_raw(D, arg, (size_t)ny * 4);
                if (ddy && ddx && da) {
                    KT->max_pool_bwd(X, t, ddy, da, &g, ddx, beta);
                    if (kops_sync(D)) {
                        kops_down(D, t, ddx, nx, dx);
                        kops_close("dx", t, dx, ref, sc, nx, kops_tol_sum(t, most + 1));
                    }
                }
                end_case();
            }
    }
}

/* ---- quantize_u8, dequantize_u8 ---------------------------------------------------------- *
 * accelerator.h fixes these bit for bit: the expressions as written, each
 * operation rounded to nearest in fp32 (f64: double), no fused
 * multiply-add (this file is built with -ffp-contract=off). The reference
 * below is those words in C: float variables for fp32, double for f64. */

typedef struct qchunk_ref {
    bool bad;        /* NaN, infinity, or (f64) beyond f32's range */
    float mn, mx;    /* stored bounds */
} qchunk_ref;

static float f32_down(double d) {
    float f = (float)d;
    return (double)f > d ? nextafterf(f, -INFINITY) : f;
}
static float f32_up(double d) {
    float f = (float)d;
    return (double)f < d ? nextafterf(f, INFINITY) : f;
}

/* The power of two the fp32 arithmetic is scaled by: 1/2 where max - min
 * overflows, 2^64 where it is below 2^-96, else 1. Double needs none (f32
 * bounds are at most 2^129 apart and at least 2^-149, both fine in double;
 * scaling there would be exact anyway). */
static float qscale(float mn, float mx) {
    float r = mx - mn;
    return isinf(r) ? 0.5f : (r > 0 && r < 0x1p-96f) ? 0x1p64f : 1.0f;
}

static qchunk_ref quant_ref(lt_dtype t, const double *x, int64_t len, uint8_t *q) {
    qchunk_ref c = {false, 0, 0};
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < len; i++) {
        if (!isfinite(x[i]) || fabs(x[i]) > FLT_MAX) c.bad = true;
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    if (c.bad) {
        c.mn = c.mx = NAN;
        memset(q, 0, (size_t)len);
        return c;
    }
    if (t == LT_F64) {
        c.mn = f32_down(lo), c.mx = f32_up(hi);
        double mn = c.mn, mx = c.mx;
        double range = mx - mn, inv = range == 0 ? 0 : 255 / range;
        for (int64_t i = 0; i < len; i++) q[i] = (uint8_t)nearbyint((x[i] - mn) * inv);
    } else {
        c.mn = (float)lo, c.mx = (float)hi; /* exact: f32, f16 and bf16 values */
        float s = qscale(c.mn, c.mx);
        float ms = c.mn * s, range = c.mx * s - ms;
        float inv = range == 0 ? 0 : 255 / range;
        for (int64_t i = 0; i < len; i++) {
            float xs = (float)x[i] * s, d = xs - ms, v = d * inv;
            q[i] = (uint8_t)nearbyintf(v);
        }
    }
    return c;
}

/* decode(q) of one element, before any store rounding */
static double dequant_ref(lt_dtype t, float mn, float mx, uint8_t q) {
    if (t == LT_F64) {
        double step = ((double)mx - (double)mn) / 255;
        double prod = (double)q * step;
        return (double)mn + prod;
    }
    float s = qscale(mn, mx);
    float ms = mn * s, step = (mx * s - ms) / 255;
    float prod = (float)q * step, d = ms + prod;
    return s == 1.0f ? d : d / s;
}

/* Quantize inputs: random, then chunk-wide specials where the chunks allow:
 * a constant chunk, a NaN, an infinity, (f64) a value past f32's range, a
 * range whose width overflows fp32, one narrower than 2^-96, subnormals. */
static void quant_inputs(kops_rng *r, lt_dtype t, double *x, int64_t n, int64_t chunk) {
    kops_fill_uniform(r, t, x, n, -1, 1);
    if (chunk < 3) {
        if (n > 2) x[1] = NAN, x[2] = INFINITY;
        return;
    }
    for (int64_t c0 = 0, k = 0; c0 < n; c0 += chunk, k++) {
        int64_t len = n - c0 < chunk ? n - c0 : chunk;
        double *xc = x + c0;
        switch (k % 9) {
        case 1: for (int64_t i = 0; i < len; i++) xc[i] = 0.25; break;
        case 2: xc[len / 2] = NAN; break;
        case 3: xc[len - 1] = -INFINITY; break;
        case 4: if (t == LT_F64) xc[0] = 1e39; break;
        case 5: /* wide: fp32's max - min overflows for f32, bf16 (f16 tops at 65504) */
            for (int64_t i = 0; i < len; i++)
                xc[i] = kops_round(t, xc[i] * kops_max_finite(t == LT_F64 ? LT_F32 : t));
            break;
        case 6: /* narrow: around 2^-100 (f16: its subnormals) */
            for (int64_t i = 0; i < len; i++)
                xc[i] = kops_round(t, t == LT_F16 ? (double)(i % 5) * 0x1p-24
                                                  : 0x1p-100 * (1 + (double)(i % 7) * 0x1p-7));
            break;
        case 7: /* subnormals of the dtype, and signed zeros */
            for (int64_t i = 0; i < len; i++)
                xc[i] = (double)((int64_t)(kops_rng_next(r) % 9) - 4) *
                        kops_min_subnormal(t == LT_F64 ? LT_F32 : t);
            break;
        default: break;
        }
    }
}

static void test_quantize(void) {
    static const int64_t sizes[] = {0, 1, 7, 33, 257, 4099, 20000};
    static const int64_t chunks[] = {1, 3, 64, 4096};
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int si = 0; si < N_ELEMS(sizes); si++)
            for (int ci = 0; ci < N_ELEMS(chunks); ci++) {
                int64_t n = sizes[si], chunk = chunks[ci], nch = (n + chunk - 1) / chunk;
                if (n > 4099 && chunk < 64) continue;
                if (!kops_case(D, K_QUANTIZE_U8, t, "n=%lld chunk=%lld", (long long)n, (long long)chunk))
                    continue;
                kops_rng r = kops_rng_make(23000 + (uint64_t)(si * 10 + ci));
                double *x = tmp_d(n), *mm = tmp_d(2 * nch), *want_mm = tmp_d(2 * nch);
                uint8_t *q = tmp_alloc((size_t)n), *want_q = tmp_alloc((size_t)n);
                float *mmf = tmp_alloc((size_t)(2 * nch) * 4);
                quant_inputs(&r, t, x, n, chunk);
                for (int64_t c = 0; c < nch; c++) {
                    int64_t c0 = c * chunk, len = n - c0 < chunk ? n - c0 : chunk;
                    qchunk_ref cr = quant_ref(t, x + c0, len, want_q + c0);
                    want_mm[2 * c] = cr.mn, want_mm[2 * c + 1] = cr.mx;
                }
                void *dx = kops_up(D, t, x, n), *dq = kops_alloc(D, (size_t)n);
                void *dm = kops_alloc(D, (size_t)(2 * nch) * 4);
                if (dx && dq && dm) {
                    KT->quantize_u8(X, t, dx, n, chunk, dq, dm);
                    if (kops_sync(D)) {
                        kops_down_raw(D, dq, q, (size_t)n);
                        kops_down_raw(D, dm, mmf, (size_t)(2 * nch) * 4);
                        for (int64_t i = 0; i < 2 * nch; i++) mm[i] = mmf[i];
                        kops_exact("minmax", mm, want_mm, 2 * nch, false);
                        kops_exact_bytes("q", q, want_q, n);
                    }
                }
                end_case();
            }
    }
}

static void test_dequantize(void) {
    static const int64_t sizes[] = {0, 1, 7, 33, 257, 4099};
    static const int64_t chunks[] = {1, 3, 64, 4096};
    static const double betas[] = {0, 0.3};
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int si = 0; si < N_ELEMS(sizes); si++)
            for (int ci = 0; ci < N_ELEMS(chunks); ci++)
                for (int bi = 0; bi < N_ELEMS(betas); bi++) {
                    int64_t n = sizes[si], chunk = chunks[ci], nch = (n + chunk - 1) / chunk;
                    double beta = betas[bi];
                    if (!kops_case(D, K_DEQUANTIZE_U8, t, "n=%lld chunk=%lld beta=%g", (long long)n,
                                   (long long)chunk, beta))
                        continue;
                    kops_rng r = kops_rng_make(24000 + (uint64_t)(si * 100 + ci * 10 + bi));
                    double *x = tmp_d(n), *y = tmp_d(n), *ref = tmp_d(n), *sc = tmp_d(n),
                           *dec = tmp_d(n);
                    uint8_t *q = tmp_alloc((size_t)n);
                    float *mm = tmp_alloc((size_t)(2 * nch) * 4);
                    quant_inputs(&r, t, x, n, chunk);
                    kops_fill_uniform(&r, t, y, n, -1, 1);
                    for (int64_t c = 0; c < nch; c++) {
                        int64_t c0 = c * chunk, len = n - c0 < chunk ? n - c0 : chunk;
                        qchunk_ref cr = quant_ref(t, x + c0, len, q + c0);
                        mm[2 * c] = cr.mn, mm[2 * c + 1] = cr.mx;
                        for (int64_t i = c0; i < c0 + len; i++) {
                            dec[i] = dequant_ref(t, cr.mn, cr.mx, q[i]);
                            if (beta == 0) y[i] = NAN; /* beta == 0 does not read y */
                            double by = beta == 0 ? 0 : beta * y[i];
                            ref[i] = by + dec[i];
                            sc[i] = fabs(by) + fabs(dec[i]);
                            /* accelerator.h's accuracy promise, checked on the
                             * reference itself: within (max - min) / 510 plus
                             * the rounding of the arithmetic */
                            if (!cr.bad && beta == 0) {
                                double mn = cr.mn, mx = cr.mx, big = dmax(fabs(mn), fabs(mx));
                                double lim = (mx - mn) / 510 +
                                             (t == LT_F64 ? 0x1p-48 * ((mx - mn) + big)
                                                          : 0x1p-20 * (mx - mn) + 0x1p-22 * big + 0x1p-149);
                                if (!(fabs(dec[i] - x[i]) <= lim)) {
                                    kops_fail("decode of x[%lld] = %.9g is %.9g: off by more than "
                                              "accelerator.h's %.3g (test reference)", (long long)i,
                                              x[i], dec[i], lim);
                                    break;
                                }
                            }
                        }
                    }
                    void *dq = kops_up_raw(D, q, (size_t)n), *dm = kops_up_raw(D, mm, (size_t)(2 * nch) * 4);
                    void *dy = kops_up(D, t, y, n);
                    if (dq && dm && dy) {
                        KT->dequantize_u8(X, t, dq, dm, n, chunk, dy, beta);
                        if (kops_sync(D)) {
                            kops_down(D, t, dy, n, y);
                            if (beta == 0) {
                                /* the same values on any accelerator: exact */
                                for (int64_t i = 0; i < n; i++) ref[i] = kops_round(t, ref[i]);
                                kops_exact("y", y, ref, n, false);
                            } else {
                                kops_close("y", t, y, ref, sc, n, kops_tol_elem(t));
                            }
                        }
                    }
                    end_case();
                }
    }
}

/* ---- cross-device equalities ---------------------------------------------------------------- *
 * The ABI makes these identical on every accelerator, not merely close:
 * dropout's mask for one (seed, offset), rand_fill's values ("counter-based
 * from (seed, offset)"; rng.h: the gpu implements the same formulas), the
 * quantize_u8 bytes and bounds and their decoding ("any accelerator decodes
 * the same bytes to the same values"). Compared byte for byte against the
 * reference accelerator (the cpu), at sizes that span many GPU blocks. */

static kops_dev *REF; /* the cpu, when another accelerator is under test */

static const int64_t XSIZES[] = {1, 7, 257, 4099, 65537, 1048579};

/* The largest sizes are there for a GPU's many blocks; a cpu-vs-cpu run
 * (the default) skips them to stay fast under sanitizers. */
static bool xdev_skip(const kops_dev *b, int64_t n) { return b->reference && n > 65537; }

static bool both_sync(kops_dev *a, kops_dev *b) {
    bool ok = kops_sync(a);
    return kops_sync(b) && ok;
}

static void xdev_dropout(kops_dev *b) {
    static const double ps[] = {0.1, 0.5, 0.9};
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int si = 0; si < N_ELEMS(XSIZES); si++)
            for (int pi = 0; pi < N_ELEMS(ps); pi++) {
                int64_t n = XSIZES[si];
                if (xdev_skip(b, n)) continue;
                uint64_t seed = SEEDS[(si + pi) % N_ELEMS(SEEDS)], off = OFFSETS[si % N_ELEMS(OFFSETS)];
                if (!kops_case(b, K_XDEV, t, "dropout_fwd mask n=%lld p=%g seed=%llu offset=%llu vs %s",
                               (long long)n, ps[pi], (unsigned long long)seed,
                               (unsigned long long)off, REF->name))
                    continue;
                double *x = tmp_d(n);
                for (int64_t i = 0; i < n; i++) x[i] = 1;
                uint8_t *ma = tmp_alloc((size_t)n), *mb = tmp_alloc((size_t)n);
                size_t yb = (size_t)n * lt_dtype_size(t);
                void *xa = kops_up(REF, t, x, n), *ya = kops_alloc(REF, yb), *da = kops_alloc(REF, (size_t)n);
                void *xb = kops_up(b, t, x, n), *yb_ = kops_alloc(b, yb), *db = kops_alloc(b, (size_t)n);
                if (xa && ya && da && xb && yb_ && db) {
                    REF->k->dropout_fwd(&REF->ctx, t, ya, da, xa, n, ps[pi], seed, off);
                    b->k->dropout_fwd(&b->ctx, t, yb_, db, xb, n, ps[pi], seed, off);
                    if (both_sync(REF, b)) {
                        kops_down_raw(REF, da, ma, (size_t)n);
                        kops_down_raw(b, db, mb, (size_t)n);
                        kops_exact_bytes("mask", mb, ma, n);
                    }
                }
                kops_end(b);
                tmp_free();
            }
    }
}

/* Uniform draws only: their transform is plain arithmetic, so every device
 * gives the same bits. A normal draw goes through log, sin and cos, whose
 * last bit the ABI does not fix between a host libm and a device's math
 * library; each device's normal values are held to the reference within a
 * tolerance instead (test_rand_fill). */
static void xdev_rand_fill(kops_dev *b) {
    static const struct { lt_rand_dist dist; double a, b; } cfg[] = {
        {LT_RAND_UNIFORM, -1, 1}, {LT_RAND_UNIFORM, 0.5, 2}};
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int si = 0; si < N_ELEMS(XSIZES); si++)
            for (int ci = 0; ci < N_ELEMS(cfg); ci++) {
                int64_t n = XSIZES[si];
                if (xdev_skip(b, n)) continue;
                uint64_t seed = SEEDS[(si + ci) % N_ELEMS(SEEDS)];
                uint64_t off = OFFSETS[(si + 1) % N_ELEMS(OFFSETS)] + (uint64_t)ci; /* odd ones too */
                if (!kops_case(b, K_XDEV, t, "rand_fill %s(%g, %g) n=%lld seed=%llu offset=%llu vs %s",
                               cfg[ci].dist == LT_RAND_UNIFORM ? "uniform" : "normal", cfg[ci].a,
                               cfg[ci].b, (long long)n, (unsigned long long)seed,
                               (unsigned long long)off, REF->name))
                    continue;
                size_t bytes = (size_t)n * lt_dtype_size(t);
                uint8_t *ha = tmp_alloc(bytes), *hb = tmp_alloc(bytes);
                void *da = kops_alloc(REF, bytes), *db = kops_alloc(b, bytes);
                if (da && db) {
                    REF->k->rand_fill(&REF->ctx, t, da, n, cfg[ci].dist, cfg[ci].a, cfg[ci].b, seed, off);
                    b->k->rand_fill(&b->ctx, t, db, n, cfg[ci].dist, cfg[ci].a, cfg[ci].b, seed, off);
                    if (both_sync(REF, b)) {
                        kops_down_raw(REF, da, ha, bytes);
                        kops_down_raw(b, db, hb, bytes);
                        if (memcmp(ha, hb, bytes) != 0) {
                            double *va = tmp_d(n), *vb = tmp_d(n);
                            kops_unpack(t, ha, n, va);
                            kops_unpack(t, hb, n, vb);
                            kops_exact("values", vb, va, n, true);
                            if (!kops_case_failed()) kops_fail("values: same numbers, different bits");
                        }
                    }
                }
                kops_end(b);
                tmp_free();
            }
    }
}

static void xdev_quantize(kops_dev *b) {
    static const int64_t chunks[] = {1, 64, 4096};
    for (int di = 0; di < KOPS_NDTYPES; di++) {
        lt_dtype t = KOPS_DTYPES[di];
        for (int si = 0; si < N_ELEMS(XSIZES); si++)
            for (int ci = 0; ci < N_ELEMS(chunks); ci++) {
                int64_t n = XSIZES[si], chunk = chunks[ci], nch = (n + chunk - 1) / chunk;
                if ((n > 65537 && chunk == 1) || xdev_skip(b, n)) continue;
                if (!kops_case(b, K_XDEV, t, "quantize_u8 + dequantize_u8 n=%lld chunk=%lld vs %s",
                               (long long)n, (long long)chunk, REF->name))
                    continue;
                kops_rng r = kops_rng_make(25000 + (uint64_t)(si * 10 + ci));
                double *x = tmp_d(n);
                quant_inputs(&r, t, x, n, chunk);
                size_t yb = (size_t)n * lt_dtype_size(t), mb = (size_t)(2 * nch) * 4;
                uint8_t *qa = tmp_alloc((size_t)n), *qb = tmp_alloc((size_t)n);
                uint8_t *ma = tmp_alloc(mb), *mbb = tmp_alloc(mb), *ya = tmp_alloc(yb), *ybb = tmp_alloc(yb);
                void *xa = kops_up(REF, t, x, n), *dqa = kops_alloc(REF, (size_t)n);
                void *dma = kops_alloc(REF, mb), *dya = kops_alloc(REF, yb);
                void *xb = kops_up(b, t, x, n), *dqb = kops_alloc(b, (size_t)n);
                void *dmb = kops_alloc(b, mb), *dyb = kops_alloc(b, yb);
                if (xa && dqa && dma && dya && xb && dqb && dmb && dyb) {
                    REF->k->quantize_u8(&REF->ctx, t, xa, n, chunk, dqa, dma);
                    b->k->quantize_u8(&b->ctx, t, xb, n, chunk, dqb, dmb);
                    if (both_sync(REF, b)) {
                        kops_down_raw(REF, dqa, qa, (size_t)n);
                        kops_down_raw(b, dqb, qb, (size_t)n);
                        kops_down_raw(REF, dma, ma, mb);
                        kops_down_raw(b, dmb, mbb, mb);
                        kops_exact_bytes("q", qb, qa, n);
                        kops_exact_bytes("minmax bytes", mbb, ma, (int64_t)mb);
                        /* decode the reference's bytes on both */
                        if (b->acc->copy(&b->ctx, dqb, qa, (size_t)n, LT_COPY_H2D) != LT_OK ||
                            b->acc->copy(&b->ctx, dmb, ma, mb, LT_COPY_H2D) != LT_OK)
                            kops_fail("copy H2D failed: %s", lt_last_error(&b->ctx));
                        REF->k->dequantize_u8(&REF->ctx, t, dqa, dma, n, chunk, dya, 0);
                        b->k->dequantize_u8(&b->ctx, t, dqb, dmb, n, chunk, dyb, 0);
                        if (both_sync(REF, b)) {
                            kops_down_raw(REF, dya, ya, yb);
                            kops_down_raw(b, dyb, ybb, yb);
                            kops_exact_bytes("decoded bytes", ybb, ya, (int64_t)yb);
                        }
                    }
                }
                kops_end(b);
                tmp_free();
            }
    }
}

static void test_cross_device(void) {
    if (!REF || REF == D) return;
    xdev_dropout(D);
    xdev_rand_fill(D);
    xdev_quantize(D);
}

/* ---- the program -------------------------------------------------------------------------- */

static void run_kernel(void (*fn)(void), kops_kernel k, kops_kernel k2) {
    for (kops_kernel kk = k; kk <= k2; kk++)
        if (!kops_has_kernel(D, kk)) {
            /* ABI 1.0's kernels are required of every accelerator; later ones
             * an older accelerator may lack (LT_KERNELS_HAS), never the cpu */
            bool required = D->reference || kk <= K_RAND_FILL;
            printf("  [%s] %s: absent from the kernel table%s\n", D->name, kops_kernel_name(kk),
                   required ? " (required)" : "; skipped");
            if (required) CU_FAIL("kernel absent");
            return;
        }
    int before = kops_failed_total();
    fn();
    CU_ASSERT_EQUAL(kops_failed_total(), before);
}

#define KTEST(fn, k, k2) static void cu_##fn(void) { run_kernel(test_##fn, k, k2); }
KTEST(gemm, K_GEMM, K_GEMM)
KTEST(fill, K_FILL, K_FILL)
KTEST(axpby, K_AXPBY, K_AXPBY)
KTEST(add_bias, K_ADD_BIAS, K_ADD_BIAS)
KTEST(sum_rows, K_SUM_ROWS, K_SUM_ROWS)
KTEST(act_fwd, K_ACT_FWD, K_ACT_FWD)
KTEST(act_bwd, K_ACT_BWD, K_ACT_BWD)
KTEST(dropout_fwd, K_DROPOUT_FWD, K_DROPOUT_FWD)
KTEST(dropout_bwd, K_DROPOUT_BWD, K_DROPOUT_BWD)
KTEST(xent_fwd, K_XENT_FWD, K_XENT_FWD)
KTEST(xent_bwd, K_XENT_BWD, K_XENT_BWD)
KTEST(mse, K_MSE_FWD, K_MSE_BWD)
KTEST(count_correct, K_COUNT_CORRECT, K_COUNT_CORRECT)
KTEST(cast, K_CAST, K_CAST)
KTEST(sumsq, K_SUMSQ, K_SUMSQ)
KTEST(all_finite, K_ALL_FINITE, K_ALL_FINITE)
KTEST(sgd, K_SGD_STEP, K_SGD_STEP)
KTEST(adamw, K_ADAMW_STEP, K_ADAMW_STEP)
KTEST(rand_fill, K_RAND_FILL, K_RAND_FILL)
KTEST(im2col, K_IM2COL, K_IM2COL)
KTEST(col2im, K_COL2IM, K_COL2IM)
KTEST(max_pool_fwd, K_MAX_POOL_FWD, K_MAX_POOL_FWD)
KTEST(max_pool_bwd, K_MAX_POOL_BWD, K_MAX_POOL_BWD)
KTEST(clamp, K_CLAMP, K_CLAMP)
KTEST(quantize, K_QUANTIZE_U8, K_QUANTIZE_U8)
KTEST(dequantize, K_DEQUANTIZE_U8, K_DEQUANTIZE_U8)
KTEST(qadam, K_QADAM_STEP, K_QADAM_STEP)
static void cu_cross_device(void) {
    if (!REF || REF == D) return;
    if (!kops_has_kernel(D, K_QUANTIZE_U8) || !kops_has_kernel(REF, K_QUANTIZE_U8)) {
        printf("  [%s] cross-device: no quantize_u8; checking dropout and rand_fill only\n", D->name);
        int before = kops_failed_total();
        xdev_dropout(D);
        xdev_rand_fill(D);
        CU_ASSERT_EQUAL(kops_failed_total(), before);
        return;
    }
    int before = kops_failed_total();
    test_cross_device();
    CU_ASSERT_EQUAL(kops_failed_total(), before);
}

static const struct { const char *name; CU_TestFunc fn; } TESTS[] = {
    {"gemm", cu_gemm}, {"fill", cu_fill}, {"axpby", cu_axpby}, {"add_bias", cu_add_bias},
    {"sum_rows", cu_sum_rows}, {"act_fwd", cu_act_fwd}, {"act_bwd", cu_act_bwd},
    {"dropout_fwd", cu_dropout_fwd}, {"dropout_bwd", cu_dropout_bwd}, {"xent_fwd", cu_xent_fwd},
    {"xent_bwd", cu_xent_bwd}, {"mse_fwd/mse_bwd", cu_mse}, {"count_correct", cu_count_correct},
    {"cast", cu_cast}, {"sumsq", cu_sumsq}, {"all_finite", cu_all_finite}, {"sgd_step", cu_sgd},
    {"adamw_step", cu_adamw}, {"rand_fill", cu_rand_fill}, {"im2col", cu_im2col},
    {"col2im", cu_col2im}, {"max_pool_fwd", cu_max_pool_fwd}, {"max_pool_bwd", cu_max_pool_bwd},
    {"clamp", cu_clamp}, {"quantize_u8", cu_quantize}, {"dequantize_u8", cu_dequantize},
    {"qadam_step", cu_qadam}, {"cross-device", cu_cross_device},
};

#define MAX_ACC 4
static kops_dev g_devs[MAX_ACC];
static int g_ndevs;

/* CUnit's suite set-up takes no argument: one per slot, each pointing the
 * kernel tests at its accelerator. */
static int suite_set(int i) {
    D = &g_devs[i];
    KT = D->k;
    X = &D->ctx;
    return 0;
}
static int suite_init0(void) { return suite_set(0); }
static int suite_init1(void) { return suite_set(1); }
static int suite_init2(void) { return suite_set(2); }
static int suite_init3(void) { return suite_set(3); }
static int (*const SUITE_INITS[MAX_ACC])(void) = {suite_init0, suite_init1, suite_init2, suite_init3};

static int usage(const char *argv0) {
    fprintf(stderr, "usage: %s [--accelerator NAME|all]... [--reference NAME] [--kernel NAME] "
                    "[--dtype f32|f64|f16|bf16] [-v]\n",
            argv0);
    return 2;
}

int main(int argc, char **argv) {
    char names[MAX_ACC][64];
    int nnames = 0;
    const char *ref_name = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--accelerator") && i + 1 < argc) {
            const char *a = argv[++i];
            if (!strcmp(a, "all")) {
                nnames = kops_list_accelerators(names, MAX_ACC);
            } else if (nnames < MAX_ACC) {
                snprintf(names[nnames++], 64, "%s", a);
            }
        } else if (!strcmp(argv[i], "--kernel") && i + 1 < argc) {
            kops_only_kernel = argv[++i];
        } else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            lt_dtype t;
            if (lt_dtype_parse(argv[++i], &t) != 0) return usage(argv[0]);
            kops_only_dtype = (int)t;
        } else if (!strcmp(argv[i], "--reference") && i + 1 < argc) {
            ref_name = argv[++i];
        } else if (!strcmp(argv[i], "-v")) {
            kops_verbose = true;
        } else {
            return usage(argv[0]);
        }
    }
    /* Without arguments: the cpu, and the cross-device checks run against
     * a second cpu context, so that their code runs everywhere (a gpu run
     * compares against the cpu). */
    if (!nnames) {
        snprintf(names[nnames++], 64, "cpu");
        if (!ref_name) ref_name = "cpu";
    }
    double t0 = lt_now();

    /* The accelerators under test, then the cpu as the reference for the
     * cross-device checks when it is not one of them. */
    int skipped = 0, broken = 0, ref_index = -1;
    for (int i = 0; i < nnames; i++) {
        int rc = kops_dev_open(&g_devs[g_ndevs], names[i]);
        if (rc == 0) {
            if (g_devs[g_ndevs].reference) ref_index = g_ndevs;
            g_ndevs++;
        } else if (rc > 0) {
            skipped++;
        } else {
            broken++;
        }
    }
    int tested = g_ndevs;
    if (ref_name || (ref_index < 0 && tested > 0)) { /* a context of its own */
        ref_index = -1;
        if (tested > 0 && g_ndevs < MAX_ACC) {
            if (kops_dev_open(&g_devs[g_ndevs], ref_name ? ref_name : "cpu") == 0) ref_index = g_ndevs++;
            else broken++;
        }
    }
    REF = ref_index >= 0 ? &g_devs[ref_index] : NULL;
    if (tested == 0) {
        if (broken) return 1;
        printf("no accelerator asked for is available here: skipped (77)\n");
        return 77;
    }

    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    for (int d = 0; d < tested; d++) {
        char sname[96];
        snprintf(sname, sizeof sname, "kernel ops [%s]", g_devs[d].name);
        CU_pSuite s = CU_add_suite(sname, SUITE_INITS[d], NULL);
        for (int i = 0; s && i < N_ELEMS(TESTS); i++)
            if (!CU_add_test(s, TESTS[i].name, TESTS[i].fn)) s = NULL;
        if (!s) {
            CU_cleanup_registry();
            return 1;
        }
    }
    int rc = lt_cunit_run();
    int failed = 0;
    for (int d = 0; d < tested; d++) failed += kops_report(&g_devs[d]);
    for (int d = 0; d < g_ndevs; d++) kops_dev_close(&g_devs[d]);
    printf("%.1f s\n", lt_now() - t0);
    return rc || failed || broken ? 1 : 0;
}
