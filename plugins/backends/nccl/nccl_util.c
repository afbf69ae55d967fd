/* The nccl backend's small helpers: clocks, lt-to-NCCL type and op mapping,
 * NCCL errors, the device scope of a hook, and the group's spare events
 * (contracts in nccl_internal.h). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nccl_internal.h"

/* ---- small helpers ---- */

int64_t ltnccl_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void ltnccl_sleep_ns(long ns) {
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

int64_t ltnccl_deadline_after(int64_t ms) {
    if (ms < 0 || ms > (int64_t)1e12) return INT64_MAX;
    return ltnccl_now_ns() + ms * 1000000;
}

bool ltnccl_type(int t, ncclDataType_t *out) {
    ncclDataType_t d;
    switch (t) {
    case LT_F32: d = ncclFloat32; break;
    case LT_F64: d = ncclFloat64; break;
    case LT_F16: d = ncclFloat16; break;
    case LT_BF16: d = ncclBfloat16; break;
    case LT_I8: d = ncclInt8; break;
    case LT_U8: d = ncclUint8; break;
    case LT_I32: d = ncclInt32; break;
    case LT_I64: d = ncclInt64; break;
    default: return false;
    }
    if (out) *out = d;
    return true;
}

bool ltnccl_op(int op, ncclRedOp_t *out) {
    ncclRedOp_t o;
    switch (op) {
    case LT_SUM: o = ncclSum; break;
    case LT_AVG: o = ncclAvg; break;
    case LT_MIN: o = ncclMin; break;
    case LT_MAX: o = ncclMax; break;
    default: return false;
    }
    if (out) *out = o;
    return true;
}

/* What an NCCL failure means for the caller. */
lt_status ltnccl_status_of(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return LT_OK;
    case ncclRemoteError:
    case ncclSystemError: return LT_ERR_IO;
    case ncclInvalidArgument:
    case ncclInvalidUsage: return LT_ERR_INVALID;
    default: return LT_ERR_PLUGIN;
    }
}

/* "NCCL error: <what the code means> (<NCCL's last message>)". */
void ltnccl_describe(char *out, size_t len, ncclResult_t r, ncclComm_t comm) {
    const char *last = ncclGetLastError(comm);
    if (last && *last)
        snprintf(out, len, "NCCL error: %s (%s)", ncclGetErrorString(r), last);
    else
        snprintf(out, len, "NCCL error: %s", ncclGetErrorString(r));
}

cudaError_t ltnccl_dev_enter(dev_scope *s, int device) {
    s->changed = false;
    s->prev = device;
    cudaError_t e = cudaGetDevice(&s->prev);
    if (e != cudaSuccess) return e;
    if (s->prev == device) return cudaSuccess;
    e = cudaSetDevice(device);
    if (e == cudaSuccess) s->changed = true;
    return e;
}

void ltnccl_dev_leave(dev_scope *s) {
    if (s->changed) cudaSetDevice(s->prev);
    s->changed = false;
}

/* ---- events ---- */

/* Caller holds g->mu. */
cudaEvent_t ltnccl_event_take(struct lt_backend_group *g) {
    if (g->npool) return g->pool[--g->npool];
    cudaEvent_t e = NULL;
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) return NULL;
    return e;
}

/* Caller holds g->mu. */
void ltnccl_event_give(struct lt_backend_group *g, cudaEvent_t e) {
    if (!e) return;
    if (!g->released && g->npool < 64) {
        if (g->npool == g->cap) {
            size_t cap = g->cap ? g->cap * 2 : 16;
            cudaEvent_t *p = realloc(g->pool, cap * sizeof *p);
            if (p) {
                g->pool = p;
                g->cap = cap;
            }
        }
        if (g->npool < g->cap) {
            g->pool[g->npool++] = e;
            return;
        }
    }
    cudaEventDestroy(e);
}
