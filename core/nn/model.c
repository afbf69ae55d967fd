/* Parameter registration and the flat parameter/gradient buffers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include "nn_internal.h"

lt_model *lt_model_new(lt_dtype dtype, const void *accel_desc, lt_ctx *kctx,
                       const lt_kernels *k) {
    lt_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->dtype = m->master_dtype = dtype;
    m->accel = accel_desc;
    m->kctx = kctx;
    m->k = k;
    m->grad_cycle = 1;
    return m;
}

void lt_model_free(lt_model *m) {
    if (!m) return;
    const lt_accelerator_desc *a = m->accel;
    if (a && m->params_flat && !m->borrows_params) a->free(m->kctx, m->params_flat);
    if (a && m->grads_flat) a->free(m->kctx, m->grads_flat);
    if (a && m->master_flat) a->free(m->kctx, m->master_flat);
    if (a && m->master_grads) a->free(m->kctx, m->master_grads);
    for (int i = 0; i < m->nparams; i++) free(m->params[i]);
    for (int i = 0; i < m->nobjects; i++) free(m->objects[i]);
    free(m->params);
    free(m->objects);
    free(m);
}

static void model_fail(lt_model *m, const char *fmt, const char *name) {
    if (m->status != LT_OK) return;
    m->status = LT_ERR_INVALID;
    snprintf(m->error, sizeof m->error, fmt, name);
}

void *lt_model_own(lt_model *m, size_t bytes) {
    if (m->nobjects == m->objcap) {
        int cap = m->objcap ? 2 * m->objcap : 16;
        void **o = realloc(m->objects, (size_t)cap * sizeof *o);
        if (!o) return NULL;
        m->objects = o;
        m->objcap = cap;
    }
    void *p = calloc(1, bytes);
    if (p) m->objects[m->nobjects++] = p;
    return p;
}

lt_param *lt_param_new(lt_model *m, const char *name, int ndim, const int64_t *shape,
                       lt_init init, double a) {
    if (!m || m->status != LT_OK) return NULL;
    if (m->params_flat) { model_fail(m, "parameter '%s' registered after init; register every parameter in the module's init", name); return NULL; }
    if (!name || !*name || strlen(name) >= sizeof(((lt_param *)0)->name)) {
        model_fail(m, "parameter name '%s' is empty or longer than 127 bytes", name ? name : "");
        return NULL;
    }
    if (ndim < 0 || ndim > LT_MAX_DIMS) { model_fail(m, "parameter '%s' has more than 4 dimensions", name); return NULL; }
    for (int i = 0; i < m->nparams; i++)
        if (!strcmp(m->params[i]->name, name)) { model_fail(m, "parameter '%s' is registered twice; give each layer a unique name", name); return NULL; }
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] <= 0) { model_fail(m, "parameter '%s' has a dimension <= 0", name); return NULL; }
        if (__builtin_mul_overflow(numel, shape[i], &numel) || numel > (INT64_MAX >> 4)) {
            model_fail(m, "parameter '%s' has more elements than can be addressed; check the layer sizes", name);
            return NULL;
        }
    }
    if ((size_t)numel > (SIZE_MAX >> 4) - m->total) {
        model_fail(m, "parameter '%s' makes the model too large to address; check the layer sizes", name);
        return NULL;
    }
    if (m->nparams == m->cap) {
        int cap = m->cap ? 2 * m->cap : 16;
        lt_param **np = realloc(m->params, (size_t)cap * sizeof *np);
        if (!np) { m->status = LT_ERR_NOMEM; return NULL; }
        m->params = np;
        m->cap = cap;
    }
    lt_param *p = calloc(1, sizeof *p);
    if (!p) { m->status = LT_ERR_NOMEM; return NULL; }
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    for (int i = 0; i < ndim; i++) p->shape[i] = shape[i];
    p->numel = numel;
    p->offset = m->total;
    p->index = m->nparams;
    p->init = init;
    p->init_arg = a;
    m->total += (size_t)numel;
    m->params[m->nparams++] = p;
    return p;
}

const char *lt_param_name(const lt_param *p) { return p->name; }
int64_t lt_param_numel(const lt_param *p) { return p->numel; }

void *lt_param_ptr(const lt_model *m, const lt_param *p) {
    return (char *)m->params_flat + p->offset * lt_dtype_size(m->dtype);
}

void *lt_param_grad_ptr(const lt_model *m, const lt_param *p) {
    return (char *)m->grads_flat + p->offset * lt_dtype_size(m->dtype);
}

void lt_model_zero_grad(lt_model *m) { m->grad_cycle++; }

/* Each parameter draws from its own stream (seed, index << 40), so values do
 * not depend on how many parameters come before it or on the device. */
static void init_param(lt_model *m, lt_param *p, uint64_t seed) {
    lt_dtype t = lt_model_opt_dtype(m);
    void *x = (char *)lt_model_opt_params(m) + p->offset * lt_dtype_size(t);
    int64_t fan_in = 1;
    for (int i = 1; i < p->ndim; i++) fan_in *= p->shape[i];
    if (p->ndim <= 1) fan_in = p->numel;
    uint64_t off = (uint64_t)p->index << 40;
    switch (p->init) {
    case LT_INIT_ZEROS: m->k->fill(m->kctx, t, x, p->numel, 0.0); break;
    case LT_INIT_ONES: m->k->fill(m->kctx, t, x, p->numel, 1.0); break;
    case LT_INIT_UNIFORM:
        m->k->rand_fill(m->kctx, t, x, p->numel, LT_RAND_UNIFORM, -p->init_arg, p->init_arg, seed, off);
        break;
    case LT_INIT_NORMAL:
        m->k->rand_fill(m->kctx, t, x, p->numel, LT_RAND_NORMAL, 0.0, p->init_arg, seed, off);
        break;
    case LT_INIT_KAIMING_UNIFORM: {
        double b = 1.0 / sqrt((double)fan_in);
        m->k->rand_fill(m->kctx, t, x, p->numel, LT_RAND_UNIFORM, -b, b, seed, off);
        break;
    }
    }
}

lt_status lt_model_finalize(lt_model *m, uint64_t seed) {
    if (m->status != LT_OK) return m->status;
    if (m->total == 0) {
        snprintf(m->error, sizeof m->error, "the module registered no parameters in init; create layers with lt_linear_new");
        return m->status = LT_ERR_INVALID;
    }
    const lt_accelerator_desc *a = m->accel;
    size_t bytes = m->total * lt_dtype_size(m->dtype);
    if (a->alloc(m->kctx, bytes, &m->params_flat) != LT_OK ||
        a->alloc(m->kctx, bytes, &m->grads_flat) != LT_OK) {
        snprintf(m->error, sizeof m->error, "cannot allocate %zu bytes for the parameters: %s", 2 * bytes, lt_last_error(m->kctx));
        return m->status = LT_ERR_NOMEM;
    }
    if (m->master_dtype != m->dtype) {
        size_t mbytes = m->total * lt_dtype_size(m->master_dtype);
        if (a->alloc(m->kctx, mbytes, &m->master_flat) != LT_OK ||
            a->alloc(m->kctx, mbytes, &m->master_grads) != LT_OK) {
            snprintf(m->error, sizeof m->error, "cannot allocate %zu bytes for the master parameters and gradients: %s",
                     2 * mbytes, lt_last_error(m->kctx));
            return m->status = LT_ERR_NOMEM;
        }
        m->k->fill(m->kctx, m->master_dtype, m->master_grads, (int64_t)m->total, 0.0);
    }
    for (int i = 0; i < m->nparams; i++) init_param(m, m->params[i], seed);
    lt_model_refresh_compute(m);
    m->k->fill(m->kctx, m->dtype, m->grads_flat, (int64_t)m->total, 0.0);
    lt_status st = a->synchronize(m->kctx);
    if (st != LT_OK) snprintf(m->error, sizeof m->error, "initialising parameters: %s", lt_last_error(m->kctx));
    return st;
}

void lt_model_refresh_compute(lt_model *m) {
    if (m->master_flat)
        m->k->cast(m->kctx, m->dtype, m->params_flat, m->master_dtype, m->master_flat, (int64_t)m->total);
}

lt_status lt_model_finalize_replica(lt_model *m, const lt_model *root, bool borrow) {
    if (m->status != LT_OK) return m->status;
    char want[64], got[64];
    for (int i = 0; i < m->nparams || i < root->nparams; i++) {
        const lt_param *p = i < m->nparams ? m->params[i] : NULL, *q = i < root->nparams ? root->params[i] : NULL;
        if (p && q && !strcmp(p->name, q->name) && p->ndim == q->ndim &&
            !memcmp(p->shape, q->shape, sizeof p->shape[0] * (size_t)p->ndim))
            continue;
        if (q) lt_shape_str(q->ndim, q->shape, want, sizeof want);
        if (p) lt_shape_str(p->ndim, p->shape, got, sizeof got);
        snprintf(m->error, sizeof m->error,
                 "parameter %d is '%.100s' %s on this replica but '%.100s' %s on the root; init must "
                 "register the same parameters on every replica (from the config, not globals)",
                 i, p ? p->name : "(none)", p ? got : "", q ? q->name : "(none)", q ? want : "");
        return m->status = LT_ERR_MISMATCH;
    }
    const lt_accelerator_desc *a = m->accel;
    size_t bytes = m->total * lt_dtype_size(m->dtype);
    if (borrow) {
        m->params_flat = root->params_flat;
        m->borrows_params = true;
    } else if (a->alloc(m->kctx, bytes, &m->params_flat) != LT_OK) {
        snprintf(m->error, sizeof m->error, "cannot allocate %zu bytes for the parameters: %s", bytes, lt_last_error(m->kctx));
        return m->status = LT_ERR_NOMEM;
    }
    if (a->alloc(m->kctx, bytes, &m->grads_flat) != LT_OK) {
        snprintf(m->error, sizeof m->error, "cannot allocate %zu bytes for the gradients: %s", bytes, lt_last_error(m->kctx));
        return m->status = LT_ERR_NOMEM;
    }
    m->k->fill(m->kctx, m->dtype, m->grads_flat, (int64_t)m->total, 0.0);
    return LT_OK;
}
