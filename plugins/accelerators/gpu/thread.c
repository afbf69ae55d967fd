/* Per-thread slots (see gpu_internal.h), the deferred-error path and
 * synchronize.
 *
 * A thread finds its slot through a small thread-local cache of (state
 * address, serial, slot): the serial is unique per setup, so a context torn
 * down and set up again at the same address never matches a stale entry,
 * and a stale entry is never dereferenced (its slot was freed with the old
 * state). Slots are also listed in their state so teardown can free those
 * of threads that have since exited. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cublas_lazy.h"
#include <cuda_runtime.h>
#include "gpu_state.h"

#define TLS_SLOTS 8

typedef struct tls_entry {
    const gpu_state *state;
    uint64_t serial;
    gpu_thread *th;
} tls_entry;

static __thread tls_entry tls_cache[TLS_SLOTS];
static __thread unsigned tls_next; /* round-robin victim when the cache is full */

static gpu_state *state_of(lt_ctx *ctx) { return (gpu_state *)lt_ctx_state(ctx); }

/* ---- deferred errors ------------------------------------------------------ */

static void park(lt_ctx *ctx, gpu_state *s, lt_status code, const char *msg) {
    if (!s) { /* before setup: nowhere to park it, say it now */
        lt_set_error(ctx, "%s", msg);
        return;
    }
    pthread_mutex_lock(&s->lock);
    if (s->pending == LT_OK) {
        s->pending = code;
        snprintf(s->pending_msg, sizeof s->pending_msg, "%s", msg);
    }
    pthread_mutex_unlock(&s->lock);
}

void gpu_fail(lt_ctx *ctx, lt_status code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    park(ctx, state_of(ctx), code, msg);
}

void gpu_bad_dtype(lt_ctx *ctx, const char *kernel, lt_dtype t, const char *takes) {
    const char *name = lt_dtype_name(t);
    gpu_fail(ctx, LT_ERR_UNSUPPORTED, "gpu %s: dtype %s (%d) is not supported; it takes %s",
             kernel, name ? name : "unknown", (int)t, takes);
}

bool gpu_check(lt_ctx *ctx, int err, const char *what) {
    if (err == cudaSuccess) return false;
    cudaError_t e = (cudaError_t)err;
    cudaGetLastError(); /* reported now; the next launch check must not blame its kernel for it */
    gpu_fail(ctx, LT_ERR_PLUGIN, "gpu %s: %s (%s)", what, cudaGetErrorString(e),
             cudaGetErrorName(e));
    return true;
}

bool gpu_wait(lt_ctx *ctx, const char *what) {
    cudaError_t e = cudaStreamSynchronize(cudaStreamPerThread);
    if (e == cudaSuccess) e = cudaGetLastError();
    return !gpu_check(ctx, e, what);
}

/* ---- slots ------------------------------------------------------------------ */

static void slot_free(gpu_thread *th) {
    if (th->blas) lt_cublas(NULL)->destroy((cublasHandle_t)th->blas); /* a handle: the table loaded */
    if (th->blas_ws) cudaFree(th->blas_ws);
    if (th->scratch) cudaFree(th->scratch);
    if (th->host) cudaFreeHost(th->host);
    free(th);
}

/* The calling thread's device is the context's from here on. */
static bool bind_device(lt_ctx *ctx, gpu_state *s) {
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur == s->device) return true;
    cudaError_t e = cudaSetDevice(s->device);
    if (e != cudaSuccess) {
        char what[64];
        snprintf(what, sizeof what, "cudaSetDevice(%d)", s->device);
        gpu_check(ctx, e, what);
        return false;
    }
    return true;
}

static gpu_thread *slot_new(lt_ctx *ctx, gpu_state *s) {
    gpu_thread *th = calloc(1, sizeof *th);
    if (!th) {
        gpu_fail(ctx, LT_ERR_NOMEM, "gpu: out of host memory for a thread's state");
        return NULL;
    }
    th->owner = s;
    /* one block: the partials, then the kernel error record */
    cudaError_t e = cudaMalloc(&th->scratch, GPU_SCRATCH_BYTES + sizeof(gpu_kerr));
    if (e == cudaSuccess) {
        th->kerr = (gpu_kerr *)((char *)th->scratch + GPU_SCRATCH_BYTES);
        e = cudaMemsetAsync(th->kerr, 0, sizeof(gpu_kerr), cudaStreamPerThread); /* the thread's stream (ABI 1.6) */
        if (e == cudaSuccess) e = cudaStreamSynchronize(cudaStreamPerThread);
    }
    if (e == cudaSuccess)
        e = cudaHostAlloc((void **)&th->host, sizeof *th->host,
                          cudaHostAllocMapped | cudaHostAllocPortable);
    if (e == cudaSuccess) {
        memset(th->host, 0, sizeof *th->host);
        e = cudaHostGetDevicePointer((void **)&th->host_dev, th->host, 0);
    }
    if (e != cudaSuccess) {
        gpu_check(ctx, e, "creating a thread's scratch (cudaMalloc/cudaHostAlloc)");
        slot_free(th);
        return NULL;
    }
    th->tid = pthread_self();
    pthread_mutex_lock(&s->lock);
    th->next = s->threads;
    s->threads = th;
    pthread_mutex_unlock(&s->lock);
    return th;
}

/* The calling thread's slot of s made earlier, if its cache entry was
 * evicted (a thread using more than TLS_SLOTS contexts): one slot per
 * thread and context, never a second cuBLAS handle and workspace. */
static gpu_thread *slot_find(gpu_state *s) {
    pthread_mutex_lock(&s->lock);
    gpu_thread *th = s->threads;
    while (th && !pthread_equal(th->tid, pthread_self())) th = th->next;
    pthread_mutex_unlock(&s->lock);
    return th;
}

gpu_thread *gpu_enter(lt_ctx *ctx) {
    gpu_state *s = state_of(ctx);
    if (!s) {
        lt_set_error(ctx, "gpu accelerator: called before setup (or after teardown)");
        return NULL;
    }
    if (!bind_device(ctx, s)) return NULL;
    for (unsigned i = 0; i < TLS_SLOTS; i++)
        if (tls_cache[i].state == s && tls_cache[i].serial == s->serial) return tls_cache[i].th;
    gpu_thread *th = slot_find(s);
    if (!th) th = slot_new(ctx, s);
    if (!th) return NULL;
    unsigned i = 0;
    while (i < TLS_SLOTS && tls_cache[i].state) i++;
    if (i == TLS_SLOTS) i = tls_next++ % TLS_SLOTS; /* forgotten here, freed at teardown */
    tls_cache[i] = (tls_entry){s, s->serial, th};
    return th;
}

void *gpu_blas(lt_ctx *ctx, gpu_thread *th) {
    if (th->blas) return th->blas;
    const char *why = NULL;
    const lt_cublas_api *cb = lt_cublas(&why);
    if (!cb) {
        gpu_fail(ctx, LT_ERR_PLUGIN, "gpu gemm: %s", why);
        return NULL;
    }
    cublasHandle_t h;
    void *ws = NULL;
    cudaError_t e = cudaMalloc(&ws, GPU_BLAS_WORKSPACE);
    if (e != cudaSuccess) {
        cudaGetLastError();
        gpu_fail(ctx, LT_ERR_NOMEM, "gpu gemm: cannot allocate cuBLAS's %zu MiB workspace: %s",
                 GPU_BLAS_WORKSPACE >> 20, cudaGetErrorString(e));
        return NULL;
    }
    cublasStatus_t st = cb->create(&h);
    if (st == CUBLAS_STATUS_SUCCESS) {
        /* the stream first: setting it resets the workspace to cuBLAS's own */
        st = cb->set_stream(h, cudaStreamPerThread);
        if (st == CUBLAS_STATUS_SUCCESS) st = cb->set_workspace(h, ws, GPU_BLAS_WORKSPACE);
        /* The default mode lets a split-k GEMM sum its partial products in
         * the output type (f16, bf16); the gemm contract is fp32
         * accumulation, each result rounded once. */
        if (st == CUBLAS_STATUS_SUCCESS)
            st = cb->set_math_mode(h, (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                                     CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
        if (st != CUBLAS_STATUS_SUCCESS) cb->destroy(h);
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
        cudaFree(ws);
        gpu_fail(ctx, LT_ERR_PLUGIN, "gpu gemm: cuBLAS could not be initialised: %s (%s)",
                 cb->status_string(st), cb->status_name(st));
        return NULL;
    }
    th->blas = h;
    th->blas_ws = ws;
    return h;
}

/* Teardown, after a device-wide synchronize: frees every slot of s, and
 * forgets the calling thread's cache entry (other threads' entries carry
 * the old serial and can never match again). */
void gpu_threads_release(gpu_state *s) {
    pthread_mutex_lock(&s->lock);
    gpu_thread *th = s->threads;
    s->threads = NULL;
    pthread_mutex_unlock(&s->lock);
    while (th) {
        gpu_thread *next = th->next;
        slot_free(th);
        th = next;
    }
    for (unsigned i = 0; i < TLS_SLOTS; i++)
        if (tls_cache[i].state == s) tls_cache[i] = (tls_entry){0};
}

/* ---- synchronize -------------------------------------------------------- */

static void kerr_message(const gpu_kerr *k, char *buf, size_t len) {
    const char *kernel = k->code == GPU_KERR_LABEL_XENT_FWD ? "xent_fwd" : "xent_bwd";
    snprintf(buf, len,
             "gpu %s: label %lld in row %lld of the batch is outside [0, %lld); the labels must "
             "be class indices below the number of logits (check the label file or the last "
             "layer's width)",
             kernel, k->label, k->row, k->cols);
}

/* Order of report: a CUDA error (launch or execution: the most severe, and
 * an execution error leaves the context unusable), then what a kernel
 * recorded on the device, then what the host side of a kernel parked. All
 * three are cleared. */
lt_status gpu_synchronize_impl(lt_ctx *ctx) {
    gpu_state *s = state_of(ctx);
    if (!s) {
        lt_set_error(ctx, "gpu accelerator: synchronize before setup");
        return LT_ERR_STATE;
    }
    gpu_thread *th = gpu_enter(ctx);
    cudaError_t e = cudaStreamSynchronize(cudaStreamPerThread);
    cudaError_t last = cudaGetLastError();
    if (e == cudaSuccess) e = last;
    lt_status code = LT_OK;
    char msg[512] = "";
    if (e != cudaSuccess) {
        code = LT_ERR_PLUGIN;
        snprintf(msg, sizeof msg,
                 "gpu device %d: a kernel or copy failed: %s (%s); an illegal address or a "
                 "launch failure leaves the device unusable for this process",
                 s->device, cudaGetErrorString(e), cudaGetErrorName(e));
    }
    volatile int *flag = th ? &th->host->kerr_flag : NULL;
    if (flag && *flag && e == cudaSuccess) {
        gpu_kerr rec;
        cudaError_t f = cudaMemcpyAsync(&rec, th->kerr, sizeof rec, cudaMemcpyDeviceToHost,
                                        cudaStreamPerThread);
        if (f == cudaSuccess) f = cudaMemsetAsync(th->kerr, 0, sizeof rec, cudaStreamPerThread);
        if (f == cudaSuccess) f = cudaStreamSynchronize(cudaStreamPerThread);
        if (f == cudaSuccess && rec.code != GPU_KERR_NONE) {
            code = LT_ERR_INVALID;
            kerr_message(&rec, msg, sizeof msg);
        } else if (f != cudaSuccess) {
            code = LT_ERR_PLUGIN;
            snprintf(msg, sizeof msg, "gpu device %d: reading a kernel's error record: %s",
                     s->device, cudaGetErrorString(f));
        }
        *flag = 0;
    }
    pthread_mutex_lock(&s->lock);
    if (s->pending != LT_OK && code == LT_OK) {
        code = s->pending;
        snprintf(msg, sizeof msg, "%s", s->pending_msg);
    }
    s->pending = LT_OK;
    s->pending_msg[0] = 0;
    pthread_mutex_unlock(&s->lock);
    if (code == LT_OK && !th) {
        /* gpu_enter failed and set its message directly */
        return LT_ERR_PLUGIN;
    }
    if (code != LT_OK) lt_set_error(ctx, "%s", msg);
    return code;
}
