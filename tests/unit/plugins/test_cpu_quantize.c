/* The cpu accelerator's quantize_u8 and dequantize_u8 (Bagua's MinMaxUInt8,
 * accelerator.h) on f32, f64, f16 and bf16.
 *
 * Two checks on every case:
 *  - against a scalar reference written here from the contract: the same
 *    expressions in the same compute type (fp32; double for f64), each
 *    operation rounded (this file, like quantize.c, is built with
 *    -ffp-contract=off), q rounded by lrintf (to nearest, ties to even).
 *    The reference finds each chunk's min and max with float compares, not
 *    quantize.c's integer keys. The kernels must match it exactly: the q
 *    bytes, minmax, and the bits of y (any NaN for NaN);
 *  - against x itself, the contract's bound: each decoded element within
 *    (max - min) / 510 of x, plus the rounding of the arithmetic
 *    (2^-20 (max - min) + 2^-22 max(|min|, |max|) + 2^-149 in fp32;
 *    2^-48 ((max - min) + max(|min|, |max|)) in double), plus the rounding
 *    of y itself: beta * y + d rounded to the dtype (f32: 2^-23 |y|; f16:
 *    half a unit in the last place, 2^-11 |y| + 2^-25; bf16: 2^-8 |y| +
 *    2^-134; f64: 2^-52 |y|).
 * Buffers carry canaries past their end: nothing is written beyond n
 * elements, n bytes of q and 2 ceil(n / chunk) floats of minmax.
 *
 * The same test checks the baseline loops when the plugin is built with
 * -DCMAKE_C_FLAGS=-DCPU_HOT= (the x86-64-v3 clone otherwise, on a CPU with
 * AVX2). It ends by timing n = 2^22, chunk 4096 (printed, not checked). */
#include <CUnit/Basic.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common/half.h"
#include "cpu_plugin.h"
#include "cunit_run.h"

static const lt_accelerator_desc *g_acc;
static const lt_kernels *K;
static lt_ctx g_ctx;
static lt_ctx *C = &g_ctx;

static const lt_dtype TYPES[4] = {LT_F32, LT_F64, LT_F16, LT_BF16};
#define FOR_EACH_TYPE(t)                                                                   \
    for (int t##_k = 0; t##_k < 4; t##_k++)                                                \
        for (lt_dtype t = TYPES[t##_k]; t != LT_U8; t = LT_U8)

#define CANARY 8 /* elements past the end */
#define Q_CANARY 0xA5
#define MM_CANARY 12345.0f

/* ---- elements as doubles ------------------------------------------------- */

static size_t esize(lt_dtype t) { return t == LT_F64 ? 8 : t == LT_F32 ? 4 : 2; }

static double get(lt_dtype t, const void *b, int64_t i) {
    switch (t) {
    case LT_F32: return ((const float *)b)[i];
    case LT_F64: return ((const double *)b)[i];
    case LT_F16: return half_f16_to_f32(((const uint16_t *)b)[i]);
    default: return half_bf16_to_f32(((const uint16_t *)b)[i]);
    }
}

/* Rounds v to the dtype (16-bit: through float; test data only). */
static void set(lt_dtype t, void *b, int64_t i, double v) {
    switch (t) {
    case LT_F32: ((float *)b)[i] = (float)v; break;
    case LT_F64: ((double *)b)[i] = v; break;
    case LT_F16: ((uint16_t *)b)[i] = half_f32_to_f16((float)v); break;
    default: ((uint16_t *)b)[i] = half_f32_to_bf16((float)v); break;
    }
}

static void *buf_new(lt_dtype t, int64_t n) { return calloc((size_t)(n + CANARY), esize(t)); }

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}
static double urand(uint64_t *s, double lo, double hi) {
    return lo + (hi - lo) * (double)lcg(s) * 0x1p-53;
}

static int64_t nchunks(int64_t n, int64_t chunk) { return n > 0 ? (n + chunk - 1) / chunk : 0; }

/* ---- the reference ---------------------------------------------------------- */

/* accelerator.h's power of two for fp32 ranges that overflow or are tiny. */
static float ref_scale(float mn, float mx) {
    float r = mx - mn;
    if (r > FLT_MAX) return 0.5f;
    if (r > 0 && r < 0x1p-96f) return 0x1p64f;
    return 1.0f;
}

/* An f64 chunk's f32 bounds: the largest float <= d (down), the smallest
 * >= d (up). */
static float ref_down(double d) {
    float f = (float)d;
    while ((double)f > d) f = nextafterf(f, -INFINITY);
    return f;
}
static float ref_up(double d) {
    float f = (float)d;
    while ((double)f < d) f = nextafterf(f, INFINITY);
    return f;
}

static void ref_quantize(lt_dtype t, const void *x, int64_t n, int64_t chunk, uint8_t *q,
                         float *mm) {
    for (int64_t c0 = 0; c0 < n; c0 += chunk, mm += 2) {
        int64_t len = n - c0 < chunk ? n - c0 : chunk;
        bool finite = true;
        double lo = INFINITY, hi = -INFINITY;
        for (int64_t i = 0; i < len; i++) {
            double v = get(t, x, c0 + i);
            if (!isfinite(v)) finite = false;
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
        float mn = t == LT_F64 ? ref_down(lo) : (float)lo;
        float mx = t == LT_F64 ? ref_up(hi) : (float)hi;
        if (!finite || isinf(mn) || isinf(mx)) {
            mm[0] = mm[1] = NAN;
            memset(q + c0, 0, (size_t)len);
            continue;
        }
        mm[0] = mn;
        mm[1] = mx;
        if (t == LT_F64) {
            double ms = mn, rs = (double)mx - ms, inv = rs == 0 ? 0 : 255.0 / rs;
            for (int64_t i = 0; i < len; i++)
                q[c0 + i] = (uint8_t)lrint((((const double *)x)[c0 + i] - ms) * inv);
        } else {
            float s = ref_scale(mn, mx), ms = mn * s, rs = mx * s - ms;
            float inv = rs == 0 ? 0 : 255.0f / rs;
            for (int64_t i = 0; i < len; i++)
                q[c0 + i] = (uint8_t)lrintf(((float)get(t, x, c0 + i) * s - ms) * inv);
        }
    }
}

/* The decoded value of one byte, in the compute type. */
static double ref_decode(lt_dtype t, uint8_t q, float mn, float mx) {
    if (t == LT_F64) {
        double ms = mn, step = ((double)mx - ms) / 255.0;
        return ms + (double)q * step;
    }
    float s = ref_scale(mn, mx), ms = mn * s, step = (mx * s - ms) / 255.0f;
    return (ms + (float)q * step) * (1.0f / s);
}

static void ref_dequantize(lt_dtype t, const uint8_t *q, const float *mm, int64_t n,
                           int64_t chunk, void *y, double beta) {
    for (int64_t i = 0; i < n; i++) {
        const float *m = mm + 2 * (i / chunk);
        double d = ref_decode(t, q[i], m[0], m[1]);
        switch (t) {
        case LT_F64: {
            double *yy = (double *)y + i;
            *yy = beta == 0 ? d : beta * *yy + d;
            break;
        }
        case LT_F32: {
            float *yy = (float *)y + i, b = (float)beta, df = (float)d;
            *yy = b == 0 ? df : b * *yy + df;
            break;
        }
        default: {
            uint16_t *yy = (uint16_t *)y + i;
            float b = (float)beta, df = (float)d;
            float old = t == LT_F16 ? half_f16_to_f32(*yy) : half_bf16_to_f32(*yy);
            float r = b == 0 ? df : b * old + df;
            *yy = t == LT_F16 ? half_f32_to_f16(r) : half_f32_to_bf16(r);
        }
        }
    }
}

/* ---- checks ----------------------------------------------------------------- */

static bool same_bits(lt_dtype t, const void *a, const void *b, int64_t i) {
    if (isnan(get(t, a, i)) && isnan(get(t, b, i))) return true;
    return !memcmp((const char *)a + (size_t)i * esize(t), (const char *)b + (size_t)i * esize(t),
                   esize(t));
}

static bool same_float(float a, float b) { return (isnan(a) && isnan(b)) || a == b; }

/* The kernel's q, minmax and y equal the reference's, and nothing past the
 * end was written. Returns false (after one CU_FAIL and a line) on the first
 * difference. */
static bool check_exact(const char *what, lt_dtype t, int64_t n, int64_t chunk, const uint8_t *q,
                        const uint8_t *qr, const float *mm, const float *mmr) {
    for (int64_t i = 0; i < n; i++)
        if (q[i] != qr[i]) {
            printf("\n  %s (%s, n %lld, chunk %lld): q[%lld] = %u, reference %u\n", what,
                   lt_dtype_name(t), (long long)n, (long long)chunk, (long long)i, q[i], qr[i]);
            CU_FAIL(what);
            return false;
        }
    for (int j = 0; j < CANARY; j++)
        if (q[n + j] != Q_CANARY) {
            printf("\n  %s (%s): q written past n\n", what, lt_dtype_name(t));
            CU_FAIL(what);
            return false;
        }
    int64_t nc = nchunks(n, chunk);
    for (int64_t c = 0; c < 2 * nc; c++)
        if (!same_float(mm[c], mmr[c])) {
            printf("\n  %s (%s, n %lld, chunk %lld): minmax[%lld] = %.9g, reference %.9g\n", what,
                   lt_dtype_name(t), (long long)n, (long long)chunk, (long long)c, mm[c], mmr[c]);
            CU_FAIL(what);
            return false;
        }
    for (int j = 0; j < CANARY; j++)
        if (mm[2 * nc + j] != MM_CANARY) {
            printf("\n  %s (%s): minmax written past its chunks\n", what, lt_dtype_name(t));
            CU_FAIL(what);
            return false;
        }
    return true;
}

static bool check_y_exact(const char *what, lt_dtype t, int64_t n, const void *y,
                          const void *yr) {
    for (int64_t i = 0; i < n + CANARY; i++)
        if (!same_bits(t, y, yr, i)) {
            printf("\n  %s (%s, n %lld): y[%lld] = %.17g, reference %.17g%s\n", what,
                   lt_dtype_name(t), (long long)n, (long long)i, get(t, y, i), get(t, yr, i),
                   i >= n ? " (past n)" : "");
            CU_FAIL(what);
            return false;
        }
    return true;
}

/* The contract's bound (header comment) on y = beta * y0 + decode against
 * beta * y0 + x; a non-finite chunk must give NaN, and only there. */
static bool check_bound(const char *what, lt_dtype t, const void *x, int64_t n, int64_t chunk,
                        const float *mm, const void *y0, double beta, const void *y) {
    for (int64_t i = 0; i < n; i++) {
        const float *m = mm + 2 * (i / chunk);
        double got = get(t, y, i);
        if (isnan(m[0]) || isnan(m[1])) {
            if (!isnan(got) || !isnan(m[0]) || !isnan(m[1])) {
                printf("\n  %s (%s): element %lld of a non-finite chunk is %.17g\n", what,
                       lt_dtype_name(t), (long long)i, got);
                CU_FAIL(what);
                return false;
            }
            continue;
        }
        double mn = m[0], mx = m[1], r = mx - mn, big = fmax(fabs(mn), fabs(mx));
        double xi = get(t, x, i);
        double want = (beta == 0 ? 0 : beta * get(t, y0, i)) + xi;
        double tol = t == LT_F64 ? r / 510 + 0x1p-48 * (r + big)
                                 : r / 510 + 0x1p-20 * r + 0x1p-22 * big + 0x1p-149;
        double mag = fmax(fabs(got), fabs(want));
        switch (t) {
        case LT_F32: tol += beta == 0 ? 0 : 0x1p-23 * mag + 0x1p-149; break;
        case LT_F64: tol += 0x1p-52 * mag; break;
        case LT_F16: tol += 0x1p-11 * mag + 0x1p-25; break;
        default: tol += 0x1p-8 * mag + 0x1p-134; break;
        }
        if (!(xi >= mn && xi <= mx) || !(fabs(got - want) <= tol)) {
            printf("\n  %s (%s, chunk %lld): element %lld: x %.9g in [%.9g, %.9g], y %.17g, "
                   "want %.17g, error %.3g > %.3g\n",
                   what, lt_dtype_name(t), (long long)chunk, (long long)i, xi, mn, mx, got, want,
                   fabs(got - want), tol);
            CU_FAIL(what);
            return false;
        }
    }
    return true;
}

static void expect_sync_ok(void) {
    lt_status s = g_acc->synchronize(C);
    if (s != LT_OK) printf("\n  unexpected kernel error: %s\n", lt_last_error(C));
    CU_ASSERT_EQUAL(s, LT_OK);
}

/* Quantizes x with the kernel and the reference and compares; then decodes
 * with beta into y0's copies (y0 NULL: NaN-filled y, beta must be 0) and
 * compares with the reference and the bound. Returns false on a failure. */
static bool run_case(const char *what, lt_dtype t, const void *x, int64_t n, int64_t chunk,
                     const void *y0, double beta) {
    int64_t nc = nchunks(n, chunk);
    uint8_t *q = malloc((size_t)n + CANARY), *qr = malloc((size_t)n + CANARY);
    float *mm = malloc(sizeof(float) * (size_t)(2 * nc + CANARY));
    float *mmr = malloc(sizeof(float) * (size_t)(2 * nc + CANARY));
    void *y = buf_new(t, n), *yr = buf_new(t, n);
    memset(q, Q_CANARY, (size_t)n + CANARY);
    memset(qr, Q_CANARY, (size_t)n + CANARY);
    for (int64_t c = 0; c < 2 * nc + CANARY; c++) mm[c] = mmr[c] = MM_CANARY;
    for (int64_t i = 0; i < n + CANARY; i++) set(t, y, i, y0 ? get(t, y0, i) : NAN);
    memcpy(yr, y, (size_t)(n + CANARY) * esize(t));

    K->quantize_u8(C, t, x, n, chunk, q, mm);
    expect_sync_ok();
    ref_quantize(t, x, n, chunk, qr, mmr);
    bool ok = check_exact(what, t, n, chunk, q, qr, mm, mmr);
    if (ok) {
        K->dequantize_u8(C, t, q, mm, n, chunk, y, beta);
        expect_sync_ok();
        ref_dequantize(t, q, mm, n, chunk, yr, beta);
        ok = check_y_exact(what, t, n, y, yr) &&
             check_bound(what, t, x, n, chunk, mm, y0, beta, y);
    }
    free(q), free(qr), free(mm), free(mmr), free(y), free(yr);
    return ok;
}

/* Each chunk gets its own magnitude and offset: 10^e with e uniform in
 * [-emax, emax], centred anywhere in +-2 of that. */
static void *rand_chunks(lt_dtype t, int64_t n, int64_t chunk, double emax, uint64_t seed) {
    void *x = buf_new(t, n);
    for (int64_t c0 = 0; c0 < n; c0 += chunk) {
        double scale = pow(10, urand(&seed, -emax, emax)), centre = scale * urand(&seed, -2, 2);
        for (int64_t i = c0; i < n && i < c0 + chunk; i++)
            set(t, x, i, centre + scale * urand(&seed, -1, 1));
    }
    return x;
}
static double emax_of(lt_dtype t) { return t == LT_F16 ? 3 : 6; }

/* ---- tests ------------------------------------------------------------------ */

static const int64_t CHUNKS[4] = {1, 7, 256, 4096};

static void test_random(void) {
    FOR_EACH_TYPE(t) {
        for (int k = 0; k < 4; k++) {
            int64_t ch = CHUNKS[k];
            const int64_t ns[] = {0, 1, ch > 1 ? ch - 1 : 2, 2 * ch, 3 * ch + 5, 1003};
            for (size_t j = 0; j < sizeof ns / sizeof *ns; j++) {
                void *x = rand_chunks(t, ns[j], ch, emax_of(t), 17 + 31 * (uint64_t)j + (uint64_t)k);
                bool ok = run_case("random chunks", t, x, ns[j], ch, NULL, 0);
                free(x);
                if (!ok) return;
            }
        }
    }
    CU_PASS("random chunks");
}

/* min 0, max 255: inv and the step are 1, so q = rint(x): ties to even. */
static void test_ties_to_even(void) {
    const double xs[] = {0, 255, 0.5, 1.5, 2.5, 3.5, 126.5, 127.5, 4.25, 4.75};
    const uint8_t want[] = {0, 255, 0, 2, 2, 4, 126, 128, 4, 5};
    const int64_t n = sizeof xs / sizeof *xs;
    FOR_EACH_TYPE(t) {
        void *x = buf_new(t, n);
        for (int64_t i = 0; i < n; i++) set(t, x, i, xs[i]);
        uint8_t q[16];
        float mm[2];
        K->quantize_u8(C, t, x, n, n, q, mm);
        expect_sync_ok();
        CU_ASSERT(mm[0] == 0 && mm[1] == 255);
        CU_ASSERT(!memcmp(q, want, (size_t)n));
        CU_ASSERT(run_case("ties", t, x, n, n, NULL, 0));
        free(x);
    }
}

/* q = 0 and the decoded value equals x (as a value: a chunk of -0 decodes
 * to +0, -0 + 0 * 0). f64 chunks hold values an f32 holds (else the bounds,
 * rounded outward, differ); values that overflow f16 make NaN chunks. */
static void test_constant_chunks(void) {
    const double vals[] = {0, -0.0, 3.25, -7e-3, 1e-40, -1e30, 3.3e38, 6e-8, -60000};
    const int64_t nv = sizeof vals / sizeof *vals, chunk = 37, n = nv * chunk - 5;
    FOR_EACH_TYPE(t) {
        void *x = buf_new(t, n), *y = buf_new(t, n);
        for (int64_t i = 0; i < n; i++) set(t, x, i, (float)vals[i / chunk]);
        uint8_t *q = malloc((size_t)n);
        float mm[2 * 9];
        K->quantize_u8(C, t, x, n, chunk, q, mm);
        K->dequantize_u8(C, t, q, mm, n, chunk, y, 0);
        expect_sync_ok();
        bool ok = true;
        for (int64_t i = 0; i < n && ok; i++)
            if (q[i] != 0 || (isfinite(get(t, x, i)) ? get(t, y, i) != get(t, x, i)
                                                     : !isnan(get(t, y, i)))) {
                printf("\n  constant chunk (%s): element %lld: x %.9g q %u decoded %.9g\n",
                       lt_dtype_name(t), (long long)i, get(t, x, i), q[i], get(t, y, i));
                ok = false;
            }
        for (int64_t c = 0; c < nv && ok; c++) {
            double v = get(t, x, c * chunk);
            ok = isfinite(v) ? mm[2 * c] == v && mm[2 * c + 1] == v
                             : isnan(mm[2 * c]) && isnan(mm[2 * c + 1]);
        }
        CU_ASSERT(ok);
        CU_ASSERT(run_case("constant chunks", t, x, n, chunk, NULL, 0));
        free(x), free(y), free(q);
    }
}

/* NaN, +Inf and -Inf (f64 also a finite value beyond f32's range) poison
 * their own chunk only, wherever they sit in it; y's old values too, with
 * beta 1. */
static void test_non_finite(void) {
    const int64_t chunk = 7, n = 7 * chunk - 3; /* the last chunk is 4 long */
    FOR_EACH_TYPE(t) {
        void *x = rand_chunks(t, n, chunk, 2, 99);
        set(t, x, 1 * chunk + 0, NAN);
        set(t, x, 2 * chunk + 3, INFINITY);
        set(t, x, 3 * chunk + 6, -INFINITY);
        set(t, x, 5 * chunk + 2, NAN);
        set(t, x, 5 * chunk + 4, INFINITY);
        if (t == LT_F64) set(t, x, 6 * chunk + 3, -1e39); /* the last element */
        uint8_t q[64];
        float mm[14];
        K->quantize_u8(C, t, x, n, chunk, q, mm);
        expect_sync_ok();
        const bool bad[7] = {false, true, true, true, false, true, t == LT_F64};
        for (int c = 0; c < 7; c++) {
            CU_ASSERT_EQUAL(isnan(mm[2 * c]) && isnan(mm[2 * c + 1]), bad[c]);
            CU_ASSERT_EQUAL(!isfinite(mm[2 * c]) || !isfinite(mm[2 * c + 1]), bad[c]);
            for (int64_t i = c * chunk; bad[c] && i < n && i < (c + 1) * chunk; i++)
                CU_ASSERT_EQUAL(q[i], 0);
        }
        void *y0 = rand_chunks(t, n, chunk, 1, 5);
        CU_ASSERT(run_case("non-finite chunks, beta 0", t, x, n, chunk, NULL, 0));
        CU_ASSERT(run_case("non-finite chunks, beta 1", t, x, n, chunk, y0, 1));
        free(x), free(y0);
    }
}

/* y = beta * y + decode: beta 1 accumulates, 0.5 scales, 0 never reads y
 * (NaN-filled, run_case's y0 NULL). */
static void test_beta(void) {
    const double betas[] = {1, 0.5, -2, 0};
    FOR_EACH_TYPE(t) {
        for (int k = 1; k < 4; k++) {
            int64_t ch = CHUNKS[k], n = 3 * ch + 11;
            void *x = rand_chunks(t, n, ch, emax_of(t), 7 + (uint64_t)k);
            void *y0 = rand_chunks(t, n + CANARY, ch, emax_of(t), 70 + (uint64_t)k);
            for (size_t b = 0; b < sizeof betas / sizeof *betas; b++)
                CU_ASSERT(run_case("beta", t, x, n, ch, betas[b] == 0 ? NULL : y0, betas[b]));
            free(x), free(y0);
        }
    }
}

/* Magnitudes at the ends of each format: +-1e30 with subnormals, chunks of
 * subnormals alone (fp32 range below 2^-96: the 2^64 scaling), ranges that
 * overflow fp32 (the 1/2 scaling), near-equal huge values; f64 subnormals
 * (bounds rounded outward to 0 and the smallest f32) and values past f32's
 * range (a NaN chunk). Each chunk is 6 long. */
static void test_extremes(void) {
    const double f32c[][6] = {
        {1e30, -1e30, 1e-40, -1e-40, 0, 5e29},
        {1e-45, 3e-45, 1e-40, 2e-42, 7e-44, 1e-45},
        {-1e-40, 1e-41, 0, -0.0, 1e-39, -3e-45},
        {-3.4e38, 3.4e38, 1, -1e-40, 1e38, -2e38},
        {FLT_MAX, -FLT_MAX, 0, 1e30, -1e-30, 3e38},
        {1e30, 1.0000001e30, 1.0000002e30, 1e30, 1.0000001e30, 1.0000003e30},
        {1.1754944e-38, 1.1754942e-38, 1.1754943e-38, 1.175494e-38, 1.1754944e-38, 1e-45},
    };
    const double f64c[][6] = {
        {1e30, -1e30, 1e-310, -1e-310, 0, 5e29},
        {1e-310, 2e-310, 3e-320, 1e-320, 4.9e-324, 1e-309},
        {-1e-310, 1e-300, 0, -0.0, 1e-45, -3e-45},
        {-3.4e38, 3.4e38, 1, -1e-300, 1e38, -2e38},
        {1e300, 1, 2, 3, 4, 5},
        {1, 2, 3, 4, 5, -3.5e38},
        {1.0000000000000002, 1, 1.0000000000000004, 1, 1, 1},
    };
    const double f16c[][6] = {
        {65504, -65504, 6e-8, -6e-8, 0, 30000},
        {6e-8, 1.2e-7, 6e-5, 3e-6, 6e-8, 1e-6},
        {-65504, 65504, 1, -1, 65000, -65000},
    };
    const double bf16c[][6] = {
        {1e30, -1e30, 1e-40, -1e-40, 0, 5e29},
        {1e-40, 2e-40, 9.2e-41, 1e-39, 1e-41, 1e-40},
        {-3.38e38, 3.38e38, 1, -1e-40, 1e38, -2e38},
        {3.38e38, 3.3e38, 3.2e38, 3.38e38, 3.3e38, 3.1e38},
    };
    FOR_EACH_TYPE(t) {
        const double(*cases)[6] = t == LT_F32 ? f32c : t == LT_F64 ? f64c : t == LT_F16 ? f16c : bf16c;
        int nc = t == LT_F32 ? 7 : t == LT_F64 ? 7 : t == LT_F16 ? 3 : 4;
        int64_t n = 6 * nc;
        void *x = buf_new(t, n), *y0 = buf_new(t, n + CANARY);
        for (int c = 0; c < nc; c++)
            for (int i = 0; i < 6; i++) set(t, x, 6 * c + i, cases[c][i]);
        for (int64_t i = 0; i < n + CANARY; i++) set(t, y0, i, get(t, x, i % n) * -0.75);
        CU_ASSERT(run_case("extremes", t, x, n, 6, NULL, 0));
        CU_ASSERT(run_case("extremes, beta 1", t, x, n, 6, y0, 1));
        CU_ASSERT(run_case("extremes, beta 0.5", t, x, n, 6, y0, 0.5));
        /* one chunk of all of them */
        CU_ASSERT(run_case("extremes, one chunk", t, x, n, n, NULL, 0));
        free(x), free(y0);
    }
    /* The 1/2 and 2^64 scalings are taken where they should be: their
     * chunks keep every element within the bound (run_case), and in f32 the
     * overflowing chunk decodes its ends to nearly themselves. */
    float x[4] = {-3.4e38f, 3.4e38f, 0, 1e-40f}, y[4];
    uint8_t q[4];
    float mm[2];
    K->quantize_u8(C, LT_F32, x, 4, 4, q, mm);
    K->dequantize_u8(C, LT_F32, q, mm, 4, 4, y, 0);
    expect_sync_ok();
    CU_ASSERT(q[0] == 0 && q[1] == 255 && q[2] == 128 && q[3] == 128);
    CU_ASSERT(y[0] == x[0] && fabsf(y[1] - x[1]) <= 0x1p-22f * x[1]);
}

static void test_bad_arguments(void) {
    float x[4] = {1, 2, 3, 4}, mm[8], y[4];
    uint8_t q[4];
    K->quantize_u8(C, LT_F32, x, 4, 0, q, mm);
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(C), "quantize_u8"));
    K->dequantize_u8(C, LT_F32, q, mm, 4, -3, y, 0);
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(C), "dequantize_u8"));
    K->quantize_u8(C, LT_F32, x, 0, 0, q, mm); /* nothing to do */
    expect_sync_ok();
    K->quantize_u8(C, LT_I32, x, 4, 2, q, mm);
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(C), "f32, f64, f16 or bf16"));
    K->dequantize_u8(C, LT_U8, q, mm, 4, 2, y, 0);
    CU_ASSERT_EQUAL(g_acc->synchronize(C), LT_ERR_UNSUPPORTED);
    expect_sync_ok();
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* GB/s of x (the best of 7 runs; the machine may be shared), beside
 * all_finite on the same x: one read pass, the floor for quantize_u8's. */
static void test_speed(void) {
    const int64_t n = INT64_C(1) << 22, chunk = 4096;
    const lt_dtype ts[2] = {LT_F32, LT_BF16};
    for (int k = 0; k < 2; k++) {
        lt_dtype t = ts[k];
        void *x = rand_chunks(t, n, chunk, 3, 1), *y = buf_new(t, n);
        uint8_t *q = malloc((size_t)n);
        float *mm = malloc(sizeof(float) * (size_t)(2 * nchunks(n, chunk)));
        double best_q = 1e9, best_d = 1e9, best_a = 1e9, best_f = 1e9;
        for (int r = 0; r < 7; r++) {
            bool finite;
            double tf = now_s();
            K->all_finite(C, t, x, n, &finite);
            double t0 = now_s();
            K->quantize_u8(C, t, x, n, chunk, q, mm);
            double t1 = now_s();
            K->dequantize_u8(C, t, q, mm, n, chunk, y, 0);
            double t2 = now_s();
            K->dequantize_u8(C, t, q, mm, n, chunk, y, 1);
            double t3 = now_s();
            best_q = fmin(best_q, t1 - t0), best_d = fmin(best_d, t2 - t1);
            best_a = fmin(best_a, t3 - t2), best_f = fmin(best_f, t0 - tf);
        }
        expect_sync_ok();
        double gb = (double)n * (double)esize(t) * 1e-9;
        printf("\n  %s n 2^22 chunk 4096: quantize %.1f GB/s, dequantize %.1f GB/s (beta 1: "
               "%.1f GB/s) of x; all_finite %.1f GB/s",
               lt_dtype_name(t), gb / best_q, gb / best_d, gb / best_a, gb / best_f);
        free(x), free(y), free(q), free(mm);
    }
    printf("\n");
    CU_PASS("timed");
}

static int suite_init(void) {
    if (cpu_plugin_open(&g_acc, C, &K) != 0) return -1;
    if (!LT_KERNELS_HAS(K, quantize_u8) || !LT_KERNELS_HAS(K, dequantize_u8)) {
        fprintf(stderr, "the cpu accelerator has no quantize_u8/dequantize_u8\n");
        return -1;
    }
    return 0;
}

static int suite_clean(void) {
    if (g_acc) g_acc->teardown(C);
    return 0;
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("cpu_quantize", suite_init, suite_clean);
    if (!s) return 1;
    CU_add_test(s, "random chunks vs the reference and the bound", test_random);
    CU_add_test(s, "ties round to even", test_ties_to_even);
    CU_add_test(s, "constant chunks decode exactly", test_constant_chunks);
    CU_add_test(s, "NaN and infinities poison their chunk only", test_non_finite);
    CU_add_test(s, "beta 0, 0.5, 1, -2", test_beta);
    CU_add_test(s, "extreme magnitudes", test_extremes);
    CU_add_test(s, "bad arguments", test_bad_arguments);
    CU_add_test(s, "speed", test_speed);
    return lt_cunit_run();
}
