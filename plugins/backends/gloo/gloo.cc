/* The gloo backend's C ABI (lt/backend.h): argument checks, handles, and a
 * wall that keeps every C++ exception inside the plugin. The work happens in
 * gloo_group.cc (threads, queues, abort) and gloo_ops.cc (the collectives). */
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "gloo_group.h"
#include "gloo_hooks.h"
#include "gloo_reduce.h"

/* The opaque handles of lt/backend.h. Work handles keep their group alive, so
 * waiting on or freeing a work after destroy stays safe. */
struct lt_backend_group {
    std::shared_ptr<ltgloo::Group> g;
};
struct lt_backend_work {
    std::shared_ptr<ltgloo::Group> g;
    std::shared_ptr<ltgloo::Work> w;
};

namespace {

using ltgloo::Kind;
using ltgloo::Op;

/* Runs f, turning any escaping exception into a status and message. */
template <typename F> lt_status guarded(lt_ctx *ctx, const char *what, F &&f) {
    try {
        return f();
    } catch (const std::bad_alloc &) {
        lt_set_error(ctx, "gloo %s: out of memory", what);
        return LT_ERR_NOMEM;
    } catch (const std::exception &e) {
        lt_set_error(ctx, "gloo %s: %s", what, e.what());
        return LT_ERR_PLUGIN;
    } catch (...) {
        lt_set_error(ctx, "gloo %s: unknown exception", what);
        return LT_ERR_PLUGIN;
    }
}

/* Fields of lt_pg_options the caller's struct is big enough to hold. */
#define OPT_HAS(o, f) (offsetof(lt_pg_options, f) + sizeof((o)->f) <= (o)->struct_size)

/* The C caller may pass any int as an enum; in C++ merely loading an
 * out-of-range enum is undefined, so look at the bits first. */
template <typename E> int raw(const E &e) {
    static_assert(sizeof(E) == sizeof(int), "C enums are int-sized");
    int v;
    std::memcpy(&v, &e, sizeof v);
    return v;
}

bool valid_dtype(int t) { return t >= LT_F32 && t <= LT_I64; }
bool valid_redop(int op) { return op >= LT_SUM && op <= LT_MAX; }

lt_status check_dtype(lt_ctx *ctx, const char *what, int dtype) {
    if (valid_dtype(dtype)) return LT_OK;
    lt_set_error(ctx, "gloo %s: dtype %d is not one the gloo backend knows (f32 f64 f16 bf16 i8 u8 i32 i64)",
                 what, dtype);
    return LT_ERR_UNSUPPORTED;
}

lt_status check_reduce(lt_ctx *ctx, const char *what, int dtype, int op) {
    LT_CHECK(check_dtype(ctx, what, dtype));
    if (valid_redop(op) && ltgloo::reduce_fn((lt_dtype)dtype, (lt_redop)op)) return LT_OK;
    lt_set_error(ctx, "gloo %s: reduction op %d on %s is not supported (use sum, avg, min or max)",
                 what, op, lt_dtype_name((lt_dtype)dtype));
    return LT_ERR_UNSUPPORTED;
}

/* Every buffer of `blocks` x count elements must exist and fit in size_t. */
lt_status check_buf(lt_ctx *ctx, const char *what, const void *p, size_t count, lt_dtype dtype,
                    size_t blocks) {
    size_t esz = lt_dtype_size(dtype);
    if (count && (count > SIZE_MAX / esz / blocks)) {
        lt_set_error(ctx, "gloo %s: %zu elements of %s overflow the address space", what, count,
                     lt_dtype_name(dtype));
        return LT_ERR_INVALID;
    }
    if (count && !p) {
        lt_set_error(ctx, "gloo %s: NULL buffer for %zu elements", what, count);
        return LT_ERR_INVALID;
    }
    return LT_OK;
}

lt_status check_rank(lt_ctx *ctx, const char *what, const char *role, int r, const ltgloo::Group &g,
                     bool self_ok) {
    if (r >= 0 && r < g.world && (self_ok || r != g.rank)) return LT_OK;
    if (r == g.rank)
        lt_set_error(ctx, "gloo %s: rank %d cannot be its own %s", what, r, role);
    else
        lt_set_error(ctx, "gloo %s: %s %d is not a rank of group '%s' (0..%d)", what, role, r,
                     g.name.c_str(), g.world - 1);
    return LT_ERR_INVALID;
}

lt_status issue(lt_ctx *ctx, lt_backend_group *h, const Op &op, lt_backend_work **work) {
    auto *wh = new lt_backend_work{h->g, ltgloo::group_issue(h->g, op)};
    *work = wh;
    (void)ctx;
    return LT_OK;
}

lt_status check_handles(lt_ctx *ctx, const char *what, lt_backend_group *g, lt_backend_work **work) {
    if (g && work) return LT_OK;
    lt_set_error(ctx, "gloo %s: NULL %s", what, g ? "work pointer" : "group");
    return LT_ERR_INVALID;
}

} // namespace

extern "C" {

lt_status ltgloo_create(lt_ctx *ctx, lt_store *store, int rank, int world, const lt_pg_options *opt,
                        lt_backend_group **out) {
    return guarded(ctx, "create", [&]() -> lt_status {
        if (!store || !opt || !out || world < 1 || rank < 0 || rank >= world ||
            !OPT_HAS(opt, timeout_ms)) {
            lt_set_error(ctx, "gloo create: invalid arguments (rank %d of %d%s%s)", rank, world,
                         store ? "" : ", no store", opt ? "" : ", no options");
            return LT_ERR_INVALID;
        }
        lt_pg_options o{};
        o.struct_size = sizeof o;
        o.prefix = opt->prefix;
        o.timeout_ms = opt->timeout_ms;
        if (OPT_HAS(opt, mem_kind)) o.mem_kind = opt->mem_kind;
        if (OPT_HAS(opt, iface)) o.iface = opt->iface;
        if (OPT_HAS(opt, num_threads)) o.num_threads = opt->num_threads;
        if (OPT_HAS(opt, connect_timeout_ms)) o.connect_timeout_ms = opt->connect_timeout_ms;
        if (OPT_HAS(opt, main_address)) o.main_address = opt->main_address;
        if (o.mem_kind != LT_MEM_HOST) {
            lt_set_error(ctx, "gloo create: the gloo backend works on host memory only; device "
                              "buffers need a backend for that device (set strategy.process_group_backend)");
            return LT_ERR_UNSUPPORTED;
        }
        if (!o.prefix || !*o.prefix) {
            lt_set_error(ctx, "gloo create: options need a store key prefix unique to the group");
            return LT_ERR_INVALID;
        }
        std::shared_ptr<ltgloo::Group> g;
        std::string err;
        lt_status st = ltgloo::group_create(ctx, store, rank, world, &o, g, err);
        if (st != LT_OK) {
            lt_set_error(ctx, "%s", err.c_str());
            return st;
        }
        *out = new lt_backend_group{std::move(g)};
        return LT_OK;
    });
}

lt_status ltgloo_destroy(lt_ctx *ctx, lt_backend_group *g) {
    if (!g) return LT_OK;
    return guarded(ctx, "destroy", [&]() -> lt_status {
        ltgloo::group_stop(*g->g);
        delete g;
        return LT_OK;
    });
}

lt_status ltgloo_allreduce(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count, lt_dtype dtype,
                           lt_redop op, lt_backend_work **work) {
    return guarded(ctx, "allreduce", [&]() -> lt_status {
        LT_CHECK(check_handles(ctx, "allreduce", g, work));
        LT_CHECK(check_reduce(ctx, "allreduce", raw(dtype), raw(op)));
        LT_CHECK(check_buf(ctx, "allreduce", buf, count, dtype, 1));
        Op o;
        o.kind = Kind::Allreduce;
        o.buf = buf;
        o.count = count;
        o.dtype = dtype;
        o.redop = op;
        return issue(ctx, g, o, work);
    });
}

lt_status ltgloo_broadcast(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count, lt_dtype dtype,
                           int root, lt_backend_work **work) {
    return guarded(ctx, "broadcast", [&]() -> lt_status {
        LT_CHECK(check_handles(ctx, "broadcast", g, work));
        LT_CHECK(check_dtype(ctx, "broadcast", raw(dtype)));
        LT_CHECK(check_buf(ctx, "broadcast", buf, count, dtype, 1));
        LT_CHECK(check_rank(ctx, "broadcast", "root", root, *g->g, true));
        Op o;
        o.kind = Kind::Broadcast;
        o.buf = buf;
        o.count = count;
        o.dtype = dtype;
        o.peer = root;
        return issue(ctx, g, o, work);
    });
}

lt_status ltgloo_allgather(lt_ctx *ctx, lt_backend_group *g, const void *send, void *recv,
                           size_t count, lt_dtype dtype, lt_backend_work **work) {
    return guarded(ctx, "allgather", [&]() -> lt_status {
        LT_CHECK(check_handles(ctx, "allgather", g, work));
        LT_CHECK(check_dtype(ctx, "allgather", raw(dtype)));
        LT_CHECK(check_buf(ctx, "allgather", send, count, dtype, 1));
        LT_CHECK(check_buf(ctx, "allgather", recv, count, dtype, (size_t)g->g->world));
        Op o;
        o.kind = Kind::Allgather;
        o.send = send;
        o.buf = recv;
        o.count = count;
        o.dtype = dtype;
        return issue(ctx, g, o, work);
    });
}

lt_status ltgloo_reduce_scatter(lt_ctx *ctx, lt_backend_group *g, const void *send, void *recv,
                                size_t count, lt_dtype dtype, lt_redop op, lt_backend_work **work) {
    return guarded(ctx, "reduce_scatter", [&]() -> lt_status {
        LT_CHECK(check_handles(ctx, "reduce_scatter", g, work));
        LT_CHECK(check_reduce(ctx, "reduce_scatter", raw(dtype), raw(op)));
        LT_CHECK(check_buf(ctx, "reduce_scatter", send, count, dtype, (size_t)g->g->world));
        LT_CHECK(check_buf(ctx, "reduce_scatter", recv, count, dtype, 1));
        Op o;
        o.kind = Kind::ReduceScatter;
        o.send = send;
        o.buf = recv;
        o.count = count;
        o.dtype = dtype;
        o.redop = op;
        return issue(ctx, g, o, work);
    });
}

lt_status ltgloo_send(lt_ctx *ctx, lt_backend_group *g, const void *buf, size_t count,
                      lt_dtype dtype, int peer, uint32_t tag, lt_backend_work **work) {
    return guarded(ctx, "send", [&]() -> lt_status {
        LT_CHECK(check_handles(ctx, "send", g, work));
        LT_CHECK(check_dtype(ctx, "send", raw(dtype)));
        LT_CHECK(check_buf(ctx, "send", buf, count, dtype, 1));
        LT_CHECK(check_rank(ctx, "send", "peer", peer, *g->g, false));
        Op o;
        o.kind = Kind::Send;
        o.send = buf;
        o.count = count;
        o.dtype = dtype;
        o.peer = peer;
        o.tag = tag;
        return issue(ctx, g, o, work);
    });
}

lt_status ltgloo_recv(lt_ctx *ctx, lt_backend_group *g, void *buf, size_t count, lt_dtype dtype,
                      int peer, uint32_t tag, lt_backend_work **work) {
    return guarded(ctx, "recv", [&]() -> lt_status {
        LT_CHECK(check_handles(ctx, "recv", g, work));
        LT_CHECK(check_dtype(ctx, "recv", raw(dtype)));
        LT_CHECK(check_buf(ctx, "recv", buf, count, dtype, 1));
        LT_CHECK(check_rank(ctx, "recv", "peer", peer, *g->g, false));
        Op o;
        o.kind = Kind::Recv;
        o.buf = buf;
        o.count = count;
        o.dtype = dtype;
        o.peer = peer;
        o.tag = tag;
        return issue(ctx, g, o, work);
    });
}

lt_status ltgloo_barrier(lt_ctx *ctx, lt_backend_group *g, lt_backend_work **work) {
    return guarded(ctx, "barrier", [&]() -> lt_status {
        LT_CHECK(check_handles(ctx, "barrier", g, work));
        Op o;
        o.kind = Kind::Barrier;
        return issue(ctx, g, o, work);
    });
}

lt_status ltgloo_wait(lt_ctx *ctx, lt_backend_work *work, int64_t timeout_ms) {
    if (!work) {
        lt_set_error(ctx, "gloo wait: NULL work");
        return LT_ERR_INVALID;
    }
    return guarded(ctx, "wait", [&]() -> lt_status {
        std::string err;
        lt_status st = ltgloo::group_wait(*work->g, *work->w, timeout_ms, err);
        if (st != LT_OK) lt_set_error(ctx, "%s", err.c_str());
        return st;
    });
}

void ltgloo_free_work(lt_ctx *ctx, lt_backend_work *work) {
    (void)ctx;
    delete work;
}

lt_status ltgloo_abort(lt_ctx *ctx, lt_backend_group *g) {
    if (!g) return LT_OK;
    return guarded(ctx, "abort", [&]() -> lt_status {
        ltgloo::group_abort(*g->g);
        return LT_OK;
    });
}

lt_status ltgloo_supports(lt_ctx *ctx, lt_dtype dtype, lt_redop op, bool *out) {
    (void)ctx;
    if (!out) return LT_ERR_INVALID;
    *out = valid_dtype(raw(dtype)) && valid_redop(raw(op)) && ltgloo::reduce_fn(dtype, op);
    return LT_OK;
}

/* The parameters' values: check_params, and group creation for a caller
 * that did not call it. */
lt_status ltgloo_check_params(lt_ctx *ctx) {
    const char *rt = lt_param_str(ctx, "realtime", "auto");
    bool on; /* the words shm takes too: one [backend] serves both across hosts */
    if (strcmp(rt, "auto") && !lt_parse_bool(rt, &on)) {
        lt_set_error(ctx, "backend.realtime = '%s': use auto, on or off", rt);
        return LT_ERR_INVALID;
    }
    long long n = (long long)lt_param_int(ctx, "num_threads", 1);
    if (n < 1 || n > 16) {
        lt_set_error(ctx, "backend.num_threads = %lld: use 1..16 (gloo contexts per group)", n);
        return LT_ERR_INVALID;
    }
    return LT_OK;
}

} // extern "C"
