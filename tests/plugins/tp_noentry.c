/* liblt-strategy-noentry.so: a shared object without lt_plugin_entry_v1. */
#include "tp.h"

LT_API int tp_noentry_something(void);
LT_API int tp_noentry_something(void) { return 42; }
