/* Placeholder until the config implementation lands (being written now). */
#include "config.h"
const char *lt_config_value(const lt_config *c, const char *section, const char *key) {
    (void)c; (void)section; (void)key;
    return NULL;
}
