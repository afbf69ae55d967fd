/* Each operation on a gloo context, with gloo's new (options-based) API only.
 *
 * Why only the new API: the old algorithm classes send through bound buffers,
 * whose first send pins the pair's SO_SNDBUF at that message's size (a tiny
 * first message leaves ~4.5 KB and 40 ms delayed-ACK stalls, MEASURED.md).
 * Unbound-buffer sends never set SO_SNDBUF, so the kernel autotunes it: with a
 * barrier as the very first op, the pairs' send buffers were at ~3.9 MB during
 * 25 MiB allreduces. So there is nothing to pre-size as long as nothing here
 * uses the old API.
 *
 * Buffers are used in place: allreduce, broadcast and in-place allgather copy
 * nothing beyond what gloo's ring itself stages. */
#include <cstring>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/types.h>

#include "gloo_group.h"
#include "gloo_reduce.h"

namespace ltgloo {
namespace {

/* Slot prefixes of our own point-to-point traffic, above the ones gloo's
 * collectives use (0x01..0x08 in gloo/types.h). */
constexpr uint8_t kReduceScatterSlotPrefix = 0x40;
constexpr uint8_t kP2pSlotPrefix = 0x41;

/* gloo's options are typed only to learn the element size; call f with an
 * unsigned integer of the dtype's size. */
template <typename F> void with_elem(size_t esz, F &&f) {
    switch (esz) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    default: f(uint64_t{}); break;
    }
}

void allreduce(Group &g, const std::shared_ptr<gloo::Context> &ctx, const Op &op) {
    ReduceFn fn = reduce_fn(op.dtype, op.redop);
    with_elem(lt_dtype_size(op.dtype), [&](auto z) {
        using T = decltype(z);
        gloo::AllreduceOptions o(ctx);
        o.setOutput(static_cast<T *>(op.buf), op.count); /* output doubles as input: in place */
        o.setReduceFunction(fn);
        o.setTag(op.wire_tag);
        o.setTimeout(g.timeout);
        gloo::allreduce(o);
    });
}

void broadcast(Group &g, const std::shared_ptr<gloo::Context> &ctx, const Op &op) {
    with_elem(lt_dtype_size(op.dtype), [&](auto z) {
        using T = decltype(z);
        gloo::BroadcastOptions o(ctx);
        o.setOutput(static_cast<T *>(op.buf), op.count);
        o.setRoot(op.peer);
        o.setTag(op.wire_tag);
        o.setTimeout(g.timeout);
        gloo::broadcast(o);
    });
}

void allgather(Group &g, const std::shared_ptr<gloo::Context> &ctx, const Op &op) {
    size_t bytes = op.count * lt_dtype_size(op.dtype);
    auto *mine = static_cast<uint8_t *>(op.buf) + (size_t)g.rank * bytes;
    with_elem(lt_dtype_size(op.dtype), [&](auto z) {
        using T = decltype(z);
        gloo::AllgatherOptions o(ctx);
        o.setOutput(static_cast<T *>(op.buf), op.count * (size_t)g.world);
        /* Already in place when send is this rank's block of recv. */
        if (op.send != mine) o.setInput(static_cast<T *>(const_cast<void *>(op.send)), op.count);
        o.setTag(op.wire_tag);
        o.setTimeout(g.timeout);
        gloo::allgather(o);
    });
}

/* gloo's new API has no reduce-scatter (only the old ReduceScatterHalvingDoubling
 * class, which we must not mix in), so this is a ring over unbound buffers:
 * in step s (0..world-2) rank r sends its running sum of block (r-s-1) to
 * r+1 and receives the running sum of block (r-s-2) from r-1, adding its own
 * input block; after world-1 steps it holds the full reduction of block r.
 * Bandwidth optimal (each rank sends (world-1)/world of the data, half of
 * allreduce); two scratch blocks, reused across calls. */
void reduce_scatter(Group &g, Worker &wk, const Op &op) {
    const size_t esz = lt_dtype_size(op.dtype), bytes = op.count * esz;
    const int n = g.world, r = g.rank;
    const auto *in = static_cast<const uint8_t *>(op.send);
    auto *out = static_cast<uint8_t *>(op.buf);
    ReduceFn fn = reduce_fn(op.dtype, op.redop);
    if (wk.scratch.size() < 2 * bytes) wk.scratch.resize(2 * bytes);
    uint8_t *acc[2] = {wk.scratch.data(), wk.scratch.data() + bytes};
    auto &ctx = wk.ctx;
    auto input = ctx->createUnboundBuffer(const_cast<uint8_t *>(in), bytes * (size_t)n);
    std::unique_ptr<gloo::transport::UnboundBuffer> accb[2] = {
        ctx->createUnboundBuffer(acc[0], bytes), ctx->createUnboundBuffer(acc[1], bytes)};
    const uint64_t slot = gloo::Slot::build(kReduceScatterSlotPrefix, op.wire_tag);
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    for (int s = 0; s < n - 1; s++) {
        const int send_block = ((r - s - 1) % n + n) % n, recv_block = ((r - s - 2) % n + 2 * n) % n;
        auto &rx = accb[s & 1];
        rx->recv(left, slot, 0, bytes);
        gloo::transport::UnboundBuffer *tx;
        if (s == 0) {
            tx = input.get();
            tx->send(right, slot, (size_t)send_block * bytes, bytes);
        } else {
            tx = accb[(s - 1) & 1].get();
            tx->send(right, slot, 0, bytes);
        }
        if (!rx->waitRecv(g.timeout) || !tx->waitSend(g.timeout))
            throw gloo::IoException("reduce_scatter was aborted");
        /* The last step lands straight in the output. */
        uint8_t *dst = s == n - 2 ? out : acc[s & 1];
        fn(dst, acc[s & 1], in + (size_t)recv_block * bytes, op.count);
    }
}

void barrier(Group &g, const std::shared_ptr<gloo::Context> &ctx, const Op &op) {
    gloo::BarrierOptions o(ctx);
    o.setTag(op.wire_tag);
    o.setTimeout(g.timeout);
    gloo::barrier(o);
}

/* A world of one needs no communication. */
void run_alone(const Op &op) {
    size_t bytes = op.count * lt_dtype_size(op.dtype);
    if ((op.kind == Kind::Allgather || op.kind == Kind::ReduceScatter) && op.send != op.buf)
        std::memmove(op.buf, op.send, bytes);
}

} // namespace

uint32_t wire_tag(uint64_t seq, const Op &op) {
    const bool p2p = op.kind == Kind::Send || op.kind == Kind::Recv;
    /* A send and its recv differ in kind and peer; only tag and size must agree. */
    uint64_t parts[] = {seq,
                        p2p ? 0u : (uint64_t)op.kind,
                        op.count * lt_dtype_size(op.dtype),
                        p2p ? 0u : (uint64_t)op.dtype,
                        p2p ? 0u : (uint64_t)op.redop,
                        p2p ? 0u : (uint64_t)(int64_t)op.peer,
                        p2p ? op.tag : 0u};
    uint64_t h = 0x6a09e667f3bcc909ull;
    for (uint64_t v : parts) { /* splitmix64 steps: every input bit reaches all 32 output bits */
        h += v + 0x9e3779b97f4a7c15ull;
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
        h ^= h >> 31;
    }
    return (uint32_t)(h ^ (h >> 32));
}

const char *kind_name(Kind k) {
    switch (k) {
    case Kind::Allreduce: return "allreduce";
    case Kind::Broadcast: return "broadcast";
    case Kind::Allgather: return "allgather";
    case Kind::ReduceScatter: return "reduce_scatter";
    case Kind::Barrier: return "barrier";
    case Kind::Send: return "send";
    case Kind::Recv: return "recv";
    }
    return "?";
}

void run_collective(Group &g, Worker &wk, const Op &op) {
    if (op.count == 0 && op.kind != Kind::Barrier) return;
    if (g.world == 1) {
        run_alone(op);
        return;
    }
    switch (op.kind) {
    case Kind::Allreduce: allreduce(g, wk.ctx, op); break;
    case Kind::Broadcast: broadcast(g, wk.ctx, op); break;
    case Kind::Allgather: allgather(g, wk.ctx, op); break;
    case Kind::ReduceScatter: reduce_scatter(g, wk, op); break;
    case Kind::Barrier: barrier(g, wk.ctx, op); break;
    case Kind::Send:
    case Kind::Recv: break; /* never queued */
    }
    if (op.redop == LT_AVG && (op.kind == Kind::Allreduce || op.kind == Kind::ReduceScatter))
        divide(op.buf, op.count, op.dtype, g.world);
}

void post_p2p(Group &g, Work &w) {
    const Op &op = w.op;
    size_t bytes = op.count * lt_dtype_size(op.dtype);
    void *ptr = op.kind == Kind::Send ? const_cast<void *>(op.send) : op.buf;
    w.ubuf = g.workers[0]->ctx->createUnboundBuffer(ptr, bytes);
    const uint64_t slot = gloo::Slot::build(kP2pSlotPrefix, op.wire_tag);
    if (op.kind == Kind::Send)
        w.ubuf->send(op.peer, slot, 0, bytes);
    else
        w.ubuf->recv(op.peer, slot, 0, bytes);
}

} // namespace ltgloo
