/* Plugin registry and loader: finds liblt-<kind>-<name>.so in the plugin
 * directories, dlopens it, checks the descriptor, resolves inheritance and
 * per-hook overrides, and hands out complete hook tables.
 *
 * Search order: directories added with lt_registry_add_dir (in order: the
 * --plugin-dir flags, then trainer.plugin_dir), then LT_PLUGIN_PATH
 * (colon-separated; each entry must exist, as a --plugin-dir must), then
 * the built-in plugins' directory found at run time beside the core:
 * <dir of liblt.so>/lt/abi-<major>, or for a program with the core linked
 * in (ltrun) <its dir>/../lib/lt/abi-<major>, so a moved install still
 * finds them; the configured install path only when that lookup fails.
 * Plugins are never dlclosed (threads they started may outlive any point
 * the core could know is safe). */
#ifndef LT_REGISTRY_H
#define LT_REGISTRY_H

#include "lt/abi.h"
#include "common/ctx.h" /* lt_hook_override */

typedef struct lt_registry lt_registry;

lt_registry *lt_registry_new(void);
void lt_registry_free(lt_registry *r); /* frees tables, keeps libraries loaded */

/* Why `dir` cannot be a plugin directory ("not a directory", strerror's
 * text), or NULL when it is one this process can list and open. */
const char *lt_registry_dir_problem(const char *dir);
/* LT_ERR_NOT_FOUND when `dir` has a problem (lt_registry_dir_problem). */
lt_status lt_registry_add_dir(lt_registry *r, const char *dir);
/* Adds the LT_PLUGIN_PATH entries (colon-separated; empty entries are
 * skipped) and the built-in plugins' directory, once. An entry that is not
 * a usable directory is refused (LT_ERR_NOT_FOUND, one line in err naming
 * the variable, the entry and the fix) and nothing is added; the built-in
 * directory may be missing (it is listed in "looked in" all the same). */
lt_status lt_registry_add_default_dirs(lt_registry *r, char *err, size_t errlen);

/* Loads the plugin of `kind` named by `spec`: a name ("ddp", any case), a file
 * name ("liblt-strategy-ddp.so") or a path ("./x/liblt-strategy-ddp.so",
 * "/abs/libmine.so"). Resolves `base` chains (loading the base by name),
 * fills optional hooks with the core's defaults, and checks required hooks.
 * *out is the resolved table: a full-size copy of the newest layout, valid
 * until lt_registry_free. Loading the same plugin twice returns the same table.
 * Errors (one line in err, naming the file, what was expected, what was found
 * and the fix): not found (lists the directories searched), not a loadable
 * ELF shared object for this machine (checked before dlopen: not ELF, another
 * class, byte order or machine, not ET_DYN, truncated), dlopen failure
 * (dlerror text), no lt_plugin_entry_v1 or one that is not a function, bad
 * magic, ABI major/minor mismatch, kind or name not matching the file name,
 * no descriptor of that kind and name in the file, base not found,
 * inheritance cycle, missing required hook. */
lt_status lt_registry_load(lt_registry *r, lt_kind kind, const char *spec,
                           const lt_plugin_header **out, char *err, size_t errlen);

/* Returns a copy of `table` (a resolved table of `kind`) with hook `hook`
 * replaced by the function `sym` from the shared object `path`
 * ("./libmine.so:my_init" is split by the caller or passed whole in spec as
 * "path:symbol"). Errors: unknown hook name (suggest the nearest), file not
 * loadable (the same checks as a plugin's before dlopen), symbol not found,
 * symbol not a function (a variable). */
lt_status lt_registry_override_hook(lt_registry *r, lt_kind kind, const lt_plugin_header *table,
                                    const char *hook, const char *spec,
                                    const lt_plugin_header **out, char *err, size_t errlen);

/* The record of the path:symbol override that made `table` (a table
 * lt_registry_override_hook returned), chained to the records of the
 * overrides under it; NULL for any other table. The trainer puts it in the
 * plugin's context so lt_ctx_original can reach the replaced hooks. */
const lt_hook_override *lt_registry_override_record(const lt_registry *r,
                                                    const lt_plugin_header *table);

/* Hook metadata per kind, also used by config validation ([strategy]
 * init_dist_connection = ...). */
typedef struct lt_hook_info {
    const char *name;
    size_t offset;     /* offsetof in the descriptor */
    bool required;
    void (*dflt)(void); /* default for an optional hook, or NULL */
} lt_hook_info;
const lt_hook_info *lt_hooks_of(lt_kind kind, size_t *count);
size_t lt_desc_size(lt_kind kind); /* sizeof the newest descriptor of that kind */

/* Calls fn once per plugin name of `kind` that a file in the search path
 * carries (liblt-<kind>-<name>.so, lowercased), directories in search order,
 * names sorted within a directory. Nothing is opened: load the name to use it. */
void lt_registry_each_name(lt_registry *r, lt_kind kind, void (*fn)(void *user, const char *name),
                           void *user);

/* Every plugin file in the search path, for --list-plugins. */
typedef struct lt_plugin_listing {
    const char *path;
    const lt_plugin_header *desc; /* NULL when refused */
    const char *refused;          /* why the file was refused, or NULL */
} lt_plugin_listing;
void lt_registry_scan(lt_registry *r, void (*fn)(void *user, const lt_plugin_listing *l),
                      void *user);

#endif
