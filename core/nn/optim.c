#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "optim.h"

lt_status lt_optim_validate(const lt_optim_config *c, char *err, size_t errlen) {
    if (strcasecmp(c->name, "sgd") && strcasecmp(c->name, "adamw")) {
        snprintf(err, errlen, "optimizer.name = '%s' is not known; use sgd or adamw", c->name);
        return LT_ERR_INVALID;
    }
    if (!(c->lr >= 0)) { snprintf(err, errlen, "optimizer.lr = %g must be >= 0", c->lr); return LT_ERR_INVALID; }
    if (!(c->momentum >= 0)) { snprintf(err, errlen, "optimizer.momentum = %g must be >= 0", c->momentum); return LT_ERR_INVALID; }
    if (c->nesterov && (c->momentum <= 0 || c->dampening != 0)) {
        snprintf(err, errlen, "optimizer.nesterov needs momentum > 0 and dampening = 0 (as in PyTorch)");
        return LT_ERR_INVALID;
    }
    if (!(c->weight_decay >= 0)) { snprintf(err, errlen, "optimizer.weight_decay = %g must be >= 0", c->weight_decay); return LT_ERR_INVALID; }
    if (!strcasecmp(c->name, "adamw") && !(c->eps >= 0)) { snprintf(err, errlen, "optimizer.eps = %g must be >= 0", c->eps); return LT_ERR_INVALID; }
    if (!(c->beta1 >= 0 && c->beta1 < 1 && c->beta2 >= 0 && c->beta2 < 1)) {
        snprintf(err, errlen, "optimizer.beta1/beta2 = %g/%g must be in [0, 1)", c->beta1, c->beta2);
        return LT_ERR_INVALID;
    }
    if (strcasecmp(c->scheduler, "none") && strcasecmp(c->scheduler, "step") && strcasecmp(c->scheduler, "cosine")) {
        snprintf(err, errlen, "scheduler.name = '%s' is not known; use none, step or cosine", c->scheduler);
        return LT_ERR_INVALID;
    }
    if (!strcasecmp(c->scheduler, "step") && c->step_size < 1) {
        snprintf(err, errlen, "scheduler.step_size = %lld must be >= 1", (long long)c->step_size);
        return LT_ERR_INVALID;
    }
    if (c->warmup_steps < 0) { snprintf(err, errlen, "scheduler.warmup_steps must be >= 0"); return LT_ERR_INVALID; }
    if (!strcasecmp(c->scheduler, "step") && !(c->gamma > 0)) {
        snprintf(err, errlen, "scheduler.gamma = %g must be > 0 (the factor the lr is multiplied by every step_size)", c->gamma);
        return LT_ERR_INVALID;
    }
    if (!strcasecmp(c->scheduler, "cosine") && !(c->min_lr >= 0 && c->min_lr <= c->lr)) {
        snprintf(err, errlen, "scheduler.min_lr = %g must be in [0, optimizer.lr = %g]", c->min_lr, c->lr);
        return LT_ERR_INVALID;
    }
    return LT_OK;
}

lt_sched_kind lt_optim_sched_kind(const char *name) {
    return !strcasecmp(name, "step") ? LT_SCHED_STEP
         : !strcasecmp(name, "cosine") ? LT_SCHED_COSINE : LT_SCHED_NONE;
}

lt_status lt_optim_init(lt_optimizer *o, const lt_optim_config *c, size_t count, lt_dtype t,
                        const lt_accelerator_desc *a, lt_ctx *kctx, const lt_kernels *k) {
    memset(o, 0, sizeof *o);
    o->cfg = *c;
    o->kind = strcasecmp(c->name, "adamw") ? LT_OPT_SGD : LT_OPT_ADAMW;
    o->sched = lt_optim_sched_kind(c->scheduler);
    o->count = count;
    o->dtype = t;
    o->nstate = o->kind == LT_OPT_ADAMW ? 2 : (c->momentum > 0 ? 1 : 0);
    for (int i = 0; i < o->nstate; i++) {
        LT_CHECK(a->alloc(kctx, count * lt_dtype_size(t), &o->state[i]));
        k->fill(kctx, t, o->state[i], (int64_t)count, 0.0);
    }
    o->lr = c->lr;
    return LT_OK;
}

void lt_optim_free(lt_optimizer *o, const lt_accelerator_desc *a, lt_ctx *kctx) {
    for (int i = 0; i < o->nstate; i++)
        if (o->state[i]) a->free(kctx, o->state[i]);
    o->nstate = 0;
}

const char *lt_optim_state_name(const lt_optimizer *o, int i) {
    if (o->kind == LT_OPT_ADAMW) return i == 0 ? "exp_avg" : "exp_avg_sq";
    return "momentum_buffer";
}

double lt_optim_lr_at(const lt_optimizer *o, int64_t step, int64_t epoch) {
    const lt_optim_config *c = &o->cfg;
    double lr = c->lr;
    int64_t t = c->interval_steps ? step : epoch;
    if (o->sched == LT_SCHED_STEP) {
        lr *= pow(c->gamma, (double)(t / c->step_size));
    } else if (o->sched == LT_SCHED_COSINE) {
        int64_t total = c->interval_steps ? o->total_steps
                                          : (o->steps_per_epoch ? o->total_steps / o->steps_per_epoch : 0);
        if (total > 0) {
            double f = t >= total ? 1.0 : (double)t / (double)total;
            lr = c->min_lr + (c->lr - c->min_lr) * 0.5 * (1.0 + cos(M_PI * f));
        }
    }
    if (c->warmup_steps > 0 && step < c->warmup_steps)
        lr *= (double)(step + 1) / (double)c->warmup_steps;
    return lr;
}

void lt_optim_begin(lt_optimizer *o, int64_t epoch) { o->lr = lt_optim_lr_at(o, o->step, epoch); }

void lt_optim_apply(const lt_optimizer *o, void *params, const void *grads, size_t offset, size_t count,
                    const lt_kernels *k, lt_ctx *kctx) {
    size_t esz = lt_dtype_size(o->dtype);
    char *p = (char *)params + offset * esz;
    const char *g = (const char *)grads + offset * esz;
    if (o->kind == LT_OPT_ADAMW) {
        lt_adamw_args a = {o->lr, o->cfg.beta1, o->cfg.beta2, o->cfg.eps, o->cfg.weight_decay, o->step + 1};
        k->adamw_step(kctx, o->dtype, p, g, (char *)o->state[0] + offset * esz, (char *)o->state[1] + offset * esz,
                      (int64_t)count, &a);
    } else {
        lt_sgd_args a = lt_optim_sgd_args(o);
        k->sgd_step(kctx, o->dtype, p, g, o->nstate ? (char *)o->state[0] + offset * esz : NULL, (int64_t)count, &a);
    }
}

lt_sgd_args lt_optim_sgd_args(const lt_optimizer *o) {
    return (lt_sgd_args){o->lr, o->cfg.momentum, o->cfg.dampening, o->cfg.weight_decay,
                         o->cfg.nesterov, o->step == 0};
}

void lt_optim_end(lt_optimizer *o) { o->step++; }

void lt_optim_step(lt_optimizer *o, void *params, const void *grads, const lt_kernels *k,
                   lt_ctx *kctx, int64_t epoch) {
    lt_optim_begin(o, epoch);
    lt_optim_apply(o, params, grads, 0, o->count, k, kctx);
    lt_optim_end(o);
}

void lt_clip_grad_value(void *grads, size_t n, lt_dtype t, double clip_value, const lt_kernels *k,
                        lt_ctx *kctx) {
    k->clamp(kctx, t, grads, (int64_t)n, -clip_value, clip_value);
}

double lt_clip_grad_norm(void *grads, size_t n, lt_dtype t, double max_norm, const lt_kernels *k,
                         lt_ctx *kctx) {
    double ss = 0;
    k->sumsq(kctx, t, grads, (int64_t)n, &ss);
    double norm = sqrt(ss);
    double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0) k->axpby(kctx, t, (int64_t)n, 0.0, grads, coef, grads);
    return norm;
}
