/* ddp: one process per device, parameters broadcast from rank 0 at start,
 * gradients averaged by bucketed allreduces that start while backward still
 * runs (PyTorch's DistributedDataParallel). No communication on accumulation
 * micro-batches (no_sync) except the last. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <string.h>
#include <strings.h>
#include "buckets.h"

static const lt_param_spec ddp_params[] = {
    {"bucket_cap_mb", LT_PARAM_FLOAT, "25", "bucket size in MiB (PyTorch's default)"},
    {"first_bucket_mb", LT_PARAM_FLOAT, "1", "size of the first bucket, so communication starts early"},
    {"comm_hook", LT_PARAM_STRING, "allreduce", "allreduce | fp16 | bf16 (gradients compressed on the wire)"},
    {"overlap", LT_PARAM_STRING, "auto",
     "true: start each bucket's allreduce during backward; false: after it; auto: false where the "
     "group reduces in shared memory and this rank has one core, else true"},
    {"compute_nice", LT_PARAM_INT, "5", "nice levels the training thread yields to communication threads (0: off)"},
    {"place_grads", LT_PARAM_BOOL, "true",
     "keep the gradients in the backend's group memory when it has some (shm: reduced in place, no copies)"},
    {NULL, 0, NULL, NULL},
};

/* ddp's own state: parameters and the communication in flight. What other
 * hooks (and overrides) must see lives in the run instead: the default
 * group (init_dist_connection) and the buckets (configure_ddp). */
typedef struct ddp {
    lt_flat flat;
    bucket_plan plan;      /* made from the run's published buckets */
    comm_hook hook;
    double first_mb, cap_mb; /* bucket sizes, checked at setup */
    int64_t compute_nice;
    bool overlap;
    bool overlap_auto; /* overlap=auto: configure_ddp decides */
    bool sync;      /* this backward communicates */
    double wait_s;  /* time before_optimizer_step spent waiting, for the debug log */
    int64_t syncs;
} ddp;

/* Reads and checks the parameters into d (nothing allocated): for
 * check_params, and for ddp_make. */
static lt_status read_params(lt_ctx *ctx, ddp *d) {
    const char *hook = lt_param_str(ctx, "comm_hook", "allreduce");
    if (!strcasecmp(hook, "allreduce") || !strcasecmp(hook, "none")) d->hook = HOOK_ALLREDUCE;
    else if (!strcasecmp(hook, "fp16")) d->hook = HOOK_FP16;
    else if (!strcasecmp(hook, "bf16")) d->hook = HOOK_BF16;
    else {
        lt_set_error(ctx, "strategy.comm_hook = '%s': use allreduce, fp16 or bf16", hook);
        return LT_ERR_INVALID;
    }
    const char *ov = lt_param_str(ctx, "overlap", "auto");
    d->overlap_auto = !strcasecmp(ov, "auto");
    d->overlap = true; /* auto: until configure_ddp decides */
    if (!d->overlap_auto && !lt_parse_bool(ov, &d->overlap)) {
        lt_set_error(ctx, "strategy.overlap = '%s': use auto, true or false", ov);
        return LT_ERR_INVALID;
    }
    d->first_mb = lt_param_float(ctx, "first_bucket_mb", 1);
    d->cap_mb = lt_param_float(ctx, "bucket_cap_mb", 25);
    d->compute_nice = lt_param_int(ctx, "compute_nice", 5);
    /* 0 would mean one allreduce per gradient element; NaN or huge values an undefined cast */
    if (!(d->cap_mb >= 1e-3 && d->cap_mb <= 1e6) || !(d->first_mb >= 0 && d->first_mb <= 1e6)) {
        lt_set_error(ctx, "strategy.bucket_cap_mb = %g, strategy.first_bucket_mb = %g: need "
                     "bucket_cap_mb in [0.001, 1e6] MiB and first_bucket_mb in [0, 1e6] MiB "
                     "(0: as large as the others)", d->cap_mb, d->first_mb);
        return LT_ERR_INVALID;
    }
    return LT_OK;
}

static lt_status ddp_check_params(lt_ctx *ctx) {
    ddp d = {0};
    return read_params(ctx, &d);
}

/* The state, from the parameters: in setup_environment normally, or in the
 * first hook that runs when an override replaced setup_environment. */
static lt_status ddp_make(lt_ctx *ctx, ddp **out) {
    ddp *d = calloc(1, sizeof *d);
    if (!d) return LT_ERR_NOMEM;
    lt_status st = read_params(ctx, d);
    if (st != LT_OK) {
        free(d);
        return st;
    }
    lt_ctx_set_state(ctx, d);
    *out = d;
    return LT_OK;
}

static lt_status state(lt_ctx *ctx, ddp **out) {
    *out = lt_ctx_state(ctx);
    return *out ? LT_OK : ddp_make(ctx, out);
}

/* The run's default group, which init_dist_connection must have left. */
static lt_status group(lt_ctx *ctx, lt_run *run, lt_pg **out) {
    *out = lt_run_default_group(run);
    if (*out) return LT_OK;
    lt_set_error(ctx, "no default process group: init_dist_connection must leave one "
                 "(lt_run_new_group, then lt_run_set_default_group)");
    return LT_ERR_STATE;
}

static lt_status pg_failed(lt_ctx *ctx, lt_pg *pg, lt_status st) {
    lt_set_error(ctx, "%s", lt_pg_error(pg));
    return st;
}

static lt_status ddp_launch_kind(lt_ctx *ctx, lt_launch_kind *out) {
    (void)ctx;
    *out = LT_LAUNCH_SUBPROCESS;
    return LT_OK;
}

static lt_status ddp_setup_environment(lt_ctx *ctx, lt_run *run) {
    (void)run;
    ddp *d;
    return state(ctx, &d);
}

static lt_status ddp_init_dist_connection(lt_ctx *ctx, lt_run *run) {
    lt_pg *pg;
    lt_status st = lt_run_new_group(run, NULL, "default", &pg);
    if (st != LT_OK) {
        lt_set_error(ctx, "%s", lt_last_error(NULL));
        return st;
    }
    lt_run_set_default_group(run, pg);
    return LT_OK;
}

/* The backend's threads exist now (init_dist_connection), at the default
 * priority. Lowering the training thread's lets a woken communication thread
 * preempt it at once instead of waiting out the compute thread's time slice
 * (measured: 2x steps/s on a small model, 2 ranks on 2 cores). Threads the
 * training thread starts later (the data loader) inherit the lower priority. */
static void lower_compute_priority(const ddp *d) {
    if (d->compute_nice <= 0) return;
    errno = 0;
    int cur = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
    if (errno == 0) setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), cur + (int)d->compute_nice);
}

/* overlap=auto. Overlap hides communication on a core the training thread
 * does not use: a GPU's, the network's, or a spare one. A group reducing in
 * shared memory (shm's group memory) computes on the CPU, and a rank bound
 * to one core (ltrun's binding with as many ranks as cores) has no spare
 * one: there the reduction threads only cut into backward. Measured on the
 * 2-core AMD EPYC, MLP, 2 ranks: overlap off 4-10% faster at batch 64 in
 * four runs out of four, the same at 512 (bench/run_ddp_bench.sh). */
static bool overlap_pays(bool placed) {
    cpu_set_t mine;
    int cores = sched_getaffinity(0, sizeof mine, &mine) == 0 ? CPU_COUNT(&mine) : 0;
    return !(placed && cores == 1);
}

static lt_dtype wire_dtype(const ddp *d) { return d->hook == HOOK_FP16 ? LT_F16 : LT_BF16; }

static lt_status ddp_configure_ddp(lt_ctx *ctx, lt_run *run) {
    ddp *d;
    lt_pg *pg;
    LT_CHECK(state(ctx, &d));
    LT_CHECK(group(ctx, run, &pg));
    bool placed = false;
    if (lt_param_bool(ctx, "place_grads", true) && lt_run_place_grads(run, &placed) != LT_OK) {
        lt_set_error(ctx, "%s (strategy.place_grads = false keeps them in the accelerator's memory)",
                     lt_last_error(NULL));
        return LT_ERR_STATE;
    }
    LT_CHECK(lt_run_flat(run, &d->flat));
    if (d->overlap_auto) d->overlap = overlap_pays(placed);
    lt_status st = lt_pg_broadcast_sync(pg, d->flat.params, d->flat.count, d->flat.param_dtype, 0);
    if (st != LT_OK) return pg_failed(ctx, pg, st);
    if (d->hook != HOOK_ALLREDUCE && lt_dtype_size(d->flat.grad_dtype) == 2) {
        /* 16-bit gradients already (16-mixed, bf16-true ...): compressing
         * again would only round twice. */
        if (wire_dtype(d) != d->flat.grad_dtype) {
            lt_set_error(ctx, "strategy.comm_hook = %s with %s gradients (trainer.precision = %s) would convert them between 16-bit formats; use comm_hook=allreduce, which already sends %s",
                         lt_param_str(ctx, "comm_hook", "allreduce"), lt_dtype_name(d->flat.grad_dtype),
                         lt_config_get(ctx, "trainer.precision"), lt_dtype_name(d->flat.grad_dtype));
            return LT_ERR_INVALID;
        }
        if (lt_run_world(run)->global_rank == 0)
            lt_log(ctx, LT_LOG_INFO, "comm_hook %s: the gradients are %s already; sending them as they are",
                   lt_param_str(ctx, "comm_hook", "allreduce"), lt_dtype_name(d->flat.grad_dtype));
        d->hook = HOOK_ALLREDUCE;
    }
    lt_dtype wire = d->hook == HOOK_ALLREDUCE ? d->flat.grad_dtype : wire_dtype(d);
    if (!lt_pg_supports(pg, wire, LT_AVG)) {
        lt_set_error(ctx, "strategy.comm_hook = %s averages %s gradients, which backend '%s' "
                     "cannot reduce; use comm_hook=allreduce or another "
                     "strategy.process_group_backend (gloo does)",
                     lt_param_str(ctx, "comm_hook", "allreduce"), lt_dtype_name(wire),
                     lt_pg_backend_name(pg));
        return LT_ERR_UNSUPPORTED;
    }
    lt_bucket_view *cut;
    size_t n;
    st = buckets_cut(d->flat.count, lt_dtype_size(d->flat.grad_dtype), d->first_mb, d->cap_mb, &cut, &n);
    if (st != LT_OK) return st;
    st = lt_run_set_buckets(run, cut, n);
    free(cut);
    if (st != LT_OK) {
        lt_set_error(ctx, "%s", lt_last_error(NULL));
        return st;
    }
    lower_compute_priority(d);
    if (lt_run_world(run)->global_rank == 0)
        lt_log(ctx, LT_LOG_DEBUG, "%zu gradients in %zu buckets, hook %s, overlap %s%s, %zu bytes (%s) sent per step, "
               "gradients in %s memory",
               d->flat.count, n, lt_param_str(ctx, "comm_hook", "allreduce"), d->overlap ? "on" : "off",
               !d->overlap_auto ? "" : d->overlap ? " (auto)" : " (auto: one core, shared-memory reduction)",
               d->flat.count * lt_dtype_size(wire), lt_dtype_name(wire), placed ? "the group's" : "the accelerator's");
    return LT_OK;
}

/* The plan follows the run's published buckets: made at the first backward,
 * remade when an override published others. Wire buffers go with it. */
static void plan_free(lt_run *run, ddp *d) {
    for (int i = 0; i < d->plan.n; i++)
        if (d->plan.b[i].wire) lt_run_free(run, d->plan.b[i].wire);
    buckets_free(&d->plan);
}

/* By content: the run frees a replaced cut, so a new one may reuse its address. */
static bool plan_matches(const bucket_plan *p, const lt_bucket_view *v, size_t n) {
    if (!p->b || p->n != (int)n) return false;
    for (size_t i = 0; i < n; i++)
        if (p->b[i].start != v[i].offset || p->b[i].count != v[i].count) return false;
    return true;
}

static lt_status plan_sync(lt_ctx *ctx, lt_run *run, ddp *d) {
    const lt_bucket_view *v;
    size_t n;
    LT_CHECK(lt_run_buckets(run, &v, &n));
    if (n == 0) {
        lt_set_error(ctx, "no gradient buckets: configure_ddp must publish them (lt_run_set_buckets)");
        return LT_ERR_STATE;
    }
    if (plan_matches(&d->plan, v, n)) return LT_OK;
    plan_free(run, d);
    LT_CHECK(lt_run_flat(run, &d->flat));
    LT_CHECK(buckets_adopt(&d->plan, v, n));
    for (int i = 0; d->hook != HOOK_ALLREDUCE && i < d->plan.n; i++)
        LT_CHECK(lt_run_alloc(run, d->plan.b[i].count * 2, &d->plan.b[i].wire));
    return LT_OK;
}

static lt_status launch(lt_ctx *ctx, lt_run *run, ddp *d, bucket *b) {
    char *g = (char *)d->flat.grads + b->start * lt_dtype_size(d->flat.grad_dtype);
    lt_pg *pg;
    LT_CHECK(group(ctx, run, &pg));
    lt_status st;
    if (d->hook == HOOK_ALLREDUCE) {
        st = lt_pg_allreduce(pg, g, b->count, d->flat.grad_dtype, LT_AVG, &b->work);
    } else {
        /* Compress, then average on the wire in half precision. */
        lt_run_kernels(run)->cast(lt_run_kernel_ctx(run), wire_dtype(d), b->wire, d->flat.grad_dtype, g,
                                  (int64_t)b->count);
        st = lt_run_synchronize(run);
        if (st == LT_OK) st = lt_pg_allreduce(pg, b->wire, b->count, wire_dtype(d), LT_AVG, &b->work);
    }
    return st == LT_OK ? LT_OK : pg_failed(ctx, pg, st);
}

static lt_status launch_ready(lt_ctx *ctx, lt_run *run, ddp *d, int ready) {
    for (int i = 0; i < ready; i++) {
        LT_CHECK(launch(ctx, run, d, &d->plan.b[d->plan.next_launch]));
        d->plan.next_launch++;
    }
    return LT_OK;
}

static lt_status ddp_on_backward_start(lt_ctx *ctx, lt_run *run, bool sync) {
    ddp *d;
    LT_CHECK(state(ctx, &d));
    LT_CHECK(plan_sync(ctx, run, d));
    d->sync = sync;
    buckets_reset(&d->plan);
    return LT_OK;
}

static lt_status ddp_on_grad_ready(lt_ctx *ctx, lt_run *run, size_t offset, size_t count, bool sync) {
    ddp *d = lt_ctx_state(ctx); /* on_backward_start made it and the plan */
    if (!d || !d->plan.b) {
        lt_set_error(ctx, "ddp's on_grad_ready ran without ddp's on_backward_start; a "
                     "replacement of on_backward_start must call the original");
        return LT_ERR_STATE;
    }
    if (!sync) return LT_OK; /* no_sync: gradients accumulate locally */
    int ready = buckets_mark_ready(&d->plan, offset, count);
    if (!d->overlap || !ready) return LT_OK;
    return launch_ready(ctx, run, d, ready);
}

static lt_status ddp_before_optimizer_step(lt_ctx *ctx, lt_run *run) {
    ddp *d;
    lt_pg *pg;
    LT_CHECK(state(ctx, &d));
    if (!d->plan.b) {
        lt_set_error(ctx, "ddp's before_optimizer_step ran without ddp's on_backward_start; a "
                     "replacement of on_backward_start must call the original");
        return LT_ERR_STATE;
    }
    if (!d->sync) return LT_OK;
    LT_CHECK(group(ctx, run, &pg));
    /* Buckets not launched yet (overlap off): all at once, in order. */
    LT_CHECK(launch_ready(ctx, run, d, d->plan.n - d->plan.next_launch));
    double t0 = lt_now();
    lt_status first = LT_OK;
    char first_msg[1024] = ""; /* later waits on a broken group overwrite the error */
    for (int i = 0; i < d->plan.n; i++) {
        bucket *b = &d->plan.b[i];
        if (!b->work) continue;
        lt_status st = lt_work_wait(b->work);
        b->work = NULL;
        if (st != LT_OK && first == LT_OK) {
            first = st;
            snprintf(first_msg, sizeof first_msg, "%s", lt_pg_error(pg));
        }
        if (st == LT_OK && d->hook != HOOK_ALLREDUCE) {
            char *g = (char *)d->flat.grads + b->start * lt_dtype_size(d->flat.grad_dtype);
            lt_run_kernels(run)->cast(lt_run_kernel_ctx(run), d->flat.grad_dtype, g, wire_dtype(d), b->wire,
                                      (int64_t)b->count);
        }
    }
    d->wait_s += lt_now() - t0;
    d->syncs++;
    if (first != LT_OK) lt_set_error(ctx, "%s", first_msg);
    return first;
}

static lt_status ddp_reduce(lt_ctx *ctx, lt_run *run, void *buf, size_t count, lt_dtype t, lt_redop op) {
    lt_pg *pg;
    LT_CHECK(group(ctx, run, &pg));
    lt_status st = lt_pg_allreduce_sync(pg, buf, count, t, op);
    return st == LT_OK ? LT_OK : pg_failed(ctx, pg, st);
}

static lt_status ddp_all_gather(lt_ctx *ctx, lt_run *run, const void *send, void *recv, size_t count,
                                lt_dtype t) {
    lt_pg *pg;
    lt_work *w;
    LT_CHECK(group(ctx, run, &pg));
    lt_status st = lt_pg_allgather(pg, send, recv, count, t, &w);
    if (st == LT_OK) st = lt_work_wait(w);
    return st == LT_OK ? LT_OK : pg_failed(ctx, pg, st);
}

static lt_status ddp_broadcast(lt_ctx *ctx, lt_run *run, void *buf, size_t count, lt_dtype t, int root) {
    lt_pg *pg;
    LT_CHECK(group(ctx, run, &pg));
    lt_status st = lt_pg_broadcast_sync(pg, buf, count, t, root);
    return st == LT_OK ? LT_OK : pg_failed(ctx, pg, st);
}

static lt_status ddp_barrier(lt_ctx *ctx, lt_run *run) {
    lt_pg *pg;
    lt_work *w;
    LT_CHECK(group(ctx, run, &pg));
    lt_status st = lt_pg_barrier(pg, &w);
    if (st == LT_OK) st = lt_work_wait(w);
    return st == LT_OK ? LT_OK : pg_failed(ctx, pg, st);
}

/* Like Lightning's teardown barrier: a rank that made one collective more
 * than the others (a metric logged with sync_dist on one rank only) meets
 * the others' barrier under the same sequence number, and the fingerprint
 * check names both instead of one rank exiting cleanly and the other
 * seeing a closed connection. */
static lt_status ddp_on_train_end(lt_ctx *ctx, lt_run *run) {
    if (!lt_run_default_group(run)) return LT_OK;
    return ddp_barrier(ctx, run);
}

/* Buckets still in flight (a failure mid-step) are aborted before their
 * wire buffers go; the default group is the run's to destroy. */
static lt_status ddp_teardown(lt_ctx *ctx, lt_run *run) {
    ddp *d = lt_ctx_state(ctx);
    if (!d) return LT_OK;
    if (d->syncs)
        lt_log(ctx, LT_LOG_DEBUG, "waited %.3f ms per step for gradients (%lld steps)",
               1e3 * d->wait_s / (double)d->syncs, (long long)d->syncs);
    lt_pg *pg = lt_run_default_group(run);
    for (int i = 0; i < d->plan.n; i++) {
        if (!d->plan.b[i].work) continue;
        if (pg) lt_pg_abort(pg);
        lt_work_wait(d->plan.b[i].work);
        d->plan.b[i].work = NULL;
    }
    plan_free(run, d);
    free(d);
    lt_ctx_set_state(ctx, NULL);
    return LT_OK;
}

static const lt_strategy_desc ddp_strategy = {
    LT_HEADER(LT_KIND_STRATEGY, lt_strategy_desc, "ddp", NULL, "1.0.0",
              "one process per device; bucketed gradient allreduce overlapping backward", ddp_params, NULL),
    .launch_kind = ddp_launch_kind,
    .setup_environment = ddp_setup_environment,
    .init_dist_connection = ddp_init_dist_connection,
    .configure_ddp = ddp_configure_ddp,
    .on_backward_start = ddp_on_backward_start,
    .on_grad_ready = ddp_on_grad_ready,
    .on_train_end = ddp_on_train_end,
    .before_optimizer_step = ddp_before_optimizer_step,
    .reduce = ddp_reduce,
    .all_gather = ddp_all_gather,
    .broadcast = ddp_broadcast,
    .barrier = ddp_barrier,
    .teardown = ddp_teardown,
    .check_params = ddp_check_params,
};

LT_PLUGIN_EXPORT(&ddp_strategy.hdr)
