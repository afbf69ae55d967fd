/* From what the user typed to a file: a name ("ddp", any case) is looked up
 * as liblt-<kind>-<name>.so in the search directories, a file name
 * ("liblt-strategy-ddp.so") is looked up as is, and anything with a '/' is a
 * path. Names compare case-insensitively because users type "DDP" and
 * "ddp" interchangeably; the first directory holding a match wins. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include "common/text.h"
#include "registry_internal.h"

#define FILE_PREFIX "liblt-"
#define FILE_SUFFIX ".so"

static bool ends_with_so(const char *s) {
    size_t n = strlen(s), k = strlen(FILE_SUFFIX);
    return n >= k && !strcasecmp(s + n - k, FILE_SUFFIX);
}

bool registry_parse_file_name(const char *file, uint32_t *kind, char *name, size_t len) {
    size_t n = strlen(file), p = strlen(FILE_PREFIX), s = strlen(FILE_SUFFIX);
    if (n <= p + s || strncasecmp(file, FILE_PREFIX, p) || !ends_with_so(file)) return false;
    const char *k = file + p, *dash = strchr(k, '-');
    if (!dash || dash >= file + n - s) return false;
    for (uint32_t i = 1; i <= LT_KIND_COUNT; i++) {
        const char *kn = lt_kind_name(i);
        if (strlen(kn) != (size_t)(dash - k) || strncasecmp(k, kn, strlen(kn))) continue;
        size_t nl = (size_t)(file + n - s - dash - 1);
        if (!nl || nl >= len) return false;
        char tmp[256];
        if (nl >= sizeof tmp) return false;
        memcpy(tmp, dash + 1, nl);
        tmp[nl] = 0;
        registry_lower(name, tmp, len);
        *kind = i;
        return true;
    }
    return false;
}

/* ---- directory walking ---------------------------------------------------- */

void registry_each_file(lt_registry *r, bool (*fn)(void *user, const char *dir, const char *file),
                        void *user) {
    bool go = true;
    for (size_t d = 0; d < r->ndirs && go; d++) {
        struct dirent **ents = NULL;
        int n = scandir(r->dirs[d], &ents, NULL, alphasort);
        for (int i = 0; i < n; i++) {
            if (go && ents[i]->d_name[0] != '.' && ents[i]->d_type != DT_DIR)
                go = fn(user, r->dirs[d], ents[i]->d_name);
            free(ents[i]);
        }
        free(ents);
    }
}

typedef struct find_file {
    const char *want; /* file name, any case */
    char *path;
    size_t len;
    bool found;
} find_file;

static bool match_file(void *user, const char *dir, const char *file) {
    find_file *f = user;
    if (strcasecmp(file, f->want)) return true;
    snprintf(f->path, f->len, "%s/%s", dir, file);
    f->found = true;
    return false;
}

static bool find_in_dirs(lt_registry *r, const char *file, char *path, size_t len) {
    find_file f = {file, path, len, false};
    registry_each_file(r, match_file, &f);
    return f.found;
}

/* ---- names for suggestions ----------------------------------------------- */

typedef struct nearest {
    const char *target;
    char best[128];
    int dist;
} nearest;

static void keep_nearest(void *user, const char *name) {
    nearest *n = user;
    int d = lt_edit_distance(n->target, name);
    if (d < n->dist) {
        n->dist = d;
        snprintf(n->best, sizeof n->best, "%s", name);
    }
}

/* The installed name nearest to `target`, when it is close enough to be a
 * typo (lt_close_enough) and not the same name. */
static bool suggest(lt_registry *r, lt_kind kind, const char *target, char *out, size_t len) {
    nearest n = {target, "", INT_MAX};
    lt_registry_each_name(r, kind, keep_nearest, &n);
    if (!n.best[0] || n.dist == 0 || !lt_close_enough(target, n.dist)) return false;
    snprintf(out, len, "%s", n.best);
    return true;
}

static bool list_has(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strstr(p, ", ");
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncasecmp(p, name, n)) return true;
        if (!end) break;
        p = end + 2;
    }
    return false;
}

static void list_add(char *list, size_t len, const char *name) {
    size_t used = strlen(list);
    snprintf(list + used, len - used, "%s%s", used ? ", " : "", name);
}

typedef struct installed_walk {
    lt_registry *r;
    lt_kind kind;
    const char *skip;
    char *buf;
    size_t len;
    char decided[4096]; /* names whose first file was seen: the one a lookup reaches */
} installed_walk;

/* A name counts as installed when its first file loads: a refused file is
 * no base to suggest, and a later good copy is never reached by name. */
static bool visit_installed(void *user, const char *dir, const char *file) {
    installed_walk *w = user;
    uint32_t kind;
    char name[128];
    if (!registry_parse_file_name(file, &kind, name, sizeof name) || kind != (uint32_t)w->kind)
        return true;
    if ((w->skip && !strcasecmp(name, w->skip)) || list_has(w->decided, name)) return true;
    list_add(w->decided, sizeof w->decided, name);
    if (registry_file_loads(w->r, dir, file)) list_add(w->buf, w->len, name);
    return true;
}

void registry_installed_names(lt_registry *r, lt_kind kind, const char *skip, char *buf,
                              size_t len) {
    if (!len) return;
    buf[0] = 0;
    if (r->probing) return; /* nobody reads the message being built */
    installed_walk w = {.r = r, .kind = kind, .skip = skip, .buf = buf, .len = len};
    registry_each_file(r, visit_installed, &w);
}

typedef struct name_walk {
    lt_kind kind;
    void (*fn)(void *user, const char *name);
    void *user;
    char seen[4096];
} name_walk;

static bool visit_name_once(void *user, const char *dir, const char *file) {
    (void)dir;
    name_walk *w = user;
    uint32_t kind;
    char name[128];
    if (!registry_parse_file_name(file, &kind, name, sizeof name) || kind != (uint32_t)w->kind ||
        list_has(w->seen, name))
        return true;
    list_add(w->seen, sizeof w->seen, name);
    w->fn(w->user, name);
    return true;
}

void lt_registry_each_name(lt_registry *r, lt_kind kind, void (*fn)(void *user, const char *name),
                           void *user) {
    name_walk w = {.kind = kind, .fn = fn, .user = user};
    registry_each_file(r, visit_name_once, &w);
}

/* ---- not found ------------------------------------------------------------ */

static void dir_list(const lt_registry *r, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < r->ndirs && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", r->dirs[i]);
    if (!r->ndirs)
        snprintf(buf, len, "no plugin directory (pass --plugin-dir DIR or set LT_PLUGIN_PATH)");
}

static lt_status not_found(lt_registry *r, lt_kind kind, const char *spec, const char *file,
                           char *err, size_t errlen) {
    char dirs[2048], name[128], near[128], hint[200] = "";
    uint32_t k;
    dir_list(r, dirs, sizeof dirs);
    if (!registry_parse_file_name(file, &k, name, sizeof name))
        registry_lower(name, spec, sizeof name);
    if (suggest(r, kind, name, near, sizeof near))
        snprintf(hint, sizeof hint, "; did you mean '%s'?", near);
    registry_err(err, errlen, "%s '%s' not found; looked in: %s (as %s)%s "
                 "(ltrun --list-plugins shows what is installed)",
                 lt_kind_name(kind), spec, dirs, file, hint);
    return LT_ERR_NOT_FOUND;
}

/* ---- spec -> target ------------------------------------------------------- */

/* The file name decides what the descriptor of its kind must be called. A
 * freely named file (a third party's libmine.so), or a request for another
 * kind than the file is named after (one .so may carry several kinds),
 * promises nothing: the first descriptor of the kind is taken. */
static void promise(registry_target *t, const char *file) {
    uint32_t kind;
    if (!registry_parse_file_name(file, &kind, t->want, sizeof t->want) || kind != t->kind)
        t->want[0] = 0;
    snprintf(t->label, sizeof t->label, "%s", t->want[0] ? t->want : file);
}

static lt_status locate_path(registry_target *t, const char *spec, char *err, size_t errlen) {
    const char *base = strrchr(spec, '/') + 1;
    if (snprintf(t->path, sizeof t->path, "%s", spec) >= (int)sizeof t->path) {
        registry_err(err, errlen, "%s plugin path too long: %.64s...", lt_kind_name(t->kind), spec);
        return LT_ERR_INVALID;
    }
    promise(t, base);
    struct stat st;
    if (stat(spec, &st) == 0 && !S_ISDIR(st.st_mode)) return LT_OK;
    registry_err(err, errlen, "%s '%s' (%s): no such file; check the path (a relative path is "
                 "taken from the current directory)", lt_kind_name(t->kind), t->label, spec);
    return LT_ERR_NOT_FOUND;
}

static lt_status locate_in_dirs(lt_registry *r, registry_target *t, const char *spec,
                                const char *file, char *err, size_t errlen) {
    if (!find_in_dirs(r, file, t->path, sizeof t->path))
        return not_found(r, t->kind, spec, file, err, errlen);
    promise(t, strrchr(t->path, '/') + 1);
    return LT_OK;
}

lt_status registry_locate(lt_registry *r, lt_kind kind, const char *spec, registry_target *t,
                          char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    t->kind = kind;
    if (strchr(spec, '/')) return locate_path(t, spec, err, errlen);
    if (ends_with_so(spec)) return locate_in_dirs(r, t, spec, spec, err, errlen);
    char lower[128], file[256];
    if (strlen(spec) >= sizeof lower) {
        registry_err(err, errlen, "%s name too long (%zu characters): %.32s...; plugin names "
                     "have at most %zu", lt_kind_name(kind), strlen(spec), spec, sizeof lower - 1);
        return LT_ERR_INVALID;
    }
    registry_lower(lower, spec, sizeof lower);
    snprintf(file, sizeof file, FILE_PREFIX "%s-%s" FILE_SUFFIX, lt_kind_name(kind), lower);
    LT_CHECK(locate_in_dirs(r, t, spec, file, err, errlen));
    snprintf(t->label, sizeof t->label, "%s", spec); /* as the user spelt it */
    return LT_OK;
}
