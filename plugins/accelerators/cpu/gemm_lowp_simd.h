/* What the 16-bit GEMM kernels (gemm_lowp_avx2.c, gemm_lowp_dot.c) share:
 * loads of 16-bit data widened to fp32 vectors, stores of fp32 vectors
 * rounded to 16 bits, and DOT's entry. The helpers are inline and carry
 * the target attribute (cvt16_avx2.h); x86-64 with GCC or Clang only.
 * Internal to the cpu accelerator. */
#ifndef LT_CPU_GEMM_LOWP_SIMD_H
#define LT_CPU_GEMM_LOWP_SIMD_H

#include <stdbool.h>
#include <string.h>
#include "cvt16_avx2.h"

#define KERN CVT16_TARGET
#define INL CVT16_INLINE

/* 8 f16 (bf false) or bf16 values to f32, exactly. */
INL __m256 widen8(bool bf, const uint16_t *p) {
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    return bf ? cvt16_bf16x8_to_f32(h) : cvt16_f16x8_to_f32(h);
}

/* The first n (0..8) of p, zeros after: never reads past p + n. */
INL __m256 widen_part(bool bf, const uint16_t *p, int n) {
    uint16_t tmp[8] = {0};
    memcpy(tmp, p, (size_t)n * 2);
    return widen8(bf, tmp);
}

/* C's stores: bf16 without the NaN test, exact for the GEMM's results (see
 * cvt16_f32x8_to_bf16_lanes_qnan0 and cpu_hgemm_avx2). */
INL void narrow8(bool bf, uint16_t *p, __m256 v) {
    if (bf) {
        __m256i l = cvt16_f32x8_to_bf16_lanes_qnan0(_mm256_castps_si256(v));
        __m128i lo = _mm256_castsi256_si128(l), hi = _mm256_extracti128_si256(l, 1);
        _mm_storeu_si128((__m128i *)p, _mm_packus_epi32(lo, hi));
    } else {
        _mm_storeu_si128((__m128i *)p, cvt16_f32x8_to_f16(v));
    }
}

/* Stores the first n (0..8) lanes only. */
INL void narrow_part(bool bf, uint16_t *p, __m256 v, int n) {
    uint16_t tmp[8];
    narrow8(bf, tmp, v);
    memcpy(p, tmp, (size_t)n * 2);
}

/* 16 bf16 as two vectors in unpack order: lo holds elements 0-3 and 8-11,
 * hi 4-7 and 12-15. One unpack each (the zero half is the low half of the
 * f32), where natural order costs a zero-extension and a shift per vector;
 * a kernel keeps its sums in this order and bf16_narrow16_il, whose pack
 * undoes it, restores the natural order when it stores. */
INL void bf16_widen16_il(const uint16_t *p, __m256 *lo, __m256 *hi) {
    __m256i v = _mm256_loadu_si256((const __m256i *)p), z = _mm256_setzero_si256();
    *lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(z, v));
    *hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, v));
}

INL void bf16_narrow16_il(uint16_t *p, __m256 lo, __m256 hi) {
    __m256i l = cvt16_f32x8_to_bf16_lanes_qnan0(_mm256_castps_si256(lo));
    __m256i h = cvt16_f32x8_to_bf16_lanes_qnan0(_mm256_castps_si256(hi));
    _mm256_storeu_si256((__m256i *)p, _mm256_packus_epi32(l, h)); /* lanes 0..0xFFFF: exact */
}

/* 16 values of a 16-bit row as two vectors: f16 in natural order, bf16 in
 * unpack order (the DOT kernel packs op(B) the same way, so products pair
 * up). The _part form reads only the first n (0..16), zeros after. */
INL void widen16(bool bf, const uint16_t *p, __m256 *lo, __m256 *hi) {
    if (bf) {
        bf16_widen16_il(p, lo, hi);
    } else {
        *lo = widen8(false, p);
        *hi = widen8(false, p + 8);
    }
}

INL void widen16_part(bool bf, const uint16_t *p, int n, __m256 *lo, __m256 *hi) {
    uint16_t tmp[16] = {0};
    memcpy(tmp, p, (size_t)n * 2);
    widen16(bf, tmp, lo, hi);
}

/* Lanes 0 .. n-1 set (none when n <= 0): maskload/maskstore's mask. */
INL __m256i lanes(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* gemm_lowp_dot.c: the DOT path (gemm_lowp_avx2.h); bt holds n rows of k
 * rounded up to 16 floats. */
void cpu_hgemm_dot_avx2(bool bf, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                        const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
                        float beta, uint16_t *c, int64_t ldc, float *bt);

/* gemm_lowp_yt.c: the YT path (B transposed); its scratch in floats is
 * cpu_hgemm_yt_scratch (gemm_lowp_avx2.h). */
void cpu_hgemm_yt_avx2(bool bf, bool ta, int64_t m, int64_t n, int64_t k, float alpha,
                       const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
                       float beta, uint16_t *c, int64_t ldc, float *scratch);

/* gemm_lowp_avx2.c: a B panel, bp[p * 16 + j] = op(B)[p0 + p, j0 + j]
 * widened for j < nr (<= 16), zero for nr <= j < 16, p < kc. YT packs
 * op(A)^T with it. */
void cpu_hgemm_pack_b(bool bf, bool tb, const uint16_t *b, int64_t ldb, int64_t p0, int64_t kc,
                      int64_t j0, int nr, float *bp);

#endif
