/* The decoded-IDX cache (idx_cache.h). */
#define _GNU_SOURCE /* mkostemp */
#include "idx_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

bool lt_idx_cache_dir(const char *setting, char *out, size_t n) {
    if (!setting || !*setting || !strcmp(setting, "none")) return false;
    if (strcmp(setting, "auto")) {
        snprintf(out, n, "%s", setting);
        return true;
    }
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg == '/') snprintf(out, n, "%s/lt", xdg);
    else if (home && *home == '/') snprintf(out, n, "%s/.cache/lt", home);
    else return false;
    return true;
}

/* FNV-1a: tells apart sources of the same name in different directories. */
static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

lt_status lt_idx_cache_path(const char *dir, const char *src, char *out, size_t n) {
    struct stat sb;
    if (stat(src, &sb) != 0) return LT_ERR_IO;
    char *abs = realpath(src, NULL);
    const char *base = strrchr(src, '/');
    base = base ? base + 1 : src;
    size_t len = strlen(base);
    if (len > 3 && !strcmp(base + len - 3, ".gz")) len -= 3;
    int w = snprintf(out, n, "%s/%.*s.%016llx.%lld.%lld.%09ld", dir, (int)len, base,
                     (unsigned long long)fnv1a(abs ? abs : src), (long long)sb.st_size,
                     (long long)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
    free(abs);
    return w > 0 && (size_t)w < n ? LT_OK : LT_ERR_IO;
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

int lt_idx_cache_open(const char *path, uint32_t magic, uint32_t dims[3]) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    uint8_t h[IDX_IMAGES_HEADER];
    struct stat sb;
    bool ok = pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h && be32(h) == magic && fstat(fd, &sb) == 0;
    if (ok) {
        uint64_t total = 1;
        for (int i = 0; i < 3; i++) {
            dims[i] = be32(h + 4 + 4 * i);
            ok = ok && dims[i] > 0 && !__builtin_mul_overflow(total, (uint64_t)dims[i], &total);
        }
        ok = ok && (uint64_t)sb.st_size == IDX_IMAGES_HEADER + total;
    }
    if (!ok) {
        close(fd);
        return -1;
    }
    return fd;
}

static bool write_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w, n -= (size_t)w;
    }
    return true;
}

/* mkdir -p for the cache directory (mode 0700: it is a per-user cache). */
static bool make_dirs(const char *dir) {
    char buf[512];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) return false;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0700) != 0 && errno != EEXIST) return false;
        *p = '/';
    }
    return mkdir(buf, 0700) == 0 || errno == EEXIST;
}

enum { PRUNE_GRACE_S = 3600 }; /* see prune_stale */

/* Past a run of decimal digits at s, or NULL when there is none. */
static const char *skip_digits(const char *s) {
    const char *p = s;
    while (*p >= '0' && *p <= '9') p++;
    return p > s ? p : NULL;
}

/* "<size>.<mtime sec>.<mtime nsec, 9 digits>" and nothing after, exactly as
 * lt_idx_cache_path prints it (sec may be negative: before 1970). A writer's
 * temporary file, "<entry>.tmp.XXXXXX", does not match. */
static bool is_entry_suffix(const char *s) {
    s = skip_digits(s);
    if (!s || *s++ != '.') return false;
    s = skip_digits(s + (*s == '-'));
    if (!s || *s++ != '.') return false;
    const char *end = skip_digits(s);
    return end && *end == 0 && end - s == 9;
}

/* The length of "<base>.<16 hex>." that starts `name`, when name is a whole
 * entry name; 0 otherwise. */
static size_t entry_prefix_len(const char *name) {
    const char *p = name + strlen(name);
    for (int dots = 0; dots < 3;) {
        if (p == name) return 0;
        if (*--p == '.') dots++;
    }
    size_t len = (size_t)(p + 1 - name);
    if (len < 19 || name[len - 18] != '.' || !is_entry_suffix(p + 1)) return 0;
    for (size_t i = len - 17; i < len - 1; i++)
        if (!(name[i] >= '0' && name[i] <= '9') && !(name[i] >= 'a' && name[i] <= 'f')) return 0;
    return len;
}

/* Removes the entries of the source that `path` is written for whose size
 * or mtime differ from path's and that were themselves written more than
 * PRUNE_GRACE_S ago: this host's source no longer has them, and without
 * this every changed source would leave one behind for good. The grace
 * keeps what a job's other hosts wrote for their own copy of the data at
 * the same path (a cache directory in a shared home) while they use it; a
 * later run on one of them may remove another's, which costs that host one
 * inflate. Ranks that write the same entry at once keep it (it is never a
 * candidate), and other sources' entries, temporary files and foreign files
 * do not match. Failing to remove one only leaves it there. */
static void prune_stale(const char *dir, const char *path) {
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    size_t plen = entry_prefix_len(name);
    DIR *d = plen ? opendir(dir) : NULL;
    if (!d) return;
    time_t now = time(NULL);
    for (struct dirent *e; (e = readdir(d));) {
        const char *other = e->d_name;
        if (strncmp(other, name, plen) || !strcmp(other, name) || !is_entry_suffix(other + plen))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), other, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            now - st.st_mtime < PRUNE_GRACE_S)
            continue;
        if (unlinkat(dirfd(d), other, 0) == 0)
            lt_log(NULL, LT_LOG_DEBUG, "data.cache_dir: removed %s/%s (its source changed)", dir,
                   other);
        else if (errno != ENOENT) /* ENOENT: another rank removed it first */
            lt_log(NULL, LT_LOG_DEBUG, "data.cache_dir: cannot remove the stale %s/%s (%s)", dir,
                   other, strerror(errno));
    }
    closedir(d);
}

lt_status lt_idx_cache_write(const char *path, uint32_t magic, const uint32_t dims[3], const uint8_t *data,
                             size_t bytes) {
    char dir[512], tmp[600];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) return LT_ERR_IO;
    *slash = 0;
    if (!make_dirs(dir)) return LT_ERR_IO;
    prune_stale(dir, path); /* first: stale entries may be what filled the disk */
    /* mkstemp: a unique name even for writers on other hosts sharing the
     * directory (the same pid is common across containers) */
    snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) return LT_ERR_IO;
    uint8_t h[IDX_IMAGES_HEADER];
    put_be32(h, magic);
    for (int i = 0; i < 3; i++) put_be32(h + 4 + 4 * i, dims[i]);
    bool ok = write_all(fd, h, sizeof h) && write_all(fd, data, bytes);
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return LT_ERR_IO;
    }
    return LT_OK;
}
