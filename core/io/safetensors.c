/* safetensors reader and atomic writer; the JSON header goes through jansson. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "safetensors.h"

/* The format stores lengths and tensors little-endian; we hand out tensor bytes
 * as stored, which is only right on a little-endian host. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "core/io/safetensors.c assumes a little-endian host"
#endif

/* The safetensors library refuses larger headers too; a bigger length means
 * the first bytes are not a header length at all. */
#define ST_MAX_HEADER 100000000ull
#define ST_META_KEY "__metadata__"
#define ST_DTYPE_LIST "F32, F64, F16, BF16, I8, U8, I32, I64"

static lt_status fail(char *err, size_t errlen, lt_status s, const char *fmt, ...)
    LT_PRINTF(4, 5);

static lt_status fail(char *err, size_t errlen, lt_status s, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return s;
}

/* ---- dtypes and shapes ------------------------------------------------- */

static const char *const st_names[] = {
    [LT_F32] = "F32", [LT_F64] = "F64", [LT_F16] = "F16", [LT_BF16] = "BF16",
    [LT_I8] = "I8",   [LT_U8] = "U8",   [LT_I32] = "I32", [LT_I64] = "I64",
};

static const char *st_dtype_name(lt_dtype t) {
    return lt_dtype_size(t) ? st_names[t] : NULL;
}

static bool st_dtype_parse(const char *s, lt_dtype *out) {
    for (int t = LT_F32; t <= LT_I64; t++)
        if (!strcmp(s, st_names[t])) { *out = (lt_dtype)t; return true; }
    return false;
}

/* Valid in safetensors but without an lt type: worth a different message than
 * garbage, because the file is fine and the fix is a conversion. */
static bool st_dtype_foreign(const char *s) {
    static const char *const other[] = {"BOOL", "U16", "I16", "U32", "U64", "F8_E4M3",
                                        "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2",
                                        "F4", "C64", NULL};
    for (int i = 0; other[i]; i++)
        if (!strcmp(s, other[i])) return true;
    return false;
}

/* Bytes a shape occupies; false on overflow or a negative dimension. */
static bool shape_bytes(lt_dtype dt, int ndim, const int64_t *shape, uint64_t *out) {
    uint64_t n = lt_dtype_size(dt);
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0 || __builtin_mul_overflow(n, (uint64_t)shape[d], &n)) return false;
    *out = n;
    return true;
}

static void shape_str(char *buf, size_t len, int ndim, const int64_t *shape) {
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && at < len; d++)
        at += (size_t)snprintf(buf + at, len - at, d ? ",%lld" : "%lld", (long long)shape[d]);
    if (at < len) snprintf(buf + at, len - at, "]");
}

/* ---- writer: header ---------------------------------------------------- */

static lt_status check_tensor(const char *path, const lt_st_tensor *t, size_t i, char *err,
                              size_t errlen) {
    const char *nm = t->name ? t->name : "(null)";
    if (!t->name || !strcmp(t->name, ST_META_KEY))
        return fail(err, errlen, LT_ERR_INVALID,
                    "cannot write checkpoint %s: tensor %zu has name %s; give it a name "
                    "other than NULL and \"" ST_META_KEY "\"", path, i, nm);
    if (!st_dtype_name(t->dtype))
        return fail(err, errlen, LT_ERR_INVALID,
                    "cannot write checkpoint %s: tensor \"%s\" has unknown dtype %d",
                    path, nm, (int)t->dtype);
    if (t->ndim < 0 || t->ndim > LT_ST_MAX_DIMS)
        return fail(err, errlen, LT_ERR_INVALID,
                    "cannot write checkpoint %s: tensor \"%s\" has ndim %d, expected 0..%d",
                    path, nm, t->ndim, LT_ST_MAX_DIMS);
    uint64_t need;
    char shp[160];
    shape_str(shp, sizeof shp, t->ndim, t->shape);
    if (!shape_bytes(t->dtype, t->ndim, t->shape, &need) || need != t->nbytes ||
        (t->nbytes && !t->data))
        return fail(err, errlen, LT_ERR_INVALID,
                    "cannot write checkpoint %s: tensor \"%s\" has shape %s of %s and %zu "
                    "bytes%s; nbytes must be the element count times the dtype size",
                    path, nm, shp, st_names[t->dtype], t->nbytes, t->data ? "" : " at NULL");
    return LT_OK;
}

static json_t *shape_json(const lt_st_tensor *t) {
    json_t *a = json_array();
    for (int d = 0; a && d < t->ndim; d++)
        if (json_array_append_new(a, json_integer(t->shape[d]))) { json_decref(a); return NULL; }
    return a;
}

static json_t *entry_json(const lt_st_tensor *t, uint64_t begin) {
    json_t *offs = json_pack("[II]", (json_int_t)begin, (json_int_t)(begin + t->nbytes));
    json_t *shape = shape_json(t);
    if (!offs || !shape) { json_decref(offs); json_decref(shape); return NULL; }
    /* "o" steals the references, also when packing fails. */
    return json_pack("{s:s, s:o, s:o}", "dtype", st_names[t->dtype], "shape", shape,
                     "data_offsets", offs);
}

static lt_status add_meta(const char *path, json_t *root, const char *const *meta, size_t nmeta,
                          char *err, size_t errlen) {
    if (!nmeta) return LT_OK;
    json_t *m = json_object();
    if (!m || json_object_set_new(root, ST_META_KEY, m)) return LT_ERR_NOMEM;
    for (size_t i = 0; i < nmeta; i++) {
        const char *k = meta[2 * i], *v = meta[2 * i + 1];
        if (!k || !v || json_object_get(m, k))
            return fail(err, errlen, LT_ERR_INVALID,
                        "cannot write checkpoint %s: metadata pair %zu (\"%s\") is NULL or a "
                        "duplicate key", path, i, k ? k : "(null)");
        json_t *s = json_string(v);
        if (!s || json_object_set_new(m, k, s))
            return fail(err, errlen, LT_ERR_INVALID,
                        "cannot write checkpoint %s: metadata \"%s\" is not valid UTF-8",
                        path, k);
    }
    return LT_OK;
}

/* Entries go into the header in layout order (see lt_st_write). */
static lt_status add_tensors(const char *path, json_t *root, const lt_st_tensor *const *order,
                             size_t n, char *err, size_t errlen) {
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const lt_st_tensor *t = order[i];
        if (json_object_get(root, t->name))
            return fail(err, errlen, LT_ERR_INVALID,
                        "cannot write checkpoint %s: two tensors are named \"%s\"", path,
                        t->name);
        json_t *e = entry_json(t, at);
        if (!e) return fail(err, errlen, LT_ERR_NOMEM, "cannot write checkpoint %s: out of memory", path);
        if (json_object_set_new(root, t->name, e))
            return fail(err, errlen, LT_ERR_INVALID,
                        "cannot write checkpoint %s: tensor name \"%s\" is not valid UTF-8",
                        path, t->name);
        at += t->nbytes;
    }
    return LT_OK;
}

/* Widest element first, the caller's order otherwise: with the data section
 * 8-byte aligned this puts every tensor on a multiple of its element size, so a
 * reader of the mapped file may use the data in place. The safetensors library
 * lays files out the same way. */
static int by_alignment(const void *a, const void *b) {
    const lt_st_tensor *x = *(const lt_st_tensor *const *)a, *y = *(const lt_st_tensor *const *)b;
    size_t sx = lt_dtype_size(x->dtype), sy = lt_dtype_size(y->dtype);
    if (sx != sy) return sx > sy ? -1 : 1;
    return x < y ? -1 : x > y;
}

static lt_status layout(const char *path, const lt_st_tensor *t, size_t n,
                        const lt_st_tensor ***order, char *err, size_t errlen) {
    for (size_t i = 0; i < n; i++) LT_CHECK(check_tensor(path, &t[i], i, err, errlen));
    *order = malloc((n ? n : 1) * sizeof **order);
    if (!*order) return fail(err, errlen, LT_ERR_NOMEM, "cannot write checkpoint %s: out of memory", path);
    for (size_t i = 0; i < n; i++) (*order)[i] = &t[i];
    qsort(*order, n, sizeof **order, by_alignment);
    return LT_OK;
}

/* The JSON text padded with spaces to a multiple of 8 so the data section
 * starts 8-byte aligned when the file is mapped. */
static lt_status render_header(json_t *root, char **out, size_t *len) {
    char *s = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!s) return LT_ERR_NOMEM;
    size_t n = strlen(s), padded = (n + 7) & ~(size_t)7;
    char *p = realloc(s, padded + 1);
    if (!p) { free(s); return LT_ERR_NOMEM; }
    memset(p + n, ' ', padded - n);
    p[padded] = '\0';
    *out = p;
    *len = padded;
    return LT_OK;
}

static lt_status build_header(const char *path, const lt_st_tensor *const *t, size_t n,
                              const char *const *meta, size_t nmeta, char **out, size_t *len,
                              char *err, size_t errlen) {
    json_t *root = json_object();
    if (!root) return fail(err, errlen, LT_ERR_NOMEM, "cannot write checkpoint %s: out of memory", path);
    /* Metadata first, as the safetensors library writes it. */
    lt_status s = add_meta(path, root, meta, nmeta, err, errlen);
    if (s == LT_OK) s = add_tensors(path, root, t, n, err, errlen);
    if (s == LT_OK) s = render_header(root, out, len);
    json_decref(root);
    if (s == LT_ERR_NOMEM) fail(err, errlen, s, "cannot write checkpoint %s: out of memory", path);
    return s;
}

/* ---- writer: bytes on disk --------------------------------------------- */

static bool write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { if (w == 0) errno = EIO; return false; }
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static bool write_body(int fd, const char *hdr, size_t hlen, const lt_st_tensor *const *t,
                       size_t n) {
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    if (!write_all(fd, len8, 8) || !write_all(fd, hdr, hlen)) return false;
    for (size_t i = 0; i < n; i++)
        if (t[i]->nbytes && !write_all(fd, t[i]->data, t[i]->nbytes)) return false;
    return true;
}

/* The rename is only durable once the directory entry itself is on disk. */
static int sync_dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return -1;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

/* Everything up to and including the rename; on failure removes the temp file
 * it created (and only that: a directory squatting on the name stays). */
static lt_status write_temp_and_rename(const char *path, const char *tmp, const char *hdr,
                                       size_t hlen, const lt_st_tensor *const *t, size_t n,
                                       char *err, size_t errlen) {
    /* No O_EXCL: a temp file left by a killed process that had our pid (common
     * in containers) must not block every later save. O_NOFOLLOW keeps a
     * planted link from redirecting the write. */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return fail(err, errlen, LT_ERR_IO, "cannot write checkpoint %s: creating %s: %s",
                    path, tmp, strerror(errno));
    const char *what = NULL;
    if (!write_body(fd, hdr, hlen, t, n)) what = "writing";
    else if (fsync(fd)) what = "syncing";
    int saved = errno;
    if (close(fd) && !what) { what = "closing"; saved = errno; }
    if (!what && rename(tmp, path)) { what = "renaming"; saved = errno; }
    if (!what) return LT_OK;
    unlink(tmp);
    /* Nothing above touched path: whatever was there still is. Saying "the
     * previous file is unchanged" when there was none would promise the user
     * a checkpoint they do not have. */
    struct stat sb;
    bool had = lstat(path, &sb) == 0;
    return fail(err, errlen, LT_ERR_IO, "cannot write checkpoint %s: %s %s: %s; %s", path, what,
                tmp, strerror(saved),
                had ? "the previous file is unchanged" : "there was no previous file, so none is saved yet");
}

lt_status lt_st_write(const char *path, const lt_st_tensor *t, size_t n,
                      const char *const *meta, size_t nmeta, char *err, size_t errlen) {
    if (!path || (n && !t) || (nmeta && !meta))
        return fail(err, errlen, LT_ERR_INVALID, "lt_st_write: NULL path, tensors or metadata");
    char *hdr = NULL, *tmp = NULL;
    size_t hlen = 0;
    const lt_st_tensor **order = NULL;
    lt_status s = layout(path, t, n, &order, err, errlen);
    if (s == LT_OK) s = build_header(path, order, n, meta, nmeta, &hdr, &hlen, err, errlen);
    if (s != LT_OK) { free(order); return s; }
    size_t tlen = strlen(path) + 32;
    if ((tmp = malloc(tlen))) snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
    else s = fail(err, errlen, LT_ERR_NOMEM, "cannot write checkpoint %s: out of memory", path);
    if (s == LT_OK) s = write_temp_and_rename(path, tmp, hdr, hlen, order, n, err, errlen);
    if (s == LT_OK && sync_dir_of(path))
        s = fail(err, errlen, LT_ERR_IO,
                 "checkpoint %s was written but syncing its directory failed (%s); it may "
                 "not survive a crash", path, strerror(errno));
    free(tmp);
    free(hdr);
    free(order);
    return s;
}

/* ---- temp files of writers that are gone -------------------------------- */

/* The pid in "<base>.tmp.<pid>" exactly as lt_st_write names it ("%ld": digits,
 * no sign, no leading zero); false for any other name, so a file lt did not
 * make is never touched. */
static bool temp_pid(const char *name, const char *base, size_t blen, pid_t *pid) {
    if (strncmp(name, base, blen) || strncmp(name + blen, ".tmp.", 5)) return false;
    const char *d = name + blen + 5;
    if (*d < '1' || *d > '9') return false;
    long long v = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9') return false;
        v = v * 10 + (*d - '0');
        if (v > INT_MAX) return false; /* no pid is that large */
    }
    *pid = (pid_t)v;
    return true;
}

static bool same_file(const char *a, const char *b) {
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* Whether pid may still be writing its temp file: it exists and runs lt (this
 * program, or any that maps liblt.so). A pid that exists but runs something
 * else was reused after the writer died; a zombie maps nothing. When we cannot
 * tell (another user's process, whose /proc entries we may not read) the
 * answer is yes: removing a live writer's temp file would fail its save. */
static bool writer_may_live(pid_t pid) {
    if (pid == getpid()) return true;
    if (kill(pid, 0)) return errno != ESRCH;
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/exe", (int)pid);
    if (same_file(p, "/proc/self/exe")) return true;
    snprintf(p, sizeof p, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(p, "re");
    if (!f) return errno != ENOENT && errno != ESRCH;
    char line[4096];
    bool lt = false;
    while (!lt && fgets(line, sizeof line, f)) {
        const char *slash = strrchr(line, '/');
        lt = slash && !strncmp(slash + 1, "liblt.so", 8);
    }
    fclose(f);
    return lt;
}

lt_status lt_st_remove_stale_temps(const char *path, size_t *removed, char *err, size_t errlen) {
    if (removed) *removed = 0;
    const char *slash = path ? strrchr(path, '/') : NULL;
    const char *base = slash ? slash + 1 : path;
    if (!path || !*base)
        return fail(err, errlen, LT_ERR_INVALID, "lt_st_remove_stale_temps: '%s' names no file",
                    path ? path : "(null)");
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return fail(err, errlen, LT_ERR_NOMEM, "out of memory");
    DIR *d = opendir(dir);
    if (!d) {
        /* No directory yet: nothing was ever written there. */
        lt_status s = errno == ENOENT ? LT_OK
                      : fail(err, errlen, LT_ERR_IO, "cannot list %s to remove temp files that "
                             "killed writers of %s left: %s", dir, base, strerror(errno));
        free(dir);
        return s;
    }
    size_t blen = strlen(base), n = 0;
    lt_status s = LT_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        pid_t pid;
        struct stat sb;
        if (!temp_pid(e->d_name, base, blen, &pid)) continue;
        /* lt_st_write makes regular files only: a directory or a link under
         * the name is someone else's. */
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) || !S_ISREG(sb.st_mode)) continue;
        if (writer_may_live(pid)) continue;
        if (!unlinkat(dirfd(d), e->d_name, 0)) n++;
        else if (errno != ENOENT && s == LT_OK) /* ENOENT: another cleaner was faster */
            s = fail(err, errlen, LT_ERR_IO, "cannot remove %s/%s, a temp file that a killed "
                     "writer (pid %d) left: %s; remove it by hand", dir, e->d_name, (int)pid,
                     strerror(errno));
    }
    closedir(d);
    free(dir);
    if (removed) *removed = n;
    return s;
}

/* ---- reader ------------------------------------------------------------ */

typedef struct st_entry {
    lt_st_tensor t;
    uint64_t begin, end;
} st_entry;

struct lt_st_file {
    void *map;
    size_t size;
    json_t *root;           /* owns the name and metadata strings */
    const json_t *meta;     /* borrowed from root; NULL when absent */
    st_entry *e;            /* in offset order */
    size_t n;
    const st_entry **by_name;
};

/* Parsing state, so helpers can report against the path without long lists. */
typedef struct st_parse {
    const char *path;
    char *err;
    size_t errlen;
} st_parse;

#define BAD(p, st, fmt, ...) \
    fail((p)->err, (p)->errlen, (st), "checkpoint %s" fmt, (p)->path, ##__VA_ARGS__)
#define TRUNCATED_FIX "; it was not fully written — use the previous checkpoint"

static const char *json_kind(const json_t *j) {
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE: case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "value";
}

static lt_status map_file(const st_parse *p, lt_st_file *f) {
    /* O_NONBLOCK: a FIFO named as a checkpoint is refused below, not waited on */
    int fd = open(p->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return BAD(p, errno == ENOENT ? LT_ERR_NOT_FOUND : LT_ERR_IO, ": cannot open: %s",
                   strerror(errno));
    struct stat st;
    lt_status s = LT_OK;
    if (fstat(fd, &st))
        s = BAD(p, LT_ERR_IO, ": cannot stat: %s", strerror(errno));
    else if (!S_ISREG(st.st_mode)) /* a wrong name, as a missing file is: refused (2) */
        s = BAD(p, LT_ERR_INVALID, ": %s; name a .safetensors file",
                S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file");
    else if (st.st_size < 8)
        s = BAD(p, LT_ERR_CORRUPT, " is truncated: %lld bytes, shorter than the 8-byte header "
                "length" TRUNCATED_FIX, (long long)st.st_size);
    if (s == LT_OK) {
        /* Mapping rather than reading keeps a multi-GB checkpoint from needing
         * twice its size in memory; lt_st_write never changes a file in place,
         * so the mapping cannot shrink under us. */
        f->size = (size_t)st.st_size;
        f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (f->map == MAP_FAILED) {
            f->map = NULL;
            s = BAD(p, LT_ERR_IO, ": cannot map %zu bytes: %s", f->size, strerror(errno));
        }
    }
    close(fd);
    return s;
}

static lt_status parse_json(const st_parse *p, lt_st_file *f, uint64_t *hlen) {
    const unsigned char *b = f->map;
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)b[i] << (8 * i);
    if (n > ST_MAX_HEADER)
        return BAD(p, LT_ERR_CORRUPT, ": header length %llu is absurd (over 100 MB); this is "
                   "not a safetensors file or its first bytes are damaged", (unsigned long long)n);
    if (n > f->size - 8)
        return BAD(p, LT_ERR_CORRUPT, " is truncated: header promises %llu header bytes, file "
                   "holds %zu after the length" TRUNCATED_FIX, (unsigned long long)n, f->size - 8);
    json_error_t je;
    f->root = json_loadb((const char *)b + 8, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    if (!f->root)
        return BAD(p, LT_ERR_CORRUPT, ": header is not valid JSON: %s at line %d, column %d "
                   "(byte %d of the header); the file is damaged — use the previous checkpoint",
                   je.text, je.line, je.column, je.position);
    if (!json_is_object(f->root))
        return BAD(p, LT_ERR_CORRUPT, ": header is a JSON %s, expected an object of tensors",
                   json_kind(f->root));
    *hlen = n;
    return LT_OK;
}

static lt_status parse_meta(const st_parse *p, lt_st_file *f, const json_t *m) {
    if (!json_is_object(m))
        return BAD(p, LT_ERR_CORRUPT, ": \"" ST_META_KEY "\" is a JSON %s, expected an object "
                   "of strings", json_kind(m));
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)m, k, v)
        if (!json_is_string(v))
            return BAD(p, LT_ERR_CORRUPT, ": metadata \"%s\" is a JSON %s, expected a string",
                       k, json_kind(v));
    f->meta = m;
    return LT_OK;
}

static bool json_nonneg(const json_t *j, int64_t *out) {
    if (!json_is_integer(j) || json_integer_value(j) < 0) return false;
    *out = json_integer_value(j);
    return true;
}

static lt_status parse_dtype(const st_parse *p, const char *name, const json_t *j, lt_dtype *dt) {
    const char *s = json_string_value(j);
    if (s && st_dtype_parse(s, dt)) return LT_OK;
    if (s && st_dtype_foreign(s))
        return BAD(p, LT_ERR_UNSUPPORTED, ": tensor \"%s\" has dtype %s, which lt does not "
                   "handle (" ST_DTYPE_LIST "); convert it before loading", name, s);
    if (s)
        return BAD(p, LT_ERR_CORRUPT, ": tensor \"%s\" has unknown dtype \"%s\", expected one "
                   "of " ST_DTYPE_LIST, name, s);
    return BAD(p, LT_ERR_CORRUPT, ": tensor \"%s\" has %s dtype, expected a string, one of "
               ST_DTYPE_LIST, name, j ? json_kind(j) : "no");
}

static lt_status parse_shape(const st_parse *p, const char *name, const json_t *j, st_entry *e) {
    size_t nd = json_array_size(j);
    bool ok = json_is_array(j) && nd <= LT_ST_MAX_DIMS;
    for (size_t d = 0; ok && d < nd; d++)
        ok = json_nonneg(json_array_get(j, d), &e->t.shape[d]);
    if (!ok)
        return BAD(p, LT_ERR_CORRUPT, ": tensor \"%s\" has a bad shape; expected an array of "
                   "at most %d non-negative integers", name, LT_ST_MAX_DIMS);
    e->t.ndim = (int)nd;
    return LT_OK;
}

static lt_status parse_offsets(const st_parse *p, const char *name, const json_t *j, st_entry *e) {
    int64_t b = 0, x = 0;
    if (json_array_size(j) != 2 || !json_nonneg(json_array_get(j, 0), &b) ||
        !json_nonneg(json_array_get(j, 1), &x) || b > x)
        return BAD(p, LT_ERR_CORRUPT, ": tensor \"%s\" has bad data_offsets; expected [begin, "
                   "end] with 0 <= begin <= end", name);
    e->begin = (uint64_t)b;
    e->end = (uint64_t)x;
    return LT_OK;
}

static lt_status parse_entry(const st_parse *p, const char *name, const json_t *j, st_entry *e) {
    if (!json_is_object(j))
        return BAD(p, LT_ERR_CORRUPT, ": entry \"%s\" is a JSON %s, expected an object with "
                   "dtype, shape and data_offsets", name, json_kind(j));
    e->t.name = name;
    LT_CHECK(parse_dtype(p, name, json_object_get(j, "dtype"), &e->t.dtype));
    LT_CHECK(parse_shape(p, name, json_object_get(j, "shape"), e));
    LT_CHECK(parse_offsets(p, name, json_object_get(j, "data_offsets"), e));
    uint64_t need = 0;
    if (!shape_bytes(e->t.dtype, e->t.ndim, e->t.shape, &need) || need != e->end - e->begin) {
        char shp[160];
        shape_str(shp, sizeof shp, e->t.ndim, e->t.shape);
        return BAD(p, LT_ERR_CORRUPT, ": tensor \"%s\" has shape %s of %s but data_offsets "
                   "[%llu, %llu] span %llu bytes", name, shp, st_names[e->t.dtype],
                   (unsigned long long)e->begin, (unsigned long long)e->end,
                   (unsigned long long)(e->end - e->begin));
    }
    e->t.nbytes = (size_t)need;
    return LT_OK;
}

static lt_status parse_entries(const st_parse *p, lt_st_file *f) {
    size_t total = json_object_size(f->root);
    f->e = calloc(total ? total : 1, sizeof *f->e);
    if (!f->e) return BAD(p, LT_ERR_NOMEM, ": out of memory for %zu entries", total);
    const char *k;
    json_t *v;
    json_object_foreach(f->root, k, v) {
        if (!strcmp(k, ST_META_KEY)) LT_CHECK(parse_meta(p, f, v));
        else LT_CHECK(parse_entry(p, k, v, &f->e[f->n++]));
    }
    return LT_OK;
}

static int by_offset(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->t.name, y->t.name);
}

/* The format allows no holes or overlap, so sorted entries must tile
 * [0, data size) exactly; anything else means a damaged or forged header. */
static lt_status check_layout(const st_parse *p, lt_st_file *f, uint64_t data) {
    qsort(f->e, f->n, sizeof *f->e, by_offset);
    uint64_t at = 0;
    for (size_t i = 0; i < f->n; i++) {
        const st_entry *e = &f->e[i];
        if (e->begin > at)
            return BAD(p, LT_ERR_CORRUPT, ": bad data_offsets: a hole of %llu bytes before "
                       "tensor \"%s\" (it begins at %llu, the data before it ends at %llu)",
                       (unsigned long long)(e->begin - at), e->t.name,
                       (unsigned long long)e->begin, (unsigned long long)at);
        if (e->begin < at)
            return BAD(p, LT_ERR_CORRUPT, ": bad data_offsets: tensor \"%s\" [%llu, %llu] "
                       "overlaps tensor \"%s\", which ends at %llu", e->t.name,
                       (unsigned long long)e->begin, (unsigned long long)e->end,
                       f->e[i - 1].t.name, (unsigned long long)at);
        at = e->end;
    }
    if (at > data)
        return BAD(p, LT_ERR_CORRUPT, " is truncated: header promises %llu data bytes, file "
                   "holds %llu" TRUNCATED_FIX, (unsigned long long)at, (unsigned long long)data);
    if (at < data)
        return BAD(p, LT_ERR_CORRUPT, ": %llu bytes follow the last tensor's data (header "
                   "describes %llu data bytes, file holds %llu); the file is damaged — use "
                   "the previous checkpoint", (unsigned long long)(data - at),
                   (unsigned long long)at, (unsigned long long)data);
    return LT_OK;
}

static int by_name(const void *a, const void *b) {
    return strcmp((*(const st_entry *const *)a)->t.name, (*(const st_entry *const *)b)->t.name);
}

static lt_status index_entries(const st_parse *p, lt_st_file *f, uint64_t data_at) {
    f->by_name = malloc((f->n ? f->n : 1) * sizeof *f->by_name);
    if (!f->by_name) return BAD(p, LT_ERR_NOMEM, ": out of memory for %zu entries", f->n);
    for (size_t i = 0; i < f->n; i++) {
        f->e[i].t.data = (const char *)f->map + data_at + f->e[i].begin;
        f->by_name[i] = &f->e[i];
    }
    qsort(f->by_name, f->n, sizeof *f->by_name, by_name);
    return LT_OK;
}

lt_status lt_st_open(const char *path, lt_st_file **out, char *err, size_t errlen) {
    if (!path || !out) return fail(err, errlen, LT_ERR_INVALID, "lt_st_open: NULL path or out");
    *out = NULL;
    st_parse p = {path, err, errlen};
    lt_st_file *f = calloc(1, sizeof *f);
    if (!f) return fail(err, errlen, LT_ERR_NOMEM, "checkpoint %s: out of memory", path);
    uint64_t hlen = 0;
    lt_status s = map_file(&p, f);
    if (s == LT_OK) s = parse_json(&p, f, &hlen);
    if (s == LT_OK) s = parse_entries(&p, f);
    if (s == LT_OK) s = check_layout(&p, f, f->size - 8 - hlen);
    if (s == LT_OK) s = index_entries(&p, f, 8 + hlen);
    if (s != LT_OK) { lt_st_close(f); return s; }
    *out = f;
    return LT_OK;
}

size_t lt_st_count(const lt_st_file *f) { return f ? f->n : 0; }

const lt_st_tensor *lt_st_at(const lt_st_file *f, size_t i) {
    return f && i < f->n ? &f->e[i].t : NULL;
}

const lt_st_tensor *lt_st_find(const lt_st_file *f, const char *name) {
    if (!f || !name) return NULL;
    st_entry key = {.t = {.name = name}};
    const st_entry *kp = &key;
    const st_entry *const *hit = bsearch(&kp, f->by_name, f->n, sizeof *f->by_name, by_name);
    return hit ? &(*hit)->t : NULL;
}

const char *lt_st_meta(const lt_st_file *f, const char *key) {
    if (!f || !f->meta || !key) return NULL;
    return json_string_value(json_object_get(f->meta, key));
}

void lt_st_close(lt_st_file *f) {
    if (!f) return;
    if (f->map) munmap(f->map, f->size);
    json_decref(f->root);
    free(f->e);
    free(f->by_name);
    free(f);
}
