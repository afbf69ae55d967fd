/* What dlopen and dlsym leave to chance, checked before it can crash us.
 *
 * dlopen maps every segment for the length its program header gives,
 * without comparing that with the file's size: a file cut short (a copy
 * interrupted, a full disk) maps pages past its end, and the loader's first
 * touch of them is a SIGBUS before any error can be returned. A file built
 * for another machine gets glibc's "cannot open shared object file: No such
 * file or directory", which sends the user looking for a file that is there.
 * So the file is read and judged first: the ELF header, then the file range
 * of every program header.
 *
 * dlsym returns a variable's address as readily as a function's, and calling
 * a variable jumps into data. The symbol's ELF type says which it is.
 *
 * Nothing guards a file rewritten between the check and dlopen: the check is
 * for files that are wrong, not for files being changed under a run. */
#define _GNU_SOURCE /* dladdr1, RTLD_DL_SYMENT, dl_iterate_phdr */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "registry_internal.h"

/* The machine this build runs on, as ELF names it. An architecture missing
 * here leaves the machine to dlopen (EM_NONE: not compared). */
#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__i386__)
#define HOST_MACHINE EM_386
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#elif defined(__arm__)
#define HOST_MACHINE EM_ARM
#elif defined(__powerpc64__)
#define HOST_MACHINE EM_PPC64
#elif defined(__powerpc__)
#define HOST_MACHINE EM_PPC
#elif defined(__riscv)
#define HOST_MACHINE EM_RISCV
#elif defined(__s390__)
#define HOST_MACHINE EM_S390
#elif defined(__loongarch__) && defined(EM_LOONGARCH)
#define HOST_MACHINE EM_LOONGARCH
#else
#define HOST_MACHINE EM_NONE
#endif

#define HOST_CLASS (__ELF_NATIVE_CLASS == 64 ? ELFCLASS64 : ELFCLASS32)
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_DATA ELFDATA2LSB
#else
#define HOST_DATA ELFDATA2MSB
#endif

#if __ELF_NATIVE_CLASS == 64
#define SYM_TYPE(info) ELF64_ST_TYPE(info)
#else
#define SYM_TYPE(info) ELF32_ST_TYPE(info)
#endif

#define REBUILD "rebuild or reinstall it"

static const char *machine_name(unsigned m) {
    static const struct { unsigned em; const char *name; } names[] = {
        {EM_X86_64, "x86_64"}, {EM_386, "i386"},    {EM_AARCH64, "aarch64"}, {EM_ARM, "arm"},
        {EM_PPC64, "ppc64"},   {EM_PPC, "ppc"},     {EM_RISCV, "riscv"},     {EM_S390, "s390"},
        {EM_MIPS, "mips"},     {EM_SPARCV9, "sparc64"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].em == m) return names[i].name;
    return "another machine";
}

/* The identification bytes: ELF at all, then word size and byte order. */
static bool check_ident(const unsigned char *id, size_t got, char *why, size_t len) {
    if (got < SELFMAG || memcmp(id, ELFMAG, SELFMAG)) {
        snprintf(why, len, "not an ELF file (no \\177ELF at its start); rebuild it as a shared "
                 "object (gcc -shared -fPIC) or reinstall it");
        return false;
    }
    if (got < EI_NIDENT) {
        snprintf(why, len, "file is truncated (%zu bytes, less than an ELF header); " REBUILD,
                 got);
        return false;
    }
    if (id[EI_CLASS] != HOST_CLASS) {
        snprintf(why, len, "a %s ELF file, and this lt is %d-bit; build it for this machine",
                 id[EI_CLASS] == ELFCLASS32 ? "32-bit" : id[EI_CLASS] == ELFCLASS64 ? "64-bit"
                 : "corrupt", __ELF_NATIVE_CLASS);
        return false;
    }
    if (id[EI_DATA] != HOST_DATA) {
        snprintf(why, len, "an ELF file of the other byte order (%s), so for another machine; "
                 "build it for this machine", id[EI_DATA] == ELFDATA2MSB ? "big-endian"
                 : id[EI_DATA] == ELFDATA2LSB ? "little-endian" : "unknown");
        return false;
    }
    return true;
}

/* The rest of the header: version, a shared object, this machine. */
static bool check_header(const ElfW(Ehdr) *eh, char *why, size_t len) {
    if (eh->e_ident[EI_VERSION] != EV_CURRENT || eh->e_version != EV_CURRENT) {
        snprintf(why, len, "ELF version %u, not %d, so the file is corrupt; " REBUILD,
                 (unsigned)eh->e_version, EV_CURRENT);
        return false;
    }
    if (eh->e_type != ET_DYN) {
        snprintf(why, len, "%s, not a shared object; link it with gcc -shared -fPIC",
                 eh->e_type == ET_REL ? "an object file (ELF type REL)"
                 : eh->e_type == ET_EXEC ? "an executable (ELF type EXEC)"
                 : eh->e_type == ET_CORE ? "a core dump (ELF type CORE)"
                 : "an ELF file of an unknown type");
        return false;
    }
    if (HOST_MACHINE != EM_NONE && eh->e_machine != HOST_MACHINE) {
        snprintf(why, len, "built for %s (ELF machine %u), and this is %s (%u); build it for "
                 "this machine", machine_name(eh->e_machine), (unsigned)eh->e_machine,
                 machine_name(HOST_MACHINE), (unsigned)HOST_MACHINE);
        return false;
    }
    if (eh->e_phnum && eh->e_phentsize != sizeof(ElfW(Phdr))) {
        snprintf(why, len, "program headers of %u bytes, not %zu, so the file is corrupt; "
                 REBUILD, (unsigned)eh->e_phentsize, sizeof(ElfW(Phdr)));
        return false;
    }
    return true;
}

/* off + n, false when it does not fit a uint64_t (a corrupt header). */
static bool range_end(uint64_t off, uint64_t n, uint64_t *end) {
    *end = off + n;
    return *end >= off;
}

static bool too_far(const char *what, bool fits, uint64_t end, uint64_t size, char *why,
                    size_t len) {
    if (!fits)
        snprintf(why, len, "file is corrupt (%s's range overflows); " REBUILD, what);
    else if (end > size)
        snprintf(why, len, "file is truncated (%s ends at byte %" PRIu64 " of %" PRIu64 "); "
                 REBUILD, what, end, size);
    return !fits || end > size;
}

/* Every part dlopen maps must be in the file: the program header table,
 * then each header's [p_offset, p_offset + p_filesz). */
static bool check_ranges(int fd, const ElfW(Ehdr) *eh, uint64_t size, char *why, size_t len) {
    uint64_t end;
    bool fits = range_end(eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(ElfW(Phdr)), &end);
    if (too_far("the program header table", fits, end, size, why, len)) return false;
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        ElfW(Phdr) ph;
        off_t at = (off_t)(eh->e_phoff + i * sizeof ph);
        errno = 0;
        if (pread(fd, &ph, sizeof ph, at) != (ssize_t)sizeof ph) {
            snprintf(why, len, "cannot read program header %u: %s; " REBUILD, i,
                     strerror(errno ? errno : EIO));
            return false;
        }
        if (ph.p_filesz == 0) continue; /* reads nothing from the file, wherever it points */
        fits = range_end(ph.p_offset, ph.p_filesz, &end);
        if (too_far("segment", fits, end, size, why, len)) return false;
    }
    return true;
}

static bool check_fd(int fd, char *why, size_t len) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, len, "not a regular file; give the path of a shared object");
        return false;
    }
    ElfW(Ehdr) eh;
    memset(&eh, 0, sizeof eh);
    size_t want = (uint64_t)st.st_size < sizeof eh ? (size_t)st.st_size : sizeof eh;
    ssize_t got = pread(fd, &eh, want, 0);
    if (got < 0) {
        snprintf(why, len, "cannot read it: %s", strerror(errno));
        return false;
    }
    if (!check_ident(eh.e_ident, (size_t)got, why, len)) return false;
    if ((size_t)got < sizeof eh) {
        snprintf(why, len, "file is truncated (ELF header ends at byte %zu of %zd); " REBUILD,
                 sizeof eh, got);
        return false;
    }
    return check_header(&eh, why, len) && check_ranges(fd, &eh, (uint64_t)st.st_size, why, len);
}

bool registry_elf_loadable(const char *path, char *why, size_t len) {
    /* O_NONBLOCK: a FIFO named like a plugin is refused as not a regular
     * file instead of blocking until something writes to it */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 && errno == ENOENT) {
        snprintf(why, len, "no such file; check the path (a relative path is taken from the "
                 "current directory)");
        return false;
    }
    if (fd < 0) {
        snprintf(why, len, "cannot open it: %s; check its permissions", strerror(errno));
        return false;
    }
    bool ok = check_fd(fd, why, len);
    close(fd);
    return ok;
}

/* ---- symbols --------------------------------------------------------------- */

typedef struct segment_probe {
    uintptr_t addr;
    bool found, exec;
} segment_probe;

static int find_segment(struct dl_phdr_info *info, size_t size, void *user) {
    (void)size;
    segment_probe *p = user;
    for (unsigned i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type != PT_LOAD || p->addr < start || p->addr - start >= ph->p_memsz)
            continue;
        p->found = true;
        p->exec = (ph->p_flags & PF_X) != 0;
        return 1;
    }
    return 0;
}

/* For an address no typed symbol starts at: an IFUNC's resolved body is
 * often local, hand-written assembly may leave a symbol untyped. Code is
 * what lies in an executable segment. */
static bool in_code(const void *addr, char *why, size_t len) {
    segment_probe p = {(uintptr_t)addr, false, false};
    dl_iterate_phdr(find_segment, &p);
    if (p.exec) return true;
    snprintf(why, len, p.found ? "data, not code (it lies in a segment that is not executable), "
             "so not a function" : "not in any loaded object (an absolute or thread-local "
             "symbol), so not a function");
    return false;
}

bool registry_is_function(const void *addr, char *why, size_t len) {
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (!dladdr1(addr, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym || info.dli_saddr != addr)
        return in_code(addr, why, len);
    unsigned type = SYM_TYPE(sym->st_info);
    if (type == STT_FUNC || type == STT_GNU_IFUNC) return true;
    if (type == STT_NOTYPE) return in_code(addr, why, len);
    if (type == STT_OBJECT || type == STT_COMMON)
        snprintf(why, len, "a variable (ELF symbol type %s), not a function",
                 type == STT_OBJECT ? "OBJECT" : "COMMON");
    else
        snprintf(why, len, "not a function (ELF symbol type %u)", type);
    return false;
}
