/* bagua's low_precision_decentralized: decentralized SGD on a ring where
 * ranks exchange only 8-bit differences (Bagua's algorithm, after Tang et
 * al., "Communication Compression for Decentralized Training", 2018).
 *
 * Every rank r keeps x_r, its parameters as its neighbours know them, and
 * x_left, x_right, its neighbours' as it knows them; all start at rank 0's
 * parameters. Each communication round:
 *   1. before the optimizer step, the parameters become the ring average
 *      (x_left + x_r + x_right) / 3 (with 2 ranks, (x_peer + x_r) / 2);
 *   2. the optimizer steps from there;
 *   3. after it, the difference z = params - x_r is compressed (MinMaxUInt8,
 *      compression_chunk elements per min/max) and decoded again, and
 *      x_r += Q(z); the parameters become x_r, so this rank holds exactly
 *      what its neighbours will reconstruct;
 *   4. Q(z) goes to both neighbours, and their Q(z)s come back and are
 *      added to x_left and x_right.
 * Each neighbour receives one byte per parameter (plus 8 bytes per chunk)
 * per round. Between rounds (communication_interval > 1) the optimizer
 * steps locally and the next difference carries all of it.
 *
 * The exchange in 4 posts both receives before either send, so the two
 * directions of each link carry their messages at the same time. With
 * gloo, a send's bytes leave only once the peer's "receive posted"
 * notice has come in, and that notice travels on the same TCP stream as
 * this rank's own data: posted after a send, it waited behind the whole
 * message, so the neighbour's send started only when this rank's had
 * crossed the link and the round took two message times (on a 200 Mbit/s
 * link, 2 ranks: about 48 ms per round instead of 26). */
#include <string.h>
#include "bagua_internal.h"

static size_t round8(size_t x) { return (x + 7) & ~(size_t)7; }

lt_status lpd_setup(lt_ctx *ctx, lt_run *run, bagua *b) {
    const lt_kernels *k = lt_run_kernels(run);
    if (!LT_KERNELS_HAS(k, quantize_u8) || !LT_KERNELS_HAS(k, dequantize_u8)) {
        lt_set_error(ctx, "strategy.algorithm = low_precision_decentralized needs the accelerator's quantize_u8 and "
                     "dequantize_u8 kernels (ABI 1.4), which it lacks; use decentralized");
        return LT_ERR_UNSUPPORTED;
    }
    const lt_world *w = lt_run_world(run);
    if (w->world_size < 2) {
        lt_set_error(ctx, "strategy.algorithm = low_precision_decentralized needs at least 2 ranks, not %d",
                     (int)w->world_size);
        return LT_ERR_INVALID;
    }
    lpd_state *l = &b->lpd;
    l->left = (w->global_rank + w->world_size - 1) % w->world_size;
    l->right = (w->global_rank + 1) % w->world_size;
    size_t n = b->flat.count, bytes = n * lt_dtype_size(b->flat.param_dtype);
    l->chunks = (n + (size_t)b->chunk - 1) / (size_t)b->chunk;
    l->msg_bytes = round8(8 * l->chunks + n);
    LT_CHECK(lt_run_alloc(run, bytes, &l->mine));
    LT_CHECK(lt_run_alloc(run, bytes, &l->left_x));
    LT_CHECK(lt_run_alloc(run, bytes, &l->diff));
    LT_CHECK(lt_run_alloc(run, l->msg_bytes, (void **)&l->send));
    LT_CHECK(lt_run_alloc(run, l->msg_bytes, (void **)&l->recv_l));
    if (l->right != l->left) {
        LT_CHECK(lt_run_alloc(run, bytes, &l->right_x));
        LT_CHECK(lt_run_alloc(run, l->msg_bytes, (void **)&l->recv_r));
    }
    /* configure_ddp left rank 0's parameters everywhere: every copy starts there */
    const lt_kernels *kk = lt_run_kernels(run);
    lt_ctx *kc = lt_run_kernel_ctx(run);
    lt_dtype t = b->flat.param_dtype;
    kk->axpby(kc, t, (int64_t)n, 1.0, b->flat.params, 0.0, l->mine);
    kk->axpby(kc, t, (int64_t)n, 1.0, b->flat.params, 0.0, l->left_x);
    if (l->right_x) kk->axpby(kc, t, (int64_t)n, 1.0, b->flat.params, 0.0, l->right_x);
    return lt_run_synchronize(run);
}

void lpd_free(lt_run *run, bagua *b) {
    lpd_state *l = &b->lpd;
    void *bufs[] = {l->mine, l->left_x, l->right_x, l->diff, l->send, l->recv_l, l->recv_r};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) lt_run_free(run, bufs[i]);
    memset(l, 0, sizeof *l);
}

/* Whether the step under way (b->steps counts finished ones) ends a round. */
static bool round_step(const bagua *b) { return (b->steps + 1) % b->interval == 0; }

lt_status lpd_before_step(lt_ctx *ctx, lt_run *run, bagua *b) {
    (void)ctx;
    if (!round_step(b)) return LT_OK;
    lpd_state *l = &b->lpd;
    const lt_kernels *k = lt_run_kernels(run);
    lt_ctx *kc = lt_run_kernel_ctx(run);
    int64_t n = (int64_t)b->flat.count;
    lt_dtype t = b->flat.param_dtype;
    /* The round starts from the published x_r, not from the local steps
     * since: those are in params - x_r and go out as this round's
     * difference; x_r itself is what the neighbours average with. */
    if (l->right_x) {
        k->axpby(kc, t, n, 1.0 / 3, l->left_x, 0.0, l->diff);
        k->axpby(kc, t, n, 1.0 / 3, l->right_x, 1.0, l->diff);
        k->axpby(kc, t, n, -2.0 / 3, l->mine, 1.0, l->diff); /* diff = avg - x_r */
    } else {
        k->axpby(kc, t, n, 0.5, l->left_x, 0.0, l->diff);
        k->axpby(kc, t, n, -0.5, l->mine, 1.0, l->diff);
    }
    k->axpby(kc, t, n, 1.0, l->diff, 1.0, b->flat.params); /* params += avg - x_r */
    return lt_run_synchronize(run);
}

/* Receives first, then sends (see the header: posted the other way round,
 * the neighbours' sends wait for this rank's whole message to cross). */
static lt_status exchange(lt_ctx *ctx, lpd_state *l, lt_pg *pg, uint32_t tag) {
    lt_work *w[4] = {NULL, NULL, NULL, NULL};
    int n = 0;
    bool two = l->right != l->left;
    lt_status st = lt_pg_recv(pg, l->recv_l, l->msg_bytes, LT_U8, l->left, tag, &w[n]);
    if (st == LT_OK) n++;
    if (st == LT_OK && two) {
        st = lt_pg_recv(pg, l->recv_r, l->msg_bytes, LT_U8, l->right, tag, &w[n]);
        if (st == LT_OK) n++;
    }
    if (st == LT_OK) {
        st = lt_pg_send(pg, l->send, l->msg_bytes, LT_U8, l->left, tag, &w[n]);
        if (st == LT_OK) n++;
    }
    if (st == LT_OK && two) {
        st = lt_pg_send(pg, l->send, l->msg_bytes, LT_U8, l->right, tag, &w[n]);
        if (st == LT_OK) n++;
    }
    for (int i = 0; i < n; i++) {
        lt_status s = lt_work_wait(w[i]);
        if (st == LT_OK) st = s;
    }
    if (st != LT_OK)
        lt_set_error(ctx, "bagua low_precision_decentralized: exchanging differences with ranks %d and %d: %s", l->left,
                     l->right, lt_pg_error(pg));
    return st;
}

lt_status lpd_after_step(lt_ctx *ctx, lt_run *run, bagua *b) {
    if (b->steps % b->interval) return LT_OK; /* b->steps already counts this step */
    lpd_state *l = &b->lpd;
    const lt_kernels *k = lt_run_kernels(run);
    lt_ctx *kc = lt_run_kernel_ctx(run);
    int64_t n = (int64_t)b->flat.count;
    lt_dtype t = b->flat.param_dtype;
    float *minmax = (float *)l->send;
    uint8_t *q = l->send + 8 * l->chunks;
    k->axpby(kc, t, n, 1.0, b->flat.params, 0.0, l->diff);
    k->axpby(kc, t, n, -1.0, l->mine, 1.0, l->diff); /* z = params - x_r */
    k->quantize_u8(kc, t, l->diff, n, b->chunk, q, minmax);
    k->dequantize_u8(kc, t, q, minmax, n, b->chunk, l->mine, 1.0); /* x_r += Q(z) */
    k->axpby(kc, t, n, 1.0, l->mine, 0.0, b->flat.params);
    LT_CHECK(lt_run_synchronize(run));
    lt_pg *pg;
    LT_CHECK(bagua_group(ctx, run, &pg));
    LT_CHECK(exchange(ctx, l, pg, (uint32_t)(b->rounds & 0x7FFFFFFF)));
    k->dequantize_u8(kc, t, l->recv_l + 8 * l->chunks, (const float *)l->recv_l, n, b->chunk, l->left_x, 1.0);
    if (l->right_x)
        k->dequantize_u8(kc, t, l->recv_r + 8 * l->chunks, (const float *)l->recv_r, n, b->chunk, l->right_x, 1.0);
    b->rounds++;
    lt_run_params_changed(run);
    return lt_run_synchronize(run);
}
