/* Optimizer steps over one flat buffer, following torch.optim's update rules
 * (PyTorch 1.13 _single_tensor_sgd / _single_tensor_adamw, maximize=False,
 * amsgrad=False). Scalars are derived in double, then each loop runs in the
 * dtype, as PyTorch does with Python floats and tensor ops. */
#include <tgmath.h>
#include "cpu_internal.h"

/* SGD:
 *   d = g + wd * p                      (only when wd != 0)
 *   buf = first ? d : momentum * buf + (1 - dampening) * d
 *   d = nesterov ? d + momentum * buf : buf
 *   p -= lr * d
 * The buffer is neither read nor written when momentum == 0 (it may be
 * NULL), and not read on the first step (it may be uninitialised). */
#define DEF_SGD(T, S)                                                                      \
    static CPU_HOT void sgd_plain_##S(T *restrict p, const T *restrict g, int64_t n, T lr, \
                                      T wd) {                                              \
        for (int64_t i = 0; i < n; i++) {                                                  \
            T d = wd == 0 ? g[i] : g[i] + wd * p[i];                                       \
            p[i] -= lr * d;                                                                \
        }                                                                                  \
    }                                                                                      \
    static CPU_HOT void sgd_momentum_##S(T *restrict p, const T *restrict g,               \
                                         T *restrict buf, int64_t n, T lr, T wd, T mom,    \
                                         T keep, int nesterov, int first) {                \
        for (int64_t i = 0; i < n; i++) {                                                  \
            T d = wd == 0 ? g[i] : g[i] + wd * p[i];                                       \
            T b = first ? d : mom * buf[i] + keep * d;                                     \
            buf[i] = b;                                                                    \
            p[i] -= lr * (nesterov ? d + mom * b : b);                                     \
        }                                                                                  \
    }                                                                                      \
    static void sgd_##S(T *p, const T *g, T *buf, int64_t n, const lt_sgd_args *a) {       \
        if (a->momentum == 0)                                                              \
            sgd_plain_##S(p, g, n, (T)a->lr, (T)a->weight_decay);                          \
        else                                                                               \
            sgd_momentum_##S(p, g, buf, n, (T)a->lr, (T)a->weight_decay, (T)a->momentum,   \
                             (T)(1 - a->dampening), a->nesterov, a->first_step);           \
    }
CPU_FOR_FLOAT_TYPES(DEF_SGD)

void cpu_sgd_step(lt_ctx *ctx, lt_dtype t, void *param, const void *grad, void *momentum_buf,
                  int64_t n, const lt_sgd_args *a) {
    if (a->nesterov && (a->momentum <= 0 || a->dampening != 0)) {
        /* torch.optim.SGD refuses this combination too. */
        cpu_fail(ctx, LT_ERR_INVALID,
                 "cpu sgd_step: nesterov needs momentum > 0 and dampening 0 (got %g, %g)",
                 a->momentum, a->dampening);
        return;
    }
    CPU_DISPATCH(ctx, "sgd_step", t, sgd, param, grad, momentum_buf, n, a);
}

/* AdamW with decoupled weight decay:
 *   p *= 1 - lr * wd
 *   m = beta1 * m + (1 - beta1) * g
 *   v = beta2 * v + (1 - beta2) * g^2
 *   p -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps) */
typedef struct adamw_coef {
    double decay, beta1, one_m_beta1, beta2, one_m_beta2, step_size, bc2_sqrt, eps;
} adamw_coef;

static adamw_coef adamw_coefs(const lt_adamw_args *a) {
    double step = (double)a->step;
    return (adamw_coef){
        .decay = 1 - a->lr * a->weight_decay,
        .beta1 = a->beta1,
        .one_m_beta1 = 1 - a->beta1,
        .beta2 = a->beta2,
        .one_m_beta2 = 1 - a->beta2,
        .step_size = a->lr / (1 - pow(a->beta1, step)),
        .bc2_sqrt = sqrt(1 - pow(a->beta2, step)),
        .eps = a->eps,
    };
}

#define DEF_ADAMW(T, S)                                                                    \
    static CPU_HOT void adamw_loop_##S(T *restrict p, const T *restrict g, T *restrict m,  \
                                       T *restrict v, int64_t n, T decay, T b1, T c1,      \
                                       T b2, T c2, T step_size, T bc2_sqrt, T eps) {       \
        for (int64_t i = 0; i < n; i++) {                                                  \
            T gi = g[i];                                                                   \
            T mi = b1 * m[i] + c1 * gi;                                                    \
            T vi = b2 * v[i] + c2 * gi * gi;                                               \
            m[i] = mi;                                                                     \
            v[i] = vi;                                                                     \
            p[i] = p[i] * decay - step_size * (mi / (sqrt(vi) / bc2_sqrt + eps));          \
        }                                                                                  \
    }                                                                                      \
    static void adamw_##S(T *p, const T *g, T *m, T *v, int64_t n, const adamw_coef *k) {  \
        adamw_loop_##S(p, g, m, v, n, (T)k->decay, (T)k->beta1, (T)k->one_m_beta1,         \
                       (T)k->beta2, (T)k->one_m_beta2, (T)k->step_size,                    \
                       (T)k->bc2_sqrt, (T)k->eps);                                     \
    }
CPU_FOR_FLOAT_TYPES(DEF_ADAMW)

void cpu_adamw_step(lt_ctx *ctx, lt_dtype t, void *param, const void *grad, void *m, void *v,
                    int64_t n, const lt_adamw_args *a) {
    if (a->step < 1) {
        cpu_fail(ctx, LT_ERR_INVALID, "cpu adamw_step: step %lld; steps count from 1",
                 (long long)a->step);
        return;
    }
    adamw_coef k = adamw_coefs(a);
    CPU_DISPATCH(ctx, "adamw_step", t, adamw, param, grad, m, v, n, &k);
}
