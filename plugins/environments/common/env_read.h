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

/* NAME as a rank: an int >= 0 (unset gives `def`, or an error when def is
 * ENV_REQUIRED) below `size`, the value of `size_name`. A NULL size_name
 * means there is no size to check against. */
static inline lt_status env_rank_below(lt_ctx *ctx, const char *name, int def, const char *size_name,
                                       int size, const char *fix, int *out) {
    int v;
    LT_CHECK(env_int(ctx, name, 0, INT_MAX, def, fix, &v));
    if (size_name) LT_CHECK(env_below(ctx, name, v, size_name, size, fix));
    *out = v;
    return LT_OK;
}

/* As env_rank_below, with the size read from SIZE_NAME when that is set (then
 * a count >= 1, checked with `size_fix`); unbounded when it is not. For node
 * ranks, whose node count a launcher may leave out. */
static inline lt_status env_rank_below_if_set(lt_ctx *ctx, const char *name, int def,
                                              const char *size_name, const char *size_fix,
                                              const char *fix, int *out) {
    int size = 0;
    bool bounded = env_has(size_name);
    if (bounded) LT_CHECK(env_int(ctx, size_name, 1, INT_MAX, ENV_REQUIRED, size_fix, &size));
    return env_rank_below(ctx, name, def, bounded ? size_name : NULL, size, fix, out);
}

/* The processes on this node when they spread evenly over the nodes: `world`
 * (the value of `world_name`) / NODES_NAME, which defaults to 1 and may not
 * exceed the world (`nodes_fix` completes its messages). A world that is not a
 * multiple of the nodes is an error completed by `fix`. */
static inline lt_status env_split_evenly(lt_ctx *ctx, const char *world_name, int world,
                                         const char *nodes_name, const char *nodes_fix,
                                         const char *fix, int *out) {
    int nodes;
    LT_CHECK(env_int(ctx, nodes_name, 1, world, 1, nodes_fix, &nodes));
    if (world % nodes != 0) {
        lt_set_error(ctx, "%s=%d is not a multiple of %s=%d; %s", world_name, world, nodes_name,
                     nodes, fix);
        return LT_ERR_INVALID;
    }
    *out = world / nodes;
    return LT_OK;
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

/* MASTER_ADDR into buf, validated; unset gives `def`, or an error when def is
 * NULL. Plugins with a fallback of their own test env_has("MASTER_ADDR") first. */
static inline lt_status env_master_addr(lt_ctx *ctx, const char *def, char *buf, size_t len,
                                        const char *fix) {
    const char *addr = getenv("MASTER_ADDR");
    if (!addr) addr = def;
    if (!addr) {
        lt_set_error(ctx, "MASTER_ADDR is not set; %s", fix);
        return LT_ERR_INVALID;
    }
    return env_copy_host(ctx, "MASTER_ADDR", addr, buf, len, fix);
}

/* MASTER_PORT when set, validated; *found says whether it was. */
static inline lt_status env_master_port(lt_ctx *ctx, bool *found, int *out) {
    *found = env_has("MASTER_PORT");
    if (!*found) return LT_OK;
    return env_int(ctx, "MASTER_PORT", 1, 65535, ENV_REQUIRED,
                   "set MASTER_PORT to a free TCP port on rank 0's host", out);
}

/* The creates_processes_externally hook of every plugin whose launcher
 * (torchrun, srun, mpirun) started one process per rank. */
static inline lt_status env_started_externally(lt_ctx *ctx, bool *out) {
    (void)ctx;
    *out = true;
    return LT_OK;
}

#endif
