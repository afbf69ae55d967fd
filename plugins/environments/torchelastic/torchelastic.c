/* The `torchelastic` environment, like Lightning's TorchElasticEnvironment:
 * torchrun started one process per rank and told each where it stands.
 * torchrun always sets these variables, so a missing one means the process was
 * not started by torchrun (or by a broken imitation): an error, not a default.
 * GROUP_RANK alone defaults to 0, as in Lightning. */
#include "env_read.h"

#define FIX " (torchrun sets it for every worker); start this program with torchrun, " \
            "or choose another environment"
#define FIX_WORLD "WORLD_SIZE must be the total number of workers" FIX
#define FIX_RANK "RANK must be this worker's rank, 0..WORLD_SIZE-1" FIX
#define FIX_LOCAL "LOCAL_RANK must be this worker's index on its node" FIX
#define FIX_LOCAL_WORLD "LOCAL_WORLD_SIZE must be the number of workers on this node" FIX
#define FIX_NODE "GROUP_RANK must be this node's index" FIX
#define FIX_NODES "GROUP_WORLD_SIZE must be the number of nodes" FIX
#define FIX_ADDR "MASTER_ADDR must name rank 0's host" FIX

/* Above slurm and mpi: torchrun is the innermost launcher when it runs inside
 * an allocation (srun torchrun ...), and there SLURM_PROCID is the node's task
 * rank, not the worker's; the variables torchrun set are the right ones. */
enum { TORCHELASTIC_SCORE = 30 };

static lt_status score(lt_ctx *ctx, int *out) {
    (void)ctx;
    *out = env_has("TORCHELASTIC_RUN_ID") ? TORCHELASTIC_SCORE : 0;
    return LT_OK;
}

static lt_status main_address(lt_ctx *ctx, char *buf, size_t len) {
    return env_master_addr(ctx, NULL, buf, len, FIX_ADDR);
}

/* torchrun's own TCPStore (PyTorch's protocol, not lt's) listens on
 * MASTER_PORT, so lt's store, hosted by rank 0, takes the next port. */
static lt_status main_port(lt_ctx *ctx, int *out) {
    int port;
    LT_CHECK(env_int(ctx, "MASTER_PORT", 1, 65534, ENV_REQUIRED,
                     "MASTER_PORT must be the rendezvous port" FIX, &port));
    *out = port + 1;
    return LT_OK;
}

static lt_status world_size(lt_ctx *ctx, int *out) {
    return env_int(ctx, "WORLD_SIZE", 1, INT_MAX, ENV_REQUIRED, FIX_WORLD, out);
}

static lt_status global_rank(lt_ctx *ctx, int *out) {
    int world;
    LT_CHECK(world_size(ctx, &world));
    return env_rank_below(ctx, "RANK", ENV_REQUIRED, "WORLD_SIZE", world, FIX_RANK, out);
}

/* LOCAL_WORLD_SIZE; torchrun before 1.9 did not set it, so fall back to the
 * world divided by the number of nodes (GROUP_WORLD_SIZE, default 1). */
static lt_status local_world_size(lt_ctx *ctx, int *out) {
    int world;
    LT_CHECK(world_size(ctx, &world));
    if (env_has("LOCAL_WORLD_SIZE"))
        return env_int(ctx, "LOCAL_WORLD_SIZE", 1, world, ENV_REQUIRED, FIX_LOCAL_WORLD, out);
    return env_split_evenly(ctx, "WORLD_SIZE", world, "GROUP_WORLD_SIZE", FIX_NODES, FIX_LOCAL_WORLD,
                            out);
}

static lt_status local_rank(lt_ctx *ctx, int *out) {
    int local_world;
    LT_CHECK(local_world_size(ctx, &local_world));
    return env_rank_below(ctx, "LOCAL_RANK", ENV_REQUIRED, "LOCAL_WORLD_SIZE", local_world, FIX_LOCAL,
                          out);
}

static lt_status node_rank(lt_ctx *ctx, int *out) {
    return env_rank_below_if_set(ctx, "GROUP_RANK", 0, "GROUP_WORLD_SIZE", FIX_NODES, FIX_NODE, out);
}

static const lt_environment_desc torchelastic_env = {
    LT_HEADER(LT_KIND_ENVIRONMENT, lt_environment_desc, "torchelastic", NULL, "1.0.0",
              "torchrun / torchelastic workers (TORCHELASTIC_RUN_ID, RANK, LOCAL_RANK, GROUP_RANK, "
              "WORLD_SIZE, MASTER_ADDR/PORT)",
              NULL, NULL),
    .score = score,
    .creates_processes_externally = env_started_externally,
    .main_address = main_address,
    .main_port = main_port,
    .world_size = world_size,
    .global_rank = global_rank,
    .local_rank = local_rank,
    .node_rank = node_rank,
    .local_world_size = local_world_size,
};

LT_PLUGIN_EXPORT(&torchelastic_env.hdr)
