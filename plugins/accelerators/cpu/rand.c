/* rand_fill: uniform and normal numbers from the counter-based generator in
 * rng.h. Values are computed in double from (seed, offset + i) alone, then
 * rounded to the dtype, so f32 and f64 fills of one (seed, offset) agree and
 * any split of a buffer into calls gives the same numbers. f16 and bf16 get
 * the f32 fill's values rounded to nearest even, as cast rounds them, so
 * weights drawn in f32 and cast equal weights drawn in 16 bits (but for a
 * uniform value that the rounding takes up to hi, moved below it). */
#include <tgmath.h>
#include "cpu_internal.h"
#include "rng.h"

/* Uniform [lo, hi): a double in [lo, hi) can still round up to hi in the
 * dtype; such a value is moved to the largest one below hi. */
#define DEF_UNIFORM(T, S, C, LD, ST)                                                       \
    static void uniform_##S(T *restrict x, int64_t n, double lo, double hi, uint64_t key,  \
                            uint64_t off) {                                                \
        const double width = hi - lo;                                                      \
        const T top = (T)hi;                                                               \
        for (int64_t i = 0; i < n; i++) {                                                  \
            T v = (T)(lo + width * cpu_rng_u53(key, off + (uint64_t)i));                   \
            x[i] = v >= top && hi > lo ? nextafter(top, (T)lo) : v;                        \
        }                                                                                  \
    }
CPU_FOR_WIDE_TYPES(DEF_UNIFORM)

/* One step from the 16-bit value h (f16 or bf16: sign and magnitude, the
 * magnitude's bits ordered as its values) toward `to`, as nextafter does. */
static uint16_t half_step_toward(uint16_t h, float hv, float to) {
    if (!(hv != to)) return h; /* equal, or a NaN */
    bool neg = h & 0x8000u;
    if (to < hv) return neg ? (uint16_t)(h + 1) : h == 0 ? 0x8001u : (uint16_t)(h - 1);
    return !neg ? (uint16_t)(h + 1) : h == 0x8000u ? 0x0001u : (uint16_t)(h - 1);
}

/* The f32 value (itself below hi), rounded; when that rounding reaches the
 * dtype's hi, the 16-bit value below it. */
#define DEF_UNIFORM_HALF(T, S, C, LD, ST)                                                  \
    static void uniform_##S(T *restrict x, int64_t n, double lo, double hi, uint64_t key,  \
                            uint64_t off) {                                                \
        const double width = hi - lo;                                                      \
        const float top = (float)hi, below = nextafter(top, (float)lo);                    \
        const T top_t = ST(top);                                                           \
        const float top_v = LD(top_t);                                                     \
        const T below_t = half_step_toward(top_t, top_v, (float)lo);                       \
        for (int64_t i = 0; i < n; i++) {                                                  \
            float v = (float)(lo + width * cpu_rng_u53(key, off + (uint64_t)i));           \
            T h = ST(v >= top && hi > lo ? below : v);                                     \
            x[i] = LD(h) >= top_v && hi > lo ? below_t : h;                                \
        }                                                                                  \
    }
CPU_FOR_HALF_TYPES(DEF_UNIFORM_HALF)

/* Box-Muller on the pair of counters (2j, 2j + 1); 1 - u keeps log() off 0. */
static void normal_pair(uint64_t key, uint64_t j, double *z0, double *z1) {
    double u1 = 1 - cpu_rng_u53(key, 2 * j), u2 = cpu_rng_u53(key, 2 * j + 1);
    double r = sqrt(-2 * log(u1)), theta = 2 * M_PI * u2;
    *z0 = r * cos(theta);
    *z1 = r * sin(theta);
}

/* Counter c takes the cosine half of pair c / 2 when even, the sine half
 * when odd; an odd offset or an odd end uses half a pair. */
#define DEF_NORMAL(T, S, C, LD, ST)                                                        \
    static void normal_##S(T *restrict x, int64_t n, double mean, double sd, uint64_t key, \
                           uint64_t off) {                                                 \
        double z0, z1;                                                                     \
        int64_t i = 0;                                                                     \
        if (n > 0 && (off & 1)) {                                                          \
            normal_pair(key, off >> 1, &z0, &z1);                                          \
            x[i++] = ST((C)(mean + sd * z1));                                              \
        }                                                                                  \
        for (; i + 1 < n; i += 2) {                                                        \
            normal_pair(key, (off + (uint64_t)i) >> 1, &z0, &z1);                          \
            x[i] = ST((C)(mean + sd * z0));                                                \
            x[i + 1] = ST((C)(mean + sd * z1));                                            \
        }                                                                                  \
        if (i < n) {                                                                       \
            normal_pair(key, (off + (uint64_t)i) >> 1, &z0, &z1);                          \
            x[i] = ST((C)(mean + sd * z0));                                                \
        }                                                                                  \
    }
CPU_FOR_FLOAT_TYPES(DEF_NORMAL)

void cpu_rand_fill(lt_ctx *ctx, lt_dtype t, void *x, int64_t n, lt_rand_dist dist, double a,
                   double b, uint64_t seed, uint64_t offset) {
    uint64_t key = cpu_rng_key(seed);
    if (dist == LT_RAND_UNIFORM) {
        if (!(a <= b)) {
            cpu_fail(ctx, LT_ERR_INVALID, "cpu rand_fill: uniform needs a <= b (got [%g, %g))", a,
                     b);
            return;
        }
        CPU_DISPATCH(ctx, "rand_fill", t, uniform, x, n, a, b, key, offset);
    } else if (dist == LT_RAND_NORMAL) {
        if (!(b >= 0)) {
            cpu_fail(ctx, LT_ERR_INVALID, "cpu rand_fill: normal needs std >= 0 (got %g)", b);
            return;
        }
        CPU_DISPATCH(ctx, "rand_fill", t, normal, x, n, a, b, key, offset);
    } else {
        cpu_fail(ctx, LT_ERR_INVALID, "cpu rand_fill: unknown distribution %d", (int)dist);
    }
}
