/* The core's defaults for optional hooks, and how the rest of the core adds
 * more. Internal to liblt. */
#ifndef LT_HOOKS_DEFAULTS_H
#define LT_HOOKS_DEFAULTS_H

#include "lt/lt.h"

/* Makes `fn` the default of optional hook `hook` of `kind` for every plugin
 * loaded afterwards (tables already resolved keep what they had). Meant for
 * start-up, before the first lt_registry_load; main thread only. An unknown
 * kind or hook name is a programming error: it is logged and ignored. */
void lt_hooks_set_default(lt_kind kind, const char *hook, void (*fn)(void));

/* The defaults hook_table.c installs. Exposed so tests can recognise them. */
lt_status lt_default_env_local_world_size(lt_ctx *ctx, int *out);
lt_status lt_default_backend_supports(lt_ctx *ctx, lt_dtype dtype, lt_redop op, bool *out);
lt_status lt_default_backend_supports_memory(lt_ctx *ctx, lt_mem_kind kind, bool *out);
lt_status lt_default_accel_device_in_use(lt_ctx *ctx, int device, bool *out);
lt_status lt_default_accel_device_name(lt_ctx *ctx, int device, char *buf, size_t len);
lt_status lt_default_strategy_on_train_start(lt_ctx *ctx, lt_run *run);
lt_status lt_default_strategy_on_train_end(lt_ctx *ctx, lt_run *run);
lt_status lt_default_strategy_after_optimizer_step(lt_ctx *ctx, lt_run *run);

#endif
