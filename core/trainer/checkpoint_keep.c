/* A new run that finds an earlier run's last.safetensors / best.safetensors
 * where it will save its own keeps them, renamed to the lowest free
 * last-vN / best-vN (one N for the pair), before it trains. The names
 * without a suffix then always belong to the newest run, which is what
 * --ckpt-path last/best, ltrun's restarts, elastic rounds and a requeued
 * SLURM job read; Lightning's ModelCheckpoint keeps the older file too (it
 * versions the newer name instead, a choice lt cannot copy without breaking
 * those readers). A run resuming from one of these files continues it and
 * overwrites as before. Only rank 0 writes checkpoints, so only it looks. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "trainer_internal.h"

static bool file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Whether the run resumes from a file in this checkpoint directory. */
static bool resumes_here(const lt_trainer *t, const char *dir) {
    if (!t->ckpt_path[0] || t->ckpt_fresh) return false;
    char a[PATH_MAX], b[PATH_MAX];
    if (!realpath(t->ckpt_path, a) || !realpath(dir, b)) return false;
    size_t n = strlen(b);
    return !strncmp(a, b, n) && a[n] == '/' && !strchr(a + n + 1, '/');
}

lt_status lt_checkpoint_keep_earlier(lt_trainer *t) {
    lt_run *r = &t->run;
    const char *dir = t->opt.ckpt.dir;
    if (!t->opt.ckpt.enabled || r->world.global_rank != 0 || resumes_here(t, dir)) return LT_OK;
    static const char *const names[] = {"last", "best"};
    char from[2][1200], to[2][1200];
    bool have[2] = {false, false};
    for (int i = 0; i < 2; i++) {
        snprintf(from[i], sizeof from[i], "%s/%s.safetensors", dir, names[i]);
        have[i] = file_exists(from[i]);
    }
    if (!have[0] && !have[1]) return LT_OK;
    int v = 1;
    for (;; v++) {
        bool taken = false;
        for (int i = 0; i < 2; i++) {
            snprintf(to[i], sizeof to[i], "%s/%s-v%d.safetensors", dir, names[i], v);
            taken |= file_exists(to[i]);
        }
        if (!taken) break;
    }
    char kept[160] = "";
    for (int i = 0; i < 2; i++) {
        if (!have[i]) continue;
        if (rename(from[i], to[i]) != 0)
            return lt_run_fail(r, LT_ERR_IO,
                               "%s holds an earlier run's checkpoint, which this run would overwrite, and it "
                               "could not be kept as %s: %s; move it away, or set checkpoint.dirpath (or "
                               "trainer.default_root_dir) elsewhere", from[i], to[i], strerror(errno));
        size_t k = strlen(kept);
        snprintf(kept + k, sizeof kept - k, "%s%s.safetensors as %s-v%d.safetensors", k ? ", " : "",
                 names[i], names[i], v);
    }
    printf("lt: %s held an earlier run's checkpoints: kept %s (resume one with --ckpt-path)\n", dir, kept);
    return LT_OK;
}
