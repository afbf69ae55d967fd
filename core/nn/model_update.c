/* The optimizer update of a model's flat buffers, and the one-pass form of
 * it under mixed precision (ABI 1.8).
 *
 * Mixed precision's step is three passes over every parameter when done as
 * separate kernels: the precision plugin casts the reduced 16-bit gradients
 * into the fp32 master gradients, the optimizer updates the master, and the
 * next step's begin casts the master into the compute copy. When the
 * optimizer is SGD and the accelerator has sgd_step_mixed, one kernel does
 * all three: it reads the 16-bit gradients where the precision plugin left
 * the cast to the core (lt_run_defer_unscale), else the master gradients,
 * and writes the compute copy as it goes. The bits are the three passes'
 * (accelerator.h), so optimizer.fused = false changes nothing but the time. */
#include "nn_internal.h"
#include "optim.h"

bool lt_model_update_fuses(const lt_model *m, const lt_optimizer *o) {
    return o->fuse && o->kind == LT_OPT_SGD && m->master_flat && m->master_dtype == LT_F32 &&
           (m->dtype == LT_F16 || m->dtype == LT_BF16) && LT_KERNELS_HAS(m->k, sgd_step_mixed);
}

void lt_model_defer_unscale(lt_model *m, double grad_mul) {
    m->grads_deferred = true;
    m->grad_mul = grad_mul;
}

void lt_model_unscale_grads(lt_model *m) {
    if (!m->grads_deferred) return;
    m->grads_deferred = false;
    m->k->cast(m->kctx, m->master_dtype, m->master_grads, m->dtype, m->grads_flat, (int64_t)m->total);
    if (m->grad_mul != 1.0) /* in place: axpby reads x[i] before it writes y[i] */
        m->k->axpby(m->kctx, m->master_dtype, (int64_t)m->total, m->grad_mul, m->master_grads, 0.0,
                    m->master_grads);
}

void lt_model_optim_apply(const lt_model *m, const lt_optimizer *o, bool fused, size_t offset,
                          size_t count, lt_ctx *kctx) {
    if (!fused) {
        lt_optim_apply(o, lt_model_opt_params(m), lt_model_opt_grads(m), offset, count, m->k, kctx);
        return;
    }
    lt_sgd_args a = lt_optim_sgd_args(o);
    bool deferred = m->grads_deferred;
    lt_dtype gt = deferred ? m->dtype : m->master_dtype;
    const char *g = (const char *)(deferred ? m->grads_flat : m->master_grads) + offset * lt_dtype_size(gt);
    float *p = (float *)m->master_flat + offset;
    float *buf = o->nstate ? (float *)o->state[0] + offset : NULL;
    char *h = (char *)m->params_flat + offset * lt_dtype_size(m->dtype);
    m->k->sgd_step_mixed(kctx, p, gt, g, deferred ? m->grad_mul : 1.0, buf, m->dtype, h,
                         (int64_t)count, &a);
}
