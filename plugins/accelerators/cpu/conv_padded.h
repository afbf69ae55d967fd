/* Unit-stride im2col and col2im through a zero-padded copy of each channel
 * (conv_padded.c). Each returns false, having written nothing, for a
 * geometry it does not take (stride above 1, a padded plane above 4096
 * elements, an output row shorter than 16 bytes); conv.c's
 * general loops run those. Same arguments and results as cpu_im2col and
 * cpu_col2im (lt/accelerator.h), geometry already checked. */
#ifndef LT_CPU_CONV_PADDED_H
#define LT_CPU_CONV_PADDED_H

#include <stdbool.h>
#include "cast_simd.h"
#include "cpu_internal.h"

#define DECL_PADDED_IM2COL(T, S, C, LD, ST)                                                  \
    bool cpu_im2col_padded_##S(const T *x, const lt_conv_geom *g, T *col);
CPU_FOR_FLOAT_TYPES(DECL_PADDED_IM2COL)
/* col2im: f32 and f64 sum in their own type, f16 and bf16 in fp32 and round
 * once; widen: F16C's f16 -> f32 loop for a 16-bit col, or NULL to widen
 * element by element (cast_simd.h's cpu_cast_f16_stage; NULL for f32, f64) */
#define DECL_PADDED_COL2IM(T, S, C, LD, ST)                                                  \
    bool cpu_col2im_padded_##S(const T *col, const lt_conv_geom *g, T *x, C beta,            \
                               cpu_cast_fn widen);
CPU_FOR_FLOAT_TYPES(DECL_PADDED_COL2IM)
#undef DECL_PADDED_IM2COL
#undef DECL_PADDED_COL2IM

#endif
