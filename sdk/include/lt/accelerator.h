/* Accelerator: one kind of device (cpu, gpu) — its memory, copies and the
 * compute kernels the nn layers and optimizers call.
 *
 * Threading: setup/teardown run on the worker's main thread. alloc/free/copy
 * and kernels run on the thread driving a replica (the training thread; with
 * dp one thread per replica, each with its own device set by setup). Kernels
 * must not allocate: every buffer they touch is passed in.
 *
 * Streams (ABI 1.6): an accelerator of device memory (gpu) issues every
 * kernel and copy a thread makes on that thread's own stream, CUDA's
 * per-thread default stream (cudaStreamPerThread), in issue order. That is
 * the whole contract between it and a backend of device memory (nccl): the
 * backend orders a collective after the calling thread's earlier work by
 * an event recorded on that stream, with no device-wide synchronize. */
#ifndef LT_ACCELERATOR_H
#define LT_ACCELERATOR_H

#include "lt/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lt_copy_dir {
    LT_COPY_H2D = 1,
    LT_COPY_D2H = 2,
    LT_COPY_D2D = 3,
    LT_COPY_H2H = 4,
} lt_copy_dir;

typedef enum lt_act { LT_ACT_RELU = 1, LT_ACT_TANH = 2, LT_ACT_GELU = 3 } lt_act;
typedef enum lt_rand_dist { LT_RAND_UNIFORM = 1, LT_RAND_NORMAL = 2 } lt_rand_dist;

/* Geometry of a 2-D window operation on planes of h x w (convolution
 * lowering, pooling): kernel kh x kw, stride sh, sw, zero padding ph, pw on
 * each side, output oh x ow = (h + 2 ph - kh) / sh + 1 by (w + 2 pw - kw) / sw
 * + 1 (the caller fills every field). c: channels of one image for
 * im2col/col2im; planes (images x channels) for pooling. Kernels take it as
 * a host pointer, like the *_args structs, and read it before returning. */
typedef struct lt_conv_geom {
    int64_t c, h, w;
    int64_t kh, kw, sh, sw, ph, pw;
    int64_t oh, ow;
} lt_conv_geom;

typedef struct lt_memory_stats {
    uint64_t allocated_bytes; /* live allocations through alloc() */
    uint64_t peak_bytes;      /* high-water mark of allocated_bytes */
    uint64_t total_bytes;     /* device capacity, 0 if unknown */
} lt_memory_stats;

typedef struct lt_sgd_args {
    double lr, momentum, dampening, weight_decay;
    int nesterov;
    int first_step; /* momentum buffer is initialised with the gradient (PyTorch) */
} lt_sgd_args;

typedef struct lt_adamw_args {
    double lr, beta1, beta2, eps, weight_decay;
    int64_t step; /* 1-based, for bias correction */
} lt_adamw_args;

/* The compute table. All pointers are device pointers of the accelerator
 * except those named *_host. Row-major. dtype is LT_F32, LT_F64, LT_F16 or
 * LT_BF16 unless said (a kernel given a dtype it does not support records
 * the error, reported by the next synchronize(); the trainer runs each
 * kernel a precision needs once before training, so a missing 16-bit kernel
 * is named up front). A 16-bit kernel computes what the f32 kernel computes
 * on the widened inputs (GEMM: fp32 accumulation) and rounds each stored
 * result once, to nearest even, NaN kept; sums over elements stay in fp32 or
 * wider. All buffers of a call share the dtype: probs and loss of xent_fwd
 * and mse_fwd, the optimizer state with param and grad. rand_fill in 16 bits
 * gives the f32 values rounded; dropout's mask depends only on (seed,
 * offset), never on the dtype. Kernels are not hooks: they return nothing so
 * the hot path carries no checks; arguments are validated by the nn layer. */
typedef struct lt_kernels {
    uint32_t struct_size;
    /* C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C; op transposes when ta/tb. */
    void (*gemm)(lt_ctx *ctx, lt_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 double alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
                 double beta, void *c, int64_t ldc);
    void (*fill)(lt_ctx *ctx, lt_dtype t, void *x, int64_t n, double v);
    /* y = a * x + b * y; x may be y (in place: each y[i] is read before it
     * is written), and b == 0 does not read y. */
    void (*axpby)(lt_ctx *ctx, lt_dtype t, int64_t n, double a, const void *x, double b, void *y);
    /* y[r, c] += bias[c] */
    void (*add_bias)(lt_ctx *ctx, lt_dtype t, void *y, const void *bias, int64_t rows,
                     int64_t cols);
    /* out[c] = beta * out[c] + sum_r x[r, c] */
    void (*sum_rows)(lt_ctx *ctx, lt_dtype t, void *out, const void *x, int64_t rows,
                     int64_t cols, double beta);
    /* y = f(x) */
    void (*act_fwd)(lt_ctx *ctx, lt_dtype t, lt_act f, void *y, const void *x, int64_t n);
    /* dx = beta * dx + f'(x) * dy (x: the input, y: the output of act_fwd) */
    void (*act_bwd)(lt_ctx *ctx, lt_dtype t, lt_act f, void *dx, const void *dy, const void *x,
                    const void *y, int64_t n, double beta);
    /* Inverted dropout: mask[i] = keep; y = x * mask / (1 - p). Counter-based
     * random numbers: the same (seed, offset) give the same mask on any device. */
    void (*dropout_fwd)(lt_ctx *ctx, lt_dtype t, void *y, uint8_t *mask, const void *x, int64_t n,
                        double p, uint64_t seed, uint64_t offset);
    void (*dropout_bwd)(lt_ctx *ctx, lt_dtype t, void *dx, const void *dy, const uint8_t *mask,
                        int64_t n, double p, double beta);
    /* probs = softmax(logits) per row; loss[0] = mean over rows of -log probs[label]. */
    void (*xent_fwd)(lt_ctx *ctx, lt_dtype t, const void *logits, const int32_t *labels,
                     int64_t rows, int64_t cols, void *probs, void *loss);
    /* dlogits = scale * (probs - onehot(labels)) */
    void (*xent_bwd)(lt_ctx *ctx, lt_dtype t, void *dlogits, const void *probs,
                     const int32_t *labels, int64_t rows, int64_t cols, double scale);
    /* loss[0] = mean (pred - target)^2 ; dpred = scale * 2 (pred - target) / n */
    void (*mse_fwd)(lt_ctx *ctx, lt_dtype t, const void *pred, const void *target, int64_t n,
                    void *loss);
    void (*mse_bwd)(lt_ctx *ctx, lt_dtype t, void *dpred, const void *pred, const void *target,
                    int64_t n, double scale);
    /* Number of rows whose arg-max equals the label (synchronizes). */
    void (*count_correct)(lt_ctx *ctx, lt_dtype t, const void *logits, const int32_t *labels,
                          int64_t rows, int64_t cols, int64_t *correct_host);
    /* Element type conversion, any pair of F32, F64, F16, BF16. */
    void (*cast)(lt_ctx *ctx, lt_dtype dst_t, void *dst, lt_dtype src_t, const void *src,
                 int64_t n);
    /* Sum of squares (synchronizes); for gradient-norm clipping. */
    void (*sumsq)(lt_ctx *ctx, lt_dtype t, const void *x, int64_t n, double *out_host);
    /* True when every element is finite (synchronizes); for loss scaling. */
    void (*all_finite)(lt_ctx *ctx, lt_dtype t, const void *x, int64_t n, bool *out_host);
    /* One optimizer step over a flat buffer, PyTorch's update rules. */
    void (*sgd_step)(lt_ctx *ctx, lt_dtype t, void *param, const void *grad, void *momentum_buf,
                     int64_t n, const lt_sgd_args *a);
    void (*adamw_step)(lt_ctx *ctx, lt_dtype t, void *param, const void *grad, void *m, void *v,
                       int64_t n, const lt_adamw_args *a);
    /* x = uniform[a, b) or normal(mean a, std b), counter-based from (seed, offset). */
    void (*rand_fill)(lt_ctx *ctx, lt_dtype t, void *x, int64_t n, lt_rand_dist dist, double a,
                      double b, uint64_t seed, uint64_t offset);

    /* ---- ABI 1.1: convolution and pooling. An accelerator built against
     * 1.0 has none of them; the core checks LT_KERNELS_HAS before use and
     * fails the layer with a message naming the accelerator. ---- */

    /* Lowers one image x [c, h, w] for a convolution as GEMM:
     * col[(ci * kh + i) * kw + j, oy * ow + ox] = x[ci, oy*sh - ph + i, ox*sw - pw + j],
     * 0 where that falls in the padding. col is (c*kh*kw) x (oh*ow). */
    void (*im2col)(lt_ctx *ctx, lt_dtype t, const void *x, const lt_conv_geom *g, void *col);
    /* The adjoint of im2col: x = beta * x + every col entry added back to the
     * x element it was read from (padding entries dropped). */
    void (*col2im)(lt_ctx *ctx, lt_dtype t, const void *col, const lt_conv_geom *g, void *x,
                   double beta);
    /* Max pooling of g->c planes x [c, h, w] into y [c, oh, ow]; argmax
     * receives, per output, the index within its plane (iy * w + ix) of the
     * first maximum; a NaN beats every number (the last NaN of a window wins,
     * as in PyTorch). Padding never wins. Planes hold at most 2^31 - 1
     * elements. */
    void (*max_pool_fwd)(lt_ctx *ctx, lt_dtype t, const void *x, const lt_conv_geom *g, void *y,
                         int32_t *argmax);
    /* dx = beta * dx, then each dy element added at its argmax. */
    void (*max_pool_bwd)(lt_ctx *ctx, lt_dtype t, const void *dy, const int32_t *argmax,
                         const lt_conv_geom *g, void *dx, double beta);

    /* ---- ABI 1.2. An older accelerator lacks it; the core checks
     * LT_KERNELS_HAS before use. ---- */

    /* x = min(max(x, lo), hi) element-wise, in place; NaN stays NaN (as
     * torch.clamp). For gradient clipping by value. */
    void (*clamp)(lt_ctx *ctx, lt_dtype t, void *x, int64_t n, double lo, double hi);

    /* ---- ABI 1.4: 8-bit compression (bagua's bytegrad and
     * low_precision_decentralized). An older accelerator lacks them; the
     * core checks LT_KERNELS_HAS before use. ---- */

    /* Bagua's MinMaxUInt8. Splits x (n elements of dtype t) into chunks of
     * `chunk` >= 1 elements (the last one may be shorter) and encodes each
     * in 8 bits: minmax[2c] and minmax[2c + 1] (f32, device memory,
     * 2 ceil(n / chunk) floats) receive chunk c's min and max (f64: rounded
     * outward to f32), and q[i] = rint((x[i] - min) * (255 / (max - min))),
     * rounded to nearest, ties to even. dequantize_u8 decodes q[i] as
     * min + q[i] * ((max - min) / 255): within (max - min) / 510 of x[i],
     * plus the rounding of that arithmetic (at most 2^-20 (max - min) +
     * 2^-22 max(|min|, |max|) + 2^-149 in fp32; 2^-48 of (max - min) +
     * max(|min|, |max|) in double). Both evaluate these expressions as
     * written, each operation rounded to nearest in fp32 (f64: double), no
     * fused multiply-add, so any accelerator decodes the same bytes to the
     * same values; where max - min overflows fp32 or is below 2^-96, x, min
     * and max are first multiplied by 1/2 or 2^64 and the decoded value
     * divided by it. A constant chunk (max == min; f64: of a value f32
     * holds) gives q = 0 and decodes exactly. A chunk holding any NaN or
     * infinity (f64: or a value beyond f32's range) gets minmax {NaN, NaN}
     * and q = 0, and decodes to NaN everywhere (a non-finite gradient must
     * stay non-finite, for loss scaling to skip the step). */
    void (*quantize_u8)(lt_ctx *ctx, lt_dtype t, const void *x, int64_t n, int64_t chunk,
                        uint8_t *q, float *minmax);
    /* y = beta * y + decode(q, minmax) element-wise, chunks as quantize_u8
     * made them (16-bit y: in fp32, rounded once on store); beta == 0 does
     * not read y. */
    void (*dequantize_u8)(lt_ctx *ctx, lt_dtype t, const uint8_t *q, const float *minmax,
                          int64_t n, int64_t chunk, void *y, double beta);
    /* ---- ABI 1.5 ---- */
    /* Bagua's QAdam update once its warm-up is over, from a given first
     * moment m (the momentum averaged over ranks) and a frozen second
     * moment v, both read only (a->step 1-based, as adamw_step):
     *   u = (m / (1 - beta1^step)) / (sqrt(v) / sqrt(1 - beta2^step) + eps)
     *   param = param (1 - lr wd) - lr clamp(u, -bound, bound)
     * with bound = max(1, (1 - beta1) / sqrt(1 - beta2)), the largest |u|
     * Adam's own update reaches, and u = 0 where v = 0 (no gradient in the
     * whole warm-up): with v frozen, m / eps would otherwise turn a
     * rarely-seen element's first gradients into jumps. */
    void (*qadam_step)(lt_ctx *ctx, lt_dtype t, void *param, const void *m, const void *v,
                       int64_t n, const lt_adamw_args *a);

    /* ---- ABI 1.8. Optional: without it the core makes the same update in
     * three passes (cast the gradients, sgd_step, cast the parameters). ---- */

    /* Mixed precision's SGD step in one pass: param and momentum_buf are
     * LT_F32 (the master parameters and their state), grad is of grad_t
     * (LT_F32, LT_F16 or LT_BF16) and compute of compute_t (LT_F16 or
     * LT_BF16). Per element: g = grad_mul * (f32)grad[i], grad_mul rounded
     * to f32 first; then sgd_step's f32 update of param[i] and
     * momentum_buf[i] from g; then compute[i] = the new param[i] rounded to
     * compute_t. Each operation as cast, axpby, sgd_step and cast make it,
     * so the result is theirs bit for bit, a NaN's payload and quiet bit
     * aside (a NaN stays a NaN; the three passes skip the multiply when
     * grad_mul is 1, the kernel need not). momentum_buf as sgd_step's
     * (unread when a->momentum == 0, may then be NULL). */
    void (*sgd_step_mixed)(lt_ctx *ctx, void *param, lt_dtype grad_t, const void *grad,
                           double grad_mul, void *momentum_buf, lt_dtype compute_t,
                           void *compute, int64_t n, const lt_sgd_args *a);
} lt_kernels;

/* True when a kernel table (from a plugin built against any 1.x) has
 * `kernel` set: tables only grow at the end, and struct_size says how far
 * the plugin's goes. */
#define LT_KERNELS_HAS(k, kernel)                                                      \
    (offsetof(lt_kernels, kernel) + sizeof((k)->kernel) <= (k)->struct_size &&         \
     (k)->kernel != NULL)

typedef struct lt_accelerator_desc {
    lt_plugin_header hdr;

    /* Required. Whether this machine has a usable device of this kind. Cheap,
     * side-effect free; called by ltrun to resolve accelerator=auto. */
    lt_status (*is_available)(lt_ctx *ctx, bool *out);
    /* Required. Number of devices (for cpu: 1; devices then counts processes). */
    lt_status (*device_count)(lt_ctx *ctx, int *out);
    /* Required. Binds the calling worker to `device` and creates the state the
     * other hooks use. Main thread, once, before any alloc. */
    lt_status (*setup)(lt_ctx *ctx, int device);
    /* Required. Frees everything setup made; after every alloc was freed. */
    lt_status (*teardown)(lt_ctx *ctx);

    /* Required. Device memory; alignment at least 64 bytes. */
    lt_status (*alloc)(lt_ctx *ctx, size_t bytes, void **out);
    void (*free)(lt_ctx *ctx, void *p);
    /* Required. Host memory the device copies from fastest (pinned on gpu);
     * the data loader fills batches in it on its prefetch thread. */
    lt_status (*alloc_host)(lt_ctx *ctx, size_t bytes, void **out);
    void (*free_host)(lt_ctx *ctx, void *p);
    /* Required. Copies in the order issued on the calling thread's stream. */
    lt_status (*copy)(lt_ctx *ctx, void *dst, const void *src, size_t bytes, lt_copy_dir dir);
    /* Required. Waits for every kernel and copy issued by this thread; reports
     * any error a kernel recorded since the last call. */
    lt_status (*synchronize)(lt_ctx *ctx);
    /* Required. The kernel table, valid from setup to teardown. */
    lt_status (*get_kernels)(lt_ctx *ctx, const lt_kernels **out);
    /* Required. */
    lt_status (*memory_stats)(lt_ctx *ctx, lt_memory_stats *out);

    /* Optional: whether another process uses the device (auto_select_gpus);
     * default: false for every device. */
    lt_status (*device_in_use)(lt_ctx *ctx, int device, bool *out);
    /* Optional: a human name for logs; default "<accelerator>:<index>". */
    lt_status (*device_name)(lt_ctx *ctx, int device, char *buf, size_t len);

    /* ABI 1.1. Optional: whether alloc() returns host memory that a process
     * group backend may read directly (cpu: true). Called by the core when
     * it creates a process group, on that thread, and at setup. Default:
     * false (device memory: the backend must be one for that device).
     * From 1.9, true also says the kernels may read alloc_host memory (the
     * loader's batch buffers) and are done with their inputs when they
     * return or at the next synchronize, whichever the core calls before it
     * asks the loader for the next batch: a step then reads the batch where
     * the loader put it instead of copying it. A plugin built before 1.9
     * keeps the copy. */
    lt_status (*memory_is_host)(lt_ctx *ctx, bool *out);

    /* ABI 1.9. Optional: judges the parameters before anything starts
     * (lt/abi.h, under lt_param_spec). */
    lt_status (*check_params)(lt_ctx *ctx);
} lt_accelerator_desc;

#ifdef __cplusplus
}
#endif
#endif
