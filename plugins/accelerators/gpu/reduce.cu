/* The reductions the trainer reads on the host: the sum of squares
 * (gradient-norm clipping) and the finiteness check (loss scaling), on
 * f32, f64, f16 and bf16. Both synchronize: the result is written by the
 * device into the thread's mapped pinned block, read after the stream
 * drains.
 *
 * sumsq accumulates in double (as the cpu plugin does, so a million small
 * squares are not lost), each block into one partial in the thread's
 * scratch, then one block adds the partials in index order: no atomics,
 * the same bits on every run. all_finite tests the exponent bits (all ones
 * means inf or NaN), an integer test no compiler can fold away. */
#include <math.h>
#include "gpu_cuda.cuh"

template <class T>
__global__ void k_sumsq(const T *x, int64_t n, double *parts) {
    __shared__ double sh[GPU_THREADS];
    double acc = 0;
    GPU_LOOP(i, n) {
        double v = (double)Num<T>::ld(x[i]);
        acc += v * v;
    }
    double total = gpu_block_sum(acc, sh);
    if (threadIdx.x == 0) parts[blockIdx.x] = total;
}

__global__ void k_sum_parts(const double *parts, int nparts, double *out) {
    __shared__ double sh[GPU_THREADS];
    double acc = 0;
    for (int i = threadIdx.x; i < nparts; i += GPU_THREADS) acc += parts[i];
    double total = gpu_block_sum(acc, sh);
    if (threadIdx.x == 0) *out = total;
}

template <class T>
static void sumsq_t(lt_ctx *ctx, gpu_thread *th, const void *x, int64_t n, double *out_host) {
    double *parts = (double *)th->scratch;
    unsigned grid = gpu_reduce_grid(n);
    k_sumsq<T><<<grid, GPU_THREADS, 0, GPU_STREAM>>>((const T *)x, n, parts);
    if (GPU_LAUNCHED(ctx, "sumsq")) return;
    k_sum_parts<<<1, GPU_THREADS, 0, GPU_STREAM>>>(parts, (int)grid, &th->host_dev->sumsq);
    if (GPU_LAUNCHED(ctx, "sumsq") || !gpu_wait(ctx, "sumsq")) return;
    *out_host = ((volatile gpu_host_block *)th->host)->sumsq;
}

extern "C" void gpu_sumsq(lt_ctx *ctx, lt_dtype t, const void *x, int64_t n, double *out_host) {
    *out_host = NAN; /* what a failure leaves */
    gpu_thread *th = gpu_enter(ctx);
    if (!th) return;
    if (n <= 0) {
        if (t >= LT_F32 && t <= LT_BF16) *out_host = 0;
        else gpu_bad_dtype(ctx, "sumsq", t, "f32, f64, f16 or bf16");
        return;
    }
    GPU_DISPATCH(ctx, "sumsq", t, sumsq_t, ctx, th, x, n, out_host);
}

/* ---- all_finite ------------------------------------------------------------------ */

/* U: the unsigned integer as wide as an element; E: its exponent mask. */
template <class U, U E>
__global__ void k_finite(const U *x, int64_t n, int *bad_parts) {
    __shared__ int any;
    if (threadIdx.x == 0) any = 0;
    __syncthreads();
    int bad = 0;
    GPU_LOOP(i, n) bad |= (x[i] & E) == E;
    if (bad) any = 1; /* benign race: every writer writes 1 */
    __syncthreads();
    if (threadIdx.x == 0) bad_parts[blockIdx.x] = any;
}

__global__ void k_finite_finish(const int *bad_parts, int nparts, int *out) {
    __shared__ int any;
    if (threadIdx.x == 0) any = 0;
    __syncthreads();
    int bad = 0;
    for (int i = threadIdx.x; i < nparts; i += GPU_THREADS) bad |= bad_parts[i];
    if (bad) any = 1;
    __syncthreads();
    if (threadIdx.x == 0) *out = !any;
}

template <class U, U E>
static void finite_t(lt_ctx *ctx, gpu_thread *th, const void *x, int64_t n, bool *out_host) {
    int *parts = (int *)th->scratch;
    unsigned grid = gpu_reduce_grid(n);
    k_finite<U, E><<<grid, GPU_THREADS, 0, GPU_STREAM>>>((const U *)x, n, parts);
    if (GPU_LAUNCHED(ctx, "all_finite")) return;
    k_finite_finish<<<1, GPU_THREADS, 0, GPU_STREAM>>>(parts, (int)grid, &th->host_dev->finite);
    if (GPU_LAUNCHED(ctx, "all_finite") || !gpu_wait(ctx, "all_finite")) return;
    *out_host = ((volatile gpu_host_block *)th->host)->finite != 0;
}

extern "C" void gpu_all_finite(lt_ctx *ctx, lt_dtype t, const void *x, int64_t n, bool *out_host) {
    *out_host = false;
    gpu_thread *th = gpu_enter(ctx);
    if (!th) return;
    if (n <= 0 && t >= LT_F32 && t <= LT_BF16) {
        *out_host = true;
        return;
    }
    switch (t) {
    case LT_F32: finite_t<uint32_t, 0x7F800000u>(ctx, th, x, n, out_host); break;
    case LT_F64: finite_t<unsigned long long, 0x7FF0000000000000ull>(ctx, th, x, n, out_host); break;
    case LT_F16: finite_t<uint16_t, (uint16_t)0x7C00u>(ctx, th, x, n, out_host); break;
    case LT_BF16: finite_t<uint16_t, (uint16_t)0x7F80u>(ctx, th, x, n, out_host); break;
    default: gpu_bad_dtype(ctx, "all_finite", t, "f32, f64, f16 or bf16");
    }
}
