/* ddp_spawn: the launching process sets up (config, plugins, data in memory),
 * hosts the rendezvous store and forks one worker per device. Rank 0 sends
 * the final parameters and metrics back through a memfd, so the program that
 * called fit holds the trained model afterwards and can test it in-process. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "launch_info.h"
#include "trainer_internal.h"
#include "dist/process_group.h"
#include "dist/store_server.h"
#include "lt/store.h"

#define RESULT_MAGIC 0x4c545253u /* "SRTL" */

typedef struct result_header {
    uint32_t magic;
    int32_t status;
    uint64_t nparams;
    uint32_t nmetrics;
    char error[2048];
    /* Where rank 0 left the run, so the parent's validate/test log into the
     * same version directory at the same step and epoch, as under ddp. */
    int64_t global_step, epoch;
    uint64_t nrows, csv_rows;
    int32_t csv_columns;
    char log_dir[1024];
} result_header;

static void write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        c += w;
        n -= (size_t)w;
    }
}

static void setenv_int(const char *k, long v) {
    char b[32];
    snprintf(b, sizeof b, "%ld", v);
    setenv(k, b, 1);
}

/* In the forked worker: train, report, and end the forked process (the
 * process the library created; the caller's process is never exited). */
static void child_main(lt_trainer *t, int rank, int fd) {
    lt_run *r = &t->run;
    setenv_int("RANK", rank);
    setenv_int("LOCAL_RANK", rank);
    t->in_spawn_child = true;
    lt_status st = lt_trainer_fit(t);
    result_header h = {.magic = RESULT_MAGIC, .status = st};
    if (st != LT_OK) snprintf(h.error, sizeof h.error, "%s", r->error);
    size_t np = 0;
    double *params = NULL;
    if (st == LT_OK && rank == 0 && r->model) {
        np = r->model->total;
        params = malloc(np * sizeof *params);
        if (!params || lt_trainer_params(t, params, np, NULL) != LT_OK) np = 0;
        h.nparams = np;
        h.nmetrics = (uint32_t)r->metrics.n;
        h.global_step = r->global_step;
        h.epoch = r->epoch;
        h.nrows = r->metrics.nrows;
        h.csv_rows = r->metrics.csv_rows;
        h.csv_columns = r->metrics.csv_columns;
        snprintf(h.log_dir, sizeof h.log_dir, "%s", t->log_dir);
    }
    write_all(fd, &h, sizeof h);
    if (np) write_all(fd, params, np * sizeof *params);
    free(params);
    /* The metrics and their CSV rows as they are: the reader is a fork of
     * this very program, so the structs have the same layout there. */
    if (h.nmetrics) write_all(fd, r->metrics.m, h.nmetrics * sizeof *r->metrics.m);
    if (h.nrows) write_all(fd, r->metrics.rows, h.nrows * sizeof *r->metrics.rows);
    fflush(stdout);
    fflush(stderr);
    _exit(st == LT_OK ? 0 : 1);
}

static void stop_children(pid_t *pids, int n) {
    for (int i = 0; i < n; i++)
        if (pids[i] > 0) kill(pids[i], SIGTERM);
    double deadline = lt_now() + 3.0;
    for (int i = 0; i < n; i++) {
        while (pids[i] > 0) {
            int status;
            pid_t p = waitpid(pids[i], &status, WNOHANG);
            if (p == pids[i] || (p < 0 && errno != EINTR)) { pids[i] = 0; break; }
            if (lt_now() > deadline) kill(pids[i], SIGKILL);
            struct timespec ts = {0, 20 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
}

static void describe_exit(int status, char *buf, size_t len) {
    if (WIFSIGNALED(status))
        snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
}

/* Rank 0's results: its parameters (kept for adopt_results), and its
 * metrics, CSV rows and log directory, which replace this process's own
 * (rank 0 was forked from it, so they hold whatever it had logged before). */
static lt_status read_result(lt_trainer *t, int fd, result_header *h) {
    lt_run *r = &t->run;
    off_t size = lseek(fd, 0, SEEK_END);
    if (size < (off_t)sizeof *h) return LT_ERR_CORRUPT;
    void *p = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return LT_ERR_IO;
    memcpy(h, p, sizeof *h);
    size_t msize = h->nmetrics * sizeof(lt_metric), rsize = h->nrows * sizeof(lt_metric_row);
    size_t need = sizeof *h + h->nparams * sizeof(double) + msize + rsize;
    lt_status st = h->magic == RESULT_MAGIC && (size_t)size >= need &&
                   h->csv_rows <= h->nrows ? LT_OK : LT_ERR_CORRUPT;
    const char *at = (const char *)p + sizeof *h;
    if (st == LT_OK && h->nparams) {
        t->spawn_params = malloc(h->nparams * sizeof(double));
        if (!t->spawn_params) st = LT_ERR_NOMEM;
        else {
            memcpy(t->spawn_params, at, h->nparams * sizeof(double));
            t->spawn_nparams = h->nparams;
        }
    }
    at += h->nparams * sizeof(double);
    lt_metrics ms = {0};
    if (st == LT_OK && msize) st = (ms.m = malloc(msize)) ? LT_OK : LT_ERR_NOMEM;
    if (st == LT_OK && rsize) st = (ms.rows = malloc(rsize)) ? LT_OK : LT_ERR_NOMEM;
    if (st == LT_OK) {
        if (msize) memcpy(ms.m, at, msize);
        if (rsize) memcpy(ms.rows, at + msize, rsize);
        for (uint64_t i = 0; i < h->nrows; i++) /* CSV writing indexes the metrics with these */
            if (ms.rows[i].metric < 0 || ms.rows[i].metric >= (int)h->nmetrics) st = LT_ERR_CORRUPT;
    }
    if (st == LT_OK) {
        ms.n = ms.cap = (int)h->nmetrics;
        ms.nrows = ms.rowcap = h->nrows;
        /* metrics.csv holds these rows already: the next flush appends. */
        ms.csv_rows = h->csv_rows;
        ms.csv_columns = h->csv_columns;
        lt_metrics_free(&r->metrics);
        r->metrics = ms;
        snprintf(t->log_dir, sizeof t->log_dir, "%.*s", (int)sizeof h->log_dir - 1, h->log_dir);
    } else {
        lt_metrics_free(&ms);
    }
    munmap(p, (size_t)size);
    return st;
}

/* After the workers: this process takes over the trained parameters in a
 * single-device model of its own, for validate/test or lt_trainer_params. */
static lt_status adopt_results(lt_trainer *t) {
    lt_run *r = &t->run;
    const lt_plugin_header *d = t->spawn_eval; /* loaded by lt_trainer_new */
    lt_status st;
    lt_ctx_init(&r->strategy.ctx, LT_KIND_STRATEGY, d->name, d, r->config);
    r->strategy.ctx.owner = r;
    r->strategy.desc = d;
    r->launch = LT_LAUNCH_NONE;
    t->quiet = true;
    LT_CHECK(lt_trainer_setup_worker(t));
    lt_model *m = r->model;
    if (t->spawn_nparams != m->total)
        return lt_run_fail(r, LT_ERR_MISMATCH, "ddp_spawn: rank 0 returned %zu parameters, the model has %zu", t->spawn_nparams, m->total);
    /* Doubles in, cast by the accelerator into the parameters' dtype. */
    void *dev = NULL;
    st = LT_ACC(r)->alloc(&r->accel.ctx, m->total * sizeof(double), &dev);
    if (st != LT_OK) return lt_run_hook_failed(r, &r->accel, "alloc", st);
    st = LT_ACC(r)->copy(&r->accel.ctx, dev, t->spawn_params, m->total * sizeof(double), LT_COPY_H2D);
    if (st == LT_OK) {
        m->k->cast(m->kctx, lt_model_opt_dtype(m), lt_model_opt_params(m), LT_F64, dev, (int64_t)m->total);
        lt_model_refresh_compute(m);
        st = LT_ACC(r)->synchronize(&r->accel.ctx);
    }
    LT_ACC(r)->free(&r->accel.ctx, dev);
    r->params_version++;
    return st == LT_OK ? LT_OK : lt_run_hook_failed(r, &r->accel, "copy", st);
}

/* The job's first failure as its rank posted it in the store this process
 * hosts (lt_pg_post_failure): that rank, with its reason in text, or -1
 * when none was posted or the store cannot be read. */
static int posted_failure(int port, char *text, size_t n) {
    lt_store *s = NULL;
    char err[256];
    if (lt_store_connect("127.0.0.1", port, NULL, 2000, &s, err, sizeof err) != LT_OK) return -1;
    lt_store_set_timeout(s, 2000);
    int rank = lt_failure_read(s, -1, text, n); /* the key lt_pg_post_failure used */
    lt_store_close(s);
    return rank;
}

/* Waits up to secs for pid to exit on its own; true (with its status) if it did. */
static bool wait_exit(pid_t pid, double secs, int *status) {
    double deadline = lt_now() + secs;
    for (;;) {
        pid_t p = waitpid(pid, status, WNOHANG);
        if (p == pid) return true;
        if (p < 0 && errno != EINTR) return false;
        if (lt_now() > deadline) return false;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* One line for the failed job. The rank to name is the one whose failure
 * came first: the first to exit is often a peer that failed because of it
 * ("rank 0 failed: ..."), and the store says which rank failed first. */
static lt_status supervise(lt_trainer *t, pid_t *pids, int *fds, int n, int port) {
    lt_run *r = &t->run;
    for (int left = n; left > 0;) {
        int status;
        pid_t p = waitpid(-1, &status, 0);
        if (p < 0) {
            if (errno == EINTR) continue;
            return lt_run_fail(r, LT_ERR_IO, "ddp_spawn: waitpid: %s", strerror(errno));
        }
        int rank = -1;
        for (int i = 0; i < n; i++)
            if (pids[i] == p) rank = i;
        if (rank < 0) continue; /* not ours */
        pids[rank] = 0;
        left--;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
        char posted[1100] = "";
        int first = posted_failure(port, posted, sizeof posted);
        bool stopped = false; /* the rank named was still running: stopped below */
        if (first >= 0 && first < n && first != rank && pids[first] > 0) {
            /* It has aborted the group and is on its way out (its log,
             * on_train_end): its own exit says how it ended, with its error. */
            p = pids[first];
            rank = first;
            if (wait_exit(p, 3.0, &status)) pids[rank] = 0;
            else stopped = true;
        }
        stop_children(pids, n);
        result_header h = {0};
        lseek(fds[rank], 0, SEEK_SET);
        bool have = read(fds[rank], &h, sizeof h) == (ssize_t)sizeof h && h.magic == RESULT_MAGIC;
        /* A child that returned its error exits 1 whatever it was; the
         * status this process returns is the error's, so "failed" says it. */
        char how[128] = "failed";
        if (!stopped && !(WIFEXITED(status) && have && h.error[0])) describe_exit(status, how, sizeof how);
        /* Its own error, unless the job's first failure was posted for it
         * by a peer (a stuck rank) and its error is only a consequence. */
        const char *words = have && h.error[0] && (first != rank || strstr(h.error, posted)) ? h.error
                            : first == rank && posted[0]                                   ? posted
                            : have                                                         ? h.error
                                                                                           : "";
        return lt_run_fail(r, have && h.status ? (lt_status)h.status : LT_ERR_ABORTED,
                           "ddp_spawn: rank %d (pid %d) %s%s%s", rank, (int)p, how,
                           *words ? ": " : "", words);
    }
    return LT_OK;
}

lt_status lt_trainer_fit_spawn(lt_trainer *t) {
    lt_run *r = &t->run;
    lt_launch_info info;
    if (lt_trainer_launch_info(t, &info) != LT_OK) return lt_run_fail(r, LT_ERR_INVALID, "%s", lt_last_error(NULL));
    if (info.num_nodes != 1)
        return lt_run_fail(r, LT_ERR_UNSUPPORTED, "ddp_spawn runs on one node (num_nodes = %d); use strategy ddp with --num-nodes", info.num_nodes);
    int n = info.nproc_per_node;
    LT_CHECK(lt_trainer_open_data(t));
    const char *seed = t->opt.loop.seed;
    if (*seed) setenv("LT_GLOBAL_SEED", seed, 1);
    else if (!getenv("LT_GLOBAL_SEED")) setenv_int("LT_GLOBAL_SEED", (long)(time(NULL) ^ getpid()) & 0x7fffffff);
    char err[512];
    lt_store_server *srv;
    int port = 0;
    /* The store's thread starts after the forks: a child must not inherit
     * a lock that thread held at the fork (store_server.h). The workers'
     * connections wait in the listen backlog until then. */
    lt_status st = lt_store_server_open("127.0.0.1", info.master_port, NULL, &srv, &port, err, sizeof err);
    if (st != LT_OK) return lt_run_fail(r, st, "ddp_spawn: %s", err);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv_int("MASTER_PORT", port);
    setenv_int("WORLD_SIZE", n);
    setenv_int("LOCAL_WORLD_SIZE", n);
    setenv("NODE_RANK", "0", 1);
    setenv("LT_STORE_HOSTED", "1", 1);
    pid_t pids[LT_MAX_DEVICES] = {0};
    int fds[LT_MAX_DEVICES];
    for (int i = 0; i < n; i++) fds[i] = -1;
    for (int i = 0; i < n && st == LT_OK; i++) {
        fds[i] = memfd_create("lt-spawn-result", 0);
        if (fds[i] < 0) { st = lt_run_fail(r, LT_ERR_IO, "ddp_spawn: memfd_create: %s", strerror(errno)); break; }
        fflush(stdout);
        fflush(stderr);
        pids[i] = fork();
        if (pids[i] == 0) child_main(t, i, fds[i]);
        if (pids[i] < 0) st = lt_run_fail(r, LT_ERR_IO, "ddp_spawn: fork: %s", strerror(errno));
    }
    if (st == LT_OK && (st = lt_store_server_run(srv, err, sizeof err)) != LT_OK)
        lt_run_fail(r, st, "ddp_spawn: %s", err);
    if (st == LT_OK) st = supervise(t, pids, fds, n, port);
    else stop_children(pids, n);
    result_header h;
    if (st == LT_OK && read_result(t, fds[0], &h) != LT_OK)
        st = lt_run_fail(r, LT_ERR_CORRUPT, "ddp_spawn: rank 0 finished but its results could not be read back");
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) close(fds[i]);
    lt_store_server_stop(srv);
    const char *vars[] = {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "LT_STORE_HOSTED"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
    if (st != LT_OK) return st;
    LT_CHECK(adopt_results(t));
    r->global_step = h.global_step;
    r->epoch = h.epoch;
    t->fit_done = true;
    return LT_OK;
}
