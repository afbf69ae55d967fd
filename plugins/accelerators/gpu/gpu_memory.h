/* memory.c's hooks, for gpu.c's descriptor. */
#ifndef LT_GPU_MEMORY_H
#define LT_GPU_MEMORY_H

#include "gpu_state.h"

lt_status gpu_alloc(lt_ctx *ctx, size_t bytes, void **out);
void gpu_free(lt_ctx *ctx, void *p);
lt_status gpu_alloc_host(lt_ctx *ctx, size_t bytes, void **out);
void gpu_free_host(lt_ctx *ctx, void *p);
lt_status gpu_copy(lt_ctx *ctx, void *dst, const void *src, size_t bytes, lt_copy_dir dir);
lt_status gpu_memory_stats(lt_ctx *ctx, lt_memory_stats *out);

#endif
