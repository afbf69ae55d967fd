/* Conv2d and max pooling. A convolution runs per image as GEMMs over the
 * im2col lowering (y_n = W col_n); the bias is a rank-1 GEMM update with a
 * row of ones, so every FLOP goes through the accelerator's gemm. Backward
 * lowers each image again rather than keeping the columns from forward: the
 * columns are kernel^2 times the input, and rebuilding them costs far less
 * than the GEMMs. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "nn_internal.h"

#define K(s) ((s)->model->k)
#define KC(s) ((s)->model->kctx)

static bool has_kernels(lt_step *s, const char *op, bool pool) {
    const lt_kernels *k = K(s);
    bool ok = pool ? LT_KERNELS_HAS(k, max_pool_fwd) && LT_KERNELS_HAS(k, max_pool_bwd)
                   : LT_KERNELS_HAS(k, im2col) && LT_KERNELS_HAS(k, col2im);
    if (!ok) {
        const lt_accelerator_desc *acc = s->model->accel;
        lt_step_fail(s, "%s: accelerator '%s' has no %s kernels (they came with plugin ABI 1.1); "
                     "rebuild the accelerator plugin against this lt", op,
                     acc ? acc->hdr.name : "?", pool ? "max_pool_fwd/max_pool_bwd" : "im2col/col2im");
    }
    return ok;
}

/* ---- Conv2d ---------------------------------------------------------------- */

lt_conv2d_layer *lt_conv2d_new(lt_model *m, const char *name, int64_t in, int64_t out,
                               int64_t kernel, int64_t stride, int64_t padding, bool bias) {
    if (!m || m->status != LT_OK) return NULL;
    if (in <= 0 || out <= 0 || kernel <= 0 || stride <= 0 || padding < 0) {
        m->status = LT_ERR_INVALID;
        snprintf(m->error, sizeof m->error,
                 "conv2d '%s': in (%lld), out (%lld), kernel (%lld) and stride (%lld) must be "
                 ">= 1 and padding (%lld) >= 0",
                 name, (long long)in, (long long)out, (long long)kernel, (long long)stride,
                 (long long)padding);
        return NULL;
    }
    lt_conv2d_layer *l = lt_model_own(m, sizeof *l);
    if (!l) { m->status = LT_ERR_NOMEM; return NULL; }
    char pname[160];
    int64_t wshape[4] = {out, in, kernel, kernel}, bshape[1] = {out};
    snprintf(pname, sizeof pname, "%s.weight", name);
    l->weight = lt_param_new(m, pname, 4, wshape, LT_INIT_KAIMING_UNIFORM, 0);
    if (bias) { /* PyTorch: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in * k * k */
        snprintf(pname, sizeof pname, "%s.bias", name);
        l->bias = lt_param_new(m, pname, 1, bshape, LT_INIT_UNIFORM,
                               1.0 / sqrt((double)(in * kernel * kernel)));
    }
    l->in = in, l->out = out, l->kernel = kernel, l->stride = stride, l->padding = padding;
    return m->status == LT_OK ? l : NULL;
}

static lt_conv_geom conv_geom(const lt_conv2d_layer *l, const lt_tensor *x) {
    lt_conv_geom g = {.c = l->in, .h = x->shape[2], .w = x->shape[3], .kh = l->kernel,
                      .kw = l->kernel, .sh = l->stride, .sw = l->stride, .ph = l->padding,
                      .pw = l->padding};
    g.oh = (g.h + 2 * g.ph - g.kh) / g.sh + 1;
    g.ow = (g.w + 2 * g.pw - g.kw) / g.sw + 1;
    return g;
}

static void conv2d_bwd(lt_step *s, lt_node *n, double seed) {
    (void)seed;
    const lt_conv2d_layer *l = n->layer;
    lt_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2], *y = n->out;
    const void *ones = n->saved;
    lt_conv_geom g = conv_geom(l, x);
    int64_t rows = g.c * g.kh * g.kw, plane = g.oh * g.ow, batch = x->shape[0];
    size_t es = lt_dtype_size(x->dtype);
    int64_t xstride = g.c * g.h * g.w, ystride = l->out * plane;
    void *col = lt_step_scratch(s, (size_t)(rows * plane) * es);
    if (!col) return;
    if (!y->grad) {
        void *g0;
        if (lt_grad_target(s, w, &g0) == 0.0) K(s)->fill(KC(s), w->dtype, g0, w->numel, 0.0);
        if (b && lt_grad_target(s, b, &g0) == 0.0) K(s)->fill(KC(s), b->dtype, g0, b->numel, 0.0);
    } else {
        /* dW = sum_n dY_n col_n^T; db = sum_n dY_n 1 */
        void *gw, *gb = NULL;
        double bw = lt_grad_target(s, w, &gw), bb = b ? lt_grad_target(s, b, &gb) : 0.0;
        for (int64_t i = 0; i < batch; i++) {
            const char *dy = (const char *)y->grad + (size_t)(i * ystride) * es;
            K(s)->im2col(KC(s), x->dtype, (const char *)x->data + (size_t)(i * xstride) * es, &g,
                         col);
            K(s)->gemm(KC(s), x->dtype, false, true, l->out, rows, plane, 1.0, dy, plane, col,
                       plane, i ? 1.0 : bw, gw, rows);
            if (b)
                K(s)->gemm(KC(s), x->dtype, false, false, l->out, 1, plane, 1.0, dy, plane, ones, 1,
                           i ? 1.0 : bb, gb, 1);
        }
        if (batch == 0) { /* no rows: the gradients are zero, not stale */
            if (bw == 0.0) K(s)->fill(KC(s), w->dtype, gw, w->numel, 0.0);
            if (b && bb == 0.0) K(s)->fill(KC(s), b->dtype, gb, b->numel, 0.0);
        }
    }
    if (b) lt_param_grad_done(s, b->param);
    lt_param_grad_done(s, w->param);
    if (!x->requires_grad || !y->grad) return;
    /* dX_n = col2im(W^T dY_n) */
    void *gx;
    double bx = lt_grad_target(s, x, &gx);
    if (!gx) return;
    for (int64_t i = 0; i < batch; i++) {
        K(s)->gemm(KC(s), x->dtype, true, false, rows, plane, l->out, 1.0, w->data, rows,
                   (const char *)y->grad + (size_t)(i * ystride) * es, plane, 0.0, col, plane);
        K(s)->col2im(KC(s), x->dtype, col, &g, (char *)gx + (size_t)(i * xstride) * es, bx);
    }
}

lt_tensor *lt_conv2d(lt_step *s, const lt_conv2d_layer *l, lt_tensor *x) {
    if (!lt_nn_ok_input(s, x, "conv2d")) return NULL;
    if (!l) { lt_step_fail(s, "conv2d: layer is NULL (did lt_conv2d_new fail in init?)"); return NULL; }
    const char *name = l->weight->name;
    int name_len = (int)(strlen(name) - strlen(".weight"));
    if (x->ndim != 4 || x->shape[1] != l->in || x->shape[2] + 2 * l->padding < l->kernel ||
        x->shape[3] + 2 * l->padding < l->kernel) {
        char sh[96];
        lt_nn_shape_str(x, sh, sizeof sh);
        lt_step_fail(s, "conv2d '%.*s': expects input [N, %lld, H, W] with H and W + 2 * padding "
                     ">= %lld, got %s; reshape the input or fix the layer",
                     name_len, name, (long long)l->in, (long long)l->kernel, sh);
        return NULL;
    }
    if (!has_kernels(s, "conv2d", false)) return NULL;
    lt_conv_geom g = conv_geom(l, x);
    int64_t rows = g.c * g.kh * g.kw, plane = g.oh * g.ow, batch = x->shape[0];
    size_t es = lt_dtype_size(x->dtype);
    int64_t shape[4] = {batch, l->out, g.oh, g.ow};
    lt_tensor *w = lt_param_tensor(s, l->weight);
    lt_tensor *b = l->bias ? lt_param_tensor(s, l->bias) : NULL;
    lt_tensor *y = lt_step_new_tensor(s, x->dtype, 4, shape, true);
    void *col = lt_step_scratch(s, (size_t)(rows * plane) * es);
    void *ones = b ? lt_step_scratch(s, (size_t)plane * es) : NULL;
    if (!w || (l->bias && !b) || !y || !col || (b && !ones)) return NULL;
    if (b) K(s)->fill(KC(s), x->dtype, ones, plane, 1.0);
    for (int64_t i = 0; i < batch; i++) {
        char *yi = (char *)y->data + (size_t)(i * l->out * plane) * es;
        K(s)->im2col(KC(s), x->dtype, (const char *)x->data + (size_t)(i * g.c * g.h * g.w) * es,
                     &g, col);
        K(s)->gemm(KC(s), x->dtype, false, false, l->out, plane, rows, 1.0, w->data, rows, col,
                   plane, 0.0, yi, plane);
        if (b) /* y_n += b 1^T */
            K(s)->gemm(KC(s), x->dtype, false, false, l->out, plane, 1, 1.0, b->data, 1, ones,
                       plane, 1.0, yi, plane);
    }
    lt_node *n = lt_step_record(s, conv2d_bwd, y);
    if (n) {
        n->in[0] = x;
        n->in[1] = w;
        n->in[2] = b;
        n->layer = l;
        n->saved = ones;
    }
    return s->status == LT_OK ? y : NULL;
}

/* ---- MaxPool2d ------------------------------------------------------------- */

static void max_pool_bwd(lt_step *s, lt_node *n, double seed) {
    (void)seed;
    lt_tensor *x = n->in[0], *y = n->out;
    if (!x->requires_grad || !y->grad) return;
    void *g;
    double beta = lt_grad_target(s, x, &g);
    if (g && x->numel > 0) K(s)->max_pool_bwd(KC(s), x->dtype, y->grad, n->saved, n->layer, g, beta);
}

lt_tensor *lt_max_pool2d(lt_step *s, lt_tensor *x, int64_t kernel, int64_t stride) {
    if (!lt_nn_ok_input(s, x, "max_pool2d")) return NULL;
    if (stride == 0) stride = kernel;
    if (x->ndim != 4 || kernel < 1 || stride < 1 || x->shape[2] < kernel || x->shape[3] < kernel ||
        x->shape[2] * x->shape[3] > INT32_MAX) {
        char sh[96];
        lt_nn_shape_str(x, sh, sizeof sh);
        lt_step_fail(s, "max_pool2d: kernel %lld, stride %lld on input %s: needs [N, C, H, W] "
                     "with H, W >= kernel >= 1, H * W <= 2^31 - 1, and stride >= 1 (0 means the "
                     "kernel size)",
                     (long long)kernel, (long long)stride, sh);
        return NULL;
    }
    if (!has_kernels(s, "max_pool2d", true)) return NULL;
    /* The geometry lives on the host arena for backward. */
    lt_conv_geom *g = lt_arena_alloc(&s->host, sizeof *g);
    if (!g) { lt_step_set_error(s, LT_ERR_NOMEM, "out of host memory for the tape"); return NULL; }
    *g = (lt_conv_geom){.c = x->shape[0] * x->shape[1], .h = x->shape[2], .w = x->shape[3],
                        .kh = kernel, .kw = kernel, .sh = stride, .sw = stride};
    g->oh = (g->h - g->kh) / g->sh + 1;
    g->ow = (g->w - g->kw) / g->sw + 1;
    int64_t shape[4] = {x->shape[0], x->shape[1], g->oh, g->ow};
    lt_tensor *y = lt_step_new_tensor(s, x->dtype, 4, shape, x->requires_grad);
    int32_t *arg = y ? lt_step_scratch(s, (size_t)(y->numel ? y->numel : 1) * sizeof(int32_t)) : NULL;
    if (!y || !arg) return NULL;
    if (y->numel > 0) /* an empty batch has nothing to pool (and no planes for the kernel) */
        K(s)->max_pool_fwd(KC(s), x->dtype, x->data, g, y->data, arg);
    if (x->requires_grad) {
        lt_node *n = lt_step_record(s, max_pool_bwd, y);
        if (n) {
            n->in[0] = x;
            n->saved = arg;
            n->layer = g;
        }
    }
    return s->status == LT_OK ? y : NULL;
}
