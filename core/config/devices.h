/* Parsing of Lightning's `devices` option and accelerator=auto. */
#ifndef LT_DEVICES_H
#define LT_DEVICES_H

#include "lt/abi.h"

#define LT_MAX_DEVICES 256

typedef struct lt_device_list {
    int count;                 /* number of devices (cpu: processes) */
    int ids[LT_MAX_DEVICES];   /* device indices (cpu: 0..count-1) */
} lt_device_list;

/* Parses `spec` for an accelerator ("cpu" or "gpu"; "cuda" is gpu) with
 * `available` devices (gpu: the device count; cpu: ignored except for
 * "auto" = 1):
 *   "3" -> [0,1,2]; "-1" -> all; "[0]" / "0," -> [0]; "[1, 3]" / "1, 3" -> [1,3];
 *   "auto" -> all GPUs on gpu, 1 on cpu.
 * List order is kept. On cpu an integer is a number of processes; lists and
 * -1 are errors there. Any other accelerator (a third party's) is read as
 * gpu is: device indices below `available`.
 * Errors (LT_ERR_INVALID, one line in err naming the value and the fix):
 * empty/malformed, duplicates, indices >= available, negative other than -1,
 * 0 devices on gpu, more devices than available. *out is written only on
 * success. */
lt_status lt_devices_parse(const char *spec, const char *accelerator, int available,
                           lt_device_list *out, char *err, size_t errlen);

#endif
