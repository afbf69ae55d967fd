/* Logged metrics: step values, epoch aggregates weighted by sample counts,
 * and their reduction over ranks (sum of value*weight and of weights, so an
 * epoch mean over ranks weighs each rank by how many samples it saw). */
#ifndef LT_METRICS_H
#define LT_METRICS_H

#include "lt/abi.h"
#include <stdio.h>

#define LT_METRIC_NAME 64

typedef struct lt_metric {
    char name[LT_METRIC_NAME];
    unsigned flags;
    int stage;             /* the loop that logged it (1 fit, 2 validate, 3 test) */
    double step_value;     /* last value logged */
    bool step_fresh;       /* logged since the last step row was written */
    double sum, weight;    /* this epoch, this rank */
    double epoch_value;    /* the last finished epoch's value */
    bool has_epoch;
} lt_metric;

/* One row of metrics.csv. */
typedef struct lt_metric_row {
    int64_t step, epoch;
    int metric;            /* index into metrics */
    double value;
} lt_metric_row;

typedef struct lt_metrics {
    lt_metric *m;
    int n, cap;
    lt_metric_row *rows;
    size_t nrows, rowcap;
    int stage;             /* the loop running now */
    /* metrics.csv as lt_metrics_flush_csv last left it */
    size_t csv_rows;       /* rows in it */
    int csv_columns;       /* metric columns in its header */
} lt_metrics;

/* LT_ERR_INVALID: name too long; LT_ERR_MISMATCH: the name was logged in
 * another loop (stage) already; LT_ERR_NOMEM. */
lt_status lt_metrics_log(lt_metrics *ms, const char *name, double value, double weight,
                         unsigned flags);
/* Starts a loop: clears the epoch sums of metrics logged in `stage`. */
void lt_metrics_begin(lt_metrics *ms, int stage);
/* Ends a loop: sync_dist metrics are reduced with `reduce` (sums in place, a
 * buffer of 2 doubles per metric, every rank must log the same sync_dist
 * metrics in the same order); records epoch values and CSV rows. */
lt_status lt_metrics_end(lt_metrics *ms, int64_t step, int64_t epoch,
                         lt_status (*reduce)(void *user, double *buf, size_t n), void *user);
/* Records CSV rows for step metrics logged since the last call. */
void lt_metrics_step_rows(lt_metrics *ms, int64_t step, int64_t epoch);
const lt_metric *lt_metrics_find(const lt_metrics *ms, const char *name);
/* Writes metrics.csv (columns: epoch, step, then every metric name). */
lt_status lt_metrics_write_csv(const lt_metrics *ms, const char *path, char *err, size_t errlen);
/* Brings metrics.csv up to date with the rows recorded so far: appends the
 * rows since the last flush to the file, or writes it whole (as
 * lt_metrics_write_csv) when this is the first flush, a metric column was
 * added since, the file is gone, or the last line written gained cells (rows
 * of one step and epoch are one line). The file then reads as
 * lt_metrics_write_csv would write it. */
lt_status lt_metrics_flush_csv(lt_metrics *ms, const char *path, char *err, size_t errlen);
void lt_metrics_free(lt_metrics *ms);

#endif
