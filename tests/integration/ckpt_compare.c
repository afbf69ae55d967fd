/* ckpt_compare A B TOL [--metric max|norm|both]
 *
 * Compares the parameters of two lt checkpoints (every tensor whose name does
 * not start with "optimizer.") and prints, per tensor and over all of them:
 *   max rel  = max |a-b| / max(|b|, 1e-3), elementwise (B is the reference)
 *   norm rel = ||a-b|| / ||b||, over the flattened parameters
 * Exit status: 0 when the chosen metric(s) (default: both) are <= TOL;
 * 1 when over; 2 when the files cannot be compared (missing, unreadable,
 * different tensor names, shapes or dtypes). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "io/safetensors.h"

static int is_param(const char *name) { return strncmp(name, "optimizer.", 10) != 0; }

static double half_to_double(uint16_t h, int bf16) {
    if (bf16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return s ? -v : v;
}

/* Element i of t as a double. */
static double elem(const lt_st_tensor *t, size_t i) {
    const unsigned char *p = t->data;
    switch (t->dtype) {
    case LT_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case LT_F64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    case LT_F16: case LT_BF16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return half_to_double(v, t->dtype == LT_BF16); }
    case LT_I8: return ((const int8_t *)p)[i];
    case LT_U8: return p[i];
    case LT_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case LT_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    }
    return NAN;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: ckpt_compare A.safetensors B.safetensors TOL [--metric max|norm|both]\n");
        return 2;
    }
    char *end;
    double tol = strtod(argv[3], &end);
    if (*end || !(tol >= 0)) {
        fprintf(stderr, "ckpt_compare: TOL '%s' is not a non-negative number\n", argv[3]);
        return 2;
    }
    const char *metric = "both";
    if (argc >= 6 && !strcmp(argv[4], "--metric")) metric = argv[5];
    if (strcmp(metric, "max") && strcmp(metric, "norm") && strcmp(metric, "both")) {
        fprintf(stderr, "ckpt_compare: --metric '%s': use max, norm or both\n", metric);
        return 2;
    }
    lt_st_file *fa = NULL, *fb = NULL;
    char err[1024];
    if (lt_st_open(argv[1], &fa, err, sizeof err) != LT_OK || lt_st_open(argv[2], &fb, err, sizeof err) != LT_OK) {
        fprintf(stderr, "ckpt_compare: %s\n", err);
        lt_st_close(fa);
        return 2;
    }
    int rc = 0;
    size_t nparams = 0, nb = 0;
    double max_rel = 0, diff2 = 0, ref2 = 0;
    const char *worst = "";
    for (size_t i = 0; i < lt_st_count(fb); i++)
        if (is_param(lt_st_at(fb, i)->name)) nb++;
    for (size_t i = 0; i < lt_st_count(fa) && rc == 0; i++) {
        const lt_st_tensor *a = lt_st_at(fa, i);
        if (!is_param(a->name)) continue;
        nparams++;
        const lt_st_tensor *b = lt_st_find(fb, a->name);
        if (!b) {
            fprintf(stderr, "ckpt_compare: %s has tensor '%s' but %s does not\n", argv[1], a->name, argv[2]);
            rc = 2;
            break;
        }
        int same = a->ndim == b->ndim && a->dtype == b->dtype;
        for (int d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
        if (!same) {
            fprintf(stderr, "ckpt_compare: tensor '%s' differs in dtype or shape between the files\n", a->name);
            rc = 2;
            break;
        }
        size_t n = a->nbytes / (lt_dtype_size(a->dtype) ? lt_dtype_size(a->dtype) : 1);
        double t_max = 0, t_d2 = 0, t_r2 = 0;
        for (size_t k = 0; k < n; k++) {
            double x = elem(a, k), y = elem(b, k), d = fabs(x - y);
            double rel = d / (fabs(y) > 1e-3 ? fabs(y) : 1e-3);
            if (!(rel <= t_max)) t_max = rel; /* NaN counts as the worst */
            t_d2 += d * d;
            t_r2 += y * y;
        }
        printf("  %-32s %9zu values  max rel %.3e  norm rel %.3e\n", a->name, n, t_max,
               t_r2 > 0 ? sqrt(t_d2 / t_r2) : sqrt(t_d2));
        if (!(t_max <= max_rel)) { max_rel = t_max; worst = a->name; }
        diff2 += t_d2;
        ref2 += t_r2;
    }
    if (rc == 0 && nparams != nb) {
        fprintf(stderr, "ckpt_compare: %s has %zu parameter tensors, %s has %zu\n", argv[1], nparams, argv[2], nb);
        rc = 2;
    }
    if (rc == 0 && nparams == 0) {
        fprintf(stderr, "ckpt_compare: no parameter tensors in %s\n", argv[1]);
        rc = 2;
    }
    if (rc == 0) {
        double norm_rel = ref2 > 0 ? sqrt(diff2 / ref2) : sqrt(diff2);
        printf("max relative difference %.3e%s%s%s, global norm ratio ||a-b||/||b|| %.3e, tolerance %.1e (%s)\n",
               max_rel, *worst ? " (in " : "", worst, *worst ? ")" : "", norm_rel, tol, metric);
        int over = 0;
        if (strcmp(metric, "norm") && !(max_rel <= tol)) over = 1;
        if (strcmp(metric, "max") && !(norm_rel <= tol)) over = 1;
        rc = over;
        printf("%s\n", over ? "ckpt_compare: OVER tolerance" : "ckpt_compare: within tolerance");
    }
    lt_st_close(fa);
    lt_st_close(fb);
    return rc;
}
