/* Shared by test_kernel_ops.c and its helpers: the kernel conformance
 * program in the manner of ggml's test-backend-ops.
 *
 *  kernel_ops_ref.c      number formats written here (no plugin code): the
 *                        16-bit encodings, rounding to a dtype to nearest
 *                        even, the test's own random inputs, and the
 *                        counter-based generator rng.h documents for
 *                        dropout and rand_fill
 *  kernel_ops_harness.c  the accelerators (loaded through the registry),
 *                        device buffers with guard bytes, the case
 *                        bookkeeping, the comparisons and the report
 *
 * Host-side values are doubles throughout: every input is generated as a
 * double that the dtype holds exactly (kops_round), packed into the dtype's
 * bytes on upload and unpacked on download, so the references in
 * test_kernel_ops.c work in double on exactly the numbers the device saw. */
#ifndef LT_TEST_KERNEL_OPS_H
#define LT_TEST_KERNEL_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/ctx.h"
#include "lt/accelerator.h"

/* ---- number formats (kernel_ops_ref.c) ------------------------------------ */

#define KOPS_NDTYPES 4
extern const lt_dtype KOPS_DTYPES[KOPS_NDTYPES]; /* f32, f64, f16, bf16 */
int kops_dtype_index(lt_dtype t);                 /* 0..3 */
const char *kops_dtype_name(lt_dtype t);

/* v rounded to the dtype, to nearest, ties to even; overflow gives an
 * infinity, NaN stays NaN, the sign of zero is kept. */
double kops_round(lt_dtype t, double v);
/* The largest finite value and the unit roundoff 2^-p (p: significand bits
 * with the implicit one) of the dtype, and its smallest subnormal. */
double kops_max_finite(lt_dtype t);
double kops_unit_roundoff(lt_dtype t);
double kops_min_subnormal(lt_dtype t);
/* binary16 / bfloat16 bits <-> value (v must be representable). */
uint16_t kops_encode16(lt_dtype t, double v);
double kops_decode16(lt_dtype t, uint16_t bits);
/* Element i of a host buffer of the dtype <-> double. */
void kops_pack(lt_dtype t, const double *v, int64_t n, void *out);
void kops_unpack(lt_dtype t, const void *in, int64_t n, double *v);

/* The test's own deterministic inputs (xorshift64*). */
typedef struct kops_rng { uint64_t s; } kops_rng;
kops_rng kops_rng_make(uint64_t seed);
uint64_t kops_rng_next(kops_rng *r);
double kops_rng_uniform(kops_rng *r, double lo, double hi); /* [lo, hi) */
/* n values uniform in [lo, hi), each rounded to the dtype. */
void kops_fill_uniform(kops_rng *r, lt_dtype t, double *v, int64_t n, double lo, double hi);

/* The counter-based generator that dropout_fwd and rand_fill share
 * (plugins/accelerators/cpu/rng.h documents it as the formula every
 * accelerator implements, so that masks and fills agree across devices):
 * 64 random bits and the derived u in [0, 1) of counter c. */
uint64_t kops_gen_bits(uint64_t seed, uint64_t counter);
double kops_gen_u53(uint64_t seed, uint64_t counter);
/* Dropout's keep decision for counter c; rand_fill's normal value (before
 * mean and std) of counter c, in double. */
bool kops_gen_keep(uint64_t seed, uint64_t counter, double p);
double kops_gen_normal(uint64_t seed, uint64_t counter);

/* ---- accelerators, buffers, cases, report (kernel_ops_harness.c) ---------- */

typedef struct kops_dev {
    const char *name;
    const lt_accelerator_desc *acc;
    const lt_kernels *k;
    lt_ctx ctx;
    bool ready;     /* loaded, available and set up */
    bool reference; /* the cpu: every dtype of every kernel is required */
} kops_dev;

/* Loads `name` through the registry from the build's plugin dir and sets it
 * up. Returns 0 when ready; 1 when the plugin file is absent or is_available
 * says no (why is printed: the accelerator is skipped); -1 on any other
 * failure (printed). */
int kops_dev_open(kops_dev *d, const char *name);
void kops_dev_close(kops_dev *d);
/* Every accelerator plugin file in the plugin dir, by name (cpu first). */
int kops_list_accelerators(char names[][64], int max);

/* Kernel identities for the report. */
typedef enum kops_kernel {
    K_GEMM, K_FILL, K_AXPBY, K_ADD_BIAS, K_SUM_ROWS, K_ACT_FWD, K_ACT_BWD, K_DROPOUT_FWD,
    K_DROPOUT_BWD, K_XENT_FWD, K_XENT_BWD, K_MSE_FWD, K_MSE_BWD, K_COUNT_CORRECT, K_CAST,
    K_SUMSQ, K_ALL_FINITE, K_SGD_STEP, K_ADAMW_STEP, K_RAND_FILL, K_IM2COL, K_COL2IM,
    K_MAX_POOL_FWD, K_MAX_POOL_BWD, K_CLAMP, K_QUANTIZE_U8, K_DEQUANTIZE_U8, K_QADAM_STEP,
    K_XDEV, /* the cross-device equalities */
    K_COUNT
} kops_kernel;
const char *kops_kernel_name(kops_kernel k);
/* Whether the table has the kernel (LT_KERNELS_HAS); K_XDEV: true. */
bool kops_has_kernel(const kops_dev *d, kops_kernel k);

/* One case: a kernel, a dtype and a shape. kops_case returns false when the
 * case must not run: the (kernel, dtype) pair was already found unsupported
 * on this accelerator, or a filter (--kernel, --dtype) excludes it. Buffers
 * made by kops_up/kops_alloc belong to the case and are freed by kops_end.
 * Every failure inside a case is printed under its description. */
bool kops_case(kops_dev *d, kops_kernel k, lt_dtype t, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* cast's source dtype, set after kops_case (unsupported pairs are listed
 * per pair; required where both dtypes are). */
void kops_case_src(lt_dtype src);
/* Failed cases so far, over all accelerators. */
int kops_failed_total(void);
/* After the kernel call(s): synchronize. true when the kernel ran; false
 * when it reported an error, which is then either "unsupported dtype" (the
 * pair is listed, and a failure where the dtype is required) or a failure. */
bool kops_sync(kops_dev *d);
/* Ends the case: counts it as passed or failed. Returns whether it passed. */
bool kops_end(kops_dev *d);
/* A failure in the current case, with a message. */
void kops_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool kops_case_failed(void);
/* Marks the current case as one of the expected-failure list: a failure is
 * printed with `why` and counted apart, not as a failure. */
void kops_expect_failure(const char *why);

/* Device buffers of the current case. Each has guard bytes after it, set
 * on allocation and checked on every download: a kernel that writes past
 * the end of its output (a tile rounding up n) fails the case. */
void *kops_alloc(kops_dev *d, size_t bytes);
void *kops_up(kops_dev *d, lt_dtype t, const double *v, int64_t n);
void *kops_up_raw(kops_dev *d, const void *host, size_t bytes);
void kops_down(kops_dev *d, lt_dtype t, const void *dev, int64_t n, double *out);
void kops_down_raw(kops_dev *d, const void *dev, void *host, size_t bytes);

/* Comparisons; each prints, on failure, the number of bad elements, the
 * largest absolute and relative error and the first bad index with the
 * value got, the one wanted and the bound. They return true on success.
 *
 * kops_close: |got - ref| <= u * |ref| + tol * scale[i] + s, with u the
 * unit roundoff of the dtype (the one rounding of the stored result), s
 * its smallest subnormal, ref the exact result in double (not rounded) and
 * scale[i] the size of the terms that produced it (the same expression in
 * absolute values); scale NULL means |ref|. NaN matches NaN, an infinity
 * only itself. */
bool kops_close(const char *what, lt_dtype t, const double *got, const double *ref,
                const double *scale, int64_t n, double tol);
/* The same values (NaN matches NaN; -0 and +0 differ when signed_zero). */
bool kops_exact(const char *what, const double *got, const double *want, int64_t n,
                bool signed_zero);
bool kops_exact_bytes(const char *what, const uint8_t *got, const uint8_t *want, int64_t n);
bool kops_exact_i32(const char *what, const int32_t *got, const int32_t *want, int64_t n);
bool kops_exact_i64(const char *what, int64_t got, int64_t want);

/* The per-dtype tolerances (the reasons are in kernel_ops_harness.c). */
double kops_tol_elem(lt_dtype t);
double kops_tol_sum(lt_dtype t, int64_t terms);

/* Verbose: print every case, not only failures. */
extern bool kops_verbose;
extern const char *kops_only_kernel; /* NULL: all */
extern int kops_only_dtype;          /* 0: all */
/* Prints the kernel x dtype table of the accelerator; returns the number of
 * failed cases (required-but-unsupported pairs count). */
int kops_report(const kops_dev *d);

#endif
