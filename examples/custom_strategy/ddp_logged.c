/* ddp_logged: inherits everything from ddp and wraps one hook,
 * init_dist_connection, to time the rendezvous and say which rank joined.
 * The loader lays this table over ddp's and stores ddp's resolved table in
 * `super`, so the override can call the original.
 *
 *   ltrun --strategy ddp_logged --devices 2 --plugin-dir build/plugins ... */
#include "lt/lt.h"

static const lt_strategy_desc *super;

static lt_status logged_init_dist_connection(lt_ctx *ctx, lt_run *run) {
    double t0 = lt_now();
    lt_status st = super->init_dist_connection(ctx, run);
    const lt_world *w = lt_run_world(run);
    if (st == LT_OK)
        lt_log(ctx, LT_LOG_INFO, "rank %d of %d joined the process group in %.3f s", w->global_rank,
               w->world_size, lt_now() - t0);
    return st;
}

static const lt_strategy_desc ddp_logged = {
    LT_HEADER(LT_KIND_STRATEGY, lt_strategy_desc, "ddp_logged", "ddp", "0.1.0",
              "ddp that logs how long each rank took to join (example of one overridden hook)", NULL, &super),
    .init_dist_connection = logged_init_dist_connection,
};

LT_PLUGIN_EXPORT(&ddp_logged.hdr)
