/* bagua: the training algorithms of Bagua (Lightning's BaguaStrategy),
 * built on lt's own process groups instead of Bagua's GPU-only backend.
 * strategy.algorithm picks one:
 *   gradient_allreduce  gradients averaged over ranks exactly as ddp
 *                       (bucketed, overlapping backward): ddp's hooks,
 *                       reached through `base`; hierarchical = true
 *                       averages inside each node, then across the node
 *                       leaders, then broadcasts inside the node
 *                       (hierarchical.c);
 *   bytegrad            gradients averaged through 8-bit messages (min/max
 *                       per compression_chunk elements): an all-to-all of
 *                       compressed slices, each rank averages its slice
 *                       and compresses it again, an all-gather
 *                       (bytegrad.h); a quarter of ddp's bytes;
 *   decentralized       no gradient communication at all: each rank steps
 *                       on its own gradients, and after every
 *                       communication_interval-th optimizer step averages
 *                       its parameters with its peers
 *                       (peer_selection_mode = all: every rank, one
 *                       allreduce; shift_one: one peer, a different one each
 *                       round, so information spreads over log(world)
 *                       rounds at a fraction of the traffic);
 *   low_precision_decentralized
 *                       decentralized on a ring, each rank sending its
 *                       neighbours only the 8-bit difference of its
 *                       parameters since the last round (lpd.c);
 *   async               no rank ever waits for another: a background
 *                       thread averages parameters with every rank each
 *                       sync_interval_ms over a group of its own
 *                       (async_avg.c);
 *   qadam               Adam whose momentum, after warmup_steps, is
 *                       averaged through 8-bit messages instead of the
 *                       gradients, with the variance frozen (qadam.c).
 * With plain SGD, `decentralized` + `all` + interval 1 trains what ddp
 * trains: averaging parameters that took identical-rate steps from the same
 * point is averaging their gradients. Between averaging rounds (and with
 * shift_one, low_precision_decentralized and async, always) the ranks'
 * parameters differ; rank 0's are the ones checkpoints hold, and resuming
 * gives every rank those. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "bagua_internal.h"

static const lt_strategy_desc *ddp; /* the base's resolved table */
static const lt_strategy_desc bagua_strategy;

static const lt_param_spec bagua_params[] = {
    {"algorithm", LT_PARAM_STRING, "gradient_allreduce",
     "gradient_allreduce | bytegrad | decentralized | low_precision_decentralized | async | qadam"},
    {"hierarchical", LT_PARAM_BOOL, "false",
     "gradient_allreduce: average inside each node, then across node leaders, then broadcast in the node"},
    {"compression_chunk", LT_PARAM_INT, "4096",
     "bytegrad, low_precision_decentralized, qadam: elements that share one min/max in the 8-bit encoding"},
    {"peer_selection_mode", LT_PARAM_STRING, "all", "decentralized: all (every rank) | shift_one (one peer per round)"},
    {"communication_interval", LT_PARAM_INT, "1",
     "decentralized, low_precision_decentralized: optimizer steps between parameter averaging rounds"},
    {"sync_interval_ms", LT_PARAM_INT, "500", "async: milliseconds between the background averaging rounds"},
    {"warmup_steps", LT_PARAM_INT, "-1",
     "async, qadam: optimizer steps of plain gradient averaging first (-1: Bagua's default, async 0, qadam 100)"},
    {NULL, 0, NULL, NULL},
};

static bagua *state(lt_ctx *ctx) { return lt_ctx_keyed_state(ctx, &bagua_strategy); }

static const struct {
    const char *name;
    algorithm alg;
} algorithms[] = {
    {"gradient_allreduce", ALG_GRADIENT_ALLREDUCE},
    {"bytegrad", ALG_BYTEGRAD},
    {"decentralized", ALG_DECENTRALIZED},
    {"low_precision_decentralized", ALG_LOW_PRECISION_DECENTRALIZED},
    {"async", ALG_ASYNC},
    {"qadam", ALG_QADAM},
};

/* run NULL (check_params): the world is not known yet, so what depends on
 * it waits for configure_ddp. */
static lt_status read_params(lt_ctx *ctx, lt_run *run, bagua *b) {
    const char *alg = lt_param_str(ctx, "algorithm", "gradient_allreduce");
    size_t i = 0, n = sizeof algorithms / sizeof algorithms[0];
    while (i < n && strcasecmp(alg, algorithms[i].name)) i++;
    if (i == n) {
        lt_set_error(ctx, "strategy.algorithm = '%s' is not a Bagua algorithm; use gradient_allreduce, bytegrad, "
                     "decentralized, low_precision_decentralized, async or qadam", alg);
        return LT_ERR_INVALID;
    }
    b->alg = algorithms[i].alg;
    const char *mode = lt_param_str(ctx, "peer_selection_mode", "all");
    if (!strcasecmp(mode, "shift_one")) b->shift_one = true;
    else if (strcasecmp(mode, "all")) {
        lt_set_error(ctx, "strategy.peer_selection_mode = '%s': use all or shift_one", mode);
        return LT_ERR_INVALID;
    }
    b->interval = lt_param_int(ctx, "communication_interval", 1);
    if (b->interval < 1) {
        lt_set_error(ctx, "strategy.communication_interval = %lld: must be >= 1", (long long)b->interval);
        return LT_ERR_INVALID;
    }
    b->chunk = lt_param_int(ctx, "compression_chunk", 4096);
    if (b->chunk < 1) {
        lt_set_error(ctx, "strategy.compression_chunk = %lld: must be >= 1", (long long)b->chunk);
        return LT_ERR_INVALID;
    }
    b->sync_interval_ms = lt_param_int(ctx, "sync_interval_ms", 500);
    if (b->sync_interval_ms < 1 || b->sync_interval_ms > 3600000) {
        lt_set_error(ctx, "strategy.sync_interval_ms = %lld: must be between 1 and 3600000", (long long)b->sync_interval_ms);
        return LT_ERR_INVALID;
    }
    b->warmup_steps = lt_param_int(ctx, "warmup_steps", -1);
    if (b->warmup_steps < -1) {
        lt_set_error(ctx, "strategy.warmup_steps = %lld: must be >= 0 (or -1 for the algorithm's default)",
                     (long long)b->warmup_steps);
        return LT_ERR_INVALID;
    }
    if (b->warmup_steps == -1) b->warmup_steps = b->alg == ALG_QADAM ? 100 : 0;
    if (b->alg == ALG_QADAM && b->warmup_steps < 1) {
        lt_set_error(ctx, "strategy.warmup_steps = 0 with algorithm qadam: its variance is frozen when the warm-up "
                     "ends, so with none it stays 0 and nothing trains; use at least 1 (Bagua's default: 100)");
        return LT_ERR_INVALID;
    }
    b->hierarchical = lt_param_bool(ctx, "hierarchical", false);
    if (b->hierarchical && b->alg != ALG_GRADIENT_ALLREDUCE) {
        lt_set_error(ctx, "strategy.hierarchical = true applies to algorithm gradient_allreduce, not %s; remove it",
                     algorithms[i].name);
        return LT_ERR_INVALID;
    }
    if (!run) return LT_OK; /* check_params: the world is not known yet */
    int world = lt_run_world(run)->world_size;
    if (b->alg == ALG_DECENTRALIZED && b->shift_one && world % 2) {
        lt_set_error(ctx, "strategy.peer_selection_mode = shift_one pairs ranks up, so it needs an even number of ranks, not %d; use all",
                     world);
        return LT_ERR_INVALID;
    }
    return LT_OK;
}

/* ddp's parameters, then Bagua's, as configure_ddp will read them. */
static lt_status bagua_check_params(lt_ctx *ctx) {
    if (ddp->check_params) LT_CHECK(ddp->check_params(ctx));
    bagua b = {0};
    return read_params(ctx, NULL, &b);
}

static lt_status bagua_configure_ddp(lt_ctx *ctx, lt_run *run) {
    bagua *b = calloc(1, sizeof *b);
    if (!b) {
        lt_set_error(ctx, "out of memory");
        return LT_ERR_NOMEM;
    }
    lt_status st = lt_ctx_set_keyed_state(ctx, &bagua_strategy, b);
    if (st != LT_OK) {
        free(b);
        lt_set_error(ctx, "bagua: no room for its state in the strategy context");
        return st;
    }
    LT_CHECK(read_params(ctx, run, b));
    LT_CHECK(ddp->configure_ddp(ctx, run)); /* rank 0's parameters everywhere, the buckets */
    LT_CHECK(lt_run_flat(run, &b->flat));
    /* 16-mixed skips a step whose gradients overflowed; where gradients
     * stay local the ranks must agree on it, or their scalers part ways. */
    b->agree_finite = (b->alg == ALG_DECENTRALIZED || b->alg == ALG_LOW_PRECISION_DECENTRALIZED || b->alg == ALG_QADAM) &&
                      b->flat.grad_dtype == LT_F16 && b->flat.param_dtype != LT_F16;
    size_t pbytes = b->flat.count * lt_dtype_size(b->flat.param_dtype);
    switch (b->alg) {
    case ALG_GRADIENT_ALLREDUCE:
        if (b->hierarchical) LT_CHECK(hier_setup(ctx, run, b));
        break;
    case ALG_BYTEGRAD:
        LT_CHECK(bytegrad_setup(ctx, &b->bg, run, b->flat.count, b->flat.grad_dtype, b->chunk));
        break;
    case ALG_DECENTRALIZED:
        if (b->shift_one) LT_CHECK(lt_run_alloc(run, pbytes, &b->peer));
        break;
    case ALG_LOW_PRECISION_DECENTRALIZED:
        LT_CHECK(lpd_setup(ctx, run, b));
        break;
    case ALG_ASYNC:
        if (b->flat.grad_dtype == LT_F16 && b->flat.param_dtype != LT_F16) {
            lt_set_error(ctx, "strategy.algorithm = async with precision 16-mixed: its loss scaler needs every rank "
                         "to agree on each step, which async never waits for; use bf16-mixed (no loss scaling)");
            return LT_ERR_INVALID;
        }
        break;
    case ALG_QADAM:
        LT_CHECK(qadam_setup(ctx, run, b));
        break;
    }
    if (lt_run_world(run)->global_rank != 0) return LT_OK;
    /* (ddp's configure_ddp, above, logged its bucket plan at debug level;
     * except under gradient_allreduce those buckets carry nothing, or only
     * during warm-up, and these lines say what is sent instead.) */
    const char *pdt = lt_dtype_name(b->flat.param_dtype);
    switch (b->alg) {
    case ALG_GRADIENT_ALLREDUCE:
        lt_log(ctx, LT_LOG_INFO, "algorithm gradient_allreduce%s", b->hierarchical ? ", hierarchical" : "");
        break;
    case ALG_BYTEGRAD:
        lt_log(ctx, LT_LOG_INFO, "algorithm bytegrad, %llu bytes (u8) sent per step, min/max per %lld elements",
               (unsigned long long)b->bg.wire_bytes, (long long)b->chunk);
        break;
    case ALG_DECENTRALIZED:
        lt_log(ctx, LT_LOG_INFO, "algorithm decentralized, peers %s, every %lld steps %zu bytes (%s) sent",
               b->shift_one ? "shift_one" : "all", (long long)b->interval, pbytes, pdt);
        break;
    case ALG_LOW_PRECISION_DECENTRALIZED:
        lt_log(ctx, LT_LOG_INFO, "algorithm low_precision_decentralized, ring, every %lld steps %zu bytes (u8) sent "
               "to each of %d neighbours, min/max per %lld elements", (long long)b->interval, b->lpd.msg_bytes,
               b->lpd.left == b->lpd.right ? 1 : 2, (long long)b->chunk);
        break;
    case ALG_ASYNC:
        lt_log(ctx, LT_LOG_INFO, "algorithm async, every %lld ms the background thread averages %zu bytes (%s) "
               "with every rank, after %lld warm-up steps", (long long)b->sync_interval_ms, pbytes, pdt,
               (long long)b->warmup_steps);
        break;
    case ALG_QADAM:
        lt_log(ctx, LT_LOG_INFO, "algorithm qadam, after %lld warm-up steps %llu bytes (u8) of momentum sent per step, "
               "min/max per %lld elements", (long long)b->warmup_steps, (unsigned long long)b->bg.wire_bytes,
               (long long)b->chunk);
        break;
    }
    return LT_OK;
}

/* Optimizer steps taken so far (the one under way not counted). */
static int64_t steps_taken(lt_run *run) {
    lt_optimizer_view o = {.struct_size = sizeof o};
    return lt_run_optimizer(run, &o) == LT_OK ? o.step : 0;
}

/* Whether ddp's bucketed gradient allreduce runs this step: always under
 * (flat) gradient_allreduce, during warm-up under async and qadam. Decided
 * once per backward (on_backward_start), where the step count is fixed until
 * the optimizer step, and read by the per-range and end-of-step hooks. */
static bool decide_ddp_gradients(lt_run *run, bagua *b) {
    switch (b->alg) {
    case ALG_GRADIENT_ALLREDUCE: return !b->hierarchical;
    case ALG_ASYNC:
    case ALG_QADAM: return steps_taken(run) < b->warmup_steps;
    default: return false;
    }
}

static bool ddp_gradients(lt_ctx *ctx) {
    const bagua *b = state(ctx);
    return !b || b->ddp_this_step;
}

static lt_status bagua_on_backward_start(lt_ctx *ctx, lt_run *run, bool sync) {
    bagua *b = state(ctx);
    if (b) b->ddp_this_step = decide_ddp_gradients(run, b);
    return ddp_gradients(ctx) ? ddp->on_backward_start(ctx, run, sync) : LT_OK;
}

static lt_status bagua_on_grad_ready(lt_ctx *ctx, lt_run *run, size_t offset, size_t count, bool sync) {
    return ddp_gradients(ctx) ? ddp->on_grad_ready(ctx, run, offset, count, sync) : LT_OK;
}

lt_status bagua_group(lt_ctx *ctx, lt_run *run, lt_pg **out) {
    *out = lt_run_default_group(run);
    if (*out) return LT_OK;
    lt_set_error(ctx, "bagua: no default process group (did init_dist_connection run?)");
    return LT_ERR_STATE;
}

lt_status bagua_agree_finite(lt_ctx *ctx, lt_run *run, bagua *b) {
    if (!b->agree_finite) return LT_OK;
    const lt_kernels *k = lt_run_kernels(run);
    lt_ctx *kc = lt_run_kernel_ctx(run);
    bool finite = true;
    k->all_finite(kc, b->flat.grad_dtype, b->flat.grads, (int64_t)b->flat.count, &finite);
    LT_CHECK(lt_run_synchronize(run));
    float bad = finite ? 0.0f : 1.0f;
    lt_pg *pg;
    LT_CHECK(bagua_group(ctx, run, &pg));
    lt_status st = lt_pg_allreduce_sync(pg, &bad, 1, LT_F32, LT_MAX);
    if (st != LT_OK) {
        lt_set_error(ctx, "bagua: agreeing on whether the gradients are finite: %s", lt_pg_error(pg));
        return st;
    }
    if (bad > 0 && finite) { /* another rank overflowed: skip here too */
        k->fill(kc, b->flat.grad_dtype, b->flat.grads, 1, NAN);
        LT_CHECK(lt_run_synchronize(run));
    }
    return LT_OK;
}

static lt_status bagua_before_optimizer_step(lt_ctx *ctx, lt_run *run) {
    bagua *b = state(ctx);
    if (ddp_gradients(ctx)) return ddp->before_optimizer_step(ctx, run);
    lt_pg *pg;
    LT_CHECK(bagua_group(ctx, run, &pg));
    switch (b->alg) {
    case ALG_GRADIENT_ALLREDUCE: return hier_reduce(ctx, run, b);
    case ALG_BYTEGRAD: return bytegrad_reduce(ctx, &b->bg, run, pg, b->flat.grads);
    case ALG_LOW_PRECISION_DECENTRALIZED:
        LT_CHECK(bagua_agree_finite(ctx, run, b));
        return lpd_before_step(ctx, run, b);
    default: return bagua_agree_finite(ctx, run, b);
    }
}

static lt_status bagua_optimizer_step(lt_ctx *ctx, lt_run *run) {
    bagua *b = state(ctx);
    if (b && b->alg == ALG_QADAM && !b->ddp_this_step) return qadam_step(ctx, run, b); /* warm-up over */
    return lt_run_optimizer_step(run);
}

/* shift_one's partner in round k: the ranks split into halves A = [0, h)
 * and B = [h, 2h); A's rank r meets B's h + (r + k) mod h, so over h rounds
 * every rank of A meets every rank of B, and the pairing is symmetric. */
static int shift_one_peer(int rank, int world, int64_t round) {
    int h = world / 2;
    int k = (int)(round % h);
    return rank < h ? h + (rank + k) % h : ((rank - h - k) % h + h) % h;
}

static lt_status average(lt_ctx *ctx, lt_run *run, bagua *b) {
    lt_pg *pg;
    LT_CHECK(bagua_group(ctx, run, &pg));
    lt_status st;
    if (!b->shift_one) {
        st = lt_pg_allreduce_sync(pg, b->flat.params, b->flat.count, b->flat.param_dtype, LT_AVG);
    } else {
        const lt_world *w = lt_run_world(run);
        int peer = shift_one_peer(w->global_rank, w->world_size, b->rounds);
        lt_work *sw = NULL, *rw = NULL;
        uint32_t tag = (uint32_t)(b->rounds & 0x7FFFFFFF);
        /* receive first: see bytegrad.c's exchange */
        st = lt_pg_recv(pg, b->peer, b->flat.count, b->flat.param_dtype, peer, tag, &rw);
        if (st == LT_OK) st = lt_pg_send(pg, b->flat.params, b->flat.count, b->flat.param_dtype, peer, tag, &sw);
        lt_status s1 = sw ? lt_work_wait(sw) : LT_OK, s2 = rw ? lt_work_wait(rw) : LT_OK;
        if (st == LT_OK) st = s1 != LT_OK ? s1 : s2;
        if (st == LT_OK) { /* x = (x + x_peer) / 2 */
            lt_run_kernels(run)->axpby(lt_run_kernel_ctx(run), b->flat.param_dtype, (int64_t)b->flat.count, 0.5,
                                       b->peer, 0.5, b->flat.params);
            st = lt_run_synchronize(run);
        }
    }
    if (st != LT_OK) {
        lt_set_error(ctx, "bagua decentralized: averaging parameters (round %lld): %s", (long long)b->rounds, lt_pg_error(pg));
        return st;
    }
    b->rounds++;
    lt_run_params_changed(run);
    return LT_OK;
}

static lt_status bagua_after_optimizer_step(lt_ctx *ctx, lt_run *run) {
    bagua *b = state(ctx);
    if (b) {
        b->steps++;
        if (b->alg == ALG_DECENTRALIZED && b->steps % b->interval == 0) LT_CHECK(average(ctx, run, b));
        if (b->alg == ALG_LOW_PRECISION_DECENTRALIZED) LT_CHECK(lpd_after_step(ctx, run, b));
        if (b->alg == ALG_ASYNC) LT_CHECK(async_after_step(ctx, run, b, steps_taken(run)));
    }
    return ddp->after_optimizer_step ? ddp->after_optimizer_step(ctx, run) : LT_OK;
}

static lt_status bagua_on_train_start(lt_ctx *ctx, lt_run *run) {
    bagua *b = state(ctx);
    if (b && b->alg == ALG_ASYNC) LT_CHECK(async_start(ctx, run, b));
    return ddp->on_train_start ? ddp->on_train_start(ctx, run) : LT_OK;
}

static lt_status bagua_on_train_end(lt_ctx *ctx, lt_run *run) {
    bagua *b = state(ctx);
    lt_status st = b && b->alg == ALG_ASYNC ? async_stop(ctx, run, b) : LT_OK;
    lt_status s2 = ddp->on_train_end ? ddp->on_train_end(ctx, run) : LT_OK;
    return st != LT_OK ? st : s2;
}

static lt_status bagua_teardown(lt_ctx *ctx, lt_run *run) {
    bagua *b = state(ctx);
    if (b) {
        async_free(run, b);
        if (b->peer) lt_run_free(run, b->peer);
        bytegrad_free(&b->bg, run);
        lpd_free(run, b);
        hier_free(b);
        free(b);
        lt_ctx_set_keyed_state(ctx, &bagua_strategy, NULL);
    }
    return ddp->teardown(ctx, run);
}

static const lt_strategy_desc bagua_strategy = {
    LT_HEADER(LT_KIND_STRATEGY, lt_strategy_desc, "bagua", "ddp", "1.1.0",
              "Bagua's algorithms: gradient_allreduce, bytegrad, decentralized, low_precision_decentralized, async, qadam",
              bagua_params, &ddp),
    .configure_ddp = bagua_configure_ddp,
    .on_train_start = bagua_on_train_start,
    .on_train_end = bagua_on_train_end,
    .on_backward_start = bagua_on_backward_start,
    .on_grad_ready = bagua_on_grad_ready,
    .before_optimizer_step = bagua_before_optimizer_step,
    .optimizer_step = bagua_optimizer_step,
    .after_optimizer_step = bagua_after_optimizer_step,
    .teardown = bagua_teardown,
    .check_params = bagua_check_params,
};

LT_PLUGIN_EXPORT(&bagua_strategy.hdr)
