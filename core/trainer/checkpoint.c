/* Checkpoints as safetensors: parameters by name (so
 * safetensors.torch.load_file gives a state_dict), optimizer state as
 * "optimizer.<state>.<param>", and trainer state in the metadata. Written by
 * rank 0 atomically (lt_st_write); a failed save leaves the old file, and the
 * temp files of writers killed mid-save are removed at the next start, resume
 * or save. A file without lt's format tag is read as weights only (what
 * safetensors.torch.save_file writes). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include "trainer_internal.h"
#include "io/safetensors.h"

static lt_status to_host(lt_run *r, const void *dev, size_t bytes, void **out) {
    *out = malloc(bytes ? bytes : 1);
    if (!*out) return lt_run_fail(r, LT_ERR_NOMEM, "out of memory saving a checkpoint");
    lt_status st = LT_ACC(r)->copy(&r->accel.ctx, *out, dev, bytes, LT_COPY_D2H);
    if (st == LT_OK) st = LT_ACC(r)->synchronize(&r->accel.ctx);
    return st == LT_OK ? LT_OK : lt_run_hook_failed(r, &r->accel, "copy", st);
}

static void fill_tensor(lt_st_tensor *t, const char *name, const lt_param *p, lt_dtype dt,
                        const char *host) {
    t->name = name;
    t->dtype = dt;
    t->ndim = p->ndim;
    for (int i = 0; i < p->ndim; i++) t->shape[i] = p->shape[i];
    t->nbytes = (size_t)p->numel * lt_dtype_size(dt);
    t->data = host + p->offset * lt_dtype_size(dt);
}

lt_status lt_checkpoint_save(lt_trainer *t, const char *path) {
    lt_run *r = &t->run;
    if (!t->earlier_kept) { /* the first save of this trainer: an earlier run's files move aside */
        LT_CHECK(lt_checkpoint_keep_earlier(t));
        t->earlier_kept = true;
    }
    lt_model *m = r->model;
    lt_dtype dt = lt_model_opt_dtype(m); /* the master parameters under mixed precision */
    size_t bytes = m->total * lt_dtype_size(dt);
    int nstate = r->optim.nstate, np = m->nparams;
    void *host[3] = {NULL, NULL, NULL};
    lt_st_tensor *ts = calloc((size_t)np * (1 + (size_t)nstate), sizeof *ts);
    char *names = calloc((size_t)np * (1 + (size_t)nstate), 192);
    lt_status st = ts && names ? LT_OK : lt_run_fail(r, LT_ERR_NOMEM, "out of memory saving a checkpoint");
    if (st == LT_OK) st = to_host(r, lt_model_opt_params(m), bytes, &host[0]);
    for (int s = 0; st == LT_OK && s < nstate; s++) st = to_host(r, r->optim.state[s], bytes, &host[1 + s]);
    size_t n = 0;
    for (int s = 0; st == LT_OK && s <= nstate; s++) {
        for (int i = 0; i < np; i++, n++) {
            char *name = names + n * 192;
            if (s == 0) snprintf(name, 192, "%s", m->params[i]->name);
            else snprintf(name, 192, "optimizer.%s.%s", lt_optim_state_name(&r->optim, s - 1), m->params[i]->name);
            fill_tensor(&ts[n], name, m->params[i], dt, host[s]);
        }
    }
    char epoch[32], batch[32], gstep[32], ostep[32], seed[32], best[64], world[16], prec[512] = "";
    if (st == LT_OK) {
        /* Saved at an epoch's end, training resumes with the next epoch. */
        bool at_end = r->batch_in_epoch == 0;
        snprintf(epoch, sizeof epoch, "%" PRId64, r->epoch + (at_end ? 1 : 0));
        snprintf(batch, sizeof batch, "%" PRId64, r->batch_in_epoch);
        snprintf(gstep, sizeof gstep, "%" PRId64, r->global_step);
        snprintf(ostep, sizeof ostep, "%" PRId64, r->optim.step);
        snprintf(seed, sizeof seed, "%" PRIu64, r->seed);
        snprintf(world, sizeof world, "%d", r->world.world_size > 0 ? r->world.world_size : 1);
        snprintf(best, sizeof best, "%.17g", t->has_best ? t->best_score : 0.0);
        lt_status ps = LT_PREC(r)->save_state(&r->precision.ctx, prec, sizeof prec);
        if (ps != LT_OK) st = lt_run_hook_failed(r, &r->precision, "save_state", ps);
    }
    if (st == LT_OK) {
        const char *meta[] = {
            "format", LT_CKPT_FORMAT, "lt.model", r->module.ctx.name, "lt.epoch", epoch,
            "lt.batch_in_epoch", batch, "lt.global_step", gstep, "lt.optimizer", r->optim_cfg.name,
            "lt.optimizer_step", ostep, "lt.seed", seed, "lt.precision", r->precision.ctx.name,
            "lt.precision_state", prec, "lt.monitor", t->opt.ckpt.monitor, "lt.best_score", t->has_best ? best : "",
            "lt.world_size", world,
        };
        char err[1024];
        st = lt_mkdirs(r, t->opt.ckpt.dir, "checkpoint.dirpath (or trainer.default_root_dir)");
        if (st == LT_OK) {
            st = lt_st_write(path, ts, n, meta, sizeof meta / sizeof meta[0] / 2, err, sizeof err);
            if (st != LT_OK) lt_run_fail(r, st, "saving checkpoint: %s", err);
        }
    }
    /* Also after each save: a long run restarted by hand while an older one
     * was being killed would otherwise keep that one's temp file to the end. */
    if (st == LT_OK) lt_checkpoint_clean_temps(t, path);
    for (int s = 0; s < 3; s++) free(host[s]);
    free(ts);
    free(names);
    return st;
}

/* A tensor the file lacks keeps its initial value: check_names let that
 * through only under checkpoint.strict = false. */
lt_status lt_checkpoint_match_tensor(lt_run *r, const char *path, const lt_st_tensor *t,
                                     const lt_param *p, lt_dtype dt, const char *saved_precision) {
    bool shape = t->ndim == p->ndim;
    for (int i = 0; shape && i < p->ndim; i++) shape = t->shape[i] == p->shape[i];
    if (shape && t->dtype == dt) return LT_OK;
    char have[96], want[96], fix[300];
    lt_shape_str(t->ndim, t->shape, have, sizeof have);
    lt_shape_str(p->ndim, p->shape, want, sizeof want);
    /* The fix the metadata can name: the precision it was saved at. */
    if (!shape)
        snprintf(fix, sizeof fix, "it was saved from another model or other model.* settings (sizes); "
                 "resume with the settings it was trained with");
    else if (saved_precision && *saved_precision)
        snprintf(fix, sizeof fix, "it was saved at precision %s: resume with --precision %s",
                 saved_precision, saved_precision);
    else
        snprintf(fix, sizeof fix, "it was saved at another precision: resume with the one it was trained with");
    return lt_run_fail(r, LT_ERR_MISMATCH, "checkpoint %s: tensor '%s' is %s %s, the model's is %s %s; %s",
                       path, t->name, lt_dtype_name(t->dtype), have, lt_dtype_name(dt), want, fix);
}

static lt_status load_tensor(lt_run *r, lt_st_file *f, const char *path, const char *name,
                             const lt_param *p, void *dev, const char *saved_precision) {
    const lt_st_tensor *t = lt_st_find(f, name);
    lt_dtype dt = lt_model_opt_dtype(r->model);
    if (!t) return LT_OK;
    LT_CHECK(lt_checkpoint_match_tensor(r, path, t, p, dt, saved_precision));
    lt_status st = LT_ACC(r)->copy(&r->accel.ctx, (char *)dev + p->offset * lt_dtype_size(dt), t->data, t->nbytes, LT_COPY_H2D);
    return st == LT_OK ? LT_OK : lt_run_hook_failed(r, &r->accel, "copy", st);
}

/* The tensors a checkpoint must hold for this run, in order: the parameters,
 * then (trainer checkpoints only) each optimizer state of each parameter. */
static int nexpected(const lt_run *r, bool full) {
    return r->model->nparams * (1 + (full ? r->optim.nstate : 0));
}

static const char *expected_name(const lt_run *r, int i, char *buf, size_t len) {
    const lt_model *m = r->model;
    int np = m->nparams;
    if (i < np) return m->params[i]->name;
    snprintf(buf, len, "optimizer.%s.%s", lt_optim_state_name(&r->optim, i / np - 1), m->params[i % np]->name);
    return buf;
}

static bool is_expected(const lt_run *r, bool full, const char *name) {
    char buf[192];
    for (int i = 0, n = nexpected(r, full); i < n; i++)
        if (!strcmp(expected_name(r, i, buf, sizeof buf), name)) return true;
    return false;
}

/* checkpoint.strict (torch's load_state_dict(strict=True)): the file holds
 * exactly this run's tensors, so a checkpoint of another model is refused
 * instead of half loaded. Names the first offender: in file order for a
 * tensor the model lacks, in the model's order for one the file lacks. With
 * strict = false the former are ignored and the latter keep their initial
 * values, said in one warning. */
static lt_status check_names(lt_trainer *t, lt_st_file *f, const char *path, bool full) {
    lt_run *r = &t->run;
    int n = nexpected(r, full);
    size_t found = 0, missing = 0;
    char buf[192], first_missing[192] = "";
    for (int i = 0; i < n; i++) {
        const char *name = expected_name(r, i, buf, sizeof buf);
        if (lt_st_find(f, name)) found++;
        else if (!missing++) snprintf(first_missing, sizeof first_missing, "%s", name);
    }
    /* Names in a file are unique, so the rest are tensors the run lacks. */
    size_t extra = lt_st_count(f) - found;
    const char *first_extra = "";
    for (size_t i = 0; extra && !*first_extra && i < lt_st_count(f); i++)
        if (!is_expected(r, full, lt_st_at(f, i)->name)) first_extra = lt_st_at(f, i)->name;
    const char *model = r->module.ctx.name;
    if (t->opt.ckpt.strict && extra)
        return lt_run_fail(r, LT_ERR_MISMATCH, "checkpoint %s has tensor '%s', which model '%s' does not have "
                           "(%zu such tensor%s); it was saved from another model: load it into that one, or set "
                           "checkpoint.strict = false to ignore such tensors", path, first_extra, model, extra,
                           extra == 1 ? "" : "s");
    if (t->opt.ckpt.strict && missing)
        return lt_run_fail(r, LT_ERR_MISMATCH, "checkpoint %s has no tensor '%s' (%zu of the %d this run loads are "
                           "missing); it was saved from another model%s: use that one, or set checkpoint.strict = "
                           "false to keep the initial values of what is missing", path, first_missing, missing, n,
                           full ? " or optimizer" : "");
    if ((extra || missing) && r->world.global_rank == 0) {
        char a[400] = "", b[400] = "";
        if (extra) snprintf(a, sizeof a, "ignored %zu tensor%s model '%s' does not have (first '%s')", extra,
                            extra == 1 ? "" : "s", model, first_extra);
        if (missing) snprintf(b, sizeof b, "%s%zu tensor%s the file lacks (first '%s') keep their initial values",
                              extra ? "; " : "", missing, missing == 1 ? "" : "s", first_missing);
        lt_log(NULL, LT_LOG_WARN, "checkpoint %s (checkpoint.strict = false): %s%s", path, a, b);
    }
    return LT_OK;
}

/* Before the names: another optimizer's state tensors are not "tensors the
 * model lacks", and strict = false must not drop them silently. */
static lt_status check_optimizer(lt_run *r, const lt_ckpt_meta *m, const char *path) {
    if (!m->full || !strcasecmp(m->optimizer, r->optim_cfg.name)) return LT_OK;
    return lt_run_fail(r, LT_ERR_MISMATCH, "checkpoint %s was saved with optimizer '%s', this run "
                       "uses '%s'; use the same optimizer.name to resume", path, m->optimizer,
                       r->optim_cfg.name);
}

/* A checkpoint saved mid-epoch on another number of ranks (elastic nodes):
 * the sampler deals the epoch's permutation round-robin, so the first b
 * batches of every one of W ranks are exactly its first b x W x batch
 * samples, which are the first b x W / W' batches of each of W' ranks.
 * Rounded down to whole accumulation windows: a few samples may be seen
 * twice, none skipped. Files without lt.world_size (older lt) keep b. */
static int64_t rescale_batch(lt_trainer *t, const lt_ckpt_meta *m, int64_t batch) {
    lt_run *r = &t->run;
    int now = r->world.world_size > 0 ? r->world.world_size : 1;
    long was = m->world_size > 0 ? m->world_size : now;
    if (was == now) return batch;
    t->world_changed = true; /* fit clamps b to its epoch's length (a partial last batch rounds up) */
    int64_t b, acc = r->accumulate > 0 ? r->accumulate : 1;
    /* A position past any epoch (an edited file) saturates; fit clamps it. */
    if (__builtin_mul_overflow(batch, (int64_t)was, &b)) b = INT64_MAX;
    b /= now;
    b -= b % acc;
    if (r->world.global_rank == 0) {
        printf("lt: the checkpoint was saved on %ld rank%s, this run has %d: effective batch %lld -> %lld samples per "
               "optimizer step (batch_size %lld x %d ranks x accumulate %lld), lr by optimizer.lr_scaling = %s",
               was, was == 1 ? "" : "s", now, (long long)(r->batch_size * was * acc),
               (long long)(r->batch_size * now * acc), (long long)r->batch_size, now, (long long)acc,
               t->opt.optim.lr_scaling);
        if (batch) printf("; the epoch resumes at batch %lld of %d ranks (was %lld of %ld)", (long long)b, now,
                          (long long)batch, was);
        printf("\n");
    }
    return b;
}

lt_status lt_checkpoint_load(lt_trainer *t, const char *path, bool fit) {
    lt_run *r = &t->run;
    /* Resuming makes this run the file's writer. Evaluating does not: the
     * file may belong to a run still training on another host, where the
     * pids in its temp names mean nothing to us. */
    if (fit) lt_checkpoint_clean_temps(t, path);
    lt_st_file *f;
    char err[1024];
    lt_status st = lt_st_open(path, &f, err, sizeof err);
    if (st != LT_OK) return lt_run_fail(r, st, "--ckpt-path: %s", err);
    lt_ckpt_meta meta;
    st = lt_checkpoint_read_meta(f, path, &meta, err, sizeof err);
    if (st != LT_OK) lt_run_fail(r, st, "%s", err);
    bool full = meta.full;
    if (st == LT_OK) st = lt_checkpoint_check_model(t, path, &meta, r->world.global_rank == 0);
    if (st == LT_OK) st = check_optimizer(r, &meta, path);
    if (st == LT_OK) st = check_names(t, f, path, full);
    lt_model *m = r->model;
    r->params_version++; /* replicas holding copies fetch the loaded values */
    for (int i = 0; st == LT_OK && i < m->nparams; i++)
        st = load_tensor(r, f, path, m->params[i]->name, m->params[i], lt_model_opt_params(m),
                         meta.precision);
    for (int s = 0; st == LT_OK && full && s < r->optim.nstate; s++) {
        for (int i = 0; st == LT_OK && i < m->nparams; i++) {
            char name[192];
            snprintf(name, sizeof name, "optimizer.%s.%s", lt_optim_state_name(&r->optim, s), m->params[i]->name);
            st = load_tensor(r, f, path, name, m->params[i], r->optim.state[s], meta.precision);
        }
    }
    if (st == LT_OK && !full) {
        /* Weights only: the trainer's state stays as setup left it (epoch 0,
         * step 0, a zeroed optimizer, the configured seed). */
        lt_st_close(f);
        st = LT_ACC(r)->synchronize(&r->accel.ctx);
        if (st != LT_OK) return lt_run_hook_failed(r, &r->accel, "synchronize", st);
        if (r->world.global_rank == 0)
            printf("lt: loaded weights from %s, a weights-only file (no lt trainer state)%s\n", path,
                   fit ? ": training starts at epoch 0, step 0 with a fresh optimizer" : "");
        return LT_OK;
    }
    int64_t epoch = meta.epoch, batch = meta.batch_in_epoch, gstep = meta.global_step;
    if (st == LT_OK) {
        lt_status s2 = LT_PREC(r)->load_state(&r->precision.ctx, meta.precision_state);
        if (s2 != LT_OK) st = lt_run_hook_failed(r, &r->precision, "load_state", s2);
    }
    if (st == LT_OK) {
        if (meta.has_best && !strcmp(meta.monitor, t->opt.ckpt.monitor)) {
            t->best_score = meta.best_score;
            t->has_best = true;
        }
        r->epoch = epoch;
        r->batch_in_epoch = rescale_batch(t, &meta, batch);
        r->global_step = gstep;
        r->optim.step = meta.optimizer_step;
        st = LT_ACC(r)->synchronize(&r->accel.ctx);
        if (st != LT_OK) st = lt_run_hook_failed(r, &r->accel, "synchronize", st);
    }
    lt_st_close(f);
    if (st == LT_OK && r->world.global_rank == 0)
        printf("lt: resumed from %s (epoch %lld, batch %lld, step %lld)\n", path, (long long)epoch,
               (long long)batch, (long long)gstep);
    return st;
}

/* The seed a checkpoint was trained with, so a resumed run shuffles and
 * drops out exactly as the original did. A file without lt's format tag has
 * none (*found false): the run keeps its own. Every metadata value and the
 * model are checked here already, the first time a run opens the file. */
lt_status lt_checkpoint_peek(lt_trainer *t, const char *path, uint64_t *seed, bool *found) {
    lt_st_file *f;
    char err[1024];
    *found = false;
    lt_status st = lt_st_open(path, &f, err, sizeof err);
    if (st != LT_OK) return lt_run_fail(&t->run, st, "--ckpt-path: %s", err);
    lt_ckpt_meta m;
    st = lt_checkpoint_read_meta(f, path, &m, err, sizeof err);
    if (st != LT_OK) lt_run_fail(&t->run, st, "%s", err);
    if (st == LT_OK) st = lt_checkpoint_check_model(t, path, &m, false);
    if (st == LT_OK && m.full) {
        *seed = m.seed;
        *found = true;
    }
    lt_st_close(f);
    return st;
}

/* --ckpt-path last / best (Lightning's ckpt_path="last"/"best"): that file in
 * this run's checkpoint directory. Every process resolves it alike before any
 * of them trains, and no rank can save before all have started (the first
 * save follows a training epoch of collectives), so the ranks of one job agree
 * as long as they see the same directory. A missing last starts fit fresh:
 * then one command line serves the first start and every restart (torchrun
 * --max_restarts, SLURM requeue, Kubernetes). Evaluating needs weights, and
 * best is only written with a monitor, so those are refused. */
lt_status lt_checkpoint_resolve(lt_trainer *t, bool fit) {
    lt_run *r = &t->run;
    const char *which = t->ckpt_path;
    bool last = !strcmp(which, "last");
    if (!last && strcmp(which, "best")) return LT_OK;
    char path[sizeof t->ckpt_path];
    if ((size_t)snprintf(path, sizeof path, "%s/%s.safetensors", t->opt.ckpt.dir, which) >= sizeof path)
        return lt_run_fail(r, LT_ERR_INVALID, "--ckpt-path %s: checkpoint.dirpath '%.64s...' is too long to hold "
                           "%s.safetensors; shorten it (or trainer.default_root_dir)", which, t->opt.ckpt.dir, which);
    struct stat sb;
    /* Anything but "no such file" is the loader's to report. */
    if (stat(path, &sb) == 0 || errno != ENOENT) {
        snprintf(t->ckpt_path, sizeof t->ckpt_path, "%s", path);
        return LT_OK;
    }
    if (last && fit) {
        t->ckpt_path[0] = 0;
        t->ckpt_fresh = true; /* said by rank 0 once setup knows the ranks */
        return LT_OK;
    }
    if (last)
        return lt_run_fail(r, LT_ERR_NOT_FOUND, "--ckpt-path last: there is no %s to evaluate; fit writes it after "
                           "each epoch: train first, point checkpoint.dirpath (or trainer.default_root_dir) at the "
                           "run's directory, or name a checkpoint file", path);
    return lt_run_fail(r, LT_ERR_NOT_FOUND, "--ckpt-path best: there is no %s; it is written when checkpoint.monitor "
                       "(%s) improves: train with a monitor, point checkpoint.dirpath (or trainer.default_root_dir) "
                       "at the run's directory, or name a checkpoint file", path,
                       t->opt.ckpt.monitor[0] ? t->opt.ckpt.monitor : "not set in this config");
}

static void clean_one(const char *path) {
    char err[1024];
    size_t n = 0;
    lt_status st = lt_st_remove_stale_temps(path, &n, err, sizeof err);
    if (n) printf("lt: removed %zu temp file%s %s.tmp.<pid> that checkpoint writers killed mid-save left\n", n,
                  n == 1 ? "" : "s", path);
    /* Hygiene, not training: a leftover costs disk space, not results. */
    if (st != LT_OK) lt_log(NULL, LT_LOG_WARN, "%s", err);
}

void lt_checkpoint_clean_temps(lt_trainer *t, const char *path) {
    /* Only rank 0 writes checkpoints, and only on its host do the pids in the
     * temp names mean anything. */
    if (t->run.world.global_rank != 0) return;
    if (path) {
        clean_one(path);
        return;
    }
    static const char *const names[] = {"last", "best"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char p[1200];
        snprintf(p, sizeof p, "%s/%s.safetensors", t->opt.ckpt.dir, names[i]);
        clean_one(p);
    }
}
