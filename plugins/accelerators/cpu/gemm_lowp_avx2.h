/* lt's 16-bit GEMM kernels on AVX2 + FMA + F16C (gemm_lowp_avx2.c): f16
 * or bf16 operands converted to fp32 as they are packed or loaded, fp32
 * FMAs, C rounded once as it is stored. Internal to the cpu accelerator;
 * gemm_lowp.c decides when they run. */
#ifndef LT_CPU_GEMM_LOWP_AVX2_H
#define LT_CPU_GEMM_LOWP_AVX2_H

#include <stdbool.h>
#include <stdint.h>
#include "lt/core.h"

/* The ways these kernels compute C = alpha op(A) op(B) + beta C:
 *   DOT     C[i, j] as dot products along k, 16 k at a time: A's rows are
 *           read in place and widened in registers, op(B)^T is widened to
 *           fp32 once. For a C of few columns; needs A not transposed
 *           (gemm_lowp_dot.c).
 *   STREAM  A widened into fp32 panels of up to 6 rows, B's rows read in
 *           place and widened in registers 16 columns at a time. For a C of
 *           few rows, or a tiny k; needs B not transposed.
 *   PACKED  both widened into fp32 panels (A in 6-row panels, B in
 *           16-column panels, BLIS's loops), any transposes.
 *   YT      Y^T = B op(A)^T: B's rows widened 6 at a time, unshuffled, and
 *           broadcast; op(A)^T packed in 16-column panels; an fp32 Y^T
 *           transposed into C. For a short op(A) against a B stored
 *           transposed (a forward at a small batch); needs B transposed
 *           (gemm_lowp_yt.c). */
typedef enum cpu_hgemm_path {
    CPU_HGEMM_NONE = 0, /* none of these: gemm_lowp.c's whole-operand conversion */
    CPU_HGEMM_DOT,
    CPU_HGEMM_STREAM,
    CPU_HGEMM_PACKED,
    CPU_HGEMM_YT,
    CPU_HGEMM_PATHS
} cpu_hgemm_path;

/* True when this CPU runs the kernels (AVX2, FMA and F16C). */
bool cpu_hgemm_avx2_usable(void);

/* Whether `path` can compute a product with these transposes at all. */
bool cpu_hgemm_avx2_fits(cpu_hgemm_path path, bool ta, bool tb);

/* The path that measured fastest for the shape against converting whole
 * operands for lt's AVX2 f32 path (gemm_lowp.c), or CPU_HGEMM_NONE. */
cpu_hgemm_path cpu_hgemm_avx2_pick(bool ta, bool tb, int64_t m, int64_t n, int64_t k);

/* fp32 scratch (in floats) the path needs for the shape. */
int64_t cpu_hgemm_avx2_scratch(cpu_hgemm_path path, int64_t m, int64_t n, int64_t k);
int64_t cpu_hgemm_yt_scratch(int64_t m, int64_t n, int64_t k); /* YT's part of it */

/* C = alpha op(A) op(B) + beta C, t = LT_F16 or LT_BF16, row-major as
 * cblas; beta 0 never reads C. Arguments valid, m, n, k > 0, alpha != 0,
 * path fits the transposes, the CPU runs the kernels, and scratch holds
 * cpu_hgemm_avx2_scratch floats, 32-byte aligned. */
void cpu_hgemm_avx2(cpu_hgemm_path path, lt_dtype t, bool ta, bool tb, int64_t m, int64_t n,
                    int64_t k, float alpha, const uint16_t *a, int64_t lda, const uint16_t *b,
                    int64_t ldb, float beta, uint16_t *c, int64_t ldc, float *scratch);

#endif
