/* Replicas: the module on several devices inside one process, for the dp
 * and ddp2 strategies (Lightning's DataParallel, without its limits: every
 * replica keeps its own state for the whole run).
 *
 * A replica is the module's init run once more, on its own device, with its
 * own accelerator context, module state, tape and arena, driven by its own
 * thread for the whole run (made once in lt_run_replicate, never per step).
 * Replica 0 is the root: the run's model, driven by the training thread.
 * The others read the root's parameters in place when the accelerator's
 * memory is host memory (nothing is copied), or hold a copy refreshed
 * before their first step after each optimizer step or checkpoint load
 * (a plugin writing lt_run_flat().params at another time is not seen by
 * copied replicas).
 *
 * A strategy uses them from its hooks:
 *   configure_ddp   lt_run_replicate(run, lt_run_world(run)->num_devices, ...)
 *   training_step   lt_run_replicas_training_step: splits the batch (7 rows
 *                   on 2 replicas: 4 + 3), runs the module's training_step
 *                   on every replica at once, and records one node on the
 *                   root's tape whose value is the loss over the whole batch
 *                   (each replica's weighted by its rows, or the module's
 *                   training_step_end over the gathered outputs). Its
 *                   backward runs every replica's backward at once; as
 *                   soon as every replica has a parameter's gradient, the
 *                   thread that finished it last adds the others' into the
 *                   root's flat gradient buffer (so all threads sum, each
 *                   its own parameters) and the root's thread reports it to
 *                   the strategy's on_grad_ready while backward goes on (ddp2
 *                   starts its buckets then). With copied parameters the
 *                   root sums after the backward and reports every range.
 *   eval_step       lt_run_replicas_eval_step: the same split for
 *                   validation_step / test_step.
 * Metrics a module logs on its replicas are merged into one value per step
 * (weighted by the weight logged, the sample count), so the result equals one
 * device on the whole batch; every replica must log the same names.
 *
 * All functions: the training thread. ABI 1.3. */
#ifndef LT_REPLICA_H
#define LT_REPLICA_H

#include "lt/run.h"
#include "lt/nn.h"
#include "lt/data.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lt_replica_params {
    LT_REPLICA_PARAMS_AUTO = 0,   /* shared when the accelerator's memory is host memory */
    LT_REPLICA_PARAMS_SHARED = 1, /* read the root's buffer in place (host memory only) */
    LT_REPLICA_PARAMS_COPIED = 2, /* each replica holds a copy, refreshed after updates */
} lt_replica_params;

/* Makes the replicas 1 .. count-1 on devices lt_run_devices()[i] (count 1:
 * nothing to make). Call once, from configure_ddp, after the root's
 * parameters are final (after ddp's broadcast). Each new replica's thread
 * sets up its accelerator context and runs the module's init; every replica
 * must register the same parameters as the root. LT_ERR_INVALID when count
 * exceeds the devices or the batch size, LT_ERR_UNSUPPORTED for SHARED on an
 * accelerator whose memory is not host memory; the message in lt_last_error. */
LT_API lt_status lt_run_replicate(lt_run *run, int count, lt_replica_params params);
/* Replicas in use (1 before lt_run_replicate). */
LT_API int lt_run_replica_count(const lt_run *run);
/* One training micro-batch over the replicas; *loss is a scalar on `step`'s
 * tape (the trainer seeds it and runs backward). With one replica: the
 * module's training_step (and training_step_end) on `step` itself. */
LT_API lt_status lt_run_replicas_training_step(lt_run *run, lt_step *step, lt_tensor **loss);
/* One evaluation batch over the replicas (stage LT_STAGE_VALIDATE or
 * LT_STAGE_TEST): the module's validation_step or test_step. */
LT_API lt_status lt_run_replicas_eval_step(lt_run *run, lt_step *step, lt_stage stage);

#ifdef __cplusplus
}
#endif
#endif
