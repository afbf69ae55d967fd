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

/* Plugin state: set in the plugin's first hook, read in the others. */
LT_API void *lt_ctx_state(const lt_ctx *ctx);
LT_API void lt_ctx_set_state(lt_ctx *ctx, void *state);
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
