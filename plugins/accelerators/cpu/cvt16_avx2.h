/* Eight-lane f32 <-> f16/bf16 conversions on AVX2 + F16C, shared by the
 * cast loops (cast_simd.c) and the 16-bit GEMM kernels (gemm_lowp_avx2.c).
 * Every function carries the target attribute, so a file including this
 * builds for the base ISA; call them only where the CPU has AVX2, FMA and
 * F16C. x86-64 with GCC or Clang only. */
#ifndef LT_CPU_CVT16_AVX2_H
#define LT_CPU_CVT16_AVX2_H

#include <cpuid.h>
#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>

#define CVT16_TARGET __attribute__((target("avx2,fma,f16c")))
#define CVT16_INLINE static inline __attribute__((always_inline)) CVT16_TARGET

/* True when this CPU (and its OS, for the ymm registers) runs the functions
 * below. F16C through cpuid: not every compiler's __builtin_cpu_supports
 * knows it (clang 14 does not). Slow (cpuid): call once and keep it. */
static inline bool cvt16_cpu_ok(void) {
    unsigned eax, ebx, ecx, edx;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
}

/* 8 bf16 to f32: exact, a shift. */
CVT16_INLINE __m256 cvt16_bf16x8_to_f32(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* 8 f16 to f32: exact, except that a signalling NaN comes out quiet (the
 * hardware sets bit 22); cast_simd.c puts it back where that matters. */
CVT16_INLINE __m256 cvt16_f16x8_to_f32(__m128i h) { return _mm256_cvtph_ps(h); }

/* 8 f32 (as bits) rounded to bf16 as half.h does, in the low half of each
 * 32-bit lane: add 0x7FFF plus the kept lsb and keep the high half (half
 * to even; overflow carries into infinity); NaN: the high half with the
 * quiet bit set. */
CVT16_INLINE __m256i cvt16_f32x8_to_bf16_lanes(__m256i u) {
    __m256 f = _mm256_castsi256_ps(u); /* NaN: unordered with itself (one compare) */
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF)));
    __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x0040));
    return _mm256_blendv_epi8(_mm256_srli_epi32(rounded, 16), quiet, nan);
}

/* As cvt16_f32x8_to_bf16_lanes for inputs whose NaNs, if any, are quiet
 * with zero low 16 bits: rounding leaves those unchanged (the add cannot
 * carry out of the low half), so the NaN test goes. The values fp32
 * arithmetic makes from bf16 operands are such: a bf16 widened has zero low
 * bits, an operation propagates a NaN operand's payload (quieted) or makes
 * the default NaN 0xFFC00000; so are the 16-bit GEMM's results once its
 * alpha and beta are not NaNs with other payloads (gemm_lowp_avx2.c). Half
 * the operations; for every other input the result is the same. */
CVT16_INLINE __m256i cvt16_f32x8_to_bf16_lanes_qnan0(__m256i u) {
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF)));
    return _mm256_srli_epi32(rounded, 16);
}

/* 8 f32 to 8 bf16, packed. The lanes hold 0..0xFFFF, so the saturating
 * pack is exact. */
CVT16_INLINE __m128i cvt16_f32x8_to_bf16(__m256 v) {
    __m256i l = cvt16_f32x8_to_bf16_lanes(_mm256_castps_si256(v));
    return _mm_packus_epi32(_mm256_castsi256_si128(l), _mm256_extracti128_si256(l, 1));
}

/* 8 f32 to 8 f16, round to nearest even (as half.h, NaNs included). */
CVT16_INLINE __m128i cvt16_f32x8_to_f16(__m256 v) {
    return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
}

#endif
