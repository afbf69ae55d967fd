/* Elastic nodes: ltrun --nnodes MIN:MAX, torchrun's c10d rendezvous in
 * lt's own store.
 *
 * The launcher whose address is --rdzv-endpoint hosts the store (as
 * torchrun's c10d backend: that node must outlive the job); every launcher,
 * that one included, is an agent with an id of its own (a store counter)
 * that bumps its heartbeat key about once a second.
 *
 * The job is a sequence of rounds. An agent joins round R by taking the
 * next index of r<R>/n and writing its description (agent id, processes,
 * pid, host) under r<R>/node/<index>. Any waiting agent may close the round
 * (a compare-and-set of r<R>/closed to the list of its members' join
 * indices, so one list wins): the live joiners (a description, not gone,
 * a heartbeat that moves), at most MAX of them, once
 *   - MAX live agents joined, or
 *   - every member of round R-1 has joined or left (said so, or sent no
 *     heartbeat for keepalive_timeout_s), at least MIN joined, and either
 *     all of R-1 came back or last_call_s passed since (round 0: last_call_s
 *     since MIN joined, so a job does not start with MIN when more arrive).
 * Round R+1 cannot close while a live member of R has not joined it, so a
 * new node waits there until the members let it in; nobody trains alone
 * beside a running job. A joiner left out of the list (too late, or taken
 * for gone) joins R+1 at once. Before its workers start, an agent checks
 * that its round was not aborted and no later round closed meanwhile.
 *
 * While round R trains, each agent checks the store once a second:
 *   - r<R>/abort (a member's workers failed, or a member left: no
 *     heartbeat for keepalive_timeout_s): stop ours now and rejoin;
 *   - agents waiting in r<R+1>/n and fewer than MAX nodes: ask the workers
 *     to stop at a step boundary (SIGUSR2; they agree on the step, rank 0
 *     saves last.safetensors, all exit 0 with phase STOPPED) and rejoin.
 * An agent whose own worker failed sets r<R>/abort; the first to set it
 * counts one restart in the job's "restarts" counter, and past
 * launcher.max_restarts every agent gives up, as torchrun's agents do. A
 * node joining is not a failure and costs no restart.
 *
 * Ranks of a round: the agents that were members of the round before come
 * first, in their old rank order, then the new ones in join order, so rank
 * 0 stays where it was while it can. Node 0 of each round after the first decides where to
 * resume (this job's last.safetensors, written after the job started) and
 * publishes it under r<R>/resume. Workers of round R get
 * LT_RESTART_COUNT = R (fresh process-group keys), --num-nodes N and, for a
 * resume, --ckpt-path; a checkpoint from another world size resumes its
 * epoch where the same samples are done (trainer/checkpoint.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include "args.h"
#include "launcher_internal.h"

#define TICK_S 0.2     /* rendezvous polling */
#define BEAT_S 1.0     /* heartbeat period */
#define LINGER_S 5.0   /* the store's host, at the end: how long it waits for the others to leave */
#define MAX_DESC 400
#define LIST_CHARS 4096 /* a list of up to 512 indices (launcher.nnodes caps MAX at 512) */

typedef struct member {
    int agent, nproc, pid;
    bool was_in; /* a member of the round before */
    char host[256];
} member;

typedef struct seen { /* another agent's heartbeat, as this one saw it */
    int agent;
    int64_t beat;
    double since; /* when the value last changed (this clock) */
} seen;

typedef struct elastic {
    launcher *L;
    const lt_launch_info *in;
    char pfx[200];
    int agent;
    int64_t beat;
    double next_beat;
    bool hosting;
    int round;             /* the round this agent is a member of, or waits in */
    member *cur, *prev;    /* members of round and round - 1 (ranks order) */
    int ncur, nprev;
    seen *seen;
    int nseen, capseen;
    bool asked_stop;       /* this round: the workers were asked to stop */
    long long started_ns;  /* the job's start (realtime), for "this job's checkpoint" */
} elastic;

static const char *key(elastic *E, char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static const char *key(elastic *E, char *buf, size_t n, const char *fmt, ...) {
    int k = snprintf(buf, n, "%s", E->pfx);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + k, n - (size_t)k, fmt, ap);
    va_end(ap);
    return buf;
}

/* Store errors end the agent: the store's host is gone or unreachable. */
static int store_failed(elastic *E, const char *what) {
    launcher_say("error: elastic rendezvous at %s:%d, key %s: %s (is the node hosting --rdzv-endpoint still up? it "
                 "must outlive the job)", E->L->store_host, E->L->port, what, lt_store_error(E->L->client));
    return -1;
}

static int counter(elastic *E, const char *k, int64_t delta, int64_t *out) {
    if (lt_store_add(E->L->client, k, delta, out) != LT_OK) return store_failed(E, k);
    return 0;
}

/* try_get as a string: 1 found, 0 absent, -1 error. */
static int peek(elastic *E, const char *k, char *out, size_t n) {
    void *v = NULL;
    size_t len = 0;
    lt_status st = lt_store_try_get(E->L->client, k, &v, &len);
    if (st == LT_ERR_NOT_FOUND) return 0;
    if (st != LT_OK) return store_failed(E, k);
    snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), (char *)v);
    free(v);
    return 1;
}

/* Sets k to val unless it exists; out gets what it holds after (ours or the
 * winner's). 1 when ours won. */
static int set_once(elastic *E, const char *k, const char *val, char *out, size_t n) {
    void *cur = NULL;
    size_t len = 0;
    if (lt_store_compare_set(E->L->client, k, NULL, 0, val, strlen(val), &cur, &len) != LT_OK) return store_failed(E, k);
    if (out) snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), (char *)cur);
    bool won = len == strlen(val) && !memcmp(cur, val, len);
    free(cur);
    return won;
}

static int heartbeat(elastic *E) {
    double now = launcher_mono();
    if (now < E->next_beat) return 0;
    E->next_beat = now + BEAT_S;
    char k[300];
    return counter(E, key(E, k, sizeof k, "hb/%d", E->agent), 1, &E->beat);
}

static void mark_gone(elastic *E) {
    char k[300];
    if (E->L->client) lt_store_set(E->L->client, key(E, k, sizeof k, "gone/%d", E->agent), "1", 1);
}

/* Whether agent a has left the job: said so, or no heartbeat seen to change
 * for keepalive_s on this clock. -1 on a store error. */
static int has_left(elastic *E, int a) {
    char k[300], v[32];
    int r = peek(E, key(E, k, sizeof k, "gone/%d", a), v, sizeof v);
    if (r) return r;
    int64_t beat;
    if (counter(E, key(E, k, sizeof k, "hb/%d", a), 0, &beat)) return -1;
    double now = launcher_mono();
    int i = 0;
    while (i < E->nseen && E->seen[i].agent != a) i++;
    if (i == E->nseen) {
        if (E->nseen == E->capseen) {
            int cap = E->capseen ? 2 * E->capseen : 16;
            seen *s = realloc(E->seen, (size_t)cap * sizeof *s);
            if (!s) return 0;
            E->seen = s;
            E->capseen = cap;
        }
        E->seen[E->nseen++] = (seen){a, beat, now};
        return 0;
    }
    if (E->seen[i].beat != beat) E->seen[i] = (seen){a, beat, now};
    return now - E->seen[i].since >= E->in->keepalive_s;
}

static int parse_member(const char *v, member *m) {
    int used = 0;
    memset(m, 0, sizeof *m);
    if (sscanf(v, "%d\t%d\t%d\t%n", &m->agent, &m->nproc, &m->pid, &used) != 3 || !used) return -1;
    snprintf(m->host, sizeof m->host, "%s", v + used);
    return 0;
}

/* The description joiner idx of round R wrote: 1, 0 when it has not (yet:
 * it writes it just after taking the index, or died in between), -1 on a
 * store error or a value that is not one. */
static int read_member(elastic *E, int R, int idx, member *m) {
    char k[300], buf[MAX_DESC];
    int got = peek(E, key(E, k, sizeof k, "r%d/node/%d", R, idx), buf, sizeof buf);
    if (got <= 0) return got;
    if (parse_member(buf, m)) {
        launcher_say("error: elastic rendezvous: %s holds '%s', not an lt agent's description; is another program "
                     "using this store?", k, buf);
        return -1;
    }
    return 1;
}

/* Round R's member list as its closer wrote it, r<R>/closed = the join
 * indices of the members, "3,0,1": 1 closed (*idx malloc'ed), 0 open, -1
 * error. */
static int closed_list(elastic *E, int R, int **idx, int *n) {
    char k[300], v[LIST_CHARS];
    *idx = NULL;
    *n = 0;
    int got = peek(E, key(E, k, sizeof k, "r%d/closed", R), v, sizeof v);
    if (got <= 0) return got;
    int cap = 1;
    for (const char *c = v; *c; c++) cap += *c == ',';
    *idx = calloc((size_t)cap, sizeof **idx);
    if (!*idx) return -1;
    for (const char *c = v; *c && *n < cap;) {
        char *end;
        long j = strtol(c, &end, 10);
        if (end == c || j < 0) {
            launcher_say("error: elastic rendezvous: %s = '%s' is not a list of join indices", k, v);
            free(*idx);
            *idx = NULL;
            return -1;
        }
        (*idx)[(*n)++] = (int)j;
        c = *end == ',' ? end + 1 : end;
    }
    return 1;
}

/* The members of closed round R in rank order. The first agent to read
 * them after the close publishes the order (r<R>/order: positions in the
 * closed list), so every agent uses the same one: the members of round
 * R - 1 first, in their old rank order (rank 0 stays where it was while it
 * can), then the new ones in join order. before (optional) receives round
 * R - 1's members in their order. */
static int read_round(elastic *E, int R, member **out, int *nout, member **before, int *nbefore) {
    char k[300], order[LIST_CHARS];
    int *idx = NULL, n = 0, np = 0, rc = -1;
    member *m = NULL, *sorted = NULL, *pm = NULL;
    if (closed_list(E, R, &idx, &n) != 1 || n < 1) goto done;
    m = calloc((size_t)n, sizeof *m);
    sorted = calloc((size_t)n, sizeof *sorted);
    if (!m || !sorted) goto done;
    for (int i = 0; i < n; i++)
        if (read_member(E, R, idx[i], &m[i]) != 1) { /* the closer saw it: gone only if the store lost it */
            launcher_say("error: elastic rendezvous: member %d of round %d has no description", idx[i], R);
            goto done;
        }
    int have = peek(E, key(E, k, sizeof k, "r%d/order", R), order, sizeof order);
    if (have < 0) goto done;
    if (R > 0 && (!have || before) && read_round(E, R - 1, &pm, &np, NULL, NULL)) goto done;
    size_t len = 0;
    for (int pass = 0; pass < 2 && !have; pass++) /* old members by old rank, then the new by join order */
        for (int i = 0; i < (pass ? n : np); i++)
            for (int j = 0; j < n; j++) {
                bool was = false;
                for (int q = 0; q < np && !was; q++) was = pm[q].agent == m[j].agent;
                if (pass ? (j == i && !was) : (was && pm[i].agent == m[j].agent))
                    len += (size_t)snprintf(order + len, sizeof order - len, "%s%d", len ? "," : "", j);
            }
    if (!have && set_once(E, key(E, k, sizeof k, "r%d/order", R), order, order, sizeof order) < 0) goto done;
    const char *p = order;
    for (int i = 0; i < n; i++) {
        char *end;
        long j = strtol(p, &end, 10);
        if (end == p || j < 0 || j >= n) {
            launcher_say("error: elastic rendezvous: %s = '%s' is not an order of %d nodes", k, order, n);
            goto done;
        }
        sorted[i] = m[j];
        for (int q = 0; q < np; q++) sorted[i].was_in |= pm[q].agent == m[j].agent;
        p = *end == ',' ? end + 1 : end;
    }
    *out = sorted;
    *nout = n;
    sorted = NULL;
    if (before) {
        *before = pm;
        *nbefore = np;
        pm = NULL;
    }
    rc = 0;
done:
    if (rc && !m) launcher_say("error: elastic rendezvous: round %d has no member list (or no memory)", R);
    free(idx);
    free(m);
    free(sorted);
    free(pm);
    return rc;
}

/* Joiners of round R that are alive: they wrote a description and have not
 * left (gone/, or a heartbeat this agent saw stand still keepalive_s).
 * *agents (optional, malloc'ed) gets their agent ids; -1 on a store error. */
static int live_joiners(elastic *E, int R, int **jidx, int **agents) {
    char k[300];
    int64_t count;
    *jidx = NULL;
    if (agents) *agents = NULL;
    if (counter(E, key(E, k, sizeof k, "r%d/n", R), 0, &count)) return -1;
    int *j = calloc((size_t)count + 1, sizeof *j), *a = calloc((size_t)count + 1, sizeof *a), n = 0;
    if (!j || !a) {
        free(j);
        free(a);
        return -1;
    }
    for (int i = 0; i < count; i++) {
        member m;
        int got = read_member(E, R, i, &m);
        int left = got == 1 ? has_left(E, m.agent) : 0;
        if (got < 0 || left < 0) {
            free(j);
            free(a);
            return -1;
        }
        if (got == 1 && !left) j[n] = i, a[n++] = m.agent;
    }
    *jidx = j;
    if (agents) *agents = a;
    else free(a);
    return n;
}

/* Closes round R when the rules in the header allow, with the live joiners
 * as its members; *since is this waiter's clock for the last call (-1: not
 * running). */
static int try_close(elastic *E, int R, double *since) {
    const lt_launch_info *in = E->in;
    char k[300], v[LIST_CHARS];
    int *jidx = NULL, *agents = NULL, *pidx = NULL, np = 0;
    int live = live_joiners(E, R, &jidx, &agents), rc = -1;
    if (live < 0) return -1;
    bool ready = live >= in->max_nodes;
    if (!ready && live < in->min_nodes) *since = -1;
    if (!ready && live >= in->min_nodes) {
        bool last_call = true; /* round 0, or a member of R - 1 is missing */
        if (R > 0) {
            if (closed_list(E, R - 1, &pidx, &np) < 0) goto done;
            int missing = 0;
            for (int i = 0; i < np; i++) {
                member pm;
                if (read_member(E, R - 1, pidx[i], &pm) != 1) goto done;
                bool joined = false;
                for (int j = 0; j < live && !joined; j++) joined = agents[j] == pm.agent;
                if (joined) continue;
                int left = has_left(E, pm.agent);
                if (left < 0) goto done;
                if (!left) { /* still training in R - 1, or on its way here */
                    *since = -1;
                    rc = 0;
                    goto done;
                }
                missing++;
            }
            last_call = missing > 0;
        }
        if (!last_call) {
            ready = true;
        } else {
            double now = launcher_mono();
            if (*since < 0) *since = now;
            ready = now - *since >= in->last_call_s;
        }
    }
    rc = 0;
    if (!ready) goto done;
    size_t len = 0;
    for (int i = 0; i < live && i < in->max_nodes; i++)
        len += (size_t)snprintf(v + len, sizeof v - len, "%s%d", i ? "," : "", jidx[i]);
    int won = set_once(E, key(E, k, sizeof k, "r%d/closed", R), v, NULL, 0);
    if (won < 0) rc = -1;
    else if (won) {
        snprintf(v, sizeof v, "%d", R);
        if (lt_store_set(E->L->client, key(E, k, sizeof k, "latest"), v, strlen(v)) != LT_OK) rc = store_failed(E, k);
    }
done:
    free(jidx);
    free(agents);
    free(pidx);
    return rc;
}

/* The job's end, as other agents left it: 0 = still on, else the exit
 * status to end with (and the message said). */
static int job_over(elastic *E, int *rc) {
    char k[300], v[64];
    int r = peek(E, key(E, k, sizeof k, "finished"), v, sizeof v);
    if (r < 0) return -1;
    if (r) {
        launcher_say("elastic job '%s' has finished; nothing left for this node to do", E->in->rdzv_id);
        *rc = 0;
        return 1;
    }
    if ((r = peek(E, key(E, k, sizeof k, "fatal"), v, sizeof v)) < 0) return -1;
    if (r) {
        launcher_say("elastic job '%s' ended on another node (exit status %s); not rejoining", E->in->rdzv_id, v);
        *rc = atoi(v) ? atoi(v) : 1;
        return 1;
    }
    return 0;
}

/* Joins rounds from E->round on until one takes this agent in (0), the job
 * is over or a stop signal came (1, *rc set), or an error (-1). */
static int join(elastic *E, int *rc) {
    const lt_launch_info *in = E->in;
    launcher *L = E->L;
    double t0 = launcher_mono();
    char desc[MAX_DESC], k[300];
    snprintf(desc, sizeof desc, "%d\t%d\t%d\t%s", E->agent, L->nproc, (int)getpid(), L->host);
    for (int R = E->round;; R++) {
        int64_t idx;
        if (counter(E, key(E, k, sizeof k, "r%d/n", R), 1, &idx)) return -1;
        idx--;
        if (lt_store_set(L->client, key(E, k, sizeof k, "r%d/node/%" PRId64, R, idx), desc, strlen(desc)) != LT_OK)
            return store_failed(E, k);
        double since = -1;
        for (;;) {
            if (heartbeat(E)) return -1;
            int over = job_over(E, rc);
            if (over) return over;
            int *list, n;
            int got = closed_list(E, R, &list, &n);
            if (got < 0) return -1;
            if (got) {
                bool in_it = false;
                for (int i = 0; i < n && !in_it; i++) in_it = list[i] == idx;
                free(list);
                if (!in_it) break; /* came too late for R (or was taken for gone): wait in R + 1 */
                member *m, *pm;
                int np;
                if (read_round(E, R, &m, &n, &pm, &np)) return -1;
                free(E->prev);
                free(E->cur);
                E->prev = pm;
                E->nprev = np;
                E->cur = m;
                E->ncur = n;
                E->round = R;
                return 0;
            }
            if (try_close(E, R, &since)) return -1;
            if (launcher_mono() - t0 > in->join_timeout_s) {
                launcher_say("error: node %s waited %d s (launcher.join_timeout_s) in elastic round %d of job '%s' and "
                             "was not taken in: fewer than %d nodes came, or the job already has its %d",
                             L->host, in->join_timeout_s, R, in->rdzv_id, in->min_nodes, in->max_nodes);
                return -1;
            }
            int sig = launcher_wait_signal(L, TICK_S);
            if (sig) {
                *rc = 128 + sig;
                return 1;
            }
        }
    }
}

static void describe(const member *m, int n, char *out, size_t len) {
    size_t k = 0;
    out[0] = 0;
    for (int i = 0; i < n && k < len; i++)
        k += (size_t)snprintf(out + k, len - k, "%s%s/%d", i ? ", " : "", m[i].host, m[i].pid);
}

/* One line per change of members, on every node. */
static void say_round(elastic *E, int me) {
    launcher *L = E->L;
    const lt_launch_info *in = E->in;
    char all[2048], joined[1024] = "", left[1024] = "";
    describe(E->cur, E->ncur, all, sizeof all);
    size_t kj = 0, kl = 0;
    for (int i = 0; i < E->ncur; i++)
        if (!E->cur[i].was_in && E->round > 0 && kj < sizeof joined)
            kj += (size_t)snprintf(joined + kj, sizeof joined - kj, "%s%s/%d", kj ? ", " : "", E->cur[i].host, E->cur[i].pid);
    for (int i = 0; i < E->nprev; i++) {
        bool stayed = false;
        for (int j = 0; j < E->ncur && !stayed; j++) stayed = E->cur[j].agent == E->prev[i].agent;
        if (!stayed && kl < sizeof left)
            kl += (size_t)snprintf(left + kl, sizeof left - kl, "%s%s/%d", kl ? ", " : "", E->prev[i].host, E->prev[i].pid);
    }
    char change[2200];
    if (E->round == 0) snprintf(change, sizeof change, "started");
    else snprintf(change, sizeof change, "%s%s%s%s%s", kj ? "joined: " : "", joined, kj && kl ? "; " : "",
                  kl ? "left: " : "", left);
    if (E->round > 0 && !kj && !kl) snprintf(change, sizeof change, "the same nodes, after a failure");
    long long eff = (long long)in->batch_size * L->world * (in->accumulate > 0 ? in->accumulate : 1);
    printf("ltrun: elastic round %d: %d node%s (%d..%d) [%s]; %s; this is node %d, ranks %d-%d of %d; effective batch "
           "%lld (batch_size %d x %d ranks x accumulate %d), lr by optimizer.lr_scaling = %s\n",
           E->round, E->ncur, E->ncur == 1 ? "" : "s", in->min_nodes, in->max_nodes, all, change, me, me * L->nproc,
           me * L->nproc + L->nproc - 1, L->world, eff, in->batch_size, L->world, in->accumulate > 0 ? in->accumulate : 1,
           in->lr_scaling);
    fflush(stdout);
}

/* Node 0 of a round after the first: this job's last.safetensors, if one
 * was written since the job started; the others read its choice, polling
 * (heartbeats go on) until it is there, the round is aborted, or node 0
 * left without saying (then this agent aborts the round). 0 with out set,
 * 1 to rejoin in the next round, 2 on a stop signal (*rc), -1 on error. */
static int resume_of_round(elastic *E, char *out, size_t n, int *rc) {
    launcher *L = E->L;
    char k[300], a[300], val[1300];
    out[0] = 0;
    if (E->round == 0) return 0;
    key(E, k, sizeof k, "r%d/resume", E->round);
    key(E, a, sizeof a, "r%d/abort", E->round);
    if (L->node_rank == 0) {
        char path[1200];
        struct stat sb;
        snprintf(path, sizeof path, "%s/last.safetensors", E->in->ckpt_dir);
        long long mt = 0;
        if (stat(path, &sb) == 0) mt = (long long)sb.st_mtim.tv_sec * 1000000000ll + sb.st_mtim.tv_nsec;
        if (mt && mt >= E->started_ns) snprintf(out, n, "%s", path);
        snprintf(val, sizeof val, "%s%s", out[0] ? "ckpt:" : "none", out);
        if (lt_store_set(L->client, k, val, strlen(val)) != LT_OK) return store_failed(E, k);
        return 0;
    }
    for (;;) {
        int got = peek(E, k, val, sizeof val);
        if (got < 0) return -1;
        if (got) break;
        char why[600];
        if ((got = peek(E, a, why, sizeof why)) != 0) return got < 0 ? -1 : 1;
        if (heartbeat(E)) return -1;
        int left = has_left(E, E->cur[0].agent);
        if (left < 0) return -1;
        if (left) {
            snprintf(why, sizeof why, "node 0 (%s/%d) left before saying where round %d resumes", E->cur[0].host,
                     E->cur[0].pid, E->round);
            launcher_say("%s; re-forming the job", why);
            return set_once(E, a, why, NULL, 0) < 0 ? -1 : 1;
        }
        int sig = launcher_wait_signal(L, TICK_S);
        if (sig) {
            *rc = 128 + sig;
            return 2;
        }
    }
    if (!strncmp(val, "ckpt:", 5)) {
        snprintf(out, n, "%s", val + 5);
        if (access(out, R_OK)) {
            launcher_say("error: node 0 resumes from %s, which this node (%s) cannot read: %s; put checkpoint.dirpath "
                         "on a file system every node shares", out, L->host, strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* Whether round R is still the one to train: not aborted, and no later
 * round closed while this agent was getting ready. 1 yes, 0 no, -1 error. */
static int round_current(elastic *E) {
    char k[300], v[16];
    int got = peek(E, key(E, k, sizeof k, "r%d/abort", E->round), v, sizeof v);
    if (got == 0) got = peek(E, key(E, k, sizeof k, "r%d/closed", E->round + 1), v, sizeof v);
    return got < 0 ? -1 : !got;
}

static bool all_slots(launcher *L, int phase) {
    for (int i = 0; i < L->nproc; i++)
        if (L->w[i].alive && __atomic_load_n(&L->slots[i].phase, __ATOMIC_RELAXED) != phase) return false;
    return true;
}

/* The supervision loop's question, once a second (launcher_supervise):
 * stop now when the round was aborted or one of its members left (no
 * heartbeat for keepalive_s: a machine lost without a closed connection);
 * stop at a step boundary when a live node waits to join and there is room,
 * once every local worker trains (one still setting up is left to reach
 * training: killing it would fail its peers' collectives and cost a
 * restart a join must not cost). */
static poll_action poll_round(launcher *L) {
    elastic *E = L->poll_ctx;
    char k[300], why[1100];
    if (heartbeat(E)) return POLL_STOP_NOW;
    int r = peek(E, key(E, k, sizeof k, "r%d/abort", E->round), why, sizeof why);
    if (r < 0) return POLL_STOP_NOW;
    if (r) {
        launcher_say("the job is re-forming (%s); stopping this node's workers", why);
        return POLL_STOP_NOW;
    }
    for (int i = 0; i < E->ncur; i++) {
        if (E->cur[i].agent == E->agent) continue;
        int left = has_left(E, E->cur[i].agent);
        if (left < 0) return POLL_STOP_NOW;
        if (!left) continue;
        snprintf(why, sizeof why, "node %s/%d left the job (said so, or no heartbeat for %d s)", E->cur[i].host,
                 E->cur[i].pid, E->in->keepalive_s);
        if (set_once(E, key(E, k, sizeof k, "r%d/abort", E->round), why, NULL, 0) < 0) return POLL_STOP_NOW;
        launcher_say("%s; stopping this node's workers to re-form the job", why);
        return POLL_STOP_NOW;
    }
    if (E->ncur >= E->in->max_nodes) return POLL_GO_ON;
    int *jidx = NULL;
    int waiting = live_joiners(E, E->round + 1, &jidx, NULL);
    free(jidx);
    if (waiting < 0) return POLL_STOP_NOW;
    if (waiting == 0 || all_slots(L, LT_PHASE_DONE)) return POLL_GO_ON; /* nobody, or finishing anyway */
    if (!all_slots(L, LT_PHASE_TRAIN)) return POLL_GO_ON;
    if (!E->asked_stop)
        launcher_say("a node is waiting to join (%d in round %d); stopping this node's workers at the next step "
                     "boundary to take it in", waiting, E->round + 1);
    E->asked_stop = true;
    return POLL_STOP_AT_STEP;
}

static bool stopped_at_step(launcher *L) {
    for (int i = 0; i < L->nproc; i++)
        if (__atomic_load_n(&L->slots[i].phase, __ATOMIC_RELAXED) == LT_PHASE_STOPPED) return true;
    return false;
}

/* The store: hosted here when the endpoint is one of this machine's
 * addresses and its port is free, else a client of whoever hosts it. */
static int meet(elastic *E) {
    launcher *L = E->L;
    const lt_launch_info *in = E->in;
    bool local = false;
    if (launcher_addr_is_local(in->master_addr, "launcher.rdzv_endpoint", &local)) return -1;
    snprintf(L->store_host, sizeof L->store_host, "%s", in->master_addr);
    snprintf(L->master_addr, sizeof L->master_addr, "%s", in->master_addr);
    L->port = in->master_port;
    char bind_err[1024] = "";
    if (local) {
        int port = 0;
        if (lt_store_server_start(in->master_addr, in->master_port, NULL, &L->srv, &port, bind_err,
                                  sizeof bind_err) == LT_OK)
            E->hosting = true;
        else /* another launcher on this machine hosts it: join as a client */
            L->srv = NULL;
    }
    if (launcher_connect_client(L)) {
        if (bind_err[0]) launcher_say("(this node could not host it either: %s)", bind_err);
        return -1;
    }
    /* Store calls shorter than a third of the keepalive: an agent cut off
     * from the store finds out (and stops its workers) before the others
     * take it for gone and re-form without it. */
    int tmo = in->keepalive_s * 1000 / 3;
    L->client_tmo_ms = tmo > 2000 ? tmo : 2000;
    lt_store_set_timeout(L->client, L->client_tmo_ms);
    snprintf(E->pfx, sizeof E->pfx, "elastic/");
    char k[300], id[160];
    int r = set_once(E, key(E, k, sizeof k, "id"), in->rdzv_id, id, sizeof id);
    if (r < 0) return -1;
    if (!r) {
        launcher_say("error: the rendezvous at %s:%d belongs to elastic job '%s', this node was started for '%s'; "
                     "give every node the same --rdzv-id (or another --rdzv-endpoint)", L->store_host, L->port, id,
                     in->rdzv_id);
        return -2;
    }
    snprintf(E->pfx, sizeof E->pfx, "elastic/%s/", in->rdzv_id);
    /* One worker count for the whole job, said by the first node: a node
     * with another is refused here, before it stops a running round. */
    char mine_n[16], job_n[16];
    snprintf(mine_n, sizeof mine_n, "%d", L->nproc);
    r = set_once(E, key(E, k, sizeof k, "nproc"), mine_n, job_n, sizeof job_n);
    if (r < 0) return -1;
    if (!r) {
        launcher_say("error: elastic job '%s' runs %s worker%s per node, this node %d; give every node the same "
                     "--nproc-per-node (trainer.devices)", in->rdzv_id, job_n, strcmp(job_n, "1") ? "s" : "", L->nproc);
        return -2;
    }
    int64_t a;
    if (counter(E, key(E, k, sizeof k, "agents"), 1, &a)) return -1;
    E->agent = (int)a;
    char now[32], v[32];
    snprintf(now, sizeof now, "%lld", (long long)L->started.tv_sec * 1000000000ll + L->started.tv_nsec);
    if (set_once(E, key(E, k, sizeof k, "started"), now, v, sizeof v) < 0) return -1;
    E->started_ns = atoll(v);
    /* One seed for every round (see launcher.h): ours if set, else the first agent's. */
    if (!L->seed[0]) {
        const char *env = getenv("LT_GLOBAL_SEED");
        if (in->seed[0]) snprintf(L->seed, sizeof L->seed, "%s", in->seed);
        else if (env && *env) snprintf(L->seed, sizeof L->seed, "%s", env);
    }
    char mine[32];
    if (L->seed[0]) snprintf(mine, sizeof mine, "%s", L->seed);
    else {
        uint32_t s = 0;
        if (getrandom(&s, sizeof s, 0) != (ssize_t)sizeof s) s = (uint32_t)getpid() * 2654435761u;
        snprintf(mine, sizeof mine, "%u", s);
    }
    r = set_once(E, key(E, k, sizeof k, "seed"), mine, L->seed, sizeof L->seed);
    if (r < 0) return -1;
    if (r && !in->seed[0]) printf("ltrun: no seed set (trainer.seed): every rank uses %s\n", L->seed);
    /* where to join: after the last round closed */
    r = peek(E, key(E, k, sizeof k, "latest"), v, sizeof v);
    if (r < 0) return -1;
    E->round = r ? atoi(v) + 1 : 0;
    printf("ltrun: elastic job '%s', %d..%d nodes of %d worker%s: rendezvous at %s:%d%s; joining round %d\n",
           in->rdzv_id, in->min_nodes, in->max_nodes, L->nproc, L->nproc == 1 ? "" : "s", L->store_host, L->port,
           E->hosting ? " (hosted here)" : "", E->round);
    fflush(stdout);
    return 0;
}

/* After this node's worker failed: the first failure of the round counts
 * one restart for the job. Returns the exit status to give up with, or 0
 * to rejoin. */
static int after_failure(elastic *E, outcome *o) {
    launcher *L = E->L;
    const lt_launch_info *in = E->in;
    char k[300], why[600];
    launcher_report(L, o, E->round);
    int rc = launcher_refused(o->status) ? EXIT_REFUSED : 1;
    snprintf(why, sizeof why, "rank %d on %s", L->node_rank * L->nproc + o->local, L->host);
    int first = set_once(E, key(E, k, sizeof k, "r%d/abort", E->round), why, NULL, 0);
    if (first < 0) return 1;
    int64_t used = 0;
    if (counter(E, key(E, k, sizeof k, "restarts"), first ? 1 : 0, &used)) return 1;
    const char *stop = NULL;
    if (launcher_cannot_cure(o)) stop = "a restart would repeat this failure; fix the error above";
    else if (used > in->max_restarts) stop = "the job has used its launcher.max_restarts";
    if (stop) {
        char v[16];
        snprintf(v, sizeof v, "%d", rc);
        set_once(E, key(E, k, sizeof k, "fatal"), v, NULL, 0);
        launcher_say("not re-forming the job (%" PRId64 " failure%s, launcher.max_restarts = %d): %s", used,
                     used == 1 ? "" : "s", in->max_restarts, stop);
        return rc;
    }
    launcher_say("re-forming the job without the failed workers' round (failure %" PRId64 " of at most %d restarts)",
                 used, in->max_restarts);
    return 0;
}

/* The store's host stays until every other agent that ever joined has
 * left (or LINGER_S passed), so their last reads (finished, fatal) and
 * writes (gone) reach it instead of a closed connection. */
static void linger(elastic *E) {
    if (!E->hosting || !E->L->client) return;
    double end = launcher_mono() + LINGER_S;
    char k[300];
    while (launcher_mono() < end) {
        int64_t agents = 0;
        if (counter(E, key(E, k, sizeof k, "agents"), 0, &agents)) return;
        bool all = true;
        for (int a = 1; a <= agents && all; a++) {
            int left = a == E->agent ? 1 : has_left(E, a);
            if (left < 0) return;
            all = left;
        }
        if (all || launcher_wait_signal(E->L, TICK_S)) return;
    }
}

int launcher_elastic(launcher *L) {
    elastic E = {.L = L, .in = L->info};
    int rc = 1;
    /* Signals wait for this loop from the start: a node waiting to join is
     * stopped by ^C between polls. */
    sigprocmask(SIG_BLOCK, &L->sigs, NULL);
    int m = meet(&E);
    if (m) {
        free(E.seen);
        return m == -2 ? EXIT_REFUSED : 1;
    }
    L->poll = poll_round;
    L->poll_ctx = &E;
    for (;; E.round++) { /* each pass: one round; the next after a new node, a failure or a member lost */
        int j = join(&E, &rc);
        if (j < 0) rc = 1;
        if (j) break;
        L->num_nodes = E.ncur;
        L->world = E.ncur * L->nproc;
        L->node_rank = 0;
        for (int i = 0; i < E.ncur; i++)
            if (E.cur[i].agent == E.agent) L->node_rank = i;
        say_round(&E, L->node_rank);
        char resume[1300];
        int got = resume_of_round(&E, resume, sizeof resume, &rc);
        if (got == 1) continue; /* node 0 left, or another aborted the round */
        if (got) {
            if (got < 0) rc = 1;
            break;
        }
        /* A later round closed while this one got ready (its members were
         * taken for gone): that one trains, this agent joins the next. */
        if ((got = round_current(&E)) <= 0) {
            if (got < 0) {
                rc = 1;
                break;
            }
            continue;
        }
        if (resume[0] && L->node_rank == 0) launcher_say("round %d resumes from %s", E.round, resume);
        E.asked_stop = false;
        if (launcher_start_group(L, E.round, resume)) {
            rc = 1;
            break;
        }
        outcome o;
        launcher_supervise(L, &o);
        if (L->late_signal || o.kind == OUT_SIGNALLED || o.kind == OUT_STOPPED)
            launcher_say_words(L); /* workers that failed on their own: no report follows */
        if (L->late_signal || o.kind == OUT_SIGNALLED) {
            rc = 128 + (L->late_signal ? L->late_signal : o.signo);
            break;
        }
        if (o.kind == OUT_OK && !stopped_at_step(L)) { /* trained to the end */
            char k[300];
            lt_store_set(L->client, key(&E, k, sizeof k, "finished"), "1", 1);
            rc = 0;
            break;
        }
        if (o.kind == OUT_FAILED) {
            int give_up = after_failure(&E, &o);
            if (give_up) {
                rc = give_up;
                break;
            }
        }
    }
    mark_gone(&E);
    linger(&E); /* also after a failure: the others read fatal, not a closed connection */
    free(E.cur);
    free(E.prev);
    free(E.seen);
    L->poll = NULL;
    return rc;
}
