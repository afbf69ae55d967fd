/* Everything a plugin or an embedding program needs. */
#ifndef LT_LT_H
#define LT_LT_H
#include "lt/abi.h"
#include "lt/core.h"
#include "lt/store.h"
#include "lt/accelerator.h"
#include "lt/backend.h"
#include "lt/environment.h"
#include "lt/run.h"
#include "lt/nn.h"
#include "lt/data.h"
#include "lt/module.h"
#include "lt/strategy.h"
#include "lt/replica.h"
#include "lt/precision.h"
#endif
