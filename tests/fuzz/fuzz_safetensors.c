/* The safetensors reader (core/io/safetensors.c): an input is a whole file.
 * A file that opens must keep every promise of lt_st_open: tensors in offset
 * order that tile the data section exactly, names found by lt_st_find, data
 * inside the file. It is then written back with lt_st_write and read again:
 * whatever lt accepts, lt must be able to save. */
#include "fuzz_common.h"
#include <ftw.h>
#include "io/safetensors.h"

static int st_fd = -1;
static char st_path[64];
static char out_dir[256], out_path[300];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void cleanup(void) {
    if (out_dir[0]) nftw(out_dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    st_fd = fuzz_file_new("model.safetensors", st_path, sizeof st_path);
    /* The round trip writes a real file (fsync, rename): tmpfs when there is one. */
    const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    snprintf(out_dir, sizeof out_dir, "%s/lt-fuzz-st.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(out_dir)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    snprintf(out_path, sizeof out_path, "%s/back.safetensors", out_dir);
    atexit(cleanup);
    return 0;
}

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Every byte of every tensor, so data outside the mapping faults here. */
static unsigned sum_bytes(const lt_st_tensor *t) {
    unsigned s = 0;
    const uint8_t *p = t->data;
    for (size_t i = 0; i < t->nbytes; i++) s += p[i];
    return s;
}

static void round_trip(const lt_st_file *f) {
    size_t n = lt_st_count(f);
    lt_st_tensor *t = calloc(n ? n : 1, sizeof *t);
    FUZZ_CHECK(t != NULL);
    for (size_t i = 0; i < n; i++) t[i] = *lt_st_at(f, i);
    char err[1024];
    lt_status st = lt_st_write(out_path, t, n, NULL, 0, err, sizeof err);
    if (st != LT_OK) fprintf(stderr, "fuzz: lt_st_write refused what lt_st_open accepted: %s\n", err);
    FUZZ_CHECK(st == LT_OK);
    lt_st_file *g = NULL;
    st = lt_st_open(out_path, &g, err, sizeof err);
    if (st != LT_OK) fprintf(stderr, "fuzz: cannot read back what lt_st_write wrote: %s\n", err);
    FUZZ_CHECK(st == LT_OK && lt_st_count(g) == n);
    for (size_t i = 0; i < n; i++) {
        const lt_st_tensor *a = &t[i], *b = lt_st_find(g, a->name);
        FUZZ_CHECK(b && b->dtype == a->dtype && b->ndim == a->ndim && b->nbytes == a->nbytes);
        FUZZ_CHECK(!memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]));
        FUZZ_CHECK(!a->nbytes || !memcmp(a->data, b->data, a->nbytes));
    }
    lt_st_close(g);
    free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_file_set(st_fd, data, size);
    lt_st_file *f = NULL;
    char err[1024];
    err[0] = 0;
    lt_status st = lt_st_open(st_path, &f, err, sizeof err);
    if (st != LT_OK) {
        FUZZ_CHECK(f == NULL && err[0]); /* every refusal says why */
        return 0;
    }
    FUZZ_CHECK(size >= 8);
    uint64_t data_bytes = size - 8 - le64(data), at = 0;
    unsigned sum = 0;
    for (size_t i = 0; i < lt_st_count(f); i++) {
        const lt_st_tensor *t = lt_st_at(f, i);
        FUZZ_CHECK(t && t->name && lt_st_find(f, t->name) == t);
        FUZZ_CHECK(t->ndim >= 0 && t->ndim <= LT_ST_MAX_DIMS && lt_dtype_size(t->dtype));
        uint64_t elems = 1;
        for (int d = 0; d < t->ndim; d++) elems *= (uint64_t)t->shape[d];
        FUZZ_CHECK(elems * lt_dtype_size(t->dtype) == t->nbytes);
        FUZZ_CHECK((const uint8_t *)t->data == (const uint8_t *)lt_st_at(f, 0)->data + at);
        at += t->nbytes;
        sum += sum_bytes(t);
    }
    FUZZ_CHECK(at == data_bytes);
    FUZZ_CHECK(lt_st_at(f, lt_st_count(f)) == NULL);
    (void)lt_st_meta(f, "format");
    (void)lt_st_meta(f, "lt_step");
    (void)sum;
    round_trip(f);
    lt_st_close(f);
    return 0;
}
