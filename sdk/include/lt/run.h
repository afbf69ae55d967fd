/* What a running job gives strategy and precision plugins: where this process
 * stands, the flat parameter and gradient buffers, the device, the store and
 * process groups. The core owns all of it; plugins borrow.
 *
 * Process groups wrap a backend plugin: the core adds a sequence number and a
 * fingerprint to every collective and, when a wait runs long, compares them
 * with the other ranks' through the store, so mismatched collectives end in an
 * error naming both ranks instead of a hang. */
#ifndef LT_RUN_H
#define LT_RUN_H

#include "lt/core.h"
#include "lt/accelerator.h"
#include "lt/backend.h"
#include "lt/store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lt_run lt_run;
typedef struct lt_pg lt_pg;
typedef struct lt_work lt_work;

typedef struct lt_world {
    int32_t world_size;       /* processes in the job */
    int32_t global_rank;
    int32_t local_rank;
    int32_t local_world_size; /* processes on this node */
    int32_t node_rank;
    int32_t num_nodes;
    int32_t num_devices;      /* devices this process drives (dp: several) */
    int32_t device;           /* the device index of this process's root replica */
    char main_address[256];
    int32_t main_port;
} lt_world;

LT_API const lt_world *lt_run_world(const lt_run *run);

/* The flat buffers of the root replica: params in param dtype (fp32 master
 * weights under mixed precision), grads in grad dtype, `count` elements each.
 * Stable from configure_ddp to teardown; before it (a precision plugin's
 * setup) grads may still move (lt_run_place_grads), so a precision plugin
 * asks again in the hooks it reads them in. */
typedef struct lt_flat {
    void *params;
    void *grads;
    size_t count;
    lt_dtype param_dtype;
    lt_dtype grad_dtype;
} lt_flat;
LT_API lt_status lt_run_flat(lt_run *run, lt_flat *out);

/* ABI 1.7. Moves lt_flat.grads (contents kept) into group memory of the
 * run's default group (lt/backend.h, mem_alloc), where its allreduce runs
 * in place: over shm, ranks read each other's gradients directly instead
 * of copying them in and out of the group's slots. Collective over the
 * default group; call it from configure_ddp before lt_run_flat (whose
 * pointers it changes) and before anything else keeps the gradient
 * pointer. *placed says whether they moved; false, with LT_OK, when the
 * backend offers no group memory or has no room for it (a warning says so;
 * gloo, nccl, a hierarchical or a staged
 * group, or a precision plugin built before ABI 1.7, which may keep the
 * pointer it got at setup). The run frees the memory after the model.
 * LT_ERR_STATE before
 * the model or the default group exists, or when called twice. */
LT_API lt_status lt_run_place_grads(lt_run *run, bool *placed);

/* ABI 1.4. The gradients clipping and the optimizer read, in
 * lt_flat.param_dtype, lt_flat.count elements. Under mixed precision
 * (param_dtype != grad_dtype) a buffer of their own, which the precision
 * plugin's unscale_and_check fills from lt_flat.grads (the reduced, scaled
 * compute-dtype gradients) each optimizer step, or leaves to the core
 * (lt_run_defer_unscale, 1.8): this call then writes them, so call it each
 * step before reading them (a strategy's own optimizer_step gets them
 * written before it runs). Otherwise lt_flat.grads itself. The pointer is
 * stable from precision setup to teardown. */
LT_API lt_status lt_run_master_grads(lt_run *run, void **out);

/* ABI 1.8. For a precision plugin's unscale_and_check, instead of writing
 * the master gradients: says they are lt_flat.grads (the reduced gradients,
 * already checked) times grad_mul (1 / loss scale). The core then reads
 * the 16-bit gradients in the optimizer step itself where it can (SGD,
 * an fp32 master under a 16-bit compute dtype, optimizer.fused, and an
 * accelerator with sgd_step_mixed: one pass over the parameters instead of
 * three), and otherwise writes the master gradients (cast, then multiply)
 * before anything reads them: clipping, lt_run_master_grads, an optimizer
 * without a fused kernel, a strategy's own optimizer_step, a strategy
 * built before 1.8. The result is the same bit for bit (NaN payloads
 * aside). Holds until the next backward, so lt_run_master_grads after the
 * step still returns this step's gradients. LT_ERR_STATE under a precision
 * whose param dtype equals its grad dtype (there are no master
 * gradients); LT_ERR_INVALID when grad_mul is not finite and > 0. */
LT_API lt_status lt_run_defer_unscale(lt_run *run, double grad_mul);

/* ABI 1.4. A strategy that writes lt_flat.params outside the optimizer step
 * (bagua's decentralized averaging) calls this afterwards, on the training
 * thread, so that whatever derives from the parameters (dp replicas'
 * copies, the mixed-precision compute copy) is refreshed before the next
 * step. */
LT_API void lt_run_params_changed(lt_run *run);

/* ABI 1.5. The configured optimizer (optimizer.* of the config), as a
 * strategy that owns the update (its optimizer_step hook) needs it. */
typedef struct lt_optimizer_view {
    uint32_t struct_size;   /* set to sizeof(lt_optimizer_view) before the call */
    const char *name;       /* "sgd" | "adamw" */
    double lr;              /* this step's, after warm-up and schedule */
    double momentum, dampening; /* sgd */
    int32_t nesterov;       /* sgd */
    double weight_decay;    /* sgd: L2 added to the gradient; adamw: decoupled */
    double beta1, beta2, eps; /* adamw */
    int64_t step;           /* optimizer steps before this one (adamw's bias
                               correction counts this one as step + 1) */
    int32_t nstate;         /* state buffers: sgd 0 or 1, adamw 2 */
    void *state[2];         /* sgd: momentum_buffer; adamw: exp_avg, exp_avg_sq;
                               count elements of dtype, saved in checkpoints */
    const char *state_names[2];
    size_t count;           /* lt_flat.count */
    lt_dtype dtype;         /* lt_flat.param_dtype */
} lt_optimizer_view;
/* Fills *out (its struct_size set by the caller); valid from configure_ddp
 * to teardown, and `lr` and `step` as of the current optimizer step when
 * called from optimizer_step. */
LT_API lt_status lt_run_optimizer(lt_run *run, lt_optimizer_view *out);
/* The core's update of the parameters from the master gradients with the
 * configured optimizer: the strategy's default optimizer_step. */
LT_API lt_status lt_run_optimizer_step(lt_run *run);

/* Read-only view of one registered parameter of the root replica, in
 * registration order (offsets ascending). Its values are
 * lt_flat.params[offset, offset + count), its gradient the same range of
 * lt_flat.grads. */
typedef struct lt_param_view {
    const char *name;       /* "fc1.weight": the checkpoint's tensor name */
    size_t offset;          /* elements into the flat buffers */
    size_t count;           /* elements */
    int32_t index;          /* registration order, 0-based */
    int32_t ndim;
    int64_t shape[4];       /* LT_MAX_DIMS; entries past ndim are 0 */
    lt_dtype dtype;         /* lt_flat.param_dtype */
} lt_param_view;
/* The parameters, stable from configure_ddp to teardown (LT_ERR_STATE
 * before the model exists). */
LT_API lt_status lt_run_params(lt_run *run, const lt_param_view **out, size_t *count);

/* A bucket: a range of the flat gradient buffer communicated as one piece. */
typedef struct lt_bucket_view {
    size_t offset;          /* elements into lt_flat.grads */
    size_t count;
} lt_bucket_view;
/* Publishes how the strategy cuts the gradients, in launch order (the order
 * backward completes them: gradients arrive from the end of the flat buffer
 * towards its start). The buckets must cover [0, lt_flat.count) exactly
 * once; the run copies them. ddp's configure_ddp publishes its cut here and
 * ddp's gradient hooks communicate whatever is published when each backward
 * starts, so an override that calls the original configure_ddp may publish
 * another cut after it. LT_ERR_INVALID (with a message naming the bucket)
 * for a gap, an overlap or a range past the end; LT_ERR_STATE before the
 * model exists. */
LT_API lt_status lt_run_set_buckets(lt_run *run, const lt_bucket_view *buckets, size_t count);
/* The published buckets (count 0 before configure_ddp published any). */
LT_API lt_status lt_run_buckets(lt_run *run, const lt_bucket_view **out, size_t *count);

/* The accelerator: kernels (pass lt_run_kernel_ctx as their ctx) and memory. */
LT_API const lt_kernels *lt_run_kernels(lt_run *run);
LT_API lt_ctx *lt_run_kernel_ctx(lt_run *run);
LT_API lt_status lt_run_alloc(lt_run *run, size_t bytes, void **out);
LT_API void lt_run_free(lt_run *run, void *p);
LT_API lt_status lt_run_synchronize(lt_run *run);

/* The rendezvous store client of this process (main thread only; clone it for
 * another thread). */
LT_API lt_store *lt_run_store(lt_run *run);

/* Creates a process group over every rank of the job with `backend` (NULL:
 * the run's process_group_backend, "auto" = gloo on cpu, nccl on gpu). `name`
 * distinguishes groups ("default", "async"). Collective: every rank calls it
 * in the same order. */
LT_API lt_status lt_run_new_group(lt_run *run, const char *backend, const char *name,
                                  lt_pg **out);
/* ABI 1.5. A group over some of the job's ranks: ranks[i] (global ranks,
 * distinct) becomes the group's rank i. Only the members take part: each
 * calls it with the same name, list and order, and gets the group; a rank
 * not listed gets *out = NULL and LT_OK without waiting. Names must differ
 * between subgroups that exist at once ("local/0", "local/1", "leaders").
 * Messages and failure posts of the group name global ranks. */
LT_API lt_status lt_run_new_subgroup(lt_run *run, const char *backend, const char *name,
                                     const int *ranks, int count, lt_pg **out);
/* The group every strategy hook after init_dist_connection communicates
 * over (gradients, sync_dist, all_gather ...). init_dist_connection sets it;
 * from then on the run owns it and destroys it after the strategy's
 * teardown (and aborts it first when the worker fails). Setting another
 * group gives the previous one back to the caller: fetch it first with
 * lt_run_default_group and destroy it after. */
LT_API void lt_run_set_default_group(lt_run *run, lt_pg *pg);
/* NULL until init_dist_connection set one. */
LT_API lt_pg *lt_run_default_group(lt_run *run);
/* Destroys a group the caller owns (not the run's default group). */
LT_API void lt_pg_destroy(lt_pg *pg);
LT_API int lt_pg_rank(const lt_pg *pg);
LT_API int lt_pg_size(const lt_pg *pg);
/* Whether the group's backend reduces dtype with op (its supports hook): a
 * strategy asks at configure time, so a combination the backend lacks fails
 * before training instead of at the first collective. The backend's name is
 * for the message. */
LT_API bool lt_pg_supports(lt_pg *pg, lt_dtype t, lt_redop op);
LT_API const char *lt_pg_backend_name(const lt_pg *pg);

/* Asynchronous collectives; buffers stay the backend's until lt_work_wait. */
LT_API lt_status lt_pg_allreduce(lt_pg *pg, void *buf, size_t count, lt_dtype t, lt_redop op,
                                 lt_work **w);
LT_API lt_status lt_pg_broadcast(lt_pg *pg, void *buf, size_t count, lt_dtype t, int root,
                                 lt_work **w);
LT_API lt_status lt_pg_allgather(lt_pg *pg, const void *send, void *recv, size_t count,
                                 lt_dtype t, lt_work **w);
LT_API lt_status lt_pg_reduce_scatter(lt_pg *pg, const void *send, void *recv, size_t count,
                                      lt_dtype t, lt_redop op, lt_work **w);
LT_API lt_status lt_pg_send(lt_pg *pg, const void *buf, size_t count, lt_dtype t, int peer,
                            uint32_t tag, lt_work **w);
LT_API lt_status lt_pg_recv(lt_pg *pg, void *buf, size_t count, lt_dtype t, int peer,
                            uint32_t tag, lt_work **w);
LT_API lt_status lt_pg_barrier(lt_pg *pg, lt_work **w);
/* Waits (the group's timeout), frees the work, and returns its status; the
 * error message is in lt_pg_error. */
LT_API lt_status lt_work_wait(lt_work *w);
LT_API const char *lt_pg_error(const lt_pg *pg);
/* Fails every pending collective; any thread. */
LT_API void lt_pg_abort(lt_pg *pg);

/* Synchronous conveniences. */
LT_API lt_status lt_pg_allreduce_sync(lt_pg *pg, void *buf, size_t count, lt_dtype t,
                                      lt_redop op);
LT_API lt_status lt_pg_broadcast_sync(lt_pg *pg, void *buf, size_t count, lt_dtype t, int root);

#ifdef __cplusplus
}
#endif
#endif
