/* Shared by the loader's test plugins: a header written field by field, so a
 * test can put wrong values where LT_HEADER would put right ones. */
#ifndef LT_TP_H
#define LT_TP_H

#include "lt/lt.h"

#define TP_HDR(magic_, major_, minor_, size_, kind_, name_, base_, super_)                  \
    .hdr = { (magic_), (major_), (minor_), (uint32_t)(size_), (uint32_t)(kind_), (name_),    \
             (base_), "0.1", "loader test plugin", NULL, (const void **)(super_) }

/* Hooks count calls in an int the test passes as the run. */
#define TP_BUMP(run, k) (*(int *)(void *)(run) += (k))

#endif
