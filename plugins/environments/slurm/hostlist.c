/* First host of a SLURM compressed host list. Grammar, as scontrol writes it:
 *   list    = host ("," host)*
 *   host    = (text | "[" range ("," range)* "]")+
 *   range   = digits ["-" digits]        lo <= hi, zero padding kept
 * The first host is the first `host` with every bracket replaced by the low end
 * of its first range. Brackets do not nest. */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "hostlist.h"

typedef struct {
    const char *list; /* for offsets in messages */
    const char *p;
    char *buf;
    size_t len, n;
    bool copying; /* still inside the first host */
    char *err;
    size_t errlen;
} hl_parser;

static int hl_fail(hl_parser *h, const char *what) {
    snprintf(h->err, h->errlen, "%s at offset %zu", what, (size_t)(h->p - h->list));
    return -1;
}

static int hl_emit(hl_parser *h, const char *s, size_t n) {
    if (!h->copying) return 0;
    if (h->n + n >= h->len) {
        snprintf(h->err, h->errlen, "the first host name is longer than %zu bytes", h->len ? h->len - 1 : 0);
        return -1;
    }
    memcpy(h->buf + h->n, s, n);
    h->n += n;
    h->buf[h->n] = 0;
    return 0;
}

/* Numeric comparison of two digit strings of any length (padding aside). */
static int hl_cmp_digits(const char *a, size_t an, const char *b, size_t bn) {
    while (an > 1 && *a == '0') a++, an--;
    while (bn > 1 && *b == '0') b++, bn--;
    if (an != bn) return an < bn ? -1 : 1;
    return memcmp(a, b, an);
}

static size_t hl_digits(hl_parser *h) {
    size_t n = 0;
    while (isdigit((unsigned char)h->p[n])) n++;
    return n;
}

/* One "lo[-hi]" inside brackets; the first one of the first host is emitted. */
static int hl_range(hl_parser *h, bool first) {
    const char *lo = h->p;
    size_t lon = hl_digits(h);
    if (!lon) return hl_fail(h, "expected a number inside '[...]'");
    h->p += lon;
    if (first && hl_emit(h, lo, lon)) return -1;
    if (*h->p != '-') return 0;
    h->p++;
    const char *hi = h->p;
    size_t hin = hl_digits(h);
    if (!hin) return hl_fail(h, "expected a number after '-'");
    if (hl_cmp_digits(lo, lon, hi, hin) > 0) return hl_fail(h, "range runs backwards");
    h->p += hin;
    return 0;
}

/* "[" range ("," range)* "]", with h->p on the '['. */
static int hl_bracket(hl_parser *h) {
    const char *open = h->p++;
    for (bool first = true;; first = false) {
        if (hl_range(h, first)) return -1;
        if (*h->p == ']') break;
        if (*h->p == ',') {
            h->p++;
            continue;
        }
        if (!*h->p) {
            h->p = open;
            return hl_fail(h, "'[' is never closed");
        }
        return hl_fail(h, "unexpected character inside '[...]'");
    }
    h->p++;
    return 0;
}

/* One host: text and brackets up to a top-level ',' or the end. */
static int hl_host(hl_parser *h) {
    const char *start = h->p;
    while (*h->p && *h->p != ',') {
        char c = *h->p;
        if (c == '[') {
            if (hl_bracket(h)) return -1;
        } else if (c == ']') {
            return hl_fail(h, "']' without '['");
        } else if (isspace((unsigned char)c)) {
            return hl_fail(h, "whitespace in a host name");
        } else {
            if (hl_emit(h, h->p, 1)) return -1;
            h->p++;
        }
    }
    if (h->p == start) return hl_fail(h, "empty host name");
    return 0;
}

int slurm_hostlist_first(const char *list, char *buf, size_t len, char *err, size_t errlen) {
    hl_parser h = {list, list, buf, len, 0, true, err, errlen};
    if (!buf || !len) {
        snprintf(err, errlen, "no room for the host name");
        return -1;
    }
    buf[0] = 0;
    for (;;) {
        if (hl_host(&h)) return -1;
        if (!*h.p) return 0;
        h.p++; /* the ',' */
        h.copying = false;
    }
}
