/* GEMM speed of the cpu accelerator on 16-bit data beside f32, in one run:
 * GF/s of its gemm kernel for f32, bf16 and f16 (the same call, only the
 * dtype differs) and of OpenBLAS's cblas_sbgemm (bf16 in, f32 out) where
 * the OpenBLAS the plugin loaded exports it, on the shapes training makes:
 * the MLP (784-512-512-10) at batch 64, 256 and 1024, as core/nn/layers.c
 * calls them (forward Y = X W^T, weight gradient dW = dY^T X, input
 * gradient dX = dY W), and the CNN example's per-image conv GEMMs
 * (core/nn/conv.c) and its linear layers at batch 64.
 *
 *   lowp_gemm_bench [--threads N] [--isa auto|avx2|avx512|generic] [--secs S]
 *                   [--bf16-gemm auto|widen|native|emulated]
 *
 * Each figure is the best of repeated calls for about S seconds (default
 * 0.2) on warm buffers, 2mnk / time. OpenBLAS runs N threads (default 1, as
 * train_bench and every dp/ddp worker). The ratio columns are bf16 / f32
 * and f16 / f32. --bf16-gemm sets the plugin's bf16_gemm parameter: native
 * puts AVX-512 BF16's dot products (gemm_bf16dp.c) under the bf16 column,
 * on a CPU that has them; bf16 / f32 there is what decides whether auto
 * should pick them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench_cpu.h"
#include "bench_plugin.h"

typedef void (*sbgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
                          const uint16_t *a, int lda, const uint16_t *b, int ldb, float beta,
                          float *c, int ldc);
enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 }; /* CBLAS's enum values */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct shape {
    const char *name;
    bool ta, tb;
    int m, n, k;
} shape;

typedef struct bench {
    bench_cpu cpu;
    sbgemm_fn sbgemm;
    void *a, *b, *c; /* big enough for any shape in any dtype */
    double secs;
} bench;

/* dtype 0 means cblas_sbgemm. Returns GF/s, or 0 when it cannot run. */
static double rate(bench *B, const shape *s, lt_dtype t) {
    if (!t && !B->sbgemm) return 0;
    int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n, ldc = s->n;
    double best = 1e30, start = now_s();
    for (int rep = 0; rep < 3 || (now_s() - start < B->secs && rep < 100000); rep++) {
        double t0 = now_s();
        if (t)
            B->cpu.k->gemm(&B->cpu.ctx, t, s->ta, s->tb, s->m, s->n, s->k, 1.0, B->a, lda, B->b,
                           ldb, 0.0, B->c, ldc);
        else
            B->sbgemm(ROW_MAJOR, s->ta ? TRANS : NO_TRANS, s->tb ? TRANS : NO_TRANS, s->m, s->n,
                      s->k, 1.0f, B->a, lda, B->b, ldb, 0.0f, B->c, ldc);
        double dt = now_s() - t0;
        if (dt < best) best = dt;
    }
    return 2.0 * s->m * s->n * s->k / best * 1e-9;
}

static void row(bench *B, const char *group, const shape *s) {
    double f32 = rate(B, s, LT_F32), bf = rate(B, s, LT_BF16), h = rate(B, s, LT_F16);
    double sb = rate(B, s, (lt_dtype)0);
    char dims[32];
    snprintf(dims, sizeof dims, "%dx%dx%d", s->m, s->n, s->k);
    printf("%-6s %-8s %-2s%-2s %-14s %7.1f %7.1f %7.1f ", group, s->name, s->ta ? "T" : "N",
           s->tb ? "T" : "N", dims, f32, bf, h);
    if (sb > 0)
        printf("%7.1f", sb);
    else
        printf("%7s", "n/a");
    printf("   %5.2f %5.2f\n", bf / f32, h / f32);
}

/* Fills with small values in every dtype's bits: 16-bit patterns of values
 * near 0.1 read as f32 pairs are small normal numbers too. */
static void fill(void *p, size_t bytes) {
    uint16_t *h = p;
    for (size_t i = 0; i < bytes / 2; i++) h[i] = (uint16_t)(0x2E00 + (i * 7919) % 512);
}

int main(int argc, char **argv) {
    const char *threads = "1", *isa = "auto", *bf16 = "auto";
    double secs = 0.2;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) secs = -1; /* a flag without its value: the usage below */
        else if (!strcmp(argv[i], "--threads")) threads = argv[i + 1];
        else if (!strcmp(argv[i], "--isa")) isa = argv[i + 1];
        else if (!strcmp(argv[i], "--secs")) secs = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--bf16-gemm")) bf16 = argv[i + 1];
        else secs = -1;
        if (!(secs > 0)) {
            fprintf(stderr, "usage: %s [--threads N] [--isa auto|avx2|avx512|generic] [--secs S] "
                    "[--bf16-gemm auto|widen|native|emulated]\n", argv[0]);
            return 2;
        }
    }
    bench B = {.secs = secs};
    int status = bench_open_cpu(&B.cpu, threads, isa, bf16);
    if (status) return status;
    /* The plugin's handle searches its dependencies: the OpenBLAS it uses. */
    B.sbgemm = (sbgemm_fn)dlsym(B.cpu.dl, "cblas_sbgemm");
    size_t bytes = (size_t)4 << 22; /* 4 Mi floats: 1024 x 3136 fits */
    B.a = aligned_alloc(64, bytes), B.b = aligned_alloc(64, bytes), B.c = aligned_alloc(64, bytes);
    if (!B.a || !B.b || !B.c) return 1;
    fill(B.a, bytes), fill(B.b, bytes), fill(B.c, bytes);

    bench_print_cpu();
    printf("# cpu gemm GF/s, OpenBLAS threads=%s, isa=%s, bf16_gemm=%s; sbgemm: %s\n", threads, isa,
           bf16,
           B.sbgemm ? "cblas_sbgemm (bf16 in, f32 out)"
                    : "n/a (this OpenBLAS exports no cblas_sbgemm: built without BFLOAT16)");
    printf("%-6s %-8s %-4s %-14s %7s %7s %7s %7s   %5s %5s\n", "group", "gemm", "op", "m x n x k",
           "f32", "bf16", "f16", "sbgemm", "bf/32", "h/32");
    static const int in[3] = {784, 512, 512}, out[3] = {512, 512, 10}, batch[3] = {64, 256, 1024};
    static const char *const names[3][3] = {{"fwd0", "wgrad0", "dgrad0"},
                                            {"fwd1", "wgrad1", "dgrad1"},
                                            {"fwd2", "wgrad2", "dgrad2"}};
    for (int bi = 0; bi < 3; bi++) {
        char group[16];
        snprintf(group, sizeof group, "mlp%d", batch[bi]);
        for (int l = 0; l < 3; l++) {
            int b = batch[bi];
            shape fwd = {names[l][0], false, true, b, out[l], in[l]};
            shape wgrad = {names[l][1], true, false, out[l], in[l], b};
            shape dgrad = {names[l][2], false, false, b, in[l], out[l]};
            row(&B, group, &fwd);
            row(&B, group, &wgrad);
            if (l > 0) row(&B, group, &dgrad);
        }
    }
    static const shape cnn[] = {
        {"c1.fwd", false, false, 32, 784, 9},   {"c1.bias", false, false, 32, 784, 1},
        {"c1.dW", false, true, 32, 9, 784},     {"c1.db", false, false, 32, 1, 784},
        {"c2.fwd", false, false, 64, 196, 288}, {"c2.dW", false, true, 64, 288, 196},
        {"c2.dX", true, false, 288, 196, 64},   {"fc1.fwd", false, true, 64, 128, 3136},
        {"fc1.wgr", true, false, 128, 3136, 64}, {"fc1.dgr", false, false, 64, 3136, 128},
        {"fc2.fwd", false, true, 64, 10, 128},  {"fc2.wgr", true, false, 10, 128, 64},
        {"fc2.dgr", false, false, 64, 128, 10},
    };
    for (size_t i = 0; i < sizeof cnn / sizeof *cnn; i++) row(&B, "cnn", &cnn[i]);
    lt_status st = bench_close_cpu(&B.cpu, "a gemm failed");
    free(B.a), free(B.b), free(B.c);
    return st == LT_OK ? 0 : 1;
}
