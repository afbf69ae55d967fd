/* ddp_spawn: ddp whose workers are forked by the trainer after setup rather
 * than started by ltrun. Everything but the launch kind is inherited from
 * ddp: this descriptor sets one hook and names its base, the loader does the
 * rest. The final parameters and metrics come back to the launching process. */
#include "lt/lt.h"

static lt_status spawn_launch_kind(lt_ctx *ctx, lt_launch_kind *out) {
    (void)ctx;
    *out = LT_LAUNCH_SPAWN;
    return LT_OK;
}

static const lt_strategy_desc ddp_spawn = {
    LT_HEADER(LT_KIND_STRATEGY, lt_strategy_desc, "ddp_spawn", "ddp", "1.0.0",
              "ddp with workers forked after setup; results return to the launching process", NULL, NULL),
    .launch_kind = spawn_launch_kind,
};

LT_PLUGIN_EXPORT(&ddp_spawn.hdr)
