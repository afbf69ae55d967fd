/* The rendezvous store client's side of the wire (core/dist/store_client.c,
 * store_wire.c): the bytes a server sends back. A client whose connection is
 * one end of a socket pair runs the handshake and then requests, each reading
 * its reply frame from the input, until the connection is dropped or the
 * input ends. store_client.c is included, to give the client a connection
 * without a TCP server (store_alloc and hello are static).
 *
 * Input: byte 0 picks the first request of a fixed cycle (set, get, try_get,
 * add, compare_set, compare_set when absent, wait, delete); the rest is the
 * reply stream. Every value the client returns is freed. */
#include "fuzz_common.h"
#include "dist/store_client.c"
#include "common/ctx.h"

#define MAX_REQUESTS 64

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    lt_log_set_level(-1);
    return 0;
}

static lt_status one_request(lt_store *s, int op) {
    void *v = NULL;
    size_t n = 0;
    int64_t sum = 0;
    lt_status st;
    const char *keys[] = {"rank/0", "rank/1"};
    switch (op) {
    case 0: st = lt_store_set(s, "rank/0", "addr:1234", 9); break;
    case 1: st = lt_store_get(s, "rank/0", &v, &n); break;
    case 2: st = lt_store_try_get(s, "rank/1", &v, &n); break;
    case 3: st = lt_store_add(s, "counter", 1, &sum); break;
    case 4: st = lt_store_compare_set(s, "leader", "old", 3, "new", 3, &v, &n); break;
    case 5: st = lt_store_compare_set(s, "leader", NULL, 0, "me", 2, &v, &n); break;
    case 6: st = lt_store_wait(s, keys, 2, 1000); break;
    default: st = lt_store_delete(s, "rank/0"); break;
    }
    if (st == LT_OK && v) FUZZ_CHECK(n <= LT_STORE_MAX_VALUE);
    if (st != LT_OK) FUZZ_CHECK(lt_store_error(s)[0] || st == LT_ERR_TIMEOUT);
    free(v);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv)) abort();
    /* The replies wait in the socket; the client's requests pile up unread
     * in the other direction (a few KB: far below the socket's buffer). */
    size_t off = 1;
    while (off < size) {
        ssize_t w = send(sv[1], data + off, size - off, MSG_NOSIGNAL);
        FUZZ_CHECK(w > 0);
        off += (size_t)w;
    }
    shutdown(sv[1], SHUT_WR);

    lt_store *s = store_alloc("fuzz-server", 29500, "token", 1000);
    FUZZ_CHECK(s != NULL);
    s->fd = sv[0];
    lt_status st = hello(s, lt_now() + 5);
    /* A dropped connection would make the next request reconnect: stop there. */
    for (int i = 0; st == LT_OK && s->fd >= 0 && i < MAX_REQUESTS; i++)
        (void)one_request(s, (data[0] + i) % 8);
    lt_store_close(s);
    close(sv[1]);
    return 0;
}
