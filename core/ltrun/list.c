/* --list-plugins and --help-plugin. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "args.h"
#include "registry/registry.h"

/* NULL after printing why, with ltrun's exit status in *rc: out of memory
 * (1), or a --plugin-dir or LT_PLUGIN_PATH entry that is not a usable
 * directory (2). */
static lt_registry *open_registry(const ltrun_args *a, int *rc) {
    lt_registry *r = lt_registry_new();
    *rc = 1;
    if (!r) {
        fprintf(stderr, "ltrun: error: out of memory\n");
        return NULL;
    }
    for (int i = 0; i < a->nplugin_dirs; i++) {
        lt_status st = lt_registry_add_dir(r, a->plugin_dirs[i]);
        if (st == LT_OK) continue;
        const char *why = st == LT_ERR_NOMEM ? "out of memory"
                                             : lt_registry_dir_problem(a->plugin_dirs[i]);
        fprintf(stderr, "ltrun: error: --plugin-dir '%s': %s; name an existing directory of "
                "liblt-<kind>-<name>.so plugins\n", a->plugin_dirs[i], why ? why : "not usable");
        lt_registry_free(r);
        if (st != LT_ERR_NOMEM) *rc = EXIT_REFUSED;
        return NULL;
    }
    char err[1400];
    lt_status st = lt_registry_add_default_dirs(r, err, sizeof err);
    if (st != LT_OK) {
        fprintf(stderr, "ltrun: error: %s\n", err);
        lt_registry_free(r);
        if (st != LT_ERR_NOMEM) *rc = EXIT_REFUSED;
        return NULL;
    }
    return r;
}

typedef struct list_state {
    int ok, refused;
    const char *want; /* --help-plugin: name or kind/name */
    int found;
} list_state;

static void print_row(void *user, const lt_plugin_listing *l) {
    list_state *s = user;
    if (!l->desc) {
        s->refused++;
        return;
    }
    s->ok++;
    const lt_plugin_header *d = l->desc;
    printf("%-12s %-20s %-8s %-14s %s\n", lt_kind_name(d->kind), d->name, d->version ? d->version : "-",
           d->base ? d->base : "-", l->path);
}

static void print_refused(void *user, const lt_plugin_listing *l) {
    (void)user;
    if (!l->desc) printf("  refused %s: %s\n", l->path, l->refused ? l->refused : "unknown reason");
}

int ltrun_list_plugins(const ltrun_args *a) {
    int rc;
    lt_registry *r = open_registry(a, &rc);
    if (!r) return rc;
    list_state s = {0};
    printf("%-12s %-20s %-8s %-14s %s\n", "KIND", "NAME", "VERSION", "BASE", "PATH");
    lt_registry_scan(r, print_row, &s);
    if (s.refused) {
        printf("\n%d file(s) refused:\n", s.refused);
        lt_registry_scan(r, print_refused, &s);
    }
    if (!s.ok && !s.refused)
        printf("(no plugins found; pass --plugin-dir DIR or set LT_PLUGIN_PATH)\n");
    lt_registry_free(r);
    return 0;
}

static void print_help(void *user, const lt_plugin_listing *l) {
    list_state *s = user;
    if (!l->desc) return;
    const lt_plugin_header *d = l->desc;
    char full[160];
    snprintf(full, sizeof full, "%s/%s", lt_kind_name(d->kind), d->name);
    if (strcasecmp(s->want, d->name) && strcasecmp(s->want, full)) return;
    s->found++;
    printf("%s '%s' %s (%s)\n", lt_kind_name(d->kind), d->name, d->version ? d->version : "", l->path);
    if (d->description) printf("  %s\n", d->description);
    if (d->base) printf("  inherits from %s '%s'\n", lt_kind_name(d->kind), d->base);
    const char *section = d->kind == LT_KIND_MODULE ? "model" : lt_kind_name(d->kind);
    if (!d->params || !d->params[0].name) {
        printf("  no parameters\n");
        return;
    }
    printf("  parameters (in [%s.%s] or [%s]):\n", lt_kind_name(d->kind), d->name, section);
    static const char *types[] = {"?", "int", "float", "bool", "string"};
    for (const lt_param_spec *p = d->params; p->name; p++)
        printf("    %-22s %-6s default %-10s %s\n", p->name, p->type <= 4 ? types[p->type] : "?",
               p->def ? p->def : "(none)", p->help ? p->help : "");
}

int ltrun_help_plugin(const ltrun_args *a) {
    int rc;
    lt_registry *r = open_registry(a, &rc);
    if (!r) return rc;
    list_state s = {.want = a->help_plugin};
    lt_registry_scan(r, print_help, &s);
    lt_registry_free(r);
    if (!s.found) {
        fprintf(stderr, "ltrun: error: --help-plugin: no plugin named '%s' loads; ltrun --list-plugins shows what is installed and why a file was refused\n",
                a->help_plugin);
        return EXIT_REFUSED;
    }
    return 0;
}
