/* Shared by the gpu accelerator's sources, C (gpu.c, memory.c, thread.c)
 * and CUDA (*.cu): the per-thread state every kernel launches with, the
 * deferred-error path, and the kernel entry points each .cu file defines.
 * Not installed; nothing outside this folder includes it.
 *
 * Streams: every kernel, cuBLAS call and copy goes to cudaStreamPerThread,
 * named explicitly (accelerator.h's ABI 1.6 rule), never to the legacy
 * default stream, so a backend can order a collective after this thread's
 * work with an event on that same stream. The handle is a driver-level
 * alias, so it is the same stream for every CUDA runtime in the process
 * (this plugin links cudart statically; nccl's plugin has its own copy).
 *
 * Threads: setup runs on the thread that will drive the replica, but the
 * ABI lets other threads call in too (the data loader's alloc_host, a dp
 * root replica on the main thread). Each (thread, context) pair gets a
 * gpu_thread slot on first use: the thread's device is set, and the slot
 * holds the thread's cuBLAS handle (made on its first GEMM) and the scratch
 * the reductions need, so kernels never allocate. Slots live until
 * teardown, which frees them whichever thread made them. */
#ifndef LT_GPU_INTERNAL_H
#define LT_GPU_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include "lt/accelerator.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Partial results of one reduction: at most this many blocks write one
 * 8-byte partial each; a one-block pass then combines them in a fixed order
 * (results do not depend on timing). */
#define GPU_MAX_PARTIALS 1024
#define GPU_SCRATCH_BYTES (GPU_MAX_PARTIALS * 8)
/* cuBLAS's workspace, given to each handle at creation (cublasSetWorkspace)
 * so cuBLAS never allocates one during a GEMM; 32 MiB is NVIDIA's
 * recommendation for Hopper. */
#define GPU_BLAS_WORKSPACE ((size_t)32 << 20)

/* What a kernel found wrong on the device (a label out of range): the
 * record lives in device memory (the first writer wins, atomicCAS on code:
 * device atomics, never on host memory, whose atomicity over PCIe depends
 * on the platform), and the writer then raises kerr_flag in the mapped
 * host block with a plain store, so synchronize reads one host word and
 * fetches the record only when something happened. */
enum { GPU_KERR_NONE = 0, GPU_KERR_LABEL_XENT_FWD = 1, GPU_KERR_LABEL_XENT_BWD = 2 };
typedef struct gpu_kerr {
    int code;
    int pad;
    long long row, label, cols;
} gpu_kerr;

/* Host-visible (mapped pinned) results of the synchronizing kernels and the
 * kernel error record; the device writes them through dev_* pointers. */
typedef struct gpu_host_block {
    int kerr_flag;
    double sumsq;
    long long count;
    int finite;
} gpu_host_block;

typedef struct gpu_thread {
    struct gpu_state *owner;
    void *blas;                 /* cublasHandle_t, made on the first GEMM; NULL before */
    void *blas_ws;              /* its workspace (device, GPU_BLAS_WORKSPACE bytes) */
    void *scratch;              /* device, GPU_SCRATCH_BYTES */
    gpu_kerr *kerr;             /* device, zero when nothing was recorded */
    gpu_host_block *host;       /* mapped pinned, read by the host after a sync */
    gpu_host_block *host_dev;   /* the same memory as the device addresses it */
    struct gpu_thread *next;    /* the owner's list of slots */
    pthread_t tid;              /* the thread it belongs to (found again after a cache eviction) */
} gpu_thread;

/* The calling thread's slot for ctx's state, with the thread's current
 * device set to the context's; NULL (with an error parked or set) before
 * setup or when the slot cannot be made. Cheap after the first call. */
gpu_thread *gpu_enter(lt_ctx *ctx);
/* cuBLAS handle of a slot, bound to cudaStreamPerThread; NULL with an
 * error parked when cuBLAS cannot be initialised. */
void *gpu_blas(lt_ctx *ctx, gpu_thread *th);

/* Parks an error for the next synchronize (the first one wins, as later
 * ones are usually its consequences). */
void gpu_fail(lt_ctx *ctx, lt_status code, const char *fmt, ...) LT_PRINTF(3, 4);
/* `kernel` was given a dtype it has no code for; `takes` lists them. */
void gpu_bad_dtype(lt_ctx *ctx, const char *kernel, lt_dtype t, const char *takes);
/* Parks a failed launch or CUDA call (err: a cudaError_t) naming `what`;
 * returns true when err was an error. */
bool gpu_check(lt_ctx *ctx, int err, const char *what);
/* Waits for the calling thread's stream (the synchronizing kernels); false
 * with an error parked when the stream reports one. */
bool gpu_wait(lt_ctx *ctx, const char *what);

/* thread.c: synchronize's body, and teardown's release of every slot. */
lt_status gpu_synchronize_impl(lt_ctx *ctx);
void gpu_threads_release(struct gpu_state *s);

/* gemm.cu */
void gpu_gemm(lt_ctx *ctx, lt_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
              double alpha, const void *a, int64_t lda, const void *b, int64_t ldb, double beta,
              void *c, int64_t ldc);

/* elementwise.cu */
void gpu_fill(lt_ctx *ctx, lt_dtype t, void *x, int64_t n, double v);
void gpu_axpby(lt_ctx *ctx, lt_dtype t, int64_t n, double a, const void *x, double b, void *y);
void gpu_clamp(lt_ctx *ctx, lt_dtype t, void *x, int64_t n, double lo, double hi);
void gpu_add_bias(lt_ctx *ctx, lt_dtype t, void *y, const void *bias, int64_t rows,
                  int64_t cols);
void gpu_sum_rows(lt_ctx *ctx, lt_dtype t, void *out, const void *x, int64_t rows, int64_t cols,
                  double beta);
void gpu_act_fwd(lt_ctx *ctx, lt_dtype t, lt_act f, void *y, const void *x, int64_t n);
void gpu_act_bwd(lt_ctx *ctx, lt_dtype t, lt_act f, void *dx, const void *dy, const void *x,
                 const void *y, int64_t n, double beta);
void gpu_dropout_fwd(lt_ctx *ctx, lt_dtype t, void *y, uint8_t *mask, const void *x, int64_t n,
                     double p, uint64_t seed, uint64_t offset);
void gpu_dropout_bwd(lt_ctx *ctx, lt_dtype t, void *dx, const void *dy, const uint8_t *mask,
                     int64_t n, double p, double beta);

/* loss.cu */
void gpu_xent_fwd(lt_ctx *ctx, lt_dtype t, const void *logits, const int32_t *labels,
                  int64_t rows, int64_t cols, void *probs, void *loss);
void gpu_xent_bwd(lt_ctx *ctx, lt_dtype t, void *dlogits, const void *probs,
                  const int32_t *labels, int64_t rows, int64_t cols, double scale);
void gpu_mse_fwd(lt_ctx *ctx, lt_dtype t, const void *pred, const void *target, int64_t n,
                 void *loss);
void gpu_mse_bwd(lt_ctx *ctx, lt_dtype t, void *dpred, const void *pred, const void *target,
                 int64_t n, double scale);
void gpu_count_correct(lt_ctx *ctx, lt_dtype t, const void *logits, const int32_t *labels,
                       int64_t rows, int64_t cols, int64_t *correct_host);

/* cast.cu */
void gpu_cast(lt_ctx *ctx, lt_dtype dst_t, void *dst, lt_dtype src_t, const void *src, int64_t n);

/* reduce.cu */
void gpu_sumsq(lt_ctx *ctx, lt_dtype t, const void *x, int64_t n, double *out_host);
void gpu_all_finite(lt_ctx *ctx, lt_dtype t, const void *x, int64_t n, bool *out_host);

/* optim.cu */
void gpu_sgd_step(lt_ctx *ctx, lt_dtype t, void *param, const void *grad, void *momentum_buf,
                  int64_t n, const lt_sgd_args *a);
void gpu_adamw_step(lt_ctx *ctx, lt_dtype t, void *param, const void *grad, void *m, void *v,
                    int64_t n, const lt_adamw_args *a);
void gpu_qadam_step(lt_ctx *ctx, lt_dtype t, void *param, const void *m, const void *v, int64_t n,
                    const lt_adamw_args *a);

/* conv.cu */
void gpu_im2col(lt_ctx *ctx, lt_dtype t, const void *x, const lt_conv_geom *g, void *col);
void gpu_col2im(lt_ctx *ctx, lt_dtype t, const void *col, const lt_conv_geom *g, void *x,
                double beta);
void gpu_max_pool_fwd(lt_ctx *ctx, lt_dtype t, const void *x, const lt_conv_geom *g, void *y,
                      int32_t *argmax);
void gpu_max_pool_bwd(lt_ctx *ctx, lt_dtype t, const void *dy, const int32_t *argmax,
                      const lt_conv_geom *g, void *dx, double beta);

/* rand.cu */
void gpu_rand_fill(lt_ctx *ctx, lt_dtype t, void *x, int64_t n, lt_rand_dist dist, double a,
                   double b, uint64_t seed, uint64_t offset);

/* quantize.cu */
void gpu_quantize_u8(lt_ctx *ctx, lt_dtype t, const void *x, int64_t n, int64_t chunk,
                     uint8_t *q, float *minmax);
void gpu_dequantize_u8(lt_ctx *ctx, lt_dtype t, const uint8_t *q, const float *minmax, int64_t n,
                       int64_t chunk, void *y, double beta);

#ifdef __cplusplus
}
#endif
#endif
