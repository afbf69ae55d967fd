/* Elementwise reductions for the gloo backend: c[i] = a[i] op b[i] for every
 * lt dtype and op, in the form gloo's AllreduceOptions::setReduceFunction
 * takes. f16 and bf16 are reduced in float and rounded back (to nearest even).
 * c may alias a or b (gloo reduces in place). */
#pragma once

#include <cstddef>
#include "lt/backend.h"

namespace ltgloo {

using ReduceFn = void (*)(void *c, const void *a, const void *b, size_t n);

/* The function for dtype/op (LT_AVG reduces as LT_SUM; the caller divides
 * afterwards), or nullptr when the combination is not supported. */
ReduceFn reduce_fn(lt_dtype dtype, lt_redop op);

/* buf[i] /= world, in buf's dtype (integers truncate toward zero). */
void divide(void *buf, size_t n, lt_dtype dtype, int world);

} // namespace ltgloo
