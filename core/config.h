/* Configuration: declared keys with types and defaults, values from the INI
 * file, LT_<SECTION>__<KEY> environment variables and the command line, each
 * remembering where it came from. Precedence: default < file < env < flag.
 *
 * Sections: [trainer] [model] [data] [optimizer] [scheduler] [checkpoint]
 * [logger] [strategy] [precision] [environment] [backend] [accelerator] and
 * [<kind>.<name>] for one plugin's parameters. Keys are validated against the
 * declarations; an unknown one is an error suggesting the nearest known key. */
#ifndef LT_CONFIG_H
#define LT_CONFIG_H

#include <stdio.h>
#include "lt/abi.h"

typedef struct lt_config lt_config;

typedef enum lt_config_source {
    LT_SRC_DEFAULT = 0,
    LT_SRC_FILE = 1,
    LT_SRC_ENV = 2,
    LT_SRC_FLAG = 3,
} lt_config_source;

/* A new config with every core key declared (trainer.*, data.* ...). */
lt_config *lt_config_new(void);
void lt_config_free(lt_config *c);

/* Declares section.key (section may contain a dot: "strategy.ddp"). Declaring
 * the same key twice with the same type is allowed (the later default wins
 * when no value was set). `open` sections accept any key (hook overrides). */
lt_status lt_config_declare(lt_config *c, const char *section, const char *key,
                            lt_param_type type, const char *def, const char *help);
lt_status lt_config_declare_section(lt_config *c, const char *section, bool open);

/* Values. Each records its source and origin ("train.ini:12", "LT_TRAINER__MAX_EPOCHS",
 * "--set", "--devices"). A value from a lower-precedence source never replaces
 * one from a higher. Undeclared keys are kept and reported by validate. */
lt_status lt_config_load_ini(lt_config *c, const char *path, char *err, size_t errlen);
lt_status lt_config_load_env(lt_config *c, char *const *envp, char *err, size_t errlen);
/* "section.key=value" (the section is everything before the last dot). */
lt_status lt_config_set_arg(lt_config *c, const char *assignment, const char *origin,
                            char *err, size_t errlen);
lt_status lt_config_set(lt_config *c, const char *section, const char *key, const char *value,
                        lt_config_source src, const char *origin, char *err, size_t errlen);

/* Checks every set key is declared (suggesting the nearest declared key or
 * section) and every value parses as its type. One message for the first problem. */
lt_status lt_config_validate(const lt_config *c, char *err, size_t errlen);

/* Lookups: the value set or the declared default; NULL when neither. */
const char *lt_config_value(const lt_config *c, const char *section, const char *key);
/* Where the value came from: "default", "file:line", "env NAME", "flag --x". */
const char *lt_config_origin(const lt_config *c, const char *section, const char *key);
lt_config_source lt_config_source_of(const lt_config *c, const char *section, const char *key);
/* Typed readers; LT_ERR_INVALID with a message naming key, value and origin
 * when the value does not parse. */
lt_status lt_config_int(const lt_config *c, const char *section, const char *key, int64_t *out,
                        char *err, size_t errlen);
lt_status lt_config_float(const lt_config *c, const char *section, const char *key, double *out,
                          char *err, size_t errlen);
lt_status lt_config_bool(const lt_config *c, const char *section, const char *key, bool *out,
                         char *err, size_t errlen);

/* Every declared or set key, sorted by section then key: "section.key = value  (origin)". */
void lt_config_print(const lt_config *c, FILE *out);
/* Iterate the values set in one section (for hook overrides in [strategy]). */
typedef void (*lt_config_visit_fn)(void *user, const char *key, const char *value,
                                   const char *origin);
void lt_config_each(const lt_config *c, const char *section, lt_config_visit_fn fn, void *user);
/* Sections that were set but never declared, e.g. "strategy.dpp" (for loading
 * the plugins they name before validate). */
void lt_config_each_section(const lt_config *c, void (*fn)(void *user, const char *section),
                            void *user);

/* Levenshtein distance, for "did you mean" suggestions anywhere in the core. */
int lt_edit_distance(const char *a, const char *b);

#endif
