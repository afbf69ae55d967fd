/* single_device: one process, one device, no communication. The collectives
 * for the user return their input, as a world of one. */
#include <string.h>
#include "lt/lt.h"

static lt_status sd_launch_kind(lt_ctx *ctx, lt_launch_kind *out) {
    (void)ctx;
    *out = LT_LAUNCH_NONE;
    return LT_OK;
}

static lt_status sd_noop(lt_ctx *ctx, lt_run *run) {
    (void)ctx;
    (void)run;
    return LT_OK;
}

static lt_status sd_on_backward_start(lt_ctx *ctx, lt_run *run, bool sync) {
    (void)ctx;
    (void)run;
    (void)sync;
    return LT_OK;
}

static lt_status sd_on_grad_ready(lt_ctx *ctx, lt_run *run, size_t offset, size_t count, bool sync) {
    (void)ctx;
    (void)run;
    (void)offset;
    (void)count;
    (void)sync;
    return LT_OK;
}

static lt_status sd_reduce(lt_ctx *ctx, lt_run *run, void *buf, size_t count, lt_dtype t, lt_redop op) {
    (void)ctx;
    (void)run;
    (void)buf;
    (void)count;
    (void)t;
    (void)op;
    return LT_OK;
}

static lt_status sd_all_gather(lt_ctx *ctx, lt_run *run, const void *send, void *recv, size_t count,
                               lt_dtype t) {
    (void)ctx;
    (void)run;
    if (recv != send) memcpy(recv, send, count * lt_dtype_size(t));
    return LT_OK;
}

static lt_status sd_broadcast(lt_ctx *ctx, lt_run *run, void *buf, size_t count, lt_dtype t, int root) {
    (void)ctx;
    (void)run;
    (void)buf;
    (void)count;
    (void)t;
    if (root != 0) {
        lt_set_error(ctx, "broadcast from rank %d in a world of one process", root);
        return LT_ERR_INVALID;
    }
    return LT_OK;
}

static const lt_strategy_desc single_device = {
    LT_HEADER(LT_KIND_STRATEGY, lt_strategy_desc, "single_device", NULL, "1.0.0",
              "one process on one device, no communication", NULL, NULL),
    .launch_kind = sd_launch_kind,
    .setup_environment = sd_noop,
    .init_dist_connection = sd_noop,
    .configure_ddp = sd_noop,
    .on_backward_start = sd_on_backward_start,
    .on_grad_ready = sd_on_grad_ready,
    .before_optimizer_step = sd_noop,
    .reduce = sd_reduce,
    .all_gather = sd_all_gather,
    .broadcast = sd_broadcast,
    .barrier = sd_noop,
    .teardown = sd_noop,
};

LT_PLUGIN_EXPORT(&single_device.hdr)
