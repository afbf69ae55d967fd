/* ltrun's launcher (see launcher.h for the contract): store on node 0, one
 * worker process per device, supervision, restarts.
 *
 * Signals: SIGINT, SIGTERM, SIGHUP and SIGCHLD stay blocked in the launcher
 * and are taken with sigtimedwait(), so a worker's exit or a user's ^C is
 * handled in the one loop that also keeps the deadlines; the store server's
 * thread blocks every signal itself. Workers get the launcher's original mask
 * back before exec. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "args.h"
#include "launcher_internal.h"
#include "dist/process_group.h"

extern char **environ;

#define GRACE_S 3.0 /* SIGTERM, then SIGKILL this much later */
#define REAP_S 2.0  /* after SIGKILL: the 5 s promised in total */
#define STOP_AT_STEP_S 300.0 /* elastic: a stop at a step boundary may wait out a validation loop */
#define SEED_KEY "ltrun/seed"
#define RESUME_KEY "ltrun/resume/%d"
/* Worker exit statuses: EXIT_REFUSED (args.h) = the worker refused its
 * configuration or input (ltrun exits 2 too when that rank's is the failure
 * it reports), 127 = the worker could not be executed. */
#define EXIT_NO_EXEC 127

void launcher_say(const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "ltrun: %s\n", buf);
    fflush(stderr);
}

double launcher_mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int usable_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* A host is local when a socket can bind one of its addresses. */
int launcher_addr_is_local(const char *host, const char *key, bool *local) {
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc) {
        launcher_say("error: %s = '%s' does not resolve (%s); give the host name or IP address of the node hosting the rendezvous",
                     key, host, gai_strerror(rc));
        return -1;
    }
    *local = false;
    for (struct addrinfo *ai = res; ai && !*local; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) continue;
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0) *local = true;
        close(fd);
    }
    freeaddrinfo(res);
    return 0;
}

int launcher_connect_client(launcher *L) {
    if (L->client) return 0;
    int tmo_ms = (L->info->rdzv_timeout_s > 0 ? L->info->rdzv_timeout_s : 300) * 1000;
    char err[1024];
    if (lt_store_connect(L->store_host, L->port, L->token[0] ? L->token : NULL, tmo_ms, &L->client, err,
                         sizeof err) != LT_OK) {
        launcher_say("error: node %d: %s (launcher.rdzv_timeout_s = %d)", L->node_rank, err,
            L->info->rdzv_timeout_s);
        L->client = NULL;
        return -1;
    }
    lt_store_set_timeout(L->client, tmo_ms);
    L->client_tmo_ms = tmo_ms;
    return 0;
}

/* Node 0: the store, on master_addr when it is this machine's address
 * (loopback stays private), else on every interface. */
static int start_store(launcher *L) {
    const lt_launch_info *in = L->info;
    const char *addr = in->master_addr[0] ? in->master_addr : "127.0.0.1";
    bool local = false;
    if (launcher_addr_is_local(addr, "launcher.master_addr", &local)) return -1;
    int port = in->master_port; /* 0 only on one node: lt_trainer_launch_info checked */
    if (!getenv("LT_RDZV_TOKEN") || !*getenv("LT_RDZV_TOKEN")) {
        /* One node: nobody else needs to join, so a random token keeps other
         * local users out of the store. Several nodes share the user's. */
        unsigned char r[16];
        if (in->num_nodes == 1 && getrandom(r, sizeof r, 0) == (ssize_t)sizeof r)
            for (int i = 0; i < 16; i++) snprintf(L->token + 2 * i, 3, "%02x", r[i]);
    }
    char err[1024];
    lt_status st = lt_store_server_start(local ? addr : NULL, port, L->token[0] ? L->token : NULL, &L->srv,
                                         &L->port, err, sizeof err);
    if (st != LT_OK) {
        launcher_say("error: cannot host the rendezvous store: %s", err);
        return -1;
    }
    snprintf(L->store_host, sizeof L->store_host, "%s", local ? addr : "127.0.0.1");
    return 0;
}

/* One seed for every rank of every node (see launcher.h). */
static int choose_seed(launcher *L) {
    const lt_launch_info *in = L->info;
    const char *env = getenv("LT_GLOBAL_SEED");
    if (in->seed[0]) snprintf(L->seed, sizeof L->seed, "%s", in->seed);
    else if (env && *env) snprintf(L->seed, sizeof L->seed, "%s", env);
    if (in->node_rank == 0) {
        if (!L->seed[0]) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            unsigned long long s = ((unsigned long long)ts.tv_nsec ^ (unsigned long long)getpid() * 2654435761ull ^
                                    (unsigned long long)ts.tv_sec) % 4294967296ull;
            snprintf(L->seed, sizeof L->seed, "%llu", s);
            printf("ltrun: no seed set (trainer.seed): every rank uses %s\n", L->seed);
        }
        if (in->num_nodes > 1) {
            if (launcher_connect_client(L)) return -1;
            if (lt_store_set(L->client, SEED_KEY, L->seed, strlen(L->seed)) != LT_OK) {
                launcher_say("error: cannot publish the seed in the rendezvous store: %s", lt_store_error(L->client));
                return -1;
            }
        }
        return 0;
    }
    if (L->seed[0]) return 0;
    if (launcher_connect_client(L)) return -1;
    void *v = NULL;
    size_t len = 0;
    if (lt_store_get(L->client, SEED_KEY, &v, &len) != LT_OK) {
        launcher_say("error: node %d: no seed from node 0: %s", in->node_rank, lt_store_error(L->client));
        return -1;
    }
    snprintf(L->seed, sizeof L->seed, "%.*s", (int)(len < sizeof L->seed ? len : sizeof L->seed - 1), (char *)v);
    free(v);
    return 0;
}

static int make_slots(launcher *L) {
    L->slots_len = (size_t)L->nproc * sizeof(lt_status_slot);
    L->slot_fd = memfd_create("ltrun-status", MFD_CLOEXEC);
    if (L->slot_fd < 0 || ftruncate(L->slot_fd, (off_t)L->slots_len)) {
        launcher_say("error: cannot create the status slots (memfd): %s", strerror(errno));
        return -1;
    }
    L->slots = mmap(NULL, L->slots_len, PROT_READ | PROT_WRITE, MAP_SHARED, L->slot_fd, 0);
    if (L->slots == MAP_FAILED) {
        L->slots = NULL;
        launcher_say("error: cannot map the status slots: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* The worker's environment: ours with the rank variables replaced. Built
 * before fork, since the child of a threaded process may not allocate. */
typedef struct env_list {
    char **envp;
    int nown; /* envp[0..nown) are ours to free */
} env_list;

static void env_free(env_list *e) {
    if (!e->envp) return;
    for (int i = 0; i < e->nown; i++) free(e->envp[i]);
    free(e->envp);
    e->envp = NULL;
}

static int env_build(launcher *L, int local, int restart, env_list *e) {
    struct { const char *k; char v[300]; } kv[20];
    int n = 0;
#define PUT(key, ...) do { kv[n].k = key; snprintf(kv[n].v, sizeof kv[n].v, __VA_ARGS__); n++; } while (0)
    PUT("MASTER_ADDR", "%s", L->master_addr);
    PUT("MASTER_PORT", "%d", L->port);
    PUT("WORLD_SIZE", "%d", L->world);
    PUT("RANK", "%d", L->node_rank * L->nproc + local);
    PUT("LOCAL_RANK", "%d", local);
    PUT("NODE_RANK", "%d", L->node_rank);
    PUT("GROUP_RANK", "%d", L->node_rank);
    PUT("LOCAL_WORLD_SIZE", "%d", L->nproc);
    PUT("LT_GLOBAL_SEED", "%s", L->seed);
    PUT("LT_RESTART_COUNT", "%d", restart);
    PUT("LT_STATUS_FD", "%d", L->slot_fd);
    PUT("LT_STORE_HOSTED", "%d", 1); /* workers must not host a store of their own */
    if (L->token[0]) PUT("LT_RDZV_TOKEN", "%s", L->token);
    /* elastic: SIGUSR2 asks the workers to stop at an agreed step (trainer/preempt.c) */
    if (L->poll) PUT("LT_ELASTIC", "%d", 1);
    if (!getenv("OPENBLAS_NUM_THREADS")) PUT("OPENBLAS_NUM_THREADS", "%d", L->threads);
    if (!getenv("OMP_NUM_THREADS")) PUT("OMP_NUM_THREADS", "%d", L->threads);
#undef PUT
    size_t nenv = 0;
    while (environ[nenv]) nenv++;
    e->nown = 0;
    e->envp = calloc(nenv + (size_t)n + 1, sizeof *e->envp);
    if (!e->envp) return -1;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(kv[i].k) + strlen(kv[i].v) + 2;
        if (!(e->envp[i] = malloc(len))) { env_free(e); return -1; }
        snprintf(e->envp[i], len, "%s=%s", kv[i].k, kv[i].v);
        e->nown++;
    }
    size_t j = (size_t)n;
    for (size_t i = 0; i < nenv; i++) {
        bool replaced = false;
        for (int k = 0; k < n && !replaced; k++) {
            size_t kl = strlen(kv[k].k);
            replaced = !strncmp(environ[i], kv[k].k, kl) && environ[i][kl] == '=';
        }
        if (!replaced) e->envp[j++] = environ[i];
    }
    e->envp[j] = NULL;
    return 0;
}

static void kill_alive(launcher *L, int sig) {
    for (int i = 0; i < L->nproc; i++)
        if (L->w[i].alive) kill(L->w[i].pid, sig);
}

static bool failed(int status) { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }

bool launcher_refused(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == EXIT_REFUSED; }

/* Of several failures seen at once, the likeliest cause: a rank killed by a
 * signal, then one that refused its input; their peers most likely failed
 * because they vanished. */
static int cause_rank(int status) { return WIFSIGNALED(status) ? 2 : launcher_refused(status) ? 1 : 0; }

/* Collects every exited worker. With o, the first failure is recorded; of
 * several seen at once, the likeliest cause (cause_rank) wins. */
static void reap(launcher *L, outcome *o) {
    bool first_batch = o && o->kind != OUT_FAILED;
    for (;;) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p <= 0) {
            if (p < 0 && errno == EINTR) continue;
            break;
        }
        int i = 0;
        while (i < L->nproc && !(L->w[i].alive && L->w[i].pid == p)) i++;
        if (i == L->nproc) continue;
        L->w[i].alive = false;
        L->w[i].status = st;
        L->nalive--;
        if (!first_batch || !failed(st)) continue;
        bool better = o->kind != OUT_FAILED || cause_rank(st) > cause_rank(o->status);
        if (!better) continue;
        o->kind = OUT_FAILED;
        o->local = i;
        o->status = st;
        lt_status_slot *s = &L->slots[i];
        o->at.global_step = __atomic_load_n(&s->global_step, __ATOMIC_RELAXED);
        o->at.epoch = __atomic_load_n(&s->epoch, __ATOMIC_RELAXED);
        o->at.phase = __atomic_load_n(&s->phase, __ATOMIC_RELAXED);
    }
    if (o && o->kind == OUT_FAILED && first_batch) o->others = L->nalive;
}

/* Waits up to timeout_s (< 0: 1 s) for a signal; returns it, 0 for a child's
 * exit or the timeout. */
int launcher_wait_signal(launcher *L, double timeout_s) {
    if (timeout_s < 0) timeout_s = 1.0;
    struct timespec ts = {(time_t)timeout_s, (long)((timeout_s - (double)(time_t)timeout_s) * 1e9)};
    siginfo_t si;
    int s = sigtimedwait(&L->sigs, &si, &ts);
    return s < 0 || s == SIGCHLD ? 0 : s;
}

/* SIGTERM (or the signal ltrun got), SIGKILL GRACE_S later, all reaped
 * within GRACE_S + REAP_S. A second ^C skips the grace period. */
void launcher_stop_group(launcher *L, int first_sig) {
    if (!L->nalive) return;
    kill_alive(L, first_sig);
    double deadline = launcher_mono() + GRACE_S;
    bool killed = false;
    for (;;) {
        reap(L, NULL);
        if (!L->nalive) return;
        double now = launcher_mono();
        if (now >= deadline) {
            if (killed) break;
            kill_alive(L, SIGKILL);
            killed = true;
            deadline = now + REAP_S;
            continue;
        }
        int sig = launcher_wait_signal(L, deadline - now);
        if (sig && !killed) {
            L->late_signal = sig;
            kill_alive(L, SIGKILL);
            killed = true;
            deadline = launcher_mono() + REAP_S;
        }
    }
    for (int i = 0; i < L->nproc; i++)
        if (L->w[i].alive) launcher_say("warning: worker pid %d did not exit %g s after SIGKILL", (int)L->w[i].pid, REAP_S);
}

/* A stop signal already pending, or 0. */
static int take_stop_signal(launcher *L) {
    struct timespec zero = {0, 0};
    int s = sigtimedwait(&L->stop_sigs, NULL, &zero);
    return s > 0 ? s : 0;
}

static void signalled(launcher *L, outcome *o, int sig) {
    o->kind = OUT_SIGNALLED;
    o->signo = sig;
    launcher_say("got %s: passed it on to the %d running rank%s and stopped them",
        sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP", L->nalive, L->nalive == 1 ? "" : "s");
    launcher_stop_group(L, sig);
}

/* With a poll hook (elastic), asks it about once a second what to do: stop
 * at a step boundary (SIGUSR2; the workers then exit 0 with phase STOPPED,
 * or get SIGTERM after STOP_AT_STEP_S) or stop now (o->kind OUT_STOPPED). */
void launcher_supervise(launcher *L, outcome *o) {
    memset(o, 0, sizeof *o);
    o->local = -1;
    double next_poll = launcher_mono() + 1.0, stop_by = 0;
    for (;;) {
        reap(L, o);
        if (o->kind == OUT_FAILED) {
            /* ^C in a terminal reaches the workers too: one dying of it is
             * the user's doing, not a failure to report or restart after. */
            int sig = take_stop_signal(L);
            if (sig) {
                signalled(L, o, sig);
                return;
            }
            launcher_stop_group(L, SIGTERM);
            return;
        }
        if (!L->nalive) return;
        double now = launcher_mono();
        if (L->poll && now >= next_poll) {
            next_poll = now + 1.0;
            poll_action act = L->poll(L);
            if (act == POLL_STOP_AT_STEP && !stop_by) {
                kill_alive(L, SIGUSR2);
                stop_by = now + STOP_AT_STEP_S;
            } else if (act == POLL_STOP_NOW || (stop_by && now > stop_by)) {
                if (act != POLL_STOP_NOW)
                    launcher_say("the workers did not stop at a step boundary within %g s of being asked; stopping them now",
                                 STOP_AT_STEP_S);
                launcher_stop_group(L, SIGTERM);
                o->kind = OUT_STOPPED;
                return;
            }
        }
        int sig = launcher_wait_signal(L, L->poll ? next_poll - now : -1);
        if (sig) {
            signalled(L, o, sig);
            return;
        }
    }
}

/* Starts the whole group; on failure stops those already started. */
int launcher_start_group(launcher *L, int restart, const char *resume) {
    char **args = calloc((size_t)L->argc + 9, sizeof *args);
    char nodes[16];
    int extra = L->argc;
    if (!args) {
        launcher_say("error: out of memory");
        return -1;
    }
    for (int i = 0; i < L->argc; i++) args[i] = L->argv[i];
    if (resume && *resume) {
        args[extra++] = "--ckpt-path"; /* the last --ckpt-path wins */
        args[extra++] = (char *)resume;
    }
    if (L->poll) { /* elastic: this round's node count (the last --num-nodes wins too) */
        snprintf(nodes, sizeof nodes, "%d", L->num_nodes);
        args[extra++] = "--num-nodes";
        args[extra++] = nodes;
    }
    if (L->info->devices[0]) { /* auto_select_gpus chose here, once for every worker */
        args[extra++] = "--devices";
        args[extra++] = (char *)L->info->devices;
        args[extra++] = "--set";
        args[extra++] = "trainer.auto_select_gpus=false";
    }
    memset(L->slots, 0, L->slots_len);
    pid_t parent = getpid();
    int rc = 0;
    cpu_set_t mine;
    int ncpu = sched_getaffinity(0, sizeof mine, &mine) == 0 ? CPU_COUNT(&mine) : 0;
    for (int i = 0; i < L->nproc && !rc; i++) {
        env_list e = {0};
        /* Each worker gets its own cores (like mpirun --bind-to core): its
         * communication threads then share a core only with its own
         * training thread, never with another rank's. */
        cpu_set_t bind;
        bool do_bind = L->info->bind_cores && ncpu >= L->nproc;
        if (do_bind) {
            int per = ncpu / L->nproc, seen = 0;
            CPU_ZERO(&bind);
            for (int c = 0; c < CPU_SETSIZE; c++) {
                if (!CPU_ISSET(c, &mine)) continue;
                if (seen >= i * per && seen < (i + 1) * per) CPU_SET(c, &bind);
                seen++;
            }
        }
        if (env_build(L, i, restart, &e)) {
            launcher_say("error: out of memory building worker %d's environment", i);
            rc = -1;
            break;
        }
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            /* Only async-signal-safe calls from here to exec. */
            sigprocmask(SIG_SETMASK, &L->oldmask, NULL);
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphans, even if ltrun is killed */
            if (getppid() != parent) _exit(EXIT_NO_EXEC);
            fcntl(L->slot_fd, F_SETFD, 0);
            if (do_bind) sched_setaffinity(0, sizeof bind, &bind);
            execve("/proc/self/exe", args, e.envp);
            static const char msg[] = "ltrun: worker: cannot execute /proc/self/exe\n";
            ssize_t wr = write(2, msg, sizeof msg - 1);
            (void)wr;
            _exit(EXIT_NO_EXEC);
        }
        int err = errno;
        env_free(&e);
        if (pid < 0) {
            launcher_say("error: cannot start worker %d (local rank %d): fork: %s", L->node_rank * L->nproc + i, i,
                strerror(err));
            rc = -1;
            break;
        }
        L->w[i] = (worker){.pid = pid, .alive = true};
        L->nalive++;
    }
    free(args);
    if (rc) launcher_stop_group(L, SIGKILL);
    return rc;
}

/* Whether restarting the group is pointless after this failure: the worker
 * could not be executed at all, or it exited with ltrun's "refused its
 * configuration or input" status before training started or after it
 * finished (during training a failure may be transient, and a restart
 * resumes from the checkpoint). */
bool launcher_cannot_cure(const outcome *o) {
    if (!WIFEXITED(o->status)) return false;
    int code = WEXITSTATUS(o->status);
    bool training = o->at.phase == LT_PHASE_TRAIN || o->at.phase == LT_PHASE_FAILED;
    return code == EXIT_NO_EXEC || (code == EXIT_REFUSED && !training);
}

/* What a failed worker left in its slot (lt_status_slot_post_error): its
 * own words for why, or NULL (killed, or it died before it could say). */
static const char *worker_words(launcher *L, int local) {
    lt_status_slot *s = &L->slots[local];
    if (!__atomic_load_n(&s->error_set, __ATOMIC_ACQUIRE)) return NULL;
    s->error[sizeof s->error - 1] = 0;
    return s->error;
}

/* One line for a failed local worker: its own words first where it left
 * them, then how it ended, where, and what ltrun did about the others.
 * stopped_by_us: ltrun's stop signal ended it (after another rank exited)
 * while it was on its way out; its words say it failed, which is what the
 * line says then, not the signal. */
static void report_worker(launcher *L, int local, int st, const lt_status_slot *at, int others,
                          const char *words, bool stopped_by_us) {
    char how[160], where[160];
    if (words && stopped_by_us) { /* the status it would have exited with */
        snprintf(how, sizeof how, "failed (status %d)", WEXITSTATUS(st));
    } else if (WIFSIGNALED(st)) {
        const char *d = strsignal(WTERMSIG(st));
        snprintf(how, sizeof how, "was killed by signal %d (%s)", WTERMSIG(st), d ? d : "?");
    } else {
        snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(st));
    }
    long long step = (long long)at->global_step, epoch = (long long)at->epoch;
    /* The slot says how far it got: setup (START/SETUP), training (TRAIN, or
     * FAILED once fit returned an error) or past fit (DONE). */
    if (at->phase <= LT_PHASE_SETUP)
        snprintf(where, sizeof where, "during setup, before training started");
    else if (at->phase == LT_PHASE_DONE)
        snprintf(where, sizeof where, "after training finished (step %lld, epoch %lld)", step, epoch);
    else if (step == 0 && epoch == 0) snprintf(where, sizeof where, "before its first step (setup or step 0)");
    else snprintf(where, sizeof where, "at step %lld (epoch %lld)", step, epoch);
    const char *then = !others             ? "no other rank was running here"
                       : L->num_nodes > 1 ? "stopped the other ranks on this node"
                                          : "stopped the other ranks";
    int rank = L->node_rank * L->nproc + local, pid = (int)L->w[local].pid;
    if (words)
        launcher_say("error: rank %d (host %s, pid %d): %.1500s [%s %s; %s]", rank, L->host, pid,
                     words, how, where, then); /* the bracket survives a long error */
    else launcher_say("rank %d (host %s, pid %d) %s %s; %s", rank, L->host, pid, how, where, then);
}

void launcher_say_words(launcher *L) {
    for (int i = 0; i < L->nproc; i++) {
        int st = L->w[i].status;
        const char *words = L->w[i].alive ? NULL : worker_words(L, i);
        /* Exit statuses 128 + N are the stop signal passed on: not a failure. */
        if (words && WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) < 128)
            launcher_say("error: rank %d (host %s, pid %d): %.1500s", L->node_rank * L->nproc + i, L->host,
                         (int)L->w[i].pid, words);
    }
}

/* The reason the first failing rank of the job posted (lt_pg_post_failure)
 * for this restart: its rank, or -1 with none (or no store to ask). */
static int first_failure(launcher *L, int restart, char *text, size_t n) {
    if (!L->client) { /* quietly: a store that is gone has nothing to say */
        char err[256];
        if (lt_store_connect(L->store_host, L->port, L->token[0] ? L->token : NULL, 2000, &L->client, err,
                             sizeof err) != LT_OK) {
            L->client = NULL;
            return -1;
        }
    }
    lt_store_set_timeout(L->client, 2000);
    int rank = lt_failure_read(L->client, restart, text, n);
    /* Back to the client's own timeout: a later wait (the resume key, an
     * elastic round) must not inherit this lookup's 2 s. */
    int tmo = L->client_tmo_ms ? L->client_tmo_ms
                               : (L->info->rdzv_timeout_s > 0 ? L->info->rdzv_timeout_s : 300) * 1000;
    lt_store_set_timeout(L->client, tmo);
    L->client_tmo_ms = tmo;
    return rank;
}

void launcher_report(launcher *L, outcome *o, int restart) {
    char first[1100];
    int r = first_failure(L, restart, first, sizeof first);
    int local = r - L->node_rank * L->nproc;
    /* The job's first failure is one of ours and it said why itself: that
     * rank is the one to name (the others here most likely failed because
     * it did), in one line. A rank that left no words (stopped, killed)
     * is named by the one that saw it go, in the lines below. */
    bool ours = local >= 0 && local < L->nproc && !L->w[local].alive;
    const char *words = ours ? worker_words(L, local) : NULL;
    /* Its words are its own failure only when they carry what was posted:
     * a stuck rank's failure is posted by a peer, and what the stuck rank
     * wrote afterwards (a closed connection) is a consequence. */
    if (words && !strstr(words, first)) words = NULL;
    if (words) {
        int st = L->w[local].status;
        bool stopped = local != o->local && WIFSIGNALED(st) &&
                       (WTERMSIG(st) == SIGTERM || WTERMSIG(st) == SIGKILL);
        /* From here on the outcome is this rank's, with the status it
         * exited with or would have (its error's), so ltrun's exit status
         * and the restart rule follow the failure it names. */
        if (stopped) st = W_EXITCODE(ltrun_exit_status((lt_status)L->slots[local].error_status), 0);
        o->local = local;
        o->status = st;
        o->at = L->slots[local];
        report_worker(L, local, st, &o->at, o->others, words, stopped);
        return;
    }
    const char *mine = worker_words(L, o->local);
    report_worker(L, o->local, o->status, &o->at, o->others, mine, false);
    /* Said last, so it is the line a user reads first; not again when the
     * rank just named already quoted it ("rank 0 failed: <reason>"). */
    if (r >= 0 && !(mine && strstr(mine, first)))
        launcher_say("the first failure: rank %d: %s", r, first);
}

/* The checkpoint a restart resumes from: this launch's last.safetensors
 * (node 0 decides, the others follow); "" = start over. */
static int resume_path(launcher *L, int restart, char *out, size_t n) {
    const lt_launch_info *in = L->info;
    char key[64];
    snprintf(key, sizeof key, RESUME_KEY, restart);
    out[0] = 0;
    if (in->node_rank == 0) {
        char path[1200];
        snprintf(path, sizeof path, "%s/last.safetensors", in->ckpt_dir);
        struct stat sb;
        if (stat(path, &sb) == 0 && (sb.st_mtim.tv_sec > L->started.tv_sec ||
                                     (sb.st_mtim.tv_sec == L->started.tv_sec && sb.st_mtim.tv_nsec >= L->started.tv_nsec)))
            snprintf(out, n, "%s", path);
        if (in->num_nodes > 1) {
            char val[1300];
            snprintf(val, sizeof val, "%s%s", out[0] ? "ckpt:" : "none", out);
            if (launcher_connect_client(L)) return -1;
            if (lt_store_set(L->client, key, val, strlen(val)) != LT_OK) {
                launcher_say("error: cannot tell the other nodes where to resume: %s", lt_store_error(L->client));
                return -1;
            }
        }
        return 0;
    }
    if (launcher_connect_client(L)) return -1;
    void *v = NULL;
    size_t len = 0;
    if (lt_store_get(L->client, key, &v, &len) != LT_OK) {
        launcher_say("error: node %d: node 0 did not say where restart %d resumes: %s", in->node_rank, restart,
            lt_store_error(L->client));
        return -1;
    }
    char val[1300];
    snprintf(val, sizeof val, "%.*s", (int)(len < sizeof val ? len : sizeof val - 1), (char *)v);
    free(v);
    if (!strncmp(val, "ckpt:", 5)) {
        snprintf(out, n, "%s", val + 5);
        if (access(out, R_OK)) {
            launcher_say("error: node 0 resumes from %s, which this node (%s) cannot read: %s; put checkpoint.dirpath on a file system every node shares",
                out, L->host, strerror(errno));
            return -1;
        }
    }
    return 0;
}

static int fixed_job(launcher *L, int cores);

int ltrun_launch(const lt_launch_info *info, char **argv) {
    launcher L = {.info = info, .argv = argv, .slot_fd = -1};
    while (argv[L.argc]) L.argc++;
    L.nproc = info->nproc_per_node;
    L.node_rank = info->node_rank;
    L.num_nodes = info->num_nodes;
    L.world = info->nproc_per_node * info->num_nodes;
    L.port = info->master_port;
    snprintf(L.master_addr, sizeof L.master_addr, "%s", info->master_addr[0] ? info->master_addr : "127.0.0.1");
    clock_gettime(CLOCK_REALTIME, &L.started);
    if (gethostname(L.host, sizeof L.host - 1)) snprintf(L.host, sizeof L.host, "?");
    snprintf(L.store_host, sizeof L.store_host, "%s", info->master_addr[0] ? info->master_addr : "127.0.0.1");
    if (L.nproc < 1) {
        launcher_say("error: trainer.devices gives %d processes per node; need at least 1", L.nproc);
        return EXIT_REFUSED;
    }
    int cores = usable_cores();
    L.threads = cores / L.nproc > 1 ? cores / L.nproc : 1;
    /* A signal ignored since ltrun started stays ignored, for the workers
     * too (they inherit it): nohup's SIGHUP, SIGINT of a background job. */
    sigemptyset(&L.stop_sigs);
    const int stop_sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof stop_sigs / sizeof stop_sigs[0]; i++) {
        struct sigaction sa;
        if (sigaction(stop_sigs[i], NULL, &sa) == 0 && sa.sa_handler == SIG_IGN) continue;
        sigaddset(&L.stop_sigs, stop_sigs[i]);
    }
    L.sigs = L.stop_sigs;
    sigaddset(&L.sigs, SIGCHLD);
    signal(SIGCHLD, SIG_DFL); /* an inherited SIG_IGN would reap the workers behind our back */
    sigprocmask(SIG_SETMASK, NULL, &L.oldmask);

    int rc = 1;
    L.w = calloc((size_t)L.nproc, sizeof *L.w);
    if (!L.w) launcher_say("error: out of memory");
    else if (make_slots(&L) == 0) rc = info->min_nodes > 0 ? launcher_elastic(&L) : fixed_job(&L, cores);
    launcher_stop_group(&L, SIGKILL); /* only after a launcher error: none is alive otherwise */
    if (L.client) lt_store_close(L.client);
    lt_store_server_stop(L.srv);
    if (L.slots) munmap(L.slots, L.slots_len);
    if (L.slot_fd >= 0) close(L.slot_fd);
    free(L.w);
    sigprocmask(SIG_SETMASK, &L.oldmask, NULL);
    return rc;
}

/* A fixed number of nodes (--num-nodes N): node 0 hosts the store; a
 * failure restarts every node's group (up to max_restarts). */
static int fixed_job(launcher *L, int cores) {
    const lt_launch_info *info = L->info;
    int rc = 1;
    char resume[1400] = "";
    if (info->node_rank == 0 && start_store(L)) return 1;
    if (choose_seed(L)) return 1;
    /* From here on signals wait for the supervisor; before, with no worker
     * yet, ^C simply ends ltrun (say while node 1 waits for node 0's seed). */
    sigprocmask(SIG_BLOCK, &L->sigs, NULL);
    char threads[96] = "";
    if (!getenv("OPENBLAS_NUM_THREADS") || !getenv("OMP_NUM_THREADS"))
        snprintf(threads, sizeof threads, "; %d thread%s each (%d cores)", L->threads, L->threads == 1 ? "" : "s", cores);
    printf("ltrun: node %d of %d (%s): starting %d worker%s, ranks %d-%d of %d; rendezvous store at %s:%d%s%s\n",
           info->node_rank, info->num_nodes, L->host, L->nproc, L->nproc == 1 ? "" : "s", info->node_rank * L->nproc,
           info->node_rank * L->nproc + L->nproc - 1, L->world, info->master_addr[0] ? info->master_addr : "127.0.0.1",
           L->port, info->node_rank == 0 ? " (hosted here)" : "", threads);
    for (int restart = 0;; restart++) {
        if (launcher_start_group(L, restart, resume)) return 1;
        outcome o;
        launcher_supervise(L, &o);
        if (L->late_signal || o.kind == OUT_SIGNALLED) launcher_say_words(L); /* no report follows */
        if (L->late_signal) {
            rc = 128 + L->late_signal;
            break;
        }
        if (o.kind == OUT_OK) {
            rc = 0;
            break;
        }
        if (o.kind == OUT_SIGNALLED) {
            rc = 128 + o.signo;
            break;
        }
        launcher_report(L, &o, restart);
        /* The worker's own rule (main.c): 2 when it refused its input, so a
         * script sees the same status with one process or many; a rank
         * killed by a signal is a lost rank, 1, as torchrun reports it. */
        rc = launcher_refused(o.status) ? EXIT_REFUSED : 1;
        if (restart >= info->max_restarts) break;
        if (launcher_cannot_cure(&o)) {
            launcher_say("not restarting (launcher.max_restarts = %d): rank %d %s, which a restart would repeat; fix the error above",
                info->max_restarts, info->node_rank * L->nproc + o.local,
                WEXITSTATUS(o.status) == EXIT_NO_EXEC ? "could not be executed"
                                                      : "refused its configuration or input (exit status 2)");
            break;
        }
        if (resume_path(L, restart + 1, resume, sizeof resume)) {
            rc = 1;
            break;
        }
        if (resume[0])
            launcher_say("restarting all %d rank%s on this node (restart %d of %d, LT_RESTART_COUNT=%d), resuming from %s", L->nproc,
                L->nproc == 1 ? "" : "s", restart + 1, info->max_restarts, restart + 1, resume);
        else
            launcher_say("restarting all %d rank%s on this node (restart %d of %d, LT_RESTART_COUNT=%d) with the original arguments: this run wrote no %s/last.safetensors yet",
                L->nproc, L->nproc == 1 ? "" : "s", restart + 1, info->max_restarts, restart + 1, info->ckpt_dir);
    }
    return rc;
}
