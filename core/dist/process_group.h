/* Making a process group (lt/run.h has what plugins do with one). The
 * trainer resolves the backend, the store and the timeouts; this file only
 * wraps the backend's group. */
#ifndef LT_DIST_PROCESS_GROUP_H
#define LT_DIST_PROCESS_GROUP_H

#include "lt/run.h"
#include "common/ctx.h"

typedef struct lt_pg_spec {
    const lt_ctx *backend_ctx;   /* the backend's context; its desc is the resolved table.
                                    Copied: the group keeps a context of its own */
    lt_store *store;             /* connected; cloned twice (fingerprints, backend) */
    const char *name;            /* "default", "async" ...; keys in the store */
    int rank, size;
    const int *global_ranks;     /* size entries: the job's rank of each group rank, for
                                    messages and failure posts (copied); NULL: the same */
    int64_t timeout_ms;          /* strategy.timeout_s: a collective's deadline */
    int64_t stall_ms;            /* launcher.stall_timeout_s: after waiting this long, a
                                    peer not waiting in the same collective is named
                                    as the one stuck (0: off) */
    int connect_timeout_ms;      /* launcher.rdzv_timeout_s: the backend's connect */
    lt_mem_kind mem_kind;        /* where the buffers handed to collectives live */
    int device;
    lt_ctx *accel;               /* the accelerator whose memory LT_MEM_DEVICE means (its
                                    ctx, desc a resolved table; borrowed, set up until the
                                    group is destroyed). For a backend that takes host
                                    memory only, the group stages every collective through
                                    its pinned host buffers (pg_staging.h). Unused for
                                    LT_MEM_HOST; NULL: a device group over such a
                                    backend is refused */
    const char *main_address;
} lt_pg_spec;

/* A group over ranks [0, size); one line in err on failure. Collective:
 * every rank calls it with the same name, on the thread that will issue
 * its collectives. For LT_MEM_DEVICE it asks the backend's supports_memory
 * first; a backend that says no gets LT_MEM_HOST and the group copies each
 * collective's buffers through spec->accel's pinned host memory (device to
 * host on the issuing thread before the backend starts, host to device in
 * lt_work_wait on the waiting thread after it completed). */
lt_status lt_pg_create(const lt_pg_spec *spec, lt_pg **out, char *err, size_t errlen);

/* A hierarchical group (hier_group.h) named `name` over the ranks of `flat`:
 * allreduce through `local` (this node's ranks) then `leaders` (one rank per
 * node; NULL on the others) then a broadcast in `local`; everything else
 * over `flat`. Takes ownership of the three. */
lt_status lt_pg_create_hierarchical(const char *name, lt_pg *local, lt_pg *leaders, lt_pg *flat, lt_pg **out,
                                    char *err, size_t errlen);

/* Group memory (the backend's mem_alloc, ABI 1.7): host memory the
 * group's allreduce handles in place. Collective over pg, on its issuing
 * thread. LT_ERR_UNSUPPORTED (no message) when there is none to have: a
 * backend without the hooks, a hierarchical group, or a group over device
 * memory. The handle outlives the group: lt_pg_mem_free releases it, after
 * the last collective on it, before or after lt_pg_destroy (not after the
 * backend plugin is unloaded). */
typedef struct lt_pg_mem {
    const lt_backend_desc *b; /* NULL: nothing held */
    lt_ctx ctx;               /* a copy of the group's backend context */
    void *p;
} lt_pg_mem;
lt_status lt_pg_mem_alloc(lt_pg *pg, size_t bytes, lt_pg_mem *out, char *err, size_t errlen);
void lt_pg_mem_free(lt_pg_mem *m);

/* The first failure of a job, posted in the store for the other ranks and
 * for ltrun: "<rank>\t<one-line reason>" under LT_FAILURE_KEY<restart
 * count>; only the first post of an attempt stays. */
#define LT_FAILURE_KEY "lt/failure/"
/* A rank whose own work failed (not a collective: a full disk, a bad
 * batch, the module) posts its reason before it aborts its groups, so a
 * peer whose collective then fails reports "rank R failed: <reason>"
 * instead of the symptom it saw. Best effort: the store may be gone. */
void lt_pg_post_failure(lt_pg *pg, const char *reason);
/* The first failure posted for restart count `restart` (< 0: this
 * process's LT_RESTART_COUNT), as the launchers read it: its rank, with the
 * reason in text, or -1 when none was posted or the store cannot say. */
int lt_failure_read(lt_store *s, int restart, char *text, size_t n);
/* Whether a collective of this group failed (its error says why). */
bool lt_pg_failed(const lt_pg *pg);

#endif
