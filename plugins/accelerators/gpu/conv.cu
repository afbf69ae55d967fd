/* Convolution lowering (im2col, col2im) and max pooling; the rules of
 * plugins/accelerators/cpu/conv.c and lt_conv_geom in accelerator.h.
 *
 * Every kernel gathers: one thread per output element, which reads all it
 * needs, so no two threads write one element (no atomics, and the same
 * bits on every run). col2im and max_pool_bwd visit their contributions in
 * the order the cpu plugin adds them (kernel row, then column; outputs in
 * index order); a 16-bit col2im or max_pool_bwd sums in fp32 and rounds
 * once, as the cpu one does. max_pool_bwd assumes each argmax lies in its own window,
 * as max_pool_fwd makes them (it looks for an element's contributions
 * among the windows covering it). */
#include <stdint.h>
#include "gpu_cuda.cuh"
#include "common/kernel_args.h"

/* The interval of output indices o with o*s - p + k inside [0, len) for
 * some k in [0, kn), of those whose window covers input index x:
 * o in [ceil((x + p - kn + 1) / s), floor((x + p) / s)] within [0, on). */
__device__ __forceinline__ void covering(int64_t x, int64_t p, int64_t kn, int64_t s, int64_t on,
                                         int64_t *lo, int64_t *hi) {
    int64_t a = x + p - kn + 1, b = x + p;
    int64_t l = a <= 0 ? 0 : (a + s - 1) / s;
    int64_t h = b < 0 ? -1 : b / s;
    *lo = l;
    *hi = h < on - 1 ? h : on - 1; /* inclusive */
}

template <class T> __global__ void k_im2col(const T *x, lt_conv_geom g, T *col) {
    const int64_t plane = g.oh * g.ow, total = g.c * g.kh * g.kw * plane;
    GPU_LOOP(e, total) {
        int64_t row = e / plane, at = e - row * plane;
        int64_t oy = at / g.ow, ox = at - oy * g.ow;
        int64_t j = row % g.kw, i = (row / g.kw) % g.kh, c = row / (g.kw * g.kh);
        int64_t iy = oy * g.sh - g.ph + i, ix = ox * g.sw - g.pw + j;
        bool in = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
        col[e] = in ? x[(c * g.h + iy) * g.w + ix] : Num<T>::st(0);
    }
}

/* x = beta x + every col entry read from it. beta == 0 does not read x,
 * beta == 1 keeps it as stored (the cpu kernel skips that multiply). */
template <class T>
__global__ void k_col2im(const T *col, lt_conv_geom g, T *x, typename Num<T>::C beta) {
    typedef Num<T> N;
    typedef typename N::C C;
    const int64_t plane = g.oh * g.ow, total = g.c * g.h * g.w;
    GPU_LOOP(e, total) {
        int64_t ix = e % g.w, iy = (e / g.w) % g.h, c = e / (g.w * g.h);
        C acc = beta == 0 ? (C)0 : beta == 1 ? N::ld(x[e]) : beta * N::ld(x[e]);
        for (int64_t i = 0; i < g.kh; i++) {
            int64_t t = iy + g.ph - i; /* = oy * sh */
            if (t < 0 || t % g.sh != 0 || t / g.sh >= g.oh) continue;
            int64_t oy = t / g.sh;
            for (int64_t j = 0; j < g.kw; j++) {
                int64_t u = ix + g.pw - j; /* = ox * sw */
                if (u < 0 || u % g.sw != 0 || u / g.sw >= g.ow) continue;
                int64_t ox = u / g.sw;
                acc += N::ld(col[((c * g.kh + i) * g.kw + j) * plane + oy * g.ow + ox]);
            }
        }
        x[e] = N::st(acc);
    }
}

/* The first maximum of the window; a NaN beats every number and the last
 * NaN wins; padding never does. A window wholly in the padding gives 0 and
 * argmax -1, as on the cpu. */
template <class T>
__global__ void k_pool_fwd(const T *x, lt_conv_geom g, T *y, int32_t *arg) {
    typedef Num<T> N;
    typedef typename N::C C;
    const int64_t per = g.oh * g.ow, total = g.c * per;
    GPU_LOOP(o, total) {
        int64_t p = o / per, at = o - p * per;
        int64_t oy = at / g.ow, ox = at - oy * g.ow;
        const T *in = x + p * g.h * g.w;
        C best = 0;
        int64_t where = -1;
        for (int64_t i = 0; i < g.kh; i++) {
            int64_t iy = oy * g.sh - g.ph + i;
            if (iy < 0 || iy >= g.h) continue;
            for (int64_t j = 0; j < g.kw; j++) {
                int64_t ix = ox * g.sw - g.pw + j;
                if (ix < 0 || ix >= g.w) continue;
                C v = N::ld(in[iy * g.w + ix]);
                if (where < 0 || v > best || v != v) {
                    best = v;
                    where = iy * g.w + ix;
                }
            }
        }
        y[o] = N::st(best);
        arg[o] = (int32_t)where;
    }
}

/* dx = beta dx, then each dy added at its argmax: per dx element, the
 * windows covering it in output order. */
template <class T>
__global__ void k_pool_bwd(const T *dy, const int32_t *arg, lt_conv_geom g, T *dx,
                           typename Num<T>::C beta) {
    typedef Num<T> N;
    const int64_t per = g.oh * g.ow, total = g.c * g.h * g.w;
    GPU_LOOP(e, total) {
        int64_t ix = e % g.w, iy = (e / g.w) % g.h, p = e / (g.w * g.h);
        int32_t self = (int32_t)(iy * g.w + ix);
        typename N::C acc = beta == 0 ? (typename N::C)0 : beta == 1 ? N::ld(dx[e]) : beta * N::ld(dx[e]);
        int64_t oy0, oy1, ox0, ox1;
        covering(iy, g.ph, g.kh, g.sh, g.oh, &oy0, &oy1);
        covering(ix, g.pw, g.kw, g.sw, g.ow, &ox0, &ox1);
        for (int64_t oy = oy0; oy <= oy1; oy++)
            for (int64_t ox = ox0; ox <= ox1; ox++) {
                int64_t o = p * per + oy * g.ow + ox;
                if (arg[o] == self) acc += N::ld(dy[o]);
            }
        dx[e] = N::st(acc); /* 16-bit: summed in fp32, rounded once (accelerator.h) */
    }
}

template <class T> static void im2col_t(lt_ctx *ctx, const void *x, const lt_conv_geom *g, void *col) {
    k_im2col<T><<<gpu_grid(g->c * g->kh * g->kw * g->oh * g->ow), GPU_THREADS, 0, GPU_STREAM>>>(
        (const T *)x, *g, (T *)col);
    GPU_LAUNCHED(ctx, "im2col");
}
template <class T>
static void col2im_t(lt_ctx *ctx, const void *col, const lt_conv_geom *g, void *x, double beta) {
    typedef typename Num<T>::C C;
    k_col2im<T><<<gpu_grid(g->c * g->h * g->w), GPU_THREADS, 0, GPU_STREAM>>>((const T *)col, *g,
                                                                               (T *)x, (C)beta);
    GPU_LAUNCHED(ctx, "col2im");
}
template <class T>
static void pool_fwd_t(lt_ctx *ctx, const void *x, const lt_conv_geom *g, void *y, int32_t *arg) {
    k_pool_fwd<T><<<gpu_grid(g->c * g->oh * g->ow), GPU_THREADS, 0, GPU_STREAM>>>((const T *)x, *g,
                                                                                  (T *)y, arg);
    GPU_LAUNCHED(ctx, "max_pool_fwd");
}
template <class T>
static void pool_bwd_t(lt_ctx *ctx, const void *dy, const int32_t *arg, const lt_conv_geom *g,
                       void *dx, double beta) {
    typedef typename Num<T>::C C;
    k_pool_bwd<T><<<gpu_grid(g->c * g->h * g->w), GPU_THREADS, 0, GPU_STREAM>>>(
        (const T *)dy, arg, *g, (T *)dx, (C)beta);
    GPU_LAUNCHED(ctx, "max_pool_bwd");
}

/* Geometry that would index outside the buffers is a caller bug: parked
 * as an error naming the failed condition (the cpu plugin's checks). */
static bool geom_ok(lt_ctx *ctx, const char *kernel, const lt_conv_geom *g, bool pool) {
    char msg[512];
    if (lt_conv_geom_ok("gpu", kernel, g, pool, msg, sizeof msg)) return true;
    gpu_fail(ctx, LT_ERR_INVALID, "%s", msg);
    return false;
}

extern "C" void gpu_im2col(lt_ctx *ctx, lt_dtype t, const void *x, const lt_conv_geom *g,
                           void *col) {
    if (!geom_ok(ctx, "im2col", g, false) || !gpu_enter(ctx)) return;
    GPU_DISPATCH(ctx, "im2col", t, im2col_t, ctx, x, g, col);
}

extern "C" void gpu_col2im(lt_ctx *ctx, lt_dtype t, const void *col, const lt_conv_geom *g,
                           void *x, double beta) {
    if (!geom_ok(ctx, "col2im", g, false) || !gpu_enter(ctx)) return;
    GPU_DISPATCH(ctx, "col2im", t, col2im_t, ctx, col, g, x, beta);
}

extern "C" void gpu_max_pool_fwd(lt_ctx *ctx, lt_dtype t, const void *x, const lt_conv_geom *g,
                                 void *y, int32_t *argmax) {
    if (!geom_ok(ctx, "max_pool_fwd", g, true) || !gpu_enter(ctx)) return;
    GPU_DISPATCH(ctx, "max_pool_fwd", t, pool_fwd_t, ctx, x, g, y, argmax);
}

extern "C" void gpu_max_pool_bwd(lt_ctx *ctx, lt_dtype t, const void *dy, const int32_t *argmax,
                                 const lt_conv_geom *g, void *dx, double beta) {
    if (!geom_ok(ctx, "max_pool_bwd", g, true) || !gpu_enter(ctx)) return;
    GPU_DISPATCH(ctx, "max_pool_bwd", t, pool_bwd_t, ctx, dy, argmax, g, dx, beta);
}
