#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "launch.h"

lt_status_slot *lt_status_slot_attach(void) {
    const char *fd_s = getenv("LT_STATUS_FD"), *lr = getenv("LOCAL_RANK");
    if (!fd_s || !lr) return NULL;
    int fd = atoi(fd_s), slot = atoi(lr);
    if (fd < 0 || slot < 0 || slot > 4096) return NULL;
    size_t len = (size_t)(slot + 1) * sizeof(lt_status_slot);
    /* A file shorter than this slot (a LOCAL_RANK that is not ltrun's, an
     * inherited variable) would fault at the first write: not ltrun's slot. */
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (size_t)sb.st_size < len) return NULL;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return NULL;
    lt_status_slot *s = (lt_status_slot *)p + slot;
    s->pid = (int32_t)getpid();
    return s;
}

void lt_status_slot_set_error(lt_status_slot *s, lt_status st, const char *text) {
    s->error_status = (int32_t)st;
    snprintf(s->error, sizeof s->error, "%s", text && *text ? text : "(no message)");
    __atomic_store_n(&s->error_set, 1, __ATOMIC_RELEASE);
}

bool lt_status_slot_post_error(lt_status st, const char *text) {
    lt_status_slot *s = lt_status_slot_attach();
    if (!s) return false;
    /* Set already as fit failed: kept, so a stop signal arriving now
     * cannot leave ltrun half of one message and half of another. */
    if (!__atomic_load_n(&s->error_set, __ATOMIC_ACQUIRE)) lt_status_slot_set_error(s, st, text);
    return true; /* the mapping goes with the process */
}
