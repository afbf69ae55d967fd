/* The trainer's settings, resolved once from the config when the trainer is
 * made (lt_trainer_new): typed structs per subsystem, so setup and the loops
 * read fields and never go back to the config by key. Checks that need one
 * key alone live in the config's declarations (config/config.c); the ones
 * here relate keys to each other or parse a key's text. */
#ifndef LT_TRAINER_OPTIONS_H
#define LT_TRAINER_OPTIONS_H

#include "lt/module.h"
#include "config/config.h"

typedef struct lt_loop_options {
    int64_t max_epochs;       /* INT64_MAX for -1 (no limit) */
    int64_t max_steps;        /* -1: no limit */
    int64_t min_epochs;
    int64_t accumulate;       /* accumulate_grad_batches */
    double clip_val;          /* gradient_clip_val; 0: off */
    bool clip_by_value;       /* gradient_clip_algorithm = value (else norm) */
    /* [0, 1]: a fraction; > 1: batches; < 0: -batches, written as an integer */
    double limit_train, limit_val, limit_test;
    char limit_train_said[192], limit_val_said[192]; /* "1 (--set)": as given, for messages */
    int64_t check_val_every;
    int64_t log_every;
    int64_t flush_every;      /* flush_logs_every_n_steps: metrics.csv written */
    int64_t num_sanity_val;
    bool progress_bar;
    int num_nodes;
    char seed[32];            /* trainer.seed as given; "" = none */
    char seed_origin[320];    /* where trainer.seed came from, for messages */
} lt_loop_options;

typedef struct lt_data_options {
    char dir[1024];           /* Fashion-MNIST's idx files (modules may bring their own data) */
    char dir_origin[320];
    char cache_dir[512];      /* data.cache_dir as set ("auto", "none" or a directory) */
    double mean, std;         /* normalisation */
    int64_t batch_size, val_batch_size;
    int64_t val_split;        /* samples held out of the training set */
    int num_classes;          /* the built-in reader's labels lie in [0, num_classes) */
    bool shuffle, drop_last;
    int prefetch;             /* batches the loader keeps ready, >= 2 */
} lt_data_options;

typedef struct lt_ckpt_options {
    bool enabled;             /* trainer.enable_checkpointing */
    char dir[1024];           /* checkpoint.dirpath, or <default_root_dir>/checkpoints */
    char monitor[64];
    char monitor_origin[320]; /* where checkpoint.monitor came from, for messages */
    bool monitor_max;
    bool save_last;
    int64_t save_top_k;
    bool strict;              /* checkpoint.strict: a loaded file's tensors must be the model's */
} lt_ckpt_options;

typedef struct lt_log_options {
    char root_dir[1024];      /* trainer.default_root_dir */
    bool csv;
    char name[128];           /* logger.name; "lt_logs" when empty */
    char version[64];         /* logger.version; "" = next free version_N */
} lt_log_options;

typedef struct lt_optim_options {
    lt_optim_config cfg;      /* before the module's configure_optimizers */
    char lr_scaling[16];      /* none | linear | sqrt */
    int64_t reference_batch;  /* <= 0: the per-process batch */
    bool fused;               /* optimizer.fused (model_update.c) */
} lt_optim_options;

typedef struct lt_dist_options {
    int64_t timeout_s;        /* strategy.timeout_s: a collective's deadline */
    int64_t rdzv_timeout_s;   /* launcher.rdzv_timeout_s: store and backend connects */
    int64_t stall_timeout_s;  /* launcher.stall_timeout_s: a peer silent this long is named (0: off) */
} lt_dist_options;

typedef struct lt_options {
    lt_loop_options loop;
    lt_data_options data;
    lt_ckpt_options ckpt;
    lt_log_options log;
    lt_optim_options optim;
    lt_dist_options dist;
} lt_options;

/* Fills o from a validated config; one line in err (naming the key, where
 * its value came from, and the fix) when keys disagree or a value's text
 * does not parse. */
lt_status lt_options_read(const lt_config *c, lt_options *o, char *err, size_t errlen);

#endif
