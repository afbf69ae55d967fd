/* Element-wise reduction kernels of the shm backend, compiled at -O3 so the
 * loops vectorize (restrict: the two ranges never overlap). */
#include "shm_hooks.h"
#include "common/half.h"

#define MINV(a, b) ((b) < (a) ? (b) : (a))
#define MAXV(a, b) ((b) > (a) ? (b) : (a))

#define KERNELS(T, sfx)                                                                   \
    static void sum_##sfx(void *d_, const void *s_, size_t n) {                           \
        T *restrict d = d_;                                                               \
        const T *restrict s = s_;                                                         \
        for (size_t i = 0; i < n; i++) d[i] = (T)(d[i] + s[i]);                            \
    }                                                                                     \
    static void min_##sfx(void *d_, const void *s_, size_t n) {                           \
        T *restrict d = d_;                                                               \
        const T *restrict s = s_;                                                         \
        for (size_t i = 0; i < n; i++) d[i] = MINV(d[i], s[i]);                            \
    }                                                                                     \
    static void max_##sfx(void *d_, const void *s_, size_t n) {                           \
        T *restrict d = d_;                                                               \
        const T *restrict s = s_;                                                         \
        for (size_t i = 0; i < n; i++) d[i] = MAXV(d[i], s[i]);                            \
    }                                                                                     \
    static void div_##sfx(void *d_, size_t n, int world) {                                \
        T *restrict d = d_;                                                               \
        for (size_t i = 0; i < n; i++) d[i] = (T)(d[i] / (T)world);                        \
    }

/* f16 and bf16 (ddp's fp16/bf16 comm hooks): each element through binary32,
 * rounded back to nearest even, as gloo's own half sums do. */
#define HALF_KERNELS(sfx, TO, FROM)                                                       \
    static void sum_##sfx(void *d_, const void *s_, size_t n) {                           \
        uint16_t *restrict d = d_;                                                        \
        const uint16_t *restrict s = s_;                                                  \
        for (size_t i = 0; i < n; i++) d[i] = FROM(TO(d[i]) + TO(s[i]));                  \
    }                                                                                     \
    static void min_##sfx(void *d_, const void *s_, size_t n) {                           \
        uint16_t *restrict d = d_;                                                        \
        const uint16_t *restrict s = s_;                                                  \
        for (size_t i = 0; i < n; i++) d[i] = TO(s[i]) < TO(d[i]) ? s[i] : d[i];          \
    }                                                                                     \
    static void max_##sfx(void *d_, const void *s_, size_t n) {                           \
        uint16_t *restrict d = d_;                                                        \
        const uint16_t *restrict s = s_;                                                  \
        for (size_t i = 0; i < n; i++) d[i] = TO(s[i]) > TO(d[i]) ? s[i] : d[i];          \
    }                                                                                     \
    static void div_##sfx(void *d_, size_t n, int world) {                                \
        uint16_t *restrict d = d_;                                                        \
        for (size_t i = 0; i < n; i++) d[i] = FROM(TO(d[i]) / (float)world);              \
    }

HALF_KERNELS(f16, half_f16_to_f32, half_f32_to_f16)
HALF_KERNELS(bf16, half_bf16_to_f32, half_f32_to_bf16)
KERNELS(float, f32)
KERNELS(double, f64)
KERNELS(int8_t, i8)
KERNELS(uint8_t, u8)
KERNELS(int32_t, i32)
KERNELS(int64_t, i64)

#define PICK(sfx)                                                                         \
    switch (op) {                                                                         \
    case LT_SUM:                                                                          \
    case LT_AVG: return sum_##sfx;                                                        \
    case LT_MIN: return min_##sfx;                                                        \
    case LT_MAX: return max_##sfx;                                                        \
    default: return NULL;                                                                 \
    }

ltshm_combine_fn ltshm_combine(lt_dtype t, lt_redop op) {
    switch ((int)t) {
    case LT_F32: PICK(f32)
    case LT_F64: PICK(f64)
    case LT_F16: PICK(f16)
    case LT_BF16: PICK(bf16)
    case LT_I8: PICK(i8)
    case LT_U8: PICK(u8)
    case LT_I32: PICK(i32)
    case LT_I64: PICK(i64)
    default: return NULL;
    }
}

void ltshm_divide(void *dst, size_t n, lt_dtype t, int world) {
    switch ((int)t) {
    case LT_F32: div_f32(dst, n, world); break;
    case LT_F64: div_f64(dst, n, world); break;
    case LT_F16: div_f16(dst, n, world); break;
    case LT_BF16: div_bf16(dst, n, world); break;
    case LT_I8: div_i8(dst, n, world); break;
    case LT_U8: div_u8(dst, n, world); break;
    case LT_I32: div_i32(dst, n, world); break;
    case LT_I64: div_i64(dst, n, world); break;
    default: break;
    }
}

void ltshm_sum2_f32(float *a_, float *b_, size_t n, bool avg) {
    float *restrict a = a_, *restrict b = b_;
    if (avg)
        for (size_t i = 0; i < n; i++) a[i] = b[i] = (a[i] + b[i]) / 2.0f;
    else
        for (size_t i = 0; i < n; i++) a[i] = b[i] = a[i] + b[i];
}
