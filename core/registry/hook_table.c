/* Hook metadata of every descriptor kind: name, offset, whether the loader
 * must see it set, and the core's default. The loader walks these tables to
 * adapt, inherit, default and check hooks without knowing any struct, and
 * config validation uses them to accept `[strategy] init_dist_connection = ...`.
 *
 * Every hook of every descriptor is listed, in declaration order;
 * test_registry (test_hook_tables) checks the lists against the structs. The tables are writable
 * only so lt_hooks_set_default can install defaults written elsewhere. */
#include <string.h>
#include "lt/lt.h"
#include "registry.h"
#include "hook_defaults.h"

#define HOOK(type, field, req, dflt) \
    { #field, offsetof(type, field), (req), (void (*)(void))(dflt) }
#define REQ(type, field) HOOK(type, field, true, NULL)
#define OPT(type, field, dflt) HOOK(type, field, false, dflt)

static lt_hook_info accelerator_hooks[] = {
    REQ(lt_accelerator_desc, is_available),
    REQ(lt_accelerator_desc, device_count),
    REQ(lt_accelerator_desc, setup),
    REQ(lt_accelerator_desc, teardown),
    REQ(lt_accelerator_desc, alloc),
    REQ(lt_accelerator_desc, free),
    REQ(lt_accelerator_desc, alloc_host),
    REQ(lt_accelerator_desc, free_host),
    REQ(lt_accelerator_desc, copy),
    REQ(lt_accelerator_desc, synchronize),
    REQ(lt_accelerator_desc, get_kernels),
    REQ(lt_accelerator_desc, memory_stats),
    OPT(lt_accelerator_desc, device_in_use, lt_default_accel_device_in_use),
    OPT(lt_accelerator_desc, device_name, lt_default_accel_device_name),
    OPT(lt_accelerator_desc, memory_is_host, NULL), /* NULL: device memory (dist/process_group.c) */
    OPT(lt_accelerator_desc, check_params, NULL),   /* NULL: setup judges (1.9) */
};

static lt_hook_info strategy_hooks[] = {
    REQ(lt_strategy_desc, launch_kind),
    OPT(lt_strategy_desc, batch_multiplier, NULL), /* the trainer's default */
    OPT(lt_strategy_desc, sampler_shard, NULL),    /* the trainer's default */
    REQ(lt_strategy_desc, setup_environment),
    REQ(lt_strategy_desc, init_dist_connection),
    REQ(lt_strategy_desc, configure_ddp),
    OPT(lt_strategy_desc, on_train_start, lt_default_strategy_on_train_start),
    OPT(lt_strategy_desc, on_train_end, lt_default_strategy_on_train_end),
    OPT(lt_strategy_desc, training_step, NULL),    /* the trainer's default */
    REQ(lt_strategy_desc, on_backward_start),
    REQ(lt_strategy_desc, on_grad_ready),
    REQ(lt_strategy_desc, before_optimizer_step),
    OPT(lt_strategy_desc, after_optimizer_step, lt_default_strategy_after_optimizer_step),
    REQ(lt_strategy_desc, reduce),
    REQ(lt_strategy_desc, all_gather),
    REQ(lt_strategy_desc, broadcast),
    REQ(lt_strategy_desc, barrier),
    REQ(lt_strategy_desc, teardown),
    OPT(lt_strategy_desc, eval_step, NULL),        /* the trainer's default (1.3) */
    OPT(lt_strategy_desc, optimizer_step, NULL),   /* the trainer's default (1.5) */
    OPT(lt_strategy_desc, check_params, NULL),     /* NULL: setup judges (1.9) */
};

static lt_hook_info precision_hooks[] = {
    REQ(lt_precision_desc, dtypes),
    REQ(lt_precision_desc, setup),
    REQ(lt_precision_desc, scale_loss),
    REQ(lt_precision_desc, unscale_and_check),
    REQ(lt_precision_desc, update),
    REQ(lt_precision_desc, save_state),
    REQ(lt_precision_desc, load_state),
    OPT(lt_precision_desc, teardown, NULL), /* NULL: nothing to free */
    OPT(lt_precision_desc, check_params, NULL), /* NULL: setup judges (1.9) */
};

static lt_hook_info environment_hooks[] = {
    REQ(lt_environment_desc, score),
    REQ(lt_environment_desc, creates_processes_externally),
    REQ(lt_environment_desc, main_address),
    REQ(lt_environment_desc, main_port),
    REQ(lt_environment_desc, world_size),
    REQ(lt_environment_desc, global_rank),
    REQ(lt_environment_desc, local_rank),
    REQ(lt_environment_desc, node_rank),
    OPT(lt_environment_desc, local_world_size, lt_default_env_local_world_size),
    OPT(lt_environment_desc, check_params, NULL), /* NULL: setup judges (1.9) */
};

static lt_hook_info backend_hooks[] = {
    REQ(lt_backend_desc, create),
    REQ(lt_backend_desc, destroy),
    REQ(lt_backend_desc, allreduce),
    REQ(lt_backend_desc, broadcast),
    REQ(lt_backend_desc, allgather),
    REQ(lt_backend_desc, reduce_scatter),
    REQ(lt_backend_desc, send),
    REQ(lt_backend_desc, recv),
    REQ(lt_backend_desc, barrier),
    REQ(lt_backend_desc, wait),
    REQ(lt_backend_desc, free_work),
    REQ(lt_backend_desc, abort),
    OPT(lt_backend_desc, supports, lt_default_backend_supports),
    OPT(lt_backend_desc, supports_memory, lt_default_backend_supports_memory),
    OPT(lt_backend_desc, mem_alloc, NULL), /* NULL: no group memory (lt_run_place_grads) */
    OPT(lt_backend_desc, mem_free, NULL),
    OPT(lt_backend_desc, check_params, NULL), /* NULL: setup judges (1.9) */
};

/* The trainer tests module hooks for NULL to know what a module offers
 * (no validation_step: validation is skipped), so none gets a default here. */
static lt_hook_info module_hooks[] = {
    REQ(lt_module_desc, init),
    REQ(lt_module_desc, training_step),
    OPT(lt_module_desc, validation_step, NULL),
    OPT(lt_module_desc, test_step, NULL),
    OPT(lt_module_desc, training_step_end, NULL),
    OPT(lt_module_desc, configure_optimizers, NULL),
    OPT(lt_module_desc, setup_data, NULL),
    OPT(lt_module_desc, on_train_epoch_start, NULL),
    OPT(lt_module_desc, on_train_epoch_end, NULL),
    OPT(lt_module_desc, on_validation_epoch_end, NULL),
    OPT(lt_module_desc, teardown, NULL),
};

#define KIND(hooks, type) { hooks, sizeof hooks / sizeof hooks[0], sizeof(type) }
static const struct {
    lt_hook_info *hooks;
    size_t count;
    size_t desc_size;
} kinds[LT_KIND_COUNT + 1] = {
    [LT_KIND_ACCELERATOR] = KIND(accelerator_hooks, lt_accelerator_desc),
    [LT_KIND_STRATEGY] = KIND(strategy_hooks, lt_strategy_desc),
    [LT_KIND_PRECISION] = KIND(precision_hooks, lt_precision_desc),
    [LT_KIND_ENVIRONMENT] = KIND(environment_hooks, lt_environment_desc),
    [LT_KIND_BACKEND] = KIND(backend_hooks, lt_backend_desc),
    [LT_KIND_MODULE] = KIND(module_hooks, lt_module_desc),
};

static bool kind_known(lt_kind kind) { return kind >= 1 && kind <= LT_KIND_COUNT; }

const lt_hook_info *lt_hooks_of(lt_kind kind, size_t *count) {
    if (!kind_known(kind)) {
        if (count) *count = 0;
        return NULL;
    }
    if (count) *count = kinds[kind].count;
    return kinds[kind].hooks;
}

size_t lt_desc_size(lt_kind kind) { return kind_known(kind) ? kinds[kind].desc_size : 0; }

void lt_hooks_set_default(lt_kind kind, const char *hook, void (*fn)(void)) {
    size_t n;
    lt_hook_info *h = (lt_hook_info *)lt_hooks_of(kind, &n);
    for (size_t i = 0; h && hook && i < n; i++)
        if (!strcmp(h[i].name, hook)) {
            h[i].dflt = fn;
            return;
        }
    lt_log(NULL, LT_LOG_ERROR, "lt_hooks_set_default: %s has no hook '%s'",
           lt_kind_name(kind) ? lt_kind_name(kind) : "unknown kind", hook ? hook : "(null)");
}
