/* SLURM's compressed host lists ("node[001-004,007],gpu5"), reduced to what an
 * environment needs: the first host, which is where rank 0 runs. */
#ifndef LT_SLURM_HOSTLIST_H
#define LT_SLURM_HOSTLIST_H

#include <stddef.h>

/* Writes the first host of `list` into buf: "node[001-004,007],gpu5" ->
 * "node001", "a,b" -> "a", "rack[1-2]-n[5-6]" -> "rack1-n5". The whole list is
 * checked, so a typo anywhere is reported rather than half-read. Returns 0, or
 * -1 with the reason in err (balanced brackets, ranges, empty names, length). */
int slurm_hostlist_first(const char *list, char *buf, size_t len, char *err, size_t errlen);

#endif
