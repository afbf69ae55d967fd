/* The cpu accelerator's kernels on f16 and bf16 data (mixed precision).
 *
 * The contract checked: a 16-bit kernel gives what the f32 kernel gives on
 * the widened inputs, rounded once to the dtype (to nearest even, NaN kept:
 * plugins/common/half.h), so the reference for every case is the f32 kernel
 * of the same plugin on the widened data, narrowed by half.h here. Inputs
 * are 16-bit values (random ones, plus NaN, infinities, -0 and subnormals
 * where the f32 kernel defines what happens to them).
 *
 * Exact (bit for bit, any NaN for NaN) where the 16-bit loop performs the
 * f32 loop's own fp32 operations in the same order: copies, selections,
 * single operations, libm calls, sums kept in fp32. Within one unit in the
 * last place of the dtype where the f32 expression has a multiply feeding
 * an add (beta * dx + g, a * x + b * y, the optimizer updates): GCC may
 * contract it into an FMA in one loop and not in the other (the AVX2 clone;
 * -ffp-contract=fast is GCC's default), which moves the fp32 value by an
 * fp32 rounding and can move its 16-bit rounding by one unit. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/half.h"
#include "config/config.h"
#include "cpu_plugin.h"
#include "cunit_run.h"

static const lt_accelerator_desc *g_acc;
static const lt_kernels *K;
static lt_ctx g_ctx;
static lt_ctx *C = &g_ctx;

static const lt_dtype HALVES[2] = {LT_F16, LT_BF16};
#define FOR_EACH_HALF(t)                                                                   \
    for (int t##_k = 0; t##_k < 2; t##_k++)                                                \
        for (lt_dtype t = HALVES[t##_k]; t != LT_F32; t = LT_F32)

/* ---- 16-bit helpers (the reference rounding is half.h's) ------------------ */

static float h2f(lt_dtype t, uint16_t h) {
    return t == LT_F16 ? half_f16_to_f32(h) : half_bf16_to_f32(h);
}
static uint16_t f2h(lt_dtype t, float f) {
    return t == LT_F16 ? half_f32_to_f16(f) : half_f32_to_bf16(f);
}
static uint16_t qnan16(lt_dtype t) { return t == LT_F16 ? 0x7E00 : 0x7FC0; }
static uint16_t inf16(lt_dtype t) { return t == LT_F16 ? 0x7C00 : 0x7F80; }
static bool isnan16(lt_dtype t, uint16_t h) { return isnan(h2f(t, h)); }

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}
/* Uniform in [lo, hi). */
static double urand(uint64_t *s, double lo, double hi) {
    return lo + (hi - lo) * (double)lcg(s) * 0x1p-53;
}

/* n random 16-bit values in [lo, hi) (the f32 value rounded). */
static uint16_t *h_rand(lt_dtype t, int64_t n, double lo, double hi, uint64_t seed) {
    uint16_t *h = malloc((size_t)(n ? n : 1) * 2);
    for (int64_t i = 0; i < n; i++) h[i] = f2h(t, (float)urand(&seed, lo, hi));
    return h;
}

/* Puts NaN (both signs), both infinities, -0, +0, the smallest subnormal
 * and the largest finite value at spread-out positions (n >= 8). */
static void h_specials(lt_dtype t, uint16_t *h, int64_t n) {
    const uint16_t sp[] = {qnan16(t), inf16(t), (uint16_t)(inf16(t) | 0x8000), 0x8000, 0x0000,
                           0x0001, (uint16_t)(inf16(t) - 1), (uint16_t)(qnan16(t) | 0x8000)};
    for (int k = 0; k < 8; k++) h[(int64_t)k * n / 8 + (n >= 64 ? 3 : 0)] = sp[k];
}

static float *widen(lt_dtype t, const uint16_t *h, int64_t n) {
    float *f = malloc((size_t)(n ? n : 1) * 4);
    for (int64_t i = 0; i < n; i++) f[i] = h2f(t, h[i]);
    return f;
}

static uint16_t *narrow(lt_dtype t, const float *f, int64_t n) {
    uint16_t *h = malloc((size_t)(n ? n : 1) * 2);
    for (int64_t i = 0; i < n; i++) h[i] = f2h(t, f[i]);
    return h;
}

static uint16_t *h_copy(const uint16_t *h, int64_t n) {
    uint16_t *c = malloc((size_t)(n ? n : 1) * 2);
    memcpy(c, h, (size_t)n * 2);
    return c;
}

static uint16_t *h_const(int64_t n, uint16_t v) {
    uint16_t *h = malloc((size_t)(n ? n : 1) * 2);
    for (int64_t i = 0; i < n; i++) h[i] = v;
    return h;
}

/* Both formats are sign and magnitude, the magnitude's bits ordered as its
 * values: this maps them onto integers in value order (+0 and -0 both 0),
 * so a difference of 1 is one unit in the last place (largest finite to
 * infinity included). */
static int64_t ordered(uint16_t h) {
    return (h & 0x8000) ? -(int64_t)(h & 0x7FFF) : (int64_t)h;
}

/* One assertion per array: got equals want bit for bit (ulps 0; any NaN
 * matches any NaN), or lies within `ulps` units of it; the first mismatch
 * is printed. */
static void check16(const char *what, lt_dtype t, const uint16_t *got, const uint16_t *want,
                    int64_t n, int ulps) {
    for (int64_t i = 0; i < n; i++) {
        bool gn = isnan16(t, got[i]), wn = isnan16(t, want[i]);
        bool ok = gn || wn ? gn == wn
                  : ulps == 0 ? got[i] == want[i]
                              : llabs(ordered(got[i]) - ordered(want[i])) <= ulps;
        if (!ok) {
            printf("\n  %s (%s) [%lld]: got 0x%04x (%.9g), want 0x%04x (%.9g)\n", what,
                   lt_dtype_name(t), (long long)i, got[i], h2f(t, got[i]), want[i],
                   h2f(t, want[i]));
            CU_FAIL(what);
            return;
        }
    }
    CU_PASS(what);
}

static void expect_sync_ok(void) {
    lt_status s = g_acc->synchronize(C);
    if (s != LT_OK) printf("\n  unexpected kernel error: %s\n", lt_last_error(C));
    CU_ASSERT_EQUAL(s, LT_OK);
}

static int suite_init(void) { return cpu_plugin_open(&g_acc, C, &K); }

static int suite_clean(void) {
    if (g_acc) g_acc->teardown(C);
    return 0;
}

/* ---- every 16-bit pattern ------------------------------------------------------ */

/* axpby with b = 0 and relu see every one of the 65536 inputs: the loads
 * (f16's is branch-free in the plugin, to vectorise) must give half.h's
 * value for each, and the stores its rounding. */
static void test_every_pattern(void) {
    enum { N = 65536 };
    uint16_t *x = malloc(N * 2), *y = malloc(N * 2), *want = malloc(N * 2);
    for (int i = 0; i < N; i++) x[i] = (uint16_t)i;
    const float as[] = {0.5f, 3.0f, -1.0f};
    FOR_EACH_HALF(t) {
        for (int k = 0; k < 3; k++) {
            K->axpby(C, t, N, as[k], x, 0.0, y);
            for (int i = 0; i < N; i++) want[i] = f2h(t, as[k] * h2f(t, x[i]));
            check16("axpby every pattern", t, y, want, N, 0);
        }
        K->act_fwd(C, t, LT_ACT_RELU, y, x, N);
        for (int i = 0; i < N; i++) want[i] = h2f(t, x[i]) < 0 ? 0 : x[i];
        check16("relu every pattern", t, y, want, N, 0);
        /* relu copies what it keeps, bit for bit (NaN payloads, -0): all
         * but the negatives 0x8001 ..= -inf. */
        int bits_kept = 0;
        for (int i = 0; i < N; i++) bits_kept += y[i] == x[i];
        CU_ASSERT_EQUAL(bits_kept, N - inf16(t));
        expect_sync_ok();
    }
    free(x), free(y), free(want);
}

/* ---- element-wise ------------------------------------------------------------- */

/* fill: v rounded to f32 as the f32 kernel does, then to the dtype. */
static void test_fill(void) {
    const double vals[] = {-1.25, 0.1, 1e-7, 7e4, -0.0, INFINITY, -INFINITY, NAN, 3e38, 1e-40};
    enum { N = 37 };
    uint16_t x[N], want[N];
    FOR_EACH_HALF(t) {
        for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) {
            K->fill(C, t, x, N, vals[k]);
            for (int i = 0; i < N; i++) want[i] = f2h(t, (float)vals[k]);
            check16("fill", t, x, want, N, 0);
        }
        expect_sync_ok();
    }
}

static void test_axpby(void) {
    enum { N = 1001 };
    FOR_EACH_HALF(t) {
        uint16_t *x = h_rand(t, N, -4, 4, 1), *y = h_rand(t, N, -4, 4, 2);
        h_specials(t, x, N);
        float *fx = widen(t, x, N), *fy = widen(t, y, N);
        K->axpby(C, t, N, 2.0, x, -0.5, y);
        K->axpby(C, LT_F32, N, 2.0, fx, -0.5, fy);
        uint16_t *want = narrow(t, fy, N);
        check16("axpby", t, y, want, N, 1); /* a * x + b * y: FMA */
        free(want);
        /* b = 0 overwrites: y (NaN garbage) is never read; one product. */
        uint16_t *g = h_const(N, qnan16(t));
        K->axpby(C, t, N, 3.0, x, 0.0, g);
        K->axpby(C, LT_F32, N, 3.0, fx, 0.0, fy);
        want = narrow(t, fy, N);
        check16("axpby b=0", t, g, want, N, 0);
        free(want);
        /* In place (x == y). */
        float *fg = widen(t, g, N);
        K->axpby(C, t, N, 2.0, g, 0.5, g);
        K->axpby(C, LT_F32, N, 2.0, fg, 0.5, fg);
        want = narrow(t, fg, N);
        check16("axpby in place", t, g, want, N, 1);
        expect_sync_ok();
        free(x), free(y), free(fx), free(fy), free(want), free(g), free(fg);
    }
}

/* Bounds that are not 16-bit values are rounded; NaN stays NaN (the same
 * bits), infinities are clamped. */
static void test_clamp(void) {
    enum { N = 515 };
    const double bounds[][2] = {{-0.3, 0.7}, {-0.5, 0.5}, {-INFINITY, 0.1}, {1e-6, 1e5}};
    FOR_EACH_HALF(t) {
        for (int b = 0; b < 4; b++) {
            uint16_t *x = h_rand(t, N, -2, 2, 3 + (uint64_t)b);
            h_specials(t, x, N);
            uint16_t *orig = h_copy(x, N);
            float *fx = widen(t, x, N);
            K->clamp(C, t, x, N, bounds[b][0], bounds[b][1]);
            K->clamp(C, LT_F32, fx, N, bounds[b][0], bounds[b][1]);
            uint16_t *want = narrow(t, fx, N);
            check16("clamp", t, x, want, N, 0);
            int nan_bits = 0;
            for (int i = 0; i < N; i++)
                nan_bits += isnan16(t, orig[i]) && x[i] != orig[i];
            CU_ASSERT_EQUAL(nan_bits, 0);
            free(x), free(orig), free(fx), free(want);
        }
        expect_sync_ok();
    }
}

static void test_add_bias(void) {
    enum { R = 9, COLS = 1037 };
    FOR_EACH_HALF(t) {
        uint16_t *y = h_rand(t, R * COLS, -8, 8, 5), *b = h_rand(t, COLS, -8, 8, 6);
        h_specials(t, y, R * COLS);
        h_specials(t, b, COLS);
        float *fy = widen(t, y, R * COLS), *fb = widen(t, b, COLS);
        K->add_bias(C, t, y, b, R, COLS);
        K->add_bias(C, LT_F32, fy, fb, R, COLS);
        uint16_t *want = narrow(t, fy, R * COLS);
        check16("add_bias", t, y, want, R * COLS, 0); /* one sum, one rounding */
        expect_sync_ok();
        free(y), free(b), free(fy), free(fb), free(want);
    }
}

/* The 16-bit sums run in fp32 in the f32 kernel's order (beta * out, then
 * row by row), over more columns than the kernel's stack block. */
static void test_sum_rows(void) {
    enum { R = 7, COLS = 1100 };
    const double betas[] = {0, 1, 2};
    FOR_EACH_HALF(t) {
        uint16_t *x = h_rand(t, R * COLS, -3, 3, 7);
        x[5] = qnan16(t);
        x[COLS + 700] = inf16(t);
        float *fx = widen(t, x, R * COLS);
        for (int k = 0; k < 3; k++) {
            uint16_t *out = k == 0 ? h_const(COLS, qnan16(t)) : h_rand(t, COLS, -3, 3, 8);
            float *fo = widen(t, out, COLS);
            K->sum_rows(C, t, out, x, R, COLS, betas[k]);
            K->sum_rows(C, LT_F32, fo, fx, R, COLS, betas[k]);
            uint16_t *want = narrow(t, fo, COLS);
            check16("sum_rows", t, out, want, COLS, 0);
            CU_ASSERT_TRUE(isnan16(t, out[5]));
            CU_ASSERT_EQUAL(out[700], inf16(t));
            free(out), free(fo), free(want);
        }
        /* A sum a 16-bit accumulator would lose: 4096 ones in f16 (bf16 stops
         * at 256, f16 at 2048 when summed in the dtype). */
        enum { TALL = 4096 };
        uint16_t *ones = h_const(TALL * 3, f2h(t, 1.0f)), out[3];
        K->sum_rows(C, t, out, ones, TALL, 3, 0.0);
        for (int c = 0; c < 3; c++) CU_ASSERT_EQUAL(h2f(t, out[c]), 4096.0f);
        expect_sync_ok();
        free(x), free(fx), free(ones);
    }
}

/* ---- activations ------------------------------------------------------------------ */

static const lt_act ACTS[3] = {LT_ACT_RELU, LT_ACT_TANH, LT_ACT_GELU};

static void test_act_fwd(void) {
    enum { N = 2049 };
    FOR_EACH_HALF(t) {
        for (int a = 0; a < 3; a++) {
            uint16_t *x = h_rand(t, N, -6, 6, 9), *y = malloc(N * 2);
            h_specials(t, x, N);
            float *fx = widen(t, x, N), *fy = malloc(N * 4);
            K->act_fwd(C, t, ACTS[a], y, x, N);
            K->act_fwd(C, LT_F32, ACTS[a], fy, fx, N);
            uint16_t *want = narrow(t, fy, N);
            check16("act_fwd", t, y, want, N, 0); /* the same fp32 value, rounded */
            /* In place. */
            K->act_fwd(C, t, ACTS[a], x, x, N);
            check16("act_fwd in place", t, x, want, N, 0);
            free(x), free(y), free(fx), free(fy), free(want);
        }
        expect_sync_ok();
    }
}

/* beta = 0 overwrites dx (NaN garbage is never read). */
static void test_act_bwd(void) {
    enum { N = 2049 };
    const double betas[] = {0, 0.5};
    FOR_EACH_HALF(t) {
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 2; b++) {
                uint16_t *x = h_rand(t, N, -4, 4, 10), *y = malloc(N * 2);
                uint16_t *dy = h_rand(t, N, -2, 2, 11);
                x[N / 2] = qnan16(t);
                dy[7] = qnan16(t);
                dy[8] = inf16(t);
                K->act_fwd(C, t, ACTS[a], y, x, N);
                uint16_t *dx = b == 0 ? h_const(N, qnan16(t)) : h_rand(t, N, -1, 1, 12);
                float *fx = widen(t, x, N), *fy = widen(t, y, N), *fdy = widen(t, dy, N);
                float *fdx = widen(t, dx, N);
                K->act_bwd(C, t, ACTS[a], dx, dy, x, y, N, betas[b]);
                K->act_bwd(C, LT_F32, ACTS[a], fdx, fdy, fx, fy, N, betas[b]);
                uint16_t *want = narrow(t, fdx, N);
                /* relu with beta 0 selects dy (exact); the rest multiply and add. */
                check16("act_bwd", t, dx, want, N, ACTS[a] == LT_ACT_RELU && b == 0 ? 0 : 1);
                free(x), free(y), free(dy), free(dx), free(fx), free(fy), free(fdy), free(fdx);
                free(want);
            }
        expect_sync_ok();
    }
}

/* ---- dropout ---------------------------------------------------------------- */

/* Same (seed, offset): the same mask as f32; kept elements x * scale
 * (one product), dropped ones +0. */
static void test_dropout(void) {
    enum { N = 10001 };
    const double ps[] = {0.3, 0.0, 1.0};
    FOR_EACH_HALF(t) {
        for (int k = 0; k < 3; k++) {
            double p = ps[k];
            uint16_t *x = h_rand(t, N, -4, 4, 13), *y = malloc(N * 2);
            h_specials(t, x, N);
            uint8_t *mask = malloc(N), *fmask = malloc(N);
            float *fx = widen(t, x, N), *fy = malloc(N * 4);
            K->dropout_fwd(C, t, y, mask, x, N, p, 42, 123);
            K->dropout_fwd(C, LT_F32, fy, fmask, fx, N, p, 42, 123);
            CU_ASSERT_EQUAL(memcmp(mask, fmask, N), 0);
            uint16_t *want = narrow(t, fy, N);
            check16("dropout_fwd", t, y, want, N, 0);
            free(want);
            const double betas[] = {0, 1.5};
            for (int b = 0; b < 2; b++) {
                uint16_t *dy = h_rand(t, N, -2, 2, 14);
                uint16_t *dx = b == 0 ? h_const(N, qnan16(t)) : h_rand(t, N, -1, 1, 15);
                float *fdy = widen(t, dy, N), *fdx = widen(t, dx, N);
                K->dropout_bwd(C, t, dx, dy, mask, N, p, betas[b]);
                K->dropout_bwd(C, LT_F32, fdx, fdy, fmask, N, p, betas[b]);
                want = narrow(t, fdx, N);
                check16("dropout_bwd", t, dx, want, N, b == 0 ? 0 : 1);
                free(dy), free(dx), free(fdy), free(fdx), free(want);
            }
            free(x), free(y), free(mask), free(fmask), free(fx), free(fy);
        }
        expect_sync_ok();
    }
}

/* ---- losses ------------------------------------------------------------------------ */

/* Softmax and log-sum-exp in fp32 (the f32 kernel's values), probs and
 * loss stored in the dtype, each rounded once. */
static void test_xent(void) {
    const int shapes[][2] = {{6, 10}, {3, 1000}, {1, 1}};
    FOR_EACH_HALF(t) {
        for (int s = 0; s < 3; s++) {
            int rows = shapes[s][0], cols = shapes[s][1], n = rows * cols;
            uint16_t *logits = h_rand(t, n, -8, 8, 16 + (uint64_t)s), *probs = malloc(n * 2);
            int32_t labels[6];
            uint64_t seed = 17;
            for (int r = 0; r < rows; r++) labels[r] = (int32_t)(lcg(&seed) % (uint64_t)cols);
            float *fl = widen(t, logits, n), *fp = malloc(n * 4), floss = 0;
            uint16_t loss = 0;
            K->xent_fwd(C, t, logits, labels, rows, cols, probs, &loss);
            K->xent_fwd(C, LT_F32, fl, labels, rows, cols, fp, &floss);
            uint16_t *want = narrow(t, fp, n), wl = f2h(t, floss);
            check16("xent_fwd probs", t, probs, want, n, 0);
            check16("xent_fwd loss", t, &loss, &wl, 1, 0);
            free(want);
            /* Backward from the 16-bit probs, also in place. */
            float *fpr = widen(t, probs, n), *fd = malloc(n * 4);
            uint16_t *d = malloc(n * 2);
            K->xent_bwd(C, t, d, probs, labels, rows, cols, 1.0 / rows);
            K->xent_bwd(C, LT_F32, fd, fpr, labels, rows, cols, 1.0 / rows);
            want = narrow(t, fd, n);
            check16("xent_bwd", t, d, want, n, 0); /* p - 1, then one product */
            K->xent_bwd(C, t, probs, probs, labels, rows, cols, 1.0 / rows);
            check16("xent_bwd in place", t, probs, want, n, 0);
            expect_sync_ok();
            free(logits), free(probs), free(fl), free(fp), free(fpr), free(fd), free(d);
            free(want);
        }
        /* A NaN logit makes its row's loss NaN. */
        uint16_t lg[4] = {f2h(t, 1), qnan16(t), f2h(t, 2), f2h(t, 3)}, pr[4], loss;
        int32_t lab[2] = {0, 1};
        K->xent_fwd(C, t, lg, lab, 2, 2, pr, &loss);
        CU_ASSERT_TRUE(isnan16(t, loss));
        expect_sync_ok();
    }
}

static void test_mse(void) {
    enum { N = 1001 };
    FOR_EACH_HALF(t) {
        uint16_t *p = h_rand(t, N, -3, 3, 18), *g = h_rand(t, N, -3, 3, 19);
        float *fp = widen(t, p, N), *fg = widen(t, g, N), floss;
        uint16_t loss, *d = malloc(N * 2);
        float *fd = malloc(N * 4);
        K->mse_fwd(C, t, p, g, N, &loss);
        K->mse_fwd(C, LT_F32, fp, fg, N, &floss);
        uint16_t wl = f2h(t, floss);
        check16("mse_fwd", t, &loss, &wl, 1, 0); /* summed in double, as f32 does */
        K->mse_bwd(C, t, d, p, g, N, 0.5);
        K->mse_bwd(C, LT_F32, fd, fp, fg, N, 0.5);
        uint16_t *want = narrow(t, fd, N);
        check16("mse_bwd", t, d, want, N, 0);
        expect_sync_ok();
        free(p), free(g), free(fp), free(fg), free(d), free(fd), free(want);
    }
}

/* Ties (first wins) and NaN (wins) as f32, on the same widened values. */
static void test_count_correct(void) {
    enum { R = 64, COLS = 7 };
    FOR_EACH_HALF(t) {
        uint16_t *x = h_rand(t, R * COLS, -1, 1, 20);
        int32_t labels[R];
        uint64_t seed = 21;
        for (int r = 0; r < R; r++) labels[r] = (int32_t)(lcg(&seed) % COLS);
        for (int r = 0; r < R; r += 4) x[r * COLS + 2] = x[r * COLS + 5] = f2h(t, 4.0f); /* ties */
        x[1 * COLS + 3] = qnan16(t);
        x[2 * COLS + 0] = inf16(t);
        labels[1] = 3;
        labels[2] = 0;
        float *fx = widen(t, x, R * COLS);
        int64_t got = -1, want = -2;
        K->count_correct(C, t, x, labels, R, COLS, &got);
        K->count_correct(C, LT_F32, fx, labels, R, COLS, &want);
        CU_ASSERT_EQUAL(got, want);
        CU_ASSERT(got >= 2);
        expect_sync_ok();
        free(x), free(fx);
    }
}

/* ---- optimizers ---------------------------------------------------------------------- */

/* Param, grad and state all 16-bit (16-true, bf16-true). Each step's
 * reference is the f32 step on the widened 16-bit state, narrowed; its
 * updates are multiply-adds (FMA), hence one unit. */
static void test_sgd(void) {
    enum { N = 515 };
    const lt_sgd_args cases[] = {
        {.lr = 0.1},
        {.lr = 0.1, .weight_decay = 0.01},
        {.lr = 0.05, .momentum = 0.9, .dampening = 0.1},
        {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = 1},
    };
    FOR_EACH_HALF(t) {
        for (int c = 0; c < 4; c++) {
            uint16_t *p = h_rand(t, N, -1, 1, 22), *buf = h_const(N, qnan16(t));
            for (int step = 0; step < 3; step++) {
                lt_sgd_args a = cases[c];
                a.first_step = step == 0; /* the NaN buffer is not read then */
                uint16_t *g = h_rand(t, N, -1, 1, 23 + (uint64_t)step);
                float *fp = widen(t, p, N), *fg = widen(t, g, N), *fb = widen(t, buf, N);
                K->sgd_step(C, t, p, g, a.momentum != 0 ? buf : NULL, N, &a);
                K->sgd_step(C, LT_F32, fp, fg, a.momentum != 0 ? fb : NULL, N, &a);
                uint16_t *wp = narrow(t, fp, N), *wb = narrow(t, fb, N);
                check16("sgd param", t, p, wp, N, 1);
                if (a.momentum != 0) check16("sgd momentum buffer", t, buf, wb, N, 1);
                free(g), free(fp), free(fg), free(fb), free(wp), free(wb);
            }
            expect_sync_ok();
            free(p), free(buf);
        }
    }
}

static void test_adamw(void) {
    enum { N = 515 };
    FOR_EACH_HALF(t) {
        uint16_t *p = h_rand(t, N, -1, 1, 26), *m = h_const(N, 0), *v = h_const(N, 0);
        for (int step = 1; step <= 3; step++) {
            lt_adamw_args a = {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-3,
                               .weight_decay = 0.01, .step = step};
            uint16_t *g = h_rand(t, N, -1, 1, 27 + (uint64_t)step);
            float *fp = widen(t, p, N), *fg = widen(t, g, N), *fm = widen(t, m, N);
            float *fv = widen(t, v, N);
            K->adamw_step(C, t, p, g, m, v, N, &a);
            K->adamw_step(C, LT_F32, fp, fg, fm, fv, N, &a);
            uint16_t *wp = narrow(t, fp, N), *wm = narrow(t, fm, N), *wv = narrow(t, fv, N);
            check16("adamw param", t, p, wp, N, 1);
            check16("adamw m", t, m, wm, N, 1);
            check16("adamw v", t, v, wv, N, 1);
            free(g), free(fp), free(fg), free(fm), free(fv), free(wp), free(wm), free(wv);
        }
        expect_sync_ok();
        free(p), free(m), free(v);
    }
}

/* f32 arrays equal bit for bit, any NaN matching any NaN (which operand's
 * payload survives an operation on two NaNs is the compiler's choice). */
static void check32(const char *what, const float *got, const float *want, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (isnan(got[i]) && isnan(want[i])) continue;
        if (memcmp(&got[i], &want[i], 4)) {
            printf("\n  %s [%lld]: got %a, want %a\n", what, (long long)i, got[i], want[i]);
            CU_FAIL(what);
            return;
        }
    }
    CU_PASS(what);
}

/* sgd_step_mixed against the three passes it replaces, each through this
 * plugin's own kernels: cast the gradients to f32, axpby by grad_mul (when
 * it is not 1, as the precision plugin did), sgd_step on f32, cast the
 * parameters to the compute dtype. Bit for bit, for every pair of gradient
 * and compute dtypes, with and without momentum, weight decay and
 * nesterov, on the first step (buffer unread: NaN in it) and later ones,
 * with NaN, infinities and subnormals among the gradients. */
static void sgd_mixed_against_three_passes(const lt_kernels *KM, lt_ctx *CM) {
    enum { N = 1027 };
    const lt_sgd_args cases[] = {
        {.lr = 0.1},
        {.lr = 0.1, .weight_decay = 0.01},
        {.lr = 0.05, .momentum = 0.9, .dampening = 0.1},
        {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = 1},
    };
    const double muls[] = {1.0, 0x1p-16, 1.0 / 3};
    const lt_dtype grads[] = {LT_F32, LT_F16, LT_BF16};
    FOR_EACH_HALF(t) {
        for (int gk = 0; gk < 3; gk++) {
            lt_dtype gt = grads[gk];
            for (int c = 0; c < 4; c++) {
                for (int mk = 0; mk < 3; mk++) {
                    uint64_t seed = 100 + (uint64_t)(gk * 16 + c * 4 + mk);
                    float *p = malloc(N * 4), *pw = malloc(N * 4);
                    float *buf = malloc(N * 4), *bw = malloc(N * 4), *g32 = malloc(N * 4);
                    uint16_t *h = h_const(N, 0), *hw = h_const(N, 0);
                    void *g = malloc(N * 4);
                    for (int64_t i = 0; i < N; i++) {
                        p[i] = pw[i] = (float)urand(&seed, -1, 1);
                        buf[i] = bw[i] = NAN; /* unread on the first step */
                    }
                    for (int step = 0; step < 3; step++) {
                        lt_sgd_args a = cases[c];
                        a.first_step = step == 0;
                        if (gt == LT_F32) {
                            float *f = g;
                            for (int64_t i = 0; i < N; i++) f[i] = (float)urand(&seed, -1e4, 1e4);
                            if (step == 2) f[5] = NAN, f[77] = INFINITY, f[300] = 0x1p-140f;
                        } else {
                            uint16_t *r = h_rand(gt, N, -100, 100, seed + (uint64_t)step);
                            if (step == 2) h_specials(gt, r, N);
                            memcpy(g, r, N * 2);
                            free(r);
                        }
                        float *mom = a.momentum != 0 ? buf : NULL, *momw = a.momentum != 0 ? bw : NULL;
                        KM->sgd_step_mixed(CM, p, gt, g, muls[mk], mom, t, h, N, &a);
                        K->cast(C, LT_F32, g32, gt, g, N);
                        if (muls[mk] != 1.0) K->axpby(C, LT_F32, N, muls[mk], g32, 0.0, g32);
                        K->sgd_step(C, LT_F32, pw, g32, momw, N, &a);
                        K->cast(C, t, hw, LT_F32, pw, N);
                        check32("sgd_step_mixed param", p, pw, N);
                        if (mom) check32("sgd_step_mixed momentum", buf, bw, N);
                        check16("sgd_step_mixed compute copy", t, h, hw, N, 0);
                    }
                    expect_sync_ok();
                    CU_ASSERT_EQUAL(g_acc->synchronize(CM), LT_OK);
                    free(p), free(pw), free(buf), free(bw), free(g32), free(h), free(hw), free(g);
                }
            }
        }
    }
}

/* Both of the plugin's loops: its AVX2 + F16C ones (the default context,
 * where this CPU runs them) and the portable ones (isa=generic). */
static void test_sgd_mixed(void) {
    sgd_mixed_against_three_passes(K, C);
    lt_config *cfg = lt_config_new();
    char err[256] = "";
    const lt_accelerator_desc *acc = NULL;
    const lt_kernels *kg = NULL;
    lt_ctx cg;
    CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
    lt_config_declare(cfg, "accelerator.cpu", "isa", LT_PARAM_STRING, "auto", "isa");
    CU_ASSERT_EQUAL_FATAL(lt_config_set(cfg, "accelerator.cpu", "isa", "generic", LT_SRC_FLAG,
                                        "--set", err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL_FATAL(cpu_plugin_open_config(&acc, &cg, &kg, cfg), 0);
    sgd_mixed_against_three_passes(kg, &cg);
    acc->teardown(&cg);
    lt_config_free(cfg);
    /* What it does not take is an error naming the kernel and the dtypes. */
    float p[4] = {0}, b[4] = {0};
    uint16_t h[4] = {0};
    K->sgd_step_mixed(C, p, LT_F64, p, 1.0, b, LT_BF16, h, 4, &(lt_sgd_args){.lr = 0.1});
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(C), "sgd_step_mixed"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(C), "f64"));
    K->sgd_step_mixed(C, p, LT_BF16, h, 1.0, b, LT_F32, p, 4, &(lt_sgd_args){.lr = 0.1});
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_UNSUPPORTED);
    K->sgd_step_mixed(C, p, LT_BF16, h, 1.0, b, LT_BF16, h, 4,
                      &(lt_sgd_args){.lr = 0.1, .momentum = 0.9, .dampening = 0.5, .nesterov = 1});
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(C), "nesterov"));
}

/* ---- random numbers ------------------------------------------------------------------ */

/* The f32 fill's values, rounded; a uniform value that rounds up to hi is
 * the largest 16-bit value below it. The same numbers however the buffer
 * is split into calls. */
static void test_rand_fill(void) {
    enum { N = 100001 };
    const struct { lt_rand_dist d; double a, b; } cases[] = {
        {LT_RAND_UNIFORM, 0, 1}, {LT_RAND_UNIFORM, -1, 1}, {LT_RAND_UNIFORM, 2, 5},
        {LT_RAND_NORMAL, 0.5, 2}, {LT_RAND_NORMAL, 0, 1e-6}};
    FOR_EACH_HALF(t) {
        uint16_t *x = malloc(N * 2), *y = malloc(N * 2), *want = malloc(N * 2);
        float *f = malloc(N * 4);
        for (int c = 0; c < 5; c++) {
            K->rand_fill(C, t, x, N, cases[c].d, cases[c].a, cases[c].b, 9, 7);
            K->rand_fill(C, LT_F32, f, N, cases[c].d, cases[c].a, cases[c].b, 9, 7);
            int moved = 0, outside = 0;
            for (int i = 0; i < N; i++) {
                want[i] = f2h(t, f[i]);
                if (cases[c].d == LT_RAND_UNIFORM) {
                    if (h2f(t, want[i]) >= (float)cases[c].b) {
                        want[i] = (uint16_t)(want[i] - 1); /* positive hi here */
                        moved++;
                    }
                    outside += !(h2f(t, x[i]) >= cases[c].a && h2f(t, x[i]) < cases[c].b);
                }
            }
            check16("rand_fill", t, x, want, N, 0);
            CU_ASSERT_EQUAL(outside, 0);
            if (c == 0) CU_ASSERT(moved > 0); /* [0, 1): about N * 2^-12 (f16), 2^-9 (bf16) */
            K->rand_fill(C, t, y, 1, cases[c].d, cases[c].a, cases[c].b, 9, 7);
            K->rand_fill(C, t, y + 1, 4444, cases[c].d, cases[c].a, cases[c].b, 9, 8);
            K->rand_fill(C, t, y + 4445, N - 4445, cases[c].d, cases[c].a, cases[c].b, 9,
                         7 + 4445);
            CU_ASSERT_EQUAL(memcmp(x, y, N * 2), 0);
        }
        expect_sync_ok();
        free(x), free(y), free(want), free(f);
    }
}

/* ---- convolution lowering and pooling ------------------------------------------------ */

static lt_conv_geom geom(int64_t c, int64_t h, int64_t w, int64_t k, int64_t st, int64_t pad) {
    lt_conv_geom g = {.c = c, .h = h, .w = w, .kh = k, .kw = k, .sh = st, .sw = st,
                      .ph = pad, .pw = pad};
    g.oh = (h + 2 * pad - k) / st + 1;
    g.ow = (w + 2 * pad - k) / st + 1;
    return g;
}

/* Wide rows (1500, 2100) cross col2im's fp32 block of 1024 columns, which
 * the 16-bit col2im gathers in; planes of more than 1024 elements with
 * narrower rows (40 x 60, 50 x 100 strided, 3 x 1024: bands of 17, 10 and
 * 1 rows) are scattered band by band, kernel rows crossing the bands. f16
 * col entries are widened a band at a time where the CPU has F16C; 600 x 2
 * padded by 3 to 8 columns (bands of 512 rows, 4096 entries) is more than
 * that stage holds and widens element by element. */
static const lt_conv_geom *conv_geoms(int *count) {
    static lt_conv_geom g[10];
    g[0] = geom(2, 5, 7, 3, 1, 1);
    g[1] = geom(1, 4, 6, 3, 2, 1);
    g[2] = geom(3, 6, 8, 2, 2, 0);
    g[3] = geom(1, 3, 1500, 3, 1, 1);
    g[4] = geom(2, 2, 2100, 3, 2, 2);
    g[5] = geom(1, 7, 9, 5, 1, 2);
    g[6] = geom(2, 40, 60, 3, 1, 1);
    g[7] = geom(1, 50, 100, 3, 2, 1);
    g[8] = geom(1, 3, 1024, 3, 1, 1);
    g[9] = geom(1, 600, 2, 1, 1, 3);
    *count = 10;
    return g;
}

/* im2col copies (exact, NaN included); col2im sums the col entries of
 * each x element in fp32 in the f32 kernel's order: exact for any beta. */
static void test_im2col_col2im(void) {
    int ng;
    const lt_conv_geom *gs = conv_geoms(&ng);
    FOR_EACH_HALF(t) {
        for (int k = 0; k < ng; k++) {
            const lt_conv_geom *g = &gs[k];
            int64_t nx = g->c * g->h * g->w, ncol = g->c * g->kh * g->kw * g->oh * g->ow;
            uint16_t *x = h_rand(t, nx, -2, 2, 30), *col = malloc((size_t)ncol * 2);
            h_specials(t, x, nx);
            float *fx = widen(t, x, nx), *fcol = malloc((size_t)ncol * 4);
            K->im2col(C, t, x, g, col);
            K->im2col(C, LT_F32, fx, g, fcol);
            uint16_t *want = narrow(t, fcol, ncol);
            check16("im2col", t, col, want, ncol, 0);
            free(want);
            const double betas[] = {0, 1, 0.5};
            for (int b = 0; b < 3; b++) {
                uint16_t *c2 = h_rand(t, ncol, -2, 2, 31), *xo = b == 0 ? h_const(nx, qnan16(t))
                                                                         : h_rand(t, nx, -2, 2, 32);
                float *fc2 = widen(t, c2, ncol), *fxo = widen(t, xo, nx);
                K->col2im(C, t, c2, g, xo, betas[b]);
                K->col2im(C, LT_F32, fc2, g, fxo, betas[b]);
                want = narrow(t, fxo, nx);
                check16("col2im", t, xo, want, nx, 0);
                free(c2), free(xo), free(fc2), free(fxo), free(want);
            }
            free(x), free(col), free(fx), free(fcol);
        }
        expect_sync_ok();
    }
}

/* Forward: the f32 kernel's maxima and argmax on the widened planes, ties
 * (first wins) and NaN (wins; the last NaN of a window) included. Backward:
 * non-overlapping windows exact; overlapping windows add several dy into
 * one element, each sum rounded (conv.c), so those dy are small multiples
 * of 1/8, whose sums are exact in both dtypes. 2x2/2 f16 planes are widened
 * whole first where the CPU has F16C, up to 4096 elements: 66 x 70 is
 * larger and is read element by element. */
static void test_max_pool(void) {
    const lt_conv_geom gs[] = {geom(3, 6, 8, 2, 2, 0), geom(2, 7, 9, 3, 2, 1),
                               geom(2, 5, 5, 2, 1, 0), geom(1, 66, 70, 2, 2, 0)};
    FOR_EACH_HALF(t) {
        for (int k = 0; k < 4; k++) {
            const lt_conv_geom *g = &gs[k];
            int64_t nx = g->c * g->h * g->w, ny = g->c * g->oh * g->ow;
            uint16_t *x = h_rand(t, nx, -1, 1, 33), *y = malloc((size_t)ny * 2);
            for (int64_t i = 0; i < nx; i += 5) x[i] = f2h(t, 0.5f); /* ties */
            x[4] = qnan16(t);
            x[nx - 3] = (uint16_t)(qnan16(t) | 0x8000);
            x[nx / 2] = inf16(t);
            /* Row 0's first windows (2x2 ones): a negative NaN first, which
             * no later number beats; -0 then +0 as the largest, a tie the
             * first wins (the argmax tells them apart). */
            int64_t w = g->w;
            x[0] = (uint16_t)(qnan16(t) | 0x8000), x[1] = f2h(t, 0.25f);
            x[w] = f2h(t, -0.5f), x[w + 1] = f2h(t, 0.75f);
            x[2] = 0x8000, x[3] = 0x0000, x[w + 2] = f2h(t, -0.5f), x[w + 3] = f2h(t, -0.25f);
            float *fx = widen(t, x, nx), *fy = malloc((size_t)ny * 4);
            int32_t *am = malloc((size_t)ny * 4), *fam = malloc((size_t)ny * 4);
            K->max_pool_fwd(C, t, x, g, y, am);
            K->max_pool_fwd(C, LT_F32, fx, g, fy, fam);
            uint16_t *want = narrow(t, fy, ny);
            check16("max_pool_fwd", t, y, want, ny, 0);
            CU_ASSERT_EQUAL(memcmp(am, fam, (size_t)ny * 4), 0);
            /* And directly: an output is NaN exactly when its window holds one. */
            int nan_rule = 0, nan_out = 0;
            for (int64_t p = 0; p < g->c; p++)
                for (int64_t oy = 0; oy < g->oh; oy++)
                    for (int64_t ox = 0; ox < g->ow; ox++) {
                        bool has = false;
                        for (int64_t i = 0; i < g->kh; i++)
                            for (int64_t j = 0; j < g->kw; j++) {
                                int64_t iy = oy * g->sh - g->ph + i, ix = ox * g->sw - g->pw + j;
                                if (iy >= 0 && iy < g->h && ix >= 0 && ix < g->w)
                                    has |= isnan16(t, x[(p * g->h + iy) * g->w + ix]);
                            }
                        bool out = isnan16(t, y[(p * g->oh + oy) * g->ow + ox]);
                        nan_rule += has != out;
                        nan_out += out;
                    }
            CU_ASSERT_EQUAL(nan_rule, 0);
            CU_ASSERT(nan_out >= 2);
            free(want);
            bool overlap = g->sh < g->kh;
            const double betas[] = {0, 1};
            for (int b = 0; b < 2; b++) {
                uint16_t *dy = malloc((size_t)ny * 2);
                uint64_t seed = 34;
                for (int64_t i = 0; i < ny; i++)
                    dy[i] = overlap ? f2h(t, (float)((int)(lcg(&seed) % 33) - 16) / 8)
                                    : f2h(t, (float)urand(&seed, -2, 2));
                uint16_t *dx = b == 0 ? h_const(nx, qnan16(t)) : h_rand(t, nx, -2, 2, 35);
                if (overlap && b == 1)
                    for (int64_t i = 0; i < nx; i++) dx[i] = f2h(t, (float)(i % 9) / 4);
                float *fdy = widen(t, dy, ny), *fdx = widen(t, dx, nx);
                K->max_pool_bwd(C, t, dy, am, g, dx, betas[b]);
                K->max_pool_bwd(C, LT_F32, fdy, fam, g, fdx, betas[b]);
                want = narrow(t, fdx, nx);
                check16("max_pool_bwd", t, dx, want, nx, 0);
                free(dy), free(dx), free(fdy), free(fdx), free(want);
            }
            free(x), free(y), free(fx), free(fy), free(am), free(fam);
        }
        /* Foreign argmax on a row of five windows (four at a time, the last
         * group overlapping): (0,1) and (1,9) are taken; -1, INT32_MIN and
         * the neighbouring window's (0,4) are not; -0 and NaN dy kept. */
        lt_conv_geom gw = geom(1, 2, 10, 2, 2, 0);
        const int32_t arg5[5] = {1, -1, INT32_MIN, 4, 19};
        uint16_t dy5[5] = {qnan16(t), f2h(t, 2), f2h(t, 3), f2h(t, 4), 0x8000};
        uint16_t *dx = h_const(20, qnan16(t)), want5[20] = {0};
        want5[1] = dy5[0], want5[19] = dy5[4];
        K->max_pool_bwd(C, t, dy5, arg5, &gw, dx, 0.0);
        CU_ASSERT_EQUAL(memcmp(dx, want5, sizeof want5), 0);
        free(dx);
        expect_sync_ok();
    }
}

/* ---- errors ----------------------------------------------------------------------------- */

/* A dtype no kernel has: the message names the kernel and what it takes. */
static void test_unsupported_dtype(void) {
    expect_sync_ok();
    int32_t ib[4] = {0};
    K->fill(C, LT_I32, ib, 4, 1.0);
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(C), "fill"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(C), "f32, f64, f16 or bf16"));
    K->adamw_step(C, LT_I8, ib, ib, ib, ib, 4, &(lt_adamw_args){.step = 1});
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(C), "adamw_step"));
    expect_sync_ok();
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("cpu_kernels_lowp", suite_init, suite_clean);
    if (!s) return 1;
    CU_add_test(s, "every 16-bit pattern through axpby and relu", test_every_pattern);
    CU_add_test(s, "fill", test_fill);
    CU_add_test(s, "axpby", test_axpby);
    CU_add_test(s, "clamp keeps NaN", test_clamp);
    CU_add_test(s, "add_bias", test_add_bias);
    CU_add_test(s, "sum_rows in fp32", test_sum_rows);
    CU_add_test(s, "activations forward", test_act_fwd);
    CU_add_test(s, "activations backward", test_act_bwd);
    CU_add_test(s, "dropout: the f32 mask", test_dropout);
    CU_add_test(s, "cross-entropy", test_xent);
    CU_add_test(s, "mse", test_mse);
    CU_add_test(s, "count_correct", test_count_correct);
    CU_add_test(s, "sgd, 16-bit state", test_sgd);
    CU_add_test(s, "adamw, 16-bit state", test_adamw);
    CU_add_test(s, "sgd_step_mixed: the three passes' bits", test_sgd_mixed);
    CU_add_test(s, "rand_fill: the f32 values rounded", test_rand_fill);
    CU_add_test(s, "im2col and col2im", test_im2col_col2im);
    CU_add_test(s, "max pooling", test_max_pool);
    CU_add_test(s, "unsupported dtype", test_unsupported_dtype);
    return lt_cunit_run();
}
