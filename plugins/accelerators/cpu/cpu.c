/* The cpu accelerator: descriptor, device hooks, memory and the deferred
 * kernel-error path. The kernels live in the other files of this folder. */
#include <cblas.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cpu_internal.h"

/* Every device block starts with this many bytes holding its size, so free()
 * can keep memory_stats exact without a side table; 64 keeps the payload on
 * the cache-line (and AVX-512) alignment the ABI promises. */
#define CPU_ALIGN 64u

static cpu_state *state_of(lt_ctx *ctx) { return (cpu_state *)lt_ctx_state(ctx); }

/* ---- deferred kernel errors ---------------------------------------------- */

void cpu_fail(lt_ctx *ctx, lt_status code, const char *fmt, ...) {
    cpu_state *s = state_of(ctx);
    char msg[sizeof s->pending_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!s) { /* a kernel before setup: nowhere to park it, say it now */
        lt_set_error(ctx, "%s", msg);
        return;
    }
    pthread_mutex_lock(&s->err_lock);
    if (s->pending == LT_OK) {
        s->pending = code;
        memcpy(s->pending_msg, msg, sizeof msg);
    }
    pthread_mutex_unlock(&s->err_lock);
}

void cpu_bad_dtype(lt_ctx *ctx, const char *kernel, lt_dtype t, const char *takes) {
    const char *name = lt_dtype_name(t);
    cpu_fail(ctx, LT_ERR_UNSUPPORTED, "cpu %s: dtype %s (%d) is not supported; it takes %s",
             kernel, name ? name : "unknown", (int)t, takes);
}

lt_status cpu_take_error(lt_ctx *ctx) {
    cpu_state *s = state_of(ctx);
    if (!s) return LT_OK;
    pthread_mutex_lock(&s->err_lock);
    lt_status code = s->pending;
    if (code != LT_OK) lt_set_error(ctx, "%s", s->pending_msg);
    s->pending = LT_OK;
    s->pending_msg[0] = 0;
    pthread_mutex_unlock(&s->err_lock);
    return code;
}

/* ---- device hooks --------------------------------------------------------- */

static lt_status cpu_is_available(lt_ctx *ctx, bool *out) {
    (void)ctx;
    *out = true;
    return LT_OK;
}

/* Device memory is host memory: backends read the buffers directly. */
static lt_status cpu_memory_is_host(lt_ctx *ctx, bool *out) {
    (void)ctx;
    *out = true;
    return LT_OK;
}

static lt_status cpu_device_count(lt_ctx *ctx, int *out) {
    (void)ctx;
    *out = 1;
    return LT_OK;
}

/* The names each string parameter takes, judged before anything else
 * (check_params, and setup for a trainer-less caller); what the CPU can run
 * is setup's to judge. */
static lt_status check_one_of(lt_ctx *ctx, const char *key, const char *def,
                              const char *const *names, const char *list) {
    const char *v = lt_param_str(ctx, key, def);
    for (; *names; names++)
        if (!strcmp(v, *names)) return LT_OK;
    lt_set_error(ctx, "accelerator.%s = '%s': use %s", key, v, list);
    return LT_ERR_INVALID;
}

static lt_status cpu_check_params(lt_ctx *ctx) {
    static const char *const gemm[] = {"auto", "openblas", NULL};
    static const char *const isa[] = {"auto", "avx512", "avx2", "generic", NULL};
    static const char *const bf16[] = {"auto", "widen", "native", "emulated", NULL};
    LT_CHECK(check_one_of(ctx, "gemm", "auto", gemm, "auto, openblas"));
    LT_CHECK(check_one_of(ctx, "isa", "auto", isa, "auto, avx512, avx2, generic"));
    return check_one_of(ctx, "bf16_gemm", "auto", bf16, "auto, widen, native, emulated");
}

/* The f32 GEMM path from the isa and gemm parameters: lt's kernels for the
 * ISA asked for (auto: the widest this CPU runs), or NULL for OpenBLAS
 * only (isa=generic, gemm=openblas, or a CPU with neither). An ISA the CPU
 * lacks is refused rather than quietly run on something else, so a
 * benchmark never measures another path than the one it names. */
static lt_status choose_sgemm(lt_ctx *ctx, lt_sgemm_fn *fn, const char **path) {
    static const char *const avx512_path =
        "lt's AVX-512 kernels where a dimension is <= 128, else OpenBLAS";
    static const char *const avx2_path =
        "lt's AVX2+FMA kernels where m or n is below 16 (a thin layer) and, while OpenBLAS "
        "runs one thread, on the forward and gradient shapes with a dimension <= 128 where "
        "they measured faster and on those with none, else OpenBLAS";
    const char *gemm = lt_param_str(ctx, "gemm", "auto");
    const char *isa = lt_param_str(ctx, "isa", "auto");
    bool has512 = lt_sgemm_avx512_usable(), has2 = lt_sgemm_avx2_usable();
    const char *cpu_has = has512 ? "AVX-512 and AVX2+FMA" : has2 ? "AVX2+FMA, no AVX-512"
                                                                 : "neither AVX-512 nor AVX2+FMA";
    *fn = NULL;
    *path = NULL;
    if (strcmp(isa, "auto") == 0) {
        if (has512) *fn = lt_sgemm_avx512, *path = avx512_path;
        else if (has2) *fn = lt_sgemm_avx2, *path = avx2_path;
    } else if (strcmp(isa, "avx512") == 0 || strcmp(isa, "avx2") == 0) {
        bool is512 = isa[3] == '5';
        if (!(is512 ? has512 : has2)) {
            lt_set_error(ctx, "cpu accelerator: isa=%s but this CPU has %s; set accelerator.isa "
                         "to auto or generic", isa, cpu_has);
            return LT_ERR_UNSUPPORTED;
        }
        *fn = is512 ? lt_sgemm_avx512 : lt_sgemm_avx2;
        *path = is512 ? avx512_path : avx2_path;
    } /* else generic (cpu_check_params judged the spelling) */
    if (strcmp(gemm, "openblas") == 0) *fn = NULL;
    return LT_OK;
}

/* bf16_gemm: which kernel a bf16 GEMM runs. auto widens (gemm_lowp.c):
 * the native dot-product kernel has not yet run on a CPU with AVX-512
 * BF16, only through SIMDe's emulation, so nothing picks it unasked until
 * it has been measured there (bench/lowp_gemm_bench --bf16-gemm native). */
static lt_status choose_bf16dp(lt_ctx *ctx, cpu_bf16dp_fn *fn, const char **path) {
    const char *v = lt_param_str(ctx, "bf16_gemm", "auto");
    *fn = NULL;
    *path = "widened to fp32 as they are packed or converted (gemm_lowp.c)";
    if (!strcmp(v, "auto") || !strcmp(v, "widen")) return LT_OK;
    if (!strcmp(v, "native")) {
        if (!cpu_bf16dp_native_usable()) {
            lt_set_error(ctx, "cpu accelerator: bf16_gemm=native needs AVX-512 F, BW, VL and BF16, "
                         "which this CPU lacks; set accelerator.bf16_gemm to auto");
            return LT_ERR_UNSUPPORTED;
        }
        *fn = cpu_bf16dp_native;
        *path = "AVX-512 BF16 dot products (vdpbf16ps, gemm_bf16dp.c)";
        return LT_OK;
    }
    *fn = cpu_bf16dp_emulated; /* emulated: cpu_check_params judged the spelling */
    *path = "the AVX-512 BF16 kernel emulated in portable C (SIMDe; slow, for tests)";
    return LT_OK;
}

/* Any non-negative index is accepted: every "device" of a cpu run is the same
 * host (dp on cpu sets up one context per replica thread). */
static lt_status cpu_setup(lt_ctx *ctx, int device) {
    if (device < 0) {
        lt_set_error(ctx, "cpu accelerator: device index %d is negative; use 0", device);
        return LT_ERR_INVALID;
    }
    if (state_of(ctx)) {
        lt_set_error(ctx,
                     "cpu accelerator: setup called twice on one context; call teardown first");
        return LT_ERR_STATE;
    }
    lt_status st = cpu_check_params(ctx);
    if (st != LT_OK) return st;
    lt_sgemm_fn sgemm;
    const char *path;
    st = choose_sgemm(ctx, &sgemm, &path);
    if (st != LT_OK) return st;
    cpu_bf16dp_fn bf16dp;
    const char *bf16_path;
    st = choose_bf16dp(ctx, &bf16dp, &bf16_path);
    if (st != LT_OK) return st;
    cpu_state *s = calloc(1, sizeof *s);
    if (!s) {
        lt_set_error(ctx, "cpu accelerator: out of memory creating its state");
        return LT_ERR_NOMEM;
    }
    pthread_mutex_init(&s->err_lock, NULL);
    s->pending = LT_OK;
    /* No scratch, no lt kernels: OpenBLAS still runs everything. */
    if (sgemm && lt_sgemm_scratch_init(&s->gemm_scratch)) s->sgemm = sgemm;
    lt_log(ctx, LT_LOG_DEBUG, "f32 gemm: %s",
           s->sgemm ? path : "OpenBLAS for every call");
    /* 0 leaves OpenBLAS as OPENBLAS_NUM_THREADS (or its own default) set it;
     * the launcher already shares cores among local ranks that way. */
    int64_t threads = lt_param_int(ctx, "num_threads", 0);
    if (threads > 0) openblas_set_num_threads(threads > 4096 ? 4096 : (int)threads);
    s->vec16 = strcmp(lt_param_str(ctx, "isa", "auto"), "generic") != 0 &&
               cpu_sgd_mixed_avx2_usable();
    s->bf16dp = bf16dp;
    lt_log(ctx, LT_LOG_DEBUG, "bf16 gemm: %s", bf16_path);
    s->device = device;
    s->thread = pthread_self();
    lt_status bst = cpu_bind_replicas(ctx, s, threads, lt_param_bool(ctx, "share_cores", false));
    if (bst != LT_OK) {
        pthread_mutex_destroy(&s->err_lock);
        lt_sgemm_scratch_free(&s->gemm_scratch);
        free(s);
        return bst;
    }
    lt_ctx_set_state(ctx, s);
    return LT_OK;
}

static lt_status cpu_teardown(lt_ctx *ctx) {
    cpu_state *s = state_of(ctx);
    if (!s) return LT_OK;
    cpu_unbind_replicas(s);
    uint64_t live = atomic_load(&s->allocated);
    if (live)
        lt_log(ctx, LT_LOG_WARN, "teardown with %llu bytes still allocated (leak)",
               (unsigned long long)live);
    pthread_mutex_destroy(&s->err_lock);
    lt_sgemm_scratch_free(&s->gemm_scratch);
    free(s->lowp.buf);
    free(s);
    lt_ctx_set_state(ctx, NULL);
    return LT_OK;
}

/* ---- memory ---------------------------------------------------------------- */

static void *aligned_block(size_t bytes) {
    if (bytes > SIZE_MAX - 2 * CPU_ALIGN) return NULL;
    /* header + payload, rounded up: aligned_alloc wants a multiple of the alignment */
    size_t total = (bytes + 2 * CPU_ALIGN - 1) & ~(size_t)(CPU_ALIGN - 1);
    return aligned_alloc(CPU_ALIGN, total);
}

static void track(cpu_state *s, uint64_t bytes) {
    uint64_t now = atomic_fetch_add(&s->allocated, bytes) + bytes;
    uint64_t peak = atomic_load(&s->peak);
    while (now > peak && !atomic_compare_exchange_weak(&s->peak, &peak, now)) {
    }
}

static lt_status cpu_alloc(lt_ctx *ctx, size_t bytes, void **out) {
    cpu_state *s = state_of(ctx);
    if (!s) {
        lt_set_error(ctx, "cpu accelerator: alloc before setup");
        return LT_ERR_STATE;
    }
    unsigned char *base = aligned_block(bytes);
    if (!base) {
        lt_set_error(ctx, "cpu accelerator: cannot allocate %zu bytes", bytes);
        return LT_ERR_NOMEM;
    }
    memcpy(base, &bytes, sizeof bytes);
    track(s, bytes);
    *out = base + CPU_ALIGN;
    return LT_OK;
}

static void cpu_free(lt_ctx *ctx, void *p) {
    if (!p) return;
    unsigned char *base = (unsigned char *)p - CPU_ALIGN;
    size_t bytes;
    memcpy(&bytes, base, sizeof bytes);
    cpu_state *s = state_of(ctx);
    if (s) atomic_fetch_sub(&s->allocated, bytes);
    free(base);
}

/* Host memory needs no pinning on cpu: plain aligned memory, not counted in
 * memory_stats (which covers alloc() only). */
static lt_status cpu_alloc_host(lt_ctx *ctx, size_t bytes, void **out) {
    void *p = NULL;
    if (bytes <= SIZE_MAX - CPU_ALIGN) {
        size_t total = (bytes + CPU_ALIGN - 1) & ~(size_t)(CPU_ALIGN - 1);
        p = aligned_alloc(CPU_ALIGN, total ? total : CPU_ALIGN);
    }
    if (!p) {
        lt_set_error(ctx, "cpu accelerator: cannot allocate %zu bytes of host memory", bytes);
        return LT_ERR_NOMEM;
    }
    *out = p;
    return LT_OK;
}

static void cpu_free_host(lt_ctx *ctx, void *p) {
    (void)ctx;
    free(p);
}

/* Host and device are one memory: every direction is a memcpy. memmove
 * because D2D copies inside one arena may overlap. */
static lt_status cpu_copy(lt_ctx *ctx, void *dst, const void *src, size_t bytes,
                          lt_copy_dir dir) {
    if (dir < LT_COPY_H2D || dir > LT_COPY_H2H) {
        lt_set_error(ctx, "cpu accelerator: copy direction %d is not one of lt_copy_dir", (int)dir);
        return LT_ERR_INVALID;
    }
    if (bytes && dst != src) memmove(dst, src, bytes);
    return LT_OK;
}

/* Kernels run synchronously on the calling thread, so there is nothing to
 * wait for; only errors they parked are reported. */
static lt_status cpu_synchronize(lt_ctx *ctx) { return cpu_take_error(ctx); }

static const lt_kernels cpu_kernel_table = {
    .struct_size = sizeof(lt_kernels),
    .gemm = cpu_gemm,
    .fill = cpu_fill,
    .axpby = cpu_axpby,
    .add_bias = cpu_add_bias,
    .sum_rows = cpu_sum_rows,
    .act_fwd = cpu_act_fwd,
    .act_bwd = cpu_act_bwd,
    .dropout_fwd = cpu_dropout_fwd,
    .dropout_bwd = cpu_dropout_bwd,
    .xent_fwd = cpu_xent_fwd,
    .xent_bwd = cpu_xent_bwd,
    .mse_fwd = cpu_mse_fwd,
    .mse_bwd = cpu_mse_bwd,
    .count_correct = cpu_count_correct,
    .cast = cpu_cast,
    .sumsq = cpu_sumsq,
    .all_finite = cpu_all_finite,
    .sgd_step = cpu_sgd_step,
    .adamw_step = cpu_adamw_step,
    .rand_fill = cpu_rand_fill,
    .im2col = cpu_im2col,
    .col2im = cpu_col2im,
    .max_pool_fwd = cpu_max_pool_fwd,
    .max_pool_bwd = cpu_max_pool_bwd,
    .clamp = cpu_clamp,
    .quantize_u8 = cpu_quantize_u8,
    .dequantize_u8 = cpu_dequantize_u8,
    .qadam_step = cpu_qadam_step,
    .sgd_step_mixed = cpu_sgd_step_mixed,
};

static lt_status cpu_get_kernels(lt_ctx *ctx, const lt_kernels **out) {
    (void)ctx;
    *out = &cpu_kernel_table;
    return LT_OK;
}

static lt_status cpu_memory_stats(lt_ctx *ctx, lt_memory_stats *out) {
    cpu_state *s = state_of(ctx);
    if (!s) {
        lt_set_error(ctx, "cpu accelerator: memory_stats before setup");
        return LT_ERR_STATE;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    out->allocated_bytes = atomic_load(&s->allocated);
    out->peak_bytes = atomic_load(&s->peak);
    out->total_bytes = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    return LT_OK;
}

/* ---- descriptor ----------------------------------------------------------- */

static const lt_param_spec cpu_params[] = {
    {"num_threads", LT_PARAM_INT, "0",
     "OpenBLAS threads for this worker; 0 keeps OPENBLAS_NUM_THREADS or OpenBLAS's default"},
    {"gemm", LT_PARAM_STRING, "auto",
     "auto (f32 GEMMs with a short dimension, such as the batch, run lt's kernels for the ISA "
     "the isa parameter picks; the rest OpenBLAS) | openblas (always OpenBLAS)"},
    {"isa", LT_PARAM_STRING, "auto",
     "lt's f32 GEMM kernels: auto (the widest this CPU runs: avx512, else avx2, which takes "
     "only thin layers) | avx512 | avx2 (an ISA the CPU lacks is an error at setup) | "
     "generic (OpenBLAS only, as gemm=openblas)"},
    {"bf16_gemm", LT_PARAM_STRING, "auto",
     "bf16 GEMMs: auto (= widen for now) | widen (operands widened to fp32 for lt's or "
     "OpenBLAS's f32 kernels) | native (AVX-512 BF16 dot products; an error on a CPU without "
     "them) | emulated (the native kernel in portable C via SIMDe: slow, for tests)"},
    {"share_cores", LT_PARAM_BOOL, "false",
     "dp on cpu: allow more replicas (trainer.devices) than this process has cores; they then "
     "share cores, replica i on core i modulo the count (false: more is an error)"},
    {NULL, 0, NULL, NULL},
};

static const lt_accelerator_desc cpu_desc = {
    LT_HEADER(LT_KIND_ACCELERATOR, lt_accelerator_desc, "cpu", NULL, "1.0.0",
              "CPU: OpenBLAS and AVX-512/AVX2 GEMM, vectorised elementwise kernels", cpu_params,
              NULL),
    .is_available = cpu_is_available,
    .device_count = cpu_device_count,
    .setup = cpu_setup,
    .teardown = cpu_teardown,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .alloc_host = cpu_alloc_host,
    .free_host = cpu_free_host,
    .copy = cpu_copy,
    .synchronize = cpu_synchronize,
    .get_kernels = cpu_get_kernels,
    .memory_stats = cpu_memory_stats,
    .memory_is_host = cpu_memory_is_host,
    .check_params = cpu_check_params,
};

LT_PLUGIN_EXPORT(&cpu_desc.hdr)
