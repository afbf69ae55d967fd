/* One malformed header per build (TP_CASE), each otherwise a plausible
 * strategy inheriting from "base": the loader must refuse it on the header
 * alone. */
#include "tp.h"

static lt_status launch_kind(lt_ctx *c, lt_launch_kind *out) {
    (void)c;
    *out = LT_LAUNCH_NONE;
    return LT_OK;
}

#define TP_BAD_MAGIC 1
#define TP_ABI_MAJOR 2
#define TP_ABI_MINOR 3
#define TP_TOO_BIG 4
#define TP_ODD_KIND 5
#define TP_TOO_SMALL 6

#if TP_CASE == TP_BAD_MAGIC
#define TP_ARGS 0xdeadbeefu, LT_ABI_MAJOR, LT_ABI_MINOR, sizeof(lt_strategy_desc), LT_KIND_STRATEGY, "badmagic"
#elif TP_CASE == TP_ABI_MAJOR
#define TP_ARGS LT_PLUGIN_MAGIC, 2, 1, sizeof(lt_strategy_desc), LT_KIND_STRATEGY, "abi2"
#elif TP_CASE == TP_ABI_MINOR
#define TP_ARGS LT_PLUGIN_MAGIC, LT_ABI_MAJOR, LT_ABI_MINOR + 1, sizeof(lt_strategy_desc), LT_KIND_STRATEGY, "abinew"
#elif TP_CASE == TP_TOO_BIG
#define TP_ARGS LT_PLUGIN_MAGIC, LT_ABI_MAJOR, LT_ABI_MINOR, sizeof(lt_strategy_desc) + 64, LT_KIND_STRATEGY, "huge"
#elif TP_CASE == TP_ODD_KIND
#define TP_ARGS LT_PLUGIN_MAGIC, LT_ABI_MAJOR, LT_ABI_MINOR, sizeof(lt_strategy_desc), 42, "oddkind"
#elif TP_CASE == TP_TOO_SMALL
#define TP_ARGS LT_PLUGIN_MAGIC, LT_ABI_MAJOR, LT_ABI_MINOR, 8, LT_KIND_STRATEGY, "tiny"
#else
#error "TP_CASE must name one malformed header"
#endif

#define TP_HDR_EXPANDED(...) TP_HDR(__VA_ARGS__)
static const lt_strategy_desc bad = {
    TP_HDR_EXPANDED(TP_ARGS, "base", NULL),
    .launch_kind = launch_kind,
};

LT_PLUGIN_EXPORT(&bad.hdr)
