/* Lightning's `devices` option: a count, -1, a list of indices (with or
 * without brackets; a trailing comma makes a one-element list), or auto.
 * Parsing is split from resolving, so the cpu and gpu meanings of the same
 * text live side by side and every error can quote the user's text. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "lt/core.h"
#include "devices.h"

static void seterr(char *err, size_t errlen, const char *fmt, ...) LT_PRINTF(3, 4);
static void seterr(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* A piece of the spec; the spec itself is never copied or modified. */
typedef struct view {
    const char *p;
    int n;
} view;

static bool is_blank(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; }

static view trim(const char *p, size_t n) {
    while (n && is_blank(*p)) p++, n--;
    while (n && is_blank(p[n - 1])) n--;
    return (view){p, n > INT_MAX ? INT_MAX : (int)n};
}

/* A whole view as a decimal int (sign allowed), nothing else. */
static bool view_int(view v, int *out) {
    if (v.n == 0 || is_blank(v.p[0])) return false;
    char *end;
    errno = 0;
    long x = strtol(v.p, &end, 10);
    if (end != v.p + v.n || errno == ERANGE || x < INT_MIN || x > INT_MAX) return false;
    *out = (int)x;
    return true;
}

typedef enum spec_kind { SPEC_AUTO, SPEC_COUNT, SPEC_LIST } spec_kind;

typedef struct spec {
    spec_kind kind;
    view text;     /* the trimmed spec, for messages */
    int count;     /* SPEC_COUNT */
    int n;         /* SPEC_LIST */
    int ids[LT_MAX_DEVICES];
} spec;

#define SPEC_FMT "devices=%.*s"
#define SPEC_ARG(s) (s)->text.n, (s)->text.p

/* Comma-separated indices in `body`; one trailing comma is allowed ("0,"),
 * other empty entries are not ("1,,3"). */
static lt_status parse_list(view body, spec *s, char *err, size_t errlen) {
    s->kind = SPEC_LIST;
    s->n = 0;
    const char *p = body.p, *end = body.p + body.n;
    for (;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        view item = trim(p, (size_t)(stop - p));
        bool trailing = !comma && item.n == 0 && s->n > 0 && p > body.p;
        if (trailing) break;
        if (item.n == 0) {
            seterr(err, errlen, SPEC_FMT ": empty entry in the device list; separate indices "
                   "with single commas, e.g. devices=1,3", SPEC_ARG(s));
            return LT_ERR_INVALID;
        }
        if (s->n == LT_MAX_DEVICES) {
            seterr(err, errlen, SPEC_FMT ": more than %d devices listed", SPEC_ARG(s),
                   LT_MAX_DEVICES);
            return LT_ERR_INVALID;
        }
        if (!view_int(item, &s->ids[s->n])) {
            seterr(err, errlen, SPEC_FMT ": '%.*s' is not a device index; list indices like "
                   "[0, 1]", SPEC_ARG(s), item.n, item.p);
            return LT_ERR_INVALID;
        }
        s->n++;
        if (!comma) break;
        p = comma + 1;
    }
    return LT_OK;
}

static lt_status parse_spec(const char *text, spec *s, char *err, size_t errlen) {
    s->text = trim(text, strlen(text));
    view t = s->text;
    if (t.n == 0) {
        seterr(err, errlen, "devices is empty; use a count (devices=2), a list (devices=[0, 1]), "
               "-1 for all devices, or auto");
        return LT_ERR_INVALID;
    }
    if (t.n == 4 && strncasecmp(t.p, "auto", 4) == 0) {
        s->kind = SPEC_AUTO;
        return LT_OK;
    }
    if (t.p[0] == '[') {
        if (t.p[t.n - 1] != ']') {
            seterr(err, errlen, SPEC_FMT ": the list has no closing ']'; write e.g. [1, 3]",
                   SPEC_ARG(s));
            return LT_ERR_INVALID;
        }
        view body = trim(t.p + 1, (size_t)t.n - 2);
        if (body.n == 0) {
            seterr(err, errlen, SPEC_FMT ": the list names no device; list at least one index, "
                   "e.g. [0]", SPEC_ARG(s));
            return LT_ERR_INVALID;
        }
        return parse_list(body, s, err, errlen);
    }
    if (memchr(t.p, ',', (size_t)t.n)) return parse_list(t, s, err, errlen);
    if (!view_int(t, &s->count)) {
        seterr(err, errlen, SPEC_FMT ": expected a count (e.g. 2), a list (e.g. [0, 1] or 0,), "
               "-1 for all devices, or auto", SPEC_ARG(s));
        return LT_ERR_INVALID;
    }
    s->kind = SPEC_COUNT;
    return LT_OK;
}

static void fill_range(lt_device_list *out, int n) {
    out->count = n;
    for (int i = 0; i < n; i++) out->ids[i] = i;
}

/* "only 2 GPUs are available (0-1)" */
static void no_such_gpus(const spec *s, int available, char *err, size_t errlen) {
    if (available == 0)
        seterr(err, errlen, SPEC_FMT ": no GPUs are available; use accelerator=cpu",
               SPEC_ARG(s));
    else if (available == 1)
        seterr(err, errlen, SPEC_FMT ": only 1 GPU is available (0)", SPEC_ARG(s));
    else
        seterr(err, errlen, SPEC_FMT ": only %d GPUs are available (0-%d)", SPEC_ARG(s),
               available, available - 1);
}

static lt_status gpu_count(const spec *s, int available, lt_device_list *out, char *err,
                           size_t errlen) {
    int n = s->kind == SPEC_AUTO || s->count == -1 ? available : s->count;
    if (s->kind == SPEC_COUNT && s->count == 0) {
        seterr(err, errlen, SPEC_FMT ": requested 0 GPUs; use accelerator=cpu or devices>=1",
               SPEC_ARG(s));
        return LT_ERR_INVALID;
    }
    if (n < 0) {
        seterr(err, errlen, SPEC_FMT ": a negative count other than -1 (all GPUs); use -1 or "
               "a count >= 1", SPEC_ARG(s));
        return LT_ERR_INVALID;
    }
    if (n == 0 || n > available) {
        no_such_gpus(s, available, err, errlen);
        return LT_ERR_INVALID;
    }
    fill_range(out, n);
    return LT_OK;
}

static lt_status gpu_list(const spec *s, int available, lt_device_list *out, char *err,
                          size_t errlen) {
    for (int i = 0; i < s->n; i++) {
        int id = s->ids[i];
        if (id < 0) {
            seterr(err, errlen, SPEC_FMT ": device index %d is negative; indices start at 0 "
                   "(devices=-1 means all GPUs)", SPEC_ARG(s), id);
            return LT_ERR_INVALID;
        }
        if (id >= available) {
            no_such_gpus(s, available, err, errlen);
            return LT_ERR_INVALID;
        }
        for (int j = 0; j < i; j++) {
            if (s->ids[j] != id) continue;
            seterr(err, errlen, SPEC_FMT ": device %d is listed twice; list each device once",
                   SPEC_ARG(s), id);
            return LT_ERR_INVALID;
        }
    }
    out->count = s->n;
    memcpy(out->ids, s->ids, (size_t)s->n * sizeof out->ids[0]);
    return LT_OK;
}

/* On cpu `devices` is a number of processes. */
static lt_status cpu_devices(const spec *s, lt_device_list *out, char *err, size_t errlen) {
    if (s->kind == SPEC_AUTO) {
        fill_range(out, 1);
        return LT_OK;
    }
    if (s->kind == SPEC_LIST) {
        seterr(err, errlen, SPEC_FMT " on cpu: a list selects GPU indices; on cpu give the "
               "number of processes as an integer, e.g. devices=2", SPEC_ARG(s));
        return LT_ERR_INVALID;
    }
    if (s->count == -1) {
        seterr(err, errlen, SPEC_FMT " is not supported for CPU; give the number of processes, "
               "e.g. devices=2", SPEC_ARG(s));
        return LT_ERR_INVALID;
    }
    if (s->count < 1 || s->count > LT_MAX_DEVICES) {
        seterr(err, errlen, SPEC_FMT " on cpu: the number of processes must be 1 to %d",
               SPEC_ARG(s), LT_MAX_DEVICES);
        return LT_ERR_INVALID;
    }
    fill_range(out, s->count);
    return LT_OK;
}

lt_status lt_devices_parse(const char *text, const char *accelerator, int available,
                           lt_device_list *out, char *err, size_t errlen) {
    if (!text || !accelerator || !out || available < 0 || available > LT_MAX_DEVICES) {
        seterr(err, errlen, "lt_devices_parse: missing argument or %d devices (0 to %d allowed)",
               available, LT_MAX_DEVICES);
        return LT_ERR_INVALID;
    }
    /* Every accelerator but cpu has devices to index, as gpu does: a third
     * party's too (its device_count gives `available`). */
    bool cpu = strcasecmp(accelerator, "cpu") == 0;
    spec s;
    LT_CHECK(parse_spec(text, &s, err, errlen));
    lt_device_list res;
    if (cpu)
        LT_CHECK(cpu_devices(&s, &res, err, errlen));
    else if (s.kind == SPEC_LIST)
        LT_CHECK(gpu_list(&s, available, &res, err, errlen));
    else
        LT_CHECK(gpu_count(&s, available, &res, err, errlen));
    *out = res;
    return LT_OK;
}
