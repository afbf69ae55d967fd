/* The decoded-IDX cache (idx.c): a gzip-compressed IDX file is inflated
 * once into a plain IDX file in data.cache_dir, named
 * "<base>.<hash of the source's absolute path, 16 hex>.<size>.<mtime sec>.<mtime nsec, 9 digits>",
 * so a changed or replaced source gets a new entry and no run ever reads a
 * stale one. Writers go through a temporary file ("<entry>.tmp.XXXXXX") and
 * rename, so concurrent ranks and killed writers never leave a half-written
 * entry under the final name. Before writing a new entry, the writer
 * removes the same source's entries of another size or mtime written over
 * an hour ago (this host's source can no longer use them; the hour spares
 * other hosts' entries for their own copy of the data in a shared cache
 * directory while their job runs), so the cache holds about one entry per
 * source; it never touches other sources' entries, temporary files or
 * foreign files, nor the entry it writes, which ranks writing it at the same
 * time share. */
#ifndef LT_DATA_IDX_CACHE_H
#define LT_DATA_IDX_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include "lt/core.h"

#define IDX_IMAGES_HEADER 16 /* magic + 3 dimensions, big-endian */

/* data.cache_dir as a directory: "auto" is $XDG_CACHE_HOME/lt, else
 * $HOME/.cache/lt; "" or "none" turn the cache off (returns false). */
bool lt_idx_cache_dir(const char *setting, char *out, size_t n);
/* The entry for source file `src` in `dir` (LT_ERR_IO when src cannot be
 * stat'ed: the read that follows reports it properly). */
lt_status lt_idx_cache_path(const char *dir, const char *src, char *out, size_t n);
/* Opens an entry whose header has `magic` (3 dimensions) and whose size is
 * exactly header + payload; fills dims and returns the fd, or -1 when it is
 * missing or does not match (a damaged entry is simply rebuilt). */
int lt_idx_cache_open(const char *path, uint32_t magic, uint32_t dims[3]);
/* Removes the source's stale entries (above; a failure there is no error),
 * then writes the entry (directory made as needed). LT_ERR_IO when it
 * cannot write: the caller goes on from memory. */
lt_status lt_idx_cache_write(const char *path, uint32_t magic, const uint32_t dims[3], const uint8_t *data,
                             size_t bytes);

#endif
