/* Steps: the arenas, the tape and backward. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nn_internal.h"

static lt_status dev_alloc(void *user, size_t bytes, void **out) {
    lt_model *m = user;
    return ((const lt_accelerator_desc *)m->accel)->alloc(m->kctx, bytes, out);
}

static void dev_free(void *user, void *p) {
    lt_model *m = user;
    ((const lt_accelerator_desc *)m->accel)->free(m->kctx, p);
}

lt_status lt_step_init(lt_step *s, lt_model *m) {
    memset(s, 0, sizeof *s);
    s->model = m;
    lt_arena_init(&s->host, NULL, NULL, NULL);
    lt_arena_init(&s->dev, dev_alloc, dev_free, m);
    return LT_OK;
}

void lt_step_destroy(lt_step *s) {
    lt_arena_destroy(&s->host);
    lt_arena_destroy(&s->dev);
    free(s->tape);
    s->tape = NULL;
}

void lt_step_reset(lt_step *s, bool training, int64_t global_step, int64_t epoch, uint64_t seed,
                   uint64_t rand_offset) {
    lt_arena_reset(&s->host);
    lt_arena_reset(&s->dev);
    s->ntape = 0;
    s->ninputs = 0;
    s->batch_size = 0;
    s->row0 = 0;
    s->total_rows = 0;
    s->training = training;
    s->global_step = global_step;
    s->epoch = epoch;
    s->seed = seed;
    s->rand_offset = rand_offset;
    s->status = LT_OK;
    s->error[0] = 0;
    for (int i = 0; i < s->model->nparams; i++) {
        s->model->params[i]->pending_uses = 0;
        s->model->params[i]->ready_sent = false;
    }
}

lt_status lt_step_set_error(lt_step *s, lt_status st, const char *fmt, ...) {
    if (s->status != LT_OK) return s->status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->error, sizeof s->error, fmt, ap);
    va_end(ap);
    s->status = st;
    return st;
}

lt_status lt_step_fail(lt_step *s, const char *fmt, ...) {
    if (s->status != LT_OK) return s->status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->error, sizeof s->error, fmt, ap);
    va_end(ap);
    return s->status = LT_ERR_INVALID;
}

static lt_tensor *new_meta(lt_step *s, lt_dtype t, int ndim, const int64_t *shape) {
    lt_tensor *x = lt_arena_alloc(&s->host, sizeof *x);
    if (!x) { lt_step_set_error(s, LT_ERR_NOMEM, "out of host memory for the step"); return NULL; }
    memset(x, 0, sizeof *x);
    x->dtype = t;
    x->ndim = ndim;
    x->numel = 1;
    for (int i = 0; i < ndim; i++) { x->shape[i] = shape[i]; x->numel *= shape[i]; }
    return x;
}

lt_tensor *lt_step_wrap(lt_step *s, void *data, lt_dtype t, int ndim, const int64_t *shape) {
    lt_tensor *x = new_meta(s, t, ndim, shape);
    if (x) x->data = data;
    return x;
}

void *lt_step_scratch(lt_step *s, size_t bytes) {
    void *p = lt_arena_alloc(&s->dev, bytes);
    if (!p) lt_step_set_error(s, LT_ERR_NOMEM, "out of device memory for activations (%zu bytes more)", bytes);
    return p;
}

lt_tensor *lt_step_new_tensor(lt_step *s, lt_dtype t, int ndim, const int64_t *shape,
                              bool requires_grad) {
    lt_tensor *x = new_meta(s, t, ndim, shape);
    if (!x) return NULL;
    x->data = lt_step_scratch(s, (size_t)x->numel * lt_dtype_size(t));
    if (!x->data) return NULL;
    x->requires_grad = requires_grad && s->training;
    return x;
}

lt_tensor *lt_param_tensor(lt_step *s, lt_param *p) {
    lt_tensor *x = new_meta(s, s->model->dtype, p->ndim, p->shape);
    if (!x) return NULL;
    x->data = lt_param_ptr(s->model, p);
    x->grad = lt_param_grad_ptr(s->model, p);
    x->param = p;
    x->requires_grad = s->training;
    if (s->training) p->pending_uses++;
    return x;
}

lt_node *lt_step_record(lt_step *s, lt_backward_fn fn, lt_tensor *out) {
    if (!s->training) return NULL;
    if (s->ntape == s->tapecap) {
        int cap = s->tapecap ? 2 * s->tapecap : 64; /* grows during the first steps only */
        lt_node **t = realloc(s->tape, (size_t)cap * sizeof *t);
        if (!t) { lt_step_set_error(s, LT_ERR_NOMEM, "out of memory for the tape"); return NULL; }
        s->tape = t;
        s->tapecap = cap;
    }
    lt_node *n = lt_arena_alloc(&s->host, sizeof *n);
    if (!n) { lt_step_set_error(s, LT_ERR_NOMEM, "out of host memory for the tape"); return NULL; }
    memset(n, 0, sizeof *n);
    n->backward = fn;
    n->out = out;
    s->tape[s->ntape++] = n;
    return n;
}

double lt_grad_target(lt_step *s, lt_tensor *t, void **grad) {
    if (t->param) {
        lt_param *p = t->param;
        *grad = t->grad;
        double beta = p->grad_cycle == s->model->grad_cycle ? 1.0 : 0.0;
        p->grad_cycle = s->model->grad_cycle;
        return beta;
    }
    if (!t->grad) {
        t->grad = lt_step_scratch(s, (size_t)t->numel * lt_dtype_size(t->dtype));
        *grad = t->grad;
        return 0.0;
    }
    *grad = t->grad;
    return 1.0;
}

static void report_ready(lt_step *s, lt_param *p) {
    if (p->ready_sent) return;
    p->ready_sent = true;
    if (s->model->grad_ready) s->model->grad_ready(s->model->grad_ready_user, p->offset, (size_t)p->numel);
}

void lt_param_grad_done(lt_step *s, lt_param *p) {
    if (--p->pending_uses == 0) report_ready(s, p);
}

static lt_status replay(lt_step *s, double seed);

lt_status lt_step_backward(lt_step *s, lt_tensor *loss, double seed) {
    if (s->status != LT_OK) return s->status;
    if (!s->training) return lt_step_set_error(s, LT_ERR_STATE, "backward called outside a training step");
    if (!loss || s->ntape == 0 || s->tape[s->ntape - 1]->out != loss)
        return lt_step_set_error(s, LT_ERR_INVALID,
            "training_step must return the output of a loss layer (lt_cross_entropy or lt_mse) recorded last");
    return replay(s, seed);
}

lt_status lt_step_backward_from(lt_step *s, lt_tensor *out) {
    if (s->status != LT_OK) return s->status;
    if (!s->training) return lt_step_set_error(s, LT_ERR_STATE, "backward called outside a training step");
    if (!out || s->ntape == 0 || s->tape[s->ntape - 1]->out != out || !out->grad)
        return lt_step_set_error(s, LT_ERR_INVALID,
            "with training_step_end, training_step must return the tensor it computed last (its output, e.g. the logits)");
    return replay(s, 1.0);
}

static lt_status replay(lt_step *s, double seed) {
    for (int i = s->ntape - 1; i >= 0 && s->status == LT_OK; i--) {
        lt_node *n = s->tape[i];
        n->backward(s, n, i == s->ntape - 1 ? seed : 1.0);
    }
    if (s->status != LT_OK) return s->status;
    /* Parameters this step did not use still take part in the reduction, with
     * a zero gradient, so every rank reports every range (no find_unused). */
    lt_model *m = s->model;
    for (int i = m->nparams - 1; i >= 0; i--) {
        lt_param *p = m->params[i];
        if (p->ready_sent) continue;
        if (p->grad_cycle != m->grad_cycle) {
            m->k->fill(m->kctx, m->dtype, lt_param_grad_ptr(m, p), p->numel, 0.0);
            p->grad_cycle = m->grad_cycle;
        }
        report_ready(s, p);
    }
    return s->status;
}

/* ---- accessors ---------------------------------------------------------- */

lt_tensor *lt_step_input(lt_step *s, int i) {
    if (i < 0 || i >= s->ninputs) {
        lt_step_fail(s, "batch input %d does not exist (the batch has %d fields)", i, s->ninputs);
        return NULL;
    }
    return s->inputs[i];
}

int64_t lt_step_batch_size(const lt_step *s) { return s->batch_size; }
bool lt_step_training(const lt_step *s) { return s->training; }
lt_status lt_step_status(const lt_step *s) { return s->status; }
int64_t lt_step_global_step(const lt_step *s) { return s->global_step; }
int64_t lt_step_epoch(const lt_step *s) { return s->epoch; }

int lt_tensor_ndim(const lt_tensor *t) { return t->ndim; }
int64_t lt_tensor_dim(const lt_tensor *t, int i) { return i >= 0 && i < t->ndim ? t->shape[i] : 0; }
lt_dtype lt_tensor_dtype(const lt_tensor *t) { return t->dtype; }
void *lt_tensor_data(const lt_tensor *t) { return t->data; }

lt_status lt_log_metric(lt_step *s, const char *name, double value, double weight,
                        unsigned flags) {
    if (s->status != LT_OK) return s->status;
    if (!name || !*name) return lt_step_fail(s, "lt_log_metric: empty metric name");
    if (!(weight >= 0)) return lt_step_fail(s, "lt_log_metric('%s'): weight %g must be >= 0", name, weight);
    if (!flags) flags = s->training ? LT_LOG_ON_STEP : LT_LOG_ON_EPOCH;
    if (!s->log_fn) return LT_OK;
    lt_status st = s->log_fn(s->log_user, name, value, weight, flags);
    if (st != LT_OK) lt_step_set_error(s, st, "logging '%s': %s", name, lt_last_error(NULL));
    return st;
}
