/* Batch loader: one prefetch thread collates batches into a ring of host
 * buffers while the trainer works on the batch it was handed last.
 *
 * Batch b of an epoch always lives in slot b % prefetch. The thread may fill
 * batch b once the trainer has handed back batch b - prefetch; the trainer
 * hands a batch back by asking for the next one. So the slot the trainer
 * holds is never written, and nothing is allocated after lt_loader_new. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/ctx.h"
#include "data_internal.h"

#define LOADER_ALIGN 64 /* whole cache lines: no false sharing between fields */
#define LOADER_MSG 1024

typedef struct loader_slot {
    void *field[LT_MAX_FIELDS];
    int64_t rows;
    lt_status status;
    char msg[LOADER_MSG];
} loader_slot;

struct lt_loader {
    lt_dataset ds;                 /* borrowed */
    lt_loader_opts o;
    int nfields;
    lt_field_info info[LT_MAX_FIELDS];
    size_t sample_bytes[LT_MAX_FIELDS];
    lt_sampler sampler;
    int64_t nbatches;
    loader_slot *slots;            /* [o.prefetch] */

    pthread_t thread;
    bool sync_ready, thread_started;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;        /* the prefetch thread waits here */
    pthread_cond_t ready_cv;       /* the trainer waits here */
    /* Guarded by mu: */
    bool quit, active, busy, failed;
    int64_t produced;              /* batches collated this epoch */
    int64_t taken;                 /* batches handed to the trainer */
    int64_t released;              /* batches the trainer has handed back */
    char error[LOADER_MSG];        /* last failure seen by lt_loader_next */
};

static lt_status fail(char *err, size_t errlen, lt_status st, const char *msg) {
    if (err && errlen) snprintf(err, errlen, "%s", msg);
    return st;
}

static void *host_alloc(lt_loader *l, size_t bytes) {
    if (l->o.alloc_host) return l->o.alloc_host(l->o.alloc_user, bytes);
    void *p = NULL;
    size_t rounded = (bytes + LOADER_ALIGN - 1) / LOADER_ALIGN * LOADER_ALIGN;
    return posix_memalign(&p, LOADER_ALIGN, rounded ? rounded : LOADER_ALIGN) ? NULL : p;
}

static void host_free(lt_loader *l, void *p) {
    if (!p) return;
    if (l->o.free_host)
        l->o.free_host(l->o.alloc_user, p);
    else
        free(p);
}

/* Options from a caller's possibly older, smaller struct, defaults filled in. */
static lt_status read_opts(lt_loader *l, const lt_loader_opts *o, char *err, size_t errlen) {
    memset(&l->o, 0, sizeof l->o);
    size_t n = o->struct_size < sizeof l->o ? o->struct_size : sizeof l->o;
    if (n < offsetof(lt_loader_opts, batch_size) + sizeof o->batch_size)
        return fail(err, errlen, LT_ERR_INVALID,
                    "loader: options struct_size too small; set it to sizeof(lt_loader_opts)");
    memcpy(&l->o, o, n);
    if (!l->o.num_shards) l->o.num_shards = 1;
    if (!l->o.prefetch) l->o.prefetch = 2;
    char m[256];
    if (l->o.batch_size < 1) {
        snprintf(m, sizeof m, "loader: batch_size %lld: must be at least 1",
                 (long long)l->o.batch_size);
        return fail(err, errlen, LT_ERR_INVALID, m);
    }
    if (l->o.prefetch < 2 || l->o.prefetch > 64) {
        snprintf(m, sizeof m, "loader: prefetch %d: must be 2..64 (one buffer in use, one filling)",
                 l->o.prefetch);
        return fail(err, errlen, LT_ERR_INVALID, m);
    }
    if (!l->o.alloc_host != !l->o.free_host)
        return fail(err, errlen, LT_ERR_INVALID,
                    "loader: set both alloc_host and free_host, or neither");
    return LT_OK;
}

static lt_status read_fields(lt_loader *l, char *err, size_t errlen) {
    char m[256];
    const lt_dataset_iface *it = l->ds.iface;
    l->nfields = it->num_fields(l->ds.self);
    if (l->nfields < 1 || l->nfields > LT_MAX_FIELDS) {
        snprintf(m, sizeof m, "loader: dataset has %d fields; must have 1..%d", l->nfields,
                 LT_MAX_FIELDS);
        return fail(err, errlen, LT_ERR_INVALID, m);
    }
    for (int f = 0; f < l->nfields; f++) {
        lt_field_info *fi = &l->info[f];
        if (it->field_info(l->ds.self, f, fi) != LT_OK || fi->ndim < 0 || fi->ndim > 4 ||
            !lt_dtype_size((lt_dtype)fi->dtype)) {
            snprintf(m, sizeof m, "loader: dataset field %d: bad field info (%s)", f,
                     lt_last_error(NULL));
            return fail(err, errlen, LT_ERR_INVALID, m);
        }
        size_t bytes = lt_dtype_size((lt_dtype)fi->dtype);
        for (int d = 0; d < fi->ndim; d++) {
            if (fi->shape[d] < 1 || __builtin_mul_overflow(bytes, (size_t)fi->shape[d], &bytes)) {
                snprintf(m, sizeof m, "loader: dataset field %d: dimension %d is %lld", f, d,
                         (long long)fi->shape[d]);
                return fail(err, errlen, LT_ERR_INVALID, m);
            }
        }
        l->sample_bytes[f] = bytes;
    }
    return LT_OK;
}

static lt_status alloc_slots(lt_loader *l, char *err, size_t errlen) {
    l->slots = calloc((size_t)l->o.prefetch, sizeof *l->slots);
    if (!l->slots) return fail(err, errlen, LT_ERR_NOMEM, "loader: out of memory");
    for (int s = 0; s < l->o.prefetch; s++)
        for (int f = 0; f < l->nfields; f++) {
            size_t bytes;
            if (__builtin_mul_overflow(l->sample_bytes[f], (size_t)l->o.batch_size, &bytes) ||
                !(l->slots[s].field[f] = host_alloc(l, bytes)))
                return fail(err, errlen, LT_ERR_NOMEM,
                            "loader: cannot allocate batch buffers; lower batch_size or prefetch");
        }
    return LT_OK;
}

static int64_t batch_rows(const lt_loader *l, int64_t b) {
    int64_t left = l->sampler.count - b * l->o.batch_size;
    return left < l->o.batch_size ? left : l->o.batch_size;
}

/* Runs on the prefetch thread without the lock: only this thread writes the
 * slot, and the sampler's indices do not change while `busy` is set. */
static void collate(lt_loader *l, int64_t b, loader_slot *slot) {
    slot->rows = batch_rows(l, b);
    slot->status = LT_OK;
    slot->msg[0] = 0;
    const int64_t *idx = l->sampler.indices + b * l->o.batch_size;
    void *dst[LT_MAX_FIELDS];
    for (int64_t r = 0; r < slot->rows; r++) {
        for (int f = 0; f < l->nfields; f++)
            dst[f] = (char *)slot->field[f] + (size_t)r * l->sample_bytes[f];
        lt_clear_error();
        lt_status st = l->ds.iface->get(l->ds.self, idx[r], dst);
        if (st != LT_OK) {
            const char *why = lt_last_error(NULL);
            snprintf(slot->msg, sizeof slot->msg, "loader: sample %lld: %s", (long long)idx[r],
                     *why ? why : lt_status_str(st));
            slot->status = st;
            return;
        }
    }
}

static bool can_fill(const lt_loader *l) {
    return l->active && !l->failed && l->produced < l->nbatches &&
           l->produced < l->released + l->o.prefetch;
}

static void *prefetch_main(void *arg) {
    lt_loader *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->quit && !can_fill(l)) pthread_cond_wait(&l->work_cv, &l->mu);
        if (l->quit) break;
        int64_t b = l->produced;
        loader_slot *slot = &l->slots[b % l->o.prefetch];
        l->busy = true;
        pthread_mutex_unlock(&l->mu);
        collate(l, b, slot);
        pthread_mutex_lock(&l->mu);
        l->busy = false;
        l->produced = b + 1;
        if (slot->status != LT_OK) l->failed = true;
        pthread_cond_broadcast(&l->ready_cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static lt_status start_thread(lt_loader *l, char *err, size_t errlen) {
    if (pthread_mutex_init(&l->mu, NULL)) return fail(err, errlen, LT_ERR_IO, "loader: mutex");
    pthread_cond_init(&l->work_cv, NULL);
    pthread_cond_init(&l->ready_cv, NULL);
    l->sync_ready = true;
    if (pthread_create(&l->thread, NULL, prefetch_main, l))
        return fail(err, errlen, LT_ERR_IO, "loader: cannot start the prefetch thread");
    l->thread_started = true;
    return LT_OK;
}

static lt_status loader_init(lt_loader *l, const lt_loader_opts *o, char *err, size_t errlen) {
    LT_CHECK(read_opts(l, o, err, errlen));
    LT_CHECK(read_fields(l, err, errlen));
    int64_t n = l->ds.iface->length(l->ds.self);
    lt_status st = lt_sampler_init(&l->sampler, n, l->o.num_shards, l->o.shard, l->o.shuffle,
                                   l->o.seed, l->o.pad);
    if (st != LT_OK) return fail(err, errlen, st, lt_last_error(NULL));
    int64_t bs = l->o.batch_size, count = l->sampler.count;
    l->nbatches = l->o.drop_last ? count / bs : (count + bs - 1) / bs;
    LT_CHECK(alloc_slots(l, err, errlen));
    return start_thread(l, err, errlen);
}

lt_status lt_loader_new(const lt_dataset *ds, const lt_loader_opts *o, lt_loader **out,
                        char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!out) return fail(err, errlen, LT_ERR_INVALID, "loader: NULL output");
    *out = NULL;
    if (!ds || !ds->iface || !o)
        return fail(err, errlen, LT_ERR_INVALID, "loader: NULL dataset or options");
    lt_loader *l = calloc(1, sizeof *l);
    if (!l) return fail(err, errlen, LT_ERR_NOMEM, "loader: out of memory");
    l->ds = *ds;
    lt_status st = loader_init(l, o, err, errlen);
    if (st != LT_OK) {
        lt_loader_free(l);
        return st;
    }
    *out = l;
    return LT_OK;
}

lt_status lt_loader_start_epoch(lt_loader *l, int64_t epoch) {
    pthread_mutex_lock(&l->mu);
    /* Park the thread first: it reads the sampler's indices while busy. */
    l->active = false;
    while (l->busy) pthread_cond_wait(&l->ready_cv, &l->mu);
    lt_status st = lt_sampler_set_epoch(&l->sampler, epoch);
    l->produced = l->taken = l->released = 0;
    l->failed = false;
    l->error[0] = 0;
    l->active = st == LT_OK;
    pthread_cond_signal(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    return st;
}

static void fill_view(const lt_loader *l, const loader_slot *slot, lt_batch_view *b) {
    memset(b, 0, sizeof *b);
    b->rows = slot->rows;
    b->nfields = l->nfields;
    for (int f = 0; f < l->nfields; f++) {
        b->field[f] = slot->field[f];
        b->info[f] = l->info[f];
    }
}

lt_status lt_loader_next(lt_loader *l, lt_batch_view *b) {
    pthread_mutex_lock(&l->mu);
    lt_status st = LT_OK;
    if (!l->active) {
        lt_set_error(NULL, "loader: lt_loader_next before lt_loader_start_epoch");
        st = LT_ERR_STATE;
        goto out;
    }
    /* Asking for the next batch hands the previous one back. */
    l->released = l->taken;
    pthread_cond_signal(&l->work_cv);
    if (l->taken == l->nbatches) {
        st = LT_ERR_NOT_FOUND;
        goto out;
    }
    while (l->produced <= l->taken) pthread_cond_wait(&l->ready_cv, &l->mu);
    const loader_slot *slot = &l->slots[l->taken % l->o.prefetch];
    if (slot->status != LT_OK) {
        /* Not advancing `taken` makes the failure repeat until start_epoch. */
        snprintf(l->error, sizeof l->error, "%s", slot->msg);
        lt_set_error(NULL, "%s", slot->msg);
        st = slot->status;
        goto out;
    }
    fill_view(l, slot, b);
    l->taken++;
out:
    pthread_mutex_unlock(&l->mu);
    return st;
}

int64_t lt_loader_num_batches(const lt_loader *l) { return l->nbatches; }

int64_t lt_loader_num_samples(const lt_loader *l) { return l->sampler.count; }

const char *lt_loader_error(const lt_loader *l) { return l->error; }

void lt_loader_free(lt_loader *l) {
    if (!l) return;
    if (l->thread_started) {
        pthread_mutex_lock(&l->mu);
        l->quit = true;
        pthread_cond_signal(&l->work_cv);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
    }
    if (l->sync_ready) {
        pthread_cond_destroy(&l->work_cv);
        pthread_cond_destroy(&l->ready_cv);
        pthread_mutex_destroy(&l->mu);
    }
    for (int s = 0; l->slots && s < l->o.prefetch; s++)
        for (int f = 0; f < l->nfields; f++) host_free(l, l->slots[s].field[f]);
    free(l->slots);
    lt_sampler_free(&l->sampler);
    free(l);
}
