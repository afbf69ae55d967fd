/* Configuration: declared keys with types and defaults, values from the INI
 * file, LT_<SECTION>__<KEY> environment variables and the command line, each
 * remembering where it came from. Precedence: default < file < env < flag.
 *
 * Sections: [trainer] [model] [data] [optimizer] [scheduler] [checkpoint]
 * [logger] [launcher] [strategy] [precision] [environment] [backend]
 * [accelerator] and
 * [<kind>.<name>] for one plugin's parameters. Keys are validated against the
 * declarations; an unknown one is an error suggesting the nearest known key.
 * [model] accepts any key until a key is declared in it (the module's
 * parameters, when the trainer loads it), then only the declared ones.
 *
 * Section and key names are case-insensitive (stored lowercased); values are
 * kept verbatim except that surrounding whitespace and one pair of surrounding
 * double quotes are removed. Not thread-safe: build the config on one thread,
 * then share it read-only. */
#ifndef LT_CONFIG_H
#define LT_CONFIG_H

#include <stdio.h>
#include "lt/core.h"

typedef struct lt_config lt_config;

typedef enum lt_config_source {
    LT_SRC_DEFAULT = 0,
    LT_SRC_FILE = 1,
    LT_SRC_ENV = 2,
    LT_SRC_FLAG = 3,
} lt_config_source;

/* A new config with every core key declared (trainer.*, data.* ...); NULL
 * when out of memory. */
lt_config *lt_config_new(void);
void lt_config_free(lt_config *c);

/* Declares section.key (section may contain a dot: "strategy.ddp"). Declaring
 * the same key twice with the same type is allowed (the later default wins
 * when no value was set); another type is LT_ERR_INVALID. `open` sections
 * accept any key (hook overrides); the first key declared in [model] closes
 * it (see the top comment). */
lt_status lt_config_declare(lt_config *c, const char *section, const char *key,
                            lt_param_type type, const char *def, const char *help);
lt_status lt_config_declare_section(lt_config *c, const char *section, bool open);

/* Values. Each records its source and origin ("train.ini:12",
 * "env LT_TRAINER__MAX_EPOCHS", "--set trainer.max_epochs=3", "flag --devices").
 * A value from a lower-precedence source never replaces one from a higher.
 * Undeclared keys are kept and reported by validate.
 *
 * load_ini: errors name the file and line (syntax, key outside a section) or
 * the path and errno text (cannot open or read). Changes inih's global
 * options for the duration of the call (so lines of any length parse), so do
 * not parse INI files on another thread at the same time.
 * load_env: envp NULL means the process environment. Only LT_* variables
 * whose name has a "__" are config; LT_A__B__C is a.b.c. */
lt_status lt_config_load_ini(lt_config *c, const char *path, char *err, size_t errlen);
lt_status lt_config_load_env(lt_config *c, char *const *envp, char *err, size_t errlen);
/* "section.key=value" (the section is everything before the last dot). Source
 * is LT_SRC_FLAG; origin NULL means "--set <assignment>". */
lt_status lt_config_set_arg(lt_config *c, const char *assignment, const char *origin,
                            char *err, size_t errlen);
/* origin NULL means "default", "file", "env" or "flag" by source. */
lt_status lt_config_set(lt_config *c, const char *section, const char *key,
                        const char *value, lt_config_source src, const char *origin,
                        char *err, size_t errlen);

/* Checks every set key is declared (suggesting the nearest declared key or
 * section), every value parses as its type, and every value of a core key
 * with fixed choices or a range (checkpoint.mode, launcher.master_port ...)
 * is one of them or within it. One message for the first problem, in the
 * order the values were set: "checkpoint.mode = 'maxx' (--set ...) is not
 * allowed; use min or max". */
lt_status lt_config_validate(const lt_config *c, char *err, size_t errlen);

/* Lookups: the value set or the declared default; NULL when neither. */
const char *lt_config_value(const lt_config *c, const char *section, const char *key);
/* Where the value came from: "default", "file:line", "env NAME", "flag --x";
 * NULL for a key neither declared nor set. */
const char *lt_config_origin(const lt_config *c, const char *section, const char *key);
lt_config_source lt_config_source_of(const lt_config *c, const char *section,
                                     const char *key);
/* The help line of a declared key; NULL when undeclared or without help. */
const char *lt_config_help(const lt_config *c, const char *section, const char *key);
/* Typed readers; LT_ERR_INVALID with a message naming key, value and origin
 * when the value does not parse, LT_ERR_NOT_FOUND when there is no value.
 * Bools: true/false, yes/no, on/off, 1/0 (any case). Floats must be finite. */
lt_status lt_config_int(const lt_config *c, const char *section, const char *key,
                        int64_t *out, char *err, size_t errlen);
lt_status lt_config_float(const lt_config *c, const char *section, const char *key,
                          double *out, char *err, size_t errlen);
lt_status lt_config_bool(const lt_config *c, const char *section, const char *key,
                         bool *out, char *err, size_t errlen);

/* Every declared or set key, sorted by section then key: "section.key = value  (origin)". */
void lt_config_print(const lt_config *c, FILE *out);
/* Iterate the values set in one section (for hook overrides in [strategy]),
 * in the order they were first set; defaults are not visited. */
typedef void (*lt_config_visit_fn)(void *user, const char *key, const char *value,
                                   const char *origin);
void lt_config_each(const lt_config *c, const char *section, lt_config_visit_fn fn,
                    void *user);
/* Sections that were set but never declared, e.g. "strategy.dpp" (for loading
 * the plugins they name before validate). */
void lt_config_each_section(const lt_config *c,
                            void (*fn)(void *user, const char *section), void *user);

/* plugin_params.c: the section a plugin's parameter is read from (into sec,
 * "module.fashion_mnist_mlp" or "model"), for messages that say where its
 * value came from; false when neither section has a value. */
bool lt_param_section(const lt_ctx *ctx, const char *key, char *sec, size_t len);
/* plugin_params.c: the plugin's parameters (its lt_param_spec table) whose
 * value the user set, with where: "model.hidden = 0 (--set), model.dropout
 * = -1 (train.ini:12)", for a plugin's refusal that names a key but cannot
 * know its origin. Empty ("", 0) when all are defaults; returns the length. */
size_t lt_param_set_list(const lt_ctx *ctx, char *out, size_t len);

#endif
