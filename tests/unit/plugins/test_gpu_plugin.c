/* The gpu accelerator plugin as the core loads it (the registry), and its
 * device hooks. Without a usable GPU only discovery is checked: the file
 * loads, is_available answers LT_OK with false and names what is missing,
 * device_count is 0; the program then exits 77 so ctest reports the GPU
 * part as skipped, never as passed. With a GPU: setup, a host/device round
 * trip, memory_stats, synchronize (also its report of a kernel's deferred
 * error), device_name, a second thread, teardown. Kernel results are the
 * conformance program's business, not this one's.
 *
 * Not built (LT_WITH_CUDA=OFF, or no CUDA toolkit), the test skips with a
 * line saying so. */
#include <CUnit/Basic.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cunit_run.h"
#include "common/ctx.h"
#include "lt/accelerator.h"
#include "registry/registry.h"

#define SKIP 77
#define GPU_PLUGIN_PATH LT_TEST_PLUGIN_DIR "/liblt-accelerator-gpu.so"

static lt_registry *g_reg;
static const lt_accelerator_desc *g_acc;
static bool g_avail;
static char g_reason[1024];

#define ASSERT_CONTAINS(hay, needle)                                                       \
    do {                                                                                   \
        if (strstr((hay), (needle))) {                                                     \
            CU_PASS(#hay " contains " #needle);                                            \
        } else {                                                                           \
            fprintf(stderr, "\n    message: %s\n    lacks:   %s\n", (hay), (needle));      \
            CU_FAIL(#hay " contains " #needle);                                            \
        }                                                                                  \
    } while (0)

/* ---- discovery (any machine) ----------------------------------------------- */

static void test_file_in_plugin_dir(void) {
    CU_ASSERT_EQUAL(access(GPU_PLUGIN_PATH, R_OK), 0);
}

static void test_loads_through_registry(void) {
    CU_ASSERT_PTR_NOT_NULL_FATAL(g_acc);
    CU_ASSERT_STRING_EQUAL(g_acc->hdr.name, "gpu");
    CU_ASSERT_EQUAL(g_acc->hdr.kind, LT_KIND_ACCELERATOR);
    CU_ASSERT_PTR_NOT_NULL(g_acc->device_in_use);
    CU_ASSERT_PTR_NOT_NULL(g_acc->device_name);
    CU_ASSERT_PTR_NOT_NULL(g_acc->memory_is_host);
    const lt_kernels *k = NULL;
    lt_ctx ctx;
    lt_ctx_init(&ctx, LT_KIND_ACCELERATOR, "gpu", &g_acc->hdr, NULL);
    CU_ASSERT_EQUAL(g_acc->get_kernels(&ctx, &k), LT_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_EQUAL(k->struct_size, sizeof(lt_kernels));
    CU_ASSERT(LT_KERNELS_HAS(k, gemm) && LT_KERNELS_HAS(k, im2col) && LT_KERNELS_HAS(k, clamp) &&
              LT_KERNELS_HAS(k, quantize_u8) && LT_KERNELS_HAS(k, dequantize_u8) &&
              LT_KERNELS_HAS(k, qadam_step));
    bool host = true;
    CU_ASSERT_EQUAL(g_acc->memory_is_host(&ctx, &host), LT_OK);
    CU_ASSERT_FALSE(host);
}

/* is_available answers LT_OK either way; "no" comes with the reason. */
static void test_is_available(void) {
    lt_ctx ctx;
    lt_ctx_init(&ctx, LT_KIND_ACCELERATOR, "gpu", &g_acc->hdr, NULL);
    lt_clear_error();
    bool avail = true;
    CU_ASSERT_EQUAL(g_acc->is_available(&ctx, &avail), LT_OK);
    CU_ASSERT_EQUAL(avail, g_avail);
    /* asked in a child process: this one has not even loaded the driver,
     * so a fork (ddp_spawn's workers) still gets a usable CUDA */
    void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    CU_ASSERT_PTR_NULL(drv);
    if (drv) dlclose(drv);
    int count = -1;
    CU_ASSERT_EQUAL(g_acc->device_count(&ctx, &count), LT_OK);
    if (avail) {
        CU_ASSERT(count > 0);
        return;
    }
    CU_ASSERT_EQUAL(count, 0);
    const char *why = lt_last_error(&ctx);
    printf("\n    gpu not available: %s\n", why);
    CU_ASSERT(why && *why);
    /* names what is missing: the driver, its version, or a device */
    CU_ASSERT(strstr(why, "driver") || strstr(why, "device"));
    ASSERT_CONTAINS(why, "nvidia-smi");
    /* setup refuses with the same reason, and leaves no state behind */
    CU_ASSERT_NOT_EQUAL(g_acc->setup(&ctx, 0), LT_OK);
    CU_ASSERT(strstr(lt_last_error(&ctx), "driver") || strstr(lt_last_error(&ctx), "device"));
    CU_ASSERT_PTR_NULL(lt_ctx_state(&ctx));
    bool in_use = true;
    CU_ASSERT_EQUAL(g_acc->device_in_use(&ctx, 0, &in_use), LT_OK);
    CU_ASSERT_FALSE(in_use);
}

/* ---- with a GPU ---------------------------------------------------------------- */

static lt_ctx g_dev;
static bool g_setup;

static void test_setup(void) {
    lt_ctx_init(&g_dev, LT_KIND_ACCELERATOR, "gpu", &g_acc->hdr, NULL);
    lt_status st = g_acc->setup(&g_dev, 0);
    if (st != LT_OK) fprintf(stderr, "\n    setup: %s\n", lt_last_error(&g_dev));
    CU_ASSERT_EQUAL_FATAL(st, LT_OK);
    g_setup = true;
    CU_ASSERT_EQUAL(g_acc->setup(&g_dev, 0), LT_ERR_STATE); /* twice */
    int count = 0;
    CU_ASSERT_EQUAL(g_acc->device_count(&g_dev, &count), LT_OK);
    lt_ctx past;
    lt_ctx_init(&past, LT_KIND_ACCELERATOR, "gpu", &g_acc->hdr, NULL);
    CU_ASSERT_EQUAL(g_acc->setup(&past, count), LT_ERR_NOT_FOUND); /* past the last device */
    CU_ASSERT_PTR_NULL(lt_ctx_state(&past));
}

static void test_device_name(void) {
    char name[256] = "";
    CU_ASSERT_EQUAL(g_acc->device_name(&g_dev, 0, name, sizeof name), LT_OK);
    printf("\n    %s\n", name);
    CU_ASSERT(strncmp(name, "gpu:0 (", 7) == 0);
    CU_ASSERT(strlen(name) > 8 && name[strlen(name) - 1] == ')');
    bool in_use = true;
    CU_ASSERT_EQUAL(g_acc->device_in_use(&g_dev, 0, &in_use), LT_OK);
}

/* H2D into device memory, D2D inside it (overlapping, memmove-like), D2H
 * back to pinned memory; alloc counted exactly in memory_stats. */
static void test_round_trip(void) {
    CU_ASSERT_FATAL(g_setup);
    enum { N = 1 << 16 };
    const size_t bytes = N * sizeof(float);
    lt_memory_stats before, during, after;
    CU_ASSERT_EQUAL_FATAL(g_acc->memory_stats(&g_dev, &before), LT_OK);
    float *host = malloc(bytes), *pinned = NULL, *dev = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(host);
    for (int i = 0; i < N; i++) host[i] = (float)i * 0.5f - 7.0f;
    CU_ASSERT_EQUAL_FATAL(g_acc->alloc_host(&g_dev, bytes, (void **)&pinned), LT_OK);
    CU_ASSERT_EQUAL_FATAL(g_acc->alloc(&g_dev, 2 * bytes, (void **)&dev), LT_OK);
    CU_ASSERT_EQUAL((uintptr_t)dev % 64, 0);
    CU_ASSERT_EQUAL(g_acc->memory_stats(&g_dev, &during), LT_OK);
    CU_ASSERT_EQUAL(during.allocated_bytes, before.allocated_bytes + 2 * bytes);
    CU_ASSERT(during.peak_bytes >= during.allocated_bytes);
    CU_ASSERT(during.total_bytes > 2 * bytes);

    CU_ASSERT_EQUAL(g_acc->copy(&g_dev, dev, host, bytes, LT_COPY_H2D), LT_OK);
    /* shift by 100 elements inside the block: overlapping ranges */
    CU_ASSERT_EQUAL(g_acc->copy(&g_dev, dev + 100, dev, bytes, LT_COPY_D2D), LT_OK);
    CU_ASSERT_EQUAL(g_acc->copy(&g_dev, pinned, dev + 100, bytes, LT_COPY_D2H), LT_OK);
    CU_ASSERT_EQUAL(g_acc->synchronize(&g_dev), LT_OK);
    CU_ASSERT_EQUAL(memcmp(pinned, host, bytes), 0);
    CU_ASSERT_EQUAL(g_acc->copy(&g_dev, host, pinned, bytes, LT_COPY_H2H), LT_OK);
    CU_ASSERT_EQUAL(g_acc->copy(&g_dev, dev, host, bytes, (lt_copy_dir)9), LT_ERR_INVALID);

    g_acc->free(&g_dev, dev);
    g_acc->free_host(&g_dev, pinned);
    free(host);
    CU_ASSERT_EQUAL(g_acc->memory_stats(&g_dev, &after), LT_OK);
    CU_ASSERT_EQUAL(after.allocated_bytes, before.allocated_bytes);
    CU_ASSERT(after.peak_bytes >= before.allocated_bytes + 2 * bytes);
}

/* A kernel given a dtype it does not take records the error; the next
 * synchronize reports it once, naming the kernel. */
static void test_synchronize_reports_kernel_error(void) {
    CU_ASSERT_FATAL(g_setup);
    const lt_kernels *k = NULL;
    CU_ASSERT_EQUAL_FATAL(g_acc->get_kernels(&g_dev, &k), LT_OK);
    void *dev = NULL;
    CU_ASSERT_EQUAL_FATAL(g_acc->alloc(&g_dev, 256, &dev), LT_OK);
    CU_ASSERT_EQUAL(g_acc->synchronize(&g_dev), LT_OK);
    k->fill(&g_dev, LT_I32, dev, 4, 1.0);
    CU_ASSERT_EQUAL(g_acc->synchronize(&g_dev), LT_ERR_UNSUPPORTED);
    ASSERT_CONTAINS(lt_last_error(&g_dev), "fill");
    CU_ASSERT_EQUAL(g_acc->synchronize(&g_dev), LT_OK);
    g_acc->free(&g_dev, dev);
}

/* Another thread (a dp replica, the data loader) uses the context: it gets
 * its own stream and state, bound to the context's device. */
static void *other_thread(void *arg) {
    int *ok = arg;
    float v[64], back[64];
    for (int i = 0; i < 64; i++) v[i] = (float)i;
    void *dev = NULL;
    *ok = g_acc->alloc(&g_dev, sizeof v, &dev) == LT_OK &&
          g_acc->copy(&g_dev, dev, v, sizeof v, LT_COPY_H2D) == LT_OK &&
          g_acc->copy(&g_dev, back, dev, sizeof v, LT_COPY_D2H) == LT_OK &&
          g_acc->synchronize(&g_dev) == LT_OK && memcmp(v, back, sizeof v) == 0;
    g_acc->free(&g_dev, dev);
    return NULL;
}

static void test_second_thread(void) {
    CU_ASSERT_FATAL(g_setup);
    int ok = 0;
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, other_thread, &ok), 0);
    pthread_join(t, NULL);
    CU_ASSERT(ok);
}

static void test_teardown(void) {
    CU_ASSERT_FATAL(g_setup);
    CU_ASSERT_EQUAL(g_acc->teardown(&g_dev), LT_OK);
    CU_ASSERT_PTR_NULL(lt_ctx_state(&g_dev));
    lt_memory_stats s;
    CU_ASSERT_EQUAL(g_acc->memory_stats(&g_dev, &s), LT_ERR_STATE);
    g_setup = false;
}

/* ---- main ---------------------------------------------------------------------------- */

int main(void) {
    if (access(GPU_PLUGIN_PATH, F_OK) != 0) {
#ifdef LT_TEST_GPU_BUILT
        fprintf(stderr, "%s is missing although this build makes it (target lt-accelerator-gpu)\n",
                GPU_PLUGIN_PATH);
        return 1;
#else
        printf("gpu accelerator not built (LT_WITH_CUDA=OFF or no CUDA toolkit found at configure "
               "time): skipping\n");
        return SKIP;
#endif
    }
    g_reg = lt_registry_new();
    char err[1024] = "";
    const lt_plugin_header *d = NULL;
    if (!g_reg || lt_registry_add_dir(g_reg, LT_TEST_PLUGIN_DIR) != LT_OK ||
        lt_registry_load(g_reg, LT_KIND_ACCELERATOR, "gpu", &d, err, sizeof err) != LT_OK) {
        fprintf(stderr, "the registry cannot load the gpu accelerator: %s\n", err);
        return 1;
    }
    g_acc = (const lt_accelerator_desc *)d;
    lt_ctx probe;
    lt_ctx_init(&probe, LT_KIND_ACCELERATOR, "gpu", d, NULL);
    lt_clear_error();
    if (g_acc->is_available(&probe, &g_avail) != LT_OK) g_avail = false;
    snprintf(g_reason, sizeof g_reason, "%s", lt_last_error(&probe));

    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("gpu_discovery", NULL, NULL);
    CU_add_test(s, "plugin file in the build's plugin dir", test_file_in_plugin_dir);
    CU_add_test(s, "loads through the registry", test_loads_through_registry);
    CU_add_test(s, "is_available / device_count", test_is_available);
    if (g_avail) {
        CU_pSuite g = CU_add_suite("gpu_device", NULL, NULL);
        CU_add_test(g, "setup", test_setup);
        CU_add_test(g, "device_name", test_device_name);
        CU_add_test(g, "alloc, copies, memory_stats", test_round_trip);
        CU_add_test(g, "synchronize reports a kernel's error", test_synchronize_reports_kernel_error);
        CU_add_test(g, "a second thread", test_second_thread);
        CU_add_test(g, "teardown", test_teardown);
    }
    int rc = lt_cunit_run();
    lt_registry_free(g_reg);
    if (rc != 0) return rc;
    if (!g_avail) {
        printf("no usable GPU (%s): the device tests are skipped\n", g_reason);
        return SKIP;
    }
    return 0;
}
