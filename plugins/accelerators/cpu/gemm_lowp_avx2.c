/* The 16-bit GEMM kernels on AVX2 + FMA + F16C (gemm_lowp_avx2.h): the
 * STREAM and PACKED paths, which share a 6 x 16 micro-kernel (12 ymm
 * accumulators, as lt's AVX2 f32 kernels, gemm_avx2.c); DOT is in
 * gemm_lowp_dot.c. The entry points and the rule that picks a path.
 *
 * Why not convert whole operands and run the f32 GEMM (gemm_lowp.c does
 * that where these do not run): the separate pass writes an fp32 copy of
 * each operand to memory for the GEMM to read back, 3-10% of the f32
 * GEMM's time on the MLP's wide shapes and 15-30% where C is thin (the
 * 10-wide logits layer) or k tiny (a 3x3 convolution on one channel,
 * k = 9). Here an operand is widened where the kernel touches it: into a
 * panel that stays in L1/L2 (A always; B in PACKED), or in registers right
 * before the FMAs (B's rows in STREAM), and C is rounded in registers as it
 * is stored.
 *
 * Sums of more than one k block are kept in an fp32 copy of C between the
 * blocks, so C is rounded to 16 bits once whatever k is. KC, MC and NC were
 * measured on the MLP's shapes (AMD EPYC, Zen 3: 32 KiB L1, 512 KiB L2):
 * KC 256 (BLIS's choice, the panels in L1) left the 784- and 1024-long sums
 * in 3-4 blocks and ran 5-10% below OpenBLAS's f32 there; 1024 with MC 48
 * runs at 1.0-1.2x of it on every MLP shape. The file builds for the base
 * ISA; only the kernels carry the target attribute, and gemm_lowp.c calls
 * them only where cpu_hgemm_avx2_usable(). */
#include "gemm_lowp_avx2.h"

#include <pthread.h>
#include "gemm_avx2.h"

enum {
    MR = 6,    /* rows of A per panel, of C per tile */
    NR = 16,   /* columns of B per panel, of C per tile */
    AP = 8,    /* floats per k step in an A panel (MR rounded up: aligned rows) */
    KC = 1024, /* k block (an A panel 32 KiB, a B panel 64 KiB: L2) */
    KC_STREAM = 256, /* STREAM's: the 16-bit rows of a strip (a cache line each) stay in L1 */
    MC = 48,   /* rows of A packed per block (256 KiB of panels: half of L2) */
    NC = 1024, /* columns of B packed per block (4 MiB: L3) */
    MAX_PANELS = (MC + MR - 1) / MR
};

/* Where STREAM and PACKED keep their fp32 panels in the scratch: k in
 * even blocks of kb (288: 144 + 144, not 256 + 32; a multiple of 8), B's
 * panels (PACKED: a block's strips of NR columns, kb x NR each; STREAM: the
 * one partial strip), A's panels (MAX_PANELS, kb x AP each) and, when k
 * takes several blocks, the fp32 copy of C (m x n). */
typedef struct tiles_layout {
    int64_t kb, b_floats, a_floats, part_floats;
} tiles_layout;

static tiles_layout layout_of(bool stream, int64_t m, int64_t n, int64_t k) {
    int64_t kmax = stream ? KC_STREAM : KC;
    int64_t blocks = (k + kmax - 1) / kmax, kb = ((k + blocks - 1) / blocks + 7) / 8 * 8;
    int64_t strips = stream ? 1 : ((n < NC ? n : NC) + NR - 1) / NR;
    int64_t np = ((m < MC ? m : MC) + MR - 1) / MR;
    return (tiles_layout){kb, kb * NR * strips, np * kb * AP, blocks > 1 ? m * n : 0};
}

#if defined(__x86_64__) && defined(__GNUC__)
#include "gemm_lowp_simd.h"
#include "avx2_transpose8.h"

/* ---- packing -------------------------------------------------------------- */

/* rows x cols of a 16-bit matrix (src[r * ld + c]) widened and transposed:
 * dst[c * ldd + r] for r < rows <= 8, c < cols <= 8; rows past `rows` are
 * zero in dst. */
INL void widen_transpose8(bool bf, float *dst, int64_t ldd, const uint16_t *src, int64_t ld,
                          int rows, int cols) {
    __m256 v[8];
    for (int r = 0; r < 8; r++)
        v[r] = r >= rows   ? _mm256_setzero_ps()
               : cols == 8 ? widen8(bf, src + r * ld)
                           : widen_part(bf, src + r * ld, cols);
    avx2_transpose8(v);
    for (int c = 0; c < cols; c++) _mm256_storeu_ps(dst + c * ldd, v[c]);
}

/* An A panel: ap[p * AP + i] = op(A)[i0 + i, p0 + p] for i < mr (<= MR),
 * p < kc. Lanes mr .. AP-1 hold anything (zeros, or the next rows):
 * a tile broadcasts rows < mr only. */
static KERN void pack_a(bool bf, bool ta, const uint16_t *a, int64_t lda, int64_t m,
                        int64_t i0, int mr, int64_t p0, int64_t kc, float *ap) {
    if (ta) { /* op(A)[i, p] = a[p * lda + i]: each k step is mr consecutive values */
        if (i0 + 8 <= m) {
            for (int64_t p = 0; p < kc; p++)
                _mm256_storeu_ps(ap + p * AP, widen8(bf, a + (p0 + p) * lda + i0));
        } else if (m >= 8) { /* the last panel: the row's last 8, shifted down into place */
            __m256i shift = _mm256_add_epi32(_mm256_set1_epi32((int)(i0 - (m - 8))),
                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            for (int64_t p = 0; p < kc; p++)
                _mm256_storeu_ps(ap + p * AP, _mm256_permutevar8x32_ps(
                                                  widen8(bf, a + (p0 + p) * lda + m - 8), shift));
        } else {
            for (int64_t p = 0; p < kc; p++)
                _mm256_storeu_ps(ap + p * AP, widen_part(bf, a + (p0 + p) * lda + i0, mr));
        }
        return;
    }
    /* op(A)[i, p] = a[i * lda + p]: rows along k, transposed 8 k at a time */
    const uint16_t *src = a + i0 * lda + p0;
    for (int64_t p = 0; p < kc; p += 8)
        widen_transpose8(bf, ap + p * AP, AP, src + p, lda, mr, kc - p < 8 ? (int)(kc - p) : 8);
}

/* A B panel (gemm_lowp_simd.h); YT packs op(A)^T with it. */
KERN void cpu_hgemm_pack_b(bool bf, bool tb, const uint16_t *b, int64_t ldb, int64_t p0,
                           int64_t kc, int64_t j0, int nr, float *bp) {
    if (!tb) { /* op(B)[p, j] = b[p * ldb + j]: rows along n */
        for (int64_t p = 0; p < kc; p++) {
            const uint16_t *src = b + (p0 + p) * ldb + j0;
            __m256 lo, hi;
            if (nr == NR) {
                lo = widen8(bf, src), hi = widen8(bf, src + 8);
            } else {
                lo = widen_part(bf, src, nr < 8 ? nr : 8);
                hi = nr > 8 ? widen_part(bf, src + 8, nr - 8) : _mm256_setzero_ps();
            }
            _mm256_storeu_ps(bp + p * NR, lo);
            _mm256_storeu_ps(bp + p * NR + 8, hi);
        }
        return;
    }
    /* op(B)[p, j] = b[j * ldb + p]: columns along k, transposed 8 x 8 */
    for (int h = 0; h < NR; h += 8) {
        int cols = nr - h < 0 ? 0 : nr - h > 8 ? 8 : nr - h;
        if (!cols) { /* padding columns: zeros */
            for (int64_t p = 0; p < kc; p++) _mm256_storeu_ps(bp + p * NR + h, _mm256_setzero_ps());
            continue;
        }
        const uint16_t *src = b + (j0 + h) * ldb + p0;
        for (int64_t p = 0; p < kc; p += 8)
            widen_transpose8(bf, bp + p * NR + h, NR, src + p, ldb, cols,
                             kc - p < 8 ? (int)(kc - p) : 8);
    }
}

/* ---- the 6 x 16 tile ------------------------------------------------------------ */

/* What a tile does with its sums: `part` is the fp32 copy of C between k
 * blocks (row stride ldp); the last block adds it (part_in), scales by
 * alpha, adds beta C and rounds into C (final). */
typedef struct tile_out {
    float alpha, beta;
    bool part_in, final;
    int64_t ldp;
} tile_out;

/* One row of a tile: v0, v1 are columns 0-7 and 8-15, nr (1..16) of them
 * are C's. beta 0 never reads C. */
INL void tile_row(bool bf, __m256 v0, __m256 v1, int nr, uint16_t *c, float *part,
                  const tile_out *o) {
    __m256i m0 = lanes(nr), m1 = lanes(nr - 8);
    if (o->part_in) {
        v0 = _mm256_add_ps(v0, _mm256_maskload_ps(part, m0));
        v1 = _mm256_add_ps(v1, _mm256_maskload_ps(part + 8, m1));
    }
    if (!o->final) {
        _mm256_maskstore_ps(part, m0, v0);
        _mm256_maskstore_ps(part + 8, m1, v1);
        return;
    }
    if (o->alpha != 1.0f) {
        __m256 va = _mm256_set1_ps(o->alpha);
        v0 = _mm256_mul_ps(v0, va);
        v1 = _mm256_mul_ps(v1, va);
    }
    if (nr == NR) {
        if (o->beta != 0.0f) {
            __m256 vb = _mm256_set1_ps(o->beta);
            v0 = _mm256_fmadd_ps(vb, widen8(bf, c), v0);
            v1 = _mm256_fmadd_ps(vb, widen8(bf, c + 8), v1);
        }
        narrow8(bf, c, v0);
        narrow8(bf, c + 8, v1);
        return;
    }
    int n0 = nr < 8 ? nr : 8, n1 = nr - n0;
    if (o->beta != 0.0f) {
        __m256 vb = _mm256_set1_ps(o->beta);
        v0 = _mm256_fmadd_ps(vb, widen_part(bf, c, n0), v0);
        if (n1) v1 = _mm256_fmadd_ps(vb, widen_part(bf, c + 8, n1), v1);
    }
    narrow_part(bf, c, v0, n0);
    if (n1) narrow_part(bf, c + 8, v1, n1);
}

/* tile_row for a full-width bf16 tile whose sums are in unpack order
 * (streamed bf16 rows): the fp32 copy of C keeps that order too, which is
 * consistent because a strip is streamed in every k block or in none. */
INL void tile_row_il(bool bf, __m256 v0, __m256 v1, int nr, uint16_t *c, float *part,
                     const tile_out *o) {
    (void)bf, (void)nr;
    if (o->part_in) {
        v0 = _mm256_add_ps(v0, _mm256_loadu_ps(part));
        v1 = _mm256_add_ps(v1, _mm256_loadu_ps(part + 8));
    }
    if (!o->final) {
        _mm256_storeu_ps(part, v0);
        _mm256_storeu_ps(part + 8, v1);
        return;
    }
    if (o->alpha != 1.0f) {
        __m256 va = _mm256_set1_ps(o->alpha);
        v0 = _mm256_mul_ps(v0, va);
        v1 = _mm256_mul_ps(v1, va);
    }
    if (o->beta != 0.0f) {
        __m256 vb = _mm256_set1_ps(o->beta), c0, c1;
        bf16_widen16_il(c, &c0, &c1);
        v0 = _mm256_fmadd_ps(vb, c0, v0);
        v1 = _mm256_fmadd_ps(vb, c1, v1);
    }
    bf16_narrow16_il(c, v0, v1);
}

/* sum_p A[i, p] B[p, 0:16] for i < mr over kc steps, then tile_row. A from
 * a panel (ap[p * AP + i]); B from a panel (packed: bp[p * NR + j]) or
 * from 16-bit rows of full width (stream: b16[p * ldb + j]). A macro so
 * the accumulators have literal sizes and live in registers. */
typedef void (*tile_fn)(int64_t kc, const float *ap, const void *b, int64_t ldb, uint16_t *c,
                        int64_t ldc, float *part, int nr, const tile_out *o);

#define LOAD_PACKED(bf)                                                                    \
    __m256 b0 = _mm256_loadu_ps((const float *)b + p * NR);                                \
    __m256 b1 = _mm256_loadu_ps((const float *)b + p * NR + 8);
#define LOAD_STREAM(bf)                                                                    \
    __m256 b0 = widen8(bf, (const uint16_t *)b + p * ldb);                                 \
    __m256 b1 = widen8(bf, (const uint16_t *)b + p * ldb + 8);
#define LOAD_STREAM_IL(bf)                                                                 \
    __m256 b0, b1;                                                                         \
    bf16_widen16_il((const uint16_t *)b + p * ldb, &b0, &b1);

#define TILE_FN(NAME, BF, LOAD, ROW, ROWS)                                                 \
    static KERN void NAME##_##ROWS(int64_t kc, const float *ap, const void *b, int64_t ldb, \
                                   uint16_t *c, int64_t ldc, float *part, int nr,          \
                                   const tile_out *o) {                                    \
        (void)ldb;                                                                         \
        __m256 acc[ROWS][2];                                                               \
        _Pragma("GCC unroll 6") for (int i = 0; i < ROWS; i++) acc[i][0] = acc[i][1] =     \
            _mm256_setzero_ps();                                                           \
        for (int64_t p = 0; p < kc; p++) {                                                 \
            LOAD(BF)                                                                       \
            _Pragma("GCC unroll 6") for (int i = 0; i < ROWS; i++) {                       \
                __m256 av = _mm256_broadcast_ss(ap + p * AP + i);                          \
                acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);                            \
                acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);                            \
            }                                                                              \
        }                                                                                  \
        _Pragma("GCC unroll 6") for (int i = 0; i < ROWS; i++)                             \
            ROW(BF, acc[i][0], acc[i][1], nr, c + i * ldc, part + i * o->ldp, o);          \
    }
#define TILE_ROWS(X, NAME, BF, LOAD, ROW)                                                  \
    X(NAME, BF, LOAD, ROW, 1) X(NAME, BF, LOAD, ROW, 2) X(NAME, BF, LOAD, ROW, 3)          \
    X(NAME, BF, LOAD, ROW, 4) X(NAME, BF, LOAD, ROW, 5) X(NAME, BF, LOAD, ROW, 6)
TILE_ROWS(TILE_FN, packed_h, false, LOAD_PACKED, tile_row)
TILE_ROWS(TILE_FN, packed_bf, true, LOAD_PACKED, tile_row)
TILE_ROWS(TILE_FN, stream_h, false, LOAD_STREAM, tile_row)
TILE_ROWS(TILE_FN, stream_bf, true, LOAD_STREAM_IL, tile_row_il)

#define TILE_PTR(NAME, BF, LOAD, ROW, ROWS) NAME##_##ROWS,
/* [bf16][stream][rows - 1] */
static const tile_fn tiles[2][2][MR] = {
    {{TILE_ROWS(TILE_PTR, packed_h, 0, 0, 0)}, {TILE_ROWS(TILE_PTR, stream_h, 0, 0, 0)}},
    {{TILE_ROWS(TILE_PTR, packed_bf, 0, 0, 0)}, {TILE_ROWS(TILE_PTR, stream_bf, 0, 0, 0)}},
};

/* Splits mc rows into panels of at most MR rows, as even as can be (10
 * rows: 5 + 5, not 6 + 4: no tile runs mostly empty). */
static int panels(int64_t mc, int rows[MAX_PANELS]) {
    int np = (int)((mc + MR - 1) / MR), base = (int)(mc / np), extra = (int)(mc % np);
    for (int q = 0; q < np; q++) rows[q] = base + (q < extra);
    return np;
}

/* STREAM and PACKED: k blocks outermost (the fp32 copy of C carries the
 * sums between them), then BLIS's loops: a block of B columns packed (or,
 * streaming, only its last partial 16 columns), a block of A rows packed
 * into panels, each 16-column strip of B against every panel. */
static KERN void run_tiles(bool bf, bool stream, bool ta, bool tb, int64_t m, int64_t n,
                           int64_t k, float alpha, const uint16_t *a, int64_t lda,
                           const uint16_t *b, int64_t ldb, float beta, uint16_t *c, int64_t ldc,
                           float *scratch) {
    tiles_layout l = layout_of(stream, m, n, k);
    int64_t kb = l.kb, n_full = stream ? n / NR * NR : 0; /* streamed columns */
    float *bp = scratch, *ap = bp + l.b_floats, *part = ap + l.a_floats;
    int rows[MAX_PANELS];
    for (int64_t p0 = 0; p0 < k; p0 += kb) {
        int64_t kc = k - p0 < kb ? k - p0 : kb;
        tile_out o = {alpha, beta, p0 > 0, p0 + kc == k, n};
        for (int64_t j0 = 0; j0 < n; j0 += NC) {
            int64_t nc = n - j0 < NC ? n - j0 : NC;
            for (int64_t jr = j0; jr < j0 + nc; jr += NR) /* the strips not streamed */
                if (jr >= n_full)
                    cpu_hgemm_pack_b(bf, tb, b, ldb, p0, kc, jr, n - jr < NR ? (int)(n - jr) : NR,
                                     bp + (stream ? 0 : (jr - j0) * kc));
            for (int64_t i0 = 0; i0 < m; i0 += MC) {
                int np = panels(m - i0 < MC ? m - i0 : MC, rows);
                for (int q = 0, r = 0; q < np; r += rows[q++])
                    pack_a(bf, ta, a, lda, m, i0 + r, rows[q], p0, kc, ap + q * kb * AP);
                for (int64_t jr = j0; jr < j0 + nc; jr += NR) {
                    int nr = n - jr < NR ? (int)(n - jr) : NR;
                    bool s = jr < n_full;
                    const void *src = s ? (const void *)(b + p0 * ldb + jr)
                                        : (const void *)(bp + (stream ? 0 : (jr - j0) * kc));
                    for (int q = 0, r = 0; q < np; r += rows[q++]) {
                        int64_t i = i0 + r;
                        tiles[bf][s][rows[q] - 1](kc, ap + q * kb * AP, src, ldb, c + i * ldc + jr,
                                                  ldc, part + i * n + jr, nr, &o);
                    }
                }
            }
        }
    }
}

/* ---- entry points ------------------------------------------------------------------- */

static bool avx2_ok;
static pthread_once_t avx2_once = PTHREAD_ONCE_INIT;

static void avx2_probe(void) { avx2_ok = cvt16_cpu_ok(); }

bool cpu_hgemm_avx2_usable(void) {
    pthread_once(&avx2_once, avx2_probe);
    return avx2_ok;
}

void cpu_hgemm_avx2(cpu_hgemm_path path, lt_dtype t, bool ta, bool tb, int64_t m, int64_t n,
                    int64_t k, float alpha, const uint16_t *a, int64_t lda, const uint16_t *b,
                    int64_t ldb, float beta, uint16_t *c, int64_t ldc, float *scratch) {
    bool bf = t == LT_BF16;
    /* A NaN alpha or beta becomes the default quiet NaN, so every NaN the
     * kernels make has zero low bits and the bf16 stores need no NaN test
     * (the result is NaN either way; BLAS does not say which). */
    if (alpha != alpha) alpha = __builtin_nanf("");
    if (beta != beta) beta = __builtin_nanf("");
    if (path == CPU_HGEMM_DOT)
        cpu_hgemm_dot_avx2(bf, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, scratch);
    else if (path == CPU_HGEMM_YT)
        cpu_hgemm_yt_avx2(bf, ta, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, scratch);
    else
        run_tiles(bf, path == CPU_HGEMM_STREAM, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                  ldc, scratch);
}

#else /* not x86-64 with GCC or Clang: gemm_lowp.c converts whole operands */

bool cpu_hgemm_avx2_usable(void) { return false; }

void cpu_hgemm_avx2(cpu_hgemm_path path, lt_dtype t, bool ta, bool tb, int64_t m, int64_t n,
                    int64_t k, float alpha, const uint16_t *a, int64_t lda, const uint16_t *b,
                    int64_t ldb, float beta, uint16_t *c, int64_t ldc, float *scratch) {
    (void)path, (void)t, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a;
    (void)lda, (void)b, (void)ldb, (void)beta, (void)c, (void)ldc, (void)scratch;
}

#endif

bool cpu_hgemm_avx2_fits(cpu_hgemm_path path, bool ta, bool tb) {
    return path == CPU_HGEMM_PACKED || (path == CPU_HGEMM_DOT && !ta) ||
           (path == CPU_HGEMM_STREAM && !tb) || (path == CPU_HGEMM_YT && tb);
}

int64_t cpu_hgemm_avx2_scratch(cpu_hgemm_path path, int64_t m, int64_t n, int64_t k) {
    if (path == CPU_HGEMM_DOT) return n * ((k + 15) / 16 * 16);
    if (path == CPU_HGEMM_YT) return cpu_hgemm_yt_scratch(m, n, k);
    tiles_layout l = layout_of(path == CPU_HGEMM_STREAM, m, n, k);
    return l.b_floats + l.a_floats + l.part_floats;
}

/* Measured on the MLP's and the CNN's shapes (lowp_gemm_bench; AMD EPYC
 * Zen 3, one thread), against lt's AVX2 f32 path on the same shapes:
 *   - DOT where C is thin (n <= 16: the logits layer's forward, a
 *     convolution's weight gradient over 9 columns, a bias gradient): 1.1-2.5x
 *     (PACKED wastes most of each 16-wide tile there, 0.7-0.9x);
 *   - STREAM where C has few rows (a thin weight gradient, m <= 16) or k is
 *     tiny (the logits layer's input gradient, k = 10; a one-channel 3x3
 *     convolution, k = 9): 1.1-1.9x, where packing B costs more than the
 *     few products per element it feeds;
 *   - YT where B is stored transposed and op(A) is short against k (the
 *     f32 path's own rule for its Y^T, lt_sgemm_nt_by_yt): the MLP's
 *     forward at batch 64, 0.95-0.96x on 64 x 512 x 512 where PACKED ran
 *     0.92x, 0.94x on 64 x 512 x 784 (0.93x); even with PACKED on the
 *     CNN's (64 x 288 x 196: 0.88-0.89x; 64 x 128 x 3136: 0.94-0.95x);
 *   - PACKED for the rest: 0.94-1.19x (0.94: the second convolution's
 *     forward, 64 x 196 x 288). */
cpu_hgemm_path cpu_hgemm_avx2_pick(bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
    if (!ta && n <= 16) return CPU_HGEMM_DOT;
    if (tb && lt_sgemm_nt_by_yt(m, k)) return CPU_HGEMM_YT;
    if (!tb && (m <= 16 || k <= 16)) return CPU_HGEMM_STREAM;
    return CPU_HGEMM_PACKED;
}
