/* The nccl backend's hooks (nccl_group.c, nccl_ops.c), named for the descriptor
 * (nccl_desc.c). */
#ifndef LT_NCCL_HOOKS_H
#define LT_NCCL_HOOKS_H

#include "lt/backend.h"

lt_status ltnccl_create(lt_ctx *ctx, lt_store *store, int rank, int world, const lt_pg_options *opt,
                        lt_backend_group **out);
lt_status ltnccl_destroy(lt_ctx *ctx, lt_backend_group *g);
lt_status ltnccl_allreduce(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count, lt_dtype dtype,
                           lt_redop op, lt_backend_work **work);
lt_status ltnccl_broadcast(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count, lt_dtype dtype,
                           int root, lt_backend_work **work);
lt_status ltnccl_allgather(lt_ctx *ctx, lt_backend_group *g, const void *send, void *recv,
                           size_t count, lt_dtype dtype, lt_backend_work **work);
lt_status ltnccl_reduce_scatter(lt_ctx *ctx, lt_backend_group *g, const void *send, void *recv,
                                size_t count, lt_dtype dtype, lt_redop op, lt_backend_work **work);
lt_status ltnccl_send(lt_ctx *ctx, lt_backend_group *g, const void *buf, size_t count,
                      lt_dtype dtype, int peer, uint32_t tag, lt_backend_work **work);
lt_status ltnccl_recv(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count, lt_dtype dtype,
                      int peer, uint32_t tag, lt_backend_work **work);
lt_status ltnccl_barrier(lt_ctx *ctx, lt_backend_group *g, lt_backend_work **work);
lt_status ltnccl_wait(lt_ctx *ctx, lt_backend_work *work, int64_t timeout_ms);
void ltnccl_free_work(lt_ctx *ctx, lt_backend_work *work);
lt_status ltnccl_abort(lt_ctx *ctx, lt_backend_group *g);
lt_status ltnccl_supports(lt_ctx *ctx, lt_dtype dtype, lt_redop op, bool *out);
lt_status ltnccl_supports_memory(lt_ctx *ctx, lt_mem_kind kind, bool *out);

#endif
