/* "16-mixed" and "bf16-mixed": fp32 master parameters and optimizer state,
 * a 16-bit compute copy of the parameters (the core refreshes it with every
 * optimizer step), 16-bit activations and gradients, the gradients
 * communicated in 16 bits; their unscale into fp32 master gradients is
 * decided here and left to the core (lt_run_defer_unscale), which folds it
 * into the optimizer step where it can.
 *
 * 16-mixed scales the loss dynamically with PyTorch GradScaler's rules:
 * the loss gradient is seeded with `scale` (2^16 at first); an optimizer
 * step whose reduced gradients hold an Inf or NaN is skipped and the scale
 * multiplied by backoff_factor (0.5); after growth_interval (2000) clean
 * steps in a row it is multiplied by growth_factor (2). bf16 has fp32's
 * exponent range, so bf16-mixed does not scale and never skips (as
 * Lightning and torch.autocast). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lt/lt.h"
#include "scaler.h"

#if LT_MIXED_BF16
#define MIXED_NAME "bf16-mixed"
#define MIXED_DTYPE LT_BF16
#define MIXED_DESCR "bf16 compute and gradients, fp32 master parameters and optimizer state"
#define MIXED_PARAMS NULL
#else
#define MIXED_NAME "16-mixed"
#define MIXED_DTYPE LT_F16
#define MIXED_DESCR "fp16 compute and gradients with dynamic loss scaling, fp32 master parameters and optimizer state"

static const lt_param_spec mixed_params[] = {
    {"init_scale", LT_PARAM_FLOAT, "65536", "the first loss scale (GradScaler's init_scale, 2^16)"},
    {"growth_factor", LT_PARAM_FLOAT, "2", "scale multiplier after growth_interval clean steps"},
    {"backoff_factor", LT_PARAM_FLOAT, "0.5", "scale multiplier after a step with Inf/NaN gradients"},
    {"growth_interval", LT_PARAM_INT, "2000", "clean steps in a row before the scale grows"},
    {"max_consecutive_skips", LT_PARAM_INT, "30", "steps skipped in a row before training stops with an error (0: never)"},
    {NULL, 0, NULL, NULL},
};
#define MIXED_PARAMS mixed_params
#endif

typedef struct mixed {
    lt_flat flat;
    bool scaling;
    grad_scaler sc; /* scale 1 without scaling */
    int64_t max_skips;
} mixed;

static mixed *state(lt_ctx *ctx) { return lt_ctx_state(ctx); }

static lt_status mixed_dtypes(lt_ctx *ctx, lt_precision_dtypes *out) {
    (void)ctx;
    out->param = LT_F32;
    out->compute = out->grad = MIXED_DTYPE;
    return LT_OK;
}

static lt_status read_params(lt_ctx *ctx, mixed *m) {
#if LT_MIXED_BF16
    (void)ctx;
    m->scaling = false;
    m->sc.scale = 1.0;
    return LT_OK;
#else
    m->scaling = true;
    grad_scaler *sc = &m->sc;
    sc->scale = lt_param_float(ctx, "init_scale", 65536.0);
    sc->growth_factor = lt_param_float(ctx, "growth_factor", 2.0);
    sc->backoff_factor = lt_param_float(ctx, "backoff_factor", 0.5);
    sc->growth_interval = lt_param_int(ctx, "growth_interval", 2000);
    m->max_skips = lt_param_int(ctx, "max_consecutive_skips", 30);
    char bad[160] = "";
    if (!(sc->scale > 0 && isfinite(sc->scale)))
        snprintf(bad, sizeof bad, "init_scale = %g: must be a finite number > 0", sc->scale);
    else if (!(sc->growth_factor > 1 && isfinite(sc->growth_factor)))
        snprintf(bad, sizeof bad, "growth_factor = %g: must be > 1 (GradScaler's rule)",
                 sc->growth_factor);
    else if (!(sc->backoff_factor > 0 && sc->backoff_factor < 1))
        snprintf(bad, sizeof bad, "backoff_factor = %g: must be in (0, 1)", sc->backoff_factor);
    else if (sc->growth_interval < 1)
        snprintf(bad, sizeof bad, "growth_interval = %lld: must be >= 1",
                 (long long)sc->growth_interval);
    else if (m->max_skips < 0)
        snprintf(bad, sizeof bad, "max_consecutive_skips = %lld: must be >= 0 (0: never stop)",
                 (long long)m->max_skips);
    if (*bad) {
        lt_set_error(ctx, "precision.%s", bad);
        return LT_ERR_INVALID;
    }
    return LT_OK;
#endif
}

static lt_status mixed_check_params(lt_ctx *ctx) {
    mixed m = {0};
    return read_params(ctx, &m);
}

static lt_status mixed_setup(lt_ctx *ctx, lt_run *run) {
    mixed *m = calloc(1, sizeof *m);
    if (!m) {
        lt_set_error(ctx, "out of memory");
        return LT_ERR_NOMEM;
    }
    lt_ctx_set_state(ctx, m);
    LT_CHECK(read_params(ctx, m));
    LT_CHECK(lt_run_flat(run, &m->flat));
    if (m->flat.param_dtype != LT_F32 || m->flat.grad_dtype != MIXED_DTYPE) {
        lt_set_error(ctx, "%s: the run's buffers are %s parameters and %s gradients, not f32 and %s; the core did not apply this plugin's dtypes",
                     MIXED_NAME, lt_dtype_name(m->flat.param_dtype), lt_dtype_name(m->flat.grad_dtype), lt_dtype_name(MIXED_DTYPE));
        return LT_ERR_STATE;
    }
    return LT_OK;
}

static lt_status mixed_teardown(lt_ctx *ctx) {
    free(state(ctx));
    lt_ctx_set_state(ctx, NULL);
    return LT_OK;
}

static lt_status mixed_scale_loss(lt_ctx *ctx, double *scale) {
    *scale = state(ctx)->sc.scale;
    return LT_OK;
}

/* Skip check on the reduced 16-bit gradients (the same on every rank), then
 * the master gradients are the 16-bit ones cast to fp32 and multiplied by
 * 1/scale (nothing is unscaled in 16 bits, where small gradients would
 * flush to zero). The core makes them, folded into the optimizer step
 * where the accelerator can (lt_run_defer_unscale). */
static lt_status mixed_unscale_and_check(lt_ctx *ctx, lt_run *run, bool *finite) {
    mixed *m = state(ctx);
    const lt_kernels *k = lt_run_kernels(run);
    lt_ctx *kc = lt_run_kernel_ctx(run);
    /* The gradients may have moved since setup (ddp's lt_run_place_grads). */
    LT_CHECK(lt_run_flat(run, &m->flat));
    int64_t n = (int64_t)m->flat.count;
    *finite = true;
    if (m->scaling) {
        k->all_finite(kc, MIXED_DTYPE, m->flat.grads, n, finite);
        LT_CHECK(lt_run_synchronize(run));
        if (!*finite) return LT_OK;
    }
    return lt_run_defer_unscale(run, 1.0 / m->sc.scale);
}

static lt_status mixed_update(lt_ctx *ctx, bool step_skipped) {
    mixed *m = state(ctx);
    if (!m->scaling) return LT_OK;
    double was = m->sc.scale;
    grad_scaler_update(&m->sc, step_skipped);
    if (!step_skipped) return LT_OK;
    /* Every rank decides alike (the reduced gradients are the same), so
     * every rank says it; the first few times, then every 100th. */
    if (m->sc.skipped_total <= 5 || m->sc.skipped_total % 100 == 0)
        lt_log(ctx, LT_LOG_INFO, "optimizer step skipped (Inf/NaN gradients, %lld so far): loss scale %g -> %g",
               (long long)m->sc.skipped_total, was, m->sc.scale);
    if (m->max_skips > 0 && m->sc.skipped_in_row >= m->max_skips) {
        lt_set_error(ctx, "%s: %lld optimizer steps in a row had Inf/NaN gradients (loss scale now %g), so nothing trains: the loss or the model overflows even unscaled; lower the learning rate, check the inputs, or use bf16-mixed or 32-true (precision.max_consecutive_skips)",
                     MIXED_NAME, (long long)m->sc.skipped_in_row, m->sc.scale);
        return LT_ERR_INVALID;
    }
    return LT_OK;
}

static lt_status mixed_save_state(lt_ctx *ctx, char *buf, size_t len) {
    mixed *m = state(ctx);
    if (!m->scaling) {
        if (len) buf[0] = 0;
        return LT_OK;
    }
    int w = grad_scaler_format(&m->sc, buf, len);
    if (w < 0 || (size_t)w >= len) {
        lt_set_error(ctx, "scaler state does not fit in %zu bytes", len);
        return LT_ERR_INVALID;
    }
    return LT_OK;
}

static lt_status mixed_load_state(lt_ctx *ctx, const char *st) {
    mixed *m = state(ctx);
    if (!m->scaling) {
        if (st && *st) {
            lt_set_error(ctx, "%s keeps no scaler state, but the checkpoint holds '%s'; it was saved by a 16-mixed run: resume with trainer.precision=16-mixed",
                         MIXED_NAME, st);
            return LT_ERR_MISMATCH;
        }
        return LT_OK;
    }
    if (!st || !*st) {
        /* A checkpoint from a run without a scaler (32-true, bf16-mixed):
         * its master weights are fp32 as ours, so training goes on with a
         * fresh scaler, as Lightning does. */
        lt_log(ctx, LT_LOG_INFO, "the checkpoint holds no loss-scaler state: starting from init_scale %g", m->sc.scale);
        return LT_OK;
    }
    if (!grad_scaler_parse(&m->sc, st)) {
        lt_set_error(ctx, "the checkpoint's lt.precision_state '%s' is not %s scaler state (scale=<hex float> growth_tracker=<n> skipped_in_row=<n> skipped_total=<n>); the file is damaged or was edited",
                     st, MIXED_NAME);
        return LT_ERR_CORRUPT;
    }
    return LT_OK;
}

static const lt_precision_desc mixed_precision = {
    LT_HEADER(LT_KIND_PRECISION, lt_precision_desc, MIXED_NAME, NULL, "1.0.0", MIXED_DESCR, MIXED_PARAMS, NULL),
    .dtypes = mixed_dtypes,
    .setup = mixed_setup,
    .scale_loss = mixed_scale_loss,
    .unscale_and_check = mixed_unscale_and_check,
    .update = mixed_update,
    .save_state = mixed_save_state,
    .load_state = mixed_load_state,
    .teardown = mixed_teardown,
    .check_params = mixed_check_params,
};

LT_PLUGIN_EXPORT(&mixed_precision.hdr)
