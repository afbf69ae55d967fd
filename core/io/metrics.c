#define _GNU_SOURCE /* open_memstream, %m */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "metrics.h"
#include "lt/nn.h"

static lt_metric *find_or_add(lt_metrics *ms, const char *name) {
    for (int i = 0; i < ms->n; i++)
        if (!strcmp(ms->m[i].name, name)) return &ms->m[i];
    if (ms->n == ms->cap) {
        int cap = ms->cap ? 2 * ms->cap : 16;
        lt_metric *m = realloc(ms->m, (size_t)cap * sizeof *m);
        if (!m) return NULL;
        ms->m = m;
        ms->cap = cap;
    }
    lt_metric *m = &ms->m[ms->n++];
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    return m;
}

lt_status lt_metrics_log(lt_metrics *ms, const char *name, double value, double weight,
                         unsigned flags) {
    if (strlen(name) >= LT_METRIC_NAME) return LT_ERR_INVALID;
    lt_metric *m = find_or_add(ms, name);
    if (!m) return LT_ERR_NOMEM;
    /* One name, one loop: sums of two loops under one name would mix. A new
     * metric has no flags yet. */
    if (m->flags && m->stage && ms->stage && m->stage != ms->stage) return LT_ERR_MISMATCH;
    m->flags |= flags;
    m->stage = ms->stage;
    m->step_value = value;
    m->step_fresh = true;
    m->sum += value * weight;
    m->weight += weight;
    return LT_OK;
}

void lt_metrics_begin(lt_metrics *ms, int stage) {
    ms->stage = stage;
    for (int i = 0; i < ms->n; i++)
        if (ms->m[i].stage == stage) { ms->m[i].sum = 0; ms->m[i].weight = 0; }
}

static lt_status add_row(lt_metrics *ms, int64_t step, int64_t epoch, int metric, double v) {
    if (ms->nrows == ms->rowcap) {
        size_t cap = ms->rowcap ? 2 * ms->rowcap : 256;
        lt_metric_row *r = realloc(ms->rows, cap * sizeof *r);
        if (!r) return LT_ERR_NOMEM;
        ms->rows = r;
        ms->rowcap = cap;
    }
    ms->rows[ms->nrows++] = (lt_metric_row){step, epoch, metric, v};
    return LT_OK;
}

void lt_metrics_step_rows(lt_metrics *ms, int64_t step, int64_t epoch) {
    for (int i = 0; i < ms->n; i++) {
        lt_metric *m = &ms->m[i];
        if (m->step_fresh && (m->flags & LT_LOG_ON_STEP) && m->stage == ms->stage)
            add_row(ms, step, epoch, i, m->step_value);
        m->step_fresh = false;
    }
}

lt_status lt_metrics_end(lt_metrics *ms, int64_t step, int64_t epoch,
                         lt_status (*reduce)(void *user, double *buf, size_t n), void *user) {
    size_t nsync = 0;
    for (int i = 0; i < ms->n; i++)
        if (ms->m[i].stage == ms->stage && (ms->m[i].flags & LT_LOG_SYNC_DIST)) nsync++;
    if (nsync && reduce) {
        double *buf = malloc(2 * nsync * sizeof *buf);
        if (!buf) return LT_ERR_NOMEM;
        size_t j = 0;
        for (int i = 0; i < ms->n; i++)
            if (ms->m[i].stage == ms->stage && (ms->m[i].flags & LT_LOG_SYNC_DIST)) {
                buf[j++] = ms->m[i].sum;
                buf[j++] = ms->m[i].weight;
            }
        lt_status st = reduce(user, buf, 2 * nsync);
        if (st == LT_OK) {
            j = 0;
            for (int i = 0; i < ms->n; i++)
                if (ms->m[i].stage == ms->stage && (ms->m[i].flags & LT_LOG_SYNC_DIST)) {
                    ms->m[i].sum = buf[j++];
                    ms->m[i].weight = buf[j++];
                }
        }
        free(buf);
        if (st != LT_OK) return st;
    }
    for (int i = 0; i < ms->n; i++) {
        lt_metric *m = &ms->m[i];
        if (m->stage != ms->stage || !(m->flags & LT_LOG_ON_EPOCH) || m->weight <= 0) continue;
        m->epoch_value = m->sum / m->weight;
        m->has_epoch = true;
        add_row(ms, step, epoch, i, m->epoch_value);
    }
    return LT_OK;
}

const lt_metric *lt_metrics_find(const lt_metrics *ms, const char *name) {
    for (int i = 0; i < ms->n; i++)
        if (!strcmp(ms->m[i].name, name)) return &ms->m[i];
    return NULL;
}

static bool same_line(const lt_metric_row *a, const lt_metric_row *b) {
    return a->step == b->step && a->epoch == b->epoch;
}

/* The lines of rows [from, nrows): consecutive rows of one step and epoch
 * make one line, blank cells for the metrics not logged there. */
static lt_status write_rows(const lt_metrics *ms, size_t from, FILE *f) {
    double *cells = calloc((size_t)ms->n + 1, sizeof *cells);
    bool *set = calloc((size_t)ms->n + 1, sizeof *set);
    if (!cells || !set) { free(cells); free(set); return LT_ERR_NOMEM; }
    for (size_t r = from; r < ms->nrows;) {
        size_t e = r;
        memset(set, 0, ((size_t)ms->n + 1) * sizeof *set);
        while (e < ms->nrows && same_line(&ms->rows[e], &ms->rows[r])) {
            cells[ms->rows[e].metric] = ms->rows[e].value;
            set[ms->rows[e].metric] = true;
            e++;
        }
        fprintf(f, "%lld,%lld", (long long)ms->rows[r].epoch, (long long)ms->rows[r].step);
        for (int i = 0; i < ms->n; i++) {
            if (set[i]) fprintf(f, ",%.9g", cells[i]);
            else fputc(',', f);
        }
        fputc('\n', f);
        r = e;
    }
    free(cells);
    free(set);
    return LT_OK;
}

/* Lightning's CSVLogger layout: one row per (step, epoch) with the metrics
 * logged there, blank cells elsewhere. Rows are merged by step and epoch.
 * Written to <path>.tmp and renamed over path; whatever fails (a full disk
 * shows in a write, the flush at fclose or the rename), the temporary file
 * is removed and the previous metrics.csv stays as it was. */
lt_status lt_metrics_write_csv(const lt_metrics *ms, const char *path, char *err, size_t errlen) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) { snprintf(err, errlen, "cannot write %s: %m", tmp); return LT_ERR_IO; }
    fprintf(f, "epoch,step");
    for (int i = 0; i < ms->n; i++) fprintf(f, ",%s", ms->m[i].name);
    fputc('\n', f);
    lt_status st = write_rows(ms, 0, f);
    bool bad = ferror(f) != 0; /* a write that failed before the last flush */
    int e = errno;
    if (fclose(f) != 0 && !bad) {
        bad = true;
        e = errno;
    }
    if (st == LT_OK && !bad && rename(tmp, path) == 0) return LT_OK;
    if (st == LT_OK && !bad) e = errno; /* the rename's */
    remove(tmp);
    errno = e ? e : EIO;
    if (st != LT_OK) snprintf(err, errlen, "out of memory writing %s (what it held is kept)", path);
    else snprintf(err, errlen, "cannot write %s: %m (what it held is kept); free space on its "
                  "file system or set trainer.default_root_dir elsewhere", path);
    return st != LT_OK ? st : LT_ERR_IO;
}

lt_status lt_metrics_flush_csv(lt_metrics *ms, const char *path, char *err, size_t errlen) {
    size_t from = ms->csv_rows;
    bool whole = from == 0 || ms->n != ms->csv_columns ||
                 (from < ms->nrows && same_line(&ms->rows[from], &ms->rows[from - 1]));
    if (!whole && from == ms->nrows) return LT_OK;
    /* Appended lines go in one write(): a process killed in the middle leaves
     * whole lines (the whole-file path renames a finished temporary file). */
    char *text = NULL;
    size_t len = 0;
    int fd = -1;
    if (!whole) {
        fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
        whole = fd < 0 && errno == ENOENT; /* removed since: write it again */
        if (fd < 0 && !whole) {
            snprintf(err, errlen, "cannot append to %s: %m", path);
            return LT_ERR_IO;
        }
    }
    if (whole) {
        LT_CHECK(lt_metrics_write_csv(ms, path, err, errlen));
        ms->csv_rows = ms->nrows;
        ms->csv_columns = ms->n;
        return LT_OK;
    }
    FILE *mem = open_memstream(&text, &len);
    lt_status st = mem ? write_rows(ms, from, mem) : LT_ERR_NOMEM;
    if (mem && fclose(mem) != 0 && st == LT_OK) st = LT_ERR_NOMEM;
    if (st != LT_OK) {
        close(fd);
        free(text);
        snprintf(err, errlen, "out of memory writing %s", path);
        return st;
    }
    off_t start = lseek(fd, 0, SEEK_END); /* where the file ends: cut back to it on failure */
    size_t off = 0;
    ssize_t w = 0;
    while (off < len && ((w = write(fd, text + off, len - off)) > 0 || (w < 0 && errno == EINTR)))
        if (w > 0) off += (size_t)w;
    int e = errno;
    free(text);
    bool ok = off == len;
    if (!ok && off > 0 && (start < 0 || ftruncate(fd, start) != 0))
        ms->csv_rows = 0; /* part of a line stayed: the next flush writes the file whole */
    if (close(fd) != 0 && ok) {
        ok = false;
        e = errno;
        ms->csv_rows = 0; /* what close failed to write is unknown: write it whole next time */
    }
    if (!ok) {
        errno = e ? e : EIO;
        snprintf(err, errlen, "cannot append to %s: %m; free space on its file system or set "
                 "trainer.default_root_dir elsewhere", path);
        return LT_ERR_IO;
    }
    ms->csv_rows = ms->nrows;
    return LT_OK;
}

void lt_metrics_free(lt_metrics *ms) {
    free(ms->m);
    free(ms->rows);
    memset(ms, 0, sizeof *ms);
}
