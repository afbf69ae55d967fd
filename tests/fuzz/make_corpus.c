/* Writes the binary seeds of the fuzz corpora (IDX, safetensors, store frames)
 * with lt's own writers and encoders, so every seed is a valid input. The
 * text seeds (INI, flags, devices, host lists) are plain files beside them.
 * The seeds are committed; rebuild them only when a format changes:
 *
 *   cc -std=gnu11 -I core -I sdk/include tests/fuzz/make_corpus.c \
 *      core/io/safetensors.c core/dist/store_wire.c core/common/status.c \
 *      -ljansson -lz -o /tmp/make_corpus && /tmp/make_corpus tests/fuzz/corpus */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include "io/safetensors.h"
#include "dist/store_wire.h"

static const char *root;

static void put(const char *dir, const char *name, const void *p, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s/%s", root, dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
        perror(path);
        exit(1);
    }
}

/* ---- IDX: [u16 BE images size][images file][labels file] ------------------ */

typedef struct bytes {
    uint8_t *p;
    size_t n;
} bytes;

static void add(bytes *b, const void *p, size_t n) {
    b->p = realloc(b->p, b->n + n);
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void add_be32(bytes *b, uint32_t v) {
    uint8_t q[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    add(b, q, 4);
}

static bytes idx_file(bool images, uint32_t n, uint32_t side) {
    bytes b = {0};
    add_be32(&b, images ? 0x803 : 0x801);
    add_be32(&b, n);
    if (images) {
        add_be32(&b, side);
        add_be32(&b, side);
    }
    size_t payload = images ? (size_t)n * side * side : n;
    for (size_t i = 0; i < payload; i++) {
        uint8_t v = images ? (uint8_t)(i * 37) : (uint8_t)(i % 10);
        add(&b, &v, 1);
    }
    return b;
}

static bytes gzip(bytes in) {
    char path[] = "/tmp/lt-corpus-gz.XXXXXX";
    int fd = mkstemp(path);
    gzFile gz = gzdopen(dup(fd), "wb9");
    gzwrite(gz, in.p, (unsigned)in.n);
    gzclose(gz);
    bytes out = {0};
    uint8_t buf[4096];
    ssize_t r;
    lseek(fd, 0, SEEK_SET);
    while ((r = read(fd, buf, sizeof buf)) > 0) add(&out, buf, (size_t)r);
    close(fd);
    unlink(path);
    return out;
}

static void idx_seed(const char *name, bytes img, bytes lab) {
    bytes b = {0};
    uint8_t split[2] = {(uint8_t)(img.n >> 8), (uint8_t)img.n};
    add(&b, split, 2);
    add(&b, img.p, img.n);
    add(&b, lab.p, lab.n);
    put("idx", name, b.p, b.n);
    free(b.p);
}

static void idx_seeds(void) {
    bytes img = idx_file(true, 3, 4), lab = idx_file(false, 3, 0);
    idx_seed("raw_3x4x4", img, lab);
    bytes gi = gzip(img), gl = gzip(lab);
    idx_seed("gz_3x4x4", gi, gl);
    bytes img1 = idx_file(true, 1, 28), lab1 = idx_file(false, 1, 0);
    idx_seed("raw_1x28x28", img1, lab1);
    idx_seed("gz_images_raw_labels", gi, lab);
    free(img.p), free(lab.p), free(gi.p), free(gl.p), free(img1.p), free(lab1.p);
}

/* ---- safetensors ----------------------------------------------------------- */

static void st_seed(const char *name, const lt_st_tensor *t, size_t n, const char *const *meta,
                    size_t nmeta) {
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/safetensors/%s", root, name);
    if (lt_st_write(path, t, n, meta, nmeta, err, sizeof err) != LT_OK) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
}

static void safetensors_seeds(void) {
    float w[6] = {1, -2, 3.5f, 0, 0.25f, -1};
    double b[2] = {0.5, -0.5};
    int64_t step = 1234;
    uint8_t bytes8[3] = {1, 2, 3};
    uint16_t half[2] = {0x3c00, 0xc000};
    lt_st_tensor two[] = {
        {.name = "fc1.weight", .dtype = LT_F32, .ndim = 2, .shape = {2, 3}, .data = w, .nbytes = sizeof w},
        {.name = "fc1.bias", .dtype = LT_F64, .ndim = 1, .shape = {2}, .data = b, .nbytes = sizeof b},
    };
    const char *meta[] = {"format", "pt", "lt_step", "1234"};
    st_seed("two_tensors_meta.safetensors", two, 2, meta, 2);
    lt_st_tensor mixed[] = {
        {.name = "step", .dtype = LT_I64, .ndim = 0, .data = &step, .nbytes = 8},
        {.name = "u8", .dtype = LT_U8, .ndim = 1, .shape = {3}, .data = bytes8, .nbytes = 3},
        {.name = "h", .dtype = LT_F16, .ndim = 2, .shape = {1, 2}, .data = half, .nbytes = 4},
        {.name = "bf", .dtype = LT_BF16, .ndim = 1, .shape = {2}, .data = half, .nbytes = 4},
        {.name = "empty", .dtype = LT_I32, .ndim = 2, .shape = {0, 4}, .data = NULL, .nbytes = 0},
        {.name = "i8", .dtype = LT_I8, .ndim = 1, .shape = {1}, .data = bytes8, .nbytes = 1},
    };
    st_seed("all_dtypes.safetensors", mixed, 6, NULL, 0);
    st_seed("no_tensors.safetensors", NULL, 0, NULL, 0);
}

/* ---- store frames -------------------------------------------------------------
 * server seeds: [flags][u16 BE size of A's stream][A's stream][B's stream]
 * client seeds: [first request][reply frames] */

static void req_str(lt_wbuf *b, unsigned op, unsigned flags, const char *s1, const char *s2,
                    const char *s3) {
    size_t start = b->len;
    lt_wbuf_begin(b, op, flags);
    if (s1) lt_wbuf_str(b, s1, strlen(s1));
    if (s2) lt_wbuf_str(b, s2, strlen(s2));
    if (s3) lt_wbuf_str(b, s3, strlen(s3));
    lt_wbuf_end(b, start);
}

static void req_get(lt_wbuf *b, uint32_t timeout_ms, const char *key) {
    size_t start = b->len;
    lt_wbuf_begin(b, LT_OP_GET, 0);
    lt_wbuf_u32(b, timeout_ms);
    lt_wbuf_str(b, key, strlen(key));
    lt_wbuf_end(b, start);
}

static void req_add(lt_wbuf *b, const char *key, int64_t delta) {
    size_t start = b->len;
    lt_wbuf_begin(b, LT_OP_ADD, 0);
    lt_wbuf_str(b, key, strlen(key));
    lt_wbuf_i64(b, delta);
    lt_wbuf_end(b, start);
}

static void req_wait(lt_wbuf *b, uint32_t timeout_ms, const char *k1, const char *k2) {
    size_t start = b->len;
    lt_wbuf_begin(b, LT_OP_WAIT, 0);
    lt_wbuf_u32(b, timeout_ms);
    lt_wbuf_u32(b, 2);
    lt_wbuf_str(b, k1, strlen(k1));
    lt_wbuf_str(b, k2, strlen(k2));
    lt_wbuf_end(b, start);
}

static void server_seed(const char *name, unsigned flags, const lt_wbuf *a, const lt_wbuf *b) {
    bytes out = {0};
    uint8_t h[3] = {(uint8_t)flags, (uint8_t)(a->len >> 8), (uint8_t)a->len};
    add(&out, h, 3);
    if (a->len) add(&out, a->p, a->len);
    if (b->len) add(&out, b->p, b->len);
    put("store_server", name, out.p, out.n);
    free(out.p);
}

static void server_seeds(void) {
    lt_wbuf a = {0}, b = {0};
    /* Every request once on one connection, no token. */
    req_str(&a, LT_OP_HELLO, 0, "", NULL, NULL);
    req_str(&a, LT_OP_SET, 0, "rank/0", "10.0.0.1:29500", NULL);
    req_get(&a, 1000, "rank/0");
    req_str(&a, LT_OP_TRY_GET, 0, "rank/1", NULL, NULL);
    req_add(&a, "counter", 3);
    req_add(&a, "counter", -1);
    req_str(&a, LT_OP_CAS, 0, "leader", "x", "y");
    req_str(&a, LT_OP_CAS, LT_WIRE_F_ABSENT, "leader", "", "me");
    req_wait(&a, 0, "rank/0", "counter");
    req_str(&a, LT_OP_DELETE, 0, "rank/0", NULL, NULL);
    server_seed("every_request", 0, &a, &b);
    lt_wbuf_free(&a);
    /* A parks on get and wait; B's set and add wake it. With the token. */
    req_str(&a, LT_OP_HELLO, 0, "fuzz-token", NULL, NULL);
    req_get(&a, 60000, "late");
    req_wait(&a, 60000, "late", "n");
    req_str(&b, LT_OP_HELLO, 0, "fuzz-token", NULL, NULL);
    req_str(&b, LT_OP_SET, 0, "late", "here", NULL);
    req_add(&b, "n", 1);
    server_seed("park_and_wake_token", 1, &a, &b);
    lt_wbuf_free(&a);
    lt_wbuf_free(&b);
    /* A parks and nobody wakes it: the timeout answers. */
    req_str(&a, LT_OP_HELLO, 0, "", NULL, NULL);
    req_get(&a, 100, "never");
    req_str(&a, LT_OP_SET, 0, "after", "timeout", NULL);
    server_seed("park_timeout", 0, &a, &b);
    lt_wbuf_free(&a);
    /* A wrong token; B a request before hello. */
    req_str(&a, LT_OP_HELLO, 0, "wrong", NULL, NULL);
    req_str(&b, LT_OP_SET, 0, "k", "v", NULL);
    server_seed("bad_token_no_hello", 1, &a, &b);
    lt_wbuf_free(&a);
    lt_wbuf_free(&b);
    /* ADD on a key that holds text; a frame of another protocol version. */
    req_str(&a, LT_OP_HELLO, 0, "", NULL, NULL);
    req_str(&a, LT_OP_SET, 0, "text", "abc", NULL);
    req_add(&a, "text", 1);
    size_t start = a.len;
    lt_wbuf_begin(&a, LT_OP_TRY_GET, 0);
    lt_wbuf_str(&a, "text", 4);
    lt_wbuf_end(&a, start);
    a.p[start + 1] = LT_WIRE_VERSION + 1;
    server_seed("bad_value_bad_version", 0, &a, &b);
    lt_wbuf_free(&a);
}

static void reply(lt_wbuf *b, unsigned code, unsigned flags, const char *str, const int64_t *num) {
    size_t start = b->len;
    lt_wbuf_begin(b, code, flags);
    if (str) lt_wbuf_str(b, str, strlen(str));
    if (num) lt_wbuf_i64(b, *num);
    lt_wbuf_end(b, start);
}

static void client_seed(const char *name, unsigned first, const lt_wbuf *b) {
    bytes out = {0};
    uint8_t h = (uint8_t)first;
    add(&out, &h, 1);
    if (b->len) add(&out, b->p, b->len);
    put("store_client", name, out.p, out.n);
    free(out.p);
}

static void client_seeds(void) {
    lt_wbuf b = {0};
    int64_t three = 3;
    /* hello, then set get try_get add cas cas-absent wait delete, all answered. */
    reply(&b, LT_REPLY_OK, 0, NULL, NULL);
    reply(&b, LT_REPLY_OK, 0, NULL, NULL);
    reply(&b, LT_REPLY_OK, 0, "addr:1234", NULL);
    reply(&b, LT_REPLY_OK, 0, "", NULL);
    reply(&b, LT_REPLY_OK, 0, NULL, &three);
    reply(&b, LT_REPLY_OK, 0, "old", NULL);
    reply(&b, LT_REPLY_OK, LT_WIRE_F_ABSENT, "", NULL);
    reply(&b, LT_REPLY_OK, 0, NULL, NULL);
    reply(&b, LT_REPLY_OK, 0, NULL, NULL);
    client_seed("every_reply", 0, &b);
    lt_wbuf_free(&b);
    /* get: timeout; try_get: not found; add: bad value; then an unknown code. */
    reply(&b, LT_REPLY_OK, 0, NULL, NULL);
    reply(&b, LT_REPLY_TIMEOUT, 0, NULL, NULL);
    reply(&b, LT_REPLY_NOT_FOUND, 0, NULL, NULL);
    reply(&b, LT_REPLY_BAD_VALUE, 0, NULL, NULL);
    reply(&b, 99, 0, NULL, NULL);
    client_seed("errors", 1, &b);
    lt_wbuf_free(&b);
    reply(&b, LT_REPLY_BAD_TOKEN, 0, NULL, NULL);
    client_seed("bad_token", 0, &b);
    lt_wbuf_free(&b);
    reply(&b, LT_REPLY_OK, 0, NULL, NULL);
    size_t start = b.len;
    reply(&b, LT_REPLY_BAD_VERSION, 0, NULL, NULL);
    b.p[start + 1] = LT_WIRE_VERSION + 1;
    client_seed("bad_version", 4, &b);
    lt_wbuf_free(&b);
    /* Bodies where none is expected: each failed request must free its own. */
    reply(&b, LT_REPLY_OK, 0, "hello-body", NULL);
    reply(&b, LT_REPLY_OK, 0, "set-body", NULL);
    reply(&b, LT_REPLY_TIMEOUT, 0, "get-body", NULL);
    reply(&b, LT_REPLY_NOT_FOUND, 0, "try-get-body", NULL);
    reply(&b, LT_REPLY_BAD_VALUE, 0, "add-body", &three);
    reply(&b, LT_REPLY_OK, LT_WIRE_F_ABSENT, "cas-body", NULL);
    reply(&b, LT_REPLY_OK, 0, "me", NULL);
    reply(&b, LT_REPLY_TIMEOUT, 0, "wait-body", NULL);
    reply(&b, LT_REPLY_NOT_FOUND, 0, "delete-body", NULL);
    reply(&b, LT_REPLY_BAD_VERSION, 0, "set-body", NULL);
    client_seed("unexpected_bodies", 0, &b);
    lt_wbuf_free(&b);
    /* A reply of another protocol version that carries a body (leaked once). */
    reply(&b, LT_REPLY_OK, 0, NULL, NULL);
    start = b.len;
    reply(&b, LT_REPLY_BAD_VERSION, 0, "v2 server", NULL);
    b.p[start + 1] = LT_WIRE_VERSION + 1;
    client_seed("bad_version_with_body", 4, &b);
    lt_wbuf_free(&b);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_corpus CORPUS_DIR\n");
        return 2;
    }
    root = argv[1];
    idx_seeds();
    safetensors_seeds();
    server_seeds();
    client_seeds();
    return 0;
}
