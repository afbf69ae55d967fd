/* The cpu accelerator's data-movement kernels of a convolutional step, on
 * the CNN example's shapes at batch 64 (examples/fashion_mnist/cnn.c):
 * max pooling forward and backward over the two conv outputs (64 x 32 x
 * 28 x 28 and 64 x 64 x 14 x 14, 2x2 windows, stride 2), and im2col and
 * col2im of each image's conv input (1 x 28 x 28 and 32 x 14 x 14, 3x3,
 * padding 1), 64 calls each as core/nn/conv.c makes them. Figures are the
 * best of ROUNDS, in ms per training step's worth of calls, with the bytes
 * each moves per second (pooling: x, y and the argmax once each).
 *
 *   conv_kernels_bench [--isa auto|avx2|avx512|generic] [--rounds N]
 *
 * The CNN's step at batch 64 is about 28 ms on a 2-core AMD EPYC: these
 * kernels were 27% of it before the vectorised pooling and the padded
 * lowering, and are what to look at when the CNN's ratio against PyTorch
 * moves while its GEMMs do not. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench_cpu.h"
#include "bench_plugin.h"

enum { BATCH = 64 };

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *floats(int64_t n) {
    float *p = aligned_alloc(64, (size_t)n * sizeof(float));
    if (!p) {
        fprintf(stderr, "conv_kernels_bench: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++) p[i] = (float)((uint32_t)(i * 2654435761u) % 1000) / 500.0f - 1;
    return p;
}

static void min_of(double *best, double t) {
    if (t < *best) *best = t;
}

/* Pooling of one conv output [BATCH, c, hw, hw], then the lowering of one
 * image of the next conv's input [c_in, hw_in, hw_in]. */
static void run_layer(const lt_kernels *K, lt_ctx *C, int rounds, int64_t c, int64_t hw,
                      int64_t c_in, int64_t hw_in) {
    int64_t n = BATCH * c * hw * hw, ny = n / 4;
    float *x = floats(n), *dx = floats(n), *y = floats(ny), *dy = floats(ny);
    int32_t *arg = aligned_alloc(64, (size_t)ny * sizeof(int32_t));
    lt_conv_geom g = {BATCH * c, hw, hw, 2, 2, 2, 2, 0, 0, hw / 2, hw / 2};
    lt_conv_geom gc = {c_in, hw_in, hw_in, 3, 3, 1, 1, 1, 1, hw_in, hw_in};
    int64_t image = c_in * hw_in * hw_in, ncol = c_in * 9 * hw_in * hw_in;
    float *col = floats(ncol);
    double fwd = 1e9, bwd = 1e9, im = 1e9, back = 1e9;
    for (int r = 0; r < rounds && arg; r++) {
        double t0 = now_s();
        K->max_pool_fwd(C, LT_F32, x, &g, y, arg);
        double t1 = now_s();
        K->max_pool_bwd(C, LT_F32, dy, arg, &g, dx, 0.0);
        double t2 = now_s();
        for (int i = 0; i < BATCH; i++) K->im2col(C, LT_F32, x + i * image, &gc, col);
        double t3 = now_s();
        for (int i = 0; i < BATCH; i++) K->col2im(C, LT_F32, col, &gc, dx + i * image, 0.0);
        double t4 = now_s();
        min_of(&fwd, t1 - t0), min_of(&bwd, t2 - t1), min_of(&im, t3 - t2), min_of(&back, t4 - t3);
    }
    double pool_bytes = (double)(n + 2 * ny) * 4, low_bytes = (double)BATCH * (image + ncol) * 4;
    printf("max_pool_fwd  %3lldx%2lldx%2lld  %7.3f ms  %5.1f GB/s\n", (long long)c, (long long)hw,
           (long long)hw, fwd * 1e3, pool_bytes / fwd / 1e9);
    printf("max_pool_bwd  %3lldx%2lldx%2lld  %7.3f ms  %5.1f GB/s\n", (long long)c, (long long)hw,
           (long long)hw, bwd * 1e3, pool_bytes / bwd / 1e9);
    printf("im2col        %3lldx%2lldx%2lld  %7.3f ms  %5.1f GB/s\n", (long long)c_in,
           (long long)hw_in, (long long)hw_in, im * 1e3, low_bytes / im / 1e9);
    printf("col2im        %3lldx%2lldx%2lld  %7.3f ms  %5.1f GB/s\n", (long long)c_in,
           (long long)hw_in, (long long)hw_in, back * 1e3, low_bytes / back / 1e9);
    free(x), free(dx), free(y), free(dy), free(arg), free(col);
}

int main(int argc, char **argv) {
    const char *isa = "auto";
    int rounds = 20;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 < argc && !strcmp(argv[i], "--isa")) isa = argv[i + 1];
        else if (i + 1 < argc && !strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else rounds = 0;
        if (rounds < 1) {
            fprintf(stderr, "usage: %s [--isa auto|avx2|avx512|generic] [--rounds N]\n", argv[0]);
            return 2;
        }
    }
    bench_cpu B;
    int status = bench_open_cpu(&B, "1", isa, "auto");
    if (status) return status;
    bench_print_cpu();
    printf("# the CNN example's data-movement kernels, batch %d, f32, best of %d rounds; "
           "ms per step's calls\n", BATCH, rounds);
    run_layer(B.k, &B.ctx, rounds, 32, 28, 1, 28);  /* pool conv1's output; conv1's input */
    run_layer(B.k, &B.ctx, rounds, 64, 14, 32, 14); /* pool conv2's output; conv2's input */
    return bench_close_cpu(&B, "conv_kernels_bench: a kernel failed") == LT_OK ? 0 : 1;
}
