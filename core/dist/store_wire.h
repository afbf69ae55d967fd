/* The rendezvous store's wire protocol, shared by the client (store_client.c) and the
 * server (store_server.c). Internal to liblt.
 *
 * Every message, either way, is one frame:
 *
 *     u8  magic    LT_WIRE_MAGIC
 *     u8  version  LT_WIRE_VERSION
 *     u8  code     request: an lt_wire_op; reply: an lt_wire_reply
 *     u8  flags    LT_WIRE_F_*
 *     u32 length   of the body that follows (little endian)
 *     ... body     fields: u32/i64 (little endian) and byte strings (u32 length + bytes)
 *
 * Requests and their bodies (a connection carries one request at a time; the
 * reply comes before the next request is read):
 *
 *     HELLO    str token                         -> OK | BAD_TOKEN
 *     SET      str key, str value                -> OK
 *     GET      u32 timeout_ms, str key           -> OK str value | TIMEOUT
 *     TRY_GET  str key                           -> OK str value | NOT_FOUND
 *     ADD      str key, i64 delta                -> OK i64 value | BAD_VALUE
 *     CAS      str key, str expected, str desired-> OK str current
 *              (flags & LT_WIRE_F_ABSENT: expected means "key absent")
 *     WAIT     u32 timeout_ms, u32 n, n x str key -> OK | TIMEOUT
 *     DELETE   str key                           -> OK
 *
 * The first request on a connection must be HELLO. Every length is checked
 * against the per-op maximum before anything is allocated; a frame that breaks
 * a rule makes the server drop the connection. Counters (ADD) are stored as
 * decimal text so GET of a counter reads "3". */
#ifndef LT_STORE_WIRE_H
#define LT_STORE_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include "lt/store.h"

#define LT_WIRE_MAGIC 0xA7u
#define LT_WIRE_VERSION 1u
#define LT_WIRE_HDR 8u
#define LT_WIRE_MAX_WAIT_KEYS 4096u
#define LT_WIRE_MAX_TOKEN 256u
#define LT_WIRE_F_ABSENT 0x01u

typedef enum lt_wire_op {
    LT_OP_HELLO = 1,
    LT_OP_SET = 2,
    LT_OP_GET = 3,
    LT_OP_TRY_GET = 4,
    LT_OP_ADD = 5,
    LT_OP_CAS = 6,
    LT_OP_WAIT = 7,
    LT_OP_DELETE = 8,
} lt_wire_op;

typedef enum lt_wire_reply {
    LT_REPLY_OK = 0,
    LT_REPLY_NOT_FOUND = 1,
    LT_REPLY_TIMEOUT = 2,
    LT_REPLY_BAD_TOKEN = 3,
    LT_REPLY_BAD_VALUE = 4,   /* ADD on a key whose value is not an integer */
    LT_REPLY_BAD_VERSION = 5, /* the reply header carries the server's version */
} lt_wire_reply;

/* Largest body a request with this op may carry; 0 for an unknown op. */
size_t lt_wire_max_body(unsigned op);
const char *lt_wire_op_name(unsigned op);

/* A growable output buffer. On allocation failure `failed` is set and further
 * appends are ignored, so a caller checks once at the end. */
typedef struct lt_wbuf {
    uint8_t *p;
    size_t len, cap;
    int failed;
} lt_wbuf;

void lt_wbuf_free(lt_wbuf *b);
/* Starts a frame (header with a length placeholder). */
void lt_wbuf_begin(lt_wbuf *b, unsigned code, unsigned flags);
/* Writes the body length of the frame begun at `start` into its header. */
void lt_wbuf_end(lt_wbuf *b, size_t start);
void lt_wbuf_u32(lt_wbuf *b, uint32_t v);
void lt_wbuf_i64(lt_wbuf *b, int64_t v);
void lt_wbuf_str(lt_wbuf *b, const void *s, size_t n);

/* A bounds-checked cursor over a received body. Any read past the end, or of
 * a string longer than `max`, sets `bad` and yields zeros. */
typedef struct lt_rbuf {
    const uint8_t *p;
    size_t len, off;
    int bad;
} lt_rbuf;

uint32_t lt_rbuf_u32(lt_rbuf *r);
int64_t lt_rbuf_i64(lt_rbuf *r);
const uint8_t *lt_rbuf_str(lt_rbuf *r, size_t max, size_t *n);

static inline uint32_t lt_wire_get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#endif
