/* 2x2 max pooling with stride 2 and no padding, four windows at a time, on
 * f32 and on the 16-bit formats: the CNN example's case. The scalar loops in conv.c took 7% of its
 * step (perf, AMD EPYC, batch 64): the 14 x 14 planes give rows of 7
 * windows, too short and too strided for GCC to vectorise. Here a row's
 * windows go in groups of 4 (8 input columns, two rows), the last group
 * overlapping the one before when the row is not a multiple of 4: both
 * kernels only store, and a window computed twice stores the same values.
 * Rows of fewer than 4 windows return false (conv.c's loops run them).
 *
 * Written with GCC's generic vectors, so the x86-64-v3 clone and the
 * baseline one compile the same source. The results are the scalar
 * loops', bit for bit: the same comparisons in the same order. f16 and bf16
 * are compared as integers, through a key that orders them as their values
 * (sign and magnitude to two's complement, both zeros equal), NaN found by
 * its bits: what the scalar loop's comparisons of the widened values
 * decide, without widening; the chosen element is stored as it is. */
#include "pool_2x2.h"

#include <string.h>

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef uint32_t v4u __attribute__((vector_size(16))); /* argmax offsets: wrap, never overflow */
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef uint16_t v8h __attribute__((vector_size(16)));
typedef uint16_t v4h __attribute__((vector_size(8)));

#define ALWAYS_INLINE inline __attribute__((always_inline))

static ALWAYS_INLINE v4f pick(v4i take, v4f yes, v4f no) {
    return (v4f)(((v4i)yes & take) | ((v4i)no & ~take));
}

/* Windows ox .. ox+3 of rows r0, r1 (input columns 2 ox .. 2 ox + 7): the
 * maximum and its flat index, base being row r0's. Scan order as the
 * scalar loop: r0[2x], r0[2x+1], r1[2x], r1[2x+1]; a later element wins
 * when greater or NaN. */
static ALWAYS_INLINE void windows4_f32(const float *r0, const float *r1, int64_t ox,
                                       int32_t base, int32_t w, float *y, int32_t *arg,
                                       int32_t nan_min) {
    (void)nan_min;
    v8f a, b;
    memcpy(&a, r0 + 2 * ox, sizeof a);
    memcpy(&b, r1 + 2 * ox, sizeof b);
    v4f v[4] = {__builtin_shufflevector(a, a, 0, 2, 4, 6), __builtin_shufflevector(a, a, 1, 3, 5, 7),
                __builtin_shufflevector(b, b, 0, 2, 4, 6), __builtin_shufflevector(b, b, 1, 3, 5, 7)};
    v4f best = v[0];
    v4i where = {0, 0, 0, 0};
    for (int q = 1; q < 4; q++) {
        v4i take = (v[q] > best) | (v[q] != v[q]);
        best = pick(take, v[q], best);
        where = (take & q) | (where & ~take);
    }
    int32_t x0 = base + 2 * (int32_t)ox;
    v4i at = (v4i){x0, x0 + 2, x0 + 4, x0 + 6} + (where & 1) + (where >> 1) * w;
    memcpy(y + ox, &best, sizeof best);
    memcpy(arg + ox, &at, sizeof at);
}

/* The same for f16 or bf16: nan_min is the largest magnitude (bits &
 * 0x7fff) that is not NaN, infinity's: 0x7c00 for f16, 0x7f80 for bf16. */
static ALWAYS_INLINE void windows4_u16(const uint16_t *r0, const uint16_t *r1, int64_t ox,
                                       int32_t base, int32_t w, uint16_t *y, int32_t *arg,
                                       int32_t nan_min) {
    v8h a, b;
    memcpy(&a, r0 + 2 * ox, sizeof a);
    memcpy(&b, r1 + 2 * ox, sizeof b);
    v4i bits[4] = {__builtin_convertvector(__builtin_shufflevector(a, a, 0, 2, 4, 6), v4i),
                   __builtin_convertvector(__builtin_shufflevector(a, a, 1, 3, 5, 7), v4i),
                   __builtin_convertvector(__builtin_shufflevector(b, b, 0, 2, 4, 6), v4i),
                   __builtin_convertvector(__builtin_shufflevector(b, b, 1, 3, 5, 7), v4i)};
    v4i key[4], nan[4];
    for (int q = 0; q < 4; q++) {
        v4i mag = bits[q] & 0x7fff, neg = bits[q] >> 15;
        key[q] = (mag ^ -neg) + neg; /* -mag for a negative value; both zeros 0 */
        nan[q] = mag > nan_min;
    }
    v4i best = bits[0], kbest = key[0], nbest = nan[0], where = {0, 0, 0, 0};
    for (int q = 1; q < 4; q++) { /* a NaN best is beaten by a NaN only */
        v4i take = nan[q] | ((key[q] > kbest) & ~nbest);
        best = (bits[q] & take) | (best & ~take);
        kbest = (key[q] & take) | (kbest & ~take);
        nbest = (nan[q] & take) | (nbest & ~take);
        where = (take & q) | (where & ~take);
    }
    int32_t x0 = base + 2 * (int32_t)ox;
    v4i at = (v4i){x0, x0 + 2, x0 + 4, x0 + 6} + (where & 1) + (where >> 1) * w;
    v4h out = __builtin_convertvector(best, v4h);
    memcpy(y + ox, &out, sizeof out);
    memcpy(arg + ox, &at, sizeof at);
}

/* dx of windows ox .. ox+3: dy at each one's argmax, 0 at its other three
 * elements (an argmax outside its window matches none). */
static ALWAYS_INLINE void scatter4_f32(const float *dy, const int32_t *arg, int64_t ox, int32_t base,
                                   int32_t w, float *r0, float *r1) {
    v4f v;
    v4u a;
    memcpy(&v, dy + ox, sizeof v);
    memcpy(&a, arg + ox, sizeof a);
    uint32_t x0 = (uint32_t)base + 2 * (uint32_t)ox;
    a -= (v4u){x0, x0 + 2, x0 + 4, x0 + 6}; /* 0, 1, w, w + 1 inside the window */
    v8u a2 = __builtin_shufflevector(a, a, 0, 0, 1, 1, 2, 2, 3, 3);
    v8i v2 = (v8i)__builtin_shufflevector(v, v, 0, 0, 1, 1, 2, 2, 3, 3);
    v8u top = (v8u){0, 1, 0, 1, 0, 1, 0, 1};
    v8f o0 = (v8f)(v2 & (a2 == top)), o1 = (v8f)(v2 & (a2 == top + (uint32_t)w));
    memcpy(r0 + 2 * ox, &o0, sizeof o0);
    memcpy(r1 + 2 * ox, &o1, sizeof o1);
}

/* The same for f16 or bf16: selection only, on the bits. */
static ALWAYS_INLINE void scatter4_u16(const uint16_t *dy, const int32_t *arg, int64_t ox,
                                       int32_t base, int32_t w, uint16_t *r0, uint16_t *r1) {
    v4h v;
    v4u a;
    memcpy(&v, dy + ox, sizeof v);
    memcpy(&a, arg + ox, sizeof a);
    uint32_t x0 = (uint32_t)base + 2 * (uint32_t)ox;
    a -= (v4u){x0, x0 + 2, x0 + 4, x0 + 6};
    v8u a2 = __builtin_shufflevector(a, a, 0, 0, 1, 1, 2, 2, 3, 3);
    v8h v2 = __builtin_shufflevector(v, v, 0, 0, 1, 1, 2, 2, 3, 3);
    v8u top = (v8u){0, 1, 0, 1, 0, 1, 0, 1};
    v8h o0 = v2 & __builtin_convertvector(a2 == top, v8h);
    v8h o1 = v2 & __builtin_convertvector(a2 == top + (uint32_t)w, v8h);
    memcpy(r0 + 2 * ox, &o0, sizeof o0);
    memcpy(r1 + 2 * ox, &o1, sizeof o1);
}

/* The row loops, the same for each element type E (S: f32 or u16). */
#define DEF_POOL_2X2(E, S)                                                                   \
    CPU_HOT bool cpu_max_pool_2x2_fwd_##S(const E *x, const lt_conv_geom *g, E *y,           \
                                          int32_t *arg, int32_t nan_min) {                   \
        if (g->ow < 4) return false;                                                         \
        int64_t plane = g->h * g->w, per = g->oh * g->ow;                                    \
        int32_t w = (int32_t)g->w;                                                           \
        for (int64_t p = 0; p < g->c; p++)                                                   \
            for (int64_t oy = 0; oy < g->oh; oy++) {                                         \
                const E *r0 = x + p * plane + 2 * oy * w;                                    \
                E *yr = y + p * per + oy * g->ow;                                            \
                int32_t *ar = arg + p * per + oy * g->ow, base = (int32_t)(2 * oy * w);      \
                int64_t ox = 0;                                                              \
                for (; ox + 4 <= g->ow; ox += 4)                                             \
                    windows4_##S(r0, r0 + w, ox, base, w, yr, ar, nan_min);                  \
                if (ox < g->ow) windows4_##S(r0, r0 + w, g->ow - 4, base, w, yr, ar, nan_min); \
            }                                                                                \
        return true;                                                                         \
    }                                                                                        \
    CPU_HOT bool cpu_max_pool_2x2_bwd_##S(const E *dy, const int32_t *arg,                   \
                                          const lt_conv_geom *g, E *dx) {                    \
        if (g->ow < 4) return false;                                                         \
        int64_t plane = g->h * g->w, per = g->oh * g->ow, w = g->w;                          \
        for (int64_t p = 0; p < g->c; p++) {                                                 \
            E *d = dx + p * plane;                                                           \
            for (int64_t oy = 0; oy < g->oh; oy++) {                                         \
                E *r0 = d + 2 * oy * w, *r1 = r0 + w;                                        \
                const E *v = dy + p * per + oy * g->ow;                                      \
                const int32_t *am = arg + p * per + oy * g->ow;                              \
                int32_t base = (int32_t)(2 * oy * w);                                        \
                int64_t ox = 0;                                                              \
                for (; ox + 4 <= g->ow; ox += 4) scatter4_##S(v, am, ox, base, (int32_t)w, r0, r1); \
                if (ox < g->ow) scatter4_##S(v, am, g->ow - 4, base, (int32_t)w, r0, r1);    \
                if (w > 2 * g->ow) r0[w - 1] = r1[w - 1] = 0; /* odd w: no window's column */ \
            }                                                                                \
            if (g->h > 2 * g->oh) memset(d + 2 * g->oh * w, 0, (size_t)w * sizeof(E));      \
        }                                                                                    \
        return true;                                                                         \
    }
DEF_POOL_2X2(float, f32)
DEF_POOL_2X2(uint16_t, u16)
