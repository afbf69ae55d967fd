/* Turning a checked descriptor into the table call sites use, once per
 * plugin: a full-size copy in the newest layout (older minors adapted), the
 * base's resolved hooks under the plugin's own, the core's defaults under
 * both, and every required hook present. Call sites then never test a hook
 * for NULL nor look at struct_size.
 *
 * The resolved table keeps the plugin's header (name, version, base,
 * abi_minor as built) except struct_size, which becomes the full size so
 * LT_HAS holds for every hook of a resolved table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "lt/module.h" /* adapt(): a module's training_step_end */
#include "registry_internal.h"

static registry_entry *cached(lt_registry *r, uint32_t kind, const char *name, const char *file) {
    for (size_t i = 0; i < r->nentries; i++) {
        registry_entry *e = &r->entries[i];
        if (e->kind == kind && !strcasecmp(e->name, name) && !strcmp(e->file, file)) return e;
    }
    return NULL;
}

static lt_status remember(lt_registry *r, uint32_t kind, const char *name, const char *file,
                          lt_plugin_header *table) {
    if (!lt_grow((void **)&r->entries, &r->entries_cap, r->nentries + 1, sizeof *r->entries))
        return LT_ERR_NOMEM;
    registry_entry e = {kind, malloc(strlen(name) + 1), strdup(file), table};
    if (!e.name || !e.file) {
        free(e.name);
        free(e.file);
        return LT_ERR_NOMEM;
    }
    registry_lower(e.name, name, strlen(name) + 1);
    r->entries[r->nentries++] = e;
    return LT_OK;
}

/* ---- inheritance ------------------------------------------------------------ */

static lt_status check_cycle(lt_registry *r, const lt_plugin_header *d, char *err, size_t errlen) {
    size_t i = 0;
    while (i < r->nloading &&
           !(r->loading[i].kind == d->kind && !strcasecmp(r->loading[i].name, d->name)))
        i++;
    if (i == r->nloading) return LT_OK;
    char chain[1024];
    size_t used = 0;
    for (size_t j = i; j < r->nloading && used < sizeof chain; j++)
        used += (size_t)snprintf(chain + used, sizeof chain - used, "%s -> ", r->loading[j].name);
    const registry_loading *last = &r->loading[r->nloading - 1];
    registry_err(err, errlen, "inheritance cycle: %s %s%s (%s sets base = \"%s\"); remove the base "
                 "of one of them", lt_kind_name(d->kind), chain, d->name, last->path, d->name);
    r->cycle_reported = true;
    return LT_ERR_ABI;
}

static lt_status load_base(lt_registry *r, const registry_target *t, const lt_plugin_header *d,
                           const lt_plugin_header **base, char *err, size_t errlen) {
    if (!lt_grow((void **)&r->loading, &r->loading_cap, r->nloading + 1, sizeof *r->loading))
        return LT_ERR_NOMEM;
    registry_loading *l = &r->loading[r->nloading++];
    l->kind = d->kind;
    snprintf(l->name, sizeof l->name, "%s", d->name);
    snprintf(l->path, sizeof l->path, "%s", t->path);
    char inner[2048] = "";
    lt_status st = lt_registry_load(r, (lt_kind)d->kind, d->base, base, inner, sizeof inner);
    r->nloading--;
    if (st == LT_OK) return LT_OK;
    if (r->cycle_reported) { /* the chain already names every file */
        registry_err(err, errlen, "%s", inner);
        return st;
    }
    char fix[128] = "";
    if (st == LT_ERR_NOT_FOUND)
        snprintf(fix, sizeof fix, " (install it, or set .base to an installed %s)",
                 lt_kind_name(d->kind));
    registry_err(err, errlen, "%s '%s' (%s): cannot load its base '%s'%s: %s",
                 lt_kind_name(d->kind), d->name, t->path, d->base, fix, inner);
    return st;
}

static void overlay_hooks(void *table, const lt_plugin_header *base) {
    size_t n;
    const lt_hook_info *h = lt_hooks_of((lt_kind)base->kind, &n);
    for (size_t i = 0; i < n; i++)
        if (!registry_hook_get(table, h[i].offset))
            registry_hook_set(table, h[i].offset, registry_hook_get(base, h[i].offset));
}

static size_t count_params(const lt_param_spec *p) {
    size_t n = 0;
    while (p && p[n].name) n++;
    return n;
}

static bool has_param(const lt_param_spec *p, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(p[i].name, name)) return true;
    return false;
}

/* The plugin accepts its base's parameters too (its inherited hooks read
 * them), so --help-plugin lists both; the plugin's own spec wins a clash. */
static lt_status merge_params(lt_registry *r, lt_plugin_header *h, const lt_param_spec *inherited) {
    size_t own = count_params(h->params), more = count_params(inherited);
    if (!more) return LT_OK;
    if (!own) {
        h->params = inherited;
        return LT_OK;
    }
    lt_param_spec *all = calloc(own + more + 1, sizeof *all);
    if (!all) return LT_ERR_NOMEM;
    memcpy(all, h->params, own * sizeof *all);
    size_t n = own;
    for (size_t i = 0; i < more; i++)
        if (!has_param(all, own, inherited[i].name)) all[n++] = inherited[i];
    if (!registry_own(r, all)) return LT_ERR_NOMEM;
    h->params = all;
    return LT_OK;
}

/* ---- defaults and required hooks ------------------------------------------- */

static void fill_defaults(void *table, lt_kind kind) {
    size_t n;
    const lt_hook_info *h = lt_hooks_of(kind, &n);
    for (size_t i = 0; i < n; i++)
        if (!registry_hook_get(table, h[i].offset) && h[i].dflt)
            registry_hook_set(table, h[i].offset, h[i].dflt);
}

static void add_name(char *buf, size_t len, const char *name) {
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "%s'%s'", used ? ", " : "", name);
}

/* Names every required hook still NULL, so the author fixes them all in one
 * build rather than one per hook. */
static lt_status check_required(lt_registry *r, const registry_target *t, const void *table,
                                char *err, size_t errlen) {
    const lt_plugin_header *hdr = table;
    size_t n, required = 0, missing = 0;
    const lt_hook_info *h = lt_hooks_of((lt_kind)hdr->kind, &n);
    char names[1024] = "";
    for (size_t i = 0; i < n; i++) {
        if (!h[i].required) continue;
        required++;
        if (registry_hook_get(table, h[i].offset)) continue;
        missing++;
        add_name(names, sizeof names, h[i].name);
    }
    if (!missing) return LT_OK;
    const char *kind = lt_kind_name(hdr->kind);
    char installed[512], also[560] = "";
    registry_installed_names(r, (lt_kind)hdr->kind, hdr->name, installed, sizeof installed);
    if (installed[0]) snprintf(also, sizeof also, " (installed: %s)", installed);
    bool one = missing == 1;
    registry_err(err, errlen, "%s '%s' (%s): required hook%s %s (%zu of %zu) %s not set and no "
                 "base provides %s; implement %s or set .base = \"<a complete %s>\"%s",
                 kind, hdr->name, t->path, one ? "" : "s", names, missing, required,
                 one ? "is" : "are", one ? "it" : "them", one ? "it" : "them", kind, also);
    return LT_ERR_ABI;
}

/* ---- the whole resolution --------------------------------------------------- */

/* Only struct_size bytes are the plugin's: a hook its minor did not have
 * stays NULL and is filled from the base or the defaults. */
static void *adapt(const lt_plugin_header *d) {
    size_t full = lt_desc_size((lt_kind)d->kind);
    void *table = calloc(1, full);
    if (table) memcpy(table, d, d->struct_size);
    /* Before 1.3 a module's training_step_end was reserved and never called
     * (its header invited other uses), and training_step returned the loss:
     * such a module keeps that meaning. */
    if (table && d->kind == LT_KIND_MODULE && d->abi_major == 1 && d->abi_minor < 3)
        ((lt_module_desc *)table)->training_step_end = NULL;
    return table;
}

static lt_status build(lt_registry *r, const registry_target *t, const lt_plugin_header *d,
                       lt_plugin_header *table, const lt_plugin_header **base, char *err,
                       size_t errlen) {
    *base = NULL;
    if (d->base) {
        LT_CHECK(load_base(r, t, d, base, err, errlen));
        overlay_hooks(table, *base);
        if (merge_params(r, table, (*base)->params) != LT_OK) {
            registry_err(err, errlen, "out of memory resolving %s '%s'", lt_kind_name(d->kind),
                         d->name);
            return LT_ERR_NOMEM;
        }
    }
    table->struct_size = (uint32_t)lt_desc_size((lt_kind)d->kind);
    fill_defaults(table, (lt_kind)d->kind);
    return check_required(r, t, table, err, errlen);
}

lt_status registry_resolve(lt_registry *r, const registry_target *t, const lt_plugin_header *d,
                           const lt_plugin_header **out, char *err, size_t errlen) {
    char file[PATH_MAX];
    if (!realpath(t->path, file)) snprintf(file, sizeof file, "%s", t->path);
    registry_entry *e = cached(r, d->kind, d->name, file);
    if (e) {
        *out = e->table;
        return LT_OK;
    }
    LT_CHECK(check_cycle(r, d, err, errlen));
    lt_plugin_header *table = adapt(d);
    const lt_plugin_header *base;
    lt_status st = table ? build(r, t, d, table, &base, err, errlen) : LT_ERR_NOMEM;
    if (st == LT_OK) st = remember(r, d->kind, d->name, file, table);
    if (st != LT_OK) {
        if (st == LT_ERR_NOMEM) registry_err(err, errlen, "out of memory loading %s", t->path);
        free(table);
        return st;
    }
    /* Before any hook runs, as the header promises. */
    if (d->super && base) *d->super = base;
    *out = table;
    return LT_OK;
}
