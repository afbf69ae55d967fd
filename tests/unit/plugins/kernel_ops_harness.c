/* The conformance program's machinery: accelerators loaded through the
 * registry, device buffers with guard bytes, case bookkeeping, the
 * comparisons and the per-kernel report. */
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernel_ops.h"
#include "registry/registry.h"

bool kops_verbose;
const char *kops_only_kernel;
int kops_only_dtype;

/* ---- tolerances ------------------------------------------------------------ *
 * kops_close's bound is u |ref| + tol * scale + (smallest subnormal): u
 * covers the one rounding the ABI allows when a result is stored (exact for
 * a value the dtype holds), tol the arithmetic before it, relative to the
 * size of the terms (scale), so that cancellation in the result does not
 * turn an honest rounding error into a failure.
 *
 *  f64: 1e-12. A double kernel doing a handful of operations is within a
 *       few units of 2^-53 (1.1e-16); 1e-12 leaves room for another
 *       library's exp/erf/tanh/log (a few ulp each) and for reassociated
 *       sums, and still catches any error of f32 size (1e-7) or a wrong
 *       formula.
 *  f32: 1e-5, about 170 units of 2^-24 (6e-8): fast device intrinsics
 *       (a few ulp), the scalars arriving as float (each one rounding),
 *       a subtraction before exp (xent) amplifying its rounding. A wrong
 *       constant or a dropped term is far above it.
 *  f16, bf16: the ABI makes a 16-bit kernel compute in fp32 and round once
 *       on store, so their tol is f32's, and the store rounding is u:
 *       2^-11 (4.9e-4) for f16, 2^-8 (3.9e-3) for bf16, i.e. half an ulp
 *       of the result. One rounding too many shows up as a full ulp.
 *  Sums of k terms (gemm's k, sum_rows' rows, sumsq's n, col2im's overlap):
 *       tol * sqrt(k). Rounding errors of a sum of k terms grow like sqrt(k)
 *       for any reasonable order (sequential, pairwise, tree, atomics); the
 *       bound is relative to the sum of the absolute terms. */
double kops_tol_elem(lt_dtype t) { return t == LT_F64 ? 1e-12 : 1e-5; }

double kops_tol_sum(lt_dtype t, int64_t terms) {
    return kops_tol_elem(t) * sqrt((double)(terms > 1 ? terms : 1));
}

/* ---- accelerators ---------------------------------------------------------- */

static lt_registry *g_registry;

static lt_registry *registry(void) {
    if (!g_registry) {
        g_registry = lt_registry_new();
        if (g_registry && lt_registry_add_dir(g_registry, LT_TEST_PLUGIN_DIR) != LT_OK) {
            lt_registry_free(g_registry);
            g_registry = NULL;
        }
    }
    return g_registry;
}

int kops_dev_open(kops_dev *d, const char *name) {
    memset(d, 0, sizeof *d);
    d->name = name;
    d->reference = strcmp(name, "cpu") == 0;
    char path[1024];
    snprintf(path, sizeof path, "%s/liblt-accelerator-%s.so", LT_TEST_PLUGIN_DIR, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("accelerator %s: %s does not exist in this build; skipped\n", name, path);
        return 1;
    }
    fclose(f);
    lt_registry *r = registry();
    if (!r) {
        printf("accelerator %s: cannot create the plugin registry\n", name);
        return -1;
    }
    const lt_plugin_header *h = NULL;
    char err[1024];
    if (lt_registry_load(r, LT_KIND_ACCELERATOR, name, &h, err, sizeof err) != LT_OK) {
        printf("accelerator %s: %s\n", name, err);
        return -1;
    }
    d->acc = (const lt_accelerator_desc *)h;
    lt_ctx_init(&d->ctx, LT_KIND_ACCELERATOR, name, h, NULL);
    bool avail = false;
    lt_status st = d->acc->is_available(&d->ctx, &avail);
    if (st != LT_OK || !avail) {
        const char *why = lt_last_error(&d->ctx);
        printf("accelerator %s: not available here (%s); skipped\n", name,
               why && *why ? why : st != LT_OK ? "is_available failed" : "no device, no message");
        return 1;
    }
    if (d->acc->setup(&d->ctx, 0) != LT_OK) {
        printf("accelerator %s: setup failed: %s\n", name, lt_last_error(&d->ctx));
        return -1;
    }
    if (d->acc->get_kernels(&d->ctx, &d->k) != LT_OK || !d->k) {
        printf("accelerator %s: get_kernels failed: %s\n", name, lt_last_error(&d->ctx));
        d->acc->teardown(&d->ctx);
        return -1;
    }
    d->ready = true;
    return 0;
}

void kops_dev_close(kops_dev *d) {
    if (d->ready) {
        lt_memory_stats ms;
        if (d->acc->memory_stats(&d->ctx, &ms) == LT_OK && ms.allocated_bytes)
            printf("accelerator %s: %llu bytes still allocated at the end (a leak in the "
                   "test)\n", d->name, (unsigned long long)ms.allocated_bytes);
        d->acc->teardown(&d->ctx);
    }
    d->ready = false;
}

static int name_cmp(const void *a, const void *b) { return strcmp(a, b); }

int kops_list_accelerators(char names[][64], int max) {
    int n = 0;
    DIR *dir = opendir(LT_TEST_PLUGIN_DIR);
    if (!dir) return 0;
    static const char prefix[] = "liblt-accelerator-";
    for (struct dirent *e; (e = readdir(dir)) && n < max;) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, prefix, sizeof prefix - 1) || len < sizeof prefix + 3 ||
            strcmp(e->d_name + len - 3, ".so"))
            continue;
        size_t nl = len - (sizeof prefix - 1) - 3;
        if (nl >= 64) continue;
        memcpy(names[n], e->d_name + sizeof prefix - 1, nl);
        names[n][nl] = 0;
        n++;
    }
    closedir(dir);
    qsort(names, (size_t)n, sizeof names[0], name_cmp);
    for (int i = 0; i < n; i++) /* the reference accelerator first */
        if (!strcmp(names[i], "cpu") && i) {
            char t[64];
            memcpy(t, names[i], 64);
            memmove(names[1], names[0], (size_t)i * 64);
            memcpy(names[0], t, 64);
        }
    return n;
}

/* ---- kernels ---------------------------------------------------------------- */

static const char *const KERNEL_NAMES[K_COUNT] = {
    "gemm", "fill", "axpby", "add_bias", "sum_rows", "act_fwd", "act_bwd", "dropout_fwd",
    "dropout_bwd", "xent_fwd", "xent_bwd", "mse_fwd", "mse_bwd", "count_correct", "cast",
    "sumsq", "all_finite", "sgd_step", "adamw_step", "rand_fill", "im2col", "col2im",
    "max_pool_fwd", "max_pool_bwd", "clamp", "quantize_u8", "dequantize_u8", "qadam_step",
    "cross-device",
};

const char *kops_kernel_name(kops_kernel k) { return KERNEL_NAMES[k]; }

bool kops_has_kernel(const kops_dev *d, kops_kernel k) {
    const lt_kernels *t = d->k;
    switch (k) {
#define H(K, f) case K: return LT_KERNELS_HAS(t, f);
    H(K_GEMM, gemm) H(K_FILL, fill) H(K_AXPBY, axpby) H(K_ADD_BIAS, add_bias)
    H(K_SUM_ROWS, sum_rows) H(K_ACT_FWD, act_fwd) H(K_ACT_BWD, act_bwd)
    H(K_DROPOUT_FWD, dropout_fwd) H(K_DROPOUT_BWD, dropout_bwd) H(K_XENT_FWD, xent_fwd)
    H(K_XENT_BWD, xent_bwd) H(K_MSE_FWD, mse_fwd) H(K_MSE_BWD, mse_bwd)
    H(K_COUNT_CORRECT, count_correct) H(K_CAST, cast) H(K_SUMSQ, sumsq)
    H(K_ALL_FINITE, all_finite) H(K_SGD_STEP, sgd_step) H(K_ADAMW_STEP, adamw_step)
    H(K_RAND_FILL, rand_fill) H(K_IM2COL, im2col) H(K_COL2IM, col2im)
    H(K_MAX_POOL_FWD, max_pool_fwd) H(K_MAX_POOL_BWD, max_pool_bwd) H(K_CLAMP, clamp)
    H(K_QUANTIZE_U8, quantize_u8) H(K_DEQUANTIZE_U8, dequantize_u8)
    H(K_QADAM_STEP, qadam_step)
#undef H
    default: return true;
    }
}

/* ---- cases ------------------------------------------------------------------ */

#define GUARD_BYTES 64
#define GUARD_BYTE 0xA5
#define MAX_BUFS 24

typedef struct stat_cell {
    int run, failed, xfail;
    bool unsupported;
    char why[200];
} stat_cell;

/* Per accelerator slot (by name), kernel and dtype. */
#define MAX_DEVS 4
static struct {
    const kops_dev *dev;
    stat_cell cell[K_COUNT][KOPS_NDTYPES];
} g_stats[MAX_DEVS];

static struct {
    kops_dev *dev;
    kops_kernel kernel;
    lt_dtype dtype, src; /* src: cast's source dtype */
    char desc[256];
    bool failed, header_printed, open;
    const char *xfail; /* a known discrepancy this case may show */
    int nbufs;
    struct { kops_dev *dev; void *p; size_t bytes; } bufs[MAX_BUFS];
} C;
static int g_failed_total;

int kops_failed_total(void) { return g_failed_total; }

static stat_cell *cell_of(const kops_dev *d, kops_kernel k, lt_dtype t) {
    for (int i = 0; i < MAX_DEVS; i++) {
        if (g_stats[i].dev == d) return &g_stats[i].cell[k][kops_dtype_index(t)];
        if (!g_stats[i].dev) {
            g_stats[i].dev = d;
            return &g_stats[i].cell[k][kops_dtype_index(t)];
        }
    }
    static stat_cell spare;
    return &spare;
}

static bool dtype_required(const kops_dev *d, lt_dtype t) {
    return t == LT_F32 || t == LT_F64 || d->reference;
}

bool kops_case(kops_dev *d, kops_kernel k, lt_dtype t, const char *fmt, ...) {
    if (kops_only_kernel && strcmp(kops_only_kernel, KERNEL_NAMES[k]) != 0) return false;
    if (kops_only_dtype && (int)t != kops_only_dtype && k != K_CAST) return false;
    /* cast: a pair may be missing while others to the same dtype work */
    if (k != K_CAST && cell_of(d, k, t)->unsupported) return false;
    C.dev = d;
    C.kernel = k;
    C.dtype = t;
    C.failed = C.header_printed = false;
    C.open = true;
    C.nbufs = 0;
    C.src = t;
    C.xfail = NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(C.desc, sizeof C.desc, fmt, ap);
    va_end(ap);
    return true;
}

static void print_header(void) {
    if (C.header_printed) return;
    C.header_printed = true;
    printf("  [%s] %s %s %s:\n", C.dev->name, KERNEL_NAMES[C.kernel], kops_dtype_name(C.dtype),
           C.desc);
}

void kops_fail(const char *fmt, ...) {
    print_header();
    C.failed = true;
    if (C.xfail) printf("    expected failure (%s): ", C.xfail);
    else printf("    FAIL: ");
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

bool kops_case_failed(void) { return C.failed; }

void kops_expect_failure(const char *why) { C.xfail = why; }

bool kops_sync(kops_dev *d) {
    lt_status st = d->acc->synchronize(&d->ctx);
    if (st == LT_OK) return true;
    const char *msg = lt_last_error(&d->ctx);
    if (st == LT_ERR_UNSUPPORTED) {
        stat_cell *c = cell_of(d, C.kernel, C.dtype);
        c->unsupported = true;
        snprintf(c->why, sizeof c->why, "%s", msg ? msg : "");
        if (dtype_required(d, C.dtype) && (C.kernel != K_CAST || dtype_required(d, C.src)))
            kops_fail("reported unsupported, but %s requires it: %s",
                      d->reference ? "the reference accelerator" : "the ABI (f32 and f64)", msg);
        else if (kops_verbose)
            printf("  [%s] %s %s: not supported (%s)\n", d->name, KERNEL_NAMES[C.kernel],
                   kops_dtype_name(C.dtype), msg);
        return false;
    }
    kops_fail("synchronize returned %d: %s", (int)st, msg ? msg : "");
    return false;
}

void kops_case_src(lt_dtype src) { C.src = src; }

bool kops_end(kops_dev *d) {
    for (int i = 0; i < C.nbufs; i++) C.bufs[i].dev->acc->free(&C.bufs[i].dev->ctx, C.bufs[i].p);
    C.nbufs = 0;
    C.open = false;
    stat_cell *c = cell_of(d, C.kernel, C.dtype);
    /* An unsupported optional dtype is not a case run. */
    if (c->unsupported && !C.failed && C.kernel != K_CAST) return true;
    c->run++;
    if (C.failed && C.xfail) c->xfail++;
    else if (C.failed) c->failed++, g_failed_total++;
    else if (kops_verbose)
        printf("  [%s] %s %s %s: OK\n", d->name, KERNEL_NAMES[C.kernel], kops_dtype_name(C.dtype),
               C.desc);
    return !C.failed || C.xfail;
}

/* ---- buffers ---------------------------------------------------------------- */

static size_t buf_bytes(const kops_dev *d, const void *p) {
    for (int i = 0; i < C.nbufs; i++)
        if (C.bufs[i].p == p && C.bufs[i].dev == d) return C.bufs[i].bytes;
    return (size_t)-1;
}

void *kops_alloc(kops_dev *d, size_t bytes) {
    if (C.nbufs == MAX_BUFS) {
        kops_fail("test bug: more than %d buffers in one case", MAX_BUFS);
        return NULL;
    }
    void *p = NULL;
    if (d->acc->alloc(&d->ctx, bytes + GUARD_BYTES, &p) != LT_OK || !p) {
        kops_fail("alloc(%zu) failed: %s", bytes + GUARD_BYTES, lt_last_error(&d->ctx));
        return NULL;
    }
    unsigned char *host = malloc(bytes + GUARD_BYTES);
    memset(host, GUARD_BYTE, bytes + GUARD_BYTES); /* payload too: no uninitialised reads */
    if (d->acc->copy(&d->ctx, p, host, bytes + GUARD_BYTES, LT_COPY_H2D) != LT_OK)
        kops_fail("copy H2D failed: %s", lt_last_error(&d->ctx));
    free(host);
    C.bufs[C.nbufs].dev = d;
    C.bufs[C.nbufs].p = p;
    C.bufs[C.nbufs].bytes = bytes;
    C.nbufs++;
    return p;
}

void *kops_up_raw(kops_dev *d, const void *host, size_t bytes) {
    void *p = kops_alloc(d, bytes);
    if (p && bytes && d->acc->copy(&d->ctx, p, host, bytes, LT_COPY_H2D) != LT_OK)
        kops_fail("copy H2D failed: %s", lt_last_error(&d->ctx));
    return p;
}

void *kops_up(kops_dev *d, lt_dtype t, const double *v, int64_t n) {
    size_t bytes = (size_t)n * lt_dtype_size(t);
    void *host = malloc(bytes ? bytes : 1);
    kops_pack(t, v, n, host);
    void *p = kops_up_raw(d, host, bytes);
    free(host);
    return p;
}

void kops_down_raw(kops_dev *d, const void *dev, void *host, size_t bytes) {
    size_t have = buf_bytes(d, dev);
    size_t total = have == (size_t)-1 ? bytes : have + GUARD_BYTES;
    unsigned char *tmp = malloc(total ? total : 1);
    lt_status st = d->acc->copy(&d->ctx, tmp, dev, total, LT_COPY_D2H);
    if (st == LT_OK) st = d->acc->synchronize(&d->ctx);
    if (st != LT_OK) {
        kops_fail("copy D2H failed: %s", lt_last_error(&d->ctx));
        memset(host, 0, bytes);
        free(tmp);
        return;
    }
    memcpy(host, tmp, bytes);
    if (have != (size_t)-1)
        for (size_t i = have; i < total; i++)
            if (tmp[i] != GUARD_BYTE) {
                kops_fail("wrote past the end of a %zu-byte buffer (guard byte %zu is 0x%02x)",
                          have, i - have, tmp[i]);
                break;
            }
    free(tmp);
}

void kops_down(kops_dev *d, lt_dtype t, const void *dev, int64_t n, double *out) {
    size_t bytes = (size_t)n * lt_dtype_size(t);
    void *host = malloc(bytes ? bytes : 1);
    kops_down_raw(d, dev, host, bytes);
    kops_unpack(t, host, n, out);
    free(host);
}

/* ---- comparisons ------------------------------------------------------------ */

static bool same_value(double g, double w, bool signed_zero) {
    if (isnan(w)) return isnan(g);
    if (g != w) return false;
    return !signed_zero || g != 0 || signbit(g) == signbit(w);
}

bool kops_close(const char *what, lt_dtype t, const double *got, const double *ref,
                const double *scale, int64_t n, double tol) {
    double u = kops_unit_roundoff(t), s = kops_min_subnormal(t);
    int64_t bad = 0, first = -1, at_abs = -1;
    double max_abs = 0, max_rel = 0, first_bound = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = got[i], r = ref[i];
        double sc = scale ? scale[i] : fabs(r);
        double bound = u * fabs(r) + tol * sc + s;
        bool ok;
        double err;
        if (isnan(r) || isinf(r)) {
            ok = same_value(g, r, false);
            err = ok ? 0 : INFINITY;
        } else {
            err = fabs(g - r);
            ok = err <= bound; /* false for a NaN got */
            if (isnan(g)) err = INFINITY;
        }
        if (err > max_abs || (isnan(err) && at_abs < 0)) max_abs = err, at_abs = i;
        double rel = r != 0 ? err / fabs(r) : (err ? INFINITY : 0);
        if (rel > max_rel) max_rel = rel;
        if (!ok) {
            if (first < 0) first = i, first_bound = bound;
            bad++;
        }
    }
    if (!bad) return true;
    kops_fail("%s: %lld of %lld elements off; max abs err %.3g at [%lld], max rel err %.3g; "
              "first bad [%lld]: got %.17g, want %.17g (bound %.3g)",
              what, (long long)bad, (long long)n, max_abs, (long long)at_abs, max_rel,
              (long long)first, got[first], ref[first], first_bound);
    return false;
}

bool kops_exact(const char *what, const double *got, const double *want, int64_t n,
                bool signed_zero) {
    int64_t bad = 0, first = -1;
    double max_abs = 0;
    for (int64_t i = 0; i < n; i++)
        if (!same_value(got[i], want[i], signed_zero)) {
            if (first < 0) first = i;
            bad++;
            double e = fabs(got[i] - want[i]);
            if (!(e <= max_abs)) max_abs = e;
        }
    if (!bad) return true;
    kops_fail("%s: %lld of %lld elements differ (exact required); max abs err %.3g; first "
              "[%lld]: got %.17g, want %.17g", what, (long long)bad, (long long)n, max_abs,
              (long long)first, got[first], want[first]);
    return false;
}

bool kops_exact_bytes(const char *what, const uint8_t *got, const uint8_t *want, int64_t n) {
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            if (first < 0) first = i;
            bad++;
        }
    if (!bad) return true;
    kops_fail("%s: %lld of %lld bytes differ (exact required); first [%lld]: got %u, want %u",
              what, (long long)bad, (long long)n, (long long)first, got[first], want[first]);
    return false;
}

bool kops_exact_i32(const char *what, const int32_t *got, const int32_t *want, int64_t n) {
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            if (first < 0) first = i;
            bad++;
        }
    if (!bad) return true;
    kops_fail("%s: %lld of %lld differ (exact required); first [%lld]: got %d, want %d", what,
              (long long)bad, (long long)n, (long long)first, got[first], want[first]);
    return false;
}

bool kops_exact_i64(const char *what, int64_t got, int64_t want) {
    if (got == want) return true;
    kops_fail("%s: got %lld, want %lld (exact required)", what, (long long)got,
              (long long)want);
    return false;
}

/* ---- report ------------------------------------------------------------------ */

int kops_report(const kops_dev *d) {
    int failed = 0, cases = 0;
    printf("\n[%s] kernel x dtype (passed cases / cases run, +N xf: N expected failures of "
           "the named list in test_kernel_ops.c; 'unsupported': synchronize said so; '-': not "
           "run):\n", d->name);
    printf("  %-14s %-14s %-14s %-14s %-14s\n", "kernel", "f32", "f64", "f16", "bf16");
    for (int k = 0; k < K_COUNT; k++) {
        bool any = false;
        for (int j = 0; j < KOPS_NDTYPES; j++) {
            stat_cell *c = cell_of(d, (kops_kernel)k, KOPS_DTYPES[j]);
            any |= c->run || c->unsupported;
        }
        if (!any) continue;
        printf("  %-14s", KERNEL_NAMES[k]);
        for (int j = 0; j < KOPS_NDTYPES; j++) {
            stat_cell *c = cell_of(d, (kops_kernel)k, KOPS_DTYPES[j]);
            char cellbuf[32];
            if (c->unsupported)
                snprintf(cellbuf, sizeof cellbuf, "%s",
                         dtype_required(d, KOPS_DTYPES[j]) ? "UNSUPPORTED!" : "unsupported");
            else if (!c->run)
                snprintf(cellbuf, sizeof cellbuf, "-");
            else if (c->xfail)
                snprintf(cellbuf, sizeof cellbuf, "%s%d/%d+%dxf", c->failed ? "FAIL " : "",
                         c->run - c->failed - c->xfail, c->run, c->xfail);
            else
                snprintf(cellbuf, sizeof cellbuf, "%s%d/%d", c->failed ? "FAIL " : "",
                         c->run - c->failed, c->run);
            printf(" %-14s", cellbuf);
            failed += c->failed;
            cases += c->run;
        }
        printf("\n");
    }
    for (int k = 0; k < K_COUNT; k++)
        for (int j = 0; j < KOPS_NDTYPES; j++) {
            stat_cell *c = cell_of(d, (kops_kernel)k, KOPS_DTYPES[j]);
            if (c->unsupported)
                printf("  not supported: %s %s (%s)\n", KERNEL_NAMES[k],
                       kops_dtype_name(KOPS_DTYPES[j]), c->why);
        }
    int xf = 0;
    for (int k = 0; k < K_COUNT; k++)
        for (int j = 0; j < KOPS_NDTYPES; j++) xf += cell_of(d, (kops_kernel)k, KOPS_DTYPES[j])->xfail;
    printf("[%s] %d cases, %d failed, %d expected failures (known discrepancies)\n", d->name,
           cases, failed, xf);
    return failed;
}
