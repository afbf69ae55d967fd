/* "32-true", "64-true", "16-true" and "bf16-true" precision: parameters,
 * optimizer state, activations and gradients all in one dtype; no loss
 * scaling, so every gradient is already at true scale and the finite check
 * is skipped, as in Lightning (whose 16-true is model.half() without a
 * scaler: small gradients may flush to zero, which is the user's choice). */
#include "lt/lt.h"

#if LT_TRUE_BITS == 64
#define TRUE_DTYPE LT_F64
#define TRUE_NAME "64-true"
#define TRUE_DESCR "float64 parameters, compute and gradients"
#elif LT_TRUE_BITS == 16 && LT_TRUE_BF16
#define TRUE_DTYPE LT_BF16
#define TRUE_NAME "bf16-true"
#define TRUE_DESCR "bfloat16 parameters, optimizer state, compute and gradients"
#elif LT_TRUE_BITS == 16
#define TRUE_DTYPE LT_F16
#define TRUE_NAME "16-true"
#define TRUE_DESCR "float16 parameters, optimizer state, compute and gradients"
#else
#define TRUE_DTYPE LT_F32
#define TRUE_NAME "32-true"
#define TRUE_DESCR "float32 parameters, compute and gradients"
#endif

static lt_status true_dtypes(lt_ctx *ctx, lt_precision_dtypes *out) {
    (void)ctx;
    out->param = out->compute = out->grad = TRUE_DTYPE;
    return LT_OK;
}

static lt_status true_setup(lt_ctx *ctx, lt_run *run) {
    (void)ctx;
    (void)run;
    return LT_OK;
}

static lt_status true_scale_loss(lt_ctx *ctx, double *scale) {
    (void)ctx;
    *scale = 1.0;
    return LT_OK;
}

static lt_status true_unscale_and_check(lt_ctx *ctx, lt_run *run, bool *finite) {
    (void)ctx;
    (void)run;
    *finite = true;
    return LT_OK;
}

static lt_status true_update(lt_ctx *ctx, bool step_skipped) {
    (void)ctx;
    (void)step_skipped;
    return LT_OK;
}

static lt_status true_save_state(lt_ctx *ctx, char *buf, size_t len) {
    (void)ctx;
    if (len) buf[0] = 0;
    return LT_OK;
}

static lt_status true_load_state(lt_ctx *ctx, const char *state) {
    if (state && *state) {
        lt_set_error(ctx, "precision %s keeps no state, but the checkpoint holds '%s'; it was saved with a mixed-precision run — resume with the same trainer.precision",
                     TRUE_NAME, state);
        return LT_ERR_MISMATCH;
    }
    return LT_OK;
}

static const lt_precision_desc true_precision = {
    LT_HEADER(LT_KIND_PRECISION, lt_precision_desc, TRUE_NAME, NULL, "1.0.0", TRUE_DESCR, NULL, NULL),
    .dtypes = true_dtypes,
    .setup = true_setup,
    .scale_loss = true_scale_loss,
    .unscale_and_check = true_unscale_and_check,
    .update = true_update,
    .save_state = true_save_state,
    .load_state = true_load_state,
};

LT_PLUGIN_EXPORT(&true_precision.hdr)
