/* Layers and losses: each forward computes with the accelerator's kernels
 * and records a node whose backward writes its inputs' gradients. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "nn_internal.h"

#define K(s) ((s)->model->k)
#define KC(s) ((s)->model->kctx)

bool lt_nn_ok_input(lt_step *s, const lt_tensor *x, const char *op) {
    if (!s || s->status != LT_OK) return false;
    if (!x) { lt_step_fail(s, "%s: input is NULL", op); return false; }
    if (x->dtype != s->model->dtype) {
        lt_step_fail(s, "%s: input is %s but the model computes in %s", op,
                     lt_dtype_name(x->dtype), lt_dtype_name(s->model->dtype));
        return false;
    }
    return true;
}

void lt_shape_str(int ndim, const int64_t *shape, char *buf, size_t len) {
    int n = snprintf(buf, len, "[");
    for (int i = 0; i < ndim && n < (int)len; i++)
        n += snprintf(buf + n, len - n, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (n < (int)len) snprintf(buf + n, len - n, "]");
}

void lt_nn_shape_str(const lt_tensor *x, char *buf, size_t len) {
    lt_shape_str(x->ndim, x->shape, buf, len);
}

/* ---- Linear -------------------------------------------------------------- */

lt_linear_layer *lt_linear_new(lt_model *m, const char *name, int64_t in, int64_t out, bool bias) {
    if (!m || m->status != LT_OK) return NULL;
    if (in <= 0 || out <= 0) {
        m->status = LT_ERR_INVALID;
        snprintf(m->error, sizeof m->error, "linear '%s': in (%lld) and out (%lld) must be >= 1",
                 name, (long long)in, (long long)out);
        return NULL;
    }
    lt_linear_layer *l = lt_model_own(m, sizeof *l);
    if (!l) { m->status = LT_ERR_NOMEM; return NULL; }
    char pname[160];
    int64_t wshape[2] = {out, in}, bshape[1] = {out};
    snprintf(pname, sizeof pname, "%s.weight", name);
    l->weight = lt_param_new(m, pname, 2, wshape, LT_INIT_KAIMING_UNIFORM, 0);
    if (bias) {
        snprintf(pname, sizeof pname, "%s.bias", name);
        l->bias = lt_param_new(m, pname, 1, bshape, LT_INIT_UNIFORM, 1.0 / sqrt((double)in));
    }
    l->in = in;
    l->out = out;
    return m->status == LT_OK ? l : NULL;
}

static void zero_if_fresh(lt_step *s, lt_tensor *p) {
    void *g;
    if (lt_grad_target(s, p, &g) == 0.0) K(s)->fill(KC(s), p->dtype, g, p->numel, 0.0);
}

static void linear_bwd(lt_step *s, lt_node *n, double seed) {
    (void)seed;
    const lt_linear_layer *l = n->layer;
    lt_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2], *y = n->out;
    int64_t rows = x->shape[0];
    void *g;
    if (!y->grad) { /* output not used by the loss */
        zero_if_fresh(s, w);
        if (b) zero_if_fresh(s, b);
    } else {
        double beta = lt_grad_target(s, w, &g);
        K(s)->gemm(KC(s), y->dtype, true, false, l->out, l->in, rows, 1.0, y->grad, l->out,
                   x->data, l->in, beta, g, l->in);
        if (b) {
            beta = lt_grad_target(s, b, &g);
            K(s)->sum_rows(KC(s), y->dtype, g, y->grad, rows, l->out, beta);
        }
    }
    /* Report the parameters first so their reduction overlaps dx; bias
     * before weight: ranges must arrive in reverse registration order. */
    if (b) lt_param_grad_done(s, b->param);
    lt_param_grad_done(s, w->param);
    if (x->requires_grad && y->grad) {
        double beta = lt_grad_target(s, x, &g);
        if (!g) return;
        K(s)->gemm(KC(s), y->dtype, false, false, rows, l->in, l->out, 1.0, y->grad, l->out,
                   w->data, l->in, beta, g, l->in);
    }
}

lt_tensor *lt_linear(lt_step *s, const lt_linear_layer *l, lt_tensor *x) {
    if (!lt_nn_ok_input(s, x, "linear")) return NULL;
    if (!l) { lt_step_fail(s, "linear: layer is NULL (did lt_linear_new fail in init?)"); return NULL; }
    if (x->ndim != 2 || x->shape[1] != l->in) {
        char sh[96];
        lt_nn_shape_str(x, sh, sizeof sh);
        lt_step_fail(s, "linear '%.*s': expects input [N, %lld], got %s; flatten or fix the layer sizes",
                     (int)(strlen(l->weight->name) - 7), l->weight->name, (long long)l->in, sh);
        return NULL;
    }
    int64_t rows = x->shape[0], shape[2] = {rows, l->out};
    lt_tensor *w = lt_param_tensor(s, l->weight);
    lt_tensor *b = l->bias ? lt_param_tensor(s, l->bias) : NULL;
    lt_tensor *y = lt_step_new_tensor(s, x->dtype, 2, shape, true);
    if (!w || (l->bias && !b) || !y) return NULL;
    K(s)->gemm(KC(s), x->dtype, false, true, rows, l->out, l->in, 1.0, x->data, l->in, w->data,
               l->in, 0.0, y->data, l->out);
    if (b) K(s)->add_bias(KC(s), x->dtype, y->data, b->data, rows, l->out);
    lt_node *n = lt_step_record(s, linear_bwd, y);
    if (n) {
        n->in[0] = x;
        n->in[1] = w;
        n->in[2] = b;
        n->layer = l;
    }
    return s->status == LT_OK ? y : NULL;
}

/* ---- activations --------------------------------------------------------- */

static void act_bwd(lt_step *s, lt_node *n, double seed) {
    (void)seed;
    lt_tensor *x = n->in[0], *y = n->out;
    if (!x->requires_grad || !y->grad) return;
    void *g;
    double beta = lt_grad_target(s, x, &g);
    if (g) K(s)->act_bwd(KC(s), x->dtype, (lt_act)n->arg, g, y->grad, x->data, y->data, x->numel, beta);
}

static lt_tensor *activation(lt_step *s, lt_tensor *x, lt_act f, const char *op) {
    if (!lt_nn_ok_input(s, x, op)) return NULL;
    lt_tensor *y = lt_step_new_tensor(s, x->dtype, x->ndim, x->shape, x->requires_grad);
    if (!y) return NULL;
    K(s)->act_fwd(KC(s), x->dtype, f, y->data, x->data, x->numel);
    if (x->requires_grad) {
        lt_node *n = lt_step_record(s, act_bwd, y);
        if (n) { n->in[0] = x; n->arg = f; }
    }
    return s->status == LT_OK ? y : NULL;
}

lt_tensor *lt_relu(lt_step *s, lt_tensor *x) { return activation(s, x, LT_ACT_RELU, "relu"); }
lt_tensor *lt_tanh(lt_step *s, lt_tensor *x) { return activation(s, x, LT_ACT_TANH, "tanh"); }
lt_tensor *lt_gelu(lt_step *s, lt_tensor *x) { return activation(s, x, LT_ACT_GELU, "gelu"); }

/* ---- dropout, flatten ------------------------------------------------------ */

static void dropout_bwd(lt_step *s, lt_node *n, double seed) {
    (void)seed;
    lt_tensor *x = n->in[0], *y = n->out;
    if (!x->requires_grad || !y->grad) return;
    void *g;
    double beta = lt_grad_target(s, x, &g);
    if (g) K(s)->dropout_bwd(KC(s), x->dtype, g, y->grad, n->saved, x->numel, n->arg, beta);
}

lt_tensor *lt_dropout(lt_step *s, lt_tensor *x, double p) {
    if (!lt_nn_ok_input(s, x, "dropout")) return NULL;
    if (!(p >= 0 && p < 1)) { lt_step_fail(s, "dropout: p = %g must be in [0, 1)", p); return NULL; }
    if (!s->training || p == 0) return x;
    lt_tensor *y = lt_step_new_tensor(s, x->dtype, x->ndim, x->shape, x->requires_grad);
    uint8_t *mask = lt_step_scratch(s, (size_t)x->numel);
    if (!y || !mask) return NULL;
    /* A dp replica holding rows [row0, row0 + rows) of a batch of total_rows
     * draws the numbers one device would for those rows. */
    /* sample-major: any tensor whose size is a multiple of the batch (a
     * reshape to [B * 28, 28] too) holds numel / B numbers per sample */
    uint64_t per_row = s->batch_size > 0 && x->numel % s->batch_size == 0
                           ? (uint64_t)(x->numel / s->batch_size) : 0;
    uint64_t off = s->rand_offset + (per_row ? (uint64_t)s->row0 * per_row : 0);
    K(s)->dropout_fwd(KC(s), x->dtype, y->data, mask, x->data, x->numel, p, s->seed, off);
    s->rand_offset += per_row && s->total_rows ? (uint64_t)s->total_rows * per_row : (uint64_t)x->numel;
    lt_node *n = lt_step_record(s, dropout_bwd, y);
    if (n) { n->in[0] = x; n->saved = mask; n->arg = p; }
    return s->status == LT_OK ? y : NULL;
}

static void flatten_bwd(lt_step *s, lt_node *n, double seed) {
    (void)seed;
    lt_tensor *x = n->in[0], *y = n->out;
    if (!x->requires_grad || !y->grad) return;
    if (!x->grad && !x->param) { x->grad = y->grad; return; } /* a view: share the buffer */
    void *g;
    double beta = lt_grad_target(s, x, &g);
    K(s)->axpby(KC(s), x->dtype, x->numel, 1.0, y->grad, beta, g);
}

lt_tensor *lt_reshape(lt_step *s, lt_tensor *x, int ndim, const int64_t *shape) {
    if (!s || s->status != LT_OK) return NULL;
    if (!x) { lt_step_fail(s, "reshape: input is NULL"); return NULL; }
    int64_t numel = 1;
    bool ok = ndim >= 1 && ndim <= LT_MAX_DIMS && shape;
    for (int i = 0; ok && i < ndim; i++)
        ok = shape[i] >= 0 && !__builtin_mul_overflow(numel, shape[i], &numel);
    if (!ok || numel != x->numel) {
        char from[96], to[96] = "[]";
        if (shape) lt_shape_str(ndim < LT_MAX_DIMS ? ndim : LT_MAX_DIMS, shape, to, sizeof to);
        lt_nn_shape_str(x, from, sizeof from);
        lt_step_fail(s, "reshape: %s has %lld elements, the new shape %s (%d dims, at most %d) "
                     "does not; give a shape with as many", from, (long long)x->numel, to, ndim,
                     LT_MAX_DIMS);
        return NULL;
    }
    lt_tensor *y = lt_step_wrap(s, x->data, x->dtype, ndim, shape);
    if (!y) return NULL;
    y->requires_grad = x->requires_grad;
    if (x->requires_grad) {
        lt_node *n = lt_step_record(s, flatten_bwd, y);
        if (n) n->in[0] = x;
    }
    return y;
}

lt_tensor *lt_flatten(lt_step *s, lt_tensor *x) {
    if (!s || s->status != LT_OK) return NULL;
    if (!x || x->ndim < 1) { lt_step_fail(s, "flatten: input must have a batch dimension"); return NULL; }
    int64_t shape[2] = {x->shape[0], x->shape[0] ? x->numel / x->shape[0] : 0};
    return lt_reshape(s, x, 2, shape);
}

/* ---- losses ---------------------------------------------------------------- */

/* Losses compute in fp32 when the model computes in 16 bits (autocast's
 * rule: softmax, log and the mean over a batch lose too much in 16 bits);
 * the loss is then an f32 tensor and only the gradient handed back to the
 * layers is 16-bit. */
static lt_dtype loss_dtype(lt_dtype t) { return t == LT_F16 || t == LT_BF16 ? LT_F32 : t; }

/* x's values in the loss dtype: x itself, or an fp32 copy in the step arena. */
static const void *loss_input(lt_step *s, const lt_tensor *x) {
    lt_dtype lt = loss_dtype(x->dtype);
    if (lt == x->dtype) return x->data;
    void *c = lt_step_scratch(s, (size_t)x->numel * lt_dtype_size(lt));
    if (c) K(s)->cast(KC(s), lt, c, x->dtype, x->data, x->numel);
    return c;
}

/* Writes (beta 0) or adds (beta 1) a gradient computed in the loss dtype
 * into x's gradient buffer g, in x's dtype. */
static void loss_grad_out(lt_step *s, lt_tensor *x, void *g, double beta, const void *src) {
    lt_dtype lt = loss_dtype(x->dtype);
    if (beta == 0.0) {
        K(s)->cast(KC(s), x->dtype, g, lt, src, x->numel);
        return;
    }
    const void *add = src;
    if (lt != x->dtype) {
        void *c = lt_step_scratch(s, (size_t)x->numel * lt_dtype_size(x->dtype));
        if (!c) return;
        K(s)->cast(KC(s), x->dtype, c, lt, src, x->numel);
        add = c;
    }
    K(s)->axpby(KC(s), x->dtype, x->numel, 1.0, add, 1.0, g);
}

static void xent_bwd(lt_step *s, lt_node *n, double seed) {
    lt_tensor *x = n->in[0], *labels = n->in[1];
    if (!x->requires_grad) return;
    int64_t rows = x->shape[0], cols = x->shape[1];
    lt_dtype lt = loss_dtype(x->dtype);
    void *g;
    double beta = lt_grad_target(s, x, &g);
    if (beta == 0.0 && lt == x->dtype) {
        K(s)->xent_bwd(KC(s), lt, g, n->saved, labels->data, rows, cols, seed / (double)rows);
        return;
    }
    void *tmp = lt_step_scratch(s, (size_t)x->numel * lt_dtype_size(lt));
    if (!tmp) return;
    K(s)->xent_bwd(KC(s), lt, tmp, n->saved, labels->data, rows, cols, seed / (double)rows);
    loss_grad_out(s, x, g, beta, tmp);
}

lt_tensor *lt_cross_entropy(lt_step *s, lt_tensor *logits, const lt_tensor *labels) {
    if (!lt_nn_ok_input(s, logits, "cross_entropy")) return NULL;
    if (!labels || labels->dtype != LT_I32 || labels->numel != logits->shape[0] || logits->ndim != 2) {
        char sh[96];
        lt_nn_shape_str(logits, sh, sizeof sh);
        lt_step_fail(s, "cross_entropy: expects logits [N, C] and i32 labels [N]; got logits %s and %s labels of %lld elements",
                     sh, labels ? lt_dtype_name(labels->dtype) : "no", labels ? (long long)labels->numel : 0LL);
        return NULL;
    }
    int64_t one[1] = {1};
    lt_dtype lt = loss_dtype(logits->dtype);
    lt_tensor *loss = lt_step_new_tensor(s, lt, 1, one, logits->requires_grad);
    void *probs = lt_step_scratch(s, (size_t)logits->numel * lt_dtype_size(lt));
    const void *in = loss_input(s, logits);
    if (!loss || !probs || !in) return NULL;
    K(s)->xent_fwd(KC(s), lt, in, labels->data, logits->shape[0], logits->shape[1], probs, loss->data);
    lt_node *n = lt_step_record(s, xent_bwd, loss);
    if (n) { n->in[0] = logits; n->in[1] = (lt_tensor *)labels; n->saved = probs; }
    return s->status == LT_OK ? loss : NULL;
}

static void mse_bwd(lt_step *s, lt_node *n, double seed) {
    lt_tensor *x = n->in[0];
    if (!x->requires_grad) return;
    lt_dtype lt = loss_dtype(x->dtype);
    const void *pred = n->in[2]->data, *target = n->in[1]->data; /* both in the loss dtype */
    void *g;
    double beta = lt_grad_target(s, x, &g);
    if (beta == 0.0 && lt == x->dtype) {
        K(s)->mse_bwd(KC(s), lt, g, pred, target, x->numel, seed);
        return;
    }
    void *tmp = lt_step_scratch(s, (size_t)x->numel * lt_dtype_size(lt));
    if (!tmp) return;
    K(s)->mse_bwd(KC(s), lt, tmp, pred, target, x->numel, seed);
    loss_grad_out(s, x, g, beta, tmp);
}

lt_tensor *lt_mse(lt_step *s, lt_tensor *pred, const lt_tensor *target) {
    if (!lt_nn_ok_input(s, pred, "mse")) return NULL;
    if (!target || target->numel != pred->numel || target->dtype != pred->dtype) {
        lt_step_fail(s, "mse: target must have the prediction's %lld elements and dtype %s",
                     (long long)pred->numel, lt_dtype_name(pred->dtype));
        return NULL;
    }
    int64_t one[1] = {1};
    lt_dtype lt = loss_dtype(pred->dtype);
    lt_tensor *loss = lt_step_new_tensor(s, lt, 1, one, pred->requires_grad);
    int64_t flat[1] = {pred->numel};
    const void *p = loss_input(s, pred), *t = loss_input(s, target);
    /* the two in the loss dtype, for backward (in[1], in[2]) */
    lt_tensor *tl = p && t ? lt_step_wrap(s, (void *)t, lt, 1, flat) : NULL;
    lt_tensor *pl = tl ? lt_step_wrap(s, (void *)p, lt, 1, flat) : NULL;
    if (!loss || !pl) return NULL;
    K(s)->mse_fwd(KC(s), lt, p, t, pred->numel, loss->data);
    lt_node *n = lt_step_record(s, mse_bwd, loss);
    if (n) { n->in[0] = pred; n->in[1] = tl; n->in[2] = pl; }
    return s->status == LT_OK ? loss : NULL;
}

/* ---- evaluation helpers ---------------------------------------------------- */

int64_t lt_count_correct(lt_step *s, const lt_tensor *logits, const lt_tensor *labels) {
    if (!s || s->status != LT_OK || !logits || !labels) return 0;
    if (logits->ndim != 2 || labels->dtype != LT_I32 || labels->numel != logits->shape[0]) {
        lt_step_fail(s, "count_correct: expects logits [N, C] and i32 labels [N]");
        return 0;
    }
    int64_t correct = 0;
    K(s)->count_correct(KC(s), logits->dtype, logits->data, labels->data, logits->shape[0],
                        logits->shape[1], &correct);
    return correct;
}

double lt_item(lt_step *s, const lt_tensor *t) {
    if (!s || s->status != LT_OK || !t) return 0.0;
    const lt_accelerator_desc *a = s->model->accel;
    double v = 0;
    float f = 0;
    lt_status st = LT_OK;
    if (t->dtype == LT_F64) {
        st = a->copy(KC(s), &v, t->data, sizeof v, LT_COPY_D2H);
    } else if (t->dtype == LT_F32) {
        st = a->copy(KC(s), &f, t->data, sizeof f, LT_COPY_D2H);
        v = f;
    } else {
        lt_step_fail(s, "lt_item: tensor dtype %s is not f32 or f64", lt_dtype_name(t->dtype));
    }
    /* Reading a value waits for the kernels before it anyway, so this is
     * where their deferred errors (a label out of range in the loss ...) are
     * collected: the step fails with that message instead of training on NaN. */
    if (st == LT_OK) st = a->synchronize(KC(s));
    if (st != LT_OK) lt_step_set_error(s, st, "%s", lt_last_error(KC(s)));
    return v;
}
