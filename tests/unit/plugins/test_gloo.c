/* The gloo backend plugin across real processes. Each scenario forks 1, 2 or
 * 3 ranks that dlopen the built plugin, create groups through the rendezvous
 * store and check every collective against values computed locally from
 * rank-dependent inputs. A child reports through its exit code (and a line on
 * stderr saying what failed).
 *
 * The harness (backend_harness.h) forks the ranks and hosts the store. */
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
#include "cunit_run.h"
#include "common/ctx.h"
#include "lt/backend.h"
#include "dist/store_server.h"

#define PLUGIN LT_TEST_PLUGIN_DIR "/liblt-backend-gloo.so"
#define HARNESS_NAME "gloo"
#include "backend_harness.h"

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
    bool ok = false;
    CHECK(c, c->be->supports(&c->ctx, LT_BF16, LT_AVG, &ok) == LT_OK && ok, "supports bf16 avg");
    if (harness_bad_requests(c, g)) return 1;
    CHECK(c, c->be->destroy(&c->ctx, g) == LT_OK, "destroy");
    return 0;
}

/* Several contexts per group: collectives dealt round-robin, all in flight. */
static int sc_threads(child *c) {
    lt_backend_group *g = make_group(c, "mt/", WAIT_MS, 3);
    CHECK(c, g, "create");
    if (check_many_in_flight(c, g)) return 1;
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

/* The harness's timeout scenario; the error comes from gloo's own timeout,
 * whose elapsed time is not checked here. */
static int sc_timeout(child *c) { return harness_sc_timeout(c, 0); }

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
static void test_overlap_two_groups(void) { CU_ASSERT_EQUAL(run_ranks(2, harness_sc_overlap), 0); }
static void test_threads(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_threads), 0); }
static void test_p2p_2(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_p2p), 0); }
static void test_p2p_3(void) { CU_ASSERT_EQUAL(run_ranks(3, sc_p2p), 0); }
static void test_timeout(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_timeout), 0); }
static void test_abort(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_abort), 0); }
static void test_mismatch(void) { CU_ASSERT_EQUAL(run_ranks(2, sc_mismatch), 0); }

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
    int rc = lt_cunit_run();
    return rc;
}
