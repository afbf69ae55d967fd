/* liblt-precision-old16.so: 16-mixed as a precision plugin built for ABI
 * 1.6 would be: it derives every hook from 16-mixed, but its header says
 * minor 6. Such a plugin was promised that lt_flat.grads never moves after
 * its setup, so the core must not place ddp's gradients in group memory
 * under it (precision.sh, case e). */
#include "lt/lt.h"

static const lt_precision_desc old16 = {
    .hdr = {LT_PLUGIN_MAGIC, LT_ABI_MAJOR, 6, (uint32_t)sizeof(lt_precision_desc), LT_KIND_PRECISION, "old16",
            "16-mixed", "1.0.0", "16-mixed as built for ABI 1.6 (a test plugin)", NULL, NULL},
};

LT_PLUGIN_EXPORT(&old16.hdr)
