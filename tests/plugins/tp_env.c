/* liblt-environment-tpenv.so: lightning with one hook replaced, a score
 * read from LT_TP_ENV_SCORE (0 when unset), so a test can make a third
 * party's environment win the automatic choice or lose it. */
#include <stdlib.h>
#include "lt/lt.h"

#ifndef TP_ENV_FUTURE_ABI
static lt_status tp_score(lt_ctx *ctx, int *out) {
    (void)ctx;
    const char *v = getenv("LT_TP_ENV_SCORE");
    *out = v ? atoi(v) : 0;
    return LT_OK;
}
#endif

#ifdef TP_ENV_FUTURE_ABI
/* liblt-environment-tpenvfuture.so: the same built for an ABI major this
 * core does not have. It would score highest; automatic choice must pass it
 * over (it cannot load) instead of failing. */
#include "tp.h"
static lt_status tp_score_high(lt_ctx *ctx, int *out) {
    (void)ctx;
    *out = 1000;
    return LT_OK;
}
static const lt_environment_desc tpenv = {
    TP_HDR(LT_PLUGIN_MAGIC, LT_ABI_MAJOR + 1, 0, sizeof(lt_environment_desc), LT_KIND_ENVIRONMENT,
           "tpenvfuture", "lightning", NULL),
    .score = tp_score_high,
};
#else
static const lt_environment_desc tpenv = {
    LT_HEADER(LT_KIND_ENVIRONMENT, lt_environment_desc, "tpenv", "lightning", "0.1",
              "test: lightning scored by LT_TP_ENV_SCORE", NULL, NULL),
    .score = tp_score,
};
#endif

LT_PLUGIN_EXPORT(&tpenv.hdr)
