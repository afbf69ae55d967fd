/* Losses: softmax cross-entropy, mean squared error, and the accuracy
 * count; the expressions of plugins/accelerators/cpu/loss.c.
 *
 * xent_fwd and count_correct give each row to one warp (rows are a batch:
 * many, each a few to a few thousand classes). Sums over a row and over
 * rows are kept in double, like the cpu plugin; per-element maths stays in
 * the compute type. Scalar results (the mean losses, the count) come from
 * a two-pass reduction: each block writes one partial into the thread's
 * preallocated scratch (at most GPU_MAX_PARTIALS), then one block adds them
 * in index order, so a result does not depend on scheduling.
 *
 * A label outside [0, cols) is recorded in the thread's device error record
 * and reported by the next synchronize (the cpu plugin's message); that
 * row's loss is NaN so a caller that does not synchronize still notices.
 * count_correct, which synchronizes, copies its count to the host. */
#include <math.h>
#include "gpu_cuda.cuh"

#define WARPS (GPU_THREADS / 32)

__device__ __forceinline__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}
template <class C> __device__ __forceinline__ C warp_max(C v) {
    for (int o = 16; o > 0; o >>= 1) {
        C w = __shfl_xor_sync(0xFFFFFFFFu, v, o);
        v = w > v ? w : v;
    }
    return v;
}

/* The first bad label wins the device record; the host flag is raised
 * after it (gpu_internal.h). */
__device__ void record_label(gpu_kerr *k, int *flag, int code, int64_t row, int32_t label,
                             int64_t cols) {
    if (atomicCAS(&k->code, 0, code) == 0) {
        k->row = row;
        k->label = label;
        k->cols = cols;
        __threadfence_system();
        *(volatile int *)flag = 1;
    }
}

/* Sums parts[0..nparts) in a fixed order and stores total / div rounded
 * to T into out[0] (0 when div is 0). One block of GPU_THREADS. */
template <class T>
__global__ void k_finish_mean(const double *parts, int nparts, double div, T *out) {
    __shared__ double sh[GPU_THREADS];
    double acc = 0;
    for (int i = threadIdx.x; i < nparts; i += GPU_THREADS) acc += parts[i];
    double total = gpu_block_sum(acc, sh);
    typedef typename Num<T>::C C;
    if (threadIdx.x == 0) out[0] = Num<T>::st(div > 0 ? (C)(total / div) : (C)0);
}

/* ---- xent_fwd ------------------------------------------------------------------- */

template <class T>
__global__ void k_xent_fwd(const T *logits, const int32_t *labels, int64_t rows, int64_t cols,
                           T *probs, double *parts, gpu_kerr *kerr, int *flag) {
    typedef Num<T> N;
    typedef typename N::C C;
    __shared__ double sh[GPU_THREADS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    double block_loss = 0; /* this warp's rows, in lane 0 */
    for (int64_t r = (int64_t)blockIdx.x * WARPS + warp; r < rows; r += (int64_t)gridDim.x * WARPS) {
        const T *x = logits + r * cols;
        T *p = probs + r * cols;
        const int32_t label = labels[r];
        const bool ok = label >= 0 && label < cols;
        const C at_label = ok ? N::ld(x[label]) : (C)0; /* before p (maybe x) is written */
        C mx = N::ld(x[0]); /* a NaN here stays (the cpu order: x[0] first) */
        for (int64_t c = lane; c < cols; c += 32) {
            C v = N::ld(x[c]);
            mx = v > mx ? v : mx;
        }
        mx = warp_max(mx);
        double sum = 0;
        for (int64_t c = lane; c < cols; c += 32) sum += (double)gpu_exp(N::ld(x[c]) - mx);
        sum = warp_sum(sum);
        const C inv = (C)(1 / sum);
        for (int64_t c = lane; c < cols; c += 32) p[c] = N::st(gpu_exp(N::ld(x[c]) - mx) * inv);
        if (lane == 0) {
            if (ok) {
                block_loss += log(sum) - (double)(at_label - mx);
            } else {
                record_label(kerr, flag, GPU_KERR_LABEL_XENT_FWD, r, label, cols);
                block_loss += NAN;
            }
        }
    }
    double total = gpu_block_sum(lane == 0 ? block_loss : 0.0, sh);
    if (threadIdx.x == 0) parts[blockIdx.x] = total;
}

template <class T>
static void xent_fwd_t(lt_ctx *ctx, gpu_thread *th, const void *logits, const int32_t *labels,
                       int64_t rows, int64_t cols, void *probs, void *loss) {
    double *parts = (double *)th->scratch;
    int64_t want = (rows + WARPS - 1) / WARPS;
    int grid = (int)(want < 1 ? 1 : want > GPU_MAX_PARTIALS ? GPU_MAX_PARTIALS : want);
    if (rows > 0) {
        k_xent_fwd<T><<<grid, GPU_THREADS, 0, GPU_STREAM>>>((const T *)logits, labels, rows, cols,
                                                            (T *)probs, parts, th->kerr,
                                                            &th->host_dev->kerr_flag);
        if (GPU_LAUNCHED(ctx, "xent_fwd")) return;
    }
    k_finish_mean<T><<<1, GPU_THREADS, 0, GPU_STREAM>>>(parts, rows > 0 ? grid : 0, (double)rows,
                                                        (T *)loss);
    GPU_LAUNCHED(ctx, "xent_fwd");
}

extern "C" void gpu_xent_fwd(lt_ctx *ctx, lt_dtype t, const void *logits, const int32_t *labels,
                             int64_t rows, int64_t cols, void *probs, void *loss) {
    if (cols < 1) {
        gpu_fail(ctx, LT_ERR_INVALID, "gpu xent_fwd: %lld classes; need at least 1",
                 (long long)cols);
        return;
    }
    gpu_thread *th = gpu_enter(ctx);
    if (!th) return;
    GPU_DISPATCH(ctx, "xent_fwd", t, xent_fwd_t, ctx, th, logits, labels, rows, cols, probs, loss);
}

/* ---- xent_bwd: one thread per element; may run in place (dlogits == probs),
 * each element reading only itself. ---- */

template <class T>
__global__ void k_xent_bwd(T *d, const T *p, const int32_t *labels, int64_t rows, int64_t cols,
                           typename Num<T>::C scale, gpu_kerr *kerr, int *flag) {
    typedef Num<T> N;
    typedef typename N::C C;
    GPU_LOOP(i, rows * cols) {
        int64_t r = i / cols, c = i - r * cols;
        int32_t label = labels[r];
        bool ok = label >= 0 && label < cols;
        if (!ok && c == 0) record_label(kerr, flag, GPU_KERR_LABEL_XENT_BWD, r, label, cols);
        C v = N::ld(p[i]);
        d[i] = N::st(ok && c == label ? scale * (v - 1) : scale * v);
    }
}
template <class T>
static void xent_bwd_t(lt_ctx *ctx, gpu_thread *th, void *dlogits, const void *probs,
                       const int32_t *labels, int64_t rows, int64_t cols, double scale) {
    typedef typename Num<T>::C C;
    k_xent_bwd<T><<<gpu_grid(rows * cols), GPU_THREADS, 0, GPU_STREAM>>>(
        (T *)dlogits, (const T *)probs, labels, rows, cols, (C)scale, th->kerr,
        &th->host_dev->kerr_flag);
    GPU_LAUNCHED(ctx, "xent_bwd");
}
extern "C" void gpu_xent_bwd(lt_ctx *ctx, lt_dtype t, void *dlogits, const void *probs,
                             const int32_t *labels, int64_t rows, int64_t cols, double scale) {
    if (rows <= 0 || cols <= 0) return;
    gpu_thread *th = gpu_enter(ctx);
    if (!th) return;
    GPU_DISPATCH(ctx, "xent_bwd", t, xent_bwd_t, ctx, th, dlogits, probs, labels, rows, cols, scale);
}

/* ---- mse ---------------------------------------------------------------------- */

template <class T>
__global__ void k_mse_parts(const T *pred, const T *target, int64_t n, double *parts) {
    typedef Num<T> N;
    __shared__ double sh[GPU_THREADS];
    double acc = 0;
    GPU_LOOP(i, n) {
        double d = (double)N::ld(pred[i]) - (double)N::ld(target[i]);
        acc += d * d;
    }
    double total = gpu_block_sum(acc, sh);
    if (threadIdx.x == 0) parts[blockIdx.x] = total;
}
template <class T>
static void mse_fwd_t(lt_ctx *ctx, gpu_thread *th, const void *pred, const void *target,
                      int64_t n, void *loss) {
    double *parts = (double *)th->scratch;
    unsigned grid = gpu_reduce_grid(n);
    if (n > 0) {
        k_mse_parts<T><<<grid, GPU_THREADS, 0, GPU_STREAM>>>((const T *)pred, (const T *)target, n,
                                                             parts);
        if (GPU_LAUNCHED(ctx, "mse_fwd")) return;
    }
    k_finish_mean<T><<<1, GPU_THREADS, 0, GPU_STREAM>>>(parts, n > 0 ? (int)grid : 0, (double)n,
                                                        (T *)loss);
    GPU_LAUNCHED(ctx, "mse_fwd");
}
extern "C" void gpu_mse_fwd(lt_ctx *ctx, lt_dtype t, const void *pred, const void *target,
                            int64_t n, void *loss) {
    gpu_thread *th = gpu_enter(ctx);
    if (!th) return;
    GPU_DISPATCH(ctx, "mse_fwd", t, mse_fwd_t, ctx, th, pred, target, n, loss);
}

template <class T>
__global__ void k_mse_bwd(T *dpred, const T *pred, const T *target, int64_t n,
                          typename Num<T>::C k) {
    typedef Num<T> N;
    GPU_LOOP(i, n) dpred[i] = N::st(k * (N::ld(pred[i]) - N::ld(target[i])));
}
template <class T>
static void mse_bwd_t(lt_ctx *ctx, void *dpred, const void *pred, const void *target, int64_t n,
                      double k) {
    typedef typename Num<T>::C C;
    k_mse_bwd<T><<<gpu_grid(n), GPU_THREADS, 0, GPU_STREAM>>>((T *)dpred, (const T *)pred,
                                                              (const T *)target, n, (C)k);
    GPU_LAUNCHED(ctx, "mse_bwd");
}
extern "C" void gpu_mse_bwd(lt_ctx *ctx, lt_dtype t, void *dpred, const void *pred,
                            const void *target, int64_t n, double scale) {
    if (n <= 0 || !gpu_enter(ctx)) return;
    double k = 2 * scale / (double)n;
    GPU_DISPATCH(ctx, "mse_bwd", t, mse_bwd_t, ctx, dpred, pred, target, n, k);
}

/* ---- count_correct ---------------------------------------------------------------- */

/* The arg-max of torch.argmax: the first maximum, and the first NaN beats
 * every number. (v, i) is better than (w, j) when it wins that rule. */
template <class C> __device__ __forceinline__ bool better(C v, int64_t i, C w, int64_t j) {
    bool vn = v != v, wn = w != w;
    if (vn || wn) return vn && (!wn || i < j);
    return v > w || (v == w && i < j);
}

template <class T>
__global__ void k_count(const T *logits, const int32_t *labels, int64_t rows, int64_t cols,
                        long long *parts) {
    typedef Num<T> N;
    typedef typename N::C C;
    __shared__ long long sh[WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    long long hits = 0;
    for (int64_t r = (int64_t)blockIdx.x * WARPS + warp; r < rows; r += (int64_t)gridDim.x * WARPS) {
        const T *x = logits + r * cols;
        C best = N::ld(x[0]);
        int64_t at = 0;
        for (int64_t c = lane; c < cols; c += 32) {
            C v = N::ld(x[c]);
            if (better(v, c, best, at)) best = v, at = c;
        }
        for (int o = 16; o > 0; o >>= 1) {
            C v = __shfl_xor_sync(0xFFFFFFFFu, best, o);
            int64_t i = __shfl_xor_sync(0xFFFFFFFFu, at, o);
            if (better(v, i, best, at)) best = v, at = i;
        }
        if (lane == 0) hits += at == (int64_t)labels[r];
    }
    if (lane == 0) sh[warp] = hits;
    __syncthreads();
    if (threadIdx.x == 0) {
        long long total = 0;
        for (int w = 0; w < WARPS; w++) total += sh[w];
        parts[blockIdx.x] = total;
    }
}

__global__ void k_count_finish(const long long *parts, int nparts, long long *out) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        long long total = 0;
        for (int i = 0; i < nparts; i++) total += parts[i];
        *out = total;
    }
}

template <class T>
static void count_t(lt_ctx *ctx, gpu_thread *th, const void *logits, const int32_t *labels,
                    int64_t rows, int64_t cols, int64_t *correct_host) {
    long long *parts = (long long *)th->scratch;
    int64_t want = (rows + WARPS - 1) / WARPS;
    int grid = (int)(want < 1 ? 1 : want > GPU_MAX_PARTIALS ? GPU_MAX_PARTIALS : want);
    k_count<T><<<grid, GPU_THREADS, 0, GPU_STREAM>>>((const T *)logits, labels, rows, cols, parts);
    if (GPU_LAUNCHED(ctx, "count_correct")) return;
    k_count_finish<<<1, 32, 0, GPU_STREAM>>>(parts, grid, &th->host_dev->count);
    if (GPU_LAUNCHED(ctx, "count_correct") || !gpu_wait(ctx, "count_correct")) return;
    *correct_host = (int64_t)((volatile gpu_host_block *)th->host)->count;
}

extern "C" void gpu_count_correct(lt_ctx *ctx, lt_dtype t, const void *logits,
                                  const int32_t *labels, int64_t rows, int64_t cols,
                                  int64_t *correct_host) {
    *correct_host = 0;
    if (cols < 1 || rows <= 0) return;
    gpu_thread *th = gpu_enter(ctx);
    if (!th) return;
    GPU_DISPATCH(ctx, "count_correct", t, count_t, ctx, th, logits, labels, rows, cols,
                 correct_host);
}
