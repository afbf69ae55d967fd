/* A checkpoint's metadata: every lt.* value is checked for its type and
 * range before any of it is used, and lt.model against the model this run
 * trains. The values come from a file anyone can edit (st_edit.py, a
 * converter, a damaged disk): a world size of 0 or "two" was taken for this
 * run's (resuming mid-epoch at the wrong batch), an epoch of 10^20 would
 * resume into a run that trains nothing, and a checkpoint of another model
 * with the same tensor names resumed silently. Shared by the resume
 * (checkpoint.c), the seed choice at worker setup and ltrun's check before
 * it starts workers (--check too), so all refuse the same file alike. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "trainer_internal.h"
#include "io/safetensors.h"

/* A value as a message shows it: on one line (a JSON string may hold "\n")
 * and not longer than a line. */
static const char *shown(const char *v, char *buf, size_t len) {
    size_t n = 0, i = 0;
    for (; v[i] && n + 4 < len && i < 64; i++) buf[n++] = (unsigned char)v[i] < 0x20 ? '?' : v[i];
    if (v[i]) n += (size_t)snprintf(buf + n, len - n, "...");
    buf[n < len ? n : len - 1] = 0;
    return buf;
}

/* strtoll and friends skip leading blanks and take a sign: lt writes neither. */
static bool digit_first(const char *v) { return *v >= '0' && *v <= '9'; }

static lt_status bad(char *err, size_t errlen, const char *path, const char *key, const char *v,
                     const char *want) {
    char b[80];
    if (!v)
        snprintf(err, errlen, "checkpoint %s: metadata '%s' is missing, expected %s; lt's trainer "
                 "always writes it (the file was edited or damaged): use another "
                 "checkpoint or restore the value", path, key, want);
    else
        snprintf(err, errlen, "checkpoint %s: metadata '%s' is '%s', expected %s; lt's trainer "
                 "never writes that (the file was edited or damaged): use another "
                 "checkpoint or restore the value", path, key, shown(v, b, sizeof b), want);
    return LT_ERR_CORRUPT; /* a damaged file, as a truncated one: exit 1 */
}

/* Counters (epoch, steps): integers in [0, INT64_MAX]. ERANGE matters: an
 * epoch of 10^20 would resume at INT64_MAX and train nothing. */
static lt_status counter(const lt_st_file *f, const char *path, const char *key, int64_t *out,
                         char *err, size_t errlen) {
    const char *v = lt_st_meta(f, key);
    char *end = NULL;
    errno = 0;
    long long x = v && digit_first(v) ? strtoll(v, &end, 10) : -1;
    if (x < 0 || *end || errno)
        return bad(err, errlen, path, key, v, "an integer in [0, 9223372036854775807]");
    *out = x;
    return LT_OK;
}

static lt_status name(const lt_st_file *f, const char *path, const char *key, const char **out,
                      char *err, size_t errlen) {
    *out = lt_st_meta(f, key);
    return *out && **out ? LT_OK : bad(err, errlen, path, key, *out, "a plugin name");
}

static lt_status seed(const lt_st_file *f, const char *path, uint64_t *out, char *err,
                      size_t errlen) {
    const char *v = lt_st_meta(f, "lt.seed");
    char *end = NULL;
    errno = 0;
    bool ok = v && digit_first(v);
    unsigned long long x = ok ? strtoull(v, &end, 10) : 0;
    if (!ok || *end || errno)
        return bad(err, errlen, path, "lt.seed", v, "an integer in [0, 18446744073709551615]");
    *out = x;
    return LT_OK;
}

/* Absent in files of lt before elastic nodes (0: not recorded); present, it
 * divides the batch position (checkpoint.c, rescale_batch). */
static lt_status world_size(const lt_st_file *f, const char *path, int *out, char *err,
                            size_t errlen) {
    const char *v = lt_st_meta(f, "lt.world_size");
    *out = 0;
    if (!v) return LT_OK;
    char *end = NULL;
    errno = 0;
    long x = digit_first(v) ? strtol(v, &end, 10) : 0;
    if (x < 1 || x > INT_MAX || *end || errno)
        return bad(err, errlen, path, "lt.world_size", v,
                   "an integer in [1, 2147483647] (the ranks that saved it)");
    *out = (int)x;
    return LT_OK;
}

/* Empty when no monitored value improved yet; else what "%.17g" printed,
 * which may be nan or inf (a diverged first validation). */
static lt_status best(const lt_st_file *f, const char *path, lt_ckpt_meta *m, char *err,
                      size_t errlen) {
    const char *v = lt_st_meta(f, "lt.best_score");
    m->monitor = lt_st_meta(f, "lt.monitor");
    if (!m->monitor) m->monitor = "";
    if (!v || !*v) return LT_OK;
    char *end = NULL;
    double x = strtod(v, &end);
    if (*end || isspace((unsigned char)*v))
        return bad(err, errlen, path, "lt.best_score", v, "a number or nothing");
    if (!*m->monitor)
        return bad(err, errlen, path, "lt.monitor", m->monitor,
                   "the monitored metric's name (lt.best_score holds its best value)");
    m->best_score = x;
    m->has_best = true;
    return LT_OK;
}

lt_status lt_checkpoint_read_meta(const lt_st_file *f, const char *path, lt_ckpt_meta *m,
                                  char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    const char *fmt = lt_st_meta(f, "format");
    m->full = fmt && !strcmp(fmt, LT_CKPT_FORMAT);
    if (!m->full && fmt && !strncmp(fmt, "lt-", 3)) {
        char b[80];
        snprintf(err, errlen, "checkpoint %s has format '%s'; this lt reads '%s' checkpoints and "
                 "weights-only files: use the lt that wrote it", path, shown(fmt, b, sizeof b),
                 LT_CKPT_FORMAT);
        return LT_ERR_UNSUPPORTED;
    }
    /* Without lt's tag, as safetensors.torch.save_file writes it (no
     * metadata) or Hugging Face ("format": "pt"): weights only, parameters by
     * name and no trainer state to read. */
    if (!m->full) return LT_OK;
    LT_CHECK(name(f, path, "lt.model", &m->model, err, errlen));
    LT_CHECK(name(f, path, "lt.optimizer", &m->optimizer, err, errlen));
    LT_CHECK(name(f, path, "lt.precision", &m->precision, err, errlen));
    LT_CHECK(counter(f, path, "lt.epoch", &m->epoch, err, errlen));
    LT_CHECK(counter(f, path, "lt.batch_in_epoch", &m->batch_in_epoch, err, errlen));
    LT_CHECK(counter(f, path, "lt.global_step", &m->global_step, err, errlen));
    LT_CHECK(counter(f, path, "lt.optimizer_step", &m->optimizer_step, err, errlen));
    LT_CHECK(seed(f, path, &m->seed, err, errlen));
    LT_CHECK(world_size(f, path, &m->world_size, err, errlen));
    LT_CHECK(best(f, path, m, err, errlen));
    /* The precision plugin judges its own text (load_state). */
    m->precision_state = lt_st_meta(f, "lt.precision_state");
    if (!m->precision_state) m->precision_state = "";
    return LT_OK;
}

/* Without case, as plugins are looked up and lt.optimizer is compared. With
 * checkpoint.strict = false another model's checkpoint loads what the two
 * share, as another model's tensors do (check_names, checkpoint.c): said
 * once, by the rank that loads it (warn). */
lt_status lt_checkpoint_check_model(lt_trainer *t, const char *path, const lt_ckpt_meta *m,
                                    bool warn) {
    const char *run = t->run.module.ctx.name;
    if (!m->full || !run || !strcasecmp(m->model, run)) return LT_OK;
    char b[80];
    shown(m->model, b, sizeof b);
    if (t->opt.ckpt.strict)
        return lt_run_fail(&t->run, LT_ERR_MISMATCH, "checkpoint %s was saved by model '%s' "
                           "(metadata lt.model), this run trains '%s'; resume it with model.name = "
                           "%s, or set checkpoint.strict = false to load the tensors the two "
                           "models share", path, b, run, b);
    if (warn)
        lt_log(NULL, LT_LOG_WARN, "checkpoint %s (checkpoint.strict = false): saved by model '%s' "
               "(lt.model), loaded into '%s'", path, b, run);
    return LT_OK;
}
