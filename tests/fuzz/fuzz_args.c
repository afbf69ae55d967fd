/* ltrun's command line (core/ltrun/args.c) and what becomes of it in the
 * config (core/config/config.c): an input is one argument per line. The
 * arguments are parsed as ltrun's flags; each --set and mapped flag is
 * applied with lt_config_set_arg, the lines that look like LT_* environment
 * variables go through lt_config_load_env, and the result is validated, as
 * lt_trainer_new does (without opening the --config file it names). */
#include "fuzz_common.h"
#include "ltrun/args.h"
#include "config/config.h"
#include "config/devices.h"
#include "common/ctx.h"

#define MAX_ARGS 600 /* more than LTRUN_MAX, so "too many" is reachable */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    lt_log_set_level(-1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_cstr(data, size);
    char *argv[MAX_ARGS + 1], *envp[MAX_ARGS + 1];
    int argc = 0, nenv = 0;
    argv[argc++] = "ltrun";
    for (char *line = text; line && argc < MAX_ARGS;) {
        char *nl = memchr(line, '\n', (size_t)(text + size - line));
        if (nl) *nl = 0;
        argv[argc++] = line;
        if (!strncmp(line, "LT_", 3)) envp[nenv++] = line;
        line = nl ? nl + 1 : NULL;
    }
    argv[argc] = NULL;
    envp[nenv] = NULL;

    ltrun_args a;
    fuzz_quiet_begin();
    int rc = ltrun_parse_args(argc, argv, &a);
    fuzz_quiet_end();
    FUZZ_CHECK(rc == 0 || rc == EXIT_REFUSED);
    FUZZ_CHECK(a.nsets >= 0 && a.nsets <= LTRUN_MAX && a.nowned <= a.nsets);

    lt_config *c = rc == 0 ? lt_config_new() : NULL;
    if (c) {
        char err[1024];
        lt_status st = lt_config_load_env(c, envp, err, sizeof err);
        for (int i = 0; st == LT_OK && i < a.nsets; i++)
            st = lt_config_set_arg(c, a.sets[i], a.origins[i], err, sizeof err);
        if (st == LT_OK) st = lt_config_validate(c, err, sizeof err);
        if (st == LT_OK) {
            lt_device_list dev;
            const char *spec = lt_config_value(c, "trainer", "devices");
            FUZZ_CHECK(spec != NULL);
            (void)lt_devices_parse(spec, "cpu", 0, &dev, err, sizeof err);
            (void)lt_devices_parse(spec, "gpu", 8, &dev, err, sizeof err);
        }
        lt_config_print(c, fuzz_devnull());
        lt_config_free(c);
    }
    ltrun_args_free(&a);
    free(text);
    return 0;
}
