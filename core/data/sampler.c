/* Distributed sampler: which sample indices one rank visits in one epoch.
 *
 * Every rank must derive the same permutation from (seed, epoch) alone, on
 * any platform, so the generator is our own splitmix64 and bounded draws use
 * rejection rather than anything whose result depends on libc. */
#include <stdlib.h>
#include <string.h>
#include "data_internal.h"

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, bound): plain modulo would favour small values. */
static uint64_t uniform_below(uint64_t *state, uint64_t bound) {
    uint64_t threshold = (0 - bound) % bound; /* 2^64 mod bound */
    for (;;) {
        uint64_t r = splitmix64(state);
        if (r >= threshold) return r % bound;
    }
}

static int64_t shard_count(int64_t n, int shards, int shard, bool pad) {
    if (pad) return (n + shards - 1) / shards;
    return n / shards + (shard < n % shards ? 1 : 0);
}

lt_status lt_sampler_init(lt_sampler *s, int64_t n, int num_shards, int shard, bool shuffle,
                          uint64_t seed, bool pad) {
    memset(s, 0, sizeof *s);
    if (n < 0 || num_shards < 1 || shard < 0 || shard >= num_shards) {
        lt_set_error(NULL,
                     "sampler: %lld samples, shard %d of %d: need samples >= 0 and "
                     "0 <= shard < shards",
                     (long long)n, shard, num_shards);
        return LT_ERR_INVALID;
    }
    *s = (lt_sampler){.n = n, .num_shards = num_shards, .shard = shard, .shuffle = shuffle,
                      .pad = pad, .seed = seed, .epoch = -1};
    s->count = shard_count(n, num_shards, shard, pad);
    /* +1: malloc(0) may return NULL, which must not read as failure. */
    s->perm = malloc(((size_t)n + 1) * sizeof *s->perm);
    s->indices = malloc(((size_t)s->count + 1) * sizeof *s->indices);
    if (!s->perm || !s->indices) {
        lt_sampler_free(s);
        lt_set_error(NULL, "sampler: out of memory for %lld indices", (long long)n);
        return LT_ERR_NOMEM;
    }
    return LT_OK;
}

static void permute(lt_sampler *s, int64_t epoch) {
    for (int64_t i = 0; i < s->n; i++) s->perm[i] = i;
    if (!s->shuffle) return;
    uint64_t state = s->seed + (uint64_t)epoch;
    for (int64_t i = s->n - 1; i > 0; i--) {
        int64_t j = (int64_t)uniform_below(&state, (uint64_t)i + 1);
        int64_t t = s->perm[i];
        s->perm[i] = s->perm[j];
        s->perm[j] = t;
    }
}

lt_status lt_sampler_set_epoch(lt_sampler *s, int64_t epoch) {
    if (!s->perm || epoch < 0) {
        lt_set_error(NULL, "sampler: epoch %lld on %s sampler", (long long)epoch,
                     s->perm ? "a" : "an uninitialized");
        return s->perm ? LT_ERR_INVALID : LT_ERR_STATE;
    }
    permute(s, epoch);
    /* Position p of the padded list is perm[p mod n]: wrapping as often as
     * needed, also when there are fewer samples than shards. */
    for (int64_t k = 0; k < s->count; k++)
        s->indices[k] = s->perm[(s->shard + k * s->num_shards) % s->n];
    s->epoch = epoch;
    return LT_OK;
}

void lt_sampler_free(lt_sampler *s) {
    if (!s) return;
    free(s->perm);
    free(s->indices);
    s->perm = s->indices = NULL;
    s->count = 0;
}
