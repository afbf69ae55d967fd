/* Bit-exact conversions between binary32/binary64 and the two 16-bit formats
 * (IEEE binary16 "f16" and bfloat16 "bf16"), round-to-nearest-even, written
 * on integer bits so they do not depend on compiler support for _Float16 or
 * __bf16, and so the loops using them vectorise. NaNs stay NaN (quieted, sign
 * and top payload bits kept); overflow goes to infinity like a hardware cast.
 * Shared by the in-tree plugins that touch 16-bit data (the cpu accelerator,
 * the shm backend); header only, each plugin its own copy. */
#ifndef LT_PLUGINS_HALF_H
#define LT_PLUGINS_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Lets the element-wise loops read float/double buffers as their bits
 * without breaking strict aliasing. */
typedef uint32_t __attribute__((may_alias)) half_u32a;
typedef uint64_t __attribute__((may_alias)) half_u64a;

static inline uint32_t half_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float half_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float half_bf16_to_f32(uint16_t h) { return half_f32_from_bits((uint32_t)h << 16); }

/* Adding 0x7FFF plus the lowest kept bit carries into the kept bits exactly
 * when the dropped half is above one half, or equal to it with an odd kept
 * part: round half to even. Finite values that round past the largest bf16
 * carry into the exponent and come out as infinity, as they should. */
static inline uint16_t half_f32_to_bf16(float f) {
    uint32_t u = half_f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float half_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    if (exp == 0) { /* zero or subnormal: man * 2^-24, exact in binary32 */
        float v = (float)man * 0x1p-24f;
        return half_f32_from_bits(half_f32_bits(v) | sign);
    }
    if (exp == 31) return half_f32_from_bits(sign | 0x7F800000u | (man << 13)); /* inf, NaN */
    return half_f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));      /* rebias 15->127 */
}

/* Rounds a binary32 magnitude below 2^-14 to a binary16 subnormal count of
 * 2^-24 units, half to even. */
static inline uint32_t half_f16_subnormal(uint32_t mag) {
    uint32_t exp = mag >> 23;
    if (exp < 102) return 0; /* below 2^-25: rounds to zero */
    uint32_t man = (mag & 0x7FFFFFu) | 0x800000u;
    uint32_t shift = 126 - exp; /* 14..24 */
    uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    return q + (rem > half || (rem == half && (q & 1u)));
}

static inline uint16_t half_f32_to_f16(float f) {
    uint32_t u = half_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t mag = u & 0x7FFFFFFFu;
    if (mag > 0x7F800000u) return sign | 0x7E00u | (uint16_t)((mag >> 13) & 0x1FFu); /* NaN */
    if (mag >= 0x477FF000u) return sign | 0x7C00u; /* >= 65520 (or inf): infinity */
    if (mag < 0x38800000u) return sign | (uint16_t)half_f16_subnormal(mag);
    /* Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits
     * half to even; a carry out of the mantissa bumps the exponent correctly. */
    mag += 0xC8000000u + 0xFFFu + ((mag >> 13) & 1u);
    return sign | (uint16_t)(mag >> 13);
}

/* binary64 -> binary32 rounded to odd: an inexact result gets its last bit
 * forced to 1. Rounding that again to a format with at least two fewer bits
 * of precision (f16: 11, bf16: 8, vs 24) gives the correctly rounded result,
 * which rounding twice to nearest does not. */
static inline float half_f64_to_f32_odd(double d) {
    float f = (float)d;
    if ((double)f == d || d != d) return f; /* exact, or NaN */
    uint32_t u = half_f32_bits(f);
    if (!(u & 1u)) u += (fabs((double)f) > fabs(d)) ? (uint32_t)-1 : 1u; /* step toward d */
    return half_f32_from_bits(u);
}

#endif
