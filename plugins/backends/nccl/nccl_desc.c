/* The nccl backend's descriptor and the plugin entry point. */
#include "nccl_hooks.h"

static const lt_backend_desc nccl_backend = {
    LT_HEADER(LT_KIND_BACKEND, lt_backend_desc, "nccl", NULL, "1.0.0",
              "collectives with NVIDIA NCCL on GPU buffers (device memory only; f32 f64 f16 bf16 i8 u8 i32 "
              "i64; send/recv matched in order per peer)",
              NULL, NULL),
    .create = ltnccl_create,
    .destroy = ltnccl_destroy,
    .allreduce = ltnccl_allreduce,
    .broadcast = ltnccl_broadcast,
    .allgather = ltnccl_allgather,
    .reduce_scatter = ltnccl_reduce_scatter,
    .send = ltnccl_send,
    .recv = ltnccl_recv,
    .barrier = ltnccl_barrier,
    .wait = ltnccl_wait,
    .free_work = ltnccl_free_work,
    .abort = ltnccl_abort,
    .supports = ltnccl_supports,
    .supports_memory = ltnccl_supports_memory,
};

LT_PLUGIN_EXPORT(&nccl_backend.hdr)
