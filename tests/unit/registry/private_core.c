/* A program that links the core's objects without exporting them (no
 * lt_link_internal): the plugins it loads would reach liblt.so's copy of the
 * core, not this one. The loader must refuse with a message instead of
 * running with two copies. ctest checks the status and the message. */
#include <stdio.h>
#include "registry/registry.h"

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    lt_registry *r = lt_registry_new();
    if (!r || lt_registry_add_dir(r, argv[1]) != LT_OK) return 2;
    const lt_plugin_header *d;
    char err[1024] = "";
    lt_status st = lt_registry_load(r, LT_KIND_STRATEGY, "ddp", &d, err, sizeof err);
    printf("status %d: %s\n", (int)st, err);
    lt_registry_free(r);
    return st == LT_ERR_ABI ? 0 : 1;
}
