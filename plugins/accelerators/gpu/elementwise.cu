/* Element-wise kernels: fill, axpby, clamp, add_bias, sum_rows, the
 * activations and dropout, for f32, f64, f16 and bf16. Same expressions,
 * in the same compute type, as plugins/accelerators/cpu/elementwise.c:
 *  - beta == 0 means overwrite (the old output is never read, so NaN
 *    garbage in fresh memory cannot leak in);
 *  - ReLU keeps NaN (x < 0 ? 0 : x) and gates its gradient on the output;
 *  - GELU is the exact erf form (PyTorch's approximate='none');
 *  - dropout's mask comes from rng.cuh's counter-based bits, so it equals
 *    the cpu plugin's for the same (seed, offset), whatever the dtype.
 * Each output element is written by one thread, so in-place calls (y == x)
 * are safe: an element is read before it is written. */
#include <math.h>
#include "gpu_cuda.cuh"
#include "rng.cuh"

#define INV_SQRT_2PI 0.39894228040143267794
#define SQRT1_2 0.70710678118654752440

template <class T> __global__ void k_fill(T *x, int64_t n, T v) {
    GPU_LOOP(i, n) x[i] = v;
}
template <class T> static void fill_t(lt_ctx *ctx, void *x, int64_t n, double v) {
    typedef typename Num<T>::C C;
    k_fill<T><<<gpu_grid(n), GPU_THREADS, 0, GPU_STREAM>>>((T *)x, n, Num<T>::st((C)v));
    GPU_LAUNCHED(ctx, "fill");
}
extern "C" void gpu_fill(lt_ctx *ctx, lt_dtype t, void *x, int64_t n, double v) {
    if (n <= 0 || !gpu_enter(ctx)) return;
    GPU_DISPATCH(ctx, "fill", t, fill_t, ctx, x, n, v);
}

template <class T>
__global__ void k_axpby(int64_t n, typename Num<T>::C a, const T *x, typename Num<T>::C b, T *y) {
    typedef Num<T> N;
    GPU_LOOP(i, n) y[i] = N::st(b == 0 ? a * N::ld(x[i]) : a * N::ld(x[i]) + b * N::ld(y[i]));
}
template <class T>
static void axpby_t(lt_ctx *ctx, int64_t n, double a, const void *x, double b, void *y) {
    typedef typename Num<T>::C C;
    k_axpby<T><<<gpu_grid(n), GPU_THREADS, 0, GPU_STREAM>>>(n, (C)a, (const T *)x, (C)b, (T *)y);
    GPU_LAUNCHED(ctx, "axpby");
}
extern "C" void gpu_axpby(lt_ctx *ctx, lt_dtype t, int64_t n, double a, const void *x, double b,
                          void *y) {
    if (n <= 0 || !gpu_enter(ctx)) return;
    GPU_DISPATCH(ctx, "axpby", t, axpby_t, ctx, n, a, x, b, y);
}

/* Bounds rounded to the dtype first (monotonic, so this is the rounded
 * clamp); a kept element keeps its bits, NaN included. */
template <class T>
__global__ void k_clamp(T *x, int64_t n, T lo_t, T hi_t) {
    typedef Num<T> N;
    typedef typename N::C C;
    const C l = N::ld(lo_t), h = N::ld(hi_t);
    GPU_LOOP(i, n) {
        C v = N::ld(x[i]);
        if (v < l) x[i] = lo_t;
        else if (v > h) x[i] = hi_t;
    }
}
template <class T> static void clamp_t(lt_ctx *ctx, void *x, int64_t n, double lo, double hi) {
    typedef typename Num<T>::C C;
    k_clamp<T><<<gpu_grid(n), GPU_THREADS, 0, GPU_STREAM>>>((T *)x, n, Num<T>::st((C)lo),
                                                             Num<T>::st((C)hi));
    GPU_LAUNCHED(ctx, "clamp");
}
extern "C" void gpu_clamp(lt_ctx *ctx, lt_dtype t, void *x, int64_t n, double lo, double hi) {
    if (n <= 0 || !gpu_enter(ctx)) return;
    GPU_DISPATCH(ctx, "clamp", t, clamp_t, ctx, x, n, lo, hi);
}

template <class T> __global__ void k_add_bias(T *y, const T *bias, int64_t rows, int64_t cols) {
    typedef Num<T> N;
    GPU_LOOP(i, rows * cols) y[i] = N::st(N::ld(y[i]) + N::ld(bias[i % cols]));
}
template <class T>
static void add_bias_t(lt_ctx *ctx, void *y, const void *bias, int64_t rows, int64_t cols) {
    k_add_bias<T><<<gpu_grid(rows * cols), GPU_THREADS, 0, GPU_STREAM>>>((T *)y, (const T *)bias,
                                                                         rows, cols);
    GPU_LAUNCHED(ctx, "add_bias");
}
extern "C" void gpu_add_bias(lt_ctx *ctx, lt_dtype t, void *y, const void *bias, int64_t rows,
                             int64_t cols) {
    if (rows <= 0 || cols <= 0 || !gpu_enter(ctx)) return;
    GPU_DISPATCH(ctx, "add_bias", t, add_bias_t, ctx, y, bias, rows, cols);
}

/* One thread per column, rows added in order onto beta * out: the cpu
 * kernel's order (nvcc may fuse a multiply and an add, so the last bit
 * can differ; the ABI asks for no more); 16-bit sums stay in fp32
 * and are rounded once. Neighbouring threads read neighbouring columns, so
 * every row is read coalesced. */
template <class T>
__global__ void k_sum_rows(T *out, const T *x, int64_t rows, int64_t cols, typename Num<T>::C beta) {
    typedef Num<T> N;
    typedef typename N::C C;
    GPU_LOOP(c, cols) {
        C acc = beta == 0 ? (C)0 : beta * N::ld(out[c]);
        for (int64_t r = 0; r < rows; r++) acc += N::ld(x[r * cols + c]);
        out[c] = N::st(acc);
    }
}
template <class T>
static void sum_rows_t(lt_ctx *ctx, void *out, const void *x, int64_t rows, int64_t cols,
                       double beta) {
    typedef typename Num<T>::C C;
    k_sum_rows<T><<<gpu_grid(cols), GPU_THREADS, 0, GPU_STREAM>>>((T *)out, (const T *)x, rows,
                                                                  cols, (C)beta);
    GPU_LAUNCHED(ctx, "sum_rows");
}
extern "C" void gpu_sum_rows(lt_ctx *ctx, lt_dtype t, void *out, const void *x, int64_t rows,
                             int64_t cols, double beta) {
    if (cols <= 0 || !gpu_enter(ctx)) return;
    if (rows < 0) rows = 0;
    GPU_DISPATCH(ctx, "sum_rows", t, sum_rows_t, ctx, out, x, rows, cols, beta);
}

/* ---- activations ------------------------------------------------------------ */

template <class T> __global__ void k_act_fwd(int f, T *y, const T *x, int64_t n) {
    typedef Num<T> N;
    typedef typename N::C C;
    GPU_LOOP(i, n) {
        C v = N::ld(x[i]);
        if (f == LT_ACT_RELU)
            y[i] = v < 0 ? N::st((C)0) : x[i];
        else if (f == LT_ACT_TANH)
            y[i] = N::st(gpu_tanh(v));
        else
            y[i] = N::st((C)0.5 * v * (1 + gpu_erf(v * (C)SQRT1_2)));
    }
}
template <class T> static void act_fwd_t(lt_ctx *ctx, int f, void *y, const void *x, int64_t n) {
    k_act_fwd<T><<<gpu_grid(n), GPU_THREADS, 0, GPU_STREAM>>>(f, (T *)y, (const T *)x, n);
    GPU_LAUNCHED(ctx, "act_fwd");
}
extern "C" void gpu_act_fwd(lt_ctx *ctx, lt_dtype t, lt_act f, void *y, const void *x, int64_t n) {
    if (f != LT_ACT_RELU && f != LT_ACT_TANH && f != LT_ACT_GELU) {
        gpu_fail(ctx, LT_ERR_INVALID, "gpu act_fwd: unknown activation %d", (int)f);
        return;
    }
    if (n <= 0 || !gpu_enter(ctx)) return;
    GPU_DISPATCH(ctx, "act_fwd", t, act_fwd_t, ctx, (int)f, y, x, n);
}

template <class T>
__global__ void k_act_bwd(int f, T *dx, const T *dy, const T *x, const T *y, int64_t n,
                          typename Num<T>::C beta) {
    typedef Num<T> N;
    typedef typename N::C C;
    GPU_LOOP(i, n) {
        C g;
        if (f == LT_ACT_RELU) {
            g = N::ld(y[i]) <= 0 ? (C)0 : N::ld(dy[i]);
        } else if (f == LT_ACT_TANH) {
            C o = N::ld(y[i]);
            g = N::ld(dy[i]) * (1 - o * o);
        } else {
            C v = N::ld(x[i]);
            C cdf = (C)0.5 * (1 + gpu_erf(v * (C)SQRT1_2));
            C pdf = (C)INV_SQRT_2PI * gpu_exp((C)-0.5 * v * v);
            g = N::ld(dy[i]) * (cdf + v * pdf);
        }
        dx[i] = N::st(beta == 0 ? g : beta * N::ld(dx[i]) + g);
    }
}
template <class T>
static void act_bwd_t(lt_ctx *ctx, int f, void *dx, const void *dy, const void *x, const void *y,
                      int64_t n, double beta) {
    typedef typename Num<T>::C C;
    k_act_bwd<T><<<gpu_grid(n), GPU_THREADS, 0, GPU_STREAM>>>(
        f, (T *)dx, (const T *)dy, (const T *)x, (const T *)y, n, (C)beta);
    GPU_LAUNCHED(ctx, "act_bwd");
}
extern "C" void gpu_act_bwd(lt_ctx *ctx, lt_dtype t, lt_act f, void *dx, const void *dy,
                            const void *x, const void *y, int64_t n, double beta) {
    if (f != LT_ACT_RELU && f != LT_ACT_TANH && f != LT_ACT_GELU) {
        gpu_fail(ctx, LT_ERR_INVALID, "gpu act_bwd: unknown activation %d", (int)f);
        return;
    }
    if (n <= 0 || !gpu_enter(ctx)) return;
    GPU_DISPATCH(ctx, "act_bwd", t, act_bwd_t, ctx, (int)f, dx, dy, x, y, n, beta);
}

/* ---- dropout ------------------------------------------------------------------ */

template <class T>
__global__ void k_dropout_fwd(T *y, uint8_t *mask, const T *x, int64_t n, uint64_t thr,
                              typename Num<T>::C scale, uint64_t key, uint64_t off) {
    typedef Num<T> N;
    GPU_LOOP(i, n) {
        uint8_t keep = (gpu_rng_bits(key, off + (uint64_t)i) >> 11) >= thr;
        mask[i] = keep;
        y[i] = keep ? N::st(N::ld(x[i]) * scale) : N::st(0);
    }
}
template <class T>
static void dropout_fwd_t(lt_ctx *ctx, void *y, uint8_t *mask, const void *x, int64_t n,
                          uint64_t thr, double scale, uint64_t key, uint64_t off) {
    typedef typename Num<T>::C C;
    k_dropout_fwd<T><<<gpu_grid(n), GPU_THREADS, 0, GPU_STREAM>>>((T *)y, mask, (const T *)x, n,
                                                                  thr, (C)scale, key, off);
    GPU_LAUNCHED(ctx, "dropout_fwd");
}

template <class T>
__global__ void k_dropout_bwd(T *dx, const T *dy, const uint8_t *mask, int64_t n,
                              typename Num<T>::C scale, typename Num<T>::C beta) {
    typedef Num<T> N;
    typedef typename N::C C;
    GPU_LOOP(i, n) {
        C g = mask[i] ? N::ld(dy[i]) * scale : (C)0;
        dx[i] = N::st(beta == 0 ? g : beta * N::ld(dx[i]) + g);
    }
}
template <class T>
static void dropout_bwd_t(lt_ctx *ctx, void *dx, const void *dy, const uint8_t *mask, int64_t n,
                          double scale, double beta) {
    typedef typename Num<T>::C C;
    k_dropout_bwd<T><<<gpu_grid(n), GPU_THREADS, 0, GPU_STREAM>>>((T *)dx, (const T *)dy, mask, n,
                                                                  (C)scale, (C)beta);
    GPU_LAUNCHED(ctx, "dropout_bwd");
}

static bool dropout_p_ok(lt_ctx *ctx, double p) {
    if (p >= 0 && p <= 1) return true;
    gpu_fail(ctx, LT_ERR_INVALID, "gpu dropout: p = %g is outside [0, 1]", p);
    return false;
}
/* 1 / (1 - p), and 0 for p == 1 (nothing kept; PyTorch gives zeros). */
static double keep_scale(double p) { return p < 1 ? 1 / (1 - p) : 0; }

extern "C" void gpu_dropout_fwd(lt_ctx *ctx, lt_dtype t, void *y, uint8_t *mask, const void *x,
                                int64_t n, double p, uint64_t seed, uint64_t offset) {
    if (!dropout_p_ok(ctx, p) || n <= 0 || !gpu_enter(ctx)) return;
    /* p * 2^53 is exact in double: the same integer threshold everywhere */
    uint64_t thr = (uint64_t)ceil(p * 0x1p53);
    GPU_DISPATCH(ctx, "dropout_fwd", t, dropout_fwd_t, ctx, y, mask, x, n, thr, keep_scale(p),
                 gpu_rng_key(seed), offset);
}

extern "C" void gpu_dropout_bwd(lt_ctx *ctx, lt_dtype t, void *dx, const void *dy,
                                const uint8_t *mask, int64_t n, double p, double beta) {
    if (!dropout_p_ok(ctx, p) || n <= 0 || !gpu_enter(ctx)) return;
    GPU_DISPATCH(ctx, "dropout_bwd", t, dropout_bwd_t, ctx, dx, dy, mask, n, keep_scale(p), beta);
}
