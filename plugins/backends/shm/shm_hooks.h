/* The shm backend's hooks (shm.c) and reduction kernels (shm_reduce.c). */
#ifndef LT_SHM_HOOKS_H
#define LT_SHM_HOOKS_H

#include "lt/backend.h"

lt_status ltshm_create(lt_ctx *ctx, lt_store *store, int rank, int world, const lt_pg_options *opt,
                       lt_backend_group **out);
lt_status ltshm_destroy(lt_ctx *ctx, lt_backend_group *g);
lt_status ltshm_allreduce(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count, lt_dtype dtype,
                          lt_redop op, lt_backend_work **work);
lt_status ltshm_broadcast(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count, lt_dtype dtype,
                          int root, lt_backend_work **work);
lt_status ltshm_allgather(lt_ctx *ctx, lt_backend_group *g, const void *send, void *recv,
                          size_t count, lt_dtype dtype, lt_backend_work **work);
lt_status ltshm_reduce_scatter(lt_ctx *ctx, lt_backend_group *g, const void *send, void *recv,
                               size_t count, lt_dtype dtype, lt_redop op, lt_backend_work **work);
lt_status ltshm_send(lt_ctx *ctx, lt_backend_group *g, const void *buf, size_t count,
                     lt_dtype dtype, int peer, uint32_t tag, lt_backend_work **work);
lt_status ltshm_recv(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count, lt_dtype dtype,
                     int peer, uint32_t tag, lt_backend_work **work);
lt_status ltshm_barrier(lt_ctx *ctx, lt_backend_group *g, lt_backend_work **work);
lt_status ltshm_wait(lt_ctx *ctx, lt_backend_work *work, int64_t timeout_ms);
void ltshm_free_work(lt_ctx *ctx, lt_backend_work *work);
lt_status ltshm_abort(lt_ctx *ctx, lt_backend_group *g);
lt_status ltshm_supports(lt_ctx *ctx, lt_dtype dtype, lt_redop op, bool *out);
lt_status ltshm_mem_alloc(lt_ctx *ctx, lt_backend_group *g, size_t bytes, void **out);
void ltshm_mem_free(lt_ctx *ctx, void *p);
lt_status ltshm_check_params(lt_ctx *ctx);

/* dst[i] = dst[i] op src[i] for n elements; NULL when (dtype, op) is not supported. */
typedef void (*ltshm_combine_fn)(void *dst, const void *src, size_t n);
ltshm_combine_fn ltshm_combine(lt_dtype t, lt_redop op);
/* dst[i] /= world (avg's last step; integer division truncates). */
void ltshm_divide(void *dst, size_t n, lt_dtype t, int world);
/* Two ranks' f32 shares in one pass: a[i] = b[i] = a[i] + b[i], halved for
 * avg (bit for bit what sum, then divide, gives). */
void ltshm_sum2_f32(float *a, float *b, size_t n, bool avg);

#endif
