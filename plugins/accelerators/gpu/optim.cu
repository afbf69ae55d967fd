/* Optimizer steps over one flat buffer: torch.optim's SGD and AdamW
 * (PyTorch 1.13 _single_tensor_sgd / _single_tensor_adamw, maximize=False,
 * amsgrad=False), and bagua's QAdam after its warm-up; the rules and the
 * scalar derivations of plugins/accelerators/cpu/optim.c. Scalars are
 * derived in double on the host, then each element is updated in the
 * compute type (fp32 for 16-bit buffers, each stored value rounded once). */
#include <math.h>
#include "gpu_cuda.cuh"

/* SGD:
 *   d = g + wd * p                   (wd != 0)
 *   buf = first ? d : mom * buf + (1 - dampening) * d
 *   d = nesterov ? d + mom * buf : buf
 *   p -= lr * d
 * The buffer is untouched when momentum is 0 (may be NULL) and not read on
 * the first step (may be uninitialised). */
template <class T>
__global__ void k_sgd(T *p, const T *g, T *buf, int64_t n, typename Num<T>::C lr,
                      typename Num<T>::C wd, typename Num<T>::C mom, typename Num<T>::C keep,
                      int has_mom, int nesterov, int first) {
    typedef Num<T> N;
    typedef typename N::C C;
    GPU_LOOP(i, n) {
        C d = wd == 0 ? N::ld(g[i]) : N::ld(g[i]) + wd * N::ld(p[i]);
        if (has_mom) {
            C b = first ? d : mom * N::ld(buf[i]) + keep * d;
            buf[i] = N::st(b);
            d = nesterov ? d + mom * b : b;
        }
        p[i] = N::st(N::ld(p[i]) - lr * d);
    }
}
template <class T>
static void sgd_t(lt_ctx *ctx, void *param, const void *grad, void *buf, int64_t n,
                  const lt_sgd_args *a) {
    typedef typename Num<T>::C C;
    k_sgd<T><<<gpu_grid(n), GPU_THREADS, 0, GPU_STREAM>>>(
        (T *)param, (const T *)grad, (T *)buf, n, (C)a->lr, (C)a->weight_decay,
        (C)a->momentum, (C)(1 - a->dampening), a->momentum != 0, a->nesterov, a->first_step);
    GPU_LAUNCHED(ctx, "sgd_step");
}
extern "C" void gpu_sgd_step(lt_ctx *ctx, lt_dtype t, void *param, const void *grad,
                             void *momentum_buf, int64_t n, const lt_sgd_args *a) {
    if (a->nesterov && (a->momentum <= 0 || a->dampening != 0)) {
        gpu_fail(ctx, LT_ERR_INVALID,
                 "gpu sgd_step: nesterov needs momentum > 0 and dampening 0 (got %g, %g)",
                 a->momentum, a->dampening);
        return;
    }
    if (n <= 0 || !gpu_enter(ctx)) return;
    GPU_DISPATCH(ctx, "sgd_step", t, sgd_t, ctx, param, grad, momentum_buf, n, a);
}

/* AdamW, decoupled weight decay:
 *   p *= 1 - lr wd
 *   m = b1 m + (1 - b1) g ;  v = b2 v + (1 - b2) g^2
 *   p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps) */
template <class T>
__global__ void k_adamw(T *p, const T *g, T *m, T *v, int64_t n, typename Num<T>::C decay,
                        typename Num<T>::C b1, typename Num<T>::C c1, typename Num<T>::C b2,
                        typename Num<T>::C c2, typename Num<T>::C step_size,
                        typename Num<T>::C bc2_sqrt, typename Num<T>::C eps) {
    typedef Num<T> N;
    typedef typename N::C C;
    GPU_LOOP(i, n) {
        C gi = N::ld(g[i]);
        C mi = b1 * N::ld(m[i]) + c1 * gi;
        C vi = b2 * N::ld(v[i]) + c2 * gi * gi;
        m[i] = N::st(mi);
        v[i] = N::st(vi);
        p[i] = N::st(N::ld(p[i]) * decay - step_size * (mi / (gpu_sqrt(vi) / bc2_sqrt + eps)));
    }
}
template <class T>
static void adamw_t(lt_ctx *ctx, void *param, const void *grad, void *m, void *v, int64_t n,
                    const lt_adamw_args *a) {
    typedef typename Num<T>::C C;
    double step = (double)a->step;
    k_adamw<T><<<gpu_grid(n), GPU_THREADS, 0, GPU_STREAM>>>(
        (T *)param, (const T *)grad, (T *)m, (T *)v, n, (C)(1 - a->lr * a->weight_decay),
        (C)a->beta1, (C)(1 - a->beta1), (C)a->beta2, (C)(1 - a->beta2),
        (C)(a->lr / (1 - pow(a->beta1, step))), (C)sqrt(1 - pow(a->beta2, step)), (C)a->eps);
    GPU_LAUNCHED(ctx, "adamw_step");
}
extern "C" void gpu_adamw_step(lt_ctx *ctx, lt_dtype t, void *param, const void *grad, void *m,
                               void *v, int64_t n, const lt_adamw_args *a) {
    if (a->step < 1) {
        gpu_fail(ctx, LT_ERR_INVALID, "gpu adamw_step: step %lld; steps count from 1",
                 (long long)a->step);
        return;
    }
    if (n <= 0 || !gpu_enter(ctx)) return;
    GPU_DISPATCH(ctx, "adamw_step", t, adamw_t, ctx, param, grad, m, v, n, a);
}

/* QAdam after warm-up (accelerator.h): m and v are read only;
 *   u = (m / bc1) / (sqrt(v) / sqrt(bc2) + eps), 0 where v == 0
 *   p = p (1 - lr wd) - lr clamp(u, -bound, bound)
 * bound = max(1, (1 - b1) / sqrt(1 - b2)). */
template <class T>
__global__ void k_qadam(T *p, const T *m, const T *v, int64_t n, typename Num<T>::C decay,
                        typename Num<T>::C lr, typename Num<T>::C bc1,
                        typename Num<T>::C bc2_sqrt, typename Num<T>::C eps,
                        typename Num<T>::C bound) {
    typedef Num<T> N;
    typedef typename N::C C;
    GPU_LOOP(i, n) {
        C vi = N::ld(v[i]);
        C u = vi > 0 ? (N::ld(m[i]) / bc1) / (gpu_sqrt(vi) / bc2_sqrt + eps) : (C)0;
        u = u > bound ? bound : u < -bound ? -bound : u;
        p[i] = N::st(N::ld(p[i]) * decay - lr * u);
    }
}
template <class T>
static void qadam_t(lt_ctx *ctx, void *param, const void *m, const void *v, int64_t n,
                    const lt_adamw_args *a) {
    typedef typename Num<T>::C C;
    double step = (double)a->step;
    double bound = (1 - a->beta1) / sqrt(1 - a->beta2);
    k_qadam<T><<<gpu_grid(n), GPU_THREADS, 0, GPU_STREAM>>>(
        (T *)param, (const T *)m, (const T *)v, n, (C)(1 - a->lr * a->weight_decay), (C)a->lr,
        (C)(1 - pow(a->beta1, step)), (C)sqrt(1 - pow(a->beta2, step)), (C)a->eps,
        (C)(bound > 1 ? bound : 1));
    GPU_LAUNCHED(ctx, "qadam_step");
}
extern "C" void gpu_qadam_step(lt_ctx *ctx, lt_dtype t, void *param, const void *m, const void *v,
                               int64_t n, const lt_adamw_args *a) {
    if (a->step < 1) {
        gpu_fail(ctx, LT_ERR_INVALID, "gpu qadam_step: step %lld; steps count from 1",
                 (long long)a->step);
        return;
    }
    if (n <= 0 || !gpu_enter(ctx)) return;
    GPU_DISPATCH(ctx, "qadam_step", t, qadam_t, ctx, param, m, v, n, a);
}
