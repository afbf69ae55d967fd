/* Replicas of the module inside one process (lt/replica.h): their state,
 * the threads that drive them, and what one step leaves between the
 * forward, backward and reduction phases. */
#ifndef LT_REPLICAS_H
#define LT_REPLICAS_H

#include <pthread.h>
#include <stdatomic.h>
#include "lt/replica.h"
#include "io/metrics.h"
#include "nn/nn_internal.h"

struct lt_run;
typedef struct lt_replica_set lt_replica_set;

/* One lt_log_metric call on a replica, merged on the root after the phase. */
typedef struct lt_replica_log {
    char name[LT_METRIC_NAME];
    double value, weight;
    unsigned flags;
} lt_replica_log;

typedef struct lt_replica {
    int index;               /* 0: the root (the run's model, the training thread) */
    int device;
    lt_replica_set *set;
    lt_ctx accel_ctx;        /* replicas 1..: their own; the root uses the run's */
    lt_ctx module_ctx;
    bool accel_ready, module_ready;
    lt_model *model;         /* replica 0: the run's */
    lt_step step;
    bool step_ready;
    int64_t row0, rows;      /* this step's slice of the batch; rows 0: idle */
    lt_tensor *out;          /* training_step's result */
    double loss;             /* its value when it is a loss */
    uint64_t params_version; /* copied parameters: the root's version they hold */
    lt_replica_log *logs;
    int nlogs, logcap;
    lt_status status;        /* of the last job */
    char error[1024];
    pthread_t thread;
    bool thread_started;
} lt_replica;

typedef void (*lt_replica_job)(lt_replica *rep, void *arg);

/* One replica's arguments to a module collective (replica_collective.c). */
typedef enum { LT_COLL_REDUCE, LT_COLL_GATHER, LT_COLL_BCAST, LT_COLL_BARRIER } lt_coll_kind;
typedef struct lt_replica_coll {
    lt_coll_kind kind;
    void *buf;          /* reduce, broadcast */
    const void *send;   /* all_gather */
    void *recv;
    size_t count;
    lt_dtype t;
    lt_redop op;
    int root;
} lt_replica_coll;

struct lt_replica_set {
    struct lt_run *run;
    lt_replica *rep;
    int count;
    bool copied;             /* replicas hold parameter copies */
    /* the pool: a job is published under `gen`; workers run it and count down */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;
    int pending;
    bool quit;
    lt_replica_job job;
    void *arg;
    /* this step */
    int active;              /* replicas with rows */
    int64_t total_rows;
    lt_stage stage;          /* eval jobs */
    double seed;             /* backward: the loss's seed */
    lt_tensor *gathered;     /* training_step_end: the gathered outputs on the root's tape */
    /* backward, shared parameters: a parameter's gradient is summed by the
     * replica that reports it last, then queued for the root's thread,
     * which hands it to the strategy (on_grad_ready) while backward goes on */
    _Atomic int *unreported; /* per parameter: replicas yet to report it */
    _Atomic int *queue;      /* parameter indices in the order summed; -1: not yet */
    _Atomic int queued;
    int handed;              /* queue entries the root has passed on */
    lt_grad_ready_fn strategy_ready; /* the run's callback, off during replica backward */
    void *strategy_user;
    /* module collectives: the active replicas meet, the last performs */
    pthread_mutex_t coll_mu;
    pthread_cond_t coll_cv;
    int coll_arrived;
    uint64_t coll_round;
    lt_replica_coll *coll;   /* one per replica */
    bool *coll_here;         /* which replicas wait in this round */
    int coll_departed;       /* replicas whose step hook returned (this job) */
    int coll_last_left;
    lt_status coll_status;
    char coll_error[1024];
};

/* replica_pool.c: runs job on every replica at once (replica 0 on the
 * calling thread) and waits; the first replica's failure, in index order,
 * becomes the run's error. */
lt_status lt_replicas_run(lt_replica_set *rs, lt_replica_job job, void *arg, const char *what);
/* Frees everything (each replica on its own thread), joins the threads. */
void lt_replicas_destroy(lt_replica_set *rs);
/* Replica 1..: its copy of the root's parameters is current. */
lt_status lt_replica_refresh_params(lt_replica *rep);
lt_status lt_replica_fail(lt_replica *rep, lt_status st, const char *fmt, ...) LT_PRINTF(3, 4);
/* replica_collective.c: a module collective from replica s->replica's step;
 * blocks until every replica with rows in this batch made the same call. */
lt_status lt_replicas_collective(lt_step *s, const lt_replica_coll *args);
/* Around a step job: begin before it, leave when a replica's hook returned,
 * whatever the outcome, so the others never wait for a call it will not
 * make (the round fails, naming it). */
void lt_replicas_collectives_begin(lt_replica_set *rs);
void lt_replicas_collectives_leave(lt_replica *rep);
/* replica_step.c: the optimizer update (lt_model_optim_apply, fused or
 * not, between the trainer's lt_optim_begin and lt_optim_end) over the
 * root's flat buffers, each replica's thread a slice (shared parameters;
 * else the root alone). */
lt_status lt_replicas_optimizer_step(struct lt_run *r, bool fused);
/* replica_step.c: every replica model's grad-ready callback (user: the
 * lt_replica) while the replicas run backward. */
void lt_replica_grad_ready(void *user, size_t offset, size_t count);

#endif
