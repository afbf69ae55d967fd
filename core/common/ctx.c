/* Context services: per-thread error messages, logging, plugin state and
 * typed parameters read from the config. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "ctx.h"

static _Thread_local char err_buf[2048];
static int g_log_level = LT_LOG_INFO;
static int g_log_rank = -1;

void lt_ctx_init(lt_ctx *ctx, uint32_t kind, const char *name, const lt_plugin_header *desc,
                 const lt_config *config) {
    memset(ctx, 0, sizeof *ctx);
    ctx->kind = kind;
    snprintf(ctx->name, sizeof ctx->name, "%s", name ? name : "");
    ctx->desc = desc;
    ctx->config = config;
    ctx->rank = -1;
}

void lt_set_errorv(lt_ctx *ctx, const char *fmt, va_list ap) {
    (void)ctx;
    /* Through a copy: callers forward messages with ("%s", lt_last_error()). */
    char tmp[sizeof err_buf];
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    memcpy(err_buf, tmp, sizeof err_buf);
}

void lt_set_error(lt_ctx *ctx, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    lt_set_errorv(ctx, fmt, ap);
    va_end(ap);
}

const char *lt_last_error(const lt_ctx *ctx) {
    (void)ctx;
    return err_buf;
}

void lt_clear_error(void) { err_buf[0] = 0; }

void *lt_ctx_state(const lt_ctx *ctx) { return ctx->state; }

void lt_ctx_set_state(lt_ctx *ctx, void *state) {
    if (ctx->state && state && state != ctx->state)
        lt_log(ctx, LT_LOG_WARN, "plugin state replaced while set: the root slot belongs to the "
               "plugin without a base; a derived plugin or a path:symbol hook keeps its own "
               "with lt_ctx_set_keyed_state");
    ctx->state = state;
}

void *lt_ctx_keyed_state(const lt_ctx *ctx, const void *key) {
    for (int i = 0; key && i < LT_CTX_MAX_KEYED_STATES; i++)
        if (ctx->keyed[i].key == key) return ctx->keyed[i].state;
    return NULL;
}

lt_status lt_ctx_set_keyed_state(lt_ctx *ctx, const void *key, void *state) {
    if (!key) {
        lt_set_error(ctx, "lt_ctx_set_keyed_state: key is NULL; use the address of something "
                     "the plugin owns (its descriptor, a static variable)");
        return LT_ERR_INVALID;
    }
    lt_keyed_state *free_slot = NULL;
    for (int i = 0; i < LT_CTX_MAX_KEYED_STATES; i++) {
        lt_keyed_state *k = &ctx->keyed[i];
        if (k->key == key) {
            k->state = state;
            if (!state) k->key = NULL;
            return LT_OK;
        }
        if (!k->key && !free_slot) free_slot = k;
    }
    if (!state) return LT_OK;
    if (!free_slot) {
        lt_set_error(ctx, "lt_ctx_set_keyed_state: all %d keyed slots of %s '%s' are in use; "
                     "keep one struct per plugin under one key", LT_CTX_MAX_KEYED_STATES,
                     lt_kind_name(ctx->kind) ? lt_kind_name(ctx->kind) : "core", ctx->name);
        return LT_ERR_NOMEM;
    }
    free_slot->key = key;
    free_slot->state = state;
    return LT_OK;
}

const void *lt_ctx_original(const lt_ctx *ctx, const char *hook) {
    for (const lt_hook_override *o = ctx ? ctx->overrides : NULL; o && hook; o = o->next)
        if (!strcmp(o->hook, hook)) return o->before;
    return NULL;
}
const char *lt_ctx_name(const lt_ctx *ctx) { return ctx->name; }

void lt_log_set_level(int level) { g_log_level = level; }
int lt_log_level(void) { return g_log_level; }
void lt_log_set_rank(int rank) { g_log_rank = rank; }

void lt_log(const lt_ctx *ctx, int level, const char *fmt, ...) {
    if (level > g_log_level) return;
    static const char *names[] = {"error", "warning", "info", "debug"};
    char line[2048];
    int n = 0;
    if (g_log_rank >= 0) n += snprintf(line + n, sizeof line - n, "[rank %d] ", g_log_rank);
    if (ctx && ctx->kind)
        n += snprintf(line + n, sizeof line - n, "lt %s/%s: ", lt_kind_name(ctx->kind), ctx->name);
    else
        n += snprintf(line + n, sizeof line - n, "lt: ");
    if (level != LT_LOG_INFO) n += snprintf(line + n, sizeof line - n, "%s: ", names[level]);
    va_list ap;
    va_start(ap, fmt);
    if (n < (int)sizeof line) vsnprintf(line + n, sizeof line - n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}

double lt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
