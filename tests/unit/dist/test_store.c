/* The rendezvous store: every operation, blocking semantics, tokens, and a
 * server that survives malformed and hostile messages. Waits are bounded;
 * nothing passes or fails on elapsed time. */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "cunit_run.h"
#include "lt/core.h"
#include "lt/store.h"
#include "dist/store_server.h"
#include "dist/store_wire.h"

static lt_store_server *g_srv;
static int g_port;

static lt_store *connect_ok(int port, const char *token) {
    lt_store *s = NULL;
    char err[512];
    lt_status st = lt_store_connect("127.0.0.1", port, token, 5000, &s, err, sizeof err);
    if (st != LT_OK) fprintf(stderr, "connect: %s\n", err);
    CU_ASSERT_EQUAL_FATAL(st, LT_OK);
    return s;
}

static int suite_init(void) {
    unsetenv("LT_RDZV_TOKEN");
    char err[256];
    return lt_store_server_start("127.0.0.1", 0, NULL, &g_srv, &g_port, err, sizeof err) == LT_OK
               ? 0
               : -1;
}

static int suite_clean(void) {
    lt_store_server_stop(g_srv);
    return 0;
}

/* NULL keys and NULL values with a length are errors with a message, not
 * crashes; a NULL value of length 0 is an empty value. */
static void test_null_arguments(void) {
    lt_store *s = connect_ok(g_port, NULL);
    void *v = NULL;
    size_t n = 0;
    int64_t c = 0;
    CU_ASSERT_EQUAL(lt_store_set(s, NULL, "x", 1), LT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_store_error(s), "the key is NULL"));
    CU_ASSERT_EQUAL(lt_store_get(s, NULL, &v, &n), LT_ERR_INVALID);
    CU_ASSERT_EQUAL(lt_store_try_get(s, NULL, &v, &n), LT_ERR_INVALID);
    CU_ASSERT_EQUAL(lt_store_add(s, NULL, 1, &c), LT_ERR_INVALID);
    CU_ASSERT_EQUAL(lt_store_delete(s, NULL), LT_ERR_INVALID);
    CU_ASSERT_EQUAL(lt_store_compare_set(s, NULL, NULL, 0, "v", 1, NULL, NULL), LT_ERR_INVALID);
    CU_ASSERT_EQUAL(lt_store_set(s, "nullval", NULL, 5), LT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_store_error(s), "is NULL with a length of 5"));
    CU_ASSERT_EQUAL(lt_store_compare_set(s, "nullval", NULL, 0, NULL, 3, NULL, NULL), LT_ERR_INVALID);
    CU_ASSERT_EQUAL(lt_store_set(s, "empty", NULL, 0), LT_OK);
    CU_ASSERT_EQUAL(lt_store_try_get(s, "empty", &v, &n), LT_OK);
    CU_ASSERT_EQUAL(n, 0);
    free(v);
    lt_store_close(s);
}

static void test_set_get_try_get_delete(void) {
    lt_store *s = connect_ok(g_port, NULL);
    void *v;
    size_t n;
    CU_ASSERT_EQUAL(lt_store_try_get(s, "a/missing", &v, &n), LT_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_store_error(s), "a/missing"));
    CU_ASSERT_EQUAL(lt_store_set(s, "a/x", "hello", 5), LT_OK);
    CU_ASSERT_EQUAL_FATAL(lt_store_get(s, "a/x", &v, &n), LT_OK);
    CU_ASSERT_EQUAL(n, 5);
    CU_ASSERT_EQUAL(memcmp(v, "hello", 5), 0);
    free(v);
    CU_ASSERT_EQUAL(lt_store_set(s, "a/x", "bye", 3), LT_OK); /* overwrite */
    CU_ASSERT_EQUAL_FATAL(lt_store_try_get(s, "a/x", &v, &n), LT_OK);
    CU_ASSERT_EQUAL(n, 3);
    CU_ASSERT_EQUAL(memcmp(v, "bye", 3), 0);
    free(v);
    CU_ASSERT_EQUAL(lt_store_set(s, "a/empty", NULL, 0), LT_OK); /* present, empty */
    CU_ASSERT_EQUAL_FATAL(lt_store_get(s, "a/empty", &v, &n), LT_OK);
    CU_ASSERT_EQUAL(n, 0);
    free(v);
    CU_ASSERT_EQUAL(lt_store_delete(s, "a/x"), LT_OK);
    CU_ASSERT_EQUAL(lt_store_try_get(s, "a/x", &v, &n), LT_ERR_NOT_FOUND);
    CU_ASSERT_EQUAL(lt_store_delete(s, "a/x"), LT_OK); /* idempotent */
    /* Bad arguments are refused on the client, without a round trip. */
    CU_ASSERT_EQUAL(lt_store_set(s, "", "x", 1), LT_ERR_INVALID);
    char longkey[LT_STORE_MAX_KEY + 2];
    memset(longkey, 'k', sizeof longkey - 1);
    longkey[sizeof longkey - 1] = 0;
    CU_ASSERT_EQUAL(lt_store_set(s, longkey, "x", 1), LT_ERR_INVALID);
    CU_ASSERT_EQUAL(lt_store_set(s, "a/big", "x", (size_t)LT_STORE_MAX_VALUE + 1), LT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_store_error(s), "at most"));
    longkey[LT_STORE_MAX_KEY] = 0; /* exactly the maximum is fine */
    CU_ASSERT_EQUAL(lt_store_set(s, longkey, "y", 1), LT_OK);
    lt_store_close(s);
}

static void test_large_value(void) {
    lt_store *s = connect_ok(g_port, NULL);
    size_t n = 8u << 20;
    unsigned char *big = malloc(n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    for (size_t i = 0; i < n; i++) big[i] = (unsigned char)(i * 131u + 7u);
    CU_ASSERT_EQUAL(lt_store_set(s, "big", big, n), LT_OK);
    void *v;
    size_t m;
    CU_ASSERT_EQUAL_FATAL(lt_store_get(s, "big", &v, &m), LT_OK);
    CU_ASSERT_EQUAL(m, n);
    CU_ASSERT_EQUAL(memcmp(v, big, n), 0);
    free(v);
    free(big);
    lt_store_close(s);
}

typedef struct {
    lt_store *s;
    const char *key;
    lt_status st;
    char val[32];
} getter;

static void *get_thread(void *arg) {
    getter *g = arg;
    void *v;
    size_t n;
    g->st = lt_store_get(g->s, g->key, &v, &n);
    if (g->st == LT_OK) {
        snprintf(g->val, sizeof g->val, "%.*s", (int)n, (char *)v);
        free(v);
    }
    return NULL;
}

static void test_blocking_get_released_by_set(void) {
    lt_store *a = connect_ok(g_port, NULL), *b;
    CU_ASSERT_EQUAL_FATAL(lt_store_clone(a, &b), LT_OK);
    lt_store_set_timeout(b, 20000);
    getter g = {b, "blk/key", LT_ERR_STATE, ""};
    pthread_t t;
    pthread_create(&t, NULL, get_thread, &g);
    /* Give the getter a moment to park; the result is the same either way. */
    usleep(50000);
    CU_ASSERT_EQUAL(lt_store_set(a, "blk/key", "v42", 3), LT_OK);
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(g.st, LT_OK);
    CU_ASSERT_STRING_EQUAL(g.val, "v42");
    lt_store_close(b);
    lt_store_close(a);
}

#define N_ADDERS 4
#define ADDS_EACH 250

typedef struct {
    lt_store *s;
    int64_t seen[ADDS_EACH];
    lt_status st;
} adder;

static void *add_thread(void *arg) {
    adder *a = arg;
    a->st = LT_OK;
    for (int i = 0; i < ADDS_EACH && a->st == LT_OK; i++) a->st = lt_store_add(a->s, "ctr", 1, &a->seen[i]);
    return NULL;
}

static void test_add_from_threads(void) {
    lt_store *base = connect_ok(g_port, NULL);
    adder ad[N_ADDERS];
    pthread_t t[N_ADDERS];
    for (int i = 0; i < N_ADDERS; i++) {
        CU_ASSERT_EQUAL_FATAL(lt_store_clone(base, &ad[i].s), LT_OK);
        pthread_create(&t[i], NULL, add_thread, &ad[i]);
    }
    static char hit[N_ADDERS * ADDS_EACH + 1];
    memset(hit, 0, sizeof hit);
    for (int i = 0; i < N_ADDERS; i++) {
        pthread_join(t[i], NULL);
        CU_ASSERT_EQUAL(ad[i].st, LT_OK);
        for (int j = 0; j < ADDS_EACH; j++) {
            int64_t v = ad[i].seen[j];
            CU_ASSERT(v >= 1 && v <= N_ADDERS * ADDS_EACH);
            if (v >= 1 && v <= N_ADDERS * ADDS_EACH) {
                CU_ASSERT_EQUAL(hit[v], 0); /* every value handed out once: atomic */
                hit[v] = 1;
            }
        }
        lt_store_close(ad[i].s);
    }
    int64_t final;
    CU_ASSERT_EQUAL(lt_store_add(base, "ctr", 0, &final), LT_OK);
    CU_ASSERT_EQUAL(final, N_ADDERS * ADDS_EACH);
    /* Counters read back as decimal text, and go negative. */
    void *v;
    size_t n;
    CU_ASSERT_EQUAL(lt_store_add(base, "ctr2", -5, &final), LT_OK);
    CU_ASSERT_EQUAL(final, -5);
    CU_ASSERT_EQUAL_FATAL(lt_store_get(base, "ctr2", &v, &n), LT_OK);
    CU_ASSERT(n == 2 && !memcmp(v, "-5", 2));
    free(v);
    /* A non-integer value cannot be added to. */
    CU_ASSERT_EQUAL(lt_store_set(base, "text", "abc", 3), LT_OK);
    CU_ASSERT_EQUAL(lt_store_add(base, "text", 1, &final), LT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_store_error(base), "integer"));
    lt_store_close(base);
}

static void test_compare_set(void) {
    lt_store *s = connect_ok(g_port, NULL);
    void *cur;
    size_t n;
    /* Only if absent: succeeds once. */
    CU_ASSERT_EQUAL(lt_store_compare_set(s, "cas", NULL, 0, "first", 5, &cur, &n), LT_OK);
    CU_ASSERT(n == 5 && !memcmp(cur, "first", 5));
    free(cur);
    CU_ASSERT_EQUAL(lt_store_compare_set(s, "cas", NULL, 0, "second", 6, &cur, &n), LT_OK);
    CU_ASSERT(n == 5 && !memcmp(cur, "first", 5));
    free(cur);
    /* Wrong expectation: unchanged, current returned. */
    CU_ASSERT_EQUAL(lt_store_compare_set(s, "cas", "nope", 4, "third", 5, &cur, &n), LT_OK);
    CU_ASSERT(n == 5 && !memcmp(cur, "first", 5));
    free(cur);
    /* Right expectation: swapped. */
    CU_ASSERT_EQUAL(lt_store_compare_set(s, "cas", "first", 5, "third", 5, &cur, &n), LT_OK);
    CU_ASSERT(n == 5 && !memcmp(cur, "third", 5));
    free(cur);
    /* Expecting a value of an absent key: nothing happens, current is absent. */
    CU_ASSERT_EQUAL(lt_store_compare_set(s, "cas/none", "x", 1, "y", 1, &cur, &n), LT_OK);
    CU_ASSERT_PTR_NULL(cur);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_EQUAL(lt_store_try_get(s, "cas/none", &cur, &n), LT_ERR_NOT_FOUND);
    lt_store_close(s);
}

typedef struct {
    lt_store *s;
    lt_status st;
} waiter;

static void *wait_thread(void *arg) {
    waiter *w = arg;
    const char *keys[] = {"w/one", "w/two", "w/three"};
    w->st = lt_store_wait(w->s, keys, 3, 20000);
    return NULL;
}

static void test_wait(void) {
    lt_store *a = connect_ok(g_port, NULL);
    waiter w = {connect_ok(g_port, NULL), LT_ERR_STATE};
    CU_ASSERT_EQUAL(lt_store_set(a, "w/one", "1", 1), LT_OK);
    pthread_t t;
    pthread_create(&t, NULL, wait_thread, &w);
    usleep(20000);
    CU_ASSERT_EQUAL(lt_store_add(a, "w/two", 1, NULL), LT_OK);
    CU_ASSERT_EQUAL(lt_store_compare_set(a, "w/three", NULL, 0, "z", 1, NULL, NULL), LT_OK);
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(w.st, LT_OK);
    /* Keys already there: returns at once; no keys: trivially done. */
    const char *keys[] = {"w/one", "w/two"};
    CU_ASSERT_EQUAL(lt_store_wait(a, keys, 2, 1000), LT_OK);
    CU_ASSERT_EQUAL(lt_store_wait(a, keys, 0, 1000), LT_OK);
    lt_store_close(w.s);
    lt_store_close(a);
}

static void test_timeouts_name_keys(void) {
    lt_store *s = connect_ok(g_port, NULL);
    const char *keys[] = {"w/one", "t/never"};
    CU_ASSERT_EQUAL(lt_store_wait(s, keys, 2, 200), LT_ERR_TIMEOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_store_error(s), "t/never"));
    lt_store_set_timeout(s, 200);
    void *v;
    size_t n;
    CU_ASSERT_EQUAL(lt_store_get(s, "t/never2", &v, &n), LT_ERR_TIMEOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_store_error(s), "t/never2"));
    /* The connection is still in step after a timeout. */
    CU_ASSERT_EQUAL(lt_store_set(s, "t/after", "ok", 2), LT_OK);
    CU_ASSERT_EQUAL(lt_store_get(s, "t/after", &v, &n), LT_OK);
    free(v);
    lt_store_close(s);
}

static void test_token(void) {
    lt_store_server *srv;
    int port;
    char err[512];
    CU_ASSERT_EQUAL_FATAL(lt_store_server_start("127.0.0.1", 0, "s3cret", &srv, &port, err, sizeof err), LT_OK);
    lt_store *s = NULL;
    lt_status st = lt_store_connect("127.0.0.1", port, "wrong", 5000, &s, err, sizeof err);
    CU_ASSERT_EQUAL(st, LT_ERR_INVALID);
    CU_ASSERT_PTR_NULL(s);
    char want[128];
    snprintf(want, sizeof want, "rendezvous store at 127.0.0.1:%d refused the token; set LT_RDZV_TOKEN", port);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
    /* No token at all (none given, none in the environment). */
    CU_ASSERT_EQUAL(lt_store_connect("127.0.0.1", port, NULL, 5000, &s, err, sizeof err), LT_ERR_INVALID);
    /* The right one, explicitly and from the environment. */
    s = connect_ok(port, "s3cret");
    CU_ASSERT_EQUAL(lt_store_set(s, "k", "v", 1), LT_OK);
    lt_store_close(s);
    setenv("LT_RDZV_TOKEN", "s3cret", 1);
    s = connect_ok(port, NULL);
    unsetenv("LT_RDZV_TOKEN");
    void *v;
    size_t n;
    CU_ASSERT_EQUAL(lt_store_get(s, "k", &v, &n), LT_OK);
    free(v);
    lt_store_close(s);
    lt_store_server_stop(srv);
}

/* A raw socket to the shared server. */
static int raw_connect(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)g_port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CU_ASSERT_EQUAL_FATAL(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* True when the server closed the connection (EOF or reset) within 10 s. */
static int closed_by_server(int fd) {
    struct pollfd pf = {fd, POLLIN, 0};
    char buf[256];
    for (;;) {
        if (poll(&pf, 1, 10000) <= 0) return 0;
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) return 1;
    }
}

static void put_hdr(uint8_t *h, uint8_t magic, uint8_t op, uint32_t len) {
    h[0] = magic;
    h[1] = LT_WIRE_VERSION;
    h[2] = op;
    h[3] = 0;
    h[4] = (uint8_t)len;
    h[5] = (uint8_t)(len >> 8);
    h[6] = (uint8_t)(len >> 16);
    h[7] = (uint8_t)(len >> 24);
}

static void send_hello(int fd) {
    uint8_t m[12];
    put_hdr(m, LT_WIRE_MAGIC, LT_OP_HELLO, 4);
    memset(m + 8, 0, 4);
    CU_ASSERT_EQUAL(send(fd, m, sizeof m, MSG_NOSIGNAL), (ssize_t)sizeof m);
    uint8_t r[8];
    CU_ASSERT_EQUAL(recv(fd, r, sizeof r, MSG_WAITALL), 8);
    CU_ASSERT_EQUAL(r[2], LT_REPLY_OK);
}

static void assert_server_serves(void) {
    lt_store *s = connect_ok(g_port, NULL);
    CU_ASSERT_EQUAL(lt_store_set(s, "alive", "1", 1), LT_OK);
    lt_store_close(s);
}

/* Silent connections: one that never says hello, and one that stops in the
 * middle of a request, are dropped after the stall time; an authenticated
 * client idle between requests is kept. (The server's stall time is
 * shortened to 300 ms here; it is 30 s by default.) */
static void test_stalled_connections(void) {
    lt_store_server_set_stall_ms(g_srv, 300);
    int quiet = raw_connect(); /* no hello */
    int half = raw_connect();  /* hello, then 3 bytes of a header */
    send_hello(half);
    CU_ASSERT_EQUAL(send(half, "\x4c\x01\x02", 3, MSG_NOSIGNAL), 3);
    int idle = raw_connect(); /* hello, then nothing */
    send_hello(idle);
    double t0 = lt_now();
    CU_ASSERT(closed_by_server(quiet));
    CU_ASSERT(closed_by_server(half));
    double took = lt_now() - t0;
    if (took > 5) printf("\n    stalled connections dropped after %.1f s\n", took);
    CU_ASSERT(took < 5);
    struct timespec ts = {0, 500 * 1000000L}; /* well past the stall time */
    nanosleep(&ts, NULL);
    struct pollfd pf = {idle, POLLIN, 0};
    CU_ASSERT_EQUAL(poll(&pf, 1, 0), 0); /* no EOF: the idle client is kept */
    close(quiet), close(half), close(idle);
    lt_store_server_set_stall_ms(g_srv, 0);
    assert_server_serves();
}

/* One malformed or cut-short message on a raw connection. */
#define OVER_MAX 0xFFFFFFFEu
typedef struct bad_msg {
    const char *what;
    bool hello;           /* a valid hello first */
    bool raw;             /* body only, no header: bytes that are not a frame */
    uint8_t op;           /* the header's request code ... */
    uint32_t len;         /* ... and the body length it claims (OVER_MAX: the op's maximum + 1) */
    const char *body;     /* the bytes sent after the header */
    size_t body_n;
    bool hang_up;         /* then shut the writing side: the rest never comes */
} bad_msg;

/* Sends m; the server must close the connection within 10 s, store nothing
 * under "cut" (the key the cases with a body carry), and go on serving others. */
static void expect_dropped(const bad_msg *m) {
    uint8_t buf[64];
    size_t n = 0;
    if (!m->raw) {
        put_hdr(buf, LT_WIRE_MAGIC, m->op, m->len == OVER_MAX ? (uint32_t)lt_wire_max_body(m->op) + 1 : m->len);
        n = 8;
    }
    memcpy(buf + n, m->body, m->body_n);
    n += m->body_n;
    int fd = raw_connect();
    if (m->hello) send_hello(fd);
    bool sent = send(fd, buf, n, MSG_NOSIGNAL) == (ssize_t)n;
    if (m->hang_up) shutdown(fd, SHUT_WR);
    bool dropped = closed_by_server(fd);
    close(fd);
    if (!sent || !dropped)
        fprintf(stderr, "\n    malformed message '%s': %s\n", m->what,
                !sent ? "could not be sent" : "the connection stayed open 10 s");
    CU_ASSERT(sent);
    CU_ASSERT(dropped);
    lt_store *s = connect_ok(g_port, NULL);
    void *v = NULL;
    size_t vn;
    lt_status st = lt_store_try_get(s, "cut", &v, &vn);
    if (st != LT_ERR_NOT_FOUND) fprintf(stderr, "\n    malformed message '%s': stored \"cut\"\n", m->what);
    CU_ASSERT_EQUAL(st, LT_ERR_NOT_FOUND);
    free(v);
    CU_ASSERT_EQUAL(lt_store_set(s, "alive", "1", 1), LT_OK);
    lt_store_close(s);
}

static void test_malformed_messages(void) {
    static const bad_msg cases[] = {
        {"garbage instead of a header", false, true, 0, 0, "GET / HTTP/1.0\r\n\r\n", 18, false},
        /* Oversized claims are dropped before anything is allocated. */
        {"oversized claim before hello", false, false, LT_OP_HELLO, 0xFFFFFFFFu, "", 0, false},
        {"oversized claim after hello", true, false, LT_OP_SET, OVER_MAX, "", 0, false},
        {"a request before hello", false, false, LT_OP_TRY_GET, 7, "\x03\0\0\0cut", 7, false},
        {"a key length past the body", true, false, LT_OP_TRY_GET, 7, "\xff\0\0\0cut", 7, false},
        {"an unknown op", true, false, 200, 0, "", 0, false},
        {"trailing bytes", true, false, LT_OP_DELETE, 9, "\x03\0\0\0cutxx", 9, false},
        /* 12 of 1000 bytes (the key and the value's length 989) arrive, the
         * rest never does: the server must not run the SET, and drops. */
        {"a body cut short by a hang-up", true, false, LT_OP_SET, 1000, "\x03\0\0\0cut\xdd\x03\0\0v", 12, true},
        {"a WAIT claiming too many keys", true, false, LT_OP_WAIT, 8, "\x10\0\0\0\xff\xff\0\0", 8, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) expect_dropped(&cases[i]);

    /* Another protocol version gets a clear answer, then the close. */
    uint8_t m[12];
    int fd = raw_connect();
    put_hdr(m, LT_WIRE_MAGIC, LT_OP_HELLO, 4);
    m[1] = LT_WIRE_VERSION + 1;
    memset(m + 8, 0, 4);
    CU_ASSERT_EQUAL(send(fd, m, 12, MSG_NOSIGNAL), 12);
    uint8_t r[8];
    CU_ASSERT_EQUAL(recv(fd, r, 8, MSG_WAITALL), 8);
    CU_ASSERT_EQUAL(r[2], LT_REPLY_BAD_VERSION);
    CU_ASSERT(closed_by_server(fd));
    close(fd);
    assert_server_serves();
}

/* A port free now: bind one, note it, close it. */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof a) &&
                       !getsockname(fd, (struct sockaddr *)&a, &len)
                   ? ntohs(a.sin_port)
                   : -1;
    if (fd >= 0) close(fd);
    return port;
}

static void test_unreachable_master(void) {
    int port = free_port(); /* nobody listens there */
    CU_ASSERT_FATAL(port > 0);
    lt_store *s = NULL;
    char err[512], want[128];
    CU_ASSERT_EQUAL(lt_store_connect("127.0.0.1", port, NULL, 300, &s, err, sizeof err), LT_ERR_TIMEOUT);
    CU_ASSERT_PTR_NULL(s);
    snprintf(want, sizeof want, "could not reach the rendezvous store at 127.0.0.1:%d within 0.3 s", port);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "MASTER_ADDR/MASTER_PORT"));
}

static void *late_server(void *arg) {
    int *port = arg;
    usleep(200000);
    lt_store_server *srv;
    char err[256];
    if (lt_store_server_start("127.0.0.1", *port, NULL, &srv, NULL, err, sizeof err) != LT_OK) {
        *port = -1;
        return NULL;
    }
    return srv;
}

/* The client starts first and keeps trying; the server comes up 0.2 s later
 * on that port. Should another program take the port in between (the
 * server cannot start), the attempt is repeated on another one; the test
 * fails, saying so, if that happens every time. */
static void test_connect_retries_until_master_is_up(void) {
    for (int attempt = 1; attempt <= 5; attempt++) {
        int port = free_port();
        CU_ASSERT_FATAL(port > 0);
        int server_port = port;
        pthread_t t;
        pthread_create(&t, NULL, late_server, &server_port);
        lt_store *s = NULL;
        char err[512];
        lt_status st = lt_store_connect("127.0.0.1", port, NULL, 20000, &s, err, sizeof err);
        void *srv;
        pthread_join(t, &srv);
        if (server_port < 0) { /* someone else took the port: whatever we reached, it was not ours */
            fprintf(stderr, "\n    connect retries: port %d was taken before the server started (attempt %d)\n",
                    port, attempt);
            lt_store_close(s);
            continue;
        }
        if (st != LT_OK) fprintf(stderr, "\n    connect retries: %s\n", err);
        CU_ASSERT_EQUAL(st, LT_OK);
        if (s) CU_ASSERT_EQUAL(lt_store_set(s, "late", "1", 1), LT_OK);
        lt_store_close(s);
        lt_store_server_stop(srv);
        return;
    }
    CU_FAIL("connect retries: the late server never got its port (taken 5 times): nothing was tested");
}

static void test_port_in_use(void) {
    lt_store_server *srv = NULL;
    char err[512], want[160];
    CU_ASSERT_EQUAL(lt_store_server_start("127.0.0.1", g_port, NULL, &srv, NULL, err, sizeof err), LT_ERR_IO);
    CU_ASSERT_PTR_NULL(srv);
    snprintf(want, sizeof want,
             "port %d on 127.0.0.1 is already in use; pick another --master-port or stop the other job",
             g_port);
    CU_ASSERT_STRING_EQUAL(err, want);
    assert_server_serves();
}

/* A server of another protocol version answering a request after the
 * handshake: the client fails with the version line (the reply's body, freed:
 * ASan builds report it otherwise) and the connection is gone. */
static void *other_version_server(void *arg) {
    int lfd = *(int *)arg;
    int fd = accept(lfd, NULL, NULL);
    uint8_t h[8], body[256];
    for (int req = 0; fd >= 0 && req < 2; req++) {
        if (recv(fd, h, 8, MSG_WAITALL) != 8) break;
        uint32_t n = (uint32_t)h[4] | (uint32_t)h[5] << 8 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 24;
        if (n > sizeof body || (n && recv(fd, body, n, MSG_WAITALL) != (ssize_t)n)) break;
        uint8_t r[8 + 16];
        if (req == 0) { /* hello: OK */
            put_hdr(r, LT_WIRE_MAGIC, LT_REPLY_OK, 0);
            send(fd, r, 8, MSG_NOSIGNAL);
        } else {        /* the request: BAD_VERSION, with a body */
            put_hdr(r, LT_WIRE_MAGIC, LT_REPLY_BAD_VERSION, 16);
            r[1] = LT_WIRE_VERSION + 1;
            memset(r + 8, 'x', 16);
            send(fd, r, sizeof r, MSG_NOSIGNAL);
        }
    }
    if (fd >= 0) close(fd);
    return NULL;
}

static void test_client_other_version(void) {
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    CU_ASSERT_FATAL(!bind(lfd, (struct sockaddr *)&a, sizeof a) && !listen(lfd, 1) &&
                    !getsockname(lfd, (struct sockaddr *)&a, &len));
    pthread_t t;
    pthread_create(&t, NULL, other_version_server, &lfd);
    lt_store *s = connect_ok(ntohs(a.sin_port), NULL);
    lt_status st = lt_store_set(s, "k", "v", 1);
    CU_ASSERT_EQUAL(st, LT_ERR_MISMATCH);
    char want[64];
    snprintf(want, sizeof want, "speaks protocol v%u, this lt v%u", LT_WIRE_VERSION + 1, LT_WIRE_VERSION);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_store_error(s), want));
    pthread_join(t, NULL);
    close(lfd);
    lt_store_close(s);
}

/* Garbage connections (a port scanner, a client retrying in a loop) cost a
 * few log lines per interval, not one each; the ones held back are counted,
 * one line per interval, so every connection is accounted for. Three rounds
 * an interval apart: each logs its first few again. */
static void test_bad_connections_rate_limited(void) {
    lt_store_server *srv;
    int port;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(lt_store_server_start("127.0.0.1", 0, NULL, &srv, &port, err, sizeof err), LT_OK);
    const int interval_ms = 300, burst = 5, n = 2001, rounds = 3;
    lt_store_server_set_warn_interval_ms(srv, interval_ms);
    char path[] = "/tmp/lt_test_store_log_XXXXXX";
    int logfd = mkstemp(path);
    CU_ASSERT_FATAL(logfd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(logfd, 2); /* the server's warnings, to be counted */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int dropped = 0;
    for (int i = 0; i < n; i++) {
        if (i && i % (n / rounds) == 0) usleep((interval_ms + 150) * 1000);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {0};
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd >= 0 && !connect(fd, (struct sockaddr *)&a, sizeof a) &&
            send(fd, "GET / HTTP/1.0\r\n\r\n", 18, MSG_NOSIGNAL) == 18 && closed_by_server(fd))
            dropped++; /* the server logged (or counted) it before it closed */
        if (fd >= 0) close(fd);
    }
    lt_store_server_stop(srv); /* logs the count still held back */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    FILE *f = fdopen(logfd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    rewind(f);
    char line[1024];
    int lines = 0, logged = 0, counts = 0;
    unsigned long held = 0;
    while (fgets(line, sizeof line, f)) {
        lines++;
        unsigned long k;
        const char *more = strstr(line, "rendezvous store: ");
        if (strstr(line, "dropped connection from 127.0.0.1:") && strstr(line, "bad magic")) logged++;
        else if (more && sscanf(more, "rendezvous store: %lu more warning(s)", &k) == 1) { held += k; counts++; }
        else fprintf(stderr, "\n    unexpected line: %s", line);
    }
    fclose(f);
    remove(path);
    /* Intervals begin at a warning, so at most one per interval_ms elapsed, plus the first. */
    int intervals = (int)(secs * 1000 / interval_ms) + 1;
    printf("\n    %d garbage connections in %.2f s: %d lines (%d logged, %lu counted in %d)", n, secs,
           lines, logged, held, counts);
    CU_ASSERT_EQUAL(dropped, n);
    CU_ASSERT_EQUAL((unsigned long)logged + held, (unsigned long)dropped);
    CU_ASSERT(logged <= burst * intervals);
    CU_ASSERT(logged >= burst * rounds);
    CU_ASSERT(counts <= intervals + 1);
    CU_ASSERT(counts >= 1);
    CU_ASSERT(lines == logged + counts);
}

static void test_server_stop_fails_clients(void) {
    lt_store_server *srv;
    int port;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(lt_store_server_start("127.0.0.1", 0, NULL, &srv, &port, err, sizeof err), LT_OK);
    lt_store *a = connect_ok(port, NULL);
    lt_store *b = connect_ok(port, NULL);
    lt_store_set_timeout(b, 20000);
    getter g = {b, "never", LT_OK, ""};
    pthread_t t;
    pthread_create(&t, NULL, get_thread, &g);
    usleep(50000);
    lt_store_server_stop(srv); /* the parked get sees the close, not its 20 s timeout */
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(g.st, LT_ERR_IO);
    lt_store_set_timeout(a, 300);
    CU_ASSERT_NOT_EQUAL(lt_store_set(a, "x", "1", 1), LT_OK);
    lt_store_close(a);
    lt_store_close(b);
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("store", suite_init, suite_clean);
    CU_add_test(s, "set/get/try_get/delete", test_set_get_try_get_delete);
    CU_add_test(s, "NULL keys and values", test_null_arguments);
    CU_add_test(s, "large value", test_large_value);
    CU_add_test(s, "blocking get released by set", test_blocking_get_released_by_set);
    CU_add_test(s, "add from threads", test_add_from_threads);
    CU_add_test(s, "compare_set", test_compare_set);
    CU_add_test(s, "wait", test_wait);
    CU_add_test(s, "timeouts name keys", test_timeouts_name_keys);
    CU_add_test(s, "token", test_token);
    CU_add_test(s, "malformed messages", test_malformed_messages);
    CU_add_test(s, "stalled connections dropped, idle ones kept", test_stalled_connections);
    CU_add_test(s, "unreachable master", test_unreachable_master);
    CU_add_test(s, "connect retries", test_connect_retries_until_master_is_up);
    CU_add_test(s, "port in use", test_port_in_use);
    CU_add_test(s, "server stop fails clients", test_server_stop_fails_clients);
    CU_add_test(s, "a server of another version: the client fails cleanly", test_client_other_version);
    CU_add_test(s, "warnings about bad connections are rate-limited", test_bad_connections_rate_limited);
    int rc = lt_cunit_run();
    return rc;
}
