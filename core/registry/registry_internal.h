/* Internals shared by the registry's files (registry*.c). Not installed.
 *
 * Thread-safety: a registry is used from the main thread only (ltrun and the
 * trainer load plugins before any worker thread exists); nothing here locks. */
#ifndef LT_REGISTRY_INTERNAL_H
#define LT_REGISTRY_INTERNAL_H

#include <limits.h>
#include <stdalign.h>
#include "lt/core.h"
#include "common/ctx.h"
#include "registry.h"
#include "common/text.h"

/* A resolved table, cached by (kind, file, descriptor name). */
typedef struct registry_entry {
    uint32_t kind;
    char *name;   /* descriptor name, lowercased */
    char *file;   /* canonical path of the .so */
    lt_plugin_header *table;
} registry_entry;

/* A descriptor whose base chain is being resolved (cycle detection). */
typedef struct registry_loading {
    uint32_t kind;
    char name[128]; /* as the descriptor spells it */
    char path[PATH_MAX];
} registry_loading;

/* A table copied by lt_registry_override_hook, with the record of what it
 * replaced in front. */
typedef struct override_block {
    lt_hook_override rec;
    struct override_block *older; /* the registry's list, newest first */
    _Alignas(max_align_t) unsigned char table[];
} override_block;

struct lt_registry {
    char **dirs;
    size_t ndirs, dirs_cap;
    bool default_dirs_added;
    registry_entry *entries;
    size_t nentries, entries_cap;
    registry_loading *loading;
    size_t nloading, loading_cap;
    void **owned; /* override copies and merged param lists */
    override_block *overrides; /* the override copies again (owned above), to find records */
    size_t nowned, owned_cap;
    bool cycle_reported; /* a cycle message travels up the chain unwrapped */
    bool probing; /* registry_file_loads is loading: error messages are dropped */
};

/* What a spec turned into: the file to open and what its name promises. */
typedef struct registry_target {
    lt_kind kind;
    char path[PATH_MAX];  /* as found: "dir/file" or the spec itself */
    char label[128];      /* name used in messages until a descriptor is chosen */
    char want[128];       /* lowercased name the file name promises; "" when free */
} registry_target;

/* registry.c */
bool registry_own(lt_registry *r, void *p); /* frees p itself when it cannot keep it */
void registry_err(char *err, size_t len, const char *fmt, ...) LT_PRINTF(3, 4);
void registry_lower(char *dst, const char *src, size_t len);

/* registry_find.c: spec -> file, not-found messages, names for suggestions. */
bool registry_parse_file_name(const char *file, uint32_t *kind, char *name, size_t len);
lt_status registry_locate(lt_registry *r, lt_kind kind, const char *spec, registry_target *t,
                          char *err, size_t errlen);
/* Comma-separated names of the installed plugins of `kind` except `skip`:
 * those a lookup by name reaches and that load (registry_file_loads); ""
 * while probing. */
void registry_installed_names(lt_registry *r, lt_kind kind, const char *skip, char *buf,
                              size_t len);
/* Calls fn(user, dir, file) for every directory entry, directories in search
 * order, entries sorted by name; stops when fn returns false. */
void registry_each_file(lt_registry *r, bool (*fn)(void *user, const char *dir, const char *file),
                        void *user);

/* registry_scan.c: whether dir/file loads and resolves, --list-plugins'
 * verdict; safe to call while another plugin is being resolved. */
bool registry_file_loads(lt_registry *r, const char *dir, const char *file);

/* registry_check.c: the descriptors in one file. */
lt_status registry_open(const registry_target *t, const lt_plugin_header *const **list,
                        char *err, size_t errlen);
lt_status registry_check_all(const registry_target *t, const lt_plugin_header *const *list,
                             char *err, size_t errlen);
lt_status registry_select(const registry_target *t, const lt_plugin_header *const *list,
                          const lt_plugin_header **out, char *err, size_t errlen);

/* elf_check.c: what dlopen and dlsym would otherwise crash on. On false,
 * `why` says what is wrong and the fix, without the path (callers name it):
 * "file is truncated (segment ends at byte N of M); rebuild or reinstall it". */
/* Whether `path` is an ELF shared object for this machine whose every
 * program header lies inside the file. */
bool registry_elf_loadable(const char *path, char *why, size_t len);
/* Whether `addr` (from dlsym) is a function: why reads "... is <why>". */
bool registry_is_function(const void *addr, char *why, size_t len);

/* registry_resolve.c: adaptation, inheritance, defaults, required hooks. */
lt_status registry_resolve(lt_registry *r, const registry_target *t, const lt_plugin_header *d,
                           const lt_plugin_header **out, char *err, size_t errlen);

/* Reads or writes the function pointer at `offset` of a table. */
void (*registry_hook_get(const void *table, size_t offset))(void);
void registry_hook_set(void *table, size_t offset, void (*fn)(void));

#endif
