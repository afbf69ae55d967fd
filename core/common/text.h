/* Small helpers every core folder may use: "did you mean" distances and
 * growing arrays. */
#ifndef LT_COMMON_TEXT_H
#define LT_COMMON_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Levenshtein distance, ignoring ASCII case (names are case-insensitive),
 * for "did you mean" suggestions anywhere in the core (INT_MAX when out of
 * memory or a name is NULL). */
int lt_edit_distance(const char *a, const char *b);
/* The one rule for offering a name as "did you mean": its distance from what
 * was typed is under the typed length and at most 2 edits or a third of it,
 * so it looks like a typo rather than a different word. */
bool lt_close_enough(const char *typed, int distance);

/* Grows *arr (elements of `elem` bytes, capacity *cap) to hold `need`
 * elements, doubling; false when out of memory (*arr is then unchanged). */
bool lt_grow(void **arr, size_t *cap, size_t need, size_t elem);

#endif
