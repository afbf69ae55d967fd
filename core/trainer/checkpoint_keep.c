/* The checkpoint directory is one run's at a time, and what an earlier run
 * left there is kept.
 *
 * A fit claims checkpoint.dirpath before it writes or cleans anything there:
 * an open file description lock on <dirpath>/.lt-run.lock, held until the
 * fit returns (the kernel drops it when the process dies, so a killed
 * run leaves no stale claim, and ltrun's restarts and elastic rounds take it
 * again). A second run in the same directory would rename the first run's
 * live last.safetensors away and overwrite it, or delete its temp files:
 * it is refused instead, naming the holder. Creating the lock file also
 * shows a directory lt cannot write into at start, not after an epoch.
 *
 * A new run that finds an earlier run's last.safetensors / best.safetensors
 * where it will save its own keeps them, renamed to the lowest free
 * last-vN / best-vN (one N for the pair), just before its first save: a run
 * that fails before it saves anything leaves them where --ckpt-path last
 * finds them. The names without a suffix then always belong to the newest
 * run that saved, which is what --ckpt-path last/best, ltrun's restarts,
 * elastic rounds and a requeued SLURM job read; Lightning's ModelCheckpoint
 * keeps the older file too (it versions the newer name instead, a choice lt
 * cannot copy without breaking those readers). A run resuming from one of
 * these plain files continues it and overwrites as before; one resuming
 * from last-vN keeps them. Only rank 0 writes checkpoints, so only it
 * looks. */
#define _GNU_SOURCE /* renameat2, RENAME_NOREPLACE */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "trainer_internal.h"

/* Anything at that name, a dangling symlink too: never renamed over. */
static bool name_taken(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* Whether the run resumes from one of the plain files (the same file, so a
 * symlink and its target count as one): it continues that run. Resuming
 * from last-v1 continues an older run, and the newest run's plain files
 * are kept from it as from a new run. */
static bool resumes_from(const lt_trainer *t, char from[2][1200], const bool have[2]) {
    if (!t->ckpt_path[0] || t->ckpt_fresh) return false;
    struct stat a, b;
    if (stat(t->ckpt_path, &a) != 0) return false;
    for (int i = 0; i < 2; i++)
        if (have[i] && stat(from[i], &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
            return true;
    return false;
}

lt_status lt_checkpoint_keep_earlier(lt_trainer *t) {
    lt_run *r = &t->run;
    const char *dir = t->opt.ckpt.dir;
    if (!t->opt.ckpt.enabled || r->world.global_rank != 0) return LT_OK;
    static const char *const names[] = {"last", "best"};
    char from[2][1200], to[2][1200];
    bool have[2] = {false, false};
    for (int i = 0; i < 2; i++) {
        snprintf(from[i], sizeof from[i], "%s/%s.safetensors", dir, names[i]);
        have[i] = name_taken(from[i]);
    }
    if ((!have[0] && !have[1]) || resumes_from(t, from, have)) return LT_OK;
    int v = 1; /* the lowest N free for both names, so a pair keeps one N */
    for (;; v++) {
        bool taken = false;
        for (int j = 0; j < 2; j++) {
            snprintf(to[j], sizeof to[j], "%s/%s-v%d.safetensors", dir, names[j], v);
            taken |= name_taken(to[j]);
        }
        if (!taken) break;
    }
    char kept[160] = "";
    for (int i = 0; i < 2; i++) {
        if (!have[i]) continue;
        /* NOREPLACE: a file made there since the look is not overwritten */
        if (renameat2(AT_FDCWD, from[i], AT_FDCWD, to[i], RENAME_NOREPLACE) != 0)
            return lt_run_fail(r, LT_ERR_IO,
                               "%s holds an earlier run's checkpoint, which this run would overwrite, and "
                               "it could not be kept as %s: %s; move it away, or set checkpoint.dirpath "
                               "(or trainer.default_root_dir) elsewhere", from[i], to[i], strerror(errno));
        size_t k = strlen(kept);
        snprintf(kept + k, sizeof kept - k, "%s%s.safetensors as %s-v%d.safetensors", k ? ", " : "",
                 names[i], names[i], v);
    }
    printf("lt: %s held an earlier run's checkpoints: kept %s (resume one with --ckpt-path)\n", dir, kept);
    return LT_OK;
}

lt_status lt_checkpoint_claim_dir(lt_trainer *t) {
    lt_run *r = &t->run;
    if (!t->opt.ckpt.enabled || r->world.global_rank != 0 || t->ckpt_lock_fd >= 0) return LT_OK;
    const char *dir = t->opt.ckpt.dir;
    const char *key = "checkpoint.dirpath (or trainer.default_root_dir)";
    LT_CHECK(lt_mkdirs(r, dir, key));
    char path[1200];
    snprintf(path, sizeof path, "%s/.lt-run.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        bool config = e == EACCES || e == EPERM || e == EROFS;
        return lt_run_fail(r, config ? LT_ERR_INVALID : LT_ERR_IO,
                           "cannot write into the checkpoint directory %s (creating %s: %s); set %s "
                           "to a writable place", dir, path, strerror(e), key);
    }
    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_OFD_SETLK, &lk) != 0) {
        int e = errno;
        char who[200] = "";
        ssize_t n = e == EAGAIN || e == EACCES ? pread(fd, who, sizeof who - 1, 0) : -1;
        close(fd);
        if (n < 0) /* a file system without these locks: no claim, as before */
            return LT_OK;
        who[n] = 0;
        who[strcspn(who, "\n")] = 0;
        return lt_run_fail(r, LT_ERR_INVALID,
                           "checkpoint directory %s is in use by another run (%s); wait for it to "
                           "end, or give this run its own trainer.default_root_dir or "
                           "checkpoint.dirpath", dir, who[0] ? who : "holder unknown");
    }
    char host[128] = "?", who[200];
    gethostname(host, sizeof host - 1);
    int n = snprintf(who, sizeof who, "pid %d on host %s\n", (int)getpid(), host);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, who, (size_t)n, 0) != n) { /* only for the message */ }
    t->ckpt_lock_fd = fd;
    return LT_OK;
}

void lt_checkpoint_release_dir(lt_trainer *t) {
    if (t->ckpt_lock_fd >= 0) close(t->ckpt_lock_fd);
    t->ckpt_lock_fd = -1;
}
