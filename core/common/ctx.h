/* The plugin context: one per plugin instance in use. Internal layout. */
#ifndef LT_CTX_INTERNAL_H
#define LT_CTX_INTERNAL_H

#include "lt/core.h"

/* The config a context reads its parameters from (config/config.h); only
 * config/plugin_params.c looks inside. */
typedef struct lt_config lt_config;

/* One hook replaced from a user object (path:symbol): the table before the
 * replacement, so the new function can reach the old one (lt_ctx_original).
 * Newest first; the records belong to the registry that made the copies. */
typedef struct lt_hook_override {
    const char *hook;
    const lt_plugin_header *before;
    const struct lt_hook_override *next;
} lt_hook_override;

typedef struct lt_keyed_state {
    const void *key;
    void *state;
} lt_keyed_state;

struct lt_ctx {
    uint32_t kind;                 /* lt_kind, 0 for core-internal contexts */
    char name[64];                 /* plugin name ("ddp") */
    const lt_plugin_header *desc;  /* resolved table */
    void *state;                   /* the root plugin's of the base chain */
    lt_keyed_state keyed[LT_CTX_MAX_KEYED_STATES]; /* derived plugins', overrides' */
    const lt_hook_override *overrides; /* path:symbol hooks laid over desc */
    const lt_config *config;       /* NULL: parameters take their defaults */
    int rank;                      /* for log prefixes; -1 unknown */
    void *owner;                   /* core object this ctx belongs to (run, trainer) */
    bool section_only;             /* parameters from [<kind>.<name>] alone: a plugin a
                                      section names while another of its kind runs */
};

/* Fills a context for a plugin instance; config may be NULL. */
void lt_ctx_init(lt_ctx *ctx, uint32_t kind, const char *name, const lt_plugin_header *desc,
                 const lt_config *config);
/* The process-wide log level (LT_LOG_*), default INFO; rank shown in prefixes. */
void lt_log_set_level(int level);
int lt_log_level(void);
void lt_log_set_rank(int rank);
/* Clears this thread's error message. */
void lt_clear_error(void);

#endif
