/* Group memory of the shm backend: see shm_mem.h. */
#define _GNU_SOURCE
#include "shm_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The object's first page: how many ranks have mapped it. */
typedef struct mem_hdr {
    _Atomic uint32_t attached;
    int32_t world;
    uint64_t stride;
} mem_hdr;
enum { MEM_HDR_BYTES = 4096 };

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static shm_mem *g_list; /* every allocation of this process */

const shm_mem *shm_mem_find(const void *owner, const void *p, size_t len, size_t *off) {
    const unsigned char *q = p;
    const shm_mem *hit = NULL;
    pthread_mutex_lock(&g_mu);
    for (const shm_mem *m = g_list; m; m = m->next) {
        if (m->owner != owner) continue;
        const unsigned char *mine = shm_mem_at(m, m->rank, 0);
        if (q >= mine && q <= mine + m->bytes && len <= (size_t)(mine + m->bytes - q)) {
            *off = (size_t)(q - mine);
            hit = m;
            break;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return hit;
}

void shm_mem_forget_owner(const void *owner) {
    pthread_mutex_lock(&g_mu);
    for (shm_mem *m = g_list; m; m = m->next)
        if (m->owner == owner) m->owner = NULL;
    pthread_mutex_unlock(&g_mu);
}

void shm_mem_free(void *p) {
    if (!p) return;
    shm_mem *found = NULL;
    pthread_mutex_lock(&g_mu);
    for (shm_mem **pp = &g_list; *pp; pp = &(*pp)->next)
        if (shm_mem_at(*pp, (*pp)->rank, 0) == p) {
            found = *pp;
            *pp = found->next;
            break;
        }
    pthread_mutex_unlock(&g_mu);
    if (!found) return;
    munmap(found->map, found->map_len);
    free(found);
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Rank 0: a fresh object of `len` bytes with its pages reserved (a sparse
 * object on a small /dev/shm would SIGBUS at first touch instead). */
static int make_object(lt_ctx *ctx, const char *prefix, size_t len, char *name, size_t name_len) {
    int fd = -1;
    for (int attempt = 0; attempt < 8 && fd < 0; attempt++) {
        uint64_t rnd = 0;
        if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) rnd = (uint64_t)now_ms() ^ (uint64_t)rand();
        snprintf(name, name_len, "/lt-shm-mem-%d-%016llx", (int)getpid(), (unsigned long long)rnd);
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        lt_set_error(ctx, "shm group memory '%s': shm_open: %s", prefix, strerror(errno));
        return -1;
    }
    int rc = posix_fallocate(fd, 0, (off_t)len);
    if (rc == EINVAL || rc == EOPNOTSUPP) rc = ftruncate(fd, (off_t)len) ? errno : 0;
    if (rc != 0) {
        lt_set_error(ctx, "shm group memory '%s': reserving %zu bytes for %s: %s (is /dev/shm big enough? "
                          "strategy.place_grads = false does without)",
                     prefix, len, name, strerror(rc));
        close(fd);
        shm_unlink(name);
        return -1;
    }
    return fd;
}

lt_status shm_mem_alloc(lt_ctx *ctx, const void *owner, lt_store *store, const char *prefix, int rank,
                        int world, uint64_t id, size_t bytes, int64_t deadline_ms,
                        _Atomic uint32_t *aborted, void **out) {
    *out = NULL;
    size_t stride = (bytes + 4095) & ~(size_t)4095;
    if (bytes == 0 || stride < bytes || stride > (SIZE_MAX - MEM_HDR_BYTES) / (size_t)world) {
        lt_set_error(ctx, "shm group memory '%s': cannot allocate %zu bytes for each of %d ranks", prefix,
                     bytes, world);
        return LT_ERR_INVALID;
    }
    size_t len = MEM_HDR_BYTES + stride * (size_t)world;
    char key[LT_STORE_MAX_KEY], name[128];
    snprintf(key, sizeof key, "%sshm/mem/%llu", prefix, (unsigned long long)id);
    int fd;
    if (rank == 0) {
        fd = make_object(ctx, prefix, len, name, sizeof name);
        if (fd < 0) {
            /* No room (a container's small /dev/shm): every rank declines
             * alike, so the caller can go on with memory of its own. */
            lt_store_set(store, key, "", 0);
            return LT_ERR_UNSUPPORTED;
        }
    } else {
        void *v = NULL;
        size_t n = 0;
        if (lt_store_get(store, key, &v, &n) != LT_OK) {
            lt_set_error(ctx, "shm group memory '%s': waiting for rank 0's object name: %s", prefix,
                         lt_store_error(store));
            return LT_ERR_IO;
        }
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), (const char *)v);
        free(v);
        if (!name[0]) {
            lt_set_error(ctx, "shm group memory '%s': rank 0 could not make the %zu-byte object (is /dev/shm "
                              "big enough?)", prefix, len);
            return LT_ERR_UNSUPPORTED;
        }
        fd = shm_open(name, O_RDWR, 0600);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb) != 0 || (size_t)sb.st_size != len) {
            lt_set_error(ctx, "shm group memory '%s': object %s %s (did every rank ask for %zu bytes?)", prefix,
                         name, fd < 0 ? strerror(errno) : "has another size", bytes);
            if (fd >= 0) close(fd);
            return fd < 0 ? LT_ERR_IO : LT_ERR_MISMATCH;
        }
    }
    void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    shm_mem *m = map == MAP_FAILED ? NULL : calloc(1, sizeof *m);
    if (!m) {
        lt_set_error(ctx, "shm group memory '%s': mapping %zu bytes: %s", prefix, len,
                     map == MAP_FAILED ? strerror(errno) : "out of memory");
        if (map != MAP_FAILED) munmap(map, len);
        if (rank == 0) shm_unlink(name);
        return LT_ERR_NOMEM;
    }
    mem_hdr *h = map;
    lt_status st = LT_OK;
    if (rank == 0) {
        h->world = world;
        h->stride = stride;
        atomic_store(&h->attached, 1);
        if (lt_store_set(store, key, name, strlen(name)) != LT_OK) {
            lt_set_error(ctx, "shm group memory '%s': publishing the object name: %s", prefix,
                         lt_store_error(store));
            st = LT_ERR_IO;
        }
    } else {
        atomic_fetch_add(&h->attached, 1);
    }
    /* Every rank waits for all: rank 0 may unlink the name only then. */
    int64_t deadline = now_ms() + deadline_ms;
    while (st == LT_OK && atomic_load(&h->attached) < (uint32_t)world) {
        if (atomic_load(aborted)) {
            lt_set_error(ctx, "shm group memory '%s': the group was aborted while mapping it", prefix);
            st = LT_ERR_ABORTED;
        } else if (now_ms() > deadline) {
            lt_set_error(ctx, "shm group memory '%s': only %u of %d ranks mapped it within %lld ms", prefix,
                         atomic_load(&h->attached), world, (long long)deadline_ms);
            st = LT_ERR_TIMEOUT;
        } else {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    if (rank == 0) shm_unlink(name);
    if (st != LT_OK) {
        munmap(map, len);
        free(m);
        return st;
    }
    *m = (shm_mem){.owner = owner, .id = id, .map = map, .map_len = len,
                   .slices = (unsigned char *)map + MEM_HDR_BYTES, .stride = stride, .bytes = bytes,
                   .rank = rank};
    pthread_mutex_lock(&g_mu);
    m->next = g_list;
    g_list = m;
    pthread_mutex_unlock(&g_mu);
    *out = shm_mem_at(m, rank, 0);
    return LT_OK;
}
