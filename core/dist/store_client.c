/* Rendezvous store client (lt/store.h): one TCP connection speaking the
 * protocol of store_wire.h, one request at a time.
 *
 * A blocking get or wait carries its timeout to the server, which answers
 * TIMEOUT itself; the connection thus stays in step. The client's own deadline
 * (the timeout plus a grace period) only catches a server or network that went
 * silent; then the connection, whose state is unknown, is closed, and the next
 * call connects again. */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "lt/core.h"
#include "store_wire.h"

#define DEFAULT_TIMEOUT_MS 300000
/* Extra time the client gives the server to answer a blocking request. */
#define GRACE_S 10.0
/* The handshake gets at least this long even when connect's timeout is shorter. */
#define HELLO_MIN_S 10.0

struct lt_store {
    int fd;
    char host[256];
    int port;
    char token[LT_WIRE_MAX_TOKEN + 1];
    int timeout_ms;
    char err[1024];
    lt_wbuf req;
};

static void seterr(lt_store *s, const char *fmt, ...) LT_PRINTF(2, 3);
static void seterr(lt_store *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
}

/* A key as text for messages: printable, shortened. */
static const char *key_text(const char *key, char *buf, size_t n) {
    size_t i = 0, len = strlen(key);
    for (; i < len && i + 4 < n; i++) buf[i] = (key[i] >= 32 && key[i] < 127) ? key[i] : '?';
    if (i < len && n > 4) memcpy(buf + i, "...", 3), i += 3;
    buf[i < n ? i : n - 1] = 0;
    return buf;
}

static double secs(int ms) { return ms / 1000.0; }

static int ms_left(double deadline) {
    double left = (deadline - lt_now()) * 1000.0;
    if (left <= 0) return 0;
    return left > 1e9 ? 1000000000 : (int)left + 1;
}

static void drop_connection(lt_store *s) {
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
}

/* Moves all n bytes (send when out) before the deadline. 0 ok, -1 I/O error
 * (errno set; 0 for EOF), -2 deadline. */
static int io_all(int fd, void *buf, size_t n, bool out, double deadline) {
    uint8_t *p = buf;
    while (n) {
        ssize_t r = out ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) : recv(fd, p, n, MSG_DONTWAIT);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0) {
            errno = 0;
            return -1;
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        int left = ms_left(deadline);
        if (!left) return -2;
        struct pollfd pf = {fd, out ? POLLOUT : POLLIN, 0};
        if (poll(&pf, 1, left) < 0 && errno != EINTR) return -1;
    }
    return 0;
}

/* One TCP connection attempt. Returns the fd, or -1 with errno set. */
static int try_connect(const struct addrinfo *ai, double deadline) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) return -1;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) && errno != EINPROGRESS) goto fail;
    struct pollfd pf = {fd, POLLOUT, 0};
    int left = ms_left(deadline), r;
    while ((r = poll(&pf, 1, left)) < 0 && errno == EINTR) left = ms_left(deadline);
    if (r == 0) {
        errno = ETIMEDOUT;
        goto fail;
    }
    int soerr = 0;
    socklen_t len = sizeof soerr;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
    if (soerr) {
        errno = soerr;
        goto fail;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
fail: {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}
}

/* Sends s->req (a complete frame) and reads the reply. *body is malloc'ed
 * (NULL when empty). On failure the message is in s->err and *body is NULL. */
static lt_status roundtrip(lt_store *s, const char *what, double deadline, unsigned *code,
                           unsigned *flags, uint8_t **body, size_t *blen) {
    *body = NULL;
    *blen = 0;
    if (s->req.failed) {
        seterr(s, "out of memory building a %s request", what);
        return LT_ERR_NOMEM;
    }
    uint8_t hdr[LT_WIRE_HDR];
    int r = io_all(s->fd, s->req.p, s->req.len, true, deadline);
    if (!r) r = io_all(s->fd, hdr, sizeof hdr, false, deadline);
    size_t len = 0;
    if (!r) {
        len = lt_wire_get_u32(hdr + 4);
        if (hdr[0] != LT_WIRE_MAGIC || len > (size_t)LT_STORE_MAX_VALUE + 64) {
            drop_connection(s);
            seterr(s, "the rendezvous store at %s:%d sent a malformed reply to %s "
                      "(not an lt rendezvous store?)", s->host, s->port, what);
            return LT_ERR_IO;
        }
        if (len && !(*body = malloc(len))) {
            drop_connection(s);
            seterr(s, "out of memory for a %zu-byte reply from the rendezvous store", len);
            return LT_ERR_NOMEM;
        }
        r = io_all(s->fd, *body, len, false, deadline);
    }
    if (r) {
        int e = errno;
        free(*body);
        *body = NULL;
        drop_connection(s);
        if (r == -2) {
            seterr(s, "the rendezvous store at %s:%d did not answer %s in time; "
                      "is node 0 still running?", s->host, s->port, what);
            return LT_ERR_TIMEOUT;
        }
        seterr(s, "lost the connection to the rendezvous store at %s:%d during %s: %s",
               s->host, s->port, what, e ? strerror(e) : "closed by the server");
        return LT_ERR_IO;
    }
    *code = hdr[2];
    *flags = hdr[3];
    *blen = len;
    if (*code == LT_REPLY_BAD_VERSION) {
        /* A failed roundtrip hands back no body: the callers free none. */
        free(*body);
        *body = NULL;
        *blen = 0;
        drop_connection(s);
        seterr(s, "the rendezvous store at %s:%d speaks protocol v%u, this lt v%u; run the "
                  "same lt version on every node", s->host, s->port, hdr[1], LT_WIRE_VERSION);
        return LT_ERR_MISMATCH;
    }
    return LT_OK;
}

static lt_status hello(lt_store *s, double deadline) {
    s->req.len = 0;
    s->req.failed = 0;
    lt_wbuf_begin(&s->req, LT_OP_HELLO, 0);
    lt_wbuf_str(&s->req, s->token, strlen(s->token));
    lt_wbuf_end(&s->req, 0);
    unsigned code, flags;
    uint8_t *body;
    size_t blen;
    lt_status st = roundtrip(s, "the handshake", deadline, &code, &flags, &body, &blen);
    free(body);
    if (st != LT_OK) return st;
    if (code == LT_REPLY_BAD_TOKEN) {
        drop_connection(s);
        seterr(s, "rendezvous store at %s:%d refused the token; set LT_RDZV_TOKEN to the job's token",
               s->host, s->port);
        return LT_ERR_INVALID;
    }
    if (code != LT_REPLY_OK) {
        drop_connection(s);
        seterr(s, "rendezvous store at %s:%d answered the handshake with code %u", s->host,
               s->port, code);
        return LT_ERR_IO;
    }
    return LT_OK;
}

/* Connects (retrying refused or unreachable attempts: the master may not be up
 * yet) and shakes hands, all within timeout_ms. */
static lt_status store_open(lt_store *s, int timeout_ms) {
    double start = lt_now(), deadline = start + secs(timeout_ms);
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    struct addrinfo hints = {0};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int backoff_ms = 20, last_errno = 0;
    const char *last_gai = NULL;
    for (;;) {
        struct addrinfo *res = NULL;
        int rc = getaddrinfo(s->host, port, &hints, &res);
        if (rc == EAI_NONAME || rc == EAI_FAIL || rc == EAI_SERVICE) {
            seterr(s, "cannot resolve the rendezvous store host '%s': %s; check MASTER_ADDR",
                   s->host, gai_strerror(rc));
            return LT_ERR_INVALID;
        }
        if (rc) last_gai = gai_strerror(rc);
        for (struct addrinfo *ai = res; ai && s->fd < 0; ai = ai->ai_next) {
            s->fd = try_connect(ai, deadline);
            if (s->fd < 0) last_errno = errno;
        }
        freeaddrinfo(res);
        if (s->fd >= 0) break;
        int left = ms_left(deadline);
        if (!left) {
            seterr(s, "could not reach the rendezvous store at %s:%d within %g s; check "
                      "MASTER_ADDR/MASTER_PORT and that node 0 is running (last attempt: %s)",
                   s->host, s->port, secs(timeout_ms),
                   last_gai ? last_gai : strerror(last_errno ? last_errno : ETIMEDOUT));
            return LT_ERR_TIMEOUT;
        }
        struct timespec ts = {0, (long)(backoff_ms < left ? backoff_ms : left) * 1000000L};
        nanosleep(&ts, NULL);
        if (backoff_ms < 500) backoff_ms *= 2;
    }
    double hello_deadline = deadline > lt_now() + HELLO_MIN_S ? deadline : lt_now() + HELLO_MIN_S;
    return hello(s, hello_deadline);
}

static lt_store *store_alloc(const char *host, int port, const char *token, int timeout_ms) {
    lt_store *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->fd = -1;
    snprintf(s->host, sizeof s->host, "%s", host);
    s->port = port;
    snprintf(s->token, sizeof s->token, "%s", token);
    s->timeout_ms = timeout_ms;
    return s;
}

lt_status lt_store_connect(const char *host, int port, const char *token, int timeout_ms,
                           lt_store **out, char *err, size_t errlen) {
    char tmp[1024];
    if (!err || !errlen) {
        err = tmp;
        errlen = sizeof tmp;
    }
    err[0] = 0;
    if (!out || !host || !*host || port <= 0 || port > 65535) {
        snprintf(err, errlen, "rendezvous store address '%s:%d' is not valid; check MASTER_ADDR/MASTER_PORT",
                 host ? host : "(null)", port);
        return LT_ERR_INVALID;
    }
    *out = NULL;
    if (!token) token = getenv("LT_RDZV_TOKEN");
    if (!token) token = "";
    if (strlen(token) > LT_WIRE_MAX_TOKEN || strlen(host) >= 256) {
        snprintf(err, errlen, "rendezvous %s is too long", strlen(host) >= 256 ? "host name" : "token");
        return LT_ERR_INVALID;
    }
    lt_store *s = store_alloc(host, port, token, DEFAULT_TIMEOUT_MS);
    if (!s) {
        snprintf(err, errlen, "out of memory connecting to the rendezvous store");
        return LT_ERR_NOMEM;
    }
    lt_status st = store_open(s, timeout_ms > 0 ? timeout_ms : 0);
    if (st != LT_OK) {
        snprintf(err, errlen, "%s", s->err);
        lt_store_close(s);
        return st;
    }
    *out = s;
    return LT_OK;
}

lt_status lt_store_clone(lt_store *s, lt_store **out) {
    if (!s || !out) return LT_ERR_INVALID;
    lt_store *c = store_alloc(s->host, s->port, s->token, s->timeout_ms);
    if (!c) {
        seterr(s, "out of memory cloning the rendezvous store client");
        return LT_ERR_NOMEM;
    }
    lt_status st = store_open(c, s->timeout_ms);
    if (st != LT_OK) {
        seterr(s, "%s", c->err);
        lt_store_close(c);
        return st;
    }
    *out = c;
    return LT_OK;
}

void lt_store_close(lt_store *s) {
    if (!s) return;
    drop_connection(s);
    lt_wbuf_free(&s->req);
    free(s);
}

void lt_store_set_timeout(lt_store *s, int timeout_ms) {
    if (s) s->timeout_ms = timeout_ms > 0 ? timeout_ms : DEFAULT_TIMEOUT_MS;
}

const char *lt_store_error(const lt_store *s) { return s ? s->err : ""; }

/* Checks a key and makes sure the connection is up; starts a request frame. */
static lt_status begin(lt_store *s, const char *key, unsigned op, unsigned flags) {
    if (!s) return LT_ERR_INVALID;
    s->err[0] = 0;
    if (!key && op != LT_OP_WAIT) {
        seterr(s, "rendezvous store: the key is NULL; pass a key of 1 to %d bytes", LT_STORE_MAX_KEY);
        return LT_ERR_INVALID;
    }
    if (key) {
        size_t n = strlen(key);
        if (!n || n > LT_STORE_MAX_KEY) {
            seterr(s, "rendezvous store key of %zu bytes; keys are 1 to %d bytes", n,
                   LT_STORE_MAX_KEY);
            return LT_ERR_INVALID;
        }
    }
    if (s->fd < 0) LT_CHECK(store_open(s, s->timeout_ms));
    s->req.len = 0;
    s->req.failed = 0;
    lt_wbuf_begin(&s->req, op, flags);
    return LT_OK;
}

/* Finishes the frame, runs it, and maps the reply code to a status. */
static lt_status finish(lt_store *s, const char *key, unsigned op, double server_wait_s,
                        unsigned *flags, uint8_t **body, size_t *blen) {
    lt_wbuf_end(&s->req, 0);
    double deadline = lt_now() + (server_wait_s > 0 ? server_wait_s + GRACE_S : secs(s->timeout_ms));
    char what[96], kt[64] = "";
    snprintf(what, sizeof what, "%s of '%s'", lt_wire_op_name(op), key ? key_text(key, kt, sizeof kt) : "");
    unsigned code, fl;
    uint8_t *b;
    size_t bl;
    LT_CHECK(roundtrip(s, what, deadline, &code, &fl, &b, &bl));
    switch (code) {
    case LT_REPLY_OK:
        if (flags) *flags = fl;
        if (body) {
            *body = b;
            *blen = bl;
        } else {
            free(b);
        }
        return LT_OK;
    case LT_REPLY_NOT_FOUND:
        free(b);
        seterr(s, "key '%s' is not in the rendezvous store", kt);
        return LT_ERR_NOT_FOUND;
    case LT_REPLY_TIMEOUT:
        free(b);
        return LT_ERR_TIMEOUT; /* the caller names the keys */
    case LT_REPLY_BAD_VALUE:
        free(b);
        seterr(s, "key '%s' in the rendezvous store does not hold an integer, or adding "
                  "overflows int64", kt);
        return LT_ERR_INVALID;
    }
    free(b);
    drop_connection(s);
    seterr(s, "the rendezvous store at %s:%d answered %s with unknown code %u", s->host, s->port,
           what, code);
    return LT_ERR_IO;
}

/* Reads one string field out of a reply body into a malloc'ed buffer. */
static lt_status take_value(lt_store *s, uint8_t *body, size_t blen, void **val, size_t *len) {
    lt_rbuf r = {body, blen, 0, 0};
    size_t n;
    const uint8_t *p = lt_rbuf_str(&r, LT_STORE_MAX_VALUE, &n);
    if (r.bad || r.off != r.len) {
        free(body);
        drop_connection(s);
        seterr(s, "the rendezvous store at %s:%d sent a malformed value", s->host, s->port);
        return LT_ERR_IO;
    }
    void *copy = malloc(n ? n : 1);
    if (!copy) {
        free(body);
        seterr(s, "out of memory for a %zu-byte value", n);
        return LT_ERR_NOMEM;
    }
    memcpy(copy, p, n);
    free(body);
    *val = copy;
    *len = n;
    return LT_OK;
}

static lt_status check_value(lt_store *s, const char *key, const void *val, size_t len) {
    char kt[64];
    if (!val && len) {
        seterr(s, "value for key '%s' is NULL with a length of %zu; pass the bytes or a length of 0",
               key_text(key, kt, sizeof kt), len);
        return LT_ERR_INVALID;
    }
    if (len <= LT_STORE_MAX_VALUE) return LT_OK;
    seterr(s, "value for key '%s' is %zu bytes; the rendezvous store takes at most %u",
           key_text(key, kt, sizeof kt), len, LT_STORE_MAX_VALUE);
    return LT_ERR_INVALID;
}

lt_status lt_store_set(lt_store *s, const char *key, const void *val, size_t len) {
    LT_CHECK(begin(s, key, LT_OP_SET, 0));
    LT_CHECK(check_value(s, key, val, len));
    lt_wbuf_str(&s->req, key, strlen(key));
    lt_wbuf_str(&s->req, val, len);
    return finish(s, key, LT_OP_SET, 0, NULL, NULL, NULL);
}

lt_status lt_store_get(lt_store *s, const char *key, void **val, size_t *len) {
    if (!val || !len) return LT_ERR_INVALID;
    LT_CHECK(begin(s, key, LT_OP_GET, 0));
    lt_wbuf_u32(&s->req, (uint32_t)s->timeout_ms);
    lt_wbuf_str(&s->req, key, strlen(key));
    uint8_t *body;
    size_t blen;
    lt_status st = finish(s, key, LT_OP_GET, secs(s->timeout_ms), NULL, &body, &blen);
    if (st == LT_ERR_TIMEOUT && !s->err[0]) {
        char kt[64];
        seterr(s, "timed out after %g s waiting for key '%s' in the rendezvous store at %s:%d",
               secs(s->timeout_ms), key_text(key, kt, sizeof kt), s->host, s->port);
    }
    if (st != LT_OK) return st;
    return take_value(s, body, blen, val, len);
}

lt_status lt_store_try_get(lt_store *s, const char *key, void **val, size_t *len) {
    if (!val || !len) return LT_ERR_INVALID;
    LT_CHECK(begin(s, key, LT_OP_TRY_GET, 0));
    lt_wbuf_str(&s->req, key, strlen(key));
    uint8_t *body;
    size_t blen;
    LT_CHECK(finish(s, key, LT_OP_TRY_GET, 0, NULL, &body, &blen));
    return take_value(s, body, blen, val, len);
}

lt_status lt_store_add(lt_store *s, const char *key, int64_t delta, int64_t *out) {
    LT_CHECK(begin(s, key, LT_OP_ADD, 0));
    lt_wbuf_str(&s->req, key, strlen(key));
    lt_wbuf_i64(&s->req, delta);
    uint8_t *body;
    size_t blen;
    LT_CHECK(finish(s, key, LT_OP_ADD, 0, NULL, &body, &blen));
    lt_rbuf r = {body, blen, 0, 0};
    int64_t v = lt_rbuf_i64(&r);
    bool bad = r.bad || r.off != r.len;
    free(body);
    if (bad) {
        drop_connection(s);
        seterr(s, "the rendezvous store at %s:%d sent a malformed counter", s->host, s->port);
        return LT_ERR_IO;
    }
    if (out) *out = v;
    return LT_OK;
}

lt_status lt_store_compare_set(lt_store *s, const char *key, const void *expected,
                               size_t expected_len, const void *desired, size_t desired_len,
                               void **current, size_t *current_len) {
    bool absent = !expected && expected_len == 0;
    LT_CHECK(begin(s, key, LT_OP_CAS, absent ? LT_WIRE_F_ABSENT : 0));
    LT_CHECK(check_value(s, key, expected, expected_len));
    LT_CHECK(check_value(s, key, desired, desired_len));
    lt_wbuf_str(&s->req, key, strlen(key));
    lt_wbuf_str(&s->req, expected, expected_len);
    lt_wbuf_str(&s->req, desired, desired_len);
    unsigned flags = 0;
    uint8_t *body;
    size_t blen;
    LT_CHECK(finish(s, key, LT_OP_CAS, 0, &flags, &body, &blen));
    if (!current || !current_len) {
        free(body);
        return LT_OK;
    }
    if (flags & LT_WIRE_F_ABSENT) { /* the key is still absent */
        free(body);
        *current = NULL;
        *current_len = 0;
        return LT_OK;
    }
    return take_value(s, body, blen, current, current_len);
}

lt_status lt_store_wait(lt_store *s, const char *const *keys, size_t nkeys, int timeout_ms) {
    if (!s || (nkeys && !keys)) return LT_ERR_INVALID;
    if (nkeys > LT_WIRE_MAX_WAIT_KEYS) {
        seterr(s, "waiting for %zu keys at once; the rendezvous store takes at most %u",
               nkeys, LT_WIRE_MAX_WAIT_KEYS);
        return LT_ERR_INVALID;
    }
    s->err[0] = 0;
    for (size_t i = 0; i < nkeys; i++) {
        size_t n = keys[i] ? strlen(keys[i]) : 0;
        if (!n || n > LT_STORE_MAX_KEY) {
            seterr(s, "rendezvous store key #%zu of %zu bytes; keys are 1 to %d bytes", i, n,
                   LT_STORE_MAX_KEY);
            return LT_ERR_INVALID;
        }
    }
    if (!nkeys) return LT_OK;
    LT_CHECK(begin(s, NULL, LT_OP_WAIT, 0));
    if (timeout_ms < 0) timeout_ms = s->timeout_ms;
    lt_wbuf_u32(&s->req, (uint32_t)timeout_ms);
    lt_wbuf_u32(&s->req, (uint32_t)nkeys);
    for (size_t i = 0; i < nkeys; i++) lt_wbuf_str(&s->req, keys[i], strlen(keys[i]));
    lt_status st = finish(s, keys[0], LT_OP_WAIT, secs(timeout_ms), NULL, NULL, NULL);
    if (st == LT_ERR_TIMEOUT && !s->err[0]) {
        char list[600] = "", kt[64];
        size_t n = 0;
        for (size_t i = 0; i < nkeys && n + 80 < sizeof list; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s'%s'", i ? ", " : "",
                                  key_text(keys[i], kt, sizeof kt));
        if (n + 80 >= sizeof list) snprintf(list + n, sizeof list - n, ", ...");
        seterr(s, "timed out after %g s waiting for key%s %s in the rendezvous store at %s:%d",
               secs(timeout_ms), nkeys > 1 ? "s" : "", list, s->host, s->port);
    }
    return st;
}

lt_status lt_store_delete(lt_store *s, const char *key) {
    LT_CHECK(begin(s, key, LT_OP_DELETE, 0));
    lt_wbuf_str(&s->req, key, strlen(key));
    return finish(s, key, LT_OP_DELETE, 0, NULL, NULL, NULL);
}
