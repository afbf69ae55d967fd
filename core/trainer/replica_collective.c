/* The module's collectives (lt_step_reduce ...) called from training_step or
 * an eval step on a dp replica: every replica is a rank of the module's
 * world (rank = process rank x replicas + replica), so the replicas of this
 * process meet first, the last to arrive combines their buffers, runs the
 * strategy's collective across processes on the combined one, and hands the
 * result to all. Buffers are host memory, as for the strategy's own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "run_internal.h"
#include "replicas.h"

static const char *const kind_names[] = {"lt_step_reduce", "lt_step_all_gather", "lt_step_broadcast", "lt_step_barrier"};

#define COMBINE(T)                                                                          \
    do {                                                                                    \
        T *d = dst;                                                                         \
        const T *x = src;                                                                   \
        for (size_t i = 0; i < n; i++)                                                      \
            d[i] = op == LT_MIN ? (x[i] < d[i] ? x[i] : d[i])                               \
                 : op == LT_MAX ? (x[i] > d[i] ? x[i] : d[i]) : (T)(d[i] + x[i]);           \
    } while (0)

static bool combine(void *dst, const void *src, size_t n, lt_dtype t, lt_redop op) {
    switch (t) {
    case LT_F32: COMBINE(float); return true;
    case LT_F64: COMBINE(double); return true;
    case LT_I32: COMBINE(int32_t); return true;
    case LT_I64: COMBINE(int64_t); return true;
    default: return false;
    }
}

/* An average over every rank is the sum divided by their number; integers
 * divide as the backends do (C's, toward zero). */
static void divide(void *buf, size_t n, lt_dtype t, int d) {
    if (t == LT_F32) for (size_t i = 0; i < n; i++) ((float *)buf)[i] /= (float)d;
    if (t == LT_F64) for (size_t i = 0; i < n; i++) ((double *)buf)[i] /= d;
    if (t == LT_I32) for (size_t i = 0; i < n; i++) ((int32_t *)buf)[i] /= d;
    if (t == LT_I64) for (size_t i = 0; i < n; i++) ((int64_t *)buf)[i] /= d;
}

/* The last replica to arrive: every argument set is in rs->coll[]. */
static lt_status perform(lt_replica_set *rs, char *err, size_t errlen) {
    lt_run *r = rs->run;
    const lt_replica_coll *a = &rs->coll[0];
    for (int i = 1; i < rs->active; i++) {
        const lt_replica_coll *b = &rs->coll[i];
        if (b->kind != a->kind || b->count != a->count || b->t != a->t || b->op != a->op || b->root != a->root) {
            snprintf(err, errlen, "replica %d called %s (%zu %s, op %d, root %d) while replica 0 called %s "
                     "(%zu %s, op %d, root %d); every replica must make the same collective calls", i,
                     kind_names[b->kind], b->count, lt_dtype_name(b->t) ? lt_dtype_name(b->t) : "-", (int)b->op,
                     b->root, kind_names[a->kind], a->count, lt_dtype_name(a->t) ? lt_dtype_name(a->t) : "-",
                     (int)a->op, a->root);
            return LT_ERR_MISMATCH;
        }
    }
    size_t esz = lt_dtype_size(a->t), n = a->count;
    int k = rs->count;
    lt_status st = LT_OK;
    switch (a->kind) {
    case LT_COLL_REDUCE:
        for (int i = 1; i < rs->active; i++)
            if (!combine(a->buf, rs->coll[i].buf, n, a->t, a->op)) {
                snprintf(err, errlen, "lt_step_reduce on replicas: dtype %s is not f32, f64, i32 or i64",
                         lt_dtype_name(a->t) ? lt_dtype_name(a->t) : "?");
                return LT_ERR_UNSUPPORTED;
            }
        /* AVG: the sum over every replica of every process, then one division
         * (each process is taken to have as many replicas with rows) */
        st = LT_STRAT(r)->reduce(&r->strategy.ctx, r, a->buf, n, a->t, a->op == LT_AVG ? LT_SUM : a->op);
        if (st == LT_OK && a->op == LT_AVG) divide(a->buf, n, a->t, rs->active * r->world.world_size);
        for (int i = 1; st == LT_OK && i < rs->active; i++) memcpy(rs->coll[i].buf, a->buf, n * esz);
        break;
    case LT_COLL_GATHER: {
        char *local = calloc((size_t)k, n * esz); /* idle replicas contribute zeros */
        if (!local) {
            snprintf(err, errlen, "out of memory");
            return LT_ERR_NOMEM;
        }
        for (int i = 0; i < rs->active; i++) memcpy(local + (size_t)i * n * esz, rs->coll[i].send, n * esz);
        st = LT_STRAT(r)->all_gather(&r->strategy.ctx, r, local, a->recv, n * (size_t)k, a->t);
        free(local);
        size_t total = n * (size_t)k * (size_t)r->world.world_size * esz;
        for (int i = 1; st == LT_OK && i < rs->active; i++) memcpy(rs->coll[i].recv, a->recv, total);
        break;
    }
    case LT_COLL_BCAST: {
        int proc = a->root / k, rep = a->root % k;
        if (a->root < 0 || proc >= r->world.world_size || rep >= rs->active) {
            snprintf(err, errlen, "lt_step_broadcast from rank %d: the module's world has %d ranks (%d "
                     "process(es) x %d replicas)%s", a->root, r->world.world_size * k, r->world.world_size, k,
                     rep >= rs->active ? "; that replica has no rows in this batch" : "");
            return LT_ERR_INVALID;
        }
        if (proc == r->world.global_rank && rep != 0) memcpy(a->buf, rs->coll[rep].buf, n * esz);
        st = LT_STRAT(r)->broadcast(&r->strategy.ctx, r, a->buf, n, a->t, proc);
        for (int i = 1; st == LT_OK && i < rs->active; i++) memcpy(rs->coll[i].buf, a->buf, n * esz);
        break;
    }
    case LT_COLL_BARRIER:
        st = LT_STRAT(r)->barrier(&r->strategy.ctx, r);
        break;
    }
    if (st != LT_OK) snprintf(err, errlen, "strategy '%s': %s failed: %s", r->strategy.ctx.name,
                              kind_names[a->kind], lt_last_error(&r->strategy.ctx));
    return st;
}

/* The round cannot complete: some replica left its hook without making
 * the call the others are waiting in. Caller holds coll_mu. */
static void fail_round(lt_replica_set *rs, int left) {
    int in = -1;
    for (int i = 0; i < rs->active && in < 0; i++)
        if (rs->coll_here[i]) in = i;
    const lt_replica_coll *a = &rs->coll[in < 0 ? 0 : in];
    snprintf(rs->coll_error, sizeof rs->coll_error,
             "replica %d returned from its step without calling %s, which replica %d waits in; every "
             "replica must make the same collective calls (a replica that failed says why above)",
             left, kind_names[a->kind], in);
    rs->coll_status = LT_ERR_MISMATCH;
    rs->coll_arrived = 0;
    memset(rs->coll_here, 0, sizeof rs->coll_here[0] * (size_t)rs->count);
    rs->coll_round++;
    pthread_cond_broadcast(&rs->coll_cv);
}

lt_status lt_replicas_collective(lt_step *s, const lt_replica_coll *args) {
    lt_replica_set *rs = s->run->replicas;
    pthread_mutex_lock(&rs->coll_mu);
    uint64_t round = rs->coll_round;
    rs->coll[s->replica] = *args;
    rs->coll_here[s->replica] = true;
    lt_status st;
    if (++rs->coll_arrived + rs->coll_departed == rs->active) {
        if (rs->coll_departed > 0) {
            fail_round(rs, rs->coll_last_left);
        } else {
            st = perform(rs, rs->coll_error, sizeof rs->coll_error);
            rs->coll_status = st;
            rs->coll_arrived = 0;
            memset(rs->coll_here, 0, sizeof rs->coll_here[0] * (size_t)rs->count);
            rs->coll_round++;
            pthread_cond_broadcast(&rs->coll_cv);
        }
        st = rs->coll_status;
    } else {
        while (rs->coll_round == round) pthread_cond_wait(&rs->coll_cv, &rs->coll_mu);
        st = rs->coll_status;
    }
    if (st != LT_OK) lt_step_set_error(s, st, "%s", rs->coll_error);
    pthread_mutex_unlock(&rs->coll_mu);
    return st;
}

void lt_replicas_collectives_begin(lt_replica_set *rs) {
    pthread_mutex_lock(&rs->coll_mu);
    rs->coll_departed = 0;
    rs->coll_arrived = 0;
    memset(rs->coll_here, 0, sizeof rs->coll_here[0] * (size_t)rs->count);
    pthread_mutex_unlock(&rs->coll_mu);
}

void lt_replicas_collectives_leave(lt_replica *rep) {
    lt_replica_set *rs = rep->set;
    pthread_mutex_lock(&rs->coll_mu);
    rs->coll_departed++;
    rs->coll_last_left = rep->index;
    /* the others wait in a call this replica will never make */
    if (rs->coll_arrived > 0 && rs->coll_arrived + rs->coll_departed == rs->active) fail_round(rs, rep->index);
    pthread_mutex_unlock(&rs->coll_mu);
}
