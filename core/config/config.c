/* Configuration store: declarations, values with their origin, INI/env/flag
 * loading, validation with "did you mean" suggestions, and printing.
 *
 * Everything lives in two heap arrays of pointers (entries and sections) and
 * is found by linear search: a config holds a few hundred keys at most and is
 * read at startup, so clarity beats a hash table here. Pointer arrays keep
 * each entry's address stable while the arrays grow. */
#define _GNU_SOURCE /* memmem, environ */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <poll.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lt/core.h"
#include "config.h"
#include "common/text.h"

extern char **environ;

/* What a core key accepts beyond its type (see core_keys). */
typedef struct value_rule {
    const char *choices; /* "min|max": one of these words, any case; NULL = any */
    unsigned flags;      /* RULE_* */
    double lo, hi;       /* bounds, for RULE_LO / RULE_HI */
    const char *hint;    /* appended to the message: what the special values mean */
} value_rule;

enum {
    RULE_LO = 1,        /* >= lo (> lo with RULE_LO_OPEN) */
    RULE_HI = 2,        /* <= hi (< hi with RULE_HI_OPEN) */
    RULE_LO_OPEN = 4,
    RULE_HI_OPEN = 8,
    RULE_NONEMPTY = 16, /* a string that must not be empty */
    RULE_INT_TEXT = 32, /* a string key holding an integer, or empty (trainer.seed) */
    RULE_NUM_TEXT = 64, /* a string key holding a number (trainer.limit_*_batches) */
    RULE_WHOLE_ABOVE_1 = 128, /* above 1 a whole number: a count, not a fraction */
};

/* One section.key: declared, set, or both. */
typedef struct entry {
    char *section;       /* lowercased */
    char *key;           /* lowercased */
    bool declared;
    lt_param_type type;  /* meaningful when declared */
    char *def;           /* declared default; NULL = none */
    char *help;
    const value_rule *rule; /* core keys with fixed choices or a range; else NULL */
    char *value;         /* NULL = not set */
    lt_config_source src;
    char *origin;
    uint64_t seq;        /* when the value was first set: validate reports in this order */
} entry;

typedef struct section {
    char *name;          /* lowercased */
    bool declared;
    bool open;
    bool open_until_keys; /* open until a key is declared in it ([model]: see core_sections) */
} section;

struct lt_config {
    entry **entries;
    size_t n_entries, cap_entries;
    section **sections;
    size_t n_sections, cap_sections;
    uint64_t next_seq;
};

/* ---- small helpers ------------------------------------------------------ */

static void seterr(char *err, size_t errlen, const char *fmt, ...) LT_PRINTF(3, 4);
static void seterr(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static char *xstrdup(const char *s) { return s ? strdup(s) : NULL; }

static char *xprintf(const char *fmt, ...) LT_PRINTF(1, 2);
static char *xprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* A growable string for messages that list names; on allocation failure it
 * keeps what it has, because a shorter error message beats none. */
typedef struct strbuf {
    char *p;
    size_t len, cap;
} strbuf;

static void sb_add(strbuf *b, const char *s) {
    size_t n = strlen(s);
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n + 1);
    b->len += n;
}

static const char *sb_str(const strbuf *b) { return b->p ? b->p : ""; }

/* Copies s[0..len) without surrounding whitespace; lowercased when asked. */
static char *trim_dup(const char *s, size_t len, bool lower) {
    while (len && isspace((unsigned char)*s)) s++, len--;
    while (len && isspace((unsigned char)s[len - 1])) len--;
    char *out = strndup(s, len);
    if (out && lower)
        for (char *p = out; *p; p++) *p = (char)tolower((unsigned char)*p);
    return out;
}

/* Values lose surrounding whitespace and one pair of double quotes, so that
 * `dir = "/data/x"` and `dir = /data/x` mean the same. */
static char *value_dup(const char *v) {
    char *t = trim_dup(v, strlen(v), false);
    size_t n = t ? strlen(t) : 0;
    if (n >= 2 && t[0] == '"' && t[n - 1] == '"') {
        memmove(t, t + 1, n - 2);
        t[n - 2] = 0;
    }
    return t;
}

/* ---- lookup and creation ------------------------------------------------ */

static section *find_section(const lt_config *c, const char *name) {
    for (size_t i = 0; i < c->n_sections; i++)
        if (strcasecmp(c->sections[i]->name, name) == 0) return c->sections[i];
    return NULL;
}

static entry *find_entry(const lt_config *c, const char *sect, const char *key) {
    if (!c || !sect || !key) return NULL;
    for (size_t i = 0; i < c->n_entries; i++) {
        entry *e = c->entries[i];
        if (strcasecmp(e->section, sect) == 0 && strcasecmp(e->key, key) == 0) return e;
    }
    return NULL;
}

/* `name` must already be normalized (trimmed, lowercased). */
static section *get_section(lt_config *c, const char *name) {
    section *s = find_section(c, name);
    if (s) return s;
    if (!lt_grow((void **)&c->sections, &c->cap_sections, c->n_sections + 1,
                       sizeof *c->sections))
        return NULL;
    s = calloc(1, sizeof *s);
    if (!s || !(s->name = strdup(name))) {
        free(s);
        return NULL;
    }
    c->sections[c->n_sections++] = s;
    return s;
}

static entry *get_entry(lt_config *c, const char *sect, const char *key) {
    entry *e = find_entry(c, sect, key);
    if (e) return e;
    if (!lt_grow((void **)&c->entries, &c->cap_entries, c->n_entries + 1,
                       sizeof *c->entries))
        return NULL;
    e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->section = strdup(sect);
    e->key = strdup(key);
    if (!e->section || !e->key) {
        free(e->section);
        free(e->key);
        free(e);
        return NULL;
    }
    c->entries[c->n_entries++] = e;
    return e;
}

/* Normalized copies of a section and key name; false when either is empty
 * or memory ran out (*nomem says which). */
static bool norm_names(const char *sect, const char *key, char **s_out, char **k_out,
                       bool *nomem) {
    *s_out = trim_dup(sect, strlen(sect), true);
    *k_out = trim_dup(key, strlen(key), true);
    *nomem = !*s_out || !*k_out;
    if (*nomem || !**s_out || !**k_out) {
        free(*s_out);
        free(*k_out);
        return false;
    }
    return true;
}

/* ---- creation, declaration ---------------------------------------------- */

void lt_config_free(lt_config *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n_entries; i++) {
        entry *e = c->entries[i];
        free(e->section);
        free(e->key);
        free(e->def);
        free(e->help);
        free(e->value);
        free(e->origin);
        free(e);
    }
    for (size_t i = 0; i < c->n_sections; i++) {
        free(c->sections[i]->name);
        free(c->sections[i]);
    }
    free(c->entries);
    free(c->sections);
    free(c);
}

lt_status lt_config_declare_section(lt_config *c, const char *sect, bool open) {
    if (!c || !sect) return LT_ERR_INVALID;
    char *name = trim_dup(sect, strlen(sect), true);
    if (!name) return LT_ERR_NOMEM;
    section *s = *name ? get_section(c, name) : NULL;
    lt_status st = !*name ? LT_ERR_INVALID : s ? LT_OK : LT_ERR_NOMEM;
    free(name);
    if (s) {
        s->declared = true;
        s->open = open;
    }
    return st;
}

static bool valid_type(lt_param_type t) { return t >= LT_PARAM_INT && t <= LT_PARAM_STRING; }

lt_status lt_config_declare(lt_config *c, const char *sect, const char *key, lt_param_type type,
                            const char *def, const char *help) {
    if (!c || !sect || !key || !valid_type(type)) return LT_ERR_INVALID;
    char *s, *k;
    bool nomem;
    if (!norm_names(sect, key, &s, &k, &nomem)) return nomem ? LT_ERR_NOMEM : LT_ERR_INVALID;
    section *sec = get_section(c, s);
    if (sec && !sec->declared) {
        sec->declared = true;
        sec->open = false;
    }
    if (sec && sec->open_until_keys) sec->open = sec->open_until_keys = false;
    entry *e = sec ? get_entry(c, s, k) : NULL;
    free(s);
    free(k);
    if (!e) return LT_ERR_NOMEM;
    if (e->declared && e->type != type) return LT_ERR_INVALID;
    char *d = xstrdup(def), *h = xstrdup(help);
    if ((def && !d) || (help && !h)) {
        free(d);
        free(h);
        return LT_ERR_NOMEM;
    }
    free(e->def);
    free(e->help);
    e->def = d;
    e->help = h;
    e->type = type;
    e->declared = true;
    return LT_OK;
}

typedef struct core_key {
    const char *section, *key;
    lt_param_type type;
    const char *def, *help;
    value_rule rule; /* checked by lt_config_validate, so --check sees it */
} core_key;

#define I LT_PARAM_INT
#define F LT_PARAM_FLOAT
#define B LT_PARAM_BOOL
#define S LT_PARAM_STRING
/* Rules (the last member of a row): ANY, or braces around ONE_OF("a|b") or a
 * range, optionally followed by H("what special values mean"). */
#define ANY {0}
#define ONE_OF(list) .choices = (list)
#define AT_LEAST(x) .flags = RULE_LO, .lo = (x)
#define ABOVE(x) .flags = RULE_LO | RULE_LO_OPEN, .lo = (x)
#define IN(a, b) .flags = RULE_LO | RULE_HI, .lo = (a), .hi = (b)
#define IN_OPEN(a, b) .flags = RULE_LO | RULE_HI | RULE_HI_OPEN, .lo = (a), .hi = (b) /* [a, b) */
/* Lightning's limit_*_batches: a fraction in [0, 1] or a whole count (a string key) */
#define FRACTION_OR_COUNT .flags = RULE_NUM_TEXT | RULE_LO | RULE_WHOLE_ABOVE_1, .lo = 0
#define INT_OR_EMPTY_AT_LEAST(x) .flags = RULE_INT_TEXT | RULE_LO, .lo = (x) /* a string key */
#define NOT_EMPTY .flags = RULE_NONEMPTY
#define H(text) .hint = (text)
#define LIMIT_HINT "use a fraction in [0, 1] or a whole number of batches"
/* What limit_*_batches means; lt_limit_batches (trainer_fit.c) applies it. */
#define LIMIT_HELP(what) \
    "a fraction in [0, 1] (1.0 = all) or a whole number of " what " batches (an integer " \
    "counts, as in Lightning: 1 = one batch); a count above the batches there are takes all"
/* Kept in an int by the code that reads it. */
#define INT_TOP 2147483647.0
/* Seconds the launcher and the process group turn into int milliseconds. */
#define TIMEOUT_TOP 2000000.0
static const core_key core_keys[] = {
    {"trainer", "accelerator", S, "auto", "cpu, gpu or auto (gpu when one is available)", ANY},
    {"trainer", "devices", S, "auto", "count, -1 for all, a list like [0, 2], or auto", ANY},
    {"trainer", "auto_select_gpus", B, "false",
     "with devices = a count k: the first k devices no other process uses (Lightning's auto_select_gpus, for "
     "GPUs in exclusive mode); the launcher passes the chosen list to its workers", ANY},
    {"trainer", "strategy", S, "auto", "single_device, dp, ddp, ddp_spawn, ddp2, bagua or a plugin", ANY},
    {"trainer", "num_nodes", I, "1", "number of machines", {IN(1, INT_TOP)}},
    {"trainer", "precision", S, "32-true", "32-true, 16-mixed, bf16-mixed, 64-true ...", ANY},
    {"trainer", "max_epochs", I, "1000", "stop after this many epochs; -1 = no limit",
     {AT_LEAST(-1), H("-1 = no limit")}},
    {"trainer", "max_steps", I, "-1", "stop after this many optimizer steps; -1 = no limit",
     {AT_LEAST(-1), H("-1 = no limit")}},
    {"trainer", "min_epochs", I, "0", "train at least this many epochs", {AT_LEAST(0)}},
    {"trainer", "limit_train_batches", S, "1.0", LIMIT_HELP("training"),
     {FRACTION_OR_COUNT, H(LIMIT_HINT)}},
    {"trainer", "limit_val_batches", S, "1.0", LIMIT_HELP("val"),
     {FRACTION_OR_COUNT, H(LIMIT_HINT)}},
    {"trainer", "limit_test_batches", S, "1.0", LIMIT_HELP("test"),
     {FRACTION_OR_COUNT, H(LIMIT_HINT)}},
    {"trainer", "check_val_every_n_epoch", I, "1", "validate every n epochs; 0 = never",
     {AT_LEAST(0), H("0 = never")}},
    {"trainer", "log_every_n_steps", I, "50", "log metrics every n steps", {AT_LEAST(1)}},
    {"trainer", "flush_logs_every_n_steps", I, "100",
     "write metrics.csv every n optimizer steps (and at the end, also of a failed run)", {AT_LEAST(1)}},
    {"trainer", "accumulate_grad_batches", I, "1", "batches per optimizer step", {IN(1, INT_TOP)}},
    {"trainer", "gradient_clip_val", F, "0", "clip gradients at this value; 0 = off",
     {AT_LEAST(0), H("0 = off")}},
    {"trainer", "gradient_clip_algorithm", S, "norm",
     "norm: scale to a global L2 norm of gradient_clip_val; value: clamp each element to it",
     {ONE_OF("norm|value")}},
    {"trainer", "seed", S, "", "global random seed; empty = none",
     {INT_OR_EMPTY_AT_LEAST(0), H("empty = a random seed")}},
    {"trainer", "deterministic", B, "false",
     "accepted for Lightning configs and ignored: lt is always deterministic (same seed, "
     "devices and data give the same result)", ANY},
    {"trainer", "default_root_dir", S, ".", "where logs and checkpoints go",
     {NOT_EMPTY, H("use . for the current directory")}},
    {"trainer", "enable_progress_bar", B, "true", "show a progress bar", ANY},
    {"trainer", "enable_checkpointing", B, "true", "save checkpoints", ANY},
    {"trainer", "num_sanity_val_steps", I, "2", "validation batches run before training; 0 = none",
     {AT_LEAST(0)}},
    {"trainer", "log_level", S, "info", "error, warn, info or debug",
     {ONE_OF("error|warn|warning|info|debug")}},
    {"trainer", "plugin_dir", S, "", "extra directory searched for plugins", ANY},
    {"model", "name", S, "", "the module plugin to train", ANY},
    {"data", "dir", S, "/usr/share/datasets/fashion-mnist", "dataset directory", ANY},
    {"data", "cache_dir", S, "auto",
     "where the built-in IDX reader keeps decoded images, shared by the host's ranks (auto: $XDG_CACHE_HOME/lt or ~/.cache/lt; none: off)", ANY},
    {"data", "batch_size", I, "64", "samples per batch per device", {AT_LEAST(1)}},
    {"data", "val_batch_size", I, "0", "validation batch size; 0 = batch_size",
     {AT_LEAST(0), H("0 = batch_size")}},
    {"data", "shuffle", B, "true", "shuffle training data each epoch", ANY},
    {"data", "val_split", I, "5000", "training samples held out for validation", {AT_LEAST(0)}},
    {"data", "num_classes", I, "10",
     "classes the built-in IDX reader's labels index (the MNIST family: 10); a label outside "
     "[0, num_classes) is refused when its file is read",
     {IN(1, 256), H("labels are bytes: 1 to 256")}},
    {"data", "normalize_mean", F, "0.2860", "mean subtracted from pixels", ANY},
    {"data", "normalize_std", F, "0.3530", "standard deviation pixels are divided by", {ABOVE(0)}},
    {"data", "prefetch", I, "2", "batches prepared ahead (2 to 64)", {IN(2, 64)}},
    {"data", "drop_last", B, "false", "drop the last incomplete training batch", ANY},
    {"optimizer", "name", S, "sgd", "sgd or adamw", {ONE_OF("sgd|adamw")}},
    {"optimizer", "lr", F, "0.01", "learning rate", {AT_LEAST(0)}},
    {"optimizer", "momentum", F, "0", "sgd momentum", {AT_LEAST(0)}},
    {"optimizer", "dampening", F, "0", "sgd dampening", ANY},
    {"optimizer", "nesterov", B, "false", "sgd nesterov momentum", ANY},
    {"optimizer", "fused", B, "true",
     "mixed precision: sgd in one pass with the gradient and compute-copy casts (torch's fused=)", ANY},
    {"optimizer", "weight_decay", F, "0", "L2 penalty (decoupled for adamw)", {AT_LEAST(0)}},
    {"optimizer", "beta1", F, "0.9", "adam beta1", {IN_OPEN(0, 1)}},
    {"optimizer", "beta2", F, "0.999", "adam beta2", {IN_OPEN(0, 1)}},
    {"optimizer", "eps", F, "1e-8", "adam epsilon", {AT_LEAST(0)}},
    {"optimizer", "lr_scaling", S, "none", "none, linear or sqrt: lr scaling with effective batch",
     {ONE_OF("none|linear|sqrt")}},
    {"optimizer", "reference_batch_size", I, "0", "batch size lr was tuned for; 0 = batch_size",
     {AT_LEAST(0), H("0 = batch_size")}},
    {"scheduler", "name", S, "none", "none, step or cosine", {ONE_OF("none|step|cosine")}},
    {"scheduler", "step_size", I, "1", "intervals between lr decays", {AT_LEAST(1)}},
    {"scheduler", "gamma", F, "0.1", "lr decay factor (step)", {ABOVE(0)}},
    {"scheduler", "warmup_steps", I, "0", "linear warmup steps", {AT_LEAST(0)}},
    {"scheduler", "min_lr", F, "0", "lower bound for the lr", {AT_LEAST(0)}},
    {"scheduler", "interval", S, "epoch", "epoch or step", {ONE_OF("epoch|step")}},
    {"checkpoint", "dirpath", S, "", "checkpoint directory; empty = under default_root_dir", ANY},
    {"checkpoint", "monitor", S, "", "metric that ranks checkpoints; empty = latest", ANY},
    {"checkpoint", "mode", S, "min", "min or max of the monitored metric", {ONE_OF("min|max")}},
    {"checkpoint", "save_last", B, "true", "also write last.safetensors", ANY},
    {"checkpoint", "save_top_k", I, "1", "1: keep the best checkpoint (best.safetensors); 0: none",
     {IN(0, 1), H("lt keeps the single best checkpoint; -1 and k > 1 (several best files) are not supported")}},
    {"checkpoint", "strict", B, "true",
     "refuse a --ckpt-path whose tensors differ from the model's; false: ignore extra tensors, "
     "missing ones keep their initial values", ANY},
    {"logger", "csv", B, "true", "write metrics.csv", ANY},
    {"logger", "name", S, "lt_logs", "log directory name under default_root_dir", ANY},
    {"logger", "version", S, "", "run version; empty = next free version_N", ANY},
    {"strategy", "process_group_backend", S, "auto", "auto (cpu: shm when every rank is on one host, else gloo; gpu: nccl), gloo, shm or nccl", ANY},
    {"strategy", "timeout_s", I, "1800", "collective timeout in seconds", {IN(1, TIMEOUT_TOP)}},
    {"environment", "name", S, "auto", "cluster environment plugin; auto = detect", ANY},
    {"launcher", "master_addr", S, "127.0.0.1", "rendezvous host", ANY},
    {"launcher", "master_port", I, "0", "rendezvous port; 0 = pick a free one",
     {IN(0, 65535), H("0 = pick a free one")}},
    {"launcher", "node_rank", I, "0", "this machine's index among num_nodes", {IN(0, INT_TOP)}},
    {"launcher", "max_restarts", I, "0", "restarts from the last checkpoint", {IN(0, INT_TOP)}},
    {"launcher", "rdzv_timeout_s", I, "300", "seconds to wait for every rank to join",
     {IN(1, TIMEOUT_TOP)}},
    {"launcher", "stall_timeout_s", I, "120",
     "a rank waiting this long in a collective names the peer that is not in it as stuck and ends "
     "the job (0: off; must exceed the longest step)", {IN(0, TIMEOUT_TOP)}},
    {"launcher", "nnodes", S, "",
     "elastic nodes MIN:MAX (torchrun's --nnodes 1:4): start once MIN joined, re-form the job when a node "
     "dies or joins; empty = a fixed trainer.num_nodes", ANY},
    {"launcher", "rdzv_endpoint", S, "", "elastic: HOST[:PORT] of the rendezvous (port 29400 if none); the node "
     "whose address it is hosts it; empty = master_addr:master_port", ANY},
    {"launcher", "rdzv_id", S, "none", "elastic: the job's id; nodes with another id are refused", ANY},
    {"launcher", "rdzv_backend", S, "c10d", "elastic: how nodes meet: c10d (a store hosted by one of the nodes)",
     {ONE_OF("c10d")}},
    {"launcher", "join_timeout_s", I, "600", "elastic: seconds a node waits for the job to take it in",
     {IN(1, TIMEOUT_TOP)}},
    {"launcher", "last_call_s", I, "30", "elastic: once MIN nodes are in, seconds to wait for more (up to MAX)",
     {IN(0, TIMEOUT_TOP)}},
    {"launcher", "keepalive_timeout_s", I, "30",
     "elastic: a node whose launcher sent no heartbeat for this long has left the job (above the 5 s a "
     "launcher may spend stopping its workers)", {IN(10, TIMEOUT_TOP)}},
    {"launcher", "bind_cores", B, "true", "pin each local worker to its share of the cores (like mpirun --bind-to core)", ANY},
};
#undef I
#undef F
#undef B
#undef S
#undef ANY
#undef ONE_OF
#undef AT_LEAST
#undef ABOVE
#undef IN
#undef IN_OPEN
#undef FRACTION_OR_COUNT
#undef INT_OR_EMPTY_AT_LEAST
#undef NOT_EMPTY
#undef H
#undef LIMIT_HINT
#undef LIMIT_HELP
#undef INT_TOP
#undef TIMEOUT_TOP

/* Sections that exist even without keys of their own. [model] also takes
 * the module plugin's parameters, which are not known until the module is
 * loaded: it accepts any key until the first one is declared in it (the
 * trainer declares the module's parameter table there), then only those and
 * name, so `hiden = 32` is refused as a misspelt `hidden`. A module without
 * a parameter table leaves it open. */
static const struct {
    const char *name;
    bool open;
} core_sections[] = {
    {"trainer", false},   {"model", true},      {"data", false},        {"optimizer", false},
    {"scheduler", false}, {"checkpoint", false}, {"logger", false},      {"strategy", false},
    {"precision", false}, {"environment", false}, {"accelerator", false}, {"backend", false},
    {"launcher", false},
};

lt_config *lt_config_new(void) {
    lt_config *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->next_seq = 1;
    for (size_t i = 0; i < sizeof core_sections / sizeof core_sections[0]; i++)
        if (lt_config_declare_section(c, core_sections[i].name, core_sections[i].open) != LT_OK)
            goto fail;
    for (size_t i = 0; i < sizeof core_keys / sizeof core_keys[0]; i++) {
        const core_key *k = &core_keys[i];
        if (lt_config_declare(c, k->section, k->key, k->type, k->def, k->help) != LT_OK)
            goto fail;
        if (k->rule.choices || k->rule.flags) find_entry(c, k->section, k->key)->rule = &k->rule;
    }
    find_section(c, "model")->open_until_keys = true; /* after model.name, a core key */
    return c;
fail:
    lt_config_free(c);
    return NULL;
}

/* ---- setting values ----------------------------------------------------- */

static const char *source_name(lt_config_source src) {
    static const char *const names[] = {"default", "file", "env", "flag"};
    return names[src];
}

lt_status lt_config_set(lt_config *c, const char *sect, const char *key, const char *value,
                        lt_config_source src, const char *origin, char *err, size_t errlen) {
    if (!c || !sect || !key || src < LT_SRC_DEFAULT || src > LT_SRC_FLAG) {
        seterr(err, errlen, "lt_config_set: missing config, section or key, or bad source");
        return LT_ERR_INVALID;
    }
    const char *where = origin ? origin : source_name(src);
    char *s, *k;
    bool nomem;
    if (!norm_names(sect, key, &s, &k, &nomem)) {
        if (nomem) return LT_ERR_NOMEM;
        seterr(err, errlen, "config value '%s.%s' (%s) needs both a section and a key, e.g. "
               "trainer.max_epochs", sect, key, where);
        return LT_ERR_INVALID;
    }
    entry *e = get_section(c, s) ? get_entry(c, s, k) : NULL;
    free(s);
    free(k);
    if (!e) return LT_ERR_NOMEM;
    if (e->value && e->src > src) return LT_OK; /* a higher-precedence source already spoke */
    char *v = value_dup(value ? value : "");
    char *o = strdup(where);
    if (!v || !o) {
        free(v);
        free(o);
        return LT_ERR_NOMEM;
    }
    if (!e->value) e->seq = c->next_seq++;
    free(e->value);
    free(e->origin);
    e->value = v;
    e->origin = o;
    e->src = src;
    return LT_OK;
}

lt_status lt_config_set_arg(lt_config *c, const char *assignment, const char *origin, char *err,
                            size_t errlen) {
    if (!c || !assignment) return LT_ERR_INVALID;
    const char *eq = strchr(assignment, '=');
    const char *dot = NULL;
    for (const char *p = assignment; eq && p < eq; p++)
        if (*p == '.') dot = p;
    char *sect = dot ? trim_dup(assignment, (size_t)(dot - assignment), false) : NULL;
    char *key = dot ? trim_dup(dot + 1, (size_t)(eq - dot - 1), false) : NULL;
    if (dot && (!sect || !key)) {
        free(sect);
        free(key);
        return LT_ERR_NOMEM;
    }
    if (!dot || !*sect || !*key) {
        seterr(err, errlen, "'%s'%s%s: expected section.key=value, e.g. trainer.max_epochs=3",
               assignment, origin ? " from " : "", origin ? origin : "");
        free(sect);
        free(key);
        return LT_ERR_INVALID;
    }
    char *o = origin ? NULL : xprintf("--set %s", assignment);
    lt_status st = (origin || o) ? lt_config_set(c, sect, key, eq + 1, LT_SRC_FLAG,
                                                 origin ? origin : o, err, errlen)
                                 : LT_ERR_NOMEM;
    free(o);
    free(sect);
    free(key);
    return st;
}

/* ---- environment -------------------------------------------------------- */

/* "STRATEGY__DDP__BUCKET_CAP_MB" -> section "strategy.ddp" (in place, parts
 * joined by dots) and *key "BUCKET_CAP_MB"; false when a part is empty. */
static bool env_split(char *name, char **key) {
    char *last = NULL;
    for (char *p = strstr(name, "__"); p; p = strstr(p + 2, "__")) last = p;
    *last = 0;
    *key = last + 2;
    for (char *p; (p = strstr(name, "__"));) {
        *p = '.';
        memmove(p + 1, p + 2, strlen(p + 2) + 1);
    }
    size_t n = strlen(name);
    return **key && n && name[0] != '.' && name[n - 1] != '.' && !strstr(name, "..");
}

/* The setting declared so far whose section and key, joined by single
 * underscores, spell name[0:nlen] (any case): LT_TRAINER_MAX_EPOCHS is
 * trainer.max_epochs with one underscore where two belong. NULL if none.
 * A run reads the environment before plugins declare theirs, so there it
 * catches the core's settings only. */
static const entry *env_one_underscore(const lt_config *c, const char *name, int nlen) {
    for (size_t i = 0; i < c->n_entries; i++) {
        const entry *e = c->entries[i];
        char *joined = e->declared ? xprintf("%s.%s", e->section, e->key) : NULL;
        bool same = joined && strlen(joined) == (size_t)nlen;
        for (int k = 0; same && k < nlen; k++)
            same = tolower((unsigned char)name[k]) == (joined[k] == '.' ? '_' : joined[k]);
        free(joined);
        if (same) return e;
    }
    return NULL;
}

/* LT_STRATEGY__DDP__BUCKET_CAP_MB=5 sets strategy.ddp.bucket_cap_mb. Names
 * without "__" (LT_PLUGIN_PATH, LT_RDZV_TOKEN ...) are not config, except
 * that one spelling a declared setting with single underscores is refused:
 * it would be ignored, and the run would go on without what it asked for. */
static lt_status env_one(lt_config *c, const char *var, char *err, size_t errlen) {
    const char *eq = strchr(var, '=');
    if (strncmp(var, "LT_", 3) != 0 || !eq) return LT_OK;
    const char *name = var + 3;
    int nlen = (int)(eq - name);
    if (!memmem(name, (size_t)nlen, "__", 2)) {
        const entry *e = env_one_underscore(c, name, nlen);
        if (!e) return LT_OK;
        /* the right name: every dot of "section.key" becomes "__" */
        char fix[256] = "LT_";
        size_t at = 3;
        char *dotted = xprintf("%s.%s", e->section, e->key);
        for (const char *p = dotted; p && *p && at + 3 < sizeof fix; p++) {
            if (*p == '.') fix[at++] = '_', fix[at++] = '_';
            else fix[at++] = (char)toupper((unsigned char)*p);
        }
        fix[at] = 0;
        free(dotted);
        seterr(err, errlen, "environment variable LT_%.*s is not read: a setting's variable has "
               "two underscores between its section and its key; rename it %s (%s.%s)",
               nlen, name, fix, e->section, e->key);
        return LT_ERR_INVALID;
    }
    char *sect = strndup(name, (size_t)nlen), *key;
    char *origin = xprintf("env LT_%.*s", nlen, name);
    lt_status st = sect && origin ? LT_OK : LT_ERR_NOMEM;
    if (st == LT_OK && !env_split(sect, &key)) {
        seterr(err, errlen, "environment variable LT_%.*s: empty section or key part; config "
               "variables are named LT_<SECTION>__<KEY>, e.g. LT_TRAINER__MAX_EPOCHS",
               nlen, name);
        st = LT_ERR_INVALID;
    }
    if (st == LT_OK) st = lt_config_set(c, sect, key, eq + 1, LT_SRC_ENV, origin, err, errlen);
    free(sect);
    free(origin);
    return st;
}

lt_status lt_config_load_env(lt_config *c, char *const *envp, char *err, size_t errlen) {
    if (!c) return LT_ERR_INVALID;
    if (!envp) envp = environ;
    for (size_t i = 0; envp && envp[i]; i++) LT_CHECK(env_one(c, envp[i], err, errlen));
    return LT_OK;
}

/* ---- INI files ---------------------------------------------------------- */

/* inih delivers no line numbers to the handler, so the reader counts lines
 * itself: by the time inih calls the handler it has read the whole line. */
typedef struct ini_state {
    lt_config *c;
    FILE *f;
    const char *path;
    int lineno;
    bool at_line_start;
    size_t line_len;
    char shown[96];     /* the start of the current line, for syntax errors only */
    bool too_long;
    int read_errno;
    lt_status status;   /* set when the handler refused a value */
    char *err;
    size_t errlen;
    char **seen;        /* "section.key" of every value this file gave, in order */
    int *seen_line;
    size_t nseen, cap;
} ini_state;

/* The line where this file set section.key before, or 0. Keeps the name. */
static int ini_seen(ini_state *st, const char *sect, const char *name) {
    char *k = xprintf("%s.%s", sect, name);
    if (!k) return 0;
    for (size_t i = 0; i < st->nseen; i++)
        if (!strcasecmp(st->seen[i], k)) {
            free(k);
            return st->seen_line[i];
        }
    if (st->nseen == st->cap) {
        size_t cap = st->cap ? 2 * st->cap : 32;
        char **s = realloc(st->seen, cap * sizeof *s);
        if (s) st->seen = s;
        int *l = s ? realloc(st->seen_line, cap * sizeof *l) : NULL;
        if (l) st->seen_line = l;
        if (!s || !l) {
            free(k);
            return 0; /* out of memory: the duplicate check only */
        }
        st->cap = cap;
    }
    st->seen[st->nseen] = k;
    st->seen_line[st->nseen++] = st->lineno;
    return 0;
}

/* Lines longer than this are refused with an error; inih would split them. */
#define LT_INI_MAX_LINE (1 << 24)

/* "[]" or "[ ]": inih takes it for a section named "", which its handler
 * cannot tell from no header at all, and a "[]" with no key under it would
 * pass unseen; so the reader, which sees every line, judges it. inih skips
 * a UTF-8 byte order mark before the first line. */
static bool empty_section_header(const char *line, int lineno) {
    if (lineno == 1 && !strncmp(line, "\xEF\xBB\xBF", 3)) line += 3;
    while (isspace((unsigned char)*line)) line++;
    if (*line++ != '[') return false;
    while (isspace((unsigned char)*line)) line++;
    return *line == ']';
}

static char *ini_read(char *buf, int num, void *stream) {
    ini_state *st = stream;
    if (st->too_long || !fgets(buf, num, st->f)) {
        if (ferror(st->f)) st->read_errno = errno ? errno : EIO;
        return NULL;
    }
    size_t n = strlen(buf);
    if (st->at_line_start) {
        st->lineno++;
        st->line_len = 0;
        snprintf(st->shown, sizeof st->shown, "%s", buf);
        st->shown[strcspn(st->shown, "\r\n")] = 0;
        if (empty_section_header(buf, st->lineno)) {
            seterr(st->err, st->errlen, "%s:%d: empty section name in '%s'; write the section's "
                   "name between the brackets, e.g. [trainer]", st->path, st->lineno,
                   st->shown + strspn(st->shown, " \t"));
            st->status = LT_ERR_INVALID;
            return NULL; /* read as the end of the file: inih stops */
        }
    }
    st->line_len += n;
    st->at_line_start = n > 0 && buf[n - 1] == '\n';
    if (st->line_len > LT_INI_MAX_LINE) st->too_long = true;
    return buf;
}

/* The declared section of a key, for "put it under [trainer]" hints. */
static const char *section_of_key(const lt_config *c, const char *key) {
    for (size_t i = 0; i < c->n_entries; i++)
        if (c->entries[i]->declared && strcasecmp(c->entries[i]->key, key) == 0)
            return c->entries[i]->section;
    return NULL;
}

static int ini_on_value(void *user, const char *sect, const char *name, const char *value) {
    ini_state *st = user;
    if (st->too_long) return 0;
    if (!*sect) {
        const char *home = section_of_key(st->c, name);
        seterr(st->err, st->errlen, "%s:%d: '%s' comes before any [section] header; put it "
               "under [%s]", st->path, st->lineno, name, home ? home : "trainer");
        st->status = LT_ERR_INVALID;
        return 0;
    }
    int first = ini_seen(st, sect, name);
    if (first) {
        /* inih hands over a repeated key (or a repeated [section]'s) as if
         * new: the last would win without a word */
        seterr(st->err, st->errlen, "%s:%d: %s.%s is set twice in the file (first at %s:%d); keep one",
               st->path, st->lineno, sect, name, st->path, first);
        st->status = LT_ERR_INVALID;
        return 0;
    }
    char *origin = xprintf("%s:%d", st->path, st->lineno);
    st->status = origin ? lt_config_set(st->c, sect, name, value, LT_SRC_FILE, origin, st->err,
                                        st->errlen)
                        : LT_ERR_NOMEM;
    free(origin);
    return st->status == LT_OK;
}

/* inih's options are process globals in this build; saved and restored so
 * that a program embedding lt and using inih itself is not surprised. */
typedef struct ini_opts {
    bool use_stack, allow_realloc, multiline, stop_on_first_error, inline_comments, no_value;
    int max_line;
    char *inline_prefixes;
} ini_opts;

static ini_opts ini_opts_swap(ini_opts next) {
    ini_opts prev = {ini_use_stack, ini_allow_realloc, ini_allow_multiline,
                     ini_stop_on_first_error, ini_allow_inline_comments, ini_allow_no_value,
                     ini_max_line, ini_inline_comment_prefixes};
    ini_use_stack = next.use_stack;
    ini_allow_realloc = next.allow_realloc;
    ini_allow_multiline = next.multiline;
    ini_stop_on_first_error = next.stop_on_first_error;
    ini_allow_inline_comments = next.inline_comments;
    ini_allow_no_value = next.no_value;
    ini_max_line = next.max_line;
    ini_inline_comment_prefixes = next.inline_prefixes;
    return prev;
}

static lt_status ini_syntax_error(const ini_state *st, int line, char *err, size_t errlen) {
    if (line != st->lineno) {
        seterr(err, errlen, "%s:%d: syntax error; expected [section] or key = value", st->path,
               line);
        return LT_ERR_INVALID;
    }
    const char *text = st->shown + strspn(st->shown, " \t");
    const char *why = text[0] == '[' && !strchr(text, ']') ? "missing ']' in section header"
                                                           : "expected [section] or key = value";
    seterr(err, errlen, "%s:%d: cannot parse '%s%s': %s", st->path, line, text,
           strlen(st->shown) + 1 >= sizeof st->shown ? "..." : "", why);
    return LT_ERR_INVALID;
}

static lt_status ini_result(const ini_state *st, int rc, char *err, size_t errlen) {
    if (st->read_errno) {
        seterr(err, errlen, "cannot read config file '%s': %s", st->path,
               strerror(st->read_errno));
        return LT_ERR_IO;
    }
    if (st->too_long) {
        seterr(err, errlen, "%s:%d: line is longer than %d bytes", st->path, st->lineno,
               LT_INI_MAX_LINE);
        return LT_ERR_INVALID;
    }
    if (st->status != LT_OK) return st->status; /* the handler wrote the message */
    if (rc == -2) return LT_ERR_NOMEM;
    if (rc > 0) return ini_syntax_error(st, rc, err, errlen);
    return LT_OK;
}

#define CONFIG_FIFO_WAIT_MS 10000

lt_status lt_config_load_ini(lt_config *c, const char *path, char *err, size_t errlen) {
    if (!c || !path) return LT_ERR_INVALID;
    /* O_NONBLOCK, so that a FIFO nothing writes to is refused after a wait
     * instead of blocking for ever; a pipe (--config <(envsubst < x.ini)) has
     * its writer and is read. Any other name that cannot be an INI file is a
     * refused input (exit 2), as a missing one is. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat sb;
    if (fd >= 0 && fstat(fd, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        bool fed = S_ISFIFO(sb.st_mode) && poll(&pfd, 1, CONFIG_FIFO_WAIT_MS) == 1;
        if (!fed) {
            close(fd);
            seterr(err, errlen, "config file '%s' is %s; name an INI file", path,
                   S_ISDIR(sb.st_mode) ? "a directory"
                   : S_ISFIFO(sb.st_mode) ? "a FIFO nothing wrote to within 10 s"
                                          : "not a regular file");
            return LT_ERR_INVALID;
        }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    }
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) close(fd);
        seterr(err, errlen, "cannot open config file '%s': %s", path, strerror(e));
        return e == ENOENT ? LT_ERR_NOT_FOUND : e == EACCES ? LT_ERR_INVALID : LT_ERR_IO;
    }
    ini_state st = {.c = c, .f = f, .path = path, .at_line_start = true, .err = err,
                    .errlen = errlen};
    /* Heap lines that grow (no silent truncation); no multi-line values, so an
     * indented line is an ordinary key; '#' starts a comment too, as in the
     * INI files people copy from Python projects. */
    static char comment_prefixes[] = ";#";
    ini_opts ours = {.use_stack = false, .allow_realloc = true, .multiline = false,
                     .stop_on_first_error = true, .inline_comments = true, .no_value = false,
                     .max_line = 2 * LT_INI_MAX_LINE, .inline_prefixes = comment_prefixes};
    ini_opts saved = ini_opts_swap(ours);
    errno = 0;
    int rc = ini_parse_stream(ini_read, &st, ini_on_value, &st);
    ini_opts_swap(saved);
    fclose(f);
    for (size_t i = 0; i < st.nseen; i++) free(st.seen[i]);
    free(st.seen);
    free(st.seen_line);
    return ini_result(&st, rc, err, errlen);
}

/* ---- typed parsing ------------------------------------------------------ */

static bool parse_int(const char *s, int64_t *out, bool *range) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    *range = errno == ERANGE;
    if (end == s || *end || *range || isspace((unsigned char)*s)) return false;
    *out = v;
    return true;
}

static bool parse_float(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || isspace((unsigned char)*s)) return false;
    *out = v;
    return true;
}

bool lt_parse_bool(const char *s, bool *out) {
    static const char *const yes[] = {"true", "1", "yes", "on"};
    static const char *const no[] = {"false", "0", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) return *out = true, true;
        if (strcasecmp(s, no[i]) == 0) return *out = false, true;
    }
    return false;
}

/* Checks `v` as `type`; on failure writes "sect.key = 'v' (origin) is not ..." */
static lt_status check_type(const char *sect, const char *key, lt_param_type type,
                            const char *v, const char *origin, char *err, size_t errlen) {
    int64_t i;
    double d;
    bool b, range = false;
    const char *what = NULL;
    switch (type) {
    case LT_PARAM_INT:
        if (!parse_int(v, &i, &range))
            what = range ? "is out of range for a 64-bit integer" : "is not an integer";
        break;
    case LT_PARAM_FLOAT:
        if (!parse_float(v, &d)) what = "is not a finite number";
        break;
    case LT_PARAM_BOOL:
        if (!lt_parse_bool(v, &b)) what = "is not a boolean; use true/false, yes/no, on/off or 1/0";
        break;
    case LT_PARAM_STRING:
        break;
    }
    if (!what) return LT_OK;
    seterr(err, errlen, "%s.%s = '%s' (%s) %s", sect, key, v, origin, what);
    return LT_ERR_INVALID;
}

/* ---- rules: choices and ranges of core keys ------------------------------- */

static bool is_choice(const char *choices, const char *v) {
    size_t n = strlen(v);
    for (const char *p = choices;;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncasecmp(p, v, n) == 0) return true;
        if (!bar) return false;
        p = bar + 1;
    }
}

/* "use min or max" from "min|max". */
static void choices_text(const char *choices, char *out, size_t len) {
    size_t used = (size_t)snprintf(out, len, "use ");
    const char *last = strrchr(choices, '|');
    for (const char *p = choices; *p && used < len; p++) {
        int n = *p != '|' ? snprintf(out + used, len - used, "%c", *p)
                          : snprintf(out + used, len - used, "%s", p == last ? " or " : ", ");
        used += (size_t)n;
    }
}

static bool in_range(const value_rule *r, double x) {
    bool lo_open = r->flags & RULE_LO_OPEN, hi_open = r->flags & RULE_HI_OPEN;
    if ((r->flags & RULE_LO) && !(lo_open ? x > r->lo : x >= r->lo)) return false;
    if ((r->flags & RULE_HI) && !(hi_open ? x < r->hi : x <= r->hi)) return false;
    return true;
}

/* "in [0, 65535]", ">= 1", "in [0, 1)". */
static void range_text(const value_rule *r, char *out, size_t len) {
    bool lo_open = r->flags & RULE_LO_OPEN, hi_open = r->flags & RULE_HI_OPEN;
    if ((r->flags & RULE_LO) && (r->flags & RULE_HI))
        snprintf(out, len, "in %c%.15g, %.15g%c", lo_open ? '(' : '[', r->lo, r->hi,
                 hi_open ? ')' : ']');
    else if (r->flags & RULE_LO)
        snprintf(out, len, "%s %.15g", lo_open ? ">" : ">=", r->lo);
    else
        snprintf(out, len, "%s %.15g", hi_open ? "<" : "<=", r->hi);
}

/* Checks `v`, already known to be of the key's type, against the key's rule;
 * on failure writes "sect.key = 'v' (origin) <what is wrong>; <what to use>". */
static lt_status check_rule(const entry *e, const char *v, const char *origin, char *err,
                            size_t errlen) {
    const value_rule *r = e->rule;
    if (!r) return LT_OK;
    char why[256] = "";
    bool quote = true; /* numbers out of range are shown as typed, without quotes */
    bool as_int = e->type == LT_PARAM_INT || (r->flags & RULE_INT_TEXT);
    bool as_num = as_int || e->type == LT_PARAM_FLOAT || (r->flags & RULE_NUM_TEXT);
    if (r->choices && !is_choice(r->choices, v)) {
        snprintf(why, sizeof why, "is not allowed; ");
        choices_text(r->choices, why + strlen(why), sizeof why - strlen(why));
    } else if ((r->flags & RULE_NONEMPTY) && !*v) {
        snprintf(why, sizeof why, "must not be empty");
    } else if (as_num && !(*v == 0 && (r->flags & RULE_INT_TEXT))) {
        int64_t i;
        double x = 0;
        bool range = false;
        if (as_int && parse_int(v, &i, &range)) x = (double)i;
        else if (as_int) snprintf(why, sizeof why, range ? "is out of range for a 64-bit integer"
                                                         : "is not an integer");
        else if (!parse_float(v, &x)) snprintf(why, sizeof why, "is not a finite number");
        if (!*why && !in_range(r, x)) {
            char rt[96];
            range_text(r, rt, sizeof rt);
            snprintf(why, sizeof why, "must be %s", rt);
            quote = false;
        } else if (!*why && (r->flags & RULE_WHOLE_ABOVE_1) && x > 1 && x != floor(x)) {
            /* Lightning refuses 2.5 too: neither a fraction nor a count */
            snprintf(why, sizeof why, "is above 1 and not a whole number");
            quote = false;
        }
    }
    if (!*why) return LT_OK;
    const char *q = quote ? "'" : "";
    seterr(err, errlen, "%s.%s = %s%s%s (%s) %s%s%s", e->section, e->key, q, v, q, origin, why,
           r->hint ? "; " : "", r->hint ? r->hint : "");
    return LT_ERR_INVALID;
}

/* The effective value of a declared-or-set key and where it came from. */
static lt_status typed_value(const lt_config *c, const char *sect, const char *key,
                             lt_param_type type, const char **v, char *err, size_t errlen) {
    const entry *e = find_entry(c, sect, key);
    *v = e ? (e->value ? e->value : e->def) : NULL;
    if (!*v) {
        seterr(err, errlen, "%s.%s is not set and has no default", sect ? sect : "?",
               key ? key : "?");
        return LT_ERR_NOT_FOUND;
    }
    return check_type(e->section, e->key, type, *v, e->value ? e->origin : "default", err,
                      errlen);
}

lt_status lt_config_int(const lt_config *c, const char *sect, const char *key, int64_t *out,
                        char *err, size_t errlen) {
    const char *v;
    bool range;
    LT_CHECK(typed_value(c, sect, key, LT_PARAM_INT, &v, err, errlen));
    return parse_int(v, out, &range) ? LT_OK : LT_ERR_INVALID;
}

lt_status lt_config_float(const lt_config *c, const char *sect, const char *key, double *out,
                          char *err, size_t errlen) {
    const char *v;
    LT_CHECK(typed_value(c, sect, key, LT_PARAM_FLOAT, &v, err, errlen));
    return parse_float(v, out) ? LT_OK : LT_ERR_INVALID;
}

lt_status lt_config_bool(const lt_config *c, const char *sect, const char *key, bool *out,
                         char *err, size_t errlen) {
    const char *v;
    LT_CHECK(typed_value(c, sect, key, LT_PARAM_BOOL, &v, err, errlen));
    return lt_parse_bool(v, out) ? LT_OK : LT_ERR_INVALID;
}

/* ---- lookups ------------------------------------------------------------ */

const char *lt_config_value(const lt_config *c, const char *sect, const char *key) {
    const entry *e = find_entry(c, sect, key);
    return e ? (e->value ? e->value : e->def) : NULL;
}

const char *lt_config_origin(const lt_config *c, const char *sect, const char *key) {
    const entry *e = find_entry(c, sect, key);
    return e ? (e->value ? e->origin : "default") : NULL;
}

lt_config_source lt_config_source_of(const lt_config *c, const char *sect, const char *key) {
    const entry *e = find_entry(c, sect, key);
    return e && e->value ? e->src : LT_SRC_DEFAULT;
}

const char *lt_config_help(const lt_config *c, const char *sect, const char *key) {
    const entry *e = find_entry(c, sect, key);
    return e && e->declared ? e->help : NULL;
}

/* ---- suggestions and validation ----------------------------------------- */

static const char *nearest_section(const lt_config *c, const char *name) {
    const char *best = NULL;
    int best_d = INT_MAX;
    for (size_t i = 0; i < c->n_sections; i++) {
        const section *s = c->sections[i];
        int d = s->declared ? lt_edit_distance(name, s->name) : INT_MAX;
        if (d < best_d) best_d = d, best = s->name;
    }
    return best && lt_close_enough(name, best_d) ? best : NULL;
}

static const char *nearest_key(const lt_config *c, const char *sect, const char *key) {
    const char *best = NULL;
    int best_d = INT_MAX;
    for (size_t i = 0; i < c->n_entries; i++) {
        const entry *e = c->entries[i];
        if (!e->declared || strcmp(e->section, sect) != 0) continue;
        int d = lt_edit_distance(key, e->key);
        if (d < best_d) best_d = d, best = e->key;
    }
    return best && lt_close_enough(key, best_d) ? best : NULL;
}

static void list_sections(const lt_config *c, strbuf *b) {
    for (size_t i = 0; i < c->n_sections; i++) {
        if (!c->sections[i]->declared) continue;
        if (b->len) sb_add(b, ", ");
        sb_add(b, c->sections[i]->name);
    }
}

static void list_keys(const lt_config *c, const char *sect, strbuf *b) {
    for (size_t i = 0; i < c->n_entries; i++) {
        const entry *e = c->entries[i];
        if (!e->declared || strcmp(e->section, sect) != 0) continue;
        if (b->len) sb_add(b, ", ");
        sb_add(b, e->key);
    }
}

static lt_status unknown_section(const lt_config *c, const entry *e, char *err, size_t errlen) {
    const char *near = nearest_section(c, e->section);
    if (near) {
        seterr(err, errlen, "unknown section [%s] (%s); did you mean [%s]?", e->section,
               e->origin, near);
        return LT_ERR_INVALID;
    }
    strbuf b = {0};
    list_sections(c, &b);
    seterr(err, errlen, "unknown section [%s] (%s); known sections: %s", e->section, e->origin,
           sb_str(&b));
    free(b.p);
    return LT_ERR_INVALID;
}

static lt_status unknown_key(const lt_config *c, const entry *e, char *err, size_t errlen) {
    const char *near = nearest_key(c, e->section, e->key);
    const char *home = near ? NULL : section_of_key(c, e->key);
    if (near) {
        seterr(err, errlen, "unknown key '%s' in [%s] (%s); did you mean '%s'?", e->key,
               e->section, e->origin, near);
    } else if (home) {
        seterr(err, errlen, "unknown key '%s' in [%s] (%s); did you mean %s.%s?", e->key,
               e->section, e->origin, home, e->key);
    } else {
        strbuf b = {0};
        list_keys(c, e->section, &b);
        seterr(err, errlen, "unknown key '%s' in [%s] (%s); known keys: %s", e->key, e->section,
               e->origin, b.len ? sb_str(&b) : "none");
        free(b.p);
    }
    return LT_ERR_INVALID;
}

static lt_status check_entry(const lt_config *c, const entry *e, char *err, size_t errlen) {
    const section *s = find_section(c, e->section);
    if (!s || !s->declared) return unknown_section(c, e, err, errlen);
    if (!e->declared) return s->open ? LT_OK : unknown_key(c, e, err, errlen);
    LT_CHECK(check_type(e->section, e->key, e->type, e->value, e->origin, err, errlen));
    return check_rule(e, e->value, e->origin, err, errlen);
}

lt_status lt_config_validate(const lt_config *c, char *err, size_t errlen) {
    if (!c) return LT_ERR_INVALID;
    const entry *first = NULL;
    for (size_t i = 0; i < c->n_entries; i++) {
        const entry *e = c->entries[i];
        if (!e->value || (first && e->seq > first->seq)) continue;
        if (check_entry(c, e, NULL, 0) != LT_OK) first = e;
    }
    return first ? check_entry(c, first, err, errlen) : LT_OK;
}

/* ---- printing and iteration --------------------------------------------- */

static int cmp_entry(const void *pa, const void *pb) {
    const entry *a = *(const entry *const *)pa, *b = *(const entry *const *)pb;
    int d = strcmp(a->section, b->section);
    return d ? d : strcmp(a->key, b->key);
}

void lt_config_print(const lt_config *c, FILE *out) {
    if (!c || !out || c->n_entries == 0) return;
    const entry **sorted = malloc(c->n_entries * sizeof *sorted);
    if (!sorted) {
        fprintf(out, "(config: out of memory while printing)\n");
        return;
    }
    memcpy(sorted, c->entries, c->n_entries * sizeof *sorted);
    qsort(sorted, c->n_entries, sizeof *sorted, cmp_entry);
    for (size_t i = 0; i < c->n_entries; i++) {
        const entry *e = sorted[i];
        const char *v = e->value ? e->value : e->def ? e->def : "";
        fprintf(out, "%s.%s = %s  (%s)\n", e->section, e->key, v,
                e->value ? e->origin : "default");
    }
    free(sorted);
}

static int cmp_seq(const void *pa, const void *pb) {
    const entry *a = *(const entry *const *)pa, *b = *(const entry *const *)pb;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

void lt_config_each(const lt_config *c, const char *sect, lt_config_visit_fn fn, void *user) {
    if (!c || !sect || !fn || c->n_entries == 0) return;
    const entry **set = malloc(c->n_entries * sizeof *set);
    if (!set) return;
    size_t n = 0;
    for (size_t i = 0; i < c->n_entries; i++)
        if (c->entries[i]->value && strcasecmp(c->entries[i]->section, sect) == 0)
            set[n++] = c->entries[i];
    qsort(set, n, sizeof *set, cmp_seq);
    for (size_t i = 0; i < n; i++) fn(user, set[i]->key, set[i]->value, set[i]->origin);
    free(set);
}

void lt_config_each_section(const lt_config *c, void (*fn)(void *user, const char *section),
                            void *user) {
    if (!c || !fn) return;
    for (size_t i = 0; i < c->n_sections; i++)
        if (!c->sections[i]->declared) fn(user, c->sections[i]->name);
}
