/* Optimizers over the flat parameter buffer (one kernel call per step), the
 * learning-rate schedule as a pure function of the step (so resuming needs no
 * scheduler state beyond the step count), and gradient clipping by norm. */
#ifndef LT_OPTIM_H
#define LT_OPTIM_H

#include "lt/module.h"

typedef enum lt_optim_kind { LT_OPT_SGD = 1, LT_OPT_ADAMW = 2 } lt_optim_kind;
typedef enum lt_sched_kind { LT_SCHED_NONE = 0, LT_SCHED_STEP = 1, LT_SCHED_COSINE = 2 } lt_sched_kind;

typedef struct lt_optimizer {
    lt_optim_kind kind;
    lt_sched_kind sched;   /* cfg.scheduler, parsed once (lr_at runs every step) */
    lt_optim_config cfg;
    void *state[2];        /* sgd: momentum; adamw: m, v (device, flat) */
    int nstate;
    size_t count;
    lt_dtype dtype;
    int64_t step;          /* optimizer steps taken */
    int64_t total_steps;   /* for cosine; 0 = unknown */
    int64_t steps_per_epoch;
    double lr;             /* in force for the next step */
    bool fuse;             /* optimizer.fused: one-pass mixed-precision SGD where it can */
} lt_optimizer;

/* Checks the config (names, ranges), one-line error naming the key. */
lt_status lt_optim_validate(const lt_optim_config *c, char *err, size_t errlen);
/* scheduler.name as the enum lr_at switches on ("none" and unknown: none). */
lt_sched_kind lt_optim_sched_kind(const char *name);
/* Allocates the state with the accelerator and zeroes it. */
lt_status lt_optim_init(lt_optimizer *o, const lt_optim_config *c, size_t count, lt_dtype t,
                        const lt_accelerator_desc *a, lt_ctx *kctx, const lt_kernels *k);
void lt_optim_free(lt_optimizer *o, const lt_accelerator_desc *a, lt_ctx *kctx);
/* The learning rate for optimizer step `step` (0-based) in `epoch`. */
double lt_optim_lr_at(const lt_optimizer *o, int64_t step, int64_t epoch);
void lt_optim_step(lt_optimizer *o, void *params, const void *grads, const lt_kernels *k,
                   lt_ctx *kctx, int64_t epoch);
/* The same in pieces, for threads that each update a range of the flat
 * buffers (dp replicas): begin (the learning rate of this step), apply to
 * disjoint ranges that cover [0, count) (any thread, its own kernel ctx),
 * end. The update is element-wise, so the pieces give lt_optim_step's
 * result bit for bit. */
void lt_optim_begin(lt_optimizer *o, int64_t epoch);
void lt_optim_apply(const lt_optimizer *o, void *params, const void *grads, size_t offset, size_t count,
                    const lt_kernels *k, lt_ctx *kctx);
void lt_optim_end(lt_optimizer *o);
/* The sgd_step kernels' arguments for this step. */
lt_sgd_args lt_optim_sgd_args(const lt_optimizer *o);

/* model_update.c: the update of a model's flat buffers (its master ones
 * under mixed precision). Whether the step can be one pass (mixed
 * precision, SGD, fp32 master, a 16-bit compute copy, optimizer.fused and
 * the accelerator's sgd_step_mixed): */
bool lt_model_update_fuses(const lt_model *m, const lt_optimizer *o);
/* lt_run_defer_unscale: the master gradients are grads_flat x grad_mul. */
void lt_model_defer_unscale(lt_model *m, double grad_mul);
/* Writes the master gradients a deferred unscale left unwritten (cast,
 * multiply); nothing otherwise. Kernels only: the caller synchronizes. */
void lt_model_unscale_grads(lt_model *m);
/* lt_optim_apply over [offset, offset + count) of the model's buffers. With
 * fused (lt_model_update_fuses said so), one sgd_step_mixed that also
 * writes that range of the compute copy and reads the gradients deferred
 * or not; without, the master gradients must be written (unscale_grads). */
void lt_model_optim_apply(const lt_model *m, const lt_optimizer *o, bool fused, size_t offset,
                          size_t count, lt_ctx *kctx);
/* Scales grads so their global L2 norm is at most max_norm (PyTorch's rule);
 * returns the norm before clipping. */
double lt_clip_grad_norm(void *grads, size_t n, lt_dtype t, double max_norm, const lt_kernels *k,
                         lt_ctx *kctx);
/* Clamps every gradient element to [-clip_value, clip_value] (PyTorch's
 * clip_grad_value_; NaN stays NaN). The kernel table must have clamp
 * (LT_KERNELS_HAS: the trainer checks at setup). */
void lt_clip_grad_value(void *grads, size_t n, lt_dtype t, double clip_value, const lt_kernels *k,
                        lt_ctx *kctx);
const char *lt_optim_state_name(const lt_optimizer *o, int i); /* "momentum_buffer", "exp_avg" ... */

#endif
