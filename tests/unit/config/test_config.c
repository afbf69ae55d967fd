/* Config: precedence and origins, env and --set name mapping, validation
 * messages (suggestions, origins, types), INI errors, open sections, print. */
#define _GNU_SOURCE /* open_memstream, setenv */
#include <CUnit/Basic.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cunit_run.h"
#include "common/text.h"
#include "config/config.h"
#include "common/ctx.h"

static char tmpdir[] = "/tmp/lt_test_config.XXXXXX";
static char *written[64];
static int n_written;

/* Writes `text` to <tmpdir>/<name> and returns the path (freed at cleanup). */
static const char *write_ini(const char *name, const char *text) {
    char *path = NULL;
    if (n_written == 64 || asprintf(&path, "%s/%s", tmpdir, name) < 0) return NULL;
    FILE *f = fopen(path, "w");
    if (!f) {
        free(path);
        return NULL;
    }
    fputs(text, f);
    fclose(f);
    written[n_written++] = path;
    return path;
}

static int suite_init(void) { return mkdtemp(tmpdir) ? 0 : -1; }

static int suite_clean(void) {
    for (int i = 0; i < n_written; i++) {
        unlink(written[i]);
        free(written[i]);
    }
    return rmdir(tmpdir);
}

#define ASSERT_STR(actual, expected)                                                       \
    do {                                                                                   \
        const char *a_ = (actual), *e_ = (expected);                                       \
        if (!a_ || strcmp(a_, e_) != 0) {                                                  \
            fprintf(stderr, "\n  %s:%d: got '%s', want '%s'", __FILE__, __LINE__,          \
                    a_ ? a_ : "(null)", e_);                                               \
            CU_FAIL(#actual " == " #expected);                                             \
        }                                                                                  \
    } while (0)

#define ASSERT_CONTAINS(hay, needle)                                                       \
    do {                                                                                   \
        const char *h_ = (hay), *n_ = (needle);                                            \
        if (!h_ || !strstr(h_, n_)) {                                                      \
            fprintf(stderr, "\n  %s:%d: '%s' lacks '%s'", __FILE__, __LINE__,              \
                    h_ ? h_ : "(null)", n_);                                               \
            CU_FAIL(#hay " contains " #needle);                                            \
        }                                                                                  \
    } while (0)

/* Every message is one line. */
#define ASSERT_ONE_LINE(msg) CU_ASSERT_PTR_NULL(strchr((msg), '\n'))

static char err[1024];

/* A fresh config with `text` loaded from <tmpdir>/<name>. */
static lt_config *from_ini(const char *name, const char *text, const char **path) {
    lt_config *c = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    *path = write_ini(name, text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(*path);
    CU_ASSERT_EQUAL(lt_config_load_ini(c, *path, err, sizeof err), LT_OK);
    return c;
}

static void test_defaults(void) {
    lt_config *c = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    ASSERT_STR(lt_config_value(c, "trainer", "max_epochs"), "1000");
    ASSERT_STR(lt_config_origin(c, "trainer", "max_epochs"), "default");
    CU_ASSERT_EQUAL(lt_config_source_of(c, "trainer", "max_epochs"), LT_SRC_DEFAULT);
    ASSERT_STR(lt_config_value(c, "trainer", "precision"), "32-true");
    ASSERT_STR(lt_config_value(c, "trainer", "seed"), "");
    ASSERT_STR(lt_config_value(c, "data", "dir"), "/usr/share/datasets/fashion-mnist");
    ASSERT_STR(lt_config_value(c, "launcher", "master_addr"), "127.0.0.1");
    CU_ASSERT_PTR_NULL(lt_config_value(c, "trainer", "nonexistent"));
    CU_ASSERT_PTR_NULL(lt_config_origin(c, "trainer", "nonexistent"));
    CU_ASSERT_PTR_NOT_NULL(lt_config_help(c, "trainer", "devices"));

    int64_t i = 0;
    double d = 0;
    bool b = true;
    CU_ASSERT_EQUAL(lt_config_int(c, "trainer", "max_steps", &i, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(i, -1);
    CU_ASSERT_EQUAL(lt_config_float(c, "data", "normalize_std", &d, err, sizeof err), LT_OK);
    CU_ASSERT_DOUBLE_EQUAL(d, 0.3530, 1e-12);
    CU_ASSERT_EQUAL(lt_config_float(c, "optimizer", "eps", &d, err, sizeof err), LT_OK);
    CU_ASSERT_DOUBLE_EQUAL(d, 1e-8, 1e-20);
    CU_ASSERT_EQUAL(lt_config_bool(c, "trainer", "deterministic", &b, err, sizeof err), LT_OK);
    CU_ASSERT_FALSE(b);
    CU_ASSERT_EQUAL(lt_config_int(c, "trainer", "nope", &i, err, sizeof err), LT_ERR_NOT_FOUND);
    ASSERT_CONTAINS(err, "trainer.nope");
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_OK);
    lt_config_free(c);
}

static void test_precedence(void) {
    const char *path;
    lt_config *c = from_ini("prec.ini",
                            "[trainer]\n"
                            "max_epochs = 5\n"
                            "devices = 2\n"
                            "num_nodes = 4\n",
                            &path);
    char *env[] = {"LT_TRAINER__MAX_EPOCHS=7", "LT_TRAINER__DEVICES=3", NULL};
    CU_ASSERT_EQUAL(lt_config_load_env(c, env, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "trainer.max_epochs=9", NULL, err, sizeof err), LT_OK);

    char where[512];
    ASSERT_STR(lt_config_value(c, "trainer", "max_epochs"), "9");
    ASSERT_STR(lt_config_origin(c, "trainer", "max_epochs"), "--set trainer.max_epochs=9");
    CU_ASSERT_EQUAL(lt_config_source_of(c, "trainer", "max_epochs"), LT_SRC_FLAG);
    ASSERT_STR(lt_config_value(c, "trainer", "devices"), "3");
    ASSERT_STR(lt_config_origin(c, "trainer", "devices"), "env LT_TRAINER__DEVICES");
    CU_ASSERT_EQUAL(lt_config_source_of(c, "trainer", "devices"), LT_SRC_ENV);
    /* A key given twice in one file is refused (test_ini_syntax_errors). */
    ASSERT_STR(lt_config_value(c, "trainer", "num_nodes"), "4");
    snprintf(where, sizeof where, "%s:4", path);
    ASSERT_STR(lt_config_origin(c, "trainer", "num_nodes"), where);
    CU_ASSERT_EQUAL(lt_config_source_of(c, "trainer", "num_nodes"), LT_SRC_FILE);
    ASSERT_STR(lt_config_origin(c, "trainer", "strategy"), "default");

    /* Lower sources never replace higher ones, whatever the order of loading. */
    CU_ASSERT_EQUAL(lt_config_load_ini(c, path, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_config_load_env(c, env, err, sizeof err), LT_OK);
    ASSERT_STR(lt_config_value(c, "trainer", "max_epochs"), "9");
    ASSERT_STR(lt_config_value(c, "trainer", "devices"), "3");
    CU_ASSERT_EQUAL(lt_config_set(c, "trainer", "devices", "[0, 1]", LT_SRC_FLAG, "flag --devices",
                                  err, sizeof err), LT_OK);
    ASSERT_STR(lt_config_value(c, "trainer", "devices"), "[0, 1]");
    ASSERT_STR(lt_config_origin(c, "trainer", "devices"), "flag --devices");
    CU_ASSERT_EQUAL(lt_config_set(c, "trainer", "devices", "4", LT_SRC_ENV, NULL, err,
                                  sizeof err), LT_OK);
    ASSERT_STR(lt_config_value(c, "trainer", "devices"), "[0, 1]");
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_OK);
    lt_config_free(c);
}

static void visit_section(void *user, const char *section) {
    char *seen = user;
    strcat(seen, section);
    strcat(seen, ";");
}

static void test_env_mapping(void) {
    lt_config *c = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    char *env[] = {"PATH=/bin",
                   "LT_PLUGIN_PATH=/x",
                   "LT_RDZV_TOKEN=secret",
                   "LT_GLOBAL_SEED=3",
                   "XLT_TRAINER__MAX_EPOCHS=1",
                   "LT_STRATEGY__DDP__BUCKET_CAP_MB=25",
                   "LT_DATA__BATCH_SIZE= 32 ",
                   "LT_MODEL__HIDDEN=a=b",
                   NULL};
    CU_ASSERT_EQUAL(lt_config_load_env(c, env, err, sizeof err), LT_OK);
    ASSERT_STR(lt_config_value(c, "strategy.ddp", "bucket_cap_mb"), "25");
    ASSERT_STR(lt_config_origin(c, "strategy.ddp", "bucket_cap_mb"),
               "env LT_STRATEGY__DDP__BUCKET_CAP_MB");
    ASSERT_STR(lt_config_value(c, "data", "batch_size"), "32");
    ASSERT_STR(lt_config_value(c, "model", "hidden"), "a=b");
    ASSERT_STR(lt_config_origin(c, "trainer", "max_epochs"), "default");
    CU_ASSERT_PTR_NULL(lt_config_value(c, "plugin", "path"));
    CU_ASSERT_PTR_NULL(lt_config_value(c, "global", "seed"));

    char seen[256] = "";
    lt_config_each_section(c, visit_section, seen);
    ASSERT_STR(seen, "strategy.ddp;");
    /* Until a plugin declares [strategy.ddp], the section is unknown. */
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_ERR_INVALID);
    ASSERT_CONTAINS(err, "[strategy.ddp]");
    ASSERT_CONTAINS(err, "env LT_STRATEGY__DDP__BUCKET_CAP_MB");
    CU_ASSERT_EQUAL(lt_config_declare(c, "strategy.ddp", "bucket_cap_mb", LT_PARAM_INT, "25",
                                      "bucket size"), LT_OK);
    seen[0] = 0;
    lt_config_each_section(c, visit_section, seen);
    ASSERT_STR(seen, "");
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_OK);

    char *bad1[] = {"LT___MAX_EPOCHS=1", NULL};
    char *bad2[] = {"LT_TRAINER__=1", NULL};
    char *bad3[] = {"LT_STRATEGY____X=1", NULL};
    CU_ASSERT_EQUAL(lt_config_load_env(c, bad1, err, sizeof err), LT_ERR_INVALID);
    ASSERT_CONTAINS(err, "LT___MAX_EPOCHS");
    ASSERT_CONTAINS(err, "LT_<SECTION>__<KEY>");
    CU_ASSERT_EQUAL(lt_config_load_env(c, bad2, err, sizeof err), LT_ERR_INVALID);
    ASSERT_CONTAINS(err, "LT_TRAINER__");
    CU_ASSERT_EQUAL(lt_config_load_env(c, bad3, err, sizeof err), LT_ERR_INVALID);
    /* one underscore where two belong: a declared setting's name is refused
     * with the right one (strategy.ddp's too, declared above; in a run the
     * environment is read before plugins declare theirs); other LT_ names
     * with single underscores are not settings and pass */
    char *bad4[] = {"LT_TRAINER_MAX_EPOCHS=3", NULL};
    char *bad5[] = {"LT_data_batch_size=8", NULL};
    char *fine[] = {"LT_PLUGIN_PATH=/x", "LT_TRAINER_MAX_EPOCH=1", "LT_STRATEGY_DDP_BUCKET_CAP=1",
                    NULL};
    CU_ASSERT_EQUAL(lt_config_load_env(c, bad4, err, sizeof err), LT_ERR_INVALID);
    ASSERT_CONTAINS(err, "LT_TRAINER_MAX_EPOCHS is not read");
    ASSERT_CONTAINS(err, "rename it LT_TRAINER__MAX_EPOCHS (trainer.max_epochs)");
    CU_ASSERT_EQUAL(lt_config_load_env(c, bad5, err, sizeof err), LT_ERR_INVALID);
    ASSERT_CONTAINS(err, "rename it LT_DATA__BATCH_SIZE");
    CU_ASSERT_EQUAL(lt_config_load_env(c, fine, err, sizeof err), LT_OK);
    char *bad6[] = {"LT_STRATEGY_DDP_BUCKET_CAP_MB=5", NULL};
    CU_ASSERT_EQUAL(lt_config_load_env(c, bad6, err, sizeof err), LT_ERR_INVALID);
    ASSERT_CONTAINS(err, "rename it LT_STRATEGY__DDP__BUCKET_CAP_MB");
    lt_config_free(c);
}

static void test_process_environment(void) {
    lt_config *c = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(setenv("LT_TRAINER__MAX_STEPS", "77", 1), 0);
    CU_ASSERT_EQUAL(lt_config_load_env(c, NULL, err, sizeof err), LT_OK);
    unsetenv("LT_TRAINER__MAX_STEPS");
    ASSERT_STR(lt_config_value(c, "trainer", "max_steps"), "77");
    ASSERT_STR(lt_config_origin(c, "trainer", "max_steps"), "env LT_TRAINER__MAX_STEPS");
    lt_config_free(c);
}

static void test_dotted_sections_ini(void) {
    const char *path;
    lt_config *c = from_ini("dotted.ini",
                            "[strategy.ddp]\n"
                            "bucket_cap_mb = 50\n"
                            "[Strategy.DDP]\n"
                            "FIND_UNUSED = yes\n",
                            &path);
    ASSERT_STR(lt_config_value(c, "strategy.ddp", "bucket_cap_mb"), "50");
    ASSERT_STR(lt_config_value(c, "STRATEGY.ddp", "find_unused"), "yes");
    CU_ASSERT_EQUAL(lt_config_declare(c, "strategy.ddp", "bucket_cap_mb", LT_PARAM_INT, "25", ""),
                    LT_OK);
    CU_ASSERT_EQUAL(lt_config_declare(c, "strategy.ddp", "find_unused", LT_PARAM_BOOL, "no", ""),
                    LT_OK);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_OK);
    bool b = false;
    CU_ASSERT_EQUAL(lt_config_bool(c, "strategy.ddp", "find_unused", &b, err, sizeof err), LT_OK);
    CU_ASSERT_TRUE(b);
    lt_config_free(c);
}

static void test_set_arg(void) {
    lt_config *c = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "strategy.ddp.bucket_cap_mb = 50", NULL, err,
                                      sizeof err), LT_OK);
    ASSERT_STR(lt_config_value(c, "strategy.ddp", "bucket_cap_mb"), "50");
    ASSERT_STR(lt_config_origin(c, "strategy.ddp", "bucket_cap_mb"),
               "--set strategy.ddp.bucket_cap_mb = 50");
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "data.dir=/a=b", NULL, err, sizeof err), LT_OK);
    ASSERT_STR(lt_config_value(c, "data", "dir"), "/a=b");
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "trainer.devices=\"0,\"", "flag --devices", err,
                                      sizeof err), LT_OK);
    ASSERT_STR(lt_config_value(c, "trainer", "devices"), "0,");
    ASSERT_STR(lt_config_origin(c, "trainer", "devices"), "flag --devices");
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "trainer.seed=", NULL, err, sizeof err), LT_OK);
    ASSERT_STR(lt_config_value(c, "trainer", "seed"), "");

    const char *bad[] = {"max_epochs=3", "trainer.max_epochs", ".max_epochs=3", "trainer.=3",
                         "=3", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        CU_ASSERT_EQUAL(lt_config_set_arg(c, bad[i], NULL, err, sizeof err), LT_ERR_INVALID);
        ASSERT_CONTAINS(err, "expected section.key=value");
        ASSERT_CONTAINS(err, bad[i]);
    }
    lt_config_free(c);
}

static void test_unknown_key(void) {
    const char *path;
    lt_config *c = from_ini("typo.ini",
                            "; a comment\n"
                            "[trainer]\n"
                            "max_epochs = 3\n"
                            "max_epoch = 4\n",
                            &path);
    char want[512];
    snprintf(want, sizeof want,
             "unknown key 'max_epoch' in [trainer] (%s:4); did you mean 'max_epochs'?", path);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_ERR_INVALID);
    ASSERT_STR(err, want);
    lt_config_free(c);

    /* A key that lives in another section is pointed there. */
    c = lt_config_new();
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "trainer.lr=0.1", NULL, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_ERR_INVALID);
    ASSERT_CONTAINS(err, "unknown key 'lr' in [trainer] (--set trainer.lr=0.1)");
    ASSERT_CONTAINS(err, "did you mean optimizer.lr?");
    lt_config_free(c);

    /* Nothing close: list what there is. */
    c = lt_config_new();
    char *env[] = {"LT_LOGGER__ZZZZZZZZ=1", NULL};
    CU_ASSERT_EQUAL(lt_config_load_env(c, env, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_ERR_INVALID);
    ASSERT_CONTAINS(err, "unknown key 'zzzzzzzz' in [logger] (env LT_LOGGER__ZZZZZZZZ)");
    ASSERT_CONTAINS(err, "known keys: csv, name, version");
    ASSERT_ONE_LINE(err);
    lt_config_free(c);
}

static void test_unknown_section(void) {
    const char *path;
    lt_config *c = from_ini("section.ini", "[traner]\nmax_epochs = 3\n", &path);
    char want[512];
    snprintf(want, sizeof want, "unknown section [traner] (%s:2); did you mean [trainer]?", path);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_ERR_INVALID);
    ASSERT_STR(err, want);
    lt_config_free(c);

    c = lt_config_new();
    CU_ASSERT_EQUAL(lt_config_declare(c, "strategy.ddp", "bucket_cap_mb", LT_PARAM_INT, "25", ""),
                    LT_OK);
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "strategy.dpp.bucket_cap_mb=1", NULL, err, sizeof err),
                    LT_OK);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_ERR_INVALID);
    ASSERT_STR(err, "unknown section [strategy.dpp] (--set strategy.dpp.bucket_cap_mb=1); "
                    "did you mean [strategy.ddp]?");
    lt_config_free(c);

    c = lt_config_new();
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "qqqqqqqq.x=1", NULL, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_ERR_INVALID);
    ASSERT_CONTAINS(err, "unknown section [qqqqqqqq]");
    ASSERT_CONTAINS(err, "known sections: trainer, model, data");
    ASSERT_ONE_LINE(err);
    lt_config_free(c);
}

static void test_type_errors(void) {
    const char *path;
    lt_config *c = from_ini("types.ini",
                            "[trainer]\n"
                            "num_nodes = 2\n"
                            "max_epochs = ten\n"
                            "[optimizer]\n"
                            "lr = abc\n",
                            &path);
    char want[512];
    snprintf(want, sizeof want, "trainer.max_epochs = 'ten' (%s:3) is not an integer", path);
    /* The first problem in file order is reported. */
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_ERR_INVALID);
    ASSERT_STR(err, want);
    int64_t i;
    CU_ASSERT_EQUAL(lt_config_int(c, "trainer", "max_epochs", &i, err, sizeof err),
                    LT_ERR_INVALID);
    ASSERT_STR(err, want);
    double d;
    CU_ASSERT_EQUAL(lt_config_float(c, "optimizer", "lr", &d, err, sizeof err), LT_ERR_INVALID);
    ASSERT_CONTAINS(err, "optimizer.lr = 'abc'");
    ASSERT_CONTAINS(err, "is not a finite number");
    lt_config_free(c);

    struct {
        const char *section, *key, *value, *message;
    } bad[] = {
        {"trainer", "max_epochs", "3.0", "is not an integer"},
        {"trainer", "max_epochs", "3x", "is not an integer"},
        {"trainer", "max_epochs", "", "is not an integer"},
        {"trainer", "max_epochs", "99999999999999999999", "out of range"},
        {"optimizer", "lr", "1e-3x", "is not a finite number"},
        {"optimizer", "lr", "nan", "is not a finite number"},
        {"optimizer", "lr", "1e999", "is not a finite number"},
        {"trainer", "deterministic", "maybe", "is not a boolean; use true/false"},
        {"trainer", "deterministic", "2", "is not a boolean"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        c = lt_config_new();
        CU_ASSERT_EQUAL(lt_config_set(c, bad[k].section, bad[k].key, bad[k].value, LT_SRC_FLAG,
                                      "flag --x", err, sizeof err), LT_OK);
        CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_ERR_INVALID);
        ASSERT_CONTAINS(err, bad[k].message);
        ASSERT_CONTAINS(err, "(flag --x)");
        lt_config_free(c);
    }

    c = lt_config_new();
    const char *yes[] = {"true", "TRUE", "1", "yes", "Yes", "on", "ON"};
    const char *no[] = {"false", "False", "0", "no", "NO", "off", "Off"};
    for (size_t k = 0; k < 7; k++) {
        bool b = false;
        lt_config_set(c, "trainer", "deterministic", yes[k], LT_SRC_FLAG, NULL, err, sizeof err);
        CU_ASSERT_EQUAL(lt_config_bool(c, "trainer", "deterministic", &b, err, sizeof err), LT_OK);
        CU_ASSERT_TRUE(b);
        lt_config_set(c, "trainer", "deterministic", no[k], LT_SRC_FLAG, NULL, err, sizeof err);
        CU_ASSERT_EQUAL(lt_config_bool(c, "trainer", "deterministic", &b, err, sizeof err), LT_OK);
        CU_ASSERT_FALSE(b);
    }
    lt_config_set(c, "optimizer", "lr", "  2.5e-3 ", LT_SRC_FLAG, NULL, err, sizeof err);
    double lr = 0;
    CU_ASSERT_EQUAL(lt_config_float(c, "optimizer", "lr", &lr, err, sizeof err), LT_OK);
    CU_ASSERT_DOUBLE_EQUAL(lr, 2.5e-3, 1e-15);
    lt_config_set(c, "trainer", "max_steps", "+12", LT_SRC_FLAG, NULL, err, sizeof err);
    int64_t steps = 0;
    CU_ASSERT_EQUAL(lt_config_int(c, "trainer", "max_steps", &steps, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(steps, 12);
    /* A string key takes anything. */
    lt_config_set(c, "trainer", "limit_train_batches", "0.25", LT_SRC_FLAG, NULL, err, sizeof err);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_OK);
    lt_config_free(c);
}

/* An INI file setting `key` at line `first` and again at `line`: refused
 * with both places, in a config of its own. */
static void expect_set_twice(const char *name, const char *text, int line, const char *key,
                             int first) {
    lt_config *c = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    char want[1400];
    const char *path = write_ini(name, text);
    CU_ASSERT_EQUAL(lt_config_load_ini(c, path, err, sizeof err), LT_ERR_INVALID);
    snprintf(want, sizeof want, "%s:%d: %s is set twice in the file (first at %s:%d); keep one",
             path, line, key, path, first);
    ASSERT_STR(err, want);
    lt_config_free(c);
}

static void test_ini_syntax_errors(void) {
    lt_config *c = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    char want[512];

    const char *path = write_ini("syntax1.ini", "[trainer]\nmax_epochs = 3\n[bad\nx = 1\n");
    CU_ASSERT_EQUAL(lt_config_load_ini(c, path, err, sizeof err), LT_ERR_INVALID);
    snprintf(want, sizeof want, "%s:3: cannot parse '[bad': missing ']' in section header", path);
    ASSERT_STR(err, want);

    path = write_ini("syntax2.ini", "[trainer]\n\n  just words\n");
    CU_ASSERT_EQUAL(lt_config_load_ini(c, path, err, sizeof err), LT_ERR_INVALID);
    snprintf(want, sizeof want, "%s:3: cannot parse 'just words': expected [section] or "
             "key = value", path);
    ASSERT_STR(err, want);

    path = write_ini("syntax3.ini", "# no section yet\nmax_epochs = 3\n");
    CU_ASSERT_EQUAL(lt_config_load_ini(c, path, err, sizeof err), LT_ERR_INVALID);
    snprintf(want, sizeof want, "%s:2: 'max_epochs' comes before any [section] header; put it "
             "under [trainer]", path);
    ASSERT_STR(err, want);

    /* "[]" is a header with an empty name, not a missing one (it used to be
     * reported as "comes before any [section] header", and passed unseen
     * with no key under it) */
    path = write_ini("syntax5.ini", "[]\nmax_epochs = 3\n");
    CU_ASSERT_EQUAL(lt_config_load_ini(c, path, err, sizeof err), LT_ERR_INVALID);
    snprintf(want, sizeof want, "%s:1: empty section name in '[]'; write the section's name "
             "between the brackets, e.g. [trainer]", path);
    ASSERT_STR(err, want);
    path = write_ini("syntax6.ini", "[trainer]\nmax_epochs = 3\n  [ ] ; nothing under it\n");
    CU_ASSERT_EQUAL(lt_config_load_ini(c, path, err, sizeof err), LT_ERR_INVALID);
    snprintf(want, sizeof want, "%s:3: empty section name in '[ ] ; nothing under it'; write the "
             "section's name between the brackets, e.g. [trainer]", path);
    ASSERT_STR(err, want);

    /* a key given twice, in one section or in a repeated one: the last used
     * to win silently */
    expect_set_twice("dup1.ini", "[trainer]\nmax_epochs = 3\nmax_steps = 5\nmax_epochs = 4\n", 4,
                     "trainer.max_epochs", 2);
    expect_set_twice("dup2.ini",
                     "[data]\nbatch_size = 8\n[trainer]\nmax_steps = 5\n[data]\nbatch_size = 9\n", 6,
                     "data.batch_size", 2);

    path = write_ini("syntax4.ini", "[trainer]\n= 3\n");
    CU_ASSERT_EQUAL(lt_config_load_ini(c, path, err, sizeof err), LT_ERR_INVALID);
    snprintf(want, sizeof want, "%s:2", path);
    ASSERT_CONTAINS(err, want);
    ASSERT_ONE_LINE(err);
    lt_config_free(c);
}

static void test_missing_file(void) {
    lt_config *c = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    char path[512];
    snprintf(path, sizeof path, "%s/does-not-exist.ini", tmpdir);
    CU_ASSERT_EQUAL(lt_config_load_ini(c, path, err, sizeof err), LT_ERR_NOT_FOUND);
    ASSERT_CONTAINS(err, path);
    ASSERT_CONTAINS(err, strerror(ENOENT));
    /* a directory is refused; so is a FIFO nothing writes to, after 10 s
     * (it used to block for ever); a pipe with its writer is read */
    CU_ASSERT_EQUAL(lt_config_load_ini(c, tmpdir, err, sizeof err), LT_ERR_INVALID);
    ASSERT_CONTAINS(err, tmpdir);
    ASSERT_CONTAINS(err, "is a directory; name an INI file");
    snprintf(path, sizeof path, "%s/fifo.ini", tmpdir);
    CU_ASSERT_EQUAL_FATAL(mkfifo(path, 0644), 0);
    CU_ASSERT_EQUAL(lt_config_load_ini(c, path, err, sizeof err), LT_ERR_INVALID);
    ASSERT_CONTAINS(err, "is a FIFO nothing wrote to within 10 s; name an INI file");
    unlink(path);
    int pipefd[2];
    CU_ASSERT_EQUAL_FATAL(pipe(pipefd), 0);
    const char text[] = "[trainer]\nmax_epochs = 6\n";
    CU_ASSERT_EQUAL((size_t)write(pipefd[1], text, sizeof text - 1), sizeof text - 1);
    close(pipefd[1]);
    snprintf(path, sizeof path, "/dev/fd/%d", pipefd[0]);
    CU_ASSERT_EQUAL(lt_config_load_ini(c, path, err, sizeof err), LT_OK);
    ASSERT_STR(lt_config_value(c, "trainer", "max_epochs"), "6");
    close(pipefd[0]);
    lt_config_free(c);
}

static void visit_key(void *user, const char *key, const char *value, const char *origin) {
    (void)origin;
    char *seen = user;
    strcat(seen, key);
    strcat(seen, "=");
    strcat(seen, value);
    strcat(seen, ";");
}

static void test_open_section(void) {
    const char *path;
    lt_config *c = from_ini("open.ini",
                            "[model]\n"
                            "name = mlp\n"
                            "hidden = 128\n"
                            "dropout = 0.1\n",
                            &path);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_OK);
    ASSERT_STR(lt_config_value(c, "model", "hidden"), "128");
    char seen[256] = "";
    lt_config_each(c, "model", visit_key, seen);
    ASSERT_STR(seen, "name=mlp;hidden=128;dropout=0.1;");

    lt_status open_st = lt_config_declare_section(c, "hooks", true);
    CU_ASSERT_EQUAL(open_st, LT_OK);
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "hooks.init_dist_connection=./libmine.so:my_init", NULL,
                                      err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_OK);
    /* Declared keys in an open section are still type-checked, and it stays
     * open ([model] does not: test_model_section). */
    CU_ASSERT_EQUAL(lt_config_declare(c, "hooks", "timeout", LT_PARAM_INT, "5", "s"), LT_OK);
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "hooks.timeout=many", NULL, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_ERR_INVALID);
    ASSERT_CONTAINS(err, "hooks.timeout = 'many' (--set hooks.timeout=many) is not an integer");
    /* A closed section refuses the same thing. */
    lt_status closed_st = lt_config_declare_section(c, "closed", false);
    CU_ASSERT_EQUAL(closed_st, LT_OK);
    lt_config_set_arg(c, "hooks.timeout=3", NULL, err, sizeof err);
    lt_config_set_arg(c, "closed.anything=1", NULL, err, sizeof err);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_ERR_INVALID);
    ASSERT_CONTAINS(err, "unknown key 'anything' in [closed]");
    lt_config_free(c);
}

/* A config with the MLP's parameter table declared in [model], as the trainer
 * declares the table of the module it loaded. */
static lt_config *with_mlp_params(lt_config *c) {
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(lt_config_declare(c, "model", "hidden", LT_PARAM_INT, "512", "width"), LT_OK);
    CU_ASSERT_EQUAL(lt_config_declare(c, "model", "layers", LT_PARAM_INT, "2", "depth"), LT_OK);
    CU_ASSERT_EQUAL(lt_config_declare(c, "model", "dropout", LT_PARAM_FLOAT, "0", "p"), LT_OK);
    return c;
}

/* [model] takes any key until the module's parameters are declared in it;
 * then a misspelt one is refused like one in [trainer], from every source. */
static void test_model_section(void) {
    const char *path;
    lt_config *c = from_ini("model.ini", "[model]\nname = mlp\nhiden = 32\n", &path);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_OK); /* no table (yet) */
    with_mlp_params(c);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_ERR_INVALID);
    char want[512];
    snprintf(want, sizeof want, "unknown key 'hiden' in [model] (%s:3); did you mean 'hidden'?",
             path);
    ASSERT_STR(err, want);
    lt_config_free(c);

    c = with_mlp_params(lt_config_new());
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "model.hiden=3", NULL, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_ERR_INVALID);
    ASSERT_STR(err, "unknown key 'hiden' in [model] (--set model.hiden=3); did you mean 'hidden'?");
    lt_config_free(c);

    c = with_mlp_params(lt_config_new());
    char *env[] = {"LT_MODEL__HIDEN=3", NULL};
    CU_ASSERT_EQUAL(lt_config_load_env(c, env, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_ERR_INVALID);
    ASSERT_STR(err, "unknown key 'hiden' in [model] (env LT_MODEL__HIDEN); did you mean 'hidden'?");
    lt_config_free(c);

    /* Nothing near: the module's keys are listed; a core key of another
     * section is pointed to; the declared ones pass. */
    c = with_mlp_params(lt_config_new());
    lt_config_set_arg(c, "model.colour=red", NULL, err, sizeof err);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_ERR_INVALID);
    ASSERT_CONTAINS(err, "unknown key 'colour' in [model] (--set model.colour=red); known keys: "
                         "name, hidden, layers, dropout");
    ASSERT_ONE_LINE(err);
    lt_config_free(c);
    c = with_mlp_params(lt_config_new());
    lt_config_set_arg(c, "model.max_epochs=3", NULL, err, sizeof err);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_ERR_INVALID);
    ASSERT_CONTAINS(err, "did you mean trainer.max_epochs?");
    lt_config_free(c);
    c = with_mlp_params(lt_config_new());
    lt_config_set_arg(c, "model.hidden=32", NULL, err, sizeof err);
    lt_config_set_arg(c, "model.dropout=0.5", NULL, err, sizeof err);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_OK);
    lt_config_free(c);
}

static void test_values_case_quotes_comments(void) {
    const char *path;
    char *long_value = malloc(5001);
    CU_ASSERT_PTR_NOT_NULL_FATAL(long_value);
    memset(long_value, 'x', 5000);
    long_value[5000] = 0;
    char *text = NULL;
    CU_ASSERT_FATAL(asprintf(&text,
                             "[ Trainer ]\r\n"
                             "  Max_Epochs =  \"12\"  \r\n"
                             "default_root_dir = /tmp/a b  ; inline comment\n"
                             "log_level = debug # another\n"
                             "plugin_dir = %s\n"
                             "[logger]\n"
                             "version = \"\"\n",
                             long_value) > 0);
    lt_config *c = from_ini("case.ini", text, &path);
    ASSERT_STR(lt_config_value(c, "TRAINER", "MAX_EPOCHS"), "12");
    ASSERT_STR(lt_config_value(c, "trainer", "default_root_dir"), "/tmp/a b");
    ASSERT_STR(lt_config_value(c, "trainer", "log_level"), "debug");
    ASSERT_STR(lt_config_value(c, "trainer", "plugin_dir"), long_value);
    ASSERT_STR(lt_config_value(c, "logger", "version"), "");
    char where[512];
    snprintf(where, sizeof where, "%s:5", path);
    ASSERT_STR(lt_config_origin(c, "trainer", "plugin_dir"), where);
    snprintf(where, sizeof where, "%s:7", path);
    ASSERT_STR(lt_config_origin(c, "logger", "version"), where);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_OK);
    lt_config_free(c);
    free(text);
    free(long_value);
}

static void test_print(void) {
    lt_config *c = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    lt_config_set_arg(c, "trainer.max_epochs=9", NULL, err, sizeof err);
    lt_config_set_arg(c, "model.hidden=128", NULL, err, sizeof err);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    lt_config_print(c, f);
    fclose(f);
    ASSERT_CONTAINS(buf, "trainer.max_epochs = 9  (--set trainer.max_epochs=9)\n");
    ASSERT_CONTAINS(buf, "data.batch_size = 64  (default)\n");
    ASSERT_CONTAINS(buf, "model.hidden = 128  (--set model.hidden=128)\n");
    ASSERT_CONTAINS(buf, "trainer.seed =   (default)\n");

    /* Sorted by section, then key; every line has the same shape. */
    char prev_s[128] = "", prev_k[128] = "";
    int lines = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        char s[128] = "", k[128] = "";
        const char *dot = strchr(line, '.'), *eq = strstr(line, " = ");
        CU_ASSERT_FATAL(dot && eq && dot < eq && strstr(line, "  ("));
        CU_ASSERT_EQUAL(line[strlen(line) - 1], ')');
        snprintf(s, sizeof s, "%.*s", (int)(dot - line), line);
        snprintf(k, sizeof k, "%.*s", (int)(eq - dot - 1), dot + 1);
        int order = strcmp(prev_s, s);
        CU_ASSERT_TRUE(order < 0 || (order == 0 && strcmp(prev_k, k) < 0));
        strcpy(prev_s, s);
        strcpy(prev_k, k);
    }
    CU_ASSERT_TRUE(lines > 60);
    free(buf);
    lt_config_free(c);
}

static void test_declare(void) {
    lt_config *c = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(lt_config_declare(c, "strategy.ddp", "bucket_cap_mb", LT_PARAM_INT, "25",
                                      "MiB per bucket"), LT_OK);
    CU_ASSERT_EQUAL(lt_config_declare(c, "strategy.ddp", "bucket_cap_mb", LT_PARAM_INT, "50",
                                      "MiB per bucket"), LT_OK);
    ASSERT_STR(lt_config_value(c, "strategy.ddp", "bucket_cap_mb"), "50");
    ASSERT_STR(lt_config_help(c, "strategy.ddp", "bucket_cap_mb"), "MiB per bucket");
    CU_ASSERT_EQUAL(lt_config_declare(c, "strategy.ddp", "bucket_cap_mb", LT_PARAM_FLOAT, "1",
                                      NULL), LT_ERR_INVALID);
    CU_ASSERT_EQUAL(lt_config_declare(c, "", "x", LT_PARAM_INT, "1", NULL), LT_ERR_INVALID);
    CU_ASSERT_EQUAL(lt_config_declare(c, "s", "", LT_PARAM_INT, "1", NULL), LT_ERR_INVALID);
    CU_ASSERT_EQUAL(lt_config_declare(c, "s", "k", (lt_param_type)99, "1", NULL), LT_ERR_INVALID);
    CU_ASSERT_EQUAL(lt_config_declare(c, "s", "nodefault", LT_PARAM_STRING, NULL, NULL), LT_OK);
    CU_ASSERT_PTR_NULL(lt_config_value(c, "s", "nodefault"));
    ASSERT_STR(lt_config_origin(c, "s", "nodefault"), "default");
    /* A value set before the declaration keeps its place and is checked after. */
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "backend.gloo.timeout=x", NULL, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_config_declare(c, "backend.gloo", "timeout", LT_PARAM_INT, "30", NULL),
                    LT_OK);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_ERR_INVALID);
    ASSERT_CONTAINS(err, "backend.gloo.timeout = 'x'");
    CU_ASSERT_EQUAL(lt_config_set(c, "", "k", "v", LT_SRC_FLAG, "flag --k", err, sizeof err),
                    LT_ERR_INVALID);
    ASSERT_CONTAINS(err, "flag --k");
    lt_config_free(c);
}

/* `assignment` (given as "flag --x") fails validation, in one line holding
 * `message`. */
static void expect_refused(const char *assignment, const char *message) {
    lt_config *c = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(lt_config_set_arg(c, assignment, "flag --x", err, sizeof err), LT_OK);
    err[0] = 0;
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_ERR_INVALID);
    ASSERT_CONTAINS(err, message);
    ASSERT_ONE_LINE(err);
    lt_config_free(c);
}

/* Each of `n` assignments, set one after another on one config, validates. */
static void expect_accepted(const char *const *good, size_t n) {
    lt_config *c = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    for (size_t k = 0; k < n; k++) {
        CU_ASSERT_EQUAL(lt_config_set_arg(c, good[k], NULL, err, sizeof err), LT_OK);
        err[0] = 0;
        CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_OK);
        if (err[0]) fprintf(stderr, "\n  %s refused: %s", good[k], err);
    }
    lt_config_free(c);
}

/* Core keys with fixed choices or a range refuse other values in validate
 * (so ltrun --check does), in one line naming key, value, origin and what is
 * allowed. */
static void test_rules(void) {
    struct {
        const char *assignment, *message;
    } bad[] = {
        {"checkpoint.mode=maxx", "checkpoint.mode = 'maxx' (flag --x) is not allowed; use min or max"},
        {"trainer.gradient_clip_algorithm=foo",
         "trainer.gradient_clip_algorithm = 'foo' (flag --x) is not allowed; use norm or value"},
        {"trainer.log_level=verbose",
         "trainer.log_level = 'verbose' (flag --x) is not allowed; use error, warn, warning, info or debug"},
        {"scheduler.name=linear", "use none, step or cosine"},
        {"scheduler.interval=batch", "use epoch or step"},
        {"optimizer.name=adam", "optimizer.name = 'adam' (flag --x) is not allowed; use sgd or adamw"},
        {"optimizer.lr_scaling=cubic", "use none, linear or sqrt"},
        {"trainer.num_nodes=0", "trainer.num_nodes = 0 (flag --x) must be in [1, 2147483647]"},
        {"trainer.num_nodes=2147483648", "must be in [1, 2147483647]"},
        {"launcher.master_port=70000", "launcher.master_port = 70000 (flag --x) must be in [0, 65535]"},
        {"launcher.master_port=-1", "must be in [0, 65535]"},
        {"launcher.max_restarts=-3", "launcher.max_restarts = -3 (flag --x) must be in [0, "},
        {"launcher.rdzv_timeout_s=99999999",
         "launcher.rdzv_timeout_s = 99999999 (flag --x) must be in [1, 2000000]"},
        {"launcher.rdzv_timeout_s=0", "must be in [1, 2000000]"},
        {"launcher.node_rank=-1", "launcher.node_rank = -1 (flag --x) must be in [0, "},
        {"strategy.timeout_s=0", "strategy.timeout_s = 0 (flag --x) must be in [1, 2000000]"},
        {"trainer.accumulate_grad_batches=0", "trainer.accumulate_grad_batches = 0 (flag --x) must be in [1, "},
        {"trainer.max_epochs=-2", "trainer.max_epochs = -2 (flag --x) must be >= -1; -1 = no limit"},
        {"trainer.max_steps=-5", "must be >= -1"},
        {"trainer.log_every_n_steps=0", "must be >= 1"},
        {"trainer.gradient_clip_val=-1", "must be >= 0; 0 = off"},
        {"trainer.seed=abc", "trainer.seed = 'abc' (flag --x) is not an integer; empty = a random seed"},
        {"trainer.seed=1.5", "is not an integer"},
        {"trainer.seed=-1", "trainer.seed = -1 (flag --x) must be >= 0"},
        {"trainer.limit_train_batches=all",
         "trainer.limit_train_batches = 'all' (flag --x) is not a finite number"},
        {"trainer.limit_val_batches=-1", "trainer.limit_val_batches = -1 (flag --x) must be >= 0"},
        {"trainer.default_root_dir=", "trainer.default_root_dir = '' (flag --x) must not be empty; use ."},
        {"data.batch_size=0", "data.batch_size = 0 (flag --x) must be >= 1"},
        {"data.prefetch=65", "must be in [2, 64]"},
        {"data.normalize_std=0", "data.normalize_std = 0 (flag --x) must be > 0"},
        {"optimizer.beta2=1", "optimizer.beta2 = 1 (flag --x) must be in [0, 1)"},
        {"optimizer.lr=-0.1", "optimizer.lr = -0.1 (flag --x) must be >= 0"},
        {"checkpoint.save_top_k=3", "must be in [0, 1]; lt keeps the single best checkpoint"},
        {"scheduler.gamma=0", "scheduler.gamma = 0 (flag --x) must be > 0"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        expect_refused(bad[k].assignment, bad[k].message);

    const char *good[] = {
        "checkpoint.mode=MAX", "checkpoint.mode=min", "trainer.log_level=Warning",
        "trainer.log_level=debug", "trainer.num_nodes=1", "launcher.master_port=0",
        "launcher.master_port=65535", "launcher.max_restarts=0", "launcher.rdzv_timeout_s=2000000",
        "trainer.seed=", "trainer.seed=0", "trainer.seed=42", "trainer.limit_train_batches=0.25",
        "trainer.limit_val_batches=0", "trainer.limit_test_batches=300", "trainer.max_epochs=-1",
        "optimizer.beta1=0", "scheduler.name=cosine", "scheduler.interval=STEP",
        "optimizer.lr_scaling=sqrt", "trainer.default_root_dir=.",
    };
    expect_accepted(good, sizeof good / sizeof good[0]);
}

/* limit_*_batches as Lightning reads them: a fraction in [0, 1] or a whole
 * count; a count past int64 (1e20) is a count like any other (all batches,
 * lt_limit_batches), a non-whole one above 1 or a non-finite one is refused. */
static void test_limit_batches(void) {
    struct {
        const char *assignment, *message;
    } bad[] = {
        {"trainer.limit_train_batches=2.5",
         "trainer.limit_train_batches = 2.5 (flag --x) is above 1 and not a whole number; "
         "use a fraction in [0, 1] or a whole number of batches"},
        {"trainer.limit_val_batches=1e20.5", "'1e20.5' (flag --x) is not a finite number"},
        {"trainer.limit_test_batches=nan", "'nan' (flag --x) is not a finite number"},
        {"trainer.limit_train_batches=inf", "'inf' (flag --x) is not a finite number"},
        {"trainer.limit_train_batches=1e400", "'1e400' (flag --x) is not a finite number"},
        {"trainer.limit_train_batches=-1e20", "= -1e20 (flag --x) must be >= 0"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        expect_refused(bad[k].assignment, bad[k].message);
    const char *good[] = {"trainer.limit_train_batches=1e20", "trainer.limit_val_batches=1e300",
                          "trainer.limit_test_batches=5.0", "trainer.limit_train_batches=1",
                          "trainer.limit_train_batches=99999999999999999999999"};
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) expect_accepted(&good[k], 1);
}

/* Every core key's default passes its own rule when set explicitly. */
static void test_defaults_obey_rules(void) {
    lt_config *c = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    lt_config_print(c, f);
    fclose(f);
    int n = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"), n++) {
        char *eq = strstr(line, " = "), *paren = strstr(line, "  (default)");
        CU_ASSERT_FATAL(eq && paren);
        *eq = 0;
        *paren = 0;
        char assignment[512];
        snprintf(assignment, sizeof assignment, "%s=%s", line, eq + 3);
        CU_ASSERT_EQUAL(lt_config_set_arg(c, assignment, NULL, err, sizeof err), LT_OK);
    }
    CU_ASSERT_TRUE(n > 60);
    err[0] = 0;
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_OK);
    if (err[0]) fprintf(stderr, "\n  a default breaks its rule: %s", err);
    free(buf);
    lt_config_free(c);
}

/* Keys nothing read are gone (unknown key, like any typo); trainer.deterministic
 * stays, documented as accepted because lt is always deterministic. */
static void test_removed_keys(void) {
    const char *gone[] = {"trainer.val_check_interval=0.5",
                          "data.num_workers=4", "checkpoint.every_n_epochs=2",
                          "checkpoint.filename=best"};
    for (size_t k = 0; k < sizeof gone / sizeof gone[0]; k++) {
        lt_config *c = lt_config_new();
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        CU_ASSERT_EQUAL(lt_config_set_arg(c, gone[k], NULL, err, sizeof err), LT_OK);
        CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_ERR_INVALID);
        char want[128];
        snprintf(want, sizeof want, "unknown key '%.*s'", (int)strcspn(strchr(gone[k], '.') + 1, "="),
                 strchr(gone[k], '.') + 1);
        ASSERT_CONTAINS(err, want);
        ASSERT_ONE_LINE(err);
        lt_config_free(c);
    }
    lt_config *c = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    ASSERT_CONTAINS(lt_config_help(c, "trainer", "deterministic"), "always deterministic");
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "trainer.deterministic=true", NULL, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_OK);
    lt_config_free(c);
}

/* Plugin parameters read with lt_param_* mean what validation accepted. */
static void test_param_readers(void) {
    lt_config *c = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(lt_config_declare(c, "strategy.ddp", "buckets", LT_PARAM_INT, "3", ""), LT_OK);
    CU_ASSERT_EQUAL(lt_config_declare(c, "strategy.ddp", "cap", LT_PARAM_FLOAT, "1", ""), LT_OK);
    CU_ASSERT_EQUAL(lt_config_declare(c, "strategy.ddp", "overlap", LT_PARAM_BOOL, "no", ""), LT_OK);
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "strategy.ddp.buckets=010", NULL, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "strategy.ddp.cap=2.5", NULL, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "strategy.ddp.overlap=On", NULL, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_config_validate(c, err, sizeof err), LT_OK);
    int64_t checked = 0;
    CU_ASSERT_EQUAL(lt_config_int(c, "strategy.ddp", "buckets", &checked, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(checked, 10);
    lt_ctx ctx;
    lt_ctx_init(&ctx, LT_KIND_STRATEGY, "ddp", NULL, c);
    CU_ASSERT_EQUAL(lt_param_int(&ctx, "buckets", -1), 10); /* not octal 8 */
    CU_ASSERT_DOUBLE_EQUAL(lt_param_float(&ctx, "cap", -1), 2.5, 0);
    CU_ASSERT_TRUE(lt_param_bool(&ctx, "overlap", false));
    CU_ASSERT_EQUAL(lt_param_int(&ctx, "missing", 7), 7);
    /* [model] is open: an undeclared value validation never saw. Hex and
     * trailing junk are not integers to the config, so the default wins. */
    lt_ctx mod;
    lt_ctx_init(&mod, LT_KIND_MODULE, "mlp", NULL, c);
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "model.width=0x10", NULL, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_param_int(&mod, "width", 5), 5);
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "model.depth=012", NULL, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_param_int(&mod, "depth", 5), 12);
    ASSERT_STR(lt_param_str(&mod, "width", "none"), "0x10");
    ASSERT_STR(lt_param_str(&mod, "nothing", "none"), "none");
    lt_config_free(c);
}

/* [<kind>] belongs to the plugin in use: one a section names while another
 * runs reads its own section alone (section_only), defaults included. */
static void test_param_section_only(void) {
    lt_config *c = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(lt_config_declare(c, "backend", "realtime", LT_PARAM_STRING, "auto", ""), LT_OK);
    CU_ASSERT_EQUAL(lt_config_declare(c, "backend.gloo", "realtime", LT_PARAM_STRING, "auto", ""),
                    LT_OK);
    CU_ASSERT_EQUAL(lt_config_declare(c, "backend.gloo", "num_threads", LT_PARAM_INT, "1", ""),
                    LT_OK);
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "backend.realtime=maybe", NULL, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_config_set_arg(c, "backend.gloo.num_threads=3", NULL, err, sizeof err),
                    LT_OK);
    lt_ctx in_use, named;
    lt_ctx_init(&in_use, LT_KIND_BACKEND, "gloo", NULL, c);
    lt_ctx_init(&named, LT_KIND_BACKEND, "gloo", NULL, c);
    named.section_only = true;
    ASSERT_STR(lt_param_str(&in_use, "realtime", "x"), "maybe"); /* [backend] set: it wins */
    ASSERT_STR(lt_param_str(&named, "realtime", "x"), "auto");   /* its own section's default */
    CU_ASSERT_EQUAL(lt_param_int(&named, "num_threads", -1), 3);
    CU_ASSERT_EQUAL(lt_param_int(&named, "absent", -1), -1);
    lt_config_free(c);
}

/* One rule for "did you mean": a couple of edits, or a third of a long name. */
static void test_close_enough(void) {
    CU_ASSERT_TRUE(lt_close_enough("ddp", 1));
    CU_ASSERT_FALSE(lt_close_enough("ddp", 3));
    CU_ASSERT_TRUE(lt_close_enough("max_epochz", 2));
    CU_ASSERT_TRUE(lt_close_enough("gradient_clip_algo", 6));
    CU_ASSERT_FALSE(lt_close_enough("gradient_clip_algo", 7));
    CU_ASSERT_FALSE(lt_close_enough("", 0));
}

static void test_edit_distance(void) {
    CU_ASSERT_EQUAL(lt_edit_distance("", ""), 0);
    CU_ASSERT_EQUAL(lt_edit_distance("abc", ""), 3);
    CU_ASSERT_EQUAL(lt_edit_distance("", "abcd"), 4);
    CU_ASSERT_EQUAL(lt_edit_distance("kitten", "sitting"), 3);
    CU_ASSERT_EQUAL(lt_edit_distance("flaw", "lawn"), 2);
    CU_ASSERT_EQUAL(lt_edit_distance("max_epoch", "max_epochs"), 1);
    CU_ASSERT_EQUAL(lt_edit_distance("Max_Epochs", "max_epochs"), 0);
    CU_ASSERT_EQUAL(lt_edit_distance("ddp", "dpp"), 1);
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return (int)CU_get_error();
    CU_pSuite s = CU_add_suite("config", suite_init, suite_clean);
    struct {
        const char *name;
        CU_TestFunc fn;
    } tests[] = {
        {"defaults", test_defaults},
        {"precedence default<file<env<flag", test_precedence},
        {"env name mapping", test_env_mapping},
        {"process environment", test_process_environment},
        {"dotted sections", test_dotted_sections_ini},
        {"--set parsing", test_set_arg},
        {"unknown key", test_unknown_key},
        {"unknown section", test_unknown_section},
        {"type errors", test_type_errors},
        {"INI syntax errors", test_ini_syntax_errors},
        {"missing file", test_missing_file},
        {"open section", test_open_section},
        {"[model] closes at the module's parameters", test_model_section},
        {"case, quotes, comments, long lines", test_values_case_quotes_comments},
        {"print", test_print},
        {"declare", test_declare},
        {"edit distance", test_edit_distance},
        {"choices and ranges of core keys", test_rules},
        {"limit_*_batches: fraction or whole count", test_limit_batches},
        {"defaults obey their rules", test_defaults_obey_rules},
        {"removed keys are unknown", test_removed_keys},
        {"lt_param_* parse like the config", test_param_readers},
        {"a plugin named by a section alone reads that section alone", test_param_section_only},
        {"close enough to suggest", test_close_enough},
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
