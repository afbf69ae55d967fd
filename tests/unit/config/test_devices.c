/* Lightning's `devices` semantics on gpu and cpu, and each error's message. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>
#include "cunit_run.h"
#include "config/devices.h"

static char err[512];

#define ASSERT_CONTAINS(hay, needle)                                                       \
    do {                                                                                   \
        const char *h_ = (hay), *n_ = (needle);                                            \
        if (!strstr(h_, n_)) {                                                             \
            fprintf(stderr, "\n  %s:%d: '%s' lacks '%s'", __FILE__, __LINE__, h_, n_);     \
            CU_FAIL(#hay " contains " #needle);                                            \
        }                                                                                  \
    } while (0)

/* Parses and compares with the expected ids (n = -1: expect an error). */
static void expect(const char *spec, const char *accel, int available, int n, const int *ids) {
    lt_device_list out = {.count = -7};
    err[0] = 0;
    lt_status st = lt_devices_parse(spec, accel, available, &out, err, sizeof err);
    if (n < 0) {
        CU_ASSERT_EQUAL(st, LT_ERR_INVALID);
        CU_ASSERT_EQUAL(out.count, -7); /* untouched on error */
        CU_ASSERT_PTR_NULL(strchr(err, '\n'));
        return;
    }
    if (st != LT_OK || out.count != n) {
        fprintf(stderr, "\n  devices='%s' on %s (%d available): status %d, count %d, want %d: %s",
                spec, accel, available, st, out.count, n, err);
        CU_FAIL("parse result");
        return;
    }
    for (int i = 0; i < n; i++) CU_ASSERT_EQUAL(out.ids[i], ids[i]);
}

static void expect_error(const char *spec, const char *accel, int available,
                         const char *message) {
    expect(spec, accel, available, -1, NULL);
    ASSERT_CONTAINS(err, message);
}

static const int seq[] = {0, 1, 2, 3};

static void test_gpu_table(void) {
    expect("3", "gpu", 4, 3, seq);
    expect("-1", "gpu", 4, 4, seq);
    expect("[0]", "gpu", 4, 1, (int[]){0});
    expect("[1, 3]", "gpu", 4, 2, (int[]){1, 3});
    expect("1, 3", "gpu", 4, 2, (int[]){1, 3});
    expect("0,", "gpu", 4, 1, (int[]){0});
    expect("auto", "gpu", 4, 4, seq);
}

static void test_gpu_more_forms(void) {
    expect("  2 ", "gpu", 4, 2, seq);
    expect("AUTO", "gpu", 4, 4, seq);
    expect("4", "gpu", 4, 4, seq);
    expect("1", "gpu", 1, 1, seq);
    expect("[3,1]", "gpu", 4, 2, (int[]){3, 1}); /* order is kept */
    expect("[ 2 ]", "gpu", 4, 1, (int[]){2});
    expect("[0,]", "gpu", 4, 1, (int[]){0});
    expect("2,", "gpu", 4, 1, (int[]){2});
    expect("0,1,2,3", "gpu", 4, 4, seq);
    expect("+2", "gpu", 4, 2, seq);
    expect("2", "cuda", 4, 2, seq);
    expect("2", "GPU", 4, 2, seq);
}

static void test_cpu(void) {
    expect("3", "cpu", 0, 3, seq);
    expect("1", "cpu", 0, 1, seq);
    expect("auto", "cpu", 8, 1, seq);
    expect("16", "cpu", 2, 16, (int[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
    expect_error("-1", "cpu", 0, "devices=-1 is not supported for CPU");
    expect_error("[0, 1]", "cpu", 0, "devices=[0, 1] on cpu");
    expect_error("[0, 1]", "cpu", 0, "as an integer, e.g. devices=2");
    expect_error("0,", "cpu", 0, "devices=0, on cpu");
    expect_error("0", "cpu", 0, "devices=0 on cpu: the number of processes must be 1 to");
    expect_error("-3", "cpu", 0, "devices=-3 on cpu");
    expect_error("1000", "cpu", 0, "must be 1 to 256");
    expect_error("x", "cpu", 0, "devices=x: expected a count");
}

static void test_gpu_errors(void) {
    expect_error("", "gpu", 4, "devices is empty; use a count");
    expect_error("  \t", "gpu", 4, "devices is empty");
    expect_error("1,,3", "gpu", 4, "devices=1,,3: empty entry in the device list");
    expect_error(",", "gpu", 4, "devices=,: empty entry");
    expect_error(",1", "gpu", 4, "devices=,1: empty entry");
    expect_error("1,3,,", "gpu", 4, "empty entry");
    expect_error("a", "gpu", 4, "devices=a: expected a count (e.g. 2), a list");
    expect_error("1.5", "gpu", 4, "devices=1.5: expected a count");
    expect_error("99999999999", "gpu", 4, "devices=99999999999: expected a count");
    expect_error("[1, 3", "gpu", 4, "devices=[1, 3: the list has no closing ']'");
    expect_error("[a]", "gpu", 4, "devices=[a]: 'a' is not a device index");
    expect_error("[1 2]", "gpu", 4, "'1 2' is not a device index");
    expect_error("[]", "gpu", 4, "devices=[]: the list names no device");
    expect_error("[1, 1]", "gpu", 4, "devices=[1, 1]: device 1 is listed twice");
    expect_error("2,0,2", "gpu", 4, "device 2 is listed twice");
    expect_error("[4]", "gpu", 2, "devices=[4]: only 2 GPUs are available (0-1)");
    expect_error("[0, 1]", "gpu", 1, "devices=[0, 1]: only 1 GPU is available (0)");
    expect_error("[0]", "gpu", 0, "devices=[0]: no GPUs are available; use accelerator=cpu");
    expect_error("[-1]", "gpu", 4, "devices=[-1]: device index -1 is negative");
    expect_error("-2", "gpu", 4, "devices=-2: a negative count other than -1");
    expect_error("0", "gpu", 4, "devices=0: requested 0 GPUs; use accelerator=cpu or devices>=1");
    expect_error("5", "gpu", 4, "devices=5: only 4 GPUs are available (0-3)");
    expect_error("2", "gpu", 0, "devices=2: no GPUs are available; use accelerator=cpu");
    expect_error("-1", "gpu", 0, "devices=-1: no GPUs are available");
    expect_error("auto", "gpu", 0, "devices=auto: no GPUs are available");
    expect_error("5", "tpu", 4, "devices=5: only 4 GPUs are available (0-3)"); /* read as gpu is */
    expect("[3, 1]", "tpu", 4, 2, (const int[]){3, 1});
}

static void test_bad_arguments(void) {
    lt_device_list out;
    CU_ASSERT_EQUAL(lt_devices_parse(NULL, "gpu", 4, &out, err, sizeof err), LT_ERR_INVALID);
    CU_ASSERT_EQUAL(lt_devices_parse("1", NULL, 4, &out, err, sizeof err), LT_ERR_INVALID);
    CU_ASSERT_EQUAL(lt_devices_parse("1", "gpu", -1, &out, err, sizeof err), LT_ERR_INVALID);
    CU_ASSERT_EQUAL(lt_devices_parse("1", "gpu", 4, NULL, err, sizeof err), LT_ERR_INVALID);
    /* No error buffer is fine too. */
    CU_ASSERT_EQUAL(lt_devices_parse("x", "gpu", 4, &out, NULL, 0), LT_ERR_INVALID);
    CU_ASSERT_EQUAL(lt_devices_parse("2", "gpu", 4, &out, NULL, 0), LT_OK);
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return (int)CU_get_error();
    CU_pSuite s = CU_add_suite("devices", NULL, NULL);
    struct {
        const char *name;
        CU_TestFunc fn;
    } tests[] = {
        {"gpu: Lightning's table", test_gpu_table},
        {"gpu: more forms", test_gpu_more_forms},
        {"cpu", test_cpu},
        {"gpu: errors", test_gpu_errors},
        {"bad arguments", test_bad_arguments},
    };
    for (size_t i = 0; s && i < sizeof tests / sizeof tests[0]; i++)
        if (!CU_add_test(s, tests[i].name, tests[i].fn)) s = NULL;
    if (!s) {
        CU_cleanup_registry();
        return 1;
    }
    int rc = lt_cunit_run();
    return rc;
}
