/* libmine.so: a user's object that is not a plugin, one exported function
 * for a per-hook override ("libmine.so:my_init"). */
#include "tp.h"

LT_API lt_status my_init(lt_ctx *c, lt_run *r);
LT_API lt_status my_init(lt_ctx *c, lt_run *r) {
    (void)c;
    TP_BUMP(r, 100);
    return LT_OK;
}
