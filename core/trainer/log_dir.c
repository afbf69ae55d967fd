/* Lightning's CSVLogger layout: <root>/<name>/version_N/metrics.csv, with the
 * resolved config beside it. Rank 0 only. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "trainer_internal.h"

lt_status lt_mkdirs(lt_run *r, const char *path, const char *key) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        bool end = !*p;
        if (*p != '/' && !end) continue;
        *p = 0;
        struct stat sb;
        if (mkdir(buf, 0777) != 0 && (errno != EEXIST || stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode))) {
            int e = errno;
            /* A file in the way or no permission is cured in the config
             * (refused: exit 2); a full disk or an I/O error is not. */
            bool config = e == EEXIST || e == ENOTDIR || e == EACCES || e == EPERM || e == EROFS;
            return lt_run_fail(r, config ? LT_ERR_INVALID : LT_ERR_IO,
                               "cannot create directory %s: %s; set %s to a writable place", buf,
                               e == EEXIST ? "a file of that name exists" : strerror(e), key);
        }
        if (end) return LT_OK;
        *p = '/';
    }
}

lt_status lt_logdir_prepare(lt_trainer *t) {
    lt_run *r = &t->run;
    if (r->world.global_rank != 0 || t->log_dir[0]) return LT_OK;
    const lt_log_options *o = &t->opt.log;
    if (!o->csv) return LT_OK;
    const char *version = o->version;
    char base[1024];
    snprintf(base, sizeof base, "%.800s/%.100s", o->root_dir, o->name);
    LT_CHECK(lt_mkdirs(r, base, "trainer.default_root_dir"));
    if (*version) {
        snprintf(t->log_dir, sizeof t->log_dir, "%.900s/version_%.50s", base, version);
        char old[1200];
        struct stat sb;
        snprintf(old, sizeof old, "%s/metrics.csv", t->log_dir);
        if (stat(old, &sb) == 0) /* as Lightning's CSVLogger warns: the user named it */
            lt_log(NULL, LT_LOG_WARN, "logger.version = %s: %s already holds a metrics.csv, which this run "
                   "replaces; leave logger.version unset for a new version_N", version, t->log_dir);
    } else {
        for (int n = 0;; n++) {
            struct stat sb;
            snprintf(t->log_dir, sizeof t->log_dir, "%.900s/version_%d", base, n);
            if (stat(t->log_dir, &sb) != 0) break;
        }
    }
    LT_CHECK(lt_mkdirs(r, t->log_dir, "trainer.default_root_dir"));
    char path[1200];
    snprintf(path, sizeof path, "%s/config.txt", t->log_dir);
    FILE *f = fopen(path, "w");
    if (!f) return lt_run_fail(r, LT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    fprintf(f, "# resolved configuration: section.key = value  (where it came from)\n# %s\n", t->summary);
    fputs(t->config_text ? t->config_text : "", f);
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad) /* a full disk shows here, not only at the end of training */
        return lt_run_fail(r, LT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    printf("lt: logging to %s\n", t->log_dir);
    return LT_OK;
}

lt_status lt_logdir_flush(lt_trainer *t) {
    lt_run *r = &t->run;
    if (r->world.global_rank != 0) return LT_OK;
    if (!t->log_dir[0]) LT_CHECK(lt_logdir_prepare(t));
    if (!t->log_dir[0]) return LT_OK;
    char path[1200], err[1024];
    snprintf(path, sizeof path, "%s/metrics.csv", t->log_dir);
    lt_status st = lt_metrics_flush_csv(&r->metrics, path, err, sizeof err);
    t->flush_failed = st != LT_OK;
    return st == LT_OK ? LT_OK : lt_run_fail(r, st, "%s", err);
}

void lt_logdir_flush_after_failure(lt_trainer *t) {
    lt_run *r = &t->run;
    if (r->world.global_rank != 0 || !t->log_dir[0]) return; /* no log directory: nothing was logged */
    if (t->flush_failed) return; /* the failure itself: said once, by the run's error */
    char path[1200], err[1024];
    snprintf(path, sizeof path, "%s/metrics.csv", t->log_dir);
    if (lt_metrics_flush_csv(&r->metrics, path, err, sizeof err) != LT_OK)
        lt_log(NULL, LT_LOG_WARN, "after the failure, the metrics logged so far could not be saved: %s", err);
}
