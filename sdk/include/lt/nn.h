/* The nn layer a module builds its model with: parameters registered into one
 * flat buffer, layers whose forward records a node on the step's tape, losses,
 * and metric logging. The trainer replays the tape backward.
 *
 * Threading: a model and its steps belong to one replica and are used by the
 * thread driving it (init on the worker's main thread; steps on the training
 * thread). Nothing here allocates from the heap in steady state: step tensors
 * come from an arena reset at the start of every step.
 *
 * Errors: forward functions return NULL once the step has failed; the first
 * failure's message is kept in the step, and training_step returns
 * lt_step_status(step). So a module can chain calls and check once. */
#ifndef LT_NN_H
#define LT_NN_H

#include "lt/core.h"
#include "lt/accelerator.h"
#include "lt/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lt_model lt_model;   /* the parameters of one replica */
typedef struct lt_step lt_step;     /* one forward (and backward): arena, tape, logs */
typedef struct lt_tensor lt_tensor; /* lives in the step arena or is a parameter */
typedef struct lt_param lt_param;   /* a named slice of the flat parameter buffer */

#define LT_MAX_DIMS 4

typedef enum lt_init {
    LT_INIT_ZEROS = 1,
    LT_INIT_ONES = 2,
    LT_INIT_UNIFORM = 3,        /* U(-a, a) */
    LT_INIT_NORMAL = 4,         /* N(0, a) */
    LT_INIT_KAIMING_UNIFORM = 5,/* PyTorch's Linear/Conv default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) */
} lt_init;

/* ---- registration (module init) ---------------------------------------- */

/* Registers a parameter; fan_in is shape[1..] product. Values are set when the
 * flat buffer is made (after init returns), from the run's seed and the
 * parameter's index, so every rank and replica gets the same values. */
LT_API lt_param *lt_param_new(lt_model *m, const char *name, int ndim, const int64_t *shape,
                              lt_init init, double a);
LT_API const char *lt_param_name(const lt_param *p);
LT_API int64_t lt_param_numel(const lt_param *p);

typedef struct lt_linear_layer lt_linear_layer;
/* y = x W^T + b; W [out, in] named "<name>.weight", b [out] "<name>.bias". */
LT_API lt_linear_layer *lt_linear_new(lt_model *m, const char *name, int64_t in, int64_t out,
                                bool bias);

typedef struct lt_conv2d_layer lt_conv2d_layer;
/* 2-D convolution (PyTorch's Conv2d: cross-correlation, zero padding) over
 * x [N, in, H, W]: W [out, in, kernel, kernel] "<name>.weight", b [out]
 * "<name>.bias"; y [N, out, (H + 2 padding - kernel) / stride + 1, (W ...)].
 * Needs an accelerator with the ABI 1.1 kernels (im2col, col2im). */
LT_API lt_conv2d_layer *lt_conv2d_new(lt_model *m, const char *name, int64_t in, int64_t out,
                                      int64_t kernel, int64_t stride, int64_t padding,
                                      bool bias);

/* ---- forward (training/validation/test step) -------------------------- */

LT_API lt_tensor *lt_linear(lt_step *s, const lt_linear_layer *l, lt_tensor *x);
LT_API lt_tensor *lt_relu(lt_step *s, lt_tensor *x);
LT_API lt_tensor *lt_tanh(lt_step *s, lt_tensor *x);
LT_API lt_tensor *lt_gelu(lt_step *s, lt_tensor *x);
/* Inverted dropout, active only in training steps. */
LT_API lt_tensor *lt_dropout(lt_step *s, lt_tensor *x, double p);
/* [N, d1, d2, ...] -> [N, d1*d2*...] (no copy). */
LT_API lt_tensor *lt_flatten(lt_step *s, lt_tensor *x);
/* The same elements under another shape (no copy), as torch's view:
 * [N, 784] -> [N, 1, 28, 28]. The element counts must match. */
LT_API lt_tensor *lt_reshape(lt_step *s, lt_tensor *x, int ndim, const int64_t *shape);
LT_API lt_tensor *lt_conv2d(lt_step *s, const lt_conv2d_layer *l, lt_tensor *x);
/* Max over kernel x kernel windows of x [N, C, H, W] moved by stride (0:
 * the kernel size), no padding: PyTorch's MaxPool2d(kernel, stride). */
LT_API lt_tensor *lt_max_pool2d(lt_step *s, lt_tensor *x, int64_t kernel, int64_t stride);
/* Mean softmax cross-entropy of logits [N, C] against int32 labels [N]. */
LT_API lt_tensor *lt_cross_entropy(lt_step *s, lt_tensor *logits, const lt_tensor *labels);
/* Mean squared error. */
LT_API lt_tensor *lt_mse(lt_step *s, lt_tensor *pred, const lt_tensor *target);

/* Rows of logits whose arg-max is the label. */
LT_API int64_t lt_count_correct(lt_step *s, const lt_tensor *logits, const lt_tensor *labels);
/* The value of a one-element tensor (synchronizes). */
LT_API double lt_item(lt_step *s, const lt_tensor *t);

LT_API int lt_tensor_ndim(const lt_tensor *t);
LT_API int64_t lt_tensor_dim(const lt_tensor *t, int i);
LT_API lt_dtype lt_tensor_dtype(const lt_tensor *t);
LT_API void *lt_tensor_data(const lt_tensor *t);

/* ---- the step ---------------------------------------------------------- */

/* Input i of the batch (images, labels, ...) on the device. */
LT_API lt_tensor *lt_step_input(lt_step *s, int i);
LT_API int64_t lt_step_batch_size(const lt_step *s);
LT_API bool lt_step_training(const lt_step *s);
LT_API lt_status lt_step_status(const lt_step *s);
/* Fail the step with a message (a module's own check). Returns LT_ERR_INVALID. */
LT_API lt_status lt_step_fail(lt_step *s, const char *fmt, ...) LT_PRINTF(2, 3);
LT_API int64_t lt_step_global_step(const lt_step *s);
LT_API int64_t lt_step_epoch(const lt_step *s);

enum {
    LT_LOG_ON_STEP = 1u << 0,   /* a value per step in metrics.csv */
    LT_LOG_ON_EPOCH = 1u << 1,  /* weighted mean over the epoch */
    LT_LOG_PROG_BAR = 1u << 2,  /* shown in the progress bar */
    LT_LOG_SYNC_DIST = 1u << 3, /* reduced over ranks: sum of value*weight and of weights */
    LT_LOG_RANK_ZERO_ONLY = 1u << 4,
};
/* Logs a metric; weight is the number of samples it stands for (the batch size
 * for a mean over the batch). Epoch values are sum(value*weight)/sum(weight),
 * over every rank when LT_LOG_SYNC_DIST. Default flags: 0 means
 * ON_STEP in training and ON_EPOCH in validation/test. */
LT_API lt_status lt_log_metric(lt_step *s, const char *name, double value, double weight,
                               unsigned flags);

/* ---- collectives for the module (Lightning's self.all_gather, ...) ----- */

/* Where this step stands. Under dp and ddp2 every replica is a rank of the
 * module's world: rank = process rank x replicas + replica, world_size =
 * processes x replicas; the collectives below then meet every replica of
 * every process (a replica with no rows in a short last batch does not
 * call them; all_gather gives it zeros). training_step_end runs on the
 * process's root and sees the world of processes. */
LT_API int lt_step_rank(const lt_step *s);
LT_API int lt_step_world_size(const lt_step *s);
LT_API bool lt_step_is_global_zero(const lt_step *s);
/* Host buffers; collective: every rank must call them in the same order, or
 * the run fails with an error naming the ranks that disagree. On one process
 * they return the input. */
LT_API lt_status lt_step_reduce(lt_step *s, void *buf, size_t count, lt_dtype t, lt_redop op);
/* recv holds world_size * count elements, rank r's at r * count. */
LT_API lt_status lt_step_all_gather(lt_step *s, const void *send, void *recv, size_t count,
                                    lt_dtype t);
LT_API lt_status lt_step_broadcast(lt_step *s, void *buf, size_t count, lt_dtype t, int root);
LT_API lt_status lt_step_barrier(lt_step *s);

#ifdef __cplusplus
}
#endif
#endif
