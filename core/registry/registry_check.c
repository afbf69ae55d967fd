/* Opening a plugin file and checking what it exports before any of it is
 * used. Every descriptor in the file is checked, not only the one asked for:
 * a file with one malformed descriptor was built wrongly and the user should
 * hear about it now rather than when another run asks for the other one.
 * Checks go in the order their fields can be trusted: magic first (otherwise
 * the rest is noise), then the ABI version (it decides the layout), then the
 * size, then the kind. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "registry_internal.h"

#define MAX_DESCRIPTORS 256 /* more means a missing NULL terminator */

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* A plugin calls lt_* through the dynamic linker, which finds the first
 * definition in the process: the program's when it links the core's objects
 * and exports them (lt_link_internal), else liblt.so's. Either way it must be
 * this very code; a program holding a private copy of the core would split
 * the error slot, the log level and the run between two copies. */
static bool core_is_shared(void) {
    void *seen = dlsym(RTLD_DEFAULT, "lt_set_error");
    void (*mine)(lt_ctx *, const char *, ...) = lt_set_error;
    return seen && memcmp(&seen, &mine, sizeof seen) == 0;
}

lt_status registry_open(const registry_target *t, const lt_plugin_header *const **list,
                        char *err, size_t errlen) {
    const char *kind = lt_kind_name(t->kind);
    if (!core_is_shared()) {
        registry_err(err, errlen, "%s '%s' (%s): not loaded: this program has a private copy of "
                     "lt's core that plugins would not reach; link it with liblt.so, or with "
                     "lt_link_internal (cmake/LtInternal.cmake), which exports the copy",
                     kind, t->label, t->path);
        return LT_ERR_ABI;
    }
    char why[512];
    if (!registry_elf_loadable(t->path, why, sizeof why)) {
        registry_err(err, errlen, "%s '%s' (%s): not a loadable plugin: %s", kind, t->label,
                     t->path, why);
        return LT_ERR_ABI;
    }
    void *h = dlopen(t->path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        registry_err(err, errlen, "%s '%s' (%s): cannot load: %s; rebuild it as a shared object "
                     "for this machine and install the libraries it needs (ldd lists them)",
                     kind, t->label, t->path, dlerror());
        return LT_ERR_ABI;
    }
    dlerror();
    void *sym = dlsym(h, LT_PLUGIN_ENTRY_SYMBOL);
    if (!sym) {
        registry_err(err, errlen, "%s '%s' (%s): no %s symbol, so it is not an lt plugin; "
                     "export its descriptors with LT_PLUGIN_EXPORT(&desc.hdr)",
                     kind, t->label, t->path, LT_PLUGIN_ENTRY_SYMBOL);
        return LT_ERR_ABI;
    }
    if (!registry_is_function(sym, why, sizeof why)) {
        registry_err(err, errlen, "%s '%s' (%s): its %s symbol is %s; define it with "
                     "LT_PLUGIN_EXPORT(&desc.hdr), which makes it a function", kind, t->label,
                     t->path, LT_PLUGIN_ENTRY_SYMBOL, why);
        return LT_ERR_ABI;
    }
    lt_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry); /* POSIX: data and code pointers convert */
    *list = entry();
    return LT_OK;
}

static lt_status check_abi(const registry_target *t, const char *where,
                           const lt_plugin_header *d, char *err, size_t errlen) {
    const char *kind = lt_kind_name(t->kind);
    if (d->abi_major != LT_ABI_MAJOR) {
        registry_err(err, errlen, "%s '%s' (%s): %sABI %u.%u, this lt supports %d.0–%d.%d; "
                     "rebuild it against lt %d.x headers", kind, t->label, t->path, where,
                     d->abi_major, d->abi_minor, LT_ABI_MAJOR, LT_ABI_MAJOR, LT_ABI_MINOR,
                     LT_ABI_MAJOR);
        return LT_ERR_ABI;
    }
    if (d->abi_minor > LT_ABI_MINOR) {
        registry_err(err, errlen, "%s '%s' (%s): %sABI %u.%u, this lt supports %d.0–%d.%d; "
                     "it needs a newer lt: upgrade lt, or rebuild the plugin against these "
                     "headers (%d.%d)", kind, t->label, t->path, where, d->abi_major,
                     d->abi_minor, LT_ABI_MAJOR, LT_ABI_MAJOR, LT_ABI_MINOR, LT_ABI_MAJOR,
                     LT_ABI_MINOR);
        return LT_ERR_ABI;
    }
    return LT_OK;
}

/* A plugin of an older minor is smaller, never bigger, than the newest
 * layout; the minor rule already refused plugins from a later minor. */
static lt_status check_size_kind(const registry_target *t, const char *where,
                                 const lt_plugin_header *d, char *err, size_t errlen) {
    const char *kind = lt_kind_name(t->kind);
    size_t max = lt_desc_size(d->kind);
    if (d->struct_size < sizeof(lt_plugin_header) || (max && d->struct_size > max)) {
        registry_err(err, errlen, "%s '%s' (%s): %sdescriptor size %u is outside %zu–%zu bytes "
                     "for ABI %u.%u, so it is corrupt; fill its header with LT_HEADER(...) and "
                     "rebuild it", kind, t->label, t->path, where, d->struct_size,
                     sizeof(lt_plugin_header), max ? max : sizeof(lt_plugin_header),
                     d->abi_major, d->abi_minor);
        return LT_ERR_ABI;
    }
    if (!max) {
        registry_err(err, errlen, "%s '%s' (%s): %sunknown descriptor kind %u (this lt knows "
                     "1–%d); use an LT_KIND_* constant in LT_HEADER(...) and rebuild it",
                     kind, t->label, t->path, where, d->kind, LT_KIND_COUNT);
        return LT_ERR_ABI;
    }
    if (!d->name || !d->name[0]) {
        registry_err(err, errlen, "%s '%s' (%s): %sthe %s descriptor has no name; give it one "
                     "in LT_HEADER(...)", kind, t->label, t->path, where, lt_kind_name(d->kind));
        return LT_ERR_ABI;
    }
    return LT_OK;
}

static lt_status check_one(const registry_target *t, const char *where,
                           const lt_plugin_header *d, char *err, size_t errlen) {
    if (d->magic != LT_PLUGIN_MAGIC) {
        registry_err(err, errlen, "%s '%s' (%s): %sbad magic 0x%08x (expected 0x%08x), so it is "
                     "not an lt descriptor; fill its header with LT_HEADER(...) and export "
                     "&desc.hdr", lt_kind_name(t->kind), t->label, t->path, where, d->magic,
                     LT_PLUGIN_MAGIC);
        return LT_ERR_ABI;
    }
    LT_CHECK(check_abi(t, where, d, err, errlen));
    return check_size_kind(t, where, d, err, errlen);
}

lt_status registry_check_all(const registry_target *t, const lt_plugin_header *const *list,
                             char *err, size_t errlen) {
    size_t n = 0;
    while (list && list[n] && n <= MAX_DESCRIPTORS) n++;
    if (n > MAX_DESCRIPTORS) {
        registry_err(err, errlen, "%s '%s' (%s): %s returned more than %d descriptors; end the "
                     "list with NULL (LT_PLUGIN_EXPORT does)", lt_kind_name(t->kind), t->label,
                     t->path, LT_PLUGIN_ENTRY_SYMBOL, MAX_DESCRIPTORS);
        return LT_ERR_ABI;
    }
    for (size_t i = 0; i < n; i++) {
        char where[64] = "";
        if (n > 1) snprintf(where, sizeof where, "descriptor %zu of %zu: ", i + 1, n);
        LT_CHECK(check_one(t, where, list[i], err, errlen));
    }
    return LT_OK;
}

/* "strategy 'dpp', environment 'x'" */
static void holdings(const lt_plugin_header *const *list, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; list[i] && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s '%s'", i ? ", " : "",
                                 lt_kind_name(list[i]->kind), list[i]->name);
}

lt_status registry_select(const registry_target *t, const lt_plugin_header *const *list,
                          const lt_plugin_header **out, char *err, size_t errlen) {
    const char *kind = lt_kind_name(t->kind);
    if (!list || !list[0]) {
        registry_err(err, errlen, "%s '%s' (%s): %s returned no descriptors; list them in "
                     "LT_PLUGIN_EXPORT(...)", kind, t->label, t->path, LT_PLUGIN_ENTRY_SYMBOL);
        return LT_ERR_ABI;
    }
    for (size_t i = 0; list[i]; i++) {
        bool named = !t->want[0] || !strcasecmp(list[i]->name, t->want);
        if (list[i]->kind == (uint32_t)t->kind && named) {
            *out = list[i];
            return LT_OK;
        }
    }
    char held[1024];
    holdings(list, held, sizeof held);
    if (t->want[0])
        registry_err(err, errlen, "%s '%s' (%s): file %s holds %s, not %s '%s'; rename the file "
                     "or the descriptor so they match", kind, t->label, t->path,
                     base_name(t->path), held, kind, t->want);
    else
        registry_err(err, errlen, "%s '%s' (%s): the file holds %s and no %s; pass a %s plugin",
                     kind, t->label, t->path, held, kind, kind);
    return LT_ERR_ABI;
}
