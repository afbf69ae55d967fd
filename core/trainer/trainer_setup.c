/* lt_trainer_new: resolves the config (defaults < INI < env < flags), picks and
 * loads every plugin it names, declares their parameters, and validates. */
#define _GNU_SOURCE
#include <ctype.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "trainer_internal.h"
#include "launch_info.h"

extern char **environ;

lt_status lt_run_fail(lt_run *r, lt_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
    /* Plugins that called into the core forward lt_last_error(). */
    lt_set_error(NULL, "%s", r->error);
    return st;
}

lt_status lt_run_hook_failed(lt_run *r, const lt_plugin *p, const char *hook, lt_status st) {
    const char *msg = lt_last_error(&p->ctx);
    return lt_run_fail(r, st, "%s '%s': %s failed: %s", lt_kind_name(p->ctx.kind), p->ctx.name,
                       hook, *msg ? msg : lt_status_str(st));
}

/* The config section a plugin's parameters live in besides [<kind>.<name>]. */
static const char *kind_section(lt_kind kind) {
    return kind == LT_KIND_MODULE ? "model" : lt_kind_name(kind);
}

static lt_status declare_params(lt_run *r, lt_kind kind, const lt_plugin_header *d, bool selected) {
    char sec[160];
    snprintf(sec, sizeof sec, "%s.%s", lt_kind_name(kind), d->name);
    for (char *c = sec; *c; c++) *c = (char)tolower((unsigned char)*c);
    LT_CHECK(lt_config_declare_section(r->config, sec, false));
    for (const lt_param_spec *p = d->params; p && p->name; p++) {
        LT_CHECK(lt_config_declare(r->config, sec, p->name, (lt_param_type)p->type, p->def, p->help));
        if (selected)
            LT_CHECK(lt_config_declare(r->config, kind_section(kind), p->name, (lt_param_type)p->type, p->def, p->help));
    }
    return LT_OK;
}

typedef struct name_list {
    char buf[1024];
    size_t len;
} name_list;

static void add_name(void *user, const char *name) {
    name_list *l = user;
    if (l->len < sizeof l->buf)
        l->len += (size_t)snprintf(l->buf + l->len, sizeof l->buf - l->len, "%s%s",
                                   l->len ? ", " : "", name);
}

/* An empty name (--strategy "") would reach the registry as a missing
 * argument; say what the key holds and which names there are instead.
 * origin_key is "section.key" (trainer.strategy, environment.name ...). */
static lt_status empty_name(lt_run *r, lt_kind kind, const char *origin_key) {
    char sec[64];
    const char *key = strrchr(origin_key, '.');
    snprintf(sec, sizeof sec, "%.*s", key ? (int)(key - origin_key) : 0, origin_key);
    const char *origin = key ? lt_config_origin(r->config, sec, key + 1) : NULL;
    name_list l = {.len = 0};
    lt_registry_each_name(r->registry, kind, add_name, &l);
    return lt_run_fail(r, LT_ERR_INVALID, "%s = '' (%s) is empty; use %s%s%s (ltrun --list-plugins "
                       "shows what is installed)", origin_key, origin ? origin : "?",
                       kind == LT_KIND_PRECISION ? "" : "auto or ",
                       l.len ? "one of " : "the name of an installed plugin",
                       l.len ? l.buf : "");
}

static lt_status load_plugin(lt_run *r, lt_plugin *p, lt_kind kind, const char *spec,
                             const char *origin_key) {
    char err[1536];
    const lt_plugin_header *d;
    if (!*spec) return empty_name(r, kind, origin_key);
    lt_status st = lt_registry_load(r->registry, kind, spec, &d, err, sizeof err);
    if (st != LT_OK) return lt_run_fail(r, st, "%s: %s", origin_key, err);
    lt_ctx_init(&p->ctx, kind, d->name, d, r->config);
    p->ctx.owner = r;
    p->desc = d;
    p->loaded = true;
    return declare_params(r, kind, d, true);
}

/* Hooks set in [<kind>] as "path:symbol" replace the loaded table's hook. */
typedef struct override_visit {
    lt_run *r;
    lt_plugin *p;
    lt_kind kind;
    lt_status st;
} override_visit;

static void visit_override(void *user, const char *key, const char *value, const char *origin) {
    override_visit *v = user;
    if (v->st != LT_OK) return;
    size_t n;
    const lt_hook_info *hooks = lt_hooks_of(v->kind, &n);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(hooks[i].name, key)) continue;
        char err[1024];
        const lt_plugin_header *d;
        v->st = lt_registry_override_hook(v->r->registry, v->kind, v->p->desc, key, value, &d, err, sizeof err);
        if (v->st != LT_OK) {
            lt_run_fail(v->r, v->st, "%s.%s = '%s' (%s): %s", lt_kind_name(v->kind), key, value, origin, err);
            return;
        }
        v->p->desc = d;
        v->p->ctx.desc = d;
        v->p->ctx.overrides = lt_registry_override_record(v->r->registry, d);
        lt_log(NULL, LT_LOG_INFO, "%s '%s': hook %s taken from %s", lt_kind_name(v->kind), v->p->ctx.name, key, value);
    }
}

static lt_status apply_overrides(lt_run *r, lt_plugin *p, lt_kind kind) {
    override_visit v = {r, p, kind, LT_OK};
    lt_config_each(r->config, lt_kind_name(kind), visit_override, &v);
    return v.st;
}

static void declare_hooks(lt_run *r) {
    for (int k = 1; k <= LT_KIND_COUNT; k++) {
        if (k == LT_KIND_MODULE) continue;
        size_t n;
        const lt_hook_info *hooks = lt_hooks_of((lt_kind)k, &n);
        for (size_t i = 0; i < n; i++)
            lt_config_declare(r->config, lt_kind_name((lt_kind)k), hooks[i].name, LT_PARAM_STRING, NULL,
                              "replace this hook: path/to/lib.so:symbol");
    }
}

static const char *cfg(const lt_run *r, const char *sec, const char *key) {
    const char *v = lt_config_value(r->config, sec, key);
    return v ? v : "";
}

static lt_status pick_accelerator(lt_run *r) {
    const char *name = cfg(r, "trainer", "accelerator");
    if (!strcasecmp(name, "cuda")) name = "gpu";
    if (strcasecmp(name, "auto")) return load_plugin(r, &r->accel, LT_KIND_ACCELERATOR, name, "trainer.accelerator");
    /* auto: gpu when its plugin loads and finds a device, else cpu. */
    const lt_plugin_header *d;
    char err[512];
    if (lt_registry_load(r->registry, LT_KIND_ACCELERATOR, "gpu", &d, err, sizeof err) == LT_OK) {
        lt_ctx c;
        lt_ctx_init(&c, LT_KIND_ACCELERATOR, "gpu", d, r->config);
        bool avail = false;
        int count = 0;
        const lt_accelerator_desc *a = (const lt_accelerator_desc *)d;
        lt_clear_error();
        if (a->is_available(&c, &avail) == LT_OK && avail && a->device_count(&c, &count) == LT_OK && count > 0)
            return load_plugin(r, &r->accel, LT_KIND_ACCELERATOR, "gpu", "trainer.accelerator");
        const char *why = lt_last_error(&c);
        lt_log(NULL, LT_LOG_DEBUG, "trainer.accelerator = auto: gpu not available (%s); cpu", why && *why ? why : "no device");
    } else {
        lt_log(NULL, LT_LOG_DEBUG, "trainer.accelerator = auto: no gpu plugin (%s); cpu", err);
    }
    return load_plugin(r, &r->accel, LT_KIND_ACCELERATOR, "cpu", "trainer.accelerator");
}

/* Lightning's auto_select_gpus: trainer.devices = k picks the first k
 * devices the accelerator says no other process uses (device_in_use; NVML
 * on gpu). A launcher passes the list it chose to its workers as --devices
 * (launch_info.devices), so they never choose again while their peers
 * already hold GPUs. */
static lt_status auto_select(lt_run *r, int available) {
    bool on = false;
    lt_config_bool(r->config, "trainer", "auto_select_gpus", &on, NULL, 0);
    if (!on) return LT_OK;
    const char *spec = cfg(r, "trainer", "devices");
    char *end;
    long k = strtol(spec, &end, 10);
    if (!strcasecmp(r->accel.ctx.name, "cpu") || *end || k < 1)
        return lt_run_fail(r, LT_ERR_INVALID, "trainer.auto_select_gpus = true picks which devices of an accelerator "
                           "with devices (not cpu) to use: give trainer.devices as a count k, not '%s' (%s) on %s",
                           spec, lt_config_origin(r->config, "trainer", "devices"), r->accel.ctx.name);
    int chosen = 0;
    char busy[512] = "", ids[512] = "";
    size_t nb = 0, ni = 0;
    for (int d = 0; d < available && chosen < k; d++) {
        bool used = false;
        lt_status st = LT_ACC(r)->device_in_use(&r->accel.ctx, d, &used);
        if (st != LT_OK) return lt_run_hook_failed(r, &r->accel, "device_in_use", st);
        if (used) {
            if (nb < sizeof busy) nb += (size_t)snprintf(busy + nb, sizeof busy - nb, "%s%d", nb ? ", " : "", d);
            continue;
        }
        r->devices.ids[chosen++] = d;
        if (ni < sizeof ids) ni += (size_t)snprintf(ids + ni, sizeof ids - ni, "%s%d", ni ? ", " : "", d);
    }
    if (chosen < k)
        return lt_run_fail(r, LT_ERR_NOT_FOUND, "trainer.auto_select_gpus: %ld device%s asked (trainer.devices), %d of "
                           "%d free (in use by other processes: %s); lower trainer.devices or wait for a device",
                           k, k == 1 ? "" : "s", chosen, available, nb ? busy : "none");
    r->devices.count = chosen;
    lt_log(NULL, LT_LOG_INFO, "auto_select_gpus: devices [%s]%s%s%s", ids, nb ? " (in use by other processes: " : "",
           busy, nb ? ")" : "");
    return LT_OK;
}

static lt_status pick_devices(lt_run *r) {
    const lt_accelerator_desc *a = LT_ACC(r);
    bool avail = false;
    int count = 0;
    lt_clear_error(); /* what is_available sets is the reason, nothing older */
    lt_status st = a->is_available(&r->accel.ctx, &avail);
    if (st == LT_OK) st = a->device_count(&r->accel.ctx, &count);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->accel, "device_count", st);
    if (!avail) { /* the plugin may say why (no driver, no device, driver too old) */
        const char *why = lt_last_error(&r->accel.ctx);
        return lt_run_fail(r, LT_ERR_NOT_FOUND, "trainer.accelerator = %s (%s): no usable device on this machine%s%s; use "
                           "accelerator=cpu or auto", r->accel.ctx.name,
                           lt_config_origin(r->config, "trainer", "accelerator"), why && *why ? ": " : "", why ? why : "");
    }
    char err[512];
    st = lt_devices_parse(cfg(r, "trainer", "devices"), r->accel.ctx.name, count, &r->devices, err, sizeof err);
    if (st != LT_OK)
        return lt_run_fail(r, st, "trainer.devices (%s): %s", lt_config_origin(r->config, "trainer", "devices"), err);
    return auto_select(r, count);
}

static lt_status pick_precision(lt_run *r) {
    const char *p = cfg(r, "trainer", "precision");
    static const struct { const char *alias, *name; } map[] = {
        {"32", "32-true"}, {"64", "64-true"}, {"16", "16-mixed"}, {"bf16", "bf16-mixed"},
        {"double", "64-true"}, {"float", "32-true"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcasecmp(p, map[i].alias)) p = map[i].name;
    char err[1536];
    const lt_plugin_header *d;
    if (lt_registry_load(r->registry, LT_KIND_PRECISION, p, &d, err, sizeof err) == LT_ERR_NOT_FOUND)
        return lt_run_fail(r, LT_ERR_NOT_FOUND, "trainer.precision = '%s' (%s) is not a precision: use 32-true, 64-true, 16-mixed, bf16-mixed, 16-true or bf16-true "
                           "(Lightning's 32, 64, 16 = 16-mixed and bf16 = bf16-mixed work too), or a plugin installed under that name: %s",
                           p, lt_config_origin(r->config, "trainer", "precision"), err);
    return load_plugin(r, &r->precision, LT_KIND_PRECISION, p, "trainer.precision");
}

static lt_status pick_strategy(lt_run *r) {
    const char *s = cfg(r, "trainer", "strategy");
    int64_t nodes = 1;
    lt_config_int(r->config, "trainer", "num_nodes", &nodes, NULL, 0);
    bool elastic = *cfg(r, "launcher", "nnodes"); /* --nnodes MIN:MAX: several nodes, maybe */
    if (!strcasecmp(s, "auto")) s = (r->devices.count > 1 || nodes > 1 || elastic) ? "ddp" : "single_device";
    LT_CHECK(load_plugin(r, &r->strategy, LT_KIND_STRATEGY, s, "trainer.strategy"));
    /* Asked after the path:symbol overrides, so launch_kind can be one. */
    LT_CHECK(apply_overrides(r, &r->strategy, LT_KIND_STRATEGY));
    lt_status st = LT_STRAT(r)->launch_kind(&r->strategy.ctx, &r->launch);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->strategy, "launch_kind", st);
    return LT_OK;
}

/* Environments are chosen by score unless named, like Lightning's plugins:
 * every environment plugin in the search path is asked (a third party's
 * too); a file that does not load is passed over (--list-plugins says why).
 * Ties go to the name met first (search order, then alphabetical). */
typedef struct env_vote {
    lt_run *r;
    char best[128];
    int best_score;
} env_vote;

static void score_environment(void *user, const char *name) {
    env_vote *v = user;
    const lt_plugin_header *d;
    char err[512];
    if (lt_registry_load(v->r->registry, LT_KIND_ENVIRONMENT, name, &d, err, sizeof err) != LT_OK) {
        lt_log(NULL, LT_LOG_DEBUG, "environment '%s' passed over: %s", name, err);
        return;
    }
    lt_ctx c;
    lt_ctx_init(&c, LT_KIND_ENVIRONMENT, d->name, d, v->r->config);
    int score = 0;
    if (((const lt_environment_desc *)d)->score(&c, &score) != LT_OK) return;
    lt_log(NULL, LT_LOG_DEBUG, "environment '%s' scores %d", d->name, score);
    if (score > v->best_score) {
        snprintf(v->best, sizeof v->best, "%s", name);
        v->best_score = score;
    }
}

static lt_status pick_environment(lt_run *r) {
    const char *e = cfg(r, "environment", "name");
    if (strcasecmp(e, "auto")) return load_plugin(r, &r->env, LT_KIND_ENVIRONMENT, e, "environment.name");
    env_vote v = {.r = r};
    lt_registry_each_name(r->registry, LT_KIND_ENVIRONMENT, score_environment, &v);
    if (!v.best[0])
        return lt_run_fail(r, LT_ERR_NOT_FOUND, "environment.name = auto: no environment plugin is installed or none applies; "
                           "check --plugin-dir (ltrun --list-plugins) or name one, e.g. environment.name=lightning");
    LT_CHECK(load_plugin(r, &r->env, LT_KIND_ENVIRONMENT, v.best, "environment.name (auto)"));
    lt_log(NULL, LT_LOG_DEBUG, "environment '%s' chosen (score %d)", v.best, v.best_score);
    return LT_OK;
}

/* A strategy that launches nothing (single_device, dp) is one process for
 * the whole job. single_device drives one device on one node; and a
 * launcher's environment that reports more processes (torchrun
 * --nproc-per-node 2 with the default devices=1 makes strategy auto pick
 * single_device) would have every rank train alone and write the same
 * files, so it is refused, as Lightning's validate_settings refuses a world
 * size that disagrees with devices x num_nodes. Garbage in the launcher's
 * variables (RANK=abc) is refused here too, by the hooks that read them. */
static lt_status check_one_process(lt_run *r) {
    if (r->launch != LT_LAUNCH_NONE) return LT_OK;
    int64_t nodes = 1;
    lt_config_int(r->config, "trainer", "num_nodes", &nodes, NULL, 0);
    const char *s = r->strategy.ctx.name;
    /* devices = auto (every GPU of the node) is not a request for several:
     * single_device takes the first, as it always has. */
    bool asked = lt_config_source_of(r->config, "trainer", "devices") != LT_SRC_DEFAULT;
    if (!strcasecmp(s, "single_device") && ((asked && r->devices.count > 1) || nodes > 1))
        return lt_run_fail(r, LT_ERR_MISMATCH,
                           "strategy single_device runs one process on one device, but trainer.devices = %s "
                           "(%s) gives %d and trainer.num_nodes = %lld (%s); set devices=1 and num_nodes=1, "
                           "or use strategy ddp", cfg(r, "trainer", "devices"),
                           lt_config_origin(r->config, "trainer", "devices"), r->devices.count,
                           (long long)nodes, lt_config_origin(r->config, "trainer", "num_nodes"));
    const lt_environment_desc *e = LT_ENV(r);
    int world = 1, rank = 0;
    lt_status st = e->world_size(&r->env.ctx, &world);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->env, "world_size", st);
    st = e->global_rank(&r->env.ctx, &rank);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->env, "global_rank", st);
    if (world > 1)
        return lt_run_fail(r, LT_ERR_MISMATCH,
                           "the environment (%s, from the launcher's variables) reports %d processes (this "
                           "one rank %d), but strategy '%s' runs the whole job in one process; use strategy "
                           "ddp with num_nodes x devices = %d (torchrun --nproc-per-node N: --devices N), "
                           "or start one process (in a SLURM or MPI allocation that did not start it: "
                           "environment.name=lightning)",
                           r->env.ctx.name, world, rank, s, world);
    return LT_OK;
}

/* Whether every rank of the job runs on this host: the environment's word
 * when it has one (torchrun, srun and mpirun set world and local sizes),
 * else trainer.num_nodes. */
static bool one_host(lt_run *r) {
    const lt_environment_desc *e = LT_ENV(r);
    int world = 0, local = 0;
    if (e && e->world_size(&r->env.ctx, &world) == LT_OK && e->local_world_size &&
        e->local_world_size(&r->env.ctx, &local) == LT_OK && world > 1 && local > 0)
        return world == local;
    int64_t nodes = 1; /* (r->num_nodes is read later, with the options) */
    lt_config_int(r->config, "trainer", "num_nodes", &nodes, NULL, 0);
    return nodes <= 1;
}

/* How many ranks share a host: the environment's word when it has one,
 * else what ltrun would start on each node (ddp2: one process per node). */
static int ranks_per_host(lt_run *r) {
    const lt_environment_desc *e = LT_ENV(r);
    int world = 0, local = 0;
    if (e && e->world_size(&r->env.ctx, &world) == LT_OK && e->local_world_size &&
        e->local_world_size(&r->env.ctx, &local) == LT_OK && world > 1 && local > 0)
        return local;
    return r->launch == LT_LAUNCH_NODE ? 1 : r->devices.count;
}

/* One process for the job (single_device, dp) creates no process group, but
 * a backend it names must still be one that loads: a typo (mpi for gloo)
 * would pass unseen until the first run with more processes. Loaded to be
 * judged only: not the run's backend, its parameters not declared. One of
 * lt's own backends that this build or install lacks (nccl without NCCL) is
 * no typo: a config meant for several GPUs still trains on one. */
static lt_status check_unused_backend(lt_run *r, const char *b) {
    if (!strcasecmp(b, "auto")) return LT_OK;
    if (!*b) return empty_name(r, LT_KIND_BACKEND, "strategy.process_group_backend");
    char err[1536];
    const lt_plugin_header *d;
    lt_status st = lt_registry_load(r->registry, LT_KIND_BACKEND, b, &d, err, sizeof err);
    bool own = !strcasecmp(b, "gloo") || !strcasecmp(b, "nccl") || !strcasecmp(b, "shm");
    if (st == LT_ERR_NOT_FOUND && own) {
        lt_log(NULL, LT_LOG_DEBUG, "strategy.process_group_backend = %s: not installed here, and "
               "unused: strategy '%s' runs one process", b, r->strategy.ctx.name);
        return LT_OK;
    }
    if (st != LT_OK)
        return lt_run_fail(r, st, "strategy.process_group_backend = '%s' (%s), unused by this "
                           "one-process run but judged for the next: %s", b,
                           lt_config_origin(r->config, "strategy", "process_group_backend"), err);
    lt_log(NULL, LT_LOG_DEBUG, "strategy.process_group_backend = %s: unused, strategy '%s' runs "
           "one process", b, r->strategy.ctx.name);
    return LT_OK;
}

/* process_group_backend = auto picks the transport by topology, as NCCL
 * does: on cpu, shared memory when every rank is on this host (no socket
 * copies through the kernel), gloo when the job spans hosts; nccl on gpu.
 * Across hosts with several ranks on each, lt_run_new_group makes a
 * hierarchical group that runs shm inside each node (run_groups.c), so shm
 * is loaded beside gloo: its parameters are declared in [backend] and its
 * check_params judges them, as gloo's judges gloo's. */
static lt_status pick_backend(lt_run *r) {
    const char *b = cfg(r, "strategy", "process_group_backend");
    if (r->launch == LT_LAUNCH_NONE) return check_unused_backend(r, b);
    bool hier = false;
    if (!strcasecmp(b, "auto")) {
        b = !strcasecmp(r->accel.ctx.name, "gpu") ? "nccl" : one_host(r) ? "shm" : "gloo";
        hier = !strcasecmp(b, "gloo") && ranks_per_host(r) > 1;
        lt_log(NULL, LT_LOG_DEBUG, "strategy.process_group_backend = auto: %s (%s)", b,
               !strcasecmp(b, "shm") ? "every rank on this host" : !strcasecmp(b, "gloo") ? "ranks on several hosts" : "gpu");
    }
    LT_CHECK(load_plugin(r, &r->backend, LT_KIND_BACKEND, b, "strategy.process_group_backend"));
    if (!hier) return LT_OK;
    return load_plugin(r, &r->node_backend, LT_KIND_BACKEND, "shm",
                       "strategy.process_group_backend (auto: shm inside each node)");
}

/* Sections like [strategy.ddp] name a plugin: it must exist even when another
 * one is in use, so a typo is caught before a long run. */
typedef struct named_plugin {
    lt_kind kind;
    const lt_plugin_header *d;
} named_plugin;

typedef struct section_visit {
    lt_run *r;
    lt_status st;
    int n; /* the plugins named by a section alone, for their check_params */
    named_plugin named[64]; /* more than every plugin lt ships, with room for third parties' */
} section_visit;

static void visit_section(void *user, const char *section) {
    section_visit *v = user;
    if (v->st != LT_OK) return;
    const char *dot = strchr(section, '.');
    if (!dot) return;
    char kind_name[32];
    size_t n = (size_t)(dot - section);
    if (n >= sizeof kind_name) return;
    memcpy(kind_name, section, n);
    kind_name[n] = 0;
    lt_kind kind = 0;
    for (int k = 1; k <= LT_KIND_COUNT; k++)
        if (!strcmp(lt_kind_name((lt_kind)k), kind_name)) kind = (lt_kind)k;
    if (!kind) return; /* validate reports an unknown section */
    const lt_plugin_header *d;
    char err[1024];
    lt_status st = lt_registry_load(v->r->registry, kind, dot + 1, &d, err, sizeof err);
    if (st != LT_OK) {
        v->st = lt_run_fail(v->r, st, "config section [%s]: %s", section, err);
        return;
    }
    v->st = declare_params(v->r, kind, d, false);
    if (v->st != LT_OK) return;
    if (v->n == (int)(sizeof v->named / sizeof v->named[0])) { /* none goes unjudged */
        v->st = lt_run_fail(v->r, LT_ERR_INVALID, "config section [%s]: more than %d sections "
                            "name plugins that do not run; remove the ones this job does not use",
                            section, v->n);
        return;
    }
    v->named[v->n++] = (named_plugin){kind, d};
}

static lt_status load_config(lt_run *r, const lt_trainer_args *a) {
    char err[1024];
    r->config = lt_config_new();
    if (!r->config) return lt_run_fail(r, LT_ERR_NOMEM, "out of memory");
    lt_status st = LT_OK;
    if (a->config_path) st = lt_config_load_ini(r->config, a->config_path, err, sizeof err);
    if (st == LT_OK && !a->ignore_env) st = lt_config_load_env(r->config, environ, err, sizeof err);
    for (int i = 0; st == LT_OK && i < a->nsets; i++)
        st = lt_config_set_arg(r->config, a->sets[i], a->set_origins ? a->set_origins[i] : "--set", err, sizeof err);
    if (st != LT_OK) return lt_run_fail(r, st, "%s", err);
    return LT_OK;
}

/* A plugin directory the user named must exist: a typo would otherwise show
 * up later as "plugin not found", or never (when the install directory has
 * the plugins too). `what` names the setting. LT_PLUGIN_PATH entries are
 * judged the same way by the registry; only the install directory may be
 * missing. */
static lt_status add_plugin_dir(lt_run *r, const char *dir, const char *what) {
    lt_status st = lt_registry_add_dir(r->registry, dir);
    if (st == LT_OK) return LT_OK;
    if (st == LT_ERR_NOMEM) return lt_run_fail(r, st, "out of memory");
    const char *why = lt_registry_dir_problem(dir);
    return lt_run_fail(r, st, "%s: %s; name an existing directory of liblt-<kind>-<name>.so plugins",
                       what, why ? why : "not usable");
}

static lt_status setup_registry(lt_run *r, const lt_trainer_args *a) {
    r->registry = lt_registry_new();
    if (!r->registry) return lt_run_fail(r, LT_ERR_NOMEM, "out of memory");
    char what[1400];
    for (int i = 0; i < a->nplugin_dirs; i++) {
        snprintf(what, sizeof what, "--plugin-dir '%.1024s'", a->plugin_dirs[i]);
        LT_CHECK(add_plugin_dir(r, a->plugin_dirs[i], what));
    }
    const char *d = lt_config_value(r->config, "trainer", "plugin_dir");
    if (d && *d) {
        snprintf(what, sizeof what, "trainer.plugin_dir = '%.1024s' (%.300s)", d,
                 lt_config_origin(r->config, "trainer", "plugin_dir"));
        LT_CHECK(add_plugin_dir(r, d, what));
    }
    char err[1400];
    lt_status st = lt_registry_add_default_dirs(r->registry, err, sizeof err);
    return st == LT_OK ? LT_OK : lt_run_fail(r, st, "%s", err);
}

static void make_summary(lt_trainer *t) {
    lt_run *r = &t->run;
    int n = snprintf(t->summary, sizeof t->summary,
                     "accelerator %s (%d device%s), strategy %s, precision %s, environment %s",
                     r->accel.ctx.name, r->devices.count, r->devices.count == 1 ? "" : "s",
                     r->strategy.ctx.name, r->precision.ctx.name, r->env.ctx.name);
    if (r->backend.loaded && n < (int)sizeof t->summary)
        n += snprintf(t->summary + n, sizeof t->summary - n, ", backend %s", r->backend.ctx.name);
    if (r->node_backend.loaded && n < (int)sizeof t->summary)
        n += snprintf(t->summary + n, sizeof t->summary - n, " (%s inside each node)",
                      r->node_backend.ctx.name);
    if (r->module.loaded && n < (int)sizeof t->summary)
        snprintf(t->summary + n, sizeof t->summary - n, ", model %s", r->module.ctx.name);
}

/* What ltrun and ddp_spawn need to start workers, read with the rest of the
 * options in lt_trainer_new. */
static void read_launch_info(lt_trainer *t) {
    const lt_run *r = &t->run;
    lt_launch_info *out = &t->launch_info;
    memset(out, 0, sizeof *out);
    out->nproc_per_node = r->devices.count;
    out->num_nodes = t->opt.loop.num_nodes;
    int64_t v = 0;
    lt_config_int(r->config, "launcher", "node_rank", &v, NULL, 0);
    out->node_rank = (int)v;
    v = 0;
    lt_config_int(r->config, "launcher", "master_port", &v, NULL, 0);
    out->master_port = (int)v;
    v = 0;
    lt_config_int(r->config, "launcher", "max_restarts", &v, NULL, 0);
    out->max_restarts = (int)v;
    out->rdzv_timeout_s = (int)t->opt.dist.rdzv_timeout_s;
    snprintf(out->master_addr, sizeof out->master_addr, "%s", cfg(r, "launcher", "master_addr"));
    snprintf(out->seed, sizeof out->seed, "%s", t->opt.loop.seed);
    out->bind_cores = true;
    lt_config_bool(r->config, "launcher", "bind_cores", &out->bind_cores, NULL, 0);
    snprintf(out->ckpt_dir, sizeof out->ckpt_dir, "%s", t->opt.ckpt.dir);
    snprintf(out->rdzv_id, sizeof out->rdzv_id, "%s", cfg(r, "launcher", "rdzv_id"));
    v = 0;
    lt_config_int(r->config, "launcher", "join_timeout_s", &v, NULL, 0);
    out->join_timeout_s = (int)v;
    v = 0;
    lt_config_int(r->config, "launcher", "last_call_s", &v, NULL, 0);
    out->last_call_s = (int)v;
    v = 0;
    lt_config_int(r->config, "launcher", "keepalive_timeout_s", &v, NULL, 0);
    out->keepalive_s = (int)v;
    out->batch_size = (int)t->opt.data.batch_size;
    out->accumulate = (int)t->opt.loop.accumulate;
    snprintf(out->lr_scaling, sizeof out->lr_scaling, "%s", cfg(r, "optimizer", "lr_scaling"));
    bool sel = false;
    lt_config_bool(r->config, "trainer", "auto_select_gpus", &sel, NULL, 0);
    if (sel) {
        size_t n = (size_t)snprintf(out->devices, sizeof out->devices, "[");
        for (int i = 0; i < r->devices.count && n < sizeof out->devices; i++)
            n += (size_t)snprintf(out->devices + n, sizeof out->devices - n, "%s%d", i ? ", " : "", r->devices.ids[i]);
        if (n < sizeof out->devices) snprintf(out->devices + n, sizeof out->devices - n, "]");
    }
}

static lt_status read_endpoint(const char *ep, lt_launch_info *out);

/* launcher.nnodes "MIN:MAX" (or "N", as N:N) and launcher.rdzv_endpoint
 * "HOST[:PORT]", "[IPv6]:PORT" into out; LT_ERR_INVALID with the fix. */
static lt_status read_elastic(const lt_run *r, lt_launch_info *out) {
    const char *nn = cfg(r, "launcher", "nnodes");
    if (!*nn) return LT_OK;
    const char *where = lt_config_origin(r->config, "launcher", "nnodes");
    char *end;
    long lo = strtol(nn, &end, 10), hi = lo;
    if (*end == ':') hi = strtol(end + 1, &end, 10);
    if (*end || lo < 1 || hi < lo || hi > 512) {
        lt_set_error(NULL, "launcher.nnodes = '%s' (%s): expected MIN:MAX with 1 <= MIN <= MAX <= 512, e.g. --nnodes 1:4",
                     nn, where ? where : "?");
        return LT_ERR_INVALID;
    }
    if (lt_config_source_of(r->config, "launcher", "node_rank") != LT_SRC_DEFAULT) {
        lt_set_error(NULL, "launcher.node_rank is set (%s), but under --nnodes %s the rendezvous numbers the nodes "
                     "in the order they join; drop --node-rank", lt_config_origin(r->config, "launcher", "node_rank"), nn);
        return LT_ERR_INVALID;
    }
    if (lt_config_source_of(r->config, "trainer", "num_nodes") != LT_SRC_DEFAULT) {
        lt_set_error(NULL, "trainer.num_nodes is set (%s), but --nnodes %s lets the number of nodes change; "
                     "set one of them", lt_config_origin(r->config, "trainer", "num_nodes"), nn);
        return LT_ERR_INVALID;
    }
    out->min_nodes = (int)lo;
    out->max_nodes = (int)hi;
    const char *ep = cfg(r, "launcher", "rdzv_endpoint");
    if (!*ep) {
        if (out->master_port == 0) {
            lt_set_error(NULL, "--nnodes %s needs an agreed rendezvous address: set --rdzv-endpoint HOST:PORT "
                         "(or --master-addr and --master-port) on every node", nn);
            return LT_ERR_INVALID;
        }
        return LT_OK;
    }
    return read_endpoint(ep, out);
}

/* launcher.rdzv_endpoint "HOST[:PORT]" or "[IPv6]:PORT" (torchrun's default
 * port 29400) into out's master address and port; LT_ERR_INVALID with the
 * fix. */
static lt_status read_endpoint(const char *ep, lt_launch_info *out) {
    char *end;
    char host[256];
    const char *colon;
    size_t hl;
    if (ep[0] == '[') { /* [IPv6]:PORT */
        const char *close = strchr(ep, ']');
        if (!close) goto bad;
        hl = (size_t)(close - ep - 1);
        memcpy(host, ep + 1, hl < sizeof host ? hl : 0);
        colon = close[1] == ':' ? close + 1 : close[1] ? NULL : close + 1;
        if (!colon) goto bad;
    } else {
        colon = strchr(ep, ':');
        if (colon && strchr(colon + 1, ':')) goto bad; /* a bare IPv6 address: brackets needed */
        hl = colon ? (size_t)(colon - ep) : strlen(ep);
        memcpy(host, ep, hl < sizeof host ? hl : 0);
    }
    if (hl == 0 || hl >= sizeof host) goto bad;
    host[hl] = 0;
    long port = 29400; /* torchrun's default rendezvous port */
    if (colon && *colon == ':') {
        port = strtol(colon + 1, &end, 10);
        if (*end || colon[1] == 0 || port < 1 || port > 65535) goto bad;
    }
    snprintf(out->master_addr, sizeof out->master_addr, "%s", host);
    out->master_port = (int)port;
    return LT_OK;
bad:
    lt_set_error(NULL, "launcher.rdzv_endpoint = '%s': expected HOST[:PORT] or [IPv6]:PORT, port 1-65535, "
                 "e.g. --rdzv-endpoint node0:29400", ep);
    return LT_ERR_INVALID;
}

/* Processes on one host share its cores unless the user chose a thread
 * count (accelerator.num_threads, OPENBLAS_NUM_THREADS or OMP_NUM_THREADS):
 * ddp_spawn's forked workers (the launching process then evaluates with the
 * same count), and workers that srun, mpirun or torchrun started, which
 * otherwise each run every core's worth of OpenBLAS threads. ltrun's own
 * launcher exports OPENBLAS_NUM_THREADS itself. A process already bound to
 * fewer cores than the host has (srun --cpu-bind) keeps all of its own. */
static void share_cores(lt_run *r) {
    bool external = false; /* a launcher started this worker: nothing is forked */
    lt_ctx c = r->env.ctx;
    if (LT_ENV(r)->creates_processes_externally(&c, &external) != LT_OK) return;
    int local = 0;
    const char *why = NULL;
    if (r->launch == LT_LAUNCH_SPAWN && !external) {
        local = r->devices.count;
        why = "ddp_spawn: cores / workers";
    } else if (external && r->launch != LT_LAUNCH_NONE) {
        if (LT_ENV(r)->local_world_size(&c, &local) != LT_OK) return;
        why = "external launch: cores / processes on this node";
    }
    if (local < 1 || !why) return;
    if (getenv("OPENBLAS_NUM_THREADS") || getenv("OMP_NUM_THREADS")) return;
    if (!lt_config_value(r->config, "accelerator", "num_threads")) return;
    if (lt_config_source_of(r->config, "accelerator", "num_threads") != LT_SRC_DEFAULT) return;
    long online = sysconf(_SC_NPROCESSORS_ONLN), mine = online;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) mine = CPU_COUNT(&set);
    long each = mine < online ? mine : online / local;
    if (each < 1) each = 1;
    char v[24];
    snprintf(v, sizeof v, "%ld", each);
    lt_config_set(r->config, "accelerator", "num_threads", v, LT_SRC_ENV, why, NULL, 0);
    lt_log(NULL, LT_LOG_DEBUG, "%ld BLAS thread%s per process (%s: %ld cores, %d local); set "
           "accelerator.num_threads to choose", each, each == 1 ? "" : "s", why, mine, local);
}

/* Requeue on a pre-emption signal, for an environment that declares
 * auto_requeue (slurm): which signal, and the command rank 0 runs. */
static bool declares(const lt_plugin *p, const char *key) {
    for (const lt_param_spec *s = p->desc ? p->desc->params : NULL; s && s->name; s++)
        if (!strcmp(s->name, key)) return true;
    return false;
}

static lt_status read_requeue(lt_trainer *t) {
    lt_run *r = &t->run;
    if (!declares(&r->env, "auto_requeue") || !lt_param_bool(&r->env.ctx, "auto_requeue", false)) return LT_OK;
    static const struct { const char *name; int sig; } sigs[] = {
        {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"HUP", SIGHUP}, {"INT", SIGINT}};
    const char *name = lt_param_str(&r->env.ctx, "requeue_signal", "USR1");
    const char *bare = strncasecmp(name, "SIG", 3) ? name : name + 3;
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (!strcasecmp(bare, sigs[i].name)) t->requeue_signal = sigs[i].sig;
    if (!t->requeue_signal)
        return lt_run_fail(r, LT_ERR_INVALID, "environment.requeue_signal = '%s': use USR1, USR2, TERM, HUP or INT", name);
    const char *el = getenv("LT_ELASTIC");
    if (t->requeue_signal == SIGUSR2 && el && !strcmp(el, "1"))
        return lt_run_fail(r, LT_ERR_INVALID, "environment.requeue_signal = '%s': elastic ltrun (--nnodes MIN:MAX) stops "
                           "its workers with SIGUSR2 when nodes change; use USR1 (or TERM, HUP, INT)", name);
    snprintf(t->requeue_command, sizeof t->requeue_command, "%s", lt_param_str(&r->env.ctx, "requeue_command", ""));
    return LT_OK;
}

/* The config, once, into typed settings (trainer/options.h), the launch
 * info and the text of config.txt: fit reads fields, never keys. */
static lt_status resolve_options(lt_trainer *t) {
    lt_run *r = &t->run;
    char err[1024];
    lt_status st = lt_options_read(r->config, &t->opt, err, sizeof err);
    if (st != LT_OK) return lt_run_fail(r, st, "%s", err);
    r->accumulate = t->opt.loop.accumulate;
    r->batch_size = t->opt.data.batch_size;
    r->val_batch_size = t->opt.data.val_batch_size;
    r->dist = t->opt.dist;
    r->num_nodes = t->opt.loop.num_nodes;
    read_launch_info(t);
    share_cores(r);
    LT_CHECK(read_requeue(t));
    if (r->launch == LT_LAUNCH_SPAWN) {
        /* After its workers, ddp_spawn's launching process evaluates alone. */
        st = lt_registry_load(r->registry, LT_KIND_STRATEGY, "single_device", &t->spawn_eval, err, sizeof err);
        if (st != LT_OK) return lt_run_fail(r, st, "strategy ddp_spawn needs single_device to evaluate in the launching process: %s", err);
    }
    size_t len = 0;
    FILE *f = open_memstream(&t->config_text, &len);
    if (!f) return lt_run_fail(r, LT_ERR_NOMEM, "out of memory");
    lt_config_print(r->config, f);
    fclose(f);
    return LT_OK;
}

typedef lt_status (*check_fn)(lt_ctx *);

/* A resolved table's check_params (ABI 1.9, lt/abi.h; NULL for an older
 * plugin: tables are resolved to full size). Modules have none: their
 * init judges. */
static check_fn check_params_of(lt_kind kind, const lt_plugin_header *d) {
    switch (kind) {
    case LT_KIND_ACCELERATOR: return ((const lt_accelerator_desc *)d)->check_params;
    case LT_KIND_STRATEGY: return ((const lt_strategy_desc *)d)->check_params;
    case LT_KIND_PRECISION: return ((const lt_precision_desc *)d)->check_params;
    case LT_KIND_ENVIRONMENT: return ((const lt_environment_desc *)d)->check_params;
    case LT_KIND_BACKEND: return ((const lt_backend_desc *)d)->check_params;
    default: return NULL;
    }
}

/* One plugin's check_params through c; a refusal is one line, after
 * `where` ("" or "config section [..]: "). */
static lt_status judge_params(lt_run *r, const lt_plugin_header *d, lt_ctx *c, const char *where) {
    check_fn fn = check_params_of(c->kind, d);
    if (!fn) return LT_OK;
    lt_clear_error(); /* a refusal without a message must not show an earlier one */
    lt_status st = fn(c);
    if (st == LT_OK) return LT_OK;
    const char *msg = lt_last_error(c);
    return lt_run_fail(r, st, "%s%s '%s': %s", where, lt_kind_name(c->kind), c->name,
                       *msg ? msg : "check_params refused a parameter without a message");
}

/* Each loaded plugin's check_params: a bad value is refused here, once, by
 * ltrun --check or before ltrun starts a worker, rather than by every
 * rank's setup. */
static lt_status check_plugin_params(lt_run *r) {
    lt_plugin *all[] = {&r->accel, &r->precision, &r->strategy,
                        &r->env, &r->backend, &r->node_backend};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->loaded) LT_CHECK(judge_params(r, all[i]->desc, &all[i]->ctx, ""));
    return LT_OK;
}

/* A plugin named by a section while another of its kind runs ([backend.gloo]
 * beside shm) has its values judged too, from that section alone: it is
 * what the next run that picks it would refuse. */
static lt_status check_named_params(lt_run *r, const section_visit *sv) {
    for (int i = 0; i < sv->n; i++) {
        const lt_plugin_header *d = sv->named[i].d;
        lt_ctx c;
        lt_ctx_init(&c, sv->named[i].kind, d->name, d, r->config);
        c.owner = r;
        c.section_only = true;
        char where[128];
        snprintf(where, sizeof where, "config section [%s.%s]: ", lt_kind_name(c.kind), c.name);
        for (char *p = where; *p; p++) *p = (char)tolower((unsigned char)*p);
        LT_CHECK(judge_params(r, d, &c, where));
    }
    return LT_OK;
}

static lt_status resolve(lt_trainer *t, const lt_trainer_args *a) {
    lt_run *r = &t->run;
    lt_run_register_defaults();
    LT_CHECK(load_config(r, a));
    const char *lvl = cfg(r, "trainer", "log_level");
    if (!strcasecmp(lvl, "debug")) lt_log_set_level(LT_LOG_DEBUG);
    else if (!strcasecmp(lvl, "warning") || !strcasecmp(lvl, "warn")) lt_log_set_level(LT_LOG_WARN);
    else if (!strcasecmp(lvl, "error")) lt_log_set_level(LT_LOG_ERROR);
    LT_CHECK(setup_registry(r, a));
    declare_hooks(r);
    LT_CHECK(pick_accelerator(r));
    LT_CHECK(apply_overrides(r, &r->accel, LT_KIND_ACCELERATOR));
    LT_CHECK(pick_devices(r));
    LT_CHECK(pick_precision(r));
    LT_CHECK(apply_overrides(r, &r->precision, LT_KIND_PRECISION));
    LT_CHECK(pick_strategy(r));
    LT_CHECK(pick_environment(r));
    LT_CHECK(apply_overrides(r, &r->env, LT_KIND_ENVIRONMENT));
    LT_CHECK(check_one_process(r));
    LT_CHECK(pick_backend(r));
    if (r->backend.loaded) LT_CHECK(apply_overrides(r, &r->backend, LT_KIND_BACKEND));
    const char *model = cfg(r, "model", "name");
    if (*model) LT_CHECK(load_plugin(r, &r->module, LT_KIND_MODULE, model, "model.name"));
    section_visit sv = {.r = r, .st = LT_OK};
    lt_config_each_section(r->config, visit_section, &sv);
    LT_CHECK(sv.st);
    char err[1024];
    lt_status st = lt_config_validate(r->config, err, sizeof err);
    if (st != LT_OK) return lt_run_fail(r, st, "%s", err);
    LT_CHECK(check_plugin_params(r));
    LT_CHECK(check_named_params(r, &sv));
    make_summary(t);
    return resolve_options(t);
}

/* The oldest lt_trainer_args: every field up to nplugin_dirs. */
#define ARGS_MIN_SIZE (offsetof(lt_trainer_args, nplugin_dirs) + sizeof(int))

lt_status lt_trainer_new(const lt_trainer_args *args, lt_trainer **out, char *err, size_t errlen) {
    *out = NULL;
    if (!args || args->struct_size < ARGS_MIN_SIZE) {
        snprintf(err, errlen, "lt_trainer_new: args is NULL or args->struct_size (%u) is below the "
                 "%zu bytes of the oldest lt_trainer_args; set struct_size = sizeof(lt_trainer_args)",
                 args ? (unsigned)args->struct_size : 0u, (size_t)ARGS_MIN_SIZE);
        return LT_ERR_INVALID;
    }
    /* Only the bytes the caller has: a field past its struct_size (an older
     * caller's struct ends before ignore_env) reads as zero. */
    lt_trainer_args a = {0};
    memcpy(&a, args, args->struct_size < sizeof a ? args->struct_size : sizeof a);
    lt_trainer *t = calloc(1, sizeof *t);
    if (!t) { snprintf(err, errlen, "out of memory"); return LT_ERR_NOMEM; }
    t->ckpt_lock_fd = -1;
    lt_status st = resolve(t, &a);
    if (st != LT_OK) {
        snprintf(err, errlen, "%s", t->run.error);
        lt_trainer_free(t);
        return st;
    }
    *out = t;
    return LT_OK;
}

const char *lt_trainer_summary(const lt_trainer *t) { return t->summary; }
const char *lt_trainer_error(const lt_trainer *t) { return t->run.error; }

void lt_trainer_print_config(const lt_trainer *t, void *file) {
    lt_config_print(t->run.config, file ? (FILE *)file : stdout);
}

lt_status lt_trainer_launch_info(const lt_trainer *t, lt_launch_info *out) {
    const lt_run *r = &t->run;
    *out = t->launch_info;
    bool external = false;
    lt_ctx c = r->env.ctx;
    lt_status st = LT_ENV(r)->creates_processes_externally(&c, &external);
    if (st != LT_OK) return st;
    out->launch = (r->launch == LT_LAUNCH_SUBPROCESS || r->launch == LT_LAUNCH_NODE) && !external;
    if (r->launch == LT_LAUNCH_NODE) out->nproc_per_node = 1; /* it drives the node's devices itself */
    /* num_nodes >= 1, the port and the other ranges were checked by
     * lt_config_validate; what is left involves two keys, and matters only
     * when lt starts the processes: under srun, mpirun or torchrun the
     * environment plugin gives the node and the port. */
    if (!external && !out->launch && *cfg(r, "launcher", "nnodes")) {
        lt_set_error(NULL, "launcher.nnodes = '%s' (%s) makes an elastic job of several processes, but strategy '%s' "
                     "starts none; use --strategy ddp (or another that launches workers) or drop --nnodes",
                     cfg(r, "launcher", "nnodes"), lt_config_origin(r->config, "launcher", "nnodes"),
                     r->strategy.ctx.name);
        return LT_ERR_INVALID;
    }
    if (external || !out->launch) return LT_OK; /* the strategy judges num_nodes for itself (dp refuses) */
    st = read_elastic(r, out);
    if (st != LT_OK || out->min_nodes > 0) return st;
    if (out->node_rank < 0 || out->node_rank >= out->num_nodes) {
        lt_set_error(NULL, "launcher.node_rank = %d must be in [0, %d) (num_nodes = %d)", out->node_rank, out->num_nodes, out->num_nodes);
        return LT_ERR_INVALID;
    }
    /* torchrun's spelling of a fixed job, --nnodes N --rdzv-endpoint
     * HOST:PORT: the endpoint is node 0's store, as --master-addr/-port. */
    const char *ep = cfg(r, "launcher", "rdzv_endpoint");
    if (*ep) {
        bool addr = lt_config_source_of(r->config, "launcher", "master_addr") != LT_SRC_DEFAULT;
        bool port = lt_config_source_of(r->config, "launcher", "master_port") != LT_SRC_DEFAULT;
        if (addr || port) {
            lt_set_error(NULL, "launcher.rdzv_endpoint = '%s' (%s) and launcher.%s (%s) both name node 0's "
                         "rendezvous; give one of them", ep,
                         lt_config_origin(r->config, "launcher", "rdzv_endpoint"), addr ? "master_addr" : "master_port",
                         lt_config_origin(r->config, "launcher", addr ? "master_addr" : "master_port"));
            return LT_ERR_INVALID;
        }
        LT_CHECK(read_endpoint(ep, out));
    }
    if (out->master_port == 0 && out->num_nodes > 1) {
        lt_set_error(NULL, "several nodes need an agreed port: set --master-port (launcher.master_port) or "
                     "--rdzv-endpoint HOST:PORT on every node");
        return LT_ERR_INVALID;
    }
    return LT_OK;
}
