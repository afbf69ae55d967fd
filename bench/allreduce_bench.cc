/* Allreduce bus bandwidth, 2 ranks on loopback: lt's gloo backend through the
 * backend ABI (lt/backend.h: create, allreduce, wait) next to the same gloo
 * algorithm called directly (gloo::allreduce with gloo's own AllreduceOptions,
 * ring, on a context connected through gloo's own FileStore rendezvous). Not a
 * test: it only prints.
 *
 *   build/bench/allreduce_bench [--plugin PATH] [--sizes 1,4,16,64,100] [--rounds 3]
 *                               [--scale F] [--reduce gloo|same]
 *
 * The parent forks the two ranks before it has any thread (a fork taken while
 * another thread holds an allocator lock can deadlock the child), then hosts
 * lt's rendezvous store (lt_store_server_start on 127.0.0.1, port 0) and sends
 * the port down a pipe. Each rank dlopens the backend plugin, creates a group
 * through the store, and connects a second, independent gloo context (its own
 * TCP device on 127.0.0.1, gloo::rendezvous::FileStore in a temp dir).
 *
 * Per size (MiB of f32): `rounds` rounds, each running lt then direct: 2
 * warm-up calls, then `iters` timed calls back to back (sum, in place). Every
 * call is timed on both ranks; a call's time is the slower rank's. Printed:
 * median and best call time, bus bandwidth = 2*(n-1)/n * bytes / time (n = 2),
 * and lt/direct (bandwidth ratio: 1.00 = the ABI and its worker thread cost
 * nothing). The first call of each path is checked (rank0 + rank1 values).
 *
 * --reduce: the direct path's reduction function. "gloo" (default) is
 * gloo::sum<float> from gloo/math.h, compiled here at -O3 so it vectorizes;
 * "same" uses a plain vectorized loop equal to the plugin's.
 *
 * Output: a human table, and one machine-readable line per size:
 *   allreduce mib=16 iters=60 lt_med_ms=... lt_best_ms=... direct_med_ms=... ...
 * Bounded: the default plan takes about 20-30 s; a watchdog kills the ranks
 * after 120 s. */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include "lt/backend.h"
#include "lt/store.h"
extern "C" {
#include "ctx.h" /* lt_ctx's layout and lt_ctx_init: a plugin needs a context */
#include "store_server.h"
}

#ifndef LT_BENCH_PLUGIN_DIR
#define LT_BENCH_PLUGIN_DIR "build/plugins"
#endif

namespace {

constexpr int kWorld = 2;
constexpr int kWarmup = 2;
constexpr int kMaxSizes = 16;
constexpr int kMaxSamples = 4096; /* per method per size, over all rounds */

struct Plan {
    int nsizes = 0;
    double mib[kMaxSizes];
    int iters[kMaxSizes]; /* per round */
    int rounds = 3;
};

/* Shared with the children (MAP_SHARED before fork): call times by rank. */
struct Results {
    double t[kWorld][2][kMaxSizes][kMaxSamples]; /* [rank][0 lt, 1 direct][size][sample] seconds */
    int n[kWorld][2][kMaxSizes];
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

struct Child {
    int rank;
    Results *res;
    const Plan *plan;
    const char *plugin;
    const char *filestore_dir;
    bool same_reduce;
    int port;
};

#define FAIL(c, ...)                                                                               \
    do {                                                                                           \
        snprintf((c).res->err[(c).rank], sizeof (c).res->err[0], __VA_ARGS__);                   \
        return 1;                                                                                  \
    } while (0)

int child_run(Child &c) {
    const int rank = c.rank;
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
    for (int s = 0; s < c.plan->nsizes; s++) maxmib = std::max(maxmib, c.plan->mib[s]);
    const size_t maxn = (size_t)(maxmib * 1048576.0 / 4);
    std::vector<float> a(maxn), b(maxn); /* lt's and direct's buffers, pages touched */

    uint64_t seq = 0;
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
        if (c.same_reduce)
            opts.setReduceFunction(plain_sum);
        else
            opts.setReduceFunction(
                static_cast<void (*)(void *, const void *, const void *, size_t)>(&gloo::sum<float>));
        opts.setTag((uint32_t)(seq++ & 0xffffff));
        opts.setTimeout(std::chrono::seconds(60));
        gloo::allreduce(opts);
    };

    /* Correctness once per path on a mid-sized buffer, then zeros (sums of
     * zeros stay zero: no overflow, no denormals, over any number of calls). */
    {
        size_t n = std::min(maxn, (size_t)1 << 20);
        for (size_t i = 0; i < n; i++) a[i] = b[i] = (float)(rank + 1) * (float)(i % 97);
        if (!lt_call(a.data(), n)) FAIL(c, "lt allreduce: %s", lt_last_error(&ctx));
        try {
            direct_call(b.data(), n);
        } catch (const std::exception &e) {
            FAIL(c, "gloo allreduce: %s", e.what());
        }
        for (size_t i = 0; i < n; i++) {
            float want = 3.0f * (float)(i % 97);
            if (a[i] != want || b[i] != want)
                FAIL(c, "wrong sum at %zu: lt %g direct %g want %g", i, a[i], b[i], want);
        }
        std::fill(a.begin(), a.end(), 0.0f);
        std::fill(b.begin(), b.end(), 0.0f);
    }

    try {
        for (int s = 0; s < c.plan->nsizes; s++) {
            const size_t n = (size_t)(c.plan->mib[s] * 1048576.0 / 4);
            for (int r = 0; r < c.plan->rounds; r++) {
                for (int m = 0; m < 2; m++) {
                    float *p = m == 0 ? a.data() : b.data();
                    for (int i = 0; i < kWarmup + c.plan->iters[s]; i++) {
                        double t0 = now();
                        if (m == 0) {
                            if (!lt_call(p, n)) FAIL(c, "lt allreduce: %s", lt_last_error(&ctx));
                        } else {
                            direct_call(p, n);
                        }
                        double dt = now() - t0;
                        int &k = c.res->n[rank][m][s];
                        if (i >= kWarmup && k < kMaxSamples) c.res->t[rank][m][s][k++] = dt;
                    }
                }
            }
        }
    } catch (const std::exception &e) {
        FAIL(c, "gloo allreduce: %s", e.what());
    }

    be->destroy(&ctx, g);
    lt_store_close(store);
    c.res->ok[rank] = 1;
    return 0;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

void usage() {
    fprintf(stderr, "usage: allreduce_bench [--plugin PATH] [--sizes MIB,...] [--rounds N] [--scale F] "
                    "[--reduce gloo|same]\n");
}

} // namespace

int main(int argc, char **argv) {
    std::string plugin = std::string(LT_BENCH_PLUGIN_DIR) + "/liblt-backend-gloo.so";
    std::string sizes = "1,4,16,64,100";
    double scale = 1.0;
    bool same_reduce = false;
    Plan plan;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--plugin" && v) plugin = argv[++i];
        else if (a == "--sizes" && v) sizes = argv[++i];
        else if (a == "--rounds" && v) plan.rounds = std::max(1, atoi(argv[++i]));
        else if (a == "--scale" && v) scale = atof(argv[++i]);
        else if (a == "--reduce" && v) same_reduce = std::string(argv[++i]) == "same";
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
            Child c{r, res, &plan, plugin.c_str(), dir, same_reduce, port};
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

    printf("allreduce, %d ranks on loopback, f32 sum in place, ring; %d rounds x (2 warm-up + N timed) "
           "per path; time = slower rank; busbw = 2(n-1)/n * bytes / time\n",
           kWorld, plan.rounds);
    printf("direct reduce function: %s\n", same_reduce ? "plain loop (the plugin's)" : "gloo::sum<float> (-O3)");
    printf("%8s %5s | %21s %13s | %21s %13s | %13s\n", "MiB", "N", "lt ms med (best)", "lt GB/s",
           "direct ms med (best)", "direct GB/s", "lt/direct");
    for (int s = 0; s < plan.nsizes; s++) {
        double bytes = plan.mib[s] * 1048576.0;
        double f = 2.0 * (kWorld - 1) / kWorld * bytes / 1e9;
        double med[2], best[2];
        int n = res->n[0][0][s];
        for (int m = 0; m < 2; m++) {
            std::vector<double> v;
            int k = std::min(res->n[0][m][s], res->n[1][m][s]);
            for (int i = 0; i < k; i++) v.push_back(std::max(res->t[0][m][s][i], res->t[1][m][s][i]));
            med[m] = median(v);
            best[m] = *std::min_element(v.begin(), v.end());
        }
        printf("%8g %5d | %9.3f (%9.3f) %5.2f (%5.2f) | %9.3f (%9.3f) %5.2f (%5.2f) | %5.2f (%5.2f)\n",
               plan.mib[s], n, med[0] * 1e3, best[0] * 1e3, f / med[0], f / best[0], med[1] * 1e3,
               best[1] * 1e3, f / med[1], f / best[1], med[1] / med[0], best[1] / best[0]);
    }
    printf("(GB/s: median (best); lt/direct: bandwidth ratio of medians (of bests))\n");
    for (int s = 0; s < plan.nsizes; s++) {
        double bytes = plan.mib[s] * 1048576.0;
        double f = 2.0 * (kWorld - 1) / kWorld * bytes / 1e9;
        double med[2], best[2];
        for (int m = 0; m < 2; m++) {
            std::vector<double> v;
            int k = std::min(res->n[0][m][s], res->n[1][m][s]);
            for (int i = 0; i < k; i++) v.push_back(std::max(res->t[0][m][s][i], res->t[1][m][s][i]));
            med[m] = median(v);
            best[m] = *std::min_element(v.begin(), v.end());
        }
        printf("allreduce mib=%g iters=%d lt_med_ms=%.4f lt_best_ms=%.4f direct_med_ms=%.4f "
               "direct_best_ms=%.4f lt_busbw_gbs=%.3f direct_busbw_gbs=%.3f ratio_med=%.3f ratio_best=%.3f\n",
               plan.mib[s], res->n[0][0][s], med[0] * 1e3, best[0] * 1e3, med[1] * 1e3, best[1] * 1e3,
               f / med[0], f / med[1], med[1] / med[0], best[1] / best[0]);
    }
    /* The spread: a median far above the best is the scheduler, not the wire. */
    for (int s = 0; s < plan.nsizes; s++) {
        for (int m = 0; m < 2; m++) {
            std::vector<double> v;
            int k = std::min(res->n[0][m][s], res->n[1][m][s]);
            for (int i = 0; i < k; i++) v.push_back(std::max(res->t[0][m][s][i], res->t[1][m][s][i]));
            std::sort(v.begin(), v.end());
            auto pct = [&](double q) { return v.empty() ? 0.0 : v[(size_t)(q * (v.size() - 1) + 0.5)] * 1e3; };
            printf("allreduce_pct mib=%g path=%s p10_ms=%.3f p25_ms=%.3f p50_ms=%.3f p75_ms=%.3f p90_ms=%.3f "
                   "max_ms=%.3f\n",
                   plan.mib[s], m ? "direct" : "lt", pct(0.1), pct(0.25), pct(0.5), pct(0.75), pct(0.9), pct(1.0));
        }
    }
    printf("allreduce wall_s=%.1f\n", wall);
    return 0;
}
