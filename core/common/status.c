/* Names of status codes, kinds and dtypes. */
#include <string.h>
#include <strings.h>
#include "lt/core.h"

const char *lt_status_str(lt_status s) {
    switch (s) {
    case LT_OK: return "ok";
    case LT_ERR_INVALID: return "invalid argument or input";
    case LT_ERR_NOMEM: return "out of memory";
    case LT_ERR_IO: return "I/O error";
    case LT_ERR_NOT_FOUND: return "not found";
    case LT_ERR_ABI: return "ABI mismatch";
    case LT_ERR_UNSUPPORTED: return "unsupported";
    case LT_ERR_TIMEOUT: return "timed out";
    case LT_ERR_MISMATCH: return "ranks disagree";
    case LT_ERR_ABORTED: return "aborted";
    case LT_ERR_NUMERIC: return "non-finite value";
    case LT_ERR_CORRUPT: return "corrupt or truncated data";
    case LT_ERR_STATE: return "called in the wrong state";
    case LT_ERR_PLUGIN: return "plugin failure";
    }
    return "unknown status";
}

static const char *const kind_names[] = {NULL, "accelerator", "strategy", "precision",
                                         "environment", "backend", "module"};

const char *lt_kind_name(uint32_t kind) {
    return kind >= 1 && kind <= LT_KIND_COUNT ? kind_names[kind] : NULL;
}

static const struct { const char *name; size_t size; } dtypes[] = {
    {NULL, 0}, {"f32", 4}, {"f64", 8}, {"f16", 2}, {"bf16", 2},
    {"i8", 1}, {"u8", 1}, {"i32", 4}, {"i64", 8},
};

size_t lt_dtype_size(lt_dtype t) {
    return t >= LT_F32 && t <= LT_I64 ? dtypes[t].size : 0;
}

const char *lt_dtype_name(lt_dtype t) {
    return t >= LT_F32 && t <= LT_I64 ? dtypes[t].name : NULL;
}

int lt_dtype_parse(const char *s, lt_dtype *out) {
    for (int t = LT_F32; t <= LT_I64; t++)
        if (!strcasecmp(s, dtypes[t].name)) { *out = (lt_dtype)t; return 0; }
    return -1;
}
