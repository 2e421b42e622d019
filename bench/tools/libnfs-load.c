/*
 * libnfs-load: closed-loop NFSv3 calls through libnfs's asynchronous raw API,
 * DEPTH calls in flight on one connection, driven by one thread (libnfs 4 has
 * no threads; its concurrency is calls in flight). The counterpart of
 * `rnfs bench client`, for bench/client-vs-libnfs.sh.
 *
 * Build: gcc -O2 -Wall -o libnfs-load libnfs-load.c -lnfs
 * Usage: libnfs-load -o null|getattr|read|write [-s SIZE] [-d DEPTH]
 *                    [-t SECONDS] [-w WARMUP] nfs://HOST/EXPORT/FILE?nfsport=P&mountport=M
 * FILE must exist (READ/WRITE go to random SIZE-aligned offsets below its size).
 * Prints one line: op=... depth=... calls_per_sec=... p50_us=... p99_us=...
 * max_us=... cpu_us_per_call=...
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>

/* libnfs 4 hands out `struct nfs_fh *` (nfs_get_fh) but keeps its layout in a
 * private header; this is that layout (libnfs-private.h, unchanged since 1.x). */
struct nfs_fh {
    int len;
    char *val;
};

enum op { OP_NULL, OP_GETATTR, OP_READ, OP_WRITE };

struct slot {
    struct state *st;
    uint64_t started_ns;
};

struct state {
    struct rpc_context *rpc;
    struct nfs_fh3 fh;
    enum op op;
    uint32_t size;
    uint64_t blocks;
    char *buf;
    uint64_t rng;
    int measuring, stopping, in_flight, failed;
    uint64_t *samples;
    size_t nsamples, cap;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double cpu_seconds(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

static uint64_t next_rand(struct state *st)
{
    st->rng ^= st->rng >> 12;
    st->rng ^= st->rng << 25;
    st->rng ^= st->rng >> 27;
    return st->rng * 0x2545f4914f6cdd1dULL;
}

static void issue(struct slot *s);

static void done(struct rpc_context *rpc, int status, void *data, void *private_data)
{
    struct slot *s = private_data;
    struct state *st = s->st;
    (void)rpc;
    st->in_flight--;
    int ok = status == RPC_STATUS_SUCCESS;
    if (ok && st->op != OP_NULL) {
        /* Every NFSv3 result starts with its nfsstat3. */
        ok = *(nfsstat3 *)data == NFS3_OK;
    }
    if (!ok) {
        fprintf(stderr, "libnfs-load: call failed: %s\n",
                status == RPC_STATUS_SUCCESS ? "NFS error" : rpc_get_error(st->rpc));
        st->failed = 1;
        return;
    }
    if (st->measuring) {
        if (st->nsamples == st->cap) {
            st->cap = st->cap ? st->cap * 2 : 1 << 20;
            st->samples = realloc(st->samples, st->cap * sizeof *st->samples);
            if (!st->samples) { perror("realloc"); exit(1); }
        }
        st->samples[st->nsamples++] = now_ns() - s->started_ns;
    }
    if (!st->stopping)
        issue(s);
}

static void issue(struct slot *s)
{
    struct state *st = s->st;
    uint64_t off = (next_rand(st) % st->blocks) * st->size;
    int rc = -1;
    s->started_ns = now_ns();
    switch (st->op) {
    case OP_NULL:
        rc = rpc_nfs3_null_async(st->rpc, done, s);
        break;
    case OP_GETATTR: {
        GETATTR3args a = { .object = st->fh };
        rc = rpc_nfs3_getattr_async(st->rpc, done, &a, s);
        break;
    }
    case OP_READ: {
        READ3args a = { .file = st->fh, .offset = off, .count = st->size };
        rc = rpc_nfs3_read_async(st->rpc, done, &a, s);
        break;
    }
    case OP_WRITE: {
        WRITE3args a = { .file = st->fh, .offset = off, .count = st->size, .stable = UNSTABLE };
        a.data.data_len = st->size;
        a.data.data_val = st->buf;
        rc = rpc_nfs3_write_async(st->rpc, done, &a, s);
        break;
    }
    }
    if (rc != 0) {
        fprintf(stderr, "libnfs-load: cannot send: %s\n", rpc_get_error(st->rpc));
        st->failed = 1;
        return;
    }
    st->in_flight++;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void service_until(struct state *st, uint64_t deadline_ns)
{
    while (!st->failed && (deadline_ns ? now_ns() < deadline_ns : st->in_flight > 0)) {
        struct pollfd pfd = { .fd = rpc_get_fd(st->rpc), .events = rpc_which_events(st->rpc) };
        if (poll(&pfd, 1, 100) < 0) { perror("poll"); exit(1); }
        if (rpc_service(st->rpc, pfd.revents) < 0) {
            fprintf(stderr, "libnfs-load: %s\n", rpc_get_error(st->rpc));
            exit(1);
        }
    }
}

int main(int argc, char **argv)
{
    struct state st = { .op = OP_GETATTR, .size = 4096, .rng = 0x9e3779b97f4a7c15ULL };
    int depth = 1, opt;
    double seconds = 5, warmup = 1;
    const char *opname = "getattr";
    while ((opt = getopt(argc, argv, "o:s:d:t:w:")) != -1) {
        switch (opt) {
        case 'o':
            opname = optarg;
            if (!strcmp(optarg, "null")) st.op = OP_NULL;
            else if (!strcmp(optarg, "getattr")) st.op = OP_GETATTR;
            else if (!strcmp(optarg, "read")) st.op = OP_READ;
            else if (!strcmp(optarg, "write")) st.op = OP_WRITE;
            else { fprintf(stderr, "libnfs-load: unknown op %s\n", optarg); return 2; }
            break;
        case 's': st.size = (uint32_t)strtoul(optarg, NULL, 0); break;
        case 'd': depth = atoi(optarg); break;
        case 't': seconds = atof(optarg); break;
        case 'w': warmup = atof(optarg); break;
        default: return 2;
        }
    }
    if (optind + 1 != argc || depth < 1 || st.size == 0) {
        fprintf(stderr, "usage: libnfs-load -o null|getattr|read|write [-s SIZE] [-d DEPTH] [-t S] [-w S] nfs://HOST/EXPORT/FILE?...\n");
        return 2;
    }
    struct nfs_context *nfs = nfs_init_context();
    struct nfs_url *url = nfs ? nfs_parse_url_full(nfs, argv[optind]) : NULL;
    if (!url) { fprintf(stderr, "libnfs-load: %s\n", nfs ? nfs_get_error(nfs) : "no memory"); return 1; }
    if (nfs_mount(nfs, url->server, url->path) != 0) {
        fprintf(stderr, "libnfs-load: mount %s:%s: %s\n", url->server, url->path, nfs_get_error(nfs));
        return 1;
    }
    struct nfsfh *file;
    if (nfs_open(nfs, url->file, O_RDWR, &file) != 0) {
        fprintf(stderr, "libnfs-load: open %s: %s\n", url->file, nfs_get_error(nfs));
        return 1;
    }
    struct nfs_stat_64 sb;
    if (nfs_fstat64(nfs, file, &sb) != 0) { fprintf(stderr, "libnfs-load: fstat: %s\n", nfs_get_error(nfs)); return 1; }
    struct nfs_fh *fh = nfs_get_fh(file);
    st.fh.data.data_len = fh->len;
    st.fh.data.data_val = fh->val;
    st.rpc = nfs_get_rpc_context(nfs);
    st.blocks = sb.nfs_size / st.size ? sb.nfs_size / st.size : 1;
    st.buf = calloc(1, st.size);
    struct slot *slots = calloc((size_t)depth, sizeof *slots);
    if (!st.buf || !slots) { perror("calloc"); return 1; }
    for (int i = 0; i < depth; i++) {
        slots[i].st = &st;
        issue(&slots[i]);
    }
    service_until(&st, now_ns() + (uint64_t)(warmup * 1e9));
    double cpu0 = cpu_seconds();
    uint64_t t0 = now_ns();
    st.measuring = 1;
    service_until(&st, t0 + (uint64_t)(seconds * 1e9));
    st.measuring = 0;
    double elapsed = (now_ns() - t0) / 1e9, cpu = cpu_seconds() - cpu0;
    st.stopping = 1;
    service_until(&st, 0);
    if (st.failed || st.nsamples == 0) return 1;
    qsort(st.samples, st.nsamples, sizeof *st.samples, cmp_u64);
    printf("op=%s depth=%d calls_per_sec=%.0f p50_us=%.1f p99_us=%.1f max_us=%.1f cpu_us_per_call=%.2f\n",
           opname, depth, st.nsamples / elapsed,
           st.samples[st.nsamples / 2] / 1e3, st.samples[st.nsamples * 99 / 100] / 1e3,
           st.samples[st.nsamples - 1] / 1e3, cpu * 1e6 / st.nsamples);
    nfs_close(nfs, file);
    nfs_destroy_url(url);
    nfs_destroy_context(nfs);
    return 0;
}
