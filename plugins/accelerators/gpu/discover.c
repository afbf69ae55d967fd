/* Device discovery in a forked child (see discover.h for why). */
#define _GNU_SOURCE /* pipe2 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include "discover.h"

#define PROBE_TIMEOUT_MS 60000 /* a driver wedged in its initialisation must not hang the launcher */
#ifndef LT_GPU_MIN_MAJOR
#define LT_GPU_MIN_MAJOR 8 /* CMake passes the oldest of CMAKE_CUDA_ARCHITECTURES */
#endif
#define MIN_MAJOR LT_GPU_MIN_MAJOR

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static gpu_probe cached;
static bool have_cached;
static bool cuda_up;

void gpu_discover_cuda_is_up(void) {
    pthread_mutex_lock(&lock);
    cuda_up = true;
    pthread_mutex_unlock(&lock);
}

/* Asks the runtime, in whatever process this runs in. */
static void probe_here(gpu_probe *p) {
    memset(p, 0, sizeof *p);
    void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!drv) {
        const char *e = dlerror();
        snprintf(p->why, sizeof p->why,
                 "no NVIDIA driver: libcuda.so.1 cannot be loaded (%s); install the driver and "
                 "check with nvidia-smi",
                 e ? e : "not found");
        return;
    }
    dlclose(drv);
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaSuccess && count > 0) {
        /* A device older than the code built for would take setup and then
         * fail every launch (no kernel image): not counted as usable. */
        int major = 0, minor = 0;
        for (int d = 0; d < count && d < GPU_PROBE_DEVICES; d++) {
            struct cudaDeviceProp prop;
            if (cudaGetDeviceProperties(&prop, d) == cudaSuccess) {
                snprintf(p->name[d], sizeof p->name[d], "%s", prop.name);
                major = prop.major, minor = prop.minor;
                if (prop.major < MIN_MAJOR) break;
            }
            if (cudaDeviceGetPCIBusId(p->bus[d], (int)sizeof p->bus[d], d) != cudaSuccess)
                p->bus[d][0] = 0;
            p->count = d + 1;
        }
        cudaGetLastError();
        if (p->count == 0)
            snprintf(p->why, sizeof p->why,
                     "GPU 0 (%s) has compute capability %d.%d; this plugin was built for %d.0 and newer: "
                     "rebuild with -DCMAKE_CUDA_ARCHITECTURES=native (or its sm number)",
                     p->name[0], major, minor, MIN_MAJOR);
        return;
    }
    cudaGetLastError();
    int drv_ver = 0, rt_ver = 0;
    cudaDriverGetVersion(&drv_ver);
    cudaRuntimeGetVersion(&rt_ver);
    if (e == cudaErrorInsufficientDriver || (drv_ver && drv_ver < rt_ver))
        snprintf(p->why, sizeof p->why,
                 "insufficient driver version: the driver supports CUDA %d.%d, this plugin was "
                 "built with CUDA %d.%d; update the NVIDIA driver and check with nvidia-smi",
                 drv_ver / 1000, drv_ver % 1000 / 10, rt_ver / 1000, rt_ver % 1000 / 10);
    else if (e == cudaSuccess || e == cudaErrorNoDevice)
        snprintf(p->why, sizeof p->why,
                 "no CUDA device: the driver is loaded but sees no GPU (CUDA_VISIBLE_DEVICES=%s); "
                 "check with nvidia-smi",
                 getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "unset");
    else
        snprintf(p->why, sizeof p->why,
                 "the CUDA driver failed to initialise: %s (%s); check with nvidia-smi",
                 cudaGetErrorString(e), cudaGetErrorName(e));
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* All n bytes within PROBE_TIMEOUT_MS; *timed_out when the time ran out. */
static bool read_all(int fd, void *buf, size_t n, bool *timed_out) {
    char *c = buf;
    long long end = now_ms() + PROBE_TIMEOUT_MS;
    *timed_out = false;
    while (n > 0) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        long long left = end - now_ms();
        if (left <= 0) {
            *timed_out = true;
            return false;
        }
        int pr = poll(&pf, 1, (int)left);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) continue; /* the deadline is checked above */
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        c += r;
        n -= (size_t)r;
    }
    return true;
}

/* Runs probe_here in a child and copies its answer: 1 when it answered,
 * 0 when no child could be started (the caller then asks here), -1 when
 * the child died without answering (a driver crash: reported, and not
 * retried in this process). The child only calls the CUDA runtime and
 * write(), then _exit()s: no atexit handler, no flush of the parent's
 * stdio buffers. */
static int probe_in_child(gpu_probe *p) {
    int fds[2];
    /* close-on-exec: another thread's fork + exec must not hold the write
     * end, or a dead probe would never read as dead */
    if (pipe2(fds, O_CLOEXEC) != 0) return 0;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return 0;
    }
    if (pid == 0) {
        close(fds[0]);
        gpu_probe *mine = malloc(sizeof *mine);
        if (mine) {
            probe_here(mine);
            const char *c = (const char *)mine;
            size_t left = sizeof *mine;
            while (left > 0) {
                ssize_t w = write(fds[1], c, left);
                if (w < 0 && errno == EINTR) continue;
                if (w <= 0) break;
                c += w;
                left -= (size_t)w;
            }
        }
        _exit(0);
    }
    close(fds[1]);
    bool timed_out;
    bool ok = read_all(fds[0], p, sizeof *p, &timed_out);
    close(fds[0]);
    if (timed_out) kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!ok) {
        memset(p, 0, sizeof *p);
        snprintf(p->why, sizeof p->why,
                 "the GPU probe (a child process asking the CUDA runtime for devices) %s; check the "
                 "driver with nvidia-smi",
                 timed_out ? "did not answer within 60 s"
                 : WIFSIGNALED(status) ? "died without answering (killed by a signal)" : "died without answering");
        return -1;
    }
    p->why[sizeof p->why - 1] = 0;
    for (int d = 0; d < GPU_PROBE_DEVICES; d++) {
        p->name[d][sizeof p->name[d] - 1] = 0;
        p->bus[d][sizeof p->bus[d] - 1] = 0;
    }
    return 1;
}

const gpu_probe *gpu_discover(void) {
    pthread_mutex_lock(&lock);
    if (!have_cached) {
        gpu_probe *p = malloc(sizeof *p);
        /* No fork: ask here. A child that found CUDA unable to initialise may
         * only have inherited a parent whose CUDA was already up (another
         * library started it): asked here, that is no longer in the way. */
        if (p && (cuda_up || probe_in_child(p) == 0 ||
                  (p->count == 0 && strstr(p->why, "failed to initialise"))))
            probe_here(p);
        if (p) {
            cached = *p;
            have_cached = true;
            free(p);
        } else {
            snprintf(cached.why, sizeof cached.why, "out of memory probing for GPUs");
        }
    }
    pthread_mutex_unlock(&lock);
    return &cached;
}
