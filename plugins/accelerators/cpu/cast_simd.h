/* The f32 <-> f16 and f32 <-> bf16 conversion loops, in two forms: the
 * portable ones (half.h element by element) and vector ones (F16C for f16,
 * AVX2 integer rounding for bf16) that give the same bits for every input,
 * NaN payloads, subnormals and ties included. cast.c and the 16-bit GEMM
 * (gemm_lowp.c) take the fastest the CPU runs; the unit test
 * (test_cpu_lowp) compiles this file in and checks both forms. Internal to
 * the cpu accelerator; depends on nothing else of it. */
#ifndef LT_CPU_CAST_SIMD_H
#define LT_CPU_CAST_SIMD_H

#include <stdbool.h>
#include <stdint.h>
#include "lt/core.h"

/* dst[i] = src[i] converted, for i < n. dst and src do not overlap. */
typedef void (*cpu_cast_fn)(void *dst, const void *src, int64_t n);

typedef enum cpu_cast_impl {
    CPU_CAST_SCALAR = 0, /* half.h, any CPU */
    CPU_CAST_VECTOR = 1, /* x86-64 with AVX2, FMA and F16C */
    CPU_CAST_IMPLS
} cpu_cast_impl;

/* The loop for dst_t <- src_t in `impl`, for the four pairs f32 <-> f16 and
 * f32 <-> bf16; NULL for any other pair, or when this CPU cannot run impl. */
cpu_cast_fn cpu_cast_lowp_fn(lt_dtype dst_t, lt_dtype src_t, cpu_cast_impl impl);

/* The fastest loop this CPU runs for the pair (vector, else scalar); NULL
 * for a pair that is not one of the four. Chosen once per process. */
cpu_cast_fn cpu_cast_lowp_best(lt_dtype dst_t, lt_dtype src_t);

/* For kernels that widen f16 a block at a time instead of element by element
 * (pooling, col2im, add_bias): the F16C loop when t is f16 and this CPU runs
 * it, else NULL (bf16's widening is a shift, cheaper inline than staged). */
cpu_cast_fn cpu_cast_f16_stage(lt_dtype t);

#endif
