/* lt_run_new_group (lt/run.h): the run's store (connected on first use),
 * backend and timeouts turned into a dist/ process group. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "dist/process_group.h"
#include "dist/store_server.h"
#include "run_internal.h"

/* launcher.rdzv_timeout_s in ms, capped so it fits the int the store takes. */
static int rdzv_timeout_ms(lt_run *r) {
    int64_t s = r->dist.rdzv_timeout_s;
    return s < 1 ? 1000 : s > 2000000 ? 2000000000 : (int)(s * 1000);
}

static lt_status connect_store(lt_run *r) {
    if (r->store) return LT_OK;
    int tmo = rdzv_timeout_ms(r);
    char err[512];
    /* ltrun and ddp_spawn host the store and say so; under srun, mpirun or
     * torchrun nobody does, so rank 0 hosts it for the job's lifetime. */
    const char *hosted = getenv("LT_STORE_HOSTED");
    if (r->world.global_rank == 0 && r->world.world_size > 1 && !(hosted && *hosted == '1') && !r->store_server) {
        int port = 0;
        lt_status st = lt_store_server_start(NULL, r->world.main_port, NULL, &r->store_server, &port, err, sizeof err);
        if (st != LT_OK)
            return lt_run_fail(r, st, "rank 0: cannot host the rendezvous store (no launcher hosts one): %s", err);
    }
    lt_status st = lt_store_connect(r->world.main_address, r->world.main_port, NULL, tmo, &r->store,
                                    err, sizeof err);
    if (st != LT_OK) return lt_run_fail(r, st, "rank %d: %s", r->world.global_rank, err);
    lt_store_set_timeout(r->store, tmo);
    return LT_OK;
}

/* The group's backend: the run's (with its hook overrides) or another one by
 * name (e.g. gloo beside nccl), in a context of the group's own. */
static lt_status backend_for(lt_run *r, const char *name, lt_ctx *bctx) {
    if (!name || !strcasecmp(name, "auto") || (r->backend.loaded && !strcasecmp(name, r->backend.ctx.name))) {
        if (!r->backend.loaded)
            return lt_run_fail(r, LT_ERR_STATE, "no process-group backend is loaded; set strategy.process_group_backend");
        *bctx = r->backend.ctx;
    } else {
        char err[1024];
        const lt_plugin_header *d;
        lt_status st = lt_registry_load(r->registry, LT_KIND_BACKEND, name, &d, err, sizeof err);
        if (st != LT_OK) return lt_run_fail(r, st, "process group backend: %s", err);
        lt_ctx_init(bctx, LT_KIND_BACKEND, d->name, d, r->config);
    }
    return LT_OK;
}

/* Where the accelerator's buffers live, as it says (memory_is_host). */
static bool accel_memory_is_host(lt_run *r) {
    const lt_accelerator_desc *a = LT_ACC(r);
    bool host = false;
    return a && a->memory_is_host && a->memory_is_host(&r->accel.ctx, &host) == LT_OK && host;
}

static lt_status new_group(lt_run *r, const char *backend, const char *name, const int *ranks, int n,
                           int index, lt_pg **out) {
    *out = NULL;
    LT_CHECK(connect_store(r));
    lt_ctx bctx;
    LT_CHECK(backend_for(r, backend, &bctx));
    int64_t tmo_s = r->dist.timeout_s;
    lt_pg_spec spec = {.backend_ctx = &bctx, .store = r->store, .name = name,
                       .rank = index, .size = n, .global_ranks = ranks,
                       .timeout_ms = tmo_s * 1000, .connect_timeout_ms = rdzv_timeout_ms(r),
                       .stall_ms = r->dist.stall_timeout_s * 1000,
                       .mem_kind = accel_memory_is_host(r) ? LT_MEM_HOST : LT_MEM_DEVICE,
                       .device = r->world.device, .main_address = r->world.main_address,
                       /* a host-memory backend (gloo beside a gpu) stages through its pinned memory */
                       .accel = LT_ACC(r) ? &r->accel.ctx : NULL};
    char err[1536];
    lt_status st = lt_pg_create(&spec, out, err, sizeof err);
    return st == LT_OK ? LT_OK : lt_run_fail(r, st, "%s", err);
}

/* process_group_backend = auto across hosts (gloo loaded) with several
 * ranks per host, numbered node by node: a hierarchical group, shared memory
 * inside the node and gloo across the leaders (hier_group.h). Each rank
 * decides from its own sizes, so every node must hold the same number of
 * ranks: ltrun starts them so (num_nodes x devices); an external launcher
 * with uneven nodes needs process_group_backend = gloo. */
static bool wants_hierarchy(lt_run *r, const char *backend) {
    const lt_world *w = &r->world;
    const char *cfg = lt_config_value(r->config, "strategy", "process_group_backend");
    return (!backend || !strcasecmp(backend, "auto")) && cfg && !strcasecmp(cfg, "auto") && r->backend.loaded &&
           !strcasecmp(r->backend.ctx.name, "gloo") && w->local_world_size > 1 &&
           w->world_size > w->local_world_size && w->world_size % w->local_world_size == 0 &&
           w->global_rank == w->node_rank * w->local_world_size + w->local_rank;
}

static lt_status new_hierarchical(lt_run *r, const char *name, lt_pg **out) {
    const lt_world *w = &r->world;
    int lws = w->local_world_size, nodes = w->world_size / lws;
    int *ranks = malloc(sizeof *ranks * (size_t)(lws > nodes ? lws : nodes));
    if (!ranks) return lt_run_fail(r, LT_ERR_NOMEM, "out of memory");
    lt_pg *local = NULL, *leaders = NULL, *flat = NULL;
    char sub[96];
    lt_status st = LT_OK;
    for (int node = 0; node < nodes && st == LT_OK; node++) { /* every rank, every node, in order */
        for (int i = 0; i < lws; i++) ranks[i] = node * lws + i;
        snprintf(sub, sizeof sub, "%s/node%d", name, node);
        lt_pg *pg = NULL;
        st = lt_run_new_subgroup(r, "shm", sub, ranks, lws, &pg);
        if (pg) local = pg;
    }
    for (int node = 0; node < nodes; node++) ranks[node] = node * lws;
    snprintf(sub, sizeof sub, "%s/leaders", name);
    if (st == LT_OK) st = lt_run_new_subgroup(r, "gloo", sub, ranks, nodes, &leaders);
    snprintf(sub, sizeof sub, "%s/flat", name);
    if (st == LT_OK) st = new_group(r, "gloo", sub, NULL, w->world_size, w->global_rank, &flat);
    free(ranks);
    char err[256] = "";
    if (st == LT_OK) st = lt_pg_create_hierarchical(name, local, leaders, flat, out, err, sizeof err);
    if (st != LT_OK) { /* the lt_run_ calls above reported their own failure */
        lt_pg_destroy(local);
        lt_pg_destroy(leaders);
        lt_pg_destroy(flat);
        return err[0] ? lt_run_fail(r, st, "%s", err) : st;
    }
    lt_log(NULL, LT_LOG_DEBUG, "group '%s': hierarchical, %d nodes x %d ranks: shm inside the node, gloo across", name,
           nodes, lws);
    return LT_OK;
}

lt_status lt_run_new_group(lt_run *r, const char *backend, const char *name, lt_pg **out) {
    if (wants_hierarchy(r, backend)) return new_hierarchical(r, name, out);
    return new_group(r, backend, name, NULL, r->world.world_size, r->world.global_rank, out);
}

lt_status lt_run_new_subgroup(lt_run *r, const char *backend, const char *name, const int *ranks,
                              int count, lt_pg **out) {
    *out = NULL;
    int index = -1;
    if (!name || !*name || count < 1 || !ranks)
        return lt_run_fail(r, LT_ERR_INVALID, "lt_run_new_subgroup: needs a name and at least one rank");
    for (int i = 0; i < count; i++) {
        if (ranks[i] < 0 || ranks[i] >= r->world.world_size)
            return lt_run_fail(r, LT_ERR_INVALID, "subgroup '%s': rank %d is not in the job (world size %d)", name,
                               ranks[i], (int)r->world.world_size);
        for (int j = 0; j < i; j++)
            if (ranks[j] == ranks[i])
                return lt_run_fail(r, LT_ERR_INVALID, "subgroup '%s': rank %d is listed twice", name, ranks[i]);
        if (ranks[i] == r->world.global_rank) index = i;
    }
    if (index < 0) return LT_OK; /* not a member: nothing to join */
    return new_group(r, backend, name, ranks, count, index, out);
}
