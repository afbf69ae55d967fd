/* bagua: the training algorithms of Bagua (Lightning's BaguaStrategy),
 * built on lt's own process groups instead of Bagua's GPU-only backend.
 * strategy.algorithm picks one:
 *   gradient_allreduce  gradients averaged over ranks exactly as ddp
 *                       (bucketed, overlapping backward): every hook is
 *                       ddp's, reached through `base`;
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
 *                       rounds at a fraction of the traffic).
 * With plain SGD, `decentralized` + `all` + interval 1 trains what ddp
 * trains: averaging parameters that took identical-rate steps from the same
 * point is averaging their gradients. Between averaging rounds (and with
 * shift_one, always) the ranks' parameters differ; rank 0's are the ones
 * checkpoints hold, and resuming gives every rank those.
 * low_precision_decentralized, async and qadam are Bagua's other
 * algorithms; this build refuses them by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "lt/lt.h"
#include "bytegrad.h"

static const lt_strategy_desc *ddp; /* the base's resolved table */
static const lt_strategy_desc bagua_strategy;

static const lt_param_spec bagua_params[] = {
    {"algorithm", LT_PARAM_STRING, "gradient_allreduce", "gradient_allreduce | bytegrad | decentralized"},
    {"compression_chunk", LT_PARAM_INT, "4096", "bytegrad: elements that share one min/max in the 8-bit encoding"},
    {"peer_selection_mode", LT_PARAM_STRING, "all", "decentralized: all (every rank) | shift_one (one peer per round)"},
    {"communication_interval", LT_PARAM_INT, "1", "decentralized: optimizer steps between parameter averaging rounds"},
    {NULL, 0, NULL, NULL},
};

typedef enum algorithm { ALG_GRADIENT_ALLREDUCE, ALG_BYTEGRAD, ALG_DECENTRALIZED } algorithm;

typedef struct bagua {
    algorithm alg;
    bool shift_one;
    int64_t interval;
    int64_t steps;  /* optimizer steps taken, for the interval */
    int64_t rounds; /* averaging rounds done: shift_one's peer schedule */
    lt_flat flat;
    void *peer;     /* shift_one: the peer's parameters */
    int64_t chunk;  /* bytegrad's compression_chunk */
    bytegrad bg;
} bagua;

static bagua *state(lt_ctx *ctx) { return lt_ctx_keyed_state(ctx, &bagua_strategy); }

static lt_status read_params(lt_ctx *ctx, lt_run *run, bagua *b) {
    const char *alg = lt_param_str(ctx, "algorithm", "gradient_allreduce");
    if (!strcasecmp(alg, "gradient_allreduce")) b->alg = ALG_GRADIENT_ALLREDUCE;
    else if (!strcasecmp(alg, "decentralized")) b->alg = ALG_DECENTRALIZED;
    else if (!strcasecmp(alg, "bytegrad")) b->alg = ALG_BYTEGRAD;
    else {
        bool later = !strcasecmp(alg, "low_precision_decentralized") ||
                     !strcasecmp(alg, "async") || !strcasecmp(alg, "qadam");
        lt_set_error(ctx, "strategy.algorithm = '%s': %s; use gradient_allreduce, bytegrad or decentralized", alg,
                     later ? "Bagua has it, but this build of the bagua strategy does not yet" : "not a Bagua algorithm");
        return LT_ERR_INVALID;
    }
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
    int world = lt_run_world(run)->world_size;
    if (b->alg == ALG_DECENTRALIZED && b->shift_one && world % 2) {
        lt_set_error(ctx, "strategy.peer_selection_mode = shift_one pairs ranks up, so it needs an even number of ranks, not %d; use all",
                     world);
        return LT_ERR_INVALID;
    }
    return LT_OK;
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
    if (b->alg == ALG_DECENTRALIZED && b->shift_one)
        LT_CHECK(lt_run_alloc(run, b->flat.count * lt_dtype_size(b->flat.param_dtype), &b->peer));
    if (b->alg == ALG_BYTEGRAD) LT_CHECK(bytegrad_setup(ctx, &b->bg, run, b->flat.count, b->flat.grad_dtype, b->chunk));
    if (lt_run_world(run)->global_rank != 0) return LT_OK;
    /* (ddp's configure_ddp, above, logged its bucket plan at debug level;
     * under bytegrad and decentralized those buckets carry nothing, and
     * these lines say what is sent instead.) */
    if (b->alg == ALG_DECENTRALIZED)
        lt_log(ctx, LT_LOG_INFO, "algorithm decentralized, peers %s, every %lld steps %zu bytes (%s) sent",
               b->shift_one ? "shift_one" : "all", (long long)b->interval,
               b->flat.count * lt_dtype_size(b->flat.param_dtype), lt_dtype_name(b->flat.param_dtype));
    else if (b->alg == ALG_BYTEGRAD)
        lt_log(ctx, LT_LOG_INFO, "algorithm bytegrad, %llu bytes (u8) sent per step, min/max per %lld elements",
               (unsigned long long)b->bg.wire_bytes, (long long)b->chunk);
    else
        lt_log(ctx, LT_LOG_INFO, "algorithm gradient_allreduce");
    return LT_OK;
}

/* Whether ddp's bucketed gradient allreduce is off: decentralized keeps
 * the gradients local, bytegrad reduces them itself. */
static bool not_ddp_gradients(lt_ctx *ctx) {
    const bagua *b = state(ctx);
    return b && b->alg != ALG_GRADIENT_ALLREDUCE;
}

static lt_status bagua_on_backward_start(lt_ctx *ctx, lt_run *run, bool sync) {
    return not_ddp_gradients(ctx) ? LT_OK : ddp->on_backward_start(ctx, run, sync);
}

static lt_status bagua_on_grad_ready(lt_ctx *ctx, lt_run *run, size_t offset, size_t count, bool sync) {
    return not_ddp_gradients(ctx) ? LT_OK : ddp->on_grad_ready(ctx, run, offset, count, sync);
}

static lt_status group(lt_ctx *ctx, lt_run *run, lt_pg **out) {
    *out = lt_run_default_group(run);
    if (*out) return LT_OK;
    lt_set_error(ctx, "bagua: no default process group (did init_dist_connection run?)");
    return LT_ERR_STATE;
}

static lt_status bagua_before_optimizer_step(lt_ctx *ctx, lt_run *run) {
    bagua *b = state(ctx);
    if (b && b->alg == ALG_BYTEGRAD) {
        lt_pg *pg;
        LT_CHECK(group(ctx, run, &pg));
        return bytegrad_reduce(ctx, &b->bg, run, pg, b->flat.grads);
    }
    return not_ddp_gradients(ctx) ? LT_OK : ddp->before_optimizer_step(ctx, run);
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
    LT_CHECK(group(ctx, run, &pg));
    lt_status st;
    if (!b->shift_one) {
        st = lt_pg_allreduce_sync(pg, b->flat.params, b->flat.count, b->flat.param_dtype, LT_AVG);
    } else {
        const lt_world *w = lt_run_world(run);
        int peer = shift_one_peer(w->global_rank, w->world_size, b->rounds);
        lt_work *sw = NULL, *rw = NULL;
        uint32_t tag = (uint32_t)(b->rounds & 0x7FFFFFFF);
        st = lt_pg_send(pg, b->flat.params, b->flat.count, b->flat.param_dtype, peer, tag, &sw);
        if (st == LT_OK) st = lt_pg_recv(pg, b->peer, b->flat.count, b->flat.param_dtype, peer, tag, &rw);
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
    if (b && b->alg == ALG_DECENTRALIZED && ++b->steps % b->interval == 0) LT_CHECK(average(ctx, run, b));
    return ddp->after_optimizer_step ? ddp->after_optimizer_step(ctx, run) : LT_OK;
}

static lt_status bagua_teardown(lt_ctx *ctx, lt_run *run) {
    bagua *b = state(ctx);
    if (b) {
        if (b->peer) lt_run_free(run, b->peer);
        bytegrad_free(&b->bg, run);
        free(b);
        lt_ctx_set_keyed_state(ctx, &bagua_strategy, NULL);
    }
    return ddp->teardown(ctx, run);
}

static const lt_strategy_desc bagua_strategy = {
    LT_HEADER(LT_KIND_STRATEGY, lt_strategy_desc, "bagua", "ddp", "1.0.0",
              "Bagua's algorithms: gradient_allreduce, bytegrad (8-bit), decentralized (peer averaging)", bagua_params, &ddp),
    .configure_ddp = bagua_configure_ddp,
    .on_backward_start = bagua_on_backward_start,
    .on_grad_ready = bagua_on_grad_ready,
    .before_optimizer_step = bagua_before_optimizer_step,
    .after_optimizer_step = bagua_after_optimizer_step,
    .teardown = bagua_teardown,
};

LT_PLUGIN_EXPORT(&bagua_strategy.hdr)
