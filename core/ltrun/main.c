/* ltrun: resolves the config, loads the plugins it names, and trains. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "dist/launch.h"
#include "launcher.h"
#include "lt/trainer.h"
#include "trainer/model_check.h"

/* Exit statuses, the same whoever started this process (a shell, ltrun,
 * torchrun, srun, mpirun), so a job script can tell "fix the input" from
 * "try again":
 *   0  done;
 *   2  refused: the command line, the config, a plugin or an input named by
 *      them (a checkpoint, a device) does not work, or the pieces do not
 *      agree with each other (the launcher's world size and the config, a
 *      checkpoint and the model, ranks calling different collectives). Run
 *      again unchanged and it fails the same way, so ltrun's launcher does
 *      not restart a worker that exits 2 before training (launcher.c,
 *      cannot_cure) and exits 2 itself when a rank refused;
 *   1  anything else: data or I/O errors, timeouts, a lost rank.
 * ltrun's flag parser returns 2 itself (args.c); EXIT_REFUSED is in args.h. */

int ltrun_exit_status(lt_status st) {
    switch (st) {
    case LT_ERR_INVALID:     /* a value or input that does not work */
    case LT_ERR_NOT_FOUND:   /* a plugin, file or device that is not there */
    case LT_ERR_ABI:         /* a plugin built for another ABI */
    case LT_ERR_UNSUPPORTED: /* a valid request this build or plugin does not do */
    case LT_ERR_MISMATCH:    /* inputs or ranks that disagree: deterministic, not transient */
    case LT_ERR_STATE:       /* a plugin breaking a hook's contract (no default group,
                                no buckets): it fails the same way every time */
        return EXIT_REFUSED;
    default:
        return 1;
    }
}

/* A fatal error: a worker ltrun started hands it to ltrun, which says it
 * once, naming the rank and how far it got (launcher.c); any other process
 * prints it. */
static void say_error(lt_status st, const char *text) {
    if (lt_status_slot_post_error(st, text)) return; /* false without LT_STATUS_FD */
    fprintf(stderr, "ltrun: error: %s\n", text);
}

static int run_stages(lt_trainer *t, const ltrun_args *a) {
    lt_status st = LT_OK;
    if (a->ckpt_path) st = lt_trainer_set_ckpt_path(t, a->ckpt_path);
    if (st == LT_OK && a->validate_only) st = lt_trainer_validate(t);
    else if (st == LT_OK && a->test_only) st = lt_trainer_test(t);
    else if (st == LT_OK) {
        st = lt_trainer_fit(t);
        if (st == LT_OK && !a->no_test) {
            st = lt_trainer_test(t);
            if (st == LT_ERR_UNSUPPORTED) st = LT_OK; /* the model has no test_step */
        }
    }
    if (st != LT_OK) {
        say_error(st, lt_trainer_error(t));
        return ltrun_exit_status(st);
    }
    return 0;
}

int main(int argc, char **argv) {
    /* Line by line even into a file or pipe, so "lt:" progress on stdout and
     * errors on stderr keep their order in a job's combined log. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    ltrun_args a;
    int rc = ltrun_parse_args(argc, argv, &a);
    if (rc) {
        ltrun_args_free(&a); /* a refusal after some flags were copied (two spellings) */
        return rc;
    }
    if (a.help) { ltrun_usage(); return 0; }
    if (a.version) { printf("ltrun %s (plugin ABI %d.%d)\n", LT_VERSION_STRING, LT_ABI_MAJOR, LT_ABI_MINOR); return 0; }
    if (a.list_plugins) return ltrun_list_plugins(&a);
    if (a.help_plugin) return ltrun_help_plugin(&a);

    lt_trainer_args ta = {
        .struct_size = sizeof ta, .config_path = a.config, .sets = a.sets, .nsets = a.nsets,
        .set_origins = a.origins, .plugin_dirs = a.plugin_dirs, .nplugin_dirs = a.nplugin_dirs};
    char err[2048];
    lt_trainer *t;
    lt_status st = lt_trainer_new(&ta, &t, err, sizeof err);
    if (st != LT_OK) {
        say_error(st, err);
        ltrun_args_free(&a);
        return ltrun_exit_status(st);
    }
    if (a.print_config) {
        lt_trainer_print_config(t, stdout);
        lt_trainer_free(t);
        ltrun_args_free(&a);
        return 0;
    }
    lt_launch_info info; /* --nnodes, --node-rank, --rdzv-endpoint: judged for any run */
    st = lt_trainer_launch_info(t, &info);
    if (st != LT_OK) {
        say_error(st, lt_last_error(NULL));
        lt_trainer_free(t);
        ltrun_args_free(&a);
        return ltrun_exit_status(st);
    }
    /* What a run would refuse before training, judged once here: by --check,
     * and before ltrun starts workers, so a bad model parameter or
     * checkpoint is one line and exit 2, not one per rank and the launcher's
     * report. The module's init on a model without weights (model.hidden = 0)
     * and the checkpoint's header add nothing measurable to a start. */
    if (a.check_only || info.launch) {
        st = lt_trainer_check_model(t);
        if (st == LT_OK) st = lt_trainer_check_data(t);
        if (st == LT_OK) st = lt_trainer_check_ckpt(t, a.ckpt_path, !a.validate_only && !a.test_only);
        if (st != LT_OK) {
            say_error(st, lt_trainer_error(t));
            lt_trainer_free(t);
            ltrun_args_free(&a);
            return ltrun_exit_status(st);
        }
    }
    if (a.check_only) {
        printf("ltrun: configuration valid; plugins loaded: %s\n", lt_trainer_summary(t));
        lt_trainer_free(t);
        ltrun_args_free(&a);
        return 0;
    }
    /* ddp and friends: this process only starts and watches the workers,
     * which run this program again and find LOCAL_RANK set. */
    if (info.launch) {
        printf("lt: %s\n", lt_trainer_summary(t));
        lt_trainer_free(t);
        rc = ltrun_launch(&info, argv);
        ltrun_args_free(&a);
        return rc;
    }
    /* A worker ltrun started (LT_STATUS_FD) leaves the summary to ltrun; other
     * launchers' workers print it from rank 0 only. */
    const char *rank = getenv("RANK");
    if (!getenv("LT_STATUS_FD") && (!rank || !*rank || !strcmp(rank, "0")))
        printf("lt: %s\n", lt_trainer_summary(t));
    rc = run_stages(t, &a);
    lt_trainer_free(t);
    ltrun_args_free(&a);
    return rc;
}
