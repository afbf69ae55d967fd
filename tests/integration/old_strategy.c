/* liblt-strategy-old_reader.so: single_device as a strategy built for ABI
 * 1.7 that keeps the master gradients' pointer (lt_run_master_grads, once,
 * in on_train_start) and reads it in after_optimizer_step, as 1.4-1.7
 * allowed: the pointer was promised to hold each step's gradients. Under
 * mixed precision the core must then write a deferred unscale out before
 * the step (precision.sh, case i). Its after_optimizer_step fails naming
 * the step when the kept gradients are all zero or the same as the step
 * before's; on success it logs their sum of squares each step. */
#include <math.h>
#include "lt/lt.h"

typedef struct reader {
    const float *grads; /* f32 master gradients, kept */
    size_t count;
    double last;
    int64_t steps;
} reader;

static lt_status reader_on_train_start(lt_ctx *ctx, lt_run *run) {
    static reader r;
    lt_flat flat;
    void *g;
    LT_CHECK(lt_run_flat(run, &flat));
    LT_CHECK(lt_run_master_grads(run, &g));
    if (flat.param_dtype != LT_F32) {
        lt_set_error(ctx, "old_reader: needs f32 master parameters (a mixed precision)");
        return LT_ERR_INVALID;
    }
    r = (reader){.grads = g, .count = flat.count, .last = -1};
    lt_ctx_set_state(ctx, &r);
    return LT_OK;
}

static lt_status reader_after_optimizer_step(lt_ctx *ctx, lt_run *run) {
    (void)run;
    reader *r = lt_ctx_state(ctx);
    double ss = 0;
    for (size_t i = 0; i < r->count; i++) ss += (double)r->grads[i] * r->grads[i];
    r->steps++;
    if (!(ss > 0) || ss == r->last) {
        lt_set_error(ctx, "old_reader: step %lld: the master gradients kept since on_train_start "
                     "are %s", (long long)r->steps, ss > 0 ? "the previous step's" : "all zero");
        return LT_ERR_STATE;
    }
    r->last = ss;
    lt_log(ctx, LT_LOG_INFO, "old_reader: step %lld: sum of squares %.9g", (long long)r->steps, ss);
    return LT_OK;
}

static const lt_strategy_desc old_reader = {
    .hdr = {LT_PLUGIN_MAGIC, LT_ABI_MAJOR, 7, (uint32_t)sizeof(lt_strategy_desc), LT_KIND_STRATEGY,
            "old_reader", "single_device", "1.0.0",
            "single_device as built for ABI 1.7, reading kept master gradients (a test plugin)",
            NULL, NULL},
    .on_train_start = reader_on_train_start,
    .after_optimizer_step = reader_after_optimizer_step,
};

LT_PLUGIN_EXPORT(&old_reader.hdr)
