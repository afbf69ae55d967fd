/* liblt-strategy-old_shrink.so: single_device as a strategy built for ABI
 * 1.3, before lt_run_params_changed existed, whose after_optimizer_step
 * multiplies the (master) parameters by 0.75. The core must cast the
 * compute copy again after it, so optimizer.fused = true gives fused =
 * false's bits (precision.sh, case i). */
#include "lt/lt.h"

static lt_status shrink_after_optimizer_step(lt_ctx *ctx, lt_run *run) {
    lt_flat flat;
    LT_CHECK(lt_run_flat(run, &flat));
    if (flat.param_dtype != LT_F32) {
        lt_set_error(ctx, "old_shrink: needs f32 (master) parameters");
        return LT_ERR_INVALID;
    }
    float *p = flat.params;
    for (size_t i = 0; i < flat.count; i++) p[i] *= 0.75f;
    return LT_OK;
}

static const lt_strategy_desc old_shrink = {
    .hdr = {LT_PLUGIN_MAGIC, LT_ABI_MAJOR, 3, (uint32_t)sizeof(lt_strategy_desc), LT_KIND_STRATEGY,
            "old_shrink", "single_device", "1.0.0",
            "single_device as built for ABI 1.3, shrinking the parameters after each step (a test "
            "plugin)", NULL, NULL},
    .after_optimizer_step = shrink_after_optimizer_step,
};

LT_PLUGIN_EXPORT(&old_shrink.hdr)
