/* Losses: softmax cross-entropy (stable log-sum-exp), mean squared error,
 * and the accuracy count. Sums over rows and elements are kept in double so
 * a large batch does not lose the small terms; per-element maths stays in
 * the dtype, fp32 for f16 and bf16 (probs and loss are stored in the dtype,
 * each rounded once). */
#include <tgmath.h>
#include "cpu_internal.h"

static bool label_ok(int32_t label, int64_t cols) { return label >= 0 && label < cols; }

static void bad_label(lt_ctx *ctx, const char *kernel, int64_t row, int32_t label, int64_t cols) {
    cpu_fail(ctx, LT_ERR_INVALID,
             "cpu %s: label %d in row %lld of the batch is outside [0, %lld); the labels must be "
             "class indices below the number of logits (check the label file or the last layer's width)",
             kernel, (int)label, (long long)row, (long long)cols);
}

/* Subtracting the row maximum keeps every exp() in (0, 1]: no overflow, and
 * at least one term is 1 so the log never sees 0. The loss of a row is
 * log(sum) - (x[label] - max). A bad label makes the loss NaN as well as
 * parking an error, so a caller that forgets to synchronize still notices.
 * f32 and f64 keep the exponentials in p until they are normalised; a
 * 16-bit p cannot hold them without a second rounding, so those dtypes
 * compute exp() again in the normalising pass (the same values). */
#define DEF_XENT_FWD(T, S, C, LD, ST)                                                      \
    static double xent_row_##S(const T *restrict x, T *restrict p, int64_t cols,           \
                               int32_t label) {                                            \
        C mx = LD(x[0]);                                                                   \
        for (int64_t c = 1; c < cols; c++) mx = LD(x[c]) > mx ? LD(x[c]) : mx;             \
        double sum = 0;                                                                    \
        if (sizeof(T) == sizeof(C)) {                                                      \
            for (int64_t c = 0; c < cols; c++) {                                           \
                p[c] = ST(exp(LD(x[c]) - mx));                                             \
                sum += LD(p[c]);                                                           \
            }                                                                              \
            C inv = (C)(1 / sum);                                                          \
            for (int64_t c = 0; c < cols; c++) p[c] = ST(LD(p[c]) * inv);                  \
        } else {                                                                           \
            for (int64_t c = 0; c < cols; c++) sum += exp(LD(x[c]) - mx);                  \
            C inv = (C)(1 / sum);                                                          \
            for (int64_t c = 0; c < cols; c++) p[c] = ST(exp(LD(x[c]) - mx) * inv);        \
        }                                                                                  \
        return log(sum) - (double)(LD(x[label]) - mx);                                     \
    }                                                                                      \
    static void xent_fwd_##S(lt_ctx *ctx, const T *logits, const int32_t *labels,          \
                             int64_t rows, int64_t cols, T *probs, T *loss) {              \
        double total = 0;                                                                  \
        for (int64_t r = 0; r < rows; r++) {                                               \
            if (!label_ok(labels[r], cols)) {                                              \
                bad_label(ctx, "xent_fwd", r, labels[r], cols);                            \
                total = NAN;                                                               \
                continue;                                                                  \
            }                                                                              \
            total += xent_row_##S(logits + r * cols, probs + r * cols, cols, labels[r]);   \
        }                                                                                  \
        loss[0] = ST(rows > 0 ? (C)(total / (double)rows) : 0);                            \
    }
CPU_FOR_FLOAT_TYPES(DEF_XENT_FWD)

void cpu_xent_fwd(lt_ctx *ctx, lt_dtype t, const void *logits, const int32_t *labels,
                  int64_t rows, int64_t cols, void *probs, void *loss) {
    if (cols < 1) {
        cpu_fail(ctx, LT_ERR_INVALID, "cpu xent_fwd: %lld classes; need at least 1",
                 (long long)cols);
        return;
    }
    CPU_DISPATCH(ctx, "xent_fwd", t, xent_fwd, ctx, logits, labels, rows, cols, probs, loss);
}

/* May run in place (dlogits == probs). */
#define DEF_XENT_BWD(T, S, C, LD, ST)                                                      \
    static CPU_HOT void xent_bwd_row_##S(T *d, const T *p, int64_t cols, int64_t label,    \
                                         C scale) {                                        \
        C at_label = label >= 0 ? LD(p[label]) : 0; /* read before d (maybe == p) is written */ \
        for (int64_t c = 0; c < cols; c++) d[c] = ST(scale * LD(p[c]));                    \
        if (label >= 0) d[label] = ST(scale * (at_label - 1));                             \
    }                                                                                      \
    static void xent_bwd_##S(lt_ctx *ctx, T *dlogits, const T *probs, const int32_t *labels, \
                             int64_t rows, int64_t cols, C scale) {                        \
        for (int64_t r = 0; r < rows; r++) {                                               \
            int64_t label = labels[r];                                                     \
            if (!label_ok(labels[r], cols)) {                                              \
                bad_label(ctx, "xent_bwd", r, labels[r], cols);                            \
                label = -1;                                                                \
            }                                                                              \
            xent_bwd_row_##S(dlogits + r * cols, probs + r * cols, cols, label, scale);    \
        }                                                                                  \
    }
CPU_FOR_FLOAT_TYPES(DEF_XENT_BWD)

void cpu_xent_bwd(lt_ctx *ctx, lt_dtype t, void *dlogits, const void *probs,
                  const int32_t *labels, int64_t rows, int64_t cols, double scale) {
    CPU_DISPATCH(ctx, "xent_bwd", t, xent_bwd, ctx, dlogits, probs, labels, rows, cols, scale);
}

#define DEF_MSE(T, S, C, LD, ST)                                                           \
    static void mse_fwd_##S(const T *restrict pred, const T *restrict target, int64_t n,   \
                            T *loss) {                                                     \
        double total = 0;                                                                  \
        for (int64_t i = 0; i < n; i++) {                                                  \
            double d = (double)LD(pred[i]) - (double)LD(target[i]);                        \
            total += d * d;                                                                \
        }                                                                                  \
        loss[0] = ST(n > 0 ? (C)(total / (double)n) : 0);                                  \
    }                                                                                      \
    static CPU_HOT void mse_bwd_##S(T *dpred, const T *pred, const T *target, int64_t n,   \
                                    C k) {                                                 \
        for (int64_t i = 0; i < n; i++) dpred[i] = ST(k * (LD(pred[i]) - LD(target[i])));  \
    }
CPU_FOR_FLOAT_TYPES(DEF_MSE)

void cpu_mse_fwd(lt_ctx *ctx, lt_dtype t, const void *pred, const void *target, int64_t n,
                 void *loss) {
    CPU_DISPATCH(ctx, "mse_fwd", t, mse_fwd, pred, target, n, loss);
}

void cpu_mse_bwd(lt_ctx *ctx, lt_dtype t, void *dpred, const void *pred, const void *target,
                 int64_t n, double scale) {
    double k = n > 0 ? 2 * scale / (double)n : 0;
    CPU_DISPATCH(ctx, "mse_bwd", t, mse_bwd, dpred, pred, target, n, k);
}

/* Arg-max takes the first maximum, and a NaN counts as the maximum, like
 * torch.argmax. A bad label is simply not a match. */
#define DEF_COUNT(T, S, C, LD, ST)                                                         \
    static int64_t argmax_##S(const T *x, int64_t cols) {                                  \
        int64_t best = 0;                                                                  \
        for (int64_t c = 1; c < cols && !isnan(LD(x[best])); c++)                          \
            if (LD(x[c]) > LD(x[best]) || isnan(LD(x[c]))) best = c;                       \
        return best;                                                                       \
    }                                                                                      \
    static void count_correct_##S(const T *logits, const int32_t *labels, int64_t rows,    \
                                  int64_t cols, int64_t *correct) {                        \
        int64_t hits = 0;                                                                  \
        for (int64_t r = 0; r < rows; r++)                                                 \
            hits += argmax_##S(logits + r * cols, cols) == labels[r];                      \
        *correct = hits;                                                                   \
    }
CPU_FOR_FLOAT_TYPES(DEF_COUNT)

void cpu_count_correct(lt_ctx *ctx, lt_dtype t, const void *logits, const int32_t *labels,
                       int64_t rows, int64_t cols, int64_t *correct_host) {
    if (cols < 1) {
        *correct_host = 0;
        return;
    }
    CPU_DISPATCH(ctx, "count_correct", t, count_correct, logits, labels, rows, cols,
                 correct_host);
}
