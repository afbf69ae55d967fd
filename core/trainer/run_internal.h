/* The state of one worker process: the plugins in use, the model, the data,
 * the optimizer. `struct lt_run` is what strategy and precision plugins see
 * (opaquely) as lt_run; the trainer wraps it. */
#ifndef LT_RUN_INTERNAL_H
#define LT_RUN_INTERNAL_H

#include "lt/lt.h"
#include "lt/trainer.h"
#include "config/config.h"
#include "common/ctx.h"
#include "config/devices.h"
#include "registry/registry.h"
#include "nn/nn_internal.h"
#include "io/metrics.h"
#include "nn/optim.h"
#include "dist/launch.h"
#include "dist/process_group.h"
#include "options.h"

typedef struct lt_plugin {
    const lt_plugin_header *desc; /* resolved table */
    lt_ctx ctx;
    bool loaded;
} lt_plugin;

#define LT_ACC(r) ((const lt_accelerator_desc *)(r)->accel.desc)
#define LT_STRAT(r) ((const lt_strategy_desc *)(r)->strategy.desc)
#define LT_PREC(r) ((const lt_precision_desc *)(r)->precision.desc)
#define LT_ENV(r) ((const lt_environment_desc *)(r)->env.desc)
#define LT_MOD(r) ((const lt_module_desc *)(r)->module.desc)
#define LT_BACKEND(r) ((const lt_backend_desc *)(r)->backend.desc)

struct lt_run {
    lt_config *config;
    lt_registry *registry;
    lt_plugin accel, strategy, precision, env, module, backend;
    lt_plugin node_backend; /* auto across hosts: shm, which the hierarchical group runs
                               inside each node beside gloo (loaded to judge its values) */
    lt_launch_kind launch;
    lt_device_list devices;
    lt_world world;
    bool accel_ready;
    bool inputs_in_place;   /* the accelerator's memory is the host's (memory_is_host):
                               a step reads its batch where the loader put it */
    bool module_started;    /* the module's init was called: its teardown is owed, also
                               when init or a later setup step failed */

    /* model and step */
    lt_model *model;
    lt_step step;
    lt_precision_dtypes dtypes;
    uint64_t seed;

    /* distributed */
    lt_store *store;
    struct lt_store_server *store_server; /* rank 0 hosts it when no launcher does */
    lt_pg *default_pg;      /* the run's from lt_run_set_default_group on */
    lt_pg_mem placed_grads; /* lt_run_place_grads: the root's gradients in group memory */
    lt_param_view *param_views; /* lt_run_params, made on first use */
    size_t nparam_views;
    lt_bucket_view *buckets;    /* lt_run_set_buckets */
    size_t nbuckets;
    bool precision_started; /* precision setup was called: teardown is owed */
    bool strategy_started;  /* setup_environment was called: teardown is owed */
    lt_dist_options dist;   /* timeouts, from the trainer's options */
    int num_nodes;          /* trainer.num_nodes */

    /* optimization */
    lt_optim_config optim_cfg; /* after the module's configure_optimizers and lr scaling */
    lt_optimizer optim;
    uint64_t params_version; /* bumped whenever the root's parameters change (copied replicas) */
    uint64_t compute_version; /* mixed precision: the params_version the compute copy was cast from */
    uint64_t fused_version; /* a one-pass step wrote the compute copy of this version (0: none) */
    struct lt_replica_set *replicas; /* lt_run_replicate; NULL: the root alone */
    int64_t batch_size, val_batch_size; /* data.*: replicas need a sample each */
    int64_t accumulate;     /* trainer.accumulate_grad_batches (the tape's loss scale) */
    bool sync_grads;        /* this backward ends an accumulation window */
    bool backward_hook_failed; /* a strategy hook failed inside backward (message in error) */
    bool drop_metrics;      /* sanity-check validation: run, do not record */

    /* progress */
    int64_t epoch;          /* current (0-based) */
    int64_t global_step;    /* optimizer steps taken */
    bool first_step_logged; /* the debug line start-up benches read */
    int64_t batch_in_epoch; /* batches consumed in the current epoch (resume) */
    lt_metrics metrics;
    lt_status_slot *status_slot; /* progress for ltrun, or NULL */
    char error[2048];
};

/* trainer_worker.c: rank, world and main address from the environment plugin. */
lt_status lt_run_read_world(lt_run *r);
/* run_api.c */
void lt_run_register_defaults(void);
/* Whether the strategy's optimizer_step is the core's (lt_run_optimizer_step). */
bool lt_run_optimizer_step_is_default(lt_run *run);
/* The strategy's teardown (when owed), then the default group and the views. */
void lt_run_teardown_strategy(lt_run *r);
/* Frees the gradients lt_run_place_grads moved, before the model is freed. */
void lt_run_release_placed_grads(lt_run *run);
lt_status lt_run_fail(lt_run *r, lt_status st, const char *fmt, ...) LT_PRINTF(3, 4);
/* After a plugin hook failed: "<kind> '<name>': <hook> failed: <message>". */
lt_status lt_run_hook_failed(lt_run *r, const lt_plugin *p, const char *hook, lt_status st);
/* The module's training_step (then training_step_end when it has one) on
 * `step`: the default strategy training_step, and one replica's. */
lt_status lt_run_module_training_step(lt_run *r, lt_step *step, lt_tensor **loss);
/* The module's validation_step or test_step on `step`. */
lt_status lt_run_module_eval_step(lt_run *r, lt_step *step, lt_stage stage);

#endif
