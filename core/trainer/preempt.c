/* Pre-emption (Lightning's SLURMEnvironment auto_requeue): a job told by
 * its scheduler that it will be stopped (sbatch --signal=USR1@90) saves
 * last.safetensors at the next step boundary, requeues itself and ends; the
 * requeued job resumes with --ckpt-path last. Every rank gets the signal,
 * not necessarily during the same step, so the ranks agree through one
 * allreduce of a flag every few steps and stop at the same step. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trainer_internal.h"

#define CHECK_EVERY 10 /* steps between agreements with other ranks */

static volatile sig_atomic_t g_signalled;

static void on_signal(int sig) {
    (void)sig;
    g_signalled = 1;
}

void lt_preempt_install(lt_trainer *t) {
    if (!t->requeue_signal) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(t->requeue_signal, &sa, NULL);
}

lt_status lt_preempt_check(lt_trainer *t) {
    lt_run *r = &t->run;
    if (!t->requeue_signal) return LT_OK;
    double flag = g_signalled;
    if (r->world.world_size > 1) {
        if (r->global_step % CHECK_EVERY) return LT_OK;
        lt_status st = LT_STRAT(r)->reduce(&r->strategy.ctx, r, &flag, 1, LT_F64, LT_MAX);
        if (st != LT_OK) return lt_run_hook_failed(r, &r->strategy, "reduce (pre-emption flag)", st);
    }
    if (flag == 0) return LT_OK;
    t->preempted = true;
    if (r->world.global_rank != 0) return LT_OK;
    char path[1200];
    snprintf(path, sizeof path, "%s/last.safetensors", t->opt.ckpt.dir);
    LT_CHECK(lt_mkdirs(r, t->opt.ckpt.dir, "checkpoint.dirpath (or trainer.default_root_dir)"));
    LT_CHECK(lt_checkpoint_save(t, path));
    fflush(stdout);
    int rc = t->requeue_command[0] ? system(t->requeue_command) : 0;
    if (rc != 0)
        return lt_run_fail(r, LT_ERR_IO, "pre-empted: saved %s, but the requeue command `%s` failed (status %d); "
                           "requeue the job by hand and resume with --ckpt-path last", path, t->requeue_command, rc);
    printf("lt: pre-empted (%s): saved %s at step %lld; %s%s%s; resume with --ckpt-path last\n",
           strsignal(t->requeue_signal), path, (long long)r->global_step,
           t->requeue_command[0] ? "requeued with `" : "no environment.requeue_command to requeue with",
           t->requeue_command, t->requeue_command[0] ? "`" : "");
    fflush(stdout);
    return LT_OK;
}
