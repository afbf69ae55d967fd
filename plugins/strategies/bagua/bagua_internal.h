/* The bagua strategy's shared state: bagua.c reads the parameters and
 * dispatches each hook to the algorithm's file. */
#ifndef LT_BAGUA_INTERNAL_H
#define LT_BAGUA_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include "lt/lt.h"
#include "bytegrad.h"

typedef enum algorithm {
    ALG_GRADIENT_ALLREDUCE,
    ALG_BYTEGRAD,
    ALG_DECENTRALIZED,
    ALG_LOW_PRECISION_DECENTRALIZED,
    ALG_ASYNC,
    ALG_QADAM,
} algorithm;

/* low_precision_decentralized (lpd.c): this rank's published parameters
 * and its ring neighbours', as every rank reconstructs them from the 8-bit
 * differences it receives. */
typedef struct lpd_state {
    int left, right;    /* ring neighbours (the same rank when world == 2) */
    void *mine;         /* x_t: this rank's parameters as its neighbours know them */
    void *left_x, *right_x; /* the neighbours' x_t (right_x unused when left == right) */
    void *diff;         /* scratch: the difference to send */
    uint8_t *send, *recv_l, *recv_r; /* compressed messages: min/max pairs, then bytes */
    size_t msg_bytes;
    size_t chunks;
} lpd_state;

/* async (async_avg.c): a background thread averages parameters with every
 * rank over a group of its own; the training thread hands it snapshots and
 * applies its results at step boundaries, so no step reads a half-written
 * average. */
typedef enum async_phase {
    ASYNC_PAUSED,  /* before warmup_steps ran */
    ASYNC_IDLE,    /* the thread sleeps until the next round */
    ASYNC_WANT,    /* it waits for the training thread's snapshot */
    ASYNC_TAKEN,   /* it averages the snapshot */
    ASYNC_READY,   /* the average waits to be applied */
    ASYNC_DONE,    /* it ended (stopped, or failed: error set) */
} async_phase;

typedef struct async_state {
    lt_pg *pg;                 /* its own group: never the default one */
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    _Atomic int phase;         /* async_phase; the training thread peeks without the lock */
    bool stop;                 /* on_train_end asked it to finish */
    bool final_copied;         /* async_stop copied the final parameters for the last round */
    void *snap;                /* the parameters the round started from */
    void *avg;                 /* count + 1 elements: the average, then the stop vote */
    const lt_kernels *k;       /* the accelerator's, for the vote (device memory on a gpu) */
    lt_ctx *kc;
    lt_status error;
    char message[512];
    int64_t rounds;
    double longest_round_ms;   /* the slowest allreduce so far: bounds the last one */
    double longest_step_ms;    /* training thread only: the slowest step so far */
    double last_step_at;       /* training thread only: lt_now() at the last step */
} async_state;

typedef struct bagua {
    algorithm alg;
    bool shift_one;
    bool hierarchical;
    int64_t interval;
    int64_t sync_interval_ms;
    int64_t warmup_steps;
    int64_t steps;  /* optimizer steps taken, for the interval */
    int64_t rounds; /* averaging rounds done: shift_one's peer schedule */
    lt_flat flat;
    void *peer;     /* shift_one: the peer's parameters */
    int64_t chunk;  /* compression_chunk */
    bytegrad bg;    /* bytegrad: the gradients; qadam: the momentum */
    bool agree_finite; /* 16-mixed with local gradients: ranks agree on skipping */
    bool ddp_this_step; /* ddp's gradient hooks run this step (bagua.c, on_backward_start) */
    lt_pg *local, *leaders; /* hierarchical: this node's ranks; node leaders (NULL elsewhere) */
    lpd_state lpd;
    async_state as;
} bagua;

/* bagua.c: the run's default group, or an error naming the hook. */
lt_status bagua_group(lt_ctx *ctx, lt_run *run, lt_pg **out);
/* bagua.c: ranks whose gradients stay local agree on whether the step goes
 * ahead under 16-mixed (one byte allreduced); a rank that saw none
 * poisons its gradients so its scaler skips the step too. */
lt_status bagua_agree_finite(lt_ctx *ctx, lt_run *run, bagua *b);

lt_status lpd_setup(lt_ctx *ctx, lt_run *run, bagua *b);
lt_status lpd_before_step(lt_ctx *ctx, lt_run *run, bagua *b);
lt_status lpd_after_step(lt_ctx *ctx, lt_run *run, bagua *b);
void lpd_free(lt_run *run, bagua *b);

lt_status async_start(lt_ctx *ctx, lt_run *run, bagua *b);
lt_status async_after_step(lt_ctx *ctx, lt_run *run, bagua *b, int64_t steps_taken);
lt_status async_stop(lt_ctx *ctx, lt_run *run, bagua *b);
void async_free(lt_run *run, bagua *b);

lt_status qadam_setup(lt_ctx *ctx, lt_run *run, bagua *b);
lt_status qadam_step(lt_ctx *ctx, lt_run *run, bagua *b);

lt_status hier_setup(lt_ctx *ctx, lt_run *run, bagua *b);
lt_status hier_reduce(lt_ctx *ctx, lt_run *run, bagua *b);
void hier_free(bagua *b);

#endif
