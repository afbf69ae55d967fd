/* The plugin context's state slots and override records (core/common/ctx.c):
 *  - lt_ctx_keyed_state / lt_ctx_set_keyed_state: keys kept apart, updated in
 *    place, removed by NULL, LT_ERR_NOMEM past LT_CTX_MAX_KEYED_STATES keys,
 *    LT_ERR_INVALID for a NULL key; the root slot (lt_ctx_state) is another
 *    thing, and only replacing it while set warns;
 *  - lt_ctx_original over lt_hook_override records (newest first): each
 *    replaced hook finds the table from before its own replacement, a hook
 *    never replaced finds NULL; then the same over the records the registry
 *    makes (lt_registry_override_hook, lt_registry_override_record) with
 *    the test plugins of tests/plugins, calling the hooks it hands back. */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cunit_run.h"
#include "lt/lt.h"
#include "common/ctx.h"
#include "registry/registry.h"

#define TP_DIR LT_TEST_BUILD_DIR "/test-plugins"
#define TP(file) TP_DIR "/" file

#define ASSERT_CONTAINS(hay, needle)                                                       \
    do {                                                                                   \
        if (strstr((hay), (needle))) {                                                     \
            CU_PASS(#hay " contains " #needle);                                            \
        } else {                                                                           \
            fprintf(stderr, "\n    message: %s\n    lacks:   %s\n", (hay), (needle));      \
            CU_FAIL(#hay " contains " #needle);                                            \
        }                                                                                  \
    } while (0)

static lt_ctx fresh(void) {
    lt_ctx c;
    lt_ctx_init(&c, LT_KIND_STRATEGY, "ddp", NULL, NULL);
    return c;
}

/* ---- keyed state ---------------------------------------------------------- */

static void test_keyed_distinct(void) {
    lt_ctx c = fresh();
    static const char ka, kb;
    int x = 1, y = 2;
    CU_ASSERT_PTR_NULL(lt_ctx_keyed_state(&c, &ka));
    CU_ASSERT_EQUAL(lt_ctx_set_keyed_state(&c, &ka, &x), LT_OK);
    CU_ASSERT_PTR_EQUAL(lt_ctx_keyed_state(&c, &ka), &x);
    CU_ASSERT_PTR_NULL(lt_ctx_keyed_state(&c, &kb));
    CU_ASSERT_EQUAL(lt_ctx_set_keyed_state(&c, &kb, &y), LT_OK);
    CU_ASSERT_PTR_EQUAL(lt_ctx_keyed_state(&c, &ka), &x);
    CU_ASSERT_PTR_EQUAL(lt_ctx_keyed_state(&c, &kb), &y);
    /* Two keys may hold the same state; still two entries. */
    CU_ASSERT_EQUAL(lt_ctx_set_keyed_state(&c, &kb, &x), LT_OK);
    CU_ASSERT_PTR_EQUAL(lt_ctx_keyed_state(&c, &kb), &x);
    CU_ASSERT_EQUAL(lt_ctx_set_keyed_state(&c, &ka, NULL), LT_OK);
    CU_ASSERT_PTR_NULL(lt_ctx_keyed_state(&c, &ka));
    CU_ASSERT_PTR_EQUAL(lt_ctx_keyed_state(&c, &kb), &x);
    /* Another context does not see them. */
    lt_ctx d = fresh();
    CU_ASSERT_PTR_NULL(lt_ctx_keyed_state(&d, &kb));
}

static void test_keyed_update_in_place(void) {
    lt_ctx c = fresh();
    static const char keys[LT_CTX_MAX_KEYED_STATES];
    int v[LT_CTX_MAX_KEYED_STATES + 3];
    /* Updating one key many times takes one slot: the other keys still fit. */
    for (int i = 0; i < LT_CTX_MAX_KEYED_STATES + 3; i++) {
        CU_ASSERT_EQUAL(lt_ctx_set_keyed_state(&c, &keys[0], &v[i]), LT_OK);
        CU_ASSERT_PTR_EQUAL(lt_ctx_keyed_state(&c, &keys[0]), &v[i]);
    }
    for (int i = 1; i < LT_CTX_MAX_KEYED_STATES; i++)
        CU_ASSERT_EQUAL(lt_ctx_set_keyed_state(&c, &keys[i], &v[i]), LT_OK);
    CU_ASSERT_PTR_EQUAL(lt_ctx_keyed_state(&c, &keys[0]), &v[LT_CTX_MAX_KEYED_STATES + 2]);
    /* Full, yet a present key is still updated in place. */
    CU_ASSERT_EQUAL(lt_ctx_set_keyed_state(&c, &keys[3], &v[0]), LT_OK);
    CU_ASSERT_PTR_EQUAL(lt_ctx_keyed_state(&c, &keys[3]), &v[0]);
}

static void test_keyed_full(void) {
    lt_ctx c = fresh();
    static const char keys[LT_CTX_MAX_KEYED_STATES + 2];
    int v[LT_CTX_MAX_KEYED_STATES + 2];
    for (int i = 0; i < LT_CTX_MAX_KEYED_STATES; i++)
        CU_ASSERT_EQUAL(lt_ctx_set_keyed_state(&c, &keys[i], &v[i]), LT_OK);
    lt_clear_error();
    const char *extra = &keys[LT_CTX_MAX_KEYED_STATES];
    CU_ASSERT_EQUAL(lt_ctx_set_keyed_state(&c, extra, &v[LT_CTX_MAX_KEYED_STATES]), LT_ERR_NOMEM);
    ASSERT_CONTAINS(lt_last_error(&c), "keyed slots");
    ASSERT_CONTAINS(lt_last_error(&c), "strategy 'ddp'");
    CU_ASSERT_PTR_NULL(lt_ctx_keyed_state(&c, extra));
    for (int i = 0; i < LT_CTX_MAX_KEYED_STATES; i++)
        CU_ASSERT_PTR_EQUAL(lt_ctx_keyed_state(&c, &keys[i]), &v[i]);
    /* Removing an absent key is not an error, full or not. */
    CU_ASSERT_EQUAL(lt_ctx_set_keyed_state(&c, extra, NULL), LT_OK);
    /* NULL frees a slot; the new key takes it and the others stay. */
    CU_ASSERT_EQUAL(lt_ctx_set_keyed_state(&c, &keys[2], NULL), LT_OK);
    CU_ASSERT_PTR_NULL(lt_ctx_keyed_state(&c, &keys[2]));
    CU_ASSERT_EQUAL(lt_ctx_set_keyed_state(&c, extra, &v[LT_CTX_MAX_KEYED_STATES]), LT_OK);
    CU_ASSERT_PTR_EQUAL(lt_ctx_keyed_state(&c, extra), &v[LT_CTX_MAX_KEYED_STATES]);
    CU_ASSERT_EQUAL(lt_ctx_set_keyed_state(&c, &keys[LT_CTX_MAX_KEYED_STATES + 1], &v[0]), LT_ERR_NOMEM);
    for (int i = 0; i < LT_CTX_MAX_KEYED_STATES; i++)
        if (i != 2) CU_ASSERT_PTR_EQUAL(lt_ctx_keyed_state(&c, &keys[i]), &v[i]);
}

static void test_keyed_null_key(void) {
    lt_ctx c = fresh();
    int x;
    lt_clear_error();
    CU_ASSERT_EQUAL(lt_ctx_set_keyed_state(&c, NULL, &x), LT_ERR_INVALID);
    ASSERT_CONTAINS(lt_last_error(&c), "key is NULL");
    CU_ASSERT_EQUAL(lt_ctx_set_keyed_state(&c, NULL, NULL), LT_ERR_INVALID);
    CU_ASSERT_PTR_NULL(lt_ctx_keyed_state(&c, NULL));
    /* Nothing was stored: all slots are still free. */
    static const char keys[LT_CTX_MAX_KEYED_STATES];
    for (int i = 0; i < LT_CTX_MAX_KEYED_STATES; i++)
        CU_ASSERT_EQUAL(lt_ctx_set_keyed_state(&c, &keys[i], &x), LT_OK);
    CU_ASSERT_PTR_NULL(lt_ctx_keyed_state(&c, NULL));
}

/* Runs fn with stderr in a temporary file; returns what it wrote. */
static char *capture_stderr(void (*fn)(lt_ctx *), lt_ctx *c) {
    static char buf[4096];
    buf[0] = 0;
    fflush(stderr);
    FILE *tmp = tmpfile();
    if (!tmp) return buf;
    int saved = dup(STDERR_FILENO);
    dup2(fileno(tmp), STDERR_FILENO);
    fn(c);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(tmp);
    size_t n = fread(buf, 1, sizeof buf - 1, tmp);
    buf[n] = 0;
    fclose(tmp);
    return buf;
}

static int root_a, root_b, keyed_v;
static const char root_key;
static void set_root_a(lt_ctx *c) { lt_ctx_set_state(c, &root_a); }
static void set_root_b(lt_ctx *c) { lt_ctx_set_state(c, &root_b); }
static void set_root_null(lt_ctx *c) { lt_ctx_set_state(c, NULL); }
static void set_keyed(lt_ctx *c) { lt_ctx_set_keyed_state(c, &root_key, &keyed_v); }
static void set_keyed_again(lt_ctx *c) { lt_ctx_set_keyed_state(c, &root_key, &root_b); }

static void test_root_slot_apart(void) {
    lt_ctx c = fresh();
    CU_ASSERT_PTR_NULL(lt_ctx_state(&c));
    CU_ASSERT_STRING_EQUAL(capture_stderr(set_root_a, &c), "");
    CU_ASSERT_PTR_EQUAL(lt_ctx_state(&c), &root_a);
    /* Keyed slots, even under the root state's own address, leave it alone. */
    CU_ASSERT_STRING_EQUAL(capture_stderr(set_keyed, &c), "");
    CU_ASSERT_EQUAL(lt_ctx_set_keyed_state(&c, &root_a, &keyed_v), LT_OK);
    CU_ASSERT_PTR_EQUAL(lt_ctx_state(&c), &root_a);
    CU_ASSERT_PTR_EQUAL(lt_ctx_keyed_state(&c, &root_key), &keyed_v);
    CU_ASSERT_PTR_EQUAL(lt_ctx_keyed_state(&c, &root_a), &keyed_v);
    /* Replacing a keyed state does not warn; replacing the set root slot does. */
    CU_ASSERT_STRING_EQUAL(capture_stderr(set_keyed_again, &c), "");
    CU_ASSERT_STRING_EQUAL(capture_stderr(set_root_a, &c), ""); /* the same pointer */
    const char *warn = capture_stderr(set_root_b, &c);
    ASSERT_CONTAINS(warn, "warning");
    ASSERT_CONTAINS(warn, "lt_ctx_set_keyed_state");
    CU_ASSERT_PTR_EQUAL(lt_ctx_state(&c), &root_b);
    /* Clearing the root slot is quiet and keeps the keyed ones. */
    CU_ASSERT_STRING_EQUAL(capture_stderr(set_root_null, &c), "");
    CU_ASSERT_PTR_NULL(lt_ctx_state(&c));
    CU_ASSERT_PTR_EQUAL(lt_ctx_keyed_state(&c, &root_key), &root_b);
    CU_ASSERT_PTR_EQUAL(lt_ctx_keyed_state(&c, &root_a), &keyed_v);
    CU_ASSERT_STRING_EQUAL(capture_stderr(set_root_a, &c), ""); /* set again after NULL */
    /* Removing keyed states leaves the root slot. */
    CU_ASSERT_EQUAL(lt_ctx_set_keyed_state(&c, &root_key, NULL), LT_OK);
    CU_ASSERT_EQUAL(lt_ctx_set_keyed_state(&c, &root_a, NULL), LT_OK);
    CU_ASSERT_PTR_EQUAL(lt_ctx_state(&c), &root_a);
}

/* ---- lt_ctx_original over records ----------------------------------------- */

static void test_original_records(void) {
    /* Stand-ins for tables: only their addresses matter here. */
    static const lt_plugin_header t0, t1, t2, t3;
    lt_ctx c = fresh();
    CU_ASSERT_PTR_NULL(lt_ctx_original(&c, "init_dist_connection"));
    CU_ASSERT_PTR_NULL(lt_ctx_original(NULL, "init_dist_connection"));
    /* t0 --init_dist_connection--> t1 --configure_ddp--> t2 */
    const lt_hook_override r1 = {"init_dist_connection", &t0, NULL};
    const lt_hook_override r2 = {"configure_ddp", &t1, &r1};
    c.overrides = &r2;
    CU_ASSERT_PTR_EQUAL(lt_ctx_original(&c, "configure_ddp"), &t1);
    CU_ASSERT_PTR_EQUAL(lt_ctx_original(&c, "init_dist_connection"), &t0);
    CU_ASSERT_PTR_NULL(lt_ctx_original(&c, "teardown"));
    CU_ASSERT_PTR_NULL(lt_ctx_original(&c, "init_dist"));
    CU_ASSERT_PTR_NULL(lt_ctx_original(&c, ""));
    CU_ASSERT_PTR_NULL(lt_ctx_original(&c, NULL));
    /* init_dist_connection replaced again on top (t2 -> t3): the newest
     * replacement reaches t2, whose init_dist_connection is the first
     * replacement; configure_ddp's record is still found below it. */
    const lt_hook_override r3 = {"init_dist_connection", &t2, &r2};
    c.overrides = &r3;
    CU_ASSERT_PTR_EQUAL(lt_ctx_original(&c, "init_dist_connection"), &t2);
    CU_ASSERT_PTR_EQUAL(lt_ctx_original(&c, "configure_ddp"), &t1);
    CU_ASSERT_PTR_NULL(lt_ctx_original(&c, "teardown"));
    (void)t3;
    /* The records belong to one context only. */
    lt_ctx d = fresh();
    CU_ASSERT_PTR_NULL(lt_ctx_original(&d, "configure_ddp"));
}

/* ---- the registry's records, with real tables ----------------------------- */

#define STRAT(t) ((const lt_strategy_desc *)(const void *)(t))

static const lt_plugin_header *override(lt_registry *r, const lt_plugin_header *t, const char *hook,
                                        const char *spec) {
    const lt_plugin_header *out = NULL;
    char err[2048] = "";
    lt_status st = lt_registry_override_hook(r, LT_KIND_STRATEGY, t, hook, spec, &out, err, sizeof err);
    if (st != LT_OK) fprintf(stderr, "\n    override %s = %s: %s\n", hook, spec, err);
    CU_ASSERT_EQUAL(st, LT_OK);
    return out;
}

/* child (base "base") gets init_dist_connection, then configure_ddp, then
 * init_dist_connection again from libmine.so:my_init (which adds 100 to the
 * int passed as the run); base's hooks add 1 (init) and 2000 (configure),
 * child's init adds 10 and calls base's through super. */
static void test_original_registry_chain(void) {
    lt_registry *r = lt_registry_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(lt_registry_add_dir(r, TP_DIR), LT_OK);
    const lt_plugin_header *child = NULL;
    char err[2048] = "";
    lt_status st = lt_registry_load(r, LT_KIND_STRATEGY, "child", &child, err, sizeof err);
    if (st != LT_OK) fprintf(stderr, "\n    load child: %s\n", err);
    CU_ASSERT_EQUAL_FATAL(st, LT_OK);
    CU_ASSERT_PTR_NULL(lt_registry_override_record(r, child));

    const lt_plugin_header *t1 = override(r, child, "init_dist_connection", TP("libmine.so:my_init"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(t1);
    const lt_plugin_header *t2 = override(r, t1, "configure_ddp", TP("libmine.so:my_init"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(t2);
    const lt_plugin_header *t3 = override(r, t2, "init_dist_connection", TP("libmine.so:my_init"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(t3);
    CU_ASSERT(t1 != child && t2 != t1 && t3 != t2 && t3 != t1);

    /* The records, as the trainer puts them in the context. */
    const lt_hook_override *rec1 = lt_registry_override_record(r, t1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rec1);
    CU_ASSERT_STRING_EQUAL(rec1->hook, "init_dist_connection");
    CU_ASSERT_PTR_EQUAL(rec1->before, child);
    CU_ASSERT_PTR_NULL(rec1->next);
    const lt_hook_override *rec2 = lt_registry_override_record(r, t2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rec2);
    CU_ASSERT_PTR_EQUAL(rec2->next, rec1);

    lt_ctx c;
    lt_ctx_init(&c, LT_KIND_STRATEGY, "child", t2, NULL);
    c.overrides = rec2;
    const lt_plugin_header *o_init = lt_ctx_original(&c, "init_dist_connection");
    const lt_plugin_header *o_conf = lt_ctx_original(&c, "configure_ddp");
    CU_ASSERT_PTR_EQUAL(o_init, child);
    CU_ASSERT_PTR_EQUAL(o_conf, t1);
    CU_ASSERT_PTR_NULL(lt_ctx_original(&c, "teardown"));
    CU_ASSERT_PTR_NULL(lt_ctx_original(&c, "setup_environment"));
    if (o_init && o_conf) {
        int calls = 0;
        /* The replacements run my_init; the originals run child's and base's. */
        CU_ASSERT_EQUAL(STRAT(t2)->init_dist_connection(&c, (lt_run *)&calls), LT_OK);
        CU_ASSERT_EQUAL(calls, 100);
        calls = 0;
        CU_ASSERT_EQUAL(STRAT(t2)->configure_ddp(&c, (lt_run *)&calls), LT_OK);
        CU_ASSERT_EQUAL(calls, 100);
        calls = 0;
        CU_ASSERT_EQUAL(STRAT(o_init)->init_dist_connection(&c, (lt_run *)&calls), LT_OK);
        CU_ASSERT_EQUAL(calls, 11);
        calls = 0;
        CU_ASSERT_EQUAL(STRAT(o_conf)->configure_ddp(&c, (lt_run *)&calls), LT_OK);
        CU_ASSERT_EQUAL(calls, 2000);
        /* Untouched hooks are the same functions in every table. */
        CU_ASSERT(STRAT(t2)->teardown == STRAT(child)->teardown);
        CU_ASSERT(STRAT(t1)->configure_ddp == STRAT(child)->configure_ddp);
    }

    /* The same hook replaced twice: the newest reaches the table with the
     * first replacement in it; configure_ddp's record is still found. */
    c.desc = t3;
    c.overrides = lt_registry_override_record(r, t3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c.overrides);
    CU_ASSERT_PTR_EQUAL(lt_ctx_original(&c, "init_dist_connection"), t2);
    CU_ASSERT_PTR_EQUAL(lt_ctx_original(&c, "configure_ddp"), t1);
    CU_ASSERT(STRAT(lt_ctx_original(&c, "init_dist_connection"))->init_dist_connection ==
              STRAT(t1)->init_dist_connection);
    CU_ASSERT_PTR_NULL(lt_ctx_original(&c, "teardown"));

    /* A table the registry did not make by an override has no record. */
    CU_ASSERT_PTR_NULL(lt_registry_override_record(r, NULL));
    CU_ASSERT_PTR_NULL(lt_registry_override_record(NULL, t1));
    lt_registry_free(r);
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("ctx", NULL, NULL);
    CU_add_test(s, "keyed state: distinct keys kept apart", test_keyed_distinct);
    CU_add_test(s, "keyed state: updated in place", test_keyed_update_in_place);
    CU_add_test(s, "keyed state: full, NULL removes", test_keyed_full);
    CU_add_test(s, "keyed state: NULL key refused", test_keyed_null_key);
    CU_add_test(s, "root slot apart from keyed slots; only its replacement warns", test_root_slot_apart);
    CU_add_test(s, "lt_ctx_original over override records", test_original_records);
    CU_add_test(s, "lt_ctx_original over the registry's records", test_original_registry_chain);
    return lt_cunit_run();
}
