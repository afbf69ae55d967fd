/* Bump allocator reset every step. When a step needs more than the current
 * block, it chains extra blocks; the next reset replaces them with one block
 * big enough for everything, so steady state allocates nothing. */
#ifndef LT_ARENA_H
#define LT_ARENA_H

#include <stddef.h>
#include "lt/abi.h"

typedef struct lt_arena_block {
    struct lt_arena_block *next;
    char *base;
    size_t size, used;
} lt_arena_block;

typedef struct lt_arena {
    lt_arena_block *head;    /* current block (newest first) */
    size_t high_water;       /* total bytes the largest step needed */
    size_t in_use;           /* bytes handed out since the last reset */
    /* Memory source: host malloc when alloc is NULL, else a device. */
    lt_status (*alloc)(void *user, size_t bytes, void **out);
    void (*free)(void *user, void *p);
    void *user;
} lt_arena;

void lt_arena_init(lt_arena *a, lt_status (*alloc)(void *, size_t, void **),
                   void (*free_fn)(void *, void *), void *user);
/* 64-byte aligned; NULL when the source is out of memory. */
void *lt_arena_alloc(lt_arena *a, size_t bytes);
void lt_arena_reset(lt_arena *a);
void lt_arena_destroy(lt_arena *a);

#endif
