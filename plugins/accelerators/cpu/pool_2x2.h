/* 2x2 max pooling, stride 2, no padding, vectorised (pool_2x2.c): f32, and
 * u16 for f16 and bf16 (nan_min: the largest non-NaN magnitude bits,
 * 0x7c00 for f16, 0x7f80 for bf16; unused for f32). Same contract as
 * cpu_max_pool_fwd and cpu_max_pool_bwd with beta 0 (lt/accelerator.h),
 * geometry already checked; each returns false, having written nothing,
 * when a row has fewer than 4 windows. */
#ifndef LT_CPU_POOL_2X2_H
#define LT_CPU_POOL_2X2_H

#include <stdbool.h>
#include "cpu_internal.h"

bool cpu_max_pool_2x2_fwd_f32(const float *x, const lt_conv_geom *g, float *y, int32_t *arg,
                              int32_t nan_min);
bool cpu_max_pool_2x2_bwd_f32(const float *dy, const int32_t *arg, const lt_conv_geom *g,
                              float *dx);
bool cpu_max_pool_2x2_fwd_u16(const uint16_t *x, const lt_conv_geom *g, uint16_t *y,
                              int32_t *arg, int32_t nan_min);
bool cpu_max_pool_2x2_bwd_u16(const uint16_t *dy, const int32_t *arg, const lt_conv_geom *g,
                              uint16_t *dx);

#endif
