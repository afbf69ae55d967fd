/* Stopping at a step boundary with last.safetensors saved, for two callers:
 * - pre-emption (Lightning's SLURMEnvironment auto_requeue): a job told by
 *   its scheduler that it will be stopped (sbatch --signal=USR1@90) saves,
 *   requeues itself and ends; the requeued job resumes with --ckpt-path last;
 * - elastic ltrun (--nnodes MIN:MAX, LT_ELASTIC in the environment): when a
 *   node wants to join, every launcher sends its workers SIGUSR2; they save
 *   and exit 0 with phase STOPPED, and the launchers re-form the job with
 *   the new node, resuming from that file (core/ltrun/elastic.c).
 * Every rank gets its signal, not necessarily during the same step, so the
 * ranks agree through one allreduce of the flags every few steps and stop
 * at the same step. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trainer_internal.h"

#define CHECK_EVERY 10 /* steps between agreements with other ranks */

static volatile sig_atomic_t g_requeue, g_elastic;

static void on_requeue(int sig) {
    (void)sig;
    g_requeue = 1;
}

static void on_elastic(int sig) {
    (void)sig;
    g_elastic = 1;
}

static void install(int sig, void (*fn)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, NULL);
}

void lt_preempt_install(lt_trainer *t) {
    const char *e = getenv("LT_ELASTIC");
    t->elastic = e && !strcmp(e, "1") && t->run.status_slot; /* only under ltrun, which sends it */
    if (t->elastic) install(SIGUSR2, on_elastic);
    if (t->requeue_signal) install(t->requeue_signal, on_requeue); /* after: a requeue_signal = USR2 wins */
}

static lt_status save_last(lt_trainer *t, char *path, size_t n) {
    snprintf(path, n, "%s/last.safetensors", t->opt.ckpt.dir);
    LT_CHECK(lt_mkdirs(&t->run, t->opt.ckpt.dir, "checkpoint.dirpath (or trainer.default_root_dir)"));
    return lt_checkpoint_save(t, path);
}

lt_status lt_preempt_check(lt_trainer *t) {
    lt_run *r = &t->run;
    if (!t->requeue_signal && !t->elastic) return LT_OK;
    double flags[2] = {g_requeue, g_elastic};
    if (r->world.world_size > 1) {
        if (r->global_step % CHECK_EVERY) return LT_OK;
        lt_status st = LT_STRAT(r)->reduce(&r->strategy.ctx, r, flags, 2, LT_F64, LT_MAX);
        if (st != LT_OK) return lt_run_hook_failed(r, &r->strategy, "reduce (pre-emption flags)", st);
    }
    if (flags[0] == 0 && flags[1] == 0) return LT_OK;
    t->preempted = true;
    if (r->world.global_rank != 0) return LT_OK;
    char path[1200];
    LT_CHECK(save_last(t, path, sizeof path));
    fflush(stdout);
    if (flags[0] == 0) { /* the elastic launcher asked: no requeue, it re-forms the job itself */
        printf("lt: stopped at step %lld for a change of nodes: saved %s\n", (long long)r->global_step, path);
        fflush(stdout);
        return LT_OK;
    }
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
