/* liblt-environment-multi.so: one file, two kinds. The environment leaves
 * local_world_size to the core's default, which asks world_size. */
#include "tp.h"
#include <stdio.h>

static lt_status score(lt_ctx *c, int *out) {
    (void)c;
    *out = 1;
    return LT_OK;
}
static lt_status external(lt_ctx *c, bool *out) {
    (void)c;
    *out = false;
    return LT_OK;
}
static lt_status address(lt_ctx *c, char *buf, size_t len) {
    (void)c;
    snprintf(buf, len, "127.0.0.1");
    return LT_OK;
}
static lt_status port(lt_ctx *c, int *out) {
    (void)c;
    *out = 29500;
    return LT_OK;
}
static lt_status world_size(lt_ctx *c, int *out) {
    (void)c;
    *out = 4;
    return LT_OK;
}
static lt_status global_rank(lt_ctx *c, int *out) {
    (void)c;
    *out = 2;
    return LT_OK;
}
static lt_status local_rank(lt_ctx *c, int *out) {
    (void)c;
    *out = 1;
    return LT_OK;
}
static lt_status node_rank(lt_ctx *c, int *out) {
    (void)c;
    *out = 0;
    return LT_OK;
}

static const lt_environment_desc multi = {
    LT_HEADER(LT_KIND_ENVIRONMENT, lt_environment_desc, "multi", NULL, "0.1", NULL, NULL, NULL),
    .score = score,
    .creates_processes_externally = external,
    .main_address = address,
    .main_port = port,
    .world_size = world_size,
    .global_rank = global_rank,
    .local_rank = local_rank,
    .node_rank = node_rank,
};

static const lt_strategy_desc helper = {
    LT_HEADER(LT_KIND_STRATEGY, lt_strategy_desc, "helper", "base", "0.1", NULL, NULL, NULL),
};

LT_PLUGIN_EXPORT(&helper.hdr, &multi.hdr)
