/* Optimizer steps over one flat buffer, following torch.optim's update rules
 * (PyTorch 1.13 _single_tensor_sgd / _single_tensor_adamw, maximize=False,
 * amsgrad=False). Scalars are derived in double, then each loop runs in the
 * dtype, as PyTorch does with Python floats and tensor ops. With f16 or bf16
 * (16-true, bf16-true) param, grad and state are all 16-bit: each element is
 * read into fp32, updated as in the f32 loop, and param and state are stored
 * rounded once (PyTorch rounds after every tensor op instead). */
#include <tgmath.h>
#include "cpu_internal.h"

/* SGD:
 *   d = g + wd * p                      (only when wd != 0)
 *   buf = first ? d : momentum * buf + (1 - dampening) * d
 *   d = nesterov ? d + momentum * buf : buf
 *   p -= lr * d
 * The buffer is neither read nor written when momentum == 0 (it may be
 * NULL), and not read on the first step (it may be uninitialised). */
#define DEF_SGD(T, S, C, LD, ST)                                                           \
    static CPU_HOT void sgd_plain_##S(T *restrict p, const T *restrict g, int64_t n, C lr, \
                                      C wd) {                                              \
        CPU_UNSWITCH(T, C, wd == 0, for (int64_t i = 0; i < n; i++) {                      \
            C d = wd == 0 ? LD(g[i]) : LD(g[i]) + wd * LD(p[i]);                           \
            p[i] = ST(LD(p[i]) - lr * d);                                                  \
        });                                                                                \
    }                                                                                      \
    static CPU_HOT void sgd_momentum_##S(T *restrict p, const T *restrict g,               \
                                         T *restrict buf, int64_t n, C lr, C wd, C mom,    \
                                         C keep, int nesterov, int first) {                \
        CPU_UNSWITCH(T, C, wd == 0, CPU_UNSWITCH(T, C, first, CPU_UNSWITCH(T, C, nesterov, \
        for (int64_t i = 0; i < n; i++) {                                                  \
            C d = wd == 0 ? LD(g[i]) : LD(g[i]) + wd * LD(p[i]);                           \
            C b = first ? d : mom * LD(buf[i]) + keep * d;                                 \
            buf[i] = ST(b);                                                                \
            p[i] = ST(LD(p[i]) - lr * (nesterov ? d + mom * b : b));                       \
        });););                                                                            \
    }                                                                                      \
    static void sgd_##S(T *p, const T *g, T *buf, int64_t n, const lt_sgd_args *a) {       \
        if (a->momentum == 0)                                                              \
            sgd_plain_##S(p, g, n, (C)a->lr, (C)a->weight_decay);                          \
        else                                                                               \
            sgd_momentum_##S(p, g, buf, n, (C)a->lr, (C)a->weight_decay, (C)a->momentum,   \
                             (C)(1 - a->dampening), a->nesterov, a->first_step);           \
    }
CPU_FOR_FLOAT_TYPES(DEF_SGD)

bool cpu_sgd_args_ok(lt_ctx *ctx, const char *kernel, const lt_sgd_args *a) {
    if (!a->nesterov || (a->momentum > 0 && a->dampening == 0)) return true;
    /* torch.optim.SGD refuses this combination too. */
    cpu_fail(ctx, LT_ERR_INVALID, "cpu %s: nesterov needs momentum > 0 and dampening 0 (got %g, %g)",
             kernel, a->momentum, a->dampening);
    return false;
}

void cpu_sgd_step(lt_ctx *ctx, lt_dtype t, void *param, const void *grad, void *momentum_buf,
                  int64_t n, const lt_sgd_args *a) {
    if (!cpu_sgd_args_ok(ctx, "sgd_step", a)) return;
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

#define DEF_ADAMW(T, S, C, LD, ST)                                                         \
    static CPU_HOT void adamw_loop_##S(T *restrict p, const T *restrict g, T *restrict m,  \
                                       T *restrict v, int64_t n, C decay, C b1, C c1,      \
                                       C b2, C c2, C step_size, C bc2_sqrt, C eps) {       \
        for (int64_t i = 0; i < n; i++) {                                                  \
            C gi = LD(g[i]);                                                               \
            C mi = b1 * LD(m[i]) + c1 * gi;                                                \
            C vi = b2 * LD(v[i]) + c2 * gi * gi;                                           \
            m[i] = ST(mi);                                                                 \
            v[i] = ST(vi);                                                                 \
            p[i] = ST(LD(p[i]) * decay - step_size * (mi / (sqrt(vi) / bc2_sqrt + eps)));  \
        }                                                                                  \
    }                                                                                      \
    static void adamw_##S(T *p, const T *g, T *m, T *v, int64_t n, const adamw_coef *k) {  \
        adamw_loop_##S(p, g, m, v, n, (C)k->decay, (C)k->beta1, (C)k->one_m_beta1,         \
                       (C)k->beta2, (C)k->one_m_beta2, (C)k->step_size,                    \
                       (C)k->bc2_sqrt, (C)k->eps);                                         \
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

/* Bagua's QAdam after its warm-up: the momentum m (already averaged over
 * ranks) and the frozen variance v are read, never written:
 *   u = (m / (1 - beta1^step)) / (sqrt(v) / sqrt(1 - beta2^step) + eps)
 *   p = p * (1 - lr wd) - lr * clamp(u, -bound, bound)
 * bound = max(1, (1 - beta1) / sqrt(1 - beta2)) is the largest |u| Adam
 * itself can produce (its v grows with every large gradient); with v
 * frozen, an element that saw almost no gradient in the warm-up would
 * otherwise take a jump of m / eps when its gradient arrives (measured:
 * the Fashion-MNIST MLP turned NaN within 250 steps after a 600-step
 * warm-up, averaging uncompressed). Where v is 0 the step is 0. */
#define DEF_QADAM(T, S, C, LD, ST)                                                         \
    static CPU_HOT void qadam_loop_##S(T *restrict p, const T *restrict m,                 \
                                       const T *restrict v, int64_t n, C decay, C lr,      \
                                       C bc1, C bc2_sqrt, C eps, C bound) {                \
        for (int64_t i = 0; i < n; i++) {                                                  \
            C vi = LD(v[i]);                                                               \
            C u = vi > 0 ? (LD(m[i]) / bc1) / (sqrt(vi) / bc2_sqrt + eps) : 0;            \
            u = u > bound ? bound : u < -bound ? -bound : u;                               \
            p[i] = ST(LD(p[i]) * decay - lr * u);                                          \
        }                                                                                  \
    }                                                                                      \
    static void qadam_##S(T *p, const T *m, const T *v, int64_t n, const lt_adamw_args *a) { \
        double bound = (1 - a->beta1) / sqrt(1 - a->beta2);                                \
        qadam_loop_##S(p, m, v, n, (C)(1 - a->lr * a->weight_decay), (C)a->lr,             \
                       (C)(1 - pow(a->beta1, (double)a->step)),                            \
                       (C)sqrt(1 - pow(a->beta2, (double)a->step)), (C)a->eps,             \
                       (C)(bound > 1 ? bound : 1));                                        \
    }
CPU_FOR_FLOAT_TYPES(DEF_QADAM)

void cpu_qadam_step(lt_ctx *ctx, lt_dtype t, void *param, const void *m, const void *v, int64_t n,
                    const lt_adamw_args *a) {
    if (a->step < 1) {
        cpu_fail(ctx, LT_ERR_INVALID, "cpu qadam_step: step %lld; steps count from 1", (long long)a->step);
        return;
    }
    CPU_DISPATCH(ctx, "qadam_step", t, qadam, param, m, v, n, a);
}
