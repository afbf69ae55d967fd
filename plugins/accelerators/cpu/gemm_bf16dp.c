/* The bf16 GEMM on vdpbf16ps (gemm_bf16dp.h), native build; the emulated
 * one is this file again (gemm_bf16dp_emu.c).
 *
 * The instruction multiplies the two bf16 halves of each 32-bit lane of one
 * operand by those of the other and adds both products to the lane's fp32.
 * So op(B) is packed k-pair-interleaved: lane j of pair p holds B[2p][j]
 * (low half) and B[2p+1][j]; op(A)'s pair (A[i][2p], A[i][2p+1]) is one
 * 32-bit word, broadcast to every lane: each instruction adds
 * A[i][2p] B[2p][j] + A[i][2p+1] B[2p+1][j] to C[i][j] for 16 columns. An
 * odd k pads its last pair with a zero, rows past m and columns past n with
 * zeros; they are computed and never stored.
 *
 * Blocking: all of op(B) is packed once (n/32 blocks of 32 columns, every
 * pair), then op(A) a panel of 8 rows at a time, each panel run against
 * every block: 8 x 32 of C in 16 registers, two loads of B and 8
 * broadcasts of A per pair for 16 dot products. On the MLP's shapes packed
 * B is at most 1.6 MiB (batch 1024's weight gradient), read from L2 (or
 * L3) once per panel. */
#include <string.h>
#include "gemm_bf16dp.h"

#if defined(LT_BF16DP_NO_NATIVE) && !defined(BF16DP_EMULATED)
/* No native build here (CMakeLists.txt): cpu_bf16dp_native_usable says no,
 * so nothing calls this; it computes what the native kernel would. */
void cpu_bf16dp_native(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                       const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
                       float beta, uint16_t *c, int64_t ldc, void *scratch, cpu_cast_fn widen,
                       cpu_cast_fn narrow) {
    cpu_bf16dp_emulated(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, scratch, widen,
                        narrow);
}
#else

#ifdef BF16DP_EMULATED
#define SIMDE_NO_NATIVE /* emulated even where the global flags allow AVX-512 BF16 */
#endif
#include <simde/x86/avx512.h>

#ifndef BF16DP_EMULATED
#if !defined(SIMDE_X86_AVX512BF16_NATIVE) || !defined(SIMDE_X86_AVX512F_NATIVE)
#error "gemm_bf16dp.c needs -mavx512f -mavx512bw -mavx512vl -mavx512bf16 (CMakeLists.txt)"
#endif
#define BF16DP_NAME cpu_bf16dp_native
#else
#define BF16DP_NAME cpu_bf16dp_emulated
#endif

#define MR 8  /* rows of C per register tile */
#define NR 32 /* columns: two registers of 16 fp32 */

static inline int64_t pairs_of(int64_t k) { return (k + 1) / 2; }

/* The word of two bf16 for lane j, pair p: element 2p low, 2p + 1 high. */
static inline uint32_t pair_word(uint16_t lo, uint16_t hi) {
    return (uint32_t)lo | (uint32_t)hi << 16;
}

/* Pair p of row r of a matrix X (rows x k) stored as given (x[r ld + kk])
 * or transposed (x[kk ld + r]): elements 2p and 2p + 1, the latter 0 past k. */
static inline uint32_t pair_at(const uint16_t *x, int64_t ld, bool trans, int64_t r, int64_t p,
                               int64_t k) {
    int64_t k0 = 2 * p, k1 = 2 * p + 1;
    uint16_t lo = trans ? x[k0 * ld + r] : x[r * ld + k0];
    uint16_t hi = k1 < k ? (trans ? x[k1 * ld + r] : x[r * ld + k1]) : 0;
    return pair_word(lo, hi);
}

/* op(B) (k x n; B stored n x k when tb) into blocks of NR columns, each
 * block every pair in order, each pair NR words: column j of op(B) is row j
 * of B stored as given when tb, transposed when not. */
static void pack_b(bool tb, int64_t n, int64_t k, const uint16_t *b, int64_t ldb, uint32_t *out) {
    int64_t kp = pairs_of(k);
    for (int64_t j0 = 0; j0 < n; j0 += NR) {
        uint32_t *blk = out + (j0 / NR) * kp * NR;
        int64_t w = n - j0 < NR ? n - j0 : NR;
        for (int64_t p = 0; p < kp; p++) {
            uint32_t *dst = blk + p * NR;
            for (int64_t jj = 0; jj < w; jj++) dst[jj] = pair_at(b, ldb, !tb, j0 + jj, p, k);
            for (int64_t jj = w; jj < NR; jj++) dst[jj] = 0;
        }
    }
}

/* Rows i0 .. i0 + rows of op(A) (m x k; A stored k x m when ta) as MR
 * words per pair. */
static void pack_a(bool ta, int64_t k, const uint16_t *a, int64_t lda, int64_t i0, int64_t rows,
                   uint32_t *out) {
    int64_t kp = pairs_of(k);
    for (int64_t p = 0; p < kp; p++) {
        uint32_t *dst = out + p * MR;
        for (int64_t ii = 0; ii < rows; ii++) dst[ii] = pair_at(a, lda, ta, i0 + ii, p, k);
        for (int64_t ii = rows; ii < MR; ii++) dst[ii] = 0;
    }
}

static inline simde__m512bh as_bh(simde__m512i v) {
    simde__m512bh r;
    memcpy(&r, &v, sizeof r);
    return r;
}

static inline simde__m512bh load_bh(const uint32_t *p) {
    return as_bh(simde_mm512_loadu_si512((const void *)p));
}

/* acc (MR x NR fp32, dense) = the panel's rows times the block's columns. */
static void tile(int64_t kp, const uint32_t *ap, const uint32_t *bp, float *acc) {
    simde__m512 c[MR][2];
    for (int i = 0; i < MR; i++) c[i][0] = c[i][1] = simde_mm512_setzero_ps();
    for (int64_t p = 0; p < kp; p++) {
        simde__m512bh b0 = load_bh(bp + p * NR), b1 = load_bh(bp + p * NR + 16);
        for (int i = 0; i < MR; i++) {
            simde__m512bh ai = as_bh(simde_mm512_set1_epi32((int32_t)ap[p * MR + i]));
            c[i][0] = simde_mm512_dpbf16_ps(c[i][0], ai, b0);
            c[i][1] = simde_mm512_dpbf16_ps(c[i][1], ai, b1);
        }
    }
    for (int i = 0; i < MR; i++) {
        simde_mm512_storeu_ps(acc + i * NR, c[i][0]);
        simde_mm512_storeu_ps(acc + i * NR + 16, c[i][1]);
    }
}

/* C's rows i0 .. i0 + rows, columns j0 .. j0 + cols from the tile, each
 * element rounded once. */
static void store(const float *acc, int64_t rows, int64_t cols, float alpha, float beta,
                  uint16_t *c, int64_t ldc, int64_t i0, int64_t j0, float *row, cpu_cast_fn widen,
                  cpu_cast_fn narrow) {
    for (int64_t ii = 0; ii < rows; ii++) {
        uint16_t *dst = c + (i0 + ii) * ldc + j0;
        const float *t = acc + ii * NR;
        if (beta != 0.0f) {
            widen(row, dst, cols);
            for (int64_t j = 0; j < cols; j++) row[j] = alpha * t[j] + beta * row[j];
        } else {
            for (int64_t j = 0; j < cols; j++) row[j] = alpha * t[j];
        }
        narrow(dst, row, cols);
    }
}

void BF16DP_NAME(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t *a,
                 int64_t lda, const uint16_t *b, int64_t ldb, float beta, uint16_t *c, int64_t ldc,
                 void *scratch, cpu_cast_fn widen, cpu_cast_fn narrow) {
    int64_t kp = pairs_of(k), nb = (n + NR - 1) / NR;
    uint32_t *pb = scratch, *pa = pb + nb * kp * NR;
    float *acc = (float *)(pa + ((kp * MR + 15) & ~(int64_t)15)), *row = acc + MR * NR;
    pack_b(tb, n, k, b, ldb, pb);
    for (int64_t i0 = 0; i0 < m; i0 += MR) {
        int64_t rows = m - i0 < MR ? m - i0 : MR;
        pack_a(ta, k, a, lda, i0, rows, pa);
        for (int64_t jb = 0; jb < nb; jb++) {
            int64_t j0 = jb * NR, cols = n - j0 < NR ? n - j0 : NR;
            tile(kp, pa, pb + jb * kp * NR, acc);
            store(acc, rows, cols, alpha, beta, c, ldc, i0, j0, row, widen, narrow);
        }
    }
}
#endif
