/* The `lightning` environment, like Lightning's LightningEnvironment: plain
 * variables that ltrun sets for the workers it starts (or a user sets by hand).
 * It is always applicable, so it scores 1 and any detected scheduler beats it.
 * Unset values take the single-process defaults: world 1, every rank 0. The
 * local world size is the core's default, world / trainer.num_nodes, as
 * Lightning's LightningEnvironment has none of its own. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include "env_read.h"

#define FIX_WORLD "set WORLD_SIZE to the total number of processes (ltrun does this for its workers)"
#define FIX_RANK "the launcher should set RANK to this process's rank, 0..WORLD_SIZE-1"
#define FIX_LOCAL "the launcher should set LOCAL_RANK to this process's index on its node"
#define FIX_NODE "set NODE_RANK to this node's index, 0..num_nodes-1"
#define FIX_ADDR "set MASTER_ADDR to the host name or IP address of rank 0's node"

static lt_status score(lt_ctx *ctx, int *out) {
    (void)ctx;
    *out = 1;
    return LT_OK;
}

/* A launcher (ltrun, or one imitating it) always sets LOCAL_RANK per worker;
 * a process started by hand has none and is the launcher itself. */
static lt_status creates_processes_externally(lt_ctx *ctx, bool *out) {
    (void)ctx;
    *out = env_has("LOCAL_RANK");
    return LT_OK;
}

static lt_status main_address(lt_ctx *ctx, char *buf, size_t len) {
    return env_master_addr(ctx, "127.0.0.1", buf, len, FIX_ADDR);
}

/* Port 0 makes the kernel pick a port that is free now. */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t alen = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &alen) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* Without MASTER_PORT, Lightning picks a free port once and keeps it; the
 * launcher passes it on to the workers as MASTER_PORT, so every later call in
 * this process must answer the same. Hooks run on the main thread only. */
static lt_status main_port(lt_ctx *ctx, int *out) {
    static int picked;
    bool found;
    LT_CHECK(env_master_port(ctx, &found, out));
    if (found) return LT_OK;
    if (!picked) picked = free_port();
    if (picked <= 0) {
        picked = 0;
        lt_set_error(ctx, "MASTER_PORT is not set and no free TCP port could be found; "
                          "set MASTER_PORT to a free port");
        return LT_ERR_IO;
    }
    *out = picked;
    return LT_OK;
}

static lt_status world_size(lt_ctx *ctx, int *out) {
    return env_int(ctx, "WORLD_SIZE", 1, INT_MAX, 1, FIX_WORLD, out);
}

static lt_status global_rank(lt_ctx *ctx, int *out) {
    int world;
    LT_CHECK(world_size(ctx, &world));
    return env_rank_below(ctx, "RANK", 0, "WORLD_SIZE", world, FIX_RANK, out);
}

/* Bounded by the world only: the processes on this node are the core's default
 * (world / trainer.num_nodes), which a plugin cannot call, and the trainer
 * checks the local rank against its devices. */
static lt_status local_rank(lt_ctx *ctx, int *out) {
    int world;
    LT_CHECK(world_size(ctx, &world));
    return env_rank_below(ctx, "LOCAL_RANK", 0, "WORLD_SIZE", world, FIX_LOCAL, out);
}

/* NODE_RANK, else torch's GROUP_RANK, as Lightning reads them. */
static lt_status node_rank(lt_ctx *ctx, int *out) {
    const char *name = env_has("NODE_RANK") ? "NODE_RANK" : "GROUP_RANK";
    return env_int(ctx, name, 0, INT_MAX, 0, FIX_NODE, out);
}

static const lt_environment_desc lightning_env = {
    LT_HEADER(LT_KIND_ENVIRONMENT, lt_environment_desc, "lightning", NULL, "1.0.0",
              "plain variables MASTER_ADDR/PORT, WORLD_SIZE, RANK, NODE_RANK, LOCAL_RANK "
              "(set by ltrun); the fallback",
              NULL, NULL),
    .score = score,
    .creates_processes_externally = creates_processes_externally,
    .main_address = main_address,
    .main_port = main_port,
    .world_size = world_size,
    .global_rank = global_rank,
    .local_rank = local_rank,
    .node_rank = node_rank,
};

LT_PLUGIN_EXPORT(&lightning_env.hdr)
