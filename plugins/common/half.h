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

/* Exact. Branch-free so that loops of it vectorise: the normal, the
 * inf/NaN and the zero/subnormal results are all computed, then one is
 * selected with a mask. */
static inline float half_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7FFFu;
    uint32_t bits = (em << 13) + 0x38000000u;                   /* rebias 15 -> 127 */
    bits += (uint32_t)(em >= 0x7C00u) * 0x38000000u;            /* inf, NaN: exponent 255 */
    uint32_t sub = half_f32_bits((float)(int32_t)em * 0x1p-24f); /* em * 2^-24, exact */
    uint32_t small = -(uint32_t)(em < 0x0400u);
    return half_f32_from_bits(((sub & small) | (bits & ~small)) | sign);
}

/* All three cases are computed and one is selected, with no branch, so a
 * loop of these vectorises:
 *  - normal results: rebias the exponent (127 -> 15) and round the 13
 *    dropped bits half to even (adding 0xFFF plus the lowest kept bit
 *    carries exactly when it should); a carry out of the mantissa bumps the
 *    exponent, and magnitudes from 65520 up carry into infinity;
 *  - subnormal results (below 2^-14): adding 0.5 puts the value on 0.5's
 *    grid of 2^-24 steps, which the float adder rounds half to even; the
 *    count of steps is then the low bits of the sum (2^-14 itself comes out
 *    as 0x400, the smallest normal, as it should). This needs the default
 *    rounding mode, which lt never changes;
 *  - NaN: quieted, sign and top payload bits kept (as F16C's vcvtps2ph). */
static inline uint16_t half_f32_to_f16(float f) {
    uint32_t u = half_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u, mag = u & 0x7FFFFFFFu;
    uint32_t normal = (mag + 0xC8000000u + 0xFFFu + ((mag >> 13) & 1u)) >> 13;
    uint32_t sub = half_f32_bits(half_f32_from_bits(mag) + 0.5f) - 0x3F000000u;
    uint32_t nan = 0x7E00u | ((mag >> 13) & 0x1FFu);
    /* Selected with masks, not ?: -- GCC keeps a ?: next to a float add as
     * control flow (the add might trap) and then vectorises nothing. */
    uint32_t small = -(uint32_t)(mag < 0x38800000u), huge = -(uint32_t)(mag >= 0x477FF000u);
    uint32_t isnan = -(uint32_t)(mag > 0x7F800000u);
    uint32_t r = (sub & small) | (normal & ~small);
    r = (0x7C00u & huge) | (r & ~huge);
    r = (nan & isnan) | (r & ~isnan);
    return (uint16_t)(sign | r);
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
