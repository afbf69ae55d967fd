/* Reductions the trainer reads on the host: the sum of squares (gradient-norm
 * clipping) and the finiteness check (loss scaling). Both take f32, f64, f16
 * and bf16, since mixed precision checks low-precision gradients. */
#include "cpu_internal.h"
#include "common/half.h"

/* Eight independent double accumulators: GCC does not reassociate a single
 * floating-point sum (that would change the result), but it does vectorise
 * eight explicit lanes, and the double sum keeps small squares that a float
 * one would drop on a million-element buffer. */
#define SUMSQ_LANES 8
#define DEF_SUMSQ(S, ST, TO_DOUBLE)                                                        \
    static CPU_HOT double sumsq_##S(const ST *restrict x, int64_t n) {                     \
        double acc[SUMSQ_LANES] = {0};                                                     \
        int64_t i = 0;                                                                     \
        for (; i + SUMSQ_LANES <= n; i += SUMSQ_LANES)                                     \
            for (int j = 0; j < SUMSQ_LANES; j++) {                                        \
                double v = TO_DOUBLE(x[i + j]);                                            \
                acc[j] += v * v;                                                           \
            }                                                                              \
        for (; i < n; i++) {                                                               \
            double v = TO_DOUBLE(x[i]);                                                    \
            acc[0] += v * v;                                                               \
        }                                                                                  \
        double total = 0;                                                                  \
        for (int j = 0; j < SUMSQ_LANES; j++) total += acc[j];                             \
        return total;                                                                      \
    }

#define PLAIN_DOUBLE(x) ((double)(x))
#define F16_DOUBLE(x) ((double)half_f16_to_f32(x))
#define BF16_DOUBLE(x) ((double)half_bf16_to_f32(x))
DEF_SUMSQ(f32, float, PLAIN_DOUBLE)
DEF_SUMSQ(f64, double, PLAIN_DOUBLE)
DEF_SUMSQ(f16, uint16_t, F16_DOUBLE)
DEF_SUMSQ(bf16, uint16_t, BF16_DOUBLE)

void cpu_sumsq(lt_ctx *ctx, lt_dtype t, const void *x, int64_t n, double *out_host) {
    switch (t) {
    case LT_F32: *out_host = sumsq_f32(x, n); break;
    case LT_F64: *out_host = sumsq_f64(x, n); break;
    case LT_F16: *out_host = sumsq_f16(x, n); break;
    case LT_BF16: *out_host = sumsq_bf16(x, n); break;
    default:
        *out_host = NAN;
        cpu_bad_dtype(ctx, "sumsq", t, "f32, f64, f16 or bf16");
    }
}

/* A value is inf or NaN exactly when its exponent bits are all ones, so the
 * check is an integer OR-reduction over the bits (vectorises, and no float
 * compare can be optimised away). Blocks let a bad buffer stop early without
 * a branch per element. */
#define FINITE_BLOCK 4096
#define DEF_ALL_FINITE(S, UT, EXP_MASK)                                                    \
    static CPU_HOT bool all_finite_##S(const UT *restrict x, int64_t n) {                  \
        for (int64_t start = 0; start < n; start += FINITE_BLOCK) {                        \
            int64_t end = n - start < FINITE_BLOCK ? n : start + FINITE_BLOCK;             \
            UT bad = 0;                                                                    \
            for (int64_t i = start; i < end; i++) bad |= (UT)((x[i] & EXP_MASK) == EXP_MASK); \
            if (bad) return false;                                                         \
        }                                                                                  \
        return true;                                                                       \
    }

DEF_ALL_FINITE(f32, half_u32a, 0x7F800000u)
DEF_ALL_FINITE(f64, half_u64a, 0x7FF0000000000000ull)
DEF_ALL_FINITE(f16, uint16_t, 0x7C00u)
DEF_ALL_FINITE(bf16, uint16_t, 0x7F80u)

void cpu_all_finite(lt_ctx *ctx, lt_dtype t, const void *x, int64_t n, bool *out_host) {
    switch (t) {
    case LT_F32: *out_host = all_finite_f32(x, n); break;
    case LT_F64: *out_host = all_finite_f64(x, n); break;
    case LT_F16: *out_host = all_finite_f16(x, n); break;
    case LT_BF16: *out_host = all_finite_bf16(x, n); break;
    default:
        *out_host = false;
        cpu_bad_dtype(ctx, "all_finite", t, "f32, f64, f16 or bf16");
    }
}
