/* The rest of the public trainer API: results and cleanup. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trainer_internal.h"
#include "dist/store_server.h"

lt_status lt_trainer_set_ckpt_path(lt_trainer *t, const char *path) {
    if (!path || !*path)
        return lt_run_fail(&t->run, LT_ERR_INVALID, "checkpoint path (--ckpt-path) is empty; "
                           "name the .safetensors file to resume from or evaluate");
    if (strlen(path) >= sizeof t->ckpt_path)
        return lt_run_fail(&t->run, LT_ERR_INVALID, "checkpoint path (--ckpt-path) '%.64s...' is "
                           "%zu bytes; paths up to %zu bytes are supported",
                           path, strlen(path), sizeof t->ckpt_path - 1);
    snprintf(t->ckpt_path, sizeof t->ckpt_path, "%s", path);
    return LT_OK;
}

bool lt_trainer_metric(const lt_trainer *t, const char *name, double *value) {
    const lt_metric *m = lt_metrics_find(&t->run.metrics, name);
    if (!m) return false;
    *value = m->has_epoch ? m->epoch_value : m->step_value;
    return true;
}

lt_status lt_trainer_params(lt_trainer *t, double *out, size_t count, size_t *total) {
    lt_run *r = &t->run;
    if (!r->model || !r->model->params_flat)
        return lt_run_fail(r, LT_ERR_STATE, "lt_trainer_params: the model does not exist yet; call fit, validate or test first");
    lt_model *m = r->model;
    if (total) *total = m->total;
    size_t n = count < m->total ? count : m->total;
    /* Through the accelerator's cast, so any parameter dtype (f16/bf16 under
     * 16-true, the f32 master under mixed precision) arrives as doubles. */
    void *dev = NULL, *host = malloc(m->total * sizeof(double));
    lt_status st = host ? LT_ACC(r)->alloc(&r->accel.ctx, m->total * sizeof(double), &dev) : LT_ERR_NOMEM;
    if (st == LT_OK) {
        m->k->cast(m->kctx, LT_F64, dev, lt_model_opt_dtype(m), lt_model_opt_params(m), (int64_t)m->total);
        st = LT_ACC(r)->copy(&r->accel.ctx, host, dev, m->total * sizeof(double), LT_COPY_D2H);
    }
    if (st == LT_OK) st = LT_ACC(r)->synchronize(&r->accel.ctx);
    if (st == LT_OK && n) memcpy(out, host, n * sizeof(double)); /* out may be NULL with count 0 */
    if (dev) LT_ACC(r)->free(&r->accel.ctx, dev);
    free(host);
    if (st == LT_ERR_NOMEM && !host) return lt_run_fail(r, LT_ERR_NOMEM, "out of memory");
    return st == LT_OK ? LT_OK : lt_run_hook_failed(r, &r->accel, "copy", st);
}

void lt_trainer_free(lt_trainer *t) {
    if (!t) return;
    lt_run *r = &t->run;
    lt_loader_free(t->train_loader);
    lt_loader_free(t->val_loader);
    lt_loader_free(t->test_loader);
    lt_dataset_destroy(&t->train_ds);
    lt_dataset_destroy(&t->val_ds);
    lt_dataset_destroy(&t->test_ds);
    lt_dataset_destroy(&t->train_base);
    lt_run_teardown_strategy(r);
    lt_checkpoint_release_dir(t);
    /* Whatever setup got to is undone, also after it failed half-way. */
    if (r->module.loaded && r->module_started && LT_MOD(r)->teardown &&
        LT_MOD(r)->teardown(&r->module.ctx) != LT_OK)
        lt_log(&r->module.ctx, LT_LOG_WARN, "teardown failed: %s", lt_last_error(&r->module.ctx));
    if (r->precision_started && LT_PREC(r)->teardown && LT_PREC(r)->teardown(&r->precision.ctx) != LT_OK)
        lt_log(&r->precision.ctx, LT_LOG_WARN, "teardown failed: %s", lt_last_error(&r->precision.ctx));
    lt_run_release_placed_grads(r);
    if (r->model) {
        lt_optim_free(&r->optim, LT_ACC(r), &r->accel.ctx);
        lt_step_destroy(&r->step);
        lt_model_free(r->model);
    }
    if (r->accel_ready) LT_ACC(r)->teardown(&r->accel.ctx);
    if (r->store) lt_store_close(r->store);
    if (r->store_server) lt_store_server_stop(r->store_server);
    lt_metrics_free(&r->metrics);
    free(t->spawn_params);
    free(t->config_text);
    if (r->registry) lt_registry_free(r->registry);
    if (r->config) lt_config_free(r->config);
    free(t);
}
