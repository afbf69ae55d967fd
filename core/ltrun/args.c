/* Flags: Lightning's Trainer arguments as --kebab-case, torchrun's names as
 * aliases, and --set for anything else. Each becomes a config assignment at
 * command-line precedence, remembering the flag it came from. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "common/text.h"
#include "config/config.h"

typedef struct flag_map {
    const char *flag;
    const char *key; /* section.key */
} flag_map;

static const flag_map flags[] = {
    {"--accelerator", "trainer.accelerator"},
    {"--devices", "trainer.devices"},
    {"--strategy", "trainer.strategy"},
    {"--num-nodes", "trainer.num_nodes"},
    {"--precision", "trainer.precision"},
    {"--max-epochs", "trainer.max_epochs"},
    {"--max-steps", "trainer.max_steps"},
    {"--seed", "trainer.seed"},
    {"--default-root-dir", "trainer.default_root_dir"},
    {"--accumulate-grad-batches", "trainer.accumulate_grad_batches"},
    {"--log-level", "trainer.log_level"},
    {"--model", "model.name"},
    {"--batch-size", "data.batch_size"},
    {"--data-dir", "data.dir"},
    {"--node-rank", "launcher.node_rank"},
    {"--master-addr", "launcher.master_addr"},
    {"--master-port", "launcher.master_port"},
    {"--max-restarts", "launcher.max_restarts"},
    /* torchrun's names */
    {"--nnodes", "trainer.num_nodes"},
    {"--nproc-per-node", "trainer.devices"},
    {"--nproc_per_node", "trainer.devices"},
    {"--node_rank", "launcher.node_rank"},
    {"--master_addr", "launcher.master_addr"},
    {"--master_port", "launcher.master_port"},
    {"--max_restarts", "launcher.max_restarts"},
    {"--rdzv-endpoint", "launcher.rdzv_endpoint"},
    {"--rdzv_endpoint", "launcher.rdzv_endpoint"},
    {"--rdzv-id", "launcher.rdzv_id"},
    {"--rdzv_id", "launcher.rdzv_id"},
    {"--rdzv-backend", "launcher.rdzv_backend"},
    {"--rdzv_backend", "launcher.rdzv_backend"},
};

void ltrun_usage(void) {
    printf("usage: ltrun [options]\n"
           "Trains a model with lt's Trainer; every option is also a config key.\n\n"
           "  --config FILE            INI file ([trainer], [model], [data], [optimizer] ...)\n"
           "  --plugin-dir DIR         search DIR for plugins first (repeatable)\n"
           "  --set SECTION.KEY=VALUE  any config value (repeatable)\n"
           "  --accelerator A          cpu | gpu | auto\n"
           "  --devices D              3 | -1 | \"1, 3\" | [0] | auto\n"
           "  --strategy S             auto | single_device | ddp | ddp_spawn | ...\n"
           "  --num-nodes N            number of nodes (torchrun: --nnodes)\n"
           "  --nnodes MIN:MAX         elastic: start with MIN..MAX nodes, re-form when one dies or joins\n"
           "  --rdzv-endpoint HOST:PORT  the rendezvous, hosted by the node with that address (with\n"
           "                           --nnodes N: node 0's, as --master-addr and --master-port)\n"
           "  --rdzv-id ID             elastic: the job's id (nodes of another job are refused)\n"
           "  --node-rank R            this node's rank (--node_rank)\n"
           "  --master-addr A          node 0's address (--master_addr)\n"
           "  --master-port P          rendezvous port (--master_port); 0 = pick a free one\n"
           "  --max-restarts N         restart the group from the last checkpoint N times\n"
           "  --nproc-per-node N       torchrun's name for --devices\n"
           "  --precision P            32-true | 64-true | ...\n"
           "  --max-epochs N, --max-steps N, --seed S, --batch-size B, --model NAME\n"
           "  --accumulate-grad-batches N, --default-root-dir DIR, --data-dir DIR, --log-level L\n"
           "  --ckpt-path FILE         resume training (or evaluate) from a checkpoint; last or best:\n"
           "                           that file in the checkpoint dir (a missing last: start fresh)\n"
           "  --validate | --test      only evaluate (with --ckpt-path: those weights)\n"
           "  --no-test                fit only, skip the test set afterwards\n"
           "  --check                  load and validate every plugin and the config, then exit\n"
           "  --print-config           print every resolved key, its value and its origin\n"
           "  --list-plugins           list plugins found (kind, name, version, base, path)\n"
           "  --help-plugin NAME       a plugin's parameters and defaults\n"
           "  --version, --help\n\n"
           "Environment: LT_<SECTION>__<KEY>=value sets config keys (e.g. LT_TRAINER__MAX_EPOCHS=5);\n"
           "LT_PLUGIN_PATH adds plugin directories (colon-separated, each must exist);\n"
           "LT_RDZV_TOKEN guards the rendezvous store.\n"
           "Exit status, whichever process (ltrun, a worker, torchrun's or srun's) found it:\n"
           "  0    done\n"
           "  2    refused: the command line, the config, a plugin or an input they name (a\n"
           "       checkpoint, the launcher's world size) does not work; fix it and run again\n"
           "       (--max-restarts does not restart a worker that refused before training)\n"
           "  1    any other failure: data, I/O, a timeout, a rank lost (exited or killed by a\n"
           "       signal; ltrun's message names the rank and the signal)\n"
           "  130, 143, 129  ltrun itself got SIGINT, SIGTERM, SIGHUP (passed on to the workers)\n");
}

static int add_set(ltrun_args *a, const char *assignment, const char *origin, bool own) {
    if (a->nsets >= LTRUN_MAX) {
        fprintf(stderr, "ltrun: error: too many settings (more than %d)\n", LTRUN_MAX);
        if (own) free((char *)assignment); /* not in owned[]: ltrun_args_free would miss it */
        return 2;
    }
    if (own) a->owned[a->nowned++] = (char *)assignment;
    a->sets[a->nsets] = assignment;
    a->origins[a->nsets++] = origin;
    return 0;
}

static const char *need_value(int argc, char **argv, int *i, const char *flag) {
    const char *eq = strchr(argv[*i], '=');
    if (eq) return eq + 1;
    if (*i + 1 >= argc) {
        fprintf(stderr, "ltrun: error: %s needs a value; see ltrun --help\n", flag);
        return NULL;
    }
    return argv[++*i];
}

static bool flag_is(const char *arg, const char *flag) {
    size_t n = strlen(flag);
    return !strncmp(arg, flag, n) && (arg[n] == 0 || arg[n] == '=');
}

static int parse_mapped(int argc, char **argv, int *i, ltrun_args *a, bool *matched) {
    for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++) {
        if (!flag_is(argv[*i], flags[f].flag)) continue;
        *matched = true;
        const char *v = need_value(argc, argv, i, flags[f].flag);
        if (!v) return 2;
        /* torchrun's --nnodes MIN:MAX: elastic nodes, a key of their own */
        const char *key = strchr(v, ':') && !strcmp(flags[f].key, "trainer.num_nodes") ? "launcher.nnodes" : flags[f].key;
        size_t n = strlen(key) + strlen(v) + 2;
        char *s = malloc(n);
        if (!s) return 2;
        snprintf(s, n, "%s=%s", key, v);
        return add_set(a, s, flags[f].flag, true);
    }
    return 0;
}

static const char *suggest_flag(const char *arg) {
    static const char *known[] = {"--config", "--plugin-dir", "--set", "--ckpt-path", "--validate",
                                  "--test", "--no-test", "--check", "--print-config",
                                  "--list-plugins", "--help-plugin", "--version", "--help"};
    const char *best = NULL;
    int bd = INT_MAX;
    char name[128];
    snprintf(name, sizeof name, "%s", arg);
    char *eq = strchr(name, '=');
    if (eq) *eq = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        int d = lt_edit_distance(name, known[i]);
        if (d < bd) { bd = d; best = known[i]; }
    }
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        int d = lt_edit_distance(name, flags[i].flag);
        if (d < bd) { bd = d; best = flags[i].flag; }
    }
    return best && lt_close_enough(name, bd) ? best : NULL;
}

/* One key set through two spellings with two values (--devices 2
 * --nproc-per-node 3, --num-nodes 3 --nnodes 2, --set trainer.devices=3
 * --devices 2) is a contradiction, not an override: refused. The same
 * spelling repeated is an override, the last winning, as argparse does. */
static int check_contradictions(const ltrun_args *a) {
    for (int i = 0; i < a->nsets; i++)
        for (int j = i + 1; j < a->nsets; j++) {
            const char *x = a->sets[i], *y = a->sets[j], *ex = strchr(x, '='), *ey = strchr(y, '=');
            if (ex - x != ey - y || strncmp(x, y, (size_t)(ex - x)) || !strcmp(ex, ey) ||
                !strcmp(a->origins[i], a->origins[j]))
                continue;
            bool sx = !strcmp(a->origins[i], "--set"), sy = !strcmp(a->origins[j], "--set");
            fprintf(stderr, "ltrun: error: %.*s is given twice on the command line, as %s %s and %s %s; keep one\n",
                    (int)(ex - x), x, a->origins[i], sx ? x : ex + 1, a->origins[j], sy ? y : ey + 1);
            return 2;
        }
    /* --no-test only changes what follows a fit, so it goes with either */
    if (a->validate_only && a->test_only) {
        fprintf(stderr, "ltrun: error: --validate and --test contradict each other (each only evaluates, on "
                        "its own set); give one, or neither to fit\n");
        return 2;
    }
    return 0;
}

int ltrun_parse_args(int argc, char **argv, ltrun_args *a) {
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *v;
        bool matched = false;
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) a->help = true;
        else if (!strcmp(arg, "--version")) a->version = true;
        else if (!strcmp(arg, "--list-plugins")) a->list_plugins = true;
        else if (!strcmp(arg, "--print-config")) a->print_config = true;
        else if (!strcmp(arg, "--check")) a->check_only = true;
        else if (!strcmp(arg, "--no-test")) a->no_test = true;
        else if (!strcmp(arg, "--validate")) a->validate_only = true;
        else if (!strcmp(arg, "--test")) a->test_only = true;
        else if (flag_is(arg, "--config")) { if (!(a->config = need_value(argc, argv, &i, "--config"))) return 2; }
        else if (flag_is(arg, "--ckpt-path")) { if (!(a->ckpt_path = need_value(argc, argv, &i, "--ckpt-path"))) return 2; }
        else if (flag_is(arg, "--help-plugin")) { if (!(a->help_plugin = need_value(argc, argv, &i, "--help-plugin"))) return 2; }
        else if (flag_is(arg, "--plugin-dir")) {
            if (!(v = need_value(argc, argv, &i, "--plugin-dir"))) return 2;
            if (a->nplugin_dirs >= LTRUN_MAX) { fprintf(stderr, "ltrun: error: too many --plugin-dir\n"); return 2; }
            a->plugin_dirs[a->nplugin_dirs++] = v;
        } else if (flag_is(arg, "--set")) {
            if (!(v = need_value(argc, argv, &i, "--set"))) return 2;
            if (!strchr(v, '=')) {
                fprintf(stderr, "ltrun: error: --set '%s': expected SECTION.KEY=VALUE, e.g. --set trainer.max_epochs=3\n", v);
                return 2;
            }
            if (add_set(a, v, "--set", false)) return 2;
        } else {
            int rc = parse_mapped(argc, argv, &i, a, &matched);
            if (rc) return rc;
            if (!matched) {
                const char *s = suggest_flag(arg);
                size_t n = strlen(arg);
                if (arg[0] != '-' && n > 4 && !strcmp(arg + n - 4, ".ini"))
                    fprintf(stderr, "ltrun: error: unknown option '%s'; a config file is named with "
                            "--config %s\n", arg, arg);
                else if (s) fprintf(stderr, "ltrun: error: unknown option '%s'; did you mean '%s'? (ltrun --help)\n", arg, s);
                else fprintf(stderr, "ltrun: error: unknown option '%s'; see ltrun --help\n", arg);
                return 2;
            }
        }
    }
    /* ltrun's workers get the user's arguments, which ltrun checked, plus its
     * own overrides (--devices from auto_select_gpus, an elastic round's
     * --num-nodes), meant to win over what the user wrote. */
    return getenv("LT_STATUS_FD") ? 0 : check_contradictions(a);
}

void ltrun_args_free(ltrun_args *a) {
    for (int i = 0; i < a->nowned; i++) free(a->owned[i]);
    a->nowned = 0;
}
