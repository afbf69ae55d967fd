/* The cpu accelerator's dp binding (plugins/accelerators/cpu/replicas.c):
 * contexts on different devices are replicas, each thread pinned to its own
 * core; when they go, the remaining thread gets its own mask back. Two
 * contexts on one device (two trainers in one process) are not replicas. A
 * replica on a device past the cores fails without leaving anything pinned. */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include "cpu_plugin.h"
#include "cunit_run.h"

static const lt_accelerator_desc *g_acc;
static lt_ctx g_root;
static const lt_kernels *g_k;

static int suite_init(void) { return cpu_plugin_open(&g_acc, &g_root, &g_k); }
static int suite_clean(void) { return g_acc->teardown(&g_root) == LT_OK ? 0 : -1; }

static int my_cpus(void) {
    cpu_set_t set;
    return pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
}

typedef struct other {
    int device;
    lt_ctx ctx;
    lt_status setup;
    int cpus; /* this thread's cores after its setup */
    char err[512]; /* its error message (they are per thread) */
} other;

/* A replica's thread: sets up its context, reports, tears down later. */
static void *replica_setup(void *p) {
    other *o = p;
    lt_ctx_init(&o->ctx, LT_KIND_ACCELERATOR, "cpu", &g_acc->hdr, NULL);
    o->setup = g_acc->setup(&o->ctx, o->device);
    o->cpus = my_cpus();
    snprintf(o->err, sizeof o->err, "%s", lt_last_error(&o->ctx));
    return NULL;
}

static void run_thread(other *o) {
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, replica_setup, o), 0);
    pthread_join(t, NULL);
}

static void test_replicas_pinned_then_restored(void) {
    int before = my_cpus();
    if (before < 2) {
        printf("(one core: nothing to pin apart) ");
        return;
    }
    other o = {.device = 1};
    run_thread(&o);
    CU_ASSERT_EQUAL(o.setup, LT_OK);
    CU_ASSERT_EQUAL(o.cpus, 1);     /* the replica's own core */
    CU_ASSERT_EQUAL(my_cpus(), 1);  /* and the root's, pinned when the second device appeared */
    CU_ASSERT_EQUAL(g_acc->teardown(&o.ctx), LT_OK);
    CU_ASSERT_EQUAL(my_cpus(), before); /* the replicas are gone: its mask back */
}

static void test_same_device_is_not_a_replica(void) {
    int before = my_cpus();
    other o = {.device = 0};
    run_thread(&o);
    CU_ASSERT_EQUAL(o.setup, LT_OK);
    CU_ASSERT_EQUAL(o.cpus, before);
    CU_ASSERT_EQUAL(my_cpus(), before);
    CU_ASSERT_EQUAL(g_acc->teardown(&o.ctx), LT_OK);
}

static void test_missing_core_leaves_nothing_pinned(void) {
    int before = my_cpus();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    other o = {.device = (int)online + 3};
    run_thread(&o);
    CU_ASSERT_EQUAL(o.setup, LT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(o.err, "does not exist"));
    CU_ASSERT_EQUAL(my_cpus(), before);
    /* and a valid replica after it binds as usual */
    if (before >= 2) {
        other ok = {.device = 1};
        run_thread(&ok);
        CU_ASSERT_EQUAL(ok.setup, LT_OK);
        CU_ASSERT_EQUAL(ok.cpus, 1);
        CU_ASSERT_EQUAL(g_acc->teardown(&ok.ctx), LT_OK);
        CU_ASSERT_EQUAL(my_cpus(), before);
    }
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("cpu_replicas", suite_init, suite_clean);
    if (!s) return 1;
    CU_add_test(s, "replicas pinned, the root's mask restored after", test_replicas_pinned_then_restored);
    CU_add_test(s, "two contexts on one device are not replicas", test_same_device_is_not_a_replica);
    CU_add_test(s, "a device past the cores fails, nothing left pinned", test_missing_core_leaves_nothing_pinned);
    return lt_cunit_run();
}
