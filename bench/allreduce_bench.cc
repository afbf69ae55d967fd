/* Allreduce bus bandwidth, 2 ranks on loopback: lt's gloo backend through the
 * backend ABI (lt/backend.h: create, allreduce, wait) next to the same gloo
 * algorithm called directly (gloo::allreduce with gloo's own AllreduceOptions,
 * ring, on a context connected through gloo's own FileStore rendezvous). Not a
 * test: it only prints.
 *
 *   build/bench/allreduce_bench [--plugin PATH] [--sizes 1,4,16,64,100] [--rounds 3]
 *                               [--scale F] [--reduce gloo|same] [--pairwise] [--busy NICE]
 *
 * The parent forks the two ranks before it has any thread (a fork taken while
 * another thread holds an allocator lock can deadlock the child), then hosts
 * lt's rendezvous store (lt_store_server_start on 127.0.0.1, port 0) and sends
 * the port down a pipe. Each rank dlopens the backend plugin, creates a group
 * through the store, and connects a second, independent gloo context (its own
 * TCP device on 127.0.0.1, gloo::rendezvous::FileStore in a temp dir).
 *
 * Per size (MiB of f32): `rounds` rounds, each running every path in turn: 2
 * warm-up calls, then `iters` timed calls back to back (sum, in place). Every
 * call is timed on both ranks; a call's time is the slower rank's. Printed:
 * median and best call time, bus bandwidth = 2*(n-1)/n * bytes / time (n = 2),
 * and lt/direct (bandwidth ratio: 1.00 = the ABI and its worker thread cost
 * nothing). The first call of each path is checked (rank0 + rank1 values).
 *
 * Options for looking into ddp's step (not needed for the comparison):
 *  --reduce same  the direct path reduces with a plain loop equal to the
 *                 plugin's instead of gloo::sum<float> (compiled here at -O3).
 *  --pairwise     a third path, "pair": gloo called directly with another
 *                 algorithm for 2 ranks: each rank sends its whole buffer to the
 *                 peer and receives the peer's (one unbound-buffer send and recv,
 *                 overlapped), then adds locally. Same bytes on the wire as the
 *                 ring for n = 2, one exchange instead of 4 dependent segments.
 *  --busy NICE    while timing, each rank also runs a thread at nice +NICE that
 *                 spins on arithmetic: a stand-in for a training thread that
 *                 keeps both cores busy, as in a ddp step overlapping backward.
 *
 * Output: a human table, then machine-readable lines:
 *   allreduce mib=16 iters=60 lt_med_ms=... lt_best_ms=... direct_med_ms=... ...
 *   allreduce_pct mib=16 path=lt p10_ms=... p50_ms=... p90_ms=... max_ms=...
 * Bounded: the default plan takes about 20-30 s; a watchdog kills the ranks
 * after 120 s. */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include "lt/backend.h"
#include "lt/store.h"
extern "C" {
#include "common/ctx.h" /* lt_ctx's layout and lt_ctx_init: a plugin needs a context */
#include "dist/store_server.h"
}

#ifndef LT_BENCH_PLUGIN_DIR
#define LT_BENCH_PLUGIN_DIR "build/plugins"
#endif

namespace {

constexpr int kWorld = 2;
constexpr int kWarmup = 2;
constexpr int kMaxSizes = 16;
constexpr int kMaxSamples = 4096; /* per path per size, over all rounds */
constexpr int kPaths = 3;         /* lt, direct (ring), pair (direct, pairwise exchange) */
const char *const kPathName[kPaths] = {"lt", "direct", "pair"};

struct Plan {
    int nsizes = 0;
    double mib[kMaxSizes];
    int iters[kMaxSizes]; /* per round */
    int rounds = 3;
    int npaths = 2;
    int busy_nice = -1; /* -1: no busy thread */
    bool same_reduce = false;
};

/* Shared with the children (MAP_SHARED before fork): call times by rank. */
struct Results {
    double t[kWorld][kPaths][kMaxSizes][kMaxSamples]; /* seconds */
    int n[kWorld][kPaths][kMaxSizes];
    double busy_work[kWorld]; /* iterations the busy thread ran, per second */
    int ok[kWorld];
    char err[kWorld][512];
};

double now() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Timed calls per round: about 0.4 s of one path at ~1 GB/s, 4 to 150. */
int default_iters(double mib) {
    int it = (int)(0.4 / (mib * 1048576.0 / 1e9));
    return std::max(4, std::min(it, 150));
}

/* The same loop as the plugin's reduction (gloo_reduce.cc's plain<float, Sum>). */
__attribute__((noinline)) void plain_sum(void *c_, const void *a_, const void *b_, size_t n) {
    float *c = static_cast<float *>(c_);
    const float *a = static_cast<const float *>(a_), *b = static_cast<const float *>(b_);
    for (size_t i = 0; i < n; i++) c[i] = a[i] + b[i];
}

using ReduceFn = void (*)(void *, const void *, const void *, size_t);

struct Child {
    int rank;
    Results *res;
    const Plan *plan;
    const char *plugin;
    const char *filestore_dir;
    int port;
};

#define FAIL(c, ...)                                                                               \
    do {                                                                                           \
        snprintf((c).res->err[(c).rank], sizeof (c).res->err[0], __VA_ARGS__);                   \
        return 1;                                                                                  \
    } while (0)

/* Spins on arithmetic at a lower priority until stop: both cores stay busy,
 * as while a training step computes. */
void busy_main(int nice_by, std::atomic<bool> *stop, double *rate) {
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice_by);
    float acc[64];
    for (int i = 0; i < 64; i++) acc[i] = (float)i;
    double t0 = now();
    uint64_t it = 0;
    while (!stop->load(std::memory_order_relaxed)) {
        for (int k = 0; k < 4096; k++)
            for (int i = 0; i < 64; i++) acc[i] = acc[i] * 0.999f + 0.001f;
        it++;
    }
    volatile float sink = acc[7];
    (void)sink;
    *rate = it / (now() - t0);
}

/* Both paths get the same scheduling: the plugin runs its communication
 * threads at SCHED_FIFO 1 when permitted (backend.realtime=auto), so the
 * direct path's caller and gloo device thread (created by this thread,
 * inheriting its policy) run there too; the ratio then measures the ABI and
 * the worker hand-off, not the scheduler. */
static bool g_fifo;

int child_run(Child &c) {
    const int rank = c.rank;
    const Plan &plan = *c.plan;
    struct sched_param sp {};
    sp.sched_priority = 1;
    g_fifo = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
    /* lt's side: store client, plugin, group. */
    lt_store *store = nullptr;
    char err[512];
    if (lt_store_connect("127.0.0.1", c.port, "", 20000, &store, err, sizeof err) != LT_OK)
        FAIL(c, "store connect: %.400s", err);
    lt_store_set_timeout(store, 30000);
    void *h = dlopen(c.plugin, RTLD_NOW | RTLD_LOCAL);
    if (!h) FAIL(c, "dlopen %s: %s", c.plugin, dlerror());
    auto entry = (lt_plugin_entry_fn)dlsym(h, LT_PLUGIN_ENTRY_SYMBOL);
    const lt_plugin_header *const *list = entry ? entry() : nullptr;
    if (!list || !list[0] || list[0]->kind != LT_KIND_BACKEND || strcmp(list[0]->name, "gloo") ||
        list[0]->struct_size != sizeof(lt_backend_desc))
        FAIL(c, "%s does not export the gloo backend descriptor", c.plugin);
    const lt_backend_desc *be = reinterpret_cast<const lt_backend_desc *>(list[0]);
    lt_ctx ctx;
    lt_ctx_init(&ctx, LT_KIND_BACKEND, "gloo", list[0], nullptr);
    lt_pg_options o{};
    o.struct_size = sizeof o;
    o.prefix = "bench/";
    o.timeout_ms = 60000;
    o.mem_kind = LT_MEM_HOST;
    lt_backend_group *g = nullptr;
    if (be->create(&ctx, store, rank, kWorld, &o, &g) != LT_OK)
        FAIL(c, "lt create: %s", lt_last_error(&ctx));

    /* gloo's side, independent of the plugin: its own device and rendezvous. */
    std::shared_ptr<gloo::rendezvous::Context> gctx;
    try {
        gloo::transport::tcp::attr attr("127.0.0.1");
        auto dev = gloo::transport::tcp::CreateDevice(attr);
        gloo::rendezvous::FileStore fs(c.filestore_dir);
        gloo::rendezvous::PrefixStore ps("direct", fs);
        gctx = std::make_shared<gloo::rendezvous::Context>(rank, kWorld);
        gctx->setTimeout(std::chrono::seconds(60));
        gctx->connectFullMesh(ps, dev);
    } catch (const std::exception &e) {
        FAIL(c, "gloo rendezvous: %s", e.what());
    }

    double maxmib = 0;
    for (int s = 0; s < plan.nsizes; s++) maxmib = std::max(maxmib, plan.mib[s]);
    const size_t maxn = (size_t)(maxmib * 1048576.0 / 4);
    /* One buffer per path (pages touched), and the pairwise path's scratch. */
    std::vector<std::vector<float>> buf(plan.npaths, std::vector<float>(maxn));
    std::vector<float> scratch(plan.npaths > 2 ? maxn : 0);

    const ReduceFn reduce = plan.same_reduce ? plain_sum : static_cast<ReduceFn>(&gloo::sum<float>);
    uint32_t seq = 0;
    auto lt_call = [&](float *p, size_t n) -> bool {
        lt_backend_work *w = nullptr;
        if (be->allreduce(&ctx, g, p, n, LT_F32, LT_SUM, &w) != LT_OK) return false;
        lt_status st = be->wait(&ctx, w, 60000);
        be->free_work(&ctx, w);
        return st == LT_OK;
    };
    auto direct_call = [&](float *p, size_t n) {
        gloo::AllreduceOptions opts(gctx);
        opts.setOutput(p, n);
        opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        opts.setReduceFunction(reduce);
        opts.setTag(seq++ & 0xffffff);
        opts.setTimeout(std::chrono::seconds(60));
        gloo::allreduce(opts);
    };
    /* 2 ranks: swap whole buffers, add locally (a + b == b + a bit for bit,
     * so both ranks hold the same sum). */
    auto pair_call = [&](float *p, size_t n) {
        const size_t bytes = n * sizeof(float);
        const int peer = 1 - rank;
        const uint64_t slot = gloo::Slot::build(0x50, seq++ & 0xffffff);
        auto in = gctx->createUnboundBuffer(scratch.data(), bytes);
        auto out = gctx->createUnboundBuffer(p, bytes);
        in->recv(peer, slot, 0, bytes);
        out->send(peer, slot, 0, bytes);
        in->waitRecv(std::chrono::seconds(60));
        out->waitSend(std::chrono::seconds(60));
        reduce(p, p, scratch.data(), n);
    };
    auto call = [&](int m, float *p, size_t n) -> bool {
        if (m == 0) return lt_call(p, n);
        if (m == 1) direct_call(p, n);
        else pair_call(p, n);
        return true;
    };

    /* Correctness once per path on a mid-sized buffer, then zeros (sums of
     * zeros stay zero: no overflow, no denormals, over any number of calls). */
    try {
        size_t n = std::min(maxn, (size_t)1 << 20);
        for (int m = 0; m < plan.npaths; m++) {
            float *p = buf[m].data();
            for (size_t i = 0; i < n; i++) p[i] = (float)(rank + 1) * (float)(i % 97);
            if (!call(m, p, n)) FAIL(c, "lt allreduce: %s", lt_last_error(&ctx));
            for (size_t i = 0; i < n; i++)
                if (p[i] != 3.0f * (float)(i % 97))
                    FAIL(c, "%s: wrong sum at %zu: %g, want %g", kPathName[m], i, p[i], 3.0f * (float)(i % 97));
            std::fill(buf[m].begin(), buf[m].end(), 0.0f);
        }
    } catch (const std::exception &e) {
        FAIL(c, "gloo allreduce: %s", e.what());
    }

    std::atomic<bool> stop{false};
    std::thread busy;
    if (plan.busy_nice >= 0) busy = std::thread(busy_main, plan.busy_nice, &stop, &c.res->busy_work[rank]);
    int rc = 0;
    try {
        for (int s = 0; s < plan.nsizes && !rc; s++) {
            const size_t n = (size_t)(plan.mib[s] * 1048576.0 / 4);
            for (int r = 0; r < plan.rounds && !rc; r++) {
                for (int m = 0; m < plan.npaths && !rc; m++) {
                    float *p = buf[m].data();
                    for (int i = 0; i < kWarmup + plan.iters[s]; i++) {
                        double t0 = now();
                        if (!call(m, p, n)) {
                            snprintf(c.res->err[rank], sizeof c.res->err[0], "lt allreduce: %s", lt_last_error(&ctx));
                            rc = 1;
                            break;
                        }
                        double dt = now() - t0;
                        int &k = c.res->n[rank][m][s];
                        if (i >= kWarmup && k < kMaxSamples) c.res->t[rank][m][s][k++] = dt;
                    }
                }
            }
        }
    } catch (const std::exception &e) {
        snprintf(c.res->err[rank], sizeof c.res->err[0], "gloo allreduce: %s", e.what());
        rc = 1;
    }
    stop = true;
    if (busy.joinable()) busy.join();
    if (rc) return rc;

    be->destroy(&ctx, g);
    lt_store_close(store);
    c.res->ok[rank] = 1;
    return 0;
}

double median_sorted(const std::vector<double> &v) {
    if (v.empty()) return 0;
    size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

/* Per-call times of one path and size: the slower rank's, in call order. */
std::vector<double> calls(const Results &res, int m, int s) {
    std::vector<double> v;
    int k = std::min(res.n[0][m][s], res.n[1][m][s]);
    for (int i = 0; i < k; i++) v.push_back(std::max(res.t[0][m][s][i], res.t[1][m][s][i]));
    return v;
}

void usage() {
    fprintf(stderr, "usage: allreduce_bench [--plugin PATH] [--sizes MIB,...] [--rounds N] [--scale F] "
                    "[--reduce gloo|same] [--pairwise] [--busy NICE]\n");
}

} // namespace

int main(int argc, char **argv) {
    std::string plugin = std::string(LT_BENCH_PLUGIN_DIR) + "/liblt-backend-gloo.so";
    std::string sizes = "1,4,16,64,100";
    double scale = 1.0;
    Plan plan;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--plugin" && v) plugin = argv[++i];
        else if (a == "--sizes" && v) sizes = argv[++i];
        else if (a == "--rounds" && v) plan.rounds = std::max(1, atoi(argv[++i]));
        else if (a == "--scale" && v) scale = atof(argv[++i]);
        else if (a == "--reduce" && v) plan.same_reduce = std::string(argv[++i]) == "same";
        else if (a == "--pairwise") plan.npaths = 3;
        else if (a == "--busy" && v) plan.busy_nice = std::max(0, atoi(argv[++i]));
        else {
            usage();
            return 2;
        }
    }
    for (size_t pos = 0; pos < sizes.size() && plan.nsizes < kMaxSizes;) {
        size_t comma = sizes.find(',', pos);
        double mib = atof(sizes.substr(pos, comma - pos).c_str());
        if (mib > 0) {
            plan.mib[plan.nsizes] = mib;
            int it = (int)(default_iters(mib) * scale);
            plan.iters[plan.nsizes] = std::max(2, std::min(it, kMaxSamples / plan.rounds));
            plan.nsizes++;
        }
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    if (!plan.nsizes) {
        usage();
        return 2;
    }

    auto *res = static_cast<Results *>(
        mmap(nullptr, sizeof(Results), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (res == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    char dir[] = "/tmp/allreduce_bench.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }

    /* Fork the ranks while this process has a single thread. */
    pid_t pids[kWorld];
    int pipes[kWorld][2];
    for (int r = 0; r < kWorld; r++) {
        if (pipe(pipes[r])) {
            perror("pipe");
            return 1;
        }
        pids[r] = fork();
        if (pids[r] < 0) {
            perror("fork");
            return 1;
        }
        if (pids[r] == 0) {
            for (int q = 0; q <= r; q++) close(pipes[q][1]);
            int port = 0;
            if (read(pipes[r][0], &port, sizeof port) != (ssize_t)sizeof port || port <= 0) _exit(9);
            Child c{r, res, &plan, plugin.c_str(), dir, port};
            int rc = child_run(c);
            fflush(stdout);
            _exit(rc);
        }
        close(pipes[r][0]);
    }

    lt_store_server *srv = nullptr;
    int port = 0;
    char err[512];
    if (lt_store_server_start("127.0.0.1", 0, "", &srv, &port, err, sizeof err) != LT_OK) {
        fprintf(stderr, "allreduce_bench: store: %s\n", err);
        for (int r = 0; r < kWorld; r++) kill(pids[r], SIGKILL);
        return 1;
    }
    for (int r = 0; r < kWorld; r++) {
        if (write(pipes[r][1], &port, sizeof port) != (ssize_t)sizeof port) perror("write");
        close(pipes[r][1]);
    }

    double t_start = now();
    int status = 0;
    int left = kWorld;
    bool killed = false;
    while (left > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            left--;
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                status = 1;
                /* One rank failed: the other would wait for it until gloo's timeout. */
                for (int r = 0; r < kWorld; r++)
                    if (pids[r] != p) kill(pids[r], SIGKILL);
            }
            continue;
        }
        if (p < 0 && errno != EINTR) break;
        if (!killed && now() - t_start > 120) {
            fprintf(stderr, "allreduce_bench: ranks still running after 120 s; killing them\n");
            for (int r = 0; r < kWorld; r++) kill(pids[r], SIGKILL);
            killed = true;
            status = 1;
        }
        usleep(20000);
    }
    double wall = now() - t_start;
    lt_store_server_stop(srv);
    std::string rm = std::string("rm -rf '") + dir + "'";
    if (system(rm.c_str())) {
    }
    for (int r = 0; r < kWorld; r++)
        if (!res->ok[r] && res->err[r][0]) fprintf(stderr, "allreduce_bench: rank %d: %s\n", r, res->err[r]);
    if (status) return 1;

    printf("allreduce, %d ranks on loopback, f32 sum in place; %d rounds x (2 warm-up + N timed) per path; "
           "time = slower rank; busbw = 2(n-1)/n * bytes / time\n",
           kWorld, plan.rounds);
    {
        /* The ranks set this in child_run; probe (and undo) it here to say so. */
        struct sched_param old {}, sp {};
        int pol = 0;
        sp.sched_priority = 1;
        pthread_getschedparam(pthread_self(), &pol, &old);
        g_fifo = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
        if (g_fifo) pthread_setschedparam(pthread_self(), pol, &old);
    }
    printf("threads: %s on both paths\n", g_fifo ? "SCHED_FIFO 1 (as the plugin's backend.realtime=auto)" : "normal priority (no SCHED_FIFO permitted)");
    printf("lt: gloo backend plugin via lt/backend.h (ring on its worker thread); direct: gloo::allreduce ring "
           "on this thread, reduce %s%s",
           plan.same_reduce ? "plain loop (the plugin's)" : "gloo::sum<float> (-O3)",
           plan.npaths > 2 ? "; pair: direct, whole-buffer exchange + local sum" : "");
    if (plan.busy_nice >= 0) printf("; a thread per rank spins at nice +%d while timing", plan.busy_nice);
    printf("\n");
    printf("%8s %5s | %21s %13s | %21s %13s | %13s", "MiB", "N", "lt ms med (best)", "lt GB/s",
           "direct ms med (best)", "direct GB/s", "lt/direct");
    if (plan.npaths > 2) printf(" | %21s %13s", "pair ms med (best)", "pair GB/s");
    printf("\n");
    struct Stat {
        double med, best;
    };
    std::vector<std::vector<Stat>> st(plan.nsizes, std::vector<Stat>(plan.npaths));
    for (int s = 0; s < plan.nsizes; s++)
        for (int m = 0; m < plan.npaths; m++) {
            std::vector<double> v = calls(*res, m, s);
            std::sort(v.begin(), v.end());
            st[s][m] = {median_sorted(v), v.empty() ? 0 : v[0]};
        }
    for (int s = 0; s < plan.nsizes; s++) {
        double f = 2.0 * (kWorld - 1) / kWorld * plan.mib[s] * 1048576.0 / 1e9;
        auto &x = st[s];
        printf("%8g %5d | %9.3f (%9.3f) %5.2f (%5.2f) | %9.3f (%9.3f) %5.2f (%5.2f) | %5.2f (%5.2f)", plan.mib[s],
               res->n[0][0][s], x[0].med * 1e3, x[0].best * 1e3, f / x[0].med, f / x[0].best, x[1].med * 1e3,
               x[1].best * 1e3, f / x[1].med, f / x[1].best, x[1].med / x[0].med, x[1].best / x[0].best);
        if (plan.npaths > 2)
            printf(" | %9.3f (%9.3f) %5.2f (%5.2f)", x[2].med * 1e3, x[2].best * 1e3, f / x[2].med, f / x[2].best);
        printf("\n");
    }
    printf("(GB/s: median (best); lt/direct: bandwidth ratio of medians (of bests))\n");
    for (int s = 0; s < plan.nsizes; s++) {
        double f = 2.0 * (kWorld - 1) / kWorld * plan.mib[s] * 1048576.0 / 1e9;
        auto &x = st[s];
        printf("allreduce mib=%g iters=%d lt_med_ms=%.4f lt_best_ms=%.4f direct_med_ms=%.4f "
               "direct_best_ms=%.4f lt_busbw_gbs=%.3f direct_busbw_gbs=%.3f ratio_med=%.3f ratio_best=%.3f",
               plan.mib[s], res->n[0][0][s], x[0].med * 1e3, x[0].best * 1e3, x[1].med * 1e3, x[1].best * 1e3,
               f / x[0].med, f / x[1].med, x[1].med / x[0].med, x[1].best / x[0].best);
        if (plan.npaths > 2)
            printf(" pair_med_ms=%.4f pair_best_ms=%.4f pair_busbw_gbs=%.3f", x[2].med * 1e3, x[2].best * 1e3,
                   f / x[2].med);
        printf("\n");
    }
    /* The spread: a median far above the best is the scheduler, not the wire. */
    for (int s = 0; s < plan.nsizes; s++) {
        for (int m = 0; m < plan.npaths; m++) {
            auto v = calls(*res, m, s);
            std::sort(v.begin(), v.end());
            auto pct = [&](double q) { return v.empty() ? 0.0 : v[(size_t)(q * (v.size() - 1) + 0.5)] * 1e3; };
            printf("allreduce_pct mib=%g path=%s p10_ms=%.3f p25_ms=%.3f p50_ms=%.3f p75_ms=%.3f p90_ms=%.3f "
                   "max_ms=%.3f\n",
                   plan.mib[s], kPathName[m], pct(0.1), pct(0.25), pct(0.5), pct(0.75), pct(0.9), pct(1.0));
        }
    }
    if (plan.busy_nice >= 0)
        printf("allreduce_busy rank0_iters_per_s=%.0f rank1_iters_per_s=%.0f\n", res->busy_work[0],
               res->busy_work[1]);
    printf("allreduce wall_s=%.1f\n", wall);
    return 0;
}
