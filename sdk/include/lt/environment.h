/* Cluster environment: where rank, world size, node rank and the main address
 * come from (plain env vars, torchrun, SLURM, MPI ...). Like Lightning's
 * ClusterEnvironment.
 *
 * All hooks run on the main thread of ltrun or of a worker, before any process
 * group exists; they read the process environment and must not block. */
#ifndef LT_ENVIRONMENT_H
#define LT_ENVIRONMENT_H

#include "lt/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lt_environment_desc {
    lt_plugin_header hdr;

    /* Required. How sure this environment is that it describes the current
     * process: 0 = not here. When the user names none, the highest score wins
     * (ties: the plugin loaded first); the verbose log says which won and why. */
    lt_status (*score)(lt_ctx *ctx, int *out);
    /* Required. True when something else (torchrun, srun, mpirun) already
     * started one process per rank, so ltrun must start nothing and run one worker. */
    lt_status (*creates_processes_externally)(lt_ctx *ctx, bool *out);
    /* Required. Host name or address of rank 0's node, and the store's port. */
    lt_status (*main_address)(lt_ctx *ctx, char *buf, size_t len);
    lt_status (*main_port)(lt_ctx *ctx, int *out);
    /* Required. Where this process stands. Only meaningful in a worker (or when
     * creates_processes_externally); in ltrun before launch they may report the
     * launcher's view (rank 0 of world 1) and return LT_OK. */
    lt_status (*world_size)(lt_ctx *ctx, int *out);
    lt_status (*global_rank)(lt_ctx *ctx, int *out);
    lt_status (*local_rank)(lt_ctx *ctx, int *out);
    lt_status (*node_rank)(lt_ctx *ctx, int *out);
    /* Optional: processes on this node; default world_size / num_nodes. */
    lt_status (*local_world_size)(lt_ctx *ctx, int *out);

    /* ABI 1.9. Optional: judges the parameters before anything starts
     * (lt/abi.h, under lt_param_spec). */
    lt_status (*check_params)(lt_ctx *ctx);
} lt_environment_desc;

#ifdef __cplusplus
}
#endif
#endif
