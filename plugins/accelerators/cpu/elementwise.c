/* Element-wise kernels: fill, axpby, clamp, bias, column sums, activations,
 * dropout; f32, f64, f16 and bf16 (the 16-bit ones in fp32, see
 * CPU_FOR_FLOAT_TYPES in cpu_internal.h).
 *
 * Outputs may alias inputs element for element (y == x in place), so only
 * arguments that can never overlap are `restrict`; GCC versions the loops
 * with a runtime overlap check at -O3 and still vectorises them.
 *
 * `beta == 0` means "overwrite": the old output is never read, so arena
 * memory holding NaN garbage cannot leak in (0 * NaN is NaN). Written as a
 * loop-invariant test in the loop body; GCC unswitches it out of the loop
 * (for the 16-bit loops CPU_UNSWITCH does it: cpu_internal.h).
 *
 * GELU is the exact one, 0.5 x (1 + erf(x / sqrt 2)), PyTorch's default
 * (approximate='none'), not the tanh approximation. */
#include <tgmath.h>
#include "cast_simd.h"
#include "cpu_internal.h"
#include "rng.h"

#define INV_SQRT_2PI 0.39894228040143267794 /* 1 / sqrt(2 pi), the normal pdf at 0 */

/* ---- fill, axpby, add_bias, sum_rows --------------------------------------- */

#define DEF_FILL(T, S, C, LD, ST)                                                          \
    static CPU_HOT void fill_##S(T *restrict x, int64_t n, C v) {                          \
        const T s = ST(v);                                                                 \
        for (int64_t i = 0; i < n; i++) x[i] = s;                                          \
    }
CPU_FOR_FLOAT_TYPES(DEF_FILL)

void cpu_fill(lt_ctx *ctx, lt_dtype t, void *x, int64_t n, double v) {
    CPU_DISPATCH(ctx, "fill", t, fill, x, n, v);
}

#define DEF_AXPBY(T, S, C, LD, ST)                                                         \
    static CPU_HOT void axpby_##S(int64_t n, C a, const T *x, C b, T *y) {                 \
        CPU_UNSWITCH(T, C, b == 0, for (int64_t i = 0; i < n; i++)                         \
            y[i] = ST(b == 0 ? a * LD(x[i]) : a * LD(x[i]) + b * LD(y[i])););              \
    }
CPU_FOR_FLOAT_TYPES(DEF_AXPBY)

void cpu_axpby(lt_ctx *ctx, lt_dtype t, int64_t n, double a, const void *x, double b, void *y) {
    CPU_DISPATCH(ctx, "axpby", t, axpby, n, a, x, b, y);
}

/* NaN compares false both ways, so it passes through unchanged. The bounds
 * are rounded to the dtype first; rounding is monotonic, so clamping to the
 * rounded bounds is the rounded clamp, and a kept element is kept bit for
 * bit. */
#define DEF_CLAMP(T, S, C, LD, ST)                                                         \
    static CPU_HOT void clamp_##S(T *restrict x, int64_t n, C lo, C hi) {                  \
        const T lo_t = ST(lo), hi_t = ST(hi);                                              \
        const C l = LD(lo_t), h = LD(hi_t);                                                \
        for (int64_t i = 0; i < n; i++) {                                                  \
            C v = LD(x[i]);                                                                \
            x[i] = v < l ? lo_t : v > h ? hi_t : x[i];                                     \
        }                                                                                  \
    }
CPU_FOR_FLOAT_TYPES(DEF_CLAMP)

void cpu_clamp(lt_ctx *ctx, lt_dtype t, void *x, int64_t n, double lo, double hi) {
    CPU_DISPATCH(ctx, "clamp", t, clamp, x, n, lo, hi);
}

#define DEF_ADD_BIAS(T, S, C, LD, ST)                                                      \
    static CPU_HOT void add_bias_##S(T *restrict y, const T *restrict bias, int64_t rows,  \
                                     int64_t cols) {                                       \
        for (int64_t r = 0; r < rows; r++) {                                               \
            T *restrict row = y + r * cols;                                                \
            for (int64_t c = 0; c < cols; c++) row[c] = ST(LD(row[c]) + LD(bias[c]));      \
        }                                                                                  \
    }
CPU_FOR_FLOAT_TYPES(DEF_ADD_BIAS)

/* f16 through the vector casts (F16C), a block of columns at a time: the
 * same sums, each rounded once, without add_bias_f16's scalar-emulated
 * conversions (3% of the MLP's 16-mixed step). */
#define BIAS_BLOCK 512
static CPU_HOT void add_rows_f32(float *restrict v, const float *restrict b, int64_t n) {
    for (int64_t c = 0; c < n; c++) v[c] += b[c];
}

static void add_bias_f16_staged(uint16_t *y, const uint16_t *bias, int64_t rows, int64_t cols,
                                cpu_cast_fn widen, cpu_cast_fn narrow) {
    float b[BIAS_BLOCK], v[BIAS_BLOCK];
    for (int64_t c0 = 0; c0 < cols; c0 += BIAS_BLOCK) {
        int64_t w = cols - c0 < BIAS_BLOCK ? cols - c0 : BIAS_BLOCK;
        widen(b, bias + c0, w);
        for (int64_t r = 0; r < rows; r++) {
            uint16_t *row = y + r * cols + c0;
            widen(v, row, w);
            add_rows_f32(v, b, w);
            narrow(row, v, w);
        }
    }
}

void cpu_add_bias(lt_ctx *ctx, lt_dtype t, void *y, const void *bias, int64_t rows,
                  int64_t cols) {
    cpu_cast_fn widen = cpu_cast_f16_stage(t);
    if (widen && y != bias) {
        add_bias_f16_staged(y, bias, rows, cols, widen,
                            cpu_cast_lowp_fn(LT_F16, LT_F32, CPU_CAST_VECTOR));
        return;
    }
    CPU_DISPATCH(ctx, "add_bias", t, add_bias, y, bias, rows, cols);
}

/* Row by row so the inner loop runs along contiguous memory; out stays in L1
 * for the layer widths an MLP has. */
#define DEF_SUM_ROWS(T, S, C, LD, ST)                                                      \
    static CPU_HOT void sum_rows_##S(T *restrict out, const T *restrict x, int64_t rows,   \
                                     int64_t cols, C beta) {                               \
        for (int64_t c = 0; c < cols; c++) out[c] = beta == 0 ? 0 : beta * out[c];         \
        for (int64_t r = 0; r < rows; r++) {                                               \
            const T *restrict row = x + r * cols;                                          \
            for (int64_t c = 0; c < cols; c++) out[c] += row[c];                           \
        }                                                                                  \
    }
CPU_FOR_WIDE_TYPES(DEF_SUM_ROWS)

/* The 16-bit sums run in fp32, on a stack block of SUM_BLOCK columns at a
 * time, in the f32 kernel's order (beta * out first, then row by row), and
 * are rounded once into out. */
#define SUM_BLOCK 512
#define DEF_SUM_ROWS_HALF(T, S, C, LD, ST)                                                 \
    static CPU_HOT void sum_rows_##S(T *restrict out, const T *restrict x, int64_t rows,   \
                                     int64_t cols, C beta) {                               \
        C acc[SUM_BLOCK];                                                                  \
        for (int64_t c0 = 0; c0 < cols; c0 += SUM_BLOCK) {                                 \
            int64_t w = cols - c0 < SUM_BLOCK ? cols - c0 : SUM_BLOCK;                     \
            T *restrict o = out + c0;                                                      \
            for (int64_t c = 0; c < w; c++) acc[c] = beta == 0 ? 0 : beta * LD(o[c]);      \
            for (int64_t r = 0; r < rows; r++) {                                           \
                const T *restrict row = x + r * cols + c0;                                 \
                for (int64_t c = 0; c < w; c++) acc[c] += LD(row[c]);                      \
            }                                                                              \
            for (int64_t c = 0; c < w; c++) o[c] = ST(acc[c]);                             \
        }                                                                                  \
    }
CPU_FOR_HALF_TYPES(DEF_SUM_ROWS_HALF)

void cpu_sum_rows(lt_ctx *ctx, lt_dtype t, void *out, const void *x, int64_t rows, int64_t cols,
                  double beta) {
    CPU_DISPATCH(ctx, "sum_rows", t, sum_rows, out, x, rows, cols, beta);
}

/* ---- activations ----------------------------------------------------------- */

/* `x < 0 ? 0 : x` rather than `x > 0 ? x : 0` so NaN propagates, as in
 * PyTorch; the loss scaler relies on seeing it. The kept element is copied
 * as stored (no rounding). */
#define DEF_ACT_FWD(T, S, C, LD, ST)                                                       \
    static CPU_HOT void relu_fwd_##S(T *y, const T *x, int64_t n) {                        \
        for (int64_t i = 0; i < n; i++) y[i] = LD(x[i]) < 0 ? (T)0 : x[i];                 \
    }                                                                                      \
    static void tanh_fwd_##S(T *y, const T *x, int64_t n) {                                \
        for (int64_t i = 0; i < n; i++) y[i] = ST(tanh(LD(x[i])));                         \
    }                                                                                      \
    static void gelu_fwd_##S(T *y, const T *x, int64_t n) {                                \
        for (int64_t i = 0; i < n; i++) {                                                  \
            C v = LD(x[i]);                                                                \
            y[i] = ST((C)0.5 * v * (1 + erf(v * (C)M_SQRT1_2)));                           \
        }                                                                                  \
    }
CPU_FOR_FLOAT_TYPES(DEF_ACT_FWD)

/* ReLU's gradient gates on the output like PyTorch's threshold_backward
 * (zero where y <= 0); tanh's uses the output too (1 - y^2); GELU's needs x. */
#define DEF_ACT_BWD(T, S, C, LD, ST)                                                       \
    static CPU_HOT void relu_bwd_##S(T *dx, const T *dy, const T *y, int64_t n, C beta) {  \
        /* beta 0 passes dy through as stored (no rounding to undo) */                     \
        CPU_UNSWITCH(T, C, beta == 0, for (int64_t i = 0; i < n; i++) {                    \
            /* unconditional loads: SSE2 has no masked ones */                             \
            T d = dy[i], g = LD(y[i]) <= 0 ? (T)0 : d;                                     \
            dx[i] = beta == 0 ? g : ST(beta * LD(dx[i]) + LD(g));                          \
        });                                                                                \
    }                                                                                      \
    static CPU_HOT void tanh_bwd_##S(T *dx, const T *dy, const T *y, int64_t n, C beta) {  \
        CPU_UNSWITCH(T, C, beta == 0, for (int64_t i = 0; i < n; i++) {                    \
            C g = LD(dy[i]) * (1 - LD(y[i]) * LD(y[i]));                                   \
            dx[i] = ST(beta == 0 ? g : beta * LD(dx[i]) + g);                              \
        });                                                                                \
    }                                                                                      \
    static void gelu_bwd_##S(T *dx, const T *dy, const T *x, int64_t n, C beta) {          \
        for (int64_t i = 0; i < n; i++) {                                                  \
            C v = LD(x[i]);                                                                \
            C cdf = (C)0.5 * (1 + erf(v * (C)M_SQRT1_2));                                  \
            C pdf = (C)INV_SQRT_2PI * exp((C)-0.5 * v * v);                                \
            C g = LD(dy[i]) * (cdf + v * pdf);                                             \
            dx[i] = ST(beta == 0 ? g : beta * LD(dx[i]) + g);                              \
        }                                                                                  \
    }                                                                                      \
    static void act_fwd_##S(lt_ctx *ctx, lt_act f, T *y, const T *x, int64_t n) {          \
        switch (f) {                                                                       \
        case LT_ACT_RELU: relu_fwd_##S(y, x, n); break;                                    \
        case LT_ACT_TANH: tanh_fwd_##S(y, x, n); break;                                    \
        case LT_ACT_GELU: gelu_fwd_##S(y, x, n); break;                                    \
        default: cpu_fail(ctx, LT_ERR_INVALID, "cpu act_fwd: unknown activation %d", (int)f); \
        }                                                                                  \
    }                                                                                      \
    static void act_bwd_##S(lt_ctx *ctx, lt_act f, T *dx, const T *dy, const T *x,         \
                            const T *y, int64_t n, C beta) {                               \
        switch (f) {                                                                       \
        case LT_ACT_RELU: relu_bwd_##S(dx, dy, y, n, beta); break;                         \
        case LT_ACT_TANH: tanh_bwd_##S(dx, dy, y, n, beta); break;                         \
        case LT_ACT_GELU: gelu_bwd_##S(dx, dy, x, n, beta); break;                         \
        default: cpu_fail(ctx, LT_ERR_INVALID, "cpu act_bwd: unknown activation %d", (int)f); \
        }                                                                                  \
    }
CPU_FOR_FLOAT_TYPES(DEF_ACT_BWD)

void cpu_act_fwd(lt_ctx *ctx, lt_dtype t, lt_act f, void *y, const void *x, int64_t n) {
    CPU_DISPATCH(ctx, "act_fwd", t, act_fwd, ctx, f, y, x, n);
}

void cpu_act_bwd(lt_ctx *ctx, lt_dtype t, lt_act f, void *dx, const void *dy, const void *x,
                 const void *y, int64_t n, double beta) {
    CPU_DISPATCH(ctx, "act_bwd", t, act_bwd, ctx, f, dx, dy, x, y, n, beta);
}

/* ---- dropout --------------------------------------------------------------- */

/* Element i is kept iff its 53 random bits reach ceil(p * 2^53) (rng.h);
 * p * 2^53 is exact in double, so the threshold is the same everywhere, and
 * the mask does not depend on the dtype. */
static uint64_t keep_threshold(double p) { return (uint64_t)ceil(p * 0x1p53); }

#define DEF_DROPOUT(T, S, C, LD, ST)                                                       \
    static CPU_HOT void dropout_fwd_##S(T *y, uint8_t *restrict mask, const T *x, int64_t n, \
                                        uint64_t thr, C scale, uint64_t key, uint64_t off) { \
        for (int64_t i = 0; i < n; i++) {                                                  \
            uint8_t keep = (cpu_rng_bits(key, off + (uint64_t)i) >> 11) >= thr;            \
            mask[i] = keep;                                                                \
            y[i] = keep ? ST(LD(x[i]) * scale) : (T)0;                                     \
        }                                                                                  \
    }                                                                                      \
    static CPU_HOT void dropout_bwd_##S(T *dx, const T *dy, const uint8_t *restrict mask,  \
                                        int64_t n, C scale, C beta) {                      \
        CPU_UNSWITCH(T, C, beta == 0, for (int64_t i = 0; i < n; i++) {                    \
            C d = LD(dy[i]);                                                               \
            C g = mask[i] ? d * scale : 0;                                                 \
            dx[i] = ST(beta == 0 ? g : beta * LD(dx[i]) + g);                              \
        });                                                                                \
    }
CPU_FOR_FLOAT_TYPES(DEF_DROPOUT)

static bool dropout_p_ok(lt_ctx *ctx, double p) {
    if (p >= 0 && p <= 1) return true;
    cpu_fail(ctx, LT_ERR_INVALID, "cpu dropout: p = %g is outside [0, 1]", p);
    return false;
}

/* 1 / (1 - p); 0 for p == 1, where nothing is kept (PyTorch returns zeros). */
static double keep_scale(double p) { return p < 1 ? 1 / (1 - p) : 0; }

void cpu_dropout_fwd(lt_ctx *ctx, lt_dtype t, void *y, uint8_t *mask, const void *x, int64_t n,
                     double p, uint64_t seed, uint64_t offset) {
    if (!dropout_p_ok(ctx, p)) return;
    CPU_DISPATCH(ctx, "dropout_fwd", t, dropout_fwd, y, mask, x, n, keep_threshold(p),
                 keep_scale(p), cpu_rng_key(seed), offset);
}

void cpu_dropout_bwd(lt_ctx *ctx, lt_dtype t, void *dx, const void *dy, const uint8_t *mask,
                     int64_t n, double p, double beta) {
    if (!dropout_p_ok(ctx, p)) return;
    CPU_DISPATCH(ctx, "dropout_bwd", t, dropout_bwd, dx, dy, mask, n, keep_scale(p), beta);
}
