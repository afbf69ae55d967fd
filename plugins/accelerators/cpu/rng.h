/* The counter-based random numbers behind dropout_fwd and rand_fill.
 *
 * Element i of a call made with (seed, offset) depends only on seed and the
 * counter c = offset + i, never on n, on how a buffer is split across calls
 * or threads, or on the order elements are visited. That is what lets a
 * replica, a resumed run or another device (the gpu plugin should implement
 * exactly these formulas) reproduce a mask.
 *
 *   key      = mix64(seed ^ 0x6A09E667F3BCC909)           (once per call)
 *   bits(c)  = mix64(key ^ (c * 0x9E3779B97F4A7C15))
 *   u53(c)   = (bits(c) >> 11) * 2^-53                    in [0, 1)
 *
 * mix64 is the splitmix64 / Stafford "mix13" finaliser, a bijection on 64
 * bits, so distinct counters of one seed never collide; xoring the key in
 * before the mix (rather than adding it, as splitmix64 does) keeps two seeds
 * from being shifted copies of one stream.
 *
 * Dropout keeps element c iff (bits(c) >> 11) >= ceil(p * 2^53), i.e.
 * u53(c) >= p, compared in integers so no rounding can differ between
 * devices. Normal numbers come from Box-Muller on the pair j = c / 2:
 *   r = sqrt(-2 ln(1 - u53(2j))),  theta = 2 pi u53(2j + 1),
 *   even c -> r cos(theta), odd c -> r sin(theta);
 * computed in double for every dtype, then rounded to the dtype. */
#ifndef LT_CPU_RNG_H
#define LT_CPU_RNG_H

#include <stdint.h>

#define CPU_RNG_KEY_SALT 0x6A09E667F3BCC909ull /* sqrt(2) fraction bits */
#define CPU_RNG_GOLDEN 0x9E3779B97F4A7C15ull   /* 2^64 / phi, odd */

static inline uint64_t cpu_rng_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t cpu_rng_key(uint64_t seed) { return cpu_rng_mix64(seed ^ CPU_RNG_KEY_SALT); }

static inline uint64_t cpu_rng_bits(uint64_t key, uint64_t counter) {
    return cpu_rng_mix64(key ^ (counter * CPU_RNG_GOLDEN));
}

static inline double cpu_rng_u53(uint64_t key, uint64_t counter) {
    return (double)(cpu_rng_bits(key, counter) >> 11) * 0x1p-53;
}

#endif
