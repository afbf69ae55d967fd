/* The shm backend's descriptor and the plugin entry point. */
#include "shm_hooks.h"

static const lt_param_spec shm_params[] = {
    {"slot_mb", LT_PARAM_INT, "8",
     "MiB of shared memory per rank; larger collectives run in chunks of half of it"},
    {"realtime", LT_PARAM_STRING, "auto",
     "auto | on | off: run the group's worker thread at SCHED_FIFO 1 (auto: when permitted) so it is not kept waiting behind training threads"},
    {NULL, 0, NULL, NULL},
};

static const lt_backend_desc shm_backend = {
    LT_HEADER(LT_KIND_BACKEND, lt_backend_desc, "shm", NULL, "1.0.0",
              "collectives through POSIX shared memory for ranks on one host (CPU buffers; "
              "f32 f64 f16 bf16 i8 u8 i32 i64 reductions; point-to-point send/recv through per-pair rings)",
              shm_params, NULL),
    .create = ltshm_create,
    .destroy = ltshm_destroy,
    .allreduce = ltshm_allreduce,
    .broadcast = ltshm_broadcast,
    .allgather = ltshm_allgather,
    .reduce_scatter = ltshm_reduce_scatter,
    .send = ltshm_send,
    .recv = ltshm_recv,
    .barrier = ltshm_barrier,
    .wait = ltshm_wait,
    .free_work = ltshm_free_work,
    .abort = ltshm_abort,
    .supports = ltshm_supports,
    .mem_alloc = ltshm_mem_alloc,
    .mem_free = ltshm_mem_free,
    .check_params = ltshm_check_params,
};

LT_PLUGIN_EXPORT(&shm_backend.hdr)
