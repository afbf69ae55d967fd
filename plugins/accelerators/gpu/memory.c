/* Device and pinned host memory, copies, memory_stats.
 *
 * alloc() records each block's size in a small hash table (linear probing
 * on the pointer, backward-shift deletion) so free() keeps memory_stats
 * exact; the table is touched only by alloc and free, never by kernels.
 * cudaMalloc aligns to 256 bytes, above the 64 the ABI asks for. */
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "gpu_memory.h"

static gpu_state *state_of(lt_ctx *ctx) { return (gpu_state *)lt_ctx_state(ctx); }

/* ---- block table (caller holds s->lock) ---------------------------------- */

static size_t slot_of(const gpu_state *s, const void *p) {
    uint64_t h = (uint64_t)(uintptr_t)p >> 8; /* cudaMalloc's low bits are zero */
    h *= 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & (s->cap - 1);
}

static bool table_grow(gpu_state *s) {
    size_t cap = s->cap ? s->cap * 2 : 256;
    gpu_block *nb = calloc(cap, sizeof *nb);
    if (!nb) return false;
    gpu_block *old = s->blocks;
    size_t oldcap = s->cap;
    s->blocks = nb;
    s->cap = cap;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].p) {
            size_t j = slot_of(s, old[i].p);
            while (nb[j].p) j = (j + 1) & (cap - 1);
            nb[j] = old[i];
        }
    free(old);
    return true;
}

static bool table_put(gpu_state *s, void *p, size_t bytes) {
    if ((s->nblocks + 1) * 2 > s->cap && !table_grow(s)) return false;
    size_t j = slot_of(s, p);
    while (s->blocks[j].p) j = (j + 1) & (s->cap - 1);
    s->blocks[j] = (gpu_block){p, bytes};
    s->nblocks++;
    return true;
}

/* Removes p; returns its size, or SIZE_MAX when p is not a live block. */
static size_t table_take(gpu_state *s, const void *p) {
    if (!s->cap) return SIZE_MAX;
    size_t mask = s->cap - 1, j = slot_of(s, p);
    while (s->blocks[j].p && s->blocks[j].p != p) j = (j + 1) & mask;
    if (!s->blocks[j].p) return SIZE_MAX;
    size_t bytes = s->blocks[j].bytes;
    /* backward shift: pull later members of the probe chain into the hole */
    size_t hole = j;
    for (size_t k = (j + 1) & mask; s->blocks[k].p; k = (k + 1) & mask) {
        size_t home = slot_of(s, s->blocks[k].p);
        bool movable = hole <= k ? (home <= hole || home > k) : (home <= hole && home > k);
        if (movable) {
            s->blocks[hole] = s->blocks[k];
            hole = k;
        }
    }
    s->blocks[hole] = (gpu_block){NULL, 0};
    s->nblocks--;
    return bytes;
}

void gpu_blocks_release(gpu_state *s) {
    free(s->blocks);
    s->blocks = NULL;
    s->cap = s->nblocks = 0;
}

/* ---- hooks --------------------------------------------------------------- */

lt_status gpu_alloc(lt_ctx *ctx, size_t bytes, void **out) {
    gpu_state *s = state_of(ctx);
    if (!s) {
        lt_set_error(ctx, "gpu accelerator: alloc before setup");
        return LT_ERR_STATE;
    }
    if (!gpu_enter(ctx)) return LT_ERR_PLUGIN;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* an allocation failure is not sticky: clear it */
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        lt_set_error(ctx,
                     "gpu device %d: cannot allocate %zu bytes: %s (%zu of %zu bytes free, "
                     "%llu allocated by lt); lower the batch size or the model size",
                     s->device, bytes, cudaGetErrorString(e), free_b, total_b,
                     (unsigned long long)atomic_load(&s->allocated));
        return e == cudaErrorMemoryAllocation ? LT_ERR_NOMEM : LT_ERR_PLUGIN;
    }
    pthread_mutex_lock(&s->lock);
    bool ok = table_put(s, p, bytes);
    pthread_mutex_unlock(&s->lock);
    if (!ok) {
        cudaFree(p);
        lt_set_error(ctx, "gpu accelerator: out of host memory tracking an allocation");
        return LT_ERR_NOMEM;
    }
    uint64_t now = atomic_fetch_add(&s->allocated, bytes) + bytes;
    uint64_t peak = atomic_load(&s->peak);
    while (now > peak && !atomic_compare_exchange_weak(&s->peak, &peak, now)) {
    }
    *out = p;
    return LT_OK;
}

/* cudaFree waits for the device to finish with the block, so a free right
 * after a kernel that still reads it is safe. */
void gpu_free(lt_ctx *ctx, void *p) {
    if (!p) return;
    gpu_state *s = state_of(ctx);
    if (s) {
        pthread_mutex_lock(&s->lock);
        size_t bytes = table_take(s, p);
        pthread_mutex_unlock(&s->lock);
        if (bytes != SIZE_MAX) atomic_fetch_sub(&s->allocated, bytes);
        gpu_enter(ctx);
    }
    /* Cleared, or the error (a pointer that is not ours) would be blamed
     * on the next launch (GPU_LAUNCHED peeks at the last error). */
    cudaError_t e = cudaFree(p);
    if (e != cudaSuccess) {
        cudaGetLastError();
        lt_log(ctx, LT_LOG_WARN, "gpu accelerator: cudaFree(%p): %s", p, cudaGetErrorString(e));
    }
}

/* Pinned, and portable: the data loader's prefetch thread fills it, and
 * any device of the process may copy from it at full speed. */
lt_status gpu_alloc_host(lt_ctx *ctx, size_t bytes, void **out) {
    if (state_of(ctx) && !gpu_enter(ctx)) return LT_ERR_PLUGIN;
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        cudaGetLastError();
        lt_set_error(ctx, "gpu accelerator: cannot allocate %zu bytes of pinned host memory: %s",
                     bytes, cudaGetErrorString(e));
        return LT_ERR_NOMEM;
    }
    *out = p;
    return LT_OK;
}

void gpu_free_host(lt_ctx *ctx, void *p) {
    cudaError_t e = p ? cudaFreeHost(p) : cudaSuccess;
    if (e != cudaSuccess) {
        cudaGetLastError(); /* as in gpu_free */
        lt_log(ctx, LT_LOG_WARN, "gpu accelerator: cudaFreeHost(%p): %s", p, cudaGetErrorString(e));
    }
}

/* Issued on the calling thread's stream, in order with its kernels.
 * cudaMemcpyDefault lets UVA tell where each pointer lives, which also
 * covers a D2D copy between two devices (dp's replicas). Overlapping D2D
 * ranges (memmove semantics, as cpu) go through a temporary block from the
 * stream-ordered allocator: a hook may allocate, a kernel may not. */
lt_status gpu_copy(lt_ctx *ctx, void *dst, const void *src, size_t bytes, lt_copy_dir dir) {
    if (dir < LT_COPY_H2D || dir > LT_COPY_H2H) {
        lt_set_error(ctx, "gpu accelerator: copy direction %d is not one of lt_copy_dir", (int)dir);
        return LT_ERR_INVALID;
    }
    if (!bytes || dst == src) return LT_OK;
    if (state_of(ctx) && !gpu_enter(ctx)) return LT_ERR_PLUGIN;
    cudaStream_t st = cudaStreamPerThread;
    cudaError_t e;
    uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
    if (dir == LT_COPY_D2D && d < s + bytes && s < d + bytes) {
        void *tmp = NULL;
        e = cudaMallocAsync(&tmp, bytes, st);
        if (e == cudaSuccess) e = cudaMemcpyAsync(tmp, src, bytes, cudaMemcpyDefault, st);
        if (e == cudaSuccess) e = cudaMemcpyAsync(dst, tmp, bytes, cudaMemcpyDefault, st);
        if (tmp) {
            cudaError_t f = cudaFreeAsync(tmp, st);
            if (e == cudaSuccess) e = f;
        }
    } else {
        e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, st);
    }
    if (e != cudaSuccess) {
        cudaGetLastError(); /* reported here: not left for the next kernel's launch check to blame on it */
        static const char *const names[] = {"", "H2D", "D2H", "D2D", "H2H"};
        lt_set_error(ctx, "gpu accelerator: %s copy of %zu bytes failed: %s (%s)", names[dir],
                     bytes, cudaGetErrorString(e), cudaGetErrorName(e));
        return LT_ERR_PLUGIN;
    }
    return LT_OK;
}

lt_status gpu_memory_stats(lt_ctx *ctx, lt_memory_stats *out) {
    gpu_state *s = state_of(ctx);
    if (!s) {
        lt_set_error(ctx, "gpu accelerator: memory_stats before setup");
        return LT_ERR_STATE;
    }
    out->allocated_bytes = atomic_load(&s->allocated);
    out->peak_bytes = atomic_load(&s->peak);
    out->total_bytes = s->total;
    return LT_OK;
}
