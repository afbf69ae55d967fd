/* The Trainer end to end through the public API (lt/trainer.h) on the real
 * Fashion-MNIST files, with small limits: determinism, bit-exact resume
 * (epoch boundary, mid-epoch, accumulation, adamw + cosine), corrupt
 * checkpoints, logged metrics and files, 64-bit precision, and the errors a
 * user gets for bad input. Skipped (exit 77) when the data is missing. */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cunit_run.h"
#include "lt/trainer.h"
#include "io/safetensors.h"

#define MAX_SETS 40

static char g_data[1024];
static char g_tmp[256];
static int g_dirs;

/* ---- files ---------------------------------------------------------------- */

static bool file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    if (buf) { buf[n] = 0; *len = (size_t)n; }
    return buf;
}

static bool write_file(const char *path, const char *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

/* A fresh directory under the test's temp dir. */
static void new_dir(char *out, size_t len, const char *tag) {
    snprintf(out, len, "%s/%02d-%s", g_tmp, g_dirs++, tag);
    mkdir(out, 0777);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* ---- runs ------------------------------------------------------------------- */

typedef struct sets {
    char buf[MAX_SETS][1200];
    const char *ptr[MAX_SETS];
    int n;
} sets;

/* Adds "key=value", replacing an earlier value of the same key. */
static void put(sets *s, const char *kv) {
    size_t klen = strcspn(kv, "=");
    int i = 0;
    while (i < s->n && !(strncmp(s->buf[i], kv, klen) == 0 && s->buf[i][klen] == '=')) i++;
    if (i == s->n) {
        if (s->n == MAX_SETS) return;
        s->n++;
    }
    snprintf(s->buf[i], sizeof s->buf[i], "%s", kv);
    s->ptr[i] = s->buf[i];
}

static void putf(sets *s, const char *key, const char *value) {
    char kv[1200];
    snprintf(kv, sizeof kv, "%s=%s", key, value);
    put(s, kv);
}

/* The brief's small, fast run; `extra` is a NULL-terminated list of overrides. */
static void base_sets(sets *s, const char *root, const char *const *extra) {
    s->n = 0;
    static const char *const base[] = {
        "model.name=fashion_mnist_mlp", "model.hidden=32", "trainer.seed=7",
        "trainer.accelerator=cpu", "trainer.devices=1", "trainer.log_level=warn",
        "trainer.max_epochs=2", "trainer.limit_train_batches=40", "trainer.limit_val_batches=5",
        "trainer.num_sanity_val_steps=0", "trainer.enable_progress_bar=false",
        "data.batch_size=32", "data.val_split=1000", "optimizer.name=sgd", "optimizer.lr=0.05",
        "optimizer.momentum=0.9", NULL};
    for (int i = 0; base[i]; i++) put(s, base[i]);
    putf(s, "data.dir", g_data);
    if (root) putf(s, "trainer.default_root_dir", root);
    for (int i = 0; extra && extra[i]; i++) put(s, extra[i]);
}

static lt_status make_trainer(const sets *s, lt_trainer **t, char *err, size_t errlen) {
    static const char *const dirs[] = {LT_TEST_PLUGIN_DIR};
    lt_trainer_args a = {.struct_size = sizeof a, .sets = s->ptr, .nsets = s->n,
                         .plugin_dirs = dirs, .nplugin_dirs = 1, .ignore_env = true};
    return lt_trainer_new(&a, t, err, errlen);
}

typedef struct result {
    lt_status st;
    char error[2048];
    double *params;
    size_t n;
    double train_loss, val_acc;
} result;

static void result_free(result *r) {
    free(r->params);
    r->params = NULL;
}

/* One fit; keeps the parameters and a few metrics. */
static result fit(const char *root, const char *const *extra, const char *ckpt) {
    result r = {0};
    sets s;
    base_sets(&s, root, extra);
    lt_trainer *t = NULL;
    r.st = make_trainer(&s, &t, r.error, sizeof r.error);
    if (r.st != LT_OK) return r;
    if (ckpt) r.st = lt_trainer_set_ckpt_path(t, ckpt);
    if (r.st == LT_OK) r.st = lt_trainer_fit(t);
    if (r.st != LT_OK) {
        snprintf(r.error, sizeof r.error, "%s", lt_trainer_error(t));
    } else {
        lt_trainer_params(t, NULL, 0, &r.n);
        r.params = malloc(r.n * sizeof *r.params);
        lt_trainer_params(t, r.params, r.n, NULL);
        lt_trainer_metric(t, "train_loss", &r.train_loss);
        lt_trainer_metric(t, "val_acc", &r.val_acc);
    }
    lt_trainer_free(t);
    return r;
}

static bool fit_ok(const result *r, const char *what) {
    if (r->st != LT_OK) printf("\n  %s: fit failed (%d): %s", what, r->st, r->error);
    CU_ASSERT_EQUAL(r->st, LT_OK);
    return r->st == LT_OK;
}

/* Bit equality of two parameter sets, with a count of differing elements. */
static bool same_params(const result *a, const result *b, const char *what) {
    if (!a->params || !b->params || a->n != b->n) {
        printf("\n  %s: no parameters to compare", what);
        return false;
    }
    size_t diff = 0;
    double worst = 0;
    for (size_t i = 0; i < a->n; i++) {
        if (memcmp(&a->params[i], &b->params[i], sizeof(double))) diff++;
        worst = fmax(worst, fabs(a->params[i] - b->params[i]));
    }
    printf("\n  %s: %zu of %zu parameters differ (max |diff| %.3g)", what, diff, a->n, worst);
    return diff == 0;
}

/* ---- gradient clipping by value ---------------------------------------------- */

/* trainer.gradient_clip_algorithm = value reaches the step: a bound no
 * gradient reaches changes nothing (bit for bit); a small one changes the
 * result, and differently from norm clipping at the same value. The clamp
 * itself is checked against its definition in test_optim. */
static void test_clip_by_value(void) {
    char r0[512], r1[512], r2[512], r3[512];
    new_dir(r0, sizeof r0, "clip0");
    new_dir(r1, sizeof r1, "clip1");
    new_dir(r2, sizeof r2, "clip2");
    new_dir(r3, sizeof r3, "clip3");
    const char *const huge[] = {"trainer.gradient_clip_algorithm=value", "trainer.gradient_clip_val=1e9", NULL};
    const char *const small[] = {"trainer.gradient_clip_algorithm=value", "trainer.gradient_clip_val=1e-3", NULL};
    const char *const norm[] = {"trainer.gradient_clip_algorithm=norm", "trainer.gradient_clip_val=1e-3", NULL};
    result plain = fit(r0, NULL, NULL), h = fit(r1, huge, NULL), v = fit(r2, small, NULL), n = fit(r3, norm, NULL);
    if (fit_ok(&plain, "no clipping") && fit_ok(&h, "value 1e9") && fit_ok(&v, "value 1e-3") &&
        fit_ok(&n, "norm 1e-3")) {
        CU_ASSERT(same_params(&plain, &h, "value 1e9 vs none (no gradient that large)"));
        CU_ASSERT(!same_params(&plain, &v, "value 1e-3 vs none (must differ)"));
        CU_ASSERT(!same_params(&v, &n, "value 1e-3 vs norm 1e-3 (must differ)"));
    }
    result_free(&plain);
    result_free(&h);
    result_free(&v);
    result_free(&n);
}

/* ---- a. determinism ------------------------------------------------------------ */

static void test_determinism(void) {
    char r1[512], r2[512], r3[512];
    new_dir(r1, sizeof r1, "det1");
    new_dir(r2, sizeof r2, "det2");
    new_dir(r3, sizeof r3, "det3");
    result a = fit(r1, NULL, NULL), b = fit(r2, NULL, NULL);
    const char *const seed8[] = {"trainer.seed=8", NULL};
    result c = fit(r3, seed8, NULL);
    if (fit_ok(&a, "run 1") && fit_ok(&b, "run 2") && fit_ok(&c, "seed 8")) {
        /* model.hidden=32 reached the module: 784-32-32-10 with biases. */
        size_t want = 784 * 32 + 32 + 32 * 32 + 32 + 32 * 10 + 10;
        printf("\n  %zu parameters (want %zu for model.hidden=32)", a.n, want);
        CU_ASSERT_EQUAL(a.n, want);
        CU_ASSERT(same_params(&a, &b, "same seed"));
        CU_ASSERT(!same_params(&a, &c, "seed 7 vs 8"));
    }
    result_free(&a), result_free(&b), result_free(&c);
}

/* ---- b. bit-exact resume ---------------------------------------------------------- */

static void ckpt_of(char *out, size_t len, const char *root) {
    snprintf(out, len, "%s/checkpoints/last.safetensors", root);
}

/* A = 2 epochs straight; B = 1 epoch, then a new trainer resumes to 2.
 * `extra` (NULL-terminated, may be NULL) applies to every run. */
static void resume_case(const char *tag, const char *const *extra) {
    const char *ov[MAX_SETS];
    int n = 0;
    for (; extra && extra[n] && n < MAX_SETS - 2; n++) ov[n] = extra[n];
    char ra[512], rb[512], ck[600];
    new_dir(ra, sizeof ra, tag);
    new_dir(rb, sizeof rb, tag);
    ov[n] = NULL;
    result a = fit(ra, ov, NULL);
    ov[n] = "trainer.max_epochs=1";
    ov[n + 1] = NULL;
    result b1 = fit(rb, ov, NULL);
    ckpt_of(ck, sizeof ck, rb);
    ov[n] = "trainer.max_epochs=2";
    result b2 = {.st = LT_ERR_STATE};
    if (fit_ok(&b1, "B, epoch 1")) b2 = fit(rb, ov, ck);
    if (fit_ok(&a, "A") && fit_ok(&b2, "B resumed")) {
        char what[128];
        snprintf(what, sizeof what, "%s: A vs B (resumed at the epoch boundary)", tag);
        CU_ASSERT(same_params(&a, &b2, what));
        CU_ASSERT(!same_params(&a, &b1, "A vs B after its first epoch (must differ)"));
    }
    result_free(&a), result_free(&b1), result_free(&b2);
}

static void test_resume_epoch(void) { resume_case("resume-sgd", NULL); }

static void test_resume_accumulate(void) {
    const char *const ov[] = {"trainer.accumulate_grad_batches=2", NULL};
    resume_case("resume-accum", ov);
}

static void test_resume_adamw_cosine(void) {
    const char *const ov[] = {"optimizer.name=adamw", "optimizer.lr=0.003",
                              "optimizer.weight_decay=0.01", "scheduler.name=cosine", NULL};
    resume_case("resume-adamw", ov);
}

static void expect_meta(lt_st_file *f, const char *key, const char *want) {
    const char *v = lt_st_meta(f, key);
    bool ok = v && !strcmp(v, want);
    printf("\n  checkpoint %s = %s (want %s)", key, v ? v : "(none)", want);
    CU_ASSERT(ok);
}

/* C stops after 30 optimizer steps, mid-epoch 0; resuming finishes 2 epochs. */
static void test_resume_mid_epoch(void) {
    char ra[512], rc[512], ck[600], err[1024];
    new_dir(ra, sizeof ra, "mid-a");
    new_dir(rc, sizeof rc, "mid-c");
    result a = fit(ra, NULL, NULL);
    const char *const stop[] = {"trainer.max_steps=30", NULL};
    result c1 = fit(rc, stop, NULL);
    ckpt_of(ck, sizeof ck, rc);
    if (fit_ok(&c1, "C, 30 steps")) {
        lt_st_file *f = NULL;
        lt_status st = lt_st_open(ck, &f, err, sizeof err);
        if (st != LT_OK) printf("\n  %s", err);
        CU_ASSERT_EQUAL_FATAL(st, LT_OK);
        expect_meta(f, "lt.epoch", "0");
        expect_meta(f, "lt.batch_in_epoch", "30");
        expect_meta(f, "lt.global_step", "30");
        lt_st_close(f);
    }
    const char *const go[] = {"trainer.max_steps=-1", "trainer.max_epochs=2", NULL};
    result c2 = c1.st == LT_OK ? fit(rc, go, ck) : (result){.st = LT_ERR_STATE};
    if (fit_ok(&a, "A") && fit_ok(&c2, "C resumed"))
        CU_ASSERT(same_params(&a, &c2, "A vs C (resumed mid-epoch)"));
    result_free(&a), result_free(&c1), result_free(&c2);
}

/* ---- c. corrupt checkpoint ---------------------------------------------------------- */

static void corrupt_case(const char *root, const char *good, size_t keep, const char *tag) {
    size_t len = 0;
    char *orig = read_file(good, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(orig);
    char bad[700];
    snprintf(bad, sizeof bad, "%s/%s.safetensors", root, tag);
    CU_ASSERT_FATAL(keep < len && write_file(bad, orig, keep));
    /* Resume in the same root: a failed run must not touch its last.safetensors. */
    result r = fit(root, NULL, bad);
    printf("\n  %s (%zu of %zu bytes): status %d: %s", tag, keep, len, r.st, r.error);
    CU_ASSERT_EQUAL(r.st, LT_ERR_CORRUPT);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.error, bad));
    size_t len2 = 0;
    char *after = read_file(good, &len2);
    CU_ASSERT(after && len2 == len && !memcmp(orig, after, len));
    size_t blen = 0;
    char *bad_after = read_file(bad, &blen);
    CU_ASSERT(bad_after && blen == keep && !memcmp(orig, bad_after, keep));
    free(orig), free(after), free(bad_after);
    result_free(&r);
}

static void test_corrupt_checkpoint(void) {
    char root[512], ck[600];
    new_dir(root, sizeof root, "corrupt");
    const char *const one[] = {"trainer.max_epochs=1", NULL};
    result r = fit(root, one, NULL);
    if (!fit_ok(&r, "run to corrupt")) return;
    result_free(&r);
    ckpt_of(ck, sizeof ck, root);
    size_t len = 0;
    char *data = read_file(ck, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    free(data);
    corrupt_case(root, ck, len / 2, "half");
    corrupt_case(root, ck, len - 1, "minus-one-byte");
    corrupt_case(root, ck, 5, "five-bytes");
}

/* ---- c. checkpoint metadata ------------------------------------------------------------ */

/* What lt_checkpoint_save writes into the metadata. */
static const char *const META_KEYS[] = {
    "format", "lt.model", "lt.epoch", "lt.batch_in_epoch", "lt.global_step", "lt.optimizer",
    "lt.optimizer_step", "lt.seed", "lt.precision", "lt.precision_state", "lt.monitor",
    "lt.best_score", "lt.world_size", NULL};

/* out = good with metadata `key` set to `value` (NULL: left out). */
static bool with_meta(const char *good, const char *out, const char *key, const char *value) {
    char err[1024];
    lt_st_file *f = NULL;
    if (lt_st_open(good, &f, err, sizeof err) != LT_OK) {
        printf("\n  %s", err);
        return false;
    }
    size_t n = lt_st_count(f), nm = 0;
    lt_st_tensor *ts = calloc(n ? n : 1, sizeof *ts);
    const char *meta[2 * 16];
    for (size_t i = 0; ts && i < n; i++) ts[i] = *lt_st_at(f, i);
    for (int i = 0; META_KEYS[i]; i++) {
        const char *v = strcmp(META_KEYS[i], key) ? lt_st_meta(f, META_KEYS[i]) : value;
        if (!v) continue;
        meta[2 * nm] = META_KEYS[i];
        meta[2 * nm++ + 1] = v;
    }
    bool ok = ts && lt_st_write(out, ts, n, meta, nm, err, sizeof err) == LT_OK;
    if (!ok) printf("\n  writing %s: %s", out, err);
    free(ts);
    lt_st_close(f);
    return ok;
}

/* Resumes in `root` from a copy of `good` whose `key` is `value`: refused
 * with `want`, one line naming the file, the key and each needle; root's
 * last.safetensors is untouched. */
static void meta_case(const char *root, const char *good, const char *key, const char *value,
                      lt_status want, const char *const *needles) {
    char bad[700], last[600];
    static int n;
    snprintf(bad, sizeof bad, "%s/meta-%d.safetensors", root, n++);
    CU_ASSERT_FATAL(with_meta(good, bad, key, value));
    ckpt_of(last, sizeof last, root);
    size_t len = 0, len2 = 0;
    char *orig = read_file(last, &len);
    result r = fit(root, NULL, bad);
    printf("\n  %s = %s%s%s: status %d: %s", key, value ? "'" : "", value ? value : "(none)",
           value ? "'" : "", r.st, r.error);
    CU_ASSERT_EQUAL(r.st, want);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.error, bad));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.error, key));
    CU_ASSERT_PTR_NULL(strchr(r.error, '\n'));
    for (int i = 0; needles && needles[i]; i++) CU_ASSERT_PTR_NOT_NULL(strstr(r.error, needles[i]));
    char *after = read_file(last, &len2);
    CU_ASSERT(orig && after && len == len2 && !memcmp(orig, after, len));
    free(orig), free(after);
    result_free(&r);
}

/* Every lt.* value is checked (type, range) and lt.model names this run's
 * model: a checkpoint with the same tensors but another model's name, or
 * a world size of 0, used to resume. */
static void test_checkpoint_metadata(void) {
    char root[512], last[600], ck[700], ok[700];
    new_dir(root, sizeof root, "meta");
    const char *const one[] = {"trainer.max_epochs=1", "trainer.limit_train_batches=5", NULL};
    result r = fit(root, one, NULL);
    if (!fit_ok(&r, "run to edit")) return;
    result_free(&r);
    /* The copies are made from a file of its own: a resume that is not
     * refused moves root's last.safetensors aside (last-v1). */
    ckpt_of(last, sizeof last, root);
    snprintf(ck, sizeof ck, "%s/good.safetensors", root);
    size_t len = 0;
    char *data = read_file(last, &len);
    CU_ASSERT_FATAL(data && write_file(ck, data, len));
    free(data);
    const char *const model[] = {"was saved by model 'fashion_mnist_cnn'",
                                 "this run trains 'fashion_mnist_mlp'",
                                 "model.name = fashion_mnist_cnn",
                                 "checkpoint.strict = false", NULL};
    meta_case(root, ck, "lt.model", "fashion_mnist_cnn", LT_ERR_MISMATCH, model);
    const char *const missing[] = {"is missing", NULL};
    meta_case(root, ck, "lt.model", NULL, LT_ERR_CORRUPT, missing);
    const char *const ws0[] = {"'lt.world_size' is '0'", "[1, 2147483647]",
                               "use another checkpoint", NULL};
    meta_case(root, ck, "lt.world_size", "0", LT_ERR_CORRUPT, ws0);
    const char *const wsneg[] = {"'lt.world_size' is '-2'", NULL};
    meta_case(root, ck, "lt.world_size", "-2", LT_ERR_CORRUPT, wsneg);
    const char *const wsgarbage[] = {"'lt.world_size' is 'two'", NULL};
    meta_case(root, ck, "lt.world_size", "two", LT_ERR_CORRUPT, wsgarbage);
    const char *const step[] = {"'lt.global_step' is '-1'", NULL};
    meta_case(root, ck, "lt.global_step", "-1", LT_ERR_CORRUPT, step);
    const char *const ostep[] = {"'lt.optimizer_step' is ' 5'", NULL};
    meta_case(root, ck, "lt.optimizer_step", " 5", LT_ERR_CORRUPT, ostep);
    const char *const seed[] = {"'lt.seed' is '-1'", NULL};
    meta_case(root, ck, "lt.seed", "-1", LT_ERR_CORRUPT, seed);
    const char *const best[] = {"'lt.best_score' is '0.9x'", NULL};
    meta_case(root, ck, "lt.best_score", "0.9x", LT_ERR_CORRUPT, best);
    const char *const prec[] = {"'lt.precision' is ''", NULL};
    meta_case(root, ck, "lt.precision", "", LT_ERR_CORRUPT, prec);
    const char *const nl[] = {"'lt.epoch' is '1?'", NULL}; /* still one line */
    meta_case(root, ck, "lt.epoch", "1\n", LT_ERR_CORRUPT, nl);
    /* checkpoint.strict = false loads another model's checkpoint as it loads
     * another model's tensors; the name's case does not matter. */
    char upper[700];
    snprintf(ok, sizeof ok, "%s/other-model.safetensors", root);
    snprintf(upper, sizeof upper, "%s/upper-model.safetensors", root);
    CU_ASSERT_FATAL(with_meta(ck, ok, "lt.model", "fashion_mnist_cnn"));
    CU_ASSERT_FATAL(with_meta(ck, upper, "lt.model", "FASHION_MNIST_MLP"));
    const char *const lenient[] = {"checkpoint.strict=false", "trainer.max_epochs=2",
                                   "trainer.limit_train_batches=5", NULL};
    r = fit(root, lenient, ok);
    fit_ok(&r, "another lt.model with checkpoint.strict = false");
    result_free(&r);
    r = fit(root, lenient + 1, upper);
    fit_ok(&r, "lt.model in capitals");
    result_free(&r);
}

/* ---- d. metrics and log files --------------------------------------------------------- */

static void test_metrics_and_logs(void) {
    char root[512], path[700];
    new_dir(root, sizeof root, "metrics");
    const char *const one[] = {"trainer.max_epochs=1", "trainer.log_every_n_steps=10", NULL};
    result r = fit(root, one, NULL);
    if (!fit_ok(&r, "metrics run")) return;
    printf("\n  val_acc %.4f, train_loss %.4f", r.val_acc, r.train_loss);
    CU_ASSERT(r.val_acc >= 0 && r.val_acc <= 1);
    CU_ASSERT(r.val_acc > 0.3); /* 40 sgd steps learn something; chance is 0.1 */
    CU_ASSERT(isfinite(r.train_loss) && r.train_loss > 0);
    snprintf(path, sizeof path, "%s/lt_logs/version_0/metrics.csv", root);
    size_t len = 0;
    char *csv = read_file(path, &len);
    if (!csv) printf("\n  missing %s", path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(csv);
    char *nl = strchr(csv, '\n');
    if (nl) *nl = 0;
    printf("\n  metrics.csv header: %s", csv);
    CU_ASSERT_PTR_NOT_NULL(strstr(csv, "train_loss"));
    CU_ASSERT_PTR_NOT_NULL(strstr(csv, "val_acc"));
    CU_ASSERT(nl && strchr(nl + 1, '\n')); /* at least one row */
    free(csv);
    snprintf(path, sizeof path, "%s/lt_logs/version_0/config.txt", root);
    CU_ASSERT(file_exists(path));
    result_free(&r);
}

/* ---- e. 64-true precision --------------------------------------------------------------- */

static void test_precision64(void) {
    char r32[512], r64[512];
    new_dir(r32, sizeof r32, "prec32");
    new_dir(r64, sizeof r64, "prec64");
    const char *const few32[] = {"trainer.max_epochs=1", "trainer.limit_train_batches=5", NULL};
    const char *const few64[] = {"trainer.max_epochs=1", "trainer.limit_train_batches=5",
                                 "trainer.precision=64-true", NULL};
    result a = fit(r32, few32, NULL), b = fit(r64, few64, NULL);
    if (fit_ok(&a, "32-true") && fit_ok(&b, "64-true")) {
        double rel = fabs(a.train_loss - b.train_loss) / fabs(b.train_loss);
        printf("\n  train_loss 32-true %.9f, 64-true %.9f (rel %.2e)", a.train_loss, b.train_loss, rel);
        CU_ASSERT(rel < 1e-3);
        double worst = 0;
        for (size_t i = 0; i < a.n && a.n == b.n; i++) worst = fmax(worst, fabs(a.params[i] - b.params[i]));
        printf("\n  max |param 32 - param 64| = %.3g", worst);
        CU_ASSERT(a.n == b.n && worst < 1e-4);
        CU_ASSERT(!same_params(&a, &b, "32 vs 64 (must not be bit-equal)"));
    }
    result_free(&a), result_free(&b);
}

/* ---- f. bad input --------------------------------------------------------------------- */

static void expect_new_fails(const char *what, const char *set, const char *needle) {
    sets s;
    base_sets(&s, g_tmp, NULL);
    put(&s, set);
    lt_trainer *t = NULL;
    char err[2048] = "";
    lt_status st = make_trainer(&s, &t, err, sizeof err);
    printf("\n  %s: status %d: %s", what, st, err);
    CU_ASSERT(st != LT_OK && t == NULL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, needle));
    lt_trainer_free(t);
}

static void test_bad_key(void) {
    expect_new_fails("trainer.max_epoch=3", "trainer.max_epoch=3", "max_epochs");
}

static void test_bad_strategy(void) {
    sets s;
    base_sets(&s, g_tmp, NULL);
    put(&s, "trainer.strategy=dpp");
    lt_trainer *t = NULL;
    char err[2048] = "";
    lt_status st = make_trainer(&s, &t, err, sizeof err);
    printf("\n  strategy dpp: status %d: %s%s", st, err,
           strstr(err, "ddp") ? "" : "\n  (no 'ddp' suggestion: the ddp plugin is not built here)");
    CU_ASSERT(st != LT_OK && t == NULL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "dpp"));
    lt_trainer_free(t);
}

/* Fails either when made or when fit; returns the message. */
static lt_status new_or_fit(const sets *s, char *err, size_t errlen) {
    lt_trainer *t = NULL;
    lt_status st = make_trainer(s, &t, err, errlen);
    if (st != LT_OK) return st;
    st = lt_trainer_fit(t);
    if (st != LT_OK) snprintf(err, errlen, "%s", lt_trainer_error(t));
    lt_trainer_free(t);
    return st;
}

static void test_no_model(void) {
    char root[512], err[2048] = "";
    new_dir(root, sizeof root, "nomodel");
    sets s, t = {.n = 0};
    base_sets(&s, root, NULL);
    /* No [model] keys at all: model.hidden is a module parameter, unknown
     * without a module. */
    for (int i = 0; i < s.n; i++)
        if (strncmp(s.buf[i], "model.", 6)) put(&t, s.buf[i]);
    lt_status st = new_or_fit(&t, err, sizeof err);
    printf("\n  no model.name: status %d: %s", st, err);
    CU_ASSERT(st != LT_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "model.name"));
}

/* -1 is "no limit"; a value below it is refused rather than training nothing. */
static void test_bad_limits(void) {
    char root[512], err[2048] = "";
    new_dir(root, sizeof root, "limits");
    sets s;
    base_sets(&s, root, NULL);
    put(&s, "trainer.max_epochs=-5");
    lt_status st = new_or_fit(&s, err, sizeof err);
    printf("\n  max_epochs=-5: status %d: %s", st, err);
    CU_ASSERT(st == LT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "max_epochs = -5"));
    sets t;
    base_sets(&t, root, NULL);
    put(&t, "trainer.max_epochs=-1");
    put(&t, "trainer.max_steps=-1");
    err[0] = 0;
    st = new_or_fit(&t, err, sizeof err);
    printf("\n  max_epochs=-1 and max_steps=-1: status %d: %s", st, err);
    CU_ASSERT(st == LT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "never end"));
}

static void test_empty_data_dir(void) {
    char root[512], data[512], err[2048] = "";
    new_dir(root, sizeof root, "nodata");
    new_dir(data, sizeof data, "empty-data");
    sets s;
    base_sets(&s, root, NULL);
    putf(&s, "data.dir", data);
    /* Setup fails after the accelerator, the strategy and the module's init
     * made their state: lt_trainer_free must undo each (ASan builds report
     * what it leaves), and a second fit must not set up again over it. */
    lt_trainer *t = NULL;
    lt_status st = make_trainer(&s, &t, err, sizeof err);
    CU_ASSERT_EQUAL_FATAL(st, LT_OK);
    st = lt_trainer_fit(t);
    snprintf(err, sizeof err, "%s", lt_trainer_error(t));
    printf("\n  empty data.dir: status %d: %s", st, err);
    CU_ASSERT(st != LT_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "train-images-idx3-ubyte(.gz): not found"));
    st = lt_trainer_fit(t);
    printf("\n  fit again: status %d: %s", st, lt_trainer_error(t));
    CU_ASSERT_EQUAL(st, LT_ERR_STATE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_trainer_error(t), "make a new trainer"));
    lt_trainer_free(t);
}

/* environment.name = auto asks every environment plugin in the search path,
 * a third party's too (tpenv: lightning scored by LT_TP_ENV_SCORE): it wins
 * with a higher score than the built-ins' and is passed over at 0. The same
 * directory holds tpenvfuture, built for another ABI major: it cannot load,
 * so it is passed over rather than failing the choice. */
static void env_choice(const char *score, const char *want) {
    sets s;
    base_sets(&s, g_tmp, NULL);
    static const char *const dirs[] = {LT_TEST_PLUGIN_DIR, LT_TEST_BUILD_DIR "/test-plugins"};
    lt_trainer_args a = {.struct_size = sizeof a, .sets = s.ptr, .nsets = s.n,
                         .plugin_dirs = dirs, .nplugin_dirs = 2, .ignore_env = true};
    setenv("LT_TP_ENV_SCORE", score, 1);
    lt_trainer *t = NULL;
    char err[2048] = "";
    lt_status st = lt_trainer_new(&a, &t, err, sizeof err);
    unsetenv("LT_TP_ENV_SCORE");
    CU_ASSERT_EQUAL_FATAL(st, LT_OK);
    printf("\n  LT_TP_ENV_SCORE=%s: %s", score, lt_trainer_summary(t));
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_trainer_summary(t), want));
    lt_trainer_free(t);
}

static void test_environment_auto_scores_every_plugin(void) {
    env_choice("99", "environment tpenv");
    env_choice("0", "environment lightning");
}

/* A plugin directory the user named must exist: --plugin-dir (plugin_dirs)
 * and trainer.plugin_dir, each named with where it came from. */
static void test_missing_plugin_dir(void) {
    sets s;
    base_sets(&s, g_tmp, NULL);
    static const char *const dirs[] = {"/nonexistent-lt-plugins", LT_TEST_PLUGIN_DIR};
    lt_trainer_args a = {.struct_size = sizeof a, .sets = s.ptr, .nsets = s.n,
                         .plugin_dirs = dirs, .nplugin_dirs = 2, .ignore_env = true};
    lt_trainer *t = NULL;
    char err[2048] = "";
    lt_status st = lt_trainer_new(&a, &t, err, sizeof err);
    printf("\n  --plugin-dir /nonexistent-lt-plugins: status %d: %s", st, err);
    CU_ASSERT(st == LT_ERR_NOT_FOUND && t == NULL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--plugin-dir '/nonexistent-lt-plugins': No such file or directory"));
    CU_ASSERT_PTR_NULL(strchr(err, '\n'));
    lt_trainer_free(t);
    expect_new_fails("trainer.plugin_dir=/nonexistent-lt-plugins", "trainer.plugin_dir=/nonexistent-lt-plugins",
                     "trainer.plugin_dir = '/nonexistent-lt-plugins' (--set): No such file or directory");
    expect_new_fails("trainer.plugin_dir=/dev/null", "trainer.plugin_dir=/dev/null",
                     "trainer.plugin_dir = '/dev/null' (--set): not a directory");
}

/* A caller's struct that ends before ignore_env: the field is not read (it
 * is false), so LT_* variables apply; here one with a misspelt key. */
static void test_short_args_struct(void) {
    sets s;
    base_sets(&s, g_tmp, NULL);
    static const char *const dirs[] = {LT_TEST_PLUGIN_DIR};
    lt_trainer_args *a = calloc(1, sizeof *a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    *a = (lt_trainer_args){.struct_size = offsetof(lt_trainer_args, ignore_env), .sets = s.ptr,
                           .nsets = s.n, .plugin_dirs = dirs, .nplugin_dirs = 1};
    /* The bytes past struct_size belong to the caller: pretend they hold true. */
    memset((char *)a + offsetof(lt_trainer_args, ignore_env), 1,
           sizeof *a - offsetof(lt_trainer_args, ignore_env));
    setenv("LT_TRAINER__MAX_EPOCHZ", "3", 1);
    lt_trainer *t = NULL;
    char err[2048] = "";
    lt_status st = lt_trainer_new(a, &t, err, sizeof err);
    unsetenv("LT_TRAINER__MAX_EPOCHZ");
    printf("\n  struct_size up to ignore_env: status %d: %s", st, err);
    CU_ASSERT(st == LT_ERR_INVALID && t == NULL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "env LT_TRAINER__MAX_EPOCHZ"));
    lt_trainer_free(t);
    t = NULL;
    a->struct_size = offsetof(lt_trainer_args, nplugin_dirs);
    st = lt_trainer_new(a, &t, err, sizeof err);
    printf("\n  struct_size without nplugin_dirs: status %d: %s", st, err);
    CU_ASSERT(st == LT_ERR_INVALID && t == NULL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "struct_size"));
    free(a);
}

static void test_empty_paths(void) {
    sets s;
    base_sets(&s, g_tmp, NULL);
    lt_trainer *t = NULL;
    char err[2048] = "";
    lt_status st = make_trainer(&s, &t, err, sizeof err);
    CU_ASSERT_EQUAL_FATAL(st, LT_OK);
    st = lt_trainer_set_ckpt_path(t, "");
    printf("\n  lt_trainer_set_ckpt_path(\"\"): status %d: %s", st, lt_trainer_error(t));
    CU_ASSERT_EQUAL(st, LT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_trainer_error(t), "empty"));
    lt_trainer_free(t);
    expect_new_fails("trainer.default_root_dir=", "trainer.default_root_dir=",
                     "trainer.default_root_dir = '' (--set) must not be empty; use . for the current directory");
}

/* A value the workers would refuse is refused when the trainer is made
 * (what ltrun --check and the launcher run before starting workers). */
static void test_bad_values_refused_early(void) {
    expect_new_fails("checkpoint.mode=maxx", "checkpoint.mode=maxx",
                     "checkpoint.mode = 'maxx' (--set) is not allowed; use min or max");
    expect_new_fails("launcher.rdzv_timeout_s=99999999", "launcher.rdzv_timeout_s=99999999",
                     "launcher.rdzv_timeout_s = 99999999 (--set) must be in [1, 2000000]");
    expect_new_fails("trainer.seed=abc", "trainer.seed=abc", "trainer.seed = 'abc' (--set) is not an integer");
}

/* [model] holds the loaded module's parameters and nothing else: a misspelt
 * one used to be kept silently while the model trained with the default. */
static void test_bad_model_key(void) {
    expect_new_fails("model.hiden=3", "model.hiden=3",
                     "unknown key 'hiden' in [model] (--set); did you mean 'hidden'?");
    expect_new_fails("model.limit_train_batches=3", "model.limit_train_batches=3",
                     "unknown key 'limit_train_batches' in [model] (--set); did you mean "
                     "trainer.limit_train_batches?");
}

/* A count of batches past int64 (1e20) takes all of them, as Lightning's
 * int(1e20) does; it used to wrap to a negative count, "training has no
 * batches". */
static void test_huge_batch_limit(void) {
    char root[512];
    new_dir(root, sizeof root, "hugelimit");
    const char *const extra[] = {"trainer.limit_train_batches=1e20", "trainer.max_epochs=1",
                                 "trainer.max_steps=3", "trainer.limit_val_batches=1e300", NULL};
    result r = fit(root, extra, NULL);
    fit_ok(&r, "limit_train_batches=1e20");
    result_free(&r);
}

/* Lightning's types: an integer limit counts batches, a float in [0, 1] is a
 * fraction. 2 epochs at limit 1 are 2 steps; at 1.0 the step count of two
 * whole epochs. */
static void test_integer_batch_limit(void) {
    char r1[512], rf[512], ck[600], err[1024];
    new_dir(r1, sizeof r1, "limit-one");
    new_dir(rf, sizeof rf, "limit-frac");
    const char *const one[] = {"trainer.limit_train_batches=1", "trainer.max_epochs=2", NULL};
    const char *const half[] = {"trainer.limit_train_batches=0.01", "trainer.max_epochs=1", NULL};
    result a = fit(r1, one, NULL), b = fit(rf, half, NULL);
    if (fit_ok(&a, "limit_train_batches=1")) {
        ckpt_of(ck, sizeof ck, r1);
        lt_st_file *f = NULL;
        lt_status st = lt_st_open(ck, &f, err, sizeof err);
        CU_ASSERT_EQUAL_FATAL(st, LT_OK);
        expect_meta(f, "lt.global_step", "2");
        lt_st_close(f);
    }
    if (fit_ok(&b, "limit_train_batches=0.01")) { /* a fraction: more than one batch */
        ckpt_of(ck, sizeof ck, rf);
        lt_st_file *f = NULL;
        lt_status st = lt_st_open(ck, &f, err, sizeof err);
        CU_ASSERT_EQUAL_FATAL(st, LT_OK);
        const char *v = lt_st_meta(f, "lt.global_step");
        CU_ASSERT(v && atoi(v) > 1);
        lt_st_close(f);
    }
    result_free(&a);
    result_free(&b);
}

/* ---- main ------------------------------------------------------------------------------- */

static bool find_data(void) {
    const char *env = getenv("LT_FASHION_MNIST_DIR");
    snprintf(g_data, sizeof g_data, "%s", env && *env ? env : "/usr/share/datasets/fashion-mnist");
    char path[1200];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", g_data);
    return file_exists(path);
}

int main(void) {
    if (!find_data()) {
        printf("skipped: no Fashion-MNIST at %s (set LT_FASHION_MNIST_DIR)\n", g_data);
        return 77; /* ctest: skipped, not passed */
    }
    snprintf(g_tmp, sizeof g_tmp, "%s/lt_trainer_test.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_tmp)) { perror("mkdtemp"); return 1; }
    /* data.cache_dir's default ("auto") under g_tmp, not the user's cache */
    char xdg[300];
    snprintf(xdg, sizeof xdg, "%s/xdg-cache", g_tmp);
    setenv("XDG_CACHE_HOME", xdg, 1);
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("trainer", NULL, NULL);
    if (!s) return 1;
    CU_add_test(s, "a. same seed, same parameters; another seed differs", test_determinism);
    CU_add_test(s, "b. resume at an epoch boundary is bit-exact", test_resume_epoch);
    CU_add_test(s, "b. resume mid-epoch is bit-exact", test_resume_mid_epoch);
    CU_add_test(s, "b. resume with accumulate_grad_batches=2", test_resume_accumulate);
    CU_add_test(s, "b. resume with adamw + cosine", test_resume_adamw_cosine);
    CU_add_test(s, "c. truncated checkpoint", test_corrupt_checkpoint);
    CU_add_test(s, "c. checkpoint metadata: values and lt.model checked", test_checkpoint_metadata);
    CU_add_test(s, "d. metrics, metrics.csv, config.txt", test_metrics_and_logs);
    CU_add_test(s, "e. 64-true close to 32-true", test_precision64);
    CU_add_test(s, "f. unknown key suggests the right one", test_bad_key);
    CU_add_test(s, "f. no model.name", test_no_model);
    CU_add_test(s, "f. max_epochs/max_steps below -1 or both -1", test_bad_limits);
    CU_add_test(s, "f. empty data.dir names the file", test_empty_data_dir);
    CU_add_test(s, "f. unknown strategy", test_bad_strategy);
    CU_add_test(s, "f. a plugin directory that does not exist", test_missing_plugin_dir);
    CU_add_test(s, "f. args struct ending before ignore_env", test_short_args_struct);
    CU_add_test(s, "f. empty checkpoint path and default_root_dir", test_empty_paths);
    CU_add_test(s, "f. values the workers would refuse fail at lt_trainer_new", test_bad_values_refused_early);
    CU_add_test(s, "f. a [model] key the module does not declare", test_bad_model_key);
    CU_add_test(s, "limit_train_batches = 1e20 takes every batch", test_huge_batch_limit);
    CU_add_test(s, "limit_train_batches: an integer counts, a float is a fraction", test_integer_batch_limit);
    CU_add_test(s, "environment auto: every environment plugin is scored", test_environment_auto_scores_every_plugin);
    CU_add_test(s, "gradient clipping by value", test_clip_by_value);
    int rc = lt_cunit_run();
    nftw(g_tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
