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
void lt_ctx_set_state(lt_ctx *ctx, void *state) { ctx->state = state; }
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
