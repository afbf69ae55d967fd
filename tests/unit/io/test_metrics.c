/* Epoch metrics: weighted by sample counts, and over ranks the sum of
 * value*weight and of weights (not a mean of per-rank means). Two ranks are
 * simulated by a reduce callback that adds the other rank's sums. */
#include <CUnit/Basic.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

static void log_steps(lt_metrics *ms, int64_t from, int64_t to) {
    for (int64_t step = from; step <= to; step++) {
        lt_metrics_log(ms, "train_loss", 1.0 / (double)step, 64, LT_LOG_ON_STEP);
        lt_metrics_step_rows(ms, step, 0);
    }
}

/* Flushes with files limited to `limit` bytes (RLIMIT_FSIZE: a write past
 * it fails with EFBIG, as one on a full file system fails with ENOSPC; no
 * root or mount needed), then lifts the limit. */
static lt_status flush_limited(lt_metrics *ms, const char *path, off_t limit, char *err,
                               size_t len) {
    struct rlimit old, small;
    CU_ASSERT_FATAL(getrlimit(RLIMIT_FSIZE, &old) == 0);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN); /* the error, not the signal's kill */
    small = (struct rlimit){.rlim_cur = (rlim_t)limit, .rlim_max = old.rlim_max};
    CU_ASSERT_FATAL(setrlimit(RLIMIT_FSIZE, &small) == 0);
    lt_status st = lt_metrics_flush_csv(ms, path, err, len);
    CU_ASSERT_FATAL(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, prev);
    return st;
}

static off_t size_of(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : -1;
}

/* A whole write of path (through path.tmp) that runs out of space: one line
 * naming the file, no path.tmp left behind, path as `before`. */
static void full_whole_write(lt_metrics *ms, const char *path, const char *before) {
    char err[512], want[400], tmp[400];
    CU_ASSERT_EQUAL(flush_limited(ms, path, size_of(path) + 10, err, sizeof err), LT_ERR_IO);
    snprintf(want, sizeof want, "cannot write %s: File too large (what it held is kept); ", path);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
    CU_ASSERT_PTR_NULL(strchr(err, '\n'));
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CU_ASSERT_NOT_EQUAL(access(tmp, F_OK), 0);
    char *now = slurp(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(now);
    CU_ASSERT_STRING_EQUAL(now, before);
    free(now);
}

/* A full disk must cost the flush, not metrics.csv: a failed whole write
 * leaves no metrics.csv.tmp behind and the previous file as it was; a failed
 * append is cut back to what was there; the next flush brings it up to date.
 * The error is one line naming the file. */
static void test_csv_full_disk(void) {
    char dir[] = "/tmp/lt_test_full_XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    char path[128], tmp[200], ref[128], err[512];
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    snprintf(ref, sizeof ref, "%s/whole.csv", dir);
    lt_metrics ms;
    memset(&ms, 0, sizeof ms);
    lt_metrics_begin(&ms, 1);
    log_steps(&ms, 1, 3);
    CU_ASSERT_EQUAL_FATAL(lt_metrics_flush_csv(&ms, path, err, sizeof err), LT_OK);
    char *before = slurp(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(before);

    /* a new column: the file is written whole, through the temporary file;
     * three lines stay in stdio's buffer (the failure shows at fclose), 600
     * are more than it holds (writes fail before fclose) */
    lt_metrics_log(&ms, "lr", 0.1, 1, LT_LOG_ON_STEP);
    log_steps(&ms, 4, 6);
    full_whole_write(&ms, path, before);
    log_steps(&ms, 7, 600);
    full_whole_write(&ms, path, before);
    free(before);

    /* an append that runs out of space part way is cut back */
    CU_ASSERT_EQUAL_FATAL(lt_metrics_flush_csv(&ms, path, err, sizeof err), LT_OK);
    before = slurp(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(before);
    log_steps(&ms, 601, 700);
    CU_ASSERT_EQUAL(flush_limited(&ms, path, size_of(path) + 10, err, sizeof err), LT_ERR_IO);
    char want[400];
    snprintf(want, sizeof want, "cannot append to %s: File too large; ", path);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
    char *now = slurp(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(now);
    CU_ASSERT_STRING_EQUAL(now, before);
    free(now);
    free(before);

    /* with space again, the next flush writes what the failed ones did not */
    CU_ASSERT_EQUAL(lt_metrics_flush_csv(&ms, path, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_metrics_write_csv(&ms, ref, err, sizeof err), LT_OK);
    char *got = slurp(path), *whole = slurp(ref);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    CU_ASSERT_PTR_NOT_NULL_FATAL(whole);
    CU_ASSERT_STRING_EQUAL(got, whole);
    free(got);
    free(whole);
    remove(path);
    remove(ref);

    /* a rename that fails (a directory is in the way) removes the temporary file */
    char blocked[160], inside[200];
    snprintf(blocked, sizeof blocked, "%s/blocked", dir);
    snprintf(inside, sizeof inside, "%s/x", blocked);
    snprintf(tmp, sizeof tmp, "%s.tmp", blocked);
    CU_ASSERT_FATAL(mkdir(blocked, 0700) == 0);
    FILE *f = fopen(inside, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fclose(f);
    CU_ASSERT_EQUAL(lt_metrics_write_csv(&ms, blocked, err, sizeof err), LT_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, blocked));
    CU_ASSERT_NOT_EQUAL(access(tmp, F_OK), 0);
    remove(inside);
    rmdir(blocked);
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
    CU_add_test(s, "metrics.csv: a full disk leaves no temporary and the file as it was",
                test_csv_full_disk);
    int rc = lt_cunit_run();
    return rc;
}
