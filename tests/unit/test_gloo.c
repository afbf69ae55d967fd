/* The gloo backend plugin across real processes. Each scenario forks 1, 2 or
 * 3 ranks that dlopen the built plugin, create groups through the rendezvous
 * store and check every collective against values computed locally from
 * rank-dependent inputs. A child reports through its exit code (and a line on
 * stderr saying what failed).
 *
 * The store runs in a process forked first, not on a thread here: forking
 * while another thread holds an allocator lock deadlocks the child (seen
 * under ASan), so this parent stays single-threaded. */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <dlfcn.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "ctx.h"
#include "lt/backend.h"
#include "store_server.h"

#define PLUGIN LT_TEST_PLUGIN_DIR "/liblt-backend-gloo.so"
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
    if (!list || !list[0] || list[0]->kind != LT_KIND_BACKEND || strcmp(list[0]->name, "gloo") ||
        list[0]->struct_size != sizeof(lt_backend_desc)) {
        fprintf(stderr, "[rank %d] %s does not export the gloo backend descriptor\n", rank, PLUGIN);
        _exit(4);
    }
    c.be = (const lt_backend_desc *)list[0];
    lt_ctx_init(&c.ctx, LT_KIND_BACKEND, "gloo", list[0], NULL);
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

static int sc_collectives(child *c) {
    lt_backend_group *g = make_group(c, "main/", WAIT_MS, 0);
    CHECK(c, g, "create");
    static const lt_dtype dts[] = {LT_F32, LT_F64, LT_F16, LT_BF16, LT_I8, LT_U8, LT_I32, LT_I64};
    static const lt_redop ops[] = {LT_SUM, LT_AVG, LT_MIN, LT_MAX};
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
        for (size_t o = 0; o < sizeof ops / sizeof *ops; o++)
            for (size_t n = 1; n <= 1001; n += 500)
                if (check_allreduce(c, g, dts[d], ops[o], n)) return 1;
    /* Several of gloo's 1 MiB segments, and nothing at all. */
    if (check_allreduce(c, g, LT_F32, LT_SUM, 700001) || check_allreduce(c, g, LT_F32, LT_AVG, 300007) ||
        check_allreduce(c, g, LT_F64, LT_SUM, 0))
        return 1;
    for (int root = 0; root < c->world; root += c->world > 1 ? c->world - 1 : 1)
        for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
            if (check_broadcast(c, g, dts[d], root, 513)) return 1;
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
        if (check_allgather(c, g, dts[d], 13, false) || check_allgather(c, g, dts[d], 13, true)) return 1;
    if (check_allgather(c, g, LT_F32, 100003, false)) return 1;
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
        for (size_t o = 0; o < sizeof ops / sizeof *ops; o++)
            if (check_reduce_scatter(c, g, dts[d], ops[o], 11)) return 1;
    if (check_reduce_scatter(c, g, LT_F32, LT_AVG, 200003)) return 1;
    lt_backend_work *w = NULL;
    CHECK(c, finish(c, c->be->barrier(&c->ctx, g, &w), &w) == LT_OK, "barrier");

    /* Bad requests are refused at issue, with a message, and break nothing. */
    float x = 1;
    CHECK(c, c->be->allreduce(&c->ctx, g, &x, 1, (lt_dtype)99, LT_SUM, &w) == LT_ERR_UNSUPPORTED, "dtype 99");
    CHECK(c, strstr(lt_last_error(&c->ctx), "dtype 99"), "message: %s", lt_last_error(&c->ctx));
    CHECK(c, c->be->allreduce(&c->ctx, g, &x, 1, LT_F32, (lt_redop)9, &w) == LT_ERR_UNSUPPORTED, "op 9");
    CHECK(c, c->be->broadcast(&c->ctx, g, &x, 1, LT_F32, c->world, &w) == LT_ERR_INVALID, "root");
    CHECK(c, c->be->allreduce(&c->ctx, g, NULL, 4, LT_F32, LT_SUM, &w) == LT_ERR_INVALID, "NULL buffer");
    bool ok = false;
    CHECK(c, c->be->supports(&c->ctx, LT_BF16, LT_AVG, &ok) == LT_OK && ok, "supports bf16 avg");
    CHECK(c, c->be->supports(&c->ctx, (lt_dtype)0, LT_SUM, &ok) == LT_OK && !ok, "supports dtype 0");
    if (check_allreduce(c, g, LT_I64, LT_MAX, 5)) return 1;
    CHECK(c, c->be->destroy(&c->ctx, g) == LT_OK, "destroy");
    return 0;
}

/* Two allreduces in flight at once, waited for in reverse order. */
static int sc_overlap_and_two_groups(child *c) {
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
    /* Destroying one group leaves the other working. */
    CHECK(c, c->be->destroy(&c->ctx, g1) == LT_OK, "destroy g1");
    if (check_allreduce(c, g2, LT_I32, LT_SUM, 99)) return 1;
    CHECK(c, c->be->destroy(&c->ctx, g2) == LT_OK, "destroy g2");
    free(a);
    free(b);
    free(d);
    return 0;
}

/* Several contexts per group: collectives dealt round-robin, all in flight. */
static int sc_threads(child *c) {
    lt_backend_group *g = make_group(c, "mt/", WAIT_MS, 3);
    CHECK(c, g, "create");
    enum { K = 8, N = 20000 };
    static int32_t bufs[K][N];
    lt_backend_work *w[K];
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < N; i++) bufs[k][i] = (int32_t)(input(c->rank, (size_t)i, LT_I32) * (k + 1));
        CHECK(c, c->be->allreduce(&c->ctx, g, bufs[k], N, LT_I32, LT_SUM, &w[k]) == LT_OK, "issue");
    }
    for (int k = K - 1; k >= 0; k--) CHECK(c, finish(c, LT_OK, &w[k]) == LT_OK, "wait %d", k);
    for (int k = 0; k < K; k++)
        for (int i = 0; i < N; i++)
            CHECK(c, bufs[k][i] == expected(LT_I32, LT_SUM, c->world, (size_t)i) * (k + 1), "[%d][%d]", k, i);
    if (check_reduce_scatter(c, g, LT_F64, LT_SUM, 1000)) return 1;
    CHECK(c, c->be->destroy(&c->ctx, g) == LT_OK, "destroy");
    return 0;
}

/* Everyone sends to the right and receives from the left at once (posted
 * before any wait: no deadlock), two tags received in the other order, and a
 * collective in between. */
static int sc_p2p(child *c) {
    lt_backend_group *g = make_group(c, "p2p/", WAIT_MS, 0);
    CHECK(c, g, "create");
    enum { N = 100000 };
    int right = (c->rank + 1) % c->world, left = (c->rank + c->world - 1) % c->world;
    double *s1 = malloc(N * sizeof *s1), *s2 = malloc(N * sizeof *s2);
    double *r1 = calloc(N, sizeof *r1), *r2 = calloc(N, sizeof *r2);
    for (int i = 0; i < N; i++) {
        s1[i] = c->rank * 1000.0 + i;
        s2[i] = -(c->rank * 1000.0 + i);
    }
    lt_backend_work *ws1, *ws2, *wr1, *wr2, *wa;
    CHECK(c, c->be->send(&c->ctx, g, s1, N, LT_F64, right, 1, &ws1) == LT_OK, "send 1");
    CHECK(c, c->be->send(&c->ctx, g, s2, N, LT_F64, right, 2, &ws2) == LT_OK, "send 2");
    CHECK(c, c->be->recv(&c->ctx, g, r2, N, LT_F64, left, 2, &wr2) == LT_OK, "recv 2");
    float x = 1;
    CHECK(c, c->be->allreduce(&c->ctx, g, &x, 1, LT_F32, LT_SUM, &wa) == LT_OK, "allreduce");
    CHECK(c, c->be->recv(&c->ctx, g, r1, N, LT_F64, left, 1, &wr1) == LT_OK, "recv 1");
    CHECK(c, finish(c, LT_OK, &wr1) == LT_OK, "wait recv 1");
    CHECK(c, finish(c, LT_OK, &wr2) == LT_OK, "wait recv 2");
    CHECK(c, finish(c, LT_OK, &ws1) == LT_OK, "wait send 1");
    CHECK(c, finish(c, LT_OK, &ws2) == LT_OK, "wait send 2");
    CHECK(c, finish(c, LT_OK, &wa) == LT_OK && x == (float)c->world, "allreduce = %g", x);
    for (int i = 0; i < N; i++)
        CHECK(c, r1[i] == left * 1000.0 + i && r2[i] == -(left * 1000.0 + i), "[%d]: %g %g", i, r1[i], r2[i]);
    lt_backend_work *w;
    CHECK(c, c->be->send(&c->ctx, g, s1, 1, LT_F64, c->rank, 0, &w) == LT_ERR_INVALID, "send to self");
    CHECK(c, c->be->destroy(&c->ctx, g) == LT_OK, "destroy");
    free(s1);
    free(s2);
    free(r1);
    free(r2);
    return 0;
}

/* Rank 1 never joins a collective: rank 0's wait first reports "still
 * running" (the work stays valid), then gloo's timeout as an error naming the
 * collective; the group then fails fast. */
static int sc_timeout(child *c) {
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
    CHECK(c, c->be->allreduce(&c->ctx, g, buf, 64, LT_F32, LT_SUM, &w) == LT_OK, "issue");
    CHECK(c, c->be->wait(&c->ctx, w, 0) == LT_ERR_TIMEOUT, "poll");
    CHECK(c, strstr(lt_last_error(&c->ctx), "still running"), "poll message: %s", lt_last_error(&c->ctx));
    lt_status st = c->be->wait(&c->ctx, w, WAIT_MS);
    CHECK(c, st == LT_ERR_TIMEOUT, "gloo timeout, got %s: %s", lt_status_str(st), lt_last_error(&c->ctx));
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

/* Rank 0 is stuck in an allreduce rank 1 never joins (rank 1 waits on a recv
 * rank 0 never sends) and aborts: rank 0's wait returns ABORTED, so does
 * every later one, and rank 1's recv fails long before the group's timeout. */
static int sc_abort(child *c) {
    lt_backend_group *g = make_group(c, "abort/", 60000, 0);
    CHECK(c, g, "create");
    float buf[1024] = {0};
    lt_backend_work *w;
    if (c->rank == 1) {
        CHECK(c, c->be->recv(&c->ctx, g, buf, 1024, LT_F32, 0, 7, &w) == LT_OK, "recv");
        lt_status st = c->be->wait(&c->ctx, w, WAIT_MS);
        CHECK(c, st != LT_OK && st != LT_ERR_TIMEOUT, "peer's abort seen, got %s: %s", lt_status_str(st),
              lt_last_error(&c->ctx));
        CHECK(c, strstr(lt_last_error(&c->ctx), "peer rank 0"), "names the peer: %s", lt_last_error(&c->ctx));
        c->be->free_work(&c->ctx, w);
        CHECK(c, c->be->destroy(&c->ctx, g) == LT_OK, "destroy");
        return 0;
    }
    CHECK(c, c->be->allreduce(&c->ctx, g, buf, 1024, LT_F32, LT_SUM, &w) == LT_OK, "issue");
    CHECK(c, c->be->wait(&c->ctx, w, 200) == LT_ERR_TIMEOUT, "still running");
    lt_backend_work *queued;
    CHECK(c, c->be->barrier(&c->ctx, g, &queued) == LT_OK, "queue behind it");
    CHECK(c, c->be->abort(&c->ctx, g) == LT_OK, "abort");
    CHECK(c, c->be->wait(&c->ctx, w, WAIT_MS) == LT_ERR_ABORTED, "aborted: %s", lt_last_error(&c->ctx));
    CHECK(c, c->be->wait(&c->ctx, queued, WAIT_MS) == LT_ERR_ABORTED, "queued: %s", lt_last_error(&c->ctx));
    c->be->free_work(&c->ctx, w);
    c->be->free_work(&c->ctx, queued);
    CHECK(c, finish(c, c->be->allreduce(&c->ctx, g, buf, 4, LT_F32, LT_SUM, &w), &w) == LT_ERR_ABORTED, "later");
    CHECK(c, c->be->abort(&c->ctx, g) == LT_OK, "abort twice");
    CHECK(c, c->be->destroy(&c->ctx, g) == LT_OK, "destroy");
    return 0;
}

/* Ranks that disagree on a size: gloo itself would terminate the process
 * (its event loop throws when a peer sends more than the posted receive
 * holds); the backend keeps such calls apart, so they time out instead. The
 * first side to time out closes its connections, so the other may see that
 * close (an I/O error) just before its own timeout. */
static int sc_mismatch(child *c) {
    CHECK(c, !store_barrier(c, "mm-ready"), "store barrier");
    lt_backend_group *g = make_group(c, "mm/", 1500, 0);
    lt_backend_group *p = make_group(c, "mmp/", 1500, 0);
    CHECK(c, g && p, "create");
    float buf[400] = {0};
    lt_backend_work *w;
    lt_status st = finish(c, c->be->allreduce(&c->ctx, g, buf, 100 * (size_t)(c->rank + 1), LT_F32, LT_SUM, &w), &w);
    CHECK(c, st == LT_ERR_TIMEOUT || st == LT_ERR_IO, "allreduce of different sizes: %s", lt_status_str(st));
    if (c->rank == 0)
        st = finish(c, c->be->send(&c->ctx, p, buf, 10, LT_F32, 1, 3, &w), &w);
    else
        st = finish(c, c->be->recv(&c->ctx, p, buf, 20, LT_F32, 0, 3, &w), &w);
    CHECK(c, st == LT_ERR_TIMEOUT || st == LT_ERR_IO, "send 10 / recv 20: %s", lt_status_str(st));
    c->be->destroy(&c->ctx, g);
    c->be->destroy(&c->ctx, p);
    return 0;
}

/* ---- CUnit ---- */

static void test_collectives_2(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_collectives), 0); }
static void test_collectives_3(void) { CU_ASSERT_EQUAL(run_ranks(3, sc_collectives), 0); }
static void test_collectives_1(void) { CU_ASSERT_EQUAL(run_ranks(1, sc_collectives), 0); }
static void test_overlap_two_groups(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_overlap_and_two_groups), 0); }
static void test_threads(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_threads), 0); }
static void test_p2p_2(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_p2p), 0); }
static void test_p2p_3(void) { CU_ASSERT_EQUAL(run_ranks(3, sc_p2p), 0); }
static void test_timeout(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_timeout), 0); }
static void test_abort(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_abort), 0); }
static void test_mismatch(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_mismatch), 0); }

static int suite_init(void) {
    if (access(PLUGIN, R_OK)) {
        fprintf(stderr, "%s is missing: build the gloo plugin first\n", PLUGIN);
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

int main(void) {
    unsetenv("LT_RDZV_TOKEN");
    unsetenv("MASTER_ADDR"); /* gloo binds 127.0.0.1 */
    unsetenv("GLOO_SOCKET_IFNAME");
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("gloo", suite_init, suite_clean);
    CU_add_test(s, "collectives, 2 ranks", test_collectives_2);
    CU_add_test(s, "collectives, 3 ranks", test_collectives_3);
    CU_add_test(s, "collectives, 1 rank", test_collectives_1);
    CU_add_test(s, "overlap and two groups", test_overlap_two_groups);
    CU_add_test(s, "several contexts per group", test_threads);
    CU_add_test(s, "send/recv, 2 ranks", test_p2p_2);
    CU_add_test(s, "send/recv, 3 ranks", test_p2p_3);
    CU_add_test(s, "timeout", test_timeout);
    CU_add_test(s, "abort", test_abort);
    CU_add_test(s, "mismatched sizes", test_mismatch);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed ? 1 : 0;
}
