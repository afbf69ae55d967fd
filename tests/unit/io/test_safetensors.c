/* safetensors reader/writer: round trips, the exact bytes on disk, every kind
 * of damage a crash or a bad disk can leave, and atomic replacement.
 *
 * Interoperability with the Python safetensors library (see
 * tests/integration/safetensors_torch.py): with LT_ST_INTEROP_OUT=FILE the
 * interop test also writes the sample tensors to FILE; with LT_ST_INTEROP_IN=FILE
 * it opens a file the Python library wrote and checks it holds the same values. */
#define _GNU_SOURCE /* nftw */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CUnit/Basic.h>
#include <jansson.h>
#include "cunit_run.h"
#include "io/safetensors.h"

static char g_dir[1024];

/* ---- helpers ------------------------------------------------------------ */

static const char *in_dir(char *buf, const char *name) {
    snprintf(buf, PATH_MAX, "%s/%s", g_dir, name);
    return buf;
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && fread(b, 1, (size_t)n, fp) != (size_t)n) { free(b); b = NULL; }
    fclose(fp);
    *len = (size_t)n;
    return b;
}

static void spit(const char *path, const void *b, size_t n) {
    FILE *fp = fopen(path, "wb");
    CU_ASSERT_FATAL(fp != NULL);
    CU_ASSERT(fwrite(b, 1, n, fp) == n);
    fclose(fp);
}

static uint64_t le64(const unsigned char *b) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)b[i] << (8 * i);
    return v;
}

/* A file with the given header length field, header text and data bytes. */
static void spit_raw(const char *path, uint64_t hlen, const char *json, const void *data,
                     size_t dlen) {
    size_t jn = strlen(json), n = 8 + jn + dlen;
    unsigned char *b = malloc(n);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(b + 8, json, jn);
    if (dlen) memcpy(b + 8 + jn, data, dlen);
    spit(path, b, n);
    free(b);
}

static void spit_header(const char *path, const char *json, size_t dlen) {
    static const unsigned char zeros[64];
    CU_ASSERT_FATAL(dlen <= sizeof zeros);
    spit_raw(path, strlen(json), json, zeros, dlen);
}

static int by_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The directory's entries other than . and .., sorted, each followed by a space. */
static void listing(char *out, size_t len) {
    char *names[64];
    size_t n = 0;
    DIR *d = opendir(g_dir);
    struct dirent *e;
    while (d && n < 64 && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) names[n++] = strdup(e->d_name);
    if (d) closedir(d);
    qsort(names, n, sizeof *names, by_str);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        snprintf(out + strlen(out), len - strlen(out), "%s ", names[i]);
        free(names[i]);
    }
}

static int rm_one(const char *p, const struct stat *s, int flag, struct FTW *f) {
    (void)s; (void)flag; (void)f;
    return remove(p);
}

static void clear_dir(void) {
    DIR *d = opendir(g_dir);
    struct dirent *e;
    char p[PATH_MAX];
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            nftw(in_dir(p, e->d_name), rm_one, 8, FTW_DEPTH | FTW_PHYS);
    if (d) closedir(d);
}

/* Opens path expecting failure `want`, with the path and `needle` in the message. */
static void expect_fail(const char *path, lt_status want, const char *needle) {
    char err[1024] = "";
    lt_st_file *f = (lt_st_file *)1;
    lt_status s = lt_st_open(path, &f, err, sizeof err);
    if (s != want || !strstr(err, path) || (needle && !strstr(err, needle)))
        fprintf(stderr, "\n  want %d with \"%s\", got %d: %s\n", want, needle ? needle : "",
                s, err);
    CU_ASSERT_EQUAL(s, want);
    CU_ASSERT_PTR_NULL(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, path));
    if (needle) CU_ASSERT_PTR_NOT_NULL(strstr(err, needle));
}

/* ---- the sample: every dtype, a scalar and an empty tensor --------------- */

static const float s_f32[6] = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, 6.0f};
static const double s_f64[4] = {1.0 / 3, -1e300, 0.0, 42.0};
static const uint16_t s_f16[3] = {0x3C00, 0xC000, 0x3800};         /* 1, -2, 0.5 */
static const uint16_t s_bf16[4] = {0x3F80, 0xC000, 0x4040, 0x3F00}; /* 1, -2, 3, 0.5 */
static const int8_t s_i8[5] = {-128, -1, 0, 1, 127};
static const uint8_t s_u8[3] = {0, 128, 255};
static const int32_t s_i32[2] = {INT32_MIN, 123456};
static const int64_t s_i64 = -9007199254740993LL; /* not representable as a double */

#define NSAMPLE 9
static const lt_st_tensor sample[NSAMPLE] = {
    {"layer.0.weight", LT_F32, 2, {2, 3}, s_f32, sizeof s_f32},
    {"layer.0.bias", LT_F64, 1, {4}, s_f64, sizeof s_f64},
    {"half", LT_F16, 1, {3}, s_f16, sizeof s_f16},
    {"brain", LT_BF16, 2, {2, 2}, s_bf16, sizeof s_bf16},
    {"empty", LT_F32, 2, {0, 3}, NULL, 0},
    {"bytes.signed", LT_I8, 1, {5}, s_i8, sizeof s_i8},
    {"bytes.unsigned", LT_U8, 3, {1, 1, 3}, s_u8, sizeof s_u8},
    {"ints", LT_I32, 2, {2, 1}, s_i32, sizeof s_i32},
    {"step", LT_I64, 0, {0}, &s_i64, sizeof s_i64},
};
static const char *const sample_meta[] = {"epoch", "3", "note", "lt ✓ unicode"};

static void write_sample(const char *path) {
    char err[512] = "";
    lt_status s = lt_st_write(path, sample, NSAMPLE, sample_meta, 2, err, sizeof err);
    if (s != LT_OK) fprintf(stderr, "\n  %s\n", err);
    CU_ASSERT_EQUAL_FATAL(s, LT_OK);
}

static void check_same(const lt_st_tensor *got, const lt_st_tensor *want) {
    CU_ASSERT_FATAL(got != NULL);
    CU_ASSERT_STRING_EQUAL(got->name, want->name);
    CU_ASSERT_EQUAL(got->dtype, want->dtype);
    CU_ASSERT_EQUAL_FATAL(got->ndim, want->ndim);
    for (int d = 0; d < want->ndim; d++) CU_ASSERT_EQUAL(got->shape[d], want->shape[d]);
    CU_ASSERT_EQUAL_FATAL(got->nbytes, want->nbytes);
    if (want->nbytes) CU_ASSERT(memcmp(got->data, want->data, want->nbytes) == 0);
}

/* ---- round trip and bytes on disk --------------------------------------- */

static void test_round_trip(void) {
    char p[PATH_MAX], err[512] = "";
    write_sample(in_dir(p, "rt.safetensors"));
    lt_st_file *f = NULL;
    CU_ASSERT_EQUAL_FATAL(lt_st_open(p, &f, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL_FATAL(lt_st_count(f), NSAMPLE);
    for (size_t i = 0; i < NSAMPLE; i++) check_same(lt_st_find(f, sample[i].name), &sample[i]);
    /* Widest dtype first, write order among equals, each aligned in the mapping. */
    static const char *const layout[NSAMPLE] = {
        "layer.0.bias", "step", "layer.0.weight", "empty", "ints",
        "half", "brain", "bytes.signed", "bytes.unsigned"};
    for (size_t i = 0; i < NSAMPLE; i++) {
        const lt_st_tensor *t = lt_st_at(f, i);
        CU_ASSERT_STRING_EQUAL(t->name, layout[i]);
        CU_ASSERT((uintptr_t)t->data % lt_dtype_size(t->dtype) == 0);
    }
    CU_ASSERT_PTR_NULL(lt_st_at(f, NSAMPLE));
    CU_ASSERT_PTR_NULL(lt_st_find(f, "layer.0"));
    CU_ASSERT_PTR_NULL(lt_st_find(f, "zzz"));
    CU_ASSERT_STRING_EQUAL(lt_st_meta(f, "epoch"), "3");
    CU_ASSERT_STRING_EQUAL(lt_st_meta(f, "note"), "lt ✓ unicode");
    CU_ASSERT_PTR_NULL(lt_st_meta(f, "missing"));
    lt_st_close(f);
}

static void test_empty_and_no_meta(void) {
    char p[PATH_MAX], err[512] = "";
    lt_st_file *f = NULL;
    CU_ASSERT_EQUAL(lt_st_write(in_dir(p, "none.safetensors"), NULL, 0, NULL, 0, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL_FATAL(lt_st_open(p, &f, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_st_count(f), 0);
    CU_ASSERT_PTR_NULL(lt_st_meta(f, "epoch"));
    CU_ASSERT_PTR_NULL(lt_st_find(f, "x"));
    lt_st_close(f);
    lt_st_close(NULL);
}

static void test_header_bytes(void) {
    char p[PATH_MAX];
    size_t len = 0, data = 0;
    write_sample(in_dir(p, "hdr.safetensors"));
    unsigned char *b = slurp(p, &len);
    CU_ASSERT_FATAL(b != NULL && len >= 8);
    uint64_t n = le64(b);
    for (size_t i = 0; i < NSAMPLE; i++) data += sample[i].nbytes;
    CU_ASSERT_EQUAL(len, 8 + n + data);
    CU_ASSERT_EQUAL(n % 8, 0); /* data section 8-byte aligned */
    CU_ASSERT_EQUAL(b[8], '{');
    /* Padding is spaces after the closing brace, nothing else. */
    size_t close = (size_t)n + 7;
    while (b[close] == ' ') close--;
    CU_ASSERT_EQUAL(b[close], '}');
    CU_ASSERT(8 + n - 1 - close < 8);

    json_error_t je;
    json_t *h = json_loadb((const char *)b + 8, (size_t)n, 0, &je);
    CU_ASSERT_FATAL(h != NULL);
    CU_ASSERT_STRING_EQUAL(json_object_iter_key(json_object_iter(h)), "__metadata__");
    json_t *w = json_object_get(h, "layer.0.weight"), *s = json_object_get(h, "step");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(w, "dtype")), "F32");
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(w, "data_offsets"), 0)), 40);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(w, "data_offsets"), 1)), 64);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(s, "shape")), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(s, "dtype")), "I64");
    /* Data starts with the first F64 tensor, the I64 scalar follows it. */
    CU_ASSERT(memcmp(b + 8 + n, s_f64, sizeof s_f64) == 0);
    CU_ASSERT(memcmp(b + 8 + n + sizeof s_f64, &s_i64, 8) == 0);
    json_decref(h);
    free(b);
}

/* A header the way another writer might lay it out: unpadded, with spaces
 * and newlines, tensors listed out of offset order. */
static void test_foreign_layout(void) {
    char p[PATH_MAX], err[512] = "";
    const char *json = "{ \"b\": {\"dtype\": \"I32\", \"shape\": [1], \"data_offsets\": [4, 8]},\n"
                       "  \"a\": {\"data_offsets\": [0, 4], \"shape\": [], \"dtype\": \"F32\"},\n"
                       "  \"z\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [8, 8]} }\n";
    const int32_t data[2] = {7, 9};
    spit_raw(in_dir(p, "foreign.safetensors"), strlen(json), json, data, sizeof data);
    lt_st_file *f = NULL;
    CU_ASSERT_EQUAL_FATAL(lt_st_open(p, &f, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_st_count(f), 3);
    CU_ASSERT_STRING_EQUAL(lt_st_at(f, 0)->name, "a");
    CU_ASSERT_STRING_EQUAL(lt_st_at(f, 1)->name, "b");
    CU_ASSERT_EQUAL(lt_st_find(f, "a")->ndim, 0);
    int32_t v;
    memcpy(&v, lt_st_find(f, "b")->data, 4);
    CU_ASSERT_EQUAL(v, 9);
    CU_ASSERT_EQUAL(lt_st_find(f, "z")->nbytes, 0);
    lt_st_close(f);
}

/* ---- damage ------------------------------------------------------------- */

static void test_truncated(void) {
    char p[PATH_MAX], q[PATH_MAX];
    size_t len = 0;
    write_sample(in_dir(p, "full.safetensors"));
    unsigned char *b = slurp(p, &len);
    CU_ASSERT_FATAL(b != NULL);
    size_t n = (size_t)le64(b);
    const struct { size_t cut; const char *needle; } cuts[] = {
        {0, "truncated"},          {3, "truncated"},            /* inside the length */
        {7, "truncated"},          {8, "truncated"},            /* no header at all */
        {8 + n / 2, "truncated"},  {8 + n - 1, "truncated"},    /* inside the JSON */
        {8 + n, "use the previous checkpoint"},                 /* header, no data */
        {8 + n + 10, "header promises"}, {len - 1, "file holds"}, /* inside the data */
    };
    in_dir(q, "cut.safetensors");
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        spit(q, b, cuts[i].cut);
        expect_fail(q, LT_ERR_CORRUPT, cuts[i].needle);
    }
    /* The exact wording users see for a checkpoint cut short in its data. */
    char err[PATH_MAX + 256], want[PATH_MAX + 256];
    lt_st_file *f = NULL;
    spit(q, b, len - 1);
    lt_st_open(q, &f, err, sizeof err);
    snprintf(want, sizeof want, "checkpoint %s is truncated: header promises %zu data bytes, "
             "file holds %zu; it was not fully written — use the previous checkpoint",
             q, len - 8 - n, len - 9 - n);
    CU_ASSERT_STRING_EQUAL(err, want);
    free(b);
}

static void test_bad_length(void) {
    char p[PATH_MAX];
    in_dir(p, "len.safetensors");
    spit_raw(p, 0xFFFFFFFFFFFFull, "{}", NULL, 0);
    expect_fail(p, LT_ERR_CORRUPT, "absurd");
    spit_raw(p, 100000001, "{}", NULL, 0);
    expect_fail(p, LT_ERR_CORRUPT, "absurd");
    spit_raw(p, 1000, "{}", NULL, 0);
    expect_fail(p, LT_ERR_CORRUPT, "header promises 1000 header bytes");
}

#define T(dt, shp, b, e) "{\"dtype\":\"" dt "\",\"shape\":" shp ",\"data_offsets\":[" #b "," #e "]}"

static void test_corrupt_headers(void) {
    static const struct { const char *json; size_t dlen; lt_status want; const char *needle; } cases[] = {
        {"{\"a\": {\"dtype\": \"F32\", ", 0, LT_ERR_CORRUPT, "not valid JSON"},
        {"{\"a\": " T("F32", "[1]", 0, 4) "} trailing", 4, LT_ERR_CORRUPT, "not valid JSON"},
        {"{\"a\":" T("F32", "[1]", 0, 4) ",\"a\":" T("F32", "[1]", 4, 8) "}", 8, LT_ERR_CORRUPT, "duplicate"},
        {"[1, 2]", 0, LT_ERR_CORRUPT, "expected an object"},
        {"{\"a\": 5}", 0, LT_ERR_CORRUPT, "entry \"a\""},
        {"{\"a\": " T("F33", "[1]", 0, 4) "}", 4, LT_ERR_CORRUPT, "unknown dtype \"F33\""},
        {"{\"a\": " T("f32", "[1]", 0, 4) "}", 4, LT_ERR_CORRUPT, "unknown dtype"},
        {"{\"a\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4, LT_ERR_CORRUPT, "dtype"},
        {"{\"a\": " T("BOOL", "[1]", 0, 1) "}", 1, LT_ERR_UNSUPPORTED, "BOOL"},
        {"{\"a\": " T("F32", "[2]", 0, 4) "}", 4, LT_ERR_CORRUPT, "shape [2] of F32"},
        {"{\"a\": " T("F64", "[1]", 0, 4) "}", 4, LT_ERR_CORRUPT, "span 4 bytes"},
        {"{\"a\": " T("F32", "[-1]", 0, 4) "}", 4, LT_ERR_CORRUPT, "bad shape"},
        {"{\"a\": " T("F32", "[1.0]", 0, 4) "}", 4, LT_ERR_CORRUPT, "bad shape"},
        {"{\"a\": " T("F32", "4", 0, 4) "}", 4, LT_ERR_CORRUPT, "bad shape"},
        {"{\"a\": " T("U8", "[1,1,1,1,1,1,1,1,1]", 0, 1) "}", 1, LT_ERR_CORRUPT, "bad shape"},
        {"{\"a\": " T("F32", "[4611686018427387904,4]", 0, 4) "}", 4, LT_ERR_CORRUPT, "span"},
        {"{\"a\": " T("F32", "[1]", 4, 0) "}", 4, LT_ERR_CORRUPT, "bad data_offsets"},
        {"{\"a\": " T("F32", "[1]", -4, 0) "}", 4, LT_ERR_CORRUPT, "bad data_offsets"},
        {"{\"a\": {\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8, LT_ERR_CORRUPT, "bad data_offsets"},
        {"{\"a\": {\"dtype\":\"F32\",\"shape\":[1]}}", 4, LT_ERR_CORRUPT, "bad data_offsets"},
        {"{\"a\":" T("F32", "[2]", 0, 8) ",\"b\":" T("F32", "[2]", 4, 12) "}", 12, LT_ERR_CORRUPT, "overlaps"},
        {"{\"a\":" T("F32", "[1]", 0, 4) ",\"b\":" T("F32", "[1]", 0, 4) "}", 4, LT_ERR_CORRUPT, "overlaps"},
        {"{\"a\":" T("F32", "[1]", 0, 4) ",\"b\":" T("F32", "[1]", 8, 12) "}", 12, LT_ERR_CORRUPT, "hole"},
        {"{\"a\":" T("F32", "[1]", 4, 8) "}", 8, LT_ERR_CORRUPT, "hole"},
        {"{\"a\":" T("F32", "[1]", 0, 4) ",\"b\":" T("F32", "[1]", 4, 8) "}", 6, LT_ERR_CORRUPT, "truncated"},
        {"{\"a\":" T("F32", "[1]", 0, 4) ",\"b\":" T("F32", "[1]", 1000000, 1000004) "}", 8, LT_ERR_CORRUPT, "hole"},
        {"{\"a\":" T("F32", "[1]", 0, 4) "}", 8, LT_ERR_CORRUPT, "4 bytes follow"},
        {"{\"__metadata__\": [1]}", 0, LT_ERR_CORRUPT, "__metadata__"},
        {"{\"__metadata__\": {\"epoch\": 3}}", 0, LT_ERR_CORRUPT, "metadata \"epoch\""},
    };
    char p[PATH_MAX];
    in_dir(p, "bad.safetensors");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        spit_header(p, cases[i].json, cases[i].dlen);
        expect_fail(p, cases[i].want, cases[i].needle);
    }
}

static void test_not_a_file(void) {
    char p[PATH_MAX];
    expect_fail(in_dir(p, "does-not-exist.safetensors"), LT_ERR_NOT_FOUND, "cannot open");
    CU_ASSERT_EQUAL_FATAL(mkdir(in_dir(p, "adir"), 0755), 0);
    expect_fail(p, LT_ERR_INVALID, "is a directory; name a .safetensors file");
    /* a FIFO is refused at once, not waited on for a writer */
    CU_ASSERT_EQUAL_FATAL(mkfifo(in_dir(p, "afifo"), 0644), 0);
    expect_fail(p, LT_ERR_INVALID, "is not a regular file");
    unlink(p);
    rmdir(in_dir(p, "adir"));
}

/* ---- writer input checks ------------------------------------------------ */

static void expect_write_invalid(const lt_st_tensor *t, size_t n, const char *const *meta,
                                 size_t nmeta, const char *needle) {
    char p[PATH_MAX], err[512] = "", ls[1024];
    lt_status s = lt_st_write(in_dir(p, "inv.safetensors"), t, n, meta, nmeta, err, sizeof err);
    CU_ASSERT_EQUAL(s, LT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, p));
    if (!strstr(err, needle)) fprintf(stderr, "\n  want \"%s\" in: %s\n", needle, err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, needle));
    listing(ls, sizeof ls);
    CU_ASSERT_STRING_EQUAL(ls, ""); /* nothing created, not even a temp file */
}

static void test_write_invalid(void) {
    float x[2] = {1, 2};
    lt_st_tensor t[2] = {{"a", LT_F32, 1, {2}, x, sizeof x}, {"b", LT_F32, 1, {2}, x, sizeof x}};
    t[1].name = "a";
    expect_write_invalid(t, 2, NULL, 0, "two tensors are named \"a\"");
    t[1] = t[0];
    t[1].name = "__metadata__";
    expect_write_invalid(t, 2, NULL, 0, "__metadata__");
    t[1].name = NULL;
    expect_write_invalid(t, 2, NULL, 0, "tensor 1");
    t[1] = t[0];
    t[1].name = "b";
    t[1].nbytes = 4;
    expect_write_invalid(t, 2, NULL, 0, "shape [2] of F32 and 4 bytes");
    t[1].nbytes = 8;
    t[1].data = NULL;
    expect_write_invalid(t, 2, NULL, 0, "NULL");
    t[1].data = x;
    t[1].dtype = (lt_dtype)42;
    expect_write_invalid(t, 2, NULL, 0, "unknown dtype 42");
    t[1].dtype = LT_F32;
    t[1].ndim = 9;
    expect_write_invalid(t, 2, NULL, 0, "ndim 9");
    t[1].ndim = 1;
    t[1].shape[0] = -2;
    expect_write_invalid(t, 2, NULL, 0, "shape [-2]");
    t[1].shape[0] = 2;
    const char *dup[] = {"k", "1", "k", "2"}, *nul[] = {"k", NULL};
    expect_write_invalid(t, 2, dup, 2, "metadata pair 1");
    expect_write_invalid(t, 2, nul, 1, "metadata pair 0");
    t[1].name = "\xff\xfe";
    expect_write_invalid(t, 2, NULL, 0, "UTF-8");
}

/* ---- atomic replacement ------------------------------------------------- */

static void expect_unchanged(const char *path, const unsigned char *was, size_t wlen) {
    size_t len = 0;
    unsigned char *b = slurp(path, &len);
    CU_ASSERT_FATAL(b != NULL);
    CU_ASSERT_EQUAL(len, wlen);
    CU_ASSERT(len == wlen && memcmp(b, was, len) == 0);
    free(b);
}

static const float v2[1000];
static const lt_st_tensor v2t[1] = {{"other", LT_F32, 1, {1000}, v2, sizeof v2}};

static void test_atomic_missing_dir(void) {
    char p[PATH_MAX], err[512] = "", ls[1024];
    in_dir(p, "missing/x.safetensors");
    CU_ASSERT_EQUAL(lt_st_write(p, v2t, 1, NULL, 0, err, sizeof err), LT_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, p));
    listing(ls, sizeof ls);
    CU_ASSERT_STRING_EQUAL(ls, "");
}

static void test_atomic_temp_blocked(void) {
    char p[PATH_MAX], tmp[PATH_MAX + 32], err[512] = "", ls[1024], want[PATH_MAX];
    size_t len = 0;
    write_sample(in_dir(p, "ck.safetensors"));
    unsigned char *was = slurp(p, &len);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", p, (long)getpid());
    CU_ASSERT_EQUAL_FATAL(mkdir(tmp, 0755), 0);
    CU_ASSERT_EQUAL(lt_st_write(p, v2t, 1, NULL, 0, err, sizeof err), LT_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, p));
    expect_unchanged(p, was, len);
    /* Only the file and the squatting directory (which is not ours to remove). */
    listing(ls, sizeof ls);
    snprintf(want, sizeof want, "ck.safetensors ck.safetensors.tmp.%ld ", (long)getpid());
    CU_ASSERT_STRING_EQUAL(ls, want);
    rmdir(tmp);
    free(was);
}

/* The disk fills up halfway through the data: emulated with a file-size limit,
 * which makes write() fail with EFBIG once the temp file reaches it. */
static void test_atomic_write_fails_midway(void) {
    char p[PATH_MAX], err[512] = "", ls[1024];
    size_t len = 0;
    write_sample(in_dir(p, "ck.safetensors"));
    unsigned char *was = slurp(p, &len);
    struct rlimit old, lim;
    CU_ASSERT_FATAL(getrlimit(RLIMIT_FSIZE, &old) == 0);
    lim = old;
    lim.rlim_cur = 1024; /* v2t needs 4000 data bytes */
    void (*oldsig)(int) = signal(SIGXFSZ, SIG_IGN);
    CU_ASSERT_FATAL(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    lt_status s = lt_st_write(p, v2t, 1, NULL, 0, err, sizeof err);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, oldsig);
    CU_ASSERT_EQUAL(s, LT_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "writing"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "previous file is unchanged"));
    expect_unchanged(p, was, len);
    listing(ls, sizeof ls);
    CU_ASSERT_STRING_EQUAL(ls, "ck.safetensors ");
    free(was);
}

/* Without an earlier file the message must not promise one is unchanged. */
static void test_atomic_fails_no_previous(void) {
    char p[PATH_MAX], err[512] = "", ls[1024];
    in_dir(p, "new.safetensors");
    struct rlimit old, lim;
    CU_ASSERT_FATAL(getrlimit(RLIMIT_FSIZE, &old) == 0);
    lim = old;
    lim.rlim_cur = 1024;
    void (*oldsig)(int) = signal(SIGXFSZ, SIG_IGN);
    CU_ASSERT_FATAL(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    lt_status s = lt_st_write(p, v2t, 1, NULL, 0, err, sizeof err);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, oldsig);
    CU_ASSERT_EQUAL(s, LT_ERR_IO);
    CU_ASSERT_PTR_NULL(strstr(err, "unchanged"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "there was no previous file"));
    listing(ls, sizeof ls);
    CU_ASSERT_STRING_EQUAL(ls, "");
}

static void test_atomic_replace(void) {
    char p[PATH_MAX], tmp[PATH_MAX + 32], err[512] = "", ls[1024];
    write_sample(in_dir(p, "ck.safetensors"));
    /* A temp file a killed process with our pid left behind must not block saving. */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", p, (long)getpid());
    spit(tmp, "stale", 5);
    CU_ASSERT_EQUAL_FATAL(lt_st_write(p, v2t, 1, NULL, 0, err, sizeof err), LT_OK);
    listing(ls, sizeof ls);
    CU_ASSERT_STRING_EQUAL(ls, "ck.safetensors ");
    lt_st_file *f = NULL;
    CU_ASSERT_EQUAL_FATAL(lt_st_open(p, &f, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(lt_st_count(f), 1);
    check_same(lt_st_find(f, "other"), &v2t[0]);
    lt_st_close(f);
}

/* ---- temp files of killed writers ---------------------------------------- */

/* A pid that existed and is gone: a child that exited and was reaped. */
static pid_t dead_pid(void) {
    pid_t p = fork();
    if (p == 0) _exit(0);
    CU_ASSERT_FATAL(p > 0 && waitpid(p, NULL, 0) == p);
    return p;
}

static void temp_name(char *out, const char *base, const char *fmt, long v) {
    char tail[64];
    snprintf(tail, sizeof tail, fmt, v);
    snprintf(out, PATH_MAX, "%s/%s%s", g_dir, base, tail);
}

/* The directory listing as `listing` prints it, of the given names. */
static void want_listing(char *out, size_t len, char **names, size_t n) {
    qsort(names, n, sizeof *names, by_str);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) snprintf(out + strlen(out), len - strlen(out), "%s ", names[i]);
}

static void test_stale_temps(void) {
    char ck[PATH_MAX], f[PATH_MAX], err[512] = "", ls[4096], want[4096];
    in_dir(ck, "ck.safetensors");
    write_sample(ck);
    pid_t dead = dead_pid(), dead_dir = dead_pid(), dead_link = dead_pid();
    /* Alive and lt: a forked copy of this test (the same executable), held
     * until its pipe closes. */
    int hold[2];
    CU_ASSERT_FATAL(pipe(hold) == 0);
    pid_t twin = fork();
    if (twin == 0) {
        char c;
        close(hold[1]);
        ssize_t rd = read(hold[0], &c, 1);
        _exit(rd < 0);
    }
    close(hold[0]);
    /* Alive and not lt: the pid of a killed writer reused by another program.
     * The close-on-exec pipe reports EOF once sleep has replaced the child. */
    int ex[2];
    CU_ASSERT_FATAL(pipe2(ex, O_CLOEXEC) == 0);
    pid_t other = fork();
    if (other == 0) {
        execlp("sleep", "sleep", "60", (char *)NULL);
        _exit(127);
    }
    close(ex[1]);
    char c;
    CU_ASSERT(read(ex[0], &c, 1) == 0);
    close(ex[0]);

    static const struct { const char *fmt; int who; bool kept; } files[] = {
        {".tmp.%ld", 0, false},     /* dead writer */
        {".tmp.%ld", 1, false},     /* pid now runs sleep */
        {".tmp.%ld", 2, true},      /* this process */
        {".tmp.%ld", 3, true},      /* a live lt process */
        {".tmp.0%ld", 0, true},     /* a leading zero: not a name lt makes */
        {".tmp.%ld.old", 0, true},  /* a suffix */
        {".tmp.-%ld", 0, true},     /* a sign */
        {".tmp.", 0, true},         /* no pid */
        {".TMP.%ld", 0, true},
        {".tmp%ld", 0, true},
    };
    long pids[] = {dead, other, getpid(), twin};
    char *names[32];
    size_t n = 0, gone = 0;
    names[n++] = strdup("ck.safetensors");
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        temp_name(f, "ck.safetensors", files[i].fmt, pids[files[i].who]);
        spit(f, "partial", 7);
        if (files[i].kept) names[n++] = strdup(strrchr(f, '/') + 1);
        else gone++;
    }
    /* Same pattern, other checkpoint names: not the file asked about. */
    static const char *const others[] = {"xck.safetensors", "ck", "other.safetensors"};
    for (size_t i = 0; i < 3; i++) {
        temp_name(f, others[i], ".tmp.%ld", dead);
        spit(f, "partial", 7);
        names[n++] = strdup(strrchr(f, '/') + 1);
    }
    /* lt_st_write makes regular files only. */
    temp_name(f, "ck.safetensors", ".tmp.%ld", dead_dir);
    CU_ASSERT(mkdir(f, 0755) == 0);
    names[n++] = strdup(strrchr(f, '/') + 1);
    temp_name(f, "ck.safetensors", ".tmp.%ld", dead_link);
    CU_ASSERT(symlink(ck, f) == 0);
    names[n++] = strdup(strrchr(f, '/') + 1);

    size_t removed = 99;
    lt_status s = lt_st_remove_stale_temps(ck, &removed, err, sizeof err);
    if (s != LT_OK) fprintf(stderr, "\n  %s\n", err);
    CU_ASSERT_EQUAL(s, LT_OK);
    CU_ASSERT_EQUAL(removed, gone);
    listing(ls, sizeof ls);
    want_listing(want, sizeof want, names, n);
    if (strcmp(ls, want)) fprintf(stderr, "\n  left: %s\n  want: %s\n", ls, want);
    CU_ASSERT_STRING_EQUAL(ls, want);
    /* Nothing left to remove: a second pass removes nothing. */
    CU_ASSERT_EQUAL(lt_st_remove_stale_temps(ck, &removed, err, sizeof err), LT_OK);
    CU_ASSERT_EQUAL(removed, 0);

    kill(other, SIGKILL);
    waitpid(other, NULL, 0);
    close(hold[1]);
    waitpid(twin, NULL, 0);
    for (size_t i = 0; i < n; i++) free(names[i]);
}

static void test_stale_temps_no_dir(void) {
    char p[PATH_MAX], err[512] = "";
    size_t removed = 99;
    CU_ASSERT_EQUAL(lt_st_remove_stale_temps(in_dir(p, "missing/ck.safetensors"), &removed, err,
                                             sizeof err), LT_OK);
    CU_ASSERT_EQUAL(removed, 0);
    CU_ASSERT_EQUAL(lt_st_remove_stale_temps(in_dir(p, "dir/"), &removed, err, sizeof err),
                    LT_ERR_INVALID);
}

/* A path without a directory part: the directory to sync is ".". */
static void test_relative_path(void) {
    char cwd[PATH_MAX], err[512] = "";
    CU_ASSERT_FATAL(getcwd(cwd, sizeof cwd) != NULL);
    CU_ASSERT_FATAL(chdir(g_dir) == 0);
    lt_status s = lt_st_write("rel.safetensors", v2t, 1, NULL, 0, err, sizeof err);
    lt_st_file *f = NULL;
    lt_status o = lt_st_open("rel.safetensors", &f, err, sizeof err);
    CU_ASSERT(chdir(cwd) == 0);
    CU_ASSERT_EQUAL(s, LT_OK);
    CU_ASSERT_EQUAL(o, LT_OK);
    lt_st_close(f);
}

/* ---- interoperability with the Python library --------------------------- */

static void check_interop_in(const char *path) {
    char err[512] = "";
    lt_st_file *f = NULL;
    lt_status s = lt_st_open(path, &f, err, sizeof err);
    if (s) fprintf(stderr, "\n  %s\n", err);
    CU_ASSERT_EQUAL_FATAL(s, LT_OK);
    /* numpy has no bfloat16, so a numpy-written file may lack "brain". */
    size_t have = 0;
    for (size_t i = 0; i < NSAMPLE; i++) {
        const lt_st_tensor *t = lt_st_find(f, sample[i].name);
        if (!t && sample[i].dtype == LT_BF16) continue;
        check_same(t, &sample[i]);
        have++;
    }
    CU_ASSERT_EQUAL(lt_st_count(f), have);
    CU_ASSERT_STRING_EQUAL(lt_st_meta(f, "epoch"), "3");
    lt_st_close(f);
}

static void test_interop(void) {
    const char *out = getenv("LT_ST_INTEROP_OUT"), *in = getenv("LT_ST_INTEROP_IN");
    if (out) write_sample(out);
    if (in) check_interop_in(in);
}

/* ---- runner -------------------------------------------------------------- */

static int suite_init(void) {
    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/lt_st_XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int suite_clean(void) {
    clear_dir();
    return rmdir(g_dir);
}

/* Each test starts from an empty directory so listings are exact. */
static void fresh(void) { clear_dir(); }

int main(void) {
    static const struct { const char *name; CU_TestFunc fn; } tests[] = {
        {"round trip of every dtype, scalar, empty, metadata", test_round_trip},
        {"no tensors, no metadata", test_empty_and_no_meta},
        {"header bytes: LE length, JSON, padding, data", test_header_bytes},
        {"foreign layout: unpadded, unordered", test_foreign_layout},
        {"truncated at every part", test_truncated},
        {"absurd or overlong header length", test_bad_length},
        {"corrupt headers", test_corrupt_headers},
        {"missing file, directory", test_not_a_file},
        {"writer rejects bad input", test_write_invalid},
        {"atomic: missing directory", test_atomic_missing_dir},
        {"atomic: temp name blocked", test_atomic_temp_blocked},
        {"atomic: write fails midway", test_atomic_write_fails_midway},
        {"atomic: write fails, no previous file", test_atomic_fails_no_previous},
        {"atomic: replace, stale temp", test_atomic_replace},
        {"temp files of gone writers removed, nothing else", test_stale_temps},
        {"temp files: missing directory, no file name", test_stale_temps_no_dir},
        {"relative path", test_relative_path},
        {"interop files (LT_ST_INTEROP_OUT/IN)", test_interop},
    };
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite_with_setup_and_teardown("safetensors", suite_init, suite_clean,
                                                       fresh, NULL);
    for (size_t i = 0; s && i < sizeof tests / sizeof tests[0]; i++)
        CU_add_test(s, tests[i].name, tests[i].fn);
    int rc = lt_cunit_run();
    return rc;
}
