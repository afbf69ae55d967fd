/* checkpoint.monitor: refused before the first step when this fit can
 * never log it, and what to do when it is missing at an epoch's end. */
#include <stdio.h>
#include <string.h>
#include "trainer_internal.h"

/* Why validation cannot run in this fit whatever the epoch (its hook, its
 * data, its limit, check_val_every_n_epoch = 0), in `why`; false when it can. */
static bool cannot_validate(const lt_trainer *t, char *why, size_t n) {
    const lt_run *r = &t->run;
    const lt_loop_options *o = &t->opt.loop;
    if (!LT_MOD(r)->validation_step)
        snprintf(why, n, "model '%s' has no validation_step", r->module.ctx.name);
    else if (!t->val_loader && t->train_base.iface)
        snprintf(why, n, "there is no validation data (data.val_split = 0)");
    else if (!t->val_loader)
        snprintf(why, n, "model '%s' gave no validation data (its setup_data)", r->module.ctx.name);
    else if (lt_limit_batches(lt_loader_num_batches(t->val_loader), o->limit_val) < 1)
        snprintf(why, n, "trainer.limit_val_batches = %s leaves none of the %lld validation batches",
                 o->limit_val_said,
                 (long long)lt_loader_num_batches(t->val_loader));
    else if (o->check_val_every < 1)
        snprintf(why, n, "trainer.check_val_every_n_epoch = 0");
    else
        return false;
    return true;
}

/* The first epoch from `epoch` on whose end validates (check_val_every_n_epoch). */
static int64_t next_val_epoch(const lt_trainer *t, int64_t epoch) {
    int64_t every = t->opt.loop.check_val_every;
    return (epoch / every + 1) * every - 1;
}

/* A name of Lightning's convention for validation metrics: val_loss, val/acc. */
static bool is_validation_name(const char *name) {
    return !strncmp(name, "val_", 4) || !strncmp(name, "val/", 4) || !strncmp(name, "validation_", 11) ||
           !strncmp(name, "validation/", 11);
}

bool lt_monitor_used(const lt_trainer *t) {
    const lt_ckpt_options *k = &t->opt.ckpt;
    return k->enabled && k->monitor[0] && k->save_top_k != 0;
}

/* checkpoint.monitor on a validation metric while this fit never validates
 * would fail at the first epoch's end, after a whole epoch of training: it is
 * refused before the first step. A run that max_steps ends before any epoch
 * ends never consults the monitor, and trains. */
lt_status lt_monitor_check(lt_trainer *t, int64_t nb) {
    lt_run *r = &t->run;
    const lt_loop_options *o = &t->opt.loop;
    if (!lt_monitor_used(t) || !is_validation_name(t->opt.ckpt.monitor)) return LT_OK;
    int64_t left = (nb - r->batch_in_epoch + r->accumulate - 1) / r->accumulate; /* steps to the epoch's end */
    if (r->epoch >= o->max_epochs || (o->max_steps >= 0 && r->global_step + left > o->max_steps)) return LT_OK;
    char why[512];
    if (!cannot_validate(t, why, sizeof why)) {
        int64_t first = next_val_epoch(t, r->epoch);
        if (first < o->max_epochs) return LT_OK;
        snprintf(why, sizeof why, "trainer.check_val_every_n_epoch = %lld validates first after epoch %lld, "
                 "but trainer.max_epochs = %lld", (long long)o->check_val_every, (long long)first + 1,
                 (long long)o->max_epochs);
    }
    return lt_run_fail(r, LT_ERR_INVALID, "checkpoint.monitor = '%s' (%s) is a validation metric, but this "
                       "fit never validates: %s; change that, monitor a training metric, or set "
                       "checkpoint.monitor= (empty: last.safetensors only)", t->opt.ckpt.monitor,
                       t->opt.ckpt.monitor_origin, why);
}

/* The monitored metric is missing at an epoch's end. Before the first
 * validation of a fit that validates later (check_val_every_n_epoch > 1) it
 * may still come: best is not written yet, as Lightning does. Otherwise it
 * never will: Lightning's error, with the names that were logged. */
lt_status lt_monitor_missing(lt_trainer *t, bool *skip) {
    lt_run *r = &t->run;
    char why[512];
    if (!t->validated && !cannot_validate(t, why, sizeof why) &&
        next_val_epoch(t, r->epoch + 1) < t->opt.loop.max_epochs) {
        *skip = true;
        return LT_OK;
    }
    char epochs[600] = "", steps[300] = "";
    size_t ne = 0, ns = 0;
    for (int i = 0; i < r->metrics.n; i++) {
        const lt_metric *m = &r->metrics.m[i];
        char *buf = m->has_epoch ? epochs : steps;
        size_t cap = m->has_epoch ? sizeof epochs : sizeof steps, *len = m->has_epoch ? &ne : &ns;
        if (*len < cap) *len += (size_t)snprintf(buf + *len, cap - *len, "%s%s", *len ? ", " : "", m->name);
    }
    return lt_run_fail(r, LT_ERR_NOT_FOUND, "checkpoint.monitor = '%s' (%s) could not find the monitored key "
                       "in the logged epoch metrics: [%s]%s%s%s; log it with LT_LOG_ON_EPOCH in the model, or "
                       "set checkpoint.monitor to one of those", t->opt.ckpt.monitor,
                       t->opt.ckpt.monitor_origin, epochs,
                       ns ? " (logged per step only: " : "", steps, ns ? ")" : "");
}
