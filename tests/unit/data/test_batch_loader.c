/* The distributed sampler and the prefetching loader, on a synthetic dataset
 * whose samples say which index they are. */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cunit_run.h"
#include "data/data_internal.h"

/* ---- a tiny dataset: field 0 = i64 index, field 1 = f32 [2,3] = index*10 + k ---- */

typedef struct synth {
    int64_t n;
    int64_t fail_at;      /* -1: never */
    int delay_us;         /* per get: makes the prefetch thread slow */
    atomic_long gets;
} synth;

static int64_t synth_length(void *self) { return ((synth *)self)->n; }
static int synth_num_fields(void *self) {
    (void)self;
    return 2;
}

static lt_status synth_field_info(void *self, int field, lt_field_info *out) {
    (void)self;
    if (field == 0) *out = (lt_field_info){.dtype = LT_I64, .ndim = 0};
    else *out = (lt_field_info){.dtype = LT_F32, .ndim = 2, .shape = {2, 3}};
    return LT_OK;
}

static void sleep_us(int us) {
    struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static lt_status synth_get(void *self, int64_t index, void *const *dst) {
    synth *s = self;
    atomic_fetch_add(&s->gets, 1);
    if (s->delay_us) sleep_us(s->delay_us);
    if (index == s->fail_at) {
        lt_set_error(NULL, "synthetic failure at sample %lld", (long long)index);
        return LT_ERR_CORRUPT;
    }
    *(int64_t *)dst[0] = index;
    float *v = dst[1];
    for (int k = 0; k < 6; k++) v[k] = (float)(index * 10 + k);
    return LT_OK;
}

static const lt_dataset_iface synth_iface = {
    .struct_size = sizeof(lt_dataset_iface),
    .length = synth_length,
    .num_fields = synth_num_fields,
    .field_info = synth_field_info,
    .get = synth_get,
};

static synth g_synth;

static lt_dataset make_synth(int64_t n) {
    g_synth.n = n;
    g_synth.fail_at = -1;
    g_synth.delay_us = 0;
    atomic_store(&g_synth.gets, 0);
    return (lt_dataset){&synth_iface, &g_synth};
}

static lt_loader_opts opts(int64_t batch) {
    return (lt_loader_opts){.struct_size = sizeof(lt_loader_opts), .batch_size = batch,
                            .num_shards = 1, .prefetch = 2};
}

/* ---- sampler ---------------------------------------------------------------------- */

static void shard_indices(int64_t n, int shards, bool shuffle, bool pad, uint64_t seed,
                          int64_t epoch, int64_t *seen, int64_t *counts) {
    memset(seen, 0, (size_t)n * sizeof *seen);
    for (int s = 0; s < shards; s++) {
        lt_sampler sm;
        CU_ASSERT_EQUAL_FATAL(lt_sampler_init(&sm, n, shards, s, shuffle, seed, pad), LT_OK);
        CU_ASSERT_EQUAL_FATAL(lt_sampler_set_epoch(&sm, epoch), LT_OK);
        counts[s] = sm.count;
        for (int64_t k = 0; k < sm.count; k++) {
            CU_ASSERT_FATAL(sm.indices[k] >= 0 && sm.indices[k] < n);
            seen[sm.indices[k]]++;
        }
        lt_sampler_free(&sm);
    }
}

static void test_sampler_eval_exact_once(void) {
    int64_t seen[103], counts[8];
    for (int shards = 1; shards <= 8; shards++) {
        shard_indices(103, shards, true, false, 7, 3, seen, counts);
        for (int i = 0; i < 103; i++) CU_ASSERT_EQUAL(seen[i], 1);
        int64_t total = 0;
        for (int s = 0; s < shards; s++) {
            total += counts[s];
            CU_ASSERT(counts[s] == 103 / shards || counts[s] == 103 / shards + 1);
        }
        CU_ASSERT_EQUAL(total, 103);
    }
}

static void test_sampler_padded(void) {
    int64_t seen[103], counts[4];
    shard_indices(103, 4, true, true, 7, 0, seen, counts);
    for (int s = 0; s < 4; s++) CU_ASSERT_EQUAL(counts[s], 26);
    int64_t twice = 0;
    for (int i = 0; i < 103; i++) {
        CU_ASSERT(seen[i] == 1 || seen[i] == 2);
        twice += seen[i] == 2;
    }
    CU_ASSERT_EQUAL(twice, 1); /* 104 slots for 103 samples */
    /* Fewer samples than shards: every shard still gets one, wrapping around. */
    int64_t seen3[3], counts5[5];
    shard_indices(3, 5, true, true, 1, 0, seen3, counts5);
    for (int s = 0; s < 5; s++) CU_ASSERT_EQUAL(counts5[s], 1);
    for (int i = 0; i < 3; i++) CU_ASSERT(seen3[i] >= 1);
}

static void copy_order(int64_t n, int shards, int shard, bool shuffle, uint64_t seed,
                       int64_t epoch, int64_t *out) {
    lt_sampler s;
    lt_sampler_init(&s, n, shards, shard, shuffle, seed, true);
    lt_sampler_set_epoch(&s, epoch);
    memcpy(out, s.indices, (size_t)s.count * sizeof *out);
    lt_sampler_free(&s);
}

static void test_sampler_determinism(void) {
    int64_t a[50], b[50], c[50];
    copy_order(100, 2, 0, true, 42, 0, a);
    copy_order(100, 2, 0, true, 42, 0, b);
    CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
    copy_order(100, 2, 0, true, 42, 1, c);
    CU_ASSERT_NOT_EQUAL(memcmp(a, c, sizeof a), 0);
    copy_order(100, 2, 0, true, 43, 0, c);
    CU_ASSERT_NOT_EQUAL(memcmp(a, c, sizeof a), 0);
    /* No shuffle: shard s takes s, s + shards, ... */
    copy_order(100, 2, 1, false, 42, 5, c);
    for (int k = 0; k < 50; k++) CU_ASSERT_EQUAL(c[k], 1 + 2 * k);
    /* Re-using one sampler across epochs gives what a fresh one gives. */
    lt_sampler s;
    lt_sampler_init(&s, 100, 2, 0, true, 42, true);
    lt_sampler_set_epoch(&s, 1);
    lt_sampler_set_epoch(&s, 0);
    CU_ASSERT_EQUAL(memcmp(s.indices, a, sizeof a), 0);
    lt_sampler_free(&s);
}

/* The order is part of what a resumed run must reproduce, on any machine:
 * pin it. Changing the generator changes these numbers, on purpose. */
static void test_sampler_golden(void) {
    int64_t got[10];
    lt_sampler s;
    lt_sampler_init(&s, 10, 1, 0, true, 42, false);
    lt_sampler_set_epoch(&s, 0);
    memcpy(got, s.indices, sizeof got);
    lt_sampler_free(&s);
    static const int64_t want[10] = {0, 9, 5, 8, 6, 4, 7, 2, 1, 3};
    CU_ASSERT_EQUAL(memcmp(got, want, sizeof got), 0);
    if (memcmp(got, want, sizeof got)) {
        printf("\n  order was:");
        for (int i = 0; i < 10; i++) printf(" %lld", (long long)got[i]);
        printf("\n");
    }
}

static void test_sampler_errors(void) {
    lt_sampler s;
    CU_ASSERT_EQUAL(lt_sampler_init(&s, 10, 0, 0, true, 1, true), LT_ERR_INVALID);
    CU_ASSERT_EQUAL(lt_sampler_init(&s, 10, 2, 2, true, 1, true), LT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(NULL), "shard 2 of 2"));
    CU_ASSERT_EQUAL(lt_sampler_init(&s, -1, 1, 0, true, 1, true), LT_ERR_INVALID);
    CU_ASSERT_EQUAL(lt_sampler_init(&s, 0, 3, 1, true, 1, true), LT_OK);
    CU_ASSERT_EQUAL(lt_sampler_set_epoch(&s, 0), LT_OK);
    CU_ASSERT_EQUAL(s.count, 0);
    CU_ASSERT_EQUAL(lt_sampler_set_epoch(&s, -1), LT_ERR_INVALID);
    lt_sampler_free(&s);
    lt_sampler_free(&s); /* twice is harmless */
}

/* ---- loader ----------------------------------------------------------------------- */

static void check_batch(const lt_batch_view *b) {
    CU_ASSERT_EQUAL(b->nfields, 2);
    CU_ASSERT(b->info[0].dtype == LT_I64 && b->info[1].dtype == LT_F32);
    CU_ASSERT(b->info[1].ndim == 2 && b->info[1].shape[1] == 3);
    const int64_t *idx = b->field[0];
    const float *v = b->field[1];
    for (int64_t r = 0; r < b->rows; r++)
        for (int k = 0; k < 6; k++)
            if (v[r * 6 + k] != (float)(idx[r] * 10 + k)) {
                CU_FAIL("field 1 does not belong to field 0's sample");
                return;
            }
}

static void test_loader_batches(void) {
    lt_dataset ds = make_synth(103);
    lt_loader *l;
    char err[256];
    lt_loader_opts o = opts(10);
    CU_ASSERT_EQUAL_FATAL(lt_loader_new(&ds, &o, &l, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_loader_num_batches(l), 11);
    CU_ASSERT_EQUAL(lt_loader_num_samples(l), 103);
    lt_batch_view b;
    CU_ASSERT_EQUAL(lt_loader_next(l, &b), LT_ERR_STATE);
    CU_ASSERT_EQUAL(lt_loader_start_epoch(l, 0), LT_OK);
    int64_t expect = 0;
    for (int k = 0; k < 11; k++) {
        CU_ASSERT_EQUAL_FATAL(lt_loader_next(l, &b), LT_OK);
        CU_ASSERT_EQUAL(b.rows, k < 10 ? 10 : 3);
        check_batch(&b);
        for (int64_t r = 0; r < b.rows; r++) CU_ASSERT_EQUAL(((int64_t *)b.field[0])[r], expect++);
    }
    CU_ASSERT_EQUAL(lt_loader_next(l, &b), LT_ERR_NOT_FOUND);
    CU_ASSERT_EQUAL(lt_loader_next(l, &b), LT_ERR_NOT_FOUND);
    lt_loader_free(l);
}

static void test_loader_drop_last(void) {
    lt_dataset ds = make_synth(103);
    lt_loader *l;
    lt_loader_opts o = opts(10);
    o.drop_last = true;
    o.shuffle = true;
    CU_ASSERT_EQUAL_FATAL(lt_loader_new(&ds, &o, &l, NULL, 0), LT_OK);
    CU_ASSERT_EQUAL(lt_loader_num_batches(l), 10);
    lt_loader_start_epoch(l, 0);
    lt_batch_view b;
    int n = 0;
    while (lt_loader_next(l, &b) == LT_OK) {
        CU_ASSERT_EQUAL(b.rows, 10);
        n++;
    }
    CU_ASSERT_EQUAL(n, 10);
    lt_loader_free(l);
}

/* Runs one epoch, counting how often each sample appears and checking each
 * view stays intact while the prefetch thread works ahead. */
static int64_t run_epoch(lt_loader *l, int64_t epoch, int64_t *seen, int64_t n, int64_t *order) {
    CU_ASSERT_EQUAL(lt_loader_start_epoch(l, epoch), LT_OK);
    lt_batch_view b;
    int64_t rows = 0;
    while (lt_loader_next(l, &b) == LT_OK) {
        int64_t first[64];
        memcpy(first, b.field[0], (size_t)b.rows * sizeof(int64_t));
        sleep_us(200); /* let the thread fill every other slot */
        CU_ASSERT_EQUAL(memcmp(first, b.field[0], (size_t)b.rows * sizeof(int64_t)), 0);
        check_batch(&b);
        for (int64_t r = 0; r < b.rows; r++) {
            int64_t i = ((int64_t *)b.field[0])[r];
            CU_ASSERT_FATAL(i >= 0 && i < n);
            seen[i]++;
            if (order) order[rows + r] = i;
        }
        rows += b.rows;
    }
    return rows;
}

static void test_loader_every_sample_once(void) {
    lt_dataset ds = make_synth(1000);
    for (int prefetch = 2; prefetch <= 4; prefetch++) {
        lt_loader *l;
        lt_loader_opts o = opts(32);
        o.shuffle = true;
        o.seed = 9;
        o.prefetch = prefetch;
        CU_ASSERT_EQUAL_FATAL(lt_loader_new(&ds, &o, &l, NULL, 0), LT_OK);
        int64_t seen[1000], order0[1000], order1[1000];
        memset(seen, 0, sizeof seen);
        CU_ASSERT_EQUAL(run_epoch(l, 0, seen, 1000, order0), 1000);
        for (int i = 0; i < 1000; i++) CU_ASSERT_EQUAL(seen[i], 1);
        memset(seen, 0, sizeof seen);
        CU_ASSERT_EQUAL(run_epoch(l, 1, seen, 1000, order1), 1000);
        for (int i = 0; i < 1000; i++) CU_ASSERT_EQUAL(seen[i], 1);
        CU_ASSERT_NOT_EQUAL(memcmp(order0, order1, sizeof order0), 0);
        lt_loader_free(l);
    }
}

static void test_loader_shards_cover(void) {
    lt_dataset ds = make_synth(101);
    int64_t seen[101] = {0}, total = 0;
    for (int s = 0; s < 3; s++) {
        lt_loader *l;
        lt_loader_opts o = opts(8);
        o.num_shards = 3;
        o.shard = s;
        o.shuffle = true;
        CU_ASSERT_EQUAL_FATAL(lt_loader_new(&ds, &o, &l, NULL, 0), LT_OK);
        total += run_epoch(l, 4, seen, 101, NULL);
        lt_loader_free(l);
    }
    CU_ASSERT_EQUAL(total, 101);
    for (int i = 0; i < 101; i++) CU_ASSERT_EQUAL(seen[i], 1);
}

static void test_loader_error_propagates(void) {
    lt_dataset ds = make_synth(100);
    g_synth.fail_at = 57;
    lt_loader *l;
    lt_loader_opts o = opts(10);
    CU_ASSERT_EQUAL_FATAL(lt_loader_new(&ds, &o, &l, NULL, 0), LT_OK);
    for (int epoch = 0; epoch < 2; epoch++) {
        lt_loader_start_epoch(l, epoch);
        CU_ASSERT_STRING_EQUAL(lt_loader_error(l), "");
        lt_batch_view b;
        for (int k = 0; k < 5; k++) CU_ASSERT_EQUAL(lt_loader_next(l, &b), LT_OK);
        lt_set_error(NULL, "stale");
        CU_ASSERT_EQUAL(lt_loader_next(l, &b), LT_ERR_CORRUPT);
        CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(NULL), "synthetic failure at sample 57"));
        CU_ASSERT_PTR_NOT_NULL(strstr(lt_loader_error(l), "sample 57"));
        CU_ASSERT_EQUAL(lt_loader_next(l, &b), LT_ERR_CORRUPT); /* sticky */
    }
    lt_loader_free(l);
}

static void test_loader_free_mid_epoch(void) {
    lt_dataset ds = make_synth(500);
    g_synth.delay_us = 100; /* the thread is mid-batch when we free */
    for (int taken = 0; taken < 4; taken++) {
        lt_loader *l;
        lt_loader_opts o = opts(16);
        o.prefetch = 3;
        CU_ASSERT_EQUAL_FATAL(lt_loader_new(&ds, &o, &l, NULL, 0), LT_OK);
        lt_loader_start_epoch(l, 0);
        lt_batch_view b;
        for (int k = 0; k < taken; k++) CU_ASSERT_EQUAL(lt_loader_next(l, &b), LT_OK);
        lt_loader_free(l);
    }
    /* The thread stopped after at most the ring's worth of batches. */
    CU_ASSERT(atomic_load(&g_synth.gets) < 4 * (3 + 4) * 16);
    lt_loader *l;
    lt_loader_opts o = opts(16);
    CU_ASSERT_EQUAL_FATAL(lt_loader_new(&ds, &o, &l, NULL, 0), LT_OK);
    lt_loader_free(l); /* never started */
    lt_loader_free(NULL);
}

static void test_loader_restart_mid_epoch(void) {
    lt_dataset ds = make_synth(200);
    g_synth.delay_us = 20;
    lt_loader *l;
    lt_loader_opts o = opts(16);
    o.shuffle = true;
    CU_ASSERT_EQUAL_FATAL(lt_loader_new(&ds, &o, &l, NULL, 0), LT_OK);
    lt_loader_start_epoch(l, 0);
    lt_batch_view b;
    for (int k = 0; k < 3; k++) CU_ASSERT_EQUAL(lt_loader_next(l, &b), LT_OK);
    int64_t seen[200] = {0};
    CU_ASSERT_EQUAL(run_epoch(l, 1, seen, 200, NULL), 200);
    for (int i = 0; i < 200; i++) CU_ASSERT_EQUAL(seen[i], 1);
    lt_loader_free(l);
}

typedef struct {
    int allocs, frees;
    long live;
} alloc_counter;

static void *count_alloc(void *user, size_t bytes) {
    alloc_counter *c = user;
    c->allocs++;
    c->live++;
    return malloc(bytes);
}

static void count_free(void *user, void *p) {
    alloc_counter *c = user;
    c->frees++;
    c->live--;
    free(p);
}

static void test_loader_allocator(void) {
    lt_dataset ds = make_synth(300);
    alloc_counter c = {0};
    lt_loader *l;
    lt_loader_opts o = opts(7);
    o.prefetch = 3;
    o.alloc_host = count_alloc;
    o.free_host = count_free;
    o.alloc_user = &c;
    CU_ASSERT_EQUAL_FATAL(lt_loader_new(&ds, &o, &l, NULL, 0), LT_OK);
    CU_ASSERT_EQUAL(c.allocs, 3 * 2); /* prefetch x fields, once */
    int64_t seen[300] = {0};
    for (int e = 0; e < 3; e++) run_epoch(l, e, seen, 300, NULL);
    CU_ASSERT_EQUAL(c.allocs, 6); /* none per batch or per epoch */
    lt_loader_free(l);
    CU_ASSERT_EQUAL(c.frees, 6);
    CU_ASSERT_EQUAL(c.live, 0);
}

static void test_loader_bad_options(void) {
    lt_dataset ds = make_synth(10);
    lt_loader *l = (lt_loader *)1;
    char err[256];
    lt_loader_opts o = opts(0);
    CU_ASSERT_EQUAL(lt_loader_new(&ds, &o, &l, err, sizeof err), LT_ERR_INVALID);
    CU_ASSERT_PTR_NULL(l);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "batch_size 0"));
    o = opts(4);
    o.prefetch = 1;
    CU_ASSERT_EQUAL(lt_loader_new(&ds, &o, &l, err, sizeof err), LT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "prefetch 1"));
    o = opts(4);
    o.num_shards = 2;
    o.shard = 2;
    CU_ASSERT_EQUAL(lt_loader_new(&ds, &o, &l, err, sizeof err), LT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "shard 2 of 2"));
    o = opts(4);
    o.alloc_host = count_alloc;
    CU_ASSERT_EQUAL(lt_loader_new(&ds, &o, &l, err, sizeof err), LT_ERR_INVALID);
    /* A caller built against an older, shorter options struct gets defaults. */
    o = opts(4);
    o.struct_size = offsetof(lt_loader_opts, prefetch);
    o.prefetch = 999;
    CU_ASSERT_EQUAL_FATAL(lt_loader_new(&ds, &o, &l, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_loader_num_batches(l), 3);
    int64_t seen[10] = {0};
    CU_ASSERT_EQUAL(run_epoch(l, 0, seen, 10, NULL), 10);
    lt_loader_free(l);
}

/* ---- runner ---------------------------------------------------------------------- */

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("sampler", NULL, NULL);
    CU_add_test(s, "eval: each sample exactly once across shards", test_sampler_eval_exact_once);
    CU_add_test(s, "train: padded to equal length", test_sampler_padded);
    CU_add_test(s, "same seed same order, epochs differ", test_sampler_determinism);
    CU_add_test(s, "golden order", test_sampler_golden);
    CU_add_test(s, "bad arguments", test_sampler_errors);
    CU_pSuite t = CU_add_suite("loader", NULL, NULL);
    CU_add_test(t, "batch sizes and last partial batch", test_loader_batches);
    CU_add_test(t, "drop_last", test_loader_drop_last);
    CU_add_test(t, "every sample once per epoch", test_loader_every_sample_once);
    CU_add_test(t, "shards cover the dataset", test_loader_shards_cover);
    CU_add_test(t, "dataset errors propagate", test_loader_error_propagates);
    CU_add_test(t, "free mid-epoch", test_loader_free_mid_epoch);
    CU_add_test(t, "restart mid-epoch", test_loader_restart_mid_epoch);
    CU_add_test(t, "host allocator", test_loader_allocator);
    CU_add_test(t, "bad options", test_loader_bad_options);
    int rc = lt_cunit_run();
    return rc;
}
