/* The nn tape against central finite differences, in float64 on the cpu
 * accelerator: every layer and loss, a composed MLP, gradient accumulation,
 * parameter reuse, conv2d and max pooling (geometries with stride, padding
 * and overlapping windows, and a small CNN), and the grad-ready contract the strategies rely on (each
 * parameter range once per backward, in reverse registration order, only
 * after its gradient is final). */
#include <CUnit/Basic.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cunit_run.h"
#include "common/ctx.h"
#include "cpu_plugin.h"
#include "nn/nn_internal.h"
#include "lt/accelerator.h"

#define FD_H 1e-6
#define FD_RTOL 1e-6
#define FD_ATOL 1e-9   /* rounding of (L+ - L-) / 2h with |L| ~ 1 is ~1e-10 */
#define FD_SUBSET 30   /* elements checked in a parameter larger than this */

static const lt_accelerator_desc *g_acc;
static const lt_kernels *K;
static lt_ctx g_ctx;

/* ---- plugin ------------------------------------------------------------- */

static int suite_init(void) { return cpu_plugin_open(&g_acc, &g_ctx, &K); }

static int suite_clean(void) {
    if (g_acc) g_acc->teardown(&g_ctx);
    /* Not dlclosed: the plugin may keep worker threads alive. */
    return 0;
}

/* ---- small helpers -------------------------------------------------------- */

/* Deterministic values in [-1, 1) so failures reproduce. */
static double urand(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) * 0x1p-53 * 2.0 - 1.0;
}

/* Device buffer; on the cpu accelerator device memory is host memory, which
 * lets the test poke parameters and inputs in place. */
static double *dev_doubles(int64_t n) {
    void *p = NULL;
    if (g_acc->alloc(&g_ctx, (size_t)n * sizeof(double), &p) != LT_OK) return NULL;
    memset(p, 0, (size_t)n * sizeof(double));
    return p;
}

static void fill_rand(double *x, int64_t n, uint64_t seed, double scale) {
    for (int64_t i = 0; i < n; i++) x[i] = scale * urand(&seed);
}

static bool close_enough(double a, double b, double rtol, double atol) {
    return fabs(a - b) <= rtol * fmax(fabs(a), fabs(b)) + atol;
}

/* ---- a test case: model, step, one input, one loss ------------------------ */

typedef struct gcase gcase;
typedef lt_tensor *(*forward_fn)(gcase *c, lt_step *s, lt_tensor *x);

struct gcase {
    const char *what;
    lt_model *m;
    lt_step s;
    double *x;                 /* the input, device */
    int xndim;
    int64_t xshape[LT_MAX_DIMS];
    int64_t xnumel;
    bool x_grad;               /* check the input's gradient too */
    double *target;            /* mse target, device */
    int64_t tshape[2];
    int32_t *labels;           /* cross-entropy labels, device */
    forward_fn fwd;
    lt_linear_layer *l1, *l2;
    lt_conv2d_layer *cv;
    int64_t pool_k, pool_s;
    double dropout_p;
    lt_tensor *xt;             /* the wrapped input of the last step */
};

static void gc_begin(gcase *c, const char *what) {
    memset(c, 0, sizeof *c);
    c->what = what;
    c->m = lt_model_new(LT_F64, g_acc, &g_ctx, K);
}

static void gc_input(gcase *c, int ndim, const int64_t *shape, uint64_t seed, bool grad) {
    c->xndim = ndim;
    c->xnumel = 1;
    for (int i = 0; i < ndim; i++) { c->xshape[i] = shape[i]; c->xnumel *= shape[i]; }
    c->x = dev_doubles(c->xnumel);
    fill_rand(c->x, c->xnumel, seed, 1.0);
    c->x_grad = grad;
}

static void gc_target(gcase *c, int64_t rows, int64_t cols, uint64_t seed) {
    c->tshape[0] = rows;
    c->tshape[1] = cols;
    c->target = dev_doubles(rows * cols);
    fill_rand(c->target, rows * cols, seed, 1.0);
}

static void gc_labels(gcase *c, int64_t rows, int32_t classes) {
    void *p = NULL;
    CU_ASSERT_FATAL(g_acc->alloc(&g_ctx, (size_t)rows * sizeof(int32_t), &p) == LT_OK);
    c->labels = p;
    for (int64_t i = 0; i < rows; i++) c->labels[i] = (int32_t)((i * 7 + 3) % classes);
}

/* Parameters exist only once the model is finalized. A model needs at least
 * one parameter, so loss-only cases register an unused one. */
static void gc_finalize(gcase *c) {
    if (c->m->nparams == 0) {
        int64_t one[1] = {1};
        lt_param_new(c->m, "unused", 1, one, LT_INIT_ONES, 0);
    }
    lt_status st = lt_model_finalize(c->m, 1234);
    if (st != LT_OK) printf("\n  %s: finalize: %s\n", c->what, c->m->error);
    CU_ASSERT_FATAL(st == LT_OK);
    CU_ASSERT_FATAL(lt_step_init(&c->s, c->m) == LT_OK);
}

static void gc_end(gcase *c) {
    lt_step_destroy(&c->s);
    if (c->x) g_acc->free(&g_ctx, c->x);
    if (c->target) g_acc->free(&g_ctx, c->target);
    if (c->labels) g_acc->free(&g_ctx, c->labels);
    lt_model_free(c->m);
}

/* One training forward; the same seed and offset every time, so dropout
 * draws the same mask for the analytic and the perturbed evaluations. */
static lt_tensor *gc_forward(gcase *c, double *value) {
    lt_step *s = &c->s;
    lt_step_reset(s, true, 0, 0, 99, 0);
    c->xt = lt_step_wrap(s, c->x, LT_F64, c->xndim, c->xshape);
    c->xt->requires_grad = c->x_grad;
    lt_tensor *loss = c->fwd(c, s, c->xt);
    if (s->status != LT_OK) printf("\n  %s: forward: %s\n", c->what, s->error);
    CU_ASSERT_FATAL(loss != NULL && s->status == LT_OK);
    *value = lt_item(s, loss);
    return loss;
}

static double gc_loss(gcase *c) {
    double v;
    gc_forward(c, &v);
    return v;
}

/* Forward + backward into the current accumulation cycle. */
static void gc_backward(gcase *c) {
    double v;
    lt_tensor *loss = gc_forward(c, &v);
    lt_status st = lt_step_backward(&c->s, loss, 1.0);
    if (st != LT_OK) printf("\n  %s: backward: %s\n", c->what, c->s.error);
    CU_ASSERT_FATAL(st == LT_OK);
    CU_ASSERT_FATAL(g_acc->synchronize(&g_ctx) == LT_OK);
}

/* Central difference of the loss in element i of buffer x. */
static double numeric_grad(gcase *c, double *x, int64_t i) {
    double v = x[i];
    x[i] = v + FD_H;
    double lp = gc_loss(c);
    x[i] = v - FD_H;
    double lm = gc_loss(c);
    x[i] = v;
    return (lp - lm) / (2 * FD_H);
}

/* Compares analytic gradients of buffer x (n elements) with finite
 * differences: all elements, or a fixed random subset of FD_SUBSET. */
static int check_buffer(gcase *c, const char *name, double *x, const double *analytic, int64_t n) {
    uint64_t seed = 77;
    int64_t checks = n > FD_SUBSET ? FD_SUBSET : n;
    int bad = 0;
    double worst = 0;
    for (int64_t j = 0; j < checks; j++) {
        int64_t i = n > FD_SUBSET ? (int64_t)((urand(&seed) + 1.0) * 0.5 * (double)n) % n : j;
        double num = numeric_grad(c, x, i);
        double err = fabs(num - analytic[i]) / (fabs(num) + fabs(analytic[i]) + 1e-12);
        if (err > worst) worst = err;
        if (!close_enough(num, analytic[i], FD_RTOL, FD_ATOL)) {
            if (bad++ < 3)
                printf("\n  %s: %s[%lld]: analytic %.12g, numeric %.12g\n", c->what, name,
                       (long long)i, analytic[i], num);
        }
    }
    printf("\n  %s: %s: %lld elements, worst rel err %.2e", c->what, name, (long long)checks, worst);
    return bad;
}

/* Backward once, then every parameter and (if asked) the input by FD. */
static void gc_check(gcase *c) {
    lt_model_zero_grad(c->m);
    gc_backward(c);
    lt_model *m = c->m;
    double *grads = malloc(m->total * sizeof *grads);
    double *xgrad = c->x_grad ? malloc((size_t)c->xnumel * sizeof *xgrad) : NULL;
    memcpy(grads, m->grads_flat, m->total * sizeof *grads);
    if (c->x_grad) {
        CU_ASSERT_PTR_NOT_NULL_FATAL(c->xt->grad);
        memcpy(xgrad, c->xt->grad, (size_t)c->xnumel * sizeof *xgrad);
    }
    int bad = 0;
    for (int i = 0; i < m->nparams; i++) {
        lt_param *p = m->params[i];
        bad += check_buffer(c, p->name, (double *)m->params_flat + p->offset, grads + p->offset, p->numel);
    }
    if (c->x_grad) bad += check_buffer(c, "input", c->x, xgrad, c->xnumel);
    CU_ASSERT_EQUAL(bad, 0);
    free(grads);
    free(xgrad);
}

/* ---- forwards ------------------------------------------------------------- */

static lt_tensor *target_tensor(gcase *c, lt_step *s) {
    return lt_step_wrap(s, c->target, LT_F64, 2, c->tshape);
}

static lt_tensor *labels_tensor(gcase *c, lt_step *s, int64_t rows) {
    return lt_step_wrap(s, c->labels, LT_I32, 1, &rows);
}

static lt_tensor *fwd_linear_mse(gcase *c, lt_step *s, lt_tensor *x) {
    return lt_mse(s, lt_linear(s, c->l1, x), target_tensor(c, s));
}

static lt_tensor *fwd_relu_mse(gcase *c, lt_step *s, lt_tensor *x) {
    return lt_mse(s, lt_relu(s, x), target_tensor(c, s));
}

static lt_tensor *fwd_tanh_mse(gcase *c, lt_step *s, lt_tensor *x) {
    return lt_mse(s, lt_tanh(s, x), target_tensor(c, s));
}

static lt_tensor *fwd_gelu_mse(gcase *c, lt_step *s, lt_tensor *x) {
    return lt_mse(s, lt_gelu(s, x), target_tensor(c, s));
}

static lt_tensor *fwd_dropout_mse(gcase *c, lt_step *s, lt_tensor *x) {
    return lt_mse(s, lt_dropout(s, x, c->dropout_p), target_tensor(c, s));
}

static lt_tensor *fwd_flatten_linear_mse(gcase *c, lt_step *s, lt_tensor *x) {
    return lt_mse(s, lt_linear(s, c->l1, lt_flatten(s, x)), target_tensor(c, s));
}

static lt_tensor *fwd_xent(gcase *c, lt_step *s, lt_tensor *x) {
    return lt_cross_entropy(s, x, labels_tensor(c, s, x->shape[0]));
}

static lt_tensor *fwd_mse(gcase *c, lt_step *s, lt_tensor *x) {
    return lt_mse(s, x, target_tensor(c, s));
}

static lt_tensor *fwd_mlp(gcase *c, lt_step *s, lt_tensor *x) {
    lt_tensor *h = lt_gelu(s, lt_linear(s, c->l1, x));
    h = lt_tanh(s, h);
    return lt_cross_entropy(s, lt_linear(s, c->l2, h), labels_tensor(c, s, x->shape[0]));
}

/* The same square layer twice: its weight and bias get two contributions. */
static lt_tensor *fwd_reuse(gcase *c, lt_step *s, lt_tensor *x) {
    lt_tensor *h = lt_tanh(s, lt_linear(s, c->l1, x));
    return lt_mse(s, lt_linear(s, c->l1, h), target_tensor(c, s));
}

/* ---- per-layer checks -------------------------------------------------------- */

static void check_linear(bool bias) {
    gcase c;
    gc_begin(&c, bias ? "linear+bias" : "linear, no bias");
    c.l1 = lt_linear_new(c.m, "fc", 5, 3, bias);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c.l1);
    CU_ASSERT_EQUAL(c.m->nparams, bias ? 2 : 1);
    gc_finalize(&c);
    int64_t xs[2] = {4, 5};
    gc_input(&c, 2, xs, 11, true);
    gc_target(&c, 4, 3, 12);
    c.fwd = fwd_linear_mse;
    gc_check(&c);
    gc_end(&c);
}

static void test_linear_bias(void) { check_linear(true); }
static void test_linear_nobias(void) { check_linear(false); }

/* Activations take x directly; relu's input is kept away from its kink. */
static void check_activation(const char *what, forward_fn fwd, bool avoid_zero) {
    gcase c;
    gc_begin(&c, what);
    gc_finalize(&c);
    int64_t xs[2] = {3, 7};
    gc_input(&c, 2, xs, 21, true);
    if (avoid_zero)
        for (int64_t i = 0; i < c.xnumel; i++)
            if (fabs(c.x[i]) < 0.05) c.x[i] = c.x[i] < 0 ? -0.3 : 0.3;
    for (int64_t i = 0; i < c.xnumel; i++) c.x[i] *= 2.5; /* reach the flat parts too */
    gc_target(&c, 3, 7, 22);
    c.fwd = fwd;
    gc_check(&c);
    gc_end(&c);
}

static void test_relu(void) { check_activation("relu", fwd_relu_mse, true); }
static void test_tanh(void) { check_activation("tanh", fwd_tanh_mse, false); }
static void test_gelu(void) { check_activation("gelu", fwd_gelu_mse, false); }

/* Dropout: the mask is a pure function of (seed, offset), so FD sees a fixed
 * mask; also compared with the inverted-dropout gradient written out here,
 * from a mask drawn by the kernel with the step's seed and offset. */
static void test_dropout(void) {
    gcase c;
    gc_begin(&c, "dropout");
    gc_finalize(&c);
    int64_t xs[2] = {8, 16};
    gc_input(&c, 2, xs, 31, true);
    gc_target(&c, 8, 16, 32);
    c.fwd = fwd_dropout_mse;
    c.dropout_p = 0.3;
    gc_check(&c);

    int64_t n = c.xnumel;
    double *ones = dev_doubles(n), *y = dev_doubles(n);
    uint8_t *mask = NULL;
    CU_ASSERT_FATAL(g_acc->alloc(&g_ctx, (size_t)n, (void **)&mask) == LT_OK);
    for (int64_t i = 0; i < n; i++) ones[i] = 1.0;
    K->dropout_fwd(&g_ctx, LT_F64, y, mask, ones, n, c.dropout_p, 99, 0);
    CU_ASSERT_FATAL(g_acc->synchronize(&g_ctx) == LT_OK);

    lt_model_zero_grad(c.m);
    gc_backward(&c);
    const double *dx = c.xt->grad;
    const double *out = c.s.tape[0]->out->data; /* the dropout node's output */
    int kept = 0, bad = 0;
    double scale = 1.0 / (1.0 - c.dropout_p);
    for (int64_t i = 0; i < n; i++) {
        kept += mask[i];
        double yi = mask[i] ? c.x[i] * scale : 0.0;
        double want = mask[i] ? scale * 2.0 * (yi - c.target[i]) / (double)n : 0.0;
        if (!close_enough(out[i], yi, 1e-15, 0) || !close_enough(dx[i], want, 1e-13, 1e-300)) bad++;
    }
    printf("\n  dropout: %d of %lld kept (p=%.1f), %d mismatches with the analytic gradient",
           kept, (long long)n, c.dropout_p, bad);
    CU_ASSERT(kept > 0 && kept < n);
    CU_ASSERT_EQUAL(bad, 0);

    /* Outside training, dropout is the identity and records nothing. */
    lt_step_reset(&c.s, false, 0, 0, 99, 0);
    lt_tensor *xt = lt_step_wrap(&c.s, c.x, LT_F64, 2, xs);
    CU_ASSERT_PTR_EQUAL(lt_dropout(&c.s, xt, 0.3), xt);
    CU_ASSERT_EQUAL(c.s.ntape, 0);
    g_acc->free(&g_ctx, ones);
    g_acc->free(&g_ctx, y);
    g_acc->free(&g_ctx, mask);
    gc_end(&c);
}

static void test_flatten(void) {
    gcase c;
    gc_begin(&c, "flatten");
    c.l1 = lt_linear_new(c.m, "fc", 6, 3, true);
    gc_finalize(&c);
    int64_t xs[3] = {4, 2, 3};
    gc_input(&c, 3, xs, 41, true);
    gc_target(&c, 4, 3, 42);
    c.fwd = fwd_flatten_linear_mse;
    gc_check(&c);
    gc_end(&c);
}

static void test_cross_entropy(void) {
    gcase c;
    gc_begin(&c, "cross_entropy");
    gc_finalize(&c);
    int64_t xs[2] = {5, 4};
    gc_input(&c, 2, xs, 51, true);
    for (int64_t i = 0; i < c.xnumel; i++) c.x[i] *= 3.0;
    gc_labels(&c, 5, 4);
    c.fwd = fwd_xent;
    gc_check(&c);
    gc_end(&c);
}

static void test_mse(void) {
    gcase c;
    gc_begin(&c, "mse");
    gc_finalize(&c);
    int64_t xs[2] = {3, 5};
    gc_input(&c, 2, xs, 61, true);
    gc_target(&c, 3, 5, 62);
    c.fwd = fwd_mse;
    gc_check(&c);
    gc_end(&c);
}

/* ---- conv2d, max pooling, reshape ------------------------------------------- */

static lt_tensor *fwd_conv_mse(gcase *c, lt_step *s, lt_tensor *x) {
    return lt_mse(s, lt_flatten(s, lt_conv2d(s, c->cv, x)), target_tensor(c, s));
}

static lt_tensor *fwd_pool_mse(gcase *c, lt_step *s, lt_tensor *x) {
    return lt_mse(s, lt_flatten(s, lt_max_pool2d(s, x, c->pool_k, c->pool_s)), target_tensor(c, s));
}

/* [N, 36] viewed as [N, 1, 6, 6]: conv, relu, pool, flatten, linear, xent. */
static lt_tensor *fwd_cnn(gcase *c, lt_step *s, lt_tensor *x) {
    int64_t img[4] = {x->shape[0], 1, 6, 6};
    lt_tensor *h = lt_relu(s, lt_conv2d(s, c->cv, lt_reshape(s, x, 4, img)));
    h = lt_flatten(s, lt_max_pool2d(s, h, 2, 0));
    return lt_cross_entropy(s, lt_linear(s, c->l1, h), labels_tensor(c, s, x->shape[0]));
}

typedef struct conv_shape {
    int64_t n, cin, h, w, cout, k, stride, pad;
    bool bias;
} conv_shape;

static void check_conv(const conv_shape *g, const char *what) {
    gcase c;
    gc_begin(&c, what);
    c.cv = lt_conv2d_new(c.m, "conv", g->cin, g->cout, g->k, g->stride, g->pad, g->bias);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c.cv);
    CU_ASSERT_EQUAL(c.m->nparams, g->bias ? 2 : 1);
    gc_finalize(&c);
    int64_t xs[4] = {g->n, g->cin, g->h, g->w};
    gc_input(&c, 4, xs, 81, true);
    int64_t oh = (g->h + 2 * g->pad - g->k) / g->stride + 1, ow = (g->w + 2 * g->pad - g->k) / g->stride + 1;
    gc_target(&c, g->n, g->cout * oh * ow, 82);
    c.fwd = fwd_conv_mse;
    gc_check(&c);
    gc_end(&c);
}

static void test_conv2d(void) {
    /* 3x3 "same" with bias, 2 images, 2 -> 3 channels, non-square */
    check_conv(&(conv_shape){2, 2, 5, 6, 3, 3, 1, 1, true}, "conv 3x3 pad 1");
    /* stride 2 without padding, without bias: windows skip input columns */
    check_conv(&(conv_shape){2, 3, 7, 6, 2, 2, 2, 0, false}, "conv 2x2 stride 2");
    /* stride 2 with padding 2 > kernel / 2: whole padded rows in the lowering */
    check_conv(&(conv_shape){1, 1, 5, 5, 2, 3, 2, 2, true}, "conv 3x3 stride 2 pad 2");
    /* 1x1 kernel: a per-pixel linear map */
    check_conv(&(conv_shape){3, 4, 3, 3, 2, 1, 1, 0, true}, "conv 1x1");
}

/* Inputs spaced apart (a shuffled ramp, step 0.1) so no window has a near
 * tie that the finite-difference step could flip. */
static void check_pool(int64_t k, int64_t stride, int64_t h, int64_t w, const char *what) {
    gcase c;
    gc_begin(&c, what);
    gc_finalize(&c);
    int64_t xs[4] = {2, 3, h, w};
    gc_input(&c, 4, xs, 91, true);
    uint64_t seed = 5;
    for (int64_t i = 0; i < c.xnumel; i++) c.x[i] = 0.1 * (double)i - 1.0;
    for (int64_t i = c.xnumel - 1; i > 0; i--) { /* Fisher-Yates */
        int64_t j = (int64_t)((urand(&seed) + 1.0) * 0.5 * (double)(i + 1)) % (i + 1);
        double t = c.x[i]; c.x[i] = c.x[j]; c.x[j] = t;
    }
    c.pool_k = k;
    c.pool_s = stride;
    int64_t oh = (h - k) / (stride ? stride : k) + 1, ow = (w - k) / (stride ? stride : k) + 1;
    gc_target(&c, 2, 3 * oh * ow, 92);
    c.fwd = fwd_pool_mse;
    gc_check(&c);
    gc_end(&c);
}

static void test_max_pool(void) {
    check_pool(2, 0, 4, 6, "max_pool 2x2");
    check_pool(3, 1, 5, 4, "max_pool 3x3 stride 1 (overlapping windows)");
    check_pool(2, 3, 7, 8, "max_pool 2x2 stride 3 (skipped input)");
}

static void test_small_cnn(void) {
    gcase c;
    gc_begin(&c, "cnn");
    c.cv = lt_conv2d_new(c.m, "conv", 1, 2, 3, 1, 1, true);
    c.l1 = lt_linear_new(c.m, "fc", 2 * 3 * 3, 4, true);
    gc_finalize(&c);
    int64_t xs[2] = {3, 36};
    gc_input(&c, 2, xs, 101, true);
    gc_labels(&c, 3, 4);
    c.fwd = fwd_cnn;
    gc_check(&c);
    gc_end(&c);
}

/* The same CNN step in f32 and f64 from the same parameters (f32 init is
 * the f64 init rounded) and input: f32 runs every GEMM shape of conv2d
 * (forward, bias, weight gradient through the transposed path, input
 * gradient) on the cpu plugin's f32 kernels, f64 on OpenBLAS's dgemm, so the
 * gradients must agree to f32 rounding. */
typedef struct cnn_run {
    lt_model *m;
    lt_step s;
    lt_conv2d_layer *cv;
    lt_linear_layer *fc;
} cnn_run;

static void cnn_run_grads(cnn_run *r, lt_dtype t, const double *x64, const int32_t *labels,
                          int64_t n, double *grads_out) {
    r->m = lt_model_new(t, g_acc, &g_ctx, K);
    r->cv = lt_conv2d_new(r->m, "conv", 3, 16, 3, 1, 1, true);
    r->fc = lt_linear_new(r->m, "fc", 16 * 4 * 4, 5, true);
    CU_ASSERT_FATAL(lt_model_finalize(r->m, 99) == LT_OK);
    CU_ASSERT_FATAL(lt_step_init(&r->s, r->m) == LT_OK);
    int64_t xs[4] = {n, 3, 8, 8}, ls[1] = {n};
    int64_t nx = n * 3 * 8 * 8;
    void *x = NULL, *lab = NULL;
    CU_ASSERT_FATAL(g_acc->alloc(&g_ctx, (size_t)nx * lt_dtype_size(t), &x) == LT_OK);
    CU_ASSERT_FATAL(g_acc->alloc(&g_ctx, (size_t)n * sizeof(int32_t), &lab) == LT_OK);
    for (int64_t i = 0; i < nx; i++) {
        if (t == LT_F32) ((float *)x)[i] = (float)x64[i];
        else ((double *)x)[i] = x64[i];
    }
    memcpy(lab, labels, (size_t)n * sizeof(int32_t));
    lt_model_zero_grad(r->m);
    lt_step_reset(&r->s, true, 0, 0, 1, 0);
    lt_tensor *h = lt_relu(&r->s, lt_conv2d(&r->s, r->cv, lt_step_wrap(&r->s, x, t, 4, xs)));
    h = lt_flatten(&r->s, lt_max_pool2d(&r->s, h, 2, 0));
    lt_tensor *loss = lt_cross_entropy(&r->s, lt_linear(&r->s, r->fc, h), lt_step_wrap(&r->s, lab, LT_I32, 1, ls));
    CU_ASSERT_FATAL(loss != NULL);
    CU_ASSERT_FATAL(lt_step_backward(&r->s, loss, 1.0) == LT_OK);
    CU_ASSERT_FATAL(g_acc->synchronize(&g_ctx) == LT_OK);
    for (size_t i = 0; i < r->m->total; i++)
        grads_out[i] = t == LT_F32 ? (double)((float *)r->m->grads_flat)[i]
                                   : ((double *)r->m->grads_flat)[i];
    lt_step_destroy(&r->s);
    g_acc->free(&g_ctx, x);
    g_acc->free(&g_ctx, lab);
}

static void test_conv_f32_vs_f64(void) {
    enum { N = 6 };
    double x[N * 3 * 8 * 8];
    uint64_t seed = 11;
    for (size_t i = 0; i < sizeof x / sizeof *x; i++) x[i] = urand(&seed);
    int32_t labels[N];
    for (int i = 0; i < N; i++) labels[i] = (i * 3 + 1) % 5;
    cnn_run a, b;
    size_t total = 16 * 3 * 9 + 16 + 16 * 16 * 5 + 5;
    double *g32 = calloc(total, sizeof(double)), *g64 = calloc(total, sizeof(double));
    cnn_run_grads(&a, LT_F32, x, labels, N, g32);
    cnn_run_grads(&b, LT_F64, x, labels, N, g64);
    CU_ASSERT_EQUAL(a.m->total, total);
    double diff = 0, ref = 0;
    for (size_t i = 0; i < total; i++) {
        diff += (g32[i] - g64[i]) * (g32[i] - g64[i]);
        ref += g64[i] * g64[i];
    }
    double ratio = sqrt(diff / ref);
    printf("\n  conv f32 vs f64 gradients: norm ratio %.2e (%zu values)", ratio, total);
    CU_ASSERT(ref > 0);
    CU_ASSERT(ratio < 1e-5);
    lt_model_free(a.m);
    lt_model_free(b.m);
    free(g32), free(g64);
}

/* Bad shapes are step errors naming the layer and the fix. */
static void test_conv_errors(void) {
    gcase c;
    gc_begin(&c, "conv errors");
    c.cv = lt_conv2d_new(c.m, "conv1", 3, 4, 3, 1, 0, true);
    CU_ASSERT_PTR_NULL(lt_conv2d_new(c.m, "bad", 3, 4, 3, 0, 0, true));
    CU_ASSERT_PTR_NOT_NULL(strstr(c.m->error, "conv2d 'bad'"));
    c.m->status = LT_OK; /* the bad layer only: keep going */
    gc_finalize(&c);
    lt_step *s = &c.s;
    double *x = dev_doubles(2 * 2 * 5 * 5);
    lt_step_reset(s, true, 0, 0, 1, 0);
    lt_tensor *t = lt_step_wrap(s, x, LT_F64, 4, (int64_t[]){2, 2, 5, 5});
    CU_ASSERT_PTR_NULL(lt_conv2d(s, c.cv, t));
    CU_ASSERT_PTR_NOT_NULL(strstr(s->error, "conv2d 'conv1': expects input [N, 3, H, W]"));
    lt_step_reset(s, true, 0, 0, 1, 0);
    t = lt_step_wrap(s, x, LT_F64, 4, (int64_t[]){2, 2, 5, 5});
    CU_ASSERT_PTR_NULL(lt_max_pool2d(s, t, 6, 0));
    CU_ASSERT_PTR_NOT_NULL(strstr(s->error, "max_pool2d: kernel 6"));
    lt_step_reset(s, true, 0, 0, 1, 0);
    t = lt_step_wrap(s, x, LT_F64, 4, (int64_t[]){2, 2, 5, 5});
    CU_ASSERT_PTR_NULL(lt_reshape(s, t, 2, (int64_t[]){2, 49}));
    CU_ASSERT_PTR_NOT_NULL(strstr(s->error, "reshape: [2, 2, 5, 5] has 100 elements, the new shape [2, 49]"));
    /* an empty batch pools to an empty batch, with no kernel call */
    lt_step_reset(s, true, 0, 0, 1, 0);
    t = lt_step_wrap(s, x, LT_F64, 4, (int64_t[]){0, 2, 5, 5});
    lt_tensor *e = lt_max_pool2d(s, t, 2, 0);
    CU_ASSERT_PTR_NOT_NULL(e);
    CU_ASSERT_EQUAL(e ? lt_tensor_dim(e, 0) : -1, 0);
    CU_ASSERT_EQUAL(g_acc->synchronize(&g_ctx), LT_OK);
    g_acc->free(&g_ctx, x);
    gc_end(&c);

    /* An accelerator built against ABI 1.0 has a shorter kernel table: the
     * layer says which kernels are missing instead of calling past its end. */
    lt_kernels old = *K;
    old.struct_size = (uint32_t)offsetof(lt_kernels, im2col);
    gc_begin(&c, "ABI 1.0 kernels");
    c.m->k = &old;
    c.cv = lt_conv2d_new(c.m, "conv1", 2, 4, 3, 1, 0, true);
    gc_finalize(&c);
    x = dev_doubles(2 * 2 * 5 * 5);
    lt_step_reset(&c.s, true, 0, 0, 1, 0);
    t = lt_step_wrap(&c.s, x, LT_F64, 4, (int64_t[]){2, 2, 5, 5});
    CU_ASSERT_PTR_NULL(lt_conv2d(&c.s, c.cv, t));
    CU_ASSERT_PTR_NOT_NULL(strstr(c.s.error, "no im2col/col2im kernels"));
    lt_step_reset(&c.s, true, 0, 0, 1, 0);
    t = lt_step_wrap(&c.s, x, LT_F64, 4, (int64_t[]){2, 2, 5, 5});
    CU_ASSERT_PTR_NULL(lt_max_pool2d(&c.s, t, 2, 0));
    CU_ASSERT_PTR_NOT_NULL(strstr(c.s.error, "no max_pool_fwd/max_pool_bwd kernels"));
    g_acc->free(&g_ctx, x);
    gc_end(&c);
}

/* 8 -> 40 -> 4: fc1.weight has 320 elements, so a random subset is checked. */
static void make_mlp(gcase *c, const char *what) {
    gc_begin(c, what);
    c->l1 = lt_linear_new(c->m, "fc1", 8, 40, true);
    c->l2 = lt_linear_new(c->m, "fc2", 40, 4, true);
    gc_finalize(c);
    int64_t xs[2] = {6, 8};
    gc_input(c, 2, xs, 71, true);
    gc_labels(c, 6, 4);
    c->fwd = fwd_mlp;
}

static void test_mlp(void) {
    gcase c;
    make_mlp(&c, "mlp");
    gc_check(&c);
    gc_end(&c);
}

static void test_param_reuse(void) {
    gcase c;
    gc_begin(&c, "layer used twice");
    c.l1 = lt_linear_new(c.m, "sq", 4, 4, true);
    gc_finalize(&c);
    int64_t xs[2] = {3, 4};
    gc_input(&c, 2, xs, 81, true);
    gc_target(&c, 3, 4, 82);
    c.fwd = fwd_reuse;
    gc_check(&c);
    gc_end(&c);
}

/* ---- accumulation ------------------------------------------------------------ */

static double *grads_copy(const lt_model *m) {
    double *g = malloc(m->total * sizeof *g);
    memcpy(g, m->grads_flat, m->total * sizeof *g);
    return g;
}

/* Two backwards in one cycle sum; zero_grad starts a fresh cycle. */
static void test_accumulation(void) {
    gcase c;
    make_mlp(&c, "accumulation");
    double *x1 = malloc((size_t)c.xnumel * sizeof *x1), *x2 = malloc((size_t)c.xnumel * sizeof *x2);
    memcpy(x1, c.x, (size_t)c.xnumel * sizeof *x1);
    fill_rand(x2, c.xnumel, 72, 1.0);

    lt_model_zero_grad(c.m);
    gc_backward(&c);
    double *g1 = grads_copy(c.m);
    memcpy(c.x, x2, (size_t)c.xnumel * sizeof *x2);
    lt_model_zero_grad(c.m);
    gc_backward(&c);
    double *g2 = grads_copy(c.m);

    lt_model_zero_grad(c.m);
    memcpy(c.x, x1, (size_t)c.xnumel * sizeof *x1);
    gc_backward(&c);
    memcpy(c.x, x2, (size_t)c.xnumel * sizeof *x2);
    gc_backward(&c);
    const double *sum = c.m->grads_flat;
    int bad = 0;
    for (size_t i = 0; i < c.m->total; i++)
        if (!close_enough(sum[i], g1[i] + g2[i], 1e-13, 1e-300)) bad++;
    printf("\n  accumulation: %d of %zu elements differ from g1 + g2", bad, c.m->total);
    CU_ASSERT_EQUAL(bad, 0);

    /* A new cycle overwrites instead of adding. */
    lt_model_zero_grad(c.m);
    gc_backward(&c);
    CU_ASSERT_EQUAL(memcmp(c.m->grads_flat, g2, c.m->total * sizeof *g2), 0);
    free(x1), free(x2), free(g1), free(g2);
    gc_end(&c);
}

/* ---- grad-ready ------------------------------------------------------------- */

#define MAX_EVENTS 32

typedef struct ready_log {
    const lt_model *m;
    int n;
    size_t offset[MAX_EVENTS], count[MAX_EVENTS];
    double *snap[MAX_EVENTS]; /* the range's gradient when reported */
} ready_log;

static void on_ready(void *user, size_t offset, size_t count) {
    ready_log *r = user;
    if (r->n == MAX_EVENTS) return;
    /* Synchronize first: a strategy would start an async reduce on this range. */
    g_acc->synchronize(&g_ctx);
    r->offset[r->n] = offset;
    r->count[r->n] = count;
    r->snap[r->n] = malloc(count * sizeof(double));
    memcpy(r->snap[r->n], (const double *)r->m->grads_flat + offset, count * sizeof(double));
    r->n++;
}

static void ready_reset(ready_log *r) {
    for (int i = 0; i < r->n; i++) free(r->snap[i]);
    r->n = 0;
}

/* Checks one backward's events: each parameter exactly once, in reverse
 * registration order, with the gradient it ends the backward with. */
static void check_ready(const ready_log *r, const char *what) {
    const lt_model *m = r->m;
    printf("\n  %s: reported", what);
    for (int i = 0; i < r->n; i++) {
        const char *name = "?";
        for (int j = 0; j < m->nparams; j++)
            if (m->params[j]->offset == r->offset[i]) name = m->params[j]->name;
        printf(" %s", name);
    }
    CU_ASSERT_EQUAL_FATAL(r->n, m->nparams);
    for (int i = 0; i < r->n; i++) {
        const lt_param *p = m->params[m->nparams - 1 - i];
        bool order_ok = r->offset[i] == p->offset && r->count[i] == (size_t)p->numel;
        if (!order_ok) printf("\n  %s: event %d is offset %zu, expected %s (offset %zu)", what, i,
                              r->offset[i], p->name, p->offset);
        CU_ASSERT(order_ok);
        const double *final = (const double *)m->grads_flat + r->offset[i];
        bool final_ok = !memcmp(r->snap[i], final, r->count[i] * sizeof(double));
        if (!final_ok) printf("\n  %s: range at %zu changed after it was reported", what, r->offset[i]);
        CU_ASSERT(final_ok);
    }
}

static void test_grad_ready_mlp(void) {
    gcase c;
    make_mlp(&c, "grad-ready");
    ready_log r = {.m = c.m};
    c.m->grad_ready = on_ready;
    c.m->grad_ready_user = &r;
    lt_model_zero_grad(c.m);
    gc_backward(&c);
    check_ready(&r, "mlp, first backward");
    /* The second backward of an accumulation cycle reports every range again. */
    ready_reset(&r);
    gc_backward(&c);
    check_ready(&r, "mlp, accumulating backward");
    ready_reset(&r);
    gc_end(&c);
}

/* A reused layer's ranges are reported once, after the second contribution. */
static void test_grad_ready_reuse(void) {
    gcase c;
    gc_begin(&c, "grad-ready reuse");
    c.l1 = lt_linear_new(c.m, "sq", 4, 4, true);
    gc_finalize(&c);
    int64_t xs[2] = {3, 4};
    gc_input(&c, 2, xs, 81, false);
    gc_target(&c, 3, 4, 82);
    c.fwd = fwd_reuse;
    ready_log r = {.m = c.m};
    c.m->grad_ready = on_ready;
    c.m->grad_ready_user = &r;
    lt_model_zero_grad(c.m);
    gc_backward(&c);
    check_ready(&r, "reused layer");
    ready_reset(&r);
    gc_end(&c);
}

/* An unused parameter (registered first, so the reverse order still holds)
 * gets a zero gradient, even after a cycle in which it held garbage, and is
 * still reported. */
static void test_unused_param(void) {
    gcase c;
    gc_begin(&c, "unused parameter");
    int64_t shape[1] = {5};
    lt_param *unused = lt_param_new(c.m, "extra", 1, shape, LT_INIT_ONES, 0);
    c.l1 = lt_linear_new(c.m, "fc", 5, 3, true);
    gc_finalize(&c);
    int64_t xs[2] = {4, 5};
    gc_input(&c, 2, xs, 91, false);
    gc_target(&c, 4, 3, 92);
    c.fwd = fwd_linear_mse;
    double *g = (double *)lt_param_grad_ptr(c.m, unused);
    for (int i = 0; i < 5; i++) g[i] = 42.0; /* stale values must not survive */
    ready_log r = {.m = c.m};
    c.m->grad_ready = on_ready;
    c.m->grad_ready_user = &r;
    lt_model_zero_grad(c.m);
    gc_backward(&c);
    check_ready(&r, "unused parameter");
    int nonzero = 0;
    for (int i = 0; i < 5; i++) nonzero += g[i] != 0.0;
    CU_ASSERT_EQUAL(nonzero, 0);
    ready_reset(&r);
    gc_end(&c);
}

/* A layer computed but not used by the loss: zero gradients, still reported. */
static lt_tensor *fwd_dead_branch(gcase *c, lt_step *s, lt_tensor *x) {
    lt_linear(s, c->l2, x); /* result dropped */
    return lt_mse(s, lt_linear(s, c->l1, x), target_tensor(c, s));
}

static void test_dead_branch(void) {
    gcase c;
    gc_begin(&c, "dead branch");
    c.l1 = lt_linear_new(c.m, "used", 5, 3, true);
    c.l2 = lt_linear_new(c.m, "dead", 5, 2, true);
    gc_finalize(&c);
    int64_t xs[2] = {4, 5};
    gc_input(&c, 2, xs, 93, true);
    gc_target(&c, 4, 3, 94);
    c.fwd = fwd_dead_branch;
    ready_log r = {.m = c.m};
    c.m->grad_ready = on_ready;
    c.m->grad_ready_user = &r;
    lt_model_zero_grad(c.m);
    gc_backward(&c);
    CU_ASSERT_EQUAL(r.n, c.m->nparams);
    const lt_param *dw = c.m->params[2], *db = c.m->params[3];
    int nonzero = 0;
    const double *g = c.m->grads_flat;
    for (int64_t i = 0; i < dw->numel; i++) nonzero += g[dw->offset + i] != 0.0;
    for (int64_t i = 0; i < db->numel; i++) nonzero += g[db->offset + i] != 0.0;
    CU_ASSERT_EQUAL(nonzero, 0);
    ready_reset(&r);
    c.m->grad_ready = NULL;
    gc_check(&c); /* and the used branch is still right */
    gc_end(&c);
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("nn_grad", suite_init, suite_clean);
    if (!s) return 1;
    CU_add_test(s, "linear with bias: W, b, x", test_linear_bias);
    CU_add_test(s, "linear without bias: W, x", test_linear_nobias);
    CU_add_test(s, "relu", test_relu);
    CU_add_test(s, "tanh", test_tanh);
    CU_add_test(s, "gelu", test_gelu);
    CU_add_test(s, "dropout with a fixed mask", test_dropout);
    CU_add_test(s, "flatten", test_flatten);
    CU_add_test(s, "conv2d: padding, stride, 1x1, no bias", test_conv2d);
    CU_add_test(s, "max_pool2d: plain, overlapping, strided", test_max_pool);
    CU_add_test(s, "small CNN: reshape, conv, relu, pool, linear", test_small_cnn);
    CU_add_test(s, "conv, pool and reshape errors", test_conv_errors);
    CU_add_test(s, "CNN gradients in f32 match f64", test_conv_f32_vs_f64);
    CU_add_test(s, "cross-entropy", test_cross_entropy);
    CU_add_test(s, "mse", test_mse);
    CU_add_test(s, "2-layer MLP", test_mlp);
    CU_add_test(s, "parameter used twice", test_param_reuse);
    CU_add_test(s, "accumulation without zero_grad sums", test_accumulation);
    CU_add_test(s, "grad-ready: order, once, final", test_grad_ready_mlp);
    CU_add_test(s, "grad-ready: reused layer", test_grad_ready_reuse);
    CU_add_test(s, "unused parameter: zero and reported", test_unused_param);
    CU_add_test(s, "layer output unused by the loss", test_dead_branch);
    int rc = lt_cunit_run();
    return rc;
}
