/* Defaults for optional hooks that need nothing beyond the plugin's own table
 * and context (its config included).
 * Each runs with the plugin's context; ctx->desc is the resolved table, so a
 * default may call the plugin's other hooks. */
#include <limits.h>
#include <stdio.h>
#include "common/ctx.h"
#include "config/config.h"
#include "hook_defaults.h"

/* lt/environment.h's promise: world_size / num_nodes, the processes spread
 * evenly over the nodes. num_nodes is trainer.num_nodes from the context's
 * config, read with the config's own rules; a context without a config (or a
 * config without the key) is one node, where every process is local. */
lt_status lt_default_env_local_world_size(lt_ctx *ctx, int *out) {
    const lt_environment_desc *env = ctx ? (const lt_environment_desc *)ctx->desc : NULL;
    if (!env || !env->world_size) {
        lt_set_error(ctx, "local_world_size: the environment's table is not set in its "
                          "context; create the context with the resolved table");
        return LT_ERR_STATE;
    }
    int64_t nodes = 1;
    const char *origin = "default";
    if (ctx->config && lt_config_value(ctx->config, "trainer", "num_nodes")) {
        char why[256];
        if (lt_config_int(ctx->config, "trainer", "num_nodes", &nodes, why, sizeof why) != LT_OK) {
            lt_set_error(ctx, "%s; fix trainer.num_nodes", why);
            return LT_ERR_INVALID;
        }
        origin = lt_config_origin(ctx->config, "trainer", "num_nodes");
        if (nodes < 1 || nodes > INT_MAX) {
            lt_set_error(ctx, "trainer.num_nodes = %lld (%s) is out of range (1..%d); fix "
                              "trainer.num_nodes",
                         (long long)nodes, origin, INT_MAX);
            return LT_ERR_INVALID;
        }
    }
    int world;
    LT_CHECK(env->world_size(ctx, &world));
    if (world % nodes != 0) {
        lt_set_error(ctx, "the environment's world size %d is not a multiple of trainer.num_nodes "
                          "= %lld (%s), so the processes cannot spread evenly over the nodes; set "
                          "trainer.num_nodes to the number of nodes the job spans, with the same "
                          "number of processes on each",
                     world, (long long)nodes, origin);
        return LT_ERR_INVALID;
    }
    *out = world / (int)nodes;
    return LT_OK;
}

lt_status lt_default_backend_supports(lt_ctx *ctx, lt_dtype dtype, lt_redop op, bool *out) {
    (void)ctx, (void)dtype, (void)op;
    *out = true;
    return LT_OK;
}

/* A backend that does not say takes host memory only (gloo, shm, and any
 * plugin built before 1.6): the core stages device buffers for it. */
lt_status lt_default_backend_supports_memory(lt_ctx *ctx, lt_mem_kind kind, bool *out) {
    (void)ctx;
    *out = kind == LT_MEM_HOST;
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
