/* The gloo backend's process group: gloo contexts, the threads that run
 * collectives on them, work records and abort.
 *
 * Threads. gloo's collectives block the calling thread, so each group has
 * `num_threads` workers (default 1), each with its own gloo context and FIFO
 * queue; collective number k goes to worker k % num_threads, the same on every
 * rank, so each context sees the same sequence everywhere. Send and recv are
 * posted on the issuing thread straight away (gloo posts are non-blocking, so
 * a rank can send to and receive from a peer at once without deadlock) and a
 * separate p2p thread waits for their completion in order.
 *
 * Failures. Any failed collective leaves gloo's pairs closed, so the group is
 * then "broken": later works fail at once naming the first failure. abort()
 * fails queued works, wakes every waiter, aborts pending p2p waits and closes
 * every connection: the sockets under gloo's pairs are shut down, which
 * gloo's event loop reads as end-of-file, failing the operations a worker is
 * blocked in (and the peers' too) at once. Should a worker still be inside
 * gloo after that (it can only last until gloo's timeout), destroy() detaches
 * it (the thread owns a reference to the group) and pins this library so it is
 * never unloaded under it. */
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gloo/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/unbound_buffer.h>

#include "lt/backend.h"

namespace ltgloo {

enum class Kind { Allreduce, Broadcast, Allgather, ReduceScatter, Barrier, Send, Recv };
const char *kind_name(Kind k);

struct Op {
    Kind kind = Kind::Barrier;
    void *buf = nullptr;        /* in-out (allreduce, broadcast, recv) or output (gathers) */
    const void *send = nullptr; /* input of allgather, reduce_scatter, send */
    size_t count = 0;           /* elements, per rank for the gathers */
    lt_dtype dtype = LT_U8;
    lt_redop redop = LT_SUM;
    int peer = 0;               /* broadcast root, send/recv peer */
    uint32_t tag = 0;           /* the user's p2p tag; for collectives set by group_issue */
    uint32_t wire_tag = 0;      /* what gloo sees: a fingerprint, see wire_tag() */
};

struct Work {
    Op op;
    std::string label; /* "allreduce #12 on group 'pg0'" */
    std::chrono::steady_clock::time_point deadline; /* p2p: issue time + group timeout */
    std::unique_ptr<gloo::transport::UnboundBuffer> ubuf; /* p2p */
    /* Guarded by Group::m. */
    bool done = false;
    lt_status status = LT_OK;
    std::string error;
};

struct Worker {
    std::shared_ptr<gloo::Context> ctx;
    std::deque<std::shared_ptr<Work>> queue; /* guarded by Group::m */
    std::shared_ptr<Work> current;           /* p2p thread: the work being waited for */
    std::thread thread;
    bool exited = false;                     /* guarded by Group::m */
    std::vector<uint8_t> scratch;            /* reduce_scatter blocks; worker thread only */
    std::vector<std::vector<std::string>> peers; /* peer_addresses(ctx), to name ranks in errors */
};

struct Group {
    std::string name;
    int rank = 0, world = 1;
    std::chrono::milliseconds timeout{1800000};
    std::shared_ptr<gloo::transport::Device> device;
    std::vector<std::unique_ptr<Worker>> workers; /* fixed after create */
    Worker p2p;                                   /* waits for posted send/recv */

    std::mutex m;
    std::condition_variable cv_work; /* workers: queue changed or stopping */
    std::condition_variable cv_done; /* waiters: a work finished or abort */
    bool aborted = false, stopping = false, p2p_started = false;
    bool realtime = false; /* communication threads run at SCHED_FIFO 1 (gloo_rt.h) */
    std::string broken; /* the first failure; empty while healthy */
    uint64_t coll_seq = 0, p2p_seq = 0; /* issuing thread only */

    ~Group();
};

/* The gloo tag (slot) of an operation: a hash of everything both sides must
 * agree on (collective number, kind, count, dtype, op, root; for p2p the
 * user's tag and byte count). gloo's event loop terminates the process when
 * a peer sends more bytes than the posted receive holds; with the sizes in
 * the tag, mismatched calls never meet, they time out instead (or the core's
 * fingerprint check names them), and the process lives. */
uint32_t wire_tag(uint64_t seq, const Op &op);

/* Connects this rank's contexts through the store and starts the workers.
 * On failure returns the status and puts the message in err. */
lt_status group_create(lt_ctx *ctx, lt_store *store, int rank, int world, const lt_pg_options *opt,
                       std::shared_ptr<Group> &out, std::string &err);

/* Issues a collective (queued to its worker) or a p2p op (posted now). Returns
 * a work that may already be finished (failed) when the group is aborted or
 * broken, or posting failed. */
std::shared_ptr<Work> group_issue(const std::shared_ptr<Group> &g, const Op &op);

lt_status group_wait(Group &g, Work &w, int64_t timeout_ms, std::string &err);
void group_abort(Group &g);
/* Stops the threads; see the header comment for the aborted case. */
void group_stop(Group &g);

/* Runs one collective on a worker's context; throws gloo's exceptions. */
void run_collective(Group &g, Worker &wk, const Op &op);
/* Posts a send or recv on the p2p context; throws gloo's exceptions. */
void post_p2p(Group &g, Work &w);

/* Shuts down the sockets under ctx's pairs so gloo fails whatever waits on
 * them and the peers see the close (gloo_sockets.cc). Returns how many. */
int interrupt_context(gloo::Context &ctx);
/* Each peer's address the ways gloo's messages may print it
 * ("[10.0.0.2]:41234"), by rank; empty for self or unknown. */
std::vector<std::vector<std::string>> peer_addresses(gloo::Context &ctx);

/* Picks the TCP device: options' iface (an interface name, or else a host
 * name / address to bind), $GLOO_SOCKET_IFNAME, or automatically the local
 * address that routes to $MASTER_ADDR (127.0.0.1 when that is local or
 * unset). Devices are shared by the groups of a process. */
/* The TCP device for an interface or address (iface), else the local address
 * that routes to the job's main address (main_address, else MASTER_ADDR),
 * else loopback. */
std::shared_ptr<gloo::transport::Device> shared_device(const char *iface, const char *main_address,
                                                       std::string &where);

} // namespace ltgloo
