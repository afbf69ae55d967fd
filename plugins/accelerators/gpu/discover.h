/* Device discovery without initialising CUDA in the calling process.
 *
 * Why: is_available and device_count run in the launching process, which
 * ddp_spawn then forks into its workers; CUDA cannot be used in a child
 * forked after the parent initialised it (every call would fail with an
 * initialisation error). So discovery runs the CUDA runtime in a
 * short-lived forked child of its own and reads the answers back through a
 * pipe; the calling process stays CUDA-free until setup. The answer is
 * cached (devices do not come and go during a run), and a process whose
 * CUDA is already up (setup was called: gpu_discover_cuda_is_up) asks the
 * runtime directly. */
#ifndef LT_GPU_DISCOVER_H
#define LT_GPU_DISCOVER_H

#include <stdbool.h>

#define GPU_PROBE_DEVICES 64

typedef struct gpu_probe {
    int count;                 /* usable devices; 0 with `why` set */
    char why[512];             /* "" when count > 0 */
    char name[GPU_PROBE_DEVICES][256]; /* cudaDeviceProp.name */
    char bus[GPU_PROBE_DEVICES][32];   /* PCI bus id, for NVML */
} gpu_probe;

/* The (cached) answer; never NULL. */
const gpu_probe *gpu_discover(void);
/* Called by setup once CUDA runs in this process. */
void gpu_discover_cuda_is_up(void);

#endif
