/* The loss scaler of 16-mixed (plugins/precision/mixed/scaler.h) against
 * sequences worked out by hand from PyTorch GradScaler's rules: growth after
 * exactly growth_interval clean steps, backoff and a restarted count on
 * Inf/NaN, no growth into infinity, and the checkpoint text round trip. */
#include <CUnit/Basic.h>
#include <math.h>
#include <string.h>
#include "cunit_run.h"
#include "../../../plugins/precision/mixed/scaler.h"

static grad_scaler defaults(void) {
    return (grad_scaler){.scale = 65536.0, .growth_factor = 2.0, .backoff_factor = 0.5, .growth_interval = 2000};
}

static void test_growth_after_exactly_interval(void) {
    grad_scaler s = defaults();
    for (int i = 0; i < 1999; i++) grad_scaler_update(&s, false);
    CU_ASSERT_EQUAL(s.scale, 65536.0); /* 1999 clean steps: not yet */
    CU_ASSERT_EQUAL(s.growth_tracker, 1999);
    grad_scaler_update(&s, false);     /* the 2000th */
    CU_ASSERT_EQUAL(s.scale, 131072.0);
    CU_ASSERT_EQUAL(s.growth_tracker, 0);
    for (int i = 0; i < 2000; i++) grad_scaler_update(&s, false);
    CU_ASSERT_EQUAL(s.scale, 262144.0); /* and again after 2000 more */
}

static void test_backoff_and_restart(void) {
    grad_scaler s = defaults();
    for (int i = 0; i < 1500; i++) grad_scaler_update(&s, false);
    grad_scaler_update(&s, true); /* step 1501 overflows */
    CU_ASSERT_EQUAL(s.scale, 32768.0);
    CU_ASSERT_EQUAL(s.growth_tracker, 0);
    CU_ASSERT_EQUAL(s.skipped_in_row, 1);
    grad_scaler_update(&s, true);
    CU_ASSERT_EQUAL(s.scale, 16384.0);
    CU_ASSERT_EQUAL(s.skipped_in_row, 2);
    CU_ASSERT_EQUAL(s.skipped_total, 2);
    /* The count restarted: 1999 clean steps after the skips do not grow. */
    for (int i = 0; i < 1999; i++) grad_scaler_update(&s, false);
    CU_ASSERT_EQUAL(s.scale, 16384.0);
    CU_ASSERT_EQUAL(s.skipped_in_row, 0);
    grad_scaler_update(&s, false);
    CU_ASSERT_EQUAL(s.scale, 32768.0);
    CU_ASSERT_EQUAL(s.skipped_total, 2);
}

/* A hand-written sequence with a short interval: C clean, I Inf.
 * interval 3, factors 2 / 0.5, start 8:
 *   C C C -> 16 | C I -> 8 (count reset) | C C -> 8 | C -> 16 | I I -> 4 */
static void test_hand_sequence(void) {
    grad_scaler s = {.scale = 8, .growth_factor = 2, .backoff_factor = 0.5, .growth_interval = 3};
    const char *seq = "CCCCICCCII";
    const double want[] = {8, 8, 16, 16, 8, 8, 8, 16, 8, 4};
    for (int i = 0; seq[i]; i++) {
        grad_scaler_update(&s, seq[i] == 'I');
        CU_ASSERT_EQUAL(s.scale, want[i]);
    }
    CU_ASSERT_EQUAL(s.skipped_total, 3);
    CU_ASSERT_EQUAL(s.skipped_in_row, 2);
}

static void test_no_growth_into_infinity(void) {
    grad_scaler s = defaults();
    s.scale = 0x1p1023;
    s.growth_interval = 1;
    grad_scaler_update(&s, false);
    CU_ASSERT_EQUAL(s.scale, 0x1p1023); /* 2^1024 is inf: kept */
    CU_ASSERT_EQUAL(s.growth_tracker, 0);
}

static void test_text_round_trip(void) {
    grad_scaler s = defaults(), t = defaults();
    s.scale = 65536.0 * 0.3; /* not a power of two: must survive exactly */
    s.growth_tracker = 1234;
    s.skipped_in_row = 2;
    s.skipped_total = 17;
    char buf[256];
    CU_ASSERT(grad_scaler_format(&s, buf, sizeof buf) < (int)sizeof buf);
    CU_ASSERT_TRUE(grad_scaler_parse(&t, buf));
    CU_ASSERT_EQUAL(memcmp(&s.scale, &t.scale, sizeof s.scale), 0);
    CU_ASSERT_EQUAL(t.growth_tracker, 1234);
    CU_ASSERT_EQUAL(t.skipped_in_row, 2);
    CU_ASSERT_EQUAL(t.skipped_total, 17);
}

static void test_text_refused(void) {
    grad_scaler t = defaults();
    const char *bad[] = {"", "scale=1", "scale=0x1p+16 growth_tracker=-1 skipped_in_row=0 skipped_total=0",
                         "scale=0 growth_tracker=0 skipped_in_row=0 skipped_total=0",
                         "scale=inf growth_tracker=0 skipped_in_row=0 skipped_total=0",
                         "scale=0x1p+16 growth_tracker=0 skipped_in_row=0 skipped_total=0 extra"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CU_ASSERT_FALSE(grad_scaler_parse(&t, bad[i]));
        CU_ASSERT_EQUAL(t.scale, 65536.0); /* left alone */
    }
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("scaler", NULL, NULL);
    CU_add_test(s, "grows after exactly growth_interval clean steps", test_growth_after_exactly_interval);
    CU_add_test(s, "Inf backs off and restarts the count", test_backoff_and_restart);
    CU_add_test(s, "a hand-computed sequence", test_hand_sequence);
    CU_add_test(s, "never grows into infinity", test_no_growth_into_infinity);
    CU_add_test(s, "checkpoint text round trip is exact", test_text_round_trip);
    CU_add_test(s, "damaged checkpoint text is refused", test_text_refused);
    return lt_cunit_run();
}
