/* The registry's front: search directories, the load pipeline (locate, open,
 * check, select, resolve; one file each), and the memory the registry owns.
 *
 * Thread-safety: main thread only. ltrun and the trainer load every plugin
 * before starting workers or threads, so nothing here takes a lock; a program
 * that loads plugins from several threads must serialize the calls itself. */
#define _GNU_SOURCE /* dladdr1, RTLD_DL_LINKMAP */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <unistd.h>
#include <sys/stat.h>
#include "registry_internal.h"

#define STR2(x) #x
#define STR(x) STR2(x)
/* Set by core/CMakeLists.txt; these for other builds. The install path is
 * only the fallback: the plugins are looked for relative to liblt.so or to
 * the program that links the core (see plugin_dir_beside_core). */
#ifndef LT_PLUGIN_INSTALL_DIR
#define LT_PLUGIN_INSTALL_DIR "/usr/local/lib/lt/abi-" STR(LT_ABI_MAJOR)
#endif
#ifndef LT_PLUGIN_DIR_FROM_LIB
#define LT_PLUGIN_DIR_FROM_LIB "lt/abi-" STR(LT_ABI_MAJOR)
#endif
#ifndef LT_PLUGIN_DIR_FROM_BIN
#define LT_PLUGIN_DIR_FROM_BIN "../lib/lt/abi-" STR(LT_ABI_MAJOR)
#endif

/* ---- small helpers shared by registry*.c ------------------------------- */

bool registry_own(lt_registry *r, void *p) {
    if (!lt_grow((void **)&r->owned, &r->owned_cap, r->nowned + 1, sizeof *r->owned)) {
        free(p);
        return false;
    }
    r->owned[r->nowned++] = p;
    return true;
}

void registry_err(char *err, size_t len, const char *fmt, ...) {
    if (!err || !len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

void registry_lower(char *dst, const char *src, size_t len) {
    size_t i = 0;
    for (; len && src[i] && i + 1 < len; i++) dst[i] = (char)tolower((unsigned char)src[i]);
    if (len) dst[i] = 0;
}

/* Hooks are read and written as plain function pointers: every hook slot has
 * that size, and memcpy keeps the compiler out of aliasing arguments. */
void (*registry_hook_get(const void *table, size_t offset))(void) {
    void (*fn)(void);
    memcpy(&fn, (const char *)table + offset, sizeof fn);
    return fn;
}

void registry_hook_set(void *table, size_t offset, void (*fn)(void)) {
    memcpy((char *)table + offset, &fn, sizeof fn);
}

/* ---- lifetime ------------------------------------------------------------ */

lt_registry *lt_registry_new(void) { return calloc(1, sizeof(lt_registry)); }

void lt_registry_free(lt_registry *r) {
    if (!r) return;
    for (size_t i = 0; i < r->ndirs; i++) free(r->dirs[i]);
    for (size_t i = 0; i < r->nentries; i++) {
        free(r->entries[i].name);
        free(r->entries[i].file);
        free(r->entries[i].table);
    }
    for (size_t i = 0; i < r->nowned; i++) free(r->owned[i]);
    free(r->dirs);
    free(r->entries);
    free(r->loading);
    free(r->owned);
    free(r);
}

/* ---- search directories -------------------------------------------------- */

/* Appends without checking the directory exists: the install directory is
 * listed in "looked in" even where nothing was installed yet. */
static lt_status add_dir_unchecked(lt_registry *r, const char *dir) {
    for (size_t i = 0; i < r->ndirs; i++)
        if (!strcmp(r->dirs[i], dir)) return LT_OK;
    if (!lt_grow((void **)&r->dirs, &r->dirs_cap, r->ndirs + 1, sizeof *r->dirs))
        return LT_ERR_NOMEM;
    char *copy = strdup(dir);
    if (!copy) return LT_ERR_NOMEM;
    r->dirs[r->ndirs++] = copy;
    return LT_OK;
}

const char *lt_registry_dir_problem(const char *dir) {
    struct stat st;
    if (stat(dir, &st) != 0) return strerror(errno);
    if (!S_ISDIR(st.st_mode)) return "not a directory";
    /* unlistable or unsearchable: its plugins would be missed, not refused */
    if (access(dir, R_OK | X_OK) != 0)
        return errno == EACCES ? "not readable (permission denied)" : strerror(errno);
    return NULL;
}

/* A --plugin-dir that is not a directory is a user error worth reporting
 * (LT_ERR_NOT_FOUND), not something to skip silently. */
lt_status lt_registry_add_dir(lt_registry *r, const char *dir) {
    if (!r || !dir || !*dir) return LT_ERR_INVALID;
    if (lt_registry_dir_problem(dir)) return LT_ERR_NOT_FOUND;
    return add_dir_unchecked(r, dir);
}

/* The built-in plugins' directory, from where this code was loaded, so an
 * installed tree finds them wherever its prefix is moved: <dir of liblt.so>/
 * lt/abi-<major>; or, in a program that links the core's objects itself
 * (ltrun), <dir of the program>/../lib/lt/abi-<major>. Symlinks are resolved
 * first (the plugins are beside the real file). False when the loader cannot
 * say or no such directory exists; then the configured install path is used. */
static bool plugin_dir_beside_core(char out[PATH_MAX]) {
    Dl_info info;
    struct link_map *map = NULL;
    if (!dladdr1((void *)plugin_dir_beside_core, &info, (void **)&map, RTLD_DL_LINKMAP) || !map)
        return false;
    char obj[PATH_MAX];
    const char *rel = LT_PLUGIN_DIR_FROM_LIB;
    if (map->l_name && map->l_name[0]) { /* a shared object: liblt.so */
        if (!realpath(map->l_name, obj)) return false;
    } else { /* the main program has no name in the link map; the kernel knows it */
        ssize_t n = readlink("/proc/self/exe", obj, sizeof obj - 1);
        if (n <= 0) return false;
        obj[n] = 0;
        rel = LT_PLUGIN_DIR_FROM_BIN;
    }
    char *slash = strrchr(obj, '/');
    if (!slash) return false;
    *slash = 0;
    char joined[PATH_MAX];
    int n = snprintf(joined, sizeof joined, "%s/%s", obj, rel);
    if (n < 0 || (size_t)n >= sizeof joined) return false;
    /* Only a directory that exists (a build tree has none beside it: then
     * the configured install path), without "..": it shows in "looked in". */
    struct stat st;
    return realpath(joined, out) && stat(out, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Every LT_PLUGIN_PATH entry the user named must be a usable directory, as
 * a --plugin-dir must: a typo would otherwise show up later as "plugin not
 * found", or never (when another directory has the plugins too). Empty
 * entries ("a::b", a trailing ':') are skipped; unlike PATH's, they do not
 * mean the current directory. */
static lt_status check_path_entries(const char *path, char *err, size_t errlen) {
    char *copy = strdup(path), *save = NULL;
    if (!copy) {
        registry_err(err, errlen, "out of memory");
        return LT_ERR_NOMEM;
    }
    for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        const char *why = lt_registry_dir_problem(d);
        if (!why) continue;
        registry_err(err, errlen, "LT_PLUGIN_PATH entry '%s': %s; name an existing directory of "
                     "liblt-<kind>-<name>.so plugins, or remove the entry from LT_PLUGIN_PATH",
                     d, why);
        free(copy);
        return LT_ERR_NOT_FOUND;
    }
    free(copy);
    return LT_OK;
}

lt_status lt_registry_add_default_dirs(lt_registry *r, char *err, size_t errlen) {
    if (!r) {
        registry_err(err, errlen, "lt_registry_add_default_dirs: no registry");
        return LT_ERR_INVALID;
    }
    if (r->default_dirs_added) return LT_OK;
    const char *path = getenv("LT_PLUGIN_PATH");
    if (path) LT_CHECK(check_path_entries(path, err, errlen)); /* all judged, none added yet */
    char *copy = path ? strdup(path) : NULL, *save = NULL;
    if (path && !copy) {
        registry_err(err, errlen, "out of memory");
        return LT_ERR_NOMEM;
    }
    lt_status st = LT_OK;
    for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d && st == LT_OK;
         d = strtok_r(NULL, ":", &save))
        st = add_dir_unchecked(r, d);
    free(copy);
    char dir[PATH_MAX];
    if (st == LT_OK)
        st = add_dir_unchecked(r, plugin_dir_beside_core(dir) ? dir : LT_PLUGIN_INSTALL_DIR);
    if (st == LT_OK) r->default_dirs_added = true;
    else registry_err(err, errlen, "out of memory");
    return st;
}

/* ---- loading ------------------------------------------------------------- */

lt_status lt_registry_load(lt_registry *r, lt_kind kind, const char *spec,
                           const lt_plugin_header **out, char *err, size_t errlen) {
    if (!r || !spec || !*spec || !out) {
        registry_err(err, errlen,
                     "lt_registry_load: registry, plugin name and output are required");
        return LT_ERR_INVALID;
    }
    if (!lt_kind_name(kind)) {
        registry_err(err, errlen, "lt_registry_load: unknown plugin kind %d for '%s'", (int)kind,
                     spec);
        return LT_ERR_INVALID;
    }
    if (r->nloading == 0) r->cycle_reported = false;
    registry_target t;
    LT_CHECK(registry_locate(r, kind, spec, &t, err, errlen));
    const lt_plugin_header *const *list;
    LT_CHECK(registry_open(&t, &list, err, errlen));
    LT_CHECK(registry_check_all(&t, list, err, errlen));
    const lt_plugin_header *d;
    LT_CHECK(registry_select(&t, list, &d, err, errlen));
    return registry_resolve(r, &t, d, out, err, errlen);
}
