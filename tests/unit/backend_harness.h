/* What the backend tests share: forked ranks that load a backend plugin and
 * meet through a rendezvous store hosted by a process forked first (forking
 * while another thread holds an allocator lock deadlocks the child, seen
 * under ASan, so the test parent stays single-threaded); rank-dependent
 * inputs of every dtype and the values each collective must produce; and the
 * scenarios every backend must pass alike (harness_sc_*, harness_bad_requests).
 *
 * Before including: define PLUGIN (the .so path) and HARNESS_NAME ("gloo"),
 * and include CUnit, lt/backend.h, ctx.h and store_server.h. A test may set
 * harness_config to give each rank a config (plugin parameters). */
#ifndef LT_TEST_BACKEND_HARNESS_H
#define LT_TEST_BACKEND_HARNESS_H

#include <dlfcn.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "config/config.h"

/* Called in each rank before its context is made; NULL: no config. */
static lt_config *(*harness_config)(int rank);

#define WAIT_MS 20000 /* bound of every wait; none is expected to come near it */

static pid_t g_host;     /* the store host process */
static int g_host_stop;  /* closing this write end stops it */
static int g_port;
static int g_scenario;

typedef struct child {
    int rank, world;
    lt_store *store;
    const lt_backend_desc *be;
    lt_ctx ctx;
    char prefix[64]; /* unique per scenario: the store is shared by all of them */
} child;

typedef int (*scenario_fn)(child *c);

#define CHECK(c, cond, ...)                                                                       \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "[rank %d] %s:%d: %s: ", (c)->rank, __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fprintf(stderr, "\n");                                                                \
            return 1;                                                                             \
        }                                                                                         \
    } while (0)

/* ---- values ---- */

static uint16_t f16_from(float f) { /* exact for the small values used here */
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    if (!(x & 0x7fffffffu)) return sign;
    int e = (int)((x >> 23) & 0xff) - 127 + 15;
    return (uint16_t)(sign | (unsigned)e << 10 | ((x >> 13) & 0x3ffu));
}

static float f16_to(uint16_t h) {
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? INFINITY : ldexpf((float)(1024 + m), e - 25);
    return (h & 0x8000) ? -v : v;
}

static uint16_t bf16_from(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    return (uint16_t)(x >> 16);
}

static float bf16_to(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static void put(void *buf, size_t i, lt_dtype t, double v) {
    switch (t) {
    case LT_F32: ((float *)buf)[i] = (float)v; break;
    case LT_F64: ((double *)buf)[i] = v; break;
    case LT_F16: ((uint16_t *)buf)[i] = f16_from((float)v); break;
    case LT_BF16: ((uint16_t *)buf)[i] = bf16_from((float)v); break;
    case LT_I8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case LT_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case LT_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case LT_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    }
}

static double get(const void *buf, size_t i, lt_dtype t) {
    switch (t) {
    case LT_F32: return ((const float *)buf)[i];
    case LT_F64: return ((const double *)buf)[i];
    case LT_F16: return f16_to(((const uint16_t *)buf)[i]);
    case LT_BF16: return bf16_to(((const uint16_t *)buf)[i]);
    case LT_I8: return ((const int8_t *)buf)[i];
    case LT_U8: return ((const uint8_t *)buf)[i];
    case LT_I32: return ((const int32_t *)buf)[i];
    case LT_I64: return (double)((const int64_t *)buf)[i];
    }
    return NAN;
}

static bool is_float(lt_dtype t) { return t == LT_F32 || t == LT_F64 || t == LT_F16 || t == LT_BF16; }

/* Small integers (exact in every dtype, sums too), negative except for u8. */
static double input(int rank, size_t i, lt_dtype t) {
    double v = (double)(i % 7) + 1 + rank * 3;
    return t == LT_U8 ? v : v - 5;
}

static double expected(lt_dtype t, lt_redop op, int world, size_t i) {
    double s = 0, mn = INFINITY, mx = -INFINITY;
    for (int r = 0; r < world; r++) {
        double v = input(r, i, t);
        s += v;
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
    }
    switch (op) {
    case LT_SUM: return s;
    case LT_MIN: return mn;
    case LT_MAX: return mx;
    case LT_AVG:
        if (t == LT_F64) return s / world;
        if (is_float(t)) return (double)((float)s / (float)world);
        return (double)((long long)s / world); /* C division truncates */
    }
    return NAN;
}

static bool close_enough(lt_dtype t, double got, double want) {
    if (t == LT_F16 || t == LT_BF16) return fabs(got - want) <= 0.01 * fabs(want) + 0.01;
    return got == want;
}

/* ---- plumbing ---- */

static lt_backend_group *make_group(child *c, const char *name, int64_t timeout_ms, int threads) {
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s%s", c->prefix, name);
    lt_pg_options o = {.struct_size = sizeof o, .prefix = prefix, .timeout_ms = timeout_ms,
                       .mem_kind = LT_MEM_HOST, .num_threads = threads};
    lt_backend_group *g = NULL;
    lt_status st = c->be->create(&c->ctx, c->store, c->rank, c->world, &o, &g);
    if (st != LT_OK)
        fprintf(stderr, "[rank %d] create '%s': %s: %s\n", c->rank, prefix, lt_status_str(st),
                lt_last_error(&c->ctx));
    return g;
}

/* All ranks reach this point (through the store, which has no short
 * timeout) before a group with a short timeout is created, so a slow start
 * of one rank on a loaded machine is not mistaken for the timeout under test. */
static int store_barrier(child *c, const char *name) {
    char key[160];
    snprintf(key, sizeof key, "%s%s/%d", c->prefix, name, c->rank);
    if (lt_store_set(c->store, key, "1", 1) != LT_OK) return 1;
    for (int r = 0; r < c->world; r++) {
        snprintf(key, sizeof key, "%s%s/%d", c->prefix, name, r);
        const char *k = key;
        if (lt_store_wait(c->store, &k, 1, WAIT_MS) != LT_OK) return 1;
    }
    return 0;
}

/* Waits for and frees a work; returns its status (the message goes to stderr).
 * The work comes by address: it is read only after the issuing call ran. */
static lt_status finish(child *c, lt_status issued, lt_backend_work **wp) {
    if (issued != LT_OK) {
        fprintf(stderr, "[rank %d] issue: %s\n", c->rank, lt_last_error(&c->ctx));
        return issued;
    }
    lt_backend_work *w = *wp;
    lt_status st = c->be->wait(&c->ctx, w, WAIT_MS);
    if (st != LT_OK) fprintf(stderr, "[rank %d] wait: %s\n", c->rank, lt_last_error(&c->ctx));
    c->be->free_work(&c->ctx, w);
    return st;
}

static void child_main(int rank, int world, scenario_fn fn) {
    alarm(60); /* a hung rank dies instead of hanging the suite */
    close(g_host_stop);
    child c = {.rank = rank, .world = world};
    char err[512];
    if (lt_store_connect("127.0.0.1", g_port, NULL, 10000, &c.store, err, sizeof err) != LT_OK) {
        fprintf(stderr, "[rank %d] %s\n", rank, err);
        _exit(2);
    }
    lt_store_set_timeout(c.store, WAIT_MS);
    void *h = dlopen(PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "[rank %d] dlopen: %s\n", rank, dlerror());
        _exit(3);
    }
    lt_plugin_entry_fn entry = (lt_plugin_entry_fn)dlsym(h, LT_PLUGIN_ENTRY_SYMBOL);
    const lt_plugin_header *const *list = entry ? entry() : NULL;
    if (!list || !list[0] || list[0]->kind != LT_KIND_BACKEND || strcmp(list[0]->name, HARNESS_NAME) ||
        list[0]->struct_size != sizeof(lt_backend_desc)) {
        fprintf(stderr, "[rank %d] %s does not export the " HARNESS_NAME " backend descriptor\n", rank, PLUGIN);
        _exit(4);
    }
    c.be = (const lt_backend_desc *)list[0];
    lt_config *cfg = harness_config ? harness_config(rank) : NULL;
    lt_ctx_init(&c.ctx, LT_KIND_BACKEND, HARNESS_NAME, list[0], cfg);
    lt_log_set_rank(rank);
    snprintf(c.prefix, sizeof c.prefix, "s%d/", g_scenario);
    int rc = fn(&c);
    lt_store_close(c.store);
    fflush(stderr);
    _exit(rc);
}

/* Forks `world` ranks running fn; returns how many failed. */
static int run_ranks(int world, scenario_fn fn) {
    pid_t pids[8];
    g_scenario++;
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] == 0) child_main(r, world, fn);
    }
    int failed = 0;
    for (int r = 0; r < world; r++) {
        int status = 0;
        if (pids[r] < 0 || waitpid(pids[r], &status, 0) < 0) {
            failed++;
            continue;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status)) {
            fprintf(stderr, "rank %d of %d: %s %d\n", r, world,
                    WIFEXITED(status) ? "exit code" : "killed by signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
            failed++;
        }
    }
    return failed;
}

/* ---- scenarios ---- */

static int check_allreduce(child *c, lt_backend_group *g, lt_dtype t, lt_redop op, size_t n) {
    size_t esz = lt_dtype_size(t);
    void *buf = malloc(n * esz + 1);
    for (size_t i = 0; i < n; i++) put(buf, i, t, input(c->rank, i, t));
    lt_backend_work *w = NULL;
    lt_status st = finish(c, c->be->allreduce(&c->ctx, g, buf, n, t, op, &w), &w);
    CHECK(c, st == LT_OK, "allreduce %s op %d n %zu", lt_dtype_name(t), op, n);
    for (size_t i = 0; i < n; i++) {
        double want = expected(t, op, c->world, i), got = get(buf, i, t);
        CHECK(c, close_enough(t, got, want), "allreduce %s op %d n %zu: [%zu] = %g, want %g",
              lt_dtype_name(t), op, n, i, got, want);
    }
    free(buf);
    return 0;
}

static int check_broadcast(child *c, lt_backend_group *g, lt_dtype t, int root, size_t n) {
    void *buf = malloc(n * lt_dtype_size(t) + 1);
    for (size_t i = 0; i < n; i++) put(buf, i, t, input(c->rank, i, t));
    lt_backend_work *w = NULL;
    CHECK(c, finish(c, c->be->broadcast(&c->ctx, g, buf, n, t, root, &w), &w) == LT_OK, "broadcast");
    for (size_t i = 0; i < n; i++)
        CHECK(c, get(buf, i, t) == input(root, i, t), "broadcast %s root %d: [%zu] = %g, want %g",
              lt_dtype_name(t), root, i, get(buf, i, t), input(root, i, t));
    free(buf);
    return 0;
}

static int check_allgather(child *c, lt_backend_group *g, lt_dtype t, size_t n, bool in_place) {
    size_t esz = lt_dtype_size(t);
    unsigned char *recv = calloc((size_t)c->world * n + 1, esz);
    unsigned char *send = in_place ? recv + (size_t)c->rank * n * esz : malloc(n * esz + 1);
    for (size_t i = 0; i < n; i++) put(send, i, t, input(c->rank, i, t));
    lt_backend_work *w = NULL;
    CHECK(c, finish(c, c->be->allgather(&c->ctx, g, send, recv, n, t, &w), &w) == LT_OK, "allgather");
    for (int r = 0; r < c->world; r++)
        for (size_t i = 0; i < n; i++)
            CHECK(c, get(recv, (size_t)r * n + i, t) == input(r, i, t),
                  "allgather %s%s: rank %d's [%zu] = %g, want %g", lt_dtype_name(t),
                  in_place ? " in place" : "", r, i, get(recv, (size_t)r * n + i, t), input(r, i, t));
    if (!in_place) free(send);
    free(recv);
    return 0;
}

static int check_reduce_scatter(child *c, lt_backend_group *g, lt_dtype t, lt_redop op, size_t n) {
    size_t esz = lt_dtype_size(t), total = (size_t)c->world * n;
    void *send = malloc(total * esz + 1), *recv = malloc(n * esz + 1);
    for (size_t i = 0; i < total; i++) put(send, i, t, input(c->rank, i, t));
    lt_backend_work *w = NULL;
    CHECK(c, finish(c, c->be->reduce_scatter(&c->ctx, g, send, recv, n, t, op, &w), &w) == LT_OK,
          "reduce_scatter");
    for (size_t i = 0; i < n; i++) {
        double want = expected(t, op, c->world, (size_t)c->rank * n + i), got = get(recv, i, t);
        CHECK(c, close_enough(t, got, want), "reduce_scatter %s op %d n %zu: [%zu] = %g, want %g",
              lt_dtype_name(t), op, n, i, got, want);
    }
    free(send);
    free(recv);
    return 0;
}

/* ---- scenarios every backend runs ---- */

/* Eight allreduces of different values in flight on one group, waited for in
 * reverse order. */
static int check_many_in_flight(child *c, lt_backend_group *g) {
    enum { K = 8, N = 20000 };
    static int32_t bufs[K][N];
    lt_backend_work *w[K];
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < N; i++) bufs[k][i] = (int32_t)(input(c->rank, (size_t)i, LT_I32) * (k + 1));
        CHECK(c, c->be->allreduce(&c->ctx, g, bufs[k], N, LT_I32, LT_SUM, &w[k]) == LT_OK, "issue %d", k);
    }
    for (int k = K - 1; k >= 0; k--) CHECK(c, finish(c, LT_OK, &w[k]) == LT_OK, "wait %d", k);
    for (int k = 0; k < K; k++)
        for (int i = 0; i < N; i++)
            CHECK(c, bufs[k][i] == expected(LT_I32, LT_SUM, c->world, (size_t)i) * (k + 1), "[%d][%d] = %d", k, i,
                  bufs[k][i]);
    return 0;
}

/* Two allreduces in flight at once on one group and one on a second group,
 * waited for in reverse order; then many in flight on the first; destroying
 * one group leaves the other working. */
static int harness_sc_overlap(child *c) {
    lt_backend_group *g1 = make_group(c, "one/", WAIT_MS, 0);
    lt_backend_group *g2 = make_group(c, "two/", WAIT_MS, 0);
    CHECK(c, g1 && g2, "create");
    enum { N = 50000 };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *d = malloc(N * sizeof *d);
    for (int i = 0; i < N; i++) {
        a[i] = (float)input(c->rank, i, LT_F32);
        b[i] = 2 * a[i];
        d[i] = 3 * a[i];
    }
    lt_backend_work *wa, *wb, *wd;
    CHECK(c, c->be->allreduce(&c->ctx, g1, a, N, LT_F32, LT_SUM, &wa) == LT_OK, "issue a");
    /* The groups are independent: ranks may even issue on them in different orders. */
    if (c->rank % 2) {
        CHECK(c, c->be->allreduce(&c->ctx, g2, d, N, LT_F32, LT_MAX, &wd) == LT_OK, "issue d");
        CHECK(c, c->be->allreduce(&c->ctx, g1, b, N, LT_F32, LT_SUM, &wb) == LT_OK, "issue b");
    } else {
        CHECK(c, c->be->allreduce(&c->ctx, g1, b, N, LT_F32, LT_SUM, &wb) == LT_OK, "issue b");
        CHECK(c, c->be->allreduce(&c->ctx, g2, d, N, LT_F32, LT_MAX, &wd) == LT_OK, "issue d");
    }
    CHECK(c, finish(c, LT_OK, &wd) == LT_OK, "wait d");
    CHECK(c, finish(c, LT_OK, &wb) == LT_OK, "wait b");
    CHECK(c, finish(c, LT_OK, &wa) == LT_OK, "wait a");
    for (int i = 0; i < N; i++) {
        double s = expected(LT_F32, LT_SUM, c->world, (size_t)i), m = expected(LT_F32, LT_MAX, c->world, (size_t)i);
        CHECK(c, a[i] == s && b[i] == 2 * s && d[i] == 3 * m, "[%d]: %g %g %g", i, a[i], b[i], d[i]);
    }
    if (check_many_in_flight(c, g1)) return 1;
    CHECK(c, c->be->destroy(&c->ctx, g1) == LT_OK, "destroy g1");
    if (check_allreduce(c, g2, LT_I32, LT_SUM, 99)) return 1;
    CHECK(c, c->be->destroy(&c->ctx, g2) == LT_OK, "destroy g2");
    free(a);
    free(b);
    free(d);
    return 0;
}

/* 2 ranks; rank 1 never joins a collective of a group with a 1.5 s timeout:
 * rank 0's wait first reports "still running" (the work stays valid), then
 * the timeout as an error naming the collective, after between 1.4 and
 * max_seconds s (0: not timed); the group then fails fast. */
static int harness_sc_timeout(child *c, double max_seconds) {
    CHECK(c, !store_barrier(c, "tmo-ready"), "store barrier");
    lt_backend_group *g = make_group(c, "tmo/", 1500, 0);
    CHECK(c, g, "create");
    char key[128];
    snprintf(key, sizeof key, "%sdone", c->prefix);
    if (c->rank == 1) {
        void *v;
        size_t n;
        CHECK(c, lt_store_get(c->store, key, &v, &n) == LT_OK, "rank 0 finished: %s", lt_store_error(c->store));
        free(v);
        c->be->destroy(&c->ctx, g);
        return 0;
    }
    float buf[64] = {0};
    lt_backend_work *w;
    double t0 = lt_now();
    CHECK(c, c->be->allreduce(&c->ctx, g, buf, 64, LT_F32, LT_SUM, &w) == LT_OK, "issue");
    CHECK(c, c->be->wait(&c->ctx, w, 0) == LT_ERR_TIMEOUT, "poll");
    CHECK(c, strstr(lt_last_error(&c->ctx), "still running"), "poll message: %s", lt_last_error(&c->ctx));
    lt_status st = c->be->wait(&c->ctx, w, WAIT_MS);
    double dt = lt_now() - t0;
    CHECK(c, st == LT_ERR_TIMEOUT, HARNESS_NAME " timeout, got %s: %s", lt_status_str(st), lt_last_error(&c->ctx));
    if (max_seconds > 0)
        CHECK(c, dt > 1.4 && dt < max_seconds, "timed out after %.3f s, want 1.5 (1.4 to %.1f)", dt, max_seconds);
    CHECK(c, strstr(lt_last_error(&c->ctx), "allreduce #1 on group") &&
                 strstr(lt_last_error(&c->ctx), "timed out"),
          "message: %s", lt_last_error(&c->ctx));
    c->be->free_work(&c->ctx, w);
    st = finish(c, c->be->barrier(&c->ctx, g, &w), &w);
    CHECK(c, st == LT_ERR_ABORTED && strstr(lt_last_error(&c->ctx), "failed earlier"), "after: %s",
          lt_last_error(&c->ctx));
    CHECK(c, lt_store_set(c->store, key, "1", 1) == LT_OK, "set done");
    c->be->destroy(&c->ctx, g);
    return 0;
}

/* Bad requests every backend refuses at issue, with a message; then an
 * allreduce on g shows they broke nothing (nor did the backend's own refused
 * requests, checked before this). */
static int harness_bad_requests(child *c, lt_backend_group *g) {
    lt_backend_work *w = NULL;
    float x = 1;
    CHECK(c, c->be->allreduce(&c->ctx, g, &x, 1, (lt_dtype)99, LT_SUM, &w) == LT_ERR_UNSUPPORTED, "dtype 99");
    CHECK(c, strstr(lt_last_error(&c->ctx), "dtype 99"), "message: %s", lt_last_error(&c->ctx));
    CHECK(c, c->be->allreduce(&c->ctx, g, &x, 1, LT_F32, (lt_redop)9, &w) == LT_ERR_UNSUPPORTED, "op 9");
    CHECK(c, c->be->broadcast(&c->ctx, g, &x, 1, LT_F32, c->world, &w) == LT_ERR_INVALID, "root");
    CHECK(c, c->be->allreduce(&c->ctx, g, NULL, 4, LT_F32, LT_SUM, &w) == LT_ERR_INVALID, "NULL buffer");
    bool ok = true;
    CHECK(c, c->be->supports(&c->ctx, (lt_dtype)0, LT_SUM, &ok) == LT_OK && !ok, "supports dtype 0");
    return check_allreduce(c, g, LT_I64, LT_MAX, 5);
}

static int suite_init(void) {
    if (access(PLUGIN, R_OK)) {
        fprintf(stderr, "%s is missing: build the " HARNESS_NAME " plugin first\n", PLUGIN);
        return -1;
    }
    signal(SIGPIPE, SIG_IGN);
    int port_pipe[2], stop_pipe[2];
    if (pipe(port_pipe) || pipe(stop_pipe)) return -1;
    fflush(stdout);
    fflush(stderr);
    g_host = fork();
    if (g_host < 0) return -1;
    if (g_host == 0) { /* the store host: serve until the parent closes the stop pipe */
        close(stop_pipe[1]);
        close(port_pipe[0]);
        lt_store_server *srv;
        char err[256];
        int port = -1;
        if (lt_store_server_start("127.0.0.1", 0, NULL, &srv, &port, err, sizeof err) != LT_OK) {
            fprintf(stderr, "store host: %s\n", err);
            port = -1;
        }
        if (write(port_pipe[1], &port, sizeof port) != (ssize_t)sizeof port) _exit(1);
        char b;
        while (read(stop_pipe[0], &b, 1) > 0) {
        }
        if (port > 0) lt_store_server_stop(srv);
        _exit(0);
    }
    close(stop_pipe[0]);
    close(port_pipe[1]);
    g_host_stop = stop_pipe[1];
    ssize_t n = read(port_pipe[0], &g_port, sizeof g_port);
    close(port_pipe[0]);
    return n == (ssize_t)sizeof g_port && g_port > 0 ? 0 : -1;
}

static int suite_clean(void) {
    close(g_host_stop);
    waitpid(g_host, NULL, 0);
    return 0;
}

#endif
