/* Checkpoints as safetensors: parameters by name (so
 * safetensors.torch.load_file gives a state_dict), optimizer state as
 * "optimizer.<state>.<param>", and trainer state in the metadata. Written by
 * rank 0 atomically (lt_st_write); a failed save leaves the old file. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include "trainer_internal.h"
#include "io/safetensors.h"

#define CKPT_FORMAT "lt-checkpoint-1"

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
    lt_model *m = r->model;
    size_t bytes = m->total * lt_dtype_size(m->dtype);
    int nstate = r->optim.nstate, np = m->nparams;
    void *host[3] = {NULL, NULL, NULL};
    lt_st_tensor *ts = calloc((size_t)np * (1 + (size_t)nstate), sizeof *ts);
    char *names = calloc((size_t)np * (1 + (size_t)nstate), 192);
    lt_status st = ts && names ? LT_OK : lt_run_fail(r, LT_ERR_NOMEM, "out of memory saving a checkpoint");
    if (st == LT_OK) st = to_host(r, m->params_flat, bytes, &host[0]);
    for (int s = 0; st == LT_OK && s < nstate; s++) st = to_host(r, r->optim.state[s], bytes, &host[1 + s]);
    size_t n = 0;
    for (int s = 0; st == LT_OK && s <= nstate; s++) {
        for (int i = 0; i < np; i++, n++) {
            char *name = names + n * 192;
            if (s == 0) snprintf(name, 192, "%s", m->params[i]->name);
            else snprintf(name, 192, "optimizer.%s.%s", lt_optim_state_name(&r->optim, s - 1), m->params[i]->name);
            fill_tensor(&ts[n], name, m->params[i], m->dtype, host[s]);
        }
    }
    char epoch[32], batch[32], gstep[32], ostep[32], seed[32], best[64], prec[512] = "";
    if (st == LT_OK) {
        /* Saved at an epoch's end, training resumes with the next epoch. */
        bool at_end = r->batch_in_epoch == 0;
        snprintf(epoch, sizeof epoch, "%" PRId64, r->epoch + (at_end ? 1 : 0));
        snprintf(batch, sizeof batch, "%" PRId64, r->batch_in_epoch);
        snprintf(gstep, sizeof gstep, "%" PRId64, r->global_step);
        snprintf(ostep, sizeof ostep, "%" PRId64, r->optim.step);
        snprintf(seed, sizeof seed, "%" PRIu64, r->seed);
        snprintf(best, sizeof best, "%.17g", t->has_best ? t->best_score : 0.0);
        lt_status ps = LT_PREC(r)->save_state(&r->precision.ctx, prec, sizeof prec);
        if (ps != LT_OK) st = lt_run_hook_failed(r, &r->precision, "save_state", ps);
    }
    if (st == LT_OK) {
        const char *meta[] = {
            "format", CKPT_FORMAT, "lt.model", r->module.ctx.name, "lt.epoch", epoch,
            "lt.batch_in_epoch", batch, "lt.global_step", gstep, "lt.optimizer", r->optim_cfg.name,
            "lt.optimizer_step", ostep, "lt.seed", seed, "lt.precision", r->precision.ctx.name,
            "lt.precision_state", prec, "lt.monitor", t->opt.ckpt.monitor, "lt.best_score", t->has_best ? best : "",
        };
        char err[1024];
        st = lt_mkdirs(r, t->opt.ckpt.dir, "checkpoint.dirpath (or trainer.default_root_dir)");
        if (st == LT_OK) {
            st = lt_st_write(path, ts, n, meta, sizeof meta / sizeof meta[0] / 2, err, sizeof err);
            if (st != LT_OK) lt_run_fail(r, st, "saving checkpoint: %s", err);
        }
    }
    for (int s = 0; s < 3; s++) free(host[s]);
    free(ts);
    free(names);
    return st;
}

static lt_status meta_int(lt_run *r, lt_st_file *f, const char *path, const char *key, int64_t *out) {
    const char *v = lt_st_meta(f, key);
    char *end;
    if (!v || !*v || (*out = strtoll(v, &end, 10), *end) || *out < 0)
        return lt_run_fail(r, LT_ERR_CORRUPT, "checkpoint %s: metadata '%s' is missing, not an integer or negative ('%s'); it was not written by lt's trainer",
                           path, key, v ? v : "");
    return LT_OK;
}

static lt_status load_tensor(lt_run *r, lt_st_file *f, const char *path, const char *name,
                             const lt_param *p, void *dev) {
    const lt_st_tensor *t = lt_st_find(f, name);
    lt_model *m = r->model;
    if (!t) return lt_run_fail(r, LT_ERR_MISMATCH, "checkpoint %s has no tensor '%s'; it was saved from another model or optimizer", path, name);
    bool same = t->dtype == m->dtype && t->ndim == p->ndim;
    for (int i = 0; same && i < p->ndim; i++) same = t->shape[i] == p->shape[i];
    if (!same) {
        char have[96], want[96];
        lt_shape_str(t->ndim, t->shape, have, sizeof have);
        lt_shape_str(p->ndim, p->shape, want, sizeof want);
        return lt_run_fail(r, LT_ERR_MISMATCH, "checkpoint %s: tensor '%s' is %s %s, the model's is %s %s; it was saved from another model or precision",
                           path, name, lt_dtype_name(t->dtype), have, lt_dtype_name(m->dtype), want);
    }
    lt_status st = LT_ACC(r)->copy(&r->accel.ctx, (char *)dev + p->offset * lt_dtype_size(m->dtype), t->data, t->nbytes, LT_COPY_H2D);
    return st == LT_OK ? LT_OK : lt_run_hook_failed(r, &r->accel, "copy", st);
}

lt_status lt_checkpoint_load(lt_trainer *t, const char *path) {
    lt_run *r = &t->run;
    lt_st_file *f;
    char err[1024];
    lt_status st = lt_st_open(path, &f, err, sizeof err);
    if (st != LT_OK) return lt_run_fail(r, st, "--ckpt-path: %s", err);
    const char *fmt = lt_st_meta(f, "format");
    if (!fmt || strcmp(fmt, CKPT_FORMAT)) {
        lt_st_close(f);
        return lt_run_fail(r, LT_ERR_CORRUPT, "checkpoint %s: metadata format is '%s', expected '%s'; pass a checkpoint written by lt",
                           path, fmt ? fmt : "(none)", CKPT_FORMAT);
    }
    lt_model *m = r->model;
    r->params_version++; /* replicas holding copies fetch the loaded values */
    for (int i = 0; st == LT_OK && i < m->nparams; i++)
        st = load_tensor(r, f, path, m->params[i]->name, m->params[i], m->params_flat);
    const char *oname = lt_st_meta(f, "lt.optimizer");
    if (st == LT_OK && (!oname || strcasecmp(oname, r->optim_cfg.name)))
        st = lt_run_fail(r, LT_ERR_MISMATCH, "checkpoint %s was saved with optimizer '%s', this run uses '%s'; use the same optimizer.name to resume",
                         path, oname ? oname : "(none)", r->optim_cfg.name);
    for (int s = 0; st == LT_OK && s < r->optim.nstate; s++) {
        for (int i = 0; st == LT_OK && i < m->nparams; i++) {
            char name[192];
            snprintf(name, sizeof name, "optimizer.%s.%s", lt_optim_state_name(&r->optim, s), m->params[i]->name);
            st = load_tensor(r, f, path, name, m->params[i], r->optim.state[s]);
        }
    }
    int64_t epoch = 0, batch = 0, gstep = 0, ostep = 0;
    if (st == LT_OK) st = meta_int(r, f, path, "lt.epoch", &epoch);
    if (st == LT_OK) st = meta_int(r, f, path, "lt.batch_in_epoch", &batch);
    if (st == LT_OK) st = meta_int(r, f, path, "lt.global_step", &gstep);
    if (st == LT_OK) st = meta_int(r, f, path, "lt.optimizer_step", &ostep);
    if (st == LT_OK) {
        const char *ps = lt_st_meta(f, "lt.precision_state");
        lt_status s2 = LT_PREC(r)->load_state(&r->precision.ctx, ps ? ps : "");
        if (s2 != LT_OK) st = lt_run_hook_failed(r, &r->precision, "load_state", s2);
    }
    if (st == LT_OK) {
        const char *best = lt_st_meta(f, "lt.best_score");
        const char *mon = lt_st_meta(f, "lt.monitor");
        if (best && *best && mon && !strcmp(mon, t->opt.ckpt.monitor)) {
            t->best_score = strtod(best, NULL);
            t->has_best = true;
        }
        r->epoch = epoch;
        r->batch_in_epoch = batch;
        r->global_step = gstep;
        r->optim.step = ostep;
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
 * drops out exactly as the original did. */
lt_status lt_checkpoint_peek_seed(const char *path, uint64_t *seed, char *err, size_t errlen) {
    lt_st_file *f;
    lt_status st = lt_st_open(path, &f, err, errlen);
    if (st != LT_OK) return st;
    const char *v = lt_st_meta(f, "lt.seed");
    if (!v || !*v) {
        snprintf(err, errlen, "checkpoint %s has no lt.seed metadata; pass a checkpoint written by lt", path);
        st = LT_ERR_CORRUPT;
    } else {
        char *end;
        errno = 0;
        *seed = strtoull(v, &end, 10);
        if (*end || errno || *v == '-') {
            snprintf(err, errlen, "checkpoint %s: metadata lt.seed '%s' is not an unsigned integer; pass a checkpoint written by lt", path, v);
            st = LT_ERR_CORRUPT;
        }
    }
    lt_st_close(f);
    return st;
}
