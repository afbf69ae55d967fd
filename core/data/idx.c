/* IDX files (the MNIST family's format) as an lt_dataset, and subset views.
 *
 * Without a cache both files are read into memory at open, so `get` is a
 * table lookup per pixel and needs no locking. zlib's gzread reads plain
 * files transparently, so uncompressed IDX files work through the same path.
 *
 * With a cache directory (data.cache_dir), the first open decompresses the
 * images once into a plain IDX file there (idx_cache.c); every later open,
 * by any process of the host, reads only its header, and `get` preads one
 * sample at a time. The decoded images then live once, in the kernel's page
 * cache, shared by the host's ranks, instead of once per process: start-up
 * skips ~0.2 s of inflate and each rank's RSS ~47 MB (Fashion-MNIST). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "data_internal.h"
#include "idx_cache.h"

#define IDX_MAGIC_IMAGES 0x00000803u /* u8 elements, 3 dimensions */
#define IDX_MAGIC_LABELS 0x00000801u /* u8 elements, 1 dimension */
#define IDX_READ_CHUNK (1u << 30)     /* gzread takes an unsigned count */
/* A header that lies about its size must not make us allocate what the file
 * does not hold, so the buffer starts at most this big and grows with data. */
#define IDX_INITIAL_CAP ((size_t)64 << 20)
#define NOT_FOUND_FIX "install dataset-fashion-mnist or set data.dir"
#define CORRUPT_FIX "re-download the file or reinstall dataset-fashion-mnist"

typedef struct idx_dataset {
    uint8_t *images;   /* n * rows * cols; NULL when read from images_fd */
    int images_fd;     /* the cached plain IDX file, -1 when in memory */
    char images_path[512]; /* that file, for messages */
    uint8_t *labels;   /* n */
    int64_t n;
    int64_t rows, cols;
    float lut[256];    /* normalized value of each byte */
} idx_dataset;

/* One IDX file being read: where it is and what its header promised. */
typedef struct idx_file {
    const char *path;
    gzFile gz;
    uint32_t magic;
    int ndims;
    uint32_t dims[3];
    size_t payload;    /* bytes the header promises */
    uint8_t *data;
} idx_file;

static lt_status fail(char *err, size_t errlen, lt_status st, const char *fmt, ...)
    LT_PRINTF(4, 5);
static lt_status fail(char *err, size_t errlen, lt_status st, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* gzdopen names the stream "<fd:N>" in its messages; we print the path ourselves. */
static const char *zlib_message(gzFile gz, int *errnum) {
    const char *m = gzerror(gz, errnum);
    if (m && !strncmp(m, "<fd:", 4)) {
        const char *colon = strstr(m, ": ");
        if (colon) m = colon + 2;
    }
    return m && *m ? m : "unknown zlib error";
}

static lt_status gz_failure(idx_file *f, char *err, size_t errlen) {
    int errnum = Z_OK;
    const char *m = zlib_message(f->gz, &errnum);
    if (errnum == Z_ERRNO)
        return fail(err, errlen, LT_ERR_IO, "%s: cannot read: %s", f->path, strerror(errno));
    if (errnum == Z_MEM_ERROR)
        return fail(err, errlen, LT_ERR_NOMEM, "%s: out of memory while decompressing", f->path);
    return fail(err, errlen, LT_ERR_CORRUPT, "%s: corrupt gzip data (%s); %s", f->path, m,
                CORRUPT_FIX);
}

static lt_status idx_file_open(idx_file *f, char *err, size_t errlen) {
    /* open() ourselves: errno from gzopen is not reliable after its cleanup.
     * O_NONBLOCK so that a FIFO in the data's place is refused below
     * instead of blocking until something writes to it. */
    int fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 && errno == ENOENT)
        return fail(err, errlen, LT_ERR_NOT_FOUND, "%s: not found; %s", f->path, NOT_FOUND_FIX);
    if (fd < 0)
        return fail(err, errlen, LT_ERR_IO, "%s: cannot open: %s", f->path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        close(fd);
        return fail(err, errlen, LT_ERR_INVALID, "%s: %s, not a data file; %s", f->path,
                    S_ISDIR(sb.st_mode) ? "a directory" : "not a regular file", NOT_FOUND_FIX);
    }
    f->gz = gzdopen(fd, "rb");
    if (!f->gz) {
        close(fd);
        return fail(err, errlen, LT_ERR_NOMEM, "%s: cannot start zlib on it", f->path);
    }
    gzbuffer(f->gz, 1u << 17);
    return LT_OK;
}

/* Reads up to `want` bytes; returns how many arrived, or -1 on a zlib error. */
static int64_t gz_read_some(gzFile gz, uint8_t *dst, size_t want) {
    size_t got = 0;
    while (got < want) {
        size_t chunk = want - got < IDX_READ_CHUNK ? want - got : IDX_READ_CHUNK;
        int r = gzread(gz, dst + got, (unsigned)chunk);
        if (r < 0) return -1;
        if (r == 0) break;
        got += (size_t)r;
    }
    return (int64_t)got;
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static const char *idx_kind(uint32_t magic) {
    return magic == IDX_MAGIC_IMAGES ? "u8 images, 3 dimensions" : "u8 labels, 1 dimension";
}

static lt_status idx_read_header(idx_file *f, uint32_t want_magic, char *err, size_t errlen) {
    f->ndims = want_magic == IDX_MAGIC_IMAGES ? 3 : 1;
    size_t hdr_len = 4 + 4 * (size_t)f->ndims;
    uint8_t hdr[16];
    int64_t got = gz_read_some(f->gz, hdr, hdr_len);
    if (got < 0) return gz_failure(f, err, errlen);
    if (got >= 4 && be32(hdr) != want_magic)
        return fail(err, errlen, LT_ERR_CORRUPT,
                    "%s: bad IDX magic: expected 0x%x (%s), found 0x%x; is this the right file?",
                    f->path, want_magic, idx_kind(want_magic), be32(hdr));
    if ((size_t)got < hdr_len)
        return fail(err, errlen, LT_ERR_CORRUPT,
                    "%s: truncated: %lld bytes, shorter than the %zu-byte IDX header; %s",
                    f->path, (long long)got, hdr_len, CORRUPT_FIX);
    f->magic = want_magic;
    for (int i = 0; i < f->ndims; i++) f->dims[i] = be32(hdr + 4 + 4 * i);
    return LT_OK;
}

static lt_status idx_check_dims(idx_file *f, char *err, size_t errlen) {
    uint64_t total = 1;
    for (int i = 0; i < f->ndims; i++) {
        if (f->dims[i] == 0)
            return fail(err, errlen, LT_ERR_CORRUPT,
                        "%s: corrupt header: dimension %d is 0; %s", f->path, i, CORRUPT_FIX);
        if (__builtin_mul_overflow(total, (uint64_t)f->dims[i], &total)) {
            total = UINT64_MAX;
            break;
        }
    }
    /* Keep a margin below SIZE_MAX/INT64_MAX so offsets computed later cannot wrap. */
    if (total > ((uint64_t)1 << 48) || total > SIZE_MAX / 2)
        return fail(err, errlen, LT_ERR_CORRUPT,
                    "%s: corrupt header: dimensions %u x %u x %u are absurd; %s", f->path,
                    f->dims[0], f->ndims > 1 ? f->dims[1] : 1, f->ndims > 2 ? f->dims[2] : 1,
                    CORRUPT_FIX);
    f->payload = (size_t)total;
    return LT_OK;
}

static lt_status idx_truncated(idx_file *f, size_t got, char *err, size_t errlen) {
    int errnum = Z_OK;
    const char *m = zlib_message(f->gz, &errnum);
    char what[128];
    if (f->ndims == 3)
        snprintf(what, sizeof what, "%u images of %ux%u", f->dims[0], f->dims[1], f->dims[2]);
    else
        snprintf(what, sizeof what, "%u labels", f->dims[0]);
    return fail(err, errlen, LT_ERR_CORRUPT,
                "%s: truncated: header says %s = %zu bytes, file holds %zu%s%s%s; %s", f->path,
                what, f->payload, got, errnum == Z_BUF_ERROR ? " (gzip stream ends early: " : "",
                errnum == Z_BUF_ERROR ? m : "", errnum == Z_BUF_ERROR ? ")" : "", CORRUPT_FIX);
}

/* Grows the buffer only as data actually arrives (see IDX_INITIAL_CAP). */
static lt_status idx_read_payload(idx_file *f, char *err, size_t errlen) {
    size_t cap = f->payload < IDX_INITIAL_CAP ? f->payload : IDX_INITIAL_CAP, got = 0;
    for (;;) {
        uint8_t *p = realloc(f->data, cap);
        if (!p)
            return fail(err, errlen, LT_ERR_NOMEM, "%s: cannot allocate %zu bytes", f->path, cap);
        f->data = p;
        int64_t r = gz_read_some(f->gz, f->data + got, cap - got);
        if (r < 0) return gz_failure(f, err, errlen);
        got += (size_t)r;
        if (got < cap) return idx_truncated(f, got, err, errlen);
        if (got == f->payload) return LT_OK;
        cap = cap > f->payload / 2 ? f->payload : cap * 2;
    }
}

/* Reads to the end so that zlib checks the gzip trailer (CRC and length):
 * damage there, or in data after the payload, still means a bad file. */
static lt_status idx_check_trailer(idx_file *f, char *err, size_t errlen) {
    uint8_t sink[4096];
    int r;
    while ((r = gzread(f->gz, sink, sizeof sink)) > 0) {
    }
    int errnum = Z_OK;
    gzerror(f->gz, &errnum);
    /* Z_BUF_ERROR at the end: the stream stops before its trailer. */
    return r < 0 || errnum == Z_BUF_ERROR ? gz_failure(f, err, errlen) : LT_OK;
}

static lt_status idx_file_read(idx_file *f, uint32_t magic, char *err, size_t errlen) {
    LT_CHECK(idx_file_open(f, err, errlen));
    LT_CHECK(idx_read_header(f, magic, err, errlen));
    LT_CHECK(idx_check_dims(f, err, errlen));
    LT_CHECK(idx_read_payload(f, err, errlen));
    return idx_check_trailer(f, err, errlen);
}

static void idx_file_close(idx_file *f) {
    if (f->gz) gzclose(f->gz);
    f->gz = NULL;
}

/* ---- the dataset interface ------------------------------------------------ */

static int64_t idx_length(void *self) { return ((idx_dataset *)self)->n; }

static int idx_num_fields(void *self) {
    (void)self;
    return 2;
}

static lt_status idx_field_info(void *self, int field, lt_field_info *out) {
    idx_dataset *d = self;
    memset(out, 0, sizeof *out);
    if (field == 0) {
        *out = (lt_field_info){.dtype = LT_F32, .ndim = 3, .shape = {1, d->rows, d->cols}};
        return LT_OK;
    }
    if (field == 1) {
        *out = (lt_field_info){.dtype = LT_I32, .ndim = 0};
        return LT_OK;
    }
    lt_set_error(NULL, "idx dataset: field %d does not exist (fields: 0 image, 1 label)", field);
    return LT_ERR_INVALID;
}

/* One sample's pixels from the cached file: a short read means the file
 * changed under us (truncated, replaced), which the message says. */
static lt_status idx_pread(const idx_dataset *d, int64_t index, uint8_t *buf, size_t px) {
    off_t at = (off_t)(IDX_IMAGES_HEADER + (size_t)index * px);
    size_t got = 0;
    while (got < px) {
        ssize_t r = pread(d->images_fd, buf + got, px - got, at + (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            lt_set_error(NULL, "%s: cannot read sample %lld (%s); delete the file (data.cache_dir) and run again",
                         d->images_path, (long long)index, r < 0 ? strerror(errno) : "file is shorter than its header says");
            return LT_ERR_IO;
        }
        got += (size_t)r;
    }
    return LT_OK;
}

static lt_status idx_get(void *self, int64_t index, void *const *dst) {
    const idx_dataset *d = self;
    if (index < 0 || index >= d->n) {
        lt_set_error(NULL, "idx dataset: sample %lld out of range 0..%lld", (long long)index,
                     (long long)d->n - 1);
        return LT_ERR_INVALID;
    }
    int64_t px = d->rows * d->cols;
    float *img = dst[0];
    if (d->images) {
        const uint8_t *src = d->images + index * px;
        for (int64_t i = 0; i < px; i++) img[i] = d->lut[src[i]];
    } else {
        /* the pixels land in the float buffer's tail, then widen in place
         * from the front: byte i is read before float i overwrites it */
        uint8_t *tmp = (uint8_t *)(img + px) - px;
        LT_CHECK(idx_pread(d, index, tmp, (size_t)px));
        for (int64_t i = 0; i < px; i++) img[i] = d->lut[tmp[i]];
    }
    *(int32_t *)dst[1] = d->labels[index];
    return LT_OK;
}

static void idx_destroy(void *self) {
    idx_dataset *d = self;
    if (!d) return;
    free(d->images);
    if (d->images_fd >= 0) close(d->images_fd);
    free(d->labels);
    free(d);
}

static const lt_dataset_iface idx_iface = {
    .struct_size = sizeof(lt_dataset_iface),
    .length = idx_length,
    .num_fields = idx_num_fields,
    .field_info = idx_field_info,
    .get = idx_get,
    .destroy = idx_destroy,
};

/* The images through the cache: the cached file's header when it is there
 * and matches (img gets dims and the open fd), else decompress the source
 * into memory (img->data), write the cache and switch to it. A cache that
 * cannot be written only costs the memory. */
static lt_status idx_images(idx_file *img, const char *cache_dir, int *fd, char *cpath, size_t cplen,
                            char *err, size_t errlen) {
    *fd = -1;
    if (!cache_dir || lt_idx_cache_path(cache_dir, img->path, cpath, cplen) != LT_OK)
        return idx_file_read(img, IDX_MAGIC_IMAGES, err, errlen);
    uint32_t dims[3];
    *fd = lt_idx_cache_open(cpath, IDX_MAGIC_IMAGES, dims);
    if (*fd >= 0) {
        img->magic = IDX_MAGIC_IMAGES;
        img->ndims = 3;
        memcpy(img->dims, dims, sizeof dims);
        return idx_check_dims(img, err, errlen);
    }
    LT_CHECK(idx_file_read(img, IDX_MAGIC_IMAGES, err, errlen));
    if (lt_idx_cache_write(cpath, IDX_MAGIC_IMAGES, img->dims, img->data, img->payload) != LT_OK) {
        lt_log(NULL, LT_LOG_WARN, "data.cache_dir: cannot write %s (%s); the images stay in this process's "
               "memory; point data.cache_dir at a writable directory, or set it to none", cpath, strerror(errno));
    } else {
        uint32_t again[3];
        *fd = lt_idx_cache_open(cpath, IDX_MAGIC_IMAGES, again);
        if (*fd >= 0 && !memcmp(again, img->dims, sizeof again)) {
            free(img->data);
            img->data = NULL;
        } else if (*fd >= 0) {
            close(*fd);
            *fd = -1;
        }
    }
    return LT_OK;
}

lt_status lt_idx_dataset_open_cached(const char *images_path, const char *labels_path, double mean, double std,
                                     const char *cache_dir, lt_dataset *out, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (out) memset(out, 0, sizeof *out);
    if (!images_path || !labels_path || !out)
        return fail(err, errlen, LT_ERR_INVALID, "idx dataset: NULL path or output");
    if (!(std > 0) || !isfinite(std) || !isfinite(mean))
        return fail(err, errlen, LT_ERR_INVALID,
                    "idx dataset: normalization mean %g, std %g: std must be > 0 and both finite",
                    mean, std);
    idx_file img = {.path = images_path}, lab = {.path = labels_path};
    int fd = -1;
    char cpath[512] = "";
    lt_status st = idx_images(&img, cache_dir, &fd, cpath, sizeof cpath, err, errlen);
    if (st == LT_OK) st = idx_file_read(&lab, IDX_MAGIC_LABELS, err, errlen);
    if (st == LT_OK && img.dims[0] != lab.dims[0])
        st = fail(err, errlen, LT_ERR_CORRUPT,
                  "%s holds %u images but %s holds %u labels; pair files of the same split "
                  "(train-* with train-*, t10k-* with t10k-*)",
                  img.path, img.dims[0], lab.path, lab.dims[0]);
    idx_file_close(&img);
    idx_file_close(&lab);
    idx_dataset *d = st == LT_OK ? calloc(1, sizeof *d) : NULL;
    if (st == LT_OK && !d) st = fail(err, errlen, LT_ERR_NOMEM, "idx dataset: out of memory");
    if (st != LT_OK) {
        free(img.data);
        free(lab.data);
        if (fd >= 0) close(fd);
        return st;
    }
    *d = (idx_dataset){.images = img.data, .images_fd = fd, .labels = lab.data, .n = img.dims[0],
                       .rows = img.dims[1], .cols = img.dims[2]};
    snprintf(d->images_path, sizeof d->images_path, "%s", cpath);
    for (int v = 0; v < 256; v++) d->lut[v] = (float)(((double)v / 255.0 - mean) / std);
    *out = (lt_dataset){.iface = &idx_iface, .self = d};
    return LT_OK;
}

lt_status lt_idx_dataset_open(const char *images_path, const char *labels_path, double mean,
                              double std, lt_dataset *out, char *err, size_t errlen) {
    return lt_idx_dataset_open_cached(images_path, labels_path, mean, std, NULL, out, err, errlen);
}

/* ---- subset views ----------------------------------------------------------- */

typedef struct subset_view {
    lt_dataset base;  /* borrowed */
    int64_t start, count;
} subset_view;

static int64_t subset_length(void *self) { return ((subset_view *)self)->count; }

static int subset_num_fields(void *self) {
    subset_view *v = self;
    return v->base.iface->num_fields(v->base.self);
}

static lt_status subset_field_info(void *self, int field, lt_field_info *out) {
    subset_view *v = self;
    return v->base.iface->field_info(v->base.self, field, out);
}

static lt_status subset_get(void *self, int64_t index, void *const *dst) {
    subset_view *v = self;
    if (index < 0 || index >= v->count) {
        lt_set_error(NULL, "dataset subset: sample %lld out of range 0..%lld", (long long)index,
                     (long long)v->count - 1);
        return LT_ERR_INVALID;
    }
    return v->base.iface->get(v->base.self, v->start + index, dst);
}

static void subset_destroy(void *self) { free(self); }

static const lt_dataset_iface subset_iface = {
    .struct_size = sizeof(lt_dataset_iface),
    .length = subset_length,
    .num_fields = subset_num_fields,
    .field_info = subset_field_info,
    .get = subset_get,
    .destroy = subset_destroy,
};

lt_status lt_dataset_subset(const lt_dataset *base, int64_t start, int64_t count,
                            lt_dataset *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!base || !base->iface || !out) {
        lt_set_error(NULL, "dataset subset: NULL base dataset or output");
        return LT_ERR_INVALID;
    }
    int64_t n = base->iface->length(base->self);
    if (start < 0 || count < 0 || start > n || count > n - start) {
        lt_set_error(NULL,
                     "dataset subset: samples [%lld, %lld) do not lie inside the dataset's "
                     "%lld; lower the split size",
                     (long long)start, (long long)start + (long long)count, (long long)n);
        return LT_ERR_INVALID;
    }
    subset_view *v = malloc(sizeof *v);
    if (!v) {
        lt_set_error(NULL, "dataset subset: out of memory");
        return LT_ERR_NOMEM;
    }
    *v = (subset_view){.base = *base, .start = start, .count = count};
    *out = (lt_dataset){.iface = &subset_iface, .self = v};
    return LT_OK;
}

void lt_dataset_destroy(lt_dataset *ds) {
    if (!ds) return;
    if (ds->iface && ds->iface->destroy) ds->iface->destroy(ds->self);
    ds->iface = NULL;
    ds->self = NULL;
}
