/* Argument checks every accelerator makes alike on the kernels whose
 * arguments can index outside their buffers (gemm's sizes and leading
 * dimensions, a convolution or pooling geometry). Each returns true when
 * the arguments work, else false with one line in msg naming the values and
 * the failed condition, which the plugin parks as LT_ERR_INVALID for the
 * next synchronize. Header-only, C and C++ (the gpu plugin's .cu files). */
#ifndef LT_PLUGINS_KERNEL_ARGS_H
#define LT_PLUGINS_KERNEL_ARGS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "lt/accelerator.h"

static inline int64_t lt_ka_max1(int64_t x) { return x > 1 ? x : 1; }

/* who: "cpu gemm"; iface: the library whose 32-bit sizes bound them
 * ("OpenBLAS's", "cuBLAS's"). Row-major: A is m x k (k x m when ta), B is
 * k x n (n x k when tb). */
static inline bool lt_gemm_args_ok(const char *who, const char *iface, bool ta, bool tb, int64_t m, int64_t n,
                                   int64_t k, int64_t lda, int64_t ldb, int64_t ldc, char *msg, size_t len) {
    if (m < 0 || n < 0 || k < 0 || m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX ||
        ldb > INT_MAX || ldc > INT_MAX) {
        snprintf(msg, len,
                 "%s: sizes m=%lld n=%lld k=%lld (lda=%lld ldb=%lld ldc=%lld) are negative or exceed %s "
                 "32-bit interface",
                 who, (long long)m, (long long)n, (long long)k, (long long)lda, (long long)ldb, (long long)ldc,
                 iface);
        return false;
    }
    int64_t need_a = lt_ka_max1(ta ? m : k), need_b = lt_ka_max1(tb ? k : n), need_c = lt_ka_max1(n);
    if (lda < need_a || ldb < need_b || ldc < need_c) {
        snprintf(msg, len,
                 "%s: leading dimensions lda=%lld ldb=%lld ldc=%lld are below the row lengths %lld %lld %lld "
                 "(ta=%d tb=%d m=%lld n=%lld k=%lld)",
                 who, (long long)lda, (long long)ldb, (long long)ldc, (long long)need_a, (long long)need_b,
                 (long long)need_c, ta, tb, (long long)m, (long long)n, (long long)k);
        return false;
    }
    return true;
}

/* acc, kernel: "cpu", "max_pool_fwd". Pooling's argmax is int32: planes of
 * more than 2^31 - 1 elements are refused there only (pool). */
static inline bool lt_conv_geom_ok(const char *acc, const char *kernel, const lt_conv_geom *g, bool pool, char *msg,
                                   size_t len) {
    const char *why = NULL;
    if (g->c < 1 || g->h < 1 || g->w < 1 || g->kh < 1 || g->kw < 1 || g->sh < 1 || g->sw < 1 || g->ph < 0 ||
        g->pw < 0)
        why = "c, h, w, kernel and stride must be >= 1 and padding >= 0";
    else if (g->h + 2 * g->ph < g->kh || g->w + 2 * g->pw < g->kw)
        why = "the kernel is larger than the padded input";
    else if (g->oh != (g->h + 2 * g->ph - g->kh) / g->sh + 1 || g->ow != (g->w + 2 * g->pw - g->kw) / g->sw + 1)
        why = "oh/ow must be (h + 2 ph - kh) / sh + 1 and (w + 2 pw - kw) / sw + 1 "
              "(lt_conv_geom in lt/accelerator.h)";
    else if (pool && g->h * g->w > INT32_MAX)
        why = "a plane has more than 2^31 - 1 elements (argmax is int32)";
    if (why)
        snprintf(msg, len,
                 "%s %s: geometry c=%lld h=%lld w=%lld kernel %lldx%lld stride %lldx%lld padding %lldx%lld "
                 "output %lldx%lld: %s",
                 acc, kernel, (long long)g->c, (long long)g->h, (long long)g->w, (long long)g->kh, (long long)g->kw,
                 (long long)g->sh, (long long)g->sw, (long long)g->ph, (long long)g->pw, (long long)g->oh,
                 (long long)g->ow, why);
    return !why;
}

#endif
