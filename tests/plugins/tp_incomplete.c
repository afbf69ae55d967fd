/* liblt-strategy-incomplete.so: no base and no configure_ddp (nor most of
 * the other required hooks). Built twice, as TP_NAME: two such plugins each
 * list the installed strategies when they fail, by loading the other. */
#include "tp.h"

#ifndef TP_NAME
#define TP_NAME "incomplete"
#endif

static lt_status launch_kind(lt_ctx *c, lt_launch_kind *out) {
    (void)c;
    *out = LT_LAUNCH_NONE;
    return LT_OK;
}
static lt_status run_hook(lt_ctx *c, lt_run *r) {
    (void)c, (void)r;
    return LT_OK;
}

static const lt_strategy_desc incomplete = {
    LT_HEADER(LT_KIND_STRATEGY, lt_strategy_desc, TP_NAME, NULL, "0.1", NULL, NULL, NULL),
    .launch_kind = launch_kind,
    .setup_environment = run_hook,
    .init_dist_connection = run_hook,
};

LT_PLUGIN_EXPORT(&incomplete.hdr)
