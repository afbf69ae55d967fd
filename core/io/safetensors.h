/* safetensors files (the Hugging Face format) for checkpoints: an 8-byte
 * little-endian header length N, N bytes of JSON describing each tensor, then
 * the tensors' bytes, contiguous, in offset order. Files written here load with
 * safetensors.torch.load_file / safetensors.numpy.load_file and vice versa.
 *
 * Tensor bytes are stored little-endian, as the format requires; lt only builds
 * on little-endian hosts, so they are written and returned as they are in memory.
 *
 * Error messages go into err (errlen bytes, always NUL-terminated when errlen > 0;
 * err may be NULL) as one line naming the file, what is wrong and what to do. */
#ifndef LT_SAFETENSORS_H
#define LT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "lt/core.h"

#define LT_ST_MAX_DIMS 8

/* One tensor. ndim 0 is a scalar (one element). nbytes must equal the product
 * of the shape times lt_dtype_size(dtype); data may be NULL only when nbytes is 0. */
typedef struct lt_st_tensor {
    const char *name;
    lt_dtype dtype;
    int ndim;
    int64_t shape[LT_ST_MAX_DIMS];
    const void *data;
    size_t nbytes;
} lt_st_tensor;

/* Writes n tensors and nmeta metadata pairs (meta[2i] is a key, meta[2i+1] its
 * value; meta may be NULL when nmeta is 0) to path.
 *
 * Layout: widest dtype first, the caller's order among equal widths, as the
 * safetensors library does; so every tensor's data in the file sits on a
 * multiple of its element size and a mapped reader can use it in place.
 *
 * Atomic: the bytes go to <path>.tmp.<pid> in the same directory, which is
 * fsynced and renamed over path, then the directory is fsynced. On any failure
 * before the rename the previous file at path is untouched and the temp file is
 * removed, so a crash or a full disk never costs the last good checkpoint. Two
 * threads of one process must not write the same path at the same time (they
 * would share the temp name).
 *
 * LT_ERR_INVALID: a bad tensor or metadata entry (NULL or duplicate name, the
 * reserved name "__metadata__", unknown dtype, ndim outside 0..8, negative
 * dimension, nbytes that does not match the shape). LT_ERR_IO: the file system
 * refused (no such directory, no space, permissions); if only the final
 * directory fsync fails, the new file is in place but may not survive a crash. */
lt_status lt_st_write(const char *path, const lt_st_tensor *t, size_t n,
                      const char *const *meta, size_t nmeta, char *err, size_t errlen);

/* Removes the temp files "<path>.tmp.<pid>" (the exact name lt_st_write gives
 * them) that writers killed mid-write left in path's directory: regular files
 * whose pid no longer exists or runs something other than lt (the pid was
 * reused). Other files are never touched, nor temp files of this process or of
 * any lt process that may still be writing, nor those of a pid it cannot
 * inspect (another user's). Only meaningful on the host that writes path: a
 * pid from another host says nothing here. *removed (may be NULL) gets the
 * count. A missing directory is LT_OK; LT_ERR_IO when it cannot be listed or a
 * file cannot be removed (the others still are). */
lt_status lt_st_remove_stale_temps(const char *path, size_t *removed, char *err, size_t errlen);

/* A validated, read-only file; safe to read from several threads at once. */
typedef struct lt_st_file lt_st_file;

/* Maps path and validates all of it before returning: header length, JSON,
 * every entry's dtype, shape and offsets, that the offsets tile the data section
 * exactly, and that metadata values are strings.
 *
 * LT_ERR_CORRUPT: truncated or malformed file (the message says which part and,
 * for a truncated file, to use the previous checkpoint). LT_ERR_UNSUPPORTED: a
 * valid safetensors dtype lt has no type for (BOOL, U16, F8_E4M3 ...).
 * LT_ERR_NOT_FOUND: no file at path. LT_ERR_IO: it cannot be read. */
lt_status lt_st_open(const char *path, lt_st_file **out, char *err, size_t errlen);

/* Tensors in file (offset) order; lt_st_at returns NULL when i >= count. The
 * returned tensors, their names, data and metadata strings live until
 * lt_st_close. data is aligned to the element size in files written by
 * lt_st_write or the safetensors library; other writers may leave it unaligned,
 * so copy with memcpy rather than casting a file of unknown origin. */
size_t lt_st_count(const lt_st_file *f);
const lt_st_tensor *lt_st_at(const lt_st_file *f, size_t i);
/* NULL when no tensor has that name. O(log n). */
const lt_st_tensor *lt_st_find(const lt_st_file *f, const char *name);
/* The "__metadata__" value for key; NULL if absent. */
const char *lt_st_meta(const lt_st_file *f, const char *key);
/* Unmaps and frees; NULL is allowed. */
void lt_st_close(lt_st_file *f);

#endif
