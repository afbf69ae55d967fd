/* Bagua's MinMaxUInt8 (quantize_u8, dequantize_u8) on f32, f64, f16 and
 * bf16, with the exact arithmetic accelerator.h prescribes, so the bytes
 * and the decoded values equal the cpu plugin's (quantize.c there). Per
 * chunk, C the compute type (fp32; double for f64), each operation rounded
 * to nearest, never fused (this file is built with -fmad=false, and the
 * fp32 steps are written with the _rn intrinsics as well):
 *   encode  q = rint((x*s - min*s) * (255 / (max*s - min*s)))   ties to even
 *   decode  d = (min*s + q * ((max*s - min*s) / 255)) / s
 * s = 1 except in fp32 where max - min overflows (1/2) or is below 2^-96
 * (2^64).
 *
 * quantize: one block per chunk. The min and max are an integer reduction
 * over keys (a float's bits b map to b ^ ((b >> (bits-1)) & 0x7F..F),
 * which orders like the values; inf and NaN have keys beyond the largest
 * finite one, so the same two keys tell a non-finite chunk, which gets
 * {NaN, NaN} and q = 0). f64 bounds are stored rounded outward to f32.
 * dequantize: one thread per element. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include "gpu_cuda.cuh"

/* Per element type: the key of a stored element, the value of a key, the
 * key of the largest finite value, and the f32 bounds stored. */
template <class T> struct QK;
template <> struct QK<float> {
    typedef float C;
    static __device__ long long key(const float *x) {
        int32_t b = (int32_t)__float_as_uint(*x);
        return (long long)(b ^ ((b >> 31) & 0x7FFFFFFF));
    }
    static __device__ C val(long long k) {
        int32_t b = (int32_t)k;
        return __uint_as_float((uint32_t)(b ^ ((b >> 31) & 0x7FFFFFFF)));
    }
    static constexpr long long maxfin = 0x7F7FFFFFll;
    static __device__ float lo32(C v) { return v; }
    static __device__ float hi32(C v) { return v; }
};
template <> struct QK<double> {
    typedef double C;
    static __device__ long long key(const double *x) {
        long long b = __double_as_longlong(*x);
        return b ^ ((b >> 63) & 0x7FFFFFFFFFFFFFFFll);
    }
    static __device__ C val(long long k) {
        return __longlong_as_double(k ^ ((k >> 63) & 0x7FFFFFFFFFFFFFFFll));
    }
    static constexpr long long maxfin = 0x7FEFFFFFFFFFFFFFll;
    static __device__ float lo32(C v) { return __double2float_rd(v); } /* holds every element */
    static __device__ float hi32(C v) { return __double2float_ru(v); }
};
template <class H> struct QK16 {
    typedef float C;
    static __device__ long long key(const H *x) {
        int32_t b = (int16_t)x->b;
        return (long long)(int16_t)(b ^ ((b >> 15) & 0x7FFF));
    }
    static __device__ C val(long long k) {
        int32_t b = (int16_t)k;
        return Num<H>::ld(H{(uint16_t)(int16_t)(b ^ ((b >> 15) & 0x7FFF))});
    }
    static __device__ float lo32(C v) { return v; }
    static __device__ float hi32(C v) { return v; }
};
template <> struct QK<f16_t> : QK16<f16_t> {
    static constexpr long long maxfin = 0x7BFF;
};
template <> struct QK<bf16_t> : QK16<bf16_t> {
    static constexpr long long maxfin = 0x7F7F;
};

/* The power of two s from the stored bounds (a NaN chunk gets 1). */
__device__ __forceinline__ float qscale(float mn, float mx) {
    float r = __fsub_rn(mx, mn);
    return r > FLT_MAX ? 0.5f : r > 0 && r < 0x1p-96f ? 0x1p64f : 1.0f;
}

/* The encoding of one element, given the chunk's ms = min*s and inv. */
__device__ __forceinline__ uint8_t qenc(float x, float s, float ms, float inv) {
    float v = s == 1.0f ? __fsub_rn(x, ms) : __fsub_rn(__fmul_rn(x, s), ms);
    return (uint8_t)__float2int_rn(__fmul_rn(v, inv));
}
__device__ __forceinline__ uint8_t qenc(double x, double s, double ms, double inv) {
    (void)s;
    return (uint8_t)__double2int_rn(__dmul_rn(__dsub_rn(x, ms), inv));
}

/* The chunk's constants: s, ms = min*s, inv = 255 / (max*s - ms). */
__device__ __forceinline__ void qconsts(float mn, float mx, float *s, float *ms, float *inv) {
    *s = qscale(mn, mx);
    *ms = __fmul_rn(mn, *s);
    float rs = __fsub_rn(__fmul_rn(mx, *s), *ms);
    *inv = rs == 0 ? 0.0f : __fdiv_rn(255.0f, rs);
}
__device__ __forceinline__ void qconsts(float mn, float mx, double *s, double *ms, double *inv) {
    *s = 1.0;
    *ms = (double)mn;
    double rs = __dsub_rn((double)mx, *ms);
    *inv = rs == 0 ? 0.0 : __ddiv_rn(255.0, rs);
}

template <class T>
__global__ void k_quantize(const T *x, int64_t n, int64_t chunk, uint8_t *q, float *minmax) {
    typedef QK<T> K;
    typedef typename K::C C;
    __shared__ long long sh_lo[GPU_THREADS], sh_hi[GPU_THREADS];
    __shared__ C s_s, s_ms, s_inv;
    __shared__ int s_bad;
    const int64_t nchunks = (n + chunk - 1) / chunk;
    for (int64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
        const int64_t c0 = c * chunk, len = n - c0 < chunk ? n - c0 : chunk;
        long long lo = LLONG_MAX, hi = LLONG_MIN;
        for (int64_t i = threadIdx.x; i < len; i += GPU_THREADS) {
            long long k = K::key(x + c0 + i);
            lo = k < lo ? k : lo;
            hi = k > hi ? k : hi;
        }
        sh_lo[threadIdx.x] = lo;
        sh_hi[threadIdx.x] = hi;
        __syncthreads();
        for (unsigned w = GPU_THREADS / 2; w > 0; w >>= 1) {
            if (threadIdx.x < w) {
                long long a = sh_lo[threadIdx.x + w], b = sh_hi[threadIdx.x + w];
                if (a < sh_lo[threadIdx.x]) sh_lo[threadIdx.x] = a;
                if (b > sh_hi[threadIdx.x]) sh_hi[threadIdx.x] = b;
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            lo = sh_lo[0];
            hi = sh_hi[0];
            float mn = K::lo32(K::val(lo)), mx = K::hi32(K::val(hi));
            s_bad = hi > K::maxfin || lo < -K::maxfin - 1 || mn < -FLT_MAX || mx > FLT_MAX;
            if (s_bad) {
                minmax[2 * c] = minmax[2 * c + 1] = __int_as_float(0x7FC00000);
            } else {
                minmax[2 * c] = mn;
                minmax[2 * c + 1] = mx;
                C s, ms, inv;
                qconsts(mn, mx, &s, &ms, &inv);
                s_s = s;
                s_ms = ms;
                s_inv = inv;
            }
        }
        __syncthreads();
        const bool bad = s_bad;
        const C s = s_s, ms = s_ms, inv = s_inv;
        for (int64_t i = threadIdx.x; i < len; i += GPU_THREADS)
            q[c0 + i] = bad ? (uint8_t)0 : qenc((C)Num<T>::ld(x[c0 + i]), s, ms, inv);
        __syncthreads(); /* the shared constants are rewritten for the next chunk */
    }
}

/* One element's decoded value, from its chunk's stored bounds. */
__device__ __forceinline__ float qdec(float mn, float mx, uint8_t q) {
    float s = qscale(mn, mx), ms = __fmul_rn(mn, s);
    float step = __fdiv_rn(__fsub_rn(__fmul_rn(mx, s), ms), 255.0f);
    float d = __fadd_rn(ms, __fmul_rn((float)q, step));
    return s == 1.0f ? d : __fmul_rn(d, __fdiv_rn(1.0f, s));
}
__device__ __forceinline__ double qdec_d(float mn, float mx, uint8_t q) {
    double ms = (double)mn, step = __ddiv_rn(__dsub_rn((double)mx, ms), 255.0);
    return __dadd_rn(ms, __dmul_rn((double)q, step));
}
template <class T> struct QDec {
    static __device__ float of(float mn, float mx, uint8_t q) { return qdec(mn, mx, q); }
    static __device__ float axpy(float beta, float y, float d) {
        return __fadd_rn(__fmul_rn(beta, y), d);
    }
};
template <> struct QDec<double> {
    static __device__ double of(float mn, float mx, uint8_t q) { return qdec_d(mn, mx, q); }
    static __device__ double axpy(double beta, double y, double d) {
        return __dadd_rn(__dmul_rn(beta, y), d);
    }
};

template <class T>
__global__ void k_dequantize(const uint8_t *q, const float *minmax, int64_t n, int64_t chunk, T *y,
                             typename Num<T>::C beta) {
    typedef Num<T> N;
    typedef typename N::C C;
    GPU_LOOP(i, n) {
        int64_t c = i / chunk;
        C d = QDec<T>::of(minmax[2 * c], minmax[2 * c + 1], q[i]);
        y[i] = N::st(beta == 0 ? d : QDec<T>::axpy(beta, N::ld(y[i]), d));
    }
}

template <class T>
static void quantize_t(lt_ctx *ctx, const void *x, int64_t n, int64_t chunk, uint8_t *q,
                       float *minmax) {
    int64_t nchunks = (n + chunk - 1) / chunk;
    unsigned grid = (unsigned)(nchunks > GPU_MAX_GRID ? GPU_MAX_GRID : nchunks);
    k_quantize<T><<<grid, GPU_THREADS, 0, GPU_STREAM>>>((const T *)x, n, chunk, q, minmax);
    GPU_LAUNCHED(ctx, "quantize_u8");
}
template <class T>
static void dequantize_t(lt_ctx *ctx, const uint8_t *q, const float *minmax, int64_t n,
                         int64_t chunk, void *y, double beta) {
    typedef typename Num<T>::C C;
    k_dequantize<T><<<gpu_grid(n), GPU_THREADS, 0, GPU_STREAM>>>(q, minmax, n, chunk, (T *)y,
                                                                 (C)beta);
    GPU_LAUNCHED(ctx, "dequantize_u8");
}

extern "C" void gpu_quantize_u8(lt_ctx *ctx, lt_dtype t, const void *x, int64_t n, int64_t chunk,
                                uint8_t *q, float *minmax) {
    if (n > 0 && chunk < 1) {
        gpu_fail(ctx, LT_ERR_INVALID, "gpu quantize_u8: chunk %lld (must be at least 1)",
                 (long long)chunk);
        return;
    }
    if (n <= 0 || !gpu_enter(ctx)) return;
    GPU_DISPATCH(ctx, "quantize_u8", t, quantize_t, ctx, x, n, chunk, q, minmax);
}

extern "C" void gpu_dequantize_u8(lt_ctx *ctx, lt_dtype t, const uint8_t *q, const float *minmax,
                                  int64_t n, int64_t chunk, void *y, double beta) {
    if (n > 0 && chunk < 1) {
        gpu_fail(ctx, LT_ERR_INVALID, "gpu dequantize_u8: chunk %lld (must be at least 1)",
                 (long long)chunk);
        return;
    }
    if (n <= 0 || !gpu_enter(ctx)) return;
    GPU_DISPATCH(ctx, "dequantize_u8", t, dequantize_t, ctx, q, minmax, n, chunk, y, beta);
}
