/* The nccl backend plugin.
 *
 * Everywhere: the plugin loads through the registry (no GPU or driver
 * needed), says which memory it takes (device yes, host no) and which
 * dtypes and ops it reduces. Then a forked rank creates a group: without a
 * GPU, create() must fail with LT_ERR_UNSUPPORTED and a message that names
 * the missing device or driver and points to gloo; that is checked, and the
 * program exits 77 so ctest reports the GPU part skipped, never passed.
 *
 * With a GPU: one rank (NCCL takes one GPU per rank, and the test machine
 * may have one) runs every collective on cudaMalloc'ed buffers against
 * values computed on the host, several works in flight, two groups, the
 * order after the calling thread's per-thread stream (a host function
 * holding cudaStreamPerThread holds the collective back), the group's
 * timeout, and abort failing a pending wait.
 *
 * CUDA is touched only in forked ranks: a process that initialised CUDA
 * cannot use it in a forked child. The store host is forked first
 * (backend_harness.h). If the plugin was not built the program exits 77. */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "cunit_run.h"
#include "common/ctx.h"
#include "lt/backend.h"
#include "dist/store_server.h"
#include "registry/registry.h"

#ifdef LT_TEST_HAVE_CUDART
#include <cuda_runtime_api.h>
#endif

#define PLUGIN LT_TEST_PLUGIN_DIR "/liblt-backend-nccl.so"
#define HARNESS_NAME "nccl"
#include "backend_harness.h"

#define N_OF(a) (sizeof(a) / sizeof *(a))
static const lt_dtype all_dts[] = {LT_F32, LT_F64, LT_F16, LT_BF16, LT_I8, LT_U8, LT_I32, LT_I64};
static const lt_redop ops[] = {LT_SUM, LT_AVG, LT_MIN, LT_MAX};

static int g_have_gpu = -1; /* -1 unknown, 0 no, 1 yes: from the probe rank */

/* ---- without a device ---- */

static void test_registry_load(void) {
    lt_registry *r = lt_registry_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(lt_registry_add_dir(r, LT_TEST_PLUGIN_DIR), LT_OK);
    const lt_plugin_header *h = NULL;
    char err[1024] = "";
    lt_status st = lt_registry_load(r, LT_KIND_BACKEND, "nccl", &h, err, sizeof err);
    if (st != LT_OK) fprintf(stderr, "loading nccl: %s\n", err);
    CU_ASSERT_EQUAL_FATAL(st, LT_OK);
    CU_ASSERT_STRING_EQUAL(h->name, "nccl");
    CU_ASSERT_EQUAL(h->kind, LT_KIND_BACKEND);
    const lt_backend_desc *be = (const lt_backend_desc *)h;
    CU_ASSERT_PTR_NOT_NULL(be->create);
    CU_ASSERT_PTR_NOT_NULL(be->send);
    CU_ASSERT_PTR_NOT_NULL(be->supports_memory);
    lt_ctx ctx;
    lt_ctx_init(&ctx, LT_KIND_BACKEND, "nccl", h, NULL);
    bool yes = false, no = true;
    CU_ASSERT_EQUAL(be->supports_memory(&ctx, LT_MEM_DEVICE, &yes), LT_OK);
    CU_ASSERT_EQUAL(be->supports_memory(&ctx, LT_MEM_HOST, &no), LT_OK);
    CU_ASSERT_TRUE(yes);
    CU_ASSERT_FALSE(no);
    for (size_t d = 0; d < N_OF(all_dts); d++)
        for (size_t o = 0; o < N_OF(ops); o++) {
            bool ok = false;
            CU_ASSERT_EQUAL(be->supports(&ctx, all_dts[d], ops[o], &ok), LT_OK);
            if (!ok) fprintf(stderr, "supports(%s, op %d) = false\n", lt_dtype_name(all_dts[d]), (int)ops[o]);
            CU_ASSERT_TRUE(ok);
        }
    bool ok = true;
    CU_ASSERT_EQUAL(be->supports(&ctx, (lt_dtype)0, LT_SUM, &ok), LT_OK);
    CU_ASSERT_FALSE(ok);
    ok = true;
    CU_ASSERT_EQUAL(be->supports(&ctx, (lt_dtype)99, LT_MAX, &ok), LT_OK);
    CU_ASSERT_FALSE(ok);
    ok = true;
    CU_ASSERT_EQUAL(be->supports(&ctx, LT_F32, (lt_redop)9, &ok), LT_OK);
    CU_ASSERT_FALSE(ok);
    lt_registry_free(r);
}

static lt_backend_group *make_dgroup(child *c, const char *name, int64_t timeout_ms, uint32_t mem_kind,
                                     lt_status *st_out) {
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s%s", c->prefix, name);
    lt_pg_options o = {.struct_size = sizeof o, .prefix = prefix, .timeout_ms = timeout_ms, .mem_kind = mem_kind,
                       .device = 0, .connect_timeout_ms = WAIT_MS};
    lt_backend_group *g = NULL;
    lt_status st = c->be->create(&c->ctx, c->store, c->rank, c->world, &o, &g);
    if (st_out) *st_out = st;
    else if (st != LT_OK)
        fprintf(stderr, "[rank %d] create '%s': %s: %s\n", c->rank, prefix, lt_status_str(st),
                lt_last_error(&c->ctx));
    return g;
}

/* Exit 0: a GPU, and create worked; 10: no GPU, and create refused as it
 * must; anything else: a failure. */
static int sc_probe(child *c) {
    lt_status st;
    lt_backend_group *g = make_dgroup(c, "probe/", WAIT_MS, LT_MEM_DEVICE, &st);
    const char *msg = lt_last_error(&c->ctx);
    if (st == LT_ERR_UNSUPPORTED) {
        fprintf(stderr, "[rank %d] no GPU here; create said: %s\n", c->rank, msg);
        CHECK(c, strstr(msg, "gloo") && strstr(msg, "GPU machine"), "suggests gloo: %s", msg);
        CHECK(c, strstr(msg, "device") || strstr(msg, "driver"), "names the device or driver: %s", msg);
        CHECK(c, !strchr(msg, '\n'), "one line: %s", msg);
        /* A device is checked first, whatever the memory kind asked. */
        g = make_dgroup(c, "probe-host/", WAIT_MS, LT_MEM_HOST, &st);
        CHECK(c, !g && st == LT_ERR_UNSUPPORTED, "host memory without a GPU: %s", lt_status_str(st));
        return 10;
    }
    CHECK(c, st == LT_OK && g, "create on a GPU machine: %s: %s", lt_status_str(st), msg);
    CHECK(c, c->be->destroy(&c->ctx, g) == LT_OK, "destroy");
    g = make_dgroup(c, "probe-host/", WAIT_MS, LT_MEM_HOST, &st);
    CHECK(c, !g && st == LT_ERR_INVALID && strstr(lt_last_error(&c->ctx), "device memory"),
          "host memory refused: %s: %s", lt_status_str(st), lt_last_error(&c->ctx));
    return 0;
}

static void test_create_probe(void) {
    g_scenario++;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) child_main(0, 1, sc_probe);
    int status = 0;
    CU_ASSERT_FATAL(pid > 0 && waitpid(pid, &status, 0) == pid);
    CU_ASSERT_FATAL(WIFEXITED(status));
    int rc = WEXITSTATUS(status);
    if (rc == 10) {
        g_have_gpu = 0;
    } else {
        CU_ASSERT_EQUAL(rc, 0);
        g_have_gpu = rc == 0;
    }
}

/* ---- with a device ---- */

#ifdef LT_TEST_HAVE_CUDART

#define CUDA_OK(c, call)                                                                                  \
    do {                                                                                                  \
        cudaError_t e_ = (call);                                                                          \
        CHECK(c, e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));                            \
    } while (0)

/* The gate: a host function on the calling thread's per-thread stream that
 * holds it (and whatever the backend orders after it) until opened. */
static atomic_int g_gate;
static void CUDART_CB gate_fn(void *arg) {
    (void)arg;
    while (!atomic_load(&g_gate)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static int gate_close(child *c) {
    atomic_store(&g_gate, 0);
    CUDA_OK(c, cudaLaunchHostFunc(cudaStreamPerThread, gate_fn, NULL));
    return 0;
}

static void gate_open(void) { atomic_store(&g_gate, 1); }

/* Host values to a new device buffer, through the per-thread stream (as the
 * gpu accelerator copies). */
static void *dev_copy(const void *host, size_t bytes) {
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) return NULL;
    if (bytes && cudaMemcpyAsync(d, host, bytes, cudaMemcpyHostToDevice, cudaStreamPerThread) != cudaSuccess) {
        cudaFree(d);
        return NULL;
    }
    return d;
}

static int host_copy(child *c, void *host, const void *dev, size_t bytes) {
    if (!bytes) return 0;
    CUDA_OK(c, cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, cudaStreamPerThread));
    CUDA_OK(c, cudaStreamSynchronize(cudaStreamPerThread));
    return 0;
}

static int d_allreduce(child *c, lt_backend_group *g, lt_dtype t, lt_redop op, size_t n) {
    size_t esz = lt_dtype_size(t);
    void *h = malloc(n * esz + 1);
    for (size_t i = 0; i < n; i++) put(h, i, t, input(c->rank, i, t));
    void *d = dev_copy(h, n * esz);
    CHECK(c, d, "device buffer");
    lt_backend_work *w = NULL;
    CHECK(c, finish(c, c->be->allreduce(&c->ctx, g, d, n, t, op, &w), &w) == LT_OK, "allreduce %s op %d n %zu",
          lt_dtype_name(t), op, n);
    memset(h, 0x5a, n * esz);
    if (host_copy(c, h, d, n * esz)) return 1;
    for (size_t i = 0; i < n; i++) {
        double want = expected(t, op, c->world, i), got = get(h, i, t);
        CHECK(c, close_enough(t, got, want), "allreduce %s op %d n %zu: [%zu] = %g, want %g", lt_dtype_name(t), op,
              n, i, got, want);
    }
    cudaFree(d);
    free(h);
    return 0;
}

static int d_broadcast(child *c, lt_backend_group *g, lt_dtype t, int root, size_t n) {
    size_t esz = lt_dtype_size(t);
    void *h = malloc(n * esz + 1);
    for (size_t i = 0; i < n; i++) put(h, i, t, input(c->rank, i, t));
    void *d = dev_copy(h, n * esz);
    CHECK(c, d, "device buffer");
    lt_backend_work *w = NULL;
    CHECK(c, finish(c, c->be->broadcast(&c->ctx, g, d, n, t, root, &w), &w) == LT_OK, "broadcast");
    memset(h, 0x5a, n * esz);
    if (host_copy(c, h, d, n * esz)) return 1;
    for (size_t i = 0; i < n; i++)
        CHECK(c, get(h, i, t) == input(root, i, t), "broadcast %s root %d: [%zu] = %g, want %g", lt_dtype_name(t),
              root, i, get(h, i, t), input(root, i, t));
    cudaFree(d);
    free(h);
    return 0;
}

static int d_allgather(child *c, lt_backend_group *g, lt_dtype t, size_t n, bool in_place) {
    size_t esz = lt_dtype_size(t), total = (size_t)c->world * n;
    unsigned char *h = calloc(total + 1, esz);
    for (size_t i = 0; i < n; i++) put(h + (size_t)c->rank * n * esz, i, t, input(c->rank, i, t));
    unsigned char *recv = dev_copy(h, total * esz);
    unsigned char *send = in_place ? recv + (size_t)c->rank * n * esz : dev_copy(h + (size_t)c->rank * n * esz, n * esz);
    CHECK(c, recv && send, "device buffers");
    if (!in_place) CUDA_OK(c, cudaMemsetAsync(recv, 0, total * esz, cudaStreamPerThread));
    lt_backend_work *w = NULL;
    CHECK(c, finish(c, c->be->allgather(&c->ctx, g, send, recv, n, t, &w), &w) == LT_OK, "allgather");
    memset(h, 0x5a, total * esz);
    if (host_copy(c, h, recv, total * esz)) return 1;
    for (int r = 0; r < c->world; r++)
        for (size_t i = 0; i < n; i++)
            CHECK(c, get(h, (size_t)r * n + i, t) == input(r, i, t), "allgather %s%s: rank %d's [%zu] = %g, want %g",
                  lt_dtype_name(t), in_place ? " in place" : "", r, i, get(h, (size_t)r * n + i, t), input(r, i, t));
    if (!in_place) cudaFree(send);
    cudaFree(recv);
    free(h);
    return 0;
}

static int d_reduce_scatter(child *c, lt_backend_group *g, lt_dtype t, lt_redop op, size_t n) {
    size_t esz = lt_dtype_size(t), total = (size_t)c->world * n;
    void *h = malloc(total * esz + 1);
    for (size_t i = 0; i < total; i++) put(h, i, t, input(c->rank, i, t));
    void *send = dev_copy(h, total * esz), *recv = dev_copy(h, n * esz);
    CHECK(c, send && recv, "device buffers");
    CUDA_OK(c, cudaMemsetAsync(recv, 0, n * esz, cudaStreamPerThread));
    lt_backend_work *w = NULL;
    CHECK(c, finish(c, c->be->reduce_scatter(&c->ctx, g, send, recv, n, t, op, &w), &w) == LT_OK, "reduce_scatter");
    memset(h, 0x5a, n * esz);
    if (host_copy(c, h, recv, n * esz)) return 1;
    for (size_t i = 0; i < n; i++) {
        double want = expected(t, op, c->world, (size_t)c->rank * n + i), got = get(h, i, t);
        CHECK(c, close_enough(t, got, want), "reduce_scatter %s op %d n %zu: [%zu] = %g, want %g", lt_dtype_name(t),
              op, n, i, got, want);
    }
    cudaFree(send);
    cudaFree(recv);
    free(h);
    return 0;
}

/* Eight allreduces of different values in flight, waited for in reverse. */
static int d_many_in_flight(child *c, lt_backend_group *g) {
    enum { K = 8, N = 20000 };
    static int32_t h[K][N];
    void *d[K];
    lt_backend_work *w[K];
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < N; i++) h[k][i] = (int32_t)(input(c->rank, (size_t)i, LT_I32) * (k + 1));
        d[k] = dev_copy(h[k], sizeof h[k]);
        CHECK(c, d[k], "device buffer %d", k);
        CHECK(c, c->be->allreduce(&c->ctx, g, d[k], N, LT_I32, LT_SUM, &w[k]) == LT_OK, "issue %d", k);
    }
    for (int k = K - 1; k >= 0; k--) CHECK(c, finish(c, LT_OK, &w[k]) == LT_OK, "wait %d", k);
    for (int k = 0; k < K; k++) {
        if (host_copy(c, h[k], d[k], sizeof h[k])) return 1;
        for (int i = 0; i < N; i++)
            CHECK(c, h[k][i] == expected(LT_I32, LT_SUM, c->world, (size_t)i) * (k + 1), "[%d][%d] = %d", k, i,
                  h[k][i]);
        cudaFree(d[k]);
    }
    return 0;
}

static int sc_collectives(child *c) {
    lt_backend_group *g = make_dgroup(c, "main/", WAIT_MS, LT_MEM_DEVICE, NULL);
    CHECK(c, g, "create");
    for (size_t d = 0; d < N_OF(all_dts); d++)
        for (size_t o = 0; o < N_OF(ops); o++)
            for (size_t n = 1; n <= 1001; n += 1000)
                if (d_allreduce(c, g, all_dts[d], ops[o], n)) return 1;
    if (d_allreduce(c, g, LT_F32, LT_SUM, 700001) || d_allreduce(c, g, LT_F64, LT_SUM, 0)) return 1;
    for (size_t d = 0; d < N_OF(all_dts); d++)
        if (d_broadcast(c, g, all_dts[d], 0, 513)) return 1;
    for (size_t d = 0; d < N_OF(all_dts); d++)
        if (d_allgather(c, g, all_dts[d], 13, false) || d_allgather(c, g, all_dts[d], 13, true)) return 1;
    if (d_allgather(c, g, LT_F32, 100003, false)) return 1;
    for (size_t d = 0; d < N_OF(all_dts); d++)
        for (size_t o = 0; o < N_OF(ops); o++)
            if (d_reduce_scatter(c, g, all_dts[d], ops[o], 11)) return 1;
    if (d_reduce_scatter(c, g, LT_F32, LT_AVG, 200003)) return 1;
    lt_backend_work *w = NULL;
    for (int i = 0; i < 20; i++) CHECK(c, finish(c, c->be->barrier(&c->ctx, g, &w), &w) == LT_OK, "barrier %d", i);
    if (d_many_in_flight(c, g)) return 1;

    /* Bad requests are refused at issue, with a message, and break nothing. */
    float host[4] = {1, 2, 3, 4};
    CHECK(c, c->be->allreduce(&c->ctx, g, host, 4, LT_F32, LT_SUM, &w) == LT_ERR_INVALID, "host buffer");
    CHECK(c, strstr(lt_last_error(&c->ctx), "host memory"), "message: %s", lt_last_error(&c->ctx));
    void *d = dev_copy(host, sizeof host);
    CHECK(c, d, "device buffer");
    CHECK(c, c->be->allreduce(&c->ctx, g, d, 1, (lt_dtype)99, LT_SUM, &w) == LT_ERR_UNSUPPORTED, "dtype 99");
    CHECK(c, strstr(lt_last_error(&c->ctx), "dtype 99"), "message: %s", lt_last_error(&c->ctx));
    CHECK(c, c->be->allreduce(&c->ctx, g, d, 1, LT_F32, (lt_redop)9, &w) == LT_ERR_UNSUPPORTED, "op 9");
    CHECK(c, c->be->broadcast(&c->ctx, g, d, 1, LT_F32, c->world, &w) == LT_ERR_INVALID, "root");
    CHECK(c, c->be->allreduce(&c->ctx, g, NULL, 4, LT_F32, LT_SUM, &w) == LT_ERR_INVALID, "NULL buffer");
    CHECK(c, c->be->send(&c->ctx, g, d, 1, LT_F32, c->rank, 0, &w) == LT_ERR_INVALID, "send to self");
    CHECK(c, c->be->recv(&c->ctx, g, d, 1, LT_F32, c->world, 0, &w) == LT_ERR_INVALID, "recv from no rank");
    cudaFree(d);
    if (d_allreduce(c, g, LT_I64, LT_MAX, 5)) return 1;
    CHECK(c, c->be->destroy(&c->ctx, g) == LT_OK, "destroy");
    return 0;
}

/* Two groups with works in flight on both; destroying one leaves the other. */
static int sc_two_groups(child *c) {
    lt_backend_group *g1 = make_dgroup(c, "one/", WAIT_MS, LT_MEM_DEVICE, NULL);
    lt_backend_group *g2 = make_dgroup(c, "two/", WAIT_MS, LT_MEM_DEVICE, NULL);
    CHECK(c, g1 && g2, "create");
    enum { N = 50000 };
    float *h = malloc(N * sizeof *h);
    for (int i = 0; i < N; i++) h[i] = (float)input(c->rank, (size_t)i, LT_F32);
    float *a = dev_copy(h, N * sizeof *h), *b = dev_copy(h, N * sizeof *h);
    CHECK(c, a && b, "device buffers");
    lt_backend_work *wa, *wb;
    CHECK(c, c->be->allreduce(&c->ctx, g1, a, N, LT_F32, LT_SUM, &wa) == LT_OK, "issue a");
    CHECK(c, c->be->allreduce(&c->ctx, g2, b, N, LT_F32, LT_MAX, &wb) == LT_OK, "issue b");
    CHECK(c, finish(c, LT_OK, &wb) == LT_OK, "wait b");
    CHECK(c, finish(c, LT_OK, &wa) == LT_OK, "wait a");
    if (host_copy(c, h, a, N * sizeof *h)) return 1;
    for (int i = 0; i < N; i++)
        CHECK(c, h[i] == expected(LT_F32, LT_SUM, c->world, (size_t)i), "a[%d] = %g", i, h[i]);
    if (host_copy(c, h, b, N * sizeof *h)) return 1;
    for (int i = 0; i < N; i++)
        CHECK(c, h[i] == expected(LT_F32, LT_MAX, c->world, (size_t)i), "b[%d] = %g", i, h[i]);
    if (d_many_in_flight(c, g1)) return 1;
    CHECK(c, c->be->destroy(&c->ctx, g1) == LT_OK, "destroy g1");
    if (d_allreduce(c, g2, LT_I32, LT_SUM, 99)) return 1;
    CHECK(c, c->be->destroy(&c->ctx, g2) == LT_OK, "destroy g2");
    cudaFree(a);
    cudaFree(b);
    free(h);
    return 0;
}

/* A collective runs after what the calling thread queued before it on its
 * per-thread stream, and its result is there for what comes after wait. */
static int sc_stream_order(child *c) {
    lt_backend_group *g = make_dgroup(c, "order/", WAIT_MS, LT_MEM_DEVICE, NULL);
    CHECK(c, g, "create");
    enum { N = 4096 };
    static float h[N];
    for (int i = 0; i < N; i++) h[i] = 1;
    float *d = dev_copy(h, sizeof h);
    CHECK(c, d, "device buffer");
    /* Pinned: a copy from pageable memory may wait for the stream it is
     * queued on, which the gate holds. */
    float *pinned = NULL;
    CUDA_OK(c, cudaMallocHost((void **)&pinned, sizeof h));
    CHECK(c, cudaStreamSynchronize(cudaStreamPerThread) == cudaSuccess, "sync");
    if (gate_close(c)) return 1;
    /* Queued behind the gate: the values the allreduce must see. */
    for (int i = 0; i < N; i++) pinned[i] = (float)(i % 13);
    CUDA_OK(c, cudaMemcpyAsync(d, pinned, sizeof h, cudaMemcpyHostToDevice, cudaStreamPerThread));
    lt_backend_work *w;
    CHECK(c, c->be->allreduce(&c->ctx, g, d, N, LT_F32, LT_SUM, &w) == LT_OK, "issue");
    lt_status st = c->be->wait(&c->ctx, w, 0);
    CHECK(c, st == LT_ERR_TIMEOUT && strstr(lt_last_error(&c->ctx), "still running"),
          "held by the caller's stream, got %s: %s", lt_status_str(st), lt_last_error(&c->ctx));
    st = c->be->wait(&c->ctx, w, 300);
    CHECK(c, st == LT_ERR_TIMEOUT, "still held after 300 ms, got %s", lt_status_str(st));
    gate_open();
    CHECK(c, finish(c, LT_OK, &w) == LT_OK, "after the gate");
    memset(h, 0, sizeof h);
    if (host_copy(c, h, d, sizeof h)) return 1;
    for (int i = 0; i < N; i++) CHECK(c, h[i] == (float)(i % 13) * (float)c->world, "[%d] = %g", i, h[i]);
    cudaFreeHost(pinned);
    cudaFree(d);
    CHECK(c, c->be->destroy(&c->ctx, g) == LT_OK, "destroy");
    return 0;
}

/* abort() from another thread fails a pending wait (and the work queued
 * behind it) promptly, while the collective is still held back; every later
 * one fails too. */
static lt_backend_group *g_abort_group;
static void *abort_group_thread(void *arg) {
    child *c = arg;
    lt_ctx ctx;
    lt_ctx_init(&ctx, LT_KIND_BACKEND, HARNESS_NAME, &c->be->hdr, NULL);
    c->be->abort(&ctx, g_abort_group);
    return NULL;
}

static int sc_abort(child *c) {
    lt_backend_group *g = make_dgroup(c, "abort/", 60000, LT_MEM_DEVICE, NULL);
    CHECK(c, g, "create");
    g_abort_group = g;
    float h[256] = {0};
    float *d = dev_copy(h, sizeof h);
    CHECK(c, d, "device buffer");
    if (gate_close(c)) return 1;
    lt_backend_work *w, *queued;
    CHECK(c, c->be->allreduce(&c->ctx, g, d, 256, LT_F32, LT_SUM, &w) == LT_OK, "issue");
    CHECK(c, c->be->wait(&c->ctx, w, 200) == LT_ERR_TIMEOUT, "still running");
    CHECK(c, c->be->barrier(&c->ctx, g, &queued) == LT_OK, "queue behind it");
    pthread_t t;
    CHECK(c, pthread_create(&t, NULL, abort_group_thread, c) == 0, "thread");
    double t0 = lt_now();
    lt_status st = c->be->wait(&c->ctx, w, WAIT_MS);
    double dt = lt_now() - t0;
    CHECK(c, st == LT_ERR_ABORTED && strstr(lt_last_error(&c->ctx), "aborted"), "aborted, got %s: %s",
          lt_status_str(st), lt_last_error(&c->ctx));
    CHECK(c, dt < 5, "the wait ended %.1f s after abort", dt);
    CHECK(c, c->be->wait(&c->ctx, queued, WAIT_MS) == LT_ERR_ABORTED, "queued: %s", lt_last_error(&c->ctx));
    gate_open(); /* NCCL's abort may wait for the held stream to drain */
    pthread_join(t, NULL);
    c->be->free_work(&c->ctx, w);
    c->be->free_work(&c->ctx, queued);
    CHECK(c, finish(c, c->be->allreduce(&c->ctx, g, d, 4, LT_F32, LT_SUM, &w), &w) == LT_ERR_ABORTED, "later");
    CHECK(c, c->be->abort(&c->ctx, g) == LT_OK, "abort twice");
    CHECK(c, c->be->destroy(&c->ctx, g) == LT_OK, "destroy");
    CUDA_OK(c, cudaStreamSynchronize(cudaStreamPerThread));
    cudaFree(d);
    return 0;
}

/* The group's timeout (1.5 s) on a collective held back: the wait fails
 * with LT_ERR_TIMEOUT naming the collective, the group fails fast after. */
static int sc_timeout(child *c) {
    lt_backend_group *g = make_dgroup(c, "tmo/", 1500, LT_MEM_DEVICE, NULL);
    CHECK(c, g, "create");
    float h[64] = {0};
    float *d = dev_copy(h, sizeof h);
    CHECK(c, d, "device buffer");
    CUDA_OK(c, cudaStreamSynchronize(cudaStreamPerThread));
    if (gate_close(c)) return 1;
    lt_backend_work *w;
    double t0 = lt_now();
    CHECK(c, c->be->allreduce(&c->ctx, g, d, 64, LT_F32, LT_SUM, &w) == LT_OK, "issue");
    lt_status st = c->be->wait(&c->ctx, w, WAIT_MS);
    double dt = lt_now() - t0;
    const char *msg = lt_last_error(&c->ctx);
    CHECK(c, st == LT_ERR_TIMEOUT && strstr(msg, "allreduce #1") && strstr(msg, "timed out"),
          "group timeout, got %s: %s", lt_status_str(st), msg);
    CHECK(c, dt > 1.4 && dt < 10, "timed out after %.3f s, want 1.5", dt);
    c->be->free_work(&c->ctx, w);
    st = finish(c, c->be->barrier(&c->ctx, g, &w), &w);
    CHECK(c, st == LT_ERR_ABORTED && strstr(lt_last_error(&c->ctx), "failed earlier"), "after: %s",
          lt_last_error(&c->ctx));
    gate_open();
    CHECK(c, c->be->destroy(&c->ctx, g) == LT_OK, "destroy");
    CUDA_OK(c, cudaStreamSynchronize(cudaStreamPerThread));
    cudaFree(d);
    return 0;
}

#define GPU_TEST(fn)                                                                                          \
    static void test_##fn(void) {                                                                             \
        if (g_have_gpu != 1) { /* no GPU: the exit status (77) reports it */                                 \
            printf("(no GPU: not run) ");                                                                     \
            return;                                                                                           \
        }                                                                                                     \
        CU_ASSERT_EQUAL(run_ranks(1, fn), 0);                                                                 \
    }
GPU_TEST(sc_collectives)
GPU_TEST(sc_two_groups)
GPU_TEST(sc_stream_order)
GPU_TEST(sc_abort)
GPU_TEST(sc_timeout)

#endif /* LT_TEST_HAVE_CUDART */

int main(void) {
    unsetenv("LT_RDZV_TOKEN");
    if (access(PLUGIN, R_OK)) {
        printf("SKIP: %s was not built (LT_WITH_NCCL=OFF, or no CUDA toolkit / NCCL at configure time)\n", PLUGIN);
        return 77;
    }
    /* The harness's host-memory scenarios do not apply to device buffers. */
    (void)harness_sc_overlap;
    (void)harness_sc_timeout;
    (void)harness_bad_requests;
    (void)make_group;
    (void)store_barrier;
    (void)check_allreduce;
    (void)check_broadcast;
    (void)check_allgather;
    (void)check_reduce_scatter;
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("nccl", suite_init, suite_clean);
    CU_add_test(s, "create: a device first, else a clear refusal", test_create_probe);
#ifdef LT_TEST_HAVE_CUDART
    CU_add_test(s, "collectives on device buffers, 1 rank", test_sc_collectives);
    CU_add_test(s, "two groups in flight", test_sc_two_groups);
    CU_add_test(s, "ordered after the caller's per-thread stream", test_sc_stream_order);
    CU_add_test(s, "abort fails a pending wait", test_sc_abort);
    CU_add_test(s, "the group's timeout", test_sc_timeout);
#endif
    /* Last: the ranks above are forked from a process that has not loaded
     * the plugin (nor anything of CUDA) yet. */
    CU_add_test(s, "loads through the registry; memory kinds; dtypes", test_registry_load);
    int rc = lt_cunit_run();
#ifndef LT_TEST_HAVE_CUDART
    if (rc == 0 && g_have_gpu == 1) {
        printf("SKIP: a GPU is here but this test was built without the CUDA runtime; the GPU tests did not run\n");
        return 77;
    }
#endif
    if (rc == 0 && g_have_gpu != 1) {
        printf("SKIP: no usable GPU here; the plugin loads and refuses to create as it must, the GPU tests did "
               "not run\n");
        return 77;
    }
    return rc;
}
