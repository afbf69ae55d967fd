/* Client of the rendezvous store: a TCP key-value service at
 * MASTER_ADDR:MASTER_PORT hosted by ltrun on node 0 (or by rank 0's process when
 * no launcher hosts it). Plugins get a connected client from the run; the gloo
 * backend adapts it to gloo::rendezvous::Store, NCCL sends its unique id with it.
 *
 * Every call is blocking and bounded by the store's timeout. A client may be
 * used from one thread at a time; lt_store_clone gives another connection for
 * another thread. Keys are at most LT_STORE_MAX_KEY bytes, values at most
 * LT_STORE_MAX_VALUE. */
#ifndef LT_STORE_H
#define LT_STORE_H

#include "lt/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LT_STORE_MAX_KEY 1024
#define LT_STORE_MAX_VALUE (64u << 20)

typedef struct lt_store lt_store;

/* Connect to host:port, presenting `token` (NULL: $LT_RDZV_TOKEN or none),
 * retrying until timeout_ms. err receives a one-line message on failure. */
LT_API lt_status lt_store_connect(const char *host, int port, const char *token, int timeout_ms,
                                  lt_store **out, char *err, size_t errlen);
LT_API lt_status lt_store_clone(lt_store *s, lt_store **out);
LT_API void lt_store_close(lt_store *s);
/* Timeout of each blocking call (wait, get), default 300 s. */
LT_API void lt_store_set_timeout(lt_store *s, int timeout_ms);

LT_API lt_status lt_store_set(lt_store *s, const char *key, const void *val, size_t len);
/* Blocks until the key exists (or timeout). *val is malloc'ed; free() it. */
LT_API lt_status lt_store_get(lt_store *s, const char *key, void **val, size_t *len);
/* Non-blocking: LT_ERR_NOT_FOUND when the key is absent. */
LT_API lt_status lt_store_try_get(lt_store *s, const char *key, void **val, size_t *len);
/* Atomically adds delta to an integer key (absent = 0) and returns the new value. */
LT_API lt_status lt_store_add(lt_store *s, const char *key, int64_t delta, int64_t *out);
/* Sets key to desired if its value equals expected (expected_len 0 and
 * expected NULL: only if absent). *current receives the value after the call
 * (malloc'ed). */
LT_API lt_status lt_store_compare_set(lt_store *s, const char *key, const void *expected,
                                      size_t expected_len, const void *desired, size_t desired_len,
                                      void **current, size_t *current_len);
/* Waits until every key exists. */
LT_API lt_status lt_store_wait(lt_store *s, const char *const *keys, size_t nkeys, int timeout_ms);
LT_API lt_status lt_store_delete(lt_store *s, const char *key);
/* Last error message of this client ("" when none). */
LT_API const char *lt_store_error(const lt_store *s);

#ifdef __cplusplus
}
#endif
#endif
