/* lt_trainer_check_model: the module's init on a model that never gets
 * weights. A parameter table has no ranges (lt_param_spec: name, type,
 * default, help), so a module judges its parameters in init; running init
 * here puts that judgement into --check. Init only declares layers and
 * parameters (lt/module.h), so nothing is allocated on a device or drawn at
 * random: the kernels stay NULL and no accelerator is set up. */
#include <stdio.h>
#include <string.h>
#include "trainer_internal.h"
#include "model_check.h"
#include "io/safetensors.h"

lt_status lt_run_init_failed(lt_run *r, const lt_ctx *ctx, const lt_model *m, lt_status st) {
    char set[512];
    const char *why = m && m->error[0] ? m->error : lt_last_error(ctx);
    lt_param_set_list(ctx, set, sizeof set);
    return lt_run_fail(r, st, "model '%s': init failed: %s%s%s", ctx->name,
                       *why ? why : lt_status_str(st), *set ? "; parameters set: " : "", set);
}

/* Runs the module's init on a model without weights; with ckpt, then
 * matches the file's tensors against the parameters init declared, as the
 * load would (only those the file has: check_names judges the rest). */
static lt_status init_unweighted(lt_trainer *t, const char *ckpt) {
    lt_run *r = &t->run;
    if (!r->module.loaded) return LT_OK;
    lt_precision_dtypes dt = {.struct_size = sizeof dt};
    lt_status st = LT_PREC(r)->dtypes(&r->precision.ctx, &dt);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->precision, "dtypes", st);
    lt_model *m = lt_model_new((lt_dtype)dt.compute, r->accel.desc, &r->accel.ctx, NULL);
    if (!m) return lt_run_fail(r, LT_ERR_NOMEM, "out of memory");
    /* A copy of the context: the state init makes is this model's, and
     * teardown (owed whenever init ran) frees it. */
    lt_ctx c = r->module.ctx;
    c.state = NULL;
    memset(c.keyed, 0, sizeof c.keyed);
    lt_clear_error();
    st = LT_MOD(r)->init(&c, m);
    if (st == LT_OK && m->status != LT_OK) st = m->status;
    if (st != LT_OK) lt_run_init_failed(r, &c, m, st); /* before teardown may set another error */
    if (LT_MOD(r)->teardown) LT_MOD(r)->teardown(&c);
    lt_st_file *f = NULL;
    char err[1024];
    if (st == LT_OK && ckpt && (st = lt_st_open(ckpt, &f, err, sizeof err)) != LT_OK)
        lt_run_fail(r, st, "--ckpt-path: %s", err);
    lt_ckpt_meta meta = {0};
    if (f && lt_checkpoint_read_meta(f, ckpt, &meta, err, sizeof err) != LT_OK) meta.precision = NULL;
    for (int i = 0; f && st == LT_OK && i < m->nparams; i++) {
        const lt_st_tensor *ten = lt_st_find(f, m->params[i]->name);
        if (ten) st = lt_checkpoint_match_tensor(r, ckpt, ten, m->params[i], (lt_dtype)dt.param,
                                                 meta.precision);
    }
    if (f) lt_st_close(f);
    lt_model_free(m);
    return st;
}

lt_status lt_trainer_check_model(lt_trainer *t) { return init_unweighted(t, NULL); }

/* The checkpoint a run would load: named, found, with a header lt can read,
 * metadata values lt writes, this run's model in lt.model, and tensors of
 * the model's sizes and dtype. "last" with no file yet is fine for a fit,
 * which then starts fresh. */
lt_status lt_trainer_check_ckpt(lt_trainer *t, const char *path, bool fit) {
    if (!path) return LT_OK;
    LT_CHECK(lt_trainer_set_ckpt_path(t, path));
    LT_CHECK(lt_checkpoint_resolve(t, fit));
    if (!t->ckpt_path[0]) return LT_OK;
    uint64_t seed;
    bool found;
    LT_CHECK(lt_checkpoint_peek(t, t->ckpt_path, &seed, &found));
    return init_unweighted(t, t->ckpt_path);
}

lt_status lt_trainer_check_data(lt_trainer *t) {
    lt_run *r = &t->run;
    /* A module with setup_data may bring its own data: only a run knows. */
    if (!r->module.loaded || LT_MOD(r)->setup_data) return LT_OK;
    char img[1200], lab[1200];
    LT_CHECK(lt_trainer_split_paths(t, "train", img, lab));
    return lt_trainer_split_paths(t, "t10k", img, lab);
}
