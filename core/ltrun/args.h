/* ltrun's command line. */
#ifndef LTRUN_ARGS_H
#define LTRUN_ARGS_H

#include <stdbool.h>
#include "lt/abi.h"

#define LTRUN_MAX 256

/* ltrun's exit statuses (the rule is written out in main.c): 0 done, 1 any
 * failure a rerun might not repeat, 2 refused: the same input fails the same
 * way every time, so the launcher does not restart it. */
#define EXIT_REFUSED 2
/* The exit status for a failure (main.c): EXIT_REFUSED for input that does
 * not work, 1 for anything else; the launcher uses it for the rank it names. */
int ltrun_exit_status(lt_status st);

typedef struct ltrun_args {
    const char *config;
    const char *plugin_dirs[LTRUN_MAX];
    int nplugin_dirs;
    const char *sets[LTRUN_MAX];      /* "section.key=value" */
    const char *origins[LTRUN_MAX];   /* "flag --devices" ... */
    char *owned[LTRUN_MAX];           /* strings built here, freed at exit */
    int nsets, nowned;
    const char *help_plugin;
    const char *ckpt_path;
    bool help, version, list_plugins, print_config, check_only, no_test, validate_only, test_only;
} ltrun_args;

/* Returns 0, or 2 after printing a one-line error (unknown flag, missing value). */
int ltrun_parse_args(int argc, char **argv, ltrun_args *a);
void ltrun_args_free(ltrun_args *a);
void ltrun_usage(void);

/* list.c */
int ltrun_list_plugins(const ltrun_args *a);
int ltrun_help_plugin(const ltrun_args *a);

#endif
