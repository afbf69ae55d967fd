/* ddp_super: a test-only strategy with base = "ddp" that replaces two hooks
 * and reaches ddp's through `super` (overrides.sh):
 *  - configure_ddp calls ddp's first, then checks what it must leave in the
 *    run: ddp's own state (lt_ctx_state), the parameter views (offsets
 *    ascending and contiguous from 0, counts the product of the shape, names
 *    set, the counts adding up to lt_run_flat's count) and the published
 *    buckets (covering [0, count) exactly once). A violated check fails the
 *    hook naming it; otherwise rank 0 logs one line:
 *        ddp_super: N params, M elements, K buckets
 *    With strategy.rebucket = true it then publishes a cut of its own, one
 *    bucket per parameter in reverse registration order, which ddp's
 *    gradient hooks must follow. With rebucket_rank = R only rank R does, so
 *    the ranks' allreduces differ: the run must fail naming both ranks (it
 *    would pass if ddp kept a cut of its own instead of the published one).
 *  - teardown frees its state, then calls ddp's.
 * Its state lives under its own key (lt_ctx_set_keyed_state): the root slot
 * (lt_ctx_state) is ddp's. Built into the test plugin directory, never
 * installed. */
#include <stdlib.h>
#include <string.h>
#include "lt/lt.h"

static const lt_strategy_desc *super;

static const lt_param_spec super_params[] = {
    {"rebucket", LT_PARAM_BOOL, "false",
     "after ddp's configure_ddp, publish one bucket per parameter (reverse registration order)"},
    {"rebucket_rank", LT_PARAM_INT, "-1",
     "with rebucket: only this rank publishes its cut (-1: every rank); the ranks then "
     "communicate different buckets, which must fail as mismatched collectives"},
    {NULL, 0, NULL, NULL},
};

/* What the overrides keep between hooks, under their own key. */
typedef struct ddp_super_state {
    size_t nparams;
    size_t elements;
    size_t nbuckets;
    bool rebucketed;
} ddp_super_state;

static const char state_key; /* the key: the address of something this plugin owns */

static int by_offset(const void *a, const void *b) {
    const lt_bucket_view *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static lt_status check_params(lt_ctx *ctx, const lt_param_view *v, size_t n, const lt_flat *flat) {
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const lt_param_view *p = &v[i];
        if (!p->name || !*p->name) {
            lt_set_error(ctx, "ddp_super: parameter %zu has no name", i);
            return LT_ERR_STATE;
        }
        if (p->index != (int32_t)i) {
            lt_set_error(ctx, "ddp_super: parameter %zu '%s' has index %d", i, p->name, (int)p->index);
            return LT_ERR_STATE;
        }
        if (p->offset != at) {
            lt_set_error(ctx, "ddp_super: parameter %zu '%s' at offset %zu, expected %zu (offsets "
                         "ascending and contiguous)", i, p->name, p->offset, at);
            return LT_ERR_STATE;
        }
        if (p->ndim < 0 || p->ndim > 4) {
            lt_set_error(ctx, "ddp_super: parameter '%s' has ndim %d", p->name, (int)p->ndim);
            return LT_ERR_STATE;
        }
        size_t prod = 1;
        for (int d = 0; d < p->ndim; d++) prod *= (size_t)p->shape[d];
        for (int d = p->ndim; d < 4; d++)
            if (p->shape[d] != 0) {
                lt_set_error(ctx, "ddp_super: parameter '%s' shape[%d] = %lld past ndim %d", p->name, d,
                             (long long)p->shape[d], (int)p->ndim);
                return LT_ERR_STATE;
            }
        if (p->count != prod || p->count == 0) {
            lt_set_error(ctx, "ddp_super: parameter '%s' has count %zu, its shape gives %zu", p->name,
                         p->count, prod);
            return LT_ERR_STATE;
        }
        if (p->dtype != flat->param_dtype) {
            lt_set_error(ctx, "ddp_super: parameter '%s' has dtype %s, the flat buffer %s", p->name,
                         lt_dtype_name(p->dtype), lt_dtype_name(flat->param_dtype));
            return LT_ERR_STATE;
        }
        at += p->count;
    }
    if (at != flat->count) {
        lt_set_error(ctx, "ddp_super: the %zu parameters hold %zu elements, lt_run_flat %zu", n, at,
                     flat->count);
        return LT_ERR_STATE;
    }
    return LT_OK;
}

static lt_status check_buckets(lt_ctx *ctx, const lt_bucket_view *b, size_t n, size_t total) {
    if (n == 0) {
        lt_set_error(ctx, "ddp_super: ddp's configure_ddp published no buckets");
        return LT_ERR_STATE;
    }
    lt_bucket_view *s = malloc(n * sizeof *s);
    if (!s) return LT_ERR_NOMEM;
    memcpy(s, b, n * sizeof *s);
    qsort(s, n, sizeof *s, by_offset);
    size_t at = 0;
    lt_status st = LT_OK;
    for (size_t i = 0; i < n && st == LT_OK; i++) {
        if (s[i].offset != at || s[i].count == 0 || s[i].count > total - s[i].offset) {
            lt_set_error(ctx, "ddp_super: published bucket [%zu, +%zu) does not continue at %zu of %zu",
                         s[i].offset, s[i].count, at, total);
            st = LT_ERR_STATE;
        }
        at = s[i].offset + s[i].count;
    }
    if (st == LT_OK && at != total) {
        lt_set_error(ctx, "ddp_super: the published buckets end at %zu of %zu", at, total);
        st = LT_ERR_STATE;
    }
    free(s);
    return st;
}

/* One bucket per parameter, from the last registered to the first: the
 * order backward completes them. */
static lt_status rebucket(lt_ctx *ctx, lt_run *run, const lt_param_view *v, size_t n) {
    lt_bucket_view *b = malloc((n ? n : 1) * sizeof *b);
    if (!b) return LT_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) b[i] = (lt_bucket_view){v[n - 1 - i].offset, v[n - 1 - i].count};
    lt_status st = lt_run_set_buckets(run, b, n);
    free(b);
    if (st != LT_OK) lt_set_error(ctx, "ddp_super: rebucket: %s", lt_last_error(ctx));
    return st;
}

static lt_status super_configure_ddp(lt_ctx *ctx, lt_run *run) {
    LT_CHECK(super->configure_ddp(ctx, run));
    if (!lt_ctx_state(ctx)) {
        lt_set_error(ctx, "ddp_super: ddp's state (lt_ctx_state) is NULL after ddp's configure_ddp");
        return LT_ERR_STATE;
    }
    ddp_super_state *s = lt_ctx_keyed_state(ctx, &state_key);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s) return LT_ERR_NOMEM;
        lt_status st = lt_ctx_set_keyed_state(ctx, &state_key, s);
        if (st != LT_OK) {
            free(s);
            return st;
        }
    }
    lt_flat flat;
    const lt_param_view *v;
    const lt_bucket_view *b;
    size_t n, nb;
    LT_CHECK(lt_run_flat(run, &flat));
    LT_CHECK(lt_run_params(run, &v, &n));
    LT_CHECK(check_params(ctx, v, n, &flat));
    LT_CHECK(lt_run_buckets(run, &b, &nb));
    LT_CHECK(check_buckets(ctx, b, nb, flat.count));
    s->nparams = n;
    s->elements = flat.count;
    s->nbuckets = nb;
    int64_t only = lt_param_int(ctx, "rebucket_rank", -1);
    if (lt_param_bool(ctx, "rebucket", false) && (only < 0 || only == lt_run_world(run)->global_rank)) {
        LT_CHECK(rebucket(ctx, run, v, n));
        LT_CHECK(lt_run_buckets(run, &b, &nb));
        LT_CHECK(check_buckets(ctx, b, nb, flat.count));
        s->rebucketed = true;
    }
    if (lt_run_world(run)->global_rank == 0 || only >= 0) {
        if (s->rebucketed)
            lt_log(ctx, LT_LOG_INFO, "ddp_super: %zu params, %zu elements, %zu buckets, rebucketed "
                   "to %zu (one per parameter)", s->nparams, s->elements, s->nbuckets, nb);
        else
            lt_log(ctx, LT_LOG_INFO, "ddp_super: %zu params, %zu elements, %zu buckets", s->nparams,
                   s->elements, s->nbuckets);
    }
    return LT_OK;
}

static lt_status super_teardown(lt_ctx *ctx, lt_run *run) {
    ddp_super_state *s = lt_ctx_keyed_state(ctx, &state_key);
    if (s) {
        lt_ctx_set_keyed_state(ctx, &state_key, NULL);
        free(s);
    }
    return super->teardown(ctx, run);
}

static const lt_strategy_desc ddp_super = {
    LT_HEADER(LT_KIND_STRATEGY, lt_strategy_desc, "ddp_super", "ddp", "0.1.0",
              "test: ddp whose configure_ddp and teardown wrap ddp's through super", super_params,
              &super),
    .configure_ddp = super_configure_ddp,
    .teardown = super_teardown,
};

LT_PLUGIN_EXPORT(&ddp_super.hdr)
