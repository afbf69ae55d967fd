/* The IDX reader (core/data/idx.c, idx_gz.c): an images file and a labels
 * file, gzip (one member or several) or raw. The first two bytes (big
 * endian) say how many of the remaining bytes are the images file, the rest
 * is the labels file. When the pair opens, every promise of the dataset
 * interface is checked: its length, field shapes, the first and last
 * sample (read in full) and a subset view. */
#include "fuzz_common.h"
#include "data/data_internal.h"
#include "common/ctx.h"

static int img_fd = -1, lab_fd = -1;
static char img_path[64], lab_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    lt_log_set_level(-1);
    img_fd = fuzz_file_new("images-idx3-ubyte", img_path, sizeof img_path);
    lab_fd = fuzz_file_new("labels-idx1-ubyte", lab_path, sizeof lab_path);
    return 0;
}

static void read_sample(const lt_dataset *ds, int64_t i, size_t pixels) {
    float *img = malloc(pixels * sizeof *img);
    int32_t label = -1;
    FUZZ_CHECK(img != NULL);
    void *dst[2] = {img, &label};
    FUZZ_CHECK(ds->iface->get(ds->self, i, dst) == LT_OK);
    FUZZ_CHECK(label >= 0 && label <= 255);
    free(img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    size_t rest = size - 2, split = (size_t)data[0] << 8 | data[1];
    if (split > rest) split = rest;
    fuzz_file_set(img_fd, data + 2, split);
    fuzz_file_set(lab_fd, data + 2 + split, rest - split);

    lt_dataset ds;
    char err[1024];
    err[0] = 0;
    lt_status st = lt_idx_dataset_open(img_path, lab_path, 0.2860, 0.3530, &ds, err, sizeof err);
    if (st != LT_OK) {
        FUZZ_CHECK(err[0]); /* every refusal says why */
        FUZZ_CHECK(ds.iface == NULL && ds.self == NULL);
        return 0;
    }
    int64_t n = ds.iface->length(ds.self);
    FUZZ_CHECK(n >= 1);
    FUZZ_CHECK(ds.iface->num_fields(ds.self) == 2);
    lt_field_info fi;
    FUZZ_CHECK(ds.iface->field_info(ds.self, 0, &fi) == LT_OK);
    FUZZ_CHECK(fi.ndim == 3 && fi.shape[0] == 1 && fi.shape[1] >= 1 && fi.shape[2] >= 1);
    size_t pixels = (size_t)(fi.shape[1] * fi.shape[2]);
    FUZZ_CHECK(ds.iface->field_info(ds.self, 1, &fi) == LT_OK);
    FUZZ_CHECK(ds.iface->field_info(ds.self, 2, &fi) != LT_OK);
    read_sample(&ds, 0, pixels);
    read_sample(&ds, n - 1, pixels);
    void *none[2] = {NULL, NULL};
    FUZZ_CHECK(ds.iface->get(ds.self, n, none) != LT_OK);
    FUZZ_CHECK(ds.iface->get(ds.self, -1, none) != LT_OK);

    lt_dataset sub;
    FUZZ_CHECK(lt_dataset_subset(&ds, n / 2, n - n / 2, &sub) == LT_OK);
    FUZZ_CHECK(sub.iface->length(sub.self) == n - n / 2);
    read_sample(&sub, sub.iface->length(sub.self) - 1, pixels);
    lt_dataset_destroy(&sub);
    FUZZ_CHECK(lt_dataset_subset(&ds, n, 1, &sub) != LT_OK && sub.self == NULL);
    lt_dataset_destroy(&ds);
    return 0;
}
