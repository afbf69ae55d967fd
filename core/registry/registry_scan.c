/* --list-plugins: every liblt-*.so in the search path, loaded and resolved
 * like a run would, or the reason it was refused. A file name found again in
 * a later directory is listed as shadowed: lookup would never reach it, and a
 * user wondering why their copy is ignored needs to see that. The same
 * verdict decides which plugins other messages call installed
 * (registry_file_loads). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "registry_internal.h"

typedef struct seen_file {
    char *file;
    char *path;
} seen_file;

typedef struct scan_state {
    lt_registry *r;
    void (*fn)(void *user, const lt_plugin_listing *l);
    void *user;
    seen_file *seen;
    size_t nseen, cap;
} scan_state;

static bool plugin_file_name(const char *file) {
    size_t n = strlen(file);
    return n > 9 && !strncasecmp(file, "liblt-", 6) && !strcasecmp(file + n - 3, ".so");
}

static const char *first_path(const scan_state *s, const char *file) {
    for (size_t i = 0; i < s->nseen; i++)
        if (!strcasecmp(s->seen[i].file, file)) return s->seen[i].path;
    return NULL;
}

static void mark_seen(scan_state *s, const char *file, const char *path) {
    if (!lt_grow((void **)&s->seen, &s->cap, s->nseen + 1, sizeof *s->seen)) return;
    seen_file f = {strdup(file), strdup(path)};
    if (f.file && f.path) {
        s->seen[s->nseen++] = f;
    } else {
        free(f.file);
        free(f.path);
    }
}

/* The verdict on one file, shadowing aside: its table, or NULL and why. */
static const lt_plugin_header *classify(lt_registry *r, const char *path, const char *file,
                                        char *why, size_t len) {
    uint32_t kind;
    char name[128];
    const lt_plugin_header *d = NULL;
    if (!registry_parse_file_name(file, &kind, name, sizeof name))
        snprintf(why, len, "the file name is not liblt-<kind>-<name>.so with a known kind "
                 "(accelerator, strategy, precision, environment, backend, module); rename it");
    else if (lt_registry_load(r, (lt_kind)kind, path, &d, why, len) != LT_OK)
        d = NULL;
    return d;
}

static void describe(scan_state *s, const char *file, lt_plugin_listing *l, char *why,
                     size_t len) {
    const char *first = first_path(s, file);
    if (first) {
        snprintf(why, len, "shadowed by %s", first);
        l->refused = why;
        return;
    }
    mark_seen(s, file, l->path);
    l->desc = classify(s->r, l->path, file, why, len);
    if (!l->desc) l->refused = why;
}

static bool scan_file(void *user, const char *dir, const char *file) {
    scan_state *s = user;
    if (!plugin_file_name(file)) return true;
    char path[PATH_MAX], why[2048];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    lt_plugin_listing l = {path, NULL, NULL};
    describe(s, file, &l, why, sizeof why);
    s->fn(s->user, &l);
    return true;
}

/* Called while another plugin is being resolved (its error message lists
 * the installed ones). What that resolution has on r->loading is doomed (its
 * base is the plugin that failed), so a probe reaching it may well take it
 * for a cycle: the cycle flag the probe leaves behind is not the caller's.
 * The plugins a probe loads list nothing themselves (r->probing), or two
 * incomplete plugins would probe each other forever. */
bool registry_file_loads(lt_registry *r, const char *dir, const char *file) {
    char path[PATH_MAX], why[2048];
    if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path) return false;
    bool cycle = r->cycle_reported, probing = r->probing;
    r->probing = true;
    bool ok = classify(r, path, file, why, sizeof why) != NULL;
    r->cycle_reported = cycle;
    r->probing = probing;
    return ok;
}

void lt_registry_scan(lt_registry *r, void (*fn)(void *user, const lt_plugin_listing *l),
                      void *user) {
    if (!r || !fn) return;
    scan_state s = {r, fn, user, NULL, 0, 0};
    registry_each_file(r, scan_file, &s);
    for (size_t i = 0; i < s.nseen; i++) {
        free(s.seen[i].file);
        free(s.seen[i].path);
    }
    free(s.seen);
}
