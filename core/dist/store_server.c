/* Rendezvous store server: one thread, one poll() loop over the listening
 * socket, a wake-up pipe and every client connection (see store_server.h and
 * the protocol in store_wire.h).
 *
 * Each connection is a small state machine: read a header, check it, read the
 * body into a buffer that grows only as bytes actually arrive, run the request,
 * queue the reply. A get or wait whose keys are missing parks the connection:
 * it is then polled only for hang-up, and is re-checked after every mutation
 * and answered TIMEOUT when its deadline passes; poll()'s timeout is the
 * nearest deadline, so nothing spins. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "lt/core.h"
#include "store_server.h"
#include "store_table.h"
#include "store_wire.h"

/* Bodies grow in steps as data arrives, so a length that lies costs nothing. */
#define BODY_STEP (64u << 10)
/* How long a client may take to say hello, or stay silent in the middle of a
 * request, before its connection is dropped: port scanners and half-open
 * clients must not hold descriptors until the store runs out. */
#define STALL_MS_DEFAULT 30000

/* Buffers above this are released after use instead of kept for the next request. */
#define KEEP_BUF (1u << 20)

/* Warnings about connections (garbage, a wrong token or version, a stall)
 * are logged at most WARN_BURST per interval: a port scanner or a client
 * retrying in a loop would otherwise write a line per connection (10,000
 * connections gave ~7,000 lines). The ones held back are counted, and the
 * count is logged in one line when the interval is over or the server stops. */
#define WARN_BURST 5
#define WARN_INTERVAL_MS_DEFAULT 10000

typedef struct conn {
    int fd;
    char peer[64];
    bool authed, closing, parked, dead;
    uint8_t hdr[LT_WIRE_HDR];
    size_t hdr_got;
    bool have_hdr;
    unsigned op, flags;
    uint8_t *body;
    size_t body_len, body_got, body_cap;
    double deadline; /* of a parked request, lt_now() seconds */
    double stall_at; /* a connection without hello, or a request left half sent, is
                        dropped at this time (lt_now() seconds); 0 = none */
    lt_wbuf out;
    size_t out_off;
} conn;

struct lt_store_server {
    pthread_t thread;
    bool running; /* lt_store_server_run started the thread */
    int listen_fd, wake[2];
    char token[LT_WIRE_MAX_TOKEN];
    size_t token_len;
    bool has_token, accept_paused;
    _Atomic int stall_ms; /* STALL_MS_DEFAULT; tests shorten it */
    _Atomic int warn_ms;  /* WARN_INTERVAL_MS_DEFAULT; tests shorten it */
    double warn_since;    /* the current interval's start (lt_now() seconds; 0 = none yet) */
    int warn_logged;      /* lines logged in it */
    unsigned long warn_held; /* warnings not logged in it */
    lt_store_table *table;
    conn **conns;
    size_t nconns, cap;
    struct pollfd *pfds;
    size_t pfd_cap;
};

static double stall_s(const lt_store_server *s) { return atomic_load(&s->stall_ms) / 1000.0; }

void lt_store_server_set_stall_ms(lt_store_server *s, int ms) {
    if (s) atomic_store(&s->stall_ms, ms > 0 ? ms : STALL_MS_DEFAULT);
}

static double warn_s(const lt_store_server *s) { return atomic_load(&s->warn_ms) / 1000.0; }

void lt_store_server_set_warn_interval_ms(lt_store_server *s, int ms) {
    if (s) atomic_store(&s->warn_ms, ms > 0 ? ms : WARN_INTERVAL_MS_DEFAULT);
}

/* Ends the current interval once it is over (or at once with `now` < 0, when
 * the server stops): the count of warnings held back in it, if any, in one line. */
static void warn_interval_end(lt_store_server *s, double now) {
    if (now >= 0 && (s->warn_since == 0 || now < s->warn_since + warn_s(s))) return;
    if (s->warn_held)
        lt_log(NULL, LT_LOG_WARN, "rendezvous store: %lu more warning(s) about connections in the "
               "last %.1f s not logged (at most %d lines per %g s)", s->warn_held,
               (now < 0 ? lt_now() : now) - s->warn_since, WARN_BURST, warn_s(s));
    s->warn_since = 0;
    s->warn_logged = 0;
    s->warn_held = 0;
}

/* A warning about one connection, rate-limited (see WARN_BURST). Server thread only. */
static void warn_conn(lt_store_server *s, const char *fmt, ...) LT_PRINTF(2, 3);
static void warn_conn(lt_store_server *s, const char *fmt, ...) {
    double now = lt_now();
    warn_interval_end(s, now);
    if (s->warn_since == 0) s->warn_since = now;
    if (s->warn_logged >= WARN_BURST) {
        s->warn_held++;
        return;
    }
    s->warn_logged++;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    lt_log(NULL, LT_LOG_WARN, "rendezvous store: %s", line);
}


static void conn_drop(lt_store_server *s, conn *c, const char *fmt, ...) LT_PRINTF(3, 4);

static void conn_drop(lt_store_server *s, conn *c, const char *fmt, ...) {
    if (c->dead) return;
    if (fmt) {
        char why[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof why, fmt, ap);
        va_end(ap);
        warn_conn(s, "dropped connection from %s: %s", c->peer, why);
    }
    close(c->fd);
    c->fd = -1;
    c->dead = true;
    s->accept_paused = false; /* a descriptor is free again */
}

static void conn_free(conn *c) {
    free(c->body);
    lt_wbuf_free(&c->out);
    free(c);
}

static void reset_input(conn *c) {
    if (c->authed) c->stall_at = 0; /* between requests an authenticated client may idle */
    c->have_hdr = false;
    c->hdr_got = c->body_len = c->body_got = 0;
    c->parked = false;
    if (c->body_cap > KEEP_BUF) {
        free(c->body);
        c->body = NULL;
        c->body_cap = 0;
    }
}

/* Sends what the socket takes now; the rest goes on POLLOUT. */
static void conn_flush(lt_store_server *s, conn *c) {
    while (!c->dead && c->out_off < c->out.len) {
        ssize_t n = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            conn_drop(s, c, NULL); /* the client went away; nothing to report */
            return;
        }
        c->out_off += (size_t)n;
    }
    if (c->dead) return;
    c->out.len = c->out_off = 0;
    if (c->out.cap > KEEP_BUF) lt_wbuf_free(&c->out);
    if (c->closing) conn_drop(s, c, NULL);
}

/* Replies with a code and, optionally, one string and/or one integer. */
static void reply(lt_store_server *s, conn *c, unsigned code, unsigned flags, const void *str,
                  size_t n, bool has_str, const int64_t *num) {
    size_t start = c->out.len;
    lt_wbuf_begin(&c->out, code, flags);
    if (has_str) lt_wbuf_str(&c->out, str, n);
    if (num) lt_wbuf_i64(&c->out, *num);
    lt_wbuf_end(&c->out, start);
    if (c->out.failed) {
        conn_drop(s, c, "out of memory composing a %zu-byte reply", n);
        return;
    }
    conn_flush(s, c);
}

static bool token_ok(const lt_store_server *s, const uint8_t *tok, size_t n) {
    if (!s->has_token) return true;
    /* Constant time in the token's content, so timing does not leak it. */
    unsigned diff = (unsigned)(n != s->token_len);
    for (size_t i = 0; i < s->token_len; i++) diff |= (unsigned)(s->token[i] ^ (i < n ? tok[i] : 0));
    return diff == 0;
}

/* Strict decimal int64, as ADD stores it. */
static bool parse_i64(const uint8_t *p, size_t n, int64_t *out) {
    char buf[32];
    if (n == 0 || n >= sizeof buf) return false;
    memcpy(buf, p, n);
    buf[n] = 0;
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end || end == buf) return false;
    *out = (int64_t)v;
    return true;
}

/* A parked or parkable request: true when its keys are all present now
 * (and the reply is queued). */
static bool try_answer(lt_store_server *s, conn *c) {
    lt_rbuf r = {c->body, c->body_len, 0, 0};
    (void)lt_rbuf_u32(&r); /* timeout, already applied */
    size_t klen, vlen;
    if (c->op == LT_OP_GET) {
        const uint8_t *key = lt_rbuf_str(&r, LT_STORE_MAX_KEY, &klen);
        const uint8_t *val = lt_store_table_get(s->table, key, klen, &vlen);
        if (!val) return false;
        reply(s, c, LT_REPLY_OK, 0, val, vlen, true, NULL);
        return true;
    }
    uint32_t n = lt_rbuf_u32(&r);
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *key = lt_rbuf_str(&r, LT_STORE_MAX_KEY, &klen);
        if (!lt_store_table_get(s->table, key, klen, &vlen)) return false;
    }
    reply(s, c, LT_REPLY_OK, 0, NULL, 0, false, NULL);
    return true;
}

static void wake_parked(lt_store_server *s) {
    for (size_t i = 0; i < s->nconns; i++) {
        conn *c = s->conns[i];
        if (!c->dead && c->parked && try_answer(s, c)) reset_input(c);
    }
}

static bool valid_key(size_t klen) { return klen > 0; }

/* Runs one complete request. Returns false when the message was malformed
 * (the caller drops the connection). */
static bool run_request(lt_store_server *s, conn *c) {
    lt_rbuf r = {c->body, c->body_len, 0, 0};
    size_t klen = 0, n1 = 0, n2 = 0, vlen = 0;
    const uint8_t *key = NULL, *a = NULL, *b = NULL, *val;
    int64_t num = 0;
    uint32_t timeout_ms = 0, nkeys = 0;

    switch (c->op) {
    case LT_OP_HELLO:
        a = lt_rbuf_str(&r, LT_WIRE_MAX_TOKEN, &n1);
        break;
    case LT_OP_SET:
        key = lt_rbuf_str(&r, LT_STORE_MAX_KEY, &klen);
        a = lt_rbuf_str(&r, LT_STORE_MAX_VALUE, &n1);
        break;
    case LT_OP_GET:
        timeout_ms = lt_rbuf_u32(&r);
        key = lt_rbuf_str(&r, LT_STORE_MAX_KEY, &klen);
        break;
    case LT_OP_TRY_GET:
    case LT_OP_DELETE:
        key = lt_rbuf_str(&r, LT_STORE_MAX_KEY, &klen);
        break;
    case LT_OP_ADD:
        key = lt_rbuf_str(&r, LT_STORE_MAX_KEY, &klen);
        num = lt_rbuf_i64(&r);
        break;
    case LT_OP_CAS:
        key = lt_rbuf_str(&r, LT_STORE_MAX_KEY, &klen);
        a = lt_rbuf_str(&r, LT_STORE_MAX_VALUE, &n1);
        b = lt_rbuf_str(&r, LT_STORE_MAX_VALUE, &n2);
        break;
    case LT_OP_WAIT:
        timeout_ms = lt_rbuf_u32(&r);
        nkeys = lt_rbuf_u32(&r);
        if (nkeys > LT_WIRE_MAX_WAIT_KEYS) return false;
        for (uint32_t i = 0; i < nkeys && !r.bad; i++) {
            (void)lt_rbuf_str(&r, LT_STORE_MAX_KEY, &klen);
            if (!valid_key(klen)) return false;
        }
        klen = 1; /* every key checked above */
        break;
    default:
        return false;
    }
    if (r.bad || r.off != r.len) return false;
    if (c->op != LT_OP_HELLO && !valid_key(klen)) return false;

    switch (c->op) {
    case LT_OP_HELLO:
        if (!token_ok(s, a, n1)) {
            warn_conn(s, "refused a client from %s: wrong token", c->peer);
            c->closing = true;
            reply(s, c, LT_REPLY_BAD_TOKEN, 0, NULL, 0, false, NULL);
            return true;
        }
        c->authed = true;
        reply(s, c, LT_REPLY_OK, 0, NULL, 0, false, NULL);
        break;
    case LT_OP_SET:
        if (lt_store_table_set(s->table, key, klen, a, n1)) {
            conn_drop(s, c, "out of memory storing a %zu-byte value", n1);
            return true;
        }
        reply(s, c, LT_REPLY_OK, 0, NULL, 0, false, NULL);
        wake_parked(s);
        break;
    case LT_OP_GET:
    case LT_OP_WAIT:
        if (try_answer(s, c)) break;
        if (timeout_ms == 0) {
            reply(s, c, LT_REPLY_TIMEOUT, 0, NULL, 0, false, NULL);
            break;
        }
        c->parked = true;
        c->deadline = lt_now() + timeout_ms / 1000.0;
        return true; /* keep the body: it is re-read when keys arrive */
    case LT_OP_TRY_GET:
        val = lt_store_table_get(s->table, key, klen, &vlen);
        if (val)
            reply(s, c, LT_REPLY_OK, 0, val, vlen, true, NULL);
        else
            reply(s, c, LT_REPLY_NOT_FOUND, 0, NULL, 0, false, NULL);
        break;
    case LT_OP_ADD: {
        int64_t cur = 0, sum;
        char text[24];
        val = lt_store_table_get(s->table, key, klen, &vlen);
        if ((val && !parse_i64(val, vlen, &cur)) || __builtin_add_overflow(cur, num, &sum)) {
            reply(s, c, LT_REPLY_BAD_VALUE, 0, NULL, 0, false, NULL);
            break;
        }
        int tl = snprintf(text, sizeof text, "%" PRId64, sum);
        if (lt_store_table_set(s->table, key, klen, text, (size_t)tl)) {
            conn_drop(s, c, "out of memory");
            return true;
        }
        reply(s, c, LT_REPLY_OK, 0, NULL, 0, false, &sum);
        wake_parked(s);
        break;
    }
    case LT_OP_CAS: {
        val = lt_store_table_get(s->table, key, klen, &vlen);
        bool match = (c->flags & LT_WIRE_F_ABSENT) ? !val
                                                   : (val && vlen == n1 && !memcmp(val, a, n1));
        if (match) {
            if (lt_store_table_set(s->table, key, klen, b, n2)) {
                conn_drop(s, c, "out of memory");
                return true;
            }
            val = lt_store_table_get(s->table, key, klen, &vlen);
        }
        if (val)
            reply(s, c, LT_REPLY_OK, 0, val, vlen, true, NULL);
        else
            reply(s, c, LT_REPLY_OK, LT_WIRE_F_ABSENT, NULL, 0, true, NULL);
        if (match) wake_parked(s);
        break;
    }
    case LT_OP_DELETE:
        lt_store_table_delete(s->table, key, klen);
        reply(s, c, LT_REPLY_OK, 0, NULL, 0, false, NULL);
        break;
    }
    if (!c->dead) reset_input(c);
    return true;
}

/* Validates a complete header. Returns false when the connection was dropped. */
static bool take_header(lt_store_server *s, conn *c) {
    const uint8_t *h = c->hdr;
    if (h[0] != LT_WIRE_MAGIC) {
        conn_drop(s, c, "bad magic byte 0x%02x (not an lt rendezvous client?)", h[0]);
        return false;
    }
    if (h[1] != LT_WIRE_VERSION) {
        warn_conn(s, "client %s speaks protocol v%u, this server v%u; closing", c->peer, h[1],
                  LT_WIRE_VERSION);
        c->closing = true;
        reply(s, c, LT_REPLY_BAD_VERSION, 0, NULL, 0, false, NULL);
        return false;
    }
    c->op = h[2];
    c->flags = h[3];
    c->body_len = lt_wire_get_u32(h + 4);
    size_t max = lt_wire_max_body(c->op);
    if (!max) {
        conn_drop(s, c, "unknown request code %u", c->op);
        return false;
    }
    if (c->body_len > max) {
        conn_drop(s, c, "%s request claims %zu bytes, more than the %zu allowed",
                  lt_wire_op_name(c->op), c->body_len, max);
        return false;
    }
    if (!c->authed && c->op != LT_OP_HELLO) {
        conn_drop(s, c, "%s request before hello", lt_wire_op_name(c->op));
        return false;
    }
    c->have_hdr = true;
    return true;
}

/* Reads until the socket is empty or one request has run and left the
 * connection busy (parked, replying or closing). */
static void conn_read(lt_store_server *s, conn *c) {
    while (!c->dead && !c->parked && !c->closing && c->out_off >= c->out.len) {
        uint8_t *dst;
        size_t want;
        if (!c->have_hdr) {
            dst = c->hdr + c->hdr_got;
            want = LT_WIRE_HDR - c->hdr_got;
        } else {
            if (c->body_got == c->body_cap && c->body_got < c->body_len) {
                size_t cap = c->body_cap < BODY_STEP ? BODY_STEP : c->body_cap * 2;
                if (cap > c->body_len) cap = c->body_len;
                uint8_t *p = realloc(c->body, cap);
                if (!p) {
                    conn_drop(s, c, "out of memory for a %zu-byte request", c->body_len);
                    return;
                }
                c->body = p;
                c->body_cap = cap;
            }
            dst = c->body + c->body_got;
            /* Never past this request: the next one stays in the socket. */
            want = (c->body_cap < c->body_len ? c->body_cap : c->body_len) - c->body_got;
        }
        ssize_t n = want ? recv(c->fd, dst, want, MSG_DONTWAIT) : 0;
        if (want && n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            conn_drop(s, c, NULL);
            return;
        }
        if (want && n == 0) {
            if (c->have_hdr || c->hdr_got)
                conn_drop(s, c, "connection closed in the middle of a %s request",
                          c->have_hdr ? lt_wire_op_name(c->op) : "message");
            else
                conn_drop(s, c, NULL); /* a clean goodbye */
            return;
        }
        if (!c->have_hdr && c->hdr_got == 0 && c->authed)
            c->stall_at = lt_now() + stall_s(s); /* a request starts: it has this long to arrive */
        if (!c->have_hdr) {
            c->hdr_got += (size_t)n;
            if (c->hdr_got < LT_WIRE_HDR || !take_header(s, c)) continue;
        } else {
            c->body_got += (size_t)n;
        }
        if (c->have_hdr && c->body_got == c->body_len && !run_request(s, c))
            conn_drop(s, c, "malformed %s request (%zu bytes)", lt_wire_op_name(c->op),
                      c->body_len);
    }
}

static void describe_peer(const struct sockaddr_storage *ss, char *out, size_t n) {
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        port = ntohs(a->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        port = ntohs(a->sin6_port);
    }
    snprintf(out, n, "%s:%d", host, port);
}

static void accept_all(lt_store_server *s) {
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = accept4(s->listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS) {
                /* Stop polling the listener until a connection closes, or it would spin. */
                warn_conn(s, "cannot accept more clients: %s", strerror(errno));
                s->accept_paused = true;
            }
            return;
        }
        conn *c = calloc(1, sizeof *c);
        if (c && s->nconns == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 16;
            conn **p = realloc(s->conns, cap * sizeof *p);
            if (!p) {
                free(c);
                c = NULL;
            } else {
                s->conns = p;
                s->cap = cap;
            }
        }
        if (!c) {
            warn_conn(s, "out of memory accepting a client");
            close(fd);
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->fd = fd;
        c->stall_at = lt_now() + stall_s(s); /* hello within this long */
        describe_peer(&ss, c->peer, sizeof c->peer);
        s->conns[s->nconns++] = c;
    }
}

static int next_timeout_ms(const lt_store_server *s) {
    double now = lt_now(), best = -1;
    for (size_t i = 0; i < s->nconns; i++) {
        const conn *c = s->conns[i];
        if (c->dead) continue;
        double at = c->parked ? c->deadline : c->stall_at;
        if (!c->parked && at == 0) continue;
        double left = at - now;
        if (best < 0 || left < best) best = left < 0 ? 0 : left;
    }
    if (s->warn_held) { /* the held-back count is logged when its interval ends */
        double left = s->warn_since + warn_s(s) - now;
        if (best < 0 || left < best) best = left < 0 ? 0 : left;
    }
    if (best < 0) return -1;
    double ms = best * 1000.0 + 1.0; /* round up: waking early would just poll again */
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

static void expire_parked(lt_store_server *s) {
    double now = lt_now();
    for (size_t i = 0; i < s->nconns; i++) {
        conn *c = s->conns[i];
        if (!c->dead && !c->parked && c->stall_at && now >= c->stall_at) {
            conn_drop(s, c, c->authed ? "no data for %g s in the middle of a request"
                                      : "no hello within %g s", stall_s(s));
            continue;
        }
        if (c->dead || !c->parked || now < c->deadline) continue;
        reset_input(c);
        reply(s, c, LT_REPLY_TIMEOUT, 0, NULL, 0, false, NULL);
    }
}

static void reap(lt_store_server *s) {
    size_t j = 0;
    for (size_t i = 0; i < s->nconns; i++) {
        if (s->conns[i]->dead)
            conn_free(s->conns[i]);
        else
            s->conns[j++] = s->conns[i];
    }
    s->nconns = j;
}

static void *server_main(void *arg) {
    lt_store_server *s = arg;
    for (;;) {
        size_t n = 2 + s->nconns;
        if (n > s->pfd_cap) {
            struct pollfd *p = realloc(s->pfds, n * 2 * sizeof *p);
            if (!p) {
                /* Serve the ones that fit (start() made room for a few); the
                 * rest wait for memory. */
                n = s->pfd_cap;
            } else {
                s->pfds = p;
                s->pfd_cap = n * 2;
            }
        }
        struct pollfd *pf = s->pfds;
        pf[0] = (struct pollfd){s->wake[0], POLLIN, 0};
        pf[1] = (struct pollfd){s->accept_paused ? -1 : s->listen_fd, POLLIN, 0};
        size_t nc = n - 2;
        for (size_t i = 0; i < nc; i++) {
            conn *c = s->conns[i];
            short ev = c->out_off < c->out.len ? POLLOUT : c->parked ? POLLRDHUP : POLLIN;
            pf[2 + i] = (struct pollfd){c->fd, ev, 0};
        }
        int r = poll(pf, n, next_timeout_ms(s));
        if (r < 0 && errno != EINTR) {
            lt_log(NULL, LT_LOG_ERROR, "rendezvous store: poll failed: %s", strerror(errno));
            break;
        }
        if (r > 0 && pf[0].revents) break; /* stop requested */
        for (size_t i = 0; r > 0 && i < nc; i++) {
            conn *c = s->conns[i];
            short ev = pf[2 + i].revents;
            if (!ev || c->dead) continue;
            if (ev & POLLNVAL) {
                conn_drop(s, c, "descriptor became invalid");
                continue;
            }
            if (ev & POLLOUT) conn_flush(s, c);
            if (ev & POLLIN) conn_read(s, c);
            if (!c->dead && (ev & (POLLERR | POLLHUP | POLLRDHUP)) && !(ev & POLLIN))
                conn_drop(s, c, NULL); /* the client hung up while waiting */
        }
        if (r > 0 && (pf[1].revents & POLLIN)) accept_all(s);
        expire_parked(s);
        warn_interval_end(s, lt_now());
        reap(s);
    }
    warn_interval_end(s, -1); /* stopping: the count held back is not lost */
    return NULL;
}

static void fail(char *err, size_t errlen, const char *fmt, ...) LT_PRINTF(3, 4);
static void fail(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static lt_status open_listener(const char *host, int port, int *fd_out, int *bound,
                               char *err, size_t errlen) {
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int rc = getaddrinfo(host, ps, &hints, &res);
    if (rc) {
        fail(err, errlen, "cannot listen on %s:%d: %s; check --master-addr", host, port,
             gai_strerror(rc));
        return LT_ERR_INVALID;
    }
    int fd = -1, last_errno = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            last_errno = errno;
            continue;
        }
        /* SO_REUSEADDR lets a restarted job reuse a port in TIME_WAIT; on Linux it
         * does not let a second live listener share the port (SO_REUSEPORT would). */
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 128)) {
            last_errno = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        if (last_errno == EADDRINUSE)
            fail(err, errlen,
                 "port %d on %s is already in use; pick another --master-port or stop the other job",
                 port, host);
        else
            fail(err, errlen, "cannot listen on %s:%d: %s", host, port, strerror(last_errno));
        return LT_ERR_IO;
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &len);
    *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                            : ((struct sockaddr_in *)&ss)->sin_port);
    *fd_out = fd;
    return LT_OK;
}

/* A server whose thread never started: its descriptors and memory. */
static void free_unstarted(lt_store_server *s) {
    if (s->listen_fd >= 0) close(s->listen_fd);
    if (s->wake[0] >= 0) close(s->wake[0]);
    if (s->wake[1] >= 0) close(s->wake[1]);
    lt_store_table_free(s->table);
    free(s->pfds);
    free(s);
}

lt_status lt_store_server_open(const char *bind_host, int port, const char *token,
                                lt_store_server **out, int *bound_port, char *err,
                                size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!out || port < 0 || port > 65535) {
        fail(err, errlen, "rendezvous store: port %d is not in 0..65535", port);
        return LT_ERR_INVALID;
    }
    *out = NULL;
    const char *host = bind_host && *bind_host ? bind_host : "0.0.0.0";
    if (!token) token = getenv("LT_RDZV_TOKEN");
    if (token && strlen(token) > LT_WIRE_MAX_TOKEN) {
        fail(err, errlen, "rendezvous token is %zu bytes; at most %u are allowed", strlen(token),
             LT_WIRE_MAX_TOKEN);
        return LT_ERR_INVALID;
    }
    lt_store_server *s = calloc(1, sizeof *s);
    if (s) {
        atomic_init(&s->stall_ms, STALL_MS_DEFAULT);
        atomic_init(&s->warn_ms, WARN_INTERVAL_MS_DEFAULT);
    }
    if (!s) {
        fail(err, errlen, "out of memory starting the rendezvous store");
        return LT_ERR_NOMEM;
    }
    s->listen_fd = s->wake[0] = s->wake[1] = -1;
    if (token && *token) {
        s->has_token = true;
        s->token_len = strlen(token);
        memcpy(s->token, token, s->token_len);
    }
    int bound = 0;
    lt_status st = open_listener(host, port, &s->listen_fd, &bound, err, errlen);
    if (st == LT_OK && pipe2(s->wake, O_CLOEXEC | O_NONBLOCK)) {
        fail(err, errlen, "rendezvous store: pipe: %s", strerror(errno));
        st = LT_ERR_IO;
    }
    if (st == LT_OK && (!(s->table = lt_store_table_new()) ||
                        !(s->pfds = calloc(s->pfd_cap = 64, sizeof *s->pfds)))) {
        fail(err, errlen, "out of memory starting the rendezvous store");
        st = LT_ERR_NOMEM;
    }
    if (st != LT_OK) {
        free_unstarted(s);
        return st;
    }
    if (bound_port) *bound_port = bound;
    *out = s;
    return LT_OK;
}

lt_status lt_store_server_run(lt_store_server *s, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    /* The server thread takes no signals: they belong to the host program's threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->thread, NULL, server_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        fail(err, errlen, "rendezvous store: cannot start its thread: %s", strerror(rc));
        return LT_ERR_IO;
    }
    s->running = true;
    return LT_OK;
}

lt_status lt_store_server_start(const char *bind_host, int port, const char *token,
                                 lt_store_server **out, int *bound_port, char *err,
                                 size_t errlen) {
    LT_CHECK(lt_store_server_open(bind_host, port, token, out, bound_port, err, errlen));
    lt_status st = lt_store_server_run(*out, err, errlen);
    if (st != LT_OK) {
        free_unstarted(*out);
        *out = NULL;
    }
    return st;
}

void lt_store_server_stop(lt_store_server *s) {
    if (!s) return;
    if (!s->running) {
        free_unstarted(s);
        return;
    }
    ssize_t w;
    do w = write(s->wake[1], "x", 1);
    while (w < 0 && errno == EINTR);
    pthread_join(s->thread, NULL);
    for (size_t i = 0; i < s->nconns; i++) {
        if (!s->conns[i]->dead) close(s->conns[i]->fd);
        conn_free(s->conns[i]);
    }
    free(s->conns);
    free(s->pfds);
    close(s->listen_fd);
    close(s->wake[0]);
    close(s->wake[1]);
    lt_store_table_free(s->table);
    free(s);
}
