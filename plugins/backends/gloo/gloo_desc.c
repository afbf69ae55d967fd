/* The gloo backend's descriptor and the plugin entry point. */
#include "gloo_hooks.h"

static const lt_param_spec gloo_params[] = {
    {"num_threads", LT_PARAM_INT, "1",
     "gloo contexts (1..16, each with a worker thread) per group; collectives are dealt round-robin"},
    {"iface", LT_PARAM_STRING, NULL,
     "network interface or local address for gloo's TCP pairs (default: the one routing to MASTER_ADDR)"},
    {"realtime", LT_PARAM_STRING, "auto",
     "auto | on | off: run communication threads at SCHED_FIFO 1 (auto: when permitted) so they are not kept waiting behind training threads"},
    {NULL, 0, NULL, NULL},
};

static const lt_backend_desc gloo_backend = {
    LT_HEADER(LT_KIND_BACKEND, lt_backend_desc, "gloo", NULL, "1.0.0",
              "collectives over TCP with Debian's libgloo (CPU buffers)", gloo_params, NULL),
    .create = ltgloo_create,
    .destroy = ltgloo_destroy,
    .allreduce = ltgloo_allreduce,
    .broadcast = ltgloo_broadcast,
    .allgather = ltgloo_allgather,
    .reduce_scatter = ltgloo_reduce_scatter,
    .send = ltgloo_send,
    .recv = ltgloo_recv,
    .barrier = ltgloo_barrier,
    .wait = ltgloo_wait,
    .free_work = ltgloo_free_work,
    .abort = ltgloo_abort,
    .supports = ltgloo_supports,
    .check_params = ltgloo_check_params,
};

LT_PLUGIN_EXPORT(&gloo_backend.hdr)
