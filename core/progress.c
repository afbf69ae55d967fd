/* Rank 0's view of progress: a bar on a terminal, plain lines otherwise, and
 * a summary line per epoch. */
#include <stdio.h>
#include <unistd.h>
#include "trainer_internal.h"

static double last_draw;
static double epoch_t0;

void lt_progress_update(lt_trainer *t, int64_t batch, int64_t nbatches, double loss, bool force) {
    lt_run *r = &t->run;
    if (r->world.global_rank != 0 || !t->progress_bar) return;
    double now = lt_now();
    if (batch <= 1 || epoch_t0 == 0) { if (batch <= 1) epoch_t0 = now; }
    static int tty = -1; /* asked once: not a syscall per step */
    if (tty < 0) tty = isatty(STDOUT_FILENO);
    double rate = now > epoch_t0 ? (double)batch / (now - epoch_t0) : 0;
    if (tty) {
        if (!force && now - last_draw < 0.1) return;
        last_draw = now;
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
    if (force || r->global_step % t->log_every != 0) return;
    printf("epoch %lld  batch %lld/%lld  step %lld  loss %.4f  %.1f it/s\n", (long long)r->epoch,
           (long long)batch, (long long)nbatches, (long long)r->global_step, loss, rate);
    fflush(stdout);
}

void lt_progress_end_epoch(lt_trainer *t, double seconds, int64_t samples) {
    lt_run *r = &t->run;
    epoch_t0 = 0;
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
}
