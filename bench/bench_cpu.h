/* The line every C bench prints first, so its figures say which machine
 * they came from: "# cpu: <model name>; flags: <the ISA flags lt's kernels
 * choose by>" from /proc/cpuinfo ("unknown" where it cannot be read). */
#ifndef LT_BENCH_CPU_H
#define LT_BENCH_CPU_H

#include <stdio.h>
#include <string.h>

static inline void bench_print_cpu(void) {
    static const char *const isa[] = {"avx2", "fma", "f16c", "avx512f", "avx512_bf16", "amx_bf16"};
    char line[4096], model[256] = "unknown", flags[128] = "";
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (!colon) continue;
        if (!strncmp(line, "model name", 10) && !strcmp(model, "unknown")) {
            snprintf(model, sizeof model, "%s", colon + 2);
            model[strcspn(model, "\n")] = 0;
        } else if (!strncmp(line, "flags", 5) && !flags[0]) {
            /* flags are space-separated: match whole words only */
            for (size_t i = 0; i < sizeof isa / sizeof *isa; i++) {
                char word[32];
                snprintf(word, sizeof word, " %s", isa[i]);
                const char *at = strstr(colon, word);
                size_t len = strlen(word);
                if (at && (at[len] == ' ' || at[len] == '\n' || at[len] == 0))
                    snprintf(flags + strlen(flags), sizeof flags - strlen(flags), "%s%s",
                             flags[0] ? " " : "", isa[i]);
            }
            if (!flags[0]) snprintf(flags, sizeof flags, "none of the AVX ones");
        }
    }
    if (f) fclose(f);
    printf("# cpu: %s; flags: %s\n", model, flags[0] ? flags : "unknown");
}

#endif
