/* Helpers shared by the libFuzzer targets (tests/fuzz/run.sh builds them).
 *
 * Parsers that take a path get the input through a memfd named by
 * /proc/self/fd/N: a regular file, re-openable, that never touches the disk.
 * Each target reuses its memfds for every input. */
#ifndef LT_FUZZ_COMMON_H
#define LT_FUZZ_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A file holding nothing yet; its path, "/proc/self/fd/N", goes into path. */
static inline int fuzz_file_new(const char *name, char *path, size_t pathlen) {
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) {
        perror("fuzz: memfd_create");
        abort();
    }
    snprintf(path, pathlen, "/proc/self/fd/%d", fd);
    return fd;
}

/* Replaces the file's contents with data[0..size). */
static inline void fuzz_file_set(int fd, const uint8_t *data, size_t size) {
    if (ftruncate(fd, 0)) abort();
    size_t off = 0;
    while (off < size) {
        ssize_t w = pwrite(fd, data + off, size - off, (off_t)off);
        if (w <= 0) abort();
        off += (size_t)w;
    }
}

/* The input as a NUL-terminated string (the parsers take C strings); free it. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = 0;
    return s;
}

/* Code that reports on stderr (ltrun's flag parser) writes to /dev/null
 * while it runs. Only the stdio stream is swapped: the sanitizers and
 * libFuzzer write to file descriptor 2 (or keep their own FILE), so a crash
 * report still shows. */
static FILE *fuzz_devnull_stream;
static FILE *fuzz_saved_stderr;

static inline FILE *fuzz_devnull(void) {
    if (!fuzz_devnull_stream && !(fuzz_devnull_stream = fopen("/dev/null", "w"))) abort();
    return fuzz_devnull_stream;
}

static inline void fuzz_quiet_begin(void) {
    fuzz_saved_stderr = stderr;
    stderr = fuzz_devnull();
}

static inline void fuzz_quiet_end(void) { stderr = fuzz_saved_stderr; }

/* A broken invariant: report it like a crash, so libFuzzer saves the input. */
#define FUZZ_CHECK(cond)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "fuzz: invariant broken at %s:%d: %s\n", __FILE__, __LINE__,   \
                    #cond);                                                                \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

#endif
