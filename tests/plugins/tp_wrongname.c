/* liblt-strategy-wrongname.so: the file promises strategy 'wrongname' but
 * holds strategy 'rightname' and an environment called 'wrongname'. */
#include "tp.h"

static const lt_strategy_desc strategy = {
    LT_HEADER(LT_KIND_STRATEGY, lt_strategy_desc, "rightname", "base", "0.1", NULL, NULL, NULL),
};
static const lt_environment_desc environment = {
    LT_HEADER(LT_KIND_ENVIRONMENT, lt_environment_desc, "wrongname", NULL, "0.1", NULL, NULL, NULL),
};

LT_PLUGIN_EXPORT(&strategy.hdr, &environment.hdr)
