/* The gloo backend's hooks, implemented in C++ (gloo.cc) with C linkage so
 * the descriptor (gloo_desc.c) can be a plain C designated initializer. */
#ifndef LT_GLOO_HOOKS_H
#define LT_GLOO_HOOKS_H

#include "lt/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

lt_status ltgloo_create(lt_ctx *ctx, lt_store *store, int rank, int world, const lt_pg_options *opt,
                        lt_backend_group **out);
lt_status ltgloo_destroy(lt_ctx *ctx, lt_backend_group *g);
lt_status ltgloo_allreduce(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count, lt_dtype dtype,
                           lt_redop op, lt_backend_work **work);
lt_status ltgloo_broadcast(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count, lt_dtype dtype,
                           int root, lt_backend_work **work);
lt_status ltgloo_allgather(lt_ctx *ctx, lt_backend_group *g, const void *send, void *recv,
                           size_t count, lt_dtype dtype, lt_backend_work **work);
lt_status ltgloo_reduce_scatter(lt_ctx *ctx, lt_backend_group *g, const void *send, void *recv,
                                size_t count, lt_dtype dtype, lt_redop op, lt_backend_work **work);
lt_status ltgloo_send(lt_ctx *ctx, lt_backend_group *g, const void *buf, size_t count,
                      lt_dtype dtype, int peer, uint32_t tag, lt_backend_work **work);
lt_status ltgloo_recv(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count, lt_dtype dtype,
                      int peer, uint32_t tag, lt_backend_work **work);
lt_status ltgloo_barrier(lt_ctx *ctx, lt_backend_group *g, lt_backend_work **work);
lt_status ltgloo_wait(lt_ctx *ctx, lt_backend_work *work, int64_t timeout_ms);
void ltgloo_free_work(lt_ctx *ctx, lt_backend_work *work);
lt_status ltgloo_abort(lt_ctx *ctx, lt_backend_group *g);
lt_status ltgloo_check_params(lt_ctx *ctx);
lt_status ltgloo_supports(lt_ctx *ctx, lt_dtype dtype, lt_redop op, bool *out);

#ifdef __cplusplus
}
#endif
#endif
