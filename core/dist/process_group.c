/* Process groups: a backend group plus a sequence number and a fingerprint
 * (op, count, dtype) per collective. The fast path adds nothing: the check
 * runs only when a wait has lasted a second, or failed. Then each rank writes
 * what it is waiting in to the store and reads the others', so ranks that
 * called different collectives get an error naming both instead of a hang.
 * A group over device memory on a backend of host memory stages each
 * collective through pinned host buffers (pg_staging.h, and the staging
 * section below). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include "common/ctx.h"
#include "hier_group.h"
#include "pg_staging.h"
#include "process_group.h"

#define PG_CHECK_SLICE_MS 1000

struct lt_pg {
    const lt_backend_desc *b;
    lt_ctx bctx;              /* this group's backend context (its own, so groups of
                                 different backends never share one) */
    lt_work *free_works;      /* finished work records, reused: no malloc per step */
    pthread_mutex_t pool_lock; /* issue and wait may run on different threads */
    lt_backend_group *g;
    lt_store *store;          /* this group's own connection (fingerprints) */
    lt_store *bstore;         /* the backend's connection, valid until destroy */
    bool fp_off;              /* the store failed once: no more fingerprint checks */
    bool store_lost;          /* ... during a wait: why, for a cut link's message */
    char store_err[512];
    bool failed;              /* a collective failed: pg->error holds the first cause */
    char name[64];
    char prefix[160];
    int rank, size;
    int *global;              /* the job's rank of each group rank (a subgroup's differ) */
    int64_t timeout_ms;
    int64_t stall_ms;
    uint64_t seq;
    char error[1024];
    lt_hier *hier;            /* a hierarchical group: b and g unused (hier_group.h) */
    lt_pg_stage *stage;       /* device buffers over a host-memory backend; NULL: none */
    lt_mem_kind mem_kind;     /* what the backend was given (LT_MEM_HOST when staged) */
};

struct lt_work {
    lt_pg *pg;
    lt_work *next;            /* in pg->free_works */
    lt_backend_work *w;
    uint64_t seq;             /* 0 for send/recv: only the pair takes part, no check */
    lt_hier_job *job;         /* a hierarchical group's allreduce */
    bool is_staged;           /* holds a pinned buffer of pg->stage: */
    lt_staged staged;         /* the result goes back to the device after the wait */
    char what[96];            /* "allreduce #12 (1024 f32)" */
};

/* Whether the group stages device buffers: only for LT_MEM_DEVICE on a
 * backend that takes host memory only (supports_memory; a table without
 * the hook is treated as its default, host only). */
static lt_status decide_staging(lt_pg *pg, const lt_pg_spec *spec, lt_mem_kind *kind, char *err, size_t errlen) {
    *kind = spec->mem_kind;
    if (spec->mem_kind != LT_MEM_DEVICE) return LT_OK;
    bool device_ok = false;
    if (pg->b->supports_memory && pg->b->supports_memory(&pg->bctx, LT_MEM_DEVICE, &device_ok) != LT_OK) {
        snprintf(err, errlen, "rank %d: process group '%s': %s's supports_memory failed: %s", pg->global[pg->rank],
                 pg->name, pg->bctx.name, lt_last_error(&pg->bctx));
        return LT_ERR_PLUGIN;
    }
    if (device_ok) return LT_OK;
    if (!spec->accel) {
        snprintf(err, errlen, "rank %d: process group '%s': %s takes host memory only and no accelerator was "
                 "given to stage device buffers through", pg->global[pg->rank], pg->name, pg->bctx.name);
        return LT_ERR_INVALID;
    }
    if (lt_stage_new(spec->accel, &pg->stage) != LT_OK) {
        snprintf(err, errlen, "out of memory");
        return LT_ERR_NOMEM;
    }
    *kind = LT_MEM_HOST;
    lt_log(NULL, LT_LOG_DEBUG, "process group '%s': %s takes host memory only: staging device buffers through "
           "pinned host memory", pg->name, pg->bctx.name);
    return LT_OK;
}

lt_status lt_pg_create(const lt_pg_spec *spec, lt_pg **out, char *err, size_t errlen) {
    *out = NULL;
    if (errlen) err[0] = 0;
    lt_pg *pg = calloc(1, sizeof *pg);
    if (!pg) {
        snprintf(err, errlen, "out of memory");
        return LT_ERR_NOMEM;
    }
    pg->rank = spec->rank;
    pg->size = spec->size;
    pg->global = malloc(sizeof *pg->global * (size_t)(spec->size > 0 ? spec->size : 1));
    if (!pg->global) {
        free(pg);
        snprintf(err, errlen, "out of memory");
        return LT_ERR_NOMEM;
    }
    for (int r = 0; r < spec->size; r++) pg->global[r] = spec->global_ranks ? spec->global_ranks[r] : r;
    pg->bctx = *spec->backend_ctx;
    pg->b = (const lt_backend_desc *)pg->bctx.desc;
    snprintf(pg->name, sizeof pg->name, "%s", spec->name ? spec->name : "default");
    const char *gen = getenv("LT_RESTART_COUNT");
    /* Restarted groups use fresh keys: the store outlives the workers. */
    snprintf(pg->prefix, sizeof pg->prefix, "pg/%s/%s/", gen && *gen ? gen : "0", pg->name);
    pg->timeout_ms = spec->timeout_ms;
    pg->stall_ms = spec->stall_ms;
    pthread_mutex_init(&pg->pool_lock, NULL);
    lt_mem_kind kind;
    lt_status st = decide_staging(pg, spec, &kind, err, errlen);
    if (st == LT_OK && (st = lt_store_clone(spec->store, &pg->store)) == LT_OK)
        st = lt_store_clone(spec->store, &pg->bstore);
    if (st != LT_OK && errlen && !*err)
        snprintf(err, errlen, "cannot open another connection to the rendezvous store: %s",
                 lt_store_error(spec->store));
    if (st == LT_OK) {
        /* Fingerprint checks run while a collective already waits: they must
         * not add minutes of their own when the store is gone. */
        lt_store_set_timeout(pg->store, 5000);
        lt_pg_options o = {.struct_size = sizeof o, .prefix = pg->prefix, .timeout_ms = pg->timeout_ms,
                           .mem_kind = kind, .device = spec->device,
                           .connect_timeout_ms = spec->connect_timeout_ms,
                           .main_address = spec->main_address};
        pg->mem_kind = kind;
        st = pg->b->create(&pg->bctx, pg->bstore, pg->rank, pg->size, &o, &pg->g);
        if (st != LT_OK)
            snprintf(err, errlen, "rank %d: creating process group '%s' with %s: %s", pg->global[pg->rank], pg->name,
                     pg->bctx.name, lt_last_error(&pg->bctx));
    }
    if (st != LT_OK) {
        if (pg->bstore) lt_store_close(pg->bstore);
        if (pg->store) lt_store_close(pg->store);
        lt_stage_free(pg->stage);
        pthread_mutex_destroy(&pg->pool_lock);
        free(pg->global);
        free(pg);
        return st;
    }
    lt_log(NULL, LT_LOG_DEBUG, "process group '%s': rank %d of %d over %s", pg->name, pg->rank, pg->size, pg->bctx.name);
    *out = pg;
    return LT_OK;
}

void lt_pg_destroy(lt_pg *pg) {
    if (!pg) return;
    if (pg->hier) {
        lt_hier_free(pg->hier);
    } else {
        pg->b->destroy(&pg->bctx, pg->g);
        lt_store_close(pg->bstore); /* after destroy: the backend may use it until then */
        lt_store_close(pg->store);
        lt_stage_free(pg->stage);  /* after destroy: no work holds a buffer any more */
    }
    while (pg->free_works) {
        lt_work *n = pg->free_works->next;
        free(pg->free_works);
        pg->free_works = n;
    }
    pthread_mutex_destroy(&pg->pool_lock);
    free(pg->global);
    free(pg);
}

lt_status lt_pg_mem_alloc(lt_pg *pg, size_t bytes, lt_pg_mem *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (errlen) err[0] = 0;
    /* A staged group hands the backend pinned copies, never the caller's
     * buffer, so memory of the backend's would gain nothing. */
    if (pg->hier || pg->stage || pg->mem_kind != LT_MEM_HOST || !pg->b->mem_alloc || !pg->b->mem_free)
        return LT_ERR_UNSUPPORTED;
    lt_status st = pg->b->mem_alloc(&pg->bctx, pg->g, bytes, &out->p);
    if (st != LT_OK) {
        snprintf(err, errlen, "rank %d: group memory of %zu bytes from %s on group '%s': %s", pg->global[pg->rank],
                 bytes, pg->bctx.name, pg->name, lt_last_error(&pg->bctx));
        out->p = NULL;
        return st;
    }
    out->b = pg->b;
    out->ctx = pg->bctx;
    return LT_OK;
}

void lt_pg_mem_free(lt_pg_mem *m) {
    if (m->b && m->p) m->b->mem_free(&m->ctx, m->p);
    memset(m, 0, sizeof *m);
}

bool lt_pg_supports(lt_pg *pg, lt_dtype t, lt_redop op) {
    if (pg->hier) return lt_hier_supports(pg->hier, t, op);
    bool ok = true;
    return pg->b->supports(&pg->bctx, t, op, &ok) == LT_OK && ok;
}

const char *lt_pg_backend_name(const lt_pg *pg) { return pg->hier ? "shm+gloo (hierarchical)" : pg->bctx.name; }

int lt_pg_rank(const lt_pg *pg) { return pg->rank; }
int lt_pg_size(const lt_pg *pg) { return pg->size; }
/* A hierarchical group's collectives other than allreduce ran on its flat
 * group, whose message is the one to give. */
const char *lt_pg_error(const lt_pg *pg) {
    return pg->hier && !pg->error[0] ? lt_pg_error(lt_hier_flat(pg->hier)) : pg->error;
}
void lt_pg_abort(lt_pg *pg) {
    if (pg->hier) lt_hier_abort(pg->hier);
    else pg->b->abort(&pg->bctx, pg->g);
}

/* The group's error message: the first failure's. Collectives failing behind
 * it (aborted, "failed earlier") would only hide the cause. */
static void pg_fail(lt_pg *pg, const char *fmt, ...) LT_PRINTF(2, 3);
static void pg_fail(lt_pg *pg, const char *fmt, ...) {
    if (pg->failed) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pg->error, sizeof pg->error, fmt, ap);
    va_end(ap);
    pg->failed = true;
}

static void failure_key(char *key, size_t n, int restart) {
    const char *gen = getenv("LT_RESTART_COUNT");
    if (restart >= 0) snprintf(key, n, LT_FAILURE_KEY "%d", restart);
    else snprintf(key, n, LT_FAILURE_KEY "%s", gen && *gen ? gen : "0");
}

int lt_failure_read(lt_store *s, int restart, char *text, size_t n) {
    char key[64], buf[1100];
    failure_key(key, sizeof key, restart);
    void *v = NULL;
    size_t len = 0;
    if (lt_store_try_get(s, key, &v, &len) != LT_OK) return -1;
    snprintf(buf, sizeof buf, "%.*s", (int)len, (char *)v);
    free(v);
    char *tab = strchr(buf, '\t');
    if (!tab) return -1;
    snprintf(text, n, "%s", tab + 1);
    return atoi(buf);
}

bool lt_pg_failed(const lt_pg *pg) { return pg->failed || (pg->hier && lt_pg_failed(lt_hier_flat(pg->hier))); }

static void post_failure_of(lt_pg *pg, int rank, const char *reason) {
    if (pg->fp_off) return;
    char key[64], val[1100];
    failure_key(key, sizeof key, -1);
    int n = snprintf(val, sizeof val, "%d\t%s", rank, reason);
    void *cur = NULL;
    size_t len = 0;
    /* absent-only: a later failure (often this one's consequence) keeps the first */
    if (lt_store_compare_set(pg->store, key, NULL, 0, val, (size_t)(n < (int)sizeof val ? n : (int)sizeof val - 1),
                             &cur, &len) != LT_OK)
        pg->fp_off = true;
    free(cur);
}

void lt_pg_post_failure(lt_pg *pg, const char *reason) {
    if (pg->hier) lt_pg_post_failure(lt_hier_flat(pg->hier), reason);
    else post_failure_of(pg, pg->global[pg->rank], reason);
}

/* Another rank posted why it failed: its reason replaces the symptom this
 * rank saw (a closed connection, an abort, a fingerprint no longer
 * comparable). */
static bool peer_failure(lt_pg *pg) {
    if (pg->fp_off) return false;
    char text[1100];
    int rank = lt_failure_read(pg->store, -1, text, sizeof text);
    if (rank < 0 || rank == pg->global[pg->rank]) return false;
    pg_fail(pg, "rank %d failed: %s", rank, text);
    return true;
}

/* Collectives are numbered (the fingerprint check compares numbers across
 * ranks); send/recv (peer >= 0) are not, since only the pair takes part. */
static lt_status issue(lt_pg *pg, lt_status st, lt_backend_work *bw, lt_work **out,
                       const char *op, size_t count, lt_dtype t, int peer) {
    uint64_t seq = peer < 0 ? ++pg->seq : 0;
    char what[96];
    if (peer < 0)
        snprintf(what, sizeof what, "%s #%llu (%zu %s)", op, (unsigned long long)seq, count,
                 t ? lt_dtype_name(t) : "-");
    else
        snprintf(what, sizeof what, "%s with rank %d (%zu %s)", op, peer < pg->size ? pg->global[peer] : peer, count, lt_dtype_name(t));
    *out = NULL;
    if (st != LT_OK) {
        pg_fail(pg, "%s on group '%s' (rank %d): %s", what, pg->name, pg->global[pg->rank],
                lt_last_error(&pg->bctx));
        return st;
    }
    pthread_mutex_lock(&pg->pool_lock);
    lt_work *w = pg->free_works;
    if (w) pg->free_works = w->next;
    pthread_mutex_unlock(&pg->pool_lock);
    if (!w) w = malloc(sizeof *w); /* only until the pool holds the most works in flight */
    if (!w) {
        pg->b->wait(&pg->bctx, bw, -1);
        pg->b->free_work(&pg->bctx, bw);
        pg_fail(pg, "%s on group '%s' (rank %d): out of memory", what, pg->name, pg->global[pg->rank]);
        return LT_ERR_NOMEM;
    }
    w->pg = pg;
    w->w = bw;
    w->job = NULL;
    w->is_staged = false;
    w->seq = seq;
    memcpy(w->what, what, sizeof what);
    *out = w;
    return LT_OK;
}

/* Publishes what this rank waits in and compares with the others'. Returns
 * LT_ERR_MISMATCH (message in pg->error) when a rank waits in a different
 * collective under the same sequence number. */
static lt_status check_fingerprints(lt_work *w) {
    lt_pg *pg = w->pg;
    if (w->seq == 0 || pg->fp_off) return LT_OK;
    char key[256], val[160];
    snprintf(key, sizeof key, "%sat/%d", pg->prefix, pg->rank);
    snprintf(val, sizeof val, "%s", w->what);
    if (lt_store_set(pg->store, key, val, strlen(val)) != LT_OK) {
        pg->fp_off = true; /* the store is gone: no more checks */
        pg->store_lost = true;
        snprintf(pg->store_err, sizeof pg->store_err, "%s", lt_store_error(pg->store));
        return LT_OK;
    }
    for (int r = 0; r < pg->size; r++) {
        if (r == pg->rank) continue;
        snprintf(key, sizeof key, "%sat/%d", pg->prefix, r);
        void *v = NULL;
        size_t len = 0;
        if (lt_store_try_get(pg->store, key, &v, &len) != LT_OK) continue;
        char other[160];
        snprintf(other, sizeof other, "%.*s", (int)len, (char *)v);
        free(v);
        const char *hash = strchr(other, '#');
        unsigned long long oseq = hash ? strtoull(hash + 1, NULL, 10) : 0;
        if (oseq == w->seq && strcmp(other, w->what)) {
            /* a rank that failed stops mid-sequence: not a mismatch */
            if (peer_failure(pg)) return LT_ERR_IO;
            /* The same call with another size is most often ranks started
             * with different configs (model sizes differ at the first
             * broadcast of the parameters), not different code paths. */
            size_t op = strcspn(w->what, " #");
            bool same_op = hash && strncmp(other, w->what, op) == 0 && strcspn(other, " #") == op;
            pg_fail(pg, "ranks disagree on collective #%llu of group '%s': rank %d called %s but rank %d called %s; %s",
                    (unsigned long long)w->seq, pg->name, pg->global[pg->rank], w->what, pg->global[r], other,
                    same_op ? "the same call with another size or dtype: the ranks' models or configs differ (start every "
                              "node with the same config and --set flags), or their data or metrics do"
                            : "every rank must make the same collective calls in the same order (e.g. log with "
                              "sync_dist on all ranks)");
            return LT_ERR_MISMATCH;
        }
    }
    return LT_OK;
}

/* This rank has waited stall_ms in w. A peer that is not waiting in the
 * same collective (it published an older one, or none: it never waited a
 * second) is the one holding the group: stopped, hung, or in a step longer
 * than the stall timeout. It is named here, and posted as the job's failure
 * on its behalf, since it cannot post anything itself. */
static lt_status check_stall(lt_work *w, double waited_s) {
    lt_pg *pg = w->pg;
    if (w->seq == 0 || pg->fp_off) return LT_OK;
    for (int r = 0; r < pg->size; r++) {
        if (r == pg->rank) continue;
        char key[256], other[160] = "";
        snprintf(key, sizeof key, "%sat/%d", pg->prefix, r);
        void *v = NULL;
        size_t len = 0;
        unsigned long long oseq = 0;
        if (lt_store_try_get(pg->store, key, &v, &len) == LT_OK) {
            snprintf(other, sizeof other, "%.*s", (int)len, (char *)v);
            free(v);
            const char *hash = strchr(other, '#');
            oseq = hash ? strtoull(hash + 1, NULL, 10) : 0;
        }
        if (oseq >= w->seq) continue;
        char why[700], last[200] = "never waited a second in one";
        if (other[0]) snprintf(last, sizeof last, "last waited long in %s", other);
        snprintf(why, sizeof why, "made no progress for %.0f s (stopped, hung, cut off, or in a step longer "
                 "than launcher.stall_timeout_s = %lld s): rank %d waits in %s on group '%s'; rank %d %s",
                 waited_s, (long long)(pg->stall_ms / 1000), pg->global[pg->rank], w->what, pg->name, pg->global[r], last);
        post_failure_of(pg, pg->global[r], why);
        pg_fail(pg, "rank %d %s", pg->global[r], why);
        return LT_ERR_TIMEOUT;
    }
    return LT_OK;
}

static void recycle(lt_pg *pg, lt_work *w) {
    pthread_mutex_lock(&pg->pool_lock);
    w->next = pg->free_works;
    pg->free_works = w;
    pthread_mutex_unlock(&pg->pool_lock);
}

/* ---- staging: a group over device memory on a backend of host memory ---- */

/* A staging copy failed: this rank's device, not the group, is in trouble,
 * and its peers wait in a collective it will not finish. Its reason is
 * posted for them (their errors name it) and the group aborted, so they
 * fail now instead of at the timeout. */
static void stage_failed(lt_pg *pg) {
    post_failure_of(pg, pg->global[pg->rank], pg->error);
    pg->b->abort(&pg->bctx, pg->g);
}

/* Before the backend's call, on the issuing thread: the input in a pinned
 * buffer. On failure the collective is numbered and failed as a backend's
 * refusal would be. */
static lt_status stage_in(lt_pg *pg, lt_staged *x, lt_work **out, const char *op, size_t count, lt_dtype t, int peer) {
    bool local_fault;
    lt_status st = lt_staged_begin(pg->stage, x, &local_fault);
    if (st == LT_OK) return LT_OK;
    issue(pg, st, NULL, out, op, count, t, peer);
    if (local_fault) stage_failed(pg);
    return st;
}

/* After the backend's call: the work keeps the staged record. */
static lt_status issue_staged(lt_pg *pg, lt_staged *x, lt_status st, lt_backend_work *bw, lt_work **out,
                              const char *op, size_t count, lt_dtype t, int peer) {
    st = issue(pg, st, bw, out, op, count, t, peer);
    if (st != LT_OK) {
        lt_staged_end(pg->stage, x, false);
        return st;
    }
    (*out)->staged = *x;
    (*out)->is_staged = true;
    return LT_OK;
}

/* The end of a staged work, on the thread that waited: the result back to
 * the device (after a success only), the buffer back to the pool. */
static lt_status stage_out(lt_pg *pg, lt_work *w, lt_status st) {
    w->is_staged = false;
    lt_status copy = lt_staged_end(pg->stage, &w->staged, st == LT_OK);
    if (st != LT_OK || copy == LT_OK) return st;
    pg_fail(pg, "rank %d: %s on group '%s' failed: %s", pg->global[pg->rank], w->what, pg->name,
            lt_last_error(&pg->bctx));
    stage_failed(pg);
    return copy;
}

/* A hierarchical allreduce: its stages' groups check fingerprints, stalls
 * and timeouts themselves; this waits for the last of them. */
static lt_status hier_wait(lt_work *w) {
    lt_pg *pg = w->pg;
    char err[1024];
    lt_status st = lt_hier_wait(w->job, -1, err, sizeof err);
    if (st != LT_OK) pg_fail(pg, "rank %d: %s on group '%s' failed: %s", pg->global[pg->rank], w->what, pg->name, err);
    recycle(pg, w);
    return st;
}

lt_status lt_work_wait(lt_work *w) {
    if (!w) return LT_ERR_INVALID;
    if (w->job) return hier_wait(w);
    lt_pg *pg = w->pg;
    double start = lt_now(), deadline = start + (double)pg->timeout_ms / 1000.0;
    lt_status st;
    for (;;) {
        double left = deadline - lt_now();
        int64_t slice = left * 1000 < PG_CHECK_SLICE_MS ? (int64_t)(left * 1000) : PG_CHECK_SLICE_MS;
        if (slice < 0) slice = 0;
        st = pg->b->wait(&pg->bctx, w->w, slice);
        if (st != LT_ERR_TIMEOUT) break;
        lt_status fp = check_fingerprints(w);
        double waited = lt_now() - start;
        if (fp == LT_OK && pg->stall_ms > 0 && waited * 1000 >= (double)pg->stall_ms) {
            if (pg->store_lost) {
                /* A long wait and a store that stopped answering: this host
                 * lost the others, not a peer that is stuck. */
                pg_fail(pg, "rank %d: waiting %.0f s in %s on group '%s', and %s: the network link to "
                        "that host is cut or the host is down", pg->global[pg->rank], waited, w->what, pg->name, pg->store_err);
                fp = LT_ERR_IO;
            } else {
                fp = check_stall(w, waited);
            }
        }
        if (fp != LT_OK) {
            pg->b->abort(&pg->bctx, pg->g); /* the peers' waits fail too */
            st = fp;
            break;
        }
        if (lt_now() >= deadline) {
            pg_fail(pg, "rank %d: %s on group '%s' did not finish within %lld s (strategy.timeout_s); a peer is stuck or gone",
                    pg->global[pg->rank], w->what, pg->name, (long long)(pg->timeout_ms / 1000));
            pg->b->abort(&pg->bctx, pg->g);
            break;
        }
    }
    /* Once a collective of the group failed, the ones queued behind it fail
     * too (aborted, "failed earlier"): the first failure's message and
     * published fingerprint name the cause, so later ones neither publish
     * nor replace them. */
    /* (A backend that compares the collectives itself, as shm does, fails
     * fast with LT_ERR_MISMATCH; the fingerprints below then name both
     * ranks and both calls the same way as for gloo.) */
    if (st != LT_OK && !pg->failed && st != LT_ERR_TIMEOUT) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", lt_last_error(&pg->bctx));
        /* A peer that failed posted why before aborting (see lt_pg_post_failure). */
        if (peer_failure(pg)) goto done;
        /* A backend may fail fast on a mismatch (sizes differ): give the peers
         * a moment to publish theirs so the message names both ranks. */
        lt_status fp = LT_OK;
        for (int i = 0; i < 5 && fp == LT_OK; i++) {
            fp = check_fingerprints(w);
            if (fp == LT_OK) { struct timespec ts = {0, 100 * 1000000L}; nanosleep(&ts, NULL); }
        }
        if (fp == LT_ERR_MISMATCH) st = LT_ERR_MISMATCH;
        else
            pg_fail(pg, "rank %d: %s on group '%s' failed: %s", pg->global[pg->rank], w->what, pg->name,
                    *msg ? msg : lt_status_str(st));
    }
done:
    pg->b->free_work(&pg->bctx, w->w);
    if (w->is_staged) st = stage_out(pg, w, st);
    recycle(pg, w);
    return st;
}

static lt_status hier_allreduce(lt_pg *pg, void *buf, size_t count, lt_dtype t, lt_redop op, lt_work **out) {
    *out = NULL;
    lt_hier_job *job = NULL;
    lt_status st = lt_hier_allreduce(pg->hier, buf, count, t, op, &job);
    pthread_mutex_lock(&pg->pool_lock);
    lt_work *w = st == LT_OK ? pg->free_works : NULL;
    if (w) pg->free_works = w->next;
    pthread_mutex_unlock(&pg->pool_lock);
    if (st == LT_OK && !w) w = malloc(sizeof *w);
    if (st != LT_OK || !w) {
        if (job) lt_hier_wait(job, -1, (char[8]){0}, 8);
        pg_fail(pg, "allreduce on group '%s' (rank %d): out of memory", pg->name, pg->global[pg->rank]);
        return LT_ERR_NOMEM;
    }
    *w = (lt_work){.pg = pg, .job = job, .seq = ++pg->seq};
    snprintf(w->what, sizeof w->what, "allreduce #%llu (%zu %s)", (unsigned long long)w->seq, count, lt_dtype_name(t));
    *out = w;
    return LT_OK;
}

lt_status lt_pg_allreduce(lt_pg *pg, void *buf, size_t count, lt_dtype t, lt_redop op, lt_work **w) {
    if (pg->hier) return hier_allreduce(pg, buf, count, t, op, w);
    lt_backend_work *bw = NULL;
    if (pg->stage) {
        lt_staged s = {.in = buf, .out = buf};
        s.total = s.in_bytes = s.out_bytes = lt_staged_span(&s, count, t, 1);
        LT_CHECK(stage_in(pg, &s, w, "allreduce", count, t, -1));
        lt_status st = pg->b->allreduce(&pg->bctx, pg->g, s.host, count, t, op, &bw);
        return issue_staged(pg, &s, st, bw, w, "allreduce", count, t, -1);
    }
    lt_status st = pg->b->allreduce(&pg->bctx, pg->g, buf, count, t, op, &bw);
    return issue(pg, st, bw, w, "allreduce", count, t, -1);
}

lt_status lt_pg_broadcast(lt_pg *pg, void *buf, size_t count, lt_dtype t, int root, lt_work **w) {
    if (pg->hier) return lt_pg_broadcast(lt_hier_flat(pg->hier), buf, count, t, root, w);
    lt_backend_work *bw = NULL;
    if (pg->stage) { /* the root's bytes go to the host, the others' come back */
        bool is_root = pg->rank == root;
        lt_staged s = {.in = is_root ? buf : NULL, .out = is_root ? NULL : buf};
        s.total = lt_staged_span(&s, count, t, 1);
        *(is_root ? &s.in_bytes : &s.out_bytes) = s.total;
        LT_CHECK(stage_in(pg, &s, w, "broadcast", count, t, -1));
        lt_status st = pg->b->broadcast(&pg->bctx, pg->g, s.host, count, t, root, &bw);
        return issue_staged(pg, &s, st, bw, w, "broadcast", count, t, -1);
    }
    lt_status st = pg->b->broadcast(&pg->bctx, pg->g, buf, count, t, root, &bw);
    return issue(pg, st, bw, w, "broadcast", count, t, -1);
}

lt_status lt_pg_allgather(lt_pg *pg, const void *send, void *recv, size_t count, lt_dtype t, lt_work **w) {
    if (pg->hier) return lt_pg_allgather(lt_hier_flat(pg->hier), send, recv, count, t, w);
    lt_backend_work *bw = NULL;
    if (pg->stage) { /* host: [recv: size blocks | send: one block] */
        lt_staged s = {.in = send, .out = recv};
        s.total = lt_staged_span(&s, count, t, (size_t)pg->size + 1);
        s.in_bytes = lt_staged_span(&s, count, t, 1);
        s.in_at = s.out_bytes = lt_staged_span(&s, count, t, (size_t)pg->size);
        LT_CHECK(stage_in(pg, &s, w, "allgather", count, t, -1));
        lt_status st = pg->b->allgather(&pg->bctx, pg->g, s.host + s.in_at, s.host, count, t, &bw);
        return issue_staged(pg, &s, st, bw, w, "allgather", count, t, -1);
    }
    lt_status st = pg->b->allgather(&pg->bctx, pg->g, send, recv, count, t, &bw);
    return issue(pg, st, bw, w, "allgather", count, t, -1);
}

lt_status lt_pg_reduce_scatter(lt_pg *pg, const void *send, void *recv, size_t count, lt_dtype t,
                               lt_redop op, lt_work **w) {
    if (pg->hier) return lt_pg_reduce_scatter(lt_hier_flat(pg->hier), send, recv, count, t, op, w);
    lt_backend_work *bw = NULL;
    if (pg->stage) { /* host: [send: size blocks | recv: one block] */
        lt_staged s = {.in = send, .out = recv};
        s.total = lt_staged_span(&s, count, t, (size_t)pg->size + 1);
        s.out_bytes = lt_staged_span(&s, count, t, 1);
        s.in_bytes = s.out_at = lt_staged_span(&s, count, t, (size_t)pg->size);
        LT_CHECK(stage_in(pg, &s, w, "reduce_scatter", count, t, -1));
        lt_status st = pg->b->reduce_scatter(&pg->bctx, pg->g, s.host, s.host + s.out_at, count, t, op, &bw);
        return issue_staged(pg, &s, st, bw, w, "reduce_scatter", count, t, -1);
    }
    lt_status st = pg->b->reduce_scatter(&pg->bctx, pg->g, send, recv, count, t, op, &bw);
    return issue(pg, st, bw, w, "reduce_scatter", count, t, -1);
}

lt_status lt_pg_send(lt_pg *pg, const void *buf, size_t count, lt_dtype t, int peer, uint32_t tag, lt_work **w) {
    if (pg->hier) return lt_pg_send(lt_hier_flat(pg->hier), buf, count, t, peer, tag, w);
    lt_backend_work *bw = NULL;
    if (pg->stage) {
        lt_staged s = {.in = buf};
        s.total = s.in_bytes = lt_staged_span(&s, count, t, 1);
        LT_CHECK(stage_in(pg, &s, w, "send", count, t, peer));
        lt_status st = pg->b->send(&pg->bctx, pg->g, s.host, count, t, peer, tag, &bw);
        return issue_staged(pg, &s, st, bw, w, "send", count, t, peer);
    }
    lt_status st = pg->b->send(&pg->bctx, pg->g, buf, count, t, peer, tag, &bw);
    return issue(pg, st, bw, w, "send", count, t, peer);
}

lt_status lt_pg_recv(lt_pg *pg, void *buf, size_t count, lt_dtype t, int peer, uint32_t tag, lt_work **w) {
    if (pg->hier) return lt_pg_recv(lt_hier_flat(pg->hier), buf, count, t, peer, tag, w);
    lt_backend_work *bw = NULL;
    if (pg->stage) {
        lt_staged s = {.out = buf};
        s.total = s.out_bytes = lt_staged_span(&s, count, t, 1);
        LT_CHECK(stage_in(pg, &s, w, "recv", count, t, peer));
        lt_status st = pg->b->recv(&pg->bctx, pg->g, s.host, count, t, peer, tag, &bw);
        return issue_staged(pg, &s, st, bw, w, "recv", count, t, peer);
    }
    lt_status st = pg->b->recv(&pg->bctx, pg->g, buf, count, t, peer, tag, &bw);
    return issue(pg, st, bw, w, "recv", count, t, peer);
}

lt_status lt_pg_barrier(lt_pg *pg, lt_work **w) {
    if (pg->hier) return lt_pg_barrier(lt_hier_flat(pg->hier), w);
    lt_backend_work *bw = NULL;
    lt_status st = pg->b->barrier(&pg->bctx, pg->g, &bw);
    return issue(pg, st, bw, w, "barrier", 0, 0, -1);
}

lt_status lt_pg_allreduce_sync(lt_pg *pg, void *buf, size_t count, lt_dtype t, lt_redop op) {
    lt_work *w;
    LT_CHECK(lt_pg_allreduce(pg, buf, count, t, op, &w));
    return lt_work_wait(w);
}

lt_status lt_pg_broadcast_sync(lt_pg *pg, void *buf, size_t count, lt_dtype t, int root) {
    lt_work *w;
    LT_CHECK(lt_pg_broadcast(pg, buf, count, t, root, &w));
    return lt_work_wait(w);
}

lt_status lt_pg_create_hierarchical(const char *name, lt_pg *local, lt_pg *leaders, lt_pg *flat, lt_pg **out,
                                    char *err, size_t errlen) {
    *out = NULL;
    lt_pg *pg = calloc(1, sizeof *pg);
    int size = lt_pg_size(flat);
    if (pg) pg->global = malloc(sizeof *pg->global * (size_t)size);
    lt_status st = pg && pg->global ? lt_hier_new(local, leaders, flat, &pg->hier) : LT_ERR_NOMEM;
    if (st != LT_OK) {
        if (pg) free(pg->global);
        free(pg);
        snprintf(err, errlen, "out of memory for process group '%s'", name);
        return st;
    }
    pg->rank = lt_pg_rank(flat);
    pg->size = size;
    for (int r = 0; r < size; r++) pg->global[r] = flat->global[r];
    snprintf(pg->name, sizeof pg->name, "%s", name);
    pg->timeout_ms = flat->timeout_ms;
    pthread_mutex_init(&pg->pool_lock, NULL);
    lt_log(NULL, LT_LOG_DEBUG, "process group '%s': rank %d of %d, hierarchical (node over %s, leaders over %s)",
           pg->name, pg->rank, pg->size, lt_pg_backend_name(local), leaders ? lt_pg_backend_name(leaders) : "-");
    *out = pg;
    return LT_OK;
}
