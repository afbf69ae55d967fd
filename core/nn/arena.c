#include <stdlib.h>
#include "arena.h"

#define ARENA_ALIGN 64
#define ARENA_MIN_BLOCK (1u << 16)

void lt_arena_init(lt_arena *a, lt_status (*alloc)(void *, size_t, void **),
                   void (*free_fn)(void *, void *), void *user) {
    a->head = NULL;
    a->high_water = 0;
    a->in_use = 0;
    a->alloc = alloc;
    a->free = free_fn;
    a->user = user;
}

static void free_block(lt_arena *a, lt_arena_block *b) {
    if (a->alloc) a->free(a->user, b->base);
    else free(b->base);
    free(b);
}

static lt_arena_block *new_block(lt_arena *a, size_t size) {
    lt_arena_block *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    void *p = NULL;
    if (a->alloc) {
        if (a->alloc(a->user, size, &p) != LT_OK) p = NULL;
    } else if (posix_memalign(&p, ARENA_ALIGN, size) != 0) {
        p = NULL;
    }
    if (!p) { free(b); return NULL; }
    b->base = p;
    b->size = size;
    return b;
}

void *lt_arena_alloc(lt_arena *a, size_t bytes) {
    size_t need = (bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (need == 0) need = ARENA_ALIGN;
    lt_arena_block *b = a->head;
    if (!b || b->used + need > b->size) {
        size_t size = need > ARENA_MIN_BLOCK ? need : ARENA_MIN_BLOCK;
        if (b && size < b->size * 2) size = b->size * 2;
        lt_arena_block *nb = new_block(a, size);
        if (!nb) return NULL;
        nb->next = b;
        a->head = b = nb;
    }
    void *p = b->base + b->used;
    b->used += need;
    a->in_use += need;
    return p;
}

void lt_arena_reset(lt_arena *a) {
    if (a->in_use > a->high_water) a->high_water = a->in_use;
    a->in_use = 0;
    if (!a->head) return;
    if (a->head->next) {
        /* The last step overflowed: replace the chain with one block. */
        while (a->head) {
            lt_arena_block *n = a->head->next;
            free_block(a, a->head);
            a->head = n;
        }
        a->head = new_block(a, a->high_water);
        if (a->head) a->head->next = NULL;
        return;
    }
    a->head->used = 0;
}

void lt_arena_destroy(lt_arena *a) {
    while (a->head) {
        lt_arena_block *n = a->head->next;
        free_block(a, a->head);
        a->head = n;
    }
}
