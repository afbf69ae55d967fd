/* Epoch metrics: weighted by sample counts, and over ranks the sum of
 * value*weight and of weights (not a mean of per-rank means). Two ranks are
 * simulated by a reduce callback that adds the other rank's sums. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    char *copy = malloc(n + 1);
    if (copy) memcpy(copy, text, n + 1);
    return copy;
}

static ino_t inode_of(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_ino : 0;
}

/* One flush, then: the file must read as one whole write of everything so
 * far would; `appended` says whether it was appended to (same inode) or
 * written anew (a temporary file renamed over it). */
static void flush_and_compare(lt_metrics *ms, const char *path, const char *ref, bool appended, const char *when) {
    char err[256];
    ino_t before = inode_of(path);
    CU_ASSERT_EQUAL_FATAL(lt_metrics_flush_csv(ms, path, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL_FATAL(lt_metrics_write_csv(ms, ref, err, sizeof err), LT_OK);
    char *got = slurp(path), *want = slurp(ref);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    CU_ASSERT_PTR_NOT_NULL_FATAL(want);
    if (strcmp(got, want)) fprintf(stderr, "\n    %s: flushed\n%s    whole\n%s", when, got, want);
    CU_ASSERT_STRING_EQUAL(got, want);
    bool same = before && before == inode_of(path);
    if (same != appended) fprintf(stderr, "\n    %s: %s, expected %s\n", when, same ? "appended" : "written anew",
                                  appended ? "appended" : "written anew");
    CU_ASSERT_EQUAL(same, appended);
    free(got);
    free(want);
}

/* metrics.csv flushed as training goes (flush_logs_every_n_steps) reads the
 * same as one write at the end: no line twice, the header grows when a
 * column appears (val_* after the first validation), and a flushed line that
 * gains cells later (validation at the step the last flush wrote) is one line. */
static void test_csv_flushes(void) {
    char dir[] = "/tmp/lt_test_flush_XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    char path[128], ref[128];
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    snprintf(ref, sizeof ref, "%s/whole.csv", dir);
    lt_metrics ms;
    memset(&ms, 0, sizeof ms);
    int64_t step = 0;
    for (int64_t epoch = 0; epoch < 2; epoch++) {
        lt_metrics_begin(&ms, 1);
        for (int i = 0; i < 4; i++) {
            step++;
            lt_metrics_log(&ms, "train_loss", 1.0 / (double)step, 64, LT_LOG_ON_STEP | LT_LOG_ON_EPOCH);
            lt_metrics_step_rows(&ms, step, epoch);
            if (step == 2) flush_and_compare(&ms, path, ref, false, "first flush");
            if (step == 3) flush_and_compare(&ms, path, ref, true, "one new line");
            if (step == 4 || step == 8) /* the last step of the epoch: validation adds to its line */
                flush_and_compare(&ms, path, ref, true, "step flush at the epoch's end");
        }
        lt_metrics_end(&ms, step, epoch, NULL, NULL); /* train_loss's epoch value, at the same step */
        lt_metrics_begin(&ms, 2);
        lt_metrics_log(&ms, "val_loss", 0.5 + (double)epoch, 10, LT_LOG_ON_EPOCH);
        lt_metrics_end(&ms, step, epoch, NULL, NULL);
        flush_and_compare(&ms, path, ref, false, epoch ? "the last line gained cells" : "val_loss appeared");
        flush_and_compare(&ms, path, ref, true, "nothing new");
    }
    lt_metrics_begin(&ms, 1);
    lt_metrics_log(&ms, "train_loss", 0.01, 64, LT_LOG_ON_STEP);
    lt_metrics_step_rows(&ms, 9, 2);
    remove(path); /* gone: written again, whole */
    flush_and_compare(&ms, path, ref, false, "file removed");
    char *text = slurp(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "epoch,step,train_loss,val_loss\n0,1,1,\n"));
    /* the epoch's mean (1 + 1/2 + 1/3 + 1/4) / 4 on the last step's line, with val_loss */
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\n0,4,0.520833333,0.5\n1,5,0.2,\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\n2,9,0.01,\n"));
    free(text);
    remove(path);
    remove(ref);
    rmdir(dir);
    lt_metrics_free(&ms);
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("metrics", NULL, NULL);
    CU_add_test(s, "epoch mean weighted by samples", test_weighted_epoch_mean);
    CU_add_test(s, "sync_dist: sums and counts over ranks", test_sync_dist_weights_ranks);
    CU_add_test(s, "one name is logged by one loop", test_one_name_one_loop);
    CU_add_test(s, "metrics.csv rows", test_csv);
    CU_add_test(s, "metrics.csv flushed as it grows reads as one write", test_csv_flushes);
    int rc = lt_cunit_run();
    return rc;
}
