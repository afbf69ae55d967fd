/* 2x2 max pooling, stride 2, no padding, on f32, vectorised (pool_2x2.c).
 * Same contract as cpu_max_pool_fwd and cpu_max_pool_bwd with beta 0
 * (lt/accelerator.h), geometry already checked; each returns false, having
 * written nothing, when a row has fewer than 4 windows. */
#ifndef LT_CPU_POOL_2X2_H
#define LT_CPU_POOL_2X2_H

#include <stdbool.h>
#include "cpu_internal.h"

bool cpu_max_pool_2x2_fwd_f32(const float *x, const lt_conv_geom *g, float *y, int32_t *arg);
bool cpu_max_pool_2x2_bwd_f32(const float *dy, const int32_t *arg, const lt_conv_geom *g,
                              float *dx);

#endif
