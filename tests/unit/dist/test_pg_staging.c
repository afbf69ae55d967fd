/* Process groups that stage device buffers through pinned host memory
 * (core/dist/pg_staging.h), over the real gloo and shm plugins with 2
 * forked ranks. The buffers come from the cpu accelerator's alloc() and the
 * groups are told they are LT_MEM_DEVICE: a host-memory backend then gets
 * them through the accelerator's alloc_host and copy(), which on cpu move
 * real bytes, so every staged path runs without a GPU.
 *
 * The accelerator and backend tables are the registry's resolved ones with
 * a few hooks wrapped to count: copies per direction (and the thread doing
 * host-to-device ones), pinned allocations, and whether each buffer the
 * backend got lies in a pinned buffer. A host-memory group over the same
 * accelerator is the unstaged reference; values are also checked against
 * the harness's expected ones. A child reports by exit code. */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cunit_run.h"
#include "common/ctx.h"
#include "lt/backend.h"
#include "lt/run.h"
#include "dist/process_group.h"
#include "dist/store_server.h"
#include "registry/registry.h"

/* The harness forks ranks and hosts the store; its own plugin load is a
 * formality here (each rank loads its backend through the registry). */
#define PLUGIN LT_TEST_PLUGIN_DIR "/liblt-backend-gloo.so"
#define HARNESS_NAME "gloo"
/* The harness's backend-level scenarios are not used here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "backend_harness.h"
#pragma GCC diagnostic pop

static const char *g_backend = "gloo"; /* the backend of the ranks forked next */

/* ---- the counting accelerator (per rank: set up after the fork) ---- */

static const lt_accelerator_desc *g_cpu; /* the registry's table */
static lt_accelerator_desc g_acc_desc;   /* g_cpu with counting hooks */
static lt_ctx g_acc;
static atomic_int g_d2h, g_h2d, g_pinned_allocs;
static atomic_int g_fail_dir;            /* an lt_copy_dir to fail, 0: none */
static pthread_t g_h2d_thread;           /* the thread of the last host-to-device copy */

#define MAX_PINNED 64
static struct { void *p; size_t n; } g_pinned[MAX_PINNED];
static pthread_mutex_t g_pinned_lock = PTHREAD_MUTEX_INITIALIZER;

static lt_status count_alloc_host(lt_ctx *ctx, size_t bytes, void **out) {
    lt_status st = g_cpu->alloc_host(ctx, bytes, out);
    if (st != LT_OK) return st;
    atomic_fetch_add(&g_pinned_allocs, 1);
    pthread_mutex_lock(&g_pinned_lock);
    for (int i = 0; i < MAX_PINNED; i++)
        if (!g_pinned[i].p) {
            g_pinned[i].p = *out, g_pinned[i].n = bytes;
            break;
        }
    pthread_mutex_unlock(&g_pinned_lock);
    return LT_OK;
}

static void count_free_host(lt_ctx *ctx, void *p) {
    pthread_mutex_lock(&g_pinned_lock);
    for (int i = 0; i < MAX_PINNED; i++)
        if (g_pinned[i].p == p) g_pinned[i].p = NULL;
    pthread_mutex_unlock(&g_pinned_lock);
    g_cpu->free_host(ctx, p);
}

/* Whether [p, p + n) lies in one pinned buffer. */
static bool is_pinned(const void *p, size_t n) {
    bool in = false;
    pthread_mutex_lock(&g_pinned_lock);
    for (int i = 0; i < MAX_PINNED && !in; i++) {
        const char *b = g_pinned[i].p;
        in = b && (const char *)p >= b && (const char *)p + n <= b + g_pinned[i].n;
    }
    pthread_mutex_unlock(&g_pinned_lock);
    return in;
}

static lt_status count_copy(lt_ctx *ctx, void *dst, const void *src, size_t bytes, lt_copy_dir dir) {
    if ((int)dir == atomic_load(&g_fail_dir)) {
        lt_set_error(ctx, "injected %s failure", dir == LT_COPY_D2H ? "D2H" : "H2D");
        return LT_ERR_PLUGIN;
    }
    if (dir == LT_COPY_D2H) atomic_fetch_add(&g_d2h, 1);
    if (dir == LT_COPY_H2D) {
        atomic_fetch_add(&g_h2d, 1);
        g_h2d_thread = pthread_self();
    }
    return g_cpu->copy(ctx, dst, src, bytes, dir);
}

/* ---- the backend, checking where its buffers are ---- */

static const lt_backend_desc *g_real;
static lt_backend_desc g_be_desc;
static atomic_int g_be_pinned, g_be_other; /* buffers the backend got: pinned or not */

static void seen(const void *p, size_t count, lt_dtype t) {
    if (!count) return;
    atomic_fetch_add(is_pinned(p, count * lt_dtype_size(t)) ? &g_be_pinned : &g_be_other, 1);
}
static lt_status w_allreduce(lt_ctx *c, lt_backend_group *g, void *buf, size_t n, lt_dtype t, lt_redop op,
                             lt_backend_work **w) {
    seen(buf, n, t);
    return g_real->allreduce(c, g, buf, n, t, op, w);
}
static lt_status w_broadcast(lt_ctx *c, lt_backend_group *g, void *buf, size_t n, lt_dtype t, int root,
                             lt_backend_work **w) {
    seen(buf, n, t);
    return g_real->broadcast(c, g, buf, n, t, root, w);
}
static lt_status w_allgather(lt_ctx *c, lt_backend_group *g, const void *s, void *r, size_t n, lt_dtype t,
                             lt_backend_work **w) {
    seen(s, n, t);
    return g_real->allgather(c, g, s, r, n, t, w);
}
static lt_status w_reduce_scatter(lt_ctx *c, lt_backend_group *g, const void *s, void *r, size_t n, lt_dtype t,
                                  lt_redop op, lt_backend_work **w) {
    seen(r, n, t);
    return g_real->reduce_scatter(c, g, s, r, n, t, op, w);
}
static lt_status w_send(lt_ctx *c, lt_backend_group *g, const void *buf, size_t n, lt_dtype t, int peer,
                        uint32_t tag, lt_backend_work **w) {
    seen(buf, n, t);
    return g_real->send(c, g, buf, n, t, peer, tag, w);
}
static lt_status w_recv(lt_ctx *c, lt_backend_group *g, void *buf, size_t n, lt_dtype t, int peer, uint32_t tag,
                        lt_backend_work **w) {
    seen(buf, n, t);
    return g_real->recv(c, g, buf, n, t, peer, tag, w);
}

static lt_ctx g_bctx;
static lt_registry *g_reg;

/* In the rank: the registry's cpu accelerator (set up) and backend, both
 * wrapped; a scenario of its own restart count, so failures one scenario
 * posts in the shared store are not read by the next. */
static int rank_setup(child *c) {
    char err[1024], gen[32];
    snprintf(gen, sizeof gen, "%d", g_scenario);
    setenv("LT_RESTART_COUNT", gen, 1);
    g_reg = lt_registry_new();
    CHECK(c, g_reg && lt_registry_add_dir(g_reg, LT_TEST_PLUGIN_DIR) == LT_OK, "registry");
    const lt_plugin_header *a, *b;
    CHECK(c, lt_registry_load(g_reg, LT_KIND_ACCELERATOR, "cpu", &a, err, sizeof err) == LT_OK, "%s", err);
    CHECK(c, lt_registry_load(g_reg, LT_KIND_BACKEND, g_backend, &b, err, sizeof err) == LT_OK, "%s", err);
    g_cpu = (const lt_accelerator_desc *)a;
    g_acc_desc = *g_cpu;
    g_acc_desc.alloc_host = count_alloc_host;
    g_acc_desc.free_host = count_free_host;
    g_acc_desc.copy = count_copy;
    lt_ctx_init(&g_acc, LT_KIND_ACCELERATOR, "cpu", &g_acc_desc.hdr, NULL);
    CHECK(c, g_cpu->setup(&g_acc, 0) == LT_OK, "cpu setup: %s", lt_last_error(&g_acc));
    g_real = (const lt_backend_desc *)b;
    g_be_desc = *g_real;
    g_be_desc.allreduce = w_allreduce;
    g_be_desc.broadcast = w_broadcast;
    g_be_desc.allgather = w_allgather;
    g_be_desc.reduce_scatter = w_reduce_scatter;
    g_be_desc.send = w_send;
    g_be_desc.recv = w_recv;
    lt_ctx_init(&g_bctx, LT_KIND_BACKEND, g_backend, &g_be_desc.hdr, NULL);
    return 0;
}

static lt_pg *new_pg(child *c, const char *name, lt_mem_kind kind, lt_ctx *accel, int64_t timeout_ms) {
    lt_pg_spec spec = {.backend_ctx = &g_bctx, .store = c->store, .name = name, .rank = c->rank,
                       .size = c->world, .timeout_ms = timeout_ms, .connect_timeout_ms = WAIT_MS,
                       .mem_kind = kind, .accel = accel};
    lt_pg *pg = NULL;
    char err[1536];
    if (lt_pg_create(&spec, &pg, err, sizeof err) != LT_OK) fprintf(stderr, "[rank %d] %s\n", c->rank, err);
    return pg;
}

static void *dev_alloc(size_t bytes) {
    void *p = NULL;
    return g_cpu->alloc(&g_acc, bytes ? bytes : 1, &p) == LT_OK ? p : NULL;
}

/* ---- one collective, checked ---- */

enum { OP_ALLREDUCE, OP_BROADCAST, OP_ALLGATHER, OP_REDUCE_SCATTER, OP_SENDRECV, OP_BARRIER };
static const char *const op_names[] = {"allreduce", "broadcast", "allgather", "reduce_scatter", "send/recv",
                                       "barrier"};

typedef struct job {
    int op;
    lt_dtype t;
    size_t n;
    lt_redop red; /* allreduce, reduce_scatter */
    int root;     /* broadcast */
} job;

/* Runs j on pg with rank-dependent inputs in device buffers and checks the
 * output against the expected values; *out (malloc'd) gets the output's
 * bytes, *bytes their size. */
static int run_job(child *c, lt_pg *pg, const job *j, void **out, size_t *bytes) {
    size_t esz = lt_dtype_size(j->t), n = j->n, world = (size_t)c->world;
    size_t in_n = j->op == OP_REDUCE_SCATTER ? world * n : n;
    size_t out_n = j->op == OP_ALLGATHER ? world * n : j->op == OP_BARRIER ? 0 : n;
    unsigned char *in = dev_alloc(in_n * esz), *res = dev_alloc(out_n * esz);
    CHECK(c, in && res, "alloc");
    for (size_t i = 0; i < in_n; i++) put(in, i, j->t, input(c->rank, i, j->t));
    for (size_t i = 0; i < out_n; i++) put(res, i, j->t, 99);
    lt_work *w = NULL, *w2 = NULL;
    lt_status st = LT_OK;
    int peer = (c->rank + 1) % c->world;
    switch (j->op) {
    case OP_ALLREDUCE:
        memcpy(res, in, n * esz);
        st = lt_pg_allreduce(pg, res, n, j->t, j->red, &w);
        break;
    case OP_BROADCAST:
        memcpy(res, in, n * esz);
        st = lt_pg_broadcast(pg, res, n, j->t, j->root, &w);
        break;
    case OP_ALLGATHER: st = lt_pg_allgather(pg, in, res, n, j->t, &w); break;
    case OP_REDUCE_SCATTER: st = lt_pg_reduce_scatter(pg, in, res, n, j->t, j->red, &w); break;
    case OP_SENDRECV:
        st = lt_pg_send(pg, in, n, j->t, peer, 5, &w);
        if (st == LT_OK) st = lt_pg_recv(pg, res, n, j->t, (c->rank + c->world - 1) % c->world, 5, &w2);
        break;
    case OP_BARRIER: st = lt_pg_barrier(pg, &w); break;
    }
    CHECK(c, st == LT_OK, "%s issue: %s", op_names[j->op], lt_pg_error(pg));
    CHECK(c, lt_work_wait(w) == LT_OK, "%s wait: %s", op_names[j->op], lt_pg_error(pg));
    if (w2) CHECK(c, lt_work_wait(w2) == LT_OK, "recv wait: %s", lt_pg_error(pg));
    for (size_t i = 0; i < out_n; i++) {
        double got = get(res, i, j->t), want = 0;
        switch (j->op) {
        case OP_ALLREDUCE: want = expected(j->t, j->red, c->world, i); break;
        case OP_BROADCAST: want = input(j->root, i, j->t); break;
        case OP_ALLGATHER: want = input((int)(i / n), i % n, j->t); break;
        case OP_REDUCE_SCATTER: want = expected(j->t, j->red, c->world, (size_t)c->rank * n + i); break;
        case OP_SENDRECV: want = input((c->rank + c->world - 1) % c->world, i, j->t); break;
        }
        CHECK(c, close_enough(j->t, got, want), "%s %s n %zu: [%zu] = %g, want %g", op_names[j->op],
              lt_dtype_name(j->t), n, i, got, want);
    }
    *bytes = out_n * esz;
    *out = malloc(*bytes + 1);
    memcpy(*out, res, *bytes);
    g_cpu->free(&g_acc, in);
    g_cpu->free(&g_acc, res);
    return 0;
}

/* The copies a staged group makes for one job: {device to host, host to device}. */
static void staged_copies(const child *c, const job *j, int *d2h, int *h2d) {
    bool some = j->n > 0 && j->op != OP_BARRIER;
    *d2h = *h2d = some;
    if (some && j->op == OP_BROADCAST) *d2h = c->rank == j->root, *h2d = c->rank != j->root;
}

static const job g_jobs[] = {
    {OP_ALLREDUCE, LT_F32, 1000, LT_SUM, 0},     {OP_ALLREDUCE, LT_F64, 3, LT_MAX, 0},
    {OP_ALLREDUCE, LT_BF16, 777, LT_AVG, 0},     {OP_ALLREDUCE, LT_I8, 65, LT_MIN, 0},
    {OP_ALLREDUCE, LT_F32, 300001, LT_AVG, 0},   {OP_ALLREDUCE, LT_I64, 0, LT_SUM, 0},
    {OP_BROADCAST, LT_F32, 513, 0, 0},           {OP_BROADCAST, LT_I32, 100003, 0, 1},
    {OP_ALLGATHER, LT_F16, 13, 0, 0},            {OP_ALLGATHER, LT_F32, 100003, 0, 0},
    {OP_REDUCE_SCATTER, LT_F32, 11, LT_SUM, 0},  {OP_REDUCE_SCATTER, LT_F64, 200003, LT_AVG, 0},
    {OP_REDUCE_SCATTER, LT_I32, 7, LT_MAX, 0},   {OP_SENDRECV, LT_F64, 100003, 0, 0},
    {OP_SENDRECV, LT_U8, 9, 0, 0},               {OP_BARRIER, LT_F32, 0, 0, 0},
};
#define NJOBS (sizeof g_jobs / sizeof *g_jobs)

/* Every collective on a staged group and on a host group: the same bytes,
 * the expected values, the copies staging owes and none for the host
 * group, pinned buffers only on the staged side; a second pass allocates
 * no pinned memory. */
static int sc_collectives(child *c) {
    if (rank_setup(c)) return 1;
    char dn[96], hn[96];
    snprintf(dn, sizeof dn, "%sdev", c->prefix);
    snprintf(hn, sizeof hn, "%shost", c->prefix);
    lt_pg *dev = new_pg(c, dn, LT_MEM_DEVICE, &g_acc, WAIT_MS);
    lt_pg *host = new_pg(c, hn, LT_MEM_HOST, &g_acc, WAIT_MS);
    CHECK(c, dev && host, "create");
    CHECK(c, g_pinned_allocs == 0, "no pinned memory before the first collective");
    int allocs_after_first = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t k = 0; k < NJOBS; k++) {
            const job *j = &g_jobs[k];
            void *a = NULL, *b = NULL;
            size_t na = 0, nb = 0;
            int d0 = g_d2h, h0 = g_h2d, p0 = g_pinned_allocs, bp0 = g_be_pinned, bo0 = g_be_other, d2h, h2d;
            if (run_job(c, host, j, &b, &nb)) return 1;
            CHECK(c, g_d2h == d0 && g_h2d == h0 && g_pinned_allocs == p0 && g_be_pinned == bp0,
                  "host group %s: copies %d %d, allocs %d", op_names[j->op], g_d2h - d0, g_h2d - h0,
                  g_pinned_allocs - p0);
            d0 = g_d2h, h0 = g_h2d;
            if (run_job(c, dev, j, &a, &na)) return 1;
            staged_copies(c, j, &d2h, &h2d);
            CHECK(c, g_d2h - d0 == d2h && g_h2d - h0 == h2d, "staged %s %s n %zu: %d D2H %d H2D, want %d %d",
                  op_names[j->op], lt_dtype_name(j->t), j->n, g_d2h - d0, g_h2d - h0, d2h, h2d);
            CHECK(c, g_be_other == bo0 + (j->n && j->op != OP_BARRIER ? 1 + (j->op == OP_SENDRECV) : 0),
                  "host group: the backend got its own buffers");
            CHECK(c, g_be_pinned == bp0 + (j->n && j->op != OP_BARRIER ? 1 + (j->op == OP_SENDRECV) : 0),
                  "staged %s: the backend got pinned buffers only", op_names[j->op]);
            CHECK(c, na == nb && !memcmp(a, b, na), "staged %s %s n %zu differs from the host group's",
                  op_names[j->op], lt_dtype_name(j->t), j->n);
            free(a);
            free(b);
        }
        if (pass == 0) allocs_after_first = g_pinned_allocs;
    }
    CHECK(c, allocs_after_first > 0 && g_pinned_allocs == allocs_after_first,
          "pinned allocations: %d in the first pass, %d after the second", allocs_after_first, g_pinned_allocs);
    /* Refused at issue (by the backend, or before it for a NULL buffer):
     * no work, a message, and no pinned buffer kept. */
    lt_work *w = NULL;
    float *x = dev_alloc(64);
    for (int i = 0; i < 3; i++) {
        CHECK(c, lt_pg_allreduce(dev, x, 4, (lt_dtype)99, LT_SUM, &w) == LT_ERR_UNSUPPORTED && !w, "dtype 99");
        CHECK(c, strstr(lt_pg_error(dev), "dtype 99"), "message: %s", lt_pg_error(dev));
        CHECK(c, lt_pg_broadcast(dev, NULL, 4, LT_F32, 0, &w) == LT_ERR_INVALID && !w, "NULL buffer");
    }
    void *a = NULL;
    size_t na = 0;
    if (run_job(c, dev, &g_jobs[NJOBS - 3], &a, &na)) return 1; /* a send and a recv: two buffers */
    free(a);
    g_cpu->free(&g_acc, x);
    CHECK(c, g_pinned_allocs == allocs_after_first, "refused collectives kept pinned buffers: %d allocations",
          g_pinned_allocs);
    lt_pg_destroy(dev);
    lt_pg_destroy(host);
    pthread_mutex_lock(&g_pinned_lock);
    for (int i = 0; i < MAX_PINNED; i++) CHECK(c, !g_pinned[i].p, "pinned buffer %d not freed", i);
    pthread_mutex_unlock(&g_pinned_lock);
    return 0;
}

/* ---- works in flight, pool growth, a wait on another thread ---- */

enum { K = 6 };
static const size_t g_sizes[K] = {5000, 200000, 17, 70000, 200000, 1};

/* K allreduces of different sizes in flight on pg, then a broadcast and an
 * allgather (from bufs[K + 2]), waited for in reverse order: K + 2 works. */
static int in_flight(child *c, lt_pg *pg, float *bufs[K + 3], size_t extra) {
    lt_work *w[K + 2];
    for (int k = 0; k < K; k++) {
        size_t n = g_sizes[k] + (k == 1 ? extra : 0);
        for (size_t i = 0; i < n; i++) bufs[k][i] = (float)(input(c->rank, i, LT_F32) * (k + 1));
        CHECK(c, lt_pg_allreduce(pg, bufs[k], n, LT_F32, LT_SUM, &w[k]) == LT_OK, "issue %d: %s", k, lt_pg_error(pg));
    }
    for (int i = 0; i < 1000; i++) bufs[K][i] = bufs[K + 2][i] = (float)input(c->rank, (size_t)i, LT_F32);
    CHECK(c, lt_pg_broadcast(pg, bufs[K], 1000, LT_F32, 1, &w[K]) == LT_OK, "broadcast");
    CHECK(c, lt_pg_allgather(pg, bufs[K + 2], bufs[K + 1], 1000, LT_F32, &w[K + 1]) == LT_OK, "allgather");
    for (int k = K + 1; k >= 0; k--) CHECK(c, lt_work_wait(w[k]) == LT_OK, "wait %d: %s", k, lt_pg_error(pg));
    for (int k = 0; k < K; k++) {
        size_t n = g_sizes[k] + (k == 1 ? extra : 0);
        for (size_t i = 0; i < n; i++)
            CHECK(c, bufs[k][i] == (float)(expected(LT_F32, LT_SUM, c->world, i) * (k + 1)), "[%d][%zu] = %g", k, i,
                  bufs[k][i]);
    }
    for (int i = 0; i < 1000; i++) CHECK(c, bufs[K][i] == (float)input(1, (size_t)i, LT_F32), "broadcast [%d]", i);
    for (int r = 0; r < c->world; r++)
        for (int i = 0; i < 1000; i++)
            CHECK(c, bufs[K + 1][r * 1000 + i] == (float)input(r, (size_t)i, LT_F32), "allgather [%d][%d]", r, i);
    return 0;
}

typedef struct waiter {
    lt_work *w;
    lt_status st;
    pthread_t self;
} waiter;

static void *wait_thread(void *arg) {
    waiter *x = arg;
    x->self = pthread_self();
    x->st = lt_work_wait(x->w);
    return NULL;
}

static int sc_in_flight(child *c) {
    if (rank_setup(c)) return 1;
    char dn[96];
    snprintf(dn, sizeof dn, "%sdev", c->prefix);
    lt_pg *dev = new_pg(c, dn, LT_MEM_DEVICE, &g_acc, WAIT_MS);
    CHECK(c, dev, "create");
    enum { BIG = 600000 };
    float *bufs[K + 3];
    for (int k = 0; k < K + 3; k++) CHECK(c, (bufs[k] = dev_alloc((BIG + 200000) * sizeof(float))), "alloc");
    if (in_flight(c, dev, bufs, 0)) return 1;
    CHECK(c, g_pinned_allocs == K + 2, "%d pinned buffers for %d works in flight", g_pinned_allocs, K + 2);
    if (in_flight(c, dev, bufs, 0)) return 1;
    CHECK(c, g_pinned_allocs == K + 2, "steady state: %d pinned allocations", g_pinned_allocs);
    /* Larger than any buffer so far: one buffer grows, once. */
    if (in_flight(c, dev, bufs, BIG)) return 1;
    CHECK(c, g_pinned_allocs == K + 3, "growth: %d pinned allocations, want %d", g_pinned_allocs, K + 3);
    if (in_flight(c, dev, bufs, BIG) || in_flight(c, dev, bufs, 0)) return 1;
    CHECK(c, g_pinned_allocs == K + 3, "after growth: %d pinned allocations", g_pinned_allocs);

    /* Issued here, waited for on another thread: the copy back runs there. */
    for (int i = 0; i < 4096; i++) bufs[0][i] = (float)input(c->rank, (size_t)i, LT_F32);
    waiter x = {0};
    CHECK(c, lt_pg_allreduce(dev, bufs[0], 4096, LT_F32, LT_MAX, &x.w) == LT_OK, "issue");
    pthread_t th;
    CHECK(c, pthread_create(&th, NULL, wait_thread, &x) == 0, "thread");
    pthread_join(th, NULL);
    CHECK(c, x.st == LT_OK, "wait on another thread: %s", lt_pg_error(dev));
    CHECK(c, pthread_equal(g_h2d_thread, x.self), "the host-to-device copy ran on the waiting thread");
    for (int i = 0; i < 4096; i++)
        CHECK(c, bufs[0][i] == (float)expected(LT_F32, LT_MAX, c->world, (size_t)i), "[%d] = %g", i, bufs[0][i]);
    lt_pg_destroy(dev);
    for (int k = 0; k < K + 3; k++) g_cpu->free(&g_acc, bufs[k]);
    return 0;
}

/* ---- when staging is not used, or cannot be ---- */

/* Creates a group with debug logging into a file; 1 when the staging line
 * was logged, 0 when not, -1 when the group failed. */
static int logs_staging(child *c, const char *name, lt_mem_kind kind) {
    FILE *tmp = tmpfile();
    int saved = dup(2);
    fflush(stderr);
    dup2(fileno(tmp), 2);
    lt_log_set_level(LT_LOG_DEBUG);
    lt_pg *pg = new_pg(c, name, kind, &g_acc, WAIT_MS);
    lt_log_set_level(LT_LOG_INFO);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char line[512], want[256];
    snprintf(want, sizeof want, "process group '%s': %s takes host memory only: staging device buffers through "
             "pinned host memory", name, g_backend);
    int found = 0;
    rewind(tmp);
    while (fgets(line, sizeof line, tmp)) found |= strstr(line, want) != NULL;
    fclose(tmp);
    if (!pg) return -1;
    lt_pg_destroy(pg);
    return found;
}

/* A device group says in the debug log that it stages, a host group does
 * not; a device group with no accelerator to stage through is refused,
 * saying why, before it reaches the backend. */
static int sc_decisions(child *c) {
    if (rank_setup(c)) return 1;
    char name[96];
    snprintf(name, sizeof name, "%snoacc", c->prefix);
    lt_pg_spec spec = {.backend_ctx = &g_bctx, .store = c->store, .name = name, .rank = c->rank, .size = c->world,
                       .timeout_ms = WAIT_MS, .connect_timeout_ms = WAIT_MS, .mem_kind = LT_MEM_DEVICE};
    lt_pg *pg = NULL;
    char err[1536];
    CHECK(c, lt_pg_create(&spec, &pg, err, sizeof err) == LT_ERR_INVALID && !pg, "device group, no accelerator");
    CHECK(c, strstr(err, "takes host memory only") && strstr(err, g_backend), "message: %s", err);
    snprintf(name, sizeof name, "%slogged", c->prefix);
    CHECK(c, logs_staging(c, name, LT_MEM_DEVICE) == 1, "the staging line in the debug log");
    snprintf(name, sizeof name, "%squiet", c->prefix);
    CHECK(c, logs_staging(c, name, LT_MEM_HOST) == 0, "a host group logged staging");
    return 0;
}

/* A staging copy that fails on rank 0 (device to host at issue, or host to
 * device in the wait) is that collective's error, saying which copy; the
 * reason is posted and the group aborted, so rank 1's collective fails
 * soon, naming rank 0's reason. */
static int sc_copy_fails(child *c, lt_copy_dir dir) {
    if (rank_setup(c)) return 1;
    char name[96];
    snprintf(name, sizeof name, "%sfail", c->prefix);
    lt_pg *pg = new_pg(c, name, LT_MEM_DEVICE, &g_acc, 15000);
    CHECK(c, pg, "create");
    float *buf = dev_alloc(1024 * sizeof(float));
    CHECK(c, buf, "alloc");
    for (int i = 0; i < 1024; i++) buf[i] = 1;
    CHECK(c, lt_pg_allreduce_sync(pg, buf, 1024, LT_F32, LT_SUM) == LT_OK && buf[7] == (float)c->world,
          "a good collective first: %s", lt_pg_error(pg));
    const char *how = dir == LT_COPY_D2H ? "device to host" : "host to device";
    double t0 = lt_now();
    if (c->rank == 0) {
        atomic_store(&g_fail_dir, (int)dir);
        lt_work *w = NULL;
        lt_status st = lt_pg_allreduce(pg, buf, 1024, LT_F32, LT_SUM, &w);
        if (dir == LT_COPY_H2D) {
            CHECK(c, st == LT_OK, "issue: %s", lt_pg_error(pg));
            st = lt_work_wait(w);
        } else {
            CHECK(c, !w, "no work for a collective that failed at issue");
        }
        CHECK(c, st == LT_ERR_PLUGIN, "status %s", lt_status_str(st));
        CHECK(c, strstr(lt_pg_error(pg), "staging through host memory") && strstr(lt_pg_error(pg), how) &&
                 strstr(lt_pg_error(pg), "injected") && strstr(lt_pg_error(pg), "allreduce #2"),
              "message: %s", lt_pg_error(pg));
        CHECK(c, lt_pg_failed(pg), "the group failed");
        atomic_store(&g_fail_dir, 0);
    } else {
        /* Host to device: the collective itself completed everywhere; the
         * next one is the one rank 0 never joins. */
        lt_status st = lt_pg_allreduce_sync(pg, buf, 1024, LT_F32, LT_SUM);
        if (dir == LT_COPY_H2D && st == LT_OK) st = lt_pg_allreduce_sync(pg, buf, 1024, LT_F32, LT_SUM);
        CHECK(c, st != LT_OK, "rank 1's collective succeeded");
        CHECK(c, strstr(lt_pg_error(pg), "rank 0 failed") && strstr(lt_pg_error(pg), "injected"),
              "rank 1's message: %s", lt_pg_error(pg));
        CHECK(c, lt_now() - t0 < 10, "rank 1 failed after %.1f s, not at once", lt_now() - t0);
    }
    CHECK(c, !store_barrier(c, "fail-done"), "store barrier");
    lt_pg_destroy(pg);
    g_cpu->free(&g_acc, buf);
    return 0;
}
static int sc_d2h_fails(child *c) { return sc_copy_fails(c, LT_COPY_D2H); }
static int sc_h2d_fails(child *c) { return sc_copy_fails(c, LT_COPY_H2D); }

/* ---- CUnit ---- */

#define BOTH(fn, sc)                                                                               \
    static void fn(void) {                                                                         \
        g_backend = "gloo";                                                                        \
        CU_ASSERT_EQUAL(run_ranks(2, sc), 0);                                                      \
        g_backend = "shm";                                                                         \
        CU_ASSERT_EQUAL(run_ranks(2, sc), 0);                                                      \
    }
BOTH(test_collectives, sc_collectives)
BOTH(test_in_flight, sc_in_flight)
BOTH(test_decisions, sc_decisions)
BOTH(test_d2h_fails, sc_d2h_fails)
BOTH(test_h2d_fails, sc_h2d_fails)

int main(void) {
    unsetenv("LT_RDZV_TOKEN");
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("pg_staging", suite_init, suite_clean);
    CU_add_test(s, "every collective, staged and not (gloo, shm)", test_collectives);
    CU_add_test(s, "works in flight, pool growth, a wait on another thread", test_in_flight);
    CU_add_test(s, "staging logged; a device group without an accelerator", test_decisions);
    CU_add_test(s, "a device-to-host copy fails", test_d2h_fails);
    CU_add_test(s, "a host-to-device copy fails", test_h2d_fails);
    return lt_cunit_run();
}
