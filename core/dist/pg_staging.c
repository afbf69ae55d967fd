/* The staging pool (pg_staging.h). */
#include "pg_staging.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "common/ctx.h"

/* Capacities are rounded up so buckets of slightly different sizes reuse one
 * buffer instead of growing it by a few bytes at a time. */
#define STAGE_GRAIN ((size_t)64 << 10)

struct lt_stage_buf {
    lt_stage_buf *next;
    unsigned char *host; /* alloc_host's, or NULL before first use */
    size_t cap;
    bool busy;
};

struct lt_pg_stage {
    lt_ctx *acc;
    const lt_accelerator_desc *a;
    pthread_mutex_t lock; /* issue and wait may run on different threads */
    lt_stage_buf *bufs;   /* as many as works were ever in flight at once */
};

lt_status lt_stage_new(lt_ctx *accel, lt_pg_stage **out) {
    *out = NULL;
    lt_pg_stage *s = calloc(1, sizeof *s);
    if (!s) return LT_ERR_NOMEM;
    s->acc = accel;
    s->a = (const lt_accelerator_desc *)accel->desc;
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return LT_OK;
}

void lt_stage_free(lt_pg_stage *s) {
    if (!s) return;
    while (s->bufs) {
        lt_stage_buf *n = s->bufs->next;
        if (s->bufs->host) s->a->free_host(s->acc, s->bufs->host);
        free(s->bufs);
        s->bufs = n;
    }
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* Under s->lock: the free buffer that fits best, or the largest free one
 * (to grow), or NULL when every buffer is in flight. */
static lt_stage_buf *pick(lt_pg_stage *s, size_t bytes) {
    lt_stage_buf *fit = NULL, *largest = NULL;
    for (lt_stage_buf *b = s->bufs; b; b = b->next) {
        if (b->busy) continue;
        if (b->cap >= bytes && (!fit || b->cap < fit->cap)) fit = b;
        if (!largest || b->cap > largest->cap) largest = b;
    }
    return fit ? fit : largest;
}

static void release(lt_pg_stage *s, lt_stage_buf *b) {
    pthread_mutex_lock(&s->lock);
    b->busy = false;
    pthread_mutex_unlock(&s->lock);
}

/* A free buffer of at least `bytes` (0 too: the pointer is never NULL),
 * the caller's alone until release: the smallest free one that fits, else
 * the largest free one grown, else a new one. On failure (alloc_host
 * refused) this thread's error says why. */
static lt_status acquire(lt_pg_stage *s, size_t bytes, lt_stage_buf **out) {
    *out = NULL;
    pthread_mutex_lock(&s->lock);
    lt_stage_buf *b = pick(s, bytes);
    if (!b && (b = calloc(1, sizeof *b))) { /* more works in flight than ever before */
        b->next = s->bufs;
        s->bufs = b;
    }
    if (b) b->busy = true;
    pthread_mutex_unlock(&s->lock);
    if (!b) {
        lt_set_error(NULL, "out of memory");
        return LT_ERR_NOMEM;
    }
    if (b->cap < bytes || !b->host) {
        /* Grown outside the lock: the buffer is this caller's alone now. */
        size_t cap = bytes > SIZE_MAX - STAGE_GRAIN ? bytes : (bytes + STAGE_GRAIN - 1) / STAGE_GRAIN * STAGE_GRAIN;
        if (cap == 0) cap = STAGE_GRAIN;
        if (b->host) s->a->free_host(s->acc, b->host);
        b->host = NULL;
        b->cap = 0;
        void *p = NULL;
        lt_status st = s->a->alloc_host(s->acc, cap, &p);
        if (st != LT_OK || !p) {
            const char *why = lt_last_error(s->acc);
            lt_set_error(NULL, "cannot allocate %zu bytes of pinned host memory to stage through: %s", cap,
                         why && *why ? why : lt_status_str(st));
            release(s, b);
            return st != LT_OK ? st : LT_ERR_NOMEM;
        }
        b->host = p;
        b->cap = cap;
    }
    *out = b;
    return LT_OK;
}

/* Copies on the calling thread's stream and waits for it; the failure's
 * message names the copy. */
static lt_status copy(lt_pg_stage *s, void *dst, const void *src, size_t bytes, lt_copy_dir dir) {
    if (!bytes) return LT_OK;
    const char *how = dir == LT_COPY_D2H ? "device to host" : "host to device";
    lt_status st = s->a->copy(s->acc, dst, src, bytes, dir);
    const char *step = "copying";
    if (st == LT_OK) {
        step = "waiting for the copy";
        st = s->a->synchronize(s->acc);
    }
    if (st != LT_OK) {
        const char *why = lt_last_error(s->acc);
        lt_set_error(NULL, "staging through host memory: %s %zu bytes %s failed (%s): %s", step, bytes, how,
                     s->acc->name, why && *why ? why : lt_status_str(st));
    }
    return st;
}

size_t lt_staged_span(lt_staged *x, size_t count, lt_dtype t, size_t blocks) {
    size_t esz = lt_dtype_size(t);
    if (esz && blocks && count > SIZE_MAX / esz / blocks) {
        x->overflow = true;
        return 0;
    }
    return count * esz * blocks;
}

lt_status lt_staged_begin(lt_pg_stage *s, lt_staged *x, bool *local_fault) {
    *local_fault = false;
    x->buf = NULL;
    x->host = NULL;
    if (x->overflow) {
        lt_set_error(NULL, "the buffers' sizes do not fit in memory");
        return LT_ERR_INVALID;
    }
    if ((x->in_bytes && !x->in) || (x->out_bytes && !x->out)) {
        lt_set_error(NULL, "the buffer is NULL");
        return LT_ERR_INVALID;
    }
    lt_status st = acquire(s, x->total, &x->buf);
    if (st == LT_OK) {
        x->host = x->buf->host;
        st = copy(s, x->host + x->in_at, x->in, x->in_bytes, LT_COPY_D2H);
        if (st != LT_OK) {
            release(s, x->buf);
            x->buf = NULL;
        }
    }
    *local_fault = st != LT_OK;
    return st;
}

lt_status lt_staged_end(lt_pg_stage *s, lt_staged *x, bool completed) {
    lt_status st = LT_OK;
    if (completed) st = copy(s, x->out, x->host + x->out_at, x->out_bytes, LT_COPY_H2D);
    release(s, x->buf);
    x->buf = NULL;
    return st;
}
