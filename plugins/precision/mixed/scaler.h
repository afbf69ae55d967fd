/* PyTorch GradScaler's dynamic loss-scale rules, as plain functions of a
 * small struct, so they are tested without a run (tests/unit/precision).
 * Header only; used by mixed_precision.c. */
#ifndef LT_PRECISION_SCALER_H
#define LT_PRECISION_SCALER_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct grad_scaler {
    double scale;            /* the loss gradient is seeded with it */
    double growth_factor;    /* > 1 */
    double backoff_factor;   /* in (0, 1) */
    int64_t growth_interval; /* clean steps in a row before growing */
    int64_t growth_tracker;  /* clean steps since the scale last changed */
    int64_t skipped_in_row;  /* steps skipped since the last clean one */
    int64_t skipped_total;
} grad_scaler;

/* After an optimizer step: found_inf (the step was skipped) backs off and
 * restarts the count; a clean step counts, and the growth_interval-th in a
 * row grows the scale, unless growing would overflow to infinity
 * (torch._amp_update_scale_). */
static inline void grad_scaler_update(grad_scaler *s, bool found_inf) {
    if (found_inf) {
        s->scale *= s->backoff_factor;
        s->growth_tracker = 0;
        s->skipped_in_row++;
        s->skipped_total++;
        return;
    }
    s->skipped_in_row = 0;
    if (++s->growth_tracker == s->growth_interval) {
        double grown = s->scale * s->growth_factor;
        if (isfinite(grown)) s->scale = grown;
        s->growth_tracker = 0;
    }
}

/* The checkpoint text: the scale as a hex float, so a resumed run goes on
 * with the very same value. Returns snprintf's count. */
static inline int grad_scaler_format(const grad_scaler *s, char *buf, size_t len) {
    return snprintf(buf, len, "scale=%a growth_tracker=%lld skipped_in_row=%lld skipped_total=%lld", s->scale,
                    (long long)s->growth_tracker, (long long)s->skipped_in_row, (long long)s->skipped_total);
}

/* Parses grad_scaler_format's text into s (the counters and scale only);
 * false, leaving s alone, on anything else. */
static inline bool grad_scaler_parse(grad_scaler *s, const char *text) {
    double scale;
    long long tracker, in_row, total;
    int used = 0;
    if (sscanf(text, "scale=%la growth_tracker=%lld skipped_in_row=%lld skipped_total=%lld%n", &scale, &tracker,
               &in_row, &total, &used) != 4 || text[used] != 0)
        return false;
    if (!(scale > 0 && isfinite(scale)) || tracker < 0 || in_row < 0 || total < 0) return false;
    s->scale = scale;
    s->growth_tracker = tracker;
    s->skipped_in_row = in_row;
    s->skipped_total = total;
    return true;
}

#endif
