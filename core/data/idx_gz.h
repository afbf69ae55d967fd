/* The bytes of a data file as the IDX reader (idx.c) sees them: a gzip file
 * inflated, or a plain file as it is (the first two bytes tell).
 *
 * Concatenated gzip members are one stream, as gunzip reads them (pigz,
 * `cat a.gz b.gz`): each member's CRC and length are checked. Anything else
 * after a member is refused with its byte offset: zlib's gzread skips such
 * trailing bytes silently, so a file with data appended (or two files
 * glued by a broken copy) would read as if it were whole. */
#ifndef LT_DATA_IDX_GZ_H
#define LT_DATA_IDX_GZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>
#include "lt/core.h"

typedef struct idx_src {
    const char *path;
    int fd;
    bool gzip;         /* else a plain file, read as it is */
    bool z_live;       /* zs is initialised (inflateEnd owed) */
    bool eof;          /* read() returned 0 */
    bool end;          /* the data ended where a file may end */
    bool cut;          /* the file ends inside a gzip member */
    z_stream zs;
    uint8_t *in;       /* compressed bytes read, not yet inflated */
    uint64_t consumed; /* file bytes read so far (zs.avail_in of them not inflated yet) */
    uint64_t size;     /* the file's size at open */
} idx_src;

/* Opens path (a regular file; a FIFO is refused without blocking). Errors,
 * one line in err: LT_ERR_NOT_FOUND, LT_ERR_IO, LT_ERR_INVALID (not a
 * regular file), LT_ERR_NOMEM. `fix` ends the not-found message. */
lt_status idx_src_open(idx_src *s, const char *path, const char *fix, char *err, size_t errlen);
/* Up to `want` decoded bytes into dst; *got < want only at the end of the
 * data, where `cut` says whether a gzip member was cut short. Errors:
 * LT_ERR_CORRUPT (damaged gzip data, trailing bytes that are not a gzip
 * member: both name the byte offset), LT_ERR_IO, LT_ERR_NOMEM. `fix` ends
 * the corrupt messages. */
lt_status idx_src_read(idx_src *s, uint8_t *dst, size_t want, size_t *got, const char *fix,
                       char *err, size_t errlen);
void idx_src_close(idx_src *s);
/* Formats one line into err (when given) and returns st: the IDX reader's
 * errors, here and in idx.c. */
lt_status idx_fail(char *err, size_t errlen, lt_status st, const char *fmt, ...) LT_PRINTF(4, 5);

#endif
