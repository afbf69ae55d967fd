/* IDX files (the MNIST family's format) as an lt_dataset, and subset views.
 *
 * Without a cache both files are read into memory at open, so `get` is a
 * table lookup per pixel and needs no locking. Plain and gzip files (one
 * member or several) are read alike (idx_gz.c); the bytes must end where
 * the header says, and a gzip file where its last member does.
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
#include "data_internal.h"
#include "idx_cache.h"
#include "idx_gz.h"

#define IDX_MAGIC_IMAGES 0x00000803u /* u8 elements, 3 dimensions */
#define IDX_MAGIC_LABELS 0x00000801u /* u8 elements, 1 dimension */
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
    idx_src src;
    uint32_t magic;
    int ndims;
    uint32_t dims[3];
    size_t payload;    /* bytes the header promises */
    uint8_t *data;
} idx_file;

static lt_status idx_read(idx_file *f, uint8_t *dst, size_t want, size_t *got, char *err,
                          size_t errlen) {
    return idx_src_read(&f->src, dst, want, got, CORRUPT_FIX, err, errlen);
}

/* Said after a count of bytes when the file ends inside a gzip member. */
static const char *cut_note(const idx_file *f) {
    return f->src.cut ? " (gzip stream ends early: unexpected end of file)" : "";
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static const char *idx_kind(uint32_t magic) {
    return magic == IDX_MAGIC_IMAGES ? "u8 images, 3 dimensions" : "u8 labels, 1 dimension";
}

static lt_status idx_read_header(idx_file *f, uint32_t want_magic, char *err, size_t errlen) {
    f->ndims = want_magic == IDX_MAGIC_IMAGES ? 3 : 1;
    size_t hdr_len = 4 + 4 * (size_t)f->ndims, got;
    uint8_t hdr[16];
    LT_CHECK(idx_read(f, hdr, hdr_len, &got, err, errlen));
    if (got >= 4 && be32(hdr) != want_magic)
        return idx_fail(err, errlen, LT_ERR_CORRUPT,
                        "%s: bad IDX magic: expected 0x%x (%s), found 0x%x; is this the right "
                        "file?",
                        f->path, want_magic, idx_kind(want_magic), be32(hdr));
    if (got < hdr_len)
        return idx_fail(err, errlen, LT_ERR_CORRUPT,
                        "%s: truncated: %zu bytes, shorter than the %zu-byte IDX header%s; %s",
                        f->path, got, hdr_len, cut_note(f), CORRUPT_FIX);
    f->magic = want_magic;
    for (int i = 0; i < f->ndims; i++) f->dims[i] = be32(hdr + 4 + 4 * i);
    return LT_OK;
}

static lt_status idx_check_dims(idx_file *f, char *err, size_t errlen) {
    uint64_t total = 1;
    for (int i = 0; i < f->ndims; i++) {
        if (f->dims[i] == 0)
            return idx_fail(err, errlen, LT_ERR_CORRUPT,
                            "%s: corrupt header: dimension %d is 0; %s", f->path, i, CORRUPT_FIX);
        if (__builtin_mul_overflow(total, (uint64_t)f->dims[i], &total)) {
            total = UINT64_MAX;
            break;
        }
    }
    /* Keep a margin below SIZE_MAX/INT64_MAX so offsets computed later cannot wrap. */
    if (total > ((uint64_t)1 << 48) || total > SIZE_MAX / 2)
        return idx_fail(err, errlen, LT_ERR_CORRUPT,
                        "%s: corrupt header: dimensions %u x %u x %u are absurd; %s", f->path,
                        f->dims[0], f->ndims > 1 ? f->dims[1] : 1, f->ndims > 2 ? f->dims[2] : 1,
                        CORRUPT_FIX);
    f->payload = (size_t)total;
    return LT_OK;
}

/* "100 images of 28x28 = 78400 bytes": what the header promises. */
static const char *idx_promise(const idx_file *f, char *buf, size_t len) {
    if (f->ndims == 3)
        snprintf(buf, len, "%u images of %ux%u = %zu bytes", f->dims[0], f->dims[1], f->dims[2],
                 f->payload);
    else
        snprintf(buf, len, "%u labels = %zu bytes", f->dims[0], f->payload);
    return buf;
}

static lt_status idx_truncated(idx_file *f, size_t got, char *err, size_t errlen) {
    char what[128];
    return idx_fail(err, errlen, LT_ERR_CORRUPT,
                    "%s: truncated: header says %s, file holds %zu%s; %s", f->path,
                    idx_promise(f, what, sizeof what), got, cut_note(f), CORRUPT_FIX);
}

/* Grows the buffer only as data actually arrives (see IDX_INITIAL_CAP). */
static lt_status idx_read_payload(idx_file *f, char *err, size_t errlen) {
    size_t cap = f->payload < IDX_INITIAL_CAP ? f->payload : IDX_INITIAL_CAP, got = 0;
    for (;;) {
        uint8_t *p = realloc(f->data, cap);
        if (!p)
            return idx_fail(err, errlen, LT_ERR_NOMEM, "%s: cannot allocate %zu bytes", f->path,
                            cap);
        f->data = p;
        size_t r;
        LT_CHECK(idx_read(f, f->data + got, cap - got, &r, err, errlen));
        got += r;
        if (got < cap) return idx_truncated(f, got, err, errlen);
        if (got == f->payload) return LT_OK;
        cap = cap > f->payload / 2 ? f->payload : cap * 2;
    }
}

/* The data end where the header says: not a byte more (a header and data
 * that disagree mean a damaged or wrong file, whichever is right), and a
 * gzip file's last member whole, so its CRC and length were checked. */
static lt_status idx_check_end(idx_file *f, char *err, size_t errlen) {
    uint8_t sink[4096];
    uint64_t extra = 0;
    size_t got;
    do {
        LT_CHECK(idx_read(f, sink, sizeof sink, &got, err, errlen));
        extra += got;
    } while (got == sizeof sink);
    char what[128];
    if (extra)
        return idx_fail(err, errlen, LT_ERR_CORRUPT,
                        "%s: too long: header says %s, the %s holds %llu more; %s", f->path,
                        idx_promise(f, what, sizeof what),
                        f->src.gzip ? "decompressed data" : "file", (unsigned long long)extra,
                        CORRUPT_FIX);
    if (f->src.cut)
        return idx_fail(err, errlen, LT_ERR_CORRUPT,
                        "%s: corrupt gzip data (unexpected end of file: the gzip stream is cut "
                        "inside its trailer, so its CRC cannot be checked); %s", f->path,
                        CORRUPT_FIX);
    return LT_OK;
}

static lt_status idx_file_read(idx_file *f, uint32_t magic, char *err, size_t errlen) {
    LT_CHECK(idx_src_open(&f->src, f->path, NOT_FOUND_FIX, err, errlen));
    LT_CHECK(idx_read_header(f, magic, err, errlen));
    LT_CHECK(idx_check_dims(f, err, errlen));
    LT_CHECK(idx_read_payload(f, err, errlen));
    return idx_check_end(f, err, errlen);
}

static void idx_file_close(idx_file *f) { idx_src_close(&f->src); }

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

/* One pass over the labels (60000 bytes for Fashion-MNIST's train split):
 * a label past the classes is named with its file and sample here, once,
 * instead of by the loss kernel at whichever batch draws it. */
static lt_status idx_check_labels(const idx_file *lab, int num_classes, char *err, size_t errlen) {
    size_t bad = 0, first = 0;
    for (size_t i = lab->payload; i-- > 0;)
        if (lab->data[i] >= num_classes) {
            bad++;
            first = i;
        }
    if (!bad) return LT_OK;
    return idx_fail(err, errlen, LT_ERR_INVALID,
                    "%s: sample %zu has label %u, outside the classes [0, %d) (%zu of its %zu "
                    "labels are); use the label file of this dataset, or set data.num_classes to "
                    "the number of classes its labels count", lab->path, first, (unsigned)lab->data[first],
                    num_classes, bad, lab->payload);
}

lt_status lt_idx_dataset_open_cached(const char *images_path, const char *labels_path, double mean,
                                     double std, int num_classes, const char *cache_dir,
                                     lt_dataset *out, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (out) memset(out, 0, sizeof *out);
    if (!images_path || !labels_path || !out)
        return idx_fail(err, errlen, LT_ERR_INVALID, "idx dataset: NULL path or output");
    if (!(std > 0) || !isfinite(std) || !isfinite(mean))
        return idx_fail(err, errlen, LT_ERR_INVALID,
                        "idx dataset: normalization mean %g, std %g: std must be > 0 and both "
                        "finite", mean, std);
    idx_file img = {.path = images_path}, lab = {.path = labels_path};
    int fd = -1;
    char cpath[512] = "";
    lt_status st = idx_images(&img, cache_dir, &fd, cpath, sizeof cpath, err, errlen);
    if (st == LT_OK) st = idx_file_read(&lab, IDX_MAGIC_LABELS, err, errlen);
    if (st == LT_OK && num_classes > 0) st = idx_check_labels(&lab, num_classes, err, errlen);
    if (st == LT_OK && img.dims[0] != lab.dims[0])
        st = idx_fail(err, errlen, LT_ERR_CORRUPT,
                  "%s holds %u images but %s holds %u labels; pair files of the same split "
                  "(train-* with train-*, t10k-* with t10k-*)",
                  img.path, img.dims[0], lab.path, lab.dims[0]);
    idx_file_close(&img);
    idx_file_close(&lab);
    idx_dataset *d = st == LT_OK ? calloc(1, sizeof *d) : NULL;
    if (st == LT_OK && !d) st = idx_fail(err, errlen, LT_ERR_NOMEM, "idx dataset: out of memory");
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
    return lt_idx_dataset_open_cached(images_path, labels_path, mean, std, 0, NULL, out, err,
                                      errlen);
}

/* ---- the files in data.dir ---------------------------------------------------- */

/* lstat, so that a name that is there but cannot be used (a dangling link,
 * a FIFO, no permission) is chosen and its open says why. */
static bool idx_present(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0 || errno != ENOENT;
}

lt_status lt_idx_find(const char *dir, const char *name, char *out, size_t outlen, char *err,
                      size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!dir || !name || !out || !outlen)
        return idx_fail(err, errlen, LT_ERR_INVALID, "idx files: NULL directory, name or output");
    /* ENOTDIR: a file on the way (data.dir = afile/sub) */
    struct stat sb;
    int rc = stat(dir, &sb);
    if ((rc == 0 && !S_ISDIR(sb.st_mode)) || (rc != 0 && errno == ENOTDIR))
        return idx_fail(err, errlen, LT_ERR_INVALID,
                        "not a directory; set data.dir to the folder holding the Fashion-MNIST "
                        "files");
    int w = snprintf(out, outlen, "%s/%s.gz", dir, name);
    if (w < 0 || (size_t)w >= outlen)
        return idx_fail(err, errlen, LT_ERR_INVALID,
                        "%s/%s.gz: path too long (over %zu bytes); use a shorter data.dir", dir,
                        name, outlen - 1);
    if (idx_present(out)) return LT_OK;
    snprintf(out, outlen, "%s/%s", dir, name); /* plain: as gunzip and torchvision leave it */
    if (idx_present(out)) return LT_OK;
    return idx_fail(err, errlen, LT_ERR_NOT_FOUND, "%s/%s(.gz): not found; %s", dir, name,
                    NOT_FOUND_FIX);
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
