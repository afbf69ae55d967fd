/* liblt-strategy-child.so: overrides one hook of "base" and wraps it
 * through super, as a third party replacing init_dist_connection would. */
#include "tp.h"

static const lt_strategy_desc *super;

static lt_status init_dist(lt_ctx *c, lt_run *r) {
    TP_BUMP(r, 10);
    return super->init_dist_connection(c, r);
}

static const lt_param_spec params[] = {
    {"child_knob", LT_PARAM_BOOL, "false", "only the child has it"},
    {"shared", LT_PARAM_STRING, "child", "the child's spec"},
    {NULL, 0, NULL, NULL},
};

static const lt_strategy_desc child = {
    LT_HEADER(LT_KIND_STRATEGY, lt_strategy_desc, "child", "base", "2.0", "base with my rendezvous",
              params, &super),
    .init_dist_connection = init_dist,
};

LT_PLUGIN_EXPORT(&child.hdr)
