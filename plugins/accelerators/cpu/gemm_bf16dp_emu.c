/* gemm_bf16dp.c's kernel again, compiled without AVX-512 flags so that
 * SIMDe computes vdpbf16ps and the rest in portable C: the same packing,
 * tiling, tails and stores on any CPU (accelerator.bf16_gemm = emulated,
 * for tests; slow). Also what both builds share and must run anywhere:
 * the scratch size and the CPU check. */
#define BF16DP_EMULATED 1
#include "gemm_bf16dp.c"

size_t cpu_bf16dp_scratch_bytes(int64_t n, int64_t k) {
    size_t kp = (size_t)pairs_of(k), nb = (size_t)((n + NR - 1) / NR);
    return nb * kp * NR * 4 + ((kp * MR + 15) & ~(size_t)15) * 4 + (MR * NR + NR) * 4;
}

bool cpu_bf16dp_native_usable(void) {
#if defined(LT_BF16DP_NO_NATIVE) || !defined(__x86_64__)
    return false;
#else
    /* libgcc reports AVX-512 features only where the OS saves the ZMM and
     * opmask state (XCR0) too */
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
#endif
}
