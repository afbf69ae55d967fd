/* Number formats and random numbers for the kernel conformance program,
 * written from the format definitions (IEEE 754 binary16, bfloat16) and
 * from the generator's description, not from any plugin source. */
#include <math.h>
#include <string.h>
#include "kernel_ops.h"

const lt_dtype KOPS_DTYPES[KOPS_NDTYPES] = {LT_F32, LT_F64, LT_F16, LT_BF16};

int kops_dtype_index(lt_dtype t) {
    switch (t) {
    case LT_F32: return 0;
    case LT_F64: return 1;
    case LT_F16: return 2;
    default: return 3;
    }
}

const char *kops_dtype_name(lt_dtype t) {
    static const char *const names[] = {"f32", "f64", "f16", "bf16"};
    return names[kops_dtype_index(t)];
}

/* A binary floating-point format: p significand bits (the implicit one
 * included), the smallest and largest normal exponents. */
typedef struct fmt { int p, emin, emax; } fmt;

static fmt fmt_of(lt_dtype t) {
    switch (t) {
    case LT_F64: return (fmt){53, -1022, 1023};
    case LT_F32: return (fmt){24, -126, 127};
    case LT_F16: return (fmt){11, -14, 15};
    default: return (fmt){8, -126, 127}; /* bf16: f32's exponent, 8 bits of significand */
    }
}

double kops_max_finite(lt_dtype t) {
    fmt f = fmt_of(t);
    return ldexp(2.0 - ldexp(1.0, 1 - f.p), f.emax);
}

double kops_unit_roundoff(lt_dtype t) { return ldexp(1.0, -fmt_of(t).p); }

double kops_min_subnormal(lt_dtype t) {
    fmt f = fmt_of(t);
    return ldexp(1.0, f.emin - (f.p - 1));
}

/* The quantum (unit in the last place) of |v|'s binade, not below the
 * subnormal quantum; v / quantum is then an integer for every value the
 * format holds, and rounding v / quantum to an integer (nearest, ties to
 * even: the default mode) rounds v to the format. Dividing by a power of
 * two is exact in double for every format narrower than double. */
double kops_round(lt_dtype t, double v) {
    if (t == LT_F64 || isnan(v) || isinf(v) || v == 0) return v;
    if (t == LT_F32) return (double)(float)v; /* the hardware conversion: to nearest even */
    fmt f = fmt_of(t);
    int e;
    frexp(fabs(v), &e); /* |v| = m 2^e, m in [0.5, 1): binade exponent e - 1 */
    int E = e - 1 < f.emin ? f.emin : e - 1;
    double q = ldexp(1.0, E - (f.p - 1));
    double r = nearbyint(v / q) * q;
    if (fabs(r) > kops_max_finite(t)) return copysign(INFINITY, v);
    return r == 0 ? copysign(0.0, v) : r;
}

uint16_t kops_encode16(lt_dtype t, double v) {
    fmt f = fmt_of(t);
    int mbits = f.p - 1, bias = f.emax;
    uint16_t emask = (uint16_t)((1u << (15 - mbits)) - 1);
    uint16_t sign = signbit(v) ? 0x8000u : 0;
    if (isnan(v)) return (uint16_t)((emask << mbits) | (1u << (mbits - 1))); /* quiet NaN */
    if (isinf(v)) return (uint16_t)(sign | (emask << mbits));
    double a = fabs(v);
    if (a == 0) return sign;
    int e;
    frexp(a, &e);
    int E = e - 1;
    if (E < f.emin) /* subnormal: a multiple of the smallest subnormal */
        return (uint16_t)(sign | (uint16_t)(a / kops_min_subnormal(t)));
    uint32_t mant = (uint32_t)((ldexp(a, -E) - 1) * (double)(1u << mbits));
    return (uint16_t)(sign | ((uint32_t)(E + bias) << mbits) | mant);
}

double kops_decode16(lt_dtype t, uint16_t bits) {
    fmt f = fmt_of(t);
    int mbits = f.p - 1, bias = f.emax;
    uint32_t emask = (1u << (15 - mbits)) - 1;
    uint32_t ex = (bits >> mbits) & emask, mant = bits & ((1u << mbits) - 1);
    double s = (bits & 0x8000u) ? -1.0 : 1.0;
    if (ex == emask) return mant ? NAN : s * INFINITY;
    if (ex == 0) return s * (double)mant * kops_min_subnormal(t);
    return s * ldexp(1.0 + (double)mant / (double)(1u << mbits), (int)ex - bias);
}

void kops_pack(lt_dtype t, const double *v, int64_t n, void *out) {
    for (int64_t i = 0; i < n; i++) {
        switch (t) {
        case LT_F32: ((float *)out)[i] = (float)v[i]; break;
        case LT_F64: ((double *)out)[i] = v[i]; break;
        default: ((uint16_t *)out)[i] = kops_encode16(t, kops_round(t, v[i]));
        }
    }
}

void kops_unpack(lt_dtype t, const void *in, int64_t n, double *v) {
    for (int64_t i = 0; i < n; i++) {
        switch (t) {
        case LT_F32: v[i] = ((const float *)in)[i]; break;
        case LT_F64: v[i] = ((const double *)in)[i]; break;
        default: v[i] = kops_decode16(t, ((const uint16_t *)in)[i]);
        }
    }
}

/* ---- test inputs ----------------------------------------------------------- */

kops_rng kops_rng_make(uint64_t seed) {
    kops_rng r = {seed * 0x2545F4914F6CDD1Dull + 0x9E3779B97F4A7C15ull};
    if (!r.s) r.s = 1;
    return r;
}

uint64_t kops_rng_next(kops_rng *r) {
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

double kops_rng_uniform(kops_rng *r, double lo, double hi) {
    return lo + (hi - lo) * ((double)(kops_rng_next(r) >> 11) * 0x1p-53);
}

void kops_fill_uniform(kops_rng *r, lt_dtype t, double *v, int64_t n, double lo, double hi) {
    for (int64_t i = 0; i < n; i++) v[i] = kops_round(t, kops_rng_uniform(r, lo, hi));
}

/* ---- the shared counter-based generator ------------------------------------ *
 * As rng.h describes it: a 64-bit finaliser (splitmix64's) applied to the
 * seed once for a key, then to key ^ (counter * golden ratio) per element;
 * the top 53 bits make u in [0, 1). Dropout keeps an element when those 53
 * bits reach ceil(p 2^53); normal values are Box-Muller over the counter
 * pair (2j, 2j + 1), cosine for the even counter and sine for the odd. */
static uint64_t fin64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t kops_gen_bits(uint64_t seed, uint64_t counter) {
    uint64_t key = fin64(seed ^ 0x6A09E667F3BCC909ull);
    return fin64(key ^ (counter * 0x9E3779B97F4A7C15ull));
}

double kops_gen_u53(uint64_t seed, uint64_t counter) {
    return (double)(kops_gen_bits(seed, counter) >> 11) * 0x1p-53;
}

bool kops_gen_keep(uint64_t seed, uint64_t counter, double p) {
    return (kops_gen_bits(seed, counter) >> 11) >= (uint64_t)ceil(p * 0x1p53);
}

double kops_gen_normal(uint64_t seed, uint64_t counter) {
    uint64_t j = counter >> 1;
    double u1 = 1 - kops_gen_u53(seed, 2 * j), u2 = kops_gen_u53(seed, 2 * j + 1);
    double r = sqrt(-2 * log(u1)), theta = 2 * M_PI * u2;
    return (counter & 1) ? r * sin(theta) : r * cos(theta);
}
