/* SLURM's compressed host lists (plugins/environments/slurm/hostlist.c):
 * SLURM_NODELIST as the slurm environment plugin reads it. Byte 0 is the size
 * of the caller's buffer (0 to 255, allocated to that size exactly, so a write
 * past it is caught); the rest is the list. On success the buffer holds a
 * host name: NUL-terminated within the buffer, non-empty, no ',' '[' ']'. */
#include "fuzz_common.h"
#include "hostlist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    size_t len = data[0];
    char *list = fuzz_cstr(data + 1, size - 1);
    char *buf = len ? malloc(len) : NULL;
    char err[160];
    err[0] = 0;
    int rc = slurm_hostlist_first(list, buf, len, err, sizeof err);
    if (rc == 0) {
        FUZZ_CHECK(buf && memchr(buf, 0, len) != NULL);
        FUZZ_CHECK(buf[0] && !strpbrk(buf, ",[]"));
        FUZZ_CHECK(!strncmp(list, buf, strcspn(list, "[,"))); /* starts as the list does */
    } else {
        FUZZ_CHECK(rc == -1 && err[0]); /* every refusal says why */
    }
    free(buf);
    free(list);
    return 0;
}
