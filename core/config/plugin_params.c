/* The typed parameter readers plugins call (lt_param_*, lt_config_get in
 * lt/core.h): a plugin's context names its kind and instance, and the value
 * comes from the config the context points to. */
#include <stdio.h>
#include <string.h>
#include "common/ctx.h"
#include "config.h"

/* [<kind>.<name>] first, then [<kind>] ([model] for modules, as
 * trainer_setup.c declares it); a value the user set in either wins over a
 * declared default in the other. [<kind>] is the plugin in use's: a
 * section_only context reads its own section alone. Writes the section that holds the value to
 * sec; false when neither has one. */
bool lt_param_section(const lt_ctx *ctx, const char *key, char *sec, size_t len) {
    if (!ctx || !ctx->config || !ctx->kind || !key) return false;
    const char *kind = lt_kind_name(ctx->kind);
    const char *home = ctx->kind == LT_KIND_MODULE ? "model" : kind;
    snprintf(sec, len, "%s.%s", kind, ctx->name);
    if (ctx->section_only) return lt_config_value(ctx->config, sec, key) != NULL;
    if (lt_config_source_of(ctx->config, sec, key) == LT_SRC_DEFAULT &&
        lt_config_source_of(ctx->config, home, key) != LT_SRC_DEFAULT)
        snprintf(sec, len, "%s", home);
    else if (!lt_config_value(ctx->config, sec, key))
        snprintf(sec, len, "%s", home);
    return lt_config_value(ctx->config, sec, key) != NULL;
}

/* The typed readers parse with the config's own rules (lt_config_int ...),
 * so a value means here what validation accepted: "010" is ten. */
int64_t lt_param_int(lt_ctx *ctx, const char *key, int64_t def) {
    char sec[128];
    int64_t v;
    if (!lt_param_section(ctx, key, sec, sizeof sec)) return def;
    return lt_config_int(ctx->config, sec, key, &v, NULL, 0) == LT_OK ? v : def;
}

double lt_param_float(lt_ctx *ctx, const char *key, double def) {
    char sec[128];
    double v;
    if (!lt_param_section(ctx, key, sec, sizeof sec)) return def;
    return lt_config_float(ctx->config, sec, key, &v, NULL, 0) == LT_OK ? v : def;
}

bool lt_param_bool(lt_ctx *ctx, const char *key, bool def) {
    char sec[128];
    bool v;
    if (!lt_param_section(ctx, key, sec, sizeof sec)) return def;
    return lt_config_bool(ctx->config, sec, key, &v, NULL, 0) == LT_OK ? v : def;
}

const char *lt_param_str(lt_ctx *ctx, const char *key, const char *def) {
    char sec[128];
    return lt_param_section(ctx, key, sec, sizeof sec) ? lt_config_value(ctx->config, sec, key)
                                                        : def;
}

size_t lt_param_set_list(const lt_ctx *ctx, char *out, size_t len) {
    size_t n = 0;
    if (len) out[0] = 0;
    const lt_param_spec *p = ctx && ctx->desc ? ctx->desc->params : NULL;
    for (; p && p->name && n < len; p++) {
        char sec[128];
        if (!lt_param_section(ctx, p->name, sec, sizeof sec) ||
            lt_config_source_of(ctx->config, sec, p->name) == LT_SRC_DEFAULT)
            continue;
        n += (size_t)snprintf(out + n, len - n, "%s%s.%s = %s (%s)", n ? ", " : "", sec, p->name,
                              lt_config_value(ctx->config, sec, p->name),
                              lt_config_origin(ctx->config, sec, p->name));
    }
    return n < len ? n : len ? len - 1 : 0;
}

const char *lt_config_get(lt_ctx *ctx, const char *dotted) {
    if (!ctx || !ctx->config) return NULL;
    const char *dot = strrchr(dotted, '.');
    if (!dot) return NULL;
    char sec[128];
    size_t n = (size_t)(dot - dotted);
    if (n >= sizeof sec) return NULL;
    memcpy(sec, dotted, n);
    sec[n] = 0;
    return lt_config_value(ctx->config, sec, dot + 1);
}
