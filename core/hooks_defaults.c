/* Defaults for optional hooks that need nothing beyond the plugin's own table.
 * Each runs with the plugin's context; ctx->desc is the resolved table, so a
 * default may call the plugin's other hooks. */
#include <stdio.h>
#include "ctx.h"
#include "hooks_defaults.h"

/* The environment does not know how many nodes the job spans, so the only
 * count it can vouch for is the world size: a single-node job (the case when
 * an environment leaves this hook out) has every process on this node.
 * Multi-node environments are expected to implement the hook. */
lt_status lt_default_env_local_world_size(lt_ctx *ctx, int *out) {
    const lt_environment_desc *env = ctx ? (const lt_environment_desc *)ctx->desc : NULL;
    if (!env || !env->world_size) {
        lt_set_error(ctx, "local_world_size: the environment's table is not set in its "
                          "context; create the context with the resolved table");
        return LT_ERR_STATE;
    }
    return env->world_size(ctx, out);
}

lt_status lt_default_backend_supports(lt_ctx *ctx, lt_dtype dtype, lt_redop op, bool *out) {
    (void)ctx, (void)dtype, (void)op;
    *out = true;
    return LT_OK;
}

lt_status lt_default_accel_device_in_use(lt_ctx *ctx, int device, bool *out) {
    (void)ctx, (void)device;
    *out = false;
    return LT_OK;
}

/* The descriptor's name rather than the context's: the user may have typed
 * "GPU", logs should say what the plugin calls itself. */
lt_status lt_default_accel_device_name(lt_ctx *ctx, int device, char *buf, size_t len) {
    const char *name = ctx && ctx->desc && ctx->desc->name ? ctx->desc->name
                       : ctx                               ? ctx->name
                                                           : "device";
    if (len) snprintf(buf, len, "%s:%d", name, device);
    return LT_OK;
}

lt_status lt_default_strategy_on_train_start(lt_ctx *ctx, lt_run *run) {
    (void)ctx, (void)run;
    return LT_OK;
}

lt_status lt_default_strategy_on_train_end(lt_ctx *ctx, lt_run *run) {
    (void)ctx, (void)run;
    return LT_OK;
}

lt_status lt_default_strategy_after_optimizer_step(lt_ctx *ctx, lt_run *run) {
    (void)ctx, (void)run;
    return LT_OK;
}
