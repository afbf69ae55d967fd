/* Checks a precision plugin's dtypes against what the core and the
 * accelerator can run, before the model is made: the combination must be
 * one the core implements, and every kernel a training step needs must run
 * in the 16-bit dtypes on this accelerator. A third-party accelerator without
 * bf16 kernels then fails here with the kernel's name, not in the middle of
 * the first step. */
#include <stdio.h>
#include "trainer_internal.h"

static bool is_float(uint32_t t) { return t >= LT_F32 && t <= LT_BF16; }
static bool is_16bit(uint32_t t) { return t == LT_F16 || t == LT_BF16; }

/* Runs one kernel on a few elements; an error it parks comes back from
 * synchronize and names the kernel. */
static lt_status probe(lt_run *r, const char *kernel, lt_dtype t) {
    lt_status st = LT_ACC(r)->synchronize(&r->accel.ctx);
    if (st == LT_OK) return LT_OK;
    return lt_run_fail(r, LT_ERR_UNSUPPORTED,
                       "trainer.precision = %s needs accelerator '%s' to run the %s kernel in %s, which it cannot (%s); use 32-true or an accelerator with 16-bit kernels",
                       r->precision.ctx.name, r->accel.ctx.name, kernel, lt_dtype_name(t), lt_last_error(&r->accel.ctx));
}

/* Runs `call` and fails naming `kernel` if it parked an error. */
#define PROBE(kernel, t, call)                                                         \
    do {                                                                               \
        call;                                                                          \
        if ((st = probe(r, kernel, t)) != LT_OK) goto out;                             \
    } while (0)

static lt_status probe_kernels(lt_run *r, const lt_kernels *k, lt_dtype c, lt_dtype p) {
    enum { N = 16, SLOT = 2 * N * sizeof(double) };
    void *buf = NULL;
    lt_status st = LT_ACC(r)->alloc(&r->accel.ctx, 4 * SLOT, &buf);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->accel, "alloc", st);
    lt_ctx *kc = &r->accel.ctx;
    char *x = buf, *y = x + SLOT, *z = y + SLOT, *w = z + SLOT;
    bool fin = false;
    PROBE("fill", c, (k->fill(kc, c, x, N, 0.5), k->fill(kc, c, y, N, 0.25)));
    PROBE("gemm", c, k->gemm(kc, c, false, true, 2, 2, 4, 1.0, x, 4, y, 4, 0.0, z, 2));
    PROBE("gemm (transposed A)", c, k->gemm(kc, c, true, false, 2, 2, 4, 1.0, x, 2, y, 2, 1.0, z, 2));
    PROBE("add_bias", c, k->add_bias(kc, c, z, y, 2, 2));
    PROBE("sum_rows", c, k->sum_rows(kc, c, z, x, 2, 2, 1.0));
    PROBE("act_fwd", c, k->act_fwd(kc, c, LT_ACT_RELU, z, x, N));
    PROBE("act_bwd", c, k->act_bwd(kc, c, LT_ACT_RELU, w, y, x, z, N, 0.0));
    PROBE("axpby", c, k->axpby(kc, c, N, 1.0, x, 1.0, y));
    PROBE("all_finite", c, k->all_finite(kc, c, x, N, &fin));
    if (p != c) PROBE("cast", p, (k->cast(kc, p, w, c, x, N), k->cast(kc, c, x, p, w, N)));
    if (is_16bit(p)) { /* the optimizer updates 16-bit parameters itself (16-true, bf16-true) */
        lt_sgd_args sa = {.lr = 0.1, .momentum = 0.9, .first_step = 1};
        lt_adamw_args aa = {.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .step = 1};
        PROBE("sgd_step", p, k->sgd_step(kc, p, x, y, z, N, &sa));
        PROBE("adamw_step", p, (k->fill(kc, p, z, N, 0.0), k->fill(kc, p, w, N, 0.0),
                                k->adamw_step(kc, p, x, y, z, w, N, &aa)));
    }
out:
    LT_ACC(r)->free(&r->accel.ctx, buf);
    return st;
}

lt_status lt_precision_check_dtypes(lt_run *r, const lt_kernels *k) {
    const lt_precision_dtypes *d = &r->dtypes;
    const char *name = r->precision.ctx.name;
    if (!is_float(d->param) || !is_float(d->compute) || !is_float(d->grad))
        return lt_run_fail(r, LT_ERR_PLUGIN, "precision '%s': dtypes param %u, compute %u, grad %u: each must be f32, f64, f16 or bf16 (a bug in the precision plugin)",
                           name, d->param, d->compute, d->grad);
    if (d->grad != d->compute)
        return lt_run_fail(r, LT_ERR_UNSUPPORTED, "precision '%s': gradients in %s but compute in %s; backward produces gradients in the compute dtype, so grad must equal compute",
                           name, lt_dtype_name((lt_dtype)d->grad), lt_dtype_name((lt_dtype)d->compute));
    size_t ps = lt_dtype_size((lt_dtype)d->param), cs = lt_dtype_size((lt_dtype)d->compute);
    if (d->param != d->compute && (ps <= cs || d->param == LT_F16 || d->param == LT_BF16))
        return lt_run_fail(r, LT_ERR_UNSUPPORTED, "precision '%s': master parameters in %s with compute in %s; the master copy must be wider than compute (f32 or f64 master, 16-bit or f32 compute)",
                           name, lt_dtype_name((lt_dtype)d->param), lt_dtype_name((lt_dtype)d->compute));
    if (!is_16bit(d->compute) && !is_16bit(d->param) && d->param == d->compute) return LT_OK;
    return probe_kernels(r, k, (lt_dtype)d->compute, (lt_dtype)d->param);
}
