/* The `slurm` environment, like Lightning's SLURMEnvironment: srun started one
 * task per rank. Detected by SLURM_NTASKS outside an interactive shell
 * (SLURM_JOB_NAME "bash" or "interactive" means salloc + a shell, where the
 * user runs ltrun by hand and ltrun should launch as usual). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include "env_read.h"
#include "hostlist.h"

#define FIX " (srun sets it for every task); launch the workers with srun, or choose another environment"
#define FIX_WORLD "SLURM_NTASKS must be the total number of tasks" FIX
#define FIX_RANK "SLURM_PROCID must be this task's rank, 0..SLURM_NTASKS-1" FIX
#define FIX_LOCAL "SLURM_LOCALID must be this task's index on its node" FIX
#define FIX_NODE "SLURM_NODEID must be this node's index, 0..SLURM_NNODES-1" FIX
#define FIX_NODES "SLURM_NNODES must be the number of nodes" FIX
#define FIX_ADDR "set MASTER_ADDR to rank 0's host to override the node list"
#define FIX_SPLIT "set SLURM_NTASKS_PER_NODE (srun --ntasks-per-node) to say how many run here"
#define FIX_PER_NODE "expected a task count like '4' or '2(x3),1'; fix the srun options or unset it"

enum {
    SLURM_SCORE = 20,
    /* Lightning's ports: 15000 + the job id's last four digits, else a fixed one. */
    SLURM_PORT_BASE = 15000,
    SLURM_PORT_NO_JOB = 12910,
};

static bool interactive_job(void) {
    const char *name = getenv("SLURM_JOB_NAME");
    return name && (!strcmp(name, "bash") || !strcmp(name, "interactive"));
}

static lt_status score(lt_ctx *ctx, int *out) {
    (void)ctx;
    *out = env_has("SLURM_NTASKS") && !interactive_job() ? SLURM_SCORE : 0;
    return LT_OK;
}

/* MASTER_ADDR, else the first node of the allocation, else this host. */
static lt_status main_address(lt_ctx *ctx, char *buf, size_t len) {
    const char *name = env_has("SLURM_NODELIST") ? "SLURM_NODELIST" : "SLURM_JOB_NODELIST";
    const char *list = getenv(name);
    if (env_has("MASTER_ADDR") || !list) return env_master_addr(ctx, "127.0.0.1", buf, len, FIX_ADDR);
    char why[160];
    if (slurm_hostlist_first(list, buf, len, why, sizeof why) != 0) {
        lt_set_error(ctx, "%s='%s' is not a valid host list: %s; " FIX_ADDR, name, list, why);
        return LT_ERR_INVALID;
    }
    return LT_OK;
}

/* Every job gets its own port so two jobs sharing a node do not collide. */
static lt_status main_port(lt_ctx *ctx, int *out) {
    bool found;
    LT_CHECK(env_master_port(ctx, &found, out));
    if (found) return LT_OK;
    const char *job = getenv("SLURM_JOB_ID");
    long id;
    if (!job) {
        *out = SLURM_PORT_NO_JOB;
        return LT_OK;
    }
    if (!env_parse_long(job, &id) || id < 0) {
        lt_set_error(ctx, "SLURM_JOB_ID='%s' is not a job number; set MASTER_PORT to choose the port",
                     job);
        return LT_ERR_INVALID;
    }
    *out = SLURM_PORT_BASE + (int)(id % 10000);
    return LT_OK;
}

static lt_status world_size(lt_ctx *ctx, int *out) {
    return env_int(ctx, "SLURM_NTASKS", 1, INT_MAX, ENV_REQUIRED, FIX_WORLD, out);
}

static lt_status global_rank(lt_ctx *ctx, int *out) {
    int world;
    LT_CHECK(world_size(ctx, &world));
    return env_rank_below(ctx, "SLURM_PROCID", ENV_REQUIRED, "SLURM_NTASKS", world, FIX_RANK, out);
}

static lt_status node_rank(lt_ctx *ctx, int *out) {
    return env_rank_below_if_set(ctx, "SLURM_NODEID", ENV_REQUIRED, "SLURM_NNODES", FIX_NODES, FIX_NODE,
                                 out);
}

/* One "N" or "N(xR)" entry of a task count list; advances *s. */
static bool per_node_entry(const char **s, long *count, long *repeat) {
    char *end;
    const char *p = *s;
    if (!isdigit((unsigned char)*p)) return false;
    *count = strtol(p, &end, 10);
    *repeat = 1;
    if (!strncmp(end, "(x", 2)) {
        if (!isdigit((unsigned char)end[2])) return false;
        *repeat = strtol(end + 2, &end, 10);
        if (*end++ != ')') return false;
    }
    *s = end;
    return *count >= 1 && *count <= INT_MAX && *repeat >= 1;
}

/* A count from SLURM's "2(x3),1" syntax (nodes 0-2 run 2 tasks, node 3 runs 1):
 * this node's entry, or with `uniform` (a value meant for every node) the first. */
static lt_status per_node(lt_ctx *ctx, const char *name, int node, bool uniform, int *out) {
    const char *s = getenv(name), *p = s;
    long count, repeat, skip = uniform ? 0 : node, found = 0;
    for (;;) {
        if (!per_node_entry(&p, &count, &repeat) || (*p && *p != ',')) {
            lt_set_error(ctx, "%s='%s' is not a task count list; " FIX_PER_NODE, name, s);
            return LT_ERR_INVALID;
        }
        if (!found && skip < repeat)
            found = count;
        else if (!found)
            skip -= repeat;
        if (!*p) break;
        p++;
    }
    if (!found) {
        lt_set_error(ctx, "%s='%s' has no entry for SLURM_NODEID=%d; " FIX_PER_NODE, name, s, node);
        return LT_ERR_INVALID;
    }
    *out = (int)found;
    return LT_OK;
}

/* SLURM_NTASKS_PER_NODE (--ntasks-per-node, the same on every node), else
 * SLURM_TASKS_PER_NODE (srun always sets it, one entry per node), else the
 * tasks spread evenly over SLURM_NNODES. *source names where the answer came
 * from, for messages. */
static lt_status tasks_here(lt_ctx *ctx, int *out, const char **source) {
    int world, node;
    LT_CHECK(world_size(ctx, &world));
    LT_CHECK(env_int(ctx, "SLURM_NODEID", 0, INT_MAX, 0, FIX_NODE, &node));
    *source = "SLURM_NTASKS_PER_NODE";
    if (env_has(*source)) return per_node(ctx, *source, node, true, out);
    *source = "SLURM_TASKS_PER_NODE";
    if (env_has(*source)) return per_node(ctx, *source, node, false, out);
    *source = "SLURM_NTASKS/SLURM_NNODES";
    return env_split_evenly(ctx, "SLURM_NTASKS", world, "SLURM_NNODES", FIX_NODES, FIX_SPLIT, out);
}

static lt_status local_world_size(lt_ctx *ctx, int *out) {
    const char *source;
    return tasks_here(ctx, out, &source);
}

static lt_status local_rank(lt_ctx *ctx, int *out) {
    int local_world;
    const char *source;
    LT_CHECK(tasks_here(ctx, &local_world, &source));
    return env_rank_below(ctx, "SLURM_LOCALID", ENV_REQUIRED, source, local_world, FIX_LOCAL, out);
}

/* Lightning's SLURMEnvironment(auto_requeue, requeue_signal): the trainer
 * reads these three (any environment may declare them). */
static const lt_param_spec slurm_params[] = {
    {"auto_requeue", LT_PARAM_BOOL, "true",
     "on requeue_signal (sbatch --signal=USR1@90), save last.safetensors at the next step, requeue "
     "the job and end; resume with --ckpt-path last"},
    {"requeue_signal", LT_PARAM_STRING, "USR1", "USR1 | USR2 | TERM | HUP | INT"},
    {"requeue_command", LT_PARAM_STRING, "scontrol requeue \"$SLURM_JOB_ID\"",
     "run by /bin/sh on rank 0 after the save"},
    {NULL, 0, NULL, NULL},
};

static const lt_environment_desc slurm_env = {
    LT_HEADER(LT_KIND_ENVIRONMENT, lt_environment_desc, "slurm", NULL, "1.0.0",
              "SLURM srun tasks (SLURM_NTASKS, SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, "
              "SLURM_NODELIST; port from SLURM_JOB_ID)",
              slurm_params, NULL),
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

LT_PLUGIN_EXPORT(&slurm_env.hdr)
