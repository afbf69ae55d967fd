/* liblt-strategy-base.so: a complete strategy others inherit from. Every
 * hook has its own body so no two share an address (identical-code folding
 * would make the test's pointer comparisons meaningless). on_train_start and
 * after_optimizer_step are left to the core's defaults. */
#include "tp.h"

static lt_status launch_kind(lt_ctx *c, lt_launch_kind *out) {
    (void)c;
    *out = LT_LAUNCH_NONE;
    return LT_OK;
}

#define RUN_HOOK(name, k)                                                                  \
    static lt_status name(lt_ctx *c, lt_run *r) {                                          \
        (void)c;                                                                           \
        TP_BUMP(r, k);                                                                     \
        return LT_OK;                                                                      \
    }
RUN_HOOK(setup_environment, 1000)
RUN_HOOK(init_dist, 1)
RUN_HOOK(configure_ddp, 2000)
RUN_HOOK(on_train_end, 3000)
RUN_HOOK(before_optimizer_step, 6000)
RUN_HOOK(barrier, 10000)
RUN_HOOK(teardown, 11000)

static lt_status on_backward_start(lt_ctx *c, lt_run *r, bool sync) {
    (void)c;
    TP_BUMP(r, sync ? 4000 : 4001);
    return LT_OK;
}

static lt_status on_grad_ready(lt_ctx *c, lt_run *r, size_t off, size_t n, bool sync) {
    (void)c, (void)off, (void)n, (void)sync;
    TP_BUMP(r, 5000);
    return LT_OK;
}

static lt_status reduce(lt_ctx *c, lt_run *r, void *b, size_t n, lt_dtype t, lt_redop op) {
    (void)c, (void)b, (void)n, (void)t, (void)op;
    TP_BUMP(r, 7000);
    return LT_OK;
}

static lt_status all_gather(lt_ctx *c, lt_run *r, const void *s, void *d, size_t n, lt_dtype t) {
    (void)c, (void)s, (void)d, (void)n, (void)t;
    TP_BUMP(r, 8000);
    return LT_OK;
}

static lt_status broadcast(lt_ctx *c, lt_run *r, void *b, size_t n, lt_dtype t, int root) {
    (void)c, (void)b, (void)n, (void)t, (void)root;
    TP_BUMP(r, 9000);
    return LT_OK;
}

static const lt_param_spec params[] = {
    {"bucket_cap_mb", LT_PARAM_INT, "25", "bucket size in MiB"},
    {"shared", LT_PARAM_STRING, "base", "also declared by child; child's spec wins"},
    {NULL, 0, NULL, NULL},
};

static const lt_strategy_desc base = {
    LT_HEADER(LT_KIND_STRATEGY, lt_strategy_desc, "base", NULL, "1.0", "complete test strategy",
              params, NULL),
    .launch_kind = launch_kind,
    .setup_environment = setup_environment,
    .init_dist_connection = init_dist,
    .configure_ddp = configure_ddp,
    .on_train_end = on_train_end,
    .on_backward_start = on_backward_start,
    .on_grad_ready = on_grad_ready,
    .before_optimizer_step = before_optimizer_step,
    .reduce = reduce,
    .all_gather = all_gather,
    .broadcast = broadcast,
    .barrier = barrier,
    .teardown = teardown,
};

LT_PLUGIN_EXPORT(&base.hdr)
