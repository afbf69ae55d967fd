/* One hook from a user's object: `[strategy] init_dist_connection =
 * ./libmine.so:my_init`. The user's object is not a plugin (no descriptor, no
 * naming rule): only the symbol is taken, so the rest of the table stays what
 * the plugin and its base made it. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/ctx.h"
#include "registry_internal.h"

static const lt_hook_info *find_hook(lt_kind kind, const char *hook, char *err, size_t errlen) {
    size_t n;
    const lt_hook_info *h = lt_hooks_of(kind, &n);
    size_t best = 0;
    int dist = 1 << 20;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(h[i].name, hook)) return &h[i];
        int d = lt_edit_distance(hook, h[i].name);
        if (d < dist) dist = d, best = i;
    }
    registry_err(err, errlen, "%s has no hook '%s'; did you mean '%s'?", lt_kind_name(kind), hook,
                 n ? h[best].name : "?");
    return NULL;
}

/* "path:symbol", split at the last ':' so a path may contain colons. A bare
 * file name gets "./": dlopen would otherwise search the library path, and
 * users mean the file next to them. */
static lt_status split_spec(const char *spec, char *path, size_t plen, char *sym, size_t slen) {
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || !colon[1]) return LT_ERR_INVALID;
    size_t n = (size_t)(colon - spec);
    const char *slash = memchr(spec, '/', n);
    const char *prefix = slash ? "" : "./";
    if (n + strlen(prefix) >= plen || strlen(colon + 1) >= slen) return LT_ERR_INVALID;
    snprintf(path, plen, "%s%.*s", prefix, (int)n, spec);
    snprintf(sym, slen, "%s", colon + 1);
    return LT_OK;
}

static lt_status load_symbol(const char *what, const char *path, const char *sym,
                             void (**fn)(void), char *err, size_t errlen) {
    char why[512];
    if (!registry_elf_loadable(path, why, sizeof why)) {
        registry_err(err, errlen, "%s: cannot load %s: %s", what, path, why);
        return LT_ERR_NOT_FOUND; /* what dlopen's refusal returns */
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        registry_err(err, errlen, "%s: cannot load %s: %s; give the path to a shared object "
                     "(a relative path is taken from the current directory)", what, path,
                     dlerror());
        return LT_ERR_NOT_FOUND;
    }
    dlerror();
    void *p = dlsym(h, sym);
    if (!p) {
        registry_err(err, errlen, "%s: no symbol '%s' in %s; export it (not static, default "
                     "visibility; nm -D %s lists what is exported)", what, sym, path, path);
        return LT_ERR_NOT_FOUND;
    }
    if (!registry_is_function(p, why, sizeof why)) {
        registry_err(err, errlen, "%s: '%s' in %s is %s; name a function (nm -D %s marks "
                     "functions T)", what, sym, path, why, path);
        return LT_ERR_INVALID;
    }
    memcpy(fn, &p, sizeof *fn);
    return LT_OK;
}

lt_status lt_registry_override_hook(lt_registry *r, lt_kind kind, const lt_plugin_header *table,
                                    const char *hook, const char *spec,
                                    const lt_plugin_header **out, char *err, size_t errlen) {
    if (!r || !table || !hook || !spec || !out || !lt_kind_name(kind) ||
        table->kind != (uint32_t)kind) {
        registry_err(err, errlen, "lt_registry_override_hook: needs a resolved %s table, a hook "
                     "and path:symbol", lt_kind_name(kind) ? lt_kind_name(kind) : "plugin");
        return LT_ERR_INVALID;
    }
    char what[512], path[PATH_MAX], sym[256];
    snprintf(what, sizeof what, "%s '%s' hook %s = %s", lt_kind_name(kind), table->name, hook,
             spec);
    const lt_hook_info *info = find_hook(kind, hook, err, errlen);
    if (!info) return LT_ERR_INVALID;
    if (split_spec(spec, path, sizeof path, sym, sizeof sym) != LT_OK) {
        registry_err(err, errlen, "%s: expected path:symbol, e.g. ./libmine.so:my_%s", what, hook);
        return LT_ERR_INVALID;
    }
    void (*fn)(void);
    LT_CHECK(load_symbol(what, path, sym, &fn, err, errlen));
    size_t full = lt_desc_size(kind);
    /* The copy carries its record in front: which hook it replaced and the
     * table before, chained to that table's own record when it was a copy
     * too, so lt_ctx_original finds the replaced function of any hook. */
    override_block *b = calloc(1, sizeof *b + full);
    if (!b || !registry_own(r, b)) {
        registry_err(err, errlen, "%s: out of memory", what);
        return LT_ERR_NOMEM;
    }
    b->rec.hook = info->name;
    b->rec.before = table;
    b->rec.next = lt_registry_override_record(r, table);
    memcpy(b->table, table, table->struct_size < full ? table->struct_size : full);
    registry_hook_set(b->table, info->offset, fn);
    b->older = r->overrides;
    r->overrides = b;
    *out = (const lt_plugin_header *)b->table;
    return LT_OK;
}

const lt_hook_override *lt_registry_override_record(const lt_registry *r,
                                                    const lt_plugin_header *table) {
    for (const override_block *b = r ? r->overrides : NULL; b && table; b = b->older)
        if ((const void *)b->table == (const void *)table) return &b->rec;
    return NULL;
}
