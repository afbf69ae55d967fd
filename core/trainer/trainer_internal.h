/* The trainer: a run plus the data and loops around it. */
#ifndef LT_TRAINER_INTERNAL_H
#define LT_TRAINER_INTERNAL_H

#include "run_internal.h"
#include "data/data_internal.h"

struct lt_trainer {
    lt_run run;
    char summary[2048];
    bool worker_ready;       /* setup_worker ran */
    bool data_open;
    double *spawn_params;    /* ddp_spawn: rank 0's final parameters */
    size_t spawn_nparams;
    bool in_spawn_child;     /* a worker forked by lt_trainer_fit_spawn */
    bool quiet;              /* no start-up lines (ddp_spawn's parent after the workers) */
    bool fit_done;
    lt_dataset train_ds, val_ds, test_ds;
    lt_dataset train_base;   /* owner of the train/val views */
    lt_loader *train_loader, *val_loader, *test_loader;
    lt_options opt;          /* resolved from the config in lt_trainer_new */
    lt_launch_info launch_info; /* the same, for ltrun and ddp_spawn */
    char *config_text;       /* the resolved config as config.txt shows it */
    const lt_plugin_header *spawn_eval; /* ddp_spawn: single_device, for the parent's evaluation */
    char log_dir[1024];      /* <root>/lt_logs/version_N, rank 0 */
    char ckpt_path[1024];    /* resume from here (--ckpt-path) */
    double best_score;
    bool has_best;
    double sample_rate;      /* last epoch's samples/s */
};

/* trainer_worker.c */
lt_status lt_trainer_setup_worker(lt_trainer *t);
lt_status lt_trainer_open_data(lt_trainer *t);
/* trainer_spawn.c: ddp_spawn's fit in the launching process. */
lt_status lt_trainer_fit_spawn(lt_trainer *t);
/* trainer_fit.c */
lt_status lt_trainer_eval_loop(lt_trainer *t, int stage, lt_loader *l, double limit, bool sanity);
/* checkpoint.c */
lt_status lt_checkpoint_save(lt_trainer *t, const char *path);
lt_status lt_checkpoint_load(lt_trainer *t, const char *path);
lt_status lt_checkpoint_peek_seed(const char *path, uint64_t *seed, char *err, size_t errlen);
/* log_dir.c */
/* mkdir -p; the error names `key`, the setting that chose the path. */
lt_status lt_mkdirs(lt_run *r, const char *path, const char *key);
lt_status lt_logdir_prepare(lt_trainer *t);
lt_status lt_logdir_flush(lt_trainer *t);
/* progress.c */
void lt_progress_update(lt_trainer *t, int64_t batch, int64_t nbatches, double loss, bool force);
void lt_progress_end_epoch(lt_trainer *t, double seconds, int64_t samples);

#endif
