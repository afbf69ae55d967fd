/* Shared by the cpu accelerator's source files: the per-context state, the
 * deferred-error path kernels use, and the kernel entry points each file
 * defines. Not installed; nothing outside this folder includes it. */
#ifndef LT_CPU_INTERNAL_H
#define LT_CPU_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* cpu_set_t */
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include "gemm_avx2.h"
#include "gemm_avx512.h"
#include "gemm_bf16dp.h"
#include "lt/accelerator.h"

/* Hot loops get an AVX2/FMA (x86-64-v3) clone chosen once at load time by
 * an ifunc; the default clone keeps the plugin loadable on any x86-64.
 * Other compilers and architectures get the plain function. */
#ifndef CPU_HOT /* -DCPU_HOT= builds (and tests) the baseline loops alone */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define CPU_HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CPU_HOT
#endif
#endif

/* Kernels are written once as a macro over the dtype and expanded for each,
 * so every loop is specialised and the dtype is looked at once per call,
 * never per element. The macro gets X(T, S, C, LD, ST):
 *   T   the storage type of an element (uint16_t for the 16-bit formats)
 *   S   the name suffix (f32, f64, f16, bf16)
 *   C   the type the loop computes in: T itself for f32 and f64, float for
 *       f16 and bf16
 *   LD  LD(e) reads a stored element as a C (exact)
 *   ST  ST(v) rounds a C value to T, to nearest even, NaN kept (half.h)
 * For f32 and f64 LD and ST are the identity, so those loops are the plain
 * ones. A 16-bit kernel computes what the f32 kernel computes on the
 * widened inputs (scalar arguments arrive as float, as they do there), and
 * rounds once when it stores; where the f32 kernel sums into its output
 * (sum_rows, col2im) the 16-bit one keeps the sum in fp32 and stores it
 * once. The conversions are branch-free code (half.h) that GCC vectorises
 * in the x86-64-v3 clone of CPU_HOT. */
#include "common/half.h"
#define CPU_AS_IS(x) (x)

#define CPU_FOR_WIDE_TYPES(X)                                                              \
    X(float, f32, float, CPU_AS_IS, CPU_AS_IS)                                             \
    X(double, f64, double, CPU_AS_IS, CPU_AS_IS)
#define CPU_FOR_HALF_TYPES(X)                                                              \
    X(uint16_t, f16, float, half_f16_to_f32, half_f32_to_f16)                               \
    X(uint16_t, bf16, float, half_bf16_to_f32, half_f32_to_bf16)
#define CPU_FOR_FLOAT_TYPES(X) CPU_FOR_WIDE_TYPES(X) CPU_FOR_HALF_TYPES(X)
/* The lt_dtype of a suffix S, for kernels that name their own type. */
#define CPU_DTYPE_f32 LT_F32
#define CPU_DTYPE_f64 LT_F64
#define CPU_DTYPE_f16 LT_F16
#define CPU_DTYPE_bf16 LT_BF16

/* For loops whose body tests a loop-invariant condition (`beta == 0`):
 * GCC unswitches such a loop (one copy per outcome, each vectorised) only
 * while the body is small, and a 16-bit body, with its conversions, is not.
 * CPU_UNSWITCH(T, C, cond, statements) gives the 16-bit types the two copies
 * under `if (cond)`, where the compiler folds the test inside each; for f32
 * and f64 (sizeof(T) == sizeof(C)) it is the statements, unchanged. */
#define CPU_UNSWITCH(T, C, cond, ...)                                                      \
    do {                                                                                   \
        if (sizeof(T) == sizeof(C) || (cond)) {                                            \
            __VA_ARGS__                                                                    \
        } else {                                                                           \
            __VA_ARGS__                                                                    \
        }                                                                                  \
    } while (0)

/* Calls fn_f32, fn_f64, fn_f16 or fn_bf16 with the remaining arguments (void
 * pointers convert implicitly, doubles narrow through the prototype: scalar
 * parameters are of the compute type C, never a 16-bit T), or parks the
 * error. */
#define CPU_DISPATCH(ctx, name, t, fn, ...)                                                \
    do {                                                                               \
        switch (t) {                                                                   \
        case LT_F32: fn##_f32(__VA_ARGS__); break;                                     \
        case LT_F64: fn##_f64(__VA_ARGS__); break;                                     \
        case LT_F16: fn##_f16(__VA_ARGS__); break;                                     \
        case LT_BF16: fn##_bf16(__VA_ARGS__); break;                                   \
        default: cpu_bad_dtype((ctx), (name), (t), "f32, f64, f16 or bf16");           \
        }                                                                              \
    } while (0)

/* One per accelerator context, made by setup. Kernels do not return a
 * status, so the first error one hits is parked here until the next
 * synchronize() reports it: the first one, because later ones are usually
 * consequences of it. */
typedef struct cpu_state {
    _Atomic uint64_t allocated; /* live bytes from alloc() */
    _Atomic uint64_t peak;      /* high-water mark of allocated */
    pthread_mutex_t err_lock;   /* guards the two fields below (cold path) */
    lt_status pending;          /* LT_OK when nothing happened */
    char pending_msg[256];
    /* lt's f32 GEMM variant chosen at setup by the isa and gemm parameters
     * (NULL: OpenBLAS only), and its packing space, reserved only when one
     * runs. */
    lt_sgemm_fn sgemm;
    lt_sgemm_scratch gemm_scratch;
    /* gemm_lowp.c's fp32 scratch for 16-bit GEMMs (kernel panels or whole
     * operand copies): grown on demand by the context's own thread, freed
     * at teardown. */
    struct { float *buf; int64_t floats; } lowp;
    /* optim_mixed.c's AVX2 + F16C loops (isa is not generic and this CPU
     * runs them), else its portable ones. */
    bool vec16;
    /* bf16 GEMMs on vdpbf16ps (gemm_bf16dp.h), native or emulated, as the
     * bf16_gemm parameter asks; NULL: gemm_lowp.c's widening paths. */
    cpu_bf16dp_fn bf16dp;
    int device;                 /* setup's index: the core of a dp replica */
    pthread_t thread;           /* the thread that called setup (drives the replica) */
    bool pinned;                /* replicas.c pinned it; mask: its affinity before */
    bool has_mask;
    cpu_set_t mask;
} cpu_state;

/* replicas.c: a process that sets up more than one context runs dp
 * replicas (contexts on different devices), one thread each: each thread is pinned to core `device` of the
 * cores the process may use and OpenBLAS runs one thread per call unless
 * num_threads says otherwise. A device past the cores is an error unless
 * share_cores (then core device % count, with a warning). A single context
 * changes nothing. */
lt_status cpu_bind_replicas(lt_ctx *ctx, cpu_state *s, int64_t num_threads, bool share_cores);
void cpu_unbind_replicas(cpu_state *s);

/* Parks an error for the next synchronize (first one wins). */
void cpu_fail(lt_ctx *ctx, lt_status code, const char *fmt, ...) LT_PRINTF(3, 4);
/* The common case: `kernel` was given a dtype it has no loop for; `takes`
 * lists the ones it has ("f32 or f64"). LT_ERR_UNSUPPORTED. */
void cpu_bad_dtype(lt_ctx *ctx, const char *kernel, lt_dtype t, const char *takes);
/* Returns the parked error (LT_OK if none), copying its message into the
 * context, and clears it. */
lt_status cpu_take_error(lt_ctx *ctx);

/* gemm.c */
void cpu_gemm(lt_ctx *ctx, lt_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
              double alpha, const void *a, int64_t lda, const void *b, int64_t ldb, double beta,
              void *c, int64_t ldc);

/* elementwise.c */
void cpu_fill(lt_ctx *ctx, lt_dtype t, void *x, int64_t n, double v);
void cpu_axpby(lt_ctx *ctx, lt_dtype t, int64_t n, double a, const void *x, double b, void *y);
void cpu_clamp(lt_ctx *ctx, lt_dtype t, void *x, int64_t n, double lo, double hi);
void cpu_add_bias(lt_ctx *ctx, lt_dtype t, void *y, const void *bias, int64_t rows,
                  int64_t cols);
void cpu_sum_rows(lt_ctx *ctx, lt_dtype t, void *out, const void *x, int64_t rows, int64_t cols,
                  double beta);
void cpu_act_fwd(lt_ctx *ctx, lt_dtype t, lt_act f, void *y, const void *x, int64_t n);
void cpu_act_bwd(lt_ctx *ctx, lt_dtype t, lt_act f, void *dx, const void *dy, const void *x,
                 const void *y, int64_t n, double beta);
void cpu_dropout_fwd(lt_ctx *ctx, lt_dtype t, void *y, uint8_t *mask, const void *x, int64_t n,
                     double p, uint64_t seed, uint64_t offset);
void cpu_dropout_bwd(lt_ctx *ctx, lt_dtype t, void *dx, const void *dy, const uint8_t *mask,
                     int64_t n, double p, double beta);

/* loss.c */
void cpu_xent_fwd(lt_ctx *ctx, lt_dtype t, const void *logits, const int32_t *labels,
                  int64_t rows, int64_t cols, void *probs, void *loss);
void cpu_xent_bwd(lt_ctx *ctx, lt_dtype t, void *dlogits, const void *probs,
                  const int32_t *labels, int64_t rows, int64_t cols, double scale);
void cpu_mse_fwd(lt_ctx *ctx, lt_dtype t, const void *pred, const void *target, int64_t n,
                 void *loss);
void cpu_mse_bwd(lt_ctx *ctx, lt_dtype t, void *dpred, const void *pred, const void *target,
                 int64_t n, double scale);
void cpu_count_correct(lt_ctx *ctx, lt_dtype t, const void *logits, const int32_t *labels,
                       int64_t rows, int64_t cols, int64_t *correct_host);

/* cast.c */
void cpu_cast(lt_ctx *ctx, lt_dtype dst_t, void *dst, lt_dtype src_t, const void *src, int64_t n);

/* reduce.c */
void cpu_sumsq(lt_ctx *ctx, lt_dtype t, const void *x, int64_t n, double *out_host);
void cpu_all_finite(lt_ctx *ctx, lt_dtype t, const void *x, int64_t n, bool *out_host);

/* optim.c */
void cpu_sgd_step(lt_ctx *ctx, lt_dtype t, void *param, const void *grad, void *momentum_buf,
                  int64_t n, const lt_sgd_args *a);
void cpu_adamw_step(lt_ctx *ctx, lt_dtype t, void *param, const void *grad, void *m, void *v,
                    int64_t n, const lt_adamw_args *a);
/* optim.c: false (and the error parked) for nesterov without momentum or
 * with dampening, which torch.optim.SGD refuses too. */
bool cpu_sgd_args_ok(lt_ctx *ctx, const char *kernel, const lt_sgd_args *a);
bool cpu_sgd_mixed_avx2_usable(void); /* optim_mixed.c: AVX2, FMA and F16C here */
void cpu_sgd_step_mixed(lt_ctx *ctx, void *param, lt_dtype grad_t, const void *grad,
                        double grad_mul, void *momentum_buf, lt_dtype compute_t, void *compute,
                        int64_t n, const lt_sgd_args *a);
void cpu_qadam_step(lt_ctx *ctx, lt_dtype t, void *param, const void *m, const void *v, int64_t n,
                    const lt_adamw_args *a);

/* conv.c */
void cpu_im2col(lt_ctx *ctx, lt_dtype t, const void *x, const lt_conv_geom *g, void *col);
void cpu_col2im(lt_ctx *ctx, lt_dtype t, const void *col, const lt_conv_geom *g, void *x,
                double beta);
void cpu_max_pool_fwd(lt_ctx *ctx, lt_dtype t, const void *x, const lt_conv_geom *g, void *y,
                      int32_t *argmax);
void cpu_max_pool_bwd(lt_ctx *ctx, lt_dtype t, const void *dy, const int32_t *argmax,
                      const lt_conv_geom *g, void *dx, double beta);

/* rand.c */
void cpu_rand_fill(lt_ctx *ctx, lt_dtype t, void *x, int64_t n, lt_rand_dist dist, double a,
                   double b, uint64_t seed, uint64_t offset);

/* quantize.c */
void cpu_quantize_u8(lt_ctx *ctx, lt_dtype t, const void *x, int64_t n, int64_t chunk,
                     uint8_t *q, float *minmax);
void cpu_dequantize_u8(lt_ctx *ctx, lt_dtype t, const uint8_t *q, const float *minmax, int64_t n,
                       int64_t chunk, void *y, double beta);

#endif
