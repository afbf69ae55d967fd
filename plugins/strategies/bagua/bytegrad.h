/* bagua's bytegrad: gradients averaged over ranks through 8-bit messages
 * (Bagua's MinMaxUInt8 compression, the accelerator's quantize_u8 and
 * dequantize_u8 kernels). Rank r owns slice r of the flat gradient:
 *   1. every rank compresses its whole gradient, slice by slice;
 *   2. all-to-all: rank r receives slice r from every rank (send/recv);
 *   3. rank r decompresses them, averages in the gradient dtype, and
 *      compresses the average again;
 *   4. all-gather of the compressed averages; every rank decompresses all
 *      of them, so every rank ends with the very same gradient.
 * Each element crosses the wire as one byte (plus 8 bytes of min/max per
 * `chunk` elements), a quarter of ddp's f32 traffic. A chunk holding a
 * non-finite value decodes to NaN, so 16-mixed still skips such a step. */
#ifndef LT_BAGUA_BYTEGRAD_H
#define LT_BAGUA_BYTEGRAD_H

#include "lt/lt.h"

typedef struct bytegrad {
    int world, rank;
    size_t count;    /* gradient elements */
    size_t slice;    /* elements per rank's slice (the last may be shorter) */
    lt_dtype dtype;  /* of the gradients */
    int64_t chunk;   /* elements sharing one min/max */
    size_t stride;   /* bytes of one compressed slice, padded to 8 */
    uint8_t *send;   /* world compressed slices of this rank's gradient */
    uint8_t *recv;   /* world compressed copies of this rank's slice */
    uint8_t *gathered; /* world compressed averaged slices */
    uint32_t round;  /* tag of the exchange */
    uint64_t wire_bytes; /* bytes this rank sends per reduction */
} bytegrad;

/* Sizes and allocates the buffers (lt_run_alloc) for `count` gradients of
 * `dtype`; fails naming the kernel when the accelerator lacks the 8-bit
 * compression kernels. */
lt_status bytegrad_setup(lt_ctx *ctx, bytegrad *b, lt_run *run, size_t count, lt_dtype dtype,
                         int64_t chunk);
/* grads (count elements) := their average over the group's ranks, through
 * compressed messages. Training thread, once per optimizer step. */
lt_status bytegrad_reduce(lt_ctx *ctx, bytegrad *b, lt_run *run, lt_pg *pg, void *grads);
void bytegrad_free(bytegrad *b, lt_run *run);

#endif
