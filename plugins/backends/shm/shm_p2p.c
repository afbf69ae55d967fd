/* The shm backend's point-to-point rings (shm_p2p.h).
 *
 * Ring (src -> dst): a cache line with the producer's byte count, one with
 * the consumer's, then RING bytes. Each message is a 16-byte header (tag,
 * size) then its bytes. Single producer (src's waiting thread), single
 * consumer (dst's): counters only grow; the producer publishes data with a
 * release store of `written`, the consumer frees space with one of `read`. */
#include "shm_p2p.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RING ((size_t)256 << 10)
#define RING_CAP_TOTAL ((size_t)64 << 20) /* all of a group's rings together */
#define HDR 16

typedef struct ring {
    _Atomic uint64_t written;
    unsigned char pad0[56];
    _Atomic uint64_t read;
    unsigned char pad1[56];
    unsigned char data[];
} ring;

struct shm_p2p_op {
    bool send;
    unsigned char *buf;
    size_t bytes, moved; /* payload bytes moved so far */
    bool hdr_done;
    int peer;
    uint32_t tag;
    bool done;
    lt_status st;
    char err[256];
    shm_p2p_op *next;
};

struct shm_p2p {
    unsigned char *base;
    int world, rank;
    size_t ring_bytes;
    shm_p2p_op *head, *tail; /* pending, in issue order */
};

/* 256 KiB per ordered pair, halved until all of them fit in RING_CAP_TOTAL;
 * a group too large for 16 KiB rings (more than 64 ranks) gets none, and
 * its send/recv are refused (shm_p2p_new returns NULL rings: see
 * shm_p2p_usable). */
static size_t ring_size(int world) {
    size_t pairs = (size_t)world * (size_t)world;
    size_t r = RING;
    while (r > ((size_t)16 << 10) && pairs * (r + 128) > RING_CAP_TOTAL) r /= 2;
    return pairs * (r + 128) > RING_CAP_TOTAL ? 0 : r;
}

size_t shm_p2p_bytes(int world) {
    size_t r = ring_size(world);
    return r ? (size_t)world * (size_t)world * (r + 128) : 0;
}

bool shm_p2p_usable(const shm_p2p *p) { return p->ring_bytes > 0; }

shm_p2p *shm_p2p_new(void *base, int world, int rank) {
    shm_p2p *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->base = base;
    p->world = world;
    p->rank = rank;
    p->ring_bytes = ring_size(world);
    return p;
}

void shm_p2p_free(shm_p2p *p) {
    if (!p) return;
    while (p->head) {
        shm_p2p_op *n = p->head->next;
        free(p->head);
        p->head = n;
    }
    free(p);
}

static ring *ring_of(shm_p2p *p, int src, int dst) {
    return (ring *)(p->base + ((size_t)src * (size_t)p->world + (size_t)dst) * (p->ring_bytes + 128));
}

shm_p2p_op *shm_p2p_issue(shm_p2p *p, bool send, void *buf, size_t bytes, int peer, uint32_t tag) {
    shm_p2p_op *op = calloc(1, sizeof *op);
    if (!op) return NULL;
    *op = (shm_p2p_op){.send = send, .buf = buf, .bytes = bytes, .peer = peer, .tag = tag};
    if (p->tail) p->tail->next = op;
    else p->head = op;
    p->tail = op;
    return op;
}

/* Copies n bytes into / out of the ring at stream position pos, wrapping. */
static void ring_put(shm_p2p *p, ring *r, uint64_t pos, const unsigned char *src, size_t n) {
    size_t at = (size_t)(pos % p->ring_bytes), first = p->ring_bytes - at < n ? p->ring_bytes - at : n;
    memcpy(r->data + at, src, first);
    memcpy(r->data, src + first, n - first);
}

static void ring_get(shm_p2p *p, ring *r, uint64_t pos, unsigned char *dst, size_t n) {
    size_t at = (size_t)(pos % p->ring_bytes), first = p->ring_bytes - at < n ? p->ring_bytes - at : n;
    memcpy(dst, r->data + at, first);
    memcpy(dst + first, r->data, n - first);
}

static bool pump_send(shm_p2p *p, shm_p2p_op *op) {
    ring *r = ring_of(p, p->rank, op->peer);
    uint64_t w = atomic_load_explicit(&r->written, memory_order_relaxed);
    uint64_t free_bytes = p->ring_bytes - (w - atomic_load_explicit(&r->read, memory_order_acquire));
    bool moved = false;
    if (!op->hdr_done) {
        if (free_bytes < HDR) return false;
        unsigned char h[HDR] = {0};
        uint64_t size = op->bytes;
        memcpy(h, &op->tag, 4);
        memcpy(h + 8, &size, 8);
        ring_put(p, r, w, h, HDR);
        w += HDR, free_bytes -= HDR;
        op->hdr_done = moved = true;
    }
    size_t n = op->bytes - op->moved < free_bytes ? op->bytes - op->moved : (size_t)free_bytes;
    if (n) {
        ring_put(p, r, w, op->buf + op->moved, n);
        w += n, op->moved += n, moved = true;
    }
    if (moved) atomic_store_explicit(&r->written, w, memory_order_release);
    if (op->moved == op->bytes) op->done = true;
    return moved;
}

static bool pump_recv(shm_p2p *p, shm_p2p_op *op) {
    ring *r = ring_of(p, op->peer, p->rank);
    uint64_t rd = atomic_load_explicit(&r->read, memory_order_relaxed);
    uint64_t avail = atomic_load_explicit(&r->written, memory_order_acquire) - rd;
    bool moved = false;
    if (!op->hdr_done) {
        if (avail < HDR) return false;
        unsigned char h[HDR];
        ring_get(p, r, rd, h, HDR);
        uint32_t tag;
        uint64_t size;
        memcpy(&tag, h, 4);
        memcpy(&size, h + 8, 8);
        if (tag != op->tag || size != op->bytes) {
            /* leave the stream as it is: the group fails, nothing reads on */
            op->st = LT_ERR_MISMATCH;
            snprintf(op->err, sizeof op->err,
                     "rank %d sent a message of %llu bytes with tag %u where this rank receives %zu bytes with tag %u; "
                     "both ranks must issue their sends and recvs in the same order",
                     op->peer, (unsigned long long)size, tag, op->bytes, op->tag);
            op->done = true;
            return true;
        }
        rd += HDR, avail -= HDR;
        op->hdr_done = moved = true;
    }
    size_t n = op->bytes - op->moved < avail ? op->bytes - op->moved : (size_t)avail;
    if (n) {
        ring_get(p, r, rd, op->buf + op->moved, n);
        rd += n, op->moved += n, moved = true;
    }
    if (moved) atomic_store_explicit(&r->read, rd, memory_order_release);
    if (op->moved == op->bytes) op->done = true;
    return moved;
}

bool shm_p2p_progress(shm_p2p *p) {
    bool any = false;
    for (shm_p2p_op *op = p->head; op; op = op->next) {
        if (op->done) continue;
        /* a pair's stream is ordered: only its oldest pending op moves */
        bool blocked = false;
        for (shm_p2p_op *e = p->head; e != op; e = e->next)
            if (!e->done && e->send == op->send && e->peer == op->peer) blocked = true;
        if (blocked) continue;
        any |= op->send ? pump_send(p, op) : pump_recv(p, op);
    }
    return any;
}

bool shm_p2p_done(const shm_p2p_op *op, lt_status *st, const char **err) {
    if (!op->done) return false;
    *st = op->st;
    *err = op->err;
    return true;
}

bool shm_p2p_pending(const shm_p2p *p) {
    for (const shm_p2p_op *op = p->head; op; op = op->next)
        if (!op->done) return true;
    return false;
}

void shm_p2p_fail_all(shm_p2p *p, lt_status st, const char *why) {
    for (shm_p2p_op *op = p->head; op; op = op->next) {
        if (op->done) continue;
        op->done = true;
        op->st = st;
        snprintf(op->err, sizeof op->err, "%s", why);
    }
}

void shm_p2p_release(shm_p2p *p, shm_p2p_op *op) {
    shm_p2p_op **at = &p->head, *prev = NULL;
    while (*at && *at != op) prev = *at, at = &(*at)->next;
    if (!*at) return;
    *at = op->next;
    if (p->tail == op) p->tail = prev;
    free(op);
}
