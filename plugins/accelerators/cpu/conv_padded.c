/* Unit-stride convolution lowering through a zero-padded copy of each input
 * channel. With the padding in the copy, every row of im2col's output is a
 * plain copy of a padded row, and col2im a plain sum into one: no bounds
 * logic, no zeroing, no memcpy call per row. The CNN example's rows are 14
 * and 28 elements; lowered row by row with a memcpy each (and padding
 * zeroed element by element) im2col and col2im took 17% of its step (perf,
 * AMD EPYC, batch 64).
 *
 * Taken for stride 1 when the padded plane fits PAD_PLANE elements and an
 * output row holds at least 16 bytes; other geometries return false and run
 * the general loops in conv.c. col2im adds in the general loops' order
 * (beta x first, then kernel row i, column j), so its results are theirs,
 * bit for bit; for f16 and bf16 it sums in an fp32 plane and rounds each
 * element once, as conv.c's 16-bit col2im does. */
#include "conv_padded.h"

#include <string.h>

#define PAD_PLANE 4096 /* elements: a 64 x 64 padded plane */
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* Whether the padded path takes this geometry for elements of `es` bytes. */
static bool padded_fits(const lt_conv_geom *g, size_t es) {
    return g->sh == 1 && g->sw == 1 && (g->h + 2 * g->ph) * (g->w + 2 * g->pw) <= PAD_PLANE &&
           g->ow * (int64_t)es >= 16;
}

#define DEF_PADDED_IM2COL(T, S, C, LD, ST)                                                   \
    /* dst[0:n] = src[0:n], n at least 16 bytes: whole 32-byte vectors, the                  \
     * last one overlapping the one before, or two overlapping 16-byte ones                  \
     * (a constant-size memcpy compiles to one load and one store). */                       \
    static ALWAYS_INLINE void copy_row_##S(T *restrict dst, const T *restrict src, int64_t n) { \
        enum { V = 32 / sizeof(T), H = 16 / sizeof(T) };                                     \
        if (n < V) {                                                                         \
            memcpy(dst, src, 16);                                                            \
            memcpy(dst + n - H, src + n - H, 16);                                            \
            return;                                                                          \
        }                                                                                    \
        int64_t e = 0;                                                                       \
        for (; e + V <= n; e += V) memcpy(dst + e, src + e, 32);                             \
        if (e < n) memcpy(dst + n - V, src + n - V, 32);                                     \
    }                                                                                        \
    CPU_HOT bool cpu_im2col_padded_##S(const T *x, const lt_conv_geom *g, T *col) {          \
        if (!padded_fits(g, sizeof(T))) return false;                                        \
        int64_t pw = g->w + 2 * g->pw, plane = g->oh * g->ow;                                \
        T pad[PAD_PLANE];                                                                    \
        memset(pad, 0, (size_t)(pw * (g->h + 2 * g->ph)) * sizeof(T));                       \
        for (int64_t c = 0; c < g->c; c++) {                                                 \
            /* the interior is rewritten per channel; the border stays zero */               \
            for (int64_t iy = 0; iy < g->h; iy++)                                            \
                memcpy(pad + (iy + g->ph) * pw + g->pw, x + (c * g->h + iy) * g->w,          \
                       (size_t)g->w * sizeof(T));                                            \
            for (int64_t i = 0; i < g->kh; i++)                                              \
                for (int64_t j = 0; j < g->kw; j++) {                                        \
                    T *row = col + ((c * g->kh + i) * g->kw + j) * plane;                    \
                    const T *src = pad + i * pw + j;                                         \
                    for (int64_t oy = 0; oy < g->oh; oy++)                                   \
                        copy_row_##S(row + oy * g->ow, src + oy * pw, g->ow);                \
                }                                                                            \
        }                                                                                    \
        return true;                                                                         \
    }
CPU_FOR_FLOAT_TYPES(DEF_PADDED_IM2COL)

/* dst[0:n] += src[0:n] in the accumulator type A (float or double):
 * 32-byte vectors, then one of 16 bytes, then element by element, as what
 * is left needs (an overlapping last vector would load what the vector
 * before it just stored, and stall). */
#define DEF_ADD_ROW(A)                                                                       \
    static ALWAYS_INLINE void add_row_##A(A *restrict dst, const A *restrict src, int64_t n) { \
        typedef A v32 __attribute__((vector_size(32)));                                      \
        typedef A v16 __attribute__((vector_size(16)));                                      \
        int64_t e = 0;                                                                       \
        for (; e + (int64_t)(32 / sizeof(A)) <= n; e += 32 / sizeof(A)) {                    \
            v32 a, b;                                                                        \
            memcpy(&a, dst + e, 32);                                                         \
            memcpy(&b, src + e, 32);                                                         \
            a += b;                                                                          \
            memcpy(dst + e, &a, 32);                                                         \
        }                                                                                    \
        if (e + (int64_t)(16 / sizeof(A)) <= n) {                                            \
            v16 a, b;                                                                        \
            memcpy(&a, dst + e, 16);                                                         \
            memcpy(&b, src + e, 16);                                                         \
            a += b;                                                                          \
            memcpy(dst + e, &a, 16);                                                         \
            e += 16 / sizeof(A);                                                             \
        }                                                                                    \
        for (; e < n; e++) dst[e] += src[e];                                                 \
    }
DEF_ADD_ROW(float)
DEF_ADD_ROW(double)

/* col2im into a padded plane of C (T itself for f32 and f64, fp32 for f16
 * and bf16), rounded once into x. A 16-bit col row is widened a kernel
 * row's block at once through `widen` (F16C's loop) when given, else
 * element by element (a shift for bf16). */
#define DEF_PADDED_COL2IM(T, S, C, LD, ST)                                                   \
    static ALWAYS_INLINE void add_wide_row_##S(C *restrict dst, const T *restrict src,       \
                                               int64_t n) {                                  \
        for (int64_t e = 0; e < n; e++) dst[e] += LD(src[e]);                                \
    }                                                                                        \
    CPU_HOT bool cpu_col2im_padded_##S(const T *col, const lt_conv_geom *g, T *x, C beta,    \
                                       cpu_cast_fn widen) {                                  \
        if (!padded_fits(g, sizeof(T))) return false;                                        \
        int64_t pw = g->w + 2 * g->pw, plane = g->oh * g->ow;                                \
        C acc[PAD_PLANE];                                                                    \
        float stage[sizeof(T) < sizeof(C) ? PAD_PLANE : 1]; /* plane <= the padded plane */  \
        /* the border collects what fell on the padding, never read back */                  \
        memset(acc, 0, (size_t)(pw * (g->h + 2 * g->ph)) * sizeof(C));                       \
        for (int64_t c = 0; c < g->c; c++) {                                                 \
            T *xc = x + c * g->h * g->w;                                                     \
            /* start at beta x, as the general loops do (beta 0 reads no x) */               \
            for (int64_t iy = 0; iy < g->h; iy++) {                                          \
                C *a = acc + (iy + g->ph) * pw + g->pw;                                      \
                const T *xr = xc + iy * g->w;                                                \
                for (int64_t ix = 0; ix < g->w; ix++)                                        \
                    a[ix] = beta == 0 ? 0 : beta == 1 ? LD(xr[ix]) : beta * LD(xr[ix]);      \
            }                                                                                \
            for (int64_t i = 0; i < g->kh; i++)                                              \
                for (int64_t j = 0; j < g->kw; j++) {                                        \
                    const T *row = col + ((c * g->kh + i) * g->kw + j) * plane;              \
                    C *dst = acc + i * pw + j;                                               \
                    if (sizeof(T) == sizeof(C)) { /* f32, f64: T is C */                     \
                        for (int64_t oy = 0; oy < g->oh; oy++)                               \
                            add_row_##C(dst + oy * pw, (const C *)row + oy * g->ow, g->ow);  \
                    } else if (widen) {                                                      \
                        widen(stage, row, plane);                                            \
                        for (int64_t oy = 0; oy < g->oh; oy++)                               \
                            add_row_##C(dst + oy * pw, (const C *)stage + oy * g->ow, g->ow); \
                    } else {                                                                 \
                        for (int64_t oy = 0; oy < g->oh; oy++)                               \
                            add_wide_row_##S(dst + oy * pw, row + oy * g->ow, g->ow);        \
                    }                                                                        \
                }                                                                            \
            for (int64_t iy = 0; iy < g->h; iy++) {                                          \
                const C *a = acc + (iy + g->ph) * pw + g->pw;                                \
                T *xr = xc + iy * g->w;                                                      \
                for (int64_t ix = 0; ix < g->w; ix++) xr[ix] = ST(a[ix]);                    \
            }                                                                                \
        }                                                                                    \
        return true;                                                                         \
    }
CPU_FOR_FLOAT_TYPES(DEF_PADDED_COL2IM)
