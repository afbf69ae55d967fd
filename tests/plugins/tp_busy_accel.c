/* liblt-accelerator-busy.so: the cpu accelerator (its base) presented as a
 * machine of 4 devices of which 0 and 2 are used by other processes, for
 * auto_select_gpus (tests/integration/auto_select.sh): only the three
 * device-listing hooks are its own, everything that trains is the cpu's. */
#include "tp.h"

static const lt_accelerator_desc *super;

static lt_status available(lt_ctx *c, bool *out) {
    (void)c;
    *out = true;
    return LT_OK;
}

static lt_status count(lt_ctx *c, int *out) {
    (void)c;
    *out = 4;
    return LT_OK;
}

static lt_status in_use(lt_ctx *c, int device, bool *out) {
    (void)c;
    *out = device == 0 || device == 2;
    return LT_OK;
}

static const lt_accelerator_desc busy = {
    LT_HEADER(LT_KIND_ACCELERATOR, lt_accelerator_desc, "busy", "cpu", "1.0",
              "cpu, shown as 4 devices with 0 and 2 in use", NULL, &super),
    .is_available = available,
    .device_count = count,
    .device_in_use = in_use,
};

LT_PLUGIN_EXPORT(&busy.hdr)
