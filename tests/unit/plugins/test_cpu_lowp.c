/* The cpu accelerator on 16-bit data (f16, bf16): the f32 <-> 16-bit cast
 * loops bit for bit against plugins/common/half.h, and the 16-bit GEMM
 * against a double-precision reference, through the real plugin.
 *
 * Casts: every loop form this CPU runs (cast_simd.c compiled in: the
 * portable one and the vector one), on every f16 and bf16 pattern, and for
 * f32 -> 16 bit on all 2^32 f32 patterns (vector form) or a structured
 * sample (portable form: it is half.h's own code, so the sample guards the
 * tails and the table wiring); then the plugin's cast kernel, which picks
 * the fastest form, and f64 <-> 16 bit on a sample.
 *
 * GEMM: every transpose, alpha and beta (beta 0 over a NaN-filled C), odd
 * sizes with padded leading dimensions across every tile, panel and block
 * edge, and the MLP's and the CNN's shapes, each run once per setting of
 * the plugin's isa parameter this CPU runs (each puts another f32 path, or
 * lt's 16-bit kernels, under the 16-bit GEMM), with bf16_gemm=emulated
 * (bf16 on the AVX-512 BF16 dot-product kernel through SIMDe: the MLP's
 * batch-1024 shapes left out, too slow emulated) and bf16_gemm=native
 * where the CPU has AVX-512 BF16 (else reported skipped; its flushing of
 * subnormals never shows: no product here is below 2^-104), and once per
 * path of lt's 16-bit kernels called directly (gemm_lowp_avx2.c,
 * gemm_lowp_dot.c compiled in), whatever the plugin would pick; NaN, infinity and overflow;
 * which way the plugin goes with one OpenBLAS thread and with several; a
 * scratch allocation that fails. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cast_simd.h"
#include "common/half.h"
#include "config/config.h"
#include "cpu_plugin.h"
#include "cunit_run.h"
#include "gemm_lowp_avx2.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define HOT
#endif

static const char *const impl_names[CPU_CAST_IMPLS] = {"scalar", "vector"};
static const lt_dtype halves[2] = {LT_F16, LT_BF16};

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return rng_state;
}

/* Uniform in [-1, 1). */
static float rnd_unit(void) { return (float)((double)(rnd() >> 11) * 0x1p-52 - 1); }

/* half.h element by element: the reference every loop must equal. */
static HOT void ref_narrow(lt_dtype t, uint16_t *d, const float *s, int64_t n) {
    if (t == LT_F16)
        for (int64_t i = 0; i < n; i++) d[i] = half_f32_to_f16(s[i]);
    else
        for (int64_t i = 0; i < n; i++) d[i] = half_f32_to_bf16(s[i]);
}

static float ref_widen1(lt_dtype t, uint16_t h) {
    return t == LT_F16 ? half_f16_to_f32(h) : half_bf16_to_f32(h);
}

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* ---- casts ------------------------------------------------------------------ */

/* Every 16-bit pattern to f32 and back, each step against half.h; then
 * every length 0..40 at every start offset 0..3, so the vector bodies and
 * their scalar tails meet at each split. */
static void test_cast_every_16bit(void) {
    enum { N = 65536 };
    uint16_t *h = malloc(N * 2), *back = malloc(N * 2), *want_back = malloc(N * 2);
    float *f = malloc(N * 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h && back && want_back && f);
    for (int i = 0; i < N; i++) h[i] = (uint16_t)i;
    for (int ti = 0; ti < 2; ti++) {
        lt_dtype t = halves[ti];
        for (int impl = 0; impl < CPU_CAST_IMPLS; impl++) {
            cpu_cast_fn widen = cpu_cast_lowp_fn(LT_F32, t, impl);
            cpu_cast_fn narrow = cpu_cast_lowp_fn(t, LT_F32, impl);
            if (!widen || !narrow) {
                printf("\n  %s %s: SKIPPED (this CPU cannot run it)", lt_dtype_name(t),
                       impl_names[impl]);
                continue;
            }
            int bad = 0;
            widen(f, h, N);
            for (int i = 0; i < N; i++)
                if (bits(f[i]) != bits(ref_widen1(t, h[i])) && bad++ < 3)
                    printf("\n  %s %s: %s 0x%04x -> f32 0x%08x, half.h 0x%08x", impl_names[impl],
                           lt_dtype_name(t), lt_dtype_name(t), i, bits(f[i]),
                           bits(ref_widen1(t, h[i])));
            narrow(back, f, N);
            ref_narrow(t, want_back, f, N);
            for (int i = 0; i < N; i++)
                if (back[i] != want_back[i] && bad++ < 6)
                    printf("\n  %s %s: f32 0x%08x -> 0x%04x, half.h 0x%04x", impl_names[impl],
                           lt_dtype_name(t), bits(f[i]), back[i], want_back[i]);
            /* lengths and offsets: the pattern set again, a slice at a time */
            for (int off = 0; off < 4; off++)
                for (int len = 0; len <= 40; len++) {
                    uint16_t *src = h + 0x3C00 + off * 7 + len, got[48];
                    float wide[48];
                    memset(got, 0xA5, sizeof got);
                    widen(wide + off, src, len);
                    narrow(got + off, wide + off, len);
                    for (int i = 0; i < 48; i++) {
                        bool in = i >= off && i < off + len;
                        uint16_t want = in ? want_back[0x3C00 + off * 7 + len + i - off] : 0xA5A5;
                        if (got[i] != want && bad++ < 9)
                            printf("\n  %s %s: length %d offset %d, element %d wrong",
                                   impl_names[impl], lt_dtype_name(t), len, off, i);
                    }
                }
            CU_ASSERT_EQUAL(bad, 0);
            printf("\n  %s %s: 65536 patterns to f32 and back, as half.h", impl_names[impl],
                   lt_dtype_name(t));
        }
    }
    printf("\n");
    free(h), free(back), free(want_back), free(f);
}

/* f32 -> f16 and bf16 on all 2^32 patterns, chunk by chunk against half.h.
 * Only for the vector form: the portable form is half.h's loop itself. */
static void test_cast_every_f32(void) {
    enum { CH = 1 << 20 };
    uint32_t *u = malloc((size_t)CH * 4);
    uint16_t *want = malloc((size_t)CH * 2), *got = malloc((size_t)CH * 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(u && want && got);
    cpu_cast_fn vec[2] = {cpu_cast_lowp_fn(LT_F16, LT_F32, CPU_CAST_VECTOR),
                          cpu_cast_lowp_fn(LT_BF16, LT_F32, CPU_CAST_VECTOR)};
    if (!vec[0] || !vec[1]) {
        printf("\n  vector: SKIPPED (this CPU lacks AVX2 or F16C)\n");
        free(u), free(want), free(got);
        return;
    }
    long bad = 0;
    for (uint64_t base = 0; base < (1ull << 32); base += CH) {
        for (uint32_t i = 0; i < CH; i++) u[i] = (uint32_t)base + i;
        for (int ti = 0; ti < 2; ti++) {
            ref_narrow(halves[ti], want, (const float *)u, CH);
            vec[ti](got, u, CH);
            if (!memcmp(want, got, (size_t)CH * 2)) continue;
            for (uint32_t i = 0; i < CH; i++)
                if (want[i] != got[i] && bad++ < 5)
                    printf("\n  vector %s: f32 0x%08x -> 0x%04x, half.h 0x%04x",
                           lt_dtype_name(halves[ti]), u[i], got[i], want[i]);
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    printf("\n  vector: all 2^32 f32 patterns to f16 and to bf16, as half.h\n");
    free(u), free(want), free(got);
}

/* A structured sample of f32 patterns: every exponent and sign with the
 * mantissas where rounding changes (each format's tie, one either side,
 * odd and even kept parts, all ones, the quiet bit), plus random ones. */
static int64_t f32_sample(uint32_t *u) {
    static const uint32_t low[] = {0x0, 0x1, 0xFFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x3000,
                                   0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x10000, 0x18000};
    static const uint32_t high[] = {0x0, 0x1, 0x2, 0x3, 0x3FF, 0x400000 >> 13, 0x7FFFFF >> 13,
                                    0x7F};
    int64_t n = 0;
    for (uint32_t sign = 0; sign < 2; sign++)
        for (uint32_t e = 0; e < 256; e++) {
            uint32_t top = sign << 31 | e << 23;
            for (size_t h = 0; h < sizeof high / sizeof *high; h++)
                for (size_t l = 0; l < sizeof low / sizeof *low; l++) {
                    uint32_t hi = high[h] << 13, hi16 = (high[h] & 0x7F) << 16;
                    u[n++] = top | ((hi | low[l]) & 0x7FFFFF);
                    u[n++] = top | ((hi16 | low[l]) & 0x7FFFFF);
                }
            u[n++] = top | 0x7FFFFF;
            u[n++] = top | 0x400000;
            u[n++] = top | 0x3FFFFF;
            for (int r = 0; r < 64; r++) u[n++] = top | (uint32_t)(rnd() & 0x7FFFFF);
        }
    return n;
}

static void test_cast_f32_sample(void) {
    uint32_t *u = malloc(sizeof(uint32_t) * 200000);
    uint16_t *want = malloc(2 * 200000), *got = malloc(2 * 200000);
    CU_ASSERT_PTR_NOT_NULL_FATAL(u && want && got);
    int64_t n = f32_sample(u);
    for (int ti = 0; ti < 2; ti++) {
        ref_narrow(halves[ti], want, (const float *)u, n);
        for (int impl = 0; impl < CPU_CAST_IMPLS; impl++) {
            cpu_cast_fn f = cpu_cast_lowp_fn(halves[ti], LT_F32, impl);
            if (!f) {
                printf("\n  %s: SKIPPED (this CPU cannot run it)", impl_names[impl]);
                continue;
            }
            memset(got, 0, 2 * (size_t)n);
            f(got, u, n);
            CU_ASSERT_EQUAL(memcmp(got, want, 2 * (size_t)n), 0);
            printf("\n  %s %s: %lld sampled f32 patterns as half.h", impl_names[impl],
                   lt_dtype_name(halves[ti]), (long long)n);
        }
    }
    printf("\n");
    free(u), free(want), free(got);
}

/* ---- the plugin's cast kernel ---------------------------------------------------- */

static const lt_accelerator_desc *g_acc;
static const lt_kernels *K;
static lt_ctx g_ctx;

/* f32 <-> 16 bit through the kernel (the fastest form) on the sample, and
 * f64 <-> 16 bit: f64 -> 16 bit rounds once (round to odd into f32, then to
 * nearest even, as half.h), checked on values whose double rounding through
 * f32 would differ, and on every 16-bit value widened. */
static void test_cast_kernel(void) {
    enum { M = 200000 };
    uint32_t *u = malloc(sizeof(uint32_t) * M);
    uint16_t *want = malloc(2 * M), *got = malloc(2 * M);
    double *d = malloc(sizeof(double) * 65536);
    CU_ASSERT_PTR_NOT_NULL_FATAL(u && want && got && d);
    int64_t n = f32_sample(u);
    for (int ti = 0; ti < 2; ti++) {
        lt_dtype t = halves[ti];
        ref_narrow(t, want, (const float *)u, n);
        K->cast(&g_ctx, t, got, LT_F32, u, n);
        CU_ASSERT_EQUAL(memcmp(got, want, 2 * (size_t)n), 0);
        /* every 16-bit value to f64 and back is the identity, NaNs aside
         * (half.h quiets them on the way back) */
        uint16_t *h = want;
        for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
        K->cast(&g_ctx, LT_F64, d, t, h, 65536);
        K->cast(&g_ctx, t, got, LT_F64, d, 65536);
        int bad = 0;
        for (int i = 0; i < 65536; i++) {
            float f = ref_widen1(t, (uint16_t)i);
            bool nan = f != f;
            bad += nan ? !isnan(d[i]) : d[i] != (double)f;
            bad += nan ? got[i] != (t == LT_F16 ? half_f32_to_f16(f) : half_f32_to_bf16(f))
                       : got[i] != i;
        }
        CU_ASSERT_EQUAL(bad, 0);
        /* f64 one f64-ulp past a tie of the 16-bit format: rounding through
         * f32 to nearest would land on the tie and round to even (down);
         * the right answer is up. 1 + 2^-11 + 2^-40 in f16 is 1 + 2^-10;
         * 1 + 2^-8 + 2^-40 in bf16 is 1 + 2^-7. */
        double x = 1.0 + (t == LT_F16 ? 0x1p-11 : 0x1p-8) + 0x1p-40;
        uint16_t r;
        K->cast(&g_ctx, t, &r, LT_F64, &x, 1);
        CU_ASSERT_EQUAL(r, t == LT_F16 ? 0x3C01 : 0x3F81);
        printf("\n  %s: kernel on %lld f32 patterns, f64 round trips, f64 single rounding",
               lt_dtype_name(t), (long long)n);
    }
    CU_ASSERT_EQUAL(g_acc->synchronize(&g_ctx), LT_OK);
    printf("\n");
    free(u), free(want), free(got), free(d);
}

/* ---- gemm --------------------------------------------------------------------- */

/* The plugin once per isa setting; each gives the 16-bit GEMM another f32
 * path underneath. One this CPU lacks is refused at setup and skipped. */
typedef struct gemm_variant {
    const char *isa;
    const char *bf16; /* the bf16_gemm parameter: auto, or the dot-product kernel */
    bool open;
    lt_ctx ctx;
    const lt_accelerator_desc *acc;
    const lt_kernels *k;
    lt_config *cfg;
} gemm_variant;

static gemm_variant variants[] = {
    {.isa = "auto", .bf16 = "auto"},     {.isa = "avx512", .bf16 = "auto"},
    {.isa = "avx2", .bf16 = "auto"},     {.isa = "generic", .bf16 = "auto"},
    {.isa = "auto", .bf16 = "emulated"}, {.isa = "auto", .bf16 = "native"}};
enum { NVARIANTS = sizeof variants / sizeof *variants };

static int open_variants(void) {
    for (int v = 0; v < NVARIANTS; v++) {
        gemm_variant *g = &variants[v];
        char err[256] = "";
        g->cfg = lt_config_new();
        if (!g->cfg) return -1;
        lt_config_declare(g->cfg, "accelerator.cpu", "isa", LT_PARAM_STRING, "auto", "isa");
        lt_config_declare(g->cfg, "accelerator.cpu", "bf16_gemm", LT_PARAM_STRING, "auto", "bf16");
        if (lt_config_set(g->cfg, "accelerator.cpu", "isa", g->isa, LT_SRC_FLAG, "--set", err,
                          sizeof err) != LT_OK ||
            lt_config_set(g->cfg, "accelerator.cpu", "bf16_gemm", g->bf16, LT_SRC_FLAG, "--set",
                          err, sizeof err) != LT_OK)
            return -1;
        g->open = cpu_plugin_open_config(&g->acc, &g->ctx, &g->k, g->cfg) == 0;
        if (!g->open)
            printf("isa=%s bf16_gemm=%s: SKIPPED in the gemm tests (refused here)\n", g->isa,
                   g->bf16);
    }
    return 0;
}

static void close_variants(void) {
    for (int v = 0; v < NVARIANTS; v++) {
        if (variants[v].open) variants[v].acc->teardown(&variants[v].ctx);
        lt_config_free(variants[v].cfg);
    }
}

/* Who computes a case: the plugin once per isa setting (what training
 * runs: lt's 16-bit kernels where the rule picks them, or whole-operand
 * conversion for the f32 path), then each of lt's 16-bit kernel paths
 * called directly on every shape it can compute, whatever the rule would
 * pick (gemm_lowp_avx2.c compiled in). */
typedef struct gemm_shape {
    lt_dtype t;
    bool ta, tb;
    int m, n, k;
    double alpha, beta;
    int lda, ldb, ldc;
} gemm_shape;

static const char *const path_names[CPU_HGEMM_PATHS] = {"none", "DOT", "STREAM", "PACKED", "YT"};
enum { NRUNNERS = NVARIANTS + CPU_HGEMM_PATHS - 1 };

static const char *runner_name(int r) {
    static char buf[64];
    if (r < NVARIANTS)
        snprintf(buf, sizeof buf, "isa=%s bf16_gemm=%s", variants[r].isa, variants[r].bf16);
    else snprintf(buf, sizeof buf, "%s", path_names[r - NVARIANTS + 1]);
    return buf;
}

/* Runs case `sh` on runner r; false when r cannot run it here. */
static bool run_gemm(int r, const gemm_shape *sh, const uint16_t *a, const uint16_t *b,
                     uint16_t *c) {
    if (r < NVARIANTS) {
        gemm_variant *g = &variants[r];
        if (!g->open) return false;
        /* the dot-product variants differ from auto only on bf16; emulated,
         * the kernel runs ~5 GF/s (SIMDe's portable dpbf16; f32 here: 90):
         * the MLP's batch-1024 shapes (4e8 products each) are left to native */
        bool dp = strcmp(g->bf16, "auto") != 0; /* and n >= 16: thinner ones widen */
        if (dp && (sh->t != LT_BF16 || sh->n < 16 ||
                   (!strcmp(g->bf16, "emulated") && (double)sh->m * sh->n * sh->k > 1.2e8)))
            return false;
        g->k->gemm(&g->ctx, sh->t, sh->ta, sh->tb, sh->m, sh->n, sh->k, sh->alpha, a, sh->lda, b,
                   sh->ldb, sh->beta, c, sh->ldc);
        CU_ASSERT_EQUAL(g->acc->synchronize(&g->ctx), LT_OK);
        return true;
    }
    cpu_hgemm_path path = (cpu_hgemm_path)(r - NVARIANTS + 1);
    /* alpha 0 and k 0 never reach the kernels (gemm_lowp.c scales C) */
    if (!cpu_hgemm_avx2_usable() || !cpu_hgemm_avx2_fits(path, sh->ta, sh->tb) ||
        sh->alpha == 0 || sh->k == 0)
        return false;
    int64_t floats = cpu_hgemm_avx2_scratch(path, sh->m, sh->n, sh->k);
    float *scratch = aligned_alloc(64, (size_t)(floats + 16) / 16 * 64);
    CU_ASSERT_PTR_NOT_NULL_FATAL(scratch);
    cpu_hgemm_avx2(path, sh->t, sh->ta, sh->tb, sh->m, sh->n, sh->k, (float)sh->alpha, a, sh->lda,
                   b, sh->ldb, (float)sh->beta, c, sh->ldc, scratch);
    free(scratch);
    return true;
}

static uint16_t to16(lt_dtype t, float f) {
    return t == LT_F16 ? half_f32_to_f16(f) : half_f32_to_bf16(f);
}

/* One unit in the last place of the 16-bit format at |x| (the subnormal
 * spacing below the normal range). */
static double ulp16(lt_dtype t, double x) {
    int e = x == 0 ? -1000 : ilogb(x);
    return t == LT_F16 ? ldexp(1, (e < -14 ? -14 : e) - 10) : ldexp(1, (e < -126 ? -126 : e) - 7);
}

/* want = alpha op(A) op(B) + beta C and mag = |alpha| |op(A)| |op(B)| +
 * |beta C| in double, from the 16-bit values widened exactly; oa is op(A)
 * (m x k) and ob op(B) (k x n), dense. */
static HOT void ref_gemm(int m, int n, int k, double alpha, const double *oa, const double *ob,
                         double beta, const double *c0, double *want, double *mag) {
    for (int i = 0; i < m; i++) {
        double *w = want + (int64_t)i * n, *g = mag + (int64_t)i * n;
        for (int j = 0; j < n; j++) w[j] = g[j] = 0;
        for (int p = 0; p < k; p++) {
            double x = oa[(int64_t)i * k + p], ax = fabs(x);
            const double *row = ob + (int64_t)p * n;
            for (int j = 0; j < n; j++) {
                w[j] += x * row[j];
                g[j] += ax * fabs(row[j]);
            }
        }
        for (int j = 0; j < n; j++) {
            double c = beta == 0 ? 0 : beta * c0[(int64_t)i * n + j];
            w[j] = alpha * w[j] + c;
            g[j] = fabs(alpha) * g[j] + fabs(c);
        }
    }
}

static int g_cases, g_runs;

/* Runs one shape on every open variant against the reference. The bound:
 * the products of two 16-bit values are exact in f32 (at most 22 of 24
 * significand bits), so the f32 result differs from the exact one only by
 * the roundings of the sums, the alpha scaling and the beta term, each at
 * most 2^-24 relative to the running magnitude: in all at most
 * (k + 1) 2^-24 mag <= k 2^-23 mag (k >= 1), whatever the summation order
 * or blocking. Rounding that f32 value to the 16-bit format once adds half
 * an ulp of the format at the value; one ulp at the exact value covers it
 * when the f32 value sits in the next binade. So
 *   |got - want| <= k 2^-23 mag + ulp16(want). */
static void gemm_case(lt_dtype t, bool ta, bool tb, int m, int n, int k, double alpha,
                      double beta, int pad) {
    int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    int lda = ac + pad, ldb = bc + pad, ldc = n + pad;
    size_t na = (size_t)ar * lda, nb = (size_t)br * ldb, nc = (size_t)m * ldc;
    uint16_t *a = malloc(2 * na + 2), *b = malloc(2 * nb + 2), *c0 = malloc(2 * nc + 2);
    uint16_t *c = malloc(2 * nc + 2);
    double *oa = malloc(sizeof(double) * ((size_t)m * k + 1));
    double *ob = malloc(sizeof(double) * ((size_t)k * n + 1));
    double *dc = malloc(sizeof(double) * (size_t)m * n), *want = malloc(sizeof(double) * m * n);
    double *mag = malloc(sizeof(double) * m * n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a && b && c0 && c && oa && ob && dc && want && mag);
    for (size_t i = 0; i < na; i++) a[i] = to16(t, rnd_unit());
    for (size_t i = 0; i < nb; i++) b[i] = to16(t, rnd_unit());
    for (size_t i = 0; i < nc; i++) c0[i] = to16(t, 2 * rnd_unit());
    for (int i = 0; i < m; i++)
        for (int p = 0; p < k; p++)
            oa[(int64_t)i * k + p] =
                ref_widen1(t, ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p]);
    for (int p = 0; p < k; p++)
        for (int j = 0; j < n; j++)
            ob[(int64_t)p * n + j] =
                ref_widen1(t, tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j]);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) dc[(int64_t)i * n + j] = ref_widen1(t, c0[(size_t)i * ldc + j]);
    ref_gemm(m, n, k, alpha, oa, ob, beta, dc, want, mag);
    g_cases++;
    gemm_shape sh = {t, ta, tb, m, n, k, alpha, beta, lda, ldb, ldc};
    for (int r = 0; r < NRUNNERS; r++) {
        memcpy(c, c0, 2 * nc);
        if (beta == 0) /* must not be read: NaN would show */
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) c[(size_t)i * ldc + j] = t == LT_F16 ? 0x7E00 : 0x7FC0;
        if (!run_gemm(r, &sh, a, b, c)) continue;
        g_runs++;
        int bad = 0;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < ldc; j++) {
                size_t at = (size_t)i * ldc + j;
                if (j >= n) { /* padding: untouched */
                    bad += c[at] != c0[at];
                    continue;
                }
                double got = ref_widen1(t, c[at]), w = want[(int64_t)i * n + j];
                double bound = k * 0x1p-23 * mag[(int64_t)i * n + j] + ulp16(t, w);
                if (!(fabs(got - w) <= bound) && bad++ < 3)
                    printf("\n  %s %s ta=%d tb=%d m=%d n=%d k=%d alpha=%g beta=%g: C[%d,%d] = "
                           "%.9g, want %.9g (bound %.3g)",
                           runner_name(r), lt_dtype_name(t), ta, tb, m, n, k, alpha, beta, i, j,
                           got, w, bound);
            }
        CU_ASSERT_EQUAL(bad, 0);
    }
    free(a), free(b), free(c0), free(c), free(oa), free(ob), free(dc), free(want), free(mag);
}

static void test_gemm_odd_sizes(void) {
    /* m: panel splits (17 = 6 + 6 + 5, the last transposed panel shifted),
     * more than one block of rows (53 > MC); n: DOT's 1, 3, 15, 16-wide
     * strips and their tails; k: below and past a 16-step, past STREAM's
     * 256-long and PACKED's 1024-long blocks (the fp32 copy of C) */
    static const int ms[] = {1, 5, 7, 17, 53}, ns[] = {1, 3, 15, 33, 70},
                     ks[] = {1, 9, 17, 300, 1100};
    static const double betas[] = {0.0, 1.0, -0.5}, alphas[] = {1.0, 0.75, -2.0};
    int turn = 0;
    for (int ti = 0; ti < 2; ti++)
        for (int tr = 0; tr < 4; tr++)
            for (size_t im = 0; im < sizeof ms / sizeof *ms; im++)
                for (size_t in = 0; in < sizeof ns / sizeof *ns; in++)
                    for (size_t ik = 0; ik < sizeof ks / sizeof *ks; ik++, turn++)
                        gemm_case(halves[ti], tr & 1, tr & 2, ms[im], ns[in], ks[ik],
                                  alphas[turn % 3], betas[(turn / 3) % 3], 1 + turn % 3);
    /* YT's passes over B's rows: Y^T holds 1008 rows of a 64-column
     * (m 53, 40 padded) op(A)^T, so n = 1100 and 1030 take two, the second
     * short; A stored both ways, k in 2 blocks */
    gemm_case(LT_BF16, false, true, 53, 1100, 300, 0.75, -0.5, 1);
    gemm_case(LT_F16, true, true, 40, 1030, 70, 1.0, 1.0, 2);
    printf("\n  %d shapes, %d runs over the isa settings and kernel paths\n", g_cases, g_runs);
    if (!cpu_hgemm_avx2_usable())
        printf("  lt's 16-bit kernels: SKIPPED (this CPU lacks AVX2, FMA or F16C)\n");
}

/* The MLP's step (784-512-512-10) at batch 64, 256, 1024, as core/nn/layers.c
 * calls it: forward Y = X W^T, weight gradient dW = dY^T X (beta 1 as when
 * gradients accumulate), input gradient dX = dY W. */
static void test_gemm_mlp(void) {
    static const int in[3] = {784, 512, 512}, out[3] = {512, 512, 10}, batch[3] = {64, 256, 1024};
    for (int ti = 0; ti < 2; ti++)
        for (int bi = 0; bi < 3; bi++)
            for (int l = 0; l < 3; l++) {
                int B = batch[bi];
                gemm_case(halves[ti], false, true, B, out[l], in[l], 1.0, 0.0, 0);
                gemm_case(halves[ti], true, false, out[l], in[l], B, 1.0, bi == 1 ? 1.0 : 0.0, 0);
                if (l > 0) gemm_case(halves[ti], false, false, B, in[l], out[l], 1.0, 0.0, 0);
            }
    printf("\n  MLP shapes at batch 64, 256, 1024 on every isa setting and kernel path\n");
}

/* The CNN example's GEMMs per image (core/nn/conv.c): conv1 1->32 on 28x28,
 * conv2 32->64 on 14x14 (3x3, padding 1), then 3136 -> 128 -> 10 at batch 64. */
static void test_gemm_cnn(void) {
    struct { bool ta, tb; int m, n, k; double beta; } s[] = {
        {false, false, 32, 784, 9, 0.0},   {false, false, 32, 784, 1, 1.0}, /* conv1 y, + bias */
        {false, true, 32, 9, 784, 1.0},    {false, false, 32, 1, 784, 1.0}, /* dW, db */
        {true, false, 9, 784, 32, 0.0},                                     /* W^T dY */
        {false, false, 64, 196, 288, 0.0}, {false, false, 64, 196, 1, 1.0},
        {false, true, 64, 288, 196, 1.0},  {false, false, 64, 1, 196, 1.0},
        {true, false, 288, 196, 64, 0.0},
        {false, true, 64, 128, 3136, 0.0}, {true, false, 128, 3136, 64, 0.0},
        {false, false, 64, 3136, 128, 0.0}, {false, true, 64, 10, 128, 0.0},
        {true, false, 10, 128, 64, 0.0},    {false, false, 64, 128, 10, 0.0},
    };
    for (int ti = 0; ti < 2; ti++)
        for (size_t i = 0; i < sizeof s / sizeof *s; i++)
            gemm_case(halves[ti], s[i].ta, s[i].tb, s[i].m, s[i].n, s[i].k, 1.0, s[i].beta, 0);
    printf("\n  CNN shapes on every isa setting and kernel path\n");
}

/* alpha 0 and k 0: C = beta C, A and B unread (NaN there must not show);
 * beta 0 then writes zeros over a NaN C. */
static void test_gemm_alpha0(void) {
    for (int ti = 0; ti < 2; ti++) {
        lt_dtype t = halves[ti];
        uint16_t nan16 = t == LT_F16 ? 0x7E00 : 0x7FC0, a[12], b[12], c[12];
        for (int i = 0; i < 12; i++) a[i] = b[i] = nan16;
        for (int v = 0; v < NVARIANTS; v++) {
            gemm_variant *g = &variants[v];
            if (!g->open) continue;
            for (int i = 0; i < 12; i++) c[i] = to16(t, (float)i);
            g->k->gemm(&g->ctx, t, false, false, 3, 4, 3, 0.0, a, 3, b, 4, -0.5, c, 4);
            for (int i = 0; i < 12; i++) CU_ASSERT_EQUAL(c[i], to16(t, -0.5f * (float)i));
            g->k->gemm(&g->ctx, t, true, true, 3, 4, 0, 1.0, a, 3, b, 1, 2.0, c, 4);
            for (int i = 0; i < 12; i++) CU_ASSERT_EQUAL(c[i], to16(t, -1.0f * (float)i));
            for (int i = 0; i < 12; i++) c[i] = nan16;
            g->k->gemm(&g->ctx, t, false, false, 3, 4, 0, 1.0, a, 3, b, 4, 0.0, c, 4);
            for (int i = 0; i < 12; i++) CU_ASSERT_EQUAL(c[i], 0);
            CU_ASSERT_EQUAL(g->acc->synchronize(&g->ctx), LT_OK);
        }
    }
}

/* NaN and infinity in, NaN and infinity out, on every runner: row 0 of A
 * holds a NaN (quiet, then signalling), row 1 an infinity, row 2 values
 * whose sum overflows the format, row 3 plain values; B is positive. Then
 * alpha a NaN whose f32 payload is all ones: rounding that to bf16 as a
 * number would carry into the sign (-0), so it must stay a NaN. */
static void test_gemm_special(void) {
    enum { M = 4, N = 20, K = 20 };
    union { uint64_t u; double d; } nan_alpha = {0x7FFFFFFFE0000000ull};
    for (int ti = 0; ti < 2; ti++)
        for (int sig = 0; sig < 2; sig++) {
            lt_dtype t = halves[ti];
            uint16_t a[M * K], b[K * N], c[M * N];
            for (int i = 0; i < M * K; i++) a[i] = to16(t, 0.25f + (float)(i % 7) / 8);
            for (int i = 0; i < K * N; i++) b[i] = to16(t, 0.5f + (float)(i % 5) / 10);
            a[0 * K + 3] = t == LT_F16 ? (sig ? 0x7C01 : 0x7E01) : (sig ? 0x7F81 : 0x7FC1);
            a[1 * K + 5] = t == LT_F16 ? 0x7C00 : 0x7F80;
            for (int p = 0; p < K; p++) a[2 * K + p] = to16(t, t == LT_F16 ? 60000.0f : 1e38f);
            gemm_shape sh = {t, false, false, M, N, K, 1.0, 0.0, K, N, N};
            for (int r = 0; r < NRUNNERS; r++) {
                if (!run_gemm(r, &sh, a, b, c)) continue;
                int bad = 0;
                for (int j = 0; j < N; j++) {
                    float v0 = ref_widen1(t, c[j]), v1 = ref_widen1(t, c[N + j]);
                    float v2 = ref_widen1(t, c[2 * N + j]), v3 = ref_widen1(t, c[3 * N + j]);
                    bad += !isnan(v0) + !(isinf(v1) && v1 > 0) + !(isinf(v2) && v2 > 0);
                    bad += !isfinite(v3);
                }
                CU_ASSERT_EQUAL(bad, 0);
                if (bad) printf("\n  %s %s: NaN/Inf rows wrong", runner_name(r), lt_dtype_name(t));
                gemm_shape nan_sh = sh;
                nan_sh.alpha = nan_alpha.d;
                if (!run_gemm(r, &nan_sh, a, b, c)) continue;
                for (int i = 0; i < M * N; i++) bad += !isnan(ref_widen1(t, c[i]));
                CU_ASSERT_EQUAL(bad, 0);
                if (bad)
                    printf("\n  %s %s: alpha NaN gave a number", runner_name(r), lt_dtype_name(t));
            }
        }
}

/* Which way the plugin goes (isa=avx2, the f32 path lt's 16-bit kernels
 * were measured against) for shapes PACKED and YT take: lt's kernels while
 * OpenBLAS runs one thread (bit for bit what the path called directly
 * gives), whole-operand conversion for OpenBLAS's threads when it runs
 * more (bit for bit what isa=generic gives, which always converts). */
static void test_gemm_dispatch(void) {
    gemm_variant *avx2 = &variants[2];
    void *dl = dlopen(CPU_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL); /* the plugin's OpenBLAS */
    void (*set_threads)(int) = dl ? (void (*)(int))dlsym(dl, "openblas_set_num_threads") : NULL;
    int (*get_threads)(void) = dl ? (int (*)(void))dlsym(dl, "openblas_get_num_threads") : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(set_threads);
    CU_ASSERT_PTR_NOT_NULL_FATAL(get_threads);
    if (!cpu_hgemm_avx2_usable() || !avx2->open) {
        printf("\n  SKIPPED: lt's 16-bit kernels do not run here\n");
        return;
    }
    enum { M = 40, N = 70, KMAX = 300 };
    static const struct { int k; cpu_hgemm_path path; } cases[] = {
        {KMAX, CPU_HGEMM_YT}, /* k > m: Y^T */
        {36, CPU_HGEMM_PACKED},
    };
    static uint16_t a[M * KMAX], b[N * KMAX], c[4][M * N];
    int before = get_threads();
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        int k = cases[ci].k;
        CU_ASSERT_EQUAL_FATAL(cpu_hgemm_avx2_pick(false, true, M, N, k), cases[ci].path);
        for (int ti = 0; ti < 2; ti++) {
            lt_dtype t = halves[ti];
            for (int i = 0; i < M * k; i++) a[i] = to16(t, rnd_unit());
            for (int i = 0; i < N * k; i++) b[i] = to16(t, rnd_unit());
            gemm_shape sh = {t, false, true, M, N, k, 1.0, 0.0, k, k, N};
            set_threads(1);
            run_gemm(2, &sh, a, b, c[0]);                              /* isa=avx2 */
            run_gemm(NVARIANTS + cases[ci].path - 1, &sh, a, b, c[1]); /* the path directly */
            CU_ASSERT_EQUAL(memcmp(c[0], c[1], sizeof c[0]), 0);
            set_threads(2);
            run_gemm(2, &sh, a, b, c[2]);
            run_gemm(3, &sh, a, b, c[3]); /* isa=generic */
            CU_ASSERT_EQUAL(memcmp(c[2], c[3], sizeof c[2]), 0);
        }
    }
    set_threads(before);
}

/* Scratch the context cannot get is a parked LT_ERR_NOMEM, with nothing
 * read or written (the operands here are far smaller than the sizes say). */
static void test_gemm_nomem(void) {
    uint16_t x[4] = {0};
    int64_t big = 1 << 30;
    K->gemm(&g_ctx, LT_BF16, false, false, big, big, big, 1.0, x, big, x, big, 0.0, x, big);
    CU_ASSERT_EQUAL(g_acc->synchronize(&g_ctx), LT_ERR_NOMEM);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(&g_ctx), "scratch"));
    CU_ASSERT_EQUAL(g_acc->synchronize(&g_ctx), LT_OK);
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    if (cpu_plugin_open(&g_acc, &g_ctx, &K) != 0 || open_variants() != 0) return 1;
    CU_pSuite s = CU_add_suite("cpu_lowp", NULL, NULL);
    if (!s) return 1;
    CU_add_test(s, "casts: every f16 and bf16 pattern, every loop form", test_cast_every_16bit);
    CU_add_test(s, "casts: f32 sample, every loop form", test_cast_f32_sample);
    CU_add_test(s, "casts: every f32 pattern, vector form", test_cast_every_f32);
    CU_add_test(s, "casts: the plugin's kernel, f64", test_cast_kernel);
    /* NaN first: what it leaves in a context's scratch must not reach the
     * beta 0 cases after it */
    CU_add_test(s, "gemm: NaN, infinity, overflow", test_gemm_special);
    CU_add_test(s, "gemm: odd sizes, transposes, alpha, beta", test_gemm_odd_sizes);
    CU_add_test(s, "gemm: the MLP's shapes", test_gemm_mlp);
    CU_add_test(s, "gemm: the CNN's shapes", test_gemm_cnn);
    CU_add_test(s, "gemm: alpha 0 and k 0", test_gemm_alpha0);
    CU_add_test(s, "gemm: lt's kernels or OpenBLAS's threads", test_gemm_dispatch);
    CU_add_test(s, "gemm: scratch out of memory", test_gemm_nomem);
    int rc = lt_cunit_run();
    close_variants();
    g_acc->teardown(&g_ctx);
    return rc;
}
