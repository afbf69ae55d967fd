/* Services the core gives every plugin through its context: errors, logging,
 * typed parameters, per-instance state. Thread-safety: lt_set_error and the
 * lt_param_* readers may be called from any thread; a context's error slot is
 * per thread, so concurrent hooks do not overwrite each other's message. */
#ifndef LT_CORE_H
#define LT_CORE_H

#include <stdarg.h>
#include "lt/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One per plugin instance (a loaded descriptor in use by a run). Opaque. */
typedef struct lt_ctx lt_ctx;

/* Element types, shared by tensors, kernels and collectives. */
typedef enum lt_dtype {
    LT_F32 = 1,
    LT_F64 = 2,
    LT_F16 = 3,
    LT_BF16 = 4,
    LT_I8 = 5,
    LT_U8 = 6,
    LT_I32 = 7,
    LT_I64 = 8,
} lt_dtype;
LT_API size_t lt_dtype_size(lt_dtype t);          /* 0 for an unknown dtype */
LT_API const char *lt_dtype_name(lt_dtype t);     /* "f32", ... ; NULL if unknown */
LT_API int lt_dtype_parse(const char *s, lt_dtype *out); /* 0 ok, -1 unknown */

/* Record why a hook failed; returns LT_ERR_PLUGIN-free convenience: the caller
 * still returns its own status. The message should name what, where and the fix. */
LT_API void lt_set_error(lt_ctx *ctx, const char *fmt, ...) LT_PRINTF(2, 3);
LT_API void lt_set_errorv(lt_ctx *ctx, const char *fmt, va_list ap);
/* The message of the last failure on this thread ("" when none). */
LT_API const char *lt_last_error(const lt_ctx *ctx);

/* Plugin state. One context serves a whole inheritance chain and every hook
 * laid over it: ddp_spawn's hooks and the ddp hooks it inherits run with the
 * same ctx, and so does a hook taken from a user object. So:
 *  - lt_ctx_state / lt_ctx_set_state is the slot of the plugin at the root of
 *    the chain (the one without `base`: ddp under ddp_spawn). Set it in the
 *    plugin's first hook, read it in the others.
 *  - Every other party (a plugin with `base`, a hook from path:symbol) keeps
 *    its state under a key of its own, the address of anything it owns (its
 *    descriptor, a static variable): lt_ctx_keyed_state(ctx, &my_desc).
 * Replacing a set root slot with another non-NULL pointer is logged as a
 * warning: it is almost always a derived plugin taking its base's slot. */
LT_API void *lt_ctx_state(const lt_ctx *ctx);
LT_API void lt_ctx_set_state(lt_ctx *ctx, void *state);
#define LT_CTX_MAX_KEYED_STATES 8
/* NULL when nothing is stored under key. */
LT_API void *lt_ctx_keyed_state(const lt_ctx *ctx, const void *key);
/* Stores (or with NULL removes) state under key; LT_ERR_NOMEM when
 * LT_CTX_MAX_KEYED_STATES other keys are in use, LT_ERR_INVALID for key NULL. */
LT_API lt_status lt_ctx_set_keyed_state(lt_ctx *ctx, const void *key, void *state);

/* The plugin's table as it was before `hook` was replaced by a function from
 * a user object ([strategy] init_dist_connection = ./libmine.so:my_init), so
 * that function can call the one it replaced:
 *     const lt_strategy_desc *orig = lt_ctx_original(ctx, "init_dist_connection");
 *     lt_status st = orig->init_dist_connection(ctx, run);
 * NULL when `hook` was not replaced that way in this context. (A plugin with
 * `base` reaches its base through the header's `super` slot instead.) The
 * config gives each hook one value, so the table returned never holds the
 * caller itself. */
LT_API const void *lt_ctx_original(const lt_ctx *ctx, const char *hook);
/* The name the user picked this plugin by, and its kind. */
LT_API const char *lt_ctx_name(const lt_ctx *ctx);

enum { LT_LOG_ERROR = 0, LT_LOG_WARN = 1, LT_LOG_INFO = 2, LT_LOG_DEBUG = 3 };
/* Log a line prefixed with the plugin's kind/name and rank; filtered by the
 * trainer's `verbose` level. ctx may be NULL (core messages). */
LT_API void lt_log(const lt_ctx *ctx, int level, const char *fmt, ...) LT_PRINTF(3, 4);

/* Typed parameters from [<kind>.<name>] then [<kind>] (and --set, LT_* env).
 * The default passed here is used when the key is absent; keys are validated
 * against the plugin's lt_param_spec list at load time, so a malformed value
 * never reaches these readers. */
LT_API int64_t lt_param_int(lt_ctx *ctx, const char *key, int64_t def);
LT_API double lt_param_float(lt_ctx *ctx, const char *key, double def);
LT_API bool lt_param_bool(lt_ctx *ctx, const char *key, bool def);
LT_API const char *lt_param_str(lt_ctx *ctx, const char *key, const char *def);
/* ABI 1.8. The config's boolean spelling (true/false, yes/no, on/off, 1/0,
 * any case), for a string parameter that also takes words of its own
 * ("auto"): false when s is none of them. */
LT_API bool lt_parse_bool(const char *s, bool *out);

/* Any resolved config value by "section.key" (e.g. "trainer.max_epochs");
 * NULL when unset and without default. */
LT_API const char *lt_config_get(lt_ctx *ctx, const char *dotted_key);

/* Monotonic clock in seconds. */
LT_API double lt_now(void);

#define LT_CHECK(expr)                                                                 \
    do {                                                                               \
        lt_status lt_check_s_ = (expr);                                                \
        if (lt_check_s_ != LT_OK) return lt_check_s_;                                  \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
