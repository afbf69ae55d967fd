/* What every .cu file of the gpu accelerator shares: the element types and
 * their conversions, the dtype dispatch, launch sizing.
 *
 * Element types: float, double, and two 16-bit wrappers (f16_t, bf16_t)
 * holding the raw bits, so templates can tell them apart and the stored
 * bits are exactly what the cpu plugin (plugins/common/half.h) stores: the
 * conversions here round to nearest even, turn overflow into infinity, and
 * quiet a NaN keeping its sign and top payload bits (cuda_fp16.h's own
 * conversion would store one canonical NaN instead). Num<T> gives:
 *   Num<T>::C        the type a kernel computes in (float for 16 bits)
 *   Num<T>::ld(e)    an element as C, exact
 *   Num<T>::st(v)    a C value rounded once to T
 * so a 16-bit kernel computes the f32 kernel's expression on widened
 * inputs and rounds each stored result once (accelerator.h). */
#ifndef LT_GPU_CUDA_CUH
#define LT_GPU_CUDA_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>
#include "gpu_internal.h"

#define GPU_HD __host__ __device__ __forceinline__

struct f16_t {
    uint16_t b;
};
struct bf16_t {
    uint16_t b;
};

GPU_HD uint32_t gpu_f32_bits(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

GPU_HD float gpu_f32_of(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* Exact, written on the bits so a NaN keeps its payload (a hardware or
 * library conversion may return a canonical NaN instead). */
GPU_HD float gpu_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7FFFu;
    if (em >= 0x7C00u) return gpu_f32_of(sign | 0x7F800000u | ((em & 0x3FFu) << 13));
    if (em >= 0x0400u) return gpu_f32_of(sign | ((em << 13) + 0x38000000u));
    return gpu_f32_of(sign | gpu_f32_bits((float)em * 0x1p-24f)); /* zero, subnormal: exact */
}

GPU_HD uint16_t gpu_f32_to_f16(float f) {
    uint32_t u = gpu_f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: quiet, keep sign and payload's top bits */
        return (uint16_t)(((u >> 16) & 0x8000u) | 0x7E00u | ((u >> 13) & 0x1FFu));
    __half_raw r = __half_raw(__float2half_rn(f));
    return r.x;
}

GPU_HD float gpu_bf16_to_f32(uint16_t h) { return gpu_f32_of((uint32_t)h << 16); }

/* Round half to even on the 16 dropped bits: adding 0x7FFF and the lowest
 * kept bit carries exactly when it must; a carry past the largest finite
 * value lands on infinity. */
GPU_HD uint16_t gpu_f32_to_bf16(float f) {
    uint32_t u = gpu_f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

template <class T> struct Num;
template <> struct Num<float> {
    typedef float C;
    static GPU_HD float ld(float x) { return x; }
    static GPU_HD float st(float v) { return v; }
};
template <> struct Num<double> {
    typedef double C;
    static GPU_HD double ld(double x) { return x; }
    static GPU_HD double st(double v) { return v; }
};
template <> struct Num<f16_t> {
    typedef float C;
    static GPU_HD float ld(f16_t x) { return gpu_f16_to_f32(x.b); }
    static GPU_HD f16_t st(float v) { return f16_t{gpu_f32_to_f16(v)}; }
};
template <> struct Num<bf16_t> {
    typedef float C;
    static GPU_HD float ld(bf16_t x) { return gpu_bf16_to_f32(x.b); }
    static GPU_HD bf16_t st(float v) { return bf16_t{gpu_f32_to_bf16(v)}; }
};

/* Calls fn<T>(args...) for the dtype, or parks the error (the kernels'
 * "unsupported dtype" path, reported by the next synchronize). */
#define GPU_DISPATCH(ctx, name, t, fn, ...)                                                \
    do {                                                                                   \
        switch (t) {                                                                       \
        case LT_F32: fn<float>(__VA_ARGS__); break;                                        \
        case LT_F64: fn<double>(__VA_ARGS__); break;                                       \
        case LT_F16: fn<f16_t>(__VA_ARGS__); break;                                        \
        case LT_BF16: fn<bf16_t>(__VA_ARGS__); break;                                      \
        default: gpu_bad_dtype((ctx), (name), (t), "f32, f64, f16 or bf16");               \
        }                                                                                  \
    } while (0)

/* Element-wise launches: 256 threads, a grid-stride loop, and at most
 * GPU_MAX_GRID blocks (enough to fill any current GPU many times over). */
#define GPU_THREADS 256
#define GPU_MAX_GRID 65536
static inline unsigned gpu_grid(int64_t n) {
    int64_t b = (n + GPU_THREADS - 1) / GPU_THREADS;
    return (unsigned)(b < 1 ? 1 : b > GPU_MAX_GRID ? GPU_MAX_GRID : b);
}
/* Reductions: at most GPU_MAX_PARTIALS blocks, each writing one partial. */
static inline unsigned gpu_reduce_grid(int64_t n) {
    int64_t b = (n + GPU_THREADS - 1) / GPU_THREADS;
    return (unsigned)(b < 1 ? 1 : b > GPU_MAX_PARTIALS ? GPU_MAX_PARTIALS : b);
}

#define GPU_STREAM cudaStreamPerThread
#define GPU_LOOP(i, n)                                                                     \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);               \
         i += (int64_t)gridDim.x * blockDim.x)

/* After a launch: a bad configuration shows here at once (kernel faults
 * show at the next synchronize). */
#define GPU_LAUNCHED(ctx, name) gpu_check((ctx), (int)cudaPeekAtLastError(), (name))

/* Block-wide sum of a double over GPU_THREADS threads; the result is valid
 * in thread 0. Fixed tree order: the same input gives the same bits. */
__device__ __forceinline__ double gpu_block_sum(double v, double *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (unsigned w = GPU_THREADS / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    return sh[0];
}

/* Math in the compute type (float or double overloads, spelled out). */
__device__ __forceinline__ float gpu_exp(float x) { return expf(x); }
__device__ __forceinline__ double gpu_exp(double x) { return exp(x); }
__device__ __forceinline__ float gpu_log(float x) { return logf(x); }
__device__ __forceinline__ double gpu_log(double x) { return log(x); }
__device__ __forceinline__ float gpu_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double gpu_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float gpu_erf(float x) { return erff(x); }
__device__ __forceinline__ double gpu_erf(double x) { return erf(x); }
__device__ __forceinline__ float gpu_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double gpu_sqrt(double x) { return sqrt(x); }

#endif
