/* Element type conversion among f32, f64, f16 and bf16, round to nearest
 * even, NaN kept: the bits of plugins/accelerators/cpu/cast.c.
 *
 * A source is widened exactly first (16 bits -> fp32, fp32 -> double), so
 * each result is rounded once. double -> 16 bits is the one pair needing
 * care: rounding to fp32 and then again to 16 bits can round twice the
 * wrong way, so the fp32 step rounds to odd (truncate, then set the last
 * bit when anything was dropped), after which the 16-bit rounding is the
 * correct one (fp32 has more than two extra bits). */
#include <stdio.h>
#include "gpu_cuda.cuh"

/* A NaN as x86's cvtsd2ss makes it (the cpu plugin's bits): sign and the
 * top of the payload kept, quiet bit set. The GPU's own conversion may
 * return its canonical NaN instead. */
__device__ __forceinline__ float f64_nan_to_f32(double d) {
    unsigned long long b = (unsigned long long)__double_as_longlong(d);
    unsigned int sign = (unsigned int)(b >> 32) & 0x80000000u;
    return __uint_as_float(sign | 0x7FC00000u | (unsigned int)((b & 0xFFFFFFFFFFFFFull) >> 29));
}

/* And the other way, as cvtss2sd: the payload moved up, quiet bit set. */
__device__ __forceinline__ double f32_to_f64(float f) {
    if (f == f) return (double)f;
    unsigned long long b = __float_as_uint(f);
    return __longlong_as_double((long long)(((b & 0x80000000ull) << 32) | 0x7FF8000000000000ull |
                                            ((b & 0x7FFFFFull) << 29)));
}

__device__ __forceinline__ float f64_to_f32(double d) {
    return d != d ? f64_nan_to_f32(d) : (float)d;
}

__device__ __forceinline__ float f64_to_f32_odd(double d) {
    if (d != d) return f64_nan_to_f32(d);
    float t = __double2float_rz(d); /* toward zero: the neighbour nearer 0 */
    if ((double)t == d) return t;
    return __uint_as_float(__float_as_uint(t) | 1u);
}

template <class D> struct To;
template <> struct To<float> {
    static __device__ float of(float v) { return v; }
    static __device__ float of(double v) { return f64_to_f32(v); }
};
template <> struct To<double> {
    static __device__ double of(float v) { return f32_to_f64(v); }
    static __device__ double of(double v) { return v; }
};
template <> struct To<f16_t> {
    static __device__ f16_t of(float v) { return Num<f16_t>::st(v); }
    static __device__ f16_t of(double v) { return Num<f16_t>::st(f64_to_f32_odd(v)); }
};
template <> struct To<bf16_t> {
    static __device__ bf16_t of(float v) { return Num<bf16_t>::st(v); }
    static __device__ bf16_t of(double v) { return Num<bf16_t>::st(f64_to_f32_odd(v)); }
};

template <class D, class S> __global__ void k_cast(D *dst, const S *src, int64_t n) {
    GPU_LOOP(i, n) dst[i] = To<D>::of(Num<S>::ld(src[i]));
}

template <class D, class S> static void cast_pair(lt_ctx *ctx, void *dst, const void *src, int64_t n) {
    k_cast<D, S><<<gpu_grid(n), GPU_THREADS, 0, GPU_STREAM>>>((D *)dst, (const S *)src, n);
    GPU_LAUNCHED(ctx, "cast");
}

template <class D>
static void cast_from(lt_ctx *ctx, void *dst, lt_dtype src_t, const void *src, int64_t n) {
    switch (src_t) {
    case LT_F32: cast_pair<D, float>(ctx, dst, src, n); break;
    case LT_F64: cast_pair<D, double>(ctx, dst, src, n); break;
    case LT_F16: cast_pair<D, f16_t>(ctx, dst, src, n); break;
    default: cast_pair<D, bf16_t>(ctx, dst, src, n); break;
    }
}

static bool castable(lt_dtype t) { return t >= LT_F32 && t <= LT_BF16; }

extern "C" lt_status gpu_copy(lt_ctx *ctx, void *dst, const void *src, size_t bytes,
                              lt_copy_dir dir); /* memory.c */

extern "C" void gpu_cast(lt_ctx *ctx, lt_dtype dst_t, void *dst, lt_dtype src_t, const void *src,
                         int64_t n) {
    if (!castable(dst_t) || !castable(src_t)) {
        const char *d = lt_dtype_name(dst_t), *s = lt_dtype_name(src_t);
        gpu_fail(ctx, LT_ERR_UNSUPPORTED,
                 "gpu cast: %s -> %s is not supported; cast takes f32, f64, f16 and bf16",
                 s ? s : "unknown", d ? d : "unknown");
        return;
    }
    if (n <= 0 || !gpu_enter(ctx)) return;
    if (dst_t == src_t) { /* copy's memmove semantics, as the cpu plugin's cast */
        if (dst != src && gpu_copy(ctx, dst, src, (size_t)n * lt_dtype_size(dst_t),
                                   LT_COPY_D2D) != LT_OK) {
            char why[512];
            snprintf(why, sizeof why, "%s", lt_last_error(ctx));
            gpu_fail(ctx, LT_ERR_PLUGIN, "gpu cast (copy): %s", why);
        }
        return;
    }
    switch (dst_t) {
    case LT_F32: cast_from<float>(ctx, dst, src_t, src, n); break;
    case LT_F64: cast_from<double>(ctx, dst, src_t, src, n); break;
    case LT_F16: cast_from<f16_t>(ctx, dst, src_t, src, n); break;
    default: cast_from<bf16_t>(ctx, dst, src_t, src, n); break;
    }
}
