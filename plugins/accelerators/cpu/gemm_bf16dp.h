/* bf16 GEMM on AVX-512 BF16's dot product (vdpbf16ps): two bf16 products
 * of adjacent k summed into each fp32 lane per instruction, twice the f32
 * FMA's products per cycle. gemm_bf16dp.c is written once against SIMDe's
 * names (simde_mm512_*) and compiled twice:
 *   - native: with the AVX-512 and AVX-512 BF16 flags, where SIMDe's names
 *     are the compiler's own intrinsics (the file refuses to build
 *     otherwise), called only on a CPU that has them;
 *   - emulated: without them, where SIMDe computes the same instructions in
 *     portable C, on any CPU: slow, for testing the kernel's packing,
 *     tiling, tails and stores on machines without AVX-512 BF16.
 * Internal to the cpu accelerator; gemm_lowp.c dispatches to it. */
#ifndef LT_CPU_GEMM_BF16DP_H
#define LT_CPU_GEMM_BF16DP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cast_simd.h"

/* C = alpha op(A) op(B) + beta C on bf16 A, B and C: products exact in
 * fp32, summed in fp32 by the instruction, C rounded once by `narrow`
 * (f32 -> bf16) after `widen` (bf16 -> f32) read it; beta 0 never reads C.
 * The instruction flushes subnormal inputs and sums to zero (DAZ, FTZ),
 * SIMDe's emulation does not: the two builds differ on values below 2^-126
 * (the widening paths keep them). m, n, k >= 1;
 * scratch holds cpu_bf16dp_scratch_bytes(n, k) bytes, 64-byte aligned.
 * Runs on the calling thread. */
typedef void (*cpu_bf16dp_fn)(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                              const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
                              float beta, uint16_t *c, int64_t ldc, void *scratch,
                              cpu_cast_fn widen, cpu_cast_fn narrow);

void cpu_bf16dp_native(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                       const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
                       float beta, uint16_t *c, int64_t ldc, void *scratch, cpu_cast_fn widen,
                       cpu_cast_fn narrow);
void cpu_bf16dp_emulated(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                         const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
                         float beta, uint16_t *c, int64_t ldc, void *scratch, cpu_cast_fn widen,
                         cpu_cast_fn narrow);

/* Bytes of scratch one call needs: all of op(B) packed, one panel of
 * op(A), two fp32 rows. */
size_t cpu_bf16dp_scratch_bytes(int64_t n, int64_t k);

/* Whether this CPU (and its OS, for the 512-bit state) runs the native
 * build: AVX-512 F, BW, VL and BF16. */
bool cpu_bf16dp_native_usable(void);

#endif
