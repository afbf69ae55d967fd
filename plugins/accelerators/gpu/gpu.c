/* The gpu accelerator: descriptor, device discovery (is_available,
 * device_count, device_name, device_in_use), setup and teardown. Memory
 * lives in memory.c, per-thread state and synchronize in thread.c, the
 * kernels in the .cu files.
 *
 * No driver is needed to load this file: cudart is linked statically and
 * opens libcuda.so.1 itself on the first runtime call, so a machine
 * without one simply reports is_available = false with the reason.
 * Discovery (is_available, device_count, device_name, device_in_use) never
 * initialises CUDA in the calling process (discover.h says why). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "discover.h"
#include "gpu_memory.h"

static gpu_state *state_of(lt_ctx *ctx) { return (gpu_state *)lt_ctx_state(ctx); }

static _Atomic uint64_t next_serial = 1;

/* ---- discovery ------------------------------------------------------------ */

/* LT_OK either way: "no device" is an answer, not a failure; the reason
 * goes to the context for the trainer's message. */
static lt_status gpu_is_available(lt_ctx *ctx, bool *out) {
    const gpu_probe *p = gpu_discover();
    *out = p->count > 0;
    if (p->count <= 0) lt_set_error(ctx, "%s", p->why);
    return LT_OK;
}

/* 0 devices without a driver or device, and no message: is_available has
 * already said why, and the trainer reads that message after this call. */
static lt_status gpu_device_count(lt_ctx *ctx, int *out) {
    (void)ctx;
    *out = gpu_discover()->count;
    return LT_OK;
}

static lt_status gpu_memory_is_host(lt_ctx *ctx, bool *out) {
    (void)ctx;
    *out = false;
    return LT_OK;
}

/* From discovery's answer (no CUDA call here). */
static lt_status gpu_device_name(lt_ctx *ctx, int device, char *buf, size_t len) {
    (void)ctx;
    const gpu_probe *p = gpu_discover();
    if (!len) return LT_OK;
    if (device >= 0 && device < p->count && device < GPU_PROBE_DEVICES && p->name[device][0])
        snprintf(buf, len, "gpu:%d (%s)", device, p->name[device]);
    else
        snprintf(buf, len, "gpu:%d", device);
    return LT_OK;
}

/* NVML, opened at run time (never linked): only the calls used here, by
 * their C types, so no nvml.h is needed. Return codes: 0 success, 7
 * NVML_ERROR_INSUFFICIENT_SIZE (processes exist and did not fit). */
typedef int (*nvml_init_fn)(void);
typedef int (*nvml_shutdown_fn)(void);
typedef int (*nvml_by_pci_fn)(const char *bus_id, void **device);
typedef int (*nvml_procs_fn)(void *device, unsigned *count, void *infos);

/* Whether another process runs compute work on `device` (the CUDA index,
 * matched to NVML's by PCI bus id, as the two may order GPUs differently).
 * Without NVML, or when it fails, false: auto_select_gpus then just takes
 * the first devices. Called before setup, so our own process is not on
 * the device yet. */
static lt_status gpu_device_in_use(lt_ctx *ctx, int device, bool *out) {
    *out = false;
    const gpu_probe *p = gpu_discover();
    if (device < 0 || device >= p->count || device >= GPU_PROBE_DEVICES || !p->bus[device][0])
        return LT_OK;
    const char *bus = p->bus[device];
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!lib) {
        lt_log(ctx, LT_LOG_DEBUG, "device_in_use: NVML not available (%s); assuming free",
               dlerror());
        return LT_OK;
    }
    nvml_init_fn init = (nvml_init_fn)dlsym(lib, "nvmlInit_v2");
    nvml_shutdown_fn shut = (nvml_shutdown_fn)dlsym(lib, "nvmlShutdown");
    nvml_by_pci_fn by_pci = (nvml_by_pci_fn)dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    nvml_procs_fn procs = (nvml_procs_fn)dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (!procs) procs = (nvml_procs_fn)dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v2");
    if (!procs) procs = (nvml_procs_fn)dlsym(lib, "nvmlDeviceGetComputeRunningProcesses");
    if (init && shut && by_pci && procs && init() == 0) {
        void *dev = NULL;
        if (by_pci(bus, &dev) == 0) {
            unsigned n = 0; /* asking for no entries: the count alone, any struct version */
            int r = procs(dev, &n, NULL);
            *out = (r == 0 || r == 7) && n > 0;
        }
        shut();
    }
    dlclose(lib);
    return LT_OK;
}

/* ---- setup / teardown ------------------------------------------------------ */

static lt_status gpu_setup(lt_ctx *ctx, int device) {
    if (state_of(ctx)) {
        lt_set_error(ctx, "gpu accelerator: setup called twice on one context; call teardown first");
        return LT_ERR_STATE;
    }
    const gpu_probe *p = gpu_discover();
    int count = p->count;
    if (count <= 0) {
        lt_set_error(ctx, "gpu accelerator: %s", p->why);
        return LT_ERR_NOT_FOUND;
    }
    if (device < 0 || device >= count) {
        lt_set_error(ctx, "gpu accelerator: device %d does not exist; this machine has %d (0..%d)",
                     device, count, count - 1);
        return LT_ERR_NOT_FOUND;
    }
    gpu_discover_cuda_is_up();
    cudaError_t e = cudaSetDevice(device);
    size_t free_b = 0, total_b = 0;
    if (e == cudaSuccess) e = cudaFree(NULL); /* creates the context now, not in a kernel */
    if (e == cudaSuccess) e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess) {
        cudaGetLastError();
        lt_set_error(ctx, "gpu accelerator: device %d cannot be used: %s (%s); check with nvidia-smi "
                     "(another process in exclusive mode, or a fault)",
                     device, cudaGetErrorString(e), cudaGetErrorName(e));
        return LT_ERR_PLUGIN;
    }
    gpu_state *s = calloc(1, sizeof *s);
    if (!s) {
        lt_set_error(ctx, "gpu accelerator: out of memory creating its state");
        return LT_ERR_NOMEM;
    }
    s->device = device;
    s->serial = atomic_fetch_add(&next_serial, 1);
    s->total = total_b;
    s->pending = LT_OK;
    pthread_mutex_init(&s->lock, NULL);
    lt_ctx_set_state(ctx, s);
    /* The setup thread drives the replica: its slot (scratch, cuBLAS
     * handle) now, so its first kernels allocate nothing. */
    gpu_thread *th = gpu_enter(ctx);
    if (!th || !gpu_blas(ctx, th)) {
        lt_status st = gpu_synchronize_impl(ctx); /* moves the parked reason into ctx */
        gpu_threads_release(s);
        pthread_mutex_destroy(&s->lock);
        free(s);
        lt_ctx_set_state(ctx, NULL);
        return st != LT_OK ? st : LT_ERR_PLUGIN;
    }
    char name[320];
    gpu_device_name(ctx, device, name, sizeof name);
    lt_log(ctx, LT_LOG_DEBUG, "%s: %.1f GiB, %.1f GiB free", name, (double)total_b / (1 << 30),
           (double)free_b / (1 << 30));
    return LT_OK;
}

static lt_status gpu_teardown(lt_ctx *ctx) {
    gpu_state *s = state_of(ctx);
    if (!s) return LT_OK;
    if (cudaSetDevice(s->device) == cudaSuccess) cudaDeviceSynchronize();
    cudaGetLastError();
    gpu_threads_release(s);
    uint64_t live = atomic_load(&s->allocated);
    if (live)
        lt_log(ctx, LT_LOG_WARN, "teardown with %llu bytes still allocated (leak)",
               (unsigned long long)live);
    gpu_blocks_release(s);
    pthread_mutex_destroy(&s->lock);
    free(s);
    lt_ctx_set_state(ctx, NULL);
    return LT_OK;
}

static lt_status gpu_synchronize(lt_ctx *ctx) { return gpu_synchronize_impl(ctx); }

/* ---- kernels ---------------------------------------------------------------- */

static const lt_kernels gpu_kernel_table = {
    .struct_size = sizeof(lt_kernels),
    .gemm = gpu_gemm,
    .fill = gpu_fill,
    .axpby = gpu_axpby,
    .add_bias = gpu_add_bias,
    .sum_rows = gpu_sum_rows,
    .act_fwd = gpu_act_fwd,
    .act_bwd = gpu_act_bwd,
    .dropout_fwd = gpu_dropout_fwd,
    .dropout_bwd = gpu_dropout_bwd,
    .xent_fwd = gpu_xent_fwd,
    .xent_bwd = gpu_xent_bwd,
    .mse_fwd = gpu_mse_fwd,
    .mse_bwd = gpu_mse_bwd,
    .count_correct = gpu_count_correct,
    .cast = gpu_cast,
    .sumsq = gpu_sumsq,
    .all_finite = gpu_all_finite,
    .sgd_step = gpu_sgd_step,
    .adamw_step = gpu_adamw_step,
    .rand_fill = gpu_rand_fill,
    .im2col = gpu_im2col,
    .col2im = gpu_col2im,
    .max_pool_fwd = gpu_max_pool_fwd,
    .max_pool_bwd = gpu_max_pool_bwd,
    .clamp = gpu_clamp,
    .quantize_u8 = gpu_quantize_u8,
    .dequantize_u8 = gpu_dequantize_u8,
    .qadam_step = gpu_qadam_step,
};

static lt_status gpu_get_kernels(lt_ctx *ctx, const lt_kernels **out) {
    (void)ctx;
    *out = &gpu_kernel_table;
    return LT_OK;
}

/* ---- descriptor ------------------------------------------------------------- */

static const lt_accelerator_desc gpu_desc = {
    LT_HEADER(LT_KIND_ACCELERATOR, lt_accelerator_desc, "gpu", NULL, "1.0.0",
              "NVIDIA GPU: CUDA kernels and cuBLAS GEMM, per-thread default streams", NULL, NULL),
    .is_available = gpu_is_available,
    .device_count = gpu_device_count,
    .setup = gpu_setup,
    .teardown = gpu_teardown,
    .alloc = gpu_alloc,
    .free = gpu_free,
    .alloc_host = gpu_alloc_host,
    .free_host = gpu_free_host,
    .copy = gpu_copy,
    .synchronize = gpu_synchronize,
    .get_kernels = gpu_get_kernels,
    .memory_stats = gpu_memory_stats,
    .device_in_use = gpu_device_in_use,
    .device_name = gpu_device_name,
    .memory_is_host = gpu_memory_is_host,
};

LT_PLUGIN_EXPORT(&gpu_desc.hdr)
