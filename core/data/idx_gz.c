/* A data file's bytes, inflated member by member (idx_gz.h). inflate()
 * rather than gzread: only inflate says where a member ends, which is what
 * telling another member from trailing garbage needs. */
#include "idx_gz.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define IDX_IN_BUF ((size_t)1 << 17)
#define IDX_OUT_CHUNK ((size_t)1 << 30) /* avail_out is an unsigned int */

lt_status idx_fail(char *err, size_t errlen, lt_status st, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* The offset in the file of the next byte not inflated yet. */
static uint64_t offset(const idx_src *s) { return s->consumed - s->zs.avail_in; }

/* Appends what the file has next to the unread input (moved to the front). */
static lt_status fill(idx_src *s, char *err, size_t errlen) {
    if (s->eof) return LT_OK;
    if (s->zs.avail_in && s->zs.next_in != s->in) memmove(s->in, s->zs.next_in, s->zs.avail_in);
    s->zs.next_in = s->in;
    ssize_t r;
    do r = read(s->fd, s->in + s->zs.avail_in, IDX_IN_BUF - s->zs.avail_in);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return idx_fail(err, errlen, LT_ERR_IO, "%s: cannot read: %s", s->path, strerror(errno));
    if (r == 0) s->eof = true;
    s->zs.avail_in += (uInt)r;
    s->consumed += (uint64_t)r;
    return LT_OK;
}

/* At least the two bytes that say what follows, unless the file ends first:
 * a read may return fewer bytes than asked (a pipe-backed or network file
 * system), which must not read as trailing garbage. */
static lt_status fill_two(idx_src *s, char *err, size_t errlen) {
    while (s->zs.avail_in < 2 && !s->eof) LT_CHECK(fill(s, err, errlen));
    return LT_OK;
}

static bool gzip_magic(const idx_src *s) {
    return s->zs.avail_in >= 2 && s->zs.next_in[0] == 0x1f && s->zs.next_in[1] == 0x8b;
}

lt_status idx_src_open(idx_src *s, const char *path, const char *fix, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    s->path = path;
    /* O_NONBLOCK so that a FIFO in the data's place is refused below
     * instead of blocking until something writes to it. */
    s->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (s->fd < 0 && errno == ENOENT)
        return idx_fail(err, errlen, LT_ERR_NOT_FOUND, "%s: not found; %s", path, fix);
    if (s->fd < 0)
        return idx_fail(err, errlen, LT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(s->fd, &sb) != 0)
        return idx_fail(err, errlen, LT_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return idx_fail(err, errlen, LT_ERR_INVALID, "%s: %s, not a data file; %s", path,
                        S_ISDIR(sb.st_mode) ? "a directory" : "not a regular file", fix);
    s->size = (uint64_t)sb.st_size;
    s->in = malloc(IDX_IN_BUF);
    if (!s->in)
        return idx_fail(err, errlen, LT_ERR_NOMEM, "%s: out of memory for its read buffer", path);
    s->zs.next_in = s->in;
    LT_CHECK(fill_two(s, err, errlen));
    s->gzip = gzip_magic(s);
    if (s->gzip) {
        if (inflateInit2(&s->zs, 16 + MAX_WBITS) != Z_OK) /* 16: gzip members only */
            return idx_fail(err, errlen, LT_ERR_NOMEM, "%s: cannot start zlib on it", path);
        s->z_live = true;
    }
    return LT_OK;
}

/* A member ended, its CRC and length checked: the file ends here, or
 * another member starts, or what follows is refused. */
static lt_status next_member(idx_src *s, const char *fix, char *err, size_t errlen) {
    LT_CHECK(fill_two(s, err, errlen));
    if (!s->zs.avail_in) {
        s->end = true;
        return LT_OK;
    }
    if (gzip_magic(s)) {
        if (inflateReset(&s->zs) == Z_OK) return LT_OK;
        return idx_fail(err, errlen, LT_ERR_NOMEM, "%s: zlib reset failed", s->path);
    }
    unsigned long long at = offset(s), left = s->size > at ? s->size - at : s->zs.avail_in;
    bool one = left == 1;
    return idx_fail(err, errlen, LT_ERR_CORRUPT,
                    "%s: the %llu byte%s from byte %llu on %s not gzip data (trailing garbage "
                    "after the last gzip member); cut %s off (truncate -s %llu) or %s", s->path,
                    left, one ? "" : "s", at, one ? "is" : "are", one ? "it" : "them", at, fix);
}

static lt_status inflate_some(idx_src *s, uint8_t *dst, size_t want, size_t *got, const char *fix,
                              char *err, size_t errlen) {
    while (*got < want && !s->end) {
        if (!s->zs.avail_in) LT_CHECK(fill(s, err, errlen));
        size_t chunk = want - *got < IDX_OUT_CHUNK ? want - *got : IDX_OUT_CHUNK;
        s->zs.next_out = dst + *got;
        s->zs.avail_out = (uInt)chunk;
        int z = inflate(&s->zs, Z_NO_FLUSH);
        *got += chunk - s->zs.avail_out;
        if (z == Z_STREAM_END) {
            LT_CHECK(next_member(s, fix, err, errlen));
        } else if (z == Z_BUF_ERROR && !s->zs.avail_in && s->eof) {
            s->cut = s->end = true; /* inflate has nothing left to give and the file no more */
        } else if (z == Z_MEM_ERROR) {
            return idx_fail(err, errlen, LT_ERR_NOMEM, "%s: out of memory while decompressing",
                            s->path);
        } else if (z != Z_OK && z != Z_BUF_ERROR) {
            return idx_fail(err, errlen, LT_ERR_CORRUPT,
                            "%s: corrupt gzip data (%s) at byte %llu; %s", s->path,
                            s->zs.msg ? s->zs.msg : "unknown zlib error",
                            (unsigned long long)offset(s), fix);
        }
    }
    return LT_OK;
}

lt_status idx_src_read(idx_src *s, uint8_t *dst, size_t want, size_t *got, const char *fix,
                       char *err, size_t errlen) {
    *got = 0;
    if (s->gzip) return inflate_some(s, dst, want, got, fix, err, errlen);
    while (*got < want && !s->end) {
        if (!s->zs.avail_in) LT_CHECK(fill(s, err, errlen));
        if (!s->zs.avail_in) {
            s->end = true;
            break;
        }
        size_t n = want - *got < s->zs.avail_in ? want - *got : s->zs.avail_in;
        memcpy(dst + *got, s->zs.next_in, n);
        s->zs.next_in += n;
        s->zs.avail_in -= (uInt)n;
        *got += n;
    }
    return LT_OK;
}

void idx_src_close(idx_src *s) {
    if (!s->path) return; /* never opened (a zeroed struct's fd 0 is not ours) */
    if (s->z_live) inflateEnd(&s->zs);
    if (s->fd >= 0) close(s->fd);
    free(s->in);
    s->z_live = false;
    s->fd = -1;
    s->in = NULL;
}
