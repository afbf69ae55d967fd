/* The core's data path: the IDX reader (Fashion-MNIST, MNIST), subset views,
 * the distributed sampler and the prefetching batch loader.
 *
 * Error reporting: functions that take `err, errlen` write one line naming the
 * file or value, what is wrong and the fix. Functions without them put their
 * message in the calling thread's error slot (lt_set_error(NULL, ...), read
 * with lt_last_error(NULL)). A dataset's `get` reports the same way; the loader
 * carries that message from its prefetch thread to the thread that calls
 * lt_loader_next.
 *
 * Internal: not exported by liblt.so (tests link the core's objects); they
 * are not part of the plugin ABI and may change between minors. */
#ifndef LT_DATA_INTERNAL_H
#define LT_DATA_INTERNAL_H

#include "lt/data.h"

/* ---- datasets ------------------------------------------------------------ */

/* Opens a pair of IDX files (plain, or gzip of one or more members): images
 * with magic 0x00000803 (u8, N x rows x cols, big-endian header) and labels
 * with magic 0x00000801 (u8, N). Both are read into memory once; the files
 * are closed before this returns.
 *
 * Fields: 0 = f32 image [1, rows, cols], each pixel (x/255 - mean)/std;
 *         1 = i32 label [] (the raw byte, 0..255; lt_idx_dataset_open_cached
 *         checks them against the number of classes).
 * `get` is safe to call concurrently from any number of threads.
 *
 * Errors: LT_ERR_NOT_FOUND (a file is missing), LT_ERR_IO (cannot be opened or
 * read), LT_ERR_CORRUPT (bad magic, zero or overflowing dimensions, data
 * shorter or longer than its header says, damaged gzip stream, bytes after
 * the last gzip member that are not one, image and label counts differ),
 * LT_ERR_INVALID (std <= 0 or not finite, NULL arguments), LT_ERR_NOMEM.
 * On error *out is left zeroed.
 * The caller owns *out and releases it with lt_dataset_destroy. */
lt_status lt_idx_dataset_open(const char *images_path, const char *labels_path,
                              double mean, double std, lt_dataset *out, char *err,
                              size_t errlen);
/* The same, with the images decoded once into `cache_dir` (idx_cache.h;
 * NULL: no cache) and read from there sample by sample (pread), so the
 * decoded pixels are shared by the host's processes through the page cache
 * instead of copied into each. A cache that cannot be written is skipped
 * (the images stay in memory); an entry that does not match is rebuilt.
 * With num_classes > 0 every label must lie in [0, num_classes): the first
 * that does not is refused here (LT_ERR_INVALID, naming the label file, the
 * sample and the value), not by the loss at the batch that holds it. */
lt_status lt_idx_dataset_open_cached(const char *images_path, const char *labels_path, double mean,
                                     double std, int num_classes, const char *cache_dir,
                                     lt_dataset *out, char *err, size_t errlen);

/* The path of IDX file `name` ("train-images-idx3-ubyte") in `dir` into
 * out: "<dir>/<name>.gz" when that is there, else "<dir>/<name>" (plain,
 * as gunzip and torchvision's raw/ leave it). Errors, one line in err that
 * follows "data.dir = <dir> (<origin>): ": LT_ERR_INVALID when dir is not a
 * directory (or the path is too long), LT_ERR_NOT_FOUND when neither name
 * is there ("<dir>/<name>(.gz): not found; ..."). */
lt_status lt_idx_find(const char *dir, const char *name, char *out, size_t outlen, char *err,
                      size_t errlen);

/* A view of samples [start, start + count) of `base`, renumbered from 0 (the
 * train/validation split: the last val_split samples of train validate).
 * The view borrows `base`: destroying the view never destroys the base, and
 * the base must outlive every view of it. `get` is as thread-safe as the
 * base's. LT_ERR_INVALID (message in the thread's error slot) when the range
 * does not lie inside the base. */
lt_status lt_dataset_subset(const lt_dataset *base, int64_t start, int64_t count,
                            lt_dataset *out);

/* Calls the dataset's destroy hook (if any) and zeroes *ds; NULL-safe and
 * safe on a zeroed dataset. */
void lt_dataset_destroy(lt_dataset *ds);

/* ---- sampler --------------------------------------------------------------- */

/* Splits 0..n-1 among num_shards ranks the way torch's DistributedSampler
 * does. Every shard computes the same permutation of 0..n-1 (identity when
 * !shuffle, else a Fisher-Yates shuffle driven by splitmix64 seeded with
 * seed + epoch, so the order is the same on every platform and rank), then:
 *  - pad (training): the permutation is extended by wrapping around to
 *    ceil(n / num_shards) * num_shards entries, and shard s takes entries
 *    s, s + num_shards, ... : every shard gets ceil(n / num_shards) indices
 *    and a few samples are seen twice per epoch.
 *  - !pad (evaluation): shard s takes permutation entries i with
 *    i % num_shards == s: every sample exactly once across shards; shard
 *    lengths differ by at most one.
 * Memory is allocated by lt_sampler_init only. Not thread-safe: one owner. */
typedef struct lt_sampler {
    int64_t n;          /* dataset length */
    int num_shards;
    int shard;
    bool shuffle;
    bool pad;
    uint64_t seed;
    int64_t epoch;      /* last epoch passed to set_epoch; -1 before the first */
    int64_t count;      /* indices this shard gets each epoch */
    int64_t *indices;   /* [count], valid after lt_sampler_set_epoch */
    int64_t *perm;      /* [n], scratch: the epoch's permutation of 0..n-1 */
} lt_sampler;

/* LT_ERR_INVALID for n < 0, num_shards < 1, shard outside 0..num_shards-1;
 * LT_ERR_NOMEM. Messages in the thread's error slot. */
lt_status lt_sampler_init(lt_sampler *s, int64_t n, int num_shards, int shard,
                          bool shuffle, uint64_t seed, bool pad);
/* Fills s->indices for `epoch` (>= 0); never allocates. */
lt_status lt_sampler_set_epoch(lt_sampler *s, int64_t epoch);
void lt_sampler_free(lt_sampler *s);

/* ---- loader ---------------------------------------------------------------- */

/* Set struct_size = sizeof(lt_loader_opts); fields past a caller's smaller
 * struct_size take their defaults. Zero means "default" where noted. */
typedef struct lt_loader_opts {
    uint32_t struct_size;
    int64_t batch_size;          /* > 0, required */
    int num_shards;              /* 0 -> 1 */
    int shard;                   /* 0..num_shards-1 */
    bool shuffle;
    uint64_t seed;
    bool pad;                    /* sampler padding: true for training */
    bool drop_last;              /* drop this shard's last partial batch */
    int prefetch;                /* batch buffers in the ring, >= 2; 0 -> 2 */
    /* Host buffers for the ring (pinned memory for a GPU copy). Both NULL:
     * 64-byte aligned malloc. Called only from lt_loader_new / lt_loader_free,
     * on the caller's thread. */
    void *(*alloc_host)(void *user, size_t bytes);
    void (*free_host)(void *user, void *p);
    void *alloc_user;
} lt_loader_opts;

/* One batch: field[f] holds `rows` samples of info[f] back to back
 * (row-major, rows x shape). Owned by the loader. */
typedef struct lt_batch_view {
    int64_t rows;
    int nfields;
    void *field[LT_MAX_FIELDS];
    lt_field_info info[LT_MAX_FIELDS];
} lt_batch_view;

typedef struct lt_loader lt_loader;

/* Creates a loader over `ds` (borrowed: it must outlive the loader) and its
 * prefetch thread, which stays idle until the first lt_loader_start_epoch.
 * All memory the loader ever uses is allocated here. LT_ERR_INVALID (bad
 * options or field info), LT_ERR_NOMEM, LT_ERR_IO (thread creation). */
lt_status lt_loader_new(const lt_dataset *ds, const lt_loader_opts *o, lt_loader **out,
                        char *err, size_t errlen);

/* Begins `epoch` (reshuffles with seed + epoch). May be called at any time,
 * also mid-epoch: batches not yet taken from the old epoch are dropped (it
 * waits for the batch being collated, if any). Invalidates the last view. */
lt_status lt_loader_start_epoch(lt_loader *l, int64_t epoch);

/* The next batch of the current epoch, collated on the prefetch thread.
 * The view stays valid until the next call to lt_loader_next,
 * lt_loader_start_epoch or lt_loader_free on this loader.
 *  LT_OK            *b filled.
 *  LT_ERR_NOT_FOUND end of epoch (repeats until the next start_epoch).
 *  LT_ERR_STATE     no epoch started.
 *  other            the dataset's `get` failed: its status, and its message
 *                   (prefixed with the sample index) in this thread's error
 *                   slot and in lt_loader_error(); repeats until the next
 *                   start_epoch. Batches before the failing one are delivered.
 * Call from one thread at a time. */
lt_status lt_loader_next(lt_loader *l, lt_batch_view *b);

/* Batches per epoch for this shard (after drop_last), and samples per epoch
 * for this shard (after padding, before drop_last). */
int64_t lt_loader_num_batches(const lt_loader *l);
int64_t lt_loader_num_samples(const lt_loader *l);
/* The message of the last failed lt_loader_next ("" when none). */
const char *lt_loader_error(const lt_loader *l);

/* Stops and joins the prefetch thread (it finishes at most the batch it is
 * collating), then frees every buffer. Safe mid-epoch and on NULL. */
void lt_loader_free(lt_loader *l);

#endif
