/* libhook_overrides.so: a user's shared object, not a plugin (no
 * descriptor), whose exported functions replace one strategy hook each:
 *     ltrun ... --set strategy.init_dist_connection=/path/libhook_overrides.so:init_via_original
 * or in an INI file, [strategy] init_dist_connection = path:symbol.
 * overrides.sh runs each on 2 ddp ranks:
 *   init_via_original      calls the hook it replaced (lt_ctx_original), logs
 *                          "init_via_original: rank R joined"
 *   init_own_group         never calls the original: makes its own group and
 *                          leaves it as the run's default group
 *   init_no_group          does nothing: the run must fail saying that
 *                          init_dist_connection left no default group
 *   configure_own          never calls the original: broadcasts rank 0's
 *                          parameters over the default group and publishes
 *                          its own buckets (one per parameter, reverse order)
 *   configure_bad_buckets  calls the original, then publishes overlapping
 *                          buckets: lt_run_set_buckets refuses them
 * and one backend hook (bad_inputs.sh, [backend] supports = path:symbol):
 *   supports_no_half       the backend says it cannot reduce f16 or bf16
 * and one accelerator hook (precision.sh, [accelerator] get_kernels = ...):
 *   kernels_no_bf16_gemm   the accelerator's own table, except that its gemm
 *                          refuses bf16 (as an accelerator built without
 *                          16-bit GEMM would)
 * and three precision hooks (precision.sh, [precision] unscale_and_check = ...):
 *   unscale_into_master    bf16-mixed's unscale as a plugin built before ABI
 *                          1.8 does it: casts the reduced gradients into
 *                          lt_run_master_grads itself (no loss scale)
 *   unscale_defer_one      lt_run_defer_unscale(run, 1): refused under a
 *                          precision without master gradients (32-true)
 *   unscale_defer_zero     lt_run_defer_unscale(run, 0): refused
 * and two strategy optimizer_step hooks (precision.sh, mixed precision):
 *   step_kept_grads        plain SGD from the master gradients through the
 *                          pointer lt_run_master_grads gave at the first
 *                          step, as a strategy built before ABI 1.8 may keep it
 *   step_then_shrink       lt_run_optimizer_step, then the parameters x 0.75:
 *                          the compute copy must be cast from those
 * Everything else is hidden; only these are exported. */
#include <stdlib.h>
#include "lt/lt.h"

LT_API lt_status init_via_original(lt_ctx *ctx, lt_run *run);
LT_API lt_status init_own_group(lt_ctx *ctx, lt_run *run);
LT_API lt_status init_no_group(lt_ctx *ctx, lt_run *run);
LT_API lt_status configure_own(lt_ctx *ctx, lt_run *run);
LT_API lt_status configure_bad_buckets(lt_ctx *ctx, lt_run *run);
LT_API lt_status supports_no_half(lt_ctx *ctx, lt_dtype dtype, lt_redop op, bool *out);
LT_API lt_status kernels_no_bf16_gemm(lt_ctx *ctx, const lt_kernels **out);
LT_API lt_status unscale_into_master(lt_ctx *ctx, lt_run *run, bool *finite);
LT_API lt_status unscale_defer_one(lt_ctx *ctx, lt_run *run, bool *finite);
LT_API lt_status unscale_defer_zero(lt_ctx *ctx, lt_run *run, bool *finite);
LT_API lt_status step_kept_grads(lt_ctx *ctx, lt_run *run);
LT_API lt_status step_then_shrink(lt_ctx *ctx, lt_run *run);

lt_status step_kept_grads(lt_ctx *ctx, lt_run *run) {
    (void)ctx;
    static void *kept;
    lt_flat flat;
    lt_optimizer_view o = {.struct_size = sizeof o};
    LT_CHECK(lt_run_flat(run, &flat));
    if (!kept) LT_CHECK(lt_run_master_grads(run, &kept));
    LT_CHECK(lt_run_optimizer(run, &o));
    lt_run_kernels(run)->axpby(lt_run_kernel_ctx(run), flat.param_dtype, (int64_t)flat.count, -o.lr,
                               kept, 1.0, flat.params);
    return lt_run_synchronize(run);
}

lt_status step_then_shrink(lt_ctx *ctx, lt_run *run) {
    (void)ctx;
    lt_flat flat;
    LT_CHECK(lt_run_optimizer_step(run));
    LT_CHECK(lt_run_flat(run, &flat));
    lt_run_kernels(run)->axpby(lt_run_kernel_ctx(run), flat.param_dtype, (int64_t)flat.count, 0.75,
                               flat.params, 0.0, flat.params);
    return lt_run_synchronize(run);
}

lt_status unscale_into_master(lt_ctx *ctx, lt_run *run, bool *finite) {
    (void)ctx;
    lt_flat flat;
    void *master;
    LT_CHECK(lt_run_flat(run, &flat));
    LT_CHECK(lt_run_master_grads(run, &master));
    lt_run_kernels(run)->cast(lt_run_kernel_ctx(run), flat.param_dtype, master, flat.grad_dtype,
                              flat.grads, (int64_t)flat.count);
    *finite = true;
    return lt_run_synchronize(run);
}

lt_status unscale_defer_one(lt_ctx *ctx, lt_run *run, bool *finite) {
    (void)ctx;
    *finite = true;
    return lt_run_defer_unscale(run, 1.0);
}

lt_status unscale_defer_zero(lt_ctx *ctx, lt_run *run, bool *finite) {
    (void)ctx;
    *finite = true;
    return lt_run_defer_unscale(run, 0.0);
}

lt_status supports_no_half(lt_ctx *ctx, lt_dtype dtype, lt_redop op, bool *out) {
    (void)ctx, (void)op;
    *out = dtype != LT_F16 && dtype != LT_BF16;
    return LT_OK;
}

static lt_kernels no_bf16_table;
static void (*real_gemm)(lt_ctx *, lt_dtype, bool, bool, int64_t, int64_t, int64_t, double, const void *,
                         int64_t, const void *, int64_t, double, void *, int64_t);

/* Hands bf16 on as a dtype no accelerator has, so the real gemm parks its
 * own "not supported" error, the one a bf16-less accelerator would give. */
static void gemm_no_bf16(lt_ctx *ctx, lt_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                         double alpha, const void *a, int64_t lda, const void *b, int64_t ldb, double beta,
                         void *c, int64_t ldc) {
    real_gemm(ctx, t == LT_BF16 ? (lt_dtype)99 : t, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

lt_status kernels_no_bf16_gemm(lt_ctx *ctx, const lt_kernels **out) {
    const lt_accelerator_desc *o = lt_ctx_original(ctx, "get_kernels");
    const lt_kernels *k;
    if (!o) {
        lt_set_error(ctx, "hook_overrides: lt_ctx_original(ctx, \"get_kernels\") is NULL");
        return LT_ERR_STATE;
    }
    LT_CHECK(o->get_kernels(ctx, &k));
    no_bf16_table = *k;
    real_gemm = k->gemm;
    no_bf16_table.gemm = gemm_no_bf16;
    *out = &no_bf16_table;
    return LT_OK;
}

static const lt_strategy_desc *original(lt_ctx *ctx, const char *hook) {
    const lt_strategy_desc *o = lt_ctx_original(ctx, hook);
    if (!o)
        lt_set_error(ctx, "hook_overrides: lt_ctx_original(ctx, \"%s\") is NULL: the hook this "
                     "function replaced cannot be reached", hook);
    return o;
}

lt_status init_via_original(lt_ctx *ctx, lt_run *run) {
    const lt_strategy_desc *o = original(ctx, "init_dist_connection");
    if (!o) return LT_ERR_STATE;
    LT_CHECK(o->init_dist_connection(ctx, run));
    if (!lt_run_default_group(run)) {
        lt_set_error(ctx, "init_via_original: the original init_dist_connection left no default group");
        return LT_ERR_STATE;
    }
    lt_log(ctx, LT_LOG_INFO, "init_via_original: rank %d joined", (int)lt_run_world(run)->global_rank);
    return LT_OK;
}

lt_status init_own_group(lt_ctx *ctx, lt_run *run) {
    lt_pg *pg;
    lt_status st = lt_run_new_group(run, NULL, "mine", &pg);
    if (st != LT_OK) {
        lt_set_error(ctx, "init_own_group: %s", lt_last_error(ctx));
        return st;
    }
    lt_run_set_default_group(run, pg);
    lt_log(ctx, LT_LOG_INFO, "init_own_group: rank %d of %d in group 'mine' (%s)", lt_pg_rank(pg),
           lt_pg_size(pg), lt_pg_backend_name(pg));
    return LT_OK;
}

lt_status init_no_group(lt_ctx *ctx, lt_run *run) {
    (void)ctx, (void)run;
    return LT_OK;
}

/* One bucket per parameter, from the last registered to the first. */
static lt_status publish_per_param(lt_ctx *ctx, lt_run *run) {
    const lt_param_view *v;
    size_t n;
    LT_CHECK(lt_run_params(run, &v, &n));
    lt_bucket_view *b = malloc((n ? n : 1) * sizeof *b);
    if (!b) return LT_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) b[i] = (lt_bucket_view){v[n - 1 - i].offset, v[n - 1 - i].count};
    lt_status st = lt_run_set_buckets(run, b, n);
    free(b);
    if (st == LT_OK && lt_run_world(run)->global_rank == 0)
        lt_log(ctx, LT_LOG_INFO, "configure_own: %zu buckets, one per parameter", n);
    return st;
}

lt_status configure_own(lt_ctx *ctx, lt_run *run) {
    lt_pg *pg = lt_run_default_group(run);
    if (!pg) {
        lt_set_error(ctx, "configure_own: no default process group");
        return LT_ERR_STATE;
    }
    lt_flat flat;
    LT_CHECK(lt_run_flat(run, &flat));
    lt_status st = lt_pg_broadcast_sync(pg, flat.params, flat.count, flat.param_dtype, 0);
    if (st != LT_OK) {
        lt_set_error(ctx, "configure_own: broadcast: %s", lt_pg_error(pg));
        return st;
    }
    return publish_per_param(ctx, run);
}

lt_status configure_bad_buckets(lt_ctx *ctx, lt_run *run) {
    const lt_strategy_desc *o = original(ctx, "configure_ddp");
    if (!o) return LT_ERR_STATE;
    LT_CHECK(o->configure_ddp(ctx, run));
    lt_flat flat;
    LT_CHECK(lt_run_flat(run, &flat));
    /* [0, half + 1) and [half, count): element `half` twice. */
    size_t half = flat.count / 2;
    lt_bucket_view b[2] = {{half, flat.count - half}, {0, half + 1}};
    return lt_run_set_buckets(run, b, 2);
}
