/* liblt-strategy-old.so: built by an "older minor" that ended right before
 * on_train_start. The struct in memory is full size and holds poison past
 * struct_size; the loader must not read it. */
#include "tp.h"

static lt_status launch_kind(lt_ctx *c, lt_launch_kind *out) {
    (void)c;
    *out = LT_LAUNCH_SPAWN;
    return LT_OK;
}
static lt_status poison(lt_ctx *c, lt_run *r) {
    (void)c;
    TP_BUMP(r, -666);
    return LT_ERR_ABI;
}
static lt_status poison_sync(lt_ctx *c, lt_run *r, bool s) {
    (void)c, (void)s;
    TP_BUMP(r, -667);
    return LT_ERR_ABI;
}

static const lt_strategy_desc old = {
    TP_HDR(LT_PLUGIN_MAGIC, LT_ABI_MAJOR, LT_ABI_MINOR, offsetof(lt_strategy_desc, on_train_start),
           LT_KIND_STRATEGY, "old", "base", NULL),
    .launch_kind = launch_kind,
    .on_train_start = poison,
    .on_train_end = poison,
    .on_backward_start = poison_sync,
    .after_optimizer_step = poison,
    .teardown = poison,
};

LT_PLUGIN_EXPORT(&old.hdr)
