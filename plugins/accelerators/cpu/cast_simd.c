/* f32 <-> f16/bf16 loops (cast_simd.h): half.h element by element, and
 * vector forms with the same results bit for bit.
 *
 *   - f32 -> f16: F16C's vcvtps2ph with round-to-nearest-even; its NaN
 *     (quiet bit set, payload truncated), overflow and subnormal results are
 *     half.h's.
 *   - f16 -> f32: vcvtph2ps is exact but quiets a signalling NaN (sets bit
 *     22) where half.h keeps the payload as it is, so NaN lanes get bit 22
 *     back from the input's bit 9.
 *   - f32 -> bf16: half.h's integer rounding (add 0x7FFF plus the kept lsb,
 *     keep the high half; NaN: high half with the quiet bit) on 8 lanes.
 *     Not AVX-512 BF16's vcvtneps2bf16: it flushes subnormal inputs to zero.
 *   - bf16 -> f32: a 16-bit shift.
 * (The eight-lane steps are cvt16_avx2.h's, shared with the 16-bit GEMM.)
 *
 * The vector functions carry their own target attribute, so the file builds
 * for the base ISA and they run only where cpu_cast_lowp_fn found the CPU
 * able to. Tails shorter than a vector go through half.h. */
#include "cast_simd.h"

#include <pthread.h>
#include "common/half.h"

static void f16_from_f32_scalar(void *dst, const void *src, int64_t n) {
    uint16_t *restrict d = dst;
    const float *restrict s = src;
    for (int64_t i = 0; i < n; i++) d[i] = half_f32_to_f16(s[i]);
}

static void f32_from_f16_scalar(void *dst, const void *src, int64_t n) {
    float *restrict d = dst;
    const uint16_t *restrict s = src;
    for (int64_t i = 0; i < n; i++) d[i] = half_f16_to_f32(s[i]);
}

static void bf16_from_f32_scalar(void *dst, const void *src, int64_t n) {
    uint16_t *restrict d = dst;
    const float *restrict s = src;
    for (int64_t i = 0; i < n; i++) d[i] = half_f32_to_bf16(s[i]);
}

static void f32_from_bf16_scalar(void *dst, const void *src, int64_t n) {
    float *restrict d = dst;
    const uint16_t *restrict s = src;
    for (int64_t i = 0; i < n; i++) d[i] = half_bf16_to_f32(s[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include "cvt16_avx2.h"

#define VEC CVT16_TARGET

static VEC void f16_from_f32_vec(void *dst, const void *src, int64_t n) {
    uint16_t *d = dst;
    const float *s = src;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm_storeu_si128((__m128i *)(d + i), cvt16_f32x8_to_f16(_mm256_loadu_ps(s + i)));
        _mm_storeu_si128((__m128i *)(d + i + 8), cvt16_f32x8_to_f16(_mm256_loadu_ps(s + i + 8)));
    }
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i), cvt16_f32x8_to_f16(_mm256_loadu_ps(s + i)));
    f16_from_f32_scalar(d + i, s + i, n - i);
}

/* 8 f16 (as 16-bit lanes of h) to f32, half.h's NaN payloads kept. */
static VEC inline __m256 f16x8_to_f32(__m128i h) {
    __m256 f = cvt16_f16x8_to_f32(h);
    __m256i w = _mm256_cvtepu16_epi32(h);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x7FFF)),
                                     _mm256_set1_epi32(0x7C00));
    /* bit 22 set by the hardware where the input's quiet bit (9) is clear */
    __m256i flip = _mm256_and_si256(
        nan, _mm256_andnot_si256(_mm256_slli_epi32(w, 13), _mm256_set1_epi32(0x00400000)));
    return _mm256_castsi256_ps(_mm256_xor_si256(_mm256_castps_si256(f), flip));
}

static VEC void f32_from_f16_vec(void *dst, const void *src, int64_t n) {
    float *d = dst;
    const uint16_t *s = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, f16x8_to_f32(_mm_loadu_si128((const __m128i *)(s + i))));
    f32_from_f16_scalar(d + i, s + i, n - i);
}

static VEC void bf16_from_f32_vec(void *dst, const void *src, int64_t n) {
    uint16_t *d = dst;
    const float *s = src;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i lo = cvt16_f32x8_to_bf16_lanes(_mm256_loadu_si256((const __m256i *)(s + i)));
        __m256i hi = cvt16_f32x8_to_bf16_lanes(_mm256_loadu_si256((const __m256i *)(s + i + 8)));
        /* lanes hold 0..0xFFFF, so the saturating pack is exact; it
         * interleaves 128-bit halves, which the permute puts back in order */
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);
        _mm256_storeu_si256((__m256i *)(d + i), packed);
    }
    bf16_from_f32_scalar(d + i, s + i, n - i);
}

static VEC void f32_from_bf16_vec(void *dst, const void *src, int64_t n) {
    float *d = dst;
    const uint16_t *s = src;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(s + i));
        __m256i lo = _mm256_cvtepu16_epi32(_mm256_castsi256_si128(h));
        __m256i hi = _mm256_cvtepu16_epi32(_mm256_extracti128_si256(h, 1));
        _mm256_storeu_si256((__m256i *)(d + i), _mm256_slli_epi32(lo, 16));
        _mm256_storeu_si256((__m256i *)(d + i + 8), _mm256_slli_epi32(hi, 16));
    }
    f32_from_bf16_scalar(d + i, s + i, n - i);
}

static bool vec_ok;
static pthread_once_t vec_once = PTHREAD_ONCE_INIT;

static void vec_probe(void) { vec_ok = cvt16_cpu_ok(); }

static bool vector_usable(void) {
    pthread_once(&vec_once, vec_probe);
    return vec_ok;
}

#else /* not x86-64 with GCC or Clang: half.h only */

static bool vector_usable(void) { return false; }
#define f16_from_f32_vec NULL
#define f32_from_f16_vec NULL
#define bf16_from_f32_vec NULL
#define f32_from_bf16_vec NULL

#endif

cpu_cast_fn cpu_cast_lowp_fn(lt_dtype dst_t, lt_dtype src_t, cpu_cast_impl impl) {
    bool vec = impl == CPU_CAST_VECTOR;
    if (impl != CPU_CAST_SCALAR && !(vec && vector_usable())) return NULL;
    if (dst_t == LT_F16 && src_t == LT_F32) return vec ? f16_from_f32_vec : f16_from_f32_scalar;
    if (dst_t == LT_F32 && src_t == LT_F16) return vec ? f32_from_f16_vec : f32_from_f16_scalar;
    if (dst_t == LT_BF16 && src_t == LT_F32)
        return vec ? bf16_from_f32_vec : bf16_from_f32_scalar;
    if (dst_t == LT_F32 && src_t == LT_BF16)
        return vec ? f32_from_bf16_vec : f32_from_bf16_scalar;
    return NULL;
}

cpu_cast_fn cpu_cast_f16_stage(lt_dtype t) {
    return t == LT_F16 ? cpu_cast_lowp_fn(LT_F32, LT_F16, CPU_CAST_VECTOR) : NULL;
}

cpu_cast_fn cpu_cast_lowp_best(lt_dtype dst_t, lt_dtype src_t) {
    cpu_cast_fn f = cpu_cast_lowp_fn(dst_t, src_t, CPU_CAST_VECTOR);
    return f ? f : cpu_cast_lowp_fn(dst_t, src_t, CPU_CAST_SCALAR);
}
