/* Rank 0's view of progress: a bar on a terminal, plain lines otherwise, and
 * a summary line per epoch. */
#include <math.h>
#include <stdio.h>
#include <unistd.h>
#include "trainer_internal.h"

/* The epoch being shown: its clock starts at its first update, whatever that
 * batch is (accumulate_grad_batches >= 2 reports batch 2 first, a mid-epoch
 * resume batch 31), and the rate counts only the batches since. Kept here
 * because the trainer's struct has no room for it; a new trainer, a new
 * epoch or a batch number going back starts it again. */
static struct {
    const lt_trainer *t;
    int64_t epoch, first_batch, last_batch;
    double t0, last_draw;
} pace;

static double rate_at(const lt_trainer *t, int64_t batch, double now) {
    if (pace.t != t || pace.epoch != t->run.epoch || batch < pace.last_batch) {
        pace.t = t;
        pace.epoch = t->run.epoch;
        pace.first_batch = batch;
        pace.t0 = now;
        pace.last_draw = 0;
    }
    pace.last_batch = batch;
    return now > pace.t0 ? (double)(batch - pace.first_batch) / (now - pace.t0) : 0;
}

void lt_progress_update(lt_trainer *t, int64_t batch, int64_t nbatches, double loss, bool force) {
    lt_run *r = &t->run;
    if (r->world.global_rank != 0 || !t->opt.loop.progress_bar) return;
    double now = lt_now();
    double rate = rate_at(t, batch, now);
    static int tty = -1; /* asked once: not a syscall per step */
    if (tty < 0) tty = isatty(STDOUT_FILENO);
    if (tty) {
        if (!force && now - pace.last_draw < 0.1) return;
        pace.last_draw = now;
        int width = 24, filled = nbatches ? (int)(width * batch / nbatches) : width;
        char bar[32];
        for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
        bar[width] = 0;
        printf("\rEpoch %lld: [%s] %lld/%lld  %.1f it/s  loss %.4f  step %lld ", (long long)r->epoch, bar,
               (long long)batch, (long long)nbatches, rate, loss, (long long)r->global_step);
        if (force) putchar('\n');
        fflush(stdout);
        return;
    }
    if (force || r->global_step % t->opt.loop.log_every != 0) return;
    printf("epoch %lld  batch %lld/%lld  step %lld  loss %.4f  %.1f it/s\n", (long long)r->epoch,
           (long long)batch, (long long)nbatches, (long long)r->global_step, loss, rate);
    fflush(stdout);
}

void lt_progress_end_epoch(lt_trainer *t, double seconds, int64_t samples) {
    lt_run *r = &t->run;
    pace.t = NULL; /* the next epoch starts its own clock */
    t->sample_rate = seconds > 0 ? (double)samples / seconds : 0;
    if (r->world.global_rank != 0) return;
    printf("epoch %lld done: step %lld, %.1f s, %.0f samples/s", (long long)r->epoch,
           (long long)r->global_step, seconds, t->sample_rate * r->world.world_size);
    for (int i = 0; i < r->metrics.n; i++) {
        const lt_metric *m = &r->metrics.m[i];
        if (m->has_epoch && (m->stage == LT_STAGE_FIT || m->stage == LT_STAGE_VALIDATE))
            printf(", %s %.4f", m->name, m->epoch_value);
    }
    printf("\n");
    fflush(stdout);
    /* A diverged run trains on to its last epoch and exits 0, as Lightning's
     * does; it is said once, so a job log shows why nothing was learnt. */
    for (int i = 0; i < r->metrics.n && !t->warned_nonfinite; i++) {
        const lt_metric *m = &r->metrics.m[i];
        if (!m->has_epoch || m->stage != LT_STAGE_FIT || isfinite(m->epoch_value)) continue;
        lt_log(NULL, LT_LOG_WARN, "%s is %s after epoch %lld (step %lld): training diverged and what "
               "follows learns nothing; lower optimizer.lr or set trainer.gradient_clip_val", m->name,
               isnan(m->epoch_value) ? "NaN" : m->epoch_value > 0 ? "Inf" : "-Inf", (long long)r->epoch,
               (long long)r->global_step);
        t->warned_nonfinite = true;
    }
}
