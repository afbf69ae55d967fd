/* One step over the replicas: split the batch, forward on every replica at
 * once, one node on the root's tape for the whole batch, and its backward:
 * every replica's backward, then their gradients summed into the root's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "run_internal.h"
#include "replicas.h"

/* ---- metrics: logged per replica, merged on the root ---------------------- */

static lt_status replica_log(void *user, const char *name, double value, double weight, unsigned flags) {
    lt_replica *rep = user;
    if (strlen(name) >= LT_METRIC_NAME) {
        lt_set_error(NULL, "metric name '%s' is longer than %d bytes", name, LT_METRIC_NAME - 1);
        return LT_ERR_INVALID;
    }
    if (rep->nlogs == rep->logcap) {
        int cap = rep->logcap ? 2 * rep->logcap : 8;
        lt_replica_log *l = realloc(rep->logs, (size_t)cap * sizeof *l);
        if (!l) {
            lt_set_error(NULL, "out of memory");
            return LT_ERR_NOMEM;
        }
        rep->logs = l;
        rep->logcap = cap;
    }
    lt_replica_log *l = &rep->logs[rep->nlogs++];
    snprintf(l->name, sizeof l->name, "%s", name);
    l->value = value;
    l->weight = weight;
    l->flags = flags;
    return LT_OK;
}

/* One value per metric and step, as one device on the whole batch would log
 * it: the replicas' values weighted by the weights they logged. */
static lt_status merge_logs(lt_replica_set *rs, lt_step *root) {
    lt_run *r = rs->run;
    const lt_replica *first = &rs->rep[0];
    for (int i = 1; i < rs->active; i++) {
        const lt_replica *rep = &rs->rep[i];
        for (int j = 0; j < rep->nlogs || j < first->nlogs; j++) {
            const char *a = j < first->nlogs ? first->logs[j].name : NULL;
            const char *b = j < rep->nlogs ? rep->logs[j].name : NULL;
            if (a && b && !strcmp(a, b)) continue;
            return lt_run_fail(r, LT_ERR_MISMATCH,
                               "replica %d logged %s%s%s as its metric %d but replica 0 logged %s%s%s: "
                               "every replica must log the same metrics in the same order (log a metric on "
                               "every replica, or from training_step_end, which runs once)", i,
                               b ? "'" : "", b ? b : "nothing", b ? "'" : "", j + 1, a ? "'" : "",
                               a ? a : "nothing", a ? "'" : "");
        }
    }
    for (int j = 0; j < first->nlogs; j++) {
        double sum = 0, weight = 0, plain = 0;
        for (int i = 0; i < rs->active; i++) {
            const lt_replica_log *l = &rs->rep[i].logs[j];
            sum += l->value * l->weight;
            weight += l->weight;
            plain += l->value;
        }
        double v = weight > 0 ? sum / weight : plain / rs->active;
        if (root->log_fn) {
            lt_status st = root->log_fn(root->log_user, first->logs[j].name, v, weight, first->logs[j].flags);
            if (st != LT_OK) return lt_run_fail(r, st, "logging '%s': %s", first->logs[j].name, lt_last_error(NULL));
        }
    }
    return LT_OK;
}

/* ---- the phases --------------------------------------------------------- */

/* The replica's slice of the root's batch: in place when the parameters are
 * shared (host memory), else copied to the replica's device. */
static lt_status begin_replica_step(lt_replica *rep, const lt_step *root) {
    lt_replica_set *rs = rep->set;
    lt_step *s = &rep->step;
    LT_CHECK(lt_replica_refresh_params(rep));
    lt_step_reset(s, root->training, root->global_step, root->epoch, root->seed, root->rand_offset);
    s->batch_size = rep->rows;
    s->row0 = rep->row0;
    s->total_rows = rs->total_rows;
    s->log_fn = replica_log;
    s->log_user = rep;
    s->run = rs->run;
    s->replica = rep->index;
    rep->nlogs = 0;
    rep->out = NULL;
    s->ninputs = root->ninputs;
    for (int f = 0; f < root->ninputs; f++) {
        const lt_tensor *x = root->inputs[f];
        size_t row = (size_t)(x->numel / root->batch_size) * lt_dtype_size(x->dtype);
        int64_t shape[LT_MAX_DIMS];
        memcpy(shape, x->shape, sizeof shape);
        shape[0] = rep->rows;
        void *src = (char *)x->data + (size_t)rep->row0 * row, *data = src;
        if (rs->copied && rep->index > 0) {
            data = lt_step_scratch(s, (size_t)rep->rows * row);
            if (!data) return lt_replica_fail(rep, s->status, "%s", s->error);
            lt_status st = LT_ACC(rs->run)->copy(&rep->accel_ctx, data, src, (size_t)rep->rows * row, LT_COPY_D2D);
            if (st != LT_OK) return lt_replica_fail(rep, st, "copying the batch: %s", lt_last_error(&rep->accel_ctx));
        }
        s->inputs[f] = lt_step_wrap(s, data, x->dtype, x->ndim, shape);
    }
    return s->status == LT_OK ? LT_OK : lt_replica_fail(rep, s->status, "%s", s->error);
}

/* The trainer says which model and hook failed; the replica says why. */
static lt_status step_error(lt_replica *rep, lt_status st, const char *hook) {
    const char *msg = rep->step.error[0] ? rep->step.error : lt_last_error(NULL);
    if (*msg) return lt_replica_fail(rep, rep->step.status ? rep->step.status : st ? st : LT_ERR_PLUGIN, "%s", msg);
    return lt_replica_fail(rep, st ? st : LT_ERR_PLUGIN, "%s failed without a message", hook);
}

/* Copied replicas (separate devices) read buffers another thread's kernels
 * wrote: a copy is queued on the calling thread's stream (accelerator.h), so
 * nothing orders it after the writer's work unless the writer waits for its
 * own first. Whoever produced a buffer another replica reads next calls
 * this on its thread: the root after begin_step (the batch), after its
 * optimizer step (the parameters) and before backward (the gathered
 * outputs' gradient); each replica after its forward (its outputs). Shared
 * replicas (host memory) wait for nothing. */
static lt_status sync_for_others(lt_replica_set *rs, lt_ctx *kc) {
    if (!rs->copied) return LT_OK;
    return LT_ACC(rs->run)->synchronize(kc);
}

static lt_ctx *accel_ctx(lt_replica *rep) {
    return rep->index ? &rep->accel_ctx : &rep->set->run->accel.ctx;
}

static lt_ctx *module_ctx(lt_replica *rep) {
    return rep->index == 0 ? &rep->set->run->module.ctx : &rep->module_ctx;
}

static void forward_job(lt_replica *rep, void *arg) {
    const lt_step *root = arg;
    lt_run *r = rep->set->run;
    if (!rep->rows) return;
    if (begin_replica_step(rep, root) != LT_OK) {
        lt_replicas_collectives_leave(rep);
        return;
    }
    lt_clear_error();
    lt_status st = LT_MOD(r)->training_step(module_ctx(rep), &rep->step, &rep->out);
    lt_replicas_collectives_leave(rep);
    if (st != LT_OK || rep->step.status != LT_OK || !rep->out) {
        if (st == LT_OK && rep->step.status == LT_OK) lt_step_fail(&rep->step, "training_step returned no %s",
                                                                   LT_MOD(r)->training_step_end ? "output" : "loss");
        step_error(rep, st, "training_step");
        return;
    }
    if (!LT_MOD(r)->training_step_end) {
        rep->loss = lt_item(&rep->step, rep->out);
        if (rep->step.status != LT_OK) step_error(rep, LT_OK, "training_step");
        return;
    }
    st = sync_for_others(rep->set, accel_ctx(rep)); /* the root gathers the outputs */
    if (st != LT_OK) step_error(rep, st, "training_step");
}

static void eval_job(lt_replica *rep, void *arg) {
    const lt_step *root = arg;
    lt_run *r = rep->set->run;
    if (!rep->rows) return;
    if (begin_replica_step(rep, root) != LT_OK) {
        lt_replicas_collectives_leave(rep);
        return;
    }
    lt_status (*hook)(lt_ctx *, lt_step *) =
        rep->set->stage == LT_STAGE_TEST ? LT_MOD(r)->test_step : LT_MOD(r)->validation_step;
    if (!hook) { /* a strategy asked for a stage the module lacks */
        lt_replica_fail(rep, LT_ERR_UNSUPPORTED, "the module has no %s",
                        rep->set->stage == LT_STAGE_TEST ? "test_step" : "validation_step");
        lt_replicas_collectives_leave(rep);
        return;
    }
    lt_clear_error();
    lt_status st = hook(module_ctx(rep), &rep->step);
    lt_replicas_collectives_leave(rep);
    if (st != LT_OK || rep->step.status != LT_OK)
        step_error(rep, st, rep->set->stage == LT_STAGE_TEST ? "test_step" : "validation_step");
}

static void backward_job(lt_replica *rep, void *arg) {
    (void)arg;
    lt_replica_set *rs = rep->set;
    if (!rep->rows) return;
    lt_step *s = &rep->step;
    /* Replicas 1.. sum a fresh gradient into the root's every micro-batch;
     * the root's own accumulates across them as one device does. */
    if (rep->index > 0) lt_model_zero_grad(rep->model);
    lt_status st;
    if (rs->gathered) {
        const lt_tensor *g = rs->gathered;
        size_t row = (size_t)(g->numel / rs->total_rows) * lt_dtype_size(g->dtype);
        void *src = (char *)g->grad + (size_t)rep->row0 * row;
        rep->out->grad = src;
        if (rs->copied && rep->index > 0) {
            rep->out->grad = lt_step_scratch(s, (size_t)rep->rows * row);
            if (!rep->out->grad) { step_error(rep, s->status, "backward"); return; }
            st = LT_ACC(rs->run)->copy(&rep->accel_ctx, rep->out->grad, src, (size_t)rep->rows * row, LT_COPY_D2D);
            if (st != LT_OK) { lt_replica_fail(rep, st, "copying the output gradient: %s", lt_last_error(&rep->accel_ctx)); return; }
        }
        st = lt_step_backward_from(s, rep->out);
    } else {
        st = lt_step_backward(s, rep->out, rs->seed * (double)rep->rows / (double)rs->total_rows);
    }
    /* what a kernel of this replica parked surfaces here, not a step later */
    if (st == LT_OK) st = LT_ACC(rs->run)->synchronize(accel_ctx(rep));
    if (st != LT_OK) step_error(rep, st, "backward");
}

/* The index of the parameter at flat offset `offset` (offsets ascend in
 * registration order and are the same on every replica). */
static int param_at(const lt_model *m, size_t offset) {
    int lo = 0, hi = m->nparams - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (m->params[mid]->offset <= offset) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* The root's thread passes the summed parameters on to the strategy, in the
 * order they were summed. */
static void hand_over(lt_replica_set *rs) {
    lt_model *root = rs->run->model;
    for (; rs->handed < atomic_load_explicit(&rs->queued, memory_order_acquire); rs->handed++) {
        /* reserved but not written yet: the next call (at the latest the one
         * after the backward) takes it */
        int i = atomic_load_explicit(&rs->queue[rs->handed], memory_order_acquire);
        if (i < 0) break;
        if (rs->strategy_ready)
            rs->strategy_ready(rs->strategy_user, root->params[i]->offset, (size_t)root->params[i]->numel);
    }
}

/* A replica's gradient of one parameter is final. The last replica to say
 * so adds the others' into the root's (host memory: it reads their buffers
 * directly) and queues the parameter; the root's thread hands it on. */
void lt_replica_grad_ready(void *user, size_t offset, size_t count) {
    (void)count;
    lt_replica *rep = user;
    lt_replica_set *rs = rep->set;
    lt_model *root = rs->run->model;
    int i = param_at(root, offset);
    if (atomic_fetch_sub_explicit(&rs->unreported[i], 1, memory_order_acq_rel) == 1) {
        const lt_param *p = root->params[i];
        size_t esz = lt_dtype_size(root->dtype);
        lt_ctx *kc = accel_ctx(rep);
        char *dst = (char *)root->grads_flat + p->offset * esz;
        for (int j = 1; j < rs->active; j++)
            root->k->axpby(kc, root->dtype, p->numel, 1.0, (char *)rs->rep[j].model->grads_flat + p->offset * esz,
                           1.0, dst);
        int slot = atomic_fetch_add_explicit(&rs->queued, 1, memory_order_acq_rel);
        atomic_store_explicit(&rs->queue[slot], i, memory_order_release);
    }
    if (rep->index == 0) hand_over(rs);
}

/* Copied parameters: the replicas' gradients live on other devices; the
 * root gathers each through copy(D2D) and sums after every backward ended. */
static void reduce_copied_job(lt_replica *rep, void *arg) {
    (void)arg;
    lt_replica_set *rs = rep->set;
    lt_run *r = rs->run;
    lt_model *root = r->model;
    size_t total = root->total, esz = lt_dtype_size(root->dtype);
    if (rep->index != 0) return;
    for (int j = 1; j < rs->active; j++) {
        void *tmp = lt_step_scratch(&rep->step, total * esz);
        if (!tmp) { step_error(rep, rep->step.status, "reducing gradients"); return; }
        lt_status st = LT_ACC(r)->copy(&r->accel.ctx, tmp, rs->rep[j].model->grads_flat, total * esz, LT_COPY_D2D);
        if (st != LT_OK) { lt_replica_fail(rep, st, "gathering gradients: %s", lt_last_error(&r->accel.ctx)); return; }
        root->k->axpby(&r->accel.ctx, root->dtype, (int64_t)total, 1.0, tmp, 1.0, root->grads_flat);
    }
    lt_status st = LT_ACC(r)->synchronize(&r->accel.ctx);
    if (st != LT_OK) lt_replica_fail(rep, st, "reducing gradients: %s", lt_last_error(&r->accel.ctx));
}

/* The root's node: every replica's backward at once. With shared
 * parameters each parameter is summed as soon as every replica has its
 * gradient and handed to the strategy (ddp2 starts its buckets) while
 * backward goes on; with copied ones, after it, in one pass. */
static void replicas_bwd(lt_step *s, lt_node *n, double seed) {
    lt_run *r = s->run;
    lt_replica_set *rs = r->replicas;
    lt_model *root = r->model;
    rs->seed = seed;
    rs->gathered = n->in[0];
    if (rs->gathered && !rs->gathered->grad) {
        lt_step_set_error(s, LT_ERR_INVALID, "the loss training_step_end returned does not depend on the "
                                             "gathered outputs; compute it from them");
        return;
    }
    rs->strategy_ready = root->grad_ready;
    rs->strategy_user = root->grad_ready_user;
    for (int i = 0; i < root->nparams; i++) {
        atomic_store(&rs->unreported[i], rs->active);
        atomic_store(&rs->queue[i], -1);
    }
    atomic_store(&rs->queued, 0);
    rs->handed = 0;
    /* copied: nothing is summed during backward, the root reports at the end */
    root->grad_ready = rs->copied ? NULL : lt_replica_grad_ready;
    root->grad_ready_user = &rs->rep[0];
    lt_status st = rs->gathered ? sync_for_others(rs, &r->accel.ctx) : LT_OK; /* its gradient */
    if (st != LT_OK) lt_run_fail(r, st, "backward: %s", lt_last_error(&r->accel.ctx));
    if (st == LT_OK) st = lt_replicas_run(rs, backward_job, NULL, "backward");
    if (st == LT_OK && rs->copied && rs->active > 1) st = lt_replicas_run(rs, reduce_copied_job, NULL, "reducing gradients");
    root->grad_ready = rs->strategy_ready;
    root->grad_ready_user = rs->strategy_user;
    if (st != LT_OK) {
        lt_step_set_error(s, st, "%s", r->error);
        return;
    }
    if (!rs->copied) {
        hand_over(rs); /* what the other replicas summed after the root's backward ended */
        return;
    }
    for (int i = root->nparams - 1; i >= 0 && rs->strategy_ready && s->status == LT_OK; i--)
        rs->strategy_ready(rs->strategy_user, root->params[i]->offset, (size_t)root->params[i]->numel);
}

/* ---- the optimizer step, split over the replicas' threads ------------------ */

static void optimizer_job(lt_replica *rep, void *arg) {
    bool fused = *(const bool *)arg;
    lt_replica_set *rs = rep->set;
    lt_run *r = rs->run;
    lt_model *root = r->model;
    size_t total = root->total;
    size_t per = (total + (size_t)rs->count - 1) / (size_t)rs->count;
    per = (per + 15) & ~(size_t)15; /* whole cache lines per thread */
    size_t lo = (size_t)rep->index * per, hi = lo + per < total ? lo + per : total;
    if (lo >= hi) return;
    lt_ctx *kc = accel_ctx(rep);
    lt_model_optim_apply(root, &r->optim, fused, lo, hi - lo, kc);
    lt_status st = LT_ACC(r)->synchronize(kc);
    if (st != LT_OK) lt_replica_fail(rep, st, "optimizer step: %s", lt_last_error(kc));
}

lt_status lt_replicas_optimizer_step(lt_run *r, bool fused) {
    lt_replica_set *rs = r->replicas;
    lt_model *m = r->model;
    if (rs->copied) { /* the replicas copy the parameters at their next step */
        lt_model_optim_apply(m, &r->optim, fused, 0, m->total, m->kctx);
        lt_status st = sync_for_others(rs, m->kctx);
        return st == LT_OK ? LT_OK : lt_run_fail(r, st, "optimizer step: %s", lt_last_error(m->kctx));
    }
    return lt_replicas_run(rs, optimizer_job, &fused, "optimizer step");
}

/* ---- the API -------------------------------------------------------------- */

static void split(lt_replica_set *rs, int64_t rows) {
    int k = rs->count;
    rs->total_rows = rows;
    rs->active = rows < k ? (int)rows : k;
    int64_t row0 = 0;
    for (int i = 0; i < k; i++) {
        lt_replica *rep = &rs->rep[i];
        rep->rows = i < rs->active ? rows / rs->active + (i < rows % rs->active) : 0;
        rep->row0 = row0;
        row0 += rep->rows;
    }
}

/* The replicas' outputs, rows in batch order, as one tensor of the root. */
static lt_tensor *gather_outputs(lt_replica_set *rs, lt_step *root) {
    lt_run *r = rs->run;
    const lt_tensor *o = rs->rep[0].out;
    for (int i = 1; i < rs->active; i++) {
        const lt_tensor *x = rs->rep[i].out;
        bool same = x->dtype == o->dtype && x->ndim == o->ndim && x->ndim >= 1 && x->shape[0] == rs->rep[i].rows;
        for (int d = 1; same && d < x->ndim; d++) same = x->shape[d] == o->shape[d];
        if (!same || o->ndim < 1 || o->shape[0] != rs->rep[0].rows) {
            lt_run_fail(r, LT_ERR_MISMATCH, "with training_step_end, training_step must return a tensor "
                        "with one row per sample of its slice and the same other dimensions on every "
                        "replica (replica %d differs from replica 0)", i);
            return NULL;
        }
    }
    int64_t shape[LT_MAX_DIMS];
    memcpy(shape, o->shape, sizeof shape);
    shape[0] = rs->total_rows;
    lt_tensor *g = lt_step_new_tensor(root, o->dtype, o->ndim, shape, true);
    if (!g) {
        lt_run_fail(r, root->status, "%s", root->error);
        return NULL;
    }
    size_t row = (size_t)(g->numel / rs->total_rows) * lt_dtype_size(g->dtype);
    for (int i = 0; i < rs->active; i++) {
        const lt_replica *rep = &rs->rep[i];
        lt_status st = LT_ACC(r)->copy(&r->accel.ctx, (char *)g->data + (size_t)rep->row0 * row, rep->out->data,
                                       (size_t)rep->rows * row, LT_COPY_D2D);
        if (st != LT_OK) {
            lt_run_fail(r, st, "gathering the outputs: %s", lt_last_error(&r->accel.ctx));
            return NULL;
        }
    }
    return g;
}

lt_status lt_run_replicas_training_step(lt_run *r, lt_step *root, lt_tensor **loss) {
    lt_replica_set *rs = r->replicas;
    if (!rs) return lt_run_module_training_step(r, root, loss);
    if (!root->training || root->batch_size < 1) {
        lt_set_error(NULL, "lt_run_replicas_training_step: not a training step with a batch");
        return LT_ERR_STATE;
    }
    split(rs, root->batch_size);
    lt_status st = sync_for_others(rs, &r->accel.ctx); /* the batch begin_step placed */
    if (st != LT_OK) return lt_step_set_error(root, st, "training_step: %s", lt_last_error(&r->accel.ctx));
    lt_replicas_collectives_begin(rs);
    st = lt_replicas_run(rs, forward_job, root, "training_step");
    if (st == LT_OK) st = merge_logs(rs, root);
    if (st != LT_OK) return lt_step_set_error(root, st, "%s", r->error);
    lt_tensor *out;
    if (LT_MOD(r)->training_step_end) {
        lt_tensor *g = gather_outputs(rs, root);
        if (!g) return lt_step_set_error(root, root->status ? root->status : LT_ERR_MISMATCH, "%s", r->error);
        lt_node *n = lt_step_record(root, replicas_bwd, g);
        if (n) n->in[0] = g;
        out = g;
        lt_clear_error();
        st = LT_MOD(r)->training_step_end(&r->module.ctx, root, &out);
        if (st != LT_OK && root->status == LT_OK)
            lt_step_set_error(root, st, "training_step_end: %s", *lt_last_error(NULL) ? lt_last_error(NULL) : "failed");
    } else {
        double v = 0;
        for (int i = 0; i < rs->active; i++) v += rs->rep[i].loss * (double)rs->rep[i].rows / (double)rs->total_rows;
        int64_t shape[1] = {1};
        out = lt_step_new_tensor(root, r->model->dtype == LT_F64 ? LT_F64 : LT_F32, 0, shape, true); /* losses are fp32 under 16-bit compute */
        if (out) r->model->k->fill(&r->accel.ctx, out->dtype, out->data, 1, v);
        lt_node *n = lt_step_record(root, replicas_bwd, out);
        if (n) n->in[0] = NULL;
    }
    *loss = out;
    return root->status;
}

lt_status lt_run_replicas_eval_step(lt_run *r, lt_step *root, lt_stage stage) {
    lt_replica_set *rs = r->replicas;
    if (!rs) return lt_run_module_eval_step(r, root, stage);
    rs->stage = stage;
    split(rs, root->batch_size);
    lt_status st = sync_for_others(rs, &r->accel.ctx); /* the batch begin_step placed */
    if (st != LT_OK) return lt_step_set_error(root, st, "evaluation step: %s", lt_last_error(&r->accel.ctx));
    lt_replicas_collectives_begin(rs);
    st = lt_replicas_run(rs, eval_job, root, stage == LT_STAGE_TEST ? "test_step" : "validation_step");
    if (st == LT_OK) st = merge_logs(rs, root);
    if (st != LT_OK) return lt_step_set_error(root, st, "%s", r->error);
    return LT_OK;
}
