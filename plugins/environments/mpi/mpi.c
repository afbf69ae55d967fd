/* The `mpi` environment: mpirun/mpiexec started one process per rank. Read from
 * the launcher's variables rather than by linking MPI, so the plugin loads
 * everywhere: Open MPI's OMPI_COMM_WORLD_*, or PMI_* from MPICH's Hydra and
 * Intel MPI. MPI has no rendezvous address of its own, so MASTER_ADDR must be
 * exported to every rank (mpirun -x MASTER_ADDR) once the job spans nodes;
 * on one node it defaults to 127.0.0.1.
 * Without any of these variables a process is an MPI singleton: world 1, rank 0. */
#include "env_read.h"

#define FIX " (mpirun sets it for every rank); start this program with mpirun, or choose another environment"
#define FIX_ADDR "export MASTER_ADDR=<rank 0's host> to every rank (mpirun -x MASTER_ADDR)"
#define FIX_PORT "set MASTER_PORT to a free TCP port on rank 0's host"

enum { MPI_SCORE = 15, MPI_DEFAULT_PORT = 29500 };

typedef struct {
    const char *rank, *size, *local_rank, *local_size;
} mpi_vars;

static const mpi_vars OPEN_MPI = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                  "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};
static const mpi_vars PMI = {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"};

/* Which launcher's variables are present; NULL for none. Open MPI first:
 * its variables are specific to its own launcher. */
static const mpi_vars *launcher_vars(void) {
    if (env_has(OPEN_MPI.rank) || env_has(OPEN_MPI.size)) return &OPEN_MPI;
    if (env_has(PMI.rank) || env_has(PMI.size)) return &PMI;
    return NULL;
}

/* Where this process stands; every field checked against the others. */
typedef struct {
    int rank, size, local_rank, local_size;
} mpi_place;

static lt_status read_sizes(lt_ctx *ctx, const mpi_vars *v, mpi_place *m) {
    LT_CHECK(env_int(ctx, v->size, 1, INT_MAX, ENV_REQUIRED, "it must be the number of ranks" FIX,
                     &m->size));
    /* A local size is only needed where a local rank says ranks share a node;
     * without either, each rank is alone on its node. */
    int def = env_has(v->local_rank) ? ENV_REQUIRED : 1;
    return env_int(ctx, v->local_size, 1, m->size, def,
                   "it must be the number of ranks on this node" FIX, &m->local_size);
}

static lt_status read_place(lt_ctx *ctx, mpi_place *m) {
    const mpi_vars *v = launcher_vars();
    if (!v) {
        *m = (mpi_place){0, 1, 0, 1};
        return LT_OK;
    }
    LT_CHECK(read_sizes(ctx, v, m));
    LT_CHECK(env_rank_below(ctx, v->rank, ENV_REQUIRED, v->size, m->size,
                            "it must be this process's rank" FIX, &m->rank));
    return env_rank_below(ctx, v->local_rank, 0, v->local_size, m->local_size,
                          "it must be this process's index on its node" FIX, &m->local_rank);
}

static lt_status score(lt_ctx *ctx, int *out) {
    (void)ctx;
    *out = launcher_vars() ? MPI_SCORE : 0;
    return LT_OK;
}

/* 127.0.0.1 only when every rank is on this node; across nodes that default
 * would make each node rendezvous with itself and hang, so it is an error. */
static lt_status main_address(lt_ctx *ctx, char *buf, size_t len) {
    if (!env_has("MASTER_ADDR")) {
        mpi_place m;
        LT_CHECK(read_place(ctx, &m));
        if (m.size > m.local_size) {
            lt_set_error(ctx, "MASTER_ADDR is not set and this MPI job spans several nodes "
                              "(%d ranks, %d on this node); " FIX_ADDR, m.size, m.local_size);
            return LT_ERR_INVALID;
        }
    }
    return env_master_addr(ctx, "127.0.0.1", buf, len, FIX_ADDR);
}

static lt_status main_port(lt_ctx *ctx, int *out) {
    return env_int(ctx, "MASTER_PORT", 1, 65535, MPI_DEFAULT_PORT, FIX_PORT, out);
}

static lt_status world_size(lt_ctx *ctx, int *out) {
    mpi_place m;
    LT_CHECK(read_place(ctx, &m));
    *out = m.size;
    return LT_OK;
}

static lt_status global_rank(lt_ctx *ctx, int *out) {
    mpi_place m;
    LT_CHECK(read_place(ctx, &m));
    *out = m.rank;
    return LT_OK;
}

static lt_status local_rank(lt_ctx *ctx, int *out) {
    mpi_place m;
    LT_CHECK(read_place(ctx, &m));
    *out = m.local_rank;
    return LT_OK;
}

static lt_status local_world_size(lt_ctx *ctx, int *out) {
    mpi_place m;
    LT_CHECK(read_place(ctx, &m));
    *out = m.local_size;
    return LT_OK;
}

/* mpirun's default mapping fills a node before the next (--map-by slot), with
 * the same count on every node, so the node is the rank's block. */
static lt_status node_rank(lt_ctx *ctx, int *out) {
    mpi_place m;
    LT_CHECK(read_place(ctx, &m));
    *out = m.rank / m.local_size;
    return LT_OK;
}

static const lt_environment_desc mpi_env = {
    LT_HEADER(LT_KIND_ENVIRONMENT, lt_environment_desc, "mpi", NULL, "1.0.0",
              "mpirun ranks (OMPI_COMM_WORLD_* or PMI_*); export MASTER_ADDR across nodes, "
              "default 127.0.0.1, port MASTER_PORT or 29500",
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

LT_PLUGIN_EXPORT(&mpi_env.hdr)
