/* Lightning's `devices` option (core/config/devices.c). The first byte picks
 * the accelerator and the second how many GPUs exist (0 to 256, or one past
 * the limit to check that refusal); the rest is the option's text. On success
 * the list must describe what it promises. */
#include "fuzz_common.h"
#include "config/devices.h"

static const char *const accelerators[] = {"cpu", "gpu", "cuda", "CPU", "tpu"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const char *accel = accelerators[data[0] % (sizeof accelerators / sizeof accelerators[0])];
    int available = data[1] == 255 ? LT_MAX_DEVICES + 1 : data[1] == 254 ? LT_MAX_DEVICES : data[1];
    char *spec = fuzz_cstr(data + 2, size - 2);
    lt_device_list out;
    memset(&out, 0xA5, sizeof out);
    char err[512];
    err[0] = 0;
    lt_status st = lt_devices_parse(spec, accel, available, &out, err, sizeof err);
    if (st == LT_OK) {
        bool gpu = strcmp(accel, "cpu") && strcmp(accel, "CPU");
        FUZZ_CHECK(out.count >= 1 && out.count <= LT_MAX_DEVICES);
        for (int i = 0; i < out.count; i++) {
            FUZZ_CHECK(out.ids[i] >= 0);
            if (gpu) FUZZ_CHECK(out.ids[i] < available);
            else FUZZ_CHECK(out.ids[i] == i);
            for (int j = 0; j < i; j++) FUZZ_CHECK(out.ids[j] != out.ids[i]);
        }
    } else {
        FUZZ_CHECK(err[0]); /* every refusal says why */
        FUZZ_CHECK(memchr(err, '\n', strlen(err)) == NULL || strchr(spec, '\n')); /* one line */
    }
    free(spec);
    return 0;
}
