/* bagua's gradient_allreduce with hierarchical = true: the gradients are
 * averaged inside each node first (fast local links), then across one
 * leader per node (the slow links carry one copy per node instead of one
 * per process), then broadcast from each leader to its node. Every node
 * must run the same number of processes, so that the average of the node
 * averages is the average over all ranks; ranks are laid out node by node
 * (global rank = node_rank * local_world_size + local_rank), as ltrun,
 * torchrun and srun number them. */
#include <stdio.h>
#include <stdlib.h>
#include "bagua_internal.h"

lt_status hier_setup(lt_ctx *ctx, lt_run *run, bagua *b) {
    const lt_world *w = lt_run_world(run);
    int lws = w->local_world_size, nodes = w->num_nodes;
    if (lws < 1 || nodes < 1 || lws * nodes != w->world_size ||
        w->global_rank != w->node_rank * lws + w->local_rank) {
        lt_set_error(ctx, "strategy.hierarchical = true needs the same number of processes on every node, numbered "
                     "node by node; this job has %d ranks on %d nodes with %d here (rank %d is local rank %d of "
                     "node %d); set hierarchical = false",
                     (int)w->world_size, nodes, lws, (int)w->global_rank, (int)w->local_rank, (int)w->node_rank);
        return LT_ERR_INVALID;
    }
    int *ranks = malloc(sizeof *ranks * (size_t)(lws > nodes ? lws : nodes));
    if (!ranks) {
        lt_set_error(ctx, "out of memory");
        return LT_ERR_NOMEM;
    }
    /* Every rank creates every subgroup in the same order (members join,
     * the others return at once), so no rank waits on a group it is not in. */
    lt_status st = LT_OK;
    char name[64];
    for (int node = 0; node < nodes && st == LT_OK; node++) {
        for (int i = 0; i < lws; i++) ranks[i] = node * lws + i;
        snprintf(name, sizeof name, "bagua-local/%d", node);
        lt_pg *pg = NULL;
        st = lt_run_new_subgroup(run, NULL, name, ranks, lws, &pg);
        if (pg) b->local = pg;
    }
    for (int node = 0; node < nodes; node++) ranks[node] = node * lws;
    if (st == LT_OK) st = lt_run_new_subgroup(run, NULL, "bagua-leaders", ranks, nodes, &b->leaders);
    free(ranks);
    if (st != LT_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", lt_last_error(NULL));
        lt_set_error(ctx, "strategy.hierarchical: creating the node and leader groups failed: %s", why);
    }
    return st;
}

void hier_free(bagua *b) {
    if (b->local) lt_pg_destroy(b->local);
    if (b->leaders) lt_pg_destroy(b->leaders);
    b->local = b->leaders = NULL;
}

static lt_status stage(lt_ctx *ctx, lt_pg *pg, lt_status st, const char *what) {
    if (st != LT_OK) lt_set_error(ctx, "bagua hierarchical: %s: %s", what, lt_pg_error(pg));
    return st;
}

lt_status hier_reduce(lt_ctx *ctx, lt_run *run, bagua *b) {
    void *g = b->flat.grads;
    size_t n = b->flat.count;
    lt_dtype t = b->flat.grad_dtype;
    (void)run;
    if (lt_pg_size(b->local) > 1)
        LT_CHECK(stage(ctx, b->local, lt_pg_allreduce_sync(b->local, g, n, t, LT_AVG), "averaging inside the node"));
    if (b->leaders && lt_pg_size(b->leaders) > 1)
        LT_CHECK(stage(ctx, b->leaders, lt_pg_allreduce_sync(b->leaders, g, n, t, LT_AVG), "averaging across nodes"));
    if (lt_pg_size(b->local) > 1)
        LT_CHECK(stage(ctx, b->local, lt_pg_broadcast_sync(b->local, g, n, t, 0), "broadcast inside the node"));
    return LT_OK;
}
