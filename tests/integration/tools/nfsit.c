/*
 * nfsit: small, dependency-free test program for the rnfs integration
 * harness. Runs inside the Linux-client guest (busybox has no good tool for
 * these jobs). Build on the host, statically:
 *     gcc -O2 -static -Wall -Wextra -o nfsit nfsit.c
 *
 * Modes:
 *   nfsit integrity [options]   random writes/truncates/reads checked against
 *                               an in-memory model, with cache drops between phases
 *   nfsit mkfiles DIR N [PREFIX] create N empty files DIR/PREFIX1..N (O_EXCL)
 *   nfsit excl PATH             exclusive create: exit 0 created, 3 EEXIST, 1 other error
 *   nfsit rename OLD NEW        plain rename(2): exit 0, or print the errno name and exit 1
 *   nfsit asuser UID GID CMD... run CMD with that uid/gid and no supplementary groups
 *   nfsit seekdir DIR           every telldir() position (cookies) is non-negative and
 *                               seekdir() to it resumes at the entry that followed it
 *   nfsit restart [options]     crash test: data committed with fsync survives kill -9
 *                               of the server; open fds and dir handles keep working
 * Every failure prints "nfsit: FAIL ..." and exits 1.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <grp.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024 * 1024)

static void fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stdout, "nfsit: FAIL ");
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fprintf(stdout, "\n");
    fflush(stdout);
    exit(1);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* xorshift64*: reproducible from the printed seed. */
static uint64_t rng_state = 88172645463325252ULL;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}
static uint64_t rnd_below(uint64_t n) { return n ? rnd() % n : 0; }
static void rnd_fill(unsigned char *p, size_t n)
{
    while (n >= 8) {
        uint64_t v = rnd();
        memcpy(p, &v, 8);
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t v = rnd();
        memcpy(p, &v, n);
    }
}

static void drop_caches(void)
{
    sync();
    int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
    if (fd < 0 || write(fd, "3\n", 2) != 2)
        fail("cannot drop caches: %s (must run as root in the guest)", strerror(errno));
    close(fd);
}

static void full_write(int fd, const unsigned char *buf, size_t len, off_t off, const char *what)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pwrite(fd, buf + done, len - done, off + (off_t)done);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fail("%s: pwrite(off=%lld len=%zu): %s", what, (long long)(off + done), len - done,
                 strerror(errno));
        }
        done += (size_t)n;
    }
}

/* Reads up to len bytes at off; returns bytes read (short only at EOF). */
static size_t full_read(int fd, unsigned char *buf, size_t len, off_t off, const char *what)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, buf + done, len - done, off + (off_t)done);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fail("%s: pread(off=%lld len=%zu): %s", what, (long long)(off + done), len - done,
                 strerror(errno));
        }
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return done;
}

static void do_fsync(int fd, const char *what)
{
    if (fsync(fd) != 0)
        fail("%s: fsync: %s", what, strerror(errno));
}

/* ------------------------------------------------------------------ model */

struct mfile {
    char path[4096];
    char name[64];
    int fd;
    int direct;
    unsigned char *data; /* expected contents */
    size_t size;
};

static unsigned char *scratch;
static size_t scratch_len;

#define HIST 24
static char history[HIST][160];
static unsigned long hist_n;
static void note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(history[hist_n % HIST], sizeof history[0], fmt, ap);
    va_end(ap);
    hist_n++;
}
static void dump_history(void)
{
    unsigned long first = hist_n > HIST ? hist_n - HIST : 0;
    printf("nfsit: last operations (oldest first):\n");
    for (unsigned long i = first; i < hist_n; i++)
        printf("  #%lu %s\n", i, history[i % HIST]);
}

static void mopen(struct mfile *f, int create)
{
    int flags = O_RDWR | (create ? O_CREAT | O_TRUNC : 0) | (f->direct ? O_DIRECT : 0);
    f->fd = open(f->path, flags, 0644);
    if (f->fd < 0)
        fail("open %s: %s", f->path, strerror(errno));
}

static void mclose(struct mfile *f)
{
    if (close(f->fd) != 0)
        fail("close %s: %s (dirty data could not be written back)", f->path, strerror(errno));
    f->fd = -1;
}

/* Compares [off, off+len) of the file with the model; len may pass EOF. */
static void verify_range(struct mfile *f, size_t off, size_t len, const char *when)
{
    if (len > scratch_len)
        len = scratch_len;
    size_t want = off >= f->size ? 0 : (f->size - off < len ? f->size - off : len);
    size_t got = full_read(f->fd, scratch, len, (off_t)off, f->name);
    if (got != want) {
        dump_history();
        fail("%s: %s: read(off=%zu len=%zu) returned %zu bytes, model size %zu wants %zu", when,
             f->name, off, len, got, f->size, want);
    }
    if (memcmp(scratch, f->data + off, got) != 0) {
        size_t i = 0;
        while (scratch[i] == f->data[off + i])
            i++;
        dump_history();
        fail("%s: %s: data differs at offset %zu (read 0x%02x, expected 0x%02x; range off=%zu "
             "len=%zu, size %zu)",
             when, f->name, off + i, scratch[i], f->data[off + i], off, got, f->size);
    }
}

static void verify_size(struct mfile *f, const char *when)
{
    struct stat st;
    if (fstat(f->fd, &st) != 0)
        fail("fstat %s: %s", f->path, strerror(errno));
    if ((size_t)st.st_size != f->size) {
        dump_history();
        fail("%s: %s: size is %lld, model says %zu", when, f->name, (long long)st.st_size, f->size);
    }
}

static void verify_all(struct mfile *f, const char *when)
{
    verify_size(f, when);
    for (size_t off = 0; off < f->size; off += scratch_len)
        verify_range(f, off, scratch_len, when);
    verify_range(f, f->size, 4096, when); /* nothing past EOF */
}

static void model_write(struct mfile *f, size_t off, const unsigned char *buf, size_t len)
{
    if (off > f->size)
        memset(f->data + f->size, 0, off - f->size);
    memcpy(f->data + off, buf, len);
    if (off + len > f->size)
        f->size = off + len;
}

static void model_truncate(struct mfile *f, size_t size)
{
    if (size > f->size)
        memset(f->data + f->size, 0, size - f->size);
    f->size = size;
}

/* -------------------------------------------------------------- integrity */

static size_t pick_len(size_t max)
{
    uint64_t r = rnd_below(100);
    size_t len;
    if (r < 50)
        len = 1 + rnd_below(4096);
    else if (r < 85)
        len = 4097 + rnd_below(128 * 1024);
    else
        len = 128 * 1024 + rnd_below(MIB);
    return len > max ? max : len;
}

static size_t pick_off(struct mfile *f, size_t len, size_t max)
{
    uint64_t r = rnd_below(100);
    size_t off;
    if (r < 60)
        off = rnd_below(max - len + 1);
    else if (r < 80) /* around EOF: appends, small holes, overlaps with the tail */
        off = f->size + rnd_below(65536) - (f->size < 4096 ? f->size : rnd_below(4096));
    else /* page aligned */
        off = rnd_below((max - len) / 4096 + 1) * 4096;
    if (off + len > max)
        off = max - len;
    return off;
}

static int integrity(int argc, char **argv)
{
    const char *dir = ".";
    int nfiles = 4, phases = 4, direct = 1;
    size_t maxsize = 4 * MIB;
    long ops = 6000;
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    int c;
    while ((c = getopt(argc, argv, "d:f:s:n:p:S:N")) != -1) {
        switch (c) {
        case 'd': dir = optarg; break;
        case 'f': nfiles = atoi(optarg); break;
        case 's': maxsize = strtoull(optarg, NULL, 0); break;
        case 'n': ops = atol(optarg); break;
        case 'p': phases = atoi(optarg); break;
        case 'S': seed = strtoull(optarg, NULL, 0); break;
        case 'N': direct = 0; break;
        default:
            fprintf(stderr, "usage: nfsit integrity [-d DIR] [-f FILES] [-s MAXSIZE] [-n OPS] "
                            "[-p PHASES] [-S SEED] [-N (no O_DIRECT file)]\n");
            return 2;
        }
    }
    if (nfiles < 1 || phases < 1 || ops < 1 || maxsize < 8192)
        fail("bad arguments");
    rng_state = seed ? seed : 1;
    printf("nfsit integrity: dir=%s files=%d maxsize=%zu ops=%ld phases=%d seed=%" PRIu64
           " (rerun with -S %" PRIu64 ")\n",
           dir, nfiles, maxsize, ops, phases, seed, seed);
    fflush(stdout);

    scratch_len = MIB + 4096;
    scratch = aligned_alloc(4096, scratch_len);
    unsigned char *wbuf = malloc(MIB + 8);
    struct mfile *files = calloc((size_t)nfiles, sizeof *files);
    if (!scratch || !wbuf || !files)
        fail("out of memory");
    for (int i = 0; i < nfiles; i++) {
        struct mfile *f = &files[i];
        snprintf(f->name, sizeof f->name, "integrity.%d.%d", (int)getpid(), i);
        snprintf(f->path, sizeof f->path, "%s/%s", dir, f->name);
        f->direct = direct && i == 0; /* file 0 bypasses the page cache */
        f->data = malloc(maxsize + 8);
        if (!f->data)
            fail("out of memory");
        mopen(f, 1);
    }

    long counts[7] = {0};
    const char *names[7] = {"write", "read", "truncate", "fsync", "reopen", "stat", "drop+read"};
    unsigned long long bytes_w = 0, bytes_r = 0;
    double t0 = now();
    long per_phase = (ops + phases - 1) / phases;
    long op = 0;
    for (int ph = 1; ph <= phases; ph++) {
        for (long k = 0; k < per_phase && op < ops; k++, op++) {
            struct mfile *f = &files[rnd_below((uint64_t)nfiles)];
            uint64_t r = rnd_below(1000);
            if (r < 450) {
                size_t len = pick_len(maxsize);
                size_t off = pick_off(f, len, maxsize);
                rnd_fill(wbuf, len);
                note("write %s off=%zu len=%zu (size %zu)", f->name, off, len, f->size);
                full_write(f->fd, wbuf, len, (off_t)off, f->name);
                model_write(f, off, wbuf, len);
                bytes_w += len;
                counts[0]++;
            } else if (r < 750) {
                size_t len = pick_len(maxsize);
                size_t off = rnd_below(f->size + 8192);
                note("read %s off=%zu len=%zu (size %zu)", f->name, off, len, f->size);
                verify_range(f, off, len, "random read");
                bytes_r += len;
                counts[1]++;
            } else if (r < 830) {
                uint64_t t = rnd_below(10);
                size_t size = t < 4 ? rnd_below(f->size + 1)
                            : t < 8 ? f->size + rnd_below(maxsize - f->size + 1)
                            : t < 9 ? 0
                                    : rnd_below(maxsize / 4096 + 1) * 4096;
                note("truncate %s %zu -> %zu", f->name, f->size, size);
                if (ftruncate(f->fd, (off_t)size) != 0)
                    fail("ftruncate %s to %zu: %s", f->name, size, strerror(errno));
                model_truncate(f, size);
                counts[2]++;
            } else if (r < 900) {
                note("fsync %s", f->name);
                do_fsync(f->fd, f->name);
                counts[3]++;
            } else if (r < 950) {
                note("close+reopen %s", f->name);
                mclose(f);
                mopen(f, 0);
                verify_size(f, "after reopen");
                counts[4]++;
            } else if (r < 990) {
                note("fstat %s", f->name);
                verify_size(f, "fstat");
                counts[5]++;
            } else {
                /* Cached data of an open file must come back from the server intact. */
                note("fsync+drop_caches+read %s", f->name);
                do_fsync(f->fd, f->name);
                drop_caches();
                size_t len = pick_len(maxsize);
                verify_range(f, rnd_below(f->size + 1), len, "read after drop_caches");
                counts[6]++;
            }
        }
        /* End of phase: flush, close, drop every cache, verify everything from the server. */
        for (int i = 0; i < nfiles; i++) {
            do_fsync(files[i].fd, files[i].name);
            mclose(&files[i]);
        }
        drop_caches();
        for (int i = 0; i < nfiles; i++) {
            mopen(&files[i], 0);
            verify_all(&files[i], "end-of-phase verify");
            bytes_r += files[i].size;
        }
        printf("nfsit integrity: phase %d/%d ok: %ld ops, %.1fs, sizes", ph, phases, op,
               now() - t0);
        for (int i = 0; i < nfiles; i++)
            printf(" %zu", files[i].size);
        printf("\n");
        fflush(stdout);
    }
    double dt = now() - t0;
    printf("nfsit integrity: ops:");
    for (int i = 0; i < 7; i++)
        printf(" %s=%ld", names[i], counts[i]);
    printf("\nnfsit integrity: PASS %ld ops in %.1fs, wrote %.1f MiB, read+verified %.1f MiB\n",
           ops, dt, bytes_w / (double)MIB, bytes_r / (double)MIB);
    for (int i = 0; i < nfiles; i++) {
        mclose(&files[i]);
        if (unlink(files[i].path) != 0)
            fail("unlink %s: %s", files[i].path, strerror(errno));
    }
    return 0;
}

/* ---------------------------------------------------------------- mkfiles */

static int mkfiles(int argc, char **argv)
{
    if (argc < 3)
        fail("usage: nfsit mkfiles DIR N [PREFIX]");
    const char *dir = argv[1];
    long n = atol(argv[2]);
    const char *prefix = argc > 3 ? argv[3] : "f";
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd < 0)
        fail("open %s: %s", dir, strerror(errno));
    double t0 = now();
    char name[256];
    for (long i = 1; i <= n; i++) {
        snprintf(name, sizeof name, "%s%ld", prefix, i);
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0)
            fail("create %s/%s: %s", dir, name, strerror(errno));
        close(fd);
    }
    printf("nfsit mkfiles: created %ld files in %.1fs\n", n, now() - t0);
    close(dfd);
    return 0;
}

/* ------------------------------------------------------------------- excl */

static int excl(int argc, char **argv)
{
    if (argc != 2)
        fail("usage: nfsit excl PATH");
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_EXCL, 0640);
    if (fd < 0) {
        if (errno == EEXIST)
            return 3;
        printf("nfsit excl: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    if (write(fd, "exclusive\n", 10) != 10 || close(fd) != 0) {
        printf("nfsit excl: write %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    return 0;
}

/* ---------------------------------------------------------- rename, asuser */

static int do_rename(int argc, char **argv)
{
    if (argc != 3)
        fail("usage: nfsit rename OLD NEW");
    if (rename(argv[1], argv[2]) != 0) {
        printf("%s\n", strerrorname_np(errno) ? strerrorname_np(errno) : strerror(errno));
        return 1;
    }
    return 0;
}

static int asuser(int argc, char **argv)
{
    if (argc < 4)
        fail("usage: nfsit asuser UID GID CMD...");
    gid_t gid = (gid_t)atol(argv[2]);
    if (setgroups(0, NULL) != 0 || setgid(gid) != 0 || setuid((uid_t)atol(argv[1])) != 0)
        fail("asuser: cannot drop privileges: %s", strerror(errno));
    execvp(argv[3], argv + 3);
    fail("asuser: exec %s: %s", argv[3], strerror(errno));
    return 1;
}

/* ---------------------------------------------------------------- seekdir */

/* The Linux client hands the server's READDIR cookies to applications as
 * telldir() positions; lseek() on an NFS directory refuses a negative one. */
static int do_seekdir(int argc, char **argv)
{
    if (argc != 2)
        fail("usage: nfsit seekdir DIR");
    DIR *d = opendir(argv[1]);
    if (!d)
        fail("opendir %s: %s", argv[1], strerror(errno));
    size_t n = 0, cap = 1024;
    char **names = malloc(cap * sizeof *names);
    long *after = malloc(cap * sizeof *after);
    if (!names || !after)
        fail("out of memory");
    struct dirent *e;
    while ((errno = 0, e = readdir(d))) {
        if (n == cap) {
            cap *= 2;
            names = realloc(names, cap * sizeof *names);
            after = realloc(after, cap * sizeof *after);
            if (!names || !after)
                fail("out of memory");
        }
        names[n] = strdup(e->d_name);
        after[n] = telldir(d);
        if (after[n] < 0)
            fail("telldir after %s is %ld", e->d_name, after[n]);
        n++;
    }
    if (errno)
        fail("readdir %s: %s", argv[1], strerror(errno));
    /* Back to each position, last first, so every seek goes backwards too. */
    for (size_t i = n; i-- > 1;) {
        seekdir(d, after[i - 1]);
        errno = 0;
        e = readdir(d);
        if (!e)
            fail("seekdir(%ld) after %s: %s", after[i - 1], names[i - 1],
                 errno ? strerror(errno) : "end of directory");
        if (strcmp(e->d_name, names[i]))
            fail("seekdir(%ld) after %s gave %s, want %s", after[i - 1], names[i - 1],
                 e->d_name, names[i]);
    }
    closedir(d);
    printf("nfsit seekdir: %zu positions ok\n", n);
    return 0;
}

/* ---------------------------------------------------------------- restart */

static int ctl_fd = -1;

static void ctl_request(const char *why)
{
    const char *dev = getenv("LC_CTL");
    if (!getenv("LC_SERVER_CONTROL") || strcmp(getenv("LC_SERVER_CONTROL"), "1") != 0)
        fail("the harness controls no server: run the runner with --server-cmd");
    if (ctl_fd < 0 && (ctl_fd = open(dev ? dev : "/dev/ttyS3", O_RDWR | O_NOCTTY)) < 0)
        fail("open control port: %s", strerror(errno));
    char line[128];
    int n = snprintf(line, sizeof line, "restart nfsit %s\n", why);
    if (write(ctl_fd, line, (size_t)n) != n)
        fail("write control port: %s", strerror(errno));
}

/* Waits up to timeout_ms for the host's answer; 1 = restarted, 0 = no answer yet. */
static int ctl_poll(int timeout_ms)
{
    static char buf[256];
    static size_t have;
    struct pollfd p = {.fd = ctl_fd, .events = POLLIN};
    double end = now() + timeout_ms / 1000.0;
    for (;;) {
        char *nl = memchr(buf, '\n', have);
        if (nl) {
            *nl = 0;
            if (strncmp(buf, "ok", 2) != 0)
                fail("the harness could not restart the server: %s", buf);
            printf("nfsit restart: host says: %s\n", buf);
            have = 0;
            return 1;
        }
        int left = (int)((end - now()) * 1000);
        if (left < 0)
            left = 0;
        if (poll(&p, 1, left) <= 0)
            return 0;
        ssize_t n = read(ctl_fd, buf + have, sizeof buf - 1 - have);
        if (n <= 0)
            fail("read control port: %s", n ? strerror(errno) : "EOF");
        have += (size_t)n;
    }
}

static void expect_names(DIR *dp, const char **names, int n, const char *when)
{
    int *seen = calloc((size_t)n, sizeof *seen);
    int total = 0;
    struct dirent *de;
    rewinddir(dp);
    errno = 0;
    while ((de = readdir(dp)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        total++;
        int found = 0;
        for (int i = 0; i < n; i++)
            if (!strcmp(names[i], de->d_name)) {
                if (seen[i]++)
                    fail("%s: readdir returned %s twice", when, de->d_name);
                found = 1;
            }
        if (!found)
            fail("%s: readdir returned unexpected entry %s", when, de->d_name);
    }
    if (errno)
        fail("%s: readdir: %s", when, strerror(errno));
    for (int i = 0; i < n; i++)
        if (!seen[i])
            fail("%s: readdir misses %s", when, names[i]);
    printf("nfsit restart: %s: readdir on the old handle lists all %d entries\n", when, total);
    free(seen);
}

static int restart(int argc, char **argv)
{
    const char *dir = ".";
    int cycles = 2;
    size_t size = 2 * MIB;
    uint64_t seed = (uint64_t)time(NULL);
    int c;
    while ((c = getopt(argc, argv, "d:c:s:S:")) != -1) {
        switch (c) {
        case 'd': dir = optarg; break;
        case 'c': cycles = atoi(optarg); break;
        case 's': size = strtoull(optarg, NULL, 0); break;
        case 'S': seed = strtoull(optarg, NULL, 0); break;
        default:
            fprintf(stderr, "usage: nfsit restart [-d DIR] [-c CYCLES] [-s BYTES] [-S SEED]\n");
            return 2;
        }
    }
    if (cycles < 1 || size < 65536)
        fail("bad arguments");
    rng_state = seed ? seed : 1;
    printf("nfsit restart: dir=%s cycles=%d size=%zu seed=%" PRIu64 "\n", dir, cycles, size, seed);
    fflush(stdout);
    scratch_len = MIB;
    scratch = malloc(scratch_len);
    size_t cap = size * (size_t)(cycles + 1) + 64 * MIB;
    unsigned char *buf = malloc(MIB);
    if (!scratch || !buf)
        fail("out of memory");

    char top[3072];
    snprintf(top, sizeof top, "%s/restart.%d", dir, (int)getpid());
    if (mkdir(top, 0755) != 0)
        fail("mkdir %s: %s", top, strerror(errno));
    int dfd = open(top, O_RDONLY | O_DIRECTORY);
    DIR *dp = fdopendir(dup(dfd));
    if (dfd < 0 || !dp)
        fail("open %s: %s", top, strerror(errno));

    /* committed: fsynced before every kill; log: appended and fsynced while the
     * server is being killed; unstable: written without fsync before the kill,
     * fsynced after it (the client must resend if the write verifier changed). */
    struct mfile fs[3];
    const char *fnames[3] = {"committed", "log", "unstable"};
    for (int i = 0; i < 3; i++) {
        memset(&fs[i], 0, sizeof fs[i]);
        snprintf(fs[i].name, sizeof fs[i].name, "%s", fnames[i]);
        snprintf(fs[i].path, sizeof fs[i].path, "%s/%s", top, fnames[i]);
        fs[i].data = malloc(cap);
        if (!fs[i].data)
            fail("out of memory");
        mopen(&fs[i], 1);
    }
    struct mfile *com = &fs[0], *lg = &fs[1], *uns = &fs[2];
    const char *names[256];
    char namebuf[256][32];
    int nnames = 0;
    for (int i = 0; i < 3; i++)
        names[nnames++] = fnames[i];

    for (int cyc = 0; cyc < cycles; cyc++) {
        int async = cyc % 2 == 1;
        /* Before the kill. */
        for (size_t done = 0; done < size; done += MIB) {
            size_t len = size - done < MIB ? size - done : MIB;
            rnd_fill(buf, len);
            full_write(com->fd, buf, len, (off_t)com->size, "committed");
            model_write(com, com->size, buf, len);
        }
        do_fsync(com->fd, "committed");
        rnd_fill(buf, 65536);
        full_write(lg->fd, buf, 65536, (off_t)lg->size, "log");
        model_write(lg, lg->size, buf, 65536);
        do_fsync(lg->fd, "log");
        /* A new file and a subdirectory through the directory handle. */
        snprintf(namebuf[nnames], sizeof namebuf[0], "entry-%d", cyc);
        int efd = openat(dfd, namebuf[nnames], O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (efd < 0 || write(efd, namebuf[nnames], strlen(namebuf[nnames])) < 0 || fsync(efd) ||
            close(efd))
            fail("create %s: %s", namebuf[nnames], strerror(errno));
        names[nnames] = namebuf[nnames];
        nnames++;
        snprintf(namebuf[nnames], sizeof namebuf[0], "sub-%d", cyc);
        if (mkdirat(dfd, namebuf[nnames], 0755) != 0)
            fail("mkdir %s: %s", namebuf[nnames], strerror(errno));
        names[nnames] = namebuf[nnames];
        nnames++;
        expect_names(dp, names, nnames, "before the kill");
        /* Written, not fsynced: may be uncommitted on the server when it dies. */
        size_t uoff = rnd_below(uns->size + 1);
        size_t ulen = MIB;
        rnd_fill(buf, ulen);
        full_write(uns->fd, buf, ulen, (off_t)uoff, "unstable");
        model_write(uns, uoff, buf, ulen);

        printf("nfsit restart: cycle %d: committed=%zu log=%zu bytes; asking the host to kill -9 "
               "and restart the server (%s)\n",
               cyc + 1, com->size, lg->size, async ? "while appending with fsync" : "and waiting");
        fflush(stdout);
        double t0 = now();
        ctl_request(async ? "async" : "sync");
        if (async) {
            /* Keep appending + fsyncing to the same fd while the server dies and comes back;
             * each record counts as committed only once its fsync returned. */
            long recs = 0;
            int back = 0;
            while (!back) {
                if (lg->size + 8192 > cap) {
                    back = ctl_poll(100);
                    continue;
                }
                rnd_fill(buf, 8192);
                full_write(lg->fd, buf, 8192, (off_t)lg->size, "log during restart");
                do_fsync(lg->fd, "log during restart");
                model_write(lg, lg->size, buf, 8192);
                recs++;
                back = ctl_poll(0);
                if (now() - t0 > 240)
                    fail("no restart answer from the host within 240s");
            }
            printf("nfsit restart: %ld log records appended and fsynced across the restart\n",
                   recs);
        } else if (!ctl_poll(240000)) {
            fail("no restart answer from the host within 240s");
        }
        /* After the restart: same fds, same directory handle. */
        drop_caches();
        verify_all(com, "after restart (same fd)");
        verify_all(lg, "after restart (same fd)");
        do_fsync(uns->fd, "unstable (commit after restart)");
        drop_caches();
        verify_all(uns, "after restart, fsync of data written before the kill");
        expect_names(dp, names, nnames, "after the restart");
        struct stat st;
        if (fstatat(dfd, namebuf[nnames - 2], &st, 0) != 0 ||
            (size_t)st.st_size != strlen(namebuf[nnames - 2]))
            fail("fstatat %s after restart: %s", namebuf[nnames - 2], strerror(errno));
        char renamed[32];
        snprintf(renamed, sizeof renamed, "renamed-%d", cyc);
        if (renameat(dfd, namebuf[nnames - 2], dfd, renamed) != 0)
            fail("rename after restart: %s", strerror(errno));
        strcpy(namebuf[nnames - 2], renamed);
        /* more data through the old fd */
        rnd_fill(buf, 65536);
        full_write(com->fd, buf, 65536, (off_t)(com->size / 2), "committed after restart");
        model_write(com, com->size / 2, buf, 65536);
        do_fsync(com->fd, "committed after restart");
        expect_names(dp, names, nnames, "after rename");
        printf("nfsit restart: cycle %d ok (%.1fs from the request to verified)\n", cyc + 1,
               now() - t0);
        fflush(stdout);
    }
    /* Fresh opens by path after everything. */
    for (int i = 0; i < 3; i++)
        mclose(&fs[i]);
    drop_caches();
    for (int i = 0; i < 3; i++) {
        mopen(&fs[i], 0);
        verify_all(&fs[i], "final verify (fresh open)");
        mclose(&fs[i]);
    }
    closedir(dp);
    close(dfd);
    printf("nfsit restart: PASS %d restart(s); committed=%zu log=%zu unstable=%zu bytes intact\n",
           cycles, com->size, lg->size, uns->size);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: nfsit integrity|mkfiles|excl|rename|asuser|restart|seekdir ...\n");
        return 2;
    }
    const char *mode = argv[1];
    if (!strcmp(mode, "integrity"))
        return integrity(argc - 1, argv + 1);
    if (!strcmp(mode, "mkfiles"))
        return mkfiles(argc - 1, argv + 1);
    if (!strcmp(mode, "excl"))
        return excl(argc - 1, argv + 1);
    if (!strcmp(mode, "rename"))
        return do_rename(argc - 1, argv + 1);
    if (!strcmp(mode, "asuser"))
        return asuser(argc - 1, argv + 1);
    if (!strcmp(mode, "restart"))
        return restart(argc - 1, argv + 1);
    if (!strcmp(mode, "seekdir"))
        return do_seekdir(argc - 1, argv + 1);
    fprintf(stderr, "nfsit: unknown mode %s\n", mode);
    return 2;
}
