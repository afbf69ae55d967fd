/* sgd_step_mixed (ABI 1.8): mixed precision's SGD step in one pass over the
 * parameters. The three-pass way reads and writes every parameter's bytes
 * three times (cast the 16-bit gradients into fp32 master gradients, SGD on
 * the master, cast the master into the 16-bit compute copy): 32 bytes per
 * parameter with momentum, against 20 here (16-bit gradient in, master and
 * momentum in and out, 16-bit copy out), and at the MLP's 670k parameters
 * every pass streams from L3.
 *
 * Bit for bit the three passes' result: each element goes through the same
 * fp32 operations in the same order as cast, axpby (a * x), optim.c's
 * sgd_momentum_f32 / sgd_plain_f32 and cast, and both files are compiled
 * without contracting a * b + c into a fused multiply-add (CMakeLists.txt),
 * so the compiler cannot round the two differently. test_cpu_kernels_lowp
 * holds both loop sets to the three passes' bits. */
#include "cpu_internal.h"

/* The gradient arrives in GT (its reader GLD, exact) and the compute copy
 * leaves in HT via HST (round to nearest even, NaN kept), as cast.c's
 * conversions. */
#define DEF_SGD_MIXED(GT, GS, GLD, HS, HST)                                                \
    static CPU_HOT void sgd_mixed_plain_##GS##_##HS(float *restrict p, const void *gv,      \
                                                    float gmul, uint16_t *restrict h,      \
                                                    int64_t n, float lr, float wd) {       \
        const GT *restrict g = gv;                                                         \
        CPU_UNSWITCH(uint16_t, float, wd == 0, for (int64_t i = 0; i < n; i++) {           \
            float gi = gmul * GLD(g[i]);                                                   \
            float d = wd == 0 ? gi : gi + wd * p[i];                                       \
            float q = p[i] - lr * d;                                                       \
            p[i] = q;                                                                      \
            h[i] = HST(q);                                                                 \
        });                                                                                \
    }                                                                                      \
    static CPU_HOT void sgd_mixed_momentum_##GS##_##HS(                                    \
        float *restrict p, const void *gv, float gmul, float *restrict buf,                \
        uint16_t *restrict h, int64_t n, float lr, float wd, float mom, float keep,        \
        int nesterov, int first) {                                                         \
        const GT *restrict g = gv;                                                         \
        CPU_UNSWITCH(uint16_t, float, wd == 0, CPU_UNSWITCH(uint16_t, float, first,        \
        CPU_UNSWITCH(uint16_t, float, nesterov, for (int64_t i = 0; i < n; i++) {          \
            float gi = gmul * GLD(g[i]);                                                   \
            float d = wd == 0 ? gi : gi + wd * p[i];                                       \
            float b = first ? d : mom * buf[i] + keep * d;                                 \
            buf[i] = b;                                                                    \
            float q = p[i] - lr * (nesterov ? d + mom * b : b);                            \
            p[i] = q;                                                                      \
            h[i] = HST(q);                                                                 \
        });););                                                                            \
    }

#define DEF_SGD_MIXED_TO(GT, GS, GLD)                                                      \
    DEF_SGD_MIXED(GT, GS, GLD, f16, half_f32_to_f16)                                       \
    DEF_SGD_MIXED(GT, GS, GLD, bf16, half_f32_to_bf16)
DEF_SGD_MIXED_TO(float, f32, CPU_AS_IS)
DEF_SGD_MIXED_TO(uint16_t, f16, half_f16_to_f32)
DEF_SGD_MIXED_TO(uint16_t, bf16, half_bf16_to_f32)

/* The same in AVX2 + F16C, 16 elements a step: each operation as above,
 * written out (no FMA), the conversions cvt16_avx2.h's, which give half.h's
 * bits; the remainder goes to the loops above. GCC vectorises those, but
 * half.h's f16 rounding takes some 20 integer operations per vector, which
 * made the one pass slower for 16-mixed than cast_simd.c's F16C casts in
 * three (measured: 4.0 against 3.5 ms for the MLP's step at batch 64). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "cvt16_avx2.h"

typedef struct sgd_scalars {
    float gmul, lr, wd, mom, keep;
    int nesterov, first;
} sgd_scalars;

CVT16_INLINE __m256 load_f32(const void *g, int64_t i) { return _mm256_loadu_ps((const float *)g + i); }
CVT16_INLINE __m256 load_f16(const void *g, int64_t i) {
    return cvt16_f16x8_to_f32(_mm_loadu_si128((const __m128i *)((const uint16_t *)g + i)));
}
CVT16_INLINE __m256 load_bf16(const void *g, int64_t i) {
    return cvt16_bf16x8_to_f32(_mm_loadu_si128((const __m128i *)((const uint16_t *)g + i)));
}
CVT16_INLINE void store_f16(uint16_t *h, __m256 v) { _mm_storeu_si128((__m128i *)h, cvt16_f32x8_to_f16(v)); }

/* Two vectors to 16 bf16 in one store: one pack and one permute for both. */
CVT16_INLINE void store2_bf16(uint16_t *h, __m256 a, __m256 b) {
    __m256i ab = _mm256_packus_epi32(cvt16_f32x8_to_bf16_lanes(_mm256_castps_si256(a)),
                                     cvt16_f32x8_to_bf16_lanes(_mm256_castps_si256(b)));
    _mm256_storeu_si256((__m256i *)h, _mm256_permute4x64_epi64(ab, 0xD8)); /* a0-3 b0-3 a4-7 b4-7 */
}
CVT16_INLINE void store2_f16(uint16_t *h, __m256 a, __m256 b) {
    store_f16(h, a);
    store_f16(h + 8, b);
}

/* One vector of 8 updated in place; returns the new parameters. The flags
 * are locals of the caller: read through `s`, they would be loaded again
 * after every store (the stores may alias them as far as C knows). */
#define SGD_MIXED_AVX2_STEP(GS, i)                                                         \
    ({                                                                                     \
        __m256 pi_ = _mm256_loadu_ps(p + (i));                                             \
        __m256 d_ = _mm256_mul_ps(gmul, load_##GS(g, (i)));                                \
        if (has_wd) d_ = _mm256_add_ps(d_, _mm256_mul_ps(wd, pi_));                        \
        __m256 u_ = d_;                                                                    \
        if (buf) {                                                                         \
            __m256 b_ = first ? d_                                                         \
                              : _mm256_add_ps(_mm256_mul_ps(mom, _mm256_loadu_ps(buf + (i))), \
                                              _mm256_mul_ps(keep, d_));                    \
            _mm256_storeu_ps(buf + (i), b_);                                               \
            u_ = nesterov ? _mm256_add_ps(d_, _mm256_mul_ps(mom, b_)) : b_;                \
        }                                                                                  \
        __m256 q_ = _mm256_sub_ps(pi_, _mm256_mul_ps(lr, u_));                             \
        _mm256_storeu_ps(p + (i), q_);                                                     \
        q_;                                                                                \
    })

/* Returns how many leading elements it did (a multiple of 16). */
#define DEF_SGD_MIXED_AVX2(GS, HS)                                                         \
    static CVT16_TARGET int64_t sgd_mixed_avx2_##GS##_##HS(                                \
        float *p, const void *g, float *buf, uint16_t *h, int64_t n, const sgd_scalars *s) { \
        const __m256 gmul = _mm256_set1_ps(s->gmul), lr = _mm256_set1_ps(s->lr);          \
        const __m256 wd = _mm256_set1_ps(s->wd), mom = _mm256_set1_ps(s->mom);            \
        const __m256 keep = _mm256_set1_ps(s->keep);                                       \
        const bool has_wd = s->wd != 0, first = s->first, nesterov = s->nesterov;          \
        int64_t i = 0;                                                                     \
        for (; i + 16 <= n; i += 16) {                                                     \
            __m256 q0 = SGD_MIXED_AVX2_STEP(GS, i);                                        \
            __m256 q1 = SGD_MIXED_AVX2_STEP(GS, i + 8);                                    \
            store2_##HS(h + i, q0, q1);                                                    \
        }                                                                                  \
        return i;                                                                          \
    }
DEF_SGD_MIXED_AVX2(f32, f16)
DEF_SGD_MIXED_AVX2(f32, bf16)
DEF_SGD_MIXED_AVX2(f16, f16)
DEF_SGD_MIXED_AVX2(f16, bf16)
DEF_SGD_MIXED_AVX2(bf16, f16)
DEF_SGD_MIXED_AVX2(bf16, bf16)

typedef int64_t (*sgd_avx2_fn)(float *, const void *, float *, uint16_t *, int64_t,
                               const sgd_scalars *);
static const sgd_avx2_fn avx2_fns[3][2] = {
    {sgd_mixed_avx2_f32_f16, sgd_mixed_avx2_f32_bf16},
    {sgd_mixed_avx2_f16_f16, sgd_mixed_avx2_f16_bf16},
    {sgd_mixed_avx2_bf16_f16, sgd_mixed_avx2_bf16_bf16},
};

bool cpu_sgd_mixed_avx2_usable(void) { return cvt16_cpu_ok(); }
#else
bool cpu_sgd_mixed_avx2_usable(void) { return false; }
#endif

typedef void (*sgd_plain_fn)(float *, const void *, float, uint16_t *, int64_t, float, float);
typedef void (*sgd_momentum_fn)(float *, const void *, float, float *, uint16_t *, int64_t,
                                float, float, float, float, int, int);

/* [grad f32, f16, bf16][compute f16, bf16] */
#define SGD_MIXED_TABLE(kind)                                                              \
    {{sgd_mixed_##kind##_f32_f16, sgd_mixed_##kind##_f32_bf16},                             \
     {sgd_mixed_##kind##_f16_f16, sgd_mixed_##kind##_f16_bf16},                             \
     {sgd_mixed_##kind##_bf16_f16, sgd_mixed_##kind##_bf16_bf16}}
static const sgd_plain_fn plain_fns[3][2] = SGD_MIXED_TABLE(plain);
static const sgd_momentum_fn momentum_fns[3][2] = SGD_MIXED_TABLE(momentum);

void cpu_sgd_step_mixed(lt_ctx *ctx, void *param, lt_dtype grad_t, const void *grad,
                        double grad_mul, void *momentum_buf, lt_dtype compute_t, void *compute,
                        int64_t n, const lt_sgd_args *a) {
    int gi = grad_t == LT_F32 ? 0 : grad_t == LT_F16 ? 1 : grad_t == LT_BF16 ? 2 : -1;
    int hi = compute_t == LT_F16 ? 0 : compute_t == LT_BF16 ? 1 : -1;
    if (gi < 0 || hi < 0) {
        cpu_fail(ctx, LT_ERR_UNSUPPORTED,
                 "cpu sgd_step_mixed: gradients of %s and a compute copy of %s; it takes f32, "
                 "f16 or bf16 gradients and an f16 or bf16 copy",
                 lt_dtype_name(grad_t), lt_dtype_name(compute_t));
        return;
    }
    if (!cpu_sgd_args_ok(ctx, "sgd_step_mixed", a)) return;
    /* Every scalar rounded to f32 as sgd_step's and axpby's prototypes round them. */
    float lr = (float)a->lr, wd = (float)a->weight_decay;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    const cpu_state *st = lt_ctx_state(ctx);
    if (st && st->vec16) {
        float *buf = a->momentum == 0 ? NULL : momentum_buf;
        sgd_scalars sc = {(float)grad_mul, lr, wd, (float)a->momentum, (float)(1 - a->dampening),
                          a->nesterov, a->first_step};
        int64_t done = avx2_fns[gi][hi](param, grad, buf, compute, n, &sc);
        param = (float *)param + done;
        grad = (const char *)grad + (size_t)done * lt_dtype_size(grad_t);
        if (buf) momentum_buf = buf + done;
        compute = (uint16_t *)compute + done;
        n -= done;
    }
#endif
    if (a->momentum == 0)
        plain_fns[gi][hi](param, grad, (float)grad_mul, compute, n, lr, wd);
    else
        momentum_fns[gi][hi](param, grad, (float)grad_mul, momentum_buf, compute, n, lr, wd,
                             (float)a->momentum, (float)(1 - a->dampening), a->nesterov,
                             a->first_step);
}
