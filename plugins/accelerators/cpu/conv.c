/* Convolution lowering (im2col and its adjoint col2im) and max pooling.
 * The GEMMs of a convolution run through gemm.c; these only move data.
 * Unit-stride im2col and col2im go through a padded copy (conv_padded.c),
 * 2x2 pooling through vectors (pool_2x2.c).
 * f32, f64, f16 and bf16: im2col and max_pool_fwd copy elements as stored
 * (compared in fp32); the 16-bit col2im sums in fp32 and rounds once
 * (DEF_COL2IM_HALF); max_pool_bwd sums in fp32 and rounds once (see there). */
#include <math.h>
#include <string.h>
#include "cast_simd.h"
#include "conv_padded.h"
#include "pool_2x2.h"
#include "cpu_internal.h"
#include "common/kernel_args.h"

/* The output columns ox whose input column ox*sw - pw + j lies inside
 * [0, w): [*lo, *hi). */
static void valid_range(const lt_conv_geom *g, int64_t j, int64_t *lo, int64_t *hi) {
    int64_t off = j - g->pw; /* input column of ox = 0 */
    int64_t a = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
    int64_t b = g->w - off <= 0 ? 0 : (g->w - off + g->sw - 1) / g->sw;
    if (b > g->ow) b = g->ow;
    *lo = a < b ? a : b;
    *hi = b;
}

/* The same for input columns inside [x0, x1), a part of [0, w). */
static void window_range(const lt_conv_geom *g, int64_t j, int64_t x0, int64_t x1, int64_t *lo,
                         int64_t *hi) {
    int64_t off = j - g->pw;
    int64_t a = x0 - off <= 0 ? 0 : (x0 - off + g->sw - 1) / g->sw;
    int64_t b = x1 - off <= 0 ? 0 : (x1 - off + g->sw - 1) / g->sw;
    if (b > g->ow) b = g->ow;
    *lo = a < b ? a : b;
    *hi = b;
}

/* pool_2x2.c's nan_min: the magnitude bits of a 16-bit infinity */
#define CPU_NAN_MIN_f32 0
#define CPU_NAN_MIN_f64 0
#define CPU_NAN_MIN_f16 0x7c00
#define CPU_NAN_MIN_bf16 0x7f80
#define POOL_STAGE 4096 /* floats: a 16-bit plane widened at once */
#define DEF_CONV(T, S, C, LD, ST)                                                            \
    static CPU_HOT void im2col_##S(const T *x, const lt_conv_geom *g, T *col) {              \
        if (cpu_im2col_padded_##S(x, g, col)) return;                                        \
        int64_t plane = g->oh * g->ow;                                                       \
        for (int64_t c = 0; c < g->c; c++)                                                   \
            for (int64_t i = 0; i < g->kh; i++)                                              \
                for (int64_t j = 0; j < g->kw; j++) {                                        \
                    T *row = col + ((c * g->kh + i) * g->kw + j) * plane;                    \
                    int64_t lo, hi;                                                          \
                    valid_range(g, j, &lo, &hi);                                             \
                    for (int64_t oy = 0; oy < g->oh; oy++) {                                 \
                        T *out = row + oy * g->ow;                                           \
                        int64_t iy = oy * g->sh - g->ph + i;                                 \
                        if (iy < 0 || iy >= g->h) {                                          \
                            memset(out, 0, (size_t)g->ow * sizeof(T));                       \
                            continue;                                                        \
                        }                                                                    \
                        const T *in = x + (c * g->h + iy) * g->w;                            \
                        int64_t off = j - g->pw;                                             \
                        for (int64_t ox = 0; ox < lo; ox++) out[ox] = 0;                     \
                        if (g->sw == 1 && hi > lo)                                           \
                            memcpy(out + lo, in + lo + off, (size_t)(hi - lo) * sizeof(T));  \
                        else if (g->sw != 1)                                                 \
                            for (int64_t ox = lo; ox < hi; ox++) out[ox] = in[ox * g->sw + off]; \
                        for (int64_t ox = hi; ox < g->ow; ox++) out[ox] = 0;                 \
                    }                                                                        \
                }                                                                            \
    }                                                                                        \
    /* 2x2 windows, stride 2, no padding: the CNN case, without the bounds                   \
     * checks of the general loop. The chosen element is stored as it is (no                 \
     * rounding to undo). A 16-bit plane that fits the stage is first widened                \
     * whole by the vector casts when the CPU has them (F16C): the CNN's rows                \
     * are 7 or 14 outputs, too short for this loop to vectorise, and f16's                  \
     * scalar LD cost the most of this kernel. */                                            \
    static CPU_HOT void max_pool_2x2_##S(const T *x, const lt_conv_geom *g, T *y,            \
                                         int32_t *arg, cpu_cast_fn widen, float *stage) {    \
        int64_t plane = g->h * g->w;                                                         \
        for (int64_t p = 0; p < g->c; p++) {                                                 \
            const T *in = x + p * plane;                                                     \
            T *out = y + p * g->oh * g->ow;                                                  \
            int32_t *am = arg + p * g->oh * g->ow;                                           \
            const float *wide = NULL;                                                        \
            if (sizeof(T) < sizeof(C) && widen && plane <= POOL_STAGE) {                     \
                widen(stage, in, plane);                                                     \
                wide = stage;                                                                \
            }                                                                                \
            for (int64_t oy = 0; oy < g->oh; oy++) {                                         \
                const T *r0 = in + 2 * oy * g->w, *r1 = r0 + g->w;                           \
                const float *w0 = wide ? wide + 2 * oy * g->w : NULL;                        \
                const float *w1 = wide ? w0 + g->w : NULL;                                   \
                int32_t base = (int32_t)(2 * oy * g->w);                                     \
                for (int64_t ox = 0; ox < g->ow; ox++) {                                     \
                    C v[4];                                                                  \
                    if (wide) {                                                              \
                        v[0] = w0[2 * ox], v[1] = w0[2 * ox + 1];                            \
                        v[2] = w1[2 * ox], v[3] = w1[2 * ox + 1];                            \
                    } else {                                                                 \
                        v[0] = LD(r0[2 * ox]), v[1] = LD(r0[2 * ox + 1]);                    \
                        v[2] = LD(r1[2 * ox]), v[3] = LD(r1[2 * ox + 1]);                    \
                    }                                                                        \
                    int32_t at[4] = {base + (int32_t)(2 * ox), base + (int32_t)(2 * ox + 1), \
                                     base + (int32_t)(g->w + 2 * ox),                        \
                                     base + (int32_t)(g->w + 2 * ox + 1)};                   \
                    T raw[4] = {r0[2 * ox], r0[2 * ox + 1], r1[2 * ox], r1[2 * ox + 1]};     \
                    C best = v[0];                                                           \
                    T keep = raw[0];                                                         \
                    int32_t where = at[0];                                                   \
                    for (int q = 1; q < 4; q++)                                              \
                        if (v[q] > best || v[q] != v[q]) {                                   \
                            best = v[q];                                                     \
                            keep = raw[q];                                                   \
                            where = at[q];                                                   \
                        }                                                                    \
                    /* 16-bit: one select fewer in the chain (measured faster; f32 slower) */ \
                    out[oy * g->ow + ox] = sizeof(T) < sizeof(C) ? in[where] : keep;         \
                    am[oy * g->ow + ox] = where;                                             \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    }                                                                                        \
    static void max_pool_fwd_##S(const T *x, const lt_conv_geom *g, T *y, int32_t *arg) {    \
        if (g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->ph == 0 && g->pw == 0) { \
            if (CPU_DTYPE_##S == LT_F32                                                      \
                    ? cpu_max_pool_2x2_fwd_f32((const float *)x, g, (float *)y, arg, 0)     \
                    : sizeof(T) == 2 &&                                                      \
                          cpu_max_pool_2x2_fwd_u16((const uint16_t *)x, g, (uint16_t *)y,   \
                                                   arg, CPU_NAN_MIN_##S))                    \
                return;                                                                      \
            float stage[POOL_STAGE];                                                         \
            cpu_cast_fn widen = cpu_cast_f16_stage(CPU_DTYPE_##S);                           \
            max_pool_2x2_##S(x, g, y, arg, widen, stage);                                    \
            return;                                                                          \
        }                                                                                    \
        for (int64_t p = 0; p < g->c; p++) {                                                 \
            const T *in = x + p * g->h * g->w;                                               \
            for (int64_t oy = 0; oy < g->oh; oy++)                                           \
                for (int64_t ox = 0; ox < g->ow; ox++) {                                     \
                    C best = 0;                                                              \
                    int64_t where = -1;                                                      \
                    for (int64_t i = 0; i < g->kh; i++) {                                    \
                        int64_t iy = oy * g->sh - g->ph + i;                                 \
                        if (iy < 0 || iy >= g->h) continue;                                  \
                        for (int64_t j = 0; j < g->kw; j++) {                                \
                            int64_t ix = ox * g->sw - g->pw + j;                             \
                            if (ix < 0 || ix >= g->w) continue;                              \
                            C v = LD(in[iy * g->w + ix]);                                    \
                            if (where < 0 || v > best || isnan(v)) {                         \
                                best = v;                                                    \
                                where = iy * g->w + ix;                                      \
                            }                                                                \
                        }                                                                    \
                    }                                                                        \
                    int64_t o = (p * g->oh + oy) * g->ow + ox;                               \
                    y[o] = ST(best);                                                         \
                    arg[o] = (int32_t)where;                                                 \
                }                                                                            \
        }                                                                                    \
    }                                                                                        \
    /* A 16-bit dx is rounded at each addition: once per element when the                    \
     * windows do not overlap (stride >= kernel) and beta is 0 or 1; with                    \
     * overlapping windows an element receiving k gradients is rounded k                     \
     * times, and beta * dx once more before them when beta is not 0 or 1                    \
     * (argmax may point anywhere in a plane, so the sums are not gathered                   \
     * in fp32 as col2im's are). */                                                          \
    /* Windows that do not overlap (stride >= kernel, as the usual 2x2/2)  \
     * give each input element at most one dy: scattering per output then  \
     * stores exactly the gathered sum below, with one rounding, in one    \
     * pass over dy instead of a search of every window per element (the   \
     * gather made this kernel a third of the CNN example's step). An      \
     * argmax outside its own window is ignored, as the gather ignores it. */ \
    static void max_pool_bwd_disjoint_##S(const T *dy, const int32_t *arg,                   \
                                          const lt_conv_geom *g, T *dx, C beta) {            \
        int64_t plane = g->h * g->w, per = g->oh * g->ow;                                    \
        if (beta == 0) memset(dx, 0, (size_t)(g->c * plane) * sizeof(T));                    \
        for (int64_t p = 0; p < g->c; p++) {                                                 \
            T *d = dx + p * plane;                                                           \
            for (int64_t oy = 0; oy < g->oh; oy++) {                                         \
                int64_t y0 = oy * g->sh - g->ph;                                             \
                for (int64_t ox = 0; ox < g->ow; ox++) {                                     \
                    int64_t o = p * per + oy * g->ow + ox, a = arg[o];                       \
                    if (a < 0 || a >= plane) continue;                                       \
                    int64_t iy = a / g->w, ix = a % g->w, x0 = ox * g->sw - g->pw;           \
                    if (iy < y0 || iy >= y0 + g->kh || ix < x0 || ix >= x0 + g->kw) continue; \
                    d[a] = beta == 0 ? dy[o] : ST(LD(d[a]) + LD(dy[o]));                     \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    }                                                                                        \
    /* Gathered per input element, not scattered per output: each dx is   \
     * summed in C (fp32 for the 16-bit types) over the windows that chose \
     * it, in output order, and stored once, as the ABI's single rounding   \
     * asks of 16-bit kernels (overlapping windows add several dy). */      \
    static void max_pool_bwd_##S(const T *dy, const int32_t *arg, const lt_conv_geom *g,     \
                                 T *dx, C beta) {                                            \
        int64_t per = g->oh * g->ow;                                                         \
        /* the CNN's case, beta 0: each window written whole, four at a time                 \
         * (pool_2x2.c; no zeroing pass, no division per output) */                           \
        if (g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->ph == 0 &&           \
            g->pw == 0 && beta == 0 &&                                                       \
            (CPU_DTYPE_##S == LT_F32                                                         \
                 ? cpu_max_pool_2x2_bwd_f32((const float *)dy, arg, g, (float *)dx)          \
                 : sizeof(T) == 2 &&                                                         \
                       cpu_max_pool_2x2_bwd_u16((const uint16_t *)dy, arg, g,                \
                                                (uint16_t *)dx)))                            \
            return;                                                                          \
        if (g->kh <= g->sh && g->kw <= g->sw && (beta == 0 || beta == 1)) {                  \
            max_pool_bwd_disjoint_##S(dy, arg, g, dx, beta);                                 \
            return;                                                                          \
        }                                                                                    \
        for (int64_t p = 0; p < g->c; p++)                                                   \
            for (int64_t iy = 0; iy < g->h; iy++) {                                          \
                int64_t a0 = iy + g->ph - g->kh + 1, oy1 = (iy + g->ph) / g->sh;             \
                int64_t oy0 = a0 <= 0 ? 0 : (a0 + g->sh - 1) / g->sh;                        \
                if (oy1 > g->oh - 1) oy1 = g->oh - 1;                                        \
                for (int64_t ix = 0; ix < g->w; ix++) {                                      \
                    int64_t b0 = ix + g->pw - g->kw + 1, ox1 = (ix + g->pw) / g->sw;         \
                    int64_t ox0 = b0 <= 0 ? 0 : (b0 + g->sw - 1) / g->sw;                    \
                    if (ox1 > g->ow - 1) ox1 = g->ow - 1;                                    \
                    T *d = dx + (p * g->h + iy) * g->w + ix;                                 \
                    int32_t me = (int32_t)(iy * g->w + ix);                                  \
                    C acc = beta == 0 ? (C)0 : beta == 1 ? LD(*d) : beta * LD(*d);           \
                    for (int64_t oy = oy0; oy <= oy1; oy++)                                  \
                        for (int64_t ox = ox0; ox <= ox1; ox++) {                            \
                            int64_t o = p * per + oy * g->ow + ox;                           \
                            if (arg[o] == me) acc += LD(dy[o]);                              \
                        }                                                                    \
                    *d = ST(acc);                                                            \
                }                                                                            \
            }                                                                                \
    }
CPU_FOR_FLOAT_TYPES(DEF_CONV)

#define DEF_COL2IM(T, S, C, LD, ST)                                                          \
    static CPU_HOT void col2im_##S(const T *col, const lt_conv_geom *g, T *x, C beta) {      \
        if (cpu_col2im_padded_##S(col, g, x, beta, NULL)) return;                            \
        int64_t n = g->c * g->h * g->w, plane = g->oh * g->ow;                               \
        if (beta == 0)                                                                       \
            memset(x, 0, (size_t)n * sizeof(T));                                             \
        else if (beta != 1)                                                                  \
            for (int64_t e = 0; e < n; e++) x[e] *= beta;                                    \
        for (int64_t c = 0; c < g->c; c++)                                                   \
            for (int64_t i = 0; i < g->kh; i++)                                              \
                for (int64_t j = 0; j < g->kw; j++) {                                        \
                    const T *row = col + ((c * g->kh + i) * g->kw + j) * plane;              \
                    int64_t lo, hi;                                                          \
                    valid_range(g, j, &lo, &hi);                                             \
                    for (int64_t oy = 0; oy < g->oh; oy++) {                                 \
                        int64_t iy = oy * g->sh - g->ph + i;                                 \
                        if (iy < 0 || iy >= g->h) continue;                                  \
                        const T *in = row + oy * g->ow;                                      \
                        T *out = x + (c * g->h + iy) * g->w;                                 \
                        int64_t off = j - g->pw;                                             \
                        for (int64_t ox = lo; ox < hi; ox++) out[ox * g->sw + off] += in[ox]; \
                    }                                                                        \
                }                                                                            \
    }
CPU_FOR_WIDE_TYPES(DEF_COL2IM)

/* The 16-bit col2im sums in a stack block of fp32 and rounds each x
 * element once: the block starts at beta * x and receives the col entries
 * in the order the scatter above adds them (kernel row i, then column j),
 * so each element is the f32 kernel's sum rounded once. Rows up to the
 * block's width are scattered a band of whole rows at a time, as the f32
 * loop does: the CNN example in bf16-mixed at batch 64 spent 0.060 ms a
 * sample in col2im gathering row by row, 0.037 ms so (perf, AMD EPYC), and
 * trained 5% faster. Wider rows gather, a part of one row at a time. */
#define COL2IM_BLOCK 1024
#define COL2IM_STAGE 2048 /* floats of col widened at once by the vector casts */
#define DEF_COL2IM_HALF(T, S, C, LD, ST)                                                     \
    static CPU_HOT void col2im_rows_##S(const T *col, const lt_conv_geom *g, T *x, C beta,   \
                                        C *acc, cpu_cast_fn widen, float *stage) {           \
        int64_t plane = g->oh * g->ow, band = COL2IM_BLOCK / g->w;                           \
        for (int64_t c = 0; c < g->c; c++)                                                   \
            for (int64_t y0 = 0; y0 < g->h; y0 += band) {                                    \
                int64_t y1 = g->h - y0 < band ? g->h : y0 + band, n = (y1 - y0) * g->w;      \
                T *xb = x + (c * g->h + y0) * g->w;                                          \
                for (int64_t e = 0; e < n; e++) acc[e] = beta == 0 ? 0 : beta * LD(xb[e]);   \
                for (int64_t i = 0; i < g->kh; i++)                                          \
                    for (int64_t j = 0; j < g->kw; j++) {                                    \
                        const T *row = col + ((c * g->kh + i) * g->kw + j) * plane;          \
                        int64_t lo, hi, off = j - g->pw, oy0 = 0, oy1 = g->oh;               \
                        valid_range(g, j, &lo, &hi);                                         \
                        /* the output rows whose input row iy lies in the band */            \
                        while (oy0 < oy1 && oy0 * g->sh - g->ph + i < y0) oy0++;             \
                        while (oy1 > oy0 && (oy1 - 1) * g->sh - g->ph + i >= y1) oy1--;      \
                        /* F16C widens f16 far faster than LD, one element at a time */      \
                        bool staged = widen && (oy1 - oy0) * g->ow <= COL2IM_STAGE;          \
                        if (staged) widen(stage, row + oy0 * g->ow, (oy1 - oy0) * g->ow);    \
                        for (int64_t oy = oy0; oy < oy1; oy++) {                             \
                            int64_t iy = oy * g->sh - g->ph + i;                             \
                            C *out = acc + (iy - y0) * g->w;                                 \
                            if (staged) {                                                    \
                                const float *in = stage + (oy - oy0) * g->ow;                \
                                for (int64_t ox = lo; ox < hi; ox++)                         \
                                    out[ox * g->sw + off] += in[ox];                         \
                            } else {                                                         \
                                const T *in = row + oy * g->ow;                              \
                                for (int64_t ox = lo; ox < hi; ox++)                         \
                                    out[ox * g->sw + off] += LD(in[ox]);                     \
                            }                                                                \
                        }                                                                    \
                    }                                                                        \
                for (int64_t e = 0; e < n; e++) xb[e] = ST(acc[e]);                          \
            }                                                                                \
    }                                                                                        \
    static CPU_HOT void col2im_wide_##S(const T *col, const lt_conv_geom *g, T *x, C beta,   \
                                        C *acc) {                                            \
        int64_t plane = g->oh * g->ow;                                                       \
        for (int64_t c = 0; c < g->c; c++)                                                   \
            for (int64_t iy = 0; iy < g->h; iy++) {                                          \
                T *xrow = x + (c * g->h + iy) * g->w;                                        \
                for (int64_t x0 = 0; x0 < g->w; x0 += COL2IM_BLOCK) {                        \
                    int64_t x1 = g->w - x0 < COL2IM_BLOCK ? g->w : x0 + COL2IM_BLOCK;        \
                    for (int64_t e = x0; e < x1; e++)                                        \
                        acc[e - x0] = beta == 0 ? 0 : beta * LD(xrow[e]);                    \
                    for (int64_t i = 0; i < g->kh; i++) {                                    \
                        int64_t t = iy + g->ph - i; /* oy * sh */                            \
                        if (t < 0 || t % g->sh != 0 || t / g->sh >= g->oh) continue;         \
                        int64_t oy = t / g->sh;                                              \
                        for (int64_t j = 0; j < g->kw; j++) {                                \
                            const T *in = col + ((c * g->kh + i) * g->kw + j) * plane +      \
                                          oy * g->ow;                                        \
                            int64_t lo, hi, off = j - g->pw - x0;                            \
                            window_range(g, j, x0, x1, &lo, &hi);                            \
                            for (int64_t ox = lo; ox < hi; ox++)                             \
                                acc[ox * g->sw + off] += LD(in[ox]);                         \
                        }                                                                    \
                    }                                                                        \
                    for (int64_t e = x0; e < x1; e++) xrow[e] = ST(acc[e - x0]);             \
                }                                                                            \
            }                                                                                \
    }                                                                                        \
    static void col2im_##S(const T *col, const lt_conv_geom *g, T *x, C beta) {              \
        C acc[COL2IM_BLOCK];                                                                 \
        float stage[COL2IM_STAGE];                                                           \
        cpu_cast_fn widen = cpu_cast_f16_stage(CPU_DTYPE_##S);                               \
        if (cpu_col2im_padded_##S(col, g, x, beta, widen)) return;                           \
        if (g->w <= COL2IM_BLOCK) col2im_rows_##S(col, g, x, beta, acc, widen, stage);       \
        else col2im_wide_##S(col, g, x, beta, acc);                                          \
    }
CPU_FOR_HALF_TYPES(DEF_COL2IM_HALF)

/* Geometry that would make the loops above index outside the buffers is a
 * caller bug; it is parked as an error (saying which condition failed)
 * instead of corrupting memory. Pooling's argmax is int32: planes of more
 * than 2^31 - 1 elements are refused there only. */
static bool geom_ok(lt_ctx *ctx, const char *kernel, const lt_conv_geom *g, bool pool) {
    char msg[512];
    if (lt_conv_geom_ok("cpu", kernel, g, pool, msg, sizeof msg)) return true;
    cpu_fail(ctx, LT_ERR_INVALID, "%s", msg);
    return false;
}

void cpu_im2col(lt_ctx *ctx, lt_dtype t, const void *x, const lt_conv_geom *g, void *col) {
    if (geom_ok(ctx, "im2col", g, false)) CPU_DISPATCH(ctx, "im2col", t, im2col, x, g, col);
}

void cpu_col2im(lt_ctx *ctx, lt_dtype t, const void *col, const lt_conv_geom *g, void *x,
                double beta) {
    if (geom_ok(ctx, "col2im", g, false)) CPU_DISPATCH(ctx, "col2im", t, col2im, col, g, x, beta);
}

void cpu_max_pool_fwd(lt_ctx *ctx, lt_dtype t, const void *x, const lt_conv_geom *g, void *y,
                      int32_t *argmax) {
    if (geom_ok(ctx, "max_pool_fwd", g, true))
        CPU_DISPATCH(ctx, "max_pool_fwd", t, max_pool_fwd, x, g, y, argmax);
}

void cpu_max_pool_bwd(lt_ctx *ctx, lt_dtype t, const void *dy, const int32_t *argmax,
                      const lt_conv_geom *g, void *dx, double beta) {
    if (geom_ok(ctx, "max_pool_bwd", g, true))
        CPU_DISPATCH(ctx, "max_pool_bwd", t, max_pool_bwd, dy, argmax, g, dx, beta);
}
