/* What ltrun needs to start and supervise workers, and the status slots
 * through which workers tell it how far they got. */
#ifndef LT_LAUNCH_H
#define LT_LAUNCH_H

#include "lt/trainer.h"

typedef struct lt_launch_info {
    bool launch;            /* start workers here: subprocess launch, not started externally */
    int nproc_per_node;     /* trainer.devices */
    int num_nodes;          /* trainer.num_nodes */
    int node_rank;          /* launcher.node_rank */
    char master_addr[256];  /* launcher.master_addr */
    int master_port;        /* launcher.master_port; 0 = pick a free port (one node only) */
    int max_restarts;       /* launcher.max_restarts */
    int rdzv_timeout_s;     /* launcher.rdzv_timeout_s */
    char ckpt_dir[1024];    /* where last.safetensors goes (restarts resume from it) */
    char seed[32];          /* trainer.seed or "" */
    bool bind_cores;        /* launcher.bind_cores: pin each local worker to its share of the cores */
    /* elastic (--nnodes MIN:MAX); min_nodes = 0: a fixed num_nodes */
    int min_nodes, max_nodes;   /* launcher.nnodes */
    char rdzv_id[128];          /* launcher.rdzv_id */
    int join_timeout_s;         /* launcher.join_timeout_s */
    int last_call_s;            /* launcher.last_call_s */
    int keepalive_s;            /* launcher.keepalive_timeout_s */
    int batch_size, accumulate; /* data.batch_size, trainer.accumulate_grad_batches: the effective batch */
    char lr_scaling[16];        /* optimizer.lr_scaling, for the membership line */
    char devices[1100];         /* auto_select_gpus chose these ("[1, 3]"): the workers get them; "" otherwise */
} lt_launch_info;

/* One 2 KiB slot per local worker in a shared file whose descriptor the
 * launcher passes as LT_STATUS_FD (slot = LOCAL_RANK). Workers store their
 * progress with plain atomic writes; the launcher reads them to say where a
 * failed rank was. A worker's fatal error goes into `error` too, and the
 * launcher says it once, in the line that names the failed rank: the ranks
 * of a job often fail alike (each refuses the same bad data file), and one
 * line per rank plus the launcher's would bury it. */
enum { LT_STATUS_SLOT_BYTES = 2048 };
typedef struct lt_status_slot {
    int64_t global_step;    /* optimizer steps done */
    int64_t epoch;
    int32_t pid;
    int32_t phase;          /* LT_PHASE_* */
    int32_t error_set;      /* 1 once `error` and error_status hold the worker's fatal error
                               (release store) */
    int32_t error_status;   /* its lt_status: ltrun exits as the worker would have */
    char pad[32];
    char error[LT_STATUS_SLOT_BYTES - 64]; /* NUL-terminated, cut to fit */
} lt_status_slot;
_Static_assert(sizeof(lt_status_slot) == LT_STATUS_SLOT_BYTES, "status slot layout");

/* STOPPED: fit ended early at a step boundary, saved (pre-empted, or an
 * elastic change of nodes); the run is not finished. */
enum { LT_PHASE_START = 0, LT_PHASE_SETUP = 1, LT_PHASE_TRAIN = 2, LT_PHASE_DONE = 3, LT_PHASE_FAILED = 4,
       LT_PHASE_STOPPED = 5 };

/* Worker side: maps the slot named by LT_STATUS_FD/LOCAL_RANK (NULL when not launched by ltrun). */
lt_status_slot *lt_status_slot_attach(void);

/* Worker side: puts st and text (cut to fit) in s, then sets error_set. */
void lt_status_slot_set_error(lt_status_slot *s, lt_status st, const char *text);

/* Worker side: hands this process's fatal error to ltrun, which prints it
 * (true; a slot already holding one keeps it); false when ltrun did not
 * start this process (print it yourself).
 * Called once, as the worker gives up; ltrun reads it after the exit. */
bool lt_status_slot_post_error(lt_status st, const char *text);

#endif
