/* Edit distance for suggestions, and array growth. */
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "text.h"

int lt_edit_distance(const char *a, const char *b) {
    if (!a || !b) return INT_MAX;
    size_t n = strlen(a), m = strlen(b);
    int *row = malloc((m + 1) * sizeof *row);
    if (!row) return INT_MAX;
    for (size_t j = 0; j <= m; j++) row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diag = row[0]; /* row[i-1][j-1] */
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int up = row[j];
            int same = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]);
            int best = diag + !same;
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    int d = row[m];
    free(row);
    return d;
}

bool lt_close_enough(const char *typed, int distance) {
    int len = typed ? (int)strlen(typed) : 0;
    return distance < len && (distance <= 2 || distance * 3 <= len);
}

bool lt_grow(void **arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t n = *cap ? *cap * 2 : 8;
    while (n < need) n *= 2;
    void *p = realloc(*arr, n * elem);
    if (!p) return false;
    *arr = p;
    *cap = n;
    return true;
}
