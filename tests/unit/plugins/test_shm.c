/* The shm backend plugin across real processes, modelled on test_gloo.c.
 * Each scenario forks 1, 2 or 3 ranks that dlopen the built plugin, create
 * groups through the rendezvous store and check every collective against
 * values computed locally from rank-dependent inputs. A child reports through
 * its exit code (and a line on stderr saying what failed).
 *
 * The harness (backend_harness.h) forks the ranks and hosts the store. */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "cunit_run.h"
#include "config/config.h"
#include "common/ctx.h"
#include "lt/backend.h"
#include "dist/store_server.h"

#define PLUGIN LT_TEST_PLUGIN_DIR "/liblt-backend-shm.so"
#define HARNESS_NAME "shm"
#include "backend_harness.h"

static int g_slot_mb = 8;         /* [backend.shm] slot_mb of the ranks forked next */
static int g_segments_before;     /* lt-shm-* entries in /dev/shm before the suite */

/* Small slots for the chunking scenarios: [backend.shm] slot_mb = g_slot_mb. */
static lt_config *shm_config(int rank) {
    lt_config *cfg = lt_config_new();
    char arg[64], err[256];
    snprintf(arg, sizeof arg, "backend.shm.slot_mb=%d", g_slot_mb);
    if (!cfg || lt_config_declare(cfg, "backend.shm", "slot_mb", LT_PARAM_INT, "8", "") != LT_OK ||
        lt_config_set_arg(cfg, arg, NULL, err, sizeof err) != LT_OK) {
        fprintf(stderr, "[rank %d] config\n", rank);
        _exit(5);
    }
    return cfg;
}

static const lt_dtype red_dts[] = {LT_F32, LT_F64, LT_F16, LT_BF16, LT_I8, LT_U8, LT_I32, LT_I64};
static const lt_dtype all_dts[] = {LT_F32, LT_F64, LT_F16, LT_BF16, LT_I8, LT_U8, LT_I32, LT_I64};
static const lt_redop ops[] = {LT_SUM, LT_AVG, LT_MIN, LT_MAX};
#define N_OF(a) (sizeof(a) / sizeof *(a))

static int sc_collectives(child *c) {
    lt_backend_group *g = make_group(c, "main/", WAIT_MS, 0);
    CHECK(c, g, "create");
    for (size_t d = 0; d < N_OF(red_dts); d++)
        for (size_t o = 0; o < N_OF(ops); o++)
            for (size_t n = 1; n <= 1001; n += 500)
                if (check_allreduce(c, g, red_dts[d], ops[o], n)) return 1;
    /* Sizes not divisible by the world, and nothing at all. */
    if (check_allreduce(c, g, LT_F32, LT_SUM, 700001) || check_allreduce(c, g, LT_F32, LT_AVG, 300007) ||
        check_allreduce(c, g, LT_F64, LT_MAX, 2) || check_allreduce(c, g, LT_F64, LT_SUM, 0))
        return 1;
    for (int root = 0; root < c->world; root++)
        for (size_t d = 0; d < N_OF(all_dts); d++)
            if (check_broadcast(c, g, all_dts[d], root, 513)) return 1;
    for (size_t d = 0; d < N_OF(all_dts); d++)
        if (check_allgather(c, g, all_dts[d], 13, false) || check_allgather(c, g, all_dts[d], 13, true)) return 1;
    if (check_allgather(c, g, LT_F32, 100003, false)) return 1;
    for (size_t d = 0; d < N_OF(red_dts); d++)
        for (size_t o = 0; o < N_OF(ops); o++)
            if (check_reduce_scatter(c, g, red_dts[d], ops[o], 11)) return 1;
    if (check_reduce_scatter(c, g, LT_F32, LT_AVG, 200003)) return 1;
    lt_backend_work *w = NULL;
    for (int i = 0; i < 20; i++) CHECK(c, finish(c, c->be->barrier(&c->ctx, g, &w), &w) == LT_OK, "barrier");
    /* Bad requests are refused at issue, with a message, and break nothing. */
    float x = 1;
    CHECK(c, c->be->send(&c->ctx, g, &x, 1, LT_F32, c->rank, 0, &w) == LT_ERR_INVALID, "send to self");
    CHECK(c, strstr(lt_last_error(&c->ctx), "is not another rank"), "message: %s", lt_last_error(&c->ctx));
    CHECK(c, c->be->recv(&c->ctx, g, &x, 1, LT_F32, c->world, 0, &w) == LT_ERR_INVALID, "recv from no rank");
    bool ok = false;
    CHECK(c, c->be->supports(&c->ctx, LT_F64, LT_AVG, &ok) == LT_OK && ok, "supports f64 avg");
    CHECK(c, c->be->supports(&c->ctx, LT_F32, LT_MIN, &ok) == LT_OK && ok, "supports f32 min");
    CHECK(c, c->be->supports(&c->ctx, LT_F16, LT_SUM, &ok) == LT_OK && ok, "supports f16");
    CHECK(c, c->be->supports(&c->ctx, LT_BF16, LT_AVG, &ok) == LT_OK && ok, "supports bf16 avg");
    if (harness_bad_requests(c, g)) return 1;
    CHECK(c, c->be->destroy(&c->ctx, g) == LT_OK, "destroy");
    return 0;
}

/* Run with slot_mb = 1: every collective here spans several chunks (a chunk
 * is half a slot: 131072 f32, 65536 f64; reduce_scatter: that / world). */
static int sc_chunks(child *c) {
    lt_backend_group *g = make_group(c, "chunks/", WAIT_MS, 0);
    CHECK(c, g, "create");
    for (size_t o = 0; o < N_OF(ops); o++)
        if (check_allreduce(c, g, LT_F32, ops[o], 400003) || check_allreduce(c, g, LT_F64, ops[o], 200001))
            return 1;
    if (check_allreduce(c, g, LT_F32, LT_SUM, 131072) || check_allreduce(c, g, LT_F32, LT_SUM, 131073)) return 1;
    if (check_broadcast(c, g, LT_F64, c->world - 1, 300001)) return 1;
    if (check_allgather(c, g, LT_F32, 300007, false) || check_allgather(c, g, LT_F64, 70001, true)) return 1;
    for (size_t o = 0; o < N_OF(ops); o++)
        if (check_reduce_scatter(c, g, LT_F32, ops[o], 150001)) return 1;
    CHECK(c, c->be->destroy(&c->ctx, g) == LT_OK, "destroy");
    return 0;
}

/* The harness's timeout scenario; the wait must end with the group's 1.5 s
 * timeout, not much later. */
static int sc_timeout(child *c) { return harness_sc_timeout(c, 3.0); }

/* 3 ranks; rank 2 never joins. Ranks 0 and 1 are stuck in an allreduce; rank 0
 * aborts: its wait and a queued work return ABORTED, rank 1's wait returns
 * ABORTED naming rank 0 long before the 60 s timeout, and rank 2's first
 * collective fails at once. */
static int sc_abort(child *c) {
    lt_backend_group *g = make_group(c, "abort/", 60000, 0);
    CHECK(c, g, "create");
    char key[128];
    snprintf(key, sizeof key, "%saborted", c->prefix);
    float buf[1024] = {0};
    lt_backend_work *w;
    if (c->rank == 2) {
        void *v;
        size_t n;
        CHECK(c, lt_store_get(c->store, key, &v, &n) == LT_OK, "rank 0 aborted: %s", lt_store_error(c->store));
        free(v);
        double t0 = lt_now();
        lt_status st = finish(c, c->be->allreduce(&c->ctx, g, buf, 1024, LT_F32, LT_SUM, &w), &w);
        CHECK(c, st == LT_ERR_ABORTED && lt_now() - t0 < 1.0, "late rank: %s: %s", lt_status_str(st),
              lt_last_error(&c->ctx));
        CHECK(c, strstr(lt_last_error(&c->ctx), "peer rank 0"), "names the peer: %s", lt_last_error(&c->ctx));
        CHECK(c, c->be->destroy(&c->ctx, g) == LT_OK, "destroy");
        return 0;
    }
    CHECK(c, c->be->allreduce(&c->ctx, g, buf, 1024, LT_F32, LT_SUM, &w) == LT_OK, "issue");
    CHECK(c, c->be->wait(&c->ctx, w, 200) == LT_ERR_TIMEOUT, "still running");
    char in_key[128];
    snprintf(in_key, sizeof in_key, "%sr1-in", c->prefix);
    if (c->rank == 1) {
        CHECK(c, lt_store_set(c->store, in_key, "1", 1) == LT_OK, "set r1-in");
        double t0 = lt_now();
        lt_status st = c->be->wait(&c->ctx, w, WAIT_MS);
        CHECK(c, st == LT_ERR_ABORTED && lt_now() - t0 < 5.0, "peer's abort seen, got %s: %s",
              lt_status_str(st), lt_last_error(&c->ctx));
        CHECK(c, strstr(lt_last_error(&c->ctx), "peer rank 0"), "names the peer: %s", lt_last_error(&c->ctx));
        c->be->free_work(&c->ctx, w);
        CHECK(c, c->be->destroy(&c->ctx, g) == LT_OK, "destroy");
        return 0;
    }
    /* Abort only once rank 1 waits in the allreduce too. */
    void *v;
    size_t vn;
    CHECK(c, lt_store_get(c->store, in_key, &v, &vn) == LT_OK, "rank 1 in: %s", lt_store_error(c->store));
    free(v);
    lt_backend_work *queued;
    CHECK(c, c->be->barrier(&c->ctx, g, &queued) == LT_OK, "queue behind it");
    CHECK(c, c->be->abort(&c->ctx, g) == LT_OK, "abort");
    CHECK(c, c->be->wait(&c->ctx, w, WAIT_MS) == LT_ERR_ABORTED, "aborted: %s", lt_last_error(&c->ctx));
    CHECK(c, c->be->wait(&c->ctx, queued, WAIT_MS) == LT_ERR_ABORTED, "queued: %s", lt_last_error(&c->ctx));
    c->be->free_work(&c->ctx, w);
    c->be->free_work(&c->ctx, queued);
    CHECK(c, finish(c, c->be->allreduce(&c->ctx, g, buf, 4, LT_F32, LT_SUM, &w), &w) == LT_ERR_ABORTED, "later");
    CHECK(c, c->be->abort(&c->ctx, g) == LT_OK, "abort twice");
    CHECK(c, lt_store_set(c->store, key, "1", 1) == LT_OK, "set aborted");
    CHECK(c, c->be->destroy(&c->ctx, g) == LT_OK, "destroy");
    return 0;
}

/* Rank 1 exits without joining: rank 0's wait fails naming it well before the
 * group's timeout once the process is gone (the parent reaps it at once). */
static int sc_dead_peer(child *c) {
    CHECK(c, !store_barrier(c, "dead-ready"), "store barrier");
    lt_backend_group *g = make_group(c, "dead/", 30000, 0);
    CHECK(c, g, "create");
    if (c->rank == 1) _exit(0); /* no destroy: like a crash */
    float buf[16] = {0};
    lt_backend_work *w;
    double t0 = lt_now();
    lt_status st = finish(c, c->be->allreduce(&c->ctx, g, buf, 16, LT_F32, LT_SUM, &w), &w);
    CHECK(c, st == LT_ERR_IO && lt_now() - t0 < 10.0, "got %s after %.1f s: %s", lt_status_str(st),
          lt_now() - t0, lt_last_error(&c->ctx));
    CHECK(c, strstr(lt_last_error(&c->ctx), "peer rank 1"), "message: %s", lt_last_error(&c->ctx));
    c->be->destroy(&c->ctx, g);
    return 0;
}

/* Ranks that disagree on a collective fail with LT_ERR_MISMATCH naming both
 * sides (or ABORTED: the other side failed first), instead of pairing their
 * barriers silently; so does a fresh group after different sizes. */
static int sc_mismatch(child *c) {
    lt_backend_group *g = make_group(c, "mm/", WAIT_MS, 0);
    lt_backend_group *h = make_group(c, "mm2/", WAIT_MS, 0);
    CHECK(c, g && h, "create");
    float buf[400] = {0};
    lt_backend_work *w;
    lt_status st = finish(c, c->be->allreduce(&c->ctx, g, buf, 100 * (size_t)(c->rank + 1), LT_F32, LT_SUM, &w), &w);
    CHECK(c, st == LT_ERR_MISMATCH || st == LT_ERR_ABORTED, "allreduce of different sizes: %s", lt_status_str(st));
    if (st == LT_ERR_MISMATCH)
        CHECK(c, strstr(lt_last_error(&c->ctx), "allreduce #1 (100 x f32") &&
                     strstr(lt_last_error(&c->ctx), "allreduce #1 (200 x f32"),
              "message: %s", lt_last_error(&c->ctx));
    if (c->rank == 0)
        st = finish(c, c->be->broadcast(&c->ctx, h, buf, 10, LT_F32, 0, &w), &w);
    else
        st = finish(c, c->be->barrier(&c->ctx, h, &w), &w);
    CHECK(c, st == LT_ERR_MISMATCH || st == LT_ERR_ABORTED, "broadcast vs barrier: %s", lt_status_str(st));
    c->be->destroy(&c->ctx, g);
    c->be->destroy(&c->ctx, h);
    return 0;
}


/* Point-to-point: everyone sends two messages to the right and receives two
 * from the left, all posted before any wait (no deadlock although each is
 * several times a ring's 256 KiB), a collective in between, an empty
 * message; then a recv whose tag differs from what was sent fails as a
 * mismatch naming both. */
static int sc_p2p(child *c) {
    lt_backend_group *g = make_group(c, "p2p/", WAIT_MS, 0);
    CHECK(c, g, "create");
    enum { N = 100003 };
    int right = (c->rank + 1) % c->world, left = (c->rank + c->world - 1) % c->world;
    double *s1 = malloc(N * sizeof *s1), *s2 = malloc(N * sizeof *s2);
    double *r1 = calloc(N, sizeof *r1), *r2 = calloc(N, sizeof *r2);
    for (int i = 0; i < N; i++) {
        s1[i] = c->rank * 1000.0 + i;
        s2[i] = -(c->rank * 1000.0 + i);
    }
    lt_backend_work *ws1, *ws2, *wr1, *wr2, *wa, *we, *wf;
    CHECK(c, c->be->send(&c->ctx, g, s1, N, LT_F64, right, 1, &ws1) == LT_OK, "send 1");
    CHECK(c, c->be->recv(&c->ctx, g, r1, N, LT_F64, left, 1, &wr1) == LT_OK, "recv 1");
    CHECK(c, c->be->send(&c->ctx, g, s2, N, LT_F64, right, 2, &ws2) == LT_OK, "send 2");
    float x = 1;
    CHECK(c, c->be->allreduce(&c->ctx, g, &x, 1, LT_F32, LT_SUM, &wa) == LT_OK, "allreduce");
    CHECK(c, c->be->recv(&c->ctx, g, r2, N, LT_F64, left, 2, &wr2) == LT_OK, "recv 2");
    CHECK(c, c->be->send(&c->ctx, g, s1, 0, LT_F64, right, 3, &we) == LT_OK, "empty send");
    CHECK(c, c->be->recv(&c->ctx, g, r1, 0, LT_F64, left, 3, &wf) == LT_OK, "empty recv");
    CHECK(c, finish(c, LT_OK, &ws1) == LT_OK, "wait send 1");
    CHECK(c, finish(c, LT_OK, &wr2) == LT_OK, "wait recv 2");
    CHECK(c, finish(c, LT_OK, &wr1) == LT_OK, "wait recv 1");
    CHECK(c, finish(c, LT_OK, &ws2) == LT_OK, "wait send 2");
    CHECK(c, finish(c, LT_OK, &wa) == LT_OK && x == (float)c->world, "allreduce = %g", x);
    CHECK(c, finish(c, LT_OK, &we) == LT_OK && finish(c, LT_OK, &wf) == LT_OK, "empty messages");
    for (int i = 0; i < N; i++)
        CHECK(c, r1[i] == left * 1000.0 + i && r2[i] == -(left * 1000.0 + i), "[%d]: %g %g", i, r1[i], r2[i]);
    CHECK(c, c->be->send(&c->ctx, g, s1, 4, LT_F64, right, 7, &ws1) == LT_OK, "send tag 7");
    CHECK(c, c->be->recv(&c->ctx, g, r1, 4, LT_F64, left, 8, &wr1) == LT_OK, "recv tag 8");
    lt_status st = finish(c, LT_OK, &wr1);
    CHECK(c, st == LT_ERR_MISMATCH && strstr(lt_last_error(&c->ctx), "tag 7") && strstr(lt_last_error(&c->ctx), "tag 8"),
          "tag mismatch: %s: %s", lt_status_str(st), lt_last_error(&c->ctx));
    CHECK(c, finish(c, LT_OK, &ws1) == LT_OK, "the tag-7 send itself went out");
    CHECK(c, c->be->destroy(&c->ctx, g) == LT_OK, "destroy");
    free(s1);
    free(s2);
    free(r1);
    free(r2);
    return 0;
}


/* A send several rings long still being moved while its rank waits on a
 * collective first (its peer waits on the recv first and reaches the
 * collective only after it): the collective's wait keeps the ring moving. */
static int sc_p2p_then_collective(child *c) {
    lt_backend_group *g = make_group(c, "p2pcoll/", WAIT_MS, 0);
    CHECK(c, g, "create");
    enum { N = 1 << 18 }; /* 2 MiB of f64: 8 rings */
    double *buf = malloc(N * sizeof *buf);
    for (int i = 0; i < N; i++) buf[i] = c->rank == 0 ? i * 0.5 : 0;
    lt_backend_work *wp, *wa;
    float x = 1;
    if (c->rank == 0) {
        CHECK(c, c->be->send(&c->ctx, g, buf, N, LT_F64, 1, 9, &wp) == LT_OK, "send");
        CHECK(c, c->be->allreduce(&c->ctx, g, &x, 1, LT_F32, LT_SUM, &wa) == LT_OK, "allreduce");
        CHECK(c, finish(c, LT_OK, &wa) == LT_OK && x == 2.0f, "allreduce before the send's wait: %g", x);
        CHECK(c, finish(c, LT_OK, &wp) == LT_OK, "send");
    } else {
        CHECK(c, c->be->recv(&c->ctx, g, buf, N, LT_F64, 0, 9, &wp) == LT_OK, "recv");
        CHECK(c, finish(c, LT_OK, &wp) == LT_OK, "recv");
        CHECK(c, c->be->allreduce(&c->ctx, g, &x, 1, LT_F32, LT_SUM, &wa) == LT_OK, "allreduce");
        CHECK(c, finish(c, LT_OK, &wa) == LT_OK && x == 2.0f, "allreduce: %g", x);
        for (int i = 0; i < N; i++) CHECK(c, buf[i] == i * 0.5, "[%d] = %g", i, buf[i]);
    }
    CHECK(c, c->be->destroy(&c->ctx, g) == LT_OK, "destroy");
    free(buf);
    return 0;
}

/* A recv from a rank that exits fails naming it, well before the timeout. */
static int sc_p2p_dead(child *c) {
    lt_backend_group *g = make_group(c, "p2pdead/", 30000, 0);
    CHECK(c, g, "create");
    if (c->rank == 1) _exit(0);
    double buf[8];
    lt_backend_work *w;
    double t0 = lt_now();
    CHECK(c, c->be->recv(&c->ctx, g, buf, 8, LT_F64, 1, 0, &w) == LT_OK, "recv");
    lt_status st = finish(c, LT_OK, &w);
    CHECK(c, st == LT_ERR_IO && lt_now() - t0 < 10.0 && strstr(lt_last_error(&c->ctx), "peer rank 1"),
          "got %s after %.1f s: %s", lt_status_str(st), lt_now() - t0, lt_last_error(&c->ctx));
    c->be->destroy(&c->ctx, g);
    return 0;
}

/* Group memory (mem_alloc): allreduces of buffers inside it run in place.
 * They must give the values the slot path gives, bit for bit for f32 (the
 * same summation order), also for a range at an offset (a ddp bucket); the
 * slices of every rank hold the result; the memory is zeroed at first and
 * outlives the group; ranks that disagree on where the buffer lies fail
 * with a mismatch naming the group memory. */
static float noise(int rank, size_t i) {
    uint32_t x = (uint32_t)(i * 2654435761u) ^ (uint32_t)(rank * 40503u + 17u);
    x ^= x >> 13, x *= 0x5bd1e995u, x ^= x >> 15;
    return (float)((double)x / 4294967296.0 - 0.5) * 3.0f;
}

static int sc_group_mem(child *c) {
    lt_backend_group *g = make_group(c, "mem/", WAIT_MS, 0);
    CHECK(c, g, "create");
    CHECK(c, c->be->mem_alloc && c->be->mem_free, "the shm backend offers group memory");
    const size_t n = 300007; /* > one 8 MiB slot half: the slot path chunks, the in-place one does not */
    float *gm = NULL;
    CHECK(c, c->be->mem_alloc(&c->ctx, g, n * sizeof(float), (void **)&gm) == LT_OK, "mem_alloc: %s",
          lt_last_error(&c->ctx));
    CHECK(c, gm && ((uintptr_t)gm & 63) == 0, "64-byte aligned");
    for (size_t i = 0; i < n; i++) CHECK(c, gm[i] == 0.0f, "zeroed: [%zu] = %g", i, gm[i]);
    float *own = malloc(n * sizeof(float));
    lt_backend_work *w = NULL;
    for (int op = LT_SUM; op <= LT_AVG; op++) {
        /* The whole buffer, then a bucket in its middle; the slot path on a private copy. */
        size_t lo[2] = {0, 1234}, cnt[2] = {n, 100003};
        for (int b = 0; b < 2; b++) {
            for (size_t i = 0; i < n; i++) gm[i] = own[i] = noise(c->rank, i);
            CHECK(c, finish(c, c->be->allreduce(&c->ctx, g, gm + lo[b], cnt[b], LT_F32, (lt_redop)op, &w), &w) == LT_OK,
                  "in-place allreduce: %s", lt_last_error(&c->ctx));
            CHECK(c, finish(c, c->be->allreduce(&c->ctx, g, own + lo[b], cnt[b], LT_F32, (lt_redop)op, &w), &w) == LT_OK,
                  "slot allreduce");
            CHECK(c, !memcmp(gm, own, n * sizeof(float)), "op %d bucket %d: in place differs from the slot path", op, b);
            double s = 0;
            for (int r = 0; r < c->world; r++) s += noise(r, lo[b] + 7);
            if (op == LT_AVG) s /= c->world;
            CHECK(c, fabs(gm[lo[b] + 7] - s) < 1e-5, "op %d: [%zu] = %g, want %g", op, lo[b] + 7, gm[lo[b] + 7], s);
        }
    }
    free(own);
    /* Other dtypes and ops through the general path, at an offset of a second allocation. */
    unsigned char *g2 = NULL;
    CHECK(c, c->be->mem_alloc(&c->ctx, g, 4096, (void **)&g2) == LT_OK, "second mem_alloc");
    static const lt_dtype dts[] = {LT_F64, LT_F16, LT_BF16, LT_I32};
    for (size_t d = 0; d < N_OF(dts); d++)
        for (size_t o = 0; o < N_OF(ops); o++) {
            size_t m = 301, esz = lt_dtype_size(dts[d]);
            unsigned char *buf = g2 + 8 * esz;
            for (size_t i = 0; i < m; i++) put(buf, i, dts[d], input(c->rank, i, dts[d]));
            CHECK(c, finish(c, c->be->allreduce(&c->ctx, g, buf, m, dts[d], ops[o], &w), &w) == LT_OK, "allreduce");
            for (size_t i = 0; i < m; i++)
                CHECK(c, close_enough(dts[d], get(buf, i, dts[d]), expected(dts[d], ops[o], c->world, i)),
                      "%s op %d: [%zu] = %g, want %g", lt_dtype_name(dts[d]), ops[o], i, get(buf, i, dts[d]),
                      expected(dts[d], ops[o], c->world, i));
        }
    /* No room for it (1 TiB a rank): every rank declines alike and the group goes on. */
    void *huge = (void *)1;
    lt_status hs = c->be->mem_alloc(&c->ctx, g, (size_t)1 << 40, &huge);
    CHECK(c, hs == LT_ERR_UNSUPPORTED && huge == NULL, "1 TiB of group memory: %s", lt_status_str(hs));
    CHECK(c, strstr(lt_last_error(&c->ctx), "/dev/shm"), "message: %s", lt_last_error(&c->ctx));
    if (check_allreduce(c, g, LT_F32, LT_SUM, 1001)) return 1;
    /* Rank 0 passes group memory, the others their own: a mismatch, not silently wrong sums. */
    float priv[64] = {0};
    float *where = c->rank == 0 ? gm : priv;
    lt_status st = finish(c, c->be->allreduce(&c->ctx, g, where, 64, LT_F32, LT_SUM, &w), &w);
    if (c->world > 1) {
        CHECK(c, st == LT_ERR_MISMATCH || st == LT_ERR_ABORTED, "group memory vs own memory: %s", lt_status_str(st));
        if (st == LT_ERR_MISMATCH)
            CHECK(c, strstr(lt_last_error(&c->ctx), "in group memory 0 at byte 0"), "message: %s",
                  lt_last_error(&c->ctx));
    } else {
        CHECK(c, st == LT_OK, "one rank: nothing to disagree with: %s", lt_status_str(st));
    }
    CHECK(c, c->be->destroy(&c->ctx, g) == LT_OK, "destroy");
    /* The memory outlives the group. */
    gm[5] = 1.5f;
    CHECK(c, gm[5] == 1.5f, "usable after destroy");
    c->be->mem_free(&c->ctx, gm);
    c->be->mem_free(&c->ctx, g2);
    c->be->mem_free(&c->ctx, NULL);
    return 0;
}

/* No segment is left behind in /dev/shm. */
static int count_segments(void) {
    int n = 0;
    DIR *d = opendir("/dev/shm");
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, "lt-shm-", 7)) n++;
    closedir(d);
    return n;
}

/* ---- CUnit ---- */

static void test_collectives_2(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_collectives), 0); }
static void test_collectives_3(void) { CU_ASSERT_EQUAL(run_ranks(3, sc_collectives), 0); }
static void test_collectives_1(void) { CU_ASSERT_EQUAL(run_ranks(1, sc_collectives), 0); }
static void test_chunks_2(void) {
    g_slot_mb = 1;
    CU_ASSERT_EQUAL(run_ranks(2, sc_chunks), 0);
    g_slot_mb = 8;
}
static void test_chunks_3(void) {
    g_slot_mb = 1;
    CU_ASSERT_EQUAL(run_ranks(3, sc_chunks), 0);
    g_slot_mb = 8;
}
static void test_overlap_two_groups(void) { CU_ASSERT_EQUAL(run_ranks(2, harness_sc_overlap), 0); }
static void test_overlap_3(void) { CU_ASSERT_EQUAL(run_ranks(3, harness_sc_overlap), 0); }
static void test_timeout(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_timeout), 0); }
static void test_abort(void) { CU_ASSERT_EQUAL(run_ranks(3, sc_abort), 0); }
static void test_dead_peer(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_dead_peer), 0); }
static void test_mismatch(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_mismatch), 0); }
static void test_p2p_2(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_p2p), 0); }
static void test_p2p_3(void) { CU_ASSERT_EQUAL(run_ranks(3, sc_p2p), 0); }
static void test_p2p_then_collective(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_p2p_then_collective), 0); }
static void test_p2p_dead(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_p2p_dead), 0); }
static void test_group_mem_2(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_group_mem), 0); }
static void test_group_mem_3(void) { CU_ASSERT_EQUAL(run_ranks(3, sc_group_mem), 0); }
static void test_group_mem_1(void) { CU_ASSERT_EQUAL(run_ranks(1, sc_group_mem), 0); }
static void test_no_leftovers(void) { CU_ASSERT_EQUAL(count_segments(), g_segments_before); }

int main(void) {
    unsetenv("LT_RDZV_TOKEN");
    g_segments_before = count_segments();
    harness_config = shm_config;
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("shm", suite_init, suite_clean);
    CU_add_test(s, "collectives, 2 ranks", test_collectives_2);
    CU_add_test(s, "collectives, 3 ranks", test_collectives_3);
    CU_add_test(s, "collectives, 1 rank", test_collectives_1);
    CU_add_test(s, "chunks (slot_mb 1), 2 ranks", test_chunks_2);
    CU_add_test(s, "chunks (slot_mb 1), 3 ranks", test_chunks_3);
    CU_add_test(s, "overlap and two groups, 2 ranks", test_overlap_two_groups);
    CU_add_test(s, "overlap and two groups, 3 ranks", test_overlap_3);
    CU_add_test(s, "timeout", test_timeout);
    CU_add_test(s, "abort, 3 ranks", test_abort);
    CU_add_test(s, "dead peer", test_dead_peer);
    CU_add_test(s, "send/recv, 2 ranks", test_p2p_2);
    CU_add_test(s, "send/recv, 3 ranks", test_p2p_3);
    CU_add_test(s, "send/recv from a rank that exits", test_p2p_dead);
    CU_add_test(s, "a send moved by a collective's wait", test_p2p_then_collective);
    CU_add_test(s, "mismatched collectives", test_mismatch);
    CU_add_test(s, "group memory, 2 ranks", test_group_mem_2);
    CU_add_test(s, "group memory, 3 ranks", test_group_mem_3);
    CU_add_test(s, "group memory, 1 rank", test_group_mem_1);
    CU_add_test(s, "no segment left in /dev/shm", test_no_leftovers);
    int rc = lt_cunit_run();
    return rc;
}
