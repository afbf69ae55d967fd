/* The rendezvous store server: the TCP key-value service behind lt_store
 * (lt/store.h). ltrun hosts one on node 0 so that it outlives any worker; a
 * program that embeds lt may host its own.
 *
 * The server runs on a thread of its own (one poll() loop for every client);
 * a blocking get or wait parks its connection without busy-waiting until a
 * set/add/compare_set makes it ready or its deadline passes. A malformed,
 * oversized or unauthenticated message makes the server drop that connection
 * with a log line (a few per interval: see lt_store_server_set_warn_interval_ms);
 * it never crashes nor allocates what a bad length claims. */
#ifndef LT_STORE_SERVER_H
#define LT_STORE_SERVER_H

#include "lt/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lt_store_server lt_store_server;

/* Listens on bind_host:port (bind_host NULL: every IPv4 interface; port 0:
 * the kernel picks a free one, returned in *bound_port) and starts the
 * server thread. token NULL: $LT_RDZV_TOKEN, if set and non-empty; "" or no
 * token: clients need none. Errors: LT_ERR_IO with "port 29500 on 127.0.0.1
 * is already in use; ..." when another process holds the port, LT_ERR_INVALID
 * for a bad host or token; err receives one line. Call from any thread. */
lt_status lt_store_server_start(const char *bind_host, int port, const char *token,
                                lt_store_server **out, int *bound_port, char *err,
                                size_t errlen);

/* lt_store_server_start in two halves, for a process that forks between
 * them: open binds and listens (clients may connect already; they wait in
 * the backlog) but starts no thread, run starts the thread. A program that
 * forks must not have the server thread running at the time: a child would
 * inherit whatever lock that thread held at that instant (ASan's allocator
 * lock deadlocked ddp_spawn's workers). stop also frees a server that was
 * opened and never run. */
lt_status lt_store_server_open(const char *bind_host, int port, const char *token,
                               lt_store_server **out, int *bound_port, char *err,
                               size_t errlen);
lt_status lt_store_server_run(lt_store_server *srv, char *err, size_t errlen);

/* Stops the thread (it leaves its poll() at once), closes every connection and
 * frees the server. Clients still connected see their connection close. NULL is
 * a no-op. Not from the server thread itself. */
void lt_store_server_stop(lt_store_server *srv);

/* How long a connection may go without its hello, or stay silent in the
 * middle of a request, before the server drops it (default 30 s; <= 0 sets
 * the default back). Between requests an authenticated client may idle. */
void lt_store_server_set_stall_ms(lt_store_server *srv, int ms);

/* Warnings about bad connections are logged at most 5 per interval, then one
 * line with the count of the others when the interval ends (default 10 s;
 * <= 0 sets the default back). */
void lt_store_server_set_warn_interval_ms(lt_store_server *srv, int ms);

#ifdef __cplusplus
}
#endif
#endif
