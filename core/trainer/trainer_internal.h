/* The trainer: a run plus the data and loops around it. */
#ifndef LT_TRAINER_INTERNAL_H
#define LT_TRAINER_INTERNAL_H

#include "run_internal.h"
#include "data/data_internal.h"

struct lt_trainer {
    lt_run run;
    char summary[2048];
    bool worker_ready;       /* setup_worker ran */
    bool setup_tried;        /* setup_worker started (it is not tried twice) */
    bool data_open;
    double *spawn_params;    /* ddp_spawn: rank 0's final parameters */
    size_t spawn_nparams;
    bool in_spawn_child;     /* a worker forked by lt_trainer_fit_spawn */
    bool quiet;              /* no start-up lines (ddp_spawn's parent after the workers) */
    bool fit_done;
    bool validated;          /* a validation loop ran (not the sanity check) */
    lt_dataset train_ds, val_ds, test_ds;
    lt_dataset train_base;   /* owner of the train/val views */
    lt_loader *train_loader, *val_loader, *test_loader;
    lt_options opt;          /* resolved from the config in lt_trainer_new */
    lt_launch_info launch_info; /* the same, for ltrun and ddp_spawn */
    char *config_text;       /* the resolved config as config.txt shows it */
    const lt_plugin_header *spawn_eval; /* ddp_spawn: single_device, for the parent's evaluation */
    char log_dir[1024];      /* <root>/lt_logs/version_N, rank 0 */
    char ckpt_path[1024];    /* resume from here (--ckpt-path); "last"/"best" until a loop resolves it */
    bool ckpt_fresh;         /* --ckpt-path last found no checkpoint: fit starts fresh */
    int ckpt_lock_fd;        /* checkpoint.dirpath's lock file; -1: not claimed */
    bool earlier_kept;       /* lt_checkpoint_keep_earlier ran (before the first save) */
    double best_score;
    bool has_best;
    double sample_rate;      /* last epoch's samples/s */
    int requeue_signal;      /* environment's auto_requeue: the signal (0: off) */
    char requeue_command[512];
    bool preempted;          /* fit stopped on it (or on elastic_stop): saved, requeued */
    bool elastic;            /* ltrun --nnodes MIN:MAX started this worker (LT_ELASTIC): SIGUSR2 stops it */
    bool world_changed;      /* the resumed checkpoint was saved on another world size (checkpoint.c) */
    bool warned_nonfinite;   /* a training metric's epoch value was NaN or Inf: said once */
    bool flush_failed;       /* the run's failure is metrics.csv's flush: not tried again after it */
};

/* trainer_worker.c */
lt_status lt_trainer_setup_worker(lt_trainer *t);
lt_status lt_trainer_open_data(lt_trainer *t);
/* trainer_spawn.c: ddp_spawn's fit in the launching process. */
lt_status lt_trainer_fit_spawn(lt_trainer *t);
/* trainer_fit.c */
lt_status lt_trainer_eval_loop(lt_trainer *t, int stage, lt_loader *l, double limit, bool sanity);
/* model_check.c: a module's init refused (st): "model 'x': init failed:
 * <the model's or the plugin's message>; parameters set: model.hidden = 0
 * (--set)", so the refusal says where the values came from. Returns st. */
lt_status lt_run_init_failed(lt_run *r, const lt_ctx *ctx, const lt_model *m, lt_status st);
/* trainer_fit.c: a limit in [0, 1] is a fraction of n batches, above 1 a
 * count, below 0 a count written as an integer (options.h). */
int64_t lt_limit_batches(int64_t n, double limit);
/* monitor.c: checkpoint.monitor. check: before the first step, refuses a
 * validation metric this fit never logs (nb: batches per epoch). missing:
 * the metric is absent at an epoch's end; *skip when it may still come. */
bool lt_monitor_used(const lt_trainer *t);
lt_status lt_monitor_check(lt_trainer *t, int64_t nb);
lt_status lt_monitor_missing(lt_trainer *t, bool *skip);
/* preempt.c: auto_requeue, and elastic ltrun's stop. install: the
 * handlers (worker setup). check: at a step boundary, whether any rank got
 * a signal (every step alone, every 10 with others: one allreduce of two
 * flags); then rank 0 saves last (and, pre-empted, runs the requeue
 * command), and fit ends (t->preempted). */
void lt_preempt_install(lt_trainer *t);
lt_status lt_preempt_check(lt_trainer *t);
/* precision_check.c: the precision plugin's dtypes (r->dtypes) are a
 * combination the core runs, and the accelerator runs every kernel a step
 * needs in them (an error names the missing kernel). Before the model. */
lt_status lt_precision_check_dtypes(lt_run *r, const lt_kernels *k);
/* checkpoint.c */
lt_status lt_checkpoint_save(lt_trainer *t, const char *path);
/* fit: training follows (resuming: the temp files of killed writers of
 * path go first; a weights-only file's message says training starts at 0). */
lt_status lt_checkpoint_load(lt_trainer *t, const char *path, bool fit);
/* Opens path and checks its metadata (lt_checkpoint_read_meta, and lt.model
 * against this run's model): the checkpoint's seed, *found false for a
 * weights-only file. Errors through the run's slot, open errors prefixed
 * "--ckpt-path: ". For --check and the worker's seed, before the model. */
lt_status lt_checkpoint_peek(lt_trainer *t, const char *path, uint64_t *seed, bool *found);
/* t->ckpt_path "last" / "best" -> that file in checkpoint.dirpath; for fit a
 * missing last leaves ckpt_path empty and sets ckpt_fresh. Before setup. */
lt_status lt_checkpoint_resolve(lt_trainer *t, bool fit);
/* Rank 0 only: removes the temp files of killed writers of path, or with
 * path NULL of the run's last and best checkpoints. Never fails the run. */
void lt_checkpoint_clean_temps(lt_trainer *t, const char *path);
/* checkpoint_meta.c: the trainer state in a checkpoint's metadata. full is
 * false for a file without lt's format tag (weights only; nothing else is
 * read). The strings live until lt_st_close. */
#define LT_CKPT_FORMAT "lt-checkpoint-1"
struct lt_st_file; /* io/safetensors.h */
typedef struct lt_ckpt_meta {
    bool full;
    const char *model, *optimizer, *precision, *precision_state, *monitor;
    int64_t epoch, batch_in_epoch, global_step, optimizer_step;
    uint64_t seed;
    int world_size;    /* the ranks that saved it; 0: not recorded (older lt) */
    bool has_best;     /* lt.best_score was set: the monitor's best so far */
    double best_score;
} lt_ckpt_meta;
/* Every lt.* value checked for type and range: one line naming the file,
 * the key, the value and the fix in err (LT_ERR_CORRUPT; LT_ERR_UNSUPPORTED
 * for another lt format). */
lt_status lt_checkpoint_read_meta(const struct lt_st_file *f, const char *path, lt_ckpt_meta *m,
                                  char *err, size_t errlen);
/* lt.model is this run's model; another's is refused (LT_ERR_MISMATCH,
 * through the run's slot) unless checkpoint.strict = false, which warns
 * when `warn`. */
lt_status lt_checkpoint_check_model(lt_trainer *t, const char *path, const lt_ckpt_meta *m,
                                    bool warn);
/* A checkpoint tensor against the parameter p it loads into (dtype dt):
 * LT_OK, or LT_ERR_MISMATCH naming the file, tensor, both shapes and
 * dtypes, and the fix (saved_precision: its lt.precision, NULL if none). */
struct lt_st_tensor;
lt_status lt_checkpoint_match_tensor(lt_run *r, const char *path, const struct lt_st_tensor *t,
                                     const lt_param *p, lt_dtype dt, const char *saved_precision);
/* trainer_worker.c: the image and label files of one split of data.dir
 * ("train", "t10k"), each gzip or plain (lt_idx_find); a missing file or a
 * data.dir that is not a directory fails naming the key, its origin and
 * the fix. */
lt_status lt_trainer_split_paths(lt_trainer *t, const char *split, char img[1200], char lab[1200]);
/* checkpoint_keep.c: before the first save of a fit that does not resume
 * from checkpoint.dirpath's last or best itself, renames them to the
 * lowest free last-vN/best-vN (rank 0 only). */
lt_status lt_checkpoint_keep_earlier(lt_trainer *t);
/* Rank 0 of a fit that saves: creates checkpoint.dirpath and claims it for
 * this trainer (a lock file), refusing a directory another live run holds
 * or one it cannot write into (LT_ERR_INVALID). Released by
 * lt_checkpoint_release_dir (as lt_trainer_fit returns; lt_trainer_free) or
 * the process's end. */
lt_status lt_checkpoint_claim_dir(lt_trainer *t);
void lt_checkpoint_release_dir(lt_trainer *t);
/* log_dir.c */
/* mkdir -p; the error names `key`, the setting that chose the path. */
lt_status lt_mkdirs(lt_run *r, const char *path, const char *key);
lt_status lt_logdir_prepare(lt_trainer *t);
/* metrics.csv brought up to date (rank 0; appends what is new). */
lt_status lt_logdir_flush(lt_trainer *t);
/* The same after a failed fit, when a log directory exists: the run's error
 * stays the failure's (a write error is a warning). */
void lt_logdir_flush_after_failure(lt_trainer *t);
/* progress.c */
void lt_progress_update(lt_trainer *t, int64_t batch, int64_t nbatches, double loss, bool force);
void lt_progress_end_epoch(lt_trainer *t, double seconds, int64_t samples);

#endif
