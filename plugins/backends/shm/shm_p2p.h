/* The shm backend's point-to-point send and recv (shm_p2p.c): one ring per
 * ordered pair of ranks in the group's segment, after the collective slots.
 * A pair's messages form one stream, matched in issue order: the receiver's
 * next recv from a peer takes that peer's next send to it, and a different
 * tag or size is a mismatch (gloo matches by tag; lt's callers issue pairs
 * in the same order on both sides).
 *
 * Progress is made by the threads that wait: ltshm_wait on any work of the
 * group, a send, a recv or a collective, pumps every pending send and recv,
 * so a rank that issued sends and recvs and then waits on anything never
 * deadlocks with a peer doing the same, whatever the message sizes. Sends
 * and recvs are not queued behind the group's collectives. */
#ifndef LT_SHM_P2P_H
#define LT_SHM_P2P_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lt/core.h"

typedef struct shm_p2p shm_p2p;
typedef struct shm_p2p_op shm_p2p_op;

/* Bytes of segment the rings of `world` ranks take (0 above 64 ranks:
 * all rings together stay within 64 MiB). */
size_t shm_p2p_bytes(int world);
/* Whether this group has rings (64 ranks or fewer). */
bool shm_p2p_usable(const shm_p2p *p);
/* The rings at `base` (zeroed by the segment's creation), for `rank`. */
shm_p2p *shm_p2p_new(void *base, int world, int rank);
void shm_p2p_free(shm_p2p *p);

/* A pending send (buf read until done) or recv (buf written until done). */
shm_p2p_op *shm_p2p_issue(shm_p2p *p, bool send, void *buf, size_t bytes, int peer, uint32_t tag);
/* Moves what the rings allow for every pending op; returns whether any
 * byte moved. Fails the first op whose peer's header does not match (its
 * message says what each side sent). Caller holds the group's p2p lock. */
bool shm_p2p_progress(shm_p2p *p);
bool shm_p2p_done(const shm_p2p_op *op, lt_status *st, const char **err);
/* Fails every pending op (abort, dead peer) with `why`. */
void shm_p2p_fail_all(shm_p2p *p, lt_status st, const char *why);
/* Forgets a finished op (or one failed by fail_all). */
void shm_p2p_release(shm_p2p *p, shm_p2p_op *op);
/* Whether an op of this rank is still pending. */
bool shm_p2p_pending(const shm_p2p *p);

#endif
