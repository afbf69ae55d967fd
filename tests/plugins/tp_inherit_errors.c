/* Strategies whose base chain is broken: TP_NAME inherits from TP_BASE
 * (a missing base, a cycle built from two of these, or an incomplete base). */
#include "tp.h"

static lt_status launch_kind(lt_ctx *c, lt_launch_kind *out) {
    (void)c;
    *out = LT_LAUNCH_SPAWN;
    return LT_OK;
}

static const lt_strategy_desc broken = {
    LT_HEADER(LT_KIND_STRATEGY, lt_strategy_desc, TP_NAME, TP_BASE, "0.1", NULL, NULL, NULL),
    .launch_kind = launch_kind,
};

LT_PLUGIN_EXPORT(&broken.hdr)
