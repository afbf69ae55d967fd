/* The launcher's pieces shared by its two ways of forming a job:
 * launcher.c (a fixed number of nodes, --num-nodes N) and elastic.c
 * (--nnodes MIN:MAX, nodes coming and going). Both run on ltrun's one
 * thread; nothing here is thread-safe. */
#ifndef LTRUN_LAUNCHER_INTERNAL_H
#define LTRUN_LAUNCHER_INTERNAL_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>
#include <time.h>
#include "launcher.h"
#include "lt/store.h"
#include "dist/store_server.h"

typedef struct worker {
    pid_t pid;
    bool alive;
    int status; /* waitpid's */
} worker;

typedef struct outcome {
    enum {
        OUT_OK,        /* every worker exited 0 */
        OUT_FAILED,    /* one exited non-zero or was killed: local, status, at */
        OUT_SIGNALLED, /* ltrun itself got a stop signal: signo */
        OUT_STOPPED    /* the poll hook stopped the workers (elastic: a change of nodes) */
    } kind;
    int local;         /* the failed worker */
    int status;        /* its wait status */
    int others;        /* workers still running when it failed */
    int signo;         /* what ltrun got (OUT_SIGNALLED) */
    lt_status_slot at; /* its progress when it failed */
} outcome;

/* What the poll hook asks of the supervision loop. */
typedef enum {
    POLL_GO_ON,
    POLL_STOP_AT_STEP, /* SIGUSR2: the workers agree on a step, save last.safetensors, exit 0 */
    POLL_STOP_NOW      /* SIGTERM, SIGKILL 3 s later */
} poll_action;

typedef struct launcher launcher;
struct launcher {
    const lt_launch_info *info;
    char **argv;
    int argc, nproc, world;
    int node_rank, num_nodes; /* this node's place in the job (elastic: in this round) */
    char host[256];       /* this machine, for messages */
    char store_host[256]; /* where the launcher's own client connects */
    char master_addr[256]; /* what the workers get as MASTER_ADDR */
    int port;
    char seed[32];
    char token[40];       /* generated for a one-node job; "" = the user's or none */
    int threads;
    lt_store_server *srv;
    lt_store *client;
    int client_tmo_ms;    /* the client's call timeout, restored after short lookups */
    int slot_fd;
    lt_status_slot *slots;
    size_t slots_len;
    worker *w;
    int nalive;
    int late_signal;      /* ^C during a shutdown: becomes the exit status */
    sigset_t sigs, stop_sigs, oldmask; /* sigs = stop_sigs + SIGCHLD */
    struct timespec started;
    /* Elastic only: called about once a second while workers run, on this
     * thread; what it returns is done to the workers. NULL: never asked. */
    poll_action (*poll)(launcher *L);
    void *poll_ctx;
};

void launcher_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
double launcher_mono(void);
/* Whether a socket can bind one of host's addresses; -1 after saying why
 * host does not resolve (what names it: the caller's key). */
int launcher_addr_is_local(const char *host, const char *key, bool *local);
/* L->client to L->store_host:L->port, waiting up to rdzv_timeout_s. */
int launcher_connect_client(launcher *L);
/* Starts the group with LT_RESTART_COUNT = restart, resuming from resume
 * ("" = the user's own arguments); elastic adds --num-nodes L->num_nodes. */
int launcher_start_group(launcher *L, int restart, const char *resume);
void launcher_supervise(launcher *L, outcome *o);
/* Waits up to timeout_s (< 0: 1 s) for a signal of L->sigs; returns a stop
 * signal, 0 for a child's exit or the timeout. */
int launcher_wait_signal(launcher *L, double timeout_s);
void launcher_stop_group(launcher *L, int first_sig);
/* Says why the group failed (o: the failure the supervisor saw first),
 * after asking the store for the job's first failure of this restart: one
 * line, "error: rank N: <its words> [how it ended]", when that rank is
 * local and left its words (o is then made that rank's outcome); else o's
 * rank, then the first failure's line, last. */
void launcher_report(launcher *L, outcome *o, int restart);
/* Where no report follows (ltrun got a stop signal, an elastic round was
 * stopped): one line for each reaped worker that failed on its own and
 * left its error in its slot, which nothing else would print. */
void launcher_say_words(launcher *L);
bool launcher_cannot_cure(const outcome *o);
bool launcher_refused(int status);

/* elastic.c: the whole job under --nnodes MIN:MAX; ltrun's exit status. */
int launcher_elastic(launcher *L);

#endif
