/* rand_fill: uniform and normal numbers from rng.cuh's counter-based bits,
 * the formulas of plugins/accelerators/cpu/rand.c: each value is computed
 * in double from (seed, offset + i) alone, then rounded to the dtype (16
 * bits: the f32 value, rounded again). Built with -fmad=false
 * (CMakeLists.txt) so lo + width * u is two roundings, as on the cpu:
 * uniform fills give the cpu plugin's bits. Normal fills use the device's
 * double log, sqrt, cos and sin, which may differ from the host's libm in
 * the last bit of a double; rounded to f32 or less they almost always
 * agree. */
#include <math.h>
#include "gpu_cuda.cuh"
#include "rng.cuh"

/* Uniform [lo, hi): a double below hi can round up to hi in the dtype;
 * such a value becomes the largest one below hi (below). */
template <class T>
__global__ void k_uniform_wide(T *x, int64_t n, double lo, double width, T top, T below,
                               int clamp_top, uint64_t key, uint64_t off) {
    GPU_LOOP(i, n) {
        T v = (T)(lo + width * gpu_rng_u53(key, off + (uint64_t)i));
        x[i] = clamp_top && v >= top ? below : v;
    }
}

/* 16 bits: the f32 value (itself kept below hi), rounded; where that
 * rounding reaches the dtype's hi, the 16-bit value below it. */
template <class T>
__global__ void k_uniform_half(T *x, int64_t n, double lo, double width, float top, float below,
                               float top_v, T below_t, int clamp_top, uint64_t key, uint64_t off) {
    typedef Num<T> N;
    GPU_LOOP(i, n) {
        float v = (float)(lo + width * gpu_rng_u53(key, off + (uint64_t)i));
        T h = N::st(clamp_top && v >= top ? below : v);
        x[i] = clamp_top && N::ld(h) >= top_v ? below_t : h;
    }
}

/* One step from 16-bit h (value hv) toward `to`, as nextafter does. */
static uint16_t half_step_toward(uint16_t h, float hv, float to) {
    if (!(hv != to)) return h;
    bool neg = h & 0x8000u;
    if (to < hv) return neg ? (uint16_t)(h + 1) : h == 0 ? (uint16_t)0x8001u : (uint16_t)(h - 1);
    return !neg ? (uint16_t)(h + 1) : h == 0x8000u ? (uint16_t)0x0001u : (uint16_t)(h - 1);
}

/* nextafter in T's own precision (a double nextafter on a float would
 * round straight back). */
static float step_toward(float from, float to) { return nextafterf(from, to); }
static double step_toward(double from, double to) { return nextafter(from, to); }

template <class T>
static void uniform_t(lt_ctx *ctx, void *x, int64_t n, double lo, double hi, uint64_t key,
                      uint64_t off) {
    const T top = (T)hi;
    const T below = step_toward(top, (T)lo);
    k_uniform_wide<T><<<gpu_grid(n), GPU_THREADS, 0, GPU_STREAM>>>(
        (T *)x, n, lo, hi - lo, top, below, hi > lo, key, off);
    GPU_LAUNCHED(ctx, "rand_fill");
}

template <class T>
static void uniform_half_t(lt_ctx *ctx, void *x, int64_t n, double lo, double hi, uint64_t key,
                           uint64_t off) {
    typedef Num<T> N;
    const float top = (float)hi, below = nextafterf(top, (float)lo);
    const T top_t = N::st(top);
    const float top_v = N::ld(top_t);
    const T below_t = T{half_step_toward(top_t.b, top_v, (float)lo)};
    k_uniform_half<T><<<gpu_grid(n), GPU_THREADS, 0, GPU_STREAM>>>(
        (T *)x, n, lo, hi - lo, top, below, top_v, below_t, hi > lo, key, off);
    GPU_LAUNCHED(ctx, "rand_fill");
}

/* Box-Muller on the pair j = c / 2: even c takes r cos(theta), odd c
 * r sin(theta); 1 - u keeps log() off 0. */
template <class T>
__global__ void k_normal(T *x, int64_t n, double mean, double sd, uint64_t key, uint64_t off) {
    typedef Num<T> N;
    typedef typename N::C C;
    GPU_LOOP(i, n) {
        uint64_t c = off + (uint64_t)i, j = c >> 1;
        double u1 = 1 - gpu_rng_u53(key, 2 * j), u2 = gpu_rng_u53(key, 2 * j + 1);
        double r = sqrt(-2 * log(u1)), theta = 2 * M_PI * u2;
        double z = (c & 1) ? r * sin(theta) : r * cos(theta);
        x[i] = N::st((C)(mean + sd * z));
    }
}
template <class T>
static void normal_t(lt_ctx *ctx, void *x, int64_t n, double mean, double sd, uint64_t key,
                     uint64_t off) {
    k_normal<T><<<gpu_grid(n), GPU_THREADS, 0, GPU_STREAM>>>((T *)x, n, mean, sd, key, off);
    GPU_LAUNCHED(ctx, "rand_fill");
}

extern "C" void gpu_rand_fill(lt_ctx *ctx, lt_dtype t, void *x, int64_t n, lt_rand_dist dist,
                              double a, double b, uint64_t seed, uint64_t offset) {
    uint64_t key = gpu_rng_key(seed);
    if (dist == LT_RAND_UNIFORM) {
        if (!(a <= b)) {
            gpu_fail(ctx, LT_ERR_INVALID, "gpu rand_fill: uniform needs a <= b (got [%g, %g))", a, b);
            return;
        }
        if (n <= 0 || !gpu_enter(ctx)) return;
        switch (t) {
        case LT_F32: uniform_t<float>(ctx, x, n, a, b, key, offset); break;
        case LT_F64: uniform_t<double>(ctx, x, n, a, b, key, offset); break;
        case LT_F16: uniform_half_t<f16_t>(ctx, x, n, a, b, key, offset); break;
        case LT_BF16: uniform_half_t<bf16_t>(ctx, x, n, a, b, key, offset); break;
        default: gpu_bad_dtype(ctx, "rand_fill", t, "f32, f64, f16 or bf16");
        }
    } else if (dist == LT_RAND_NORMAL) {
        if (!(b >= 0)) {
            gpu_fail(ctx, LT_ERR_INVALID, "gpu rand_fill: normal needs std >= 0 (got %g)", b);
            return;
        }
        if (n <= 0 || !gpu_enter(ctx)) return;
        GPU_DISPATCH(ctx, "rand_fill", t, normal_t, ctx, x, n, a, b, key, offset);
    } else {
        gpu_fail(ctx, LT_ERR_INVALID, "gpu rand_fill: unknown distribution %d", (int)dist);
    }
}
