/* bagua's bytegrad (bytegrad.h). */
#include "bytegrad.h"

#include <string.h>

static size_t round8(size_t x) { return (x + 7) & ~(size_t)7; }

/* Slice p: elements [lo, hi). */
static void slice_of(const bytegrad *b, int p, size_t *lo, size_t *hi) {
    *lo = (size_t)p * b->slice;
    if (*lo > b->count) *lo = b->count;
    *hi = *lo + b->slice < b->count ? *lo + b->slice : b->count;
}

/* A compressed slice: its chunks' min/max (f32 pairs), then the bytes. */
static float *minmax_of(uint8_t *slot) { return (float *)slot; }
static uint8_t *q_of(const bytegrad *b, uint8_t *slot) {
    size_t chunks = (b->slice + (size_t)b->chunk - 1) / (size_t)b->chunk;
    return slot + 8 * chunks;
}

lt_status bytegrad_setup(lt_ctx *ctx, bytegrad *b, lt_run *run, size_t count, lt_dtype dtype,
                         int64_t chunk) {
    const lt_kernels *k = lt_run_kernels(run);
    if (!LT_KERNELS_HAS(k, quantize_u8) || !LT_KERNELS_HAS(k, dequantize_u8)) {
        lt_set_error(ctx, "strategy.algorithm = bytegrad needs the accelerator's quantize_u8 and dequantize_u8 kernels (ABI 1.4), which it lacks; use gradient_allreduce");
        return LT_ERR_UNSUPPORTED;
    }
    const lt_world *w = lt_run_world(run);
    memset(b, 0, sizeof *b);
    b->world = w->world_size;
    b->rank = w->global_rank;
    b->count = count;
    b->dtype = dtype;
    b->chunk = chunk;
    b->slice = (count + (size_t)b->world - 1) / (size_t)b->world;
    size_t chunks = (b->slice + (size_t)chunk - 1) / (size_t)chunk;
    b->stride = round8(8 * chunks + b->slice);
    size_t all = b->stride * (size_t)b->world;
    LT_CHECK(lt_run_alloc(run, all, (void **)&b->send));
    LT_CHECK(lt_run_alloc(run, all, (void **)&b->recv));
    LT_CHECK(lt_run_alloc(run, all, (void **)&b->gathered));
    /* all-to-all: world - 1 slices out; all-gather: this rank's slice to each other rank */
    b->wire_bytes = 2 * (uint64_t)(b->world - 1) * b->stride;
    return LT_OK;
}

void bytegrad_free(bytegrad *b, lt_run *run) {
    if (b->send) lt_run_free(run, b->send);
    if (b->recv) lt_run_free(run, b->recv);
    if (b->gathered) lt_run_free(run, b->gathered);
    b->send = b->recv = b->gathered = NULL;
}

static lt_status exchange(lt_ctx *ctx, bytegrad *b, lt_pg *pg) {
    enum { MAX_PEERS = 1024 };
    lt_work *works[2 * MAX_PEERS];
    int n = 0;
    lt_status st = LT_OK;
    if (b->world > MAX_PEERS) {
        lt_set_error(ctx, "bytegrad: %d ranks, more than the %d it exchanges with at once", b->world, MAX_PEERS);
        return LT_ERR_UNSUPPORTED;
    }
    /* Every receive before any send: gloo sends a message's bytes only
     * once the peer's "receive posted" notice came in, and that notice
     * queues behind this rank's own data on the same stream, so sends
     * posted first make the two directions of a link take turns (lpd.c). */
    for (int p = 0; p < b->world && st == LT_OK; p++) {
        if (p == b->rank) continue;
        st = lt_pg_recv(pg, b->recv + (size_t)p * b->stride, b->stride, LT_U8, p, b->round, &works[n]);
        if (st == LT_OK) n++;
    }
    for (int p = 0; p < b->world && st == LT_OK; p++) {
        if (p == b->rank) continue;
        st = lt_pg_send(pg, b->send + (size_t)p * b->stride, b->stride, LT_U8, p, b->round, &works[n]);
        if (st == LT_OK) n++;
    }
    for (int i = 0; i < n; i++) {
        lt_status s = lt_work_wait(works[i]);
        if (st == LT_OK) st = s;
    }
    if (st != LT_OK) lt_set_error(ctx, "bytegrad: exchanging compressed gradients: %s", lt_pg_error(pg));
    return st;
}

lt_status bytegrad_reduce(lt_ctx *ctx, bytegrad *b, lt_run *run, lt_pg *pg, void *grads) {
    const lt_kernels *k = lt_run_kernels(run);
    lt_ctx *kc = lt_run_kernel_ctx(run);
    size_t es = lt_dtype_size(b->dtype), lo, hi;
    /* 1. every slice of this rank's gradient, compressed */
    for (int p = 0; p < b->world; p++) {
        slice_of(b, p, &lo, &hi);
        uint8_t *slot = b->send + (size_t)p * b->stride;
        k->quantize_u8(kc, b->dtype, (char *)grads + lo * es, (int64_t)(hi - lo), b->chunk, q_of(b, slot), minmax_of(slot));
    }
    LT_CHECK(lt_run_synchronize(run));
    /* 2. all-to-all: slice `rank` from every rank (this rank's own stays in send) */
    LT_CHECK(exchange(ctx, b, pg));
    /* 3. decode and average this rank's slice, compress it again */
    slice_of(b, b->rank, &lo, &hi);
    void *mine = (char *)grads + lo * es;
    int64_t len = (int64_t)(hi - lo);
    for (int p = 0; p < b->world; p++) {
        uint8_t *slot = (p == b->rank ? b->send : b->recv) + (size_t)p * b->stride;
        k->dequantize_u8(kc, b->dtype, q_of(b, slot), minmax_of(slot), len, b->chunk, mine, p == 0 ? 0.0 : 1.0);
    }
    k->axpby(kc, b->dtype, len, 1.0 / b->world, mine, 0.0, mine);
    k->quantize_u8(kc, b->dtype, mine, len, b->chunk, q_of(b, b->send), minmax_of(b->send));
    LT_CHECK(lt_run_synchronize(run));
    /* 4. every averaged slice to every rank, decoded alike everywhere */
    lt_work *w = NULL;
    lt_status st = lt_pg_allgather(pg, b->send, b->gathered, b->stride, LT_U8, &w);
    if (st == LT_OK) st = lt_work_wait(w);
    if (st != LT_OK) {
        lt_set_error(ctx, "bytegrad: gathering the averaged slices: %s", lt_pg_error(pg));
        return st;
    }
    for (int p = 0; p < b->world; p++) {
        slice_of(b, p, &lo, &hi);
        uint8_t *slot = b->gathered + (size_t)p * b->stride;
        k->dequantize_u8(kc, b->dtype, q_of(b, slot), minmax_of(slot), (int64_t)(hi - lo), b->chunk,
                         (char *)grads + lo * es, 0.0);
    }
    b->round++;
    return lt_run_synchronize(run);
}
