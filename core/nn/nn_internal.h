/* Internal layout of models, parameters, tensors, steps and the tape. */
#ifndef LT_NN_INTERNAL_H
#define LT_NN_INTERNAL_H

#include "lt/nn.h"
#include "arena.h"

struct lt_param {
    char name[128];
    int ndim;
    int64_t shape[LT_MAX_DIMS];
    int64_t numel;
    size_t offset;      /* elements into the flat buffers */
    int index;          /* registration order */
    lt_init init;
    double init_arg;
    uint64_t grad_cycle; /* == model->grad_cycle when its gradient holds this cycle's sum */
    int pending_uses;    /* forward uses whose backward has not run yet */
    bool ready_sent;     /* grad-ready was reported for this backward */
};

struct lt_conv2d_layer {
    lt_param *weight, *bias; /* [out, in, k, k], [out] */
    int64_t in, out, kernel, stride, padding;
};

struct lt_linear_layer {
    lt_param *weight, *bias;
    int64_t in, out;
};

/* Called as each parameter's gradient becomes final during backward. */
typedef void (*lt_grad_ready_fn)(void *user, size_t offset, size_t count);

struct lt_model {
    lt_param **params;
    int nparams, cap;
    void **objects; /* layers, freed with the model */
    int nobjects, objcap;
    size_t total;        /* elements in the flat buffers */
    lt_dtype dtype;      /* compute dtype: activations, params_flat, grads_flat */
    void *params_flat;   /* device, in dtype: what the layers read */
    void *grads_flat;    /* device, in dtype: what backward writes and ddp reduces */
    /* Mixed precision (master_dtype != dtype, the root replica only): the
     * parameters the optimizer updates and checkpoints hold, and their true-
     * scale gradients (filled by the precision plugin's unscale_and_check).
     * params_flat is then a compute copy, cast from master_flat whenever
     * master_version moves past compute_version. NULL otherwise. */
    lt_dtype master_dtype;
    void *master_flat;
    void *master_grads;
    /* lt_run_defer_unscale (ABI 1.8): master_grads is not written this
     * step; the true-scale gradients are grads_flat times grad_mul, and
     * lt_model_unscale_grads writes them when something must read them. */
    bool grads_deferred;
    double grad_mul;
    bool borrows_params; /* a replica reading the root's params_flat in place */
    uint64_t grad_cycle;
    const lt_kernels *k;
    lt_ctx *kctx;        /* accelerator context, passed to kernels */
    const void *accel;   /* const lt_accelerator_desc * */
    lt_grad_ready_fn grad_ready;
    void *grad_ready_user;
    lt_status status;    /* first registration error */
    char error[512];
};

struct lt_tensor {
    void *data;
    void *grad;          /* NULL until backward writes it */
    lt_dtype dtype;
    int ndim;
    int64_t shape[LT_MAX_DIMS];
    int64_t numel;
    bool requires_grad;
    lt_param *param;     /* set for parameter views */
};

typedef struct lt_node lt_node;
typedef void (*lt_backward_fn)(lt_step *s, lt_node *n, double seed);
struct lt_node {
    lt_backward_fn backward;
    lt_tensor *in[3];
    lt_tensor *out;
    lt_param *params[2];
    const void *layer;
    void *saved;          /* probs, dropout mask ... */
    double arg;           /* dropout p ... */
};

typedef struct lt_metric_sink lt_metric_sink;
typedef lt_status (*lt_metric_fn)(void *user, const char *name, double value, double weight,
                                  unsigned flags);

struct lt_step {
    lt_model *model;
    lt_arena host;        /* tensors, nodes: host memory */
    lt_arena dev;         /* activations: device memory */
    lt_node **tape;
    int ntape, tapecap;
    lt_tensor *inputs[4];
    int ninputs;
    int64_t batch_size;
    int64_t row0;         /* a dp replica's first row in the whole batch (else 0) */
    int64_t total_rows;   /* rows of the whole batch (0: batch_size) */
    bool training;
    int64_t global_step, epoch;
    uint64_t seed;        /* for dropout: counter-based with a per-step offset */
    uint64_t rand_offset;
    lt_status status;
    char error[1024];
    lt_metric_fn log_fn;
    void *log_user;
    struct lt_run *run;   /* for the module's collectives; NULL in bare tests */
    int replica;          /* the dp replica driving this step (0: the root) */
};

/* layers.c: shared by the layer files. False (the step failed with a
 * message naming op) when x is NULL or not the model's dtype. */
bool lt_nn_ok_input(lt_step *s, const lt_tensor *x, const char *op);
void lt_shape_str(int ndim, const int64_t *shape, char *buf, size_t len); /* "[4, 1, 28, 28]" */
void lt_nn_shape_str(const lt_tensor *x, char *buf, size_t len);

/* model.c */
lt_model *lt_model_new(lt_dtype dtype, const void *accel_desc, lt_ctx *kctx,
                       const lt_kernels *k);
void lt_model_free(lt_model *m);
void *lt_model_own(lt_model *m, size_t bytes); /* zeroed, freed with the model */
/* Allocates the flat buffers and initialises every parameter from seed
 * (into the master copy, then cast, when master_dtype differs). */
lt_status lt_model_finalize(lt_model *m, uint64_t seed);
/* Casts the master parameters into the compute copy (mixed precision; a
 * no-op otherwise). Kernels only: the caller synchronizes. */
void lt_model_refresh_compute(lt_model *m);
/* What the optimizer, clipping and checkpoints work on: the master buffers
 * under mixed precision, else the flat buffers themselves. */
static inline void *lt_model_opt_params(const lt_model *m) {
    return m->master_flat ? m->master_flat : m->params_flat;
}
static inline void *lt_model_opt_grads(const lt_model *m) {
    return m->master_grads ? m->master_grads : m->grads_flat;
}
static inline lt_dtype lt_model_opt_dtype(const lt_model *m) {
    return m->master_flat ? m->master_dtype : m->dtype;
}
/* A replica's model after its init: the same parameters as root (else
 * LT_ERR_MISMATCH naming the first difference in m->error), its own
 * gradients, and either root's parameter buffer itself (borrow) or a buffer
 * of its own (filled by the caller). */
lt_status lt_model_finalize_replica(lt_model *m, const lt_model *root, bool borrow);
void *lt_param_ptr(const lt_model *m, const lt_param *p);
void *lt_param_grad_ptr(const lt_model *m, const lt_param *p);
/* Starts a new gradient accumulation cycle: the next backward overwrites. */
void lt_model_zero_grad(lt_model *m);

/* tape.c */
lt_status lt_step_init(lt_step *s, lt_model *m);
void lt_step_destroy(lt_step *s);
/* Starts a step: resets both arenas and the tape. */
void lt_step_reset(lt_step *s, bool training, int64_t global_step, int64_t epoch, uint64_t seed,
                   uint64_t rand_offset);
/* A batch input: wraps device memory (not copied). */
lt_tensor *lt_step_wrap(lt_step *s, void *data, lt_dtype t, int ndim, const int64_t *shape);
lt_tensor *lt_step_new_tensor(lt_step *s, lt_dtype t, int ndim, const int64_t *shape,
                              bool requires_grad);
/* Device scratch from the step arena. */
void *lt_step_scratch(lt_step *s, size_t bytes);
lt_node *lt_step_record(lt_step *s, lt_backward_fn fn, lt_tensor *out);
lt_tensor *lt_param_tensor(lt_step *s, lt_param *p);
/* Gradient buffer of t for accumulation: returns beta (0 when fresh). */
double lt_grad_target(lt_step *s, lt_tensor *t, void **grad);
/* Backward from a loss made by a loss layer, seeding its gradient with `seed`
 * (loss scale / accumulation). Reports grad-ready ranges; parameters not used
 * this step get zero gradients and are reported at the end. */
lt_status lt_step_backward(lt_step *s, lt_tensor *loss, double seed);
/* Backward from a tensor that is not a loss: `out` must be the output of the
 * last node recorded and out->grad already hold dLoss/dout (a dp replica's
 * share of the gradient of training_step_end's loss). */
lt_status lt_step_backward_from(lt_step *s, lt_tensor *out);
lt_status lt_step_set_error(lt_step *s, lt_status st, const char *fmt, ...) LT_PRINTF(3, 4);
/* A parameter's gradient was written by a backward node. */
void lt_param_grad_done(lt_step *s, lt_param *p);

#endif
