/* Chained hash table of the rendezvous store (see store_table.h). A job has at
 * most a few thousand keys, so FNV-1a and doubling at load factor 1 are plenty. */
#include <stdlib.h>
#include <string.h>
#include "store_table.h"

typedef struct entry {
    struct entry *next;
    uint64_t hash;
    size_t klen, vlen;
    uint8_t *val;
    uint8_t key[]; /* klen bytes */
} entry;

struct lt_store_table {
    entry **slots;
    size_t nslots, count;
};

static uint64_t fnv1a(const void *p, size_t n) {
    const uint8_t *s = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

lt_store_table *lt_store_table_new(void) {
    lt_store_table *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->nslots = 64;
    t->slots = calloc(t->nslots, sizeof *t->slots);
    if (!t->slots) {
        free(t);
        return NULL;
    }
    return t;
}

void lt_store_table_free(lt_store_table *t) {
    if (!t) return;
    for (size_t i = 0; i < t->nslots; i++) {
        for (entry *e = t->slots[i], *n; e; e = n) {
            n = e->next;
            free(e->val);
            free(e);
        }
    }
    free(t->slots);
    free(t);
}

static entry **find(const lt_store_table *t, const void *key, size_t klen, uint64_t h) {
    entry **pp = &t->slots[h & (t->nslots - 1)];
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->hash == h && (*pp)->klen == klen && !memcmp((*pp)->key, key, klen)) break;
    return pp;
}

const uint8_t *lt_store_table_get(const lt_store_table *t, const void *key, size_t klen,
                                  size_t *vlen) {
    entry *e = *find(t, key, klen, fnv1a(key, klen));
    if (!e) return NULL;
    *vlen = e->vlen;
    return e->val ? e->val : (const uint8_t *)"";
}

/* Doubling is best effort: when it cannot allocate, chains just get longer. */
static void maybe_grow(lt_store_table *t) {
    if (t->count < t->nslots) return;
    size_t n = t->nslots * 2;
    entry **slots = calloc(n, sizeof *slots);
    if (!slots) return;
    for (size_t i = 0; i < t->nslots; i++) {
        for (entry *e = t->slots[i], *next; e; e = next) {
            next = e->next;
            entry **head = &slots[e->hash & (n - 1)];
            e->next = *head;
            *head = e;
        }
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = n;
}

int lt_store_table_set(lt_store_table *t, const void *key, size_t klen, const void *val,
                       size_t vlen) {
    uint8_t *copy = NULL;
    if (vlen) {
        copy = malloc(vlen);
        if (!copy) return -1;
        memcpy(copy, val, vlen);
    }
    uint64_t h = fnv1a(key, klen);
    entry **pp = find(t, key, klen, h);
    if (*pp) {
        free((*pp)->val);
        (*pp)->val = copy;
        (*pp)->vlen = vlen;
        return 0;
    }
    entry *e = malloc(sizeof *e + klen);
    if (!e) {
        free(copy);
        return -1;
    }
    e->next = NULL;
    e->hash = h;
    e->klen = klen;
    e->vlen = vlen;
    e->val = copy;
    memcpy(e->key, key, klen);
    *pp = e;
    t->count++;
    maybe_grow(t);
    return 0;
}

int lt_store_table_delete(lt_store_table *t, const void *key, size_t klen) {
    entry **pp = find(t, key, klen, fnv1a(key, klen));
    entry *e = *pp;
    if (!e) return 0;
    *pp = e->next;
    free(e->val);
    free(e);
    t->count--;
    return 1;
}
