/* liblt-environment-tpenv.so: lightning with one hook replaced, a score
 * read from LT_TP_ENV_SCORE (0 when unset), so a test can make a third
 * party's environment win the automatic choice or lose it. */
#include <stdlib.h>
#include "lt/lt.h"

static lt_status tp_score(lt_ctx *ctx, int *out) {
    (void)ctx;
    const char *v = getenv("LT_TP_ENV_SCORE");
    *out = v ? atoi(v) : 0;
    return LT_OK;
}

static const lt_environment_desc tpenv = {
    LT_HEADER(LT_KIND_ENVIRONMENT, lt_environment_desc, "tpenv", "lightning", "0.1",
              "test: lightning scored by LT_TP_ENV_SCORE", NULL, NULL),
    .score = tp_score,
};

LT_PLUGIN_EXPORT(&tpenv.hdr)
