/* Element type conversion among f32, f64, f16 and bf16, round-to-nearest-
 * even (half.h). One loop per (destination, source) pair, picked once per
 * call: f32 <-> f16/bf16, the pairs mixed precision runs every step, from
 * cast_simd.c (vector where the CPU has AVX2 and F16C, same bits), the
 * rest from the table below. */
#include <string.h>
#include "cast_simd.h"
#include "cpu_internal.h"
#include "common/half.h"

typedef cpu_cast_fn cast_fn;

/* Defines cast_<D>_<S>: dst[i] = CONV(src[i]). */
#define DEF_CAST(D, DT, S, ST, CONV)                                                       \
    static CPU_HOT void cast_##D##_##S(void *dst, const void *src, int64_t n) {            \
        DT *restrict d = dst;                                                              \
        const ST *restrict s = src;                                                        \
        for (int64_t i = 0; i < n; i++) d[i] = CONV(s[i]);                                 \
    }

#define AS_F32(x) ((float)(x))
#define AS_F64(x) ((double)(x))
/* f64 -> 16 bit goes through f32 rounded to odd, so it is rounded once. */
#define F64_TO_F16(x) half_f32_to_f16(half_f64_to_f32_odd(x))
#define F64_TO_BF16(x) half_f32_to_bf16(half_f64_to_f32_odd(x))
/* 16 bit -> anything: exact into f32 first, then one rounding at most. */
#define F16_TO_F64(x) ((double)half_f16_to_f32(x))
#define BF16_TO_F64(x) ((double)half_bf16_to_f32(x))
#define F16_TO_BF16(x) half_f32_to_bf16(half_f16_to_f32(x))
#define BF16_TO_F16(x) half_f32_to_f16(half_bf16_to_f32(x))

DEF_CAST(f32, float, f64, double, AS_F32)
DEF_CAST(f64, double, f32, float, AS_F64)
DEF_CAST(f64, double, f16, uint16_t, F16_TO_F64)
DEF_CAST(f64, double, bf16, uint16_t, BF16_TO_F64)
DEF_CAST(f16, uint16_t, f64, double, F64_TO_F16)
DEF_CAST(f16, uint16_t, bf16, uint16_t, BF16_TO_F16)
DEF_CAST(bf16, uint16_t, f64, double, F64_TO_BF16)
DEF_CAST(bf16, uint16_t, f16, uint16_t, F16_TO_BF16)

/* Indexed [dst - 1][src - 1] by lt_dtype (F32 = 1 .. BF16 = 4); the diagonal
 * is a plain copy, the NULLs are cast_simd.c's. */
static const cast_fn cast_table[4][4] = {
    {NULL, cast_f32_f64, NULL, NULL},
    {cast_f64_f32, NULL, cast_f64_f16, cast_f64_bf16},
    {NULL, cast_f16_f64, NULL, cast_f16_bf16},
    {NULL, cast_bf16_f64, cast_bf16_f16, NULL},
};

static bool castable(lt_dtype t) { return t >= LT_F32 && t <= LT_BF16; }

void cpu_cast(lt_ctx *ctx, lt_dtype dst_t, void *dst, lt_dtype src_t, const void *src,
              int64_t n) {
    if (!castable(dst_t) || !castable(src_t)) {
        const char *d = lt_dtype_name(dst_t), *s = lt_dtype_name(src_t);
        cpu_fail(ctx, LT_ERR_UNSUPPORTED,
                 "cpu cast: %s -> %s is not supported; cast takes f32, f64, f16 and bf16",
                 s ? s : "unknown", d ? d : "unknown");
        return;
    }
    if (n <= 0) return;
    if (dst_t == src_t) {
        if (dst != src) memmove(dst, src, (size_t)n * lt_dtype_size(dst_t));
        return;
    }
    cast_fn f = cpu_cast_lowp_best(dst_t, src_t);
    (f ? f : cast_table[dst_t - LT_F32][src_t - LT_F32])(dst, src, n);
}
