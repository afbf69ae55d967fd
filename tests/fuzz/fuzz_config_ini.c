/* The INI config parser (core/config/config.c, through inih): an input is a
 * whole config file. Everything ltrun does with a file's values before
 * plugins load runs on it: validation (with its "did you mean"), the typed
 * readers, --print-config and the section walks. */
#include "fuzz_common.h"
#include "config/config.h"
#include "common/ctx.h"

static int ini_fd = -1;
static char ini_path[64];

static const char *const sections[] = {"trainer", "model", "data", "optimizer", "scheduler",
                                       "checkpoint", "logger", "launcher", "strategy",
                                       "precision", "environment", "backend", "accelerator"};

typedef struct visit {
    const lt_config *c;
    const char *section;
} visit;

/* Every value read back as each type: a mismatch is an error, never a crash. */
static void read_value(void *user, const char *key, const char *value, const char *origin) {
    const visit *v = user;
    char err[256];
    int64_t i;
    double d;
    bool b;
    FUZZ_CHECK(value && origin);
    FUZZ_CHECK(lt_config_value(v->c, v->section, key) != NULL);
    FUZZ_CHECK(lt_config_origin(v->c, v->section, key) != NULL);
    (void)lt_config_help(v->c, v->section, key);
    (void)lt_config_source_of(v->c, v->section, key);
    (void)lt_config_int(v->c, v->section, key, &i, err, sizeof err);
    (void)lt_config_float(v->c, v->section, key, &d, err, sizeof err);
    (void)lt_config_bool(v->c, v->section, key, &b, err, sizeof err);
}

static void walk_section(void *user, const char *section) {
    visit v = {user, section};
    lt_config_each(v.c, section, read_value, &v);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    lt_log_set_level(-1);
    ini_fd = fuzz_file_new("train.ini", ini_path, sizeof ini_path);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_file_set(ini_fd, data, size);
    lt_config *c = lt_config_new();
    if (!c) return 0;
    char err[1024];
    err[0] = 0;
    lt_status st = lt_config_load_ini(c, ini_path, err, sizeof err);
    FUZZ_CHECK(st == LT_OK || err[0]); /* every refusal says why */
    (void)lt_config_validate(c, err, sizeof err);
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++)
        walk_section((void *)c, sections[i]);
    lt_config_each_section(c, walk_section, (void *)c);
    lt_config_print(c, fuzz_devnull());
    lt_config_free(c);
    return 0;
}
