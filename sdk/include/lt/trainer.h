/* The Trainer, for programs that embed lt instead of calling ltrun:
 *
 *     lt_trainer_args a = { .struct_size = sizeof a, .config_path = "train.ini" };
 *     lt_trainer *t;
 *     if (lt_trainer_new(&a, &t, err, sizeof err) != LT_OK) { puts(err); return 1; }
 *     if (lt_trainer_fit(t) != LT_OK) puts(lt_trainer_error(t));
 *     lt_trainer_test(t);
 *     lt_trainer_free(t);
 *
 * One trainer per process at a time; all calls on one thread. */
#ifndef LT_TRAINER_H
#define LT_TRAINER_H

#include "lt/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lt_trainer lt_trainer;

typedef struct lt_trainer_args {
    uint32_t struct_size;            /* sizeof(lt_trainer_args) */
    const char *config_path;         /* INI file or NULL */
    const char *const *sets;         /* "section.key=value", command-line precedence */
    int nsets;
    const char *const *set_origins;  /* NULL or one origin text per set ("--devices") */
    const char *const *plugin_dirs;  /* searched first, in order */
    int nplugin_dirs;
    bool ignore_env;                 /* true: do not read LT_<SECTION>__<KEY> variables */
} lt_trainer_args;

/* Resolves the config, loads and validates every plugin it names. */
LT_API lt_status lt_trainer_new(const lt_trainer_args *args, lt_trainer **out, char *err,
                                size_t errlen);
/* Resume (fit) or load weights (validate/test) from a checkpoint, like
 * Lightning's fit(ckpt_path=...). Checked when the loop starts. "last" and
 * "best" name last.safetensors / best.safetensors in the run's checkpoint
 * directory; fit with "last" when there is none yet starts fresh. A file
 * without lt's trainer state (weights only, as safetensors.torch.save_file
 * writes them) gives the parameters; fit then starts at step 0. */
LT_API lt_status lt_trainer_set_ckpt_path(lt_trainer *t, const char *path);
LT_API lt_status lt_trainer_fit(lt_trainer *t);
LT_API lt_status lt_trainer_validate(lt_trainer *t);
LT_API lt_status lt_trainer_test(lt_trainer *t);
/* The message of the last failure, one line. */
LT_API const char *lt_trainer_error(const lt_trainer *t);
/* Last epoch-level value of a logged metric ("val_acc", "test_loss"). */
LT_API bool lt_trainer_metric(const lt_trainer *t, const char *name, double *value);
/* Copies the trained parameters (flat, registration order) as f64 into out
 * (count elements); *total receives the number of parameters. */
LT_API lt_status lt_trainer_params(lt_trainer *t, double *out, size_t count, size_t *total);
/* Prints every resolved key with its value and origin. */
LT_API void lt_trainer_print_config(const lt_trainer *t, void *file /* FILE* */);
/* A one-paragraph summary of the chosen plugins (for ltrun). */
LT_API const char *lt_trainer_summary(const lt_trainer *t);
LT_API void lt_trainer_free(lt_trainer *t);

#ifdef __cplusplus
}
#endif
#endif
