/* strategy.replica_params, shared by the strategies that make replicas (dp,
 * ddp2): the parameter's declaration and its reading. Header only: each
 * plugin is its own .so. */
#ifndef LT_STRATEGIES_REPLICA_MODE_H
#define LT_STRATEGIES_REPLICA_MODE_H

#include <strings.h>
#include "lt/lt.h"

#define LT_REPLICA_PARAMS_SPEC                                                                      \
    {"replica_params", LT_PARAM_STRING, "auto",                                                     \
     "auto | shared | copied: replicas read the root's parameters in place (shared, host memory "   \
     "only) or hold copies refreshed after each update; auto shares when it can"}

static inline lt_status lt_replica_mode(lt_ctx *ctx, lt_replica_params *out) {
    const char *m = lt_param_str(ctx, "replica_params", "auto");
    if (!strcasecmp(m, "auto")) *out = LT_REPLICA_PARAMS_AUTO;
    else if (!strcasecmp(m, "shared")) *out = LT_REPLICA_PARAMS_SHARED;
    else if (!strcasecmp(m, "copied")) *out = LT_REPLICA_PARAMS_COPIED;
    else {
        lt_set_error(ctx, "strategy.replica_params = '%s': use auto, shared or copied", m);
        return LT_ERR_INVALID;
    }
    return LT_OK;
}

#endif
