/* Framing and field encoding of the rendezvous store protocol (see store_wire.h). */
#include <stdlib.h>
#include <string.h>
#include "store_wire.h"

#define STR_MAX(n) (4u + (size_t)(n))

size_t lt_wire_max_body(unsigned op) {
    switch (op) {
    case LT_OP_HELLO: return STR_MAX(LT_WIRE_MAX_TOKEN);
    case LT_OP_SET: return STR_MAX(LT_STORE_MAX_KEY) + STR_MAX(LT_STORE_MAX_VALUE);
    case LT_OP_GET: return 4 + STR_MAX(LT_STORE_MAX_KEY);
    case LT_OP_TRY_GET: return STR_MAX(LT_STORE_MAX_KEY);
    case LT_OP_ADD: return STR_MAX(LT_STORE_MAX_KEY) + 8;
    case LT_OP_CAS: return STR_MAX(LT_STORE_MAX_KEY) + 2 * STR_MAX(LT_STORE_MAX_VALUE);
    case LT_OP_WAIT: return 8 + (size_t)LT_WIRE_MAX_WAIT_KEYS * STR_MAX(LT_STORE_MAX_KEY);
    case LT_OP_DELETE: return STR_MAX(LT_STORE_MAX_KEY);
    }
    return 0;
}

const char *lt_wire_op_name(unsigned op) {
    static const char *const names[] = {"?",   "hello", "set",  "get",
                                        "try_get", "add", "compare_set", "wait", "delete"};
    return op < sizeof names / sizeof names[0] ? names[op] : "?";
}

void lt_wbuf_free(lt_wbuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

static uint8_t *wbuf_grow(lt_wbuf *b, size_t n) {
    if (b->failed) return NULL;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return NULL;
        }
        b->p = p;
        b->cap = cap;
    }
    uint8_t *at = b->p + b->len;
    b->len += n;
    return at;
}

static void put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

void lt_wbuf_begin(lt_wbuf *b, unsigned code, unsigned flags) {
    uint8_t *p = wbuf_grow(b, LT_WIRE_HDR);
    if (!p) return;
    p[0] = LT_WIRE_MAGIC;
    p[1] = LT_WIRE_VERSION;
    p[2] = (uint8_t)code;
    p[3] = (uint8_t)flags;
    put_u32(p + 4, 0);
}

void lt_wbuf_end(lt_wbuf *b, size_t start) {
    if (b->failed) return;
    put_u32(b->p + start + 4, (uint32_t)(b->len - start - LT_WIRE_HDR));
}

void lt_wbuf_u32(lt_wbuf *b, uint32_t v) {
    uint8_t *p = wbuf_grow(b, 4);
    if (p) put_u32(p, v);
}

void lt_wbuf_i64(lt_wbuf *b, int64_t v) {
    uint8_t *p = wbuf_grow(b, 8);
    if (!p) return;
    put_u32(p, (uint32_t)((uint64_t)v & 0xffffffffu));
    put_u32(p + 4, (uint32_t)((uint64_t)v >> 32));
}

void lt_wbuf_str(lt_wbuf *b, const void *s, size_t n) {
    lt_wbuf_u32(b, (uint32_t)n);
    uint8_t *p = wbuf_grow(b, n);
    if (p && n) memcpy(p, s, n);
}

uint32_t lt_rbuf_u32(lt_rbuf *r) {
    if (r->bad || r->len - r->off < 4) {
        r->bad = 1;
        return 0;
    }
    uint32_t v = lt_wire_get_u32(r->p + r->off);
    r->off += 4;
    return v;
}

int64_t lt_rbuf_i64(lt_rbuf *r) {
    uint64_t lo = lt_rbuf_u32(r);
    uint64_t hi = lt_rbuf_u32(r);
    return (int64_t)(lo | hi << 32);
}

const uint8_t *lt_rbuf_str(lt_rbuf *r, size_t max, size_t *n) {
    size_t len = lt_rbuf_u32(r);
    if (r->bad || len > max || r->len - r->off < len) {
        r->bad = 1;
        *n = 0;
        return (const uint8_t *)"";
    }
    const uint8_t *s = r->p + r->off;
    r->off += len;
    *n = len;
    return s;
}
