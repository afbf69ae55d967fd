/* The shm backend: collectives of ranks on one host through one POSIX shared
 * memory segment per group.
 *
 * Segment: a header page (barrier words, abort word, attach count, pids)
 * followed by one slot of slot_bytes per rank. Each slot is split in two
 * halves used by alternate chunk steps ("phases"), so a step needs no
 * trailing barrier: before a rank writes half p again (two steps later) it
 * has passed a barrier of the step in between, which every rank enters only
 * after it finished reading half p.
 *
 * Each group has one worker thread that runs the queued collectives in issue
 * order; the issuing hooks only enqueue. Point-to-point send and recv use
 * rings of their own after the slots and are moved by the waiting thread
 * (shm_p2p.h), never queued behind collectives. The barrier is sense-reversing on a shared
 * counter: waiters spin ~20 us, then futex-wait (shared futex) in 10 ms slices,
 * checking the abort word, their deadline and whether a peer process died. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shm_hooks.h"
#include "shm_mem.h"
#include "shm_p2p.h"

#define SHM_MAGIC 0x6c74736d68300001ull
#define MAX_WORLD 1024
#define SPIN_NS 20000
#define SLICE_NS 10000000L

typedef struct shm_hdr {
    _Atomic uint64_t magic; /* set by rank 0 once the header is filled in */
    uint64_t slot_bytes;
    int32_t world;
    _Atomic uint32_t attached;
    _Atomic uint32_t bar_count;
    _Atomic uint32_t bar_sense; /* the futex word */
    _Atomic uint32_t aborted;   /* 0, or 1 + the rank that aborted or failed */
    unsigned char pad[128 - 36];
    int32_t pids[]; /* world entries, at offset 128; then the fingerprints */
} shm_hdr;
_Static_assert(offsetof(shm_hdr, pids) == 128, "shm header layout");

/* What a rank is about to run; every rank publishes its own before the first
 * barrier of each op and compares the others' after it, so ranks that issue
 * different collectives fail with LT_ERR_MISMATCH instead of pairing their
 * barriers silently. Two sets, by the op's parity: a rank writes set p again
 * (two ops later) only after a barrier of the op in between, which every rank
 * enters after it compared set p. */
typedef struct shm_fp {
    uint64_t seq, count;
    int32_t kind, dtype, op, root;
    int64_t mem_id;   /* an allreduce in group memory: the allocation, else -1 */
    uint64_t mem_off; /* ... and the buffer's offset in it */
} shm_fp;

static size_t fp_offset(int world) { return (128 + (size_t)world * sizeof(int32_t) + 63) & ~(size_t)63; }
static size_t hdr_bytes(int world) {
    return (fp_offset(world) + 2 * (size_t)world * sizeof(shm_fp) + 4095) & ~(size_t)4095;
}

typedef enum { K_ALLREDUCE, K_BROADCAST, K_ALLGATHER, K_REDUCE_SCATTER, K_BARRIER, K_SEND, K_RECV } kind;
static const char *const kind_names[] = {"allreduce", "broadcast", "allgather", "reduce_scatter",
                                         "barrier", "send", "recv"};

struct lt_backend_work {
    struct lt_backend_group *g;
    kind k;
    bool fp_checked; /* worker: the peers' fingerprints were compared */
    void *buf;        /* allreduce/broadcast buffer, allgather/reduce_scatter recv */
    const void *send; /* allgather/reduce_scatter */
    size_t count;
    lt_dtype dtype;
    lt_redop op;
    int root;
    unsigned long long seq;
    shm_p2p_op *p2p;  /* send/recv: its ring progress (under g->p2p_mu) */
    const shm_mem *mem; /* allreduce: the group memory holding buf (in place), or NULL */
    size_t mem_off;
    /* under g->mu */
    bool done, orphan;
    lt_status st;
    char err[384];
    struct lt_backend_work *next;
};

struct lt_backend_group {
    int rank, world;
    char name[160];
    int64_t timeout_ms;
    shm_hdr *hdr;
    size_t map_len, hdr_len;
    unsigned char *slots;
    size_t slot_bytes, half;
    /* worker-only */
    uint32_t sense;
    unsigned phase;
    /* shared with the issuing and waiting threads */
    pthread_t thr;
    bool thr_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct lt_backend_work *head, *tail;
    bool stop;
    _Atomic int local_abort; /* abort() or destroy() on this rank */
    bool failed;             /* under mu: a work failed; later ones fail fast */
    char fail_msg[400];
    unsigned long long seq;
    _Atomic int refs;
    bool want_rt;
    shm_p2p *p2p;             /* the send/recv rings */
    lt_store *store;          /* create's client, valid until destroy: group memory's names */
    uint64_t nmem;            /* group memory allocations so far (issuing thread) */
    pthread_mutex_t p2p_mu;   /* the waiting thread moves bytes; abort fails ops */
};

/* ---- small helpers ---- */

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t val, long ns) {
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void group_unref(struct lt_backend_group *g) {
    if (atomic_fetch_sub(&g->refs, 1) != 1) return;
    pthread_mutex_destroy(&g->mu);
    pthread_mutex_destroy(&g->p2p_mu);
    pthread_cond_destroy(&g->cv);
    shm_p2p_free(g->p2p);
    free(g);
}

#define OPT_HAS(o, f) (offsetof(lt_pg_options, f) + sizeof((o)->f) <= (o)->struct_size)

/* ---- the barrier ---- */

/* Error of the op `w` (message into w->err). */
static lt_status op_fail(struct lt_backend_work *w, lt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static lt_status op_fail(struct lt_backend_work *w, lt_status st, const char *fmt, ...) {
    struct lt_backend_group *g = w->g;
    int n = snprintf(w->err, sizeof w->err, "shm %s #%llu on group '%s': ", kind_names[w->k], w->seq,
                     g->name);
    if (n < 0 || (size_t)n >= sizeof w->err) n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err + n, sizeof w->err - (size_t)n, fmt, ap);
    va_end(ap);
    return st;
}

static lt_status check_abort(struct lt_backend_work *w) {
    struct lt_backend_group *g = w->g;
    if (atomic_load(&g->local_abort)) return op_fail(w, LT_ERR_ABORTED, "the group was aborted");
    uint32_t a = atomic_load_explicit(&g->hdr->aborted, memory_order_acquire);
    if (a) {
        if ((int)a - 1 == g->rank) return op_fail(w, LT_ERR_ABORTED, "the group was aborted");
        return op_fail(w, LT_ERR_ABORTED, "peer rank %d aborted the group (or failed)", (int)a - 1);
    }
    return LT_OK;
}

/* Whether process p has exited: gone, or a zombie not yet reaped. */
static bool pid_dead(pid_t p) {
    if (kill(p, 0) != 0) return errno == ESRCH;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)p);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *rp = strrchr(buf, ')'); /* the command name may hold spaces and ')' */
    return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

/* A peer process that has exited, or -1. */
static int dead_peer(struct lt_backend_group *g) {
    for (int r = 0; r < g->world; r++) {
        if (r == g->rank) continue;
        pid_t p = g->hdr->pids[r];
        if (p > 0 && pid_dead(p)) return r;
    }
    return -1;
}

static shm_fp *fp_at(struct lt_backend_group *g, unsigned long long seq, int r) {
    return (shm_fp *)((unsigned char *)g->hdr + fp_offset(g->world)) + (seq & 1) * (size_t)g->world + r;
}

static void fp_describe(char *out, size_t len, const shm_fp *f) {
    const char *name = f->kind >= 0 && f->kind <= K_BARRIER ? kind_names[f->kind] : "?";
    const char *dt = lt_dtype_name((lt_dtype)f->dtype);
    int n = snprintf(out, len, "%s #%llu (%llu x %s, op %d, root %d)", name, (unsigned long long)f->seq,
                     (unsigned long long)f->count, dt ? dt : "?", f->op, f->root);
    if (f->mem_id >= 0 && n > 0 && (size_t)n < len)
        snprintf(out + n, len - (size_t)n, " in group memory %lld at byte %llu", (long long)f->mem_id,
                 (unsigned long long)f->mem_off);
}

static lt_status fp_compare(struct lt_backend_work *w) {
    struct lt_backend_group *g = w->g;
    w->fp_checked = true;
    const shm_fp *mine = fp_at(g, w->seq, g->rank);
    for (int r = 0; r < g->world; r++) {
        const shm_fp *f = fp_at(g, w->seq, r);
        if (r == g->rank || !memcmp(f, mine, sizeof *f)) continue;
        char a[200], b[200];
        fp_describe(a, sizeof a, f);
        fp_describe(b, sizeof b, mine);
        return op_fail(w, LT_ERR_MISMATCH, "rank %d runs %s while rank %d (this rank) runs %s", r, a, g->rank, b);
    }
    return LT_OK;
}

static lt_status barrier_raw(struct lt_backend_work *w, int64_t deadline);

/* A barrier; after the op's first one, the fingerprints are compared. */
static lt_status barrier(struct lt_backend_work *w, int64_t deadline) {
    LT_CHECK(barrier_raw(w, deadline));
    return w->fp_checked ? LT_OK : fp_compare(w);
}

static lt_status barrier_raw(struct lt_backend_work *w, int64_t deadline) {
    struct lt_backend_group *g = w->g;
    shm_hdr *h = g->hdr;
    LT_CHECK(check_abort(w));
    uint32_t want = g->sense ^= 1u;
    if (atomic_fetch_add_explicit(&h->bar_count, 1, memory_order_acq_rel) + 1 == (uint32_t)g->world) {
        atomic_store_explicit(&h->bar_count, 0, memory_order_relaxed);
        atomic_store_explicit(&h->bar_sense, want, memory_order_release);
        futex_wake_all(&h->bar_sense);
        return LT_OK;
    }
    int64_t t0 = now_ns();
    for (unsigned i = 0;; i++) {
        if (atomic_load_explicit(&h->bar_sense, memory_order_acquire) == want) return LT_OK;
        cpu_pause();
        if ((i & 63) == 63 && now_ns() - t0 > SPIN_NS) break;
    }
    int64_t last_pid_check = 0;
    for (;;) {
        if (atomic_load_explicit(&h->bar_sense, memory_order_acquire) == want) return LT_OK;
        LT_CHECK(check_abort(w));
        int64_t t = now_ns();
        if (t >= deadline) {
            if (atomic_load_explicit(&h->bar_sense, memory_order_acquire) == want) return LT_OK;
            return op_fail(w, LT_ERR_TIMEOUT, "timed out after %lld ms waiting for peers",
                           (long long)g->timeout_ms);
        }
        if (t - last_pid_check > 100000000) {
            last_pid_check = t;
            int r = dead_peer(g);
            if (r >= 0 && atomic_load_explicit(&h->bar_sense, memory_order_acquire) != want)
                return op_fail(w, LT_ERR_IO, "peer rank %d (pid %d) exited", r, (int)h->pids[r]);
        }
        long slice = deadline - t < SLICE_NS ? (long)(deadline - t) : SLICE_NS;
        futex_wait(&h->bar_sense, want ^ 1u, slice);
    }
}

/* ---- the collectives (worker thread) ---- */

static inline unsigned char *half_of(struct lt_backend_group *g, int r) {
    return g->slots + (size_t)r * g->slot_bytes + (size_t)(g->phase & 1) * g->half;
}

static void split(size_t c, int world, int r, size_t *lo, size_t *hi) {
    *lo = c * (size_t)r / (size_t)world;
    *hi = c * (size_t)(r + 1) / (size_t)world;
}

static lt_status run_allreduce(struct lt_backend_work *w, int64_t deadline) {
    struct lt_backend_group *g = w->g;
    size_t esz = lt_dtype_size(w->dtype), per = g->half / esz;
    ltshm_combine_fn comb = ltshm_combine(w->dtype, w->op);
    unsigned char *buf = w->buf;
    for (size_t off = 0; off < w->count; off += per) {
        size_t c = w->count - off < per ? w->count - off : per;
        memcpy(half_of(g, g->rank), buf + off * esz, c * esz);
        LT_CHECK(barrier(w, deadline));
        size_t lo, hi;
        split(c, g->world, g->rank, &lo, &hi);
        unsigned char *mine = half_of(g, g->rank) + lo * esz;
        for (int r = 0; r < g->world; r++)
            if (r != g->rank) comb(mine, half_of(g, r) + lo * esz, hi - lo);
        if (w->op == LT_AVG) ltshm_divide(mine, hi - lo, w->dtype, g->world);
        LT_CHECK(barrier(w, deadline));
        for (int r = 0; r < g->world; r++) {
            split(c, g->world, r, &lo, &hi);
            memcpy(buf + (off + lo) * esz, half_of(g, r) + lo * esz, (hi - lo) * esz);
        }
        g->phase++;
    }
    return LT_OK;
}

/* The buffer lies in group memory on every rank (the fingerprints say the
 * same allocation and offset): after a barrier every rank's input is in its
 * slice; each rank reduces its share of the elements reading every slice,
 * in the order the slot path uses (its own first, then the others by rank,
 * so both paths give the same bits), and writes the result into every
 * slice; a second barrier and every slice holds the whole result. No
 * copies in or out, no chunks. */
static lt_status run_allreduce_mem(struct lt_backend_work *w, int64_t deadline) {
    struct lt_backend_group *g = w->g;
    const shm_mem *m = w->mem;
    size_t esz = lt_dtype_size(w->dtype), lo, hi;
    LT_CHECK(barrier(w, deadline));
    split(w->count, g->world, g->rank, &lo, &hi);
    size_t at = w->mem_off + lo * esz, n = hi - lo;
    unsigned char *mine = shm_mem_at(m, g->rank, at);
    if (n && g->world == 2 && w->dtype == LT_F32 && (w->op == LT_SUM || w->op == LT_AVG)) {
        ltshm_sum2_f32((float *)mine, (float *)shm_mem_at(m, 1 - g->rank, at), n, w->op == LT_AVG);
    } else if (n) {
        ltshm_combine_fn comb = ltshm_combine(w->dtype, w->op);
        for (int r = 0; r < g->world; r++)
            if (r != g->rank) comb(mine, shm_mem_at(m, r, at), n);
        if (w->op == LT_AVG) ltshm_divide(mine, n, w->dtype, g->world);
        for (int r = 0; r < g->world; r++)
            if (r != g->rank) memcpy(shm_mem_at(m, r, at), mine, n * esz);
    }
    return barrier(w, deadline);
}

static lt_status run_broadcast(struct lt_backend_work *w, int64_t deadline) {
    struct lt_backend_group *g = w->g;
    size_t esz = lt_dtype_size(w->dtype), per = g->half / esz;
    unsigned char *buf = w->buf;
    for (size_t off = 0; off < w->count; off += per) {
        size_t c = w->count - off < per ? w->count - off : per;
        if (g->rank == w->root) memcpy(half_of(g, g->rank), buf + off * esz, c * esz);
        LT_CHECK(barrier(w, deadline));
        if (g->rank != w->root) memcpy(buf + off * esz, half_of(g, w->root), c * esz);
        g->phase++;
    }
    return LT_OK;
}

static lt_status run_allgather(struct lt_backend_work *w, int64_t deadline) {
    struct lt_backend_group *g = w->g;
    size_t esz = lt_dtype_size(w->dtype), per = g->half / esz;
    const unsigned char *send = w->send;
    unsigned char *recv = w->buf;
    for (size_t off = 0; off < w->count; off += per) {
        size_t c = w->count - off < per ? w->count - off : per;
        memcpy(half_of(g, g->rank), send + off * esz, c * esz);
        LT_CHECK(barrier(w, deadline));
        for (int r = 0; r < g->world; r++) {
            unsigned char *dst = recv + ((size_t)r * w->count + off) * esz;
            if (dst != send + off * esz) memcpy(dst, half_of(g, r), c * esz);
        }
        g->phase++;
    }
    return LT_OK;
}

static lt_status run_reduce_scatter(struct lt_backend_work *w, int64_t deadline) {
    struct lt_backend_group *g = w->g;
    size_t esz = lt_dtype_size(w->dtype), per = g->half / esz / (size_t)g->world;
    ltshm_combine_fn comb = ltshm_combine(w->dtype, w->op);
    const unsigned char *send = w->send;
    unsigned char *recv = w->buf;
    for (size_t off = 0; off < w->count; off += per) {
        size_t c = w->count - off < per ? w->count - off : per;
        unsigned char *mine = half_of(g, g->rank);
        for (int b = 0; b < g->world; b++)
            memcpy(mine + (size_t)b * c * esz, send + ((size_t)b * w->count + off) * esz, c * esz);
        LT_CHECK(barrier(w, deadline));
        unsigned char *out = recv + off * esz;
        size_t at = (size_t)g->rank * c * esz;
        memcpy(out, half_of(g, 0) + at, c * esz);
        for (int r = 1; r < g->world; r++) comb(out, half_of(g, r) + at, c);
        if (w->op == LT_AVG) ltshm_divide(out, c, w->dtype, g->world);
        g->phase++;
    }
    return LT_OK;
}

static lt_status run_op(struct lt_backend_work *w) {
    struct lt_backend_group *g = w->g;
    int64_t deadline = g->timeout_ms > 0 && g->timeout_ms < INT64_MAX / 2000000
                           ? now_ns() + g->timeout_ms * 1000000
                           : INT64_MAX;
    if (g->world == 1) { /* nothing to exchange, but the results must be right */
        if (w->k == K_ALLGATHER && w->buf != w->send && w->count)
            memcpy(w->buf, w->send, w->count * lt_dtype_size(w->dtype));
        if (w->k == K_REDUCE_SCATTER && w->buf != w->send && w->count)
            memcpy(w->buf, w->send, w->count * lt_dtype_size(w->dtype));
        return check_abort(w);
    }
    shm_fp *f = fp_at(g, w->seq, g->rank);
    memset(f, 0, sizeof *f);
    f->seq = w->seq;
    f->count = w->count;
    f->kind = (int32_t)w->k;
    f->dtype = (int32_t)w->dtype;
    f->op = (int32_t)w->op;
    f->root = (int32_t)w->root;
    f->mem_id = w->mem ? (int64_t)w->mem->id : -1;
    f->mem_off = w->mem ? (uint64_t)w->mem_off : 0;
    w->fp_checked = false;
    if (w->count == 0 && w->k != K_BARRIER) { /* no data: one barrier for the check */
        lt_status st = barrier(w, deadline);
        g->phase++;
        return st;
    }
    switch (w->k) {
    case K_ALLREDUCE: return w->mem ? run_allreduce_mem(w, deadline) : run_allreduce(w, deadline);
    case K_BROADCAST: return run_broadcast(w, deadline);
    case K_ALLGATHER: return run_allgather(w, deadline);
    case K_REDUCE_SCATTER: return run_reduce_scatter(w, deadline);
    case K_BARRIER: {
        lt_status st = barrier(w, deadline);
        g->phase++;
        return st;
    }
    case K_SEND:
    case K_RECV: break; /* never queued: p2p_wait moves them */
    }
    return LT_ERR_INVALID;
}

static void complete(struct lt_backend_work *w, lt_status st) { /* under g->mu */
    w->st = st;
    w->done = true;
    w->next = NULL;
    if (w->orphan) {
        struct lt_backend_group *g = w->g;
        free(w);
        atomic_fetch_sub(&g->refs, 1); /* the owner's ref keeps g alive here */
    }
}

static void *worker(void *arg) {
    struct lt_backend_group *g = arg;
    if (g->want_rt) {
        struct sched_param sp = {.sched_priority = 1};
        pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp); /* falls back silently */
    }
    pthread_mutex_lock(&g->mu);
    for (;;) {
        while (!g->head && !g->stop) pthread_cond_wait(&g->cv, &g->mu);
        if (!g->head) break;
        struct lt_backend_work *w = g->head;
        g->head = w->next;
        if (!g->head) g->tail = NULL;
        lt_status st;
        if (g->failed || atomic_load(&g->local_abort)) {
            st = LT_ERR_ABORTED;
            if (atomic_load(&g->local_abort))
                op_fail(w, st, "the group was aborted");
            else
                op_fail(w, st, "the group failed earlier: %s", g->fail_msg);
        } else {
            pthread_mutex_unlock(&g->mu);
            st = run_op(w);
            pthread_mutex_lock(&g->mu);
            if (st != LT_OK && !g->failed) {
                g->failed = true;
                snprintf(g->fail_msg, sizeof g->fail_msg, "%s", w->err);
                /* Peers blocked in this group would otherwise wait for their own
                 * timeout: tell them (an abort of ours is already visible). */
                uint32_t zero = 0;
                atomic_compare_exchange_strong(&g->hdr->aborted, &zero, (uint32_t)g->rank + 1);
                futex_wake_all(&g->hdr->bar_sense);
            }
        }
        complete(w, st);
        pthread_cond_broadcast(&g->cv);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

/* ---- argument checks and issue ---- */

static bool valid_dtype(int t) { return t >= LT_F32 && t <= LT_I64 && lt_dtype_size((lt_dtype)t); }

static lt_status check_common(lt_ctx *ctx, const char *what, lt_backend_group *g, lt_backend_work **work,
                              int dtype) {
    if (!g || !work) {
        lt_set_error(ctx, "shm %s: NULL %s", what, g ? "work pointer" : "group");
        return LT_ERR_INVALID;
    }
    if (!valid_dtype(dtype)) {
        lt_set_error(ctx, "shm %s: dtype %d is not one the shm backend knows", what, dtype);
        return LT_ERR_UNSUPPORTED;
    }
    return LT_OK;
}

static lt_status check_reduce(lt_ctx *ctx, const char *what, int dtype, int op) {
    if (op >= LT_SUM && op <= LT_MAX && ltshm_combine((lt_dtype)dtype, (lt_redop)op)) return LT_OK;
    lt_set_error(ctx, "shm %s: reduction op %d on %s is not supported (sum, avg, min, max on f32 f64 "
                      "i8 u8 i32 i64; use gloo for f16/bf16)",
                 what, op, lt_dtype_name((lt_dtype)dtype));
    return LT_ERR_UNSUPPORTED;
}

static lt_status check_buf(lt_ctx *ctx, const char *what, const void *p, size_t count, lt_dtype dtype,
                           size_t blocks) {
    size_t esz = lt_dtype_size(dtype);
    if (count && count > SIZE_MAX / esz / blocks) {
        lt_set_error(ctx, "shm %s: %zu elements of %s overflow the address space", what, count,
                     lt_dtype_name(dtype));
        return LT_ERR_INVALID;
    }
    if (count && !p) {
        lt_set_error(ctx, "shm %s: NULL buffer for %zu elements", what, count);
        return LT_ERR_INVALID;
    }
    return LT_OK;
}

static lt_status issue(lt_ctx *ctx, lt_backend_group *g, struct lt_backend_work tmpl,
                       lt_backend_work **out) {
    struct lt_backend_work *w = malloc(sizeof *w);
    if (!w) {
        lt_set_error(ctx, "shm %s: out of memory", kind_names[tmpl.k]);
        return LT_ERR_NOMEM;
    }
    *w = tmpl;
    w->g = g;
    w->done = w->orphan = false;
    w->st = LT_OK;
    w->err[0] = 0;
    w->next = NULL;
    atomic_fetch_add(&g->refs, 1);
    pthread_mutex_lock(&g->mu);
    w->seq = ++g->seq;
    if (atomic_load(&g->local_abort) || g->stop) {
        op_fail(w, LT_ERR_ABORTED, "the group was aborted");
        w->st = LT_ERR_ABORTED;
        w->done = true;
    } else {
        if (g->tail)
            g->tail->next = w;
        else
            g->head = w;
        g->tail = w;
        pthread_cond_broadcast(&g->cv);
    }
    pthread_mutex_unlock(&g->mu);
    *out = w;
    return LT_OK;
}

/* ---- hooks ---- */

lt_status ltshm_allreduce(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count, lt_dtype dtype,
                          lt_redop op, lt_backend_work **work) {
    LT_CHECK(check_common(ctx, "allreduce", g, work, (int)dtype));
    LT_CHECK(check_reduce(ctx, "allreduce", (int)dtype, (int)op));
    LT_CHECK(check_buf(ctx, "allreduce", buf, count, dtype, 1));
    size_t off = 0;
    const shm_mem *mem = count ? shm_mem_find(g, buf, count * lt_dtype_size(dtype), &off) : NULL;
    return issue(ctx, g, (struct lt_backend_work){.k = K_ALLREDUCE, .buf = buf, .count = count,
                                                  .dtype = dtype, .op = op, .mem = mem, .mem_off = off},
                 work);
}

lt_status ltshm_broadcast(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count, lt_dtype dtype,
                          int root, lt_backend_work **work) {
    LT_CHECK(check_common(ctx, "broadcast", g, work, (int)dtype));
    LT_CHECK(check_buf(ctx, "broadcast", buf, count, dtype, 1));
    if (root < 0 || root >= g->world) {
        lt_set_error(ctx, "shm broadcast: root %d is not a rank of group '%s' (0..%d)", root, g->name,
                     g->world - 1);
        return LT_ERR_INVALID;
    }
    return issue(ctx, g, (struct lt_backend_work){.k = K_BROADCAST, .buf = buf, .count = count,
                                                  .dtype = dtype, .root = root}, work);
}

lt_status ltshm_allgather(lt_ctx *ctx, lt_backend_group *g, const void *send, void *recv,
                          size_t count, lt_dtype dtype, lt_backend_work **work) {
    LT_CHECK(check_common(ctx, "allgather", g, work, (int)dtype));
    LT_CHECK(check_buf(ctx, "allgather", send, count, dtype, 1));
    LT_CHECK(check_buf(ctx, "allgather", recv, count, dtype, (size_t)g->world));
    return issue(ctx, g, (struct lt_backend_work){.k = K_ALLGATHER, .buf = recv, .send = send,
                                                  .count = count, .dtype = dtype}, work);
}

lt_status ltshm_reduce_scatter(lt_ctx *ctx, lt_backend_group *g, const void *send, void *recv,
                               size_t count, lt_dtype dtype, lt_redop op, lt_backend_work **work) {
    LT_CHECK(check_common(ctx, "reduce_scatter", g, work, (int)dtype));
    LT_CHECK(check_reduce(ctx, "reduce_scatter", (int)dtype, (int)op));
    LT_CHECK(check_buf(ctx, "reduce_scatter", send, count, dtype, (size_t)g->world));
    LT_CHECK(check_buf(ctx, "reduce_scatter", recv, count, dtype, 1));
    return issue(ctx, g, (struct lt_backend_work){.k = K_REDUCE_SCATTER, .buf = recv, .send = send,
                                                  .count = count, .dtype = dtype, .op = op}, work);
}

lt_status ltshm_barrier(lt_ctx *ctx, lt_backend_group *g, lt_backend_work **work) {
    LT_CHECK(check_common(ctx, "barrier", g, work, LT_F32));
    return issue(ctx, g, (struct lt_backend_work){.k = K_BARRIER, .dtype = LT_F32}, work);
}

static lt_status p2p_issue(lt_ctx *ctx, lt_backend_group *g, bool send, void *buf, size_t count,
                           lt_dtype dtype, int peer, uint32_t tag, lt_backend_work **work) {
    const char *what = send ? "send" : "recv";
    LT_CHECK(check_common(ctx, what, g, work, (int)dtype));
    LT_CHECK(check_buf(ctx, what, buf, count, dtype, 1));
    if (!shm_p2p_usable(g->p2p)) {
        lt_set_error(ctx, "shm %s: group '%s' has %d ranks; shm has send/recv rings for up to 64 (use gloo)", what,
                     g->name, g->world);
        return LT_ERR_UNSUPPORTED;
    }
    if (peer < 0 || peer >= g->world || peer == g->rank) {
        lt_set_error(ctx, "shm %s: peer %d is not another rank of group '%s' (0..%d, this is %d)", what, peer,
                     g->name, g->world - 1, g->rank);
        return LT_ERR_INVALID;
    }
    struct lt_backend_work *w = calloc(1, sizeof *w);
    if (!w) {
        lt_set_error(ctx, "shm %s: out of memory", what);
        return LT_ERR_NOMEM;
    }
    *w = (struct lt_backend_work){.g = g, .k = send ? K_SEND : K_RECV, .buf = buf, .count = count,
                                  .dtype = dtype, .root = peer};
    pthread_mutex_lock(&g->p2p_mu);
    w->p2p = shm_p2p_issue(g->p2p, send, buf, count * lt_dtype_size(dtype), peer, tag);
    pthread_mutex_unlock(&g->p2p_mu);
    if (!w->p2p) {
        free(w);
        lt_set_error(ctx, "shm %s: out of memory", what);
        return LT_ERR_NOMEM;
    }
    atomic_fetch_add(&g->refs, 1);
    if (atomic_load(&g->local_abort)) { /* as issue() does for collectives */
        pthread_mutex_lock(&g->p2p_mu);
        shm_p2p_fail_all(g->p2p, LT_ERR_ABORTED, "the group was aborted");
        pthread_mutex_unlock(&g->p2p_mu);
    }
    *work = w;
    return LT_OK;
}

lt_status ltshm_send(lt_ctx *ctx, lt_backend_group *g, const void *buf, size_t count,
                     lt_dtype dtype, int peer, uint32_t tag, lt_backend_work **work) {
    return p2p_issue(ctx, g, true, (void *)buf, count, dtype, peer, tag, work);
}

lt_status ltshm_recv(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count, lt_dtype dtype,
                     int peer, uint32_t tag, lt_backend_work **work) {
    return p2p_issue(ctx, g, false, buf, count, dtype, peer, tag, work);
}

/* Waits for a send or recv by moving every pending one's bytes: spins
 * briefly, then sleeps in growing slices (up to 1 ms), checking for an
 * abort and for the peer's death. */
static lt_status p2p_wait(lt_ctx *ctx, struct lt_backend_work *w, int64_t timeout_ms) {
    struct lt_backend_group *g = w->g;
    int64_t start = now_ns(), idle_since = start;
    int64_t deadline = timeout_ms < 0 || timeout_ms > (int64_t)1e12 ? INT64_MAX : start + timeout_ms * 1000000;
    int64_t last_check = start;
    for (;;) {
        pthread_mutex_lock(&g->p2p_mu);
        bool moved = shm_p2p_progress(g->p2p);
        lt_status st;
        const char *err;
        bool done = shm_p2p_done(w->p2p, &st, &err);
        pthread_mutex_unlock(&g->p2p_mu);
        if (done) {
            if (st != LT_OK)
                lt_set_error(ctx, "shm %s with rank %d on group '%s': %s", kind_names[w->k], w->root, g->name, err);
            return st;
        }
        int64_t now = now_ns();
        if (moved) idle_since = now;
        if (now - last_check > 10000000) { /* every 10 ms: abort, or a dead peer */
            last_check = now;
            uint32_t a = atomic_load(&g->hdr->aborted);
            const char *why = NULL;
            char buf[200];
            lt_status fst = LT_ERR_ABORTED;
            if (atomic_load(&g->local_abort)) why = "the group was aborted";
            else if (a) {
                snprintf(buf, sizeof buf, "peer rank %d aborted the group (or failed)", (int)a - 1);
                why = buf;
            } else if (g->hdr->pids[w->root] > 0 && pid_dead(g->hdr->pids[w->root])) {
                snprintf(buf, sizeof buf, "peer rank %d (pid %d) exited", w->root, (int)g->hdr->pids[w->root]);
                why = buf;
                fst = LT_ERR_IO; /* as a collective reports a dead peer */
            }
            if (why) {
                pthread_mutex_lock(&g->p2p_mu);
                shm_p2p_fail_all(g->p2p, fst, why);
                pthread_mutex_unlock(&g->p2p_mu);
                continue;
            }
        }
        if (now >= deadline) {
            lt_set_error(ctx, "shm %s with rank %d on group '%s': still running after %lld ms", kind_names[w->k],
                         w->root, g->name, (long long)timeout_ms);
            return LT_ERR_TIMEOUT;
        }
        int64_t idle = now - idle_since;
        if (idle < SPIN_NS) {
            for (int i = 0; i < 64; i++) cpu_pause();
        } else {
            struct timespec ts = {0, idle < 1000000 ? 50000 : 1000000};
            nanosleep(&ts, NULL);
        }
    }
}

lt_status ltshm_mem_alloc(lt_ctx *ctx, lt_backend_group *g, size_t bytes, void **out) {
    if (!g || !out) {
        lt_set_error(ctx, "shm mem_alloc: NULL %s", g ? "result pointer" : "group");
        return LT_ERR_INVALID;
    }
    int64_t ms = g->timeout_ms < INT64_MAX / 2 ? g->timeout_ms : INT64_MAX / 2;
    return shm_mem_alloc(ctx, g, g->store, g->name, g->rank, g->world, g->nmem++, bytes, ms, &g->hdr->aborted,
                         out);
}

void ltshm_mem_free(lt_ctx *ctx, void *p) {
    (void)ctx;
    shm_mem_free(p);
}

lt_status ltshm_supports(lt_ctx *ctx, lt_dtype dtype, lt_redop op, bool *out) {
    (void)ctx;
    if (!out) return LT_ERR_INVALID;
    *out = valid_dtype((int)dtype) && (int)op >= LT_SUM && (int)op <= LT_MAX &&
           ltshm_combine(dtype, op) != NULL;
    return LT_OK;
}

lt_status ltshm_wait(lt_ctx *ctx, lt_backend_work *w, int64_t timeout_ms) {
    if (!w) {
        lt_set_error(ctx, "shm wait: NULL work");
        return LT_ERR_INVALID;
    }
    struct lt_backend_group *g = w->g;
    if (w->p2p) return p2p_wait(ctx, w, timeout_ms);
    pthread_mutex_lock(&g->mu);
    if (!w->done && timeout_ms != 0) {
        struct timespec ts;
        bool forever = timeout_ms < 0 || timeout_ms > (int64_t)1e12;
        if (!forever) {
            clock_gettime(CLOCK_MONOTONIC, &ts);
            int64_t ns = ts.tv_nsec + (timeout_ms % 1000) * 1000000;
            ts.tv_sec += (time_t)(timeout_ms / 1000 + ns / 1000000000);
            ts.tv_nsec = (long)(ns % 1000000000);
        }
        while (!w->done) {
            /* Sends and recvs move only while someone waits: a rank waiting
             * here on a collective its peer reaches only after receiving
             * what this rank is still sending must keep the rings moving. */
            pthread_mutex_unlock(&g->mu);
            pthread_mutex_lock(&g->p2p_mu);
            if (shm_p2p_usable(g->p2p)) shm_p2p_progress(g->p2p);
            bool pending = shm_p2p_usable(g->p2p) && shm_p2p_pending(g->p2p);
            pthread_mutex_unlock(&g->p2p_mu);
            pthread_mutex_lock(&g->mu);
            if (w->done) break;
            if (pending) {
                struct timespec slice;
                clock_gettime(CLOCK_MONOTONIC, &slice);
                slice.tv_nsec += 200000;
                if (slice.tv_nsec >= 1000000000L) slice.tv_sec++, slice.tv_nsec -= 1000000000L;
                bool past = !forever && (slice.tv_sec > ts.tv_sec || (slice.tv_sec == ts.tv_sec && slice.tv_nsec > ts.tv_nsec));
                if (pthread_cond_timedwait(&g->cv, &g->mu, past ? &ts : &slice) == ETIMEDOUT && past) break;
            } else if (forever) {
                pthread_cond_wait(&g->cv, &g->mu);
            } else if (pthread_cond_timedwait(&g->cv, &g->mu, &ts) == ETIMEDOUT) {
                break;
            }
        }
    }
    lt_status st;
    if (!w->done) {
        st = LT_ERR_TIMEOUT;
        lt_set_error(ctx, "shm %s #%llu on group '%s': still running after %lld ms", kind_names[w->k],
                     w->seq, g->name, (long long)timeout_ms);
    } else {
        st = w->st;
        if (st != LT_OK) lt_set_error(ctx, "%s", w->err);
    }
    pthread_mutex_unlock(&g->mu);
    return st;
}

void ltshm_free_work(lt_ctx *ctx, lt_backend_work *w) {
    (void)ctx;
    if (!w) return;
    struct lt_backend_group *g = w->g;
    if (w->p2p) { /* waited to its end, or failed by an abort */
        pthread_mutex_lock(&g->p2p_mu);
        shm_p2p_release(g->p2p, w->p2p);
        pthread_mutex_unlock(&g->p2p_mu);
        free(w);
        group_unref(g);
        return;
    }
    pthread_mutex_lock(&g->mu);
    if (!w->done) { /* still queued or running: the worker frees it */
        w->orphan = true;
        pthread_mutex_unlock(&g->mu);
        return;
    }
    pthread_mutex_unlock(&g->mu);
    free(w);
    group_unref(g);
}

lt_status ltshm_abort(lt_ctx *ctx, lt_backend_group *g) {
    (void)ctx;
    if (!g) return LT_OK;
    atomic_store(&g->local_abort, 1);
    if (g->hdr) {
        uint32_t zero = 0;
        atomic_compare_exchange_strong(&g->hdr->aborted, &zero, (uint32_t)g->rank + 1);
        futex_wake_all(&g->hdr->bar_sense);
    }
    pthread_mutex_lock(&g->mu);
    /* Queued works fail now; the running one sees the flag in its barrier. */
    struct lt_backend_work *w = g->head;
    g->head = g->tail = NULL;
    while (w) {
        struct lt_backend_work *next = w->next;
        op_fail(w, LT_ERR_ABORTED, "the group was aborted");
        complete(w, LT_ERR_ABORTED);
        w = next;
    }
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_mutex_lock(&g->p2p_mu);
    if (g->p2p) shm_p2p_fail_all(g->p2p, LT_ERR_ABORTED, "the group was aborted");
    pthread_mutex_unlock(&g->p2p_mu);
    return LT_OK;
}

lt_status ltshm_destroy(lt_ctx *ctx, lt_backend_group *g) {
    (void)ctx;
    if (!g) return LT_OK;
    pthread_mutex_lock(&g->mu);
    g->stop = true;
    bool busy = g->head != NULL;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    if (busy) ltshm_abort(ctx, g); /* works still queued: do not let them block destroy */
    atomic_store(&g->local_abort, 1); /* a running one stops at its next barrier */
    if (g->thr_started) pthread_join(g->thr, NULL);
    shm_mem_forget_owner(g);
    if (g->hdr) munmap(g->hdr, g->map_len);
    g->hdr = NULL;
    group_unref(g);
    return LT_OK;
}

/* ---- create ---- */

/* backend.realtime into *on (auto: true, when permitted); false when it is
 * neither auto nor a boolean word. */
static bool rt_setting(lt_ctx *ctx, bool *on) {
    const char *rt = lt_param_str(ctx, "realtime", "auto");
    *on = true;
    return !strcmp(rt, "auto") || lt_parse_bool(rt, on);
}

/* The parameters' values: check_params, and create for a caller that did
 * not call it. */
lt_status ltshm_check_params(lt_ctx *ctx) {
    bool on;
    if (!rt_setting(ctx, &on)) {
        const char *rt = lt_param_str(ctx, "realtime", "auto");
        lt_set_error(ctx, "backend.realtime = '%s': use auto, on or off", rt);
        return LT_ERR_INVALID;
    }
    int64_t slot_mb = lt_param_int(ctx, "slot_mb", 8);
    if (slot_mb < 1 || slot_mb > 1024) {
        lt_set_error(ctx, "backend.slot_mb = %lld: use 1..1024 (MiB per rank)", (long long)slot_mb);
        return LT_ERR_INVALID;
    }
    return LT_OK;
}

lt_status ltshm_create(lt_ctx *ctx, lt_store *store, int rank, int world, const lt_pg_options *opt,
                       lt_backend_group **out) {
    if (!store || !opt || !out || world < 1 || rank < 0 || rank >= world || !OPT_HAS(opt, timeout_ms)) {
        lt_set_error(ctx, "shm create: invalid arguments (rank %d of %d%s%s)", rank, world,
                     store ? "" : ", no store", opt ? "" : ", no options");
        return LT_ERR_INVALID;
    }
    if (OPT_HAS(opt, mem_kind) && opt->mem_kind != LT_MEM_HOST) {
        lt_set_error(ctx, "shm create: the shm backend works on host memory only; device buffers "
                          "need a backend for that device (set strategy.process_group_backend)");
        return LT_ERR_UNSUPPORTED;
    }
    if (!opt->prefix || !*opt->prefix) {
        lt_set_error(ctx, "shm create: options need a store key prefix unique to the group");
        return LT_ERR_INVALID;
    }
    if (world > MAX_WORLD) {
        lt_set_error(ctx, "shm create: %d ranks; the shm backend takes at most %d", world, MAX_WORLD);
        return LT_ERR_UNSUPPORTED;
    }
    LT_CHECK(ltshm_check_params(ctx));
    int64_t slot_mb = lt_param_int(ctx, "slot_mb", 8);
    int64_t timeout_ms = opt->timeout_ms > 0 ? opt->timeout_ms : 30 * 60 * 1000;
    int64_t connect_ms = OPT_HAS(opt, connect_timeout_ms) && opt->connect_timeout_ms > 0
                             ? opt->connect_timeout_ms
                             : timeout_ms;

    struct lt_backend_group *g = calloc(1, sizeof *g);
    if (!g) return LT_ERR_NOMEM;
    g->rank = rank;
    g->world = world;
    snprintf(g->name, sizeof g->name, "%s", opt->prefix);
    g->timeout_ms = timeout_ms;
    g->slot_bytes = (size_t)slot_mb << 20;
    g->half = g->slot_bytes / 2;
    g->hdr_len = hdr_bytes(world);
    g->map_len = g->hdr_len + (size_t)world * g->slot_bytes + shm_p2p_bytes(world);
    bool rt_on;
    rt_setting(ctx, &rt_on); /* judged by ltshm_check_params above */
    g->want_rt = rt_on;
    atomic_init(&g->refs, 1);
    pthread_mutex_init(&g->mu, NULL);
    pthread_mutex_init(&g->p2p_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);

    char key[LT_STORE_MAX_KEY];
    snprintf(key, sizeof key, "%sshm/name", opt->prefix);
    char shm_name[200];
    lt_status st = LT_OK;
    int fd = -1;
    if (rank == 0) {
        char clean[64];
        size_t j = 0;
        for (const char *p = opt->prefix; *p && j < sizeof clean - 1; p++)
            clean[j++] = ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9'))
                             ? *p
                             : '_';
        clean[j] = 0;
        for (int attempt = 0; attempt < 8 && fd < 0; attempt++) {
            uint64_t rnd = 0;
            if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) rnd = (uint64_t)now_ns() ^ (uint64_t)rand();
            snprintf(shm_name, sizeof shm_name, "/lt-shm-%s-%d-%016llx", clean, (int)getpid(),
                     (unsigned long long)rnd);
            fd = shm_open(shm_name, O_RDWR | O_CREAT | O_EXCL, 0600);
            if (fd < 0 && errno != EEXIST) break;
        }
        if (fd < 0) {
            lt_set_error(ctx, "shm create '%s': shm_open: %s", g->name, strerror(errno));
            st = LT_ERR_IO;
            goto fail;
        }
        /* Reserve the pages now: a sparse segment on a small /dev/shm (64 MiB
         * in a default container) would fail later with SIGBUS on first touch. */
        int rc = posix_fallocate(fd, 0, (off_t)g->map_len);
        if (rc == EINVAL || rc == EOPNOTSUPP) rc = ftruncate(fd, (off_t)g->map_len) ? errno : 0;
        if (rc != 0) {
            lt_set_error(ctx, "shm create '%s': allocating %zu bytes for %s: %s (is /dev/shm big enough? "
                              "lower backend.shm.slot_mb)",
                         g->name, g->map_len, shm_name, strerror(rc));
            close(fd);
            shm_unlink(shm_name);
            st = LT_ERR_IO;
            goto fail;
        }
    } else {
        void *v = NULL;
        size_t n = 0;
        st = lt_store_get(store, key, &v, &n);
        if (st != LT_OK) {
            lt_set_error(ctx, "shm create '%s': waiting for rank 0's segment name: %s", g->name,
                         lt_store_error(store));
            goto fail;
        }
        snprintf(shm_name, sizeof shm_name, "%.*s", (int)(n < sizeof shm_name ? n : sizeof shm_name - 1),
                 (const char *)v);
        free(v);
        fd = shm_open(shm_name, O_RDWR, 0600);
        if (fd < 0) {
            lt_set_error(ctx, "shm create '%s': shm_open %s: %s (are all ranks on one host?)", g->name,
                         shm_name, strerror(errno));
            st = LT_ERR_IO;
            goto fail;
        }
        struct stat sb;
        if (fstat(fd, &sb) != 0 || (size_t)sb.st_size != g->map_len) {
            lt_set_error(ctx, "shm create '%s': segment %s has %lld bytes, want %zu (do all ranks use the "
                              "same slot_mb?)",
                         g->name, shm_name, (long long)sb.st_size, g->map_len);
            close(fd);
            st = LT_ERR_MISMATCH;
            goto fail;
        }
    }
    void *m = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        lt_set_error(ctx, "shm create '%s': mmap %zu bytes: %s", g->name, g->map_len, strerror(errno));
        if (rank == 0) shm_unlink(shm_name);
        st = LT_ERR_IO;
        goto fail;
    }
    g->hdr = m;
    g->slots = (unsigned char *)m + g->hdr_len;
    g->p2p = shm_p2p_new(g->slots + (size_t)world * g->slot_bytes, world, rank);
    if (!g->p2p) {
        lt_set_error(ctx, "shm create '%s': out of memory", g->name);
        if (rank == 0) shm_unlink(shm_name);
        st = LT_ERR_NOMEM;
        goto fail;
    }
    if (rank == 0) {
        g->hdr->slot_bytes = g->slot_bytes;
        g->hdr->world = world;
        g->hdr->pids[0] = (int32_t)getpid();
        atomic_store(&g->hdr->attached, 1);
        atomic_store_explicit(&g->hdr->magic, SHM_MAGIC, memory_order_release);
        st = lt_store_set(store, key, shm_name, strlen(shm_name));
        if (st != LT_OK) {
            lt_set_error(ctx, "shm create '%s': publishing the segment name: %s", g->name,
                         lt_store_error(store));
            shm_unlink(shm_name);
            goto fail;
        }
    } else {
        if (atomic_load_explicit(&g->hdr->magic, memory_order_acquire) != SHM_MAGIC ||
            g->hdr->world != world) {
            lt_set_error(ctx, "shm create '%s': segment %s is not this group's (world %d, want %d)", g->name,
                         shm_name, g->hdr->world, world);
            st = LT_ERR_MISMATCH;
            goto fail;
        }
        g->hdr->pids[rank] = (int32_t)getpid();
        atomic_fetch_add(&g->hdr->attached, 1);
    }
    /* Every rank waits until all attached (create blocks until all joined);
     * then the name is no longer needed. */
    int64_t deadline = now_ns() + (connect_ms < INT64_MAX / 2000000 ? connect_ms * 1000000 : INT64_MAX / 2);
    while (atomic_load(&g->hdr->attached) < (uint32_t)world) {
        if (atomic_load(&g->hdr->aborted)) {
            lt_set_error(ctx, "shm create '%s': a peer gave up joining", g->name);
            st = LT_ERR_ABORTED;
            break;
        }
        if (now_ns() > deadline) {
            lt_set_error(ctx, "shm create '%s': only %u of %d ranks attached within %lld ms", g->name,
                         atomic_load(&g->hdr->attached), world, (long long)connect_ms);
            st = LT_ERR_TIMEOUT;
            break;
        }
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    if (rank == 0) shm_unlink(shm_name);
    if (st != LT_OK) {
        uint32_t zero = 0;
        atomic_compare_exchange_strong(&g->hdr->aborted, &zero, (uint32_t)rank + 1);
        goto fail;
    }
    g->sense = 0;
    g->store = store;
    if (pthread_create(&g->thr, NULL, worker, g) != 0) {
        lt_set_error(ctx, "shm create '%s': cannot start the worker thread", g->name);
        st = LT_ERR_NOMEM;
        goto fail;
    }
    g->thr_started = true;
    lt_log(ctx, LT_LOG_DEBUG, "group '%s': rank %d of %d attached to %s (%zu MiB)", g->name, rank, world,
           shm_name, g->map_len >> 20);
    *out = g;
    return LT_OK;
fail:
    if (g->hdr) munmap(g->hdr, g->map_len);
    g->hdr = NULL;
    group_unref(g);
    return st;
}
