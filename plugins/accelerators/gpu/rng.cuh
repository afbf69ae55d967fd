/* The counter-based generator of plugins/accelerators/cpu/rng.h, for host
 * and device: element c of a call with (seed, offset) depends only on seed
 * and c = offset + i, so a mask or a fill equals the cpu plugin's.
 *   key     = mix64(seed ^ 0x6A09E667F3BCC909)
 *   bits(c) = mix64(key ^ (c * 0x9E3779B97F4A7C15))
 *   u53(c)  = (bits(c) >> 11) * 2^-53
 * mix64 is the splitmix64 finaliser. Integer arithmetic only, so every
 * device gets the same bits. */
#ifndef LT_GPU_RNG_CUH
#define LT_GPU_RNG_CUH

#include <stdint.h>

__host__ __device__ __forceinline__ uint64_t gpu_rng_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
__host__ __device__ __forceinline__ uint64_t gpu_rng_key(uint64_t seed) {
    return gpu_rng_mix64(seed ^ 0x6A09E667F3BCC909ull);
}
__host__ __device__ __forceinline__ uint64_t gpu_rng_bits(uint64_t key, uint64_t c) {
    return gpu_rng_mix64(key ^ (c * 0x9E3779B97F4A7C15ull));
}
__host__ __device__ __forceinline__ double gpu_rng_u53(uint64_t key, uint64_t c) {
    return (double)(gpu_rng_bits(key, c) >> 11) * 0x1p-53;
}

#endif
