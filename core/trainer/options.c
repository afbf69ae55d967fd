/* lt_options_read: the config turned into the trainer's typed settings. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "options.h"

typedef struct reader {
    const lt_config *c;
    char *err;
    size_t errlen;
    lt_status st;
} reader;

static lt_status fail(reader *r, const char *fmt, ...) LT_PRINTF(2, 3);
static lt_status fail(reader *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, r->errlen, fmt, ap);
    va_end(ap);
    return r->st = LT_ERR_INVALID;
}

/* Validation already checked every declared key's type and range, so these
 * read a value the config accepted; a key nobody declared reads as 0/"". */
static const char *str(reader *r, const char *sec, const char *key) {
    const char *v = lt_config_value(r->c, sec, key);
    return v ? v : "";
}

static int64_t i64(reader *r, const char *sec, const char *key) {
    int64_t v = 0;
    lt_config_int(r->c, sec, key, &v, NULL, 0);
    return v;
}

static double f64(reader *r, const char *sec, const char *key) {
    double v = 0;
    lt_config_float(r->c, sec, key, &v, NULL, 0);
    return v;
}

static bool flag(reader *r, const char *sec, const char *key) {
    bool v = false;
    lt_config_bool(r->c, sec, key, &v, NULL, 0);
    return v;
}

static void copy(char *dst, size_t len, const char *src) { snprintf(dst, len, "%s", src); }

/* A key's text into a field of the options; longer than the field is
 * refused, never cut (a cut seed or path would silently be another one). */
static lt_status copy_key(reader *r, char *dst, size_t len, const char *sec, const char *key) {
    const char *v = str(r, sec, key);
    if (strlen(v) >= len)
        return fail(r, "%s.%s (%s) is %zu characters; at most %zu are supported: shorten it",
                    sec, key, lt_config_origin(r->c, sec, key), strlen(v), len - 1);
    copy(dst, len, v);
    return LT_OK;
}

/* A fraction in [0, 1] or a count of batches (Lightning's limit_*_batches):
 * as there, an integer is a count and a float a fraction, so "1" is one
 * batch (a quick smoke run) and "1.0", the default, all of them. Counts
 * written as integers are stored negated (options.h); a whole float above 1
 * (5.0, 1e20) counts too. */
static lt_status limit(reader *r, const char *key, double *out, char *said, size_t said_len) {
    const char *v = str(r, "trainer", key);
    char *end;
    double x = strtod(v, &end);
    if (*end || !(x >= 0))
        return fail(r, "trainer.%s = '%s' (%s): use a fraction in [0, 1] or a number of batches",
                    key, v, lt_config_origin(r->c, "trainer", key));
    const char *digits = v + (*v == '+');
    bool integer = *digits && digits[strspn(digits, "0123456789")] == 0;
    *out = integer && x >= 1 ? -x : x;
    if (said) snprintf(said, said_len, "%.60s (%s)", v, lt_config_origin(r->c, "trainer", key));
    return LT_OK;
}

static lt_status read_loop(reader *r, lt_loop_options *o) {
    o->max_epochs = i64(r, "trainer", "max_epochs");
    o->max_steps = i64(r, "trainer", "max_steps");
    /* Lightning: -1 means no limit; anything below is a mistake, not "zero epochs". */
    if (o->max_epochs < -1 || o->max_steps < -1)
        return fail(r, "trainer.max_epochs = %lld, trainer.max_steps = %lld: use -1 for no limit or a count >= 0",
                    (long long)o->max_epochs, (long long)o->max_steps);
    if (o->max_epochs == -1 && o->max_steps == -1)
        return fail(r, "trainer.max_epochs and trainer.max_steps are both -1: training would never end; set one of them");
    if (o->max_epochs == -1) o->max_epochs = INT64_MAX;
    o->min_epochs = i64(r, "trainer", "min_epochs");
    o->accumulate = i64(r, "trainer", "accumulate_grad_batches");
    if (o->accumulate < 1)
        return fail(r, "trainer.accumulate_grad_batches = %lld must be >= 1", (long long)o->accumulate);
    o->clip_val = f64(r, "trainer", "gradient_clip_val");
    if (!(o->clip_val >= 0))
        return fail(r, "trainer.gradient_clip_val = %g must be >= 0 (0: no clipping)", o->clip_val);
    /* norm or value: the config's declaration admits nothing else */
    o->clip_by_value = !strcasecmp(str(r, "trainer", "gradient_clip_algorithm"), "value");
    LT_CHECK(limit(r, "limit_train_batches", &o->limit_train, o->limit_train_said,
                   sizeof o->limit_train_said));
    LT_CHECK(limit(r, "limit_val_batches", &o->limit_val, o->limit_val_said, sizeof o->limit_val_said));
    LT_CHECK(limit(r, "limit_test_batches", &o->limit_test, NULL, 0));
    o->check_val_every = i64(r, "trainer", "check_val_every_n_epoch");
    o->log_every = i64(r, "trainer", "log_every_n_steps");
    if (o->log_every < 1) o->log_every = 1;
    o->flush_every = i64(r, "trainer", "flush_logs_every_n_steps");
    if (o->flush_every < 1) o->flush_every = 1;
    o->num_sanity_val = i64(r, "trainer", "num_sanity_val_steps");
    o->progress_bar = flag(r, "trainer", "enable_progress_bar");
    o->num_nodes = (int)i64(r, "trainer", "num_nodes");
    LT_CHECK(copy_key(r, o->seed, sizeof o->seed, "trainer", "seed"));
    copy(o->seed_origin, sizeof o->seed_origin, lt_config_origin(r->c, "trainer", "seed"));
    return LT_OK;
}

static lt_status read_data(reader *r, lt_data_options *o) {
    LT_CHECK(copy_key(r, o->dir, sizeof o->dir, "data", "dir"));
    copy(o->dir_origin, sizeof o->dir_origin, lt_config_origin(r->c, "data", "dir"));
    LT_CHECK(copy_key(r, o->cache_dir, sizeof o->cache_dir, "data", "cache_dir"));
    o->mean = f64(r, "data", "normalize_mean");
    o->std = f64(r, "data", "normalize_std");
    o->batch_size = i64(r, "data", "batch_size");
    o->val_batch_size = i64(r, "data", "val_batch_size");
    if (o->batch_size < 1)
        return fail(r, "data.batch_size = %lld (%s) must be >= 1", (long long)o->batch_size,
                    lt_config_origin(r->c, "data", "batch_size"));
    if (o->val_batch_size <= 0) o->val_batch_size = o->batch_size;
    o->val_split = i64(r, "data", "val_split");
    o->num_classes = (int)i64(r, "data", "num_classes");
    o->shuffle = flag(r, "data", "shuffle");
    o->drop_last = flag(r, "data", "drop_last");
    o->prefetch = (int)i64(r, "data", "prefetch");
    if (o->prefetch < 2) o->prefetch = 2;
    return LT_OK;
}

static lt_status read_logs_and_checkpoints(reader *r, lt_log_options *l, lt_ckpt_options *k) {
    LT_CHECK(copy_key(r, l->root_dir, sizeof l->root_dir, "trainer", "default_root_dir"));
    l->csv = true;
    lt_config_bool(r->c, "logger", "csv", &l->csv, NULL, 0);
    LT_CHECK(copy_key(r, l->name, sizeof l->name, "logger", "name"));
    if (!l->name[0]) copy(l->name, sizeof l->name, "lt_logs");
    LT_CHECK(copy_key(r, l->version, sizeof l->version, "logger", "version"));
    k->enabled = flag(r, "trainer", "enable_checkpointing");
    LT_CHECK(copy_key(r, k->monitor, sizeof k->monitor, "checkpoint", "monitor"));
    copy(k->monitor_origin, sizeof k->monitor_origin, lt_config_origin(r->c, "checkpoint", "monitor"));
    const char *mode = str(r, "checkpoint", "mode");
    k->monitor_max = !strcasecmp(mode, "max");
    if (!k->monitor_max && strcasecmp(mode, "min")) return fail(r, "checkpoint.mode = '%s': use min or max", mode);
    k->save_last = flag(r, "checkpoint", "save_last");
    k->save_top_k = i64(r, "checkpoint", "save_top_k");
    k->strict = flag(r, "checkpoint", "strict");
    LT_CHECK(copy_key(r, k->dir, sizeof k->dir, "checkpoint", "dirpath"));
    if (!k->dir[0] && strlen(l->root_dir) + sizeof "/checkpoints" > sizeof k->dir)
        return fail(r, "trainer.default_root_dir is too long to hold checkpoints/ (at most %zu "
                    "characters); shorten it or set checkpoint.dirpath", sizeof k->dir - sizeof "/checkpoints");
    if (!k->dir[0]) snprintf(k->dir, sizeof k->dir, "%s/checkpoints", l->root_dir);
    return LT_OK;
}

static lt_status read_optim(reader *r, lt_optim_options *oo) {
    lt_optim_config *o = &oo->cfg;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    LT_CHECK(copy_key(r, o->name, sizeof o->name, "optimizer", "name"));
    o->lr = f64(r, "optimizer", "lr");
    o->momentum = f64(r, "optimizer", "momentum");
    o->dampening = f64(r, "optimizer", "dampening");
    o->nesterov = flag(r, "optimizer", "nesterov");
    o->weight_decay = f64(r, "optimizer", "weight_decay");
    o->beta1 = f64(r, "optimizer", "beta1");
    o->beta2 = f64(r, "optimizer", "beta2");
    o->eps = f64(r, "optimizer", "eps");
    LT_CHECK(copy_key(r, o->scheduler, sizeof o->scheduler, "scheduler", "name"));
    o->step_size = i64(r, "scheduler", "step_size");
    o->gamma = f64(r, "scheduler", "gamma");
    o->warmup_steps = i64(r, "scheduler", "warmup_steps");
    o->min_lr = f64(r, "scheduler", "min_lr");
    const char *interval = str(r, "scheduler", "interval");
    if (strcasecmp(interval, "epoch") && strcasecmp(interval, "step"))
        return fail(r, "scheduler.interval = '%s' (%s): use epoch or step", interval,
                    lt_config_origin(r->c, "scheduler", "interval"));
    o->interval_steps = !strcasecmp(interval, "step");
    const char *rule = str(r, "optimizer", "lr_scaling");
    if (strcasecmp(rule, "none") && strcasecmp(rule, "linear") && strcasecmp(rule, "sqrt"))
        return fail(r, "optimizer.lr_scaling = '%s': use none, linear or sqrt", rule);
    copy(oo->lr_scaling, sizeof oo->lr_scaling, rule);
    oo->reference_batch = i64(r, "optimizer", "reference_batch_size");
    oo->fused = flag(r, "optimizer", "fused");
    return LT_OK;
}

lt_status lt_options_read(const lt_config *c, lt_options *o, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    reader r = {c, err, errlen, LT_OK};
    LT_CHECK(read_loop(&r, &o->loop));
    LT_CHECK(read_data(&r, &o->data));
    LT_CHECK(read_logs_and_checkpoints(&r, &o->log, &o->ckpt));
    LT_CHECK(read_optim(&r, &o->optim));
    o->dist.timeout_s = 1800;
    lt_config_int(c, "strategy", "timeout_s", &o->dist.timeout_s, NULL, 0);
    o->dist.rdzv_timeout_s = 300;
    lt_config_int(c, "launcher", "rdzv_timeout_s", &o->dist.rdzv_timeout_s, NULL, 0);
    o->dist.stall_timeout_s = 120;
    lt_config_int(c, "launcher", "stall_timeout_s", &o->dist.stall_timeout_s, NULL, 0);
    return LT_OK;
}
