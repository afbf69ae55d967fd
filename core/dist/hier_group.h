/* A hierarchical process group (process_group.c delegates to it): an
 * allreduce averages or sums inside the node over shared memory first, then
 * across one leader per node over the network, then broadcasts inside the
 * node; every other collective and send/recv goes over a flat group of all
 * ranks. process_group_backend = auto builds one when a cpu job has several
 * ranks on each of several hosts (run_groups.c), so ranks on one host never
 * pay socket copies for gradients and the network carries one copy per
 * node. A worker thread of its own runs the allreduces' three stages in
 * issue order, so issuing stays asynchronous, as ddp's buckets need. */
#ifndef LT_DIST_HIER_GROUP_H
#define LT_DIST_HIER_GROUP_H

#include "lt/run.h"

typedef struct lt_hier lt_hier;
typedef struct lt_hier_job lt_hier_job;

/* Takes ownership of the three groups (leaders is NULL on non-leaders).
 * Every node must hold the same number of ranks (the caller checks), so
 * that an average of node averages is the average. */
lt_status lt_hier_new(lt_pg *local, lt_pg *leaders, lt_pg *flat, lt_hier **out);
lt_status lt_hier_allreduce(lt_hier *h, void *buf, size_t count, lt_dtype t, lt_redop op, lt_hier_job **out);
/* Waits for the job (at most timeout_ms, < 0: no limit) and frees it; on
 * failure `err` gets the failing stage's group error. LT_ERR_TIMEOUT leaves
 * the job alive: wait again. */
lt_status lt_hier_wait(lt_hier_job *job, int64_t timeout_ms, char *err, size_t errlen);
lt_pg *lt_hier_flat(lt_hier *h);
bool lt_hier_supports(lt_hier *h, lt_dtype t, lt_redop op);
void lt_hier_abort(lt_hier *h);
/* Stops the worker (failing what is queued) and destroys the three groups. */
void lt_hier_free(lt_hier *h);

#endif
