#include <cstring>
/* Group lifecycle, work queues, waits and abort (see gloo_group.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>

#include <cinttypes>
#include <cstdio>
#include <exception>

#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/rendezvous/context.h>

#include "gloo_group.h"
#include "gloo_hooks.h"
#include "gloo_rt.h"
#include "gloo_store.h"

namespace ltgloo {
namespace {

using Clock = std::chrono::steady_clock;

/* gloo prefixes its messages with "[source.cc:123] "; users want the rest. */
std::string strip_location(const char *what) {
    std::string s = what ? what : "";
    if (!s.empty() && s[0] == '[') {
        size_t end = s.find("] ");
        if (end != std::string::npos) s.erase(0, end + 2);
    }
    return s;
}

bool contains(const std::string &s, const char *needle) { return s.find(needle) != std::string::npos; }

/* "[10.0.0.2]:4123" must not match inside "[10.0.0.2]:41234". */
bool mentions_address(const std::string &msg, const std::string &addr) {
    for (size_t at = msg.find(addr); at != std::string::npos; at = msg.find(addr, at + 1)) {
        size_t end = at + addr.size();
        if (end == msg.size() || msg[end] < '0' || msg[end] > '9') return true;
    }
    return false;
}

/* Turns what gloo threw into a status and a message that says what and why.
 * Called with the exception current; `peers` (by rank) names the peer gloo
 * means by its address. */
lt_status describe_failure(const Group &g, const Work &w,
                           const std::vector<std::vector<std::string>> &peers,
                           std::exception_ptr ep, std::string &err) {
    std::string msg;
    bool io = false;
    try {
        std::rethrow_exception(ep);
    } catch (const gloo::IoException &e) {
        msg = strip_location(e.what());
        io = true;
    } catch (const gloo::EnforceNotMet &e) {
        msg = strip_location(e.what());
    } catch (const std::bad_alloc &) {
        err = w.label + ": out of memory";
        return LT_ERR_NOMEM;
    } catch (const std::exception &e) {
        msg = strip_location(e.what());
    } catch (...) {
        msg = "unknown exception";
    }
    if (contains(msg, "Timed out") || contains(msg, "timed out") || contains(msg, "timeout")) {
        err = w.label + ": timed out after " + std::to_string(g.timeout.count()) +
              " ms: a peer did not make the matching call (it is stuck or gone, or called "
              "something else or with another size) (gloo: " + msg + ")";
        return LT_ERR_TIMEOUT;
    }
    /* Which peer: by the address gloo names; failing that, the one a p2p op
     * talks to, or the only other rank. */
    int peer = -1;
    for (size_t r = 0; r < peers.size(); r++)
        for (const auto &addr : peers[r])
            if (mentions_address(msg, addr)) peer = (int)r;
    if (peer < 0 && (w.op.kind == Kind::Send || w.op.kind == Kind::Recv)) peer = w.op.peer;
    if (peer < 0 && g.world == 2) peer = 1 - g.rank;
    std::string who = peer >= 0 ? "peer rank " + std::to_string(peer) : "a peer";
    err = w.label + ": gloo: " + msg;
    if (contains(msg, "closed") || contains(msg, "reset") || contains(msg, "Broken pipe"))
        err += " (" + who + " closed its connection: it exited, crashed or aborted)";
    return io ? LT_ERR_IO : LT_ERR_PLUGIN;
}

/* Caller holds g.m. */
void finish(Group &g, Work &w, lt_status st, std::string err) {
    w.done = true;
    w.status = st;
    w.error = std::move(err);
    g.cv_done.notify_all();
}

/* A failure breaks the group (gloo closes the pairs); later works fail fast.
 * Caller holds g.m. */
void note_failure(Group &g, Work &w, lt_status &st, std::string &err) {
    if (g.aborted) { /* our own abort made gloo fail: say that, not what gloo saw */
        st = LT_ERR_ABORTED;
        err = w.label + ": group '" + g.name + "' was aborted";
    } else if (g.broken.empty()) {
        g.broken = err;
    }
}

void worker_main(std::shared_ptr<Group> gp, Worker *wk) {
    Group &g = *gp;
    std::unique_lock<std::mutex> lk(g.m);
    for (;;) {
        g.cv_work.wait(lk, [&] { return g.stopping || !wk->queue.empty(); });
        if (wk->queue.empty()) break;
        std::shared_ptr<Work> w = std::move(wk->queue.front());
        wk->queue.pop_front();
        if (g.aborted) {
            finish(g, *w, LT_ERR_ABORTED, w->label + ": group '" + g.name + "' was aborted");
            continue;
        }
        if (!g.broken.empty()) {
            finish(g, *w, LT_ERR_ABORTED,
                   w->label + ": not run: the group failed earlier: " + g.broken);
            continue;
        }
        lk.unlock();
        lt_status st = LT_OK;
        std::string err;
        try {
            run_collective(g, *wk, w->op);
        } catch (...) {
            st = describe_failure(g, *w, wk->peers, std::current_exception(), err);
        }
        lk.lock();
        if (st != LT_OK) note_failure(g, *w, st, err);
        finish(g, *w, st, std::move(err));
    }
    wk->exited = true;
    g.cv_done.notify_all();
}

/* Waits, in issue order, for the sends and recvs posted by group_issue. */
void p2p_main(std::shared_ptr<Group> gp) {
    Group &g = *gp;
    Worker &wk = g.p2p;
    std::unique_lock<std::mutex> lk(g.m);
    for (;;) {
        g.cv_work.wait(lk, [&] { return g.stopping || !wk.queue.empty(); });
        if (wk.queue.empty()) break;
        std::shared_ptr<Work> w = std::move(wk.queue.front());
        wk.queue.pop_front();
        wk.current = w;
        lk.unlock();
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(w->deadline - Clock::now());
        if (left.count() < 1) left = std::chrono::milliseconds(1);
        lt_status st = LT_OK;
        std::string err;
        try {
            bool ok = w->op.kind == Kind::Send ? w->ubuf->waitSend(left) : w->ubuf->waitRecv(left);
            if (!ok) {
                st = LT_ERR_ABORTED;
                err = w->label + ": group '" + g.name + "' was aborted";
            }
        } catch (...) {
            st = describe_failure(g, *w, g.workers[0]->peers, std::current_exception(), err);
        }
        lk.lock();
        wk.current.reset();
        if (st != LT_OK && st != LT_ERR_ABORTED) note_failure(g, *w, st, err);
        finish(g, *w, st, std::move(err));
    }
    wk.exited = true;
    g.cv_done.notify_all();
}

/* Worker threads take no signals; those belong to the program's own threads. */
template <typename F> std::thread start_thread(F &&f) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    std::thread t(std::forward<F>(f));
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return t;
}

/* A detached thread may still run code of this library: never unload it. */
void pin_library() {
    static const int anchor = 0;
    Dl_info info;
    if (dladdr(&anchor, &info) && info.dli_fname)
        dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

void stop_thread(Group &g, Worker &wk) {
    if (!wk.thread.joinable()) return;
    bool exited;
    {
        std::unique_lock<std::mutex> lk(g.m);
        /* After abort a worker may sit in a gloo call until gloo's own timeout. */
        if (g.aborted) g.cv_done.wait_for(lk, std::chrono::seconds(2), [&] { return wk.exited; });
        exited = wk.exited || !g.aborted;
    }
    if (exited) {
        wk.thread.join();
    } else {
        lt_log(nullptr, LT_LOG_WARN,
               "gloo: a thread of aborted group '%s' is still inside gloo; it is left to end "
               "at gloo's timeout (%lld ms)", g.name.c_str(), (long long)g.timeout.count());
        pin_library();
        wk.thread.detach(); /* it holds a reference to the group and frees it on exit */
    }
}

std::string group_name(const char *prefix) {
    std::string s = prefix ? prefix : "";
    while (!s.empty() && s.back() == '/') s.pop_back();
    return s.empty() ? "default" : s;
}

} // namespace

Group::~Group() {
    for (auto &w : workers)
        if (w->thread.joinable()) w->thread.detach();
    if (p2p.thread.joinable()) p2p.thread.detach();
}

lt_status group_create(lt_ctx *ctx, lt_store *store, int rank, int world, const lt_pg_options *opt,
                       std::shared_ptr<Group> &out, std::string &err) {
    auto g = std::make_shared<Group>();
    g->rank = rank;
    g->world = world;
    g->name = group_name(opt->prefix);
    if (opt->timeout_ms > 0) g->timeout = std::chrono::milliseconds(opt->timeout_ms);
    int nthreads = opt->num_threads;
    if (nthreads <= 0) nthreads = (int)lt_param_int(ctx, "num_threads", 1);
    if (nthreads < 1) nthreads = 1;
    if (nthreads > 16) nthreads = 16;
    const char *iface = opt->iface;
    if (!iface || !*iface) iface = lt_param_str(ctx, "iface", nullptr);

    if (ltgloo_check_params(ctx) != LT_OK) {
        err = lt_last_error(ctx);
        return LT_ERR_INVALID;
    }
    const char *rt = lt_param_str(ctx, "realtime", "auto");
    bool on = true, asked = strcmp(rt, "auto") && lt_parse_bool(rt, &on); /* checked above */
    g->realtime = on && rt_permitted();
    if (!g->realtime && asked && on) {
        err = "backend.realtime = on, but this process may not use SCHED_FIFO; grant CAP_SYS_NICE or "
              "RLIMIT_RTPRIO >= 1 (ulimit -r 1), or set backend.realtime = auto";
        return LT_ERR_UNSUPPORTED;
    }
    /* Threads made below (gloo's device loop, the workers) inherit this. */
    RtScope rt_scope(g->realtime);

    double t0 = lt_now();
    std::string where;
    try {
        g->device = shared_device(iface, opt->main_address, where);
    } catch (const std::exception &e) {
        err = "group '" + g->name + "': cannot open a gloo TCP device on " + where + ": " +
              strip_location(e.what()) +
              "; set the backend's iface (or GLOO_SOCKET_IFNAME) to an interface or address of this host";
        return LT_ERR_IO;
    }
    std::string prefix = opt->prefix ? opt->prefix : "";
    for (int i = 0; i < nthreads; i++) {
        auto wk = std::make_unique<Worker>();
        auto c = std::make_shared<gloo::rendezvous::Context>(rank, world);
        /* Joining waits for the slowest rank to start (the rendezvous
         * timeout); collectives then get the group's own timeout. */
        c->setTimeout(opt->connect_timeout_ms > 0 ? std::chrono::milliseconds(opt->connect_timeout_ms) : g->timeout);
        StoreAdapter adapter(store, prefix + "gloo/" + std::to_string(i) + "/");
        try {
            c->connectFullMesh(adapter, g->device);
        } catch (const std::exception &e) {
            const std::string &peer = adapter.missing();
            if (adapter.status() == LT_ERR_TIMEOUT && !peer.empty() &&
                peer.find_first_not_of("0123456789") == std::string::npos) {
                /* gloo's key is the rank that publishes its address: name it */
                err = "group '" + g->name + "': rank " + std::to_string(rank) + " of " + std::to_string(world) +
                      ": rank " + peer + " never joined (" + strip_location(e.what()) +
                      "); check that every rank was started, by this job (the same LT_RDZV_TOKEN), and "
                      "that none failed first; the wait is launcher.rdzv_timeout_s";
                return LT_ERR_TIMEOUT;
            }
            if (adapter.status() != LT_OK) {
                err = "group '" + g->name + "': rank " + std::to_string(rank) + " of " +
                      std::to_string(world) + ": rendezvous failed: " + strip_location(e.what());
                return adapter.status();
            }
            err = "group '" + g->name + "': rank " + std::to_string(rank) + " could not connect to its peers from " +
                  where + ": " + strip_location(e.what());
            return contains(err, "imeout") || contains(err, "imed out") ? LT_ERR_TIMEOUT : LT_ERR_IO;
        }
        c->setTimeout(g->timeout);
        wk->peers = peer_addresses(*c);
        wk->ctx = std::move(c);
        g->workers.push_back(std::move(wk));
    }
    for (auto &w : g->workers) {
        Worker *wk = w.get();
        wk->thread = start_thread([g, wk] { worker_main(g, wk); });
    }
    lt_log(ctx, LT_LOG_DEBUG, "group '%s': rank %d of %d connected on %s in %.3f s (%d context%s, %s threads)",
           g->name.c_str(), rank, world, where.c_str(), lt_now() - t0, nthreads,
           nthreads > 1 ? "s" : "", g->realtime ? "real-time" : "normal");
    out = std::move(g);
    return LT_OK;
}

std::shared_ptr<Work> group_issue(const std::shared_ptr<Group> &gp, const Op &op) {
    Group &g = *gp;
    auto w = std::make_shared<Work>();
    w->op = op;
    char label[200];
    const bool p2p = op.kind == Kind::Send || op.kind == Kind::Recv;
    if (p2p) {
        /* p2p calls are not numbered alike on both sides: sequence 0. */
        w->op.wire_tag = wire_tag(0, op);
        snprintf(label, sizeof label, "%s #%" PRIu64 " %s rank %d (tag %u, %zu %s) on group '%s'",
                 kind_name(op.kind), ++g.p2p_seq, op.kind == Kind::Send ? "to" : "from", op.peer,
                 op.tag, op.count, lt_dtype_name(op.dtype), g.name.c_str());
    } else {
        /* Collective numbers agree on every rank: collectives come in one order. */
        uint64_t seq = ++g.coll_seq;
        w->op.wire_tag = wire_tag(seq, op);
        snprintf(label, sizeof label, "%s #%" PRIu64 " on group '%s'", kind_name(op.kind), seq,
                 g.name.c_str());
    }
    w->label = label;
    w->deadline = Clock::now() + g.timeout;

    std::lock_guard<std::mutex> lk(g.m);
    if (g.aborted) {
        finish(g, *w, LT_ERR_ABORTED, w->label + ": group '" + g.name + "' was aborted");
        return w;
    }
    if (!g.broken.empty()) {
        finish(g, *w, LT_ERR_ABORTED, w->label + ": not run: the group failed earlier: " + g.broken);
        return w;
    }
    if (!p2p) {
        g.workers[(g.coll_seq - 1) % g.workers.size()]->queue.push_back(w);
        g.cv_work.notify_all();
        return w;
    }
    /* Posted under the lock so abort never sees a half-posted op; posting does not block.
     * It takes pair locks, so it runs at the device thread's priority (gloo_rt.h). */
    RtScope rt_scope(g.realtime);
    try {
        post_p2p(g, *w);
    } catch (...) {
        std::string err;
        lt_status st = describe_failure(g, *w, g.workers[0]->peers, std::current_exception(), err);
        note_failure(g, *w, st, err);
        finish(g, *w, st, std::move(err));
        return w;
    }
    if (!g.p2p_started) {
        g.p2p_started = true;
        g.p2p.thread = start_thread([gp] { p2p_main(gp); });
    }
    g.p2p.queue.push_back(w);
    g.cv_work.notify_all();
    return w;
}

lt_status group_wait(Group &g, Work &w, int64_t timeout_ms, std::string &err) {
    std::unique_lock<std::mutex> lk(g.m);
    auto ready = [&] { return w.done || g.aborted; };
    /* Beyond ~30 years the clock arithmetic would overflow: treat as forever. */
    if (timeout_ms < 0 || timeout_ms > (int64_t)1e12)
        g.cv_done.wait(lk, ready);
    else
        g.cv_done.wait_for(lk, std::chrono::milliseconds(timeout_ms), ready);
    if (w.done) {
        if (w.status != LT_OK) err = w.error;
        return w.status;
    }
    if (g.aborted) {
        err = w.label + ": group '" + g.name + "' was aborted";
        return LT_ERR_ABORTED;
    }
    err = w.label + ": still running after " + std::to_string(timeout_ms) +
          " ms (the work stays valid; wait again)";
    return LT_ERR_TIMEOUT;
}

void group_abort(Group &g) {
    {
        std::lock_guard<std::mutex> lk(g.m);
        if (g.aborted) return;
        g.aborted = true;
        for (auto &wk : g.workers) {
            for (auto &w : wk->queue)
                finish(g, *w, LT_ERR_ABORTED, w->label + ": group '" + g.name + "' was aborted before it ran");
            wk->queue.clear();
        }
        /* Pending p2p waits return false at once (gloo's own abort hooks). */
        auto abort_wait = [](Work &w) {
            if (!w.ubuf) return;
            if (w.op.kind == Kind::Send)
                w.ubuf->abortWaitSend();
            else
                w.ubuf->abortWaitRecv();
        };
        if (g.p2p.current) abort_wait(*g.p2p.current);
        for (auto &w : g.p2p.queue) abort_wait(*w);
        g.cv_done.notify_all();
        g.cv_work.notify_all();
    }
    /* Wake our blocked workers and let peers blocked on us fail now rather
     * than at their timeout. Should no socket be found (another transport
     * layout), closing the pairs at least tells the peers. */
    for (auto &wk : g.workers) {
        try {
            if (!interrupt_context(*wk->ctx)) wk->ctx->closeConnections();
        } catch (...) {
        }
    }
}

void group_stop(Group &g) {
    {
        std::lock_guard<std::mutex> lk(g.m);
        g.stopping = true;
        g.cv_work.notify_all();
    }
    for (auto &wk : g.workers) stop_thread(g, *wk);
    stop_thread(g, g.p2p);
}

} // namespace ltgloo
