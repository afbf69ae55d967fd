#include <stdlib.h>
#include <string.h>
#include "buckets.h"

lt_status buckets_cut(size_t total, size_t elem_size, double first_mb, double cap_mb,
                      lt_bucket_view **out, size_t *n) {
    size_t cap = (size_t)(cap_mb * 1048576.0) / elem_size;
    size_t first = (size_t)(first_mb * 1048576.0) / elem_size;
    if (cap < 1) cap = 1;
    if (first < 1) first = cap;
    size_t count = 0;
    for (size_t left = total, i = 0; left > 0; i++, count++) {
        size_t c = i == 0 ? first : cap;
        left -= c < left ? c : left;
    }
    lt_bucket_view *v = calloc(count ? count : 1, sizeof *v);
    if (!v) return LT_ERR_NOMEM;
    size_t end = total;
    for (size_t i = 0; i < count; i++) {
        size_t c = i == 0 ? first : cap;
        if (c > end) c = end;
        v[i].offset = end - c;
        v[i].count = c;
        end -= c;
    }
    *out = v;
    *n = count;
    return LT_OK;
}

lt_status buckets_adopt(bucket_plan *p, const lt_bucket_view *v, size_t n) {
    memset(p, 0, sizeof *p);
    p->b = calloc(n ? n : 1, sizeof *p->b);
    if (!p->b) return LT_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        p->b[i].start = v[i].offset;
        p->b[i].count = v[i].count;
    }
    p->n = (int)n;
    buckets_reset(p);
    return LT_OK;
}

void buckets_free(bucket_plan *p) {
    free(p->b);
    memset(p, 0, sizeof *p);
}

void buckets_reset(bucket_plan *p) {
    for (int i = 0; i < p->n; i++) p->b[i].pending = p->b[i].count;
    p->next_launch = 0;
}

int buckets_mark_ready(bucket_plan *p, size_t offset, size_t count) {
    size_t lo = offset, hi = offset + count;
    for (int i = 0; i < p->n; i++) {
        bucket *b = &p->b[i];
        size_t s = b->start > lo ? b->start : lo;
        size_t e = b->start + b->count < hi ? b->start + b->count : hi;
        if (s < e) b->pending -= e - s;
    }
    int ready = 0;
    for (int i = p->next_launch; i < p->n && p->b[i].pending == 0; i++) ready++;
    return ready;
}
