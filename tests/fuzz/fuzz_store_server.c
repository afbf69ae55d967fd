/* The rendezvous store server's side of the wire (core/dist/store_server.c,
 * store_wire.c, store_table.c): the bytes clients send. The server's own
 * connection code runs: take_header, conn_read (bodies that grow only as
 * bytes arrive), run_request and the table, parking of get and wait, their
 * wake-up by another connection's set, and the timeout reply.
 *
 * store_server.c is included (its connection functions are static); the
 * server thread and listening socket are not used. Two connections are fed
 * over socket pairs; the server's replies are read and dropped.
 *
 * Input: byte 0, flags (bit 0: the server requires the token "fuzz-token");
 * bytes 1-2 (big endian): how many of the remaining bytes connection A sends,
 * the rest goes to connection B. A is served until it parks, closes or
 * waits for data, then B, and so on; a parked connection whose peer cannot
 * wake it gets its timeout. */
#include "fuzz_common.h"
#include "dist/store_server.c"
#include "common/ctx.h"

#define FUZZ_TOKEN "fuzz-token"
#define MAX_ROUNDS 4096

typedef struct feed {
    conn *c;
    int peer;               /* the client's end */
    const uint8_t *data;
    size_t size, off;
    bool shut;
} feed;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    lt_log_set_level(-1); /* conn_drop logs each dropped connection */
    return 0;
}

static void feed_open(feed *f, const uint8_t *data, size_t size) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv)) abort();
    conn *c = calloc(1, sizeof *c);
    FUZZ_CHECK(c != NULL);
    c->fd = sv[0];
    c->stall_at = lt_now() + 3600; /* as accept_all sets it; never reached here */
    snprintf(c->peer, sizeof c->peer, "fuzz");
    *f = (feed){.c = c, .peer = sv[1], .data = data, .size = size};
}

/* Moves client bytes in and server replies out, as far as the sockets take them. */
static void feed_pump(feed *f) {
    while (f->off < f->size) {
        ssize_t n = send(f->peer, f->data + f->off, f->size - f->off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n <= 0) break;
        f->off += (size_t)n;
    }
    if (f->off == f->size && !f->shut) {
        shutdown(f->peer, SHUT_WR);
        f->shut = true;
    }
    uint8_t sink[4096];
    while (recv(f->peer, sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
}

/* One turn of the poll loop for this connection; true when something moved. */
static bool feed_turn(lt_store_server *s, feed *f) {
    conn *c = f->c;
    if (c->dead) return false;
    size_t before_off = f->off, got = c->hdr_got + c->body_got;
    bool was_parked = c->parked;
    feed_pump(f);
    if (c->out_off < c->out.len) conn_flush(s, c);
    if (!c->dead && !c->parked) conn_read(s, c);
    return c->dead || f->off != before_off || c->parked != was_parked ||
           c->hdr_got + c->body_got != got;
}

static void feed_close(feed *f) {
    if (!f->c->dead) close(f->c->fd);
    conn_free(f->c);
    close(f->peer);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    size_t rest = size - 3, split = (size_t)data[1] << 8 | data[2];
    if (split > rest) split = rest;

    lt_store_server s;
    memset(&s, 0, sizeof s);
    atomic_init(&s.stall_ms, STALL_MS_DEFAULT);
    s.listen_fd = s.wake[0] = s.wake[1] = -1;
    if (data[0] & 1) {
        s.has_token = true;
        s.token_len = strlen(FUZZ_TOKEN);
        memcpy(s.token, FUZZ_TOKEN, s.token_len);
    }
    s.table = lt_store_table_new();
    FUZZ_CHECK(s.table != NULL);
    feed f[2];
    feed_open(&f[0], data + 3, split);
    feed_open(&f[1], data + 3 + split, rest - split);
    conn *conns[2] = {f[0].c, f[1].c};
    s.conns = conns;
    s.nconns = s.cap = 2;

    for (int round = 0; round < MAX_ROUNDS && !(f[0].c->dead && f[1].c->dead); round++) {
        bool moved = feed_turn(&s, &f[0]);
        moved |= feed_turn(&s, &f[1]);
        if (moved) continue;
        /* Nothing moves: every live connection is parked, so their deadlines pass. */
        for (int i = 0; i < 2; i++) {
            FUZZ_CHECK(f[i].c->dead || f[i].c->parked || f[i].c->out_off < f[i].c->out.len);
            if (f[i].c->parked) f[i].c->deadline = 0;
        }
        expire_parked(&s);
    }
    FUZZ_CHECK(f[0].c->dead && f[1].c->dead);
    feed_close(&f[0]);
    feed_close(&f[1]);
    lt_store_table_free(s.table);
    return 0;
}
