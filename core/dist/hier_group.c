/* The hierarchical process group (hier_group.h). */
#include "hier_group.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct lt_hier_job {
    lt_hier *h;
    void *buf;
    size_t count;
    lt_dtype t;
    lt_redop op;
    bool done;
    lt_status st;
    char err[1024];
    lt_hier_job *next;
};

struct lt_hier {
    lt_pg *local, *leaders, *flat;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    lt_hier_job *head, *tail;
    bool stop;
    bool running;         /* the worker is inside a job's stages */
    bool failed;          /* a stage failed: later jobs fail at once, naming it */
    char fail_msg[1024];
};

static lt_status stage(lt_hier_job *j, lt_pg *pg, lt_status st, const char *what) {
    if (st != LT_OK) snprintf(j->err, sizeof j->err, "%s: %s", what, lt_pg_error(pg));
    return st;
}

static lt_status run_job(lt_hier *h, lt_hier_job *j) {
    int local = lt_pg_size(h->local);
    if (local > 1)
        LT_CHECK(stage(j, h->local, lt_pg_allreduce_sync(h->local, j->buf, j->count, j->t, j->op),
                       "hierarchical allreduce, inside the node"));
    if (h->leaders && lt_pg_size(h->leaders) > 1)
        LT_CHECK(stage(j, h->leaders, lt_pg_allreduce_sync(h->leaders, j->buf, j->count, j->t, j->op),
                       "hierarchical allreduce, across the node leaders"));
    if (local > 1)
        LT_CHECK(stage(j, h->local, lt_pg_broadcast_sync(h->local, j->buf, j->count, j->t, 0),
                       "hierarchical allreduce, broadcast inside the node"));
    return LT_OK;
}

static void finish(lt_hier_job *j, lt_status st) { /* under h->mu */
    j->st = st;
    j->done = true;
}

static void *worker(void *arg) {
    lt_hier *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!h->head && !h->stop) pthread_cond_wait(&h->cv, &h->mu);
        if (!h->head) break;
        lt_hier_job *j = h->head;
        h->head = j->next;
        if (!h->head) h->tail = NULL;
        lt_status st;
        if (h->failed || h->stop) {
            st = LT_ERR_ABORTED;
            snprintf(j->err, sizeof j->err, "%s", h->stop ? "the group was aborted" : h->fail_msg);
        } else {
            h->running = true;
            pthread_mutex_unlock(&h->mu);
            st = run_job(h, j);
            pthread_mutex_lock(&h->mu);
            h->running = false;
            if (st != LT_OK && !h->failed) {
                h->failed = true;
                snprintf(h->fail_msg, sizeof h->fail_msg, "%s", j->err);
            }
        }
        finish(j, st);
        pthread_cond_broadcast(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

lt_status lt_hier_new(lt_pg *local, lt_pg *leaders, lt_pg *flat, lt_hier **out) {
    *out = NULL;
    lt_hier *h = calloc(1, sizeof *h);
    if (!h) return LT_ERR_NOMEM;
    h->local = local, h->leaders = leaders, h->flat = flat;
    pthread_mutex_init(&h->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&h->thread, NULL, worker, h)) {
        pthread_cond_destroy(&h->cv);
        pthread_mutex_destroy(&h->mu);
        free(h);
        return LT_ERR_NOMEM;
    }
    *out = h;
    return LT_OK;
}

lt_status lt_hier_allreduce(lt_hier *h, void *buf, size_t count, lt_dtype t, lt_redop op, lt_hier_job **out) {
    lt_hier_job *j = calloc(1, sizeof *j);
    if (!j) return LT_ERR_NOMEM;
    *j = (lt_hier_job){.h = h, .buf = buf, .count = count, .t = t, .op = op};
    pthread_mutex_lock(&h->mu);
    if (h->tail) h->tail->next = j;
    else h->head = j;
    h->tail = j;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    *out = j;
    return LT_OK;
}

lt_status lt_hier_wait(lt_hier_job *j, int64_t timeout_ms, char *err, size_t errlen) {
    lt_hier *h = j->h;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    if (timeout_ms >= 0) {
        until.tv_sec += (time_t)(timeout_ms / 1000);
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&h->mu);
    while (!j->done) {
        if (timeout_ms < 0) pthread_cond_wait(&h->cv, &h->mu);
        else if (pthread_cond_timedwait(&h->cv, &h->mu, &until) == ETIMEDOUT) break;
    }
    if (!j->done) {
        pthread_mutex_unlock(&h->mu);
        snprintf(err, errlen, "hierarchical allreduce still running after %lld ms", (long long)timeout_ms);
        return LT_ERR_TIMEOUT;
    }
    lt_status st = j->st;
    if (st != LT_OK) snprintf(err, errlen, "%s", j->err);
    pthread_mutex_unlock(&h->mu);
    free(j);
    return st;
}

lt_pg *lt_hier_flat(lt_hier *h) { return h->flat; }

bool lt_hier_supports(lt_hier *h, lt_dtype t, lt_redop op) {
    return lt_pg_supports(h->local, t, op) && (!h->leaders || lt_pg_supports(h->leaders, t, op)) &&
           lt_pg_supports(h->flat, t, op);
}

void lt_hier_abort(lt_hier *h) {
    pthread_mutex_lock(&h->mu);
    h->failed = true;
    if (!h->fail_msg[0]) snprintf(h->fail_msg, sizeof h->fail_msg, "the group was aborted");
    pthread_mutex_unlock(&h->mu);
    lt_pg_abort(h->local);
    if (h->leaders) lt_pg_abort(h->leaders);
    lt_pg_abort(h->flat);
}

void lt_hier_free(lt_hier *h) {
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    h->stop = true;
    bool busy = h->head != NULL || h->running;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    if (busy) lt_hier_abort(h); /* a stage under way or queued must not block the join */
    pthread_join(h->thread, NULL);
    lt_pg_destroy(h->local);
    if (h->leaders) lt_pg_destroy(h->leaders);
    lt_pg_destroy(h->flat);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
