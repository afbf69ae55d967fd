/* The end of every CUnit program: run the registered suites verbosely and
 * turn a failed assertion, a failed test or a failed suite set-up into exit
 * status 1 (a suite whose init fails runs none of its tests, and that must
 * not pass), as must a program that ran no test at all. Frees the registry. */
#ifndef LT_TEST_CUNIT_RUN_H
#define LT_TEST_CUNIT_RUN_H

#include <CUnit/Basic.h>

static inline int lt_cunit_run(void) {
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_suites_failed() +
                      CU_get_number_of_tests_failed();
    unsigned ran = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    return failed || ran == 0 ? 1 : 0;
}

#endif
