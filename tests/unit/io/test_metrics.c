/* Epoch metrics: weighted by sample counts, and over ranks the sum of
 * value*weight and of weights (not a mean of per-rank means). Two ranks are
 * simulated by a reduce callback that adds the other rank's sums. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cunit_run.h"
#include "io/metrics.h"
#include "lt/nn.h"

static double g_other[8]; /* the other rank's (sum, weight) pairs */

static lt_status add_other_rank(void *user, double *buf, size_t n) {
    (void)user;
    for (size_t i = 0; i < n; i++) buf[i] += g_other[i];
    return LT_OK;
}

static void test_weighted_epoch_mean(void) {
    lt_metrics ms;
    memset(&ms, 0, sizeof ms);
    lt_metrics_begin(&ms, 2);
    /* batches of 10 and 30 samples with accuracies 1.0 and 0.5 */
    lt_metrics_log(&ms, "val_acc", 1.0, 10, LT_LOG_ON_EPOCH);
    lt_metrics_log(&ms, "val_acc", 0.5, 30, LT_LOG_ON_EPOCH);
    CU_ASSERT_EQUAL(lt_metrics_end(&ms, 0, 0, NULL, NULL), LT_OK);
    const lt_metric *m = lt_metrics_find(&ms, "val_acc");
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_DOUBLE_EQUAL(m->epoch_value, (10 * 1.0 + 30 * 0.5) / 40, 1e-12); /* 0.625, not 0.75 */
    lt_metrics_free(&ms);
}

/* A name logged in training and again in validation would mix both loops'
 * sums in one column: refused; each loop may keep logging its own names. */
static void test_one_name_one_loop(void) {
    lt_metrics ms;
    memset(&ms, 0, sizeof ms);
    lt_metrics_begin(&ms, 1);
    CU_ASSERT_EQUAL(lt_metrics_log(&ms, "loss", 0.5, 64, LT_LOG_ON_STEP), LT_OK);
    lt_metrics_begin(&ms, 2);
    CU_ASSERT_EQUAL(lt_metrics_log(&ms, "loss", 0.7, 64, LT_LOG_ON_EPOCH), LT_ERR_MISMATCH);
    CU_ASSERT_EQUAL(lt_metrics_log(&ms, "val_loss", 0.7, 64, LT_LOG_ON_EPOCH), LT_OK);
    lt_metrics_begin(&ms, 1);
    CU_ASSERT_EQUAL(lt_metrics_log(&ms, "loss", 0.4, 64, LT_LOG_ON_STEP), LT_OK);
    lt_metrics_free(&ms);
}

static void test_sync_dist_weights_ranks(void) {
    lt_metrics ms;
    memset(&ms, 0, sizeof ms);
    lt_metrics_begin(&ms, 2);
    /* this rank: 100 samples at 0.9; the other: 300 samples at 0.5 (shards of
     * unequal size, as evaluation shards may be) */
    lt_metrics_log(&ms, "val_acc", 0.9, 100, LT_LOG_ON_EPOCH | LT_LOG_SYNC_DIST);
    lt_metrics_log(&ms, "local_only", 2.0, 1, LT_LOG_ON_EPOCH);
    g_other[0] = 0.5 * 300;
    g_other[1] = 300;
    CU_ASSERT_EQUAL(lt_metrics_end(&ms, 0, 0, add_other_rank, NULL), LT_OK);
    const lt_metric *m = lt_metrics_find(&ms, "val_acc");
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_DOUBLE_EQUAL(m->epoch_value, (90.0 + 150.0) / 400.0, 1e-12); /* 0.6; mean of means is 0.7 */
    const lt_metric *l = lt_metrics_find(&ms, "local_only");
    CU_ASSERT_DOUBLE_EQUAL(l->epoch_value, 2.0, 1e-12); /* not reduced */
    lt_metrics_free(&ms);
}

static void test_csv(void) {
    lt_metrics ms;
    memset(&ms, 0, sizeof ms);
    lt_metrics_begin(&ms, 1);
    lt_metrics_log(&ms, "train_loss", 0.5, 64, LT_LOG_ON_STEP);
    lt_metrics_step_rows(&ms, 1, 0);
    lt_metrics_log(&ms, "train_loss", 0.25, 64, LT_LOG_ON_STEP);
    lt_metrics_step_rows(&ms, 2, 0);
    char path[] = "/tmp/lt_test_metrics_XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    char err[256];
    CU_ASSERT_EQUAL(lt_metrics_write_csv(&ms, path, err, sizeof err), LT_OK);
    FILE *f = fopen(path, "r");
    char text[256] = "";
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = 0;
    if (f) fclose(f);
    CU_ASSERT_STRING_EQUAL(text, "epoch,step,train_loss\n0,1,0.5\n0,2,0.25\n");
    remove(path);
    lt_metrics_free(&ms);
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("metrics", NULL, NULL);
    CU_add_test(s, "epoch mean weighted by samples", test_weighted_epoch_mean);
    CU_add_test(s, "sync_dist: sums and counts over ranks", test_sync_dist_weights_ranks);
    CU_add_test(s, "one name is logged by one loop", test_one_name_one_loop);
    CU_add_test(s, "metrics.csv rows", test_csv);
    int rc = lt_cunit_run();
    return rc;
}
