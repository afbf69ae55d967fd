/* The plugin loader (core/registry/) against the test
 * plugins of tests/plugins: resolution, inheritance through super, per-hook
 * overrides, older-minor adaptation, the defaults, --list-plugins, and one
 * malformed plugin per error, each of which must get a one-line message
 * naming the file and saying what to do. */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cunit_run.h"
#include "lt/lt.h"
#include "common/ctx.h"
#include "registry/hook_defaults.h"
#include "registry/registry.h"
#include "registry/registry_internal.h"

#define TP_DIR LT_TEST_BUILD_DIR "/test-plugins"
#define TP(file) TP_DIR "/" file
#define FN(f) ((void (*)(void))(f))
#define TP_STR2(x) #x
#define TP_STR(x) TP_STR2(x)

static char err[4096];
static char bad_dir[PATH_MAX];  /* files that are not loadable ELF (notelf, cut, foreign) */
static char scan_dir[PATH_MAX]; /* a shadowed copy and a misnamed file */
static char shadow_dir[PATH_MAX]; /* liblt-strategy-child.so: badmagic's copy, before TP_DIR */

#define ASSERT_CONTAINS(hay, needle)                                                       \
    do {                                                                                   \
        if (strstr((hay), (needle))) {                                                     \
            CU_PASS(#hay " contains " #needle);                                            \
        } else {                                                                           \
            fprintf(stderr, "\n    message: %s\n    lacks:   %s\n", (hay), (needle));      \
            CU_FAIL(#hay " contains " #needle);                                            \
        }                                                                                  \
    } while (0)

/* ---- helpers ------------------------------------------------------------- */

static lt_registry *registry(void) {
    lt_registry *r = lt_registry_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(lt_registry_add_dir(r, TP_DIR), LT_OK);
    return r;
}

/* Leaves `err` alone, so a test can load after checking a refusal. */
static const lt_plugin_header *load(lt_registry *r, lt_kind kind, const char *spec) {
    const lt_plugin_header *t = NULL;
    char msg[4096];
    lt_status st = lt_registry_load(r, kind, spec, &t, msg, sizeof msg);
    if (st != LT_OK) fprintf(stderr, "\n    load %s: %s\n", spec, msg);
    CU_ASSERT_EQUAL(st, LT_OK);
    return t;
}

static void (*hook(const lt_plugin_header *t, const char *name))(void) {
    size_t n;
    const lt_hook_info *h = lt_hooks_of((lt_kind)t->kind, &n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(h[i].name, name)) {
            void (*fn)(void);
            memcpy(&fn, (const char *)t + h[i].offset, sizeof fn);
            return fn;
        }
    CU_FAIL("no such hook");
    return NULL;
}

/* Loads `spec` into a fresh registry and checks the refusal: status, one
 * line, the file named, and the fix (or other expected text). */
static void refused(const char *spec, lt_status want, const char *file, const char *text1,
                    const char *text2) {
    lt_registry *r = registry();
    const lt_plugin_header *t = (const void *)&t;
    err[0] = 0;
    lt_status st = lt_registry_load(r, LT_KIND_STRATEGY, spec, &t, err, sizeof err);
    CU_ASSERT_EQUAL(st, want);
    if (st != want) fprintf(stderr, "\n    %s: status %d, message: %s\n", spec, st, err);
    CU_ASSERT_PTR_NULL(strchr(err, '\n'));
    ASSERT_CONTAINS(err, file);
    ASSERT_CONTAINS(err, text1);
    if (text2) ASSERT_CONTAINS(err, text2);
    /* A refusal leaves the registry usable. */
    CU_ASSERT_PTR_NOT_NULL(load(r, LT_KIND_STRATEGY, "base"));
    lt_registry_free(r);
}

static bool write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

static char file_buf[1 << 20];

/* `from` in file_buf: its size, 0 when it cannot be read whole. */
static size_t read_whole(const char *from) {
    FILE *f = fopen(from, "rb");
    if (!f) return 0;
    size_t n = fread(file_buf, 1, sizeof file_buf, f);
    fclose(f);
    return n < sizeof file_buf ? n : 0;
}

static bool copy_file(const char *from, const char *to) {
    size_t n = read_whole(from);
    return n > 0 && write_file(to, file_buf, n);
}

/* A copy cut short after `keep` bytes, as an interrupted copy leaves it:
 * dlopen would map its segments past the end of the file (SIGBUS). */
#define CUT_BYTES 2000
static bool copy_cut(const char *from, const char *to) {
    return read_whole(from) > CUT_BYTES && write_file(to, file_buf, CUT_BYTES);
}

/* A copy whose ELF header names another machine (glibc's dlopen says "No
 * such file or directory" of it). */
#if defined(__aarch64__)
#define FOREIGN_MACHINE EM_X86_64
#define FOREIGN_NAME "x86_64 (ELF machine 62), and this is aarch64 (183)"
#else
#define FOREIGN_MACHINE EM_AARCH64
#define FOREIGN_NAME "aarch64 (ELF machine 183), and this is x86_64 (62)"
#endif
static bool copy_foreign(const char *from, const char *to) {
    size_t n = read_whole(from);
    ElfW(Half) m = FOREIGN_MACHINE;
    if (n < sizeof(ElfW(Ehdr))) return false;
    memcpy(file_buf + offsetof(ElfW(Ehdr), e_machine), &m, sizeof m);
    return write_file(to, file_buf, n);
}

/* Also used by the suite's set-up, where CUnit asserts may not run. */
static bool join(char *out, const char *dir, const char *file) {
    size_t a = strlen(dir), b = strlen(file);
    if (a + b + 2 > PATH_MAX) return false;
    memcpy(out, dir, a);
    out[a] = '/';
    memcpy(out + a + 1, file, b + 1);
    return true;
}

static int suite_init(void) {
    char path[PATH_MAX];
    snprintf(bad_dir, sizeof bad_dir, "/tmp/lt-registry-bad-XXXXXX");
    snprintf(scan_dir, sizeof scan_dir, "/tmp/lt-registry-scan-XXXXXX");
    snprintf(shadow_dir, sizeof shadow_dir, "/tmp/lt-registry-shadow-XXXXXX");
    if (!mkdtemp(bad_dir) || !mkdtemp(scan_dir) || !mkdtemp(shadow_dir)) return -1;
    join(path, shadow_dir, "liblt-strategy-child.so");
    if (!copy_file(TP("liblt-strategy-badmagic.so"), path)) return -1;
    static const char text[] = "this is not a shared object\n";
    join(path, bad_dir, "liblt-strategy-notelf.so");
    if (!write_file(path, text, sizeof text - 1)) return -1;
    join(path, bad_dir, "liblt-strategy-cut.so");
    if (!copy_cut(TP("liblt-strategy-base.so"), path)) return -1;
    join(path, bad_dir, "liblt-strategy-foreign.so");
    if (!copy_foreign(TP("liblt-strategy-base.so"), path)) return -1;
    join(path, scan_dir, "liblt-strategy-base.so");
    if (!copy_file(TP("liblt-strategy-base.so"), path)) return -1;
    join(path, scan_dir, "liblt-bogus-x.so");
    if (!write_file(path, text, sizeof text - 1)) return -1;
    join(path, scan_dir, "README");
    return write_file(path, text, sizeof text - 1) ? 0 : -1;
}

static int suite_clean(void) {
    static const char *files[][2] = {{bad_dir, "liblt-strategy-notelf.so"},
                                     {bad_dir, "liblt-strategy-cut.so"},
                                     {bad_dir, "liblt-strategy-foreign.so"},
                                     {scan_dir, "liblt-strategy-base.so"},
                                     {scan_dir, "liblt-bogus-x.so"},
                                     {scan_dir, "README"},
                                     {shadow_dir, "liblt-strategy-child.so"}};
    char path[PATH_MAX];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        join(path, files[i][0], files[i][1]);
        unlink(path);
    }
    rmdir(bad_dir);
    rmdir(scan_dir);
    rmdir(shadow_dir);
    return 0;
}

/* ---- hook metadata --------------------------------------------------------- */

static const char *const optional_hooks[LT_KIND_COUNT + 1][12] = {
    [LT_KIND_ACCELERATOR] = {"device_in_use", "device_name", "memory_is_host", "check_params"},
    [LT_KIND_STRATEGY] = {"batch_multiplier", "sampler_shard", "on_train_start", "on_train_end",
                          "training_step", "after_optimizer_step", "eval_step", "optimizer_step",
                          "check_params"},
    [LT_KIND_PRECISION] = {"teardown", "check_params"},
    [LT_KIND_ENVIRONMENT] = {"local_world_size", "check_params"},
    [LT_KIND_BACKEND] = {"supports", "supports_memory", "mem_alloc", "mem_free", "check_params"},
    [LT_KIND_MODULE] = {"validation_step", "test_step", "training_step_end",
                        "configure_optimizers", "setup_data", "on_train_epoch_start",
                        "on_train_epoch_end", "on_validation_epoch_end", "teardown"},
};

static bool listed_optional(lt_kind kind, const char *name) {
    for (int i = 0; i < 12 && optional_hooks[kind][i]; i++)
        if (!strcmp(optional_hooks[kind][i], name)) return true;
    return false;
}

/* Descriptors are the header and then only hooks, so listing every hook in
 * order means offsets step by one pointer from the header to the end. */
static void test_hook_tables(void) {
    for (lt_kind k = 1; k <= LT_KIND_COUNT; k++) {
        size_t n;
        const lt_hook_info *h = lt_hooks_of(k, &n);
        CU_ASSERT_PTR_NOT_NULL_FATAL(h);
        CU_ASSERT_EQUAL(sizeof(lt_plugin_header) + n * sizeof(void (*)(void)), lt_desc_size(k));
        for (size_t i = 0; i < n; i++) {
            CU_ASSERT_EQUAL(h[i].offset, sizeof(lt_plugin_header) + i * sizeof(void (*)(void)));
            CU_ASSERT_EQUAL(h[i].required, !listed_optional(k, h[i].name));
            if (h[i].required) CU_ASSERT_PTR_NULL(h[i].dflt);
        }
    }
    CU_ASSERT_EQUAL(lt_desc_size(LT_KIND_STRATEGY), sizeof(lt_strategy_desc));
    CU_ASSERT_EQUAL(lt_desc_size(LT_KIND_MODULE), sizeof(lt_module_desc));
    size_t n = 99;
    CU_ASSERT_PTR_NULL(lt_hooks_of((lt_kind)0, &n));
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_EQUAL(lt_desc_size((lt_kind)7), 0);
    const lt_hook_info *s = lt_hooks_of(LT_KIND_STRATEGY, &n);
    CU_ASSERT_STRING_EQUAL(s[4].name, "init_dist_connection");
    CU_ASSERT_EQUAL(s[4].offset, offsetof(lt_strategy_desc, init_dist_connection));
    CU_ASSERT_STRING_EQUAL(s[n - 4].name, "teardown");
    CU_ASSERT_STRING_EQUAL(s[n - 3].name, "eval_step");      /* 1.3, appended */
    CU_ASSERT_STRING_EQUAL(s[n - 2].name, "optimizer_step"); /* 1.5, appended */
    CU_ASSERT_STRING_EQUAL(s[n - 1].name, "check_params");   /* 1.9, appended */
    CU_ASSERT_EQUAL(s[6].dflt, FN(lt_default_strategy_on_train_start));
    CU_ASSERT_PTR_NULL(s[1].dflt); /* batch_multiplier: the trainer's */
    const lt_hook_info *m = lt_hooks_of(LT_KIND_MODULE, &n);
    for (size_t i = 0; i < n; i++) CU_ASSERT_PTR_NULL(m[i].dflt);
}

/* ---- resolution -------------------------------------------------------------- */

static void test_load_complete(void) {
    lt_registry *r = registry();
    const lt_strategy_desc *s = (const void *)load(r, LT_KIND_STRATEGY, "base");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_STRING_EQUAL(s->hdr.name, "base");
    CU_ASSERT_STRING_EQUAL(s->hdr.version, "1.0");
    CU_ASSERT_EQUAL(s->hdr.struct_size, sizeof(lt_strategy_desc));
    CU_ASSERT(LT_HAS(s, teardown));
    CU_ASSERT_EQUAL(FN(s->on_train_start), FN(lt_default_strategy_on_train_start));
    CU_ASSERT_EQUAL(FN(s->after_optimizer_step), FN(lt_default_strategy_after_optimizer_step));
    CU_ASSERT_PTR_NULL(s->batch_multiplier); /* no default of the registry's own */
    CU_ASSERT_PTR_NULL(s->training_step);
    int calls = 0;
    CU_ASSERT_EQUAL(s->setup_environment(NULL, (lt_run *)&calls), LT_OK);
    CU_ASSERT_EQUAL(calls, 1000);
    /* The same plugin however it is named. */
    CU_ASSERT_PTR_EQUAL(load(r, LT_KIND_STRATEGY, "BASE"), s);
    CU_ASSERT_PTR_EQUAL(load(r, LT_KIND_STRATEGY, "liblt-strategy-base.so"), s);
    CU_ASSERT_PTR_EQUAL(load(r, LT_KIND_STRATEGY, TP("liblt-strategy-base.so")), s);
    CU_ASSERT_PTR_EQUAL(load(r, LT_KIND_STRATEGY, TP_DIR "/./liblt-strategy-base.so"), s);
    lt_registry_free(r);
}

static void test_inherit_one_hook(void) {
    lt_registry *r = registry();
    const lt_plugin_header *child = load(r, LT_KIND_STRATEGY, "child");
    const lt_plugin_header *base = load(r, LT_KIND_STRATEGY, "base");
    CU_ASSERT_PTR_NOT_NULL_FATAL(child);
    CU_ASSERT_PTR_NOT_NULL_FATAL(base);
    CU_ASSERT_PTR_NOT_EQUAL(child, base);
    size_t n;
    const lt_hook_info *h = lt_hooks_of(LT_KIND_STRATEGY, &n);
    for (size_t i = 0; i < n; i++) {
        bool own = !strcmp(h[i].name, "init_dist_connection");
        CU_ASSERT_EQUAL(hook(child, h[i].name) == hook(base, h[i].name), !own);
    }
    /* The plugin's header, the base's table in its super slot. */
    CU_ASSERT_STRING_EQUAL(child->name, "child");
    CU_ASSERT_STRING_EQUAL(child->version, "2.0");
    CU_ASSERT_STRING_EQUAL(child->base, "base");
    CU_ASSERT_PTR_NOT_NULL_FATAL(child->super);
    CU_ASSERT_PTR_EQUAL(*child->super, base);
    int calls = 0;
    const lt_strategy_desc *s = (const void *)child;
    CU_ASSERT_EQUAL(s->init_dist_connection(NULL, (lt_run *)&calls), LT_OK);
    CU_ASSERT_EQUAL(calls, 11); /* its own 10, then super's 1 */
    /* Parameters: its own first (its "shared" wins), then the base's. */
    const lt_param_spec *p = child->params;
    CU_ASSERT_STRING_EQUAL(p[0].name, "child_knob");
    CU_ASSERT_STRING_EQUAL(p[1].name, "shared");
    CU_ASSERT_STRING_EQUAL(p[1].help, "the child's spec");
    CU_ASSERT_STRING_EQUAL(p[2].name, "bucket_cap_mb");
    CU_ASSERT_PTR_NULL(p[3].name);
    CU_ASSERT_STRING_EQUAL(base->params[0].name, "bucket_cap_mb");
    CU_ASSERT_PTR_NULL(base->params[2].name);
    lt_registry_free(r);
}

/* Built "before" on_train_start existed: whatever lies past struct_size in
 * the plugin's memory (poison here) must not reach the table. */
static void test_older_minor(void) {
    lt_registry *r = registry();
    const lt_strategy_desc *old = (const void *)load(r, LT_KIND_STRATEGY, "old");
    const lt_strategy_desc *base = (const void *)load(r, LT_KIND_STRATEGY, "base");
    CU_ASSERT_PTR_NOT_NULL_FATAL(old);
    CU_ASSERT_PTR_NOT_NULL_FATAL(base);
    CU_ASSERT_EQUAL(old->hdr.struct_size, sizeof(lt_strategy_desc));
    lt_launch_kind lk = LT_LAUNCH_NONE;
    CU_ASSERT_EQUAL(old->launch_kind(NULL, &lk), LT_OK);
    CU_ASSERT_EQUAL(lk, LT_LAUNCH_SPAWN); /* before the cut: the plugin's own */
    CU_ASSERT_EQUAL(FN(old->on_train_start), FN(lt_default_strategy_on_train_start));
    CU_ASSERT_EQUAL(FN(old->after_optimizer_step), FN(lt_default_strategy_after_optimizer_step));
    CU_ASSERT_EQUAL(FN(old->on_train_end), FN(base->on_train_end));
    CU_ASSERT_EQUAL(FN(old->on_backward_start), FN(base->on_backward_start));
    CU_ASSERT_EQUAL(FN(old->teardown), FN(base->teardown));
    int calls = 0;
    CU_ASSERT_EQUAL(old->on_train_start(NULL, (lt_run *)&calls), LT_OK);
    CU_ASSERT_EQUAL(old->on_backward_start(NULL, (lt_run *)&calls, true), LT_OK);
    CU_ASSERT_EQUAL(old->teardown(NULL, (lt_run *)&calls), LT_OK);
    CU_ASSERT_EQUAL(calls, 4000 + 11000);
    lt_registry_free(r);
}

static void test_several_kinds_in_one_file(void) {
    lt_registry *r = registry();
    const lt_environment_desc *env = (const void *)load(r, LT_KIND_ENVIRONMENT, "multi");
    CU_ASSERT_PTR_NOT_NULL_FATAL(env);
    CU_ASSERT_EQUAL(FN(env->local_world_size), FN(lt_default_env_local_world_size));
    lt_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.kind = LT_KIND_ENVIRONMENT;
    ctx.desc = &env->hdr;
    int n = 0;
    CU_ASSERT_EQUAL(env->local_world_size(&ctx, &n), LT_OK);
    CU_ASSERT_EQUAL(n, 4); /* one node: every process is local */
    /* The strategy in the same file, by path: the file name promises an
     * environment, so the first strategy in it is taken. */
    const lt_plugin_header *helper = load(r, LT_KIND_STRATEGY, TP("liblt-environment-multi.so"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(helper);
    CU_ASSERT_STRING_EQUAL(helper->name, "helper");
    CU_ASSERT_EQUAL(hook(helper, "teardown"), hook(load(r, LT_KIND_STRATEGY, "base"), "teardown"));
    lt_registry_free(r);
}

/* ---- defaults ---------------------------------------------------------------- */

static void test_defaults(void) {
    lt_plugin_header cpu = {.kind = LT_KIND_ACCELERATOR, .name = "cpu"};
    lt_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    snprintf(ctx.name, sizeof ctx.name, "CPU");
    ctx.desc = &cpu;
    char buf[32];
    CU_ASSERT_EQUAL(lt_default_accel_device_name(&ctx, 3, buf, sizeof buf), LT_OK);
    CU_ASSERT_STRING_EQUAL(buf, "cpu:3");
    bool b = true;
    CU_ASSERT_EQUAL(lt_default_accel_device_in_use(&ctx, 0, &b), LT_OK);
    CU_ASSERT_FALSE(b);
    b = false;
    CU_ASSERT_EQUAL(lt_default_backend_supports(&ctx, LT_BF16, LT_MAX, &b), LT_OK);
    CU_ASSERT_TRUE(b);
    ctx.desc = NULL;
    int n;
    CU_ASSERT_EQUAL(lt_default_env_local_world_size(&ctx, &n), LT_ERR_STATE);
    CU_ASSERT_EQUAL(lt_default_strategy_on_train_end(&ctx, NULL), LT_OK);
}

static lt_status my_batch_multiplier(lt_ctx *ctx, lt_run *run, int *out) {
    (void)ctx, (void)run;
    *out = 7;
    return LT_OK;
}

static void test_set_default(void) {
    lt_hooks_set_default(LT_KIND_STRATEGY, "batch_multiplier", FN(my_batch_multiplier));
    lt_hooks_set_default(LT_KIND_STRATEGY, "no_such_hook", FN(my_batch_multiplier)); /* logged */
    lt_registry *r = registry();
    const lt_strategy_desc *s = (const void *)load(r, LT_KIND_STRATEGY, "child");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(FN(s->batch_multiplier), FN(my_batch_multiplier));
    lt_registry_free(r);
    lt_hooks_set_default(LT_KIND_STRATEGY, "batch_multiplier", NULL);
}

/* ---- per-hook override ---------------------------------------------------------- */

static void test_override_hook(void) {
    lt_registry *r = registry();
    const lt_plugin_header *child = load(r, LT_KIND_STRATEGY, "child");
    CU_ASSERT_PTR_NOT_NULL_FATAL(child);
    void *mine = dlopen(TP("libmine.so"), RTLD_NOW | RTLD_LOCAL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mine);
    void *my_init = dlsym(mine, "my_init");
    CU_ASSERT_PTR_NOT_NULL_FATAL(my_init);
    char cwd[PATH_MAX];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    static const char *const specs[] = {TP("libmine.so:my_init"), "libmine.so:my_init",
                                        "../test-plugins/libmine.so:my_init"};
    CU_ASSERT_EQUAL_FATAL(chdir(TP_DIR), 0); /* relative paths are from here */
    for (size_t i = 0; i < 3; i++) {
        const lt_plugin_header *t = NULL;
        lt_status st = lt_registry_override_hook(r, LT_KIND_STRATEGY, child, "init_dist_connection",
                                                 specs[i], &t, err, sizeof err);
        CU_ASSERT_EQUAL(st, LT_OK);
        if (st != LT_OK) fprintf(stderr, "\n    %s: %s\n", specs[i], err);
        if (!t) continue;
        CU_ASSERT_PTR_NOT_EQUAL(t, child);
        CU_ASSERT_EQUAL((void *)hook(t, "init_dist_connection"), my_init);
        CU_ASSERT_EQUAL(hook(t, "configure_ddp"), hook(child, "configure_ddp"));
        CU_ASSERT_STRING_EQUAL(t->name, "child");
        int calls = 0;
        CU_ASSERT_EQUAL(((const lt_strategy_desc *)(const void *)t)->init_dist_connection(NULL, (lt_run *)&calls), LT_OK);
        CU_ASSERT_EQUAL(calls, 100);
    }
    CU_ASSERT_NOT_EQUAL((void *)hook(child, "init_dist_connection"), my_init);
    CU_ASSERT_EQUAL(chdir(cwd), 0);
    lt_registry_free(r);
}

static void override_refused(const char *hook_name, const char *spec, lt_status want,
                             const char *text1, const char *text2) {
    lt_registry *r = registry();
    const lt_plugin_header *child = load(r, LT_KIND_STRATEGY, "child");
    const lt_plugin_header *t = NULL;
    err[0] = 0;
    lt_status st = lt_registry_override_hook(r, LT_KIND_STRATEGY, child, hook_name, spec, &t, err,
                                             sizeof err);
    CU_ASSERT_EQUAL(st, want);
    if (st != want) fprintf(stderr, "\n    %s: status %d, message: %s\n", spec, st, err);
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_PTR_NULL(strchr(err, '\n'));
    ASSERT_CONTAINS(err, text1);
    if (text2) ASSERT_CONTAINS(err, text2);
    lt_registry_free(r);
}

static void test_override_errors(void) {
    override_refused("init_dist_conection", TP("libmine.so:my_init"), LT_ERR_INVALID,
                     "strategy has no hook 'init_dist_conection'",
                     "did you mean 'init_dist_connection'?");
    override_refused("configure_ddp", TP("libmine.so:nope"), LT_ERR_NOT_FOUND,
                     "no symbol 'nope' in " TP("libmine.so"), "nm -D");
    override_refused("configure_ddp", "no-such-lib.so:f", LT_ERR_NOT_FOUND,
                     "cannot load ./no-such-lib.so",
                     "relative path is taken from the current directory");
    override_refused("configure_ddp", TP("libmine.so"), LT_ERR_INVALID, "expected path:symbol",
                     "./libmine.so:my_");
}

/* A variable named as a hook: calling it would jump into data. */
static void test_override_data_symbol(void) {
    override_refused("teardown", TP("liblt-strategy-dataentry.so:not_a_function"), LT_ERR_INVALID,
                     "strategy 'child' hook teardown = " TP("liblt-strategy-dataentry.so")
                     ":not_a_function: 'not_a_function' in " TP("liblt-strategy-dataentry.so")
                     " is a variable (ELF symbol type OBJECT), not a function",
                     "name a function");
}

/* Objects that dlopen would crash on (cut) or misreport (foreign) are
 * refused before it sees them, as they are as plugins. */
static void test_override_unloadable(void) {
    char spec[2 * PATH_MAX], want[2 * PATH_MAX];
    snprintf(spec, sizeof spec, "%s/liblt-strategy-cut.so:some_fn", bad_dir);
    snprintf(want, sizeof want, "cannot load %s/liblt-strategy-cut.so: file is truncated "
             "(segment ends at byte ", bad_dir);
    override_refused("teardown", spec, LT_ERR_NOT_FOUND, want,
                     " of " TP_STR(CUT_BYTES) "); rebuild or reinstall it");
    snprintf(spec, sizeof spec, "%s/liblt-strategy-foreign.so:some_fn", bad_dir);
    snprintf(want, sizeof want, "cannot load %s/liblt-strategy-foreign.so: built for "
             FOREIGN_NAME "; build it for this machine", bad_dir);
    override_refused("teardown", spec, LT_ERR_NOT_FOUND, want, NULL);
}

/* ---- refusals: one per way to get a plugin wrong --------------------------------- */

static void test_refuse_bad_magic(void) {
    refused("badmagic", LT_ERR_ABI, TP("liblt-strategy-badmagic.so"), "bad magic 0xdeadbeef",
            "fill its header with LT_HEADER(...)");
}

/* The versions in the messages follow the headers' LT_ABI_MINOR. */
static void test_refuse_abi_major(void) {
    char want[512];
    snprintf(want, sizeof want,
             "strategy 'abi2' (%s): ABI 2.1, this lt supports 1.0–1.%d; rebuild it against lt 1.x headers",
             TP("liblt-strategy-abi2.so"), LT_ABI_MINOR);
    refused("abi2", LT_ERR_ABI, want, "", NULL);
}

static void test_refuse_abi_minor(void) {
    char want[128];
    snprintf(want, sizeof want, "ABI 1.%d, this lt supports 1.0–1.%d", LT_ABI_MINOR + 1,
             LT_ABI_MINOR);
    refused("abinew", LT_ERR_ABI, TP("liblt-strategy-abinew.so"), want,
            "upgrade lt, or rebuild the plugin against these headers");
}

static void test_refuse_struct_size(void) {
    refused("huge", LT_ERR_ABI, TP("liblt-strategy-huge.so"), "descriptor size", "rebuild it");
    refused("tiny", LT_ERR_ABI, TP("liblt-strategy-tiny.so"), "descriptor size 8 is outside",
            "LT_HEADER");
}

static void test_refuse_unknown_kind(void) {
    refused("oddkind", LT_ERR_ABI, TP("liblt-strategy-oddkind.so"), "unknown descriptor kind 42",
            "use an LT_KIND_* constant");
}

static void test_refuse_name_mismatch(void) {
    refused("wrongname", LT_ERR_ABI, TP("liblt-strategy-wrongname.so"),
            "file liblt-strategy-wrongname.so holds strategy 'rightname', environment 'wrongname', "
            "not strategy 'wrongname'", "rename the file or the descriptor");
}

/* One line names every required hook the plugin lacks, with the count, and
 * suggests as bases only the strategies that load: of TP_DIR's, base, child
 * and old; not the refused files (badmagic, abi2, the broken chains...). */
static void test_refuse_missing_hook(void) {
    refused("incomplete", LT_ERR_ABI, "strategy 'incomplete' (" TP("liblt-strategy-incomplete.so") "): "
            "required hooks 'configure_ddp', ", "are not set and no base provides them",
            "; implement them or set .base = \"<a complete strategy>\" (installed: base, child, old)");
    static const char *const defined[] = {"launch_kind", "setup_environment", "init_dist_connection"};
    size_t n, required = 0, missing = 0;
    const lt_hook_info *h = lt_hooks_of(LT_KIND_STRATEGY, &n);
    for (size_t i = 0; i < n; i++) {
        if (!h[i].required) continue;
        required++;
        bool has = false;
        for (size_t k = 0; k < sizeof defined / sizeof defined[0]; k++) has |= !strcmp(h[i].name, defined[k]);
        char quoted[80];
        snprintf(quoted, sizeof quoted, "'%s'", h[i].name);
        if (has) {
            CU_ASSERT_PTR_NULL(strstr(err, quoted));
        } else {
            missing++;
            ASSERT_CONTAINS(err, quoted);
        }
    }
    char count[64];
    snprintf(count, sizeof count, "(%zu of %zu) are not set", missing, required);
    CU_ASSERT(missing > 1);
    ASSERT_CONTAINS(err, count);
}

/* "installed:" counts a name when the file a lookup by that name reaches
 * loads: child's first file (shadow_dir) is refused, so child is not
 * offered though TP_DIR's copy is fine. incomplete and incomplete2 each
 * probe the other, which must not recurse; heir's base is incomplete: the
 * list is made while heir is resolving, and its probes do not take the
 * message's wrapping away. */
static void test_installed_only_loadable(void) {
    lt_registry *r = lt_registry_new();
    CU_ASSERT_EQUAL(lt_registry_add_dir(r, shadow_dir), LT_OK);
    CU_ASSERT_EQUAL(lt_registry_add_dir(r, TP_DIR), LT_OK);
    const lt_plugin_header *t;
    CU_ASSERT_EQUAL(lt_registry_load(r, LT_KIND_STRATEGY, "incomplete", &t, err, sizeof err), LT_ERR_ABI);
    ASSERT_CONTAINS(err, "(installed: base, old)");
    CU_ASSERT_EQUAL(lt_registry_load(r, LT_KIND_STRATEGY, "heir", &t, err, sizeof err), LT_ERR_ABI);
    CU_ASSERT_PTR_NULL(strchr(err, '\n'));
    ASSERT_CONTAINS(err, "strategy 'heir' (" TP("liblt-strategy-heir.so") "): cannot load its base "
                    "'incomplete': strategy 'incomplete' (" TP("liblt-strategy-incomplete.so") "): "
                    "required hooks");
    ASSERT_CONTAINS(err, "(installed: base, old)");
    /* The probes left the registry as they found it. */
    CU_ASSERT_PTR_NOT_NULL(load(r, LT_KIND_STRATEGY, "base"));
    CU_ASSERT_EQUAL(lt_registry_load(r, LT_KIND_STRATEGY, "cyca", &t, err, sizeof err), LT_ERR_ABI);
    ASSERT_CONTAINS(err, "inheritance cycle: strategy cyca -> cycb -> cyca");
    lt_registry_free(r);
}

static void test_refuse_no_entry(void) {
    refused("noentry", LT_ERR_ABI, TP("liblt-strategy-noentry.so"), "no lt_plugin_entry_v1 symbol",
            "LT_PLUGIN_EXPORT(&desc.hdr)");
}

static void test_refuse_data_entry(void) {
    refused("dataentry", LT_ERR_ABI, "strategy 'dataentry' (" TP("liblt-strategy-dataentry.so")
            "): its lt_plugin_entry_v1 symbol is a variable (ELF symbol type OBJECT), not a "
            "function", "; define it with LT_PLUGIN_EXPORT(&desc.hdr)", NULL);
}

static void test_refuse_not_elf(void) {
    char path[PATH_MAX];
    join(path, bad_dir, "liblt-strategy-notelf.so");
    refused(path, LT_ERR_ABI, path, "not a loadable plugin: not an ELF file",
            "rebuild it as a shared object");
}

/* Cut short: checked before dlopen, which would map past the end (SIGBUS). */
static void test_refuse_truncated(void) {
    char path[PATH_MAX], want[2 * PATH_MAX];
    join(path, bad_dir, "liblt-strategy-cut.so");
    snprintf(want, sizeof want, "strategy 'cut' (%s): not a loadable plugin: file is truncated "
             "(segment ends at byte ", path);
    refused(path, LT_ERR_ABI, want, " of " TP_STR(CUT_BYTES) "); rebuild or reinstall it", NULL);
}

/* glibc's own message for this one is "No such file or directory". */
static void test_refuse_foreign_machine(void) {
    char path[PATH_MAX], want[2 * PATH_MAX];
    join(path, bad_dir, "liblt-strategy-foreign.so");
    snprintf(want, sizeof want, "strategy 'foreign' (%s): not a loadable plugin: built for "
             FOREIGN_NAME "; build it for this machine", path);
    refused(path, LT_ERR_ABI, want, "", NULL);
    CU_ASSERT_PTR_NULL(strstr(err, "No such file"));
}

static int a_variable = 3;
static int a_function(void) { return a_variable; }

/* Symbols dladdr cannot name (static here) are judged by their segment. */
static void test_is_function(void) {
    char why[256];
    void *p = (void *)a_function;
    CU_ASSERT_TRUE(registry_is_function(p, why, sizeof why));
    CU_ASSERT_TRUE(registry_is_function((void *)lt_registry_new, why, sizeof why));
    CU_ASSERT_FALSE(registry_is_function(&a_variable, why, sizeof why));
    ASSERT_CONTAINS(why, "data, not code");
    void *h = dlopen(TP("liblt-strategy-dataentry.so"), RTLD_NOW | RTLD_LOCAL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_FALSE(registry_is_function(dlsym(h, "not_a_function"), why, sizeof why));
    CU_ASSERT_STRING_EQUAL(why, "a variable (ELF symbol type OBJECT), not a function");
    dlclose(h);
}

static void test_refuse_base_not_found(void) {
    refused("orphan", LT_ERR_NOT_FOUND,
            "strategy 'orphan' (" TP("liblt-strategy-orphan.so") "): cannot load its base "
            "'nosuchbase' (install it, or set .base to an installed strategy): "
            "strategy 'nosuchbase' not found; looked in: " TP_DIR, "", NULL);
}

static void test_refuse_cycle(void) {
    refused("cyca", LT_ERR_ABI, "(" TP("liblt-strategy-cycb.so") " sets base = \"cyca\")",
            "inheritance cycle: strategy cyca -> cycb -> cyca", "remove the base of one of them");
}

static void test_refuse_not_found(void) {
    refused("bse", LT_ERR_NOT_FOUND,
            "strategy 'bse' not found; looked in: " TP_DIR " (as liblt-strategy-bse.so); "
            "did you mean 'base'? (ltrun --list-plugins shows what is installed)", "", NULL);
    refused("liblt-strategy-chld.so", LT_ERR_NOT_FOUND, "(as liblt-strategy-chld.so)",
            "did you mean 'child'?", NULL);
    refused("zzzzzzzzzz", LT_ERR_NOT_FOUND, "strategy 'zzzzzzzzzz' not found", "--list-plugins", NULL);
    ASSERT_CONTAINS(err, "zzzzzzzzzz.so) (ltrun"); /* nothing close: no guess */
    refused(TP_DIR "/liblt-strategy-gone.so", LT_ERR_NOT_FOUND, TP("liblt-strategy-gone.so"),
            "no such file; check the path", NULL);
}

/* ---- directories ------------------------------------------------------------------ */

static void test_dirs(void) {
    lt_registry *r = lt_registry_new();
    CU_ASSERT_EQUAL(lt_registry_add_dir(r, "/no/such/dir"), LT_ERR_NOT_FOUND);
    CU_ASSERT_EQUAL(lt_registry_add_dir(r, NULL), LT_ERR_INVALID);
    const lt_plugin_header *t;
    CU_ASSERT_EQUAL(lt_registry_load(r, LT_KIND_STRATEGY, "base", &t, err, sizeof err),
                    LT_ERR_NOT_FOUND);
    ASSERT_CONTAINS(err, "no plugin directory (pass --plugin-dir DIR or set LT_PLUGIN_PATH)");
    /* an entry the user named must be a directory, as a --plugin-dir must;
     * a bad one is refused in one line and nothing is added */
    setenv("LT_PLUGIN_PATH", TP_DIR ":/no/such/dir", 1);
    CU_ASSERT_EQUAL(lt_registry_add_default_dirs(r, err, sizeof err), LT_ERR_NOT_FOUND);
    ASSERT_CONTAINS(err, "LT_PLUGIN_PATH entry '/no/such/dir': No such file or directory; name "
                         "an existing directory of liblt-<kind>-<name>.so plugins, or remove the "
                         "entry from LT_PLUGIN_PATH");
    CU_ASSERT_PTR_NULL(strchr(err, '\n'));
    setenv("LT_PLUGIN_PATH", TP_DIR "/liblt-strategy-base.so", 1);
    CU_ASSERT_EQUAL(lt_registry_add_default_dirs(r, err, sizeof err), LT_ERR_NOT_FOUND);
    ASSERT_CONTAINS(err, "liblt-strategy-base.so': not a directory; ");
    /* empty entries are skipped (not the current directory, as in PATH) */
    setenv("LT_PLUGIN_PATH", "::" TP_DIR ":", 1);
    CU_ASSERT_EQUAL(lt_registry_add_default_dirs(r, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_registry_add_default_dirs(r, err, sizeof err), LT_OK); /* once */
    unsetenv("LT_PLUGIN_PATH");
    CU_ASSERT_PTR_NOT_NULL(load(r, LT_KIND_STRATEGY, "base"));
    CU_ASSERT_EQUAL(lt_registry_load(r, LT_KIND_STRATEGY, "none", &t, err, sizeof err),
                    LT_ERR_NOT_FOUND);
    ASSERT_CONTAINS(err, "looked in: " TP_DIR ", ");
    ASSERT_CONTAINS(err, "/lt/abi-1 (as liblt-strategy-none.so)");
    CU_ASSERT_PTR_NULL(strstr(strstr(err, TP_DIR) + 1, TP_DIR)); /* listed once */
    CU_ASSERT_EQUAL(lt_registry_load(r, (lt_kind)9, "base", &t, err, sizeof err), LT_ERR_INVALID);
    lt_registry_free(r);
}

/* ---- --list-plugins ---------------------------------------------------------------- */

typedef struct listing {
    char path[PATH_MAX];
    const lt_plugin_header *desc;
    char refused[1024];
} listing;

static listing seen[64];
static int nseen;

static void collect(void *user, const lt_plugin_listing *l) {
    (void)user;
    if (nseen == 64) return;
    listing *s = &seen[nseen++];
    snprintf(s->path, sizeof s->path, "%s", l->path);
    s->desc = l->desc;
    snprintf(s->refused, sizeof s->refused, "%s", l->refused ? l->refused : "");
}

static const listing *find_listing(const char *dir, const char *file) {
    char path[PATH_MAX];
    join(path, dir, file);
    for (int i = 0; i < nseen; i++)
        if (!strcmp(seen[i].path, path)) return &seen[i];
    return NULL;
}

static void expect_listed(const char *dir, const char *file, const char *name, const char *why) {
    const listing *l = find_listing(dir, file);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    if (name) {
        CU_ASSERT_PTR_NOT_NULL_FATAL(l->desc);
        CU_ASSERT_STRING_EQUAL(l->desc->name, name);
        CU_ASSERT_STRING_EQUAL(l->refused, "");
    } else {
        CU_ASSERT_PTR_NULL(l->desc);
        ASSERT_CONTAINS(l->refused, why);
    }
}

static void test_scan(void) {
    lt_registry *r = registry();
    CU_ASSERT_EQUAL(lt_registry_add_dir(r, bad_dir), LT_OK);
    CU_ASSERT_EQUAL(lt_registry_add_dir(r, scan_dir), LT_OK);
    nseen = 0;
    lt_registry_scan(r, collect, NULL);
    expect_listed(TP_DIR, "liblt-strategy-base.so", "base", NULL);
    expect_listed(TP_DIR, "liblt-strategy-child.so", "child", NULL);
    expect_listed(TP_DIR, "liblt-strategy-old.so", "old", NULL);
    expect_listed(TP_DIR, "liblt-environment-multi.so", "multi", NULL);
    expect_listed(TP_DIR, "liblt-strategy-badmagic.so", NULL, "bad magic");
    expect_listed(TP_DIR, "liblt-strategy-cyca.so", NULL, "inheritance cycle");
    expect_listed(TP_DIR, "liblt-strategy-incomplete.so", NULL, "required hooks 'configure_ddp', ");
    expect_listed(TP_DIR, "liblt-strategy-heir.so", NULL, "cannot load its base 'incomplete'");
    expect_listed(TP_DIR, "liblt-strategy-incomplete2.so", NULL, "(installed: base, child, old)");
    expect_listed(bad_dir, "liblt-strategy-notelf.so", NULL, "not an ELF file");
    expect_listed(bad_dir, "liblt-strategy-cut.so", NULL, "file is truncated (segment ends at");
    expect_listed(bad_dir, "liblt-strategy-foreign.so", NULL, "built for " FOREIGN_NAME);
    expect_listed(TP_DIR, "liblt-strategy-dataentry.so", NULL,
                  "its lt_plugin_entry_v1 symbol is a variable");
    expect_listed(scan_dir, "liblt-strategy-base.so", NULL,
                  "shadowed by " TP_DIR "/liblt-strategy-base.so");
    expect_listed(scan_dir, "liblt-bogus-x.so", NULL, "file name is not liblt-<kind>-<name>.so");
    CU_ASSERT_PTR_NULL(find_listing(TP_DIR, "libmine.so"));
    CU_ASSERT_PTR_NULL(find_listing(scan_dir, "README"));
    /* Scanning resolved through the same cache a run uses. */
    CU_ASSERT_PTR_EQUAL(find_listing(TP_DIR, "liblt-strategy-base.so")->desc,
                        load(r, LT_KIND_STRATEGY, "base"));
    lt_registry_free(r);
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("registry", suite_init, suite_clean);
    CU_add_test(s, "hook tables list every hook in order", test_hook_tables);
    CU_add_test(s, "a complete plugin resolves and is cached", test_load_complete);
    CU_add_test(s, "inheritance: one hook, the rest from the base, super", test_inherit_one_hook);
    CU_add_test(s, "older minor: hooks past struct_size come from base/defaults", test_older_minor);
    CU_add_test(s, "several kinds in one file", test_several_kinds_in_one_file);
    CU_add_test(s, "defaults of optional hooks", test_defaults);
    CU_add_test(s, "lt_hooks_set_default", test_set_default);
    CU_add_test(s, "a hook from a user object", test_override_hook);
    CU_add_test(s, "hook override errors", test_override_errors);
    CU_add_test(s, "hook override: a variable is refused", test_override_data_symbol);
    CU_add_test(s, "hook override: cut and foreign objects", test_override_unloadable);
    CU_add_test(s, "refused: bad magic", test_refuse_bad_magic);
    CU_add_test(s, "refused: ABI major", test_refuse_abi_major);
    CU_add_test(s, "refused: ABI minor too new", test_refuse_abi_minor);
    CU_add_test(s, "refused: struct size", test_refuse_struct_size);
    CU_add_test(s, "refused: unknown kind", test_refuse_unknown_kind);
    CU_add_test(s, "refused: name does not match the file", test_refuse_name_mismatch);
    CU_add_test(s, "refused: required hooks missing, all named", test_refuse_missing_hook);
    CU_add_test(s, "installed: only plugins that load", test_installed_only_loadable);
    CU_add_test(s, "refused: no entry symbol", test_refuse_no_entry);
    CU_add_test(s, "refused: entry symbol is a variable", test_refuse_data_entry);
    CU_add_test(s, "refused: not a shared object", test_refuse_not_elf);
    CU_add_test(s, "refused: truncated file", test_refuse_truncated);
    CU_add_test(s, "refused: built for another machine", test_refuse_foreign_machine);
    CU_add_test(s, "function or variable, by symbol type or segment", test_is_function);
    CU_add_test(s, "refused: base not found", test_refuse_base_not_found);
    CU_add_test(s, "refused: inheritance cycle", test_refuse_cycle);
    CU_add_test(s, "not found, with a suggestion", test_refuse_not_found);
    CU_add_test(s, "search directories", test_dirs);
    CU_add_test(s, "scan for --list-plugins", test_scan);
    int rc = lt_cunit_run();
    return rc;
}
