/* Strict reading of launcher variables, shared by the environment plugins.
 *
 * Header-only (static inline): every plugin is its own .so built against the
 * public SDK headers alone, so there is no library these helpers could live
 * in, and a static copy per plugin costs a few hundred bytes.
 *
 * Every reader fails with LT_ERR_INVALID and an lt_set_error message that
 * names the variable, its value and the fix; none of them writes *out on
 * failure. An empty value counts as set (and is then rejected), because
 * `export RANK=` is a mistake worth reporting, not a default. */
#ifndef LT_ENV_READ_H
#define LT_ENV_READ_H

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "lt/environment.h"

/* Pass as `def` when the variable must be set. */
#define ENV_REQUIRED INT_MIN

static inline bool env_has(const char *name) { return getenv(name) != NULL; }

/* Decimal digits only, optionally after one '-'. No spaces, '+', hex or octal:
 * a launcher writes plain numbers, anything else is a misconfiguration. */
static inline bool env_parse_long(const char *s, long *out) {
    bool neg = *s == '-';
    if (neg) s++;
    if (!*s) return false;
    long v = 0;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s)) return false;
        int d = *s - '0';
        if (v > (LONG_MAX - d) / 10) return false; /* overflow is "not an integer" too */
        v = v * 10 + d;
    }
    *out = neg ? -v : v;
    return true;
}

/* NAME as an int in [lo, hi]; unset gives `def`, or an error when def is
 * ENV_REQUIRED. `fix` completes the message: what should set it, and to what. */
static inline lt_status env_int(lt_ctx *ctx, const char *name, int lo, int hi, int def,
                                const char *fix, int *out) {
    const char *s = getenv(name);
    if (!s) {
        if (def == ENV_REQUIRED) {
            lt_set_error(ctx, "%s is not set; %s", name, fix);
            return LT_ERR_INVALID;
        }
        *out = def;
        return LT_OK;
    }
    long v;
    if (!env_parse_long(s, &v)) {
        lt_set_error(ctx, "%s='%s' is not an integer; %s", name, s, fix);
        return LT_ERR_INVALID;
    }
    if (v < 0 && lo >= 0) {
        lt_set_error(ctx, "%s='%s' is negative; %s", name, s, fix);
        return LT_ERR_INVALID;
    }
    if (v < lo || v > hi) {
        if (hi == INT_MAX)
            lt_set_error(ctx, "%s='%s' must be at least %d; %s", name, s, lo, fix);
        else
            lt_set_error(ctx, "%s='%s' is out of range (%d..%d); %s", name, s, lo, hi, fix);
        return LT_ERR_INVALID;
    }
    *out = (int)v;
    return LT_OK;
}

/* Ranks index into a size: rank `value` of variable `name` must be below `limit`
 * (the value of `limit_name`, which may be a default). */
static inline lt_status env_below(lt_ctx *ctx, const char *name, int value, const char *limit_name,
                                  int limit, const char *fix) {
    if (value < limit) return LT_OK;
    lt_set_error(ctx, "%s=%d is not below %s=%d; %s", name, value, limit_name, limit, fix);
    return LT_ERR_INVALID;
}

/* Copies a host name or address `value` (read from `name`) into buf. */
static inline lt_status env_copy_host(lt_ctx *ctx, const char *name, const char *value, char *buf,
                                      size_t len, const char *fix) {
    if (!*value) {
        lt_set_error(ctx, "%s is empty; %s", name, fix);
        return LT_ERR_INVALID;
    }
    for (const char *p = value; *p; p++) {
        if (isspace((unsigned char)*p)) {
            lt_set_error(ctx, "%s='%s' contains whitespace; %s", name, value, fix);
            return LT_ERR_INVALID;
        }
    }
    size_t n = strlen(value);
    if (!buf || n >= len) {
        lt_set_error(ctx, "%s='%s' does not fit the caller's %zu-byte buffer; use a shorter host name",
                     name, value, len);
        return LT_ERR_INVALID;
    }
    memcpy(buf, value, n + 1);
    return LT_OK;
}

/* MASTER_PORT when set, validated; *found says whether it was. */
static inline lt_status env_master_port(lt_ctx *ctx, bool *found, int *out) {
    *found = env_has("MASTER_PORT");
    if (!*found) return LT_OK;
    return env_int(ctx, "MASTER_PORT", 1, 65535, ENV_REQUIRED,
                   "set MASTER_PORT to a free TCP port on rank 0's host", out);
}

#endif
