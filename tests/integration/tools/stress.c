/*
 * stress: concurrency and edge-case torture modes for the rnfs soak
 * (tests/integration/soak, guest workload linux-client/workloads/stress.sh).
 * Runs inside the Linux-client guest as root (it drops the page cache). Build
 * on the host, statically:
 *     gcc -O2 -static -Wall -Wextra -o stress stress.c
 *
 * Modes:
 *   stress dirstorm DIR NPROC SECS [NAMES]
 *       NPROC processes create, rename, link, unlink, mkdir and rmdir among NAMES
 *       file names and 12 directory names in DIR/A and DIR/B for SECS seconds,
 *       while 2 processes list the directories. Then, cached and after
 *       drop_caches: no name listed twice, readdir and lstat agree on every name
 *       and inode, link counts match (files: names in A and B; directories: 2 +
 *       subdirectories). Errors a race explains (ENOENT, EEXIST, ENOTEMPTY,
 *       EISDIR, ENOTDIR, EINVAL, EBUSY, EPERM) are expected, any other fails.
 *       NAMES: default 48, at most 4000; above 100, half of them are created first.
 *   stress append FILE NPROC NREC
 *       NPROC processes append NREC 61-byte records each with O_APPEND (random
 *       fsyncs and reopens): the file holds every record once, each process's in
 *       order, cached and after drop_caches.
 *   stress mmap FILE SIZE ITERS SEED
 *       random writes through a shared mapping (70%) and pwrite (30%) with
 *       msync, checked against a model with read() after drop_caches every 5
 *       iterations and at the end. SIZE at least 65536.
 *   stress sparse FILE
 *       small tags written at offsets from 0 to 3 TiB: tags read back, holes
 *       read as zeros, EOF where the last tag ends; then a shrink into a tag and
 *       a grow: the cut part reads as zeros. A server may cap the file size (rnfs's
 *       memory backend: 16 GiB): an offset of 1 GiB or more refused with EFBIG is
 *       reported as skipped, not as a failure.
 *   stress truncread FILE SECS NREAD
 *       one writer extends the file with a position-dependent pattern and
 *       truncates it, for SECS seconds, while NREAD readers (reader 1 with
 *       O_DIRECT) read: every byte is 0 (a racing truncate) or the pattern; the
 *       final contents are checked cached and after drop_caches.
 *   stress stripes FILE NPROC ROUNDS
 *       NPROC processes own interleaved 1000-byte stripes (not page aligned) of
 *       one file: ROUNDS random rewrites, then a final value in each stripe,
 *       checked cached and after drop_caches.
 *   stress strict DIR NPROC ITERS
 *       each process runs create (O_EXCL), rename, link, unlink, mkdir, symlink,
 *       rmdir, chmod and truncate on its own names, and every call must succeed:
 *       a non-idempotent call retransmitted by the client must be answered from
 *       the server's duplicate request cache. Can fail spuriously when the client
 *       reconnects from a new source port (tests/integration/README.md, "Soak").
 * Exit: 0 pass; 1 a check failed ("stress: FAIL ..." says what was expected and
 * what was seen); 2 usage error.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GIB (1LL << 30)
#define TIB (1LL << 40)

/* Prints "stress: FAIL [pid N] ..." and exits 1 (children report through their exit status). */
static void fail(const char *fmt, ...)
{
    va_list ap;
    printf("stress: FAIL [pid %d] ", (int)getpid());
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    exit(1);
}

static void say(const char *fmt, ...)
{
    va_list ap;
    printf("stress: ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static int usage(const char *args)
{
    fprintf(stderr, "usage: stress %s\n", args);
    return 2;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* xorshift64*; each process mixes its own id into the state after fork. */
static uint64_t rng_state = 88172645463325252ULL;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}
static uint64_t rnd_below(uint64_t n) { return n ? rnd() % n : 0; }

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p)
        fail("out of memory (%zu bytes)", n);
    return p;
}

static int xopen(const char *path, int flags)
{
    int fd = open(path, flags, 0644);
    if (fd < 0)
        fail("open %s: %s", path, strerror(errno));
    return fd;
}

static void xclose(int fd, const char *what)
{
    if (close(fd) != 0)
        fail("close %s: %s (dirty data could not be written back)", what, strerror(errno));
}

static void xfsync(int fd, const char *what)
{
    if (fsync(fd) != 0)
        fail("fsync %s: %s", what, strerror(errno));
}

static off_t file_size(int fd, const char *what)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        fail("fstat %s: %s", what, strerror(errno));
    return st.st_size;
}

/* Reads from off until EOF or len bytes; returns the count. */
static size_t read_all(int fd, unsigned char *buf, size_t len, off_t off, const char *what)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, buf + got, len - got, off + (off_t)got);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fail("%s: pread(off=%lld len=%zu): %s", what, (long long)(off + got), len - got,
                 strerror(errno));
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return got;
}

static void drop_caches(void)
{
    sync();
    int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
    if (fd < 0 || write(fd, "3\n", 2) != 2)
        fail("cannot drop caches: %s (must run as root in the guest)", strerror(errno));
    close(fd);
}

/* Waits for every child; returns how many did not exit 0. */
static int wait_all(void)
{
    int bad = 0, st;
    pid_t p;
    while ((p = wait(&st)) > 0) {
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
            continue;
        if (WIFSIGNALED(st))
            say("child %d killed by signal %d", (int)p, WTERMSIG(st));
        else
            say("child %d exited with status %d", (int)p, WEXITSTATUS(st));
        bad++;
    }
    return bad;
}

static pid_t xfork(void)
{
    pid_t p = fork();
    if (p < 0)
        fail("fork: %s", strerror(errno));
    return p;
}

/* -------------------------------------------------------------- dirstorm */

#define NDIRS 12      /* directory names d00..d11 */
#define MAX_NAMES 4000
#define MAX_LIST 16384 /* entries a listing may hold before it counts as a loop */
static int nnames = 48; /* file names f0000.. */

static int expected_errno(int e)
{
    return e == ENOENT || e == EEXIST || e == ENOTEMPTY || e == EISDIR || e == ENOTDIR ||
           e == EINVAL || e == EBUSY || e == EPERM;
}

static long unexpected;
static void storm_check(int rc, const char *op, const char *a, const char *b)
{
    if (rc == 0 || expected_errno(errno))
        return;
    unexpected++;
    say("unexpected error: %s %s%s%s: %s", op, a, b ? " " : "", b ? b : "", strerror(errno));
    if (unexpected > 20)
        fail("dirstorm: more than 20 unexpected errors");
}

/* DIR/A or DIR/B, then a file name, or (dirs_too, 1 in 4) a directory name. */
static void storm_path(char *buf, size_t len, const char *dir, int dirs_too)
{
    char side = (char)('A' + rnd_below(2));
    if (dirs_too && rnd_below(4) == 0)
        snprintf(buf, len, "%s/%c/d%02d", dir, side, (int)rnd_below(NDIRS));
    else
        snprintf(buf, len, "%s/%c/f%04d", dir, side, (int)rnd_below((uint64_t)nnames));
}

static void storm_dirpath(char *buf, size_t len, const char *dir)
{
    snprintf(buf, len, "%s/%c/d%02d", dir, (char)('A' + rnd_below(2)), (int)rnd_below(NDIRS));
}

static void storm_worker(const char *dir, double until, int id)
{
    char a[512], b[512];
    long n = 0;
    rng_state ^= (uint64_t)id * 0x9e3779b97f4a7c15ULL + 1;
    while (now() < until) {
        int op = (int)rnd_below(100);
        storm_path(a, sizeof a, dir, 1);
        storm_path(b, sizeof b, dir, 1);
        if (op < 25) {
            int fd = open(a, O_CREAT | O_WRONLY, 0644);
            if (fd < 0) {
                storm_check(-1, "create", a, NULL);
            } else {
                if (rnd_below(3) == 0 && write(fd, a, strlen(a)) < 0)
                    storm_check(-1, "write", a, NULL);
                close(fd);
            }
        } else if (op < 50) {
            storm_check(rename(a, b), "rename", a, b);
        } else if (op < 62) {
            storm_path(a, sizeof a, dir, 0);
            storm_check(link(a, b), "link", a, b);
        } else if (op < 80) {
            storm_path(a, sizeof a, dir, 0);
            storm_check(unlink(a), "unlink", a, NULL);
        } else if (op < 88) {
            storm_dirpath(a, sizeof a, dir);
            storm_check(mkdir(a, 0755), "mkdir", a, NULL);
        } else if (op < 94) {
            storm_dirpath(a, sizeof a, dir);
            storm_check(rmdir(a), "rmdir", a, NULL);
        } else {
            struct stat st;
            storm_check(lstat(a, &st), "lstat", a, NULL);
        }
        n++;
    }
    say("dirstorm worker %d: %ld operations, %ld unexpected errors", id, n, unexpected);
    exit(unexpected ? 1 : 0);
}

struct ent {
    char name[256];
    ino_t ino;
};

/* Lists dir into e (at most max entries, else a loop is assumed); counts names
 * seen twice in *dups, and fails on the first one when strict. */
static int list_dir(const char *dir, struct ent *e, int max, int *dups, int strict)
{
    DIR *d = opendir(dir);
    if (!d)
        fail("opendir %s: %s", dir, strerror(errno));
    int n = 0;
    struct dirent *de;
    *dups = 0;
    errno = 0;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        for (int i = 0; i < n; i++)
            if (!strcmp(e[i].name, de->d_name)) {
                (*dups)++;
                if (strict)
                    fail("readdir of %s returned %s twice", dir, de->d_name);
            }
        if (n >= max)
            fail("readdir of %s returned more than %d entries (a cookie loop?)", dir, max);
        snprintf(e[n].name, sizeof e[n].name, "%s", de->d_name);
        e[n].ino = de->d_ino;
        n++;
        errno = 0;
    }
    if (errno)
        fail("readdir %s: %s", dir, strerror(errno));
    closedir(d);
    return n;
}

static void storm_reader(const char *dir, double until)
{
    static struct ent e[MAX_LIST];
    long passes = 0, dups = 0, maxn = 0;
    char sub[512];
    while (now() < until) {
        int d;
        snprintf(sub, sizeof sub, "%s/%c", dir, (char)('A' + (passes & 1)));
        int n = list_dir(sub, e, MAX_LIST, &d, 0);
        dups += d;
        if (n > maxn)
            maxn = n;
        /* Names listed twice while entries move are allowed, but not without bound. */
        if (n > 4 * (nnames + NDIRS))
            fail("dirstorm: a listing of %s returned %d entries, expected at most 4 x %d names",
                 sub, n, nnames + NDIRS);
        passes++;
    }
    say("dirstorm reader: %ld listings, %ld names seen twice mid-change, at most %ld entries",
        passes, dups, maxn);
    exit(0);
}

static void storm_final_check(const char *dir, const char *when)
{
    static struct ent e[2][MAX_LIST];
    static struct ent sub[64];
    int n[2], nd[2] = {0, 0};
    char sd[2][512];
    for (int s = 0; s < 2; s++) {
        int dups;
        snprintf(sd[s], sizeof sd[s], "%s/%c", dir, 'A' + s);
        n[s] = list_dir(sd[s], e[s], MAX_LIST, &dups, 1);
    }
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < n[s]; i++) {
            char p[1300];
            struct stat st;
            snprintf(p, sizeof p, "%s/%s", sd[s], e[s][i].name);
            if (lstat(p, &st) != 0)
                fail("%s: %s is listed by readdir, but lstat says: %s", when, p, strerror(errno));
            if (st.st_ino != e[s][i].ino)
                fail("%s: %s: readdir says inode %lu, lstat says %lu", when, p,
                     (unsigned long)e[s][i].ino, (unsigned long)st.st_ino);
            if (S_ISDIR(st.st_mode)) {
                int dups;
                nd[s]++;
                if (st.st_nlink != 2)
                    fail("%s: directory %s has nlink %lu, expected 2 (it has no subdirectories)",
                         when, p, (unsigned long)st.st_nlink);
                int m = list_dir(p, sub, 64, &dups, 1);
                if (m != 0)
                    fail("%s: directory %s lists %d entries (first %s), expected none", when, p,
                         m, sub[0].name);
            } else if (S_ISREG(st.st_mode)) {
                int names = 0;
                for (int t = 0; t < 2; t++)
                    for (int j = 0; j < n[t]; j++)
                        if (e[t][j].ino == st.st_ino)
                            names++;
                if ((int)st.st_nlink != names)
                    fail("%s: file %s (inode %lu) has nlink %lu, but A and B list %d names for it",
                         when, p, (unsigned long)st.st_ino, (unsigned long)st.st_nlink, names);
            } else {
                fail("%s: %s has mode 0%o, expected a regular file or a directory", when, p,
                     (unsigned)st.st_mode);
            }
        }
    for (int s = 0; s < 2; s++) {
        struct stat ds;
        if (stat(sd[s], &ds) != 0)
            fail("stat %s: %s", sd[s], strerror(errno));
        if ((int)ds.st_nlink != 2 + nd[s])
            fail("%s: %s has nlink %lu, expected %d (2 + %d subdirectories listed)", when, sd[s],
                 (unsigned long)ds.st_nlink, 2 + nd[s], nd[s]);
        for (int k = 0; k < nnames + NDIRS; k++) {
            char name[16], p[1024];
            struct stat st;
            if (k < nnames)
                snprintf(name, sizeof name, "f%04d", k);
            else
                snprintf(name, sizeof name, "d%02d", k - nnames);
            snprintf(p, sizeof p, "%s/%s", sd[s], name);
            int listed = 0;
            for (int i = 0; i < n[s]; i++)
                if (!strcmp(e[s][i].name, name))
                    listed = 1;
            int exists = lstat(p, &st) == 0;
            if (exists != listed)
                fail("%s: %s: lstat says %s, but readdir %s it", when, p,
                     exists ? "it exists" : "it does not exist", listed ? "lists" : "does not list");
        }
    }
    say("dirstorm %s: A %d entries (%d directories), B %d entries (%d directories), consistent",
        when, n[0], nd[0], n[1], nd[1]);
}

static int dirstorm(int argc, char **argv)
{
    const char *use = "dirstorm DIR NPROC SECS [NAMES]";
    if (argc != 4 && argc != 5)
        return usage(use);
    const char *dir = argv[1];
    int np = atoi(argv[2]);
    double secs = atof(argv[3]);
    if (argc == 5)
        nnames = atoi(argv[4]);
    if (np < 1 || secs <= 0 || nnames < 1 || nnames > MAX_NAMES)
        return usage(use);
    char sub[600];
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        fail("mkdir %s: %s", dir, strerror(errno));
    for (int s = 0; s < 2; s++) {
        snprintf(sub, sizeof sub, "%s/%c", dir, 'A' + s);
        if (mkdir(sub, 0755) != 0 && errno != EEXIST)
            fail("mkdir %s: %s", sub, strerror(errno));
    }
    if (nnames > 100) { /* big directories: start with half the names present */
        for (int s = 0; s < 2; s++)
            for (int k = 0; k < nnames; k += 2) {
                snprintf(sub, sizeof sub, "%s/%c/f%04d", dir, 'A' + s, k);
                xclose(xopen(sub, O_CREAT | O_WRONLY), sub);
            }
        say("dirstorm: created every other one of %d names in A and B first", nnames);
    }
    say("dirstorm: %d workers and 2 readers for %.0f s over %d file and %d directory names", np,
        secs, nnames, NDIRS);
    double until = now() + secs;
    for (int i = 0; i < np; i++)
        if (xfork() == 0)
            storm_worker(dir, until, i);
    for (int i = 0; i < 2; i++)
        if (xfork() == 0)
            storm_reader(dir, until);
    int bad = wait_all();
    storm_final_check(dir, "after the storm (cached)");
    drop_caches();
    storm_final_check(dir, "after the storm (after drop_caches)");
    if (bad)
        fail("dirstorm: %d of %d processes failed (see above)", bad, np + 2);
    return 0;
}

/* ---------------------------------------------------------------- append */

#define RECLEN 61

static int append(int argc, char **argv)
{
    const char *use = "append FILE NPROC NREC";
    if (argc != 4)
        return usage(use);
    const char *path = argv[1];
    int np = atoi(argv[2]), nr = atoi(argv[3]);
    if (np < 1 || np > 999 || nr < 1 || nr > 9999999) /* the record format's widths */
        return usage(use);
    xclose(xopen(path, O_CREAT | O_TRUNC | O_WRONLY), path);
    for (int p = 0; p < np; p++) {
        if (xfork() != 0)
            continue;
        int fd = xopen(path, O_WRONLY | O_APPEND);
        rng_state ^= (uint64_t)p * 7919 + 3;
        for (int r = 0; r < nr; r++) {
            char rec[96];
            if (snprintf(rec, sizeof rec, "P%03d R%07d %-46s\n", p, r,
                         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx") != RECLEN)
                fail("append: record P%03d R%07d is not %d bytes long", p, r, RECLEN);
            ssize_t w = write(fd, rec, RECLEN);
            if (w != RECLEN)
                fail("append: write of record P%03d R%07d returned %zd, expected %d: %s", p, r, w,
                     RECLEN, w < 0 ? strerror(errno) : "short write");
            if (rnd_below(50) == 0)
                xfsync(fd, path);
            if (rnd_below(200) == 0) {
                xclose(fd, path);
                fd = xopen(path, O_WRONLY | O_APPEND);
            }
        }
        xclose(fd, path);
        exit(0);
    }
    int bad = wait_all();
    if (bad)
        fail("append: %d of %d writers failed (see above)", bad, np);
    long want = (long)np * nr * RECLEN;
    char *buf = xmalloc((size_t)want + 1);
    int *next = xmalloc(sizeof(int) * (size_t)np);
    for (int pass = 0; pass < 2; pass++) {
        const char *when = pass ? "after drop_caches" : "cached";
        if (pass)
            drop_caches();
        int fd = xopen(path, O_RDONLY);
        off_t size = file_size(fd, path);
        if (size != want)
            fail("append (%s): size %lld, expected %ld (%d x %d records of %d bytes)", when,
                 (long long)size, want, np, nr, RECLEN);
        size_t got = read_all(fd, (unsigned char *)buf, (size_t)want + 1, 0, path);
        close(fd);
        if ((long)got != want)
            fail("append (%s): read %zu bytes, expected %ld", when, got, want);
        memset(next, 0, sizeof(int) * (size_t)np);
        for (long off = 0; off < want; off += RECLEN) {
            int p, r;
            if (sscanf(buf + off, "P%d R%d", &p, &r) != 2 || p < 0 || p >= np ||
                buf[off + RECLEN - 1] != '\n')
                fail("append (%s): record at offset %ld is garbage: \"%.20s\"", when, off,
                     buf + off);
            if (r != next[p])
                fail("append (%s): record at offset %ld is P%03d R%07d, expected R%07d of P%03d",
                     when, off, p, r, next[p], p);
            next[p]++;
        }
    }
    free(next);
    free(buf);
    say("append: %d x %d records intact, in order, cached and after drop_caches", np, nr);
    return 0;
}

/* ------------------------------------------------------------------ mmap */

static void rnd_fill(unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(rnd() >> 32);
}

static void mmap_verify(const char *path, const unsigned char *model, size_t size,
                        const char *when)
{
    int fd = xopen(path, O_RDONLY);
    off_t fsize = file_size(fd, path);
    if ((size_t)fsize != size)
        fail("mmap (%s): size %lld, expected %zu", when, (long long)fsize, size);
    unsigned char *buf = xmalloc(size + 4096);
    size_t got = read_all(fd, buf, size + 4096, 0, path);
    close(fd);
    if (got != size)
        fail("mmap (%s): read %zu bytes, expected %zu", when, got, size);
    for (size_t i = 0; i < size; i++)
        if (buf[i] != model[i])
            fail("mmap (%s): byte at offset %zu is 0x%02x, expected 0x%02x", when, i, buf[i],
                 model[i]);
    free(buf);
}

static int mmapmode(int argc, char **argv)
{
    const char *use = "mmap FILE SIZE ITERS SEED";
    enum { MAXW = 20000 };
    if (argc != 5)
        return usage(use);
    const char *path = argv[1];
    size_t size = strtoul(argv[2], NULL, 0);
    int iters = atoi(argv[3]);
    unsigned long long seed = strtoull(argv[4], NULL, 0);
    if (size < 65536 || iters < 1)
        return usage(use);
    rng_state = seed | 1;
    unsigned char *model = calloc(1, size);
    unsigned char tmp[MAXW + 1];
    if (!model)
        fail("out of memory");
    int fd = xopen(path, O_CREAT | O_TRUNC | O_RDWR);
    if (ftruncate(fd, (off_t)size) != 0)
        fail("mmap: ftruncate %s to %zu: %s", path, size, strerror(errno));
    for (int it = 0; it < iters; it++) {
        unsigned char *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
            fail("mmap %s: %s", path, strerror(errno));
        int nw = 1 + (int)rnd_below(40);
        for (int k = 0; k < nw; k++) {
            size_t len = 1 + rnd_below(rnd_below(2) ? 64 : MAXW);
            size_t off = rnd_below(size - len);
            rnd_fill(tmp, len);
            if (rnd_below(10) < 7) {
                memcpy(m + off, tmp, len);
            } else {
                ssize_t w = pwrite(fd, tmp, len, (off_t)off);
                if (w != (ssize_t)len)
                    fail("mmap: pwrite(off=%zu len=%zu) returned %zd: %s", off, len, w,
                         w < 0 ? strerror(errno) : "short write");
            }
            memcpy(model + off, tmp, len);
            if (rnd_below(8) == 0 && msync(m, size, rnd_below(2) ? MS_SYNC : MS_ASYNC) != 0)
                fail("msync: %s", strerror(errno));
            if (memcmp(m + off, tmp, len) != 0)
                fail("mmap: the mapping does not show the %zu bytes just written at offset %zu",
                     len, off);
        }
        if (msync(m, size, MS_SYNC) != 0)
            fail("msync: %s", strerror(errno));
        munmap(m, size);
        if (it % 5 == 4) {
            xfsync(fd, path);
            drop_caches();
            mmap_verify(path, model, size, "after msync and drop_caches");
        }
    }
    xclose(fd, path);
    drop_caches();
    mmap_verify(path, model, size, "final, after drop_caches");
    free(model);
    say("mmap: %d iterations over %zu bytes ok (seed %llu)", iters, size, seed);
    return 0;
}

/* ---------------------------------------------------------------- sparse */

struct tag {
    int id;
    long long off;
    int len;
    char text[48];
};

/* The expected byte at o: inside a tag its text, else 0 (a hole). */
static char sparse_expect(const struct tag *t, int n, long long o)
{
    for (int j = 0; j < n; j++)
        if (o >= t[j].off && o < t[j].off + t[j].len)
            return t[j].text[o - t[j].off];
    return 0;
}

static int sparse_reopen(int fd, const char *path)
{
    xfsync(fd, path);
    xclose(fd, path);
    drop_caches();
    return xopen(path, O_RDWR);
}

static int sparse(int argc, char **argv)
{
    if (argc != 2)
        return usage("sparse FILE");
    const char *path = argv[1];
    static const long long offsets[] = {0,         4095,          65536 + 17,     GIB,
                                        5 * GIB + 123, TIB - 7, 3 * TIB + 4096};
    enum { NOFF = sizeof offsets / sizeof offsets[0] };
    struct tag t[NOFF];
    int n = 0;
    int fd = xopen(path, O_CREAT | O_TRUNC | O_RDWR);
    for (int i = 0; i < NOFF; i++) {
        struct tag *g = &t[n];
        g->id = i;
        g->off = offsets[i];
        g->len = snprintf(g->text, sizeof g->text, "<tag %d @%lld>", i, offsets[i]);
        ssize_t w = pwrite(fd, g->text, (size_t)g->len, g->off);
        if (w < 0 && errno == EFBIG && g->off >= GIB) {
            /* The server (its FSINFO maxfilesize, or NFS3ERR_FBIG) caps the file size. */
            say("sparse: SKIP offset %lld: EFBIG (the server caps the file size below it)",
                g->off);
            continue;
        }
        if (w != g->len)
            fail("sparse: pwrite of %d bytes at offset %lld returned %zd: %s", g->len, g->off, w,
                 w < 0 ? strerror(errno) : "short write");
        n++;
    }
    long long end = t[n - 1].off + t[n - 1].len;
    /* A hole far from any data: the middle of the widest gap between tags. */
    long long hole = 0, hole_len = 0, widest = 0;
    for (int j = 1; j < n; j++) {
        long long lo = t[j - 1].off + t[j - 1].len, hi = t[j].off;
        if (hi - lo > widest) {
            widest = hi - lo;
            hole = ((lo + hi) / 2) & ~4095LL;
            if (hole < lo)
                hole = lo;
            hole_len = hi - hole < 65536 ? hi - hole : 65536;
        }
    }
    static char buf[8192 + 64], hb[65536];
    for (int pass = 0; pass < 2; pass++) {
        const char *when = pass ? "after drop_caches" : "cached";
        if (pass)
            fd = sparse_reopen(fd, path);
        off_t size = file_size(fd, path);
        if (size != end)
            fail("sparse (%s): size %lld, expected %lld (the end of the last tag)", when,
                 (long long)size, end);
        for (int i = 0; i < n; i++) {
            /* 4 KiB before the tag to 4 KiB after (or EOF) */
            long long lo = t[i].off > 4096 ? t[i].off - 4096 : 0;
            long long want = end - lo < (long long)sizeof buf ? end - lo : (long long)sizeof buf;
            ssize_t got = pread(fd, buf, sizeof buf, lo);
            if (got != want)
                fail("sparse (%s): pread(off=%lld len=%zu) returned %zd, expected %lld%s%s", when,
                     lo, sizeof buf, got, want, got < 0 ? ": " : "", got < 0 ? strerror(errno) : "");
            for (long long k = 0; k < got; k++) {
                char expect = sparse_expect(t, n, lo + k);
                if (buf[k] != expect)
                    fail("sparse (%s): byte at offset %lld is 0x%02x, expected 0x%02x (%s)", when,
                         lo + k, (unsigned char)buf[k], (unsigned char)expect,
                         expect ? "tag text" : "hole");
            }
        }
        ssize_t got = pread(fd, hb, (size_t)hole_len, hole);
        if (got != hole_len)
            fail("sparse (%s): hole read pread(off=%lld len=%lld) returned %zd", when, hole,
                 hole_len, got);
        for (long long k = 0; k < hole_len; k++)
            if (hb[k])
                fail("sparse (%s): hole byte at offset %lld is 0x%02x, expected 0", when,
                     hole + k, (unsigned char)hb[k]);
        got = pread(fd, hb, 100, end);
        if (got != 0)
            fail("sparse (%s): pread at EOF (%lld) returned %zd, expected 0", when, end, got);
    }
    /* Shrink into the middle of a tag, grow again: the cut part must read as zeros. */
    int k = n >= 5 ? 3 : n - 2;
    long long cut = t[k].off + 5, grow = t[k + 1].off;
    if (ftruncate(fd, cut) != 0)
        fail("sparse: ftruncate to %lld: %s", cut, strerror(errno));
    if (ftruncate(fd, grow) != 0)
        fail("sparse: ftruncate to %lld: %s", grow, strerror(errno));
    for (int pass = 0; pass < 2; pass++) {
        const char *when = pass ? "after drop_caches" : "cached";
        if (pass)
            fd = sparse_reopen(fd, path);
        ssize_t got = pread(fd, buf, 40, t[k].off);
        if (got != 40)
            fail("sparse: after shrink to %lld and grow to %lld (%s): pread of 40 bytes at %lld "
                 "returned %zd",
                 cut, grow, when, t[k].off, got);
        for (int b = 0; b < 40; b++) {
            char want = b < 5 ? t[k].text[b] : 0;
            if (buf[b] != want)
                fail("sparse: after shrink to %lld and grow to %lld (%s): byte at offset %lld is "
                     "0x%02x, expected 0x%02x",
                     cut, grow, when, t[k].off + b, (unsigned char)buf[b], (unsigned char)want);
        }
        off_t size = file_size(fd, path);
        if (size != grow)
            fail("sparse: after shrink to %lld and grow to %lld (%s): size %lld", cut, grow, when,
                 (long long)size);
    }
    xclose(fd, path);
    say("sparse: %d tags ok, %d offsets skipped (EFBIG), file end %lld, hole at %lld", n,
        NOFF - n, end, hole);
    return 0;
}

/* ------------------------------------------------------------- truncread */

/* Never 0, so a zero byte can only come from a hole or a racing truncate. */
static unsigned char pattern(long long off)
{
    return (unsigned char)(((off * 131 + (off >> 9) * 7 + 1) & 0xff) | 1);
}

static void truncread_writer(const char *path, double until, int result_fd)
{
    const long long maxs = 3 << 20;
    unsigned char *buf = xmalloc((size_t)maxs);
    for (long long i = 0; i < maxs; i++)
        buf[i] = pattern(i);
    int fd = xopen(path, O_RDWR);
    long long size = 0, n = 0;
    rng_state ^= 12345;
    while (now() < until) {
        int op = (int)rnd_below(10);
        if (op < 5) { /* extend with the pattern */
            long long ns = size + (long long)rnd_below((uint64_t)(maxs - size + 1));
            ssize_t w = pwrite(fd, buf + size, (size_t)(ns - size), size);
            if (w != ns - size)
                fail("truncread writer: pwrite(off=%lld len=%lld) returned %zd: %s", size,
                     ns - size, w, w < 0 ? strerror(errno) : "short write");
            size = ns;
        } else if (op < 9) { /* shrink */
            long long ns = (long long)rnd_below((uint64_t)size + 1);
            if (ftruncate(fd, ns) != 0)
                fail("truncread writer: ftruncate to %lld: %s", ns, strerror(errno));
            size = ns;
        } else {
            xfsync(fd, path);
        }
        n++;
    }
    xfsync(fd, path);
    xclose(fd, path);
    if (write(result_fd, &size, sizeof size) != sizeof size)
        fail("truncread writer: pipe write: %s", strerror(errno));
    say("truncread writer: %lld operations, final size %lld", n, size);
    exit(0);
}

static void truncread_reader(const char *path, double until, int r)
{
    const long long maxs = 3 << 20;
    const size_t bufsz = 1 << 20;
    int direct = r == 1;
    int flags = O_RDONLY | (direct ? O_DIRECT : 0);
    unsigned char *buf = aligned_alloc(4096, bufsz);
    long reads = 0, zeros = 0;
    if (!buf)
        fail("out of memory");
    rng_state ^= 777 * (uint64_t)(r + 1);
    int fd = xopen(path, flags);
    while (now() < until) {
        long long off = (long long)rnd_below((uint64_t)maxs);
        size_t len = 1 + rnd_below(bufsz);
        if (direct) {
            off &= ~4095LL;
            len = (len + 4095) & ~(size_t)4095;
            if (len > bufsz)
                len = bufsz;
        }
        ssize_t got = pread(fd, buf, len, off);
        if (got < 0)
            fail("truncread reader %d: pread(off=%lld len=%zu): %s", r, off, len, strerror(errno));
        int seen_zero = 0;
        for (ssize_t k = 0; k < got; k++) {
            if (buf[k] == 0) {
                seen_zero = 1;
                continue;
            }
            if (buf[k] != pattern(off + k))
                fail("truncread reader %d%s: byte at offset %lld is 0x%02x, expected 0 or the "
                     "pattern 0x%02x",
                     r, direct ? " (O_DIRECT)" : "", off + k, buf[k], pattern(off + k));
        }
        zeros += seen_zero;
        reads++;
        if (rnd_below(20) == 0) {
            close(fd);
            fd = xopen(path, flags);
        }
    }
    close(fd);
    say("truncread reader %d%s: %ld reads, %ld of them saw zeros (racing truncates)", r,
        direct ? " (O_DIRECT)" : "", reads, zeros);
    exit(0);
}

static int truncread(int argc, char **argv)
{
    const char *use = "truncread FILE SECS NREAD";
    if (argc != 4)
        return usage(use);
    const char *path = argv[1];
    double secs = atof(argv[2]);
    int nread = atoi(argv[3]);
    if (secs <= 0 || nread < 0)
        return usage(use);
    double until = now() + secs;
    xclose(xopen(path, O_CREAT | O_TRUNC | O_RDWR), path);
    int pipefd[2];
    if (pipe(pipefd) != 0)
        fail("pipe: %s", strerror(errno));
    if (xfork() == 0)
        truncread_writer(path, until, pipefd[1]);
    for (int r = 0; r < nread; r++)
        if (xfork() == 0)
            truncread_reader(path, until, r);
    int bad = wait_all();
    if (bad)
        fail("truncread: %d of %d processes failed (see above)", bad, nread + 1);
    long long size;
    if (read(pipefd[0], &size, sizeof size) != sizeof size)
        fail("truncread: no final size from the writer");
    unsigned char *buf = xmalloc((size_t)size + 4096);
    for (int pass = 0; pass < 2; pass++) {
        const char *when = pass ? "after drop_caches" : "cached";
        if (pass)
            drop_caches();
        int fd = xopen(path, O_RDONLY);
        off_t fsize = file_size(fd, path);
        if (fsize != size)
            fail("truncread (%s): final size %lld, the writer says %lld", when,
                 (long long)fsize, size);
        size_t got = read_all(fd, buf, (size_t)size + 4096, 0, path);
        close(fd);
        if ((long long)got != size)
            fail("truncread (%s): read %zu bytes, expected %lld", when, got, size);
        for (long long k = 0; k < size; k++)
            if (buf[k] != pattern(k))
                fail("truncread (%s): final byte at offset %lld is 0x%02x, expected 0x%02x", when,
                     k, buf[k], pattern(k));
    }
    free(buf);
    say("truncread: final %lld bytes ok, cached and after drop_caches", size);
    return 0;
}

/* --------------------------------------------------------------- stripes */

static int stripes(int argc, char **argv)
{
    const char *use = "stripes FILE NPROC ROUNDS";
    enum { W = 1000, NS = 600 }; /* stripe width (not a page divisor), stripes per process */
    if (argc != 4)
        return usage(use);
    const char *path = argv[1];
    int np = atoi(argv[2]), rounds = atoi(argv[3]);
    if (np < 1 || np > 50 || rounds < 0)
        return usage(use);
    long long total = (long long)W * np * NS;
    xclose(xopen(path, O_CREAT | O_TRUNC | O_RDWR), path);
    for (int p = 0; p < np; p++) {
        if (xfork() != 0)
            continue;
        int fd = xopen(path, O_RDWR);
        unsigned char b[W];
        rng_state ^= (uint64_t)(p + 1) * 1000003;
        for (int r = 0; r < rounds; r++) {
            int s = (int)rnd_below(NS);
            long long off = ((long long)s * np + p) * W;
            memset(b, p * 16 + (r & 15) + 1, W);
            ssize_t w = pwrite(fd, b, W, off);
            if (w != W)
                fail("stripes: pwrite(off=%lld len=%d) returned %zd: %s", off, W, w,
                     w < 0 ? strerror(errno) : "short write");
            if (rnd_below(100) == 0)
                xfsync(fd, path);
        }
        /* the final value: 200 + p in every stripe of this process */
        memset(b, 200 + p, W);
        for (int s = 0; s < NS; s++) {
            long long off = ((long long)s * np + p) * W;
            ssize_t w = pwrite(fd, b, W, off);
            if (w != W)
                fail("stripes: final pwrite(off=%lld len=%d) returned %zd: %s", off, W, w,
                     w < 0 ? strerror(errno) : "short write");
        }
        xclose(fd, path);
        exit(0);
    }
    int bad = wait_all();
    if (bad)
        fail("stripes: %d of %d writers failed (see above)", bad, np);
    unsigned char *buf = xmalloc((size_t)total + 1);
    for (int pass = 0; pass < 2; pass++) {
        const char *when = pass ? "after drop_caches" : "cached";
        if (pass)
            drop_caches();
        int fd = xopen(path, O_RDONLY);
        size_t got = read_all(fd, buf, (size_t)total + 1, 0, path);
        close(fd);
        if ((long long)got != total)
            fail("stripes (%s): read %zu bytes, expected %lld", when, got, total);
        for (long long k = 0; k < total; k++) {
            int p = (int)((k / W) % np);
            if (buf[k] != 200 + p)
                fail("stripes (%s): byte at offset %lld is %d, expected %d (writer %d's final "
                     "value)",
                     when, k, buf[k], 200 + p, p);
        }
    }
    free(buf);
    say("stripes: %d writers, %lld bytes ok, cached and after drop_caches", np, total);
    return 0;
}

/* ---------------------------------------------------------------- strict */

#define MUST(x, ...)                                                                               \
    do {                                                                                           \
        if ((x) != 0)                                                                              \
            fail(__VA_ARGS__);                                                                     \
    } while (0)

static void strict_worker(const char *dir, int p, int iters)
{
    char d[512], a[600], b[600], c[800], sd[600];
    snprintf(d, sizeof d, "%s/p%d", dir, p);
    MUST(mkdir(d, 0755), "strict: mkdir %s: %s", d, strerror(errno));
    for (int i = 0; i < iters; i++) {
        snprintf(a, sizeof a, "%s/a%d", d, i);
        snprintf(b, sizeof b, "%s/b%d", d, i);
        snprintf(c, sizeof c, "%s/c%d", d, i);
        snprintf(sd, sizeof sd, "%s/s%d", d, i);
        int fd = open(a, O_CREAT | O_EXCL | O_WRONLY, 0600);
        if (fd < 0)
            fail("strict: create (O_EXCL) %s: %s", a, strerror(errno));
        ssize_t w = write(fd, a, strlen(a));
        if (w != (ssize_t)strlen(a))
            fail("strict: write %s returned %zd: %s", a, w, w < 0 ? strerror(errno) : "short");
        MUST(close(fd), "strict: close %s: %s", a, strerror(errno));
        MUST(rename(a, b), "strict: rename %s %s: %s", a, b, strerror(errno));
        MUST(link(b, c), "strict: link %s %s: %s", b, c, strerror(errno));
        MUST(unlink(b), "strict: unlink %s: %s", b, strerror(errno));
        MUST(mkdir(sd, 0700), "strict: mkdir %s: %s", sd, strerror(errno));
        MUST(symlink("target", a), "strict: symlink %s: %s", a, strerror(errno));
        MUST(rmdir(sd), "strict: rmdir %s: %s", sd, strerror(errno));
        MUST(unlink(a), "strict: unlink (symlink) %s: %s", a, strerror(errno));
        if (i % 3 == 0) {
            MUST(unlink(c), "strict: unlink %s: %s", c, strerror(errno));
        } else if (i % 3 == 1) {
            MUST(chmod(c, 0640), "strict: chmod %s: %s", c, strerror(errno));
            MUST(truncate(c, 100000), "strict: truncate %s: %s", c, strerror(errno));
        }
    }
    /* Expected: c<i> for every i % 3 != 0 (100000 bytes if i % 3 == 1, else the
     * path of a<i>, its contents), nothing else. */
    DIR *dd = opendir(d);
    if (!dd)
        fail("strict: opendir %s: %s", d, strerror(errno));
    struct dirent *de;
    int n = 0, want_n = 0;
    while ((de = readdir(dd))) {
        int k;
        struct stat st;
        if (de->d_name[0] == '.')
            continue;
        if (sscanf(de->d_name, "c%d", &k) != 1 || k % 3 == 0 || k >= iters)
            fail("strict: %s lists %s, expected only c<i> for i %% 3 != 0", d, de->d_name);
        snprintf(c, sizeof c, "%s/%s", d, de->d_name);
        MUST(lstat(c, &st), "strict: lstat %s: %s", c, strerror(errno));
        if (st.st_nlink != 1)
            fail("strict: %s has nlink %lu, expected 1", c, (unsigned long)st.st_nlink);
        off_t want = k % 3 == 1 ? 100000 : snprintf(a, sizeof a, "%s/a%d", d, k);
        if (st.st_size != want)
            fail("strict: %s has size %lld, expected %lld", c, (long long)st.st_size,
                 (long long)want);
        n++;
    }
    closedir(dd);
    for (int i = 0; i < iters; i++)
        want_n += i % 3 != 0;
    if (n != want_n)
        fail("strict: %s lists %d entries, expected %d", d, n, want_n);
    exit(0);
}

static int strict(int argc, char **argv)
{
    const char *use = "strict DIR NPROC ITERS";
    if (argc != 4)
        return usage(use);
    const char *dir = argv[1];
    int np = atoi(argv[2]), iters = atoi(argv[3]);
    if (np < 1 || iters < 1)
        return usage(use);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        fail("strict: mkdir %s: %s", dir, strerror(errno));
    for (int p = 0; p < np; p++)
        if (xfork() == 0)
            strict_worker(dir, p, iters);
    int bad = wait_all();
    if (bad)
        fail("strict: %d of %d processes failed (see above)", bad, np);
    say("strict: %d x %d sequences ok, every call succeeded", np, iters);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr,
                "usage: stress dirstorm DIR NPROC SECS [NAMES]\n"
                "       stress append FILE NPROC NREC\n"
                "       stress mmap FILE SIZE ITERS SEED\n"
                "       stress sparse FILE\n"
                "       stress truncread FILE SECS NREAD\n"
                "       stress stripes FILE NPROC ROUNDS\n"
                "       stress strict DIR NPROC ITERS\n");
        return 2;
    }
    const char *mode = argv[1];
    if (!strcmp(mode, "dirstorm"))
        return dirstorm(argc - 1, argv + 1);
    if (!strcmp(mode, "append"))
        return append(argc - 1, argv + 1);
    if (!strcmp(mode, "mmap"))
        return mmapmode(argc - 1, argv + 1);
    if (!strcmp(mode, "sparse"))
        return sparse(argc - 1, argv + 1);
    if (!strcmp(mode, "truncread"))
        return truncread(argc - 1, argv + 1);
    if (!strcmp(mode, "stripes"))
        return stripes(argc - 1, argv + 1);
    if (!strcmp(mode, "strict"))
        return strict(argc - 1, argv + 1);
    fprintf(stderr, "stress: unknown mode %s\n", mode);
    return 2;
}
