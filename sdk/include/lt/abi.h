/* lt plugin ABI: the common header every plugin descriptor starts with, the
 * status codes, and the one exported entry point.
 *
 * Rules (see docs/architecture.md "The ABI"):
 *  - abi_major must equal the core's; abi_minor may be lower (older plugins are
 *    adapted: a hook added in a later minor is read only where LT_HAS says the
 *    plugin's struct is big enough to hold it).
 *  - Structs only ever grow at the end.
 *  - A descriptor with `base` set inherits every hook it leaves NULL from the
 *    named descriptor of the same kind; the loader resolves this once.
 */
#ifndef LT_ABI_H
#define LT_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LT_PLUGIN_MAGIC 0x3170544Cu /* "LTp1" little-endian */
#define LT_ABI_MAJOR 1
#define LT_ABI_MINOR 9
/* 1.1: lt_kernels gained the convolution and pooling kernels, accelerators
 *      the optional memory_is_host hook, lt_pg_options the main address.
 * 1.2: liblt gained keyed plugin state, lt_ctx_original, and the parameter
 *      and bucket views (lt_run_params, lt_run_buckets); lt_kernels the
 *      clamp kernel (gradient clipping by value).
 * 1.3: replicas (lt/replica.h) for dp and ddp2, the strategy's eval_step
 *      hook and the LT_LAUNCH_NODE launch kind.
 * 1.4: mixed precision: lt_run_master_grads, and precision dtypes whose
 *      param differs from compute (fp32 master weights, 16-bit compute).
 * 1.5: subgroups (lt_run_new_subgroup), the strategy's optimizer_step hook
 *      with lt_run_optimizer and lt_run_optimizer_step (bagua's qadam).
 * 1.6: GPUs: the backend's optional supports_memory hook (a group over
 *      device memory on a backend that takes host memory only is staged
 *      through pinned host buffers by the core), and the stream rule of
 *      accelerator.h (a device accelerator runs each thread's work on that
 *      thread's per-thread default stream).
 * 1.7: group memory: the backend's optional mem_alloc and mem_free hooks
 *      and lt_run_place_grads, so ddp's gradients live where the backend
 *      reduces them in place (shm: no copies through its slots).
 * 1.8: one pass for mixed precision's optimizer step: lt_kernels'
 *      sgd_step_mixed and lt_run_defer_unscale (the master gradients' cast
 *      and the compute copy's refresh folded into SGD); lt_parse_bool.
 * 1.9: check_params, an optional hook at the end of the accelerator,
 *      strategy, precision, environment and backend descriptors (see
 *      lt_param_spec), so a bad parameter value is refused by `ltrun
 *      --check` and before any worker starts. */

#if defined(__GNUC__)
#define LT_API __attribute__((visibility("default")))
#define LT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define LT_API
#define LT_PRINTF(f, a)
#endif

/* Status codes: 0 is success, every error is negative. Detail goes into the
 * context with lt_set_error(). */
typedef enum lt_status {
    LT_OK = 0,
    LT_ERR_INVALID = -1,     /* bad argument or bad input (config, data, message) */
    LT_ERR_NOMEM = -2,       /* allocation failed */
    LT_ERR_IO = -3,          /* file or socket failure */
    LT_ERR_NOT_FOUND = -4,   /* no such plugin, key, file, device */
    LT_ERR_ABI = -5,         /* plugin built for another ABI or malformed */
    LT_ERR_UNSUPPORTED = -6, /* valid request this component does not do (dtype, op) */
    LT_ERR_TIMEOUT = -7,     /* a wait or collective passed its deadline */
    LT_ERR_MISMATCH = -8,    /* ranks disagree (collective order, shapes, config) */
    LT_ERR_ABORTED = -9,     /* the group was aborted (peer died, user signal) */
    LT_ERR_NUMERIC = -10,    /* inf/nan where a finite value is required */
    LT_ERR_CORRUPT = -11,    /* truncated or corrupt data file or checkpoint */
    LT_ERR_STATE = -12,      /* called in the wrong order */
    LT_ERR_PLUGIN = -13,     /* a plugin hook failed; its message says why */
} lt_status;

LT_API const char *lt_status_str(lt_status s);

typedef enum lt_kind {
    LT_KIND_ACCELERATOR = 1,
    LT_KIND_STRATEGY = 2,
    LT_KIND_PRECISION = 3,
    LT_KIND_ENVIRONMENT = 4,
    LT_KIND_BACKEND = 5,
    LT_KIND_MODULE = 6,
} lt_kind;
#define LT_KIND_COUNT 6

/* "accelerator", "strategy", ... ; NULL for an unknown kind. */
LT_API const char *lt_kind_name(uint32_t kind);

/* A typed parameter a plugin reads from its config section. Listed by
 * `ltrun --help-plugin NAME`; keys not listed are rejected with a suggestion. */
typedef enum lt_param_type {
    LT_PARAM_INT = 1,
    LT_PARAM_FLOAT = 2,
    LT_PARAM_BOOL = 3,
    LT_PARAM_STRING = 4,
} lt_param_type;

typedef struct lt_param_spec {
    const char *name;   /* key in [<kind>] or [<kind>.<name>] */
    uint32_t type;      /* lt_param_type */
    const char *def;    /* default, as text ("25", "true", "fp16"); NULL = none */
    const char *help;   /* one line */
} lt_param_spec;        /* arrays end with an entry whose name is NULL */

/* The core checks each value against its type (an int that does not parse
 * is refused at load). Which values a plugin accepts beyond that (a name
 * among several, a range) its own setup judges, and, since ABI 1.9, its
 * optional check_params hook, the last member of the accelerator,
 * strategy, precision, environment and backend descriptors:
 *
 *     lt_status (*check_params)(lt_ctx *ctx);
 *
 * Called by the core when it builds a trainer (lt_trainer_new: `ltrun
 * --check`, ltrun before it starts any worker, and every worker), on that
 * thread, once every plugin is loaded and the config complete, before
 * setup and every later hook (only the probes that pick the plugins ran
 * before it: is_available, device_count, launch_kind, an environment's
 * score and world queries); also for a plugin only a config section names
 * ([backend.gloo] while another backend runs), through a ctx whose
 * lt_param_* read that section alone. ctx has the config and nothing else: the hook
 * reads its parameters (lt_param_str, ...), keeps nothing, starts nothing
 * and touches no device. It returns LT_OK, or LT_ERR_INVALID with
 * lt_set_error naming the key, the value and the values that would do, the
 * message the user then sees once instead of once per rank. A hook that
 * depends on the world or the device (a CPU feature, an even world size)
 * stays with setup. Inherited through `base` like any hook; an override
 * that adds keys calls (*super)->check_params first. Default: nothing
 * judged before setup. */

typedef struct lt_plugin_header {
    uint32_t magic;          /* LT_PLUGIN_MAGIC */
    uint16_t abi_major;      /* LT_ABI_MAJOR the plugin was built with */
    uint16_t abi_minor;      /* LT_ABI_MINOR the plugin was built with */
    uint32_t struct_size;    /* sizeof the whole descriptor, as built */
    uint32_t kind;           /* lt_kind */
    const char *name;        /* "ddp"; must match the file name */
    const char *base;        /* NULL, or the descriptor this one inherits from */
    const char *version;     /* the plugin's own version string */
    const char *description; /* one line for --list-plugins; may be NULL */
    const lt_param_spec *params; /* NULL or a NULL-name-terminated array */
    /* NULL, or where the loader stores the parent's resolved table (same kind)
     * when `base` is set, before any hook runs, so an override can call the
     * original: (*super)->hook(...). */
    const void **super;
} lt_plugin_header;

/* Fill a header in a static descriptor:
 *   static const lt_strategy_desc my = { LT_HEADER(LT_KIND_STRATEGY, lt_strategy_desc,
 *        "mine", "ddp", "0.1", "ddp with my rendezvous", NULL, &super), .init_dist_connection = f };
 *   where `static const lt_strategy_desc *super;` receives ddp's resolved table.
 */
#define LT_HEADER(kind_, type_, name_, base_, version_, descr_, params_, super_)      \
    .hdr = { LT_PLUGIN_MAGIC, LT_ABI_MAJOR, LT_ABI_MINOR, (uint32_t)sizeof(type_),     \
             (uint32_t)(kind_), (name_), (base_), (version_), (descr_), (params_),     \
             (const void **)(super_) }

/* True when a descriptor built against an older minor has room for `hook`.
 * The loader uses it while adapting; resolved tables are always full size. */
#define LT_HAS(desc, hook)                                                             \
    (offsetof(__typeof__(*(desc)), hook) + sizeof((desc)->hook) <= (desc)->hdr.struct_size)

/* The one symbol a plugin .so exports: a NULL-terminated array of descriptors
 * (one .so may carry several, of several kinds). Called once, on the loading
 * thread, right after dlopen. */
typedef const lt_plugin_header *const *(*lt_plugin_entry_fn)(void);
#define LT_PLUGIN_ENTRY_SYMBOL "lt_plugin_entry_v1"

/* Generates the exported entry point:  LT_PLUGIN_EXPORT(&my_strategy.hdr, &my_env.hdr) */
#define LT_PLUGIN_EXPORT(...)                                                          \
    LT_API const lt_plugin_header *const *lt_plugin_entry_v1(void);                    \
    LT_API const lt_plugin_header *const *lt_plugin_entry_v1(void) {                   \
        static const lt_plugin_header *const list_[] = { __VA_ARGS__, NULL };          \
        return list_;                                                                  \
    }

#ifdef __cplusplus
}
#endif
#endif
