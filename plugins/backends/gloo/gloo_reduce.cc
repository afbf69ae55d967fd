/* Elementwise reductions (see gloo_reduce.h). This file is built with -O3 so
 * the plain loops vectorize; gloo calls them in place (c == a), which rules
 * out __restrict, and GCC's -O2 cost model does not version loops for aliasing. */
#include "gloo_reduce.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define LTGLOO_X86 1
#endif

namespace ltgloo {
namespace {

/* IEEE binary16 <-> binary32, round to nearest even; NaN stays NaN. */
inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7fffu, bits;
    if (em >= 0x7c00u) {
        bits = sign | 0x7f800000u | ((em & 0x3ffu) << 13);
    } else if (em >= 0x0400u) {
        bits = sign | ((em << 13) + 0x38000000u); /* rebias 15 -> 127 */
    } else {
        float f = (float)em * 5.9604644775390625e-8f; /* subnormal: em * 2^-24, exact */
        std::memcpy(&bits, &f, 4);
        bits |= sign;
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

inline uint16_t f32_to_f16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds past 65504: inf */
    if (a < 0x38800000u) {
        /* Below the smallest normal half: adding 0.5f puts the value's half
         * subnormal ulp (2^-24) at float's ulp, so the FPU rounds it for us. */
        float af;
        std::memcpy(&af, &a, 4);
        af += 0.5f;
        uint32_t r;
        std::memcpy(&r, &af, 4);
        return (uint16_t)(sign | (r - 0x3f000000u));
    }
    a += 0xc8000fffu + ((a >> 13) & 1u); /* rebias 127 -> 15, round to nearest even */
    return (uint16_t)(sign | (a >> 13));
}

inline float bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

inline uint16_t f32_to_bf16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

struct F16 {
    static float to(uint16_t h) { return f16_to_f32(h); }
    static uint16_t from(float f) { return f32_to_f16(f); }
};
struct BF16 {
    static float to(uint16_t h) { return bf16_to_f32(h); }
    static uint16_t from(float f) { return f32_to_bf16(f); }
};

/* Integer sums wrap (as two's complement) instead of being undefined. */
struct Sum {
    template <typename T> static T f(T a, T b) {
        if constexpr (std::is_integral_v<T>) {
            using U = std::make_unsigned_t<T>;
            return (T)(U)((U)a + (U)b);
        } else {
            return a + b;
        }
    }
};
/* Min/max propagate NaN, like torch.minimum/maximum. */
struct Min {
    template <typename T> static T f(T a, T b) { return (a < b || a != a) ? a : b; }
};
struct Max {
    template <typename T> static T f(T a, T b) { return (a > b || a != a) ? a : b; }
};

template <typename T, typename Op> void plain(void *c_, const void *a_, const void *b_, size_t n) {
    T *c = static_cast<T *>(c_);
    const T *a = static_cast<const T *>(a_), *b = static_cast<const T *>(b_);
    for (size_t i = 0; i < n; i++) c[i] = Op::f(a[i], b[i]);
}

template <typename Conv, typename Op>
void half(void *c_, const void *a_, const void *b_, size_t n, size_t from = 0) {
    uint16_t *c = static_cast<uint16_t *>(c_);
    const uint16_t *a = static_cast<const uint16_t *>(a_), *b = static_cast<const uint16_t *>(b_);
    for (size_t i = from; i < n; i++) c[i] = Conv::from(Op::f(Conv::to(a[i]), Conv::to(b[i])));
}

template <typename Conv, typename Op> void half_fn(void *c, const void *a, const void *b, size_t n) {
    half<Conv, Op>(c, a, b, n);
}

#ifdef LTGLOO_X86
/* f16 sums are what mixed precision sends: convert 8 at a time where the CPU
 * can (F16C rounds to nearest even, as the scalar code does). */
__attribute__((target("avx,f16c"))) void f16_sum_f16c(void *c_, const void *a_, const void *b_,
                                                       size_t n) {
    uint16_t *c = static_cast<uint16_t *>(c_);
    const uint16_t *a = static_cast<const uint16_t *>(a_), *b = static_cast<const uint16_t *>(b_);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 va = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(a + i)));
        __m256 vb = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(b + i)));
        __m128i r = _mm256_cvtps_ph(_mm256_add_ps(va, vb), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(c + i), r);
    }
    half<F16, Sum>(c_, a_, b_, n, i);
}
#endif

template <typename Op> ReduceFn for_dtype(lt_dtype t) {
    switch (t) {
    case LT_F32: return plain<float, Op>;
    case LT_F64: return plain<double, Op>;
    case LT_F16: return half_fn<F16, Op>;
    case LT_BF16: return half_fn<BF16, Op>;
    case LT_I8: return plain<int8_t, Op>;
    case LT_U8: return plain<uint8_t, Op>;
    case LT_I32: return plain<int32_t, Op>;
    case LT_I64: return plain<int64_t, Op>;
    }
    return nullptr;
}

template <typename T> void div_plain(void *buf, size_t n, int world) {
    T *p = static_cast<T *>(buf);
    const T w = (T)world;
    for (size_t i = 0; i < n; i++) p[i] = (T)(p[i] / w);
}

#ifdef LTGLOO_X86
/* F16C and AVX with the OS saving YMM state, from CPUID and XGETBV: clang 14's
 * __builtin_cpu_supports knows no "f16c". */
bool have_f16c_avx() {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    const unsigned osxsave = 1u << 27, avx = 1u << 28, f16c = 1u << 29;
    if ((c & (osxsave | avx | f16c)) != (osxsave | avx | f16c)) return false;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6u) == 6u; /* XMM and YMM state enabled */
}
#endif

template <typename Conv> void div_half(void *buf, size_t n, int world) {
    uint16_t *p = static_cast<uint16_t *>(buf);
    const float w = (float)world;
    for (size_t i = 0; i < n; i++) p[i] = Conv::from(Conv::to(p[i]) / w);
}

} // namespace

ReduceFn reduce_fn(lt_dtype dtype, lt_redop op) {
    switch (op) {
    case LT_SUM:
    case LT_AVG:
#ifdef LTGLOO_X86
        if (dtype == LT_F16 && have_f16c_avx()) return f16_sum_f16c;
#endif
        return for_dtype<Sum>(dtype);
    case LT_MIN: return for_dtype<Min>(dtype);
    case LT_MAX: return for_dtype<Max>(dtype);
    }
    return nullptr;
}

void divide(void *buf, size_t n, lt_dtype dtype, int world) {
    if (world == 1) return;
    switch (dtype) {
    case LT_F32: div_plain<float>(buf, n, world); break;
    case LT_F64: div_plain<double>(buf, n, world); break;
    case LT_F16: div_half<F16>(buf, n, world); break;
    case LT_BF16: div_half<BF16>(buf, n, world); break;
    case LT_I8: div_plain<int8_t>(buf, n, world); break;
    case LT_U8: div_plain<uint8_t>(buf, n, world); break;
    case LT_I32: div_plain<int32_t>(buf, n, world); break;
    case LT_I64: div_plain<int64_t>(buf, n, world); break;
    }
}

} // namespace ltgloo
