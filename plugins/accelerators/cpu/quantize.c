/* Bagua's MinMaxUInt8 compression (bytegrad, low_precision_decentralized):
 * quantize_u8 and dequantize_u8 on f32, f64, f16 and bf16. The contract is
 * accelerator.h's; per chunk, with C the compute type (fp32, double for
 * f64) and every operation rounded to nearest:
 *   encode  q = rint((x*s - min*s) * (255 / (max*s - min*s)))   ties to even
 *   decode  d = (min*s + q * ((max*s - min*s) / 255)) / s
 * s = 1, except in fp32 where max - min overflows (s = 1/2) or is below
 * 2^-96 (s = 2^64, so that 255 / range and the step stay finite and
 * normal): powers of two, so the scaling changes no bit of a normal value.
 * This file is built with -ffp-contract=off (CMakeLists.txt): GCC would
 * otherwise fuse q * step + min into an FMA in the AVX2 clone only, and the
 * two clones (and other accelerators) would decode the same bytes to
 * different bits.
 *
 * Two passes per chunk: the min and max, then the encoding, which reads the
 * chunk again from L1 (4096 f32 are 16 KiB).
 *
 * The min and max are taken on the bits. Read as a signed integer, a
 * float's bit pattern b has the key b ^ ((b >> (bits - 1)) & 0x7F..F),
 * which orders like the values (-0 just below +0); so the first pass is an
 * integer min/max reduction, which GCC vectorises (no float min or max
 * reduction is vectorised without -ffinite-math-only). Infinities and NaNs
 * have keys beyond those of +-(the largest finite value), so the same two
 * keys say whether the chunk is finite: a NaN would otherwise vanish in a
 * float min or max. */
#include <float.h>
#include <math.h>
#include <string.h>
#include "cpu_internal.h"

typedef int16_t __attribute__((may_alias)) q_i16a;
typedef int32_t __attribute__((may_alias)) q_i32a;
typedef int64_t __attribute__((may_alias)) q_i64a;

/* Per dtype: QK_ the signed integer as wide as an element, read through a
 * may_alias type; QMAXFIN_ the bits (and key) of the largest finite value,
 * whose negation has the key ~QMAXFIN_; qval_ a key's value in the compute
 * type (the key map is its own inverse). */
#define QK_f32 q_i32a
#define QK_f64 q_i64a
#define QK_f16 q_i16a
#define QK_bf16 q_i16a
#define QMAXFIN_f32 INT32_C(0x7F7FFFFF)
#define QMAXFIN_f64 INT64_C(0x7FEFFFFFFFFFFFFF)
#define QMAXFIN_f16 0x7BFF
#define QMAXFIN_bf16 0x7F7F
#define QMASK(K) ((K)((UINT64_C(1) << (sizeof(K) * 8 - 1)) - 1))
#define QKEY(K, b) ((K)((b) ^ (((b) >> (sizeof(K) * 8 - 1)) & QMASK(K))))

static inline float qval_f32(int32_t k) { return half_f32_from_bits((uint32_t)QKEY(int32_t, k)); }
static inline double qval_f64(int64_t k) {
    uint64_t u = (uint64_t)QKEY(int64_t, k);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}
static inline float qval_f16(int16_t k) { return half_f16_to_f32((uint16_t)QKEY(int16_t, k)); }
static inline float qval_bf16(int16_t k) { return half_bf16_to_f32((uint16_t)QKEY(int16_t, k)); }

/* The f32 bounds stored for an f64 chunk hold every element: min rounded
 * down, max up (an element beyond f32's range gives an infinity there). */
static float q_down_f32(double d) {
    float f = (float)d;
    return (double)f > d ? nextafterf(f, -INFINITY) : f;
}
static float q_up_f32(double d) {
    float f = (float)d;
    return (double)f < d ? nextafterf(f, INFINITY) : f;
}
#define QLO_f32(v) (v)
#define QHI_f32(v) (v)
#define QLO_f16(v) (v)
#define QHI_f16(v) (v)
#define QLO_bf16(v) (v)
#define QHI_bf16(v) (v)
#define QLO_f64(v) q_down_f32(v)
#define QHI_f64(v) q_up_f32(v)

/* The power of two s of the header comment, from the stored bounds (a NaN
 * chunk compares false everywhere and gets 1: its NaN then flows through
 * the decoding). Ranges in double never need one: f32 bounds differ by at
 * least 2^-149 and at most 2^129. */
static inline float q_scale_f(float mn, float mx) {
    float r = mx - mn;
    return r > FLT_MAX ? 0.5f : r > 0 && r < 0x1p-96f ? 0x1p64f : 1.0f;
}
static inline double q_scale_d(double mn, double mx) {
    (void)mn, (void)mx;
    return 1.0;
}
#define QSCALE_f32 q_scale_f
#define QSCALE_f16 q_scale_f
#define QSCALE_bf16 q_scale_f
#define QSCALE_f64 q_scale_d

/* Round to nearest even into an int: cvtps2dq/cvtpd2dq, which GCC
 * vectorises in both clones (lrintf, returning a long, it does not). lt
 * never leaves the default rounding mode. */
#if defined(__GNUC__) && !defined(__clang__)
#define QRINT_f32(v) __builtin_irintf(v)
#define QRINT_f64(v) __builtin_irint(v)
#else
#define QRINT_f32(v) ((int)lrintf(v))
#define QRINT_f64(v) ((int)lrint(v))
#endif
#define QRINT_f16 QRINT_f32
#define QRINT_bf16 QRINT_f32

/* v = (x*s - min*s) * inv lies in [0, 255 (1 + 2^-22)]: x*s - min*s is at
 * most the rounded range and inv is 255 over it, rounded; so q needs no
 * clamp. A constant chunk has inv = 0, hence q = 0. */
#define DEF_QUANTIZE(T, S, C, LD, ST)                                                      \
    static CPU_HOT void quantize_##S(const T *restrict x, int64_t n, int64_t chunk,        \
                                     uint8_t *restrict q, float *restrict minmax) {        \
        typedef QK_##S K;                                                                  \
        for (int64_t c0 = 0; c0 < n; c0 += chunk, minmax += 2) {                           \
            const int64_t len = n - c0 < chunk ? n - c0 : chunk;                           \
            const T *restrict xc = x + c0;                                                 \
            const K *restrict kc = (const K *)xc;                                          \
            uint8_t *restrict qc = q + c0;                                                 \
            K lo = QMASK(K), hi = ~QMASK(K);                                               \
            for (int64_t i = 0; i < len; i++) {                                            \
                K k = QKEY(K, kc[i]);                                                      \
                lo = k < lo ? k : lo;                                                      \
                hi = k > hi ? k : hi;                                                      \
            }                                                                              \
            const float mn = QLO_##S(qval_##S(lo)), mx = QHI_##S(qval_##S(hi));            \
            if (hi > QMAXFIN_##S || lo < ~QMAXFIN_##S || mn < -FLT_MAX || mx > FLT_MAX) {  \
                minmax[0] = minmax[1] = NAN;                                               \
                memset(qc, 0, (size_t)len);                                                \
                continue;                                                                  \
            }                                                                              \
            minmax[0] = mn;                                                                \
            minmax[1] = mx;                                                                \
            const C s = QSCALE_##S(mn, mx), ms = (C)mn * s, rs = (C)mx * s - ms;           \
            const C inv = rs == 0 ? 0 : 255 / rs;                                          \
            if (s == 1)                                                                    \
                for (int64_t i = 0; i < len; i++)                                          \
                    qc[i] = (uint8_t)QRINT_##S((LD(xc[i]) - ms) * inv);                    \
            else                                                                           \
                for (int64_t i = 0; i < len; i++)                                          \
                    qc[i] = (uint8_t)QRINT_##S((LD(xc[i]) * s - ms) * inv);                \
        }                                                                                  \
    }
CPU_FOR_FLOAT_TYPES(DEF_QUANTIZE)

void cpu_quantize_u8(lt_ctx *ctx, lt_dtype t, const void *x, int64_t n, int64_t chunk,
                     uint8_t *q, float *minmax) {
    if (n > 0 && chunk < 1) {
        cpu_fail(ctx, LT_ERR_INVALID, "cpu quantize_u8: chunk %lld (must be at least 1)",
                 (long long)chunk);
        return;
    }
    CPU_DISPATCH(ctx, "quantize_u8", t, quantize, x, n, chunk, q, minmax);
}

/* A NaN chunk has a NaN min and step, so d is NaN for every q. */
#define DEF_DEQUANTIZE(T, S, C, LD, ST)                                                    \
    static CPU_HOT void dequantize_##S(const uint8_t *restrict q,                          \
                                       const float *restrict minmax, int64_t n,            \
                                       int64_t chunk, T *restrict y, C beta) {             \
        for (int64_t c0 = 0; c0 < n; c0 += chunk, minmax += 2) {                           \
            const int64_t len = n - c0 < chunk ? n - c0 : chunk;                           \
            const uint8_t *restrict qc = q + c0;                                           \
            T *restrict yc = y + c0;                                                       \
            const C s = QSCALE_##S(minmax[0], minmax[1]), ms = (C)minmax[0] * s;           \
            const C step = ((C)minmax[1] * s - ms) / 255, inv_s = 1 / s;                   \
            if (s == 1)                                                                    \
                CPU_UNSWITCH(T, C, beta == 0, for (int64_t i = 0; i < len; i++) {          \
                    C d = ms + (C)qc[i] * step;                                            \
                    yc[i] = ST(beta == 0 ? d : beta * LD(yc[i]) + d);                      \
                });                                                                        \
            else                                                                           \
                for (int64_t i = 0; i < len; i++) {                                        \
                    C d = (ms + (C)qc[i] * step) * inv_s;                                  \
                    yc[i] = ST(beta == 0 ? d : beta * LD(yc[i]) + d);                      \
                }                                                                          \
        }                                                                                  \
    }
CPU_FOR_FLOAT_TYPES(DEF_DEQUANTIZE)

void cpu_dequantize_u8(lt_ctx *ctx, lt_dtype t, const uint8_t *q, const float *minmax, int64_t n,
                       int64_t chunk, void *y, double beta) {
    if (n > 0 && chunk < 1) {
        cpu_fail(ctx, LT_ERR_INVALID, "cpu dequantize_u8: chunk %lld (must be at least 1)",
                 (long long)chunk);
        return;
    }
    CPU_DISPATCH(ctx, "dequantize_u8", t, dequantize, q, minmax, n, chunk, y, beta);
}
